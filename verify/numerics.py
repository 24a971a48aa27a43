"""Run a model on an input, and compare outputs and gradients between versions.

Tolerances (rtol, atol) by dtype. "eager" compares eager-before with
eager-after, where a correct ``torch.where`` rewrite is usually bit-exact;
"compiled" compares compiled-after with eager-before, where a compiler may
fuse and reorder floating-point operations:

==========  ===================  ===================
dtype       eager                compiled
==========  ===================  ===================
float64     1e-7 / 1e-7          1e-5 / 1e-7
float32     1.3e-6 / 1e-5        1e-4 / 1e-5
float16     1e-3 / 1e-5          1e-2 / 1e-3
bfloat16    1.6e-2 / 1e-5        5e-2 / 1e-2
int, bool   exact                exact
==========  ===================  ===================

NaNs compare equal to NaNs. Dtypes and shapes must match exactly: a result
that became float64, or an int that became a float, is a difference.

Gradients: when an output requires grad, the loss is a fixed random
projection of every floating output (``sum(out * w)``, ``w`` drawn from a
seeded generator, the same for all versions), back-propagated; the gradients
of all parameters (matched by name) and of the inputs that require grad are
compared with the same tolerances. A parameter whose gradient is ``None`` on
one side and all zeros on the other counts as equal: a ``torch.where`` rewrite
evaluates both branches, so a parameter used only in the untaken branch gets a
zero gradient instead of none, which an optimizer treats the same way except
for weight decay and momentum state (see the rule's fix safety).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch

TOLERANCES: dict[torch.dtype, dict[str, tuple[float, float]]] = {
    torch.float64: {"eager": (1e-7, 1e-7), "compiled": (1e-5, 1e-7)},
    torch.float32: {"eager": (1.3e-6, 1e-5), "compiled": (1e-4, 1e-5)},
    torch.float16: {"eager": (1e-3, 1e-5), "compiled": (1e-2, 1e-3)},
    torch.bfloat16: {"eager": (1.6e-2, 1e-5), "compiled": (5e-2, 1e-2)},
    torch.complex128: {"eager": (1e-7, 1e-7), "compiled": (1e-5, 1e-7)},
    torch.complex64: {"eager": (1.3e-6, 1e-5), "compiled": (1e-4, 1e-5)},
}
#: Python floats returned by the model.
FLOAT_TOLERANCE = {"eager": (1e-9, 1e-12), "compiled": (1e-5, 1e-7)}

#: Derived inputs: each floating tensor input multiplied by each factor, so
#: that a threshold condition on the data is seen both true and false.
DEFAULT_SCALES: tuple[float, ...] = (0.0, 0.5, 2.0, 10.0, -1.0)


def tolerance(dtype: torch.dtype, kind: str) -> tuple[float, float]:
    """(rtol, atol) for ``dtype``; (0, 0) for integer and bool tensors."""
    if dtype in TOLERANCES:
        return TOLERANCES[dtype][kind]
    if dtype.is_floating_point:  # float8 and friends
        return TOLERANCES[torch.bfloat16][kind]
    return (0.0, 0.0)


def tolerance_table() -> list[dict]:
    rows = [
        {"dtype": str(dt).replace("torch.", ""), "eager_rtol": t["eager"][0], "eager_atol": t["eager"][1],
         "compiled_rtol": t["compiled"][0], "compiled_atol": t["compiled"][1]}
        for dt, t in TOLERANCES.items() if not dt.is_complex
    ]
    rows.append({"dtype": "int/bool", "eager_rtol": 0.0, "eager_atol": 0.0, "compiled_rtol": 0.0, "compiled_atol": 0.0})
    return rows


# --- inputs --------------------------------------------------------------------


@dataclass
class NamedInput:
    name: str  # "input 0" or "input 0 x0.5"
    args: tuple
    derived: bool = False


def _map_tensors(obj, fn):
    if isinstance(obj, torch.Tensor):
        return fn(obj)
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):  # namedtuple
        return type(obj)(*(_map_tensors(o, fn) for o in obj))
    if isinstance(obj, (list, tuple)):
        return type(obj)(_map_tensors(o, fn) for o in obj)
    if isinstance(obj, dict):
        return type(obj)((k, _map_tensors(v, fn)) for k, v in obj.items())
    return obj


def _has_float_tensor(obj) -> bool:
    found = []
    _map_tensors(obj, lambda t: found.append(t.is_floating_point()) or t)
    return any(found)


def fresh_copy(args: tuple) -> tuple:
    """Detached clones of every tensor (keeping ``requires_grad``), so a run
    cannot modify the next run's inputs and gradients do not accumulate."""
    def clone(t: torch.Tensor) -> torch.Tensor:
        c = t.detach().clone()
        return c.requires_grad_(t.requires_grad) if (t.is_floating_point() or t.is_complex()) else c
    return _map_tensors(args, clone)


def move_to(obj, device: torch.device):
    return _map_tensors(obj, lambda t: t.to(device))


def derive_inputs(inputs: Sequence[tuple], scales: Sequence[float] = DEFAULT_SCALES) -> list[NamedInput]:
    """The given inputs, then each one with every floating tensor scaled."""
    named = [NamedInput(f"input {i}", args) for i, args in enumerate(inputs)]
    for i, args in enumerate(inputs):
        if not _has_float_tensor(args):
            continue
        for s in scales:
            scaled = _map_tensors(
                args, lambda t, s=s: (t.detach() * s).requires_grad_(t.requires_grad) if t.is_floating_point() else t
            )
            named.append(NamedInput(f"input {i} x{s:g}", scaled, derived=True))
    return named


# --- running ---------------------------------------------------------------------


def summarise_error(exc: BaseException) -> str:
    """``Type: first line`` of an exception, with the next line when the first ends in ':'."""
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    text = lines[0] if lines else ""
    if text.endswith(":") and len(lines) > 1:
        text = f"{text} {lines[1]}"
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


@dataclass
class RunResult:
    outputs: object = None
    #: name -> gradient (None when the parameter got no gradient); empty when
    #: no output required grad.
    grads: dict[str, torch.Tensor | None] = field(default_factory=dict)
    backward: bool = False
    error: str | None = None


def _leaves(obj) -> list[torch.Tensor]:
    out: list[torch.Tensor] = []
    _map_tensors(obj, lambda t: out.append(t) or t)
    return out


def projection_loss(outputs) -> torch.Tensor | None:
    """``sum(out * w)`` over the floating outputs that require grad, ``w`` fixed."""
    gen = torch.Generator().manual_seed(1234)
    total = None
    for out in _leaves(outputs):
        if not (out.requires_grad and out.is_floating_point()):
            continue
        w = torch.randn(out.shape, generator=gen, dtype=torch.float32).to(device=out.device)
        term = (out.float() * w).sum()
        total = term if total is None else total + term
    return total


def _named_parameters(model) -> list[tuple[str, torch.Tensor]]:
    if isinstance(model, torch.nn.Module):
        return list(model.named_parameters())
    return []


def run_once(model: Callable, args: tuple, params_of=None, *, backward: bool = True) -> RunResult:
    """Seed the RNG, call ``model(*args)`` on fresh input copies, back-propagate.

    ``params_of`` is the module whose parameters' gradients are collected
    (the eager module when ``model`` is its compiled wrapper).
    """
    params = _named_parameters(params_of if params_of is not None else model)
    for _, p in params:
        p.grad = None
    call_args = fresh_copy(args)
    torch.manual_seed(0)
    try:
        outputs = model(*call_args)
    except Exception as exc:  # noqa: BLE001
        return RunResult(error=summarise_error(exc))
    result = RunResult(outputs=_map_tensors(outputs, lambda t: t.detach().clone()))
    if not backward:
        return result
    loss = projection_loss(outputs)
    if loss is None:
        return result
    try:
        loss.backward()
    except Exception as exc:  # noqa: BLE001
        result.error = f"backward raised {summarise_error(exc)}"
        return result
    result.backward = True
    result.grads = {f"param {n}": (p.grad.detach().clone() if p.grad is not None else None) for n, p in params}
    for i, t in enumerate(_leaves(call_args)):
        if t.requires_grad:
            result.grads[f"input arg {i}"] = t.grad.detach().clone() if t.grad is not None else None
    for _, p in params:
        p.grad = None
    return result


# --- comparing -------------------------------------------------------------------


def _compare_tensors(path: str, a: torch.Tensor, b: torch.Tensor, kind: str) -> list[str]:
    if a.dtype != b.dtype:
        return [f"{path}: dtype changed {str(a.dtype).replace('torch.', '')} -> {str(b.dtype).replace('torch.', '')}"]
    if a.shape != b.shape:
        return [f"{path}: shape changed {tuple(a.shape)} -> {tuple(b.shape)}"]
    if a.numel() == 0:
        return []
    a = a.detach().cpu()
    b = b.detach().cpu()
    if a.dtype.is_floating_point or a.dtype.is_complex:
        rtol, atol = tolerance(a.dtype, kind)
        if torch.allclose(b, a, rtol=rtol, atol=atol, equal_nan=True):
            return []
        a64, b64 = a.to(torch.complex128 if a.is_complex() else torch.float64), b.to(
            torch.complex128 if b.is_complex() else torch.float64)
        diff = (a64 - b64).abs()
        bad = ~torch.isclose(b64, a64, rtol=rtol, atol=atol, equal_nan=True)
        diff = torch.where(bad, torch.nan_to_num(diff, nan=math.inf), torch.zeros_like(diff))
        worst = int(diff.argmax())
        idx = tuple(int(i) for i in torch.unravel_index(torch.tensor(worst), a.shape)) if a.dim() else ()
        return [
            f"{path}: {int(bad.sum())} of {a.numel()} elements differ; largest at index {idx}: "
            f"{a.reshape(-1)[worst].item():.6g} vs {b.reshape(-1)[worst].item():.6g} (rtol {rtol:g}, atol {atol:g})"
        ]
    if torch.equal(a, b):
        return []
    bad = a != b
    worst = int(bad.reshape(-1).int().argmax())
    idx = tuple(int(i) for i in torch.unravel_index(torch.tensor(worst), a.shape)) if a.dim() else ()
    return [f"{path}: {int(bad.sum())} of {a.numel()} elements differ (exact compare); first at index {idx}: "
            f"{a.reshape(-1)[worst].item()} vs {b.reshape(-1)[worst].item()}"]


def compare(a, b, kind: str = "eager", path: str = "output") -> list[str]:
    """Differences between two (nested) results; an empty list when equivalent."""
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        return _compare_tensors(path, a, b, kind)
    if type(a) is not type(b) and not (isinstance(a, (list, tuple)) and isinstance(b, (list, tuple))):
        if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool) and not isinstance(b, bool):
            pass  # compared as numbers below, type change reported
        else:
            return [f"{path}: type changed {type(a).__name__} -> {type(b).__name__}"]
    if isinstance(a, dict):
        if list(a.keys()) != list(b.keys()):
            return [f"{path}: keys changed {list(a.keys())} -> {list(b.keys())}"]
        return [d for k in a for d in compare(a[k], b[k], kind, f"{path}[{k!r}]")]
    if isinstance(a, (list, tuple)):
        if type(a) is not type(b):
            return [f"{path}: type changed {type(a).__name__} -> {type(b).__name__}"]
        if len(a) != len(b):
            return [f"{path}: length changed {len(a)} -> {len(b)}"]
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in compare(x, y, kind, f"{path}[{i}]")]
    if isinstance(a, float) or isinstance(b, float):
        if type(a) is not type(b):
            return [f"{path}: type changed {type(a).__name__} -> {type(b).__name__}"]
        rtol, atol = FLOAT_TOLERANCE[kind]
        if (math.isnan(a) and math.isnan(b)) or math.isclose(a, b, rel_tol=rtol, abs_tol=atol):
            return []
        return [f"{path}: {a!r} vs {b!r}"]
    if a != b:
        return [f"{path}: {a!r} vs {b!r}"]
    return []


def _grad_equal_none_zero(a: torch.Tensor | None, b: torch.Tensor | None) -> bool | None:
    """None vs all-zeros counts as equal; returns None when both are tensors."""
    if a is None and b is None:
        return True
    if a is None:
        return not bool(b.detach().ne(0).any())
    if b is None:
        return not bool(a.detach().ne(0).any())
    return None


def compare_grads(a: dict, b: dict, kind: str) -> list[str]:
    diffs: list[str] = []
    for name in sorted(a.keys() | b.keys()):
        # A version that ran no backward (its outputs needed no gradient) has
        # no entry: that is a None gradient.
        ga, gb = a.get(name), b.get(name)
        equal = _grad_equal_none_zero(ga, gb)
        if equal is True:
            continue
        if equal is False:
            diffs.append(f"grad of {name}: None on one side, non-zero on the other")
            continue
        diffs.extend(_compare_tensors(f"grad of {name}", ga, gb, kind))
    return sorted(diffs)


def deterministic(first: RunResult, second: RunResult) -> bool:
    """Two seeded runs of the same version gave the same results."""
    if first.error or second.error:
        return first.error == second.error
    return not compare(first.outputs, second.outputs, "eager") and not compare_grads(first.grads, second.grads, "eager")
