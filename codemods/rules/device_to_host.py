"""FX003: ``t.cpu()`` / ``t.numpy()`` / ``t.to("cpu")``."""

from __future__ import annotations

from ..model.context import FileContext
from ..model.syncs import SyncSite
from ..rule import Invalid, Valid, dedent
from ..site_rule import SiteRule


class DeviceToHost(SiteRule):
    """## What it does
    Reports copies of a tensor to host memory: `t.cpu()`, `t.numpy()`,
    `t.to("cpu")`, also of a module's output (`model(x).cpu()` where `model`
    is a parameter or a local: reported "if `model(x)` is a tensor"). A
    tensor already in host memory (`torch.from_numpy(a).numpy()`) is not
    copied, and not reported, in compiled code or not.

    Also `torch.tensor(xs)` (or `torch.as_tensor`) of a list of tensors,
    such as `torch.tensor(losses)` or `torch.tensor(xyxy)` of
    `for *xyxy, conf, cls in det`: it builds a new tensor in host memory
    (without `device=`) from the value of each element, read one by one.

    ## Why is this bad?
    On an accelerator the copy waits for the value (a **host sync**). It
    costs no graph break: Dynamo traces `.cpu()` and `.to("cpu")` into the
    graph, and `.numpy()` as a NumPy array (measured on torch 2.13).

    ## Example
    ```python
    preds.append(logits.argmax(-1).cpu().numpy())
    ```

    ## Use instead
    Keep the results on the device and concatenate them; copy once at the
    end of the epoch (`torch.cat(preds).cpu()`), or use
    `t.to("cpu", non_blocking=True)` into pinned memory and read it later,
    once the device is done with it (a `torch.cuda.Event` recorded after the
    copy, and its `synchronize()` before the read): read at once, the host
    buffer may not hold the values yet. For a list of tensors,
    `torch.stack(xs)` makes the tensor on the device, reading nothing.

    ## Fix safety
    No automatic fix.
    """

    code = "FX003"
    name = "device-to-host"
    summary = "tensor copied to host memory"
    kinds = ("cpu", "numpy", "build")
    examples = [
        Invalid(
            dedent(
                """
                import torch
                def f(x: torch.Tensor):
                    return x.cpu().numpy()
                """
            )
        ),
        Invalid(
            dedent(
                """
                import torch
                def evaluate(model, loader):
                    return [model(x).cpu() for x in loader]
                """
            )
        ),
        Invalid(
            dedent(
                """
                import torch
                def evaluate(model, loader):
                    losses = [torch.nn.functional.mse_loss(model(x), y) for x, y in loader]
                    return torch.tensor(losses).mean()
                """
            )
        ),
        Valid(
            dedent(
                """
                import torch
                def boxes(predn):
                    # ``predn.tolist()``'s rows hold Python numbers: ``xyxy`` is a list of them.
                    return [torch.tensor(xyxy) for *xyxy, conf, cls in predn.tolist()]
                """
            )
        ),
        Valid(
            dedent(
                """
                import torch
                model = torch.nn.Linear(2, 2)
                model.cpu()
                """
            )
        ),
        Valid(
            dedent(
                """
                import numpy as np
                import torch
                mask = torch.from_numpy(np.ones(3)).cpu().numpy()
                """
            )
        ),
    ]

    def message(self, ctx: FileContext, site: SyncSite) -> str:
        if site.kind == "build":
            return f"`{ctx.code(site.node)}` reads each tensor of `{ctx.code(site.value)}` on the host"
        return super().message(ctx, site)

    def note(self, ctx: FileContext, site: SyncSite) -> str:
        if site.kind == "build":
            return (f"`torch.stack({ctx.code(site.value)})` makes the tensor on the device, reading nothing; "
                    "copy it once where the host needs the values")
        return ("keep results on the device and copy once (e.g. per epoch); a copy made with non_blocking=True "
                "may be read only after the device is done with it (a CUDA event's synchronize()), so it helps "
                "only where the value is needed later, not by the next line")
