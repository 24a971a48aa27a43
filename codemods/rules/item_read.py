"""FX001: a tensor's value read into a Python number."""

from __future__ import annotations

from ..rule import Invalid, Valid, dedent
from ..site_rule import SiteRule


class ItemRead(SiteRule):
    """## What it does
    Reports `t.item()`, `float(t)`, `int(t)` and `complex(t)` of a tensor that no more
    specific rule rewrites, and says, from how the number is used (a size,
    a log line, a running sum, a returned value...), what to do instead.

    ## Why is this bad?
    Reading a tensor's value into Python makes the host wait until the
    device has computed it (a **host sync**): the device's queue of work
    drains and it sits idle. Inside compiled code it is also a **graph
    break** (or, with `fullgraph=True`, a captured scalar read that still
    syncs).

    ## Example
    ```python
    num_tokens = mask.sum().item()
    loss = loss_sum / num_tokens
    ```

    ## Use instead
    ```python
    num_tokens = mask.sum()
    loss = loss_sum / num_tokens
    ```

    ## Fix safety
    No automatic fix: whether a 0-dim tensor can stand in for the number
    depends on every later use. `.item()` on numpy values, and on names
    fixitem can tell are not tensors, is never reported.
    """

    code = "FX001"
    name = "item-read"
    summary = "tensor value read into a Python number"
    graph_breaks = ("GB0124",)
    kinds = ("item", "float", "int", "complex")
    examples = [
        Invalid(
            dedent(
                """
                import torch
                def f(x: torch.Tensor):
                    n = x.sum().item()
                    return n
                """
            )
        ),
        Valid(
            dedent(
                """
                import numpy as np
                value = np.random.rand(1).item()
                pairs = {"a": 1}.items()
                """
            )
        ),
    ]
