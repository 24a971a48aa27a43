"""Assertions for your own test suite: no graph breaks, no host syncs.

>>> import torch
>>> from fixitem.testing import assert_no_graph_breaks, assert_no_host_syncs
>>> def step(x):
...     return torch.where(x.sum() > 0, x, -x)
>>> assert_no_graph_breaks(step, torch.ones(3))
>>> _ = assert_no_host_syncs(step, torch.ones(3))

Both raise :class:`AssertionError` (so pytest shows the message) listing
every break or sync with its ``file:line``. ``assert_no_graph_breaks``
compiles with ``fullgraph=False`` and reports every break, not only the
first; ``assert_no_host_syncs`` runs the function eagerly, so it also sees
syncs in code that is never compiled (the training loop around the model).
"""

from __future__ import annotations

import collections
import linecache
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from fixitem.verify.breaks import BreakReport, count_graph_breaks
from fixitem.verify.syncs import SyncCounter

__all__ = ["HostSync", "assert_no_graph_breaks", "assert_no_host_syncs"]

# Frames in these folders are torch's (or ours), never the line that synced.
_SKIPPED_DIRS = tuple(
    os.path.dirname(os.path.abspath(p)) + os.sep
    for p in (torch.__file__, sys.modules[SyncCounter.__module__].__file__)
)
_SKIPPED_FILES = {os.path.abspath(__file__)}


def _name(fn: Callable) -> str:
    if isinstance(fn, torch.nn.Module):
        return type(fn).__name__
    return getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or repr(fn)


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def assert_no_graph_breaks(model_or_fn: Callable, *inputs: Any, backend: str = "eager") -> BreakReport:
    """Compile ``model_or_fn``, call it on ``inputs`` and fail if Dynamo broke the graph.

    The message lists each break with Dynamo's reason and ``file:line``.
    ``backend="eager"`` (the default) checks capture only and is fast;
    ``"aot_eager"`` or ``"inductor"`` also run the backend. Dynamo's caches are
    reset before and after. Returns the :class:`~fixitem.verify.breaks.BreakReport`.
    """
    report = count_graph_breaks(model_or_fn, [tuple(inputs)], backend=backend)
    problems = []
    if report.breaks:
        lines = [f"{_plural(report.count, 'graph break')} in {_name(model_or_fn)}:"]
        for gb in report.breaks:
            lines.append(f"  {gb.location}: {gb.reason}")
        problems.append("\n".join(lines))
    if report.error:
        problems.append(f"the compiled {_name(model_or_fn)} raised {report.error}"
                        + (" (breaks after it were not seen)" if report.breaks else ""))
    if problems:
        raise AssertionError("\n".join(problems))
    return report


@dataclass(frozen=True)
class HostSync:
    """One host sync seen at run time: its kind (``item``, ``__bool__``...) and where."""

    kind: str
    file: str | None
    line: int | None

    @property
    def location(self) -> str:
        return "unknown location" if self.file is None else f"{self.file}:{self.line}"

    @property
    def code(self) -> str:
        return linecache.getline(self.file, self.line).strip() if self.file and self.line else ""


def _user_frame():
    frame = sys._getframe(2)
    while frame is not None:
        filename = os.path.abspath(frame.f_code.co_filename)
        if not filename.startswith(_SKIPPED_DIRS) and filename not in _SKIPPED_FILES:
            return frame
        frame = frame.f_back
    return None


class _LocatingSyncCounter(SyncCounter):
    """:class:`SyncCounter` that also records the user's line of each sync."""

    def __init__(self) -> None:
        super().__init__()
        self.sites: list[HostSync] = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        before = collections.Counter(self.by_kind)
        try:
            return super().__torch_function__(func, types, args, kwargs)
        finally:
            if self.by_kind != before:
                frame = _user_frame()
                file = frame.f_code.co_filename if frame is not None else None
                line = frame.f_lineno if frame is not None else None
                for kind, n in (self.by_kind - before).items():
                    self.sites.extend([HostSync(kind, file, line)] * n)


def assert_no_host_syncs(fn: Callable, *args: Any, **kwargs: Any) -> Any:
    """Call ``fn(*args, **kwargs)`` eagerly and fail if Python read a tensor's value.

    Counts what :func:`fixitem.verify.syncs.count_host_syncs` counts
    (``.item()``, ``float(t)``, ``if t:``, ``print(t)``, ``.tolist()``,
    ``.numpy()``, ``.cpu()`` of an accelerator tensor), on any device. The
    message says how many, of which kinds, and on which lines. Returns what
    ``fn`` returned; an exception from ``fn`` propagates unchanged.
    """
    counter = _LocatingSyncCounter()
    with counter:
        result = fn(*args, **kwargs)
    if counter.total:
        kinds = ", ".join(f"{n} {kind}" for kind, n in counter.by_kind.most_common())
        lines = [f"{_plural(counter.total, 'host sync')} in {_name(fn)} ({kinds}):"]
        grouped = collections.Counter(counter.sites)
        for site, n in grouped.items():
            times = f" (x{n})" if n > 1 else ""
            code = f"  `{site.code}`" if site.code else ""
            lines.append(f"  {site.location}: {site.kind}{times}{code}")
        raise AssertionError("\n".join(lines))
    return result
