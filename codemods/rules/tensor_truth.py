"""FX004: a tensor used as a Python truth value."""

from __future__ import annotations

from ..context import FileContext
from ..rule import Invalid, Valid, dedent
from ..site_rule import SiteRule
from ..syncs import SyncSite


class TensorTruth(SiteRule):
    """## What it does
    Reports tensors used where Python needs `True` or `False` and that no
    rewrite rule handles: `while` loops, `assert`, `bool(t)`, and `and` /
    `or` / `not` outside an `if` that FX101 rewrites.

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
    the loop out of the compiled region.

    ## Fix safety
    No automatic fix.
    """

    code = "FX004"
    name = "tensor-truth"
    summary = "tensor used as a Python truth value"
    kinds = ("truth", "bool")
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
        return f"`{ctx.code(site.node)}` is a tensor used as a Python truth value"
