"""What the code alone tells about the sign of a value: may a divisor be zero?

``x / (x.norm() + 1e-6)`` never divides by zero: a norm is never negative, and
adding a positive constant keeps it away from zero. ``x / (a + 1e-6)`` may (``a``
may be ``-1e-6``). :func:`zero_divisor` says which, with the reason, so that
notes about division by zero are facts about the code.

A constant below float16's smallest subnormal (``1e-12``) rounds to zero in a
float16 tensor: ``norm + 1e-12`` is zero there where ``norm`` is.
"""

from __future__ import annotations

import libcst as cst

from .context import FileContext

# Tensor methods / torch functions whose result is never negative (for a real input).
NON_NEGATIVE_CALLS = frozenset(
    {
        "norm", "vector_norm", "matrix_norm", "abs", "absolute", "sqrt", "exp", "exp2", "square", "softplus",
        "sigmoid", "softmax", "relu", "relu6", "std", "var", "numel", "count_nonzero", "cosh", "rsqrt",
        "frobenius_norm", "nuclear_norm", "dist", "cdist", "pdist",
    }
)
# Reductions that keep "never negative".
KEEPING_SIGN = frozenset({"sum", "mean", "amax", "amin", "max", "min", "detach", "clone", "float", "double",
                          "half", "bfloat16", "to", "reshape", "view", "squeeze", "unsqueeze", "flatten",
                          "contiguous", "nansum", "nanmean", "median", "cumsum", "logsumexp"})
CLAMPS = frozenset({"clamp", "clip", "clamp_min"})
# float16's smallest positive (subnormal) value: a smaller constant is 0 there.
FLOAT16_TINIEST = 2.0**-24
MAX_DEPTH = 6


def zero_divisor(ctx: FileContext, divisor: cst.BaseExpression) -> str:
    """Why ``divisor`` may be zero: "" when the code shows it is not (a nonzero
    number; a value never negative plus a positive constant; a clamp to a
    positive minimum), otherwise a short reason."""
    found = _positive(ctx, divisor, 0)
    if found is None:
        return "may be zero"
    if found < FLOAT16_TINIEST:
        return f"can be zero in a float16 tensor (`{found:g}` rounds to 0 there)"
    return ""


def _number(expr: cst.BaseExpression) -> float | None:
    if isinstance(expr, (cst.Integer, cst.Float)):
        try:
            return float(expr.evaluated_value)
        except (OverflowError, ValueError):
            return None
    if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, (cst.Minus, cst.Plus)):
        inner = _number(expr.expression)
        if inner is None:
            return None
        return -inner if isinstance(expr.operator, cst.Minus) else inner
    return None


def _positive(ctx: FileContext, expr: cst.BaseExpression, depth: int) -> float | None:
    """A lower bound > 0 on ``abs(expr)`` the code shows (a nonzero number, ``a + c``
    with ``a`` never negative, ``clamp(min=c)``), or None."""
    if depth > MAX_DEPTH:
        return None
    number = _number(expr)
    if number is not None:
        return abs(number) or None
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Add):
        for constant, other in ((expr.right, expr.left), (expr.left, expr.right)):
            c = _number(constant)
            if c is not None and c > 0 and _non_negative(ctx, other, depth + 1):
                return c
        return None
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Multiply):
        left, right = _positive(ctx, expr.left, depth + 1), _positive(ctx, expr.right, depth + 1)
        return left * right if left is not None and right is not None else None
    if isinstance(expr, cst.Call):
        name, receiver, args = _call_parts(ctx, expr)
        if name in CLAMPS or name == "max" or name == "maximum":
            bound = _clamp_min(name, expr, receiver, args)
            if bound is not None and bound > 0:
                return bound
        if name == "sqrt" and receiver is not None:
            inner = _positive(ctx, receiver, depth + 1)
            return inner**0.5 if inner is not None and _non_negative(ctx, receiver, depth + 1) else None
        if name in ("detach", "clone", "float", "double", "to", "reshape", "view", "squeeze", "unsqueeze") and receiver is not None:
            return _positive(ctx, receiver, depth + 1)
        return None
    if isinstance(expr, cst.Name):
        value = seen_value(ctx, expr)
        return _positive(ctx, value, depth + 1) if value is not None else None
    return None


def _non_negative(ctx: FileContext, expr: cst.BaseExpression, depth: int) -> bool:
    if depth > MAX_DEPTH:
        return False
    number = _number(expr)
    if number is not None:
        return number >= 0
    if isinstance(expr, cst.BinaryOperation):
        op = expr.operator
        if isinstance(op, (cst.Add, cst.Multiply, cst.Divide)):
            return _non_negative(ctx, expr.left, depth + 1) and _non_negative(ctx, expr.right, depth + 1)
        if isinstance(op, cst.Power):
            exponent = _number(expr.right)
            return exponent is not None and exponent == int(exponent) and int(exponent) % 2 == 0
        return False
    if isinstance(expr, cst.Call):
        name, receiver, args = _call_parts(ctx, expr)
        if name in NON_NEGATIVE_CALLS:
            return True
        if name == "pow" and args:
            exponent = _number(args[-1].value)
            return exponent is not None and exponent == int(exponent) and int(exponent) % 2 == 0
        if name in KEEPING_SIGN and receiver is not None:
            return _non_negative(ctx, receiver, depth + 1)
        if name in CLAMPS or name in ("max", "maximum"):
            bound = _clamp_min(name, expr, receiver, args)
            return bound is not None and bound >= 0
        return False
    if isinstance(expr, cst.Name):
        value = seen_value(ctx, expr)
        return value is not None and _non_negative(ctx, value, depth + 1)
    return False


def _call_parts(ctx: FileContext, call: cst.Call):
    """(name, receiver or first argument, remaining arguments) of a tensor method,
    a ``torch`` function, or ``max``."""
    func = call.func
    qualified = ctx.provenance.imports.qualify(func) or ""
    if qualified.startswith("torch."):
        args = list(call.args)
        first = args[0].value if args and args[0].keyword is None else None
        return qualified.rsplit(".", 1)[-1], first, args[1:] if first is not None else args
    if isinstance(func, cst.Name) and func.value == "max" and qualified in ("", "max"):
        args = list(call.args)
        return "max", (args[0].value if args else None), args[1:]
    if isinstance(func, cst.Attribute):
        return func.attr.value, func.value, list(call.args)
    return "", None, []


def _clamp_min(name: str, call: cst.Call, receiver, args) -> float | None:
    """The lower bound a clamp or ``max`` puts on its value, when it is a number."""
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == "min":
            return _number(arg.value)
    positional = [a for a in args if a.keyword is None]
    if name in ("clamp", "clip") and positional:
        return _number(positional[0].value)
    if name in ("clamp_min", "max", "maximum") and positional:
        return _number(positional[0].value)
    return None


def seen_value(ctx: FileContext, name: cst.Name) -> cst.BaseExpression | None:
    """The value the read ``name`` sees: its only assignment, or the one that
    certainly reaches it."""
    if name not in ctx.parents:
        return None
    reaching = ctx.provenance.reaching(name)
    if isinstance(reaching, cst.BaseExpression):
        return reaching
    scope = ctx.provenance.scope_of(name)
    owner = scope.lookup(name.value)
    if owner is None:
        return None
    bindings = owner.bindings.get(name.value, [])
    if len(bindings) == 1 and bindings[0][0] == "value" and isinstance(bindings[0][1], cst.BaseExpression):
        return bindings[0][1]
    return None
