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

import libcst as cst

from .context import FileContext
from .model.reductions import REDUCTIONS
from .provenance import Kind
from .tree import method_call


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


def certainly_dimensioned(ctx: FileContext, expr: cst.BaseExpression) -> bool:
    """Does the tensor ``expr`` certainly have at least one dimension (not 0-dim)?

    Known for creation with a size (``torch.zeros(3)``, ``torch.arange(n)``,
    ``torch.tensor([...])``), ``nn.Linear`` / conv / embedding outputs,
    ``x.flatten()`` / ``x[None]`` / ``x.view(-1)``, shape-keeping operations of
    such a tensor, and arithmetic with one (broadcasting keeps its dimensions).
    A function parameter, a reduction or a generic module's output is not known.
    """
    return _dimensioned(ctx, expr, set(), 0)


def _dimensioned(ctx: FileContext, expr: cst.BaseExpression, seen: set[tuple[int, str]], depth: int) -> bool:
    if depth > 12:
        return False
    if isinstance(expr, cst.Call):
        return _dimensioned_call(ctx, expr, seen, depth)
    if isinstance(expr, cst.BinaryOperation):
        if isinstance(expr.operator, cst.MatrixMultiply):
            return False  # ``(n,) @ (n,)`` is 0-dim
        return any(ctx.kind(s) is Kind.TENSOR and _dimensioned(ctx, s, seen, depth + 1) for s in (expr.left, expr.right))
    if isinstance(expr, cst.UnaryOperation):
        return _dimensioned(ctx, expr.expression, seen, depth + 1)
    if isinstance(expr, cst.Subscript):
        elements = [e.slice for e in expr.slice]
        # ``x[None]``, ``x[..., None]``: a new dimension
        return any(isinstance(e, cst.Index) and isinstance(e.value, cst.Name) and e.value.value == "None" for e in elements)
    if isinstance(expr, cst.Attribute):
        if expr.attr.value in ("data", "mT", "grad"):
            return _dimensioned(ctx, expr.value, seen, depth + 1)
        if isinstance(expr.value, cst.Name) and expr.value.value == "self":
            values = ctx.provenance.assigned_values(expr)
            return bool(values) and all(_dimensioned_attribute(ctx, v, seen, depth) for v in values)
        return False
    if isinstance(expr, cst.Name):
        scope = ctx.provenance.scope_of(expr).lookup(expr.value)
        if scope is None:
            return False
        key = (id(scope), expr.value)
        if key in seen:
            return True  # ``x = x * 2``: as the name's other bindings say
        bindings = [(how, node) for how, node in scope.bindings.get(expr.value, []) if how != "aug"]
        if not bindings or any(how != "value" or not isinstance(node, cst.BaseExpression) for how, node in bindings):
            return False
        return all(_dimensioned(ctx, node, seen | {key}, depth + 1) for _, node in bindings)
    return False


def _dimensioned_attribute(ctx: FileContext, value: cst.BaseExpression, seen: set[tuple[int, str]], depth: int) -> bool:
    if isinstance(value, cst.Call) and (ctx.provenance.imports.qualify(value.func) or "").endswith(("nn.Parameter", "parameter.Parameter")):
        return bool(value.args) and _dimensioned(ctx, value.args[0].value, seen, depth + 1)
    return _dimensioned(ctx, value, seen, depth + 1)


def _dimensioned_module(ctx: FileContext, func: cst.BaseExpression) -> bool:
    """``self.fc`` / ``fc`` in ``fc(x)``, built from a module class with dimensioned output."""
    values = ctx.provenance.assigned_values(func)

    def dimensioned_class(value: cst.CSTNode | None) -> bool:
        if not isinstance(value, cst.Call):
            return False
        qualified = ctx.provenance.imports.qualify(value.func) or ""
        return qualified.startswith("torch.nn.") and qualified.rsplit(".", 1)[-1] in DIMENSIONED_MODULES

    return bool(values) and all(dimensioned_class(v) for v in values)


def _size_given(ctx: FileContext, args: list[cst.Arg]) -> bool:
    """Positional size arguments that name at least one dimension: ``(3)``, ``(n, m)``, ``((2, 3))``."""
    if not args:
        return False
    first = args[0].value
    if isinstance(first, (cst.Tuple, cst.List)):
        return bool(first.elements) and not any(isinstance(e, cst.StarredElement) for e in first.elements)
    return isinstance(first, cst.Integer) or ctx.kind(first) is Kind.NUMBER


def _dimensioned_call(ctx: FileContext, call: cst.Call, seen: set[tuple[int, str]], depth: int) -> bool:
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
            return bool(positional) and isinstance(positional[0].value, (cst.List, cst.Tuple)) and bool(positional[0].value.elements)
        if short in SHAPE_KEEPING and positional:
            tensors = [a.value for a in positional if ctx.kind(a.value) is Kind.TENSOR]
            return any(_dimensioned(ctx, t, seen, depth + 1) for t in tensors)
        return False
    if _dimensioned_module(ctx, func):
        return True
    if isinstance(func, cst.Attribute) and ctx.kind(func.value) is Kind.TENSOR:
        method = func.attr.value
        if method in ALWAYS_DIMENSIONED:
            return True
        if method in ("view", "reshape") and positional:
            return _size_given(ctx, positional) or (isinstance(positional[0].value, cst.UnaryOperation))
        if method in SHAPE_KEEPING or method in ("float", "double", "long", "int", "to", "clone", "detach"):
            return _dimensioned(ctx, func.value, seen, depth + 1)
    return False
