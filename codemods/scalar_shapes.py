"""Is a tensor expression plainly 0-dim? What a scalar read becomes when it stays a tensor.

``t.item()`` accepts any one-element tensor, of shape ``()`` or ``(1,)`` or
``(1, 1)``; ``t.detach()`` keeps that shape, and a ``(1,)`` tensor broadcast
against a 0-dim one makes a ``(1,)`` result where the Python number made a
0-dim one. So a read replaced by its tensor gets ``.reshape(())`` unless the
tensor is plainly 0-dim: a full reduction (``x.sum()``, ``torch.mean(x)``),
or elementwise operations on one.
"""

from __future__ import annotations

import libcst as cst

from .context import FileContext
from .effects import REDUCTIONS
from .provenance import Kind
from .tensor_values import method_call


def split_arguments(call: cst.Call) -> tuple[list[cst.Arg], dict[str, cst.Arg]] | None:
    positional: list[cst.Arg] = []
    keywords: dict[str, cst.Arg] = {}
    for arg in call.args:
        if arg.star:
            return None
        if arg.keyword is None:
            positional.append(arg)
        else:
            keywords[arg.keyword.value] = arg
    return positional, keywords


def is_none_argument(arg: cst.Arg | None) -> bool:
    return arg is None or (isinstance(arg.value, cst.Name) and arg.value.value == "None")


ELEMENTWISE = frozenset(
    {
        "float", "double", "half", "bfloat16", "long", "int", "detach", "clone", "abs", "sqrt", "exp",
        "log", "neg", "sigmoid", "tanh", "square", "to", "clamp", "clamp_min", "clamp_max", "clip",
        "reciprocal", "rsqrt", "relu", "floor", "ceil", "round", "cuda", "cpu", "log1p", "expm1",
    }
)


def plainly_zero_dim(ctx: FileContext, expr: cst.BaseExpression) -> bool:
    """Is the tensor ``expr`` certainly 0-dim (a full reduction, and elementwise operations of one)?"""
    return _zero_dim(ctx, expr, set())


def detached_scalar(ctx: FileContext, value: cst.BaseExpression) -> cst.BaseExpression:
    """``value.detach()``, with ``.reshape(())`` unless ``value`` is plainly 0-dim:
    the tensor that stands in for ``value.item()``."""
    detached = method_call(value, "detach")
    if plainly_zero_dim(ctx, value):
        return detached
    return cst.Call(func=cst.Attribute(value=detached, attr=cst.Name("reshape")), args=[cst.Arg(cst.Tuple([]))])


def _zero_dim(ctx: FileContext, expr: cst.BaseExpression, seen: set[tuple[int, str]]) -> bool:
    """Is the tensor ``expr`` plainly 0-dim (a full reduction, and elementwise
    operations of one)? Otherwise the rewrite adds ``.reshape(())``."""
    if isinstance(expr, cst.Call):
        parsed = split_arguments(expr)
        if parsed is None:
            return False
        positional, keywords = parsed
        func = expr.func
        qualified = ctx.provenance.imports.qualify(func) or ""
        if qualified.startswith("torch.") and positional:
            short = qualified.rsplit(".", 1)[-1]
            first = positional[0].value
            if short in REDUCTIONS:
                return len(positional) == 1 and set(keywords) <= {"dtype"}
            if short in ELEMENTWISE:
                rest = positional[1:] + list(keywords.values())
                return all(ctx.kind(a.value) is Kind.NUMBER or is_none_argument(a) for a in rest) and _zero_dim(ctx, first, seen)
            if short == "tensor":
                return ctx.kind(first) is Kind.NUMBER
            return False
        if isinstance(func, cst.Attribute) and ctx.kind(func.value) is Kind.TENSOR:
            method = func.attr.value
            if method in REDUCTIONS:
                return not positional and set(keywords) <= {"dtype"}
            if method in ELEMENTWISE:
                args = positional + list(keywords.values())
                fine = all(ctx.kind(a.value) is not Kind.TENSOR or _zero_dim(ctx, a.value, seen) for a in args)
                return fine and _zero_dim(ctx, func.value, seen)
        return False
    if isinstance(expr, cst.BinaryOperation):
        sides = [s for s in (expr.left, expr.right) if ctx.kind(s) is not Kind.NUMBER]
        return bool(sides) and all(_zero_dim(ctx, s, seen) for s in sides)
    if isinstance(expr, cst.UnaryOperation):
        return _zero_dim(ctx, expr.expression, seen)
    if isinstance(expr, cst.Name):
        scope = ctx.provenance.scope_of(expr).lookup(expr.value)
        if scope is None or (id(scope), expr.value) in seen:
            return False
        bindings = scope.bindings[expr.value]
        if len(bindings) != 1 or bindings[0][0] != "value" or not isinstance(bindings[0][1], cst.BaseExpression):
            return False
        return _zero_dim(ctx, bindings[0][1], seen | {(id(scope), expr.value)})
    return False

