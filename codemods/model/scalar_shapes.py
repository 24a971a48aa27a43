"""Is a tensor expression plainly 0-dim, or certainly not? What a scalar read becomes when it stays a tensor.

``t.item()`` accepts any one-element tensor, of shape ``()`` or ``(1,)`` or
``(1, 1)``; ``t.detach()`` keeps that shape, and a ``(1,)`` tensor broadcast
against a 0-dim one makes a ``(1,)`` result where the Python number made a
0-dim one. So a read replaced by its tensor gets ``.reshape(())`` unless the
tensor is plainly 0-dim: a full reduction (``x.sum()``, ``torch.mean(x)``),
or elementwise operations on one.

The opposite fact, :func:`certainly_dimensioned` (the tensor has at least
one dimension), decides how a 0-dim tensor standing where a Python number
was promotes against it (see :func:`codemods.dtypes.zero_dim_dtype_problem`).
"""

from __future__ import annotations

import ast

from .. import gen
from .context import FileContext
from .provenance import Kind
from .reductions import REDUCTIONS

# -- the arguments of a call, as libcst listed them -----------------------------------------------
#
# libcst kept a call's arguments in one ordered list of ``Arg(value, keyword, star)``;
# ``ast`` splits them into ``args`` (``*x`` a ``Starred``) and ``keywords`` (``**x`` a
# ``keyword`` without ``arg``). An argument is here the node that plays libcst's ``Arg``:
# the expression of a positional argument, the ``Starred`` of ``*x``, the ``ast.keyword``
# of ``k=v`` and ``**x``.


def call_arguments(call: ast.Call) -> list[ast.AST]:
    """The arguments of ``call`` in source order (libcst's ``call.args``)."""
    if call.args and call.keywords:
        return sorted([*call.args, *call.keywords], key=lambda n: (n.lineno, n.col_offset))
    return [*call.args, *call.keywords]


def arg_value(arg: ast.AST) -> ast.expr:
    """libcst's ``arg.value``."""
    t = type(arg)
    return arg.value if t is ast.keyword or t is ast.Starred else arg  # type: ignore[attr-defined,return-value]


def arg_keyword(arg: ast.AST) -> str | None:
    """libcst's ``arg.keyword.value`` (None for a positional argument, ``*x`` and ``**x``)."""
    return arg.arg if type(arg) is ast.keyword else None  # type: ignore[attr-defined]


def arg_star(arg: ast.AST) -> str:
    """libcst's ``arg.star``: ``"*"``, ``"**"`` or ``""``."""
    t = type(arg)
    if t is ast.Starred:
        return "*"
    if t is ast.keyword and arg.arg is None:  # type: ignore[attr-defined]
        return "**"
    return ""


def split_arguments(call: ast.Call) -> tuple[list[ast.expr], dict[str, ast.expr]] | None:
    """The values of the positional arguments and of the keyword arguments (by keyword);
    None when the call unpacks ``*args`` or ``**kwargs``."""
    positional: list[ast.expr] = []
    for arg in call.args:
        if type(arg) is ast.Starred:
            return None
        positional.append(arg)
    keywords: dict[str, ast.expr] = {}
    for keyword in call.keywords:
        if keyword.arg is None:
            return None
        keywords[keyword.arg] = keyword.value
    return positional, keywords


def is_none_argument(arg: ast.AST | None) -> bool:
    """No argument, or ``None`` passed (``arg``: an argument's value; an ``ast.keyword`` works too)."""
    if type(arg) is ast.keyword:
        arg = arg.value  # type: ignore[union-attr]
    return arg is None or (type(arg) is ast.Constant and arg.value is None)  # type: ignore[union-attr]


def _file_node(value):
    """``value`` (a node of the file, or new code built around one) as the node to analyse."""
    while isinstance(value, gen.Paren):
        value = value.value
    if isinstance(value, (gen.Source, gen.Splice)):
        return value.node
    return value


def _integer_literal(node: ast.AST) -> bool:
    """libcst's ``Integer``: an int literal (``True`` is a name there)."""
    return type(node) is ast.Constant and type(node.value) is int  # type: ignore[attr-defined]


ELEMENTWISE = frozenset(
    {
        "float", "double", "half", "bfloat16", "long", "int", "detach", "clone", "abs", "sqrt", "exp",
        "log", "neg", "sigmoid", "tanh", "square", "to", "clamp", "clamp_min", "clamp_max", "clip",
        "reciprocal", "rsqrt", "relu", "floor", "ceil", "round", "cuda", "cpu", "log1p", "expm1",
    }
)


def plainly_zero_dim(ctx: FileContext, expr: ast.expr) -> bool:
    """Is the tensor ``expr`` certainly 0-dim (a full reduction, and elementwise operations of one)?"""
    return _zero_dim(ctx, _file_node(expr), set())


def detached_scalar(ctx: FileContext, value: ast.expr) -> gen.Node:
    """``value.detach()``, with ``.reshape(())`` unless ``value`` is plainly 0-dim:
    the tensor that stands in for ``value.item()`` (new code, :mod:`codemods.gen`)."""
    detached = gen.method_call(ctx, value, "detach")
    if plainly_zero_dim(ctx, value):
        return detached
    return gen.Call(gen.Attribute(detached, "reshape"), [gen.Tuple([])])


def _zero_dim(ctx: FileContext, expr: ast.expr, seen: set[tuple[int, str]]) -> bool:
    """Is the tensor ``expr`` plainly 0-dim (a full reduction, and elementwise
    operations of one)? Otherwise the rewrite adds ``.reshape(())``."""
    t = type(expr)
    if t is ast.Call:
        parsed = split_arguments(expr)  # type: ignore[arg-type]
        if parsed is None:
            return False
        positional, keywords = parsed
        func = expr.func  # type: ignore[attr-defined]
        qualified = ctx.provenance.imports.qualify(func) or ""
        if qualified.startswith("torch.") and positional:
            short = qualified.rsplit(".", 1)[-1]
            first = positional[0]
            if short in REDUCTIONS:
                return len(positional) == 1 and set(keywords) <= {"dtype"}
            if short in ELEMENTWISE:
                rest = positional[1:] + list(keywords.values())
                return all(ctx.kind(a) is Kind.NUMBER or is_none_argument(a) for a in rest) and _zero_dim(ctx, first, seen)
            if short == "tensor":
                return ctx.kind(first) is Kind.NUMBER
            return False
        if type(func) is ast.Attribute and ctx.kind(func.value) is Kind.TENSOR:
            method = func.attr
            if method in REDUCTIONS:
                return not positional and set(keywords) <= {"dtype"}
            if method in ELEMENTWISE:
                args = positional + list(keywords.values())
                fine = all(ctx.kind(a) is not Kind.TENSOR or _zero_dim(ctx, a, seen) for a in args)
                return fine and _zero_dim(ctx, func.value, seen)
        return False
    if t is ast.BinOp:
        sides = [s for s in (expr.left, expr.right) if ctx.kind(s) is not Kind.NUMBER]  # type: ignore[attr-defined]
        return bool(sides) and all(_zero_dim(ctx, s, seen) for s in sides)
    if t is ast.UnaryOp:
        return _zero_dim(ctx, expr.operand, seen)  # type: ignore[attr-defined]
    if t is ast.Name:
        name = expr.id  # type: ignore[attr-defined]
        scope = ctx.provenance.scope_of(expr).lookup(name)
        if scope is None or (id(scope), name) in seen:
            return False
        bindings = scope.bindings[name]
        if len(bindings) != 1 or bindings[0][0] != "value" or not isinstance(bindings[0][1], ast.expr):
            return False
        return _zero_dim(ctx, bindings[0][1], seen | {(id(scope), name)})
    return False


# Results with at least one dimension whatever their input: ``torch.arange(n)``,
# ``x.flatten()`` (a 0-dim input gives shape ``(1,)``), ``torch.stack``.
ALWAYS_DIMENSIONED = frozenset(
    {
        "arange", "linspace", "logspace", "randperm", "eye", "stack", "cat", "concat", "concatenate",
        "flatten", "ravel", "unsqueeze", "atleast_1d", "atleast_2d", "atleast_3d", "nonzero",
        "hstack", "vstack", "one_hot", "bincount", "unique", "diag_embed", "tril_indices", "triu_indices",
    }
)
# Creation functions whose positional arguments are the size: dimensioned when one is given.
SIZED = frozenset({"zeros", "ones", "empty", "rand", "randn", "full", "randint"})
# Results with the shape of their (first) tensor input.
SHAPE_KEEPING = ELEMENTWISE | frozenset(
    {
        "softmax", "log_softmax", "gelu", "silu", "mish", "softplus", "elu", "leaky_relu", "dropout",
        "layer_norm", "group_norm", "batch_norm", "rms_norm", "normalize", "contiguous", "masked_fill",
        "where", "sign", "sin", "cos", "erf", "pow", "mul", "add", "sub", "div", "maximum", "minimum",
        "lerp", "type_as", "zeros_like", "ones_like", "empty_like", "full_like", "rand_like", "randn_like",
        "cumsum", "cumprod", "flip", "roll", "t", "transpose", "permute", "expand_as", "view_as",
        "reshape_as", "half", "bfloat16", "data",
    }
)
# Modules whose output has at least one dimension (an ``nn.Linear`` maps ``(n,)`` to ``(m,)``).
DIMENSIONED_MODULES = frozenset(
    {
        "Linear", "Bilinear", "LazyLinear", "Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d",
        "ConvTranspose3d", "Embedding", "EmbeddingBag", "LayerNorm", "RMSNorm", "GroupNorm", "BatchNorm1d",
        "BatchNorm2d", "BatchNorm3d",
    }
)
DIMENSIONED_FUNCTIONS = frozenset({"linear", "bilinear", "conv1d", "conv2d", "conv3d", "embedding", "one_hot"})


def certainly_dimensioned(ctx: FileContext, expr: ast.expr) -> bool:
    """Does the tensor ``expr`` certainly have at least one dimension (not 0-dim)?

    Known for creation with a size (``torch.zeros(3)``, ``torch.arange(n)``,
    ``torch.tensor([...])``), ``nn.Linear`` / conv / embedding outputs,
    ``x.flatten()`` / ``x[None]`` / ``x.view(-1)``, shape-keeping operations of
    such a tensor, and arithmetic with one (broadcasting keeps its dimensions).
    A function parameter, a reduction or a generic module's output is not known.
    """
    return _dimensioned(ctx, _file_node(expr), set(), 0)


def subscript_elements(ctx: FileContext, subscript: ast.Subscript) -> list[ast.expr]:
    """The elements of ``x[a, b]`` (libcst's ``SubscriptElement``s): ``[a, b]``; ``x[(a, b)]``
    has one, the tuple."""
    index = subscript.slice
    if type(index) is ast.Tuple and index.elts and not ctx.parenthesized(index) and (
            ctx.positions.span(index)[0] >= ctx.span(index.elts[0])[0]):
        return list(index.elts)  # no parentheses of its own
    return [index]


def _dimensioned(ctx: FileContext, expr: ast.expr, seen: set[tuple[int, str]], depth: int) -> bool:
    if depth > 12:
        return False
    t = type(expr)
    if t is ast.Call:
        return _dimensioned_call(ctx, expr, seen, depth)  # type: ignore[arg-type]
    if t is ast.BinOp:
        if type(expr.op) is ast.MatMult:  # type: ignore[attr-defined]
            return False  # ``(n,) @ (n,)`` is 0-dim
        return any(ctx.kind(s) is Kind.TENSOR and _dimensioned(ctx, s, seen, depth + 1)
                   for s in (expr.left, expr.right))  # type: ignore[attr-defined]
    if t is ast.UnaryOp:
        return _dimensioned(ctx, expr.operand, seen, depth + 1)  # type: ignore[attr-defined]
    if t is ast.Subscript:
        # ``x[None]``, ``x[..., None]``: a new dimension
        return any(type(e) is ast.Constant and e.value is None for e in subscript_elements(ctx, expr))  # type: ignore[arg-type,attr-defined]
    if t is ast.Attribute:
        if expr.attr in ("data", "mT", "grad"):  # type: ignore[attr-defined]
            return _dimensioned(ctx, expr.value, seen, depth + 1)  # type: ignore[attr-defined]
        if type(expr.value) is ast.Name and expr.value.id == "self":  # type: ignore[attr-defined]
            values = ctx.provenance.assigned_values(expr)
            return bool(values) and all(_dimensioned_attribute(ctx, v, seen, depth) for v in values)
        return False
    if t is ast.Name:
        name = expr.id  # type: ignore[attr-defined]
        scope = ctx.provenance.scope_of(expr).lookup(name)
        if scope is None:
            return False
        key = (id(scope), name)
        if key in seen:
            return True  # ``x = x * 2``: as the name's other bindings say
        bindings = [(how, node) for how, node in scope.bindings.get(name, []) if how != "aug"]
        if not bindings or any(how != "value" or not isinstance(node, ast.expr) for how, node in bindings):
            return False
        return all(_dimensioned(ctx, node, seen | {key}, depth + 1) for _, node in bindings)
    return False


def _dimensioned_attribute(ctx: FileContext, value: ast.expr, seen: set[tuple[int, str]], depth: int) -> bool:
    if type(value) is ast.Call and (ctx.provenance.imports.qualify(value.func) or "").endswith(("nn.Parameter", "parameter.Parameter")):
        args = call_arguments(value)
        return bool(args) and _dimensioned(ctx, arg_value(args[0]), seen, depth + 1)
    return _dimensioned(ctx, value, seen, depth + 1)


def _dimensioned_module(ctx: FileContext, func: ast.expr) -> bool:
    """``self.fc`` / ``fc`` in ``fc(x)``, built from a module class with dimensioned output."""
    values = ctx.provenance.assigned_values(func)

    def dimensioned_class(value: ast.AST | None) -> bool:
        if type(value) is not ast.Call:
            return False
        qualified = ctx.provenance.imports.qualify(value.func) or ""  # type: ignore[union-attr]
        return qualified.startswith("torch.nn.") and qualified.rsplit(".", 1)[-1] in DIMENSIONED_MODULES

    return bool(values) and all(dimensioned_class(v) for v in values)


def _size_given(ctx: FileContext, args: list[ast.expr]) -> bool:
    """Positional size arguments that name at least one dimension: ``(3)``, ``(n, m)``, ``((2, 3))``."""
    if not args:
        return False
    first = args[0]
    if type(first) is ast.Tuple or type(first) is ast.List:
        return bool(first.elts) and not any(type(e) is ast.Starred for e in first.elts)  # type: ignore[attr-defined]
    return _integer_literal(first) or ctx.kind(first) is Kind.NUMBER


def _dimensioned_call(ctx: FileContext, call: ast.Call, seen: set[tuple[int, str]], depth: int) -> bool:
    parsed = split_arguments(call)
    if parsed is None:
        return False
    positional, _ = parsed
    func = call.func
    qualified = ctx.provenance.imports.qualify(func) or ""
    if qualified.startswith("torch."):
        short = qualified.rsplit(".", 1)[-1]
        if short in ALWAYS_DIMENSIONED:
            return True
        if qualified.startswith("torch.nn.functional.") and short in DIMENSIONED_FUNCTIONS:
            return True
        if short in SIZED:
            sizes = positional[:-1] if short == "full" else positional[2:] if short == "randint" else positional
            return _size_given(ctx, sizes)
        if short in ("tensor", "as_tensor", "Tensor", "FloatTensor", "LongTensor"):
            return bool(positional) and type(positional[0]) in (ast.List, ast.Tuple) and bool(positional[0].elts)  # type: ignore[attr-defined]
        if short in SHAPE_KEEPING and positional:
            tensors = [a for a in positional if ctx.kind(a) is Kind.TENSOR]
            return any(_dimensioned(ctx, t, seen, depth + 1) for t in tensors)
        return False
    if _dimensioned_module(ctx, func):
        return True
    if type(func) is ast.Attribute and ctx.kind(func.value) is Kind.TENSOR:
        method = func.attr
        if method in ALWAYS_DIMENSIONED:
            return True
        if method in ("view", "reshape") and positional:
            return _size_given(ctx, positional) or type(positional[0]) is ast.UnaryOp
        if method in SHAPE_KEEPING or method in ("float", "double", "long", "int", "to", "clone", "detach"):
            return _dimensioned(ctx, func.value, seen, depth + 1)
    return False
