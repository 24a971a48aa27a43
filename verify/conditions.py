"""Record which way each rewritten condition went in the after version.

A rewrite turns ``if t.item() > c: y = f(y)`` into ``y = torch.where(t > c,
f(y), y)`` and ``max(t.item(), c)`` into ``torch.clamp(t, min=c)``. Comparing
outputs only proves the rewrite where each condition was seen both true and
false. While the after version runs eagerly, a ``TorchFunctionMode`` watches
``torch.where`` / ``Tensor.where``, ``clamp`` (``clip``, ``clamp_min``,
``clamp_max``) and ``maximum`` / ``minimum`` calls made directly from the
after file and records, per call site, whether the condition was true
(for clamp and maximum/minimum: the bound was active, i.e. changed the value)
and whether it was false, on some element of some run.
"""

from __future__ import annotations

import linecache
import os
import sys
from dataclasses import dataclass
from pathlib import Path

import torch
from torch.overrides import TorchFunctionMode

_WHERE = {torch.where: "where", torch.Tensor.where: "Tensor.where"}
_CLAMP = {
    torch.clamp: "clamp",
    torch.clip: "clip",
    torch.Tensor.clamp: "Tensor.clamp",
    torch.Tensor.clip: "Tensor.clip",
    torch.clamp_min: "clamp_min",
    torch.clamp_max: "clamp_max",
    torch.Tensor.clamp_min: "Tensor.clamp_min",
    torch.Tensor.clamp_max: "Tensor.clamp_max",
}
_EXTREMUM = {
    torch.maximum: "maximum",
    torch.minimum: "minimum",
    torch.Tensor.maximum: "Tensor.maximum",
    torch.Tensor.minimum: "Tensor.minimum",
}
_WATCHED = {**_WHERE, **_CLAMP, **_EXTREMUM}

_SKIP_DIRS = tuple(
    os.path.dirname(os.path.abspath(mod.__file__)) + os.sep
    for mod in (torch, sys.modules[__name__.rsplit(".", 1)[0]])
)


@dataclass
class ConditionSite:
    """One rewritten condition in the after file and the values it took."""

    file: str
    line: int
    op: str
    code: str = ""
    calls: int = 0
    #: Calls in which the condition was true / the bound active on some element.
    true_seen: int = 0
    #: Calls in which the condition was false / the bound inactive on some element.
    false_seen: int = 0

    @property
    def both_seen(self) -> bool:
        return self.true_seen > 0 and self.false_seen > 0

    @property
    def location(self) -> str:
        return f"{self.file}:{self.line}"

    @property
    def seen(self) -> str:
        if self.both_seen:
            return "both"
        if self.true_seen:
            return "only true" if self.op.endswith("where") else "only active"
        if self.false_seen:
            return "only false" if self.op.endswith("where") else "only inactive"
        return "never evaluated"

    def to_json(self) -> dict:
        return {
            "file": self.file,
            "line": self.line,
            "op": self.op,
            "code": self.code,
            "calls": self.calls,
            "true_seen": self.true_seen,
            "false_seen": self.false_seen,
            "both_seen": self.both_seen,
        }


def _arg(args: tuple, kwargs: dict, index: int, name: str):
    if len(args) > index:
        return args[index]
    return kwargs.get(name)


def _outcomes_of_where(func, args, kwargs) -> tuple[bool, bool] | None:
    if func is torch.Tensor.where:
        cond = _arg(args, kwargs, 1, "condition")
    else:
        cond = _arg(args, kwargs, 0, "condition")
        if len(args) + len(kwargs) < 3:
            return None  # torch.where(cond) is nonzero(), not a select
    if isinstance(cond, torch.Tensor):
        if cond.numel() == 0:
            return None
        cond = cond.detach().bool()
        return bool(cond.any()), bool((~cond).any())
    if isinstance(cond, bool):
        return cond, not cond
    return None


def _outcomes_of_change(inp, out) -> tuple[bool, bool] | None:
    """(some element changed, some element unchanged) between ``inp`` and ``out``."""
    if not isinstance(out, torch.Tensor) or out.numel() == 0:
        return None
    inp_t = inp if isinstance(inp, torch.Tensor) else torch.as_tensor(inp, device=out.device)
    inp_t, out_t = torch.broadcast_tensors(inp_t.detach().to(out.dtype), out.detach())
    same = (inp_t == out_t)
    if out_t.is_floating_point():
        same = same | (torch.isnan(inp_t) & torch.isnan(out_t))
    return bool((~same).any()), bool(same.any())


class ConditionRecorder(TorchFunctionMode):
    """Records the condition outcomes of watched calls made from ``after_file``."""

    def __init__(self, after_file: str | Path) -> None:
        super().__init__()
        self.after_file = str(Path(after_file).resolve())
        self.sites: dict[tuple[int, str], ConditionSite] = {}
        self._file_matches: dict[str, bool] = {}

    def _caller_line(self) -> int | None:
        frame = sys._getframe(2)
        while frame is not None:
            fname = frame.f_code.co_filename
            if not fname.startswith(_SKIP_DIRS):
                break
            frame = frame.f_back
        if frame is None:
            return None
        fname = frame.f_code.co_filename
        match = self._file_matches.get(fname)
        if match is None:
            try:
                match = str(Path(fname).resolve()) == self.after_file
            except OSError:
                match = False
            self._file_matches[fname] = match
        return frame.f_lineno if match else None

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        result = func(*args, **kwargs)
        op = _WATCHED.get(func)
        if op is None:
            return result
        line = self._caller_line()
        if line is None:
            return result
        try:
            with torch.no_grad():
                if func in _WHERE:
                    outcome = _outcomes_of_where(func, args, kwargs)
                else:
                    outcome = _outcomes_of_change(args[0] if args else kwargs.get("input"), result)
        except Exception:  # noqa: BLE001 - recording must never change behaviour
            outcome = None
        site = self.sites.get((line, op))
        if site is None:
            code = linecache.getline(self.after_file, line).strip()
            site = self.sites[(line, op)] = ConditionSite(self.after_file, line, op, code)
        site.calls += 1
        if outcome is not None:
            site.true_seen += outcome[0]
            site.false_seen += outcome[1]
        return result

    def results(self) -> list[ConditionSite]:
        return sorted(self.sites.values(), key=lambda s: (s.line, s.op))
