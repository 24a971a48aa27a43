"""FX002: ``t.tolist()`` copies a whole tensor to Python."""

from __future__ import annotations

from ..model.context import FileContext
from ..model.syncs import SyncSite
from ..rule import Invalid, Valid
from ..site_rule import SiteRule


class ToList(SiteRule):
    """## What it does
    Reports `t.tolist()` of a tensor, and, as for `.item()`, of a value
    that may be one (a parameter, a model's output): reported "if `x` is a
    tensor" (NumPy arrays have a `tolist()` too).

    ## Why is this bad?
    It waits for the device (a **host sync**; a **graph break** in compiled
    code) and then builds one Python object per element, which is slow for
    large tensors.

    ## Example
    ```python
    for i, score in enumerate(scores.tolist()):
        ...
    ```

    ## Use instead
    Keep the computation in tensor operations; when Python really needs the
    values, read them once, outside the step loop or the compiled region.
    Replacing many `.item()` calls by one `.tolist()` is the right move when
    the values are needed anyway (one sync instead of many).

    ## Fix safety
    No automatic fix.
    """

    code = "FX002"
    name = "tolist"
    summary = "tensor copied into a Python list"
    graph_breaks = ("GB0109", "GB0033")
    kinds = ("tolist",)
    examples = [
        Invalid("import torch\nvalues = torch.arange(4, device='cuda').tolist()\n"),
        Valid("import numpy as np\nvalues = np.arange(4).tolist()\n"),
        # yolov5's ``predn.tolist()`` of detections handed in: reported "if `predn` is a tensor".
        Invalid("def save_one_json(predn, jdict):\n    for p in predn.tolist():\n        jdict.append(p)\n"),
        # Made without ``device=``, on the default device (the CPU): reading it waits for no device.
        Valid("import torch\nvalues = torch.arange(4).tolist()\n"),
    ]

    def note(self, ctx: FileContext, site: SyncSite) -> str:
        return "read the values once, outside the step loop or compiled code, or keep the work in tensor ops"
