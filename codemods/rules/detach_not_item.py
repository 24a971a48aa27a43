"""FX301: a value read with ``.item()`` only to be combined with a tensor again."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from ..model.context import FileContext
from ..model.dtypes import scalar_operand_rounding, zero_dim_dtype_problem
from ..model.provenance import Kind
from ..model.scalar_shapes import detached_scalar
from ..model.syncs import SyncSite
from ..model.value_flow import uncertain_tensor
from ..rule import Fix, Invalid, Report, Rule, Safety, Valid, dedent

ARITHMETIC = (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv, ast.Mod, ast.Pow)


class DetachNotItem(Rule):
    """## What it does
    Finds `t.item()` (and `float(t)`) used directly as an operand of
    arithmetic whose other operand is a tensor, as in
    `advantage = returns - value.item()` or `x * self.scale.item()`, and
    replaces the read with `t.detach()`.

    ## Why is this bad?
    The read makes the host wait for the device (a **host sync**; a **graph
    break** in compiled code) only to turn the number back into a tensor
    operand a moment later. `.item()` is often used just to stop gradients;
    `.detach()` does that without leaving the device.

    ## Example
    ```python
    advantage = returns - value.item()
    ```

    ## Use instead
    ```python
    advantage = returns - value.detach().reshape(())
    ```

    When `t` is not plainly 0-dim (a full reduction such as `x.sum()`), the
    fix is `t.detach().reshape(())`: `.item()` also accepts shape `(1,)`,
    which would otherwise broadcast into the result's shape.

    ## Fix safety
    **Safe** when the result's dtype cannot change: the other operand has
    the value's own dtype (`x - x.mean().item()`), or it is a floating
    tensor with at least one dimension (a float32 vector minus a 0-dim
    float64 tensor is still float32, as with the Python number), or the value
    is an integer. Gradients are still cut and the shape is unchanged. A
    float16 or bfloat16 tensor then meets the value rounded to its own
    dtype, where the Python number was applied in higher precision
    (measured on CUDA: the results can differ in the last bit).

    **Unsafe** when the value divides, is divided, or is a power's base or
    exponent: Python divides a number by a tensor as the tensor's reciprocal
    times the number (a quarter of float32 results differ in the last bit,
    measured on CPU); ATen's CUDA kernels multiply by the reciprocal of a
    Python divisor; and `x ** 2` with a Python exponent squares where a
    tensor exponent takes the general pow. Also unsafe, with the reason,
    against another 0-dim tensor (a
    loss, `x.sum()`, or a parameter fixitem cannot see the shape of)
    PyTorch promotes the two dtypes, so `loss * w.item()` with a float32
    `loss` and a float64 `w` becomes float64; and an *integer* tensor
    combined with a float64 value gives float64 where the Python float gave
    the default float32. `int(t)` is left alone (it truncates).
    """

    code = "FX301"
    name = "detach-not-item"
    summary = "`.item()` used as an operand of tensor arithmetic: use `.detach()`"
    graph_breaks = ("GB0124",)
    examples = [
        Invalid(
            dedent(
                """
                import torch
                def step(returns: torch.Tensor, value: torch.Tensor):
                    advantage = returns - value.item()
                    return advantage * float(value)
                """
            ),
            fixed=dedent(
                """
                import torch
                def step(returns: torch.Tensor, value: torch.Tensor):
                    advantage = returns - value.detach().reshape(())
                    return advantage * value.detach().reshape(())
                """
            ),
            unsafe=True,  # `returns` may be 0-dim, or an integer tensor: the value's dtype would win
        ),
        Invalid(
            dedent(
                """
                import torch
                def center(x: torch.Tensor):
                    return x - x.mean().item()
                """
            ),
            fixed=dedent(
                """
                import torch
                def center(x: torch.Tensor):
                    return x - x.mean().detach()
                """
            ),
        ),
        Valid(
            dedent(
                """
                import torch
                def f(x: torch.Tensor, n: torch.Tensor):
                    return x.numel() * n.item()
                """
            )
        ),
    ]

    def check(self, ctx: FileContext, sites: list[SyncSite], claimed: set[SyncSite]) -> Iterator[Report]:
        for site in sites:
            if site in claimed or site.kind not in ("item", "float") or not site.certain:
                continue
            parent = ctx.parents.get(site.node)
            if type(parent) is not ast.BinOp or not isinstance(parent.op, ARITHMETIC):  # type: ignore[attr-defined]
                continue
            other = parent.right if parent.left is site.node else parent.left  # type: ignore[attr-defined]
            if ctx.kind(other) is not Kind.TENSOR or uncertain_tensor(ctx, other):
                continue  # a Python number there would turn into a tensor
            detached = detached_scalar(ctx, site.value)
            message = f"`{ctx.code(site.node)}` is read on the host only to be used with a tensor again"
            problems = [p for p in (
                zero_dim_dtype_problem(ctx, ctx.code(site.node), other, sources=[site.value]),
                scalar_operand_rounding(parent.op, value_on_left=parent.left is site.node),  # type: ignore[attr-defined]
            ) if p]
            safety = Safety.UNSAFE if problems else Safety.SAFE
            yield Report(site.node, message, fix=Fix({site.node: detached}, safety, "; ".join(problems), imports=()),
                         sites=[site])
