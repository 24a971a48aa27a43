"""FX005: a tensor formatted into text."""

from __future__ import annotations

from ..advice import ADVICE
from ..context import FileContext
from ..rule import Invalid, Valid, dedent
from ..site_rule import SiteRule
from ..syncs import SyncSite


class TensorFormat(SiteRule):
    """## What it does
    Reports tensors printed, logged or formatted into strings
    (`print(t)`, `f"{t:.3f}"`, `logger.info("%s", t)`, `"%.3f" % t`,
    `"{:.3f}".format(t)`).

    ## Why is this bad?
    Formatting reads every element (a **host sync**) and, in compiled code,
    `print` and logging are **graph breaks** even when the text is never
    shown.

    ## Example
    ```python
    print(f"loss {loss:.4f}")
    ```

    ## Use instead
    Log every N steps, or defer the call into an on-device buffer that is
    flushed every N steps.

    ## Fix safety
    No automatic fix.
    """

    code = "FX005"
    name = "tensor-format"
    summary = "tensor formatted into text"
    kinds = ("format",)
    examples = [
        Invalid(
            dedent(
                """
                import torch
                def f(loss: torch.Tensor):
                    print(f"loss {loss:.4f}")
                """
            )
        ),
        Invalid(
            dedent(
                """
                import torch
                def f(loss: torch.Tensor):
                    return "%.3f" % loss, "{}".format(loss)
                """
            )
        ),
        Valid(
            dedent(
                """
                def f(step: int):
                    print(f"step {step}")
                """
            )
        ),
    ]

    def message(self, ctx: FileContext, site: SyncSite) -> str:
        return f"tensor `{ctx.code(site.node)}` is formatted into text"

    def note(self, ctx: FileContext, site: SyncSite) -> str:
        return ADVICE["output_tensor"]
