"""FX004: a tensor used as a Python truth value."""

from __future__ import annotations

from ..model.context import FileContext
from ..model.syncs import SyncSite
from ..rule import Invalid, Valid, dedent
from ..site_rule import SiteRule


class TensorTruth(SiteRule):
    """## What it does
    Reports tensors used where Python needs `True` or `False` and that no
    rewrite rule handles: `while` loops, `assert`, `bool(t)`, `and` /
    `or` / `not` outside an `if` that FX101 rewrites, membership tests
    `x in t` (`Tensor.__contains__` is `(t == x).any()` read on the host),
    `all(t)` / `any(t)`, which read the elements one by one, and the builtin
    `max` / `min` of tensors (`max(a, b)`, `max(g.norm() for g in grads)`),
    whose every comparison is a truth value.

    ## Why is this bad?
    `bool(t)` reads the value (a **host sync**) and, in compiled code, the
    data-dependent branch is a **graph break** (an error with
    `fullgraph=True`).

    ## Example
    ```python
    assert (x >= 0).all(), "negative input"
    while err > tol:
        ...
    ```

    ## Use instead
    For checks, `torch._assert_async(cond, msg)` keeps the check on the
    device; NaN-skip logic is better served by the fused optimizers'
    `found_inf` mechanism. For loops, bound the iterations in Python or move
    the loop out of the compiled region. For `x in t`, keep the answer on
    the device: `(t == x).any()`, or `torch.isin(x, t)` for many values.

    ## Fix safety
    No automatic fix.
    """

    code = "FX004"
    name = "tensor-truth"
    summary = "tensor used as a Python truth value"
    graph_breaks = ("GB0170",)
    kinds = ("truth", "bool", "contains", "elements", "compare")
    examples = [
        Invalid(
            dedent(
                """
                import torch
                def f(x: torch.Tensor):
                    while x.abs().max() > 1:  # `assert`s are FX401's
                        x = x / 2
                    return x
                """
            )
        ),
        Invalid(
            dedent(
                """
                import torch
                def f(ids: torch.Tensor, pad: int):
                    found = pad in ids
                    return found
                """
            )
        ),
        Invalid(
            dedent(
                """
                import torch
                def keep(mask: torch.Tensor):
                    return any(mask)
                """
            )
        ),
        Valid(
            dedent(
                """
                import torch
                def f(x: torch.Tensor, flag: bool):
                    assert flag
                    return x
                """
            )
        ),
    ]

    def message(self, ctx: FileContext, site: SyncSite) -> str:
        if site.kind == "contains":
            return f"`{ctx.code(site.node)}` tests membership in a tensor on the host (`Tensor.__contains__`)"
        if site.kind == "elements":
            return f"`{ctx.code(site.node)}` reads the elements of a tensor one by one as Python truth values"
        if site.kind == "compare":
            return f"`{ctx.code(site.node)}` compares a tensor on the host: each comparison is a Python truth value"
        return f"`{ctx.code(site.node)}` is a tensor used as a Python truth value"

    def note(self, ctx: FileContext, site: SyncSite) -> str:
        if site.kind == "elements":
            name = site.node.func.id  # type: ignore[attr-defined]
            return (
                f"one host sync per element: `{ctx.code(site.value)}.{name}()` decides on the device; read that "
                f"once (`bool({ctx.code(site.value)}.{name}())`) where Python needs it"
            )
        if site.kind == "compare" and len(site.node.args) == 1 and not site.node.keywords:  # type: ignore[attr-defined]
            name = site.node.func.id  # type: ignore[attr-defined]
            return (f"one host sync per element: keep it on the device with `torch.stack([...]).{name}()` (or "
                    f"`torch.{name}imum` pairwise) and read the result once where Python needs it")
        if site.kind == "compare":
            which = "clamp(min=...)" if site.node.func.id == "max" else "clamp(max=...)"  # type: ignore[attr-defined]
            return f"keep it on the device: `torch.{which}` (a tensor and a number) or `torch.maximum` / `torch.minimum`"
        if site.kind == "contains":
            return (
                f"`in` compares every element and reads the answer back: keep it on the device with "
                f"`({ctx.code(site.value)} == x).any()` (or `torch.isin`), and read it once where Python needs it"
            )
        return super().note(ctx, site)
