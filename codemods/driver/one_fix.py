"""One finding's fix alone: the engine run with every other fix held back.

Interactive apply, the language server's code actions and notebooks (whose
cells are fixed as one module) all use :func:`fix_one`.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ..rule import Report, Rule
from .engine import FileResult, Finding, process
from .line_length import DEFAULT as DEFAULT_LINE_LENGTH


class OneFix(Rule):
    """Wraps a rule so that, in one ``process`` run, only the fix of one finding is applied."""

    def __init__(self, inner: Rule, target: Finding, state: dict[str, bool]) -> None:
        self.inner = inner
        self.code = inner.code  # type: ignore[misc]
        self.name = inner.name  # type: ignore[misc]
        self.summary = inner.summary  # type: ignore[misc]
        self.target = target
        self.state = state  # shared by the wrapped rules: {"spent": bool}

    def check(self, ctx, sites, claimed):  # type: ignore[override]
        for report in self.inner.check(ctx, sites, claimed):
            if report.fix is not None and not self._is_target(ctx, report):
                report.fix = None
            yield report

    def _is_target(self, ctx, report: Report) -> bool:
        if self.state["spent"] or self.code != self.target.rule:
            return False
        if ctx.position(report.node) != (self.target.line, self.target.col):
            return False
        self.state["spent"] = True  # later passes of the engine apply nothing more
        return True


def fix_one(
    path: Path, text: str, rules: Sequence[Rule], finding: Finding, *, unsafe: bool = False,
    flush_every: int | None = None, line_length: int = DEFAULT_LINE_LENGTH,
) -> FileResult:
    """``text`` with the fix of ``finding`` alone applied (one of ``process(path, text, rules)``'s findings).

    The engine runs as it does for a whole file (the imports the fix needs are
    added, the result must parse), with the fixes of every other finding held
    back. ``new_text`` is None when the fix changes nothing (or needs ``unsafe``).
    """
    spent = {"spent": False}
    return process(path, text, [OneFix(r, finding, spent) for r in rules], fix=True, unsafe=unsafe,
                   flush_every=flush_every, line_length=line_length)
