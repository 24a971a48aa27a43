"""Where tensors are made: does the project change torch's default device?

A factory called without ``device=`` (``torch.zeros(n)``, ``torch.randint(0, 9, (4,))``,
``torch.randperm(n)``, ``torch.tensor([...])``) builds its tensor on the default
device, which is the CPU unless the program sets another one with
``torch.set_default_device(...)`` (or the older ``torch.set_default_tensor_type``)
or enters ``with torch.device(...):``. Reading such a CPU tensor waits for no
device.

The program is what fixitem is given: the files of one run. When any of them
sets a default device, no factory is taken for a CPU one, in any file of the run; a
device written out as ``"cpu"`` or ``"meta"`` (``with torch.device("meta"):``, which
builds a model without memory) sets none that a read waits for.
The limit: code outside the files analysed (an entry script left out of the
run, a library, ``PYTORCH_DEFAULT_DEVICE``-style launch wrappers) may set it
too; a run on one file sees only that file (and what the file itself does).
"""

from __future__ import annotations

import re
from contextlib import AbstractContextManager

from .run_flags import RunFlag

# ``torch.set_default_device("cuda")``, ``set_default_tensor_type(torch.cuda.FloatTensor)``,
# ``with torch.device("cuda"):`` (not ``with torch.cuda.device(0):``, which picks the current
# CUDA device and leaves the default device alone).
_SETS_DEFAULT = re.compile(r"\bset_default_device\b|\bset_default_tensor_type\b|\bwith\s+(?:torch\s*\.\s*)?device\s*\(")
# The same, found faster: the calls by their names (``str.find``), ``with ... device(`` by a
# pattern that starts with a literal; each is then checked against the pattern above.
_CALLS = ("set_default_device", "set_default_tensor_type")
_WITH_DEVICE = re.compile(r"with\s+(?:torch\s*\.\s*)?device\s*\(")
# What the bytes of every text that matches hold (a byte past ASCII may be part of a space of
# Unicode's, which ``\s`` matches in a text): a file without it need not be decoded.
# (Two searches that each start with a literal, which the engine jumps between.)
_MAY_WITH_DEVICE = re.compile(rb"with[\s\x80-\xff]+(?:torch[\s\x80-\xff]*\.[\s\x80-\xff]*)?device")

# What follows a match when the device it sets is written out and is no accelerator's: the
# CPU, or ``meta`` (a tensor without data: reading it raises, it never waits for a device).
# ``with torch.device("meta"):`` is how models are built without memory; it set nothing
# that makes a factory's tensor wait for a device.
_HOST_DEVICE = re.compile(r"""\s*\(?\s*(['"])(?:cpu|meta)\1\s*\)""")
# The legacy tensor types of the CPU (``torch.cuda.LongTensor`` and the like are a device's).
HOST_TENSOR_TYPE_NAMES = ("Float", "Double", "Half", "BFloat16", "Long", "Int", "Short", "Char", "Byte", "Bool")
HOST_TENSOR_TYPES = frozenset(f"torch.{name}Tensor" for name in HOST_TENSOR_TYPE_NAMES)
_HOST_TENSOR_TYPE = re.compile(
    r"""\s*\(\s*(['"]?)torch\.(?:""" + "|".join(HOST_TENSOR_TYPE_NAMES) + r""")Tensor\1\s*\)"""
)

_project_sets_default = RunFlag()


def may_set_default_device(data: bytes) -> bool:
    """Could the source whose UTF-8 bytes are ``data`` set torch's default device? False
    only where :func:`sets_default_device` of its text says no."""
    return b"set_default_" in data or _MAY_WITH_DEVICE.search(data) is not None


def sets_default_device(text: str) -> bool:
    """Does this source text (possibly) set torch's default device? A textual test: a
    mention in a comment is left out (``# torch.set_default_tensor_type(ttype)``), one in a
    string counts, which only makes fixitem more careful."""
    starts = [m.start() for m in _WITH_DEVICE.finditer(text)]
    for name in _CALLS:
        at = text.find(name)
        while at >= 0:
            starts.append(at)
            at = text.find(name, at + 1)
    for start in sorted(starts):
        found = _SETS_DEFAULT.match(text, start)
        if found is None:
            continue  # not at a word's start (``my_set_default_device``), or not the whole pattern
        if _HOST_DEVICE.match(text, found.end()) or _HOST_TENSOR_TYPE.match(text, found.end()):
            continue  # ``with torch.device("meta"):``, ``set_default_tensor_type(torch.DoubleTensor)``
        line_start = text.rfind("\n", 0, start) + 1
        if "#" not in text[line_start:start]:
            return True
    return False


def project_sets_default_device() -> bool:
    """Does a file of the run being analysed set the default device?"""
    return _project_sets_default.value


def project(sets_default: bool) -> AbstractContextManager[None]:
    """Analyse files of a run in which a file sets the default device (or none does)."""
    return _project_sets_default.set(sets_default)
