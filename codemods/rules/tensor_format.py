"""FX005: a tensor formatted into text."""

from __future__ import annotations

from ..advice import ADVICE
from ..model.context import FileContext
from ..model.provenance import Kind
from ..model.syncs import SyncSite
from ..rule import Invalid, Valid, dedent
from ..site_rule import SiteRule


class TensorFormat(SiteRule):
    """## What it does
    Reports tensors printed, logged or formatted into strings
    (`print(t)`, `f"{t:.3f}"`, `logger.info("%s", t)`, `"%.3f" % t`,
    `"{:.3f}".format(t)`, each tensor of a list, tuple or dict written in a
    print or an f-string, `print({"loss": t})`, or named there, `print(losses)`,
    where fixitem sees what it holds, and an object of a class of the file whose
    `__str__` reads device tensors, `print(confmat)`), and tensors given to a
    metric writer, which reads them itself (`writer.add_scalar("loss", loss, step)`).

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
    flushed every N steps: `fixitem apply` defers a call that is given
    `t.item()` of a one-element tensor.

    ## Fix safety
    No automatic fix.
    """

    code = "FX005"
    name = "tensor-format"
    summary = "tensor formatted into text"
    kinds = ("format", "metric")
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
        if site.kind == "metric":
            return f"tensor `{ctx.code(site.node)}` is read by the metric writer it is given to"
        if site.via is not None:
            cls = ctx.provenance.enclosing_class(site.via)
            owner = f"{cls.name}." if cls is not None else ""
            return (f"`{ctx.code(site.node)}` is formatted into text: `{owner}{site.via.name}` (line "
                    f"{ctx.position(site.via)[0]}) reads tensors")
        if ctx.kind(site.value) is not Kind.TENSOR:
            return f"the tensors `{ctx.code(site.node)}` holds are formatted into text"
        return f"tensor `{ctx.code(site.node)}` is formatted into text"

    def note(self, ctx: FileContext, site: SyncSite) -> str:
        if site.kind == "metric":
            return (
                "the writer copies it to the host at once (TensorBoard's `add_scalar`, wandb). Pass "
                f"`{ctx.code(site.node)}.item()` of a one-element tensor instead: `fixitem apply` defers such "
                "calls into an on-device buffer"
            )
        if site.via is not None:
            return (f"each time it is shown, `{site.via.name}` reads the tensors it formats, and the host waits "
                    "for the device: show it every N steps, or where the program waits anyway (the end of an epoch)")
        return ADVICE["output_tensor"]
