"""What can be told about a tensor's dtype from the code alone.

Two questions, answered conservatively (``False`` means "not known"):

* :func:`certainly_floating`: a floating-point tensor (float16 ... float64):
  losses, ``softmax``, ``.mean()``, ``.float()``, arithmetic with one;
* :func:`certainly_integer`: an integer tensor that is not ``bool``
  (``argmax``, ``argsort``, ``nonzero``, ``topk(...).indices``, ``.long()``).

Rules use them where the dtype decides a Python type: ``float(v)`` of a
floating element is the element ``.tolist()`` gives, ``int(v)`` of an
integer one likewise; ``loss.item() * n`` added to an int total makes it a
float only when ``loss`` is floating.
"""

from __future__ import annotations

import libcst as cst

from .context import FileContext
from .provenance import Kind, is_module_class

# torch.nn.functional losses not named ``*_loss``.
FLOATING_LOSSES = frozenset({"cross_entropy", "binary_cross_entropy", "binary_cross_entropy_with_logits", "kl_div"})
# Functions and methods whose result is a real floating tensor for every input they accept
# (not ``exp``, ``mean``, ``sigmoid``...: a complex input gives a complex result).
FLOATING_OPS = frozenset(
    {
        "float", "double", "half", "bfloat16", "std", "var", "norm", "softmax", "log_softmax",
        "rand", "randn", "linspace", "logspace", "normal", "layer_norm",
    }
)
# Functions and methods whose result is an integer (int64 / int32 / int16) tensor.
INTEGER_OPS = frozenset(
    {
        "long", "int", "short", "argmax", "argmin", "argsort", "nonzero", "randperm", "randint",
        "randint_like", "bincount", "searchsorted", "bucketize", "multinomial", "count_nonzero",
    }
)
# Methods that keep the dtype of their receiver.
DTYPE_KEEPING = frozenset(
    {
        "detach", "clone", "contiguous", "cpu", "cuda", "flatten", "ravel", "view", "reshape", "squeeze",
        "unsqueeze", "t", "transpose", "permute", "abs", "neg", "flip", "roll", "expand", "repeat", "sum",
    }
)
FLOATING_DTYPES = frozenset({"float", "float16", "float32", "float64", "half", "double", "bfloat16"})
INTEGER_DTYPES = frozenset({"int", "int8", "int16", "int32", "int64", "long", "short", "uint8", "uint16", "uint32", "uint64"})
MAX_DEPTH = 8


def certainly_floating(ctx: FileContext, expr: cst.BaseExpression) -> bool:
    return _dtype(ctx, expr, 0) == "floating"


def certainly_integer(ctx: FileContext, expr: cst.BaseExpression) -> bool:
    """An integer tensor, not ``bool``: its ``.tolist()`` elements are ``int``."""
    return _dtype(ctx, expr, 0) == "integer"


def _explicit(ctx: FileContext, call: cst.Call) -> str | None:
    """The category of a ``dtype=torch.xxx`` argument, "" when there is another one."""
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == "dtype":
            name = (ctx.provenance.imports.qualify(arg.value) or "").rsplit(".", 1)[-1]
            if name in FLOATING_DTYPES:
                return "floating"
            if name in INTEGER_DTYPES:
                return "integer"
            return ""
    return None


def _dtype(ctx: FileContext, expr: cst.BaseExpression, depth: int) -> str | None:
    if depth > MAX_DEPTH:
        return None
    if isinstance(expr, cst.Call):
        explicit = _explicit(ctx, expr)
        if explicit is not None:
            return explicit or None
        func = expr.func
        qualified = ctx.provenance.imports.qualify(func) or ""
        if qualified.startswith("torch."):
            last = qualified.rsplit(".", 1)[-1]
            if qualified.startswith("torch.nn.functional.") and (last.endswith("loss") or last in FLOATING_LOSSES):
                return "floating"
            if last in FLOATING_OPS:
                return "floating"
            if last in INTEGER_OPS:
                return "integer"
            if last in DTYPE_KEEPING and expr.args:
                return _dtype(ctx, expr.args[0].value, depth + 1)
        if isinstance(func, cst.Attribute) and not qualified.startswith("torch."):
            method = func.attr.value
            if method in FLOATING_OPS:
                return "floating"
            if method in INTEGER_OPS:
                return "integer"
            if method in DTYPE_KEEPING:
                return _dtype(ctx, func.value, depth + 1)
        return "floating" if _loss_module(ctx, func) else None
    if isinstance(expr, cst.Attribute) and expr.attr.value == "indices":
        return "integer" if _sort_like(expr.value) else None
    if isinstance(expr, cst.Attribute) and expr.attr.value in ("values", "data"):
        return _dtype(ctx, expr.value, depth + 1) if expr.attr.value == "data" else None
    if isinstance(expr, cst.BinaryOperation):
        # A floating tensor with a floating or integer one, or with a Python int / float.
        if not isinstance(expr.operator, (cst.Add, cst.Subtract, cst.Multiply, cst.Divide)):
            return None
        sides = [_dtype(ctx, side, depth + 1) or _real_number(ctx, side) for side in (expr.left, expr.right)]
        if "floating" in sides and all(sides):
            return "floating"
        return None
    if isinstance(expr, cst.Subscript):
        return _dtype(ctx, expr.value, depth + 1)
    if isinstance(expr, cst.Name):
        kinds = {_dtype(ctx, value, depth + 1) for value in assigned_values(ctx, expr)}
        return kinds.pop() if len(kinds) == 1 else None
    return None


def _real_number(ctx: FileContext, expr: cst.BaseExpression) -> str | None:
    """"number" for an int or float literal, or a name or expression known to be a Python int / float."""
    if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, (cst.Minus, cst.Plus)):
        expr = expr.expression
    if isinstance(expr, (cst.Integer, cst.Float)):
        return "number"
    return "number" if ctx.kind(expr) is Kind.NUMBER and not isinstance(expr, cst.Imaginary) else None


def _sort_like(expr: cst.BaseExpression) -> bool:
    """``torch.topk(...)`` / ``x.sort(...)`` / ``x.max(dim)``: the ``.indices`` are int64."""
    if not isinstance(expr, cst.Call):
        return False
    func = expr.func
    name = func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else ""
    if name in ("topk", "sort", "kthvalue", "mode", "cummax", "cummin"):
        return True
    return name in ("max", "min", "median") and bool(expr.args)


def assigned_values(ctx: FileContext, name: cst.Name) -> list[cst.BaseExpression]:
    """The values a name is assigned in its scope; empty when it is also bound another way."""
    scope = ctx.provenance.scope_of(name).lookup(name.value)
    bindings = scope.bindings.get(name.value, []) if scope is not None else []
    values = [node for how, node in bindings if how == "value" and isinstance(node, cst.BaseExpression)]
    return values if len(values) == len(bindings) else []


def _loss_module(ctx: FileContext, func: cst.BaseExpression) -> bool:
    """``criterion`` in ``criterion(out, y)``, built from an ``nn.*Loss`` class."""
    if isinstance(func, cst.Name):
        values = assigned_values(ctx, func)
    elif isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == "self":
        cls = ctx.provenance.enclosing_class(func)
        values = ctx.provenance.class_attrs.get(cls, {}).get(func.attr.value, []) if cls is not None else []
    else:
        return False

    def is_loss(value: cst.BaseExpression) -> bool:
        if not isinstance(value, cst.Call):
            return False
        qualified = ctx.provenance.imports.qualify(value.func)
        return is_module_class(qualified, set()) and (qualified or "").endswith("Loss")

    return bool(values) and all(is_loss(v) for v in values)
