"""The benchmark scripts in bench/ run and print their tables."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_models_quick_one_model():
    proc = subprocess.run(
        [sys.executable, "bench/models.py", "--quick", "--only", "gated_mlp", "--steps", "3"],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    row = next(line for line in proc.stdout.splitlines() if line.startswith("gated_mlp"))
    before, after, ideal = map(int, re.search(r"(\d+) -> (\d+) \((\d+)\)", row).groups())
    assert before >= 1
    assert after == 0
    assert ideal == 0
    assert "after/ideal" in proc.stdout and "before/after" in proc.stdout


@pytest.mark.slow
def test_throughput_on_local_tree():
    proc = subprocess.run(
        [sys.executable, "bench/throughput.py", "--tree", "fixtures/threshold", "--copies", "1"],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout
    assert "fixitem throughput" in out
    files = len(list((ROOT / "fixtures" / "threshold").glob("*.py")))
    scan = next(line for line in out.splitlines() if line.startswith("fixitem scan"))
    assert scan.split()[2] == str(files)
    assert re.search(rf"^fixitem scan \(warm\)\s+{files}\s", out, re.M)
    assert re.search(rf"^fixitem apply --diff \(warm\)\s+{files}\s", out, re.M)
    assert "Growth" in out and re.search(rf"^1x\s+{files}\s", out, re.M)
    assert "downloading" not in proc.stderr
