"""FX602: an operator of traced code whose output size depends on the data."""

from __future__ import annotations

from collections.abc import Iterator

from ..model.context import FileContext
from ..model.data_dependent import SCALARS, SHAPES, ShapeOp, captured, dynamic_shape_ops
from ..model.syncs import SyncSite
from ..rule import Invalid, Report, Rule, Valid, dedent
from .capture_scalar_outputs import ConfigFixes

FLAGS = (SCALARS, SHAPES)


class CaptureDynamicOutputShapeOps(Rule):
    """## What it does
    Reports operators in traced code whose output size depends on the values
    of a tensor: `nonzero`, `argwhere`, one-argument `torch.where(cond)`,
    `masked_select`, `unique`, `unique_consecutive`, `bincount`,
    `repeat_interleave` with a tensor of repeats (and no `output_size=`), and
    indexing with a boolean mask (`x[mask]`). Dynamo traces them once
    `torch._dynamo.config.capture_dynamic_output_shape_ops = True` (option (b)
    of the family FX601-FX603); fixitem sets `capture_scalar_outputs` with it,
    since the size such an operator gives is usually read next (`len(idx)`,
    a loop over it, a slice).

    ## Why is this bad?
    By default Dynamo breaks the graph at each of them (GB0036 "Dynamic
    shape operator"). Traced, the output size becomes a symbol and the graph
    stays whole. The operator itself still has to learn the size from the
    device: on CUDA it **waits for the device** (a host sync) whether or not
    it is compiled, and the setting does not change that.

    ## Example
    ```python
    class Keep(nn.Module):
        def forward(self, x, mask):
            return x[mask].sum()

    model = torch.compile(Keep())
    ```

    ## Use instead
    ```python
    torch._dynamo.config.capture_scalar_outputs = True
    torch._dynamo.config.capture_dynamic_output_shape_ops = True
    model = torch.compile(Keep())
    ```
    Better still, where the result can keep a fixed size: `(x * mask).sum()`,
    `torch.where(mask, x, 0)`, `nonzero_static(size=...)`,
    `repeat_interleave(..., output_size=n)`, `bincount(..., minlength=n)` with
    a known bound: no sync and no break.

    ## Fix safety
    Always **unsafe**, for the reasons of FX601: the fix sets both flags where
    the file compiles the code (a `torch._dynamo.config.patch` decorator or
    call around a compiled function; in a program, the two assignments before
    `torch.compile(model)`, which hold for everything the process compiles),
    never in a library module, where the finding names the settings. A
    backend that cannot compile what uses the data-dependent size fails at
    compile time where the graph used to break; `fixitem verify --config
    capture_scalar_outputs,capture_dynamic_output_shape_ops` shows both. Under
    `torch.compile(..., fullgraph=True)` the operator is captured already.
    """

    code = "FX602"
    name = "capture-dynamic-output-shape-ops"
    summary = "data-dependent output size in traced code (`nonzero`, `x[mask]`): `capture_dynamic_output_shape_ops` traces it"
    graph_breaks = ("GB0036",)
    examples = [
        Invalid(
            dedent(
                """
                import torch
                from torch import nn

                class Keep(nn.Module):
                    def forward(self, x):
                        return x[x > 0].sum()

                if __name__ == "__main__":
                    model = torch.compile(Keep())
                """
            ),
            fixed=dedent(
                """
                import torch
                from torch import nn

                class Keep(nn.Module):
                    def forward(self, x):
                        return x[x > 0].sum()

                if __name__ == "__main__":
                    torch._dynamo.config.capture_scalar_outputs = True
                    torch._dynamo.config.capture_dynamic_output_shape_ops = True
                    model = torch.compile(Keep())
                """
            ),
            unsafe=True,
        ),
        Invalid(
            dedent(
                """
                import torch

                def route(x: torch.Tensor, scores: torch.Tensor):
                    rows = torch.nonzero(scores > 0.5)
                    return x[rows[:, 0]]

                step = torch.compile(route)
                """
            ),
            fixed=dedent(
                """
                import torch

                def route(x: torch.Tensor, scores: torch.Tensor):
                    rows = torch.nonzero(scores > 0.5)
                    return x[rows[:, 0]]

                step = torch._dynamo.config.patch(capture_scalar_outputs=True, capture_dynamic_output_shape_ops=True)(torch.compile(route))
                """
            ),
            unsafe=True,
        ),
        # A library module: the finding names the settings.
        Invalid(
            dedent(
                """
                import torch
                from torch import nn

                class Tokens(nn.Module):
                    def forward(self, ids):
                        return torch.unique(ids)
                """
            )
        ),
        # The boolean mask written into: no data-dependent size.
        Valid(
            dedent(
                """
                import torch
                from torch import nn

                class Clip(nn.Module):
                    def forward(self, x):
                        y = x.clone()
                        y[y > 1] = 1.0
                        return torch.where(x > 0, x, 0.0)
                """
            )
        ),
        # Outside traced code there is no graph to break.
        Valid(
            dedent(
                """
                import torch

                def keep(x: torch.Tensor):
                    return x[x > 0]
                """
            )
        ),
    ]

    def check(self, ctx: FileContext, sites: list[SyncSite], claimed: set[SyncSite]) -> Iterator[Report]:
        fixes = ConfigFixes(ctx, self.code, FLAGS)
        for op in dynamic_shape_ops(ctx):
            report = self._report(ctx, op, fixes)
            if report is not None:
                yield report

    def _report(self, ctx: FileContext, op: ShapeOp, fixes: ConfigFixes) -> Report | None:
        code = ctx.code(op.node)
        first = code.splitlines()[0] + (" ..." if "\n" in code else "")
        what = "indexing with a boolean mask" if op.op == "boolean mask" else f"`{op.op}`"
        site = SyncSite(op.node, "shape", op.tensor, ctx.certainly_tensor(op.tensor), on_host=ctx.on_cpu(op.tensor))
        why = captured(ctx, op.node, SHAPES)
        if why:
            site.captured = why
            if site.on_host:
                return None  # neither a break nor a sync
            return Report(
                op.node,
                f"`{first}`: {what} gives a data-dependent size; Dynamo traces it ({why}), so no graph break, "
                "but the operator still waits for the device to learn the size",
                sites=[site],
                note=("the setting removes the graph break, not the host sync. To remove both, keep a fixed size: "
                      "a mask (`torch.where(mask, x, 0)`, `(x * mask).sum()`), `nonzero_static(size=...)`, "
                      "`output_size=` / `minlength=` with a known bound"),
            )
        fix, how = fixes.fix(op.node)
        stays = ("the tensor lives in host memory, so there is no host sync" if site.on_host
                 else "the host sync stays: the operator waits for the device to learn the size")
        message = (f"`{first}`: {what} gives a data-dependent size in traced code: "
                   f"`capture_dynamic_output_shape_ops` lets torch.compile trace it (the graph break goes, {stays})")
        if fix is not None:
            fix.reason = f"{how}. {fix.reason}"
            return Report(op.node, message, fix=fix, sites=[site])
        return Report(op.node, message, sites=[site], note=how)
