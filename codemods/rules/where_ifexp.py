"""FX102: a conditional expression decided by a tensor's value."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from ..context import FileContext
from ..provenance import Kind
from ..rule import Fix, Invalid, Report, Rule, Safety, Valid, dedent
from ..syncs import SyncSite
from ..tensor_values import (
    UNKNOWN_VALUE_NOTE,
    NotConvertible,
    convert_condition,
    fit_line,
    purity,
    sites_within,
    torch_call,
)


class WhereIfExp(Rule):
    """## What it does
    Finds conditional expressions (`a if cond else b`) whose condition reads
    a tensor's value and rewrites them into `torch.where(cond, a, b)`.

    ## Why is this bad?
    Choosing between `a` and `b` in Python needs the condition's value on
    the host: a **host sync**, and a **graph break** in compiled code.
    `torch.where` selects on the device.

    ## Example
    ```python
    scale = x * 0.5 if x.norm().item() > 10 else x
    ```

    ## Use instead
    ```python
    scale = torch.where(x.norm() > 10, x * 0.5, x)
    ```

    ## Fix safety
    **Safe** when both values are tensors computed without side effects
    (see FX101 for the full list of what is pure). **Unsafe** when a value is
    a Python number (the result becomes a 0-dim tensor, float32 by default,
    where the original gave a Python number) or may have side effects,
    random numbers or NaN gradients, because both values are now computed.
    """

    code = "FX102"
    name = "where-ifexp"
    summary = "conditional expression on a tensor value: select with `torch.where` instead"
    examples = [
        Invalid(
            dedent(
                """
                import torch
                def f(x: torch.Tensor):
                    return x * 0.5 if x.norm().item() > 10 else x
                """
            ),
            fixed=dedent(
                """
                import torch
                def f(x: torch.Tensor):
                    return torch.where(x.norm() > 10, x * 0.5, x)
                """
            ),
        ),
        Invalid(
            dedent(
                """
                import torch
                def f(x: torch.Tensor):
                    scale = 0.5 if float(x.max()) > 1 else 1.0
                    return x * scale
                """
            ),
            fixed=dedent(
                """
                import torch
                def f(x: torch.Tensor):
                    scale = torch.where(x.max() > 1, 0.5, 1.0)
                    return x * scale
                """
            ),
            unsafe=True,
        ),
        Valid(
            dedent(
                """
                import torch
                def f(x: torch.Tensor, training: bool):
                    return x * 0.5 if training else x
                """
            )
        ),
    ]

    def check(self, ctx: FileContext, sites: list[SyncSite], claimed: set[SyncSite]) -> Iterator[Report]:
        for node in ctx.nodes(cst.IfExp):
            assert isinstance(node, cst.IfExp)
            test_sites = [s for s in sites_within(ctx, sites, node.test) if s not in claimed]
            if not test_sites:
                continue
            message = f"`... if {ctx.code(node.test)} else ...` reads a tensor value on the host"
            try:
                condition = convert_condition(ctx, node.test)
            except NotConvertible as exc:
                yield Report(node, message, sites=test_sites, note=f"no fix: {exc}")
                continue
            if condition is None:
                yield Report(node, message, sites=test_sites, note=UNKNOWN_VALUE_NOTE)
                continue
            containers = [v for v in (node.body, node.orelse) if ctx.kind(v) in (Kind.OTHER, Kind.MODULE, Kind.NUMPY)]
            if containers:
                note = f"no fix: `{ctx.code(containers[0])}` is neither a tensor nor a number"
                yield Report(node, message, sites=test_sites, note=note)
                continue
            blocking = [v for v in (purity(ctx, node.body), purity(ctx, node.orelse)) if v.blocking]
            if blocking:
                yield Report(node, message, sites=test_sites, note=f"no fix: {blocking[0].reason}")
                continue
            reasons = []
            for value in (node.body, node.orelse):
                verdict = purity(ctx, value)
                if not verdict.safe:
                    reasons.append(verdict.reason)
                kind = ctx.kind(value)
                if kind is Kind.NUMBER:
                    reasons.append(f"`{ctx.code(value)}` is a Python number: the result becomes a 0-dim tensor")
                elif kind is not Kind.TENSOR:
                    reasons.append(f"`{ctx.code(value)}` is not known to be a tensor: the result becomes a tensor")
            new = torch_call(ctx, "where", condition.expr, node.body, node.orelse)
            new = fit_line(ctx, node, new)
            safety = Safety.UNSAFE if reasons else Safety.SAFE
            yield Report(node, message, fix=Fix({node: new}, safety, "; ".join(dict.fromkeys(reasons))), sites=test_sites)
