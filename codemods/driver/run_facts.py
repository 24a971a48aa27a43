"""What one file of a run can change for every other: facts read from the text of
all the run's files before any is analysed, each file read once."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from ..model.devices import sets_default_device
from ..model.streams import replaces_streams


@dataclass(frozen=True)
class RunFacts:
    default_device: bool = False  # a file sets torch's default device (:mod:`..model.devices`)
    # The folders of the files that put a tee in place of ``sys.stdout`` / ``sys.stderr``
    # (:mod:`..model.streams`): the program such a file starts is taken to be the code in
    # its folder and below (one example of a folder of examples does not tee the others).
    tee_folders: tuple[Path, ...] = ()

    def replaced_streams(self, path: Path) -> bool:
        """Does a file of the run put a tee in place of the output streams of ``path``'s program?"""
        if not self.tee_folders:
            return False
        resolved = path.resolve()
        return any(resolved.is_relative_to(folder) for folder in self.tee_folders)


def run_facts(paths: Iterable[Path]) -> RunFacts:
    """The facts of the run made of ``paths``. Files that cannot be read add none."""
    device = False
    tees: list[Path] = []
    for path in paths:
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        device = device or sets_default_device(text)
        if replaces_streams(text):
            tees.append(path.resolve().parent)
    return RunFacts(device, tuple(dict.fromkeys(tees)))
