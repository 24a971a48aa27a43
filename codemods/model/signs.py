"""What the code alone tells about the sign of a value: may a divisor be zero?

``x / (x.norm() + 1e-6)`` never divides by zero: a norm is never negative, and
adding a positive constant keeps it away from zero; nor does ``x / len(data)`` of a
batch a loop takes from a loader or a list of batches (one holds a sample at least). ``x / (a + 1e-6)`` may (``a``
may be ``-1e-6``). :func:`zero_divisor` says which, with the reason, so that
notes about division by zero are facts about the code.

A constant below float16's smallest subnormal (``1e-12``) rounds to zero in a
float16 tensor: ``norm + 1e-12`` is zero there where ``norm`` is.
"""

from __future__ import annotations

import ast

from .context import FileContext
from .scalar_shapes import arg_keyword, arg_value, call_arguments

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


def zero_divisor(ctx: FileContext, divisor: ast.expr) -> str:
    """Why ``divisor`` may be zero: "" when the code shows it is not (a nonzero
    number; a value never negative plus a positive constant; a clamp to a
    positive minimum), otherwise a short reason."""
    found = _positive(ctx, divisor, 0)
    if found is None:
        return "may be zero"
    if found < FLOAT16_TINIEST:
        return f"can be zero in a float16 tensor (`{found:g}` rounds to 0 there)"
    return ""


def _number(expr: ast.AST | None) -> float | None:
    t = type(expr)
    if t is ast.Constant:
        value = expr.value  # type: ignore[union-attr]
        if type(value) not in (int, float):  # not ``True``, a string, ``None``, ``1j``
            return None
        try:
            return float(value)
        except (OverflowError, ValueError):
            return None
    if t is ast.UnaryOp and type(expr.op) in (ast.USub, ast.UAdd):  # type: ignore[union-attr]
        inner = _number(expr.operand)  # type: ignore[union-attr]
        if inner is None:
            return None
        return -inner if type(expr.op) is ast.USub else inner  # type: ignore[union-attr]
    return None


def _positive(ctx: FileContext, expr: ast.expr, depth: int) -> float | None:
    """A lower bound > 0 on ``abs(expr)`` the code shows (a nonzero number, ``a + c``
    with ``a`` never negative, ``clamp(min=c)``), or None."""
    if depth > MAX_DEPTH:
        return None
    number = _number(expr)
    if number is not None:
        return abs(number) or None
    t = type(expr)
    if t is ast.BinOp and type(expr.op) is ast.Add:  # type: ignore[attr-defined]
        for constant, other in ((expr.right, expr.left), (expr.left, expr.right)):  # type: ignore[attr-defined]
            c = _number(constant)
            if c is not None and c > 0 and _non_negative(ctx, other, depth + 1):
                return c
        return None
    if t is ast.BinOp and type(expr.op) is ast.Mult:  # type: ignore[attr-defined]
        left, right = _positive(ctx, expr.left, depth + 1), _positive(ctx, expr.right, depth + 1)  # type: ignore[attr-defined]
        return left * right if left is not None and right is not None else None
    if t is ast.Call:
        if _batch_length(ctx, expr):  # type: ignore[arg-type]
            return 1.0
        name, receiver, args = _call_parts(ctx, expr)  # type: ignore[arg-type]
        if name in CLAMPS or name == "max" or name == "maximum":
            bound = _clamp_min(name, expr, receiver, args)  # type: ignore[arg-type]
            if bound is not None and bound > 0:
                return bound
        if name == "sqrt" and receiver is not None:
            inner = _positive(ctx, receiver, depth + 1)
            return inner**0.5 if inner is not None and _non_negative(ctx, receiver, depth + 1) else None
        if name in ("detach", "clone", "float", "double", "to", "reshape", "view", "squeeze", "unsqueeze") and receiver is not None:
            return _positive(ctx, receiver, depth + 1)
        return None
    if t is ast.Name:
        value = seen_value(ctx, expr)  # type: ignore[arg-type]
        return _positive(ctx, value, depth + 1) if value is not None else None
    return None


def _batch_length(ctx: FileContext, call: ast.Call) -> bool:
    """``len(data)`` of a batch a loop takes (``for data, target in loader``: a tensor bound
    only by loops): a loader, or a list of batches, never yields a batch without a sample."""
    func = call.func
    if type(func) is not ast.Name or func.id != "len" or len(call.args) != 1 or call.keywords:  # type: ignore[attr-defined]
        return False
    batch = call.args[0]
    if type(batch) is not ast.Name or ctx.provenance.scope_of(func).lookup("len") is not None:
        return False
    scope = ctx.provenance.scope_of(batch).lookup(batch.id)  # type: ignore[attr-defined]
    bindings = scope.bindings.get(batch.id, []) if scope is not None else []  # type: ignore[attr-defined]
    return bool(bindings) and all(how in ("iter", "iter_item") for how, _ in bindings) and ctx.certainly_tensor(batch)


def _non_negative(ctx: FileContext, expr: ast.expr, depth: int) -> bool:
    if depth > MAX_DEPTH:
        return False
    number = _number(expr)
    if number is not None:
        return number >= 0
    t = type(expr)
    if t is ast.BinOp:
        op = type(expr.op)  # type: ignore[attr-defined]
        if op in (ast.Add, ast.Mult, ast.Div):
            return _non_negative(ctx, expr.left, depth + 1) and _non_negative(ctx, expr.right, depth + 1)  # type: ignore[attr-defined]
        if op is ast.Pow:
            exponent = _number(expr.right)  # type: ignore[attr-defined]
            return exponent is not None and exponent == int(exponent) and int(exponent) % 2 == 0
        return False
    if t is ast.Call:
        name, receiver, args = _call_parts(ctx, expr)  # type: ignore[arg-type]
        if name in NON_NEGATIVE_CALLS:
            return True
        if name == "pow" and args:
            exponent = _number(arg_value(args[-1]))
            return exponent is not None and exponent == int(exponent) and int(exponent) % 2 == 0
        if name in KEEPING_SIGN and receiver is not None:
            return _non_negative(ctx, receiver, depth + 1)
        if name in CLAMPS or name in ("max", "maximum"):
            bound = _clamp_min(name, expr, receiver, args)  # type: ignore[arg-type]
            return bound is not None and bound >= 0
        return False
    if t is ast.Name:
        value = seen_value(ctx, expr)  # type: ignore[arg-type]
        return value is not None and _non_negative(ctx, value, depth + 1)
    return False


def _call_parts(ctx: FileContext, call: ast.Call):
    """(name, receiver or first argument, remaining arguments) of a tensor method,
    a ``torch`` function, or ``max``. The arguments are those of
    :func:`~codemods.scalar_shapes.call_arguments` (an expression, ``*x``'s ``Starred``,
    or an ``ast.keyword``)."""
    func = call.func
    qualified = ctx.provenance.imports.qualify(func) or ""
    if qualified.startswith("torch."):
        args = call_arguments(call)
        first = arg_value(args[0]) if args and arg_keyword(args[0]) is None else None
        return qualified.rsplit(".", 1)[-1], first, args[1:] if first is not None else args
    if type(func) is ast.Name and func.id == "max" and qualified in ("", "max"):
        args = call_arguments(call)
        return "max", (arg_value(args[0]) if args else None), args[1:]
    if type(func) is ast.Attribute:
        return func.attr, func.value, call_arguments(call)
    return "", None, []


def _clamp_min(name: str, call: ast.Call, receiver, args) -> float | None:
    """The lower bound a clamp or ``max`` puts on its value, when it is a number."""
    for keyword in call.keywords:
        if keyword.arg == "min":
            return _number(keyword.value)
    positional = [a for a in args if arg_keyword(a) is None]
    if name in ("clamp", "clip") and positional:
        return _number(arg_value(positional[0]))
    if name in ("clamp_min", "max", "maximum") and positional:
        return _number(arg_value(positional[0]))
    return None


def seen_value(ctx: FileContext, name: ast.Name) -> ast.expr | None:
    """The value the read ``name`` sees: its only assignment, or the one that
    certainly reaches it."""
    if name not in ctx.parents:
        return None
    reaching = ctx.provenance.reaching(name)
    if isinstance(reaching, ast.expr):
        return reaching
    scope = ctx.provenance.scope_of(name)
    owner = scope.lookup(name.id)
    if owner is None:
        return None
    bindings = owner.bindings.get(name.id, [])
    if len(bindings) == 1 and bindings[0][0] == "value" and isinstance(bindings[0][1], ast.expr):
        return bindings[0][1]
    return None
