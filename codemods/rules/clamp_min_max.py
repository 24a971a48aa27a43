"""FX103: ``max`` / ``min`` of a tensor value read on the host."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from ..fixes.tensor_code import (
    NotConvertible,
    convert_value,
    exact_in_every_float_dtype,
    tensor_sites_within,
)
from ..model.context import FileContext
from ..model.dtypes import tensors_met, visibly_floating, zero_dim_dtype_problem
from ..model.syncs import SyncSite
from ..model.tree import walk
from ..model.value_flow import uncertain_tensor, value_flow
from ..rule import Fix, Invalid, Report, Rule, Safety, Valid, dedent


class ClampMinMax(Rule):
    """## What it does
    Finds `max(...)` / `min(...)` of two values where at least one is a
    tensor read with `.item()` / `float()` / `int()`, and rewrites them into
    `torch.clamp(t, min=c)` / `torch.clamp(t, max=c)` (a tensor and a number)
    or `torch.maximum(a, b)` / `torch.minimum(a, b)` (two tensors).

    ## Why is this bad?
    Python's `max` needs both numbers on the host: each `.item()` is a
    **host sync** and, in compiled code, a **graph break**. The tensor
    functions compute the same bound on the device.

    ## Example
    ```python
    y = x / max(x.norm().item(), 1e-6)
    ```

    ## Use instead
    ```python
    y = x / torch.clamp(x.norm().detach(), min=1e-6)
    ```
    `.item()` also cut the value off from autograd; `.detach()` keeps that,
    so gradients are unchanged. Drop it by hand where you want the gradient
    to flow through the bound.

    ## Fix safety
    The result is followed to every use: through the names it is stored in
    (tuple unpacking and `self.` attributes too), into comprehensions,
    through `return` to the calls of the function in the same file, and into
    the parameter of a function of the same file it is passed to.
    **Safe** when every use is arithmetic with a tensor (directly, or as
    `norm = max(y.norm().item(), eps)` then `y / norm`) that keeps its dtype:
    the tensor has the bound's own dtype (`y` and `y.norm()`), or it is
    floating point with at least one dimension. A 0-dim tensor then
    behaves like the Python number did (same result dtype; the value is the
    tensor's own, so it is the same; the bound is rounded to the tensor's
    dtype: exact for a bound float16 and bfloat16 hold, see below). A tensor that is not plainly 0-dim
    gets `.reshape(())`, so that a `(1,)` tensor does not broadcast into the
    result's shape. (On CUDA a Python divisor is applied as a multiplication
    by its reciprocal, a tensor divisor is not: `y / norm` can differ in the
    last bit there.) **Unsafe** when a bound is a number float16 / bfloat16
    do not hold exactly (`1e-6`, `1e-12`; `1.0` and `0.5` are exact): where
    it is selected, a tensor of those dtypes holds it rounded (a float16
    `1e-6` is `1.013e-06`), while Python computed with the number itself; when the result is returned or passed to a
    function fixitem cannot see into, or when a tensor it meets may be 0-dim
    or an integer tensor of another dtype (`s / max(y.norm().item(), eps)`
    with a 0-dim float32 `s` and a float64 `y` becomes float64). **No fix** when a use needs a Python
    number (`range`, `torch.arange`/`torch.full`/`zeros` sizes, an index,
    `int()`, `round()`, JSON, `isinstance`, a `-> float`/`-> int` return,
    Python control flow, string formatting), or when the value read is not
    certainly a tensor.
    """

    code = "FX103"
    name = "clamp-min-max"
    summary = "`max`/`min` of a tensor value: use `torch.clamp` / `torch.maximum` / `torch.minimum`"
    fix_makes_tensors = True
    graph_breaks = ("GB0124",)
    examples = [
        Invalid(
            dedent(
                """
                import torch
                def f(x: torch.Tensor):
                    return x / max(x.norm().item(), 1.0)
                """
            ),
            fixed=dedent(
                """
                import torch
                def f(x: torch.Tensor):
                    return x / torch.clamp(x.norm().detach(), min=1.0)
                """
            ),
        ),
        Invalid(
            dedent(
                """
                import torch
                def f(x: torch.Tensor):
                    return x / max(x.norm().item(), 1e-6)
                """
            ),
            fixed=dedent(
                """
                import torch
                def f(x: torch.Tensor):
                    return x / torch.clamp(x.norm().detach(), min=1e-6)
                """
            ),
            unsafe=True,  # a float16 `x` holds the bound `1e-6` as 1.013e-06 where it is selected
        ),
        Invalid(
            dedent(
                """
                import torch
                def f(a: torch.Tensor, b: torch.Tensor):
                    return a * min(a.sum().item(), b.sum().item())
                """
            ),
            fixed=dedent(
                """
                import torch
                def f(a: torch.Tensor, b: torch.Tensor):
                    return a * torch.minimum(a.sum().detach(), b.sum().detach())
                """
            ),
            unsafe=True,  # `a` may be 0-dim or an integer tensor: `b`'s dtype could win
        ),
        Invalid(
            dedent(
                """
                import torch
                def f(loss: torch.Tensor):
                    lr = min(loss.item(), 0.1)
                    return lr
                """
            ),
            fixed=dedent(
                """
                import torch
                def f(loss: torch.Tensor):
                    lr = torch.clamp(loss.detach().reshape(()), max=0.1)
                    return lr
                """
            ),
            unsafe=True,
        ),
        Invalid(
            dedent(
                """
                import torch
                def f(scores: torch.Tensor, k: int, pos: torch.Tensor):
                    n = torch.full((), scores.shape[0], device=scores.device)
                    _k = min(k, (n - pos - 1).item())
                    return [scores[i] for i in range(_k)], _k / 5
                """
            ),
            unsafe=True,  # no fix: `range` would read a 0-dim `_k` back with `__index__`
        ),
        Valid(
            dedent(
                """
                def f(a, b):
                    return max(a, b)
                """
            )
        ),
    ]

    def check(self, ctx: FileContext, sites: list[SyncSite], claimed: set[SyncSite]) -> Iterator[Report]:
        for node in ctx.nodes(ast.Call):
            assert isinstance(node, ast.Call)
            if not (type(node.func) is ast.Name and node.func.id in ("max", "min")):
                continue
            inner = [s for s in tensor_sites_within(ctx, sites, node) if s not in claimed]
            if not inner:
                continue
            message = f"`{node.func.id}(...)` of a tensor value read on the host"
            try:
                converted = convert_value(ctx, node, detach=True)
            except NotConvertible as exc:
                yield Report(node, message, sites=inner, note=f"no fix: {exc}")
                continue
            if converted is None:
                continue
            uncertain = [r for r in (uncertain_tensor(ctx, read) for read in converted.reads) if r]
            if uncertain:
                yield Report(node, message, sites=inner, note=f"no fix: {uncertain[0]}")
                continue
            flow = value_flow(ctx, node)
            if flow.blocking:
                note = (f"no fix: the result would be a 0-dim tensor where a Python number is needed: "
                        f"{flow.blocking}. Keep the read (once, where the number is needed), or compute "
                        "the bound from Python numbers")
                yield Report(node, message, sites=inner, note=note)
                continue
            safety, reason = Safety.SAFE, ""
            if flow.unsafe:
                safety = Safety.UNSAFE
                reason = f"the result becomes a 0-dim tensor where the original gave a Python number: {flow.unsafe}"
            problems = _dtype_problems(ctx, node, converted.reads) + _bound_rounding(ctx, node, converted.reads)
            if problems:
                safety = Safety.UNSAFE
                reason = "; ".join([r for r in (reason,) if r] + problems)
            new = converted.expr
            yield Report(node, message, fix=Fix({node: new}, safety, reason), sites=inner)


def _dtype_problems(ctx: FileContext, node: ast.Call, reads: list[ast.AST]) -> list[str]:
    """Why the 0-dim result may promote differently than the Python number did
    against the tensors it meets."""
    sources = [_read_tensor(read) for read in reads]
    if not all(s is not None and visibly_floating(ctx, s) for s in sources):
        # ``int(t)`` becomes ``t.long()``, and ``torch.clamp`` of an integer tensor with
        # a float bound is a float: only the tensors met can tell.
        sources = []
    code = ctx.code(node)
    problems = [zero_dim_dtype_problem(ctx, code, tensor, sources=[s for s in sources if s is not None]) for tensor in tensors_met(ctx, node)]
    return [p for p in problems if p][:1]  # the first says enough


def _bound_rounding(ctx: FileContext, node: ast.Call, reads: list[ast.AST]) -> list[str]:
    """Why the bound, where it is selected, may not be the number Python used: the
    0-dim result holds it in the tensor's dtype, and float16 / bfloat16 round ``1e-6``
    (Python divided by the number itself, computed in float32 at least)."""
    read_ids = {id(r) for r in reads}
    for bound in node.args:
        if any(id(sub) in read_ids for sub in walk(bound)) or exact_in_every_float_dtype(bound):
            continue
        return [f"`{ctx.code(bound)}` is not exact in float16/bfloat16: where the bound is selected, a tensor "
                "of those dtypes holds it rounded (a float16 `1e-6` is `1.013e-06`), where Python used the "
                "number itself"]
    return []


def _read_tensor(read: ast.AST) -> ast.expr | None:
    """``t`` of ``t.item()`` / ``float(t)``; None for ``int(t)``."""
    if type(read) is ast.Call:
        func = read.func  # type: ignore[attr-defined]
        if type(func) is ast.Attribute and func.attr == "item":
            return func.value
        if type(func) is ast.Name and func.id == "float" and (read.args or read.keywords):  # type: ignore[attr-defined]
            first = read.args[0] if read.args else read.keywords[0]  # type: ignore[attr-defined]
            return first.value if type(first) in (ast.Starred, ast.keyword) else first
    return None
