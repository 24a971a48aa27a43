"""Report-only findings say what to do by hand, specific to the pattern."""

from __future__ import annotations

from pathlib import Path

from fixitem import scan

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "advice" / "report_only.py"


def _notes() -> dict[int, str]:
    result = scan([FIXTURE], isolated=True, cache=False)
    assert not result.errors
    return {f.line: f"{f.rule} {f.note}" for f in result.findings}


def _line(marker: str) -> int:
    return next(n for n, text in enumerate(FIXTURE.read_text().splitlines(), 1) if marker in text)


def test_each_pattern_gets_its_own_advice():
    notes = _notes()
    expert = notes[_line("# an expert index")]
    assert expert.startswith("FX006") and "grouped GEMM" in expert and "masked inputs" in expert
    size = notes[_line("int(router_logits.gt(0).sum())")]
    assert "Python size or index" in size and "torch._check" in size
    nan = notes[_line("# NaN-skip logic")]
    assert nan.startswith("FX101") and "GradScaler" in nan and "found_inf" in nan
    leaves = notes[_line("# a value that leaves the program")]
    assert leaves.startswith("FX001") and "leaves the program" in leaves
    loop = notes[_line("# an early exit on a tensor")]
    assert "torch.cond" in loop or "out of the compiled code" in loop
