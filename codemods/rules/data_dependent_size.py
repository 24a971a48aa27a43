"""FX006: a tensor's value used as a Python size or index."""

from __future__ import annotations

from ..advice import size_advice, usage
from ..model.context import FileContext
from ..model.syncs import SyncSite
from ..rule import Invalid, Valid, dedent
from ..site_rule import SiteRule


class DataDependentSize(SiteRule):
    """## What it does
    Reports tensor values used as Python sizes, slice bounds or indices:
    `x[:n.item()]`, `range(t.item())`, `torch.zeros(n.item())`,
    `x.view(b, n.item())`.

    ## Why is this bad?
    A size must be a Python integer, so it is read from the device (a
    **host sync**); inside compiled code the shape depends on data, which is
    a **graph break** or a recompilation per value.

    ## Example
    ```python
    lengths = mask.sum(-1)
    x = x[:, : lengths.max().item()]
    ```

    ## Use instead
    Compute the size in the data pipeline (or pass it in as a Python int);
    use masks instead of slicing to a data-dependent length; inside compiled
    code, `torch._check(n <= x.size(0))` bounds an unbacked size so that it
    compiles without a break.

    ## Fix safety
    No automatic fix.
    """

    code = "FX006"
    name = "data-dependent-size"
    summary = "tensor value used as a Python size or index"
    graph_breaks = ("GB0124", "GB0036")
    kinds = ("item", "int", "size")
    examples = [
        Invalid(
            dedent(
                """
                import torch
                def f(x: torch.Tensor, n: torch.Tensor):
                    return x[: n.item()]
                """
            )
        ),
        Valid(
            dedent(
                """
                import torch
                def f(x: torch.Tensor, n: int):
                    return x[:n]
                """
            )
        ),
    ]

    def wants(self, ctx: FileContext, site: SyncSite) -> bool:
        return site.kind == "size" or usage(ctx, site.node) == "size"

    def message(self, ctx: FileContext, site: SyncSite) -> str:
        return f"`{ctx.code(site.node)}` is a tensor value used as a Python size or index"

    def note(self, ctx: FileContext, site: SyncSite) -> str:
        return size_advice(ctx, site.node)
