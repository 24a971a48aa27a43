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
    replaced_streams: bool = False  # a file assigns ``sys.stdout`` / ``sys.stderr`` (:mod:`..model.streams`)


def run_facts(paths: Iterable[Path]) -> RunFacts:
    """The facts of the run made of ``paths``. Files that cannot be read add none."""
    device = streams = False
    for path in paths:
        if device and streams:
            break
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        device = device or sets_default_device(text)
        streams = streams or replaces_streams(text)
    return RunFacts(device, streams)
