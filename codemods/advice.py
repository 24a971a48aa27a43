"""How a value read from a tensor is used, and what to do about it by hand."""

from __future__ import annotations

import libcst as cst

from .context import FileContext
from .syncs import LOG_METHODS

SIZE_FUNCTIONS = frozenset(
    {
        "range", "zeros", "ones", "empty", "full", "arange", "randn", "rand", "randint", "eye",
        "linspace", "view", "reshape", "expand", "repeat", "narrow", "new_zeros", "new_ones",
        "new_empty", "new_full", "split", "chunk", "tile", "unflatten", "topk", "roll",
    }
)


def usage(ctx: FileContext, node: cst.CSTNode) -> str:
    """``size``, ``output``, ``accumulate``, ``condition``, ``returned``, ``stored`` or ``other``."""
    child = node
    for parent in ctx.ancestors(node):
        if isinstance(parent, cst.Slice) or isinstance(parent, cst.SubscriptElement):
            return "size"
        if isinstance(parent, cst.Call):
            func = parent.func
            name = func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else ""
            if name == "print" or (isinstance(func, cst.Attribute) and name in LOG_METHODS):
                return "output"
            if name in ("add_scalar", "add_scalars", "log", "set_postfix", "set_description", "log_metrics"):
                return "output"
            if name in SIZE_FUNCTIONS and child is not func:
                return "size"
        if isinstance(parent, (cst.FormattedString, cst.FormattedStringExpression)):
            return "output"
        if isinstance(parent, cst.AugAssign):
            return "accumulate"
        if isinstance(parent, (cst.If, cst.While, cst.Assert, cst.IfExp, cst.BooleanOperation)):
            return "condition"
        if isinstance(parent, cst.Return):
            return "returned"
        if isinstance(parent, (cst.Assign, cst.AnnAssign, cst.Dict, cst.List, cst.Tuple)):
            return "stored"
        if isinstance(parent, cst.BaseStatement):
            break
        child = parent
    return "other"


ADVICE = {
    "size": (
        "the value is used as a Python size or index, so it must reach the host. Compute it in the "
        "data pipeline or pass it in as a Python int; inside compiled code, `torch._check` bounds let an "
        "unbacked size compile without a break"
    ),
    "output": (
        "printing or logging every step waits for the device each time. Log every N steps, or let "
        "fixitem defer the call into an on-device buffer"
    ),
    "accumulate": (
        "summing Python numbers reads every step. Accumulate on the device "
        "(`total += x.detach()`, float64 for exact sums) and read the total once"
    ),
    "condition": (
        "Python control flow needs the value. Select with `torch.where` when both branches only compute "
        "tensors, use `torch.cond` when they are tensor functions of the same output shape, or move the "
        "check out of the compiled code"
    ),
    "returned": (
        "returning a Python number forces the read here. Return the tensor (`.detach()`) and convert "
        "where the number is needed, once"
    ),
    "stored": (
        "keep the value as a 0-dim tensor if what consumes it accepts one (tensor arithmetic, "
        "`masked_fill`, `torch.where`); read it once where a Python number is really needed"
    ),
    "other": (
        "keep the value as a 0-dim tensor if what consumes it accepts one; read it once where a Python "
        "number is really needed"
    ),
}


def advice(ctx: FileContext, node: cst.CSTNode) -> str:
    return ADVICE[usage(ctx, node)]
