"""What one file of a run can change for every other: facts read from the text of
all the run's files before any is analysed, each file read once."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from ..model.devices import may_set_default_device, sets_default_device
from ..model.streams import may_replace_streams, replaces_streams

# The first name of each module a file imports (``from mmdet.apis import x``: ``mmdet``).
_IMPORTS = re.compile(r"^[ \t]*(?:from[ \t]+([A-Za-z_]\w*)|import[ \t]+([A-Za-z_]\w*))", re.MULTILINE)


@dataclass(frozen=True)
class RunFacts:
    default_device: bool = False  # a file sets torch's default device (:mod:`..model.devices`)
    # Where a file puts a tee in place of ``sys.stdout`` / ``sys.stderr`` (:mod:`..model.streams`):
    # the program it starts is taken to be the code in its folder and below, and the
    # packages it imports (``tools/train.py`` importing ``mmdet``: ``mmdet/`` beside it, or
    # ``src/mmdet/``). One example of a folder of separate examples does not tee the others.
    tee_folders: tuple[Path, ...] = ()
    tee_imports: frozenset[str] = frozenset()
    base: Path | None = None  # the folder that holds every file of the run

    def replaced_streams(self, path: Path) -> bool:
        """Does a file of the run put a tee in place of the output streams of ``path``'s program?"""
        if not self.tee_folders:
            return False
        resolved = path.resolve()
        if any(resolved.is_relative_to(folder) for folder in self.tee_folders):
            return True
        if self.base is None or not resolved.is_relative_to(self.base):
            return False
        inside = resolved.relative_to(self.base)
        if inside.parts[0].removesuffix(".py") in self.tee_imports:
            return True  # a package or a module of the run's top folder
        return any(part in self.tee_imports for part in inside.parent.parts)  # a package under ``src/``


def run_facts(paths: Iterable[Path]) -> RunFacts:
    """The facts of the run made of ``paths``. Files that cannot be read add none."""
    device = False
    tees: list[Path] = []
    imported: set[str] = set()
    paths = list(paths)
    for path in paths:
        try:
            data = path.read_bytes()
        except OSError:
            continue
        # (Decoded only where the bytes hold what a fact needs: most files hold neither.)
        maybe_device = not device and may_set_default_device(data)
        if not (maybe_device or may_replace_streams(data)):
            continue
        text = data.decode("utf-8", errors="replace")
        device = device or (maybe_device and sets_default_device(text))
        if replaces_streams(text):
            tees.append(path.resolve().parent)
            imported.update(a or b for a, b in _IMPORTS.findall(text))
    base = None
    if tees:
        try:
            base = Path(os.path.commonpath([p.resolve().parent for p in paths]))
        except ValueError:  # paths on different drives
            base = None
    return RunFacts(device, tuple(dict.fromkeys(tees)), frozenset(imported), base)
