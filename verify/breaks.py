"""Count graph breaks, each with its reason and file:line.

``torch._dynamo.explain`` misses a break that happens before the first traced
op, and ``torch._dynamo.utils.counters["graph_break"]`` has no location. So we
compile with ``fullgraph=False`` (what users run without ``fullgraph``) and
listen on Dynamo's ``graph_breaks`` artifact logger, which Dynamo writes one
record to per break, with "Graph break in user code at FILE:LINE" and the
reason. The counter is read as well: a break it counts that the logger did not
report (the logger's internal name changed, or a path that does not log) is
still counted, without a location.

The count reported is the number of distinct break sites (file, line,
reason): a site re-traced for another input shape is one break, not two.
"""

from __future__ import annotations

import contextlib
import logging
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

import torch
import torch._dynamo
from torch._dynamo.utils import counters

#: Dynamo's graph-break artifact logger (``getArtifactLogger(__name__, "graph_breaks")``
#: in ``torch/_dynamo/symbolic_convert.py``). Internal: looked up defensively.
GRAPH_BREAK_LOGGER = "torch._dynamo.symbolic_convert.__graph_breaks"

_LOCATION = re.compile(r"in user code at (?P<file>.+?):(?P<line>\d+)\s*$", re.MULTILINE)


@dataclass
class GraphBreak:
    reason: str
    file: str | None = None
    line: int | None = None
    #: How many times Dynamo reported this site (re-traces for other inputs).
    events: int = 1

    @property
    def location(self) -> str:
        if self.file is None:
            return "unknown location"
        return f"{self.file}:{self.line}"

    def to_json(self) -> dict:
        return {"reason": self.reason, "file": self.file, "line": self.line, "events": self.events}


@dataclass
class BreakReport:
    breaks: list[GraphBreak] = field(default_factory=list)
    #: The compiled function raised (the count is then a lower bound).
    error: str | None = None
    #: False when Dynamo's graph-break logger could not be found (no locations).
    located: bool = True

    @property
    def count(self) -> int:
        return len(self.breaks)


def _find_logger() -> logging.Logger | None:
    names = logging.Logger.manager.loggerDict
    if GRAPH_BREAK_LOGGER in names:
        return logging.getLogger(GRAPH_BREAK_LOGGER)
    for name in names:  # renamed module: any artifact logger for graph breaks
        if name.startswith("torch._dynamo") and name.endswith(".__graph_breaks"):
            return logging.getLogger(name)
    return None


class _Collector(logging.Handler):
    def __init__(self) -> None:
        super().__init__(level=logging.DEBUG)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self.messages.append(record.getMessage())
        except Exception:  # noqa: BLE001 - never let logging break the run
            pass


@contextlib.contextmanager
def _listen_for_breaks() -> Iterator[_Collector | None]:
    logger = _find_logger()
    collector = _Collector()
    # Dynamo also warns on stderr about `.item()` breaks; we report them ourselves.
    noisy = logging.getLogger("torch._dynamo")
    saved_noisy = noisy.level
    noisy.setLevel(logging.ERROR)
    if logger is None:
        try:
            yield None
        finally:
            noisy.setLevel(saved_noisy)
        return
    saved = (logger.level, logger.propagate, logger.disabled)
    logger.setLevel(logging.DEBUG)
    logger.propagate = False
    logger.disabled = False
    logger.addHandler(collector)
    try:
        yield collector
    finally:
        logger.removeHandler(collector)
        logger.setLevel(saved[0])
        logger.propagate = saved[1]
        logger.disabled = saved[2]
        noisy.setLevel(saved_noisy)


def summarise_reason(text: str) -> str:
    """One line from Dynamo's multi-line reason: the break type and its explanation."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    kept: list[str] = []
    for ln in lines:
        if ln.startswith(("Encountered graph break when attempting", "Hint:", "Developer debug context",
                          "For more details", "User code traceback", "Graph Break Reason:")):
            continue
        if ln.startswith("Explanation:"):
            ln = ln[len("Explanation:"):].strip()
        kept.append(ln)
        # A specific break type ("Unsupported Tensor.item() call with ...") says
        # enough; a generic one ("Failed to trace builtin operator") needs its
        # explanation.
        if len(kept) == 2 or len(kept[0]) >= 40:
            break
    return ": ".join(kept) if kept else (lines[0] if lines else "unknown")


def _parse(message: str) -> GraphBreak:
    loc = _LOCATION.search(message.split("\nGraph Break Reason:", 1)[0])
    reason_text = message.split("Graph Break Reason:", 1)[1] if "Graph Break Reason:" in message else message
    reason_text = reason_text.split("User code traceback:", 1)[0]
    file = loc.group("file") if loc else None
    line = int(loc.group("line")) if loc else None
    return GraphBreak(reason=summarise_reason(reason_text), file=file, line=line)


def _merge(found: list[GraphBreak]) -> list[GraphBreak]:
    merged: dict[tuple, GraphBreak] = {}
    for gb in found:
        key = (gb.file, gb.line, gb.reason)
        if key in merged:
            merged[key].events += 1
        else:
            merged[key] = gb
    return list(merged.values())


def count_graph_breaks(fn: Callable, inputs: Sequence[tuple], backend: str = "eager") -> BreakReport:
    """Compile ``fn`` with ``fullgraph=False`` and run it on every input.

    Resets Dynamo before (and after) so earlier compilations do not hide breaks.
    """
    torch._dynamo.reset()
    counters["graph_break"].clear()
    report = BreakReport()
    with _listen_for_breaks() as collector:
        compiled = torch.compile(fn, backend=backend, fullgraph=False)
        try:
            for args in inputs:
                compiled(*args)
        except Exception as exc:  # noqa: BLE001
            lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
            text = " ".join(lines[:2]) if lines and lines[0].endswith(":") else (lines[0] if lines else "")
            report.error = f"{type(exc).__name__}: {text}".rstrip(": ")
    report.located = collector is not None
    found = [_parse(m) for m in (collector.messages if collector else [])]
    # Breaks the counter saw but the logger did not report.
    for key, n in counters["graph_break"].items():
        first = str(key).strip().splitlines()[0] if str(key).strip() else str(key)
        logged = sum(1 for m in (collector.messages if collector else []) if first in m)
        for _ in range(max(0, n - logged)):
            found.append(GraphBreak(reason=summarise_reason(str(key))))
    report.breaks = _merge(found)
    torch._dynamo.reset()
    return report
