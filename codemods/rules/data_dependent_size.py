"""FX006: a tensor's value used as a Python size or index."""

from __future__ import annotations

from collections.abc import Iterator

from ..advice import size_advice, usage
from ..model.context import FileContext
from ..model.data_dependent import SCALARS, scalar_read
from ..model.syncs import SyncSite
from ..rule import Invalid, Report, Valid, dedent, unclaimed
from ..site_rule import SiteRule
from .capture_scalar_outputs import ConfigFixes, traced_read_report


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
    Outside traced code, no automatic fix. In traced code, FX601's
    configuration fix where the file compiles the code (always **unsafe**;
    see `fixitem rule FX601`).
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
        # In traced code, compiled by the program: the configuration fix of FX601.
        Invalid(
            dedent(
                """
                import torch

                @torch.compile
                def head(x: torch.Tensor, n: torch.Tensor):
                    return x[: n.item()]
                """
            ),
            fixed=dedent(
                """
                import torch

                @torch._dynamo.config.patch(capture_scalar_outputs=True)
                @torch.compile
                def head(x: torch.Tensor, n: torch.Tensor):
                    return x[: n.item()]
                """
            ),
            unsafe=True,
        ),
    ]

    def check(self, ctx: FileContext, sites: list[SyncSite], claimed: set[SyncSite]) -> Iterator[Report]:
        fixes = ConfigFixes(ctx, self.code, (SCALARS,))
        rest = []
        for site in unclaimed(sites, claimed, *self.kinds):
            if not self.wants(ctx, site):
                continue
            if site.kind in ("item", "int") and ctx.in_traced_code(site.node):
                read = scalar_read(ctx, site.node, site.value, site.kind)
                if read.traced_uses:
                    report = traced_read_report(ctx, site, read, fixes)
                    if report is None:
                        claimed.add(site)  # traced already, and it reads host memory: nothing left to report
                    else:
                        yield report
                    continue
            rest.append(site)
        yield from super().check(ctx, rest, claimed)

    def wants(self, ctx: FileContext, site: SyncSite) -> bool:
        return site.kind == "size" or usage(ctx, site.node) == "size"

    def message(self, ctx: FileContext, site: SyncSite) -> str:
        return f"`{ctx.code(site.node)}` is a tensor value used as a Python size or index"

    def note(self, ctx: FileContext, site: SyncSite) -> str:
        return size_advice(ctx, site.node)
