"""The work of scanning and rewriting one file grows in proportion to the file.

Work is counted, not timed, so that the speed of the machine cannot matter: the
function calls (Python and built-in) that ``scan`` and ``apply`` make, as cProfile
counts them, on a file of N copies of fixtures/growth/unit.py and on one of 4N copies.
Linear work gives 4x; a lookup that walks the whole file for each site (each test
looking through every site of the file, each read walking back over every statement
before it) gives far more, growing with N.

``apply``'s diff is left out of the count: it is difflib's own matching, which the
diffs printed must keep, and it grows with the lines that repeat in the file.
"""

from __future__ import annotations

import cProfile
import pstats
from pathlib import Path

import pytest

from fixitem import api

ROOT = Path(__file__).resolve().parent.parent
UNIT = ROOT / "fixtures" / "growth" / "unit.py"
SMALL = 5  # copies; the large file has 4 times as many
LIMIT = 4.5  # linear is 4.0 (a little less: some work is done once per file)
LEFT_OUT = ("difflib.py",)


def calls(run) -> int:
    """The calls ``run()`` makes, but those made by or inside difflib."""
    profile = cProfile.Profile()
    profile.enable()
    try:
        run()
    finally:
        profile.disable()
    total = 0
    for function, (_, _, _, _, callers) in pstats.Stats(profile).stats.items():
        if function[0].endswith(LEFT_OUT):
            continue
        for caller, counts in callers.items():
            if not caller[0].endswith(LEFT_OUT):
                total += counts[0] if isinstance(counts, tuple) else counts
    return total


def work(tmp_path: Path, copies: int, command: str) -> int:
    path = tmp_path / f"unit_x{copies}.py"
    path.write_text(UNIT.read_text() * copies)
    options = {"isolated": True, "jobs": 1, "cache": False}
    if command == "scan":
        return calls(lambda: api.scan([path], **options))
    return calls(lambda: api.apply([path], write=False, unsafe=True, **options))


@pytest.fixture(scope="module", autouse=True)
def warm():
    """Imports and one-time set-up are not part of the work on a file."""
    api.scan([UNIT], isolated=True, jobs=1, cache=False)


@pytest.mark.parametrize("command", ["scan", "apply"])
def test_work_grows_linearly_with_one_files_size(tmp_path, command):
    small = work(tmp_path, SMALL, command)
    large = work(tmp_path, 4 * SMALL, command)
    assert small > 100_000  # the unit exercises the analysis, not only the start-up
    assert large / small <= LIMIT, f"{command}: {small} calls on {SMALL} copies, {large} on {4 * SMALL}"


def test_the_unit_exercises_the_lookups_per_site():
    """What the unit holds: findings of several rules, and fixes for apply to make."""
    result = api.scan([UNIT], isolated=True, jobs=1, cache=False)
    rules = {f.rule for f in result.files[0].findings}
    assert {"FX101", "FX201", "FX202", "FX303", "FX007"} <= rules
    assert sum(f.fix == "safe" for f in result.files[0].findings) >= 5
