"""Does the program put an object of its own in place of ``sys.stdout`` / ``sys.stderr``?

Research training scripts often tee their output into a log file
(``sys.stdout = Logger(path)``, a class whose ``write`` writes to the file and to
the console). A deferred print is replayed later, through whatever stream is in
place then, while the program's other prints go to the file at once: the file
gets the text in another order (the runtime keeps the order of the stream it
found, not of an object put in its place). When a file of the run puts an
object it makes in place of one of the two streams, deferring a print in that
file's folder, or below it, or in a package of the run it imports, is unsafe: the
program it starts is taken to be that code (a folder of separate examples is not
one program; ``tools/train.py`` and the ``mmdet/`` it imports are).
"""

from __future__ import annotations

import re
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING

from .run_flags import RunFlag

if TYPE_CHECKING:
    from .context import FileContext

# ``sys.stdout = Logger(...)`` at a statement's start: an object of the program's own put in
# place of the stream (a tee), or a log file (``open("log.txt", "w")``: a line replayed after
# the stream is put back would miss the file). Not a name put back (``sys.stdout = self.old``),
# the null device (``open(os.devnull, "w")``, where there is no stream or output is silenced:
# what it gets is lost either way) or a buffer that captures (``io.StringIO()``).
_ASSIGNS = re.compile(
    r"^[ \t]*sys[ \t]*\.[ \t]*(?:stdout|stderr)[ \t]*=[ \t]*"
    r"(?!open[ \t]*\([ \t]*os[ \t]*\.[ \t]*devnull\b|io\.StringIO\b|StringIO\b)"
    r"[A-Za-z_][\w.]*[ \t]*\(",
    re.MULTILINE,
)

# ``sys.stdout = redirect_logger`` of ``redirect_logger = StreamToLoguru(...)`` (YOLOX): the object
# made first, then put in place, through a name. Not a name that saved the stream to put it back.
_ASSIGNS_NAME = re.compile(r"^[ \t]*sys[ \t]*\.[ \t]*(?:stdout|stderr)[ \t]*=[ \t]*([A-Za-z_]\w*)[ \t]*(?:#.*)?$",
                           re.MULTILINE)
_MADE = r"^[ \t]*{name}[ \t]*=[ \t]*(?!open[ \t]*\([ \t]*os[ \t]*\.[ \t]*devnull\b|io\.StringIO\b|StringIO\b)[A-Za-z_][\w.]*[ \t]*\("

# What every match of ``_ASSIGNS`` holds, found by a pattern that starts with a literal (far
# faster over a whole file than one anchored at each line's start).
_ASSIGNS_HINT = re.compile(r"sys[ \t]*\.[ \t]*std(?:out|err)[ \t]*=")
_ASSIGNS_HINT_BYTES = re.compile(_ASSIGNS_HINT.pattern.encode())

_program_replaces = RunFlag()

# ``with redirect_stdout(buffer):``: another stream for a block, put back after it.
_REDIRECTS = re.compile(r"\bredirect_std(?:out|err)[ \t]*\(")


# ``os.write(1, ...)``, ``sys.stdout.buffer.write(...)``: output past ``sys.stdout`` itself.
_DIRECT_WRITES = re.compile(
    r"\bos[ \t]*\.[ \t]*write[ \t]*\([ \t]*(?:[12]\b|sys[ \t]*\.[ \t]*std(?:out|err)[ \t]*\.[ \t]*fileno\b)"
    r"|\bsys[ \t]*\.[ \t]*std(?:out|err)[ \t]*\.[ \t]*buffer[ \t]*\.[ \t]*write\b"
)


def writes_streams_directly(text: str) -> bool:
    """Does this source text write to the output's file descriptor or buffer itself
    (``os.write(1, ...)``, ``sys.stdout.buffer.write(...)``), which the runtime does not keep in
    order with the lines it replays? Textual, as :func:`replaces_streams`."""
    # Every match spells ``write``: a substring test first spares most files the regex.
    return "write" in text and _DIRECT_WRITES.search(text) is not None


def redirects_streams(text: str) -> bool:
    """Does this source text put another stream in place of ``sys.stdout`` or ``sys.stderr``
    for a block (``contextlib.redirect_stdout``)? Textual, as :func:`replaces_streams`."""
    return "redirect_std" in text and _REDIRECTS.search(text) is not None


def may_replace_streams(data: bytes) -> bool:
    """Could the source whose UTF-8 bytes are ``data`` replace an output stream? False only
    where :func:`replaces_streams` of its text says no."""
    return _ASSIGNS_HINT_BYTES.search(data) is not None


def replaces_streams(text: str) -> bool:
    """Does this source text put an object it makes in place of ``sys.stdout`` or
    ``sys.stderr``? (A textual test: an assignment in a string counts too, which only
    makes fixitem more careful.)"""
    if _ASSIGNS_HINT.search(text) is None:
        return False
    if _ASSIGNS.search(text) is not None:
        return True
    return any(re.search(_MADE.format(name=re.escape(name)), text, re.MULTILINE)
               for name in set(_ASSIGNS_NAME.findall(text)))


def program_replaces_streams() -> bool:
    """Does a file of the run being analysed put a tee in place of this file's output streams?"""
    return _program_replaces.value


def program(replaces: bool) -> AbstractContextManager[None]:
    """Analyse files of a run in which a file replaces the output streams (or none does)."""
    return _program_replaces.set(replaces)


def imports_replacing_streams(ctx: FileContext) -> bool:
    """Does a module of the project the file of ``ctx`` imports (two imports deep) put an
    object of its own in place of ``sys.stdout`` / ``sys.stderr``? Asked of the project the
    file sits in, so that a run of this one file sees it too (a ``utils.setup_logger()``
    that sets ``sys.stdout = Logger(path)``)."""
    external = ctx.provenance.external
    return external is not None and external.imports_replacing_streams(ctx.provenance)  # type: ignore[attr-defined]
