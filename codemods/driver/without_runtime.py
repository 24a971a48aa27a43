"""Files that must not import ``fixitem.runtime`` (``no-runtime`` in ``[tool.fixitem]``).

Deferred logging and on-device sums are the rewrites whose code imports the
runtime (a library's modules, say, whose users would get a new dependency).
In such a file :class:`WithoutRuntime` keeps their findings and drops their
fixes, so that each is report-only with a note saying why; every other fix is
made as usual.
"""

from __future__ import annotations

from collections.abc import Iterable

from ..rule import Report, Rule

NOTE = ("no fix here: the fix imports `fixitem.runtime`, which the `no-runtime` setting keeps out of this file; "
        "rewrite it by hand, or remove the file from `no-runtime`")


def imports_runtime(imports: Iterable[str]) -> bool:
    """Whether a fix's ``imports`` (statement texts) bring in ``fixitem.runtime``."""
    return any(spec.startswith(("from fixitem import runtime", "import fixitem.runtime", "from fixitem.runtime "))
               for spec in imports)


class WithoutRuntime(Rule):
    """Wraps a rule so that its fixes that import ``fixitem.runtime`` become report-only."""

    def __init__(self, inner: Rule) -> None:
        self.inner = inner
        self.code = inner.code  # type: ignore[misc]
        self.name = inner.name  # type: ignore[misc]
        self.summary = inner.summary  # type: ignore[misc]

    def check(self, ctx, sites, claimed):  # type: ignore[override]
        for report in self.inner.check(ctx, sites, claimed):
            yield _without_runtime(report)


def _without_runtime(report: Report) -> Report:
    if report.fix is not None and imports_runtime(report.fix.imports):
        report.fix = None
        report.note = NOTE
    return report
