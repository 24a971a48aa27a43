"""FX007: an explicit device sync, ``torch.cuda.synchronize()``."""

from __future__ import annotations

from ..advice import synchronize_advice
from ..model.context import FileContext
from ..model.syncs import SyncSite
from ..rule import Invalid, Valid, dedent
from ..site_rule import SiteRule


class ExplicitSync(SiteRule):
    """## What it does
    Reports explicit waits for the device: `torch.cuda.synchronize()`,
    `torch.accelerator.synchronize()` (and the `xpu` / `mps` / `npu`
    versions), `torch.cuda.current_stream().synchronize()`.

    ## Why is this bad?
    It reads no value, but it is a **host sync** all the same: the host
    stops until every kernel queued so far has finished, so the device runs
    dry while the host prepares the next step. Left in a training loop
    after debugging or timing, it costs every step. (Recent torch traces it
    into a compiled graph, so it is no graph break there.)

    ## Example
    ```python
    loss.backward()
    optimizer.step()
    torch.cuda.synchronize()
    ```

    ## Use instead
    Remove it: PyTorch orders the work of one stream by itself, and reading
    a value waits where it is needed. Keep it only where it brackets a time
    measurement (or time with `torch.cuda.Event(enable_timing=True)`), or
    where another stream or process needs the results.

    ## Fix safety
    No automatic fix: whether a wait is needed (timing, other streams,
    interprocess hand-off) is a decision only the author can make.
    """

    code = "FX007"
    name = "explicit-sync"
    summary = "explicit device sync"
    kinds = ("synchronize",)
    examples = [
        Invalid(
            dedent(
                """
                import torch
                def step(model, x, optimizer):
                    model(x).sum().backward()
                    optimizer.step()
                    torch.cuda.synchronize()
                """
            )
        ),
        Valid(
            dedent(
                """
                import torch
                def step(model, x, optimizer):
                    model(x).sum().backward()
                    optimizer.step()
                """
            )
        ),
    ]

    def message(self, ctx: FileContext, site: SyncSite) -> str:
        return f"`{ctx.code(site.node)}` is an explicit device sync: the host waits for all queued work"

    def note(self, ctx: FileContext, site: SyncSite) -> str:
        return synchronize_advice(ctx, site.node)
