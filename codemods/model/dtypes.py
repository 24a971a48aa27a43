"""What can be told about a tensor's dtype from the code alone.

Two questions, answered conservatively (``False`` means "not known"):

* :func:`certainly_floating`: a floating-point tensor (float16 ... float64):
  losses, ``softmax``, ``.mean()``, ``.float()``, arithmetic with one;
* :func:`certainly_integer`: an integer tensor that is not ``bool``
  (``argmax``, ``argsort``, ``nonzero``, ``topk(...).indices``, ``.long()``).
* :func:`certainly_integer_or_bool`: that, or a ``bool`` tensor (a comparison,
  ``.bool()``, a ``torch.BoolTensor`` annotation); the sum of one is int64.

Rules use them where the dtype decides a Python type: ``float(v)`` of a
floating element is the element ``.tolist()`` gives, ``int(v)`` of an
integer one likewise; ``loss.item() * n`` added to an int total makes it a
float only when ``loss`` is floating.
"""

from __future__ import annotations

import ast
import bisect
from collections.abc import Sequence

from .context import COMPOUND, FileContext
from .name_reads import reads_of
from .provenance import Kind, Scope, is_module_class
from .scalar_shapes import arg_keyword, arg_star, arg_value, call_arguments
from .tree import callee_name, number_of, subtree_stop, walk

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
BOOL_DTYPES = frozenset({"bool"})
INTEGER_ANNOTATIONS = frozenset(
    {"torch.LongTensor", "torch.IntTensor", "torch.ShortTensor", "torch.ByteTensor", "torch.CharTensor", "LongTensor"}
)
BOOL_ANNOTATIONS = frozenset({"torch.BoolTensor", "BoolTensor"})
# Reductions that give int64 for a bool (or integer) tensor.
COUNTING = frozenset({"sum", "nansum", "prod", "cumsum", "cumprod"})
CLAMPS = frozenset({"clamp", "clip", "clamp_min", "clamp_max"})
MAX_DEPTH = 8


def certainly_floating(ctx: FileContext, expr: ast.expr) -> bool:
    return _dtype(ctx, expr, 0) == "floating"


def certainly_integer(ctx: FileContext, expr: ast.expr) -> bool:
    """An integer tensor, not ``bool``: its ``.tolist()`` elements are ``int``."""
    return _dtype(ctx, expr, 0) == "integer"


def certainly_integer_or_bool(ctx: FileContext, expr: ast.expr) -> bool:
    """An integer or ``bool`` tensor: below every floating dtype in type promotion."""
    return _dtype(ctx, expr, 0) in ("integer", "bool")


def _explicit(ctx: FileContext, call: ast.Call) -> str | None:
    """The category of a ``dtype=torch.xxx`` argument, "" when there is another one."""
    for keyword in call.keywords:
        if keyword.arg == "dtype":
            name = (ctx.provenance.imports.qualify(keyword.value) or "").rsplit(".", 1)[-1]
            if name in FLOATING_DTYPES:
                return "floating"
            if name in INTEGER_DTYPES:
                return "integer"
            if name in BOOL_DTYPES:
                return "bool"
            return ""
    return None


def _dtype(ctx: FileContext, expr: ast.expr, depth: int) -> str | None:
    if depth > MAX_DEPTH:
        return None
    t = type(expr)
    if t is ast.Call:
        explicit = _explicit(ctx, expr)  # type: ignore[arg-type]
        if explicit is not None:
            return explicit or None
        func = expr.func  # type: ignore[attr-defined]
        args = call_arguments(expr)  # type: ignore[arg-type]
        qualified = ctx.provenance.imports.qualify(func) or ""
        if qualified.startswith("torch."):
            last = qualified.rsplit(".", 1)[-1]
            if qualified.startswith("torch.nn.functional.") and (last.endswith("loss") or last in FLOATING_LOSSES):
                return "floating"
            if last in FLOATING_OPS:
                return "floating"
            if last in INTEGER_OPS:
                return "integer"
            if (last in DTYPE_KEEPING or (last in CLAMPS and _integer_bounds(ctx, args[1:]))) and args:
                return _counted(last, _dtype(ctx, arg_value(args[0]), depth + 1))
        if type(func) is ast.Attribute and not qualified.startswith("torch."):
            method = func.attr
            if method in FLOATING_OPS:
                return "floating"
            if method in INTEGER_OPS:
                return "integer"
            if method == "bool" and not args:
                return "bool"
            if method in DTYPE_KEEPING or (method in CLAMPS and _integer_bounds(ctx, args)):
                return _counted(method, _dtype(ctx, func.value, depth + 1))
        return "floating" if _loss_module(ctx, func) else None
    if t is ast.Attribute and expr.attr == "indices":  # type: ignore[attr-defined]
        return "integer" if _sort_like(expr.value) else None  # type: ignore[attr-defined]
    if t is ast.Attribute and expr.attr in ("values", "data"):  # type: ignore[attr-defined]
        return _dtype(ctx, expr.value, depth + 1) if expr.attr == "data" else None  # type: ignore[attr-defined]
    if t is ast.BinOp:
        # A floating tensor with a floating or integer one, or with a Python int / float.
        if type(expr.op) not in (ast.Add, ast.Sub, ast.Mult, ast.Div):  # type: ignore[attr-defined]
            return None
        sides = [_dtype(ctx, side, depth + 1) or _real_number(ctx, side) for side in (expr.left, expr.right)]  # type: ignore[attr-defined]
        if "floating" in sides and all(sides):
            return "floating"
        return None
    if t is ast.Subscript:
        return _dtype(ctx, expr.value, depth + 1)  # type: ignore[attr-defined]
    if t is ast.Compare and not any(type(op) in (ast.In, ast.NotIn, ast.Is, ast.IsNot) for op in expr.ops):  # type: ignore[attr-defined]
        tensors = [e for e in (expr.left, *expr.comparators) if ctx.kind(e) is Kind.TENSOR]  # type: ignore[attr-defined]
        return "bool" if tensors and len(expr.ops) == 1 else None  # type: ignore[attr-defined]
    if t is ast.Name:
        annotated = _annotated_dtype(ctx, expr)  # type: ignore[arg-type]
        if annotated:
            return annotated
        kinds = {_dtype(ctx, value, depth + 1) for value in ctx.provenance.assigned_values(expr)}
        return kinds.pop() if len(kinds) == 1 else None
    return None


def _counted(step: str, dtype: str | None) -> str | None:
    """The category after ``step``: the sum of a bool tensor is an int64 one."""
    return "integer" if dtype == "bool" and step in COUNTING else dtype


def _integer_literal(expr: ast.AST) -> bool:
    """An int literal (libcst's ``Integer``; ``True`` is a name there)."""
    return type(expr) is ast.Constant and type(expr.value) is int  # type: ignore[attr-defined]


def _number_literal(expr: ast.AST) -> bool:
    """An int or float literal (libcst's ``Integer`` / ``Float``)."""
    return type(expr) is ast.Constant and type(expr.value) in (int, float)  # type: ignore[attr-defined]


def _float_literal(expr: ast.AST) -> bool:
    return type(expr) is ast.Constant and type(expr.value) is float  # type: ignore[attr-defined]


def _integer_bounds(ctx: FileContext, args: Sequence[ast.AST]) -> bool:
    """``clamp`` bounds that keep an integer tensor integer: int literals (or ``None``).
    (``args``: :func:`~codemods.scalar_shapes.call_arguments`.)"""
    return bool(args) and all(
        not arg_star(a) and (_integer_literal(arg_value(a)) or (type(arg_value(a)) is ast.Constant and arg_value(a).value is None))  # type: ignore[attr-defined]
        for a in args
    )


def _annotated_dtype(ctx: FileContext, name: ast.Name) -> str | None:
    """"integer" / "bool" for a parameter bound only as ``mask: torch.BoolTensor``."""
    scope = ctx.provenance.scope_of(name).lookup(name.id)
    bindings = scope.bindings.get(name.id, []) if scope is not None else []
    if len(bindings) != 1 or bindings[0][0] != "param" or type(bindings[0][1]) is not ast.arg:
        return None
    annotation = bindings[0][1].annotation
    qualified = (ctx.provenance.imports.qualify(annotation) or "") if annotation is not None else ""
    if qualified in INTEGER_ANNOTATIONS:
        return "integer"
    return "bool" if qualified in BOOL_ANNOTATIONS else None


def _real_number(ctx: FileContext, expr: ast.expr) -> str | None:
    """"number" for an int or float literal, or a name or expression known to be a Python int / float."""
    if type(expr) is ast.UnaryOp and type(expr.op) in (ast.USub, ast.UAdd):  # type: ignore[attr-defined]
        expr = expr.operand  # type: ignore[attr-defined]
    if _number_literal(expr):
        return "number"
    imaginary = type(expr) is ast.Constant and type(expr.value) is complex  # type: ignore[attr-defined]
    return "number" if ctx.kind(expr) is Kind.NUMBER and not imaginary else None


def _sort_like(expr: ast.expr) -> bool:
    """``torch.topk(...)`` / ``x.sort(...)`` / ``x.max(dim)``: the ``.indices`` are int64."""
    if type(expr) is not ast.Call:
        return False
    name = callee_name(expr.func)  # type: ignore[attr-defined]
    if name in ("topk", "sort", "kthvalue", "mode", "cummax", "cummin"):
        return True
    return name in ("max", "min", "median") and bool(expr.args or expr.keywords)  # type: ignore[attr-defined]


def _loss_module(ctx: FileContext, func: ast.expr) -> bool:
    """``criterion`` in ``criterion(out, y)``, built from an ``nn.*Loss`` class."""
    values = ctx.provenance.assigned_values(func)

    def is_loss(value: ast.expr) -> bool:
        if type(value) is not ast.Call:
            return False
        qualified = ctx.provenance.imports.qualify(value.func)  # type: ignore[attr-defined]
        return is_module_class(qualified, set()) and (qualified or "").endswith("Loss")

    return bool(values) and all(is_loss(v) for v in values)


# -- floating point, as far as the code shows (the fuller test FX302 and the 0-dim fact use) ----

FLOAT_DTYPES = frozenset({"float", "float32", "float64", "double", "float16", "half", "bfloat16"})
INT_DTYPES = frozenset({"int", "int8", "int16", "int32", "int64", "long", "short", "uint8", "bool"})
# Functions and tensor methods whose result is floating point for any input
# they accept (or that fail on integer input).
FLOAT_RESULTS = frozenset(
    {
        "float", "half", "double", "bfloat16", "softmax", "log_softmax", "softmin", "sigmoid", "tanh",
        "exp", "expm1", "log", "log1p", "log2", "log10", "sqrt", "rsqrt", "sin", "cos", "tan", "erf",
        "erfc", "reciprocal", "mean", "nanmean", "std", "var", "norm", "rand", "randn", "rand_like",
        "randn_like", "normal", "layer_norm", "group_norm", "batch_norm", "instance_norm", "rms_norm",
        "gelu", "silu", "mish", "softplus", "elu", "selu", "celu", "logsigmoid", "linear", "bilinear",
        "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d",
        "embedding", "scaled_dot_product_attention", "cross_entropy", "nll_loss", "l1_loss", "mse_loss",
        "smooth_l1_loss", "huber_loss", "binary_cross_entropy", "binary_cross_entropy_with_logits",
        "kl_div", "cosine_similarity", "pairwise_distance", "cdist", "normalize", "interpolate",
        "logsumexp", "logit", "lerp", "true_divide", "atan2", "hypot", "sigmoid_focal_loss",
        "zeros", "ones", "empty", "linspace", "logspace", "hann_window", "poisson_nll_loss",
        "margin_ranking_loss", "soft_margin_loss", "triplet_margin_loss", "cosine_embedding_loss",
        "hinge_embedding_loss", "multilabel_soft_margin_loss", "dropout", "softsign", "tanhshrink",
        "hardsigmoid", "hardswish", "hardtanh", "log_sigmoid", "glu",
    }
)
# Results with the dtype of their receiver (or first argument).
SAME_DTYPE = frozenset(
    {
        "abs", "neg", "negative", "clamp", "clamp_min", "clamp_max", "clip", "reshape", "view", "view_as",
        "transpose", "permute", "contiguous", "squeeze", "unsqueeze", "flatten", "unflatten", "masked_fill",
        "detach", "clone", "max", "min", "amax", "amin", "t", "expand", "expand_as", "repeat", "flip",
        "roll", "narrow", "select", "gather", "index_select", "relu", "to", "cuda", "cpu", "pad", "sum",
        "nansum", "prod", "diagonal", "triu", "tril", "masked_select", "square", "cumsum", "maximum",
        "minimum", "add", "sub", "mul", "matmul", "bmm", "mm", "einsum", "where", "type_as", "zeros_like",
        "ones_like", "empty_like", "full_like", "new_zeros", "new_ones", "new_empty", "new_full",
        "masked_fill_", "fill_", "clamp_", "mul_", "add_", "sub_", "div_", "tile", "movedim",
        "swapaxes", "mT", "narrow_copy", "index_fill", "scatter", "scatter_add", "cat", "stack", "concat",
    }
)
FLOAT_ANNOTATIONS = frozenset(
    {"torch.FloatTensor", "torch.HalfTensor", "torch.DoubleTensor", "torch.BFloat16Tensor", "FloatTensor"}
)


def _dtype_of_keyword(ctx: FileContext, call: ast.Call) -> bool | None:
    """True / False when the call names a floating / integer ``dtype=``; None when it names none."""
    for keyword in call.keywords:
        if keyword.arg == "dtype":
            name = (ctx.provenance.imports.qualify(keyword.value) or "").rsplit(".", 1)[-1]
            if name in FLOAT_DTYPES:
                return True
            return False if name in INT_DTYPES else None
    return None


def visibly_floating(ctx: FileContext, expr: ast.expr) -> bool:
    """Can fixitem see that the tensor ``expr`` is floating point? Wider than
    :func:`certainly_floating`: also ``sigmoid``, ``mean``, a module's output,
    a true division, a ``torch.FloatTensor`` annotation."""
    return _floating(ctx, expr, set())


def _floating(ctx: FileContext, expr: ast.expr, seen: set[tuple[int, str]]) -> bool:
    t = type(expr)
    if t is ast.Call:
        return _floating_call(ctx, expr, seen)  # type: ignore[arg-type]
    if t is ast.BinOp:
        if type(expr.op) is ast.Div:  # type: ignore[attr-defined]
            return Kind.TENSOR in (ctx.kind(expr.left), ctx.kind(expr.right))  # type: ignore[attr-defined]
        sides = (expr.left, expr.right)  # type: ignore[attr-defined]
        return any(_float_literal(s) or (ctx.kind(s) is Kind.TENSOR and _floating(ctx, s, seen)) for s in sides)
    if t is ast.UnaryOp and type(expr.op) in (ast.USub, ast.UAdd):  # type: ignore[attr-defined]
        return _floating(ctx, expr.operand, seen)  # type: ignore[attr-defined]
    if t is ast.Subscript:
        return _floating(ctx, expr.value, seen)  # type: ignore[attr-defined]
    if t is ast.Attribute:
        if expr.attr in ("T", "mT", "H", "mH", "data", "grad"):  # type: ignore[attr-defined]
            return _floating(ctx, expr.value, seen)  # type: ignore[attr-defined]
        if type(expr.value) is ast.Name and expr.value.id == "self":  # type: ignore[attr-defined]
            values = ctx.provenance.assigned_values(expr)
            return bool(values) and all(_floating_attribute_value(ctx, v, seen) for v in values)
        return False
    if t is ast.IfExp:
        return _floating(ctx, expr.body, seen) and _floating(ctx, expr.orelse, seen)  # type: ignore[attr-defined]
    if t is ast.Name:
        return _floating_name(ctx, expr, seen)  # type: ignore[arg-type]
    return False


def _floating_attribute_value(ctx: FileContext, value: ast.expr, seen: set[tuple[int, str]]) -> bool:
    if type(value) is ast.Call and (ctx.provenance.imports.qualify(value.func) or "").endswith(("nn.Parameter", "parameter.Parameter")):  # type: ignore[attr-defined]
        return True  # a parameter: trained, so floating point
    return _floating(ctx, value, seen)


def _floating_call(ctx: FileContext, call: ast.Call, seen: set[tuple[int, str]]) -> bool:
    if ctx.kind(call.func) is Kind.MODULE:
        return True  # a module's output: activations, logits, losses
    declared = _dtype_of_keyword(ctx, call)
    if declared is not None:
        return declared
    func = call.func
    args = call_arguments(call)
    qualified = ctx.provenance.imports.qualify(func) or ""
    if qualified.startswith("torch."):
        short = qualified.rsplit(".", 1)[-1]
        if short in FLOAT_RESULTS or short.endswith("_loss"):
            return True
        if short in SAME_DTYPE and args:
            first = arg_value(args[0])
            if type(first) is ast.List or type(first) is ast.Tuple:  # torch.cat([a, b])
                return any(_floating(ctx, e, seen) for e in first.elts if type(e) is not ast.Starred)  # type: ignore[attr-defined]
            if short in ("maximum", "minimum", "add", "sub", "mul", "where") and len(args) > 1:
                operands = args[1:3] if short == "where" else args[:2]  # not where's condition
                return any(ctx.kind(arg_value(a)) is Kind.TENSOR and _floating(ctx, arg_value(a), seen) for a in operands)
            return _floating(ctx, first, seen)
        if short in ("tensor", "as_tensor", "full", "arange"):
            return any(_float_literal(node) for arg in args for node in walk(arg_value(arg)))
        return False
    if type(func) is ast.Attribute and ctx.kind(func.value) is Kind.TENSOR:
        method = func.attr
        if method in FLOAT_RESULTS:
            return True
        if method == "to":
            for arg in args:
                value = arg_value(arg)
                if ctx.kind(value) is Kind.TENSOR:
                    return _floating(ctx, value, seen)  # ``x.to(other)`` takes other's dtype
                name = (ctx.provenance.imports.qualify(value) or "").rsplit(".", 1)[-1]
                if name in FLOAT_DTYPES:
                    return True
                if name in INT_DTYPES:
                    return False
            return _floating(ctx, func.value, seen)
        if method == "type_as" and args:
            return _floating(ctx, arg_value(args[0]), seen)
        if method in SAME_DTYPE:
            return _floating(ctx, func.value, seen)
    return False


def _floating_name(ctx: FileContext, name: ast.Name, seen: set[tuple[int, str]]) -> bool:
    scope: Scope | None = ctx.provenance.scope_of(name).lookup(name.id)
    if scope is None:
        return False
    key = (id(scope), name.id)
    if key in seen:
        # ``h = h - m``: floating when the name's other bindings are (a name
        # cannot be bound by self-references alone).
        return True
    seen = seen | {key}
    bindings = [(how, node) for how, node in scope.bindings[name.id] if how != "aug"]
    if not bindings:
        return False
    for how, node in bindings:
        if how == "value" and isinstance(node, ast.expr):
            if not _floating(ctx, node, seen):
                return False
        elif how == "param" and type(node) is ast.arg:
            annotation = node.annotation
            if annotation is None or (ctx.provenance.imports.qualify(annotation) or "") not in FLOAT_ANNOTATIONS:
                return False
        else:
            return False
    return True


# -- a 0-dim tensor where a Python number was -------------------------------------------------------
#
# PyTorch's type promotion ranks operands: tensors with dimensions, then 0-dim
# tensors, then Python numbers; a lower rank decides the result's dtype only
# when its category (bool < integer < floating < complex) is higher. So
# ``x * v.item()`` has ``x``'s dtype for a floating ``x`` whatever ``v``'s, but
# ``x * v.detach()`` (``v`` 0-dim) promotes the two when ``x`` is 0-dim too
# (float32 with float64 gives float64, float16 with float32 gives float32),
# and an integer ``x`` takes ``v``'s dtype where the Python float gave float32.

# Steps whose result has the dtype of the tensor they are applied to, for every dtype.
DTYPE_KEEPING_ALWAYS = frozenset(
    {
        "detach", "clone", "contiguous", "cpu", "cuda", "reshape", "view", "squeeze", "unsqueeze", "flatten",
        "ravel", "t", "transpose", "permute", "expand", "expand_as", "repeat", "flip", "roll", "abs", "neg",
        "negative", "max", "min", "amax", "amin", "median", "narrow", "select", "diagonal", "triu", "tril",
        "masked_fill", "index_select", "gather", "movedim", "swapaxes", "tile",
        "zeros_like", "ones_like", "empty_like", "full_like",
    }
)
# Steps that keep a floating dtype, and give an integer (or fail) for an integer tensor:
# a floating result of them proves a floating input.
DTYPE_KEEPING_FLOATING = frozenset({"sum", "nansum", "prod", "cumsum", "cumprod", "mean", "nanmean", "norm", "std", "var"})


def _dtype_root(ctx: FileContext, expr: ast.expr) -> tuple[ast.expr, bool]:
    """The tensor whose dtype ``expr`` has (following dtype-keeping steps and names bound
    once), and whether every step keeps any dtype (not only a floating one)."""
    always = True
    for _ in range(16):
        t = type(expr)
        if t is ast.Call and not _names_dtype_or_tensor(ctx, expr):  # type: ignore[arg-type]
            func = expr.func  # type: ignore[attr-defined]
            args = call_arguments(expr)  # type: ignore[arg-type]
            qualified = ctx.provenance.imports.qualify(func) or ""
            if qualified.startswith("torch.") and args and not arg_star(args[0]):
                short = qualified.rsplit(".", 1)[-1]
                if short in DTYPE_KEEPING_ALWAYS or short in DTYPE_KEEPING_FLOATING:
                    always = always and short in DTYPE_KEEPING_ALWAYS
                    expr = arg_value(args[0])
                    continue
            elif type(func) is ast.Attribute and ctx.kind(func.value) is Kind.TENSOR:
                method = func.attr
                target = _dtype_target(ctx, expr) if method in ("to", "type_as") else None  # type: ignore[arg-type]
                if target is not None:
                    expr = target  # ``v.type_as(x)``, ``v.to(x)``: ``x``'s dtype
                    continue
                if method == "to" and _device_only(expr):  # type: ignore[arg-type]
                    expr = func.value
                    continue
                if method in DTYPE_KEEPING_ALWAYS or method in DTYPE_KEEPING_FLOATING:
                    always = always and method in DTYPE_KEEPING_ALWAYS
                    expr = func.value
                    continue
            return expr, always
        if t is ast.Subscript:
            expr = expr.value  # type: ignore[attr-defined]
            continue
        if t is ast.Attribute and expr.attr in ("data", "T", "mT"):  # type: ignore[attr-defined]
            expr = expr.value  # type: ignore[attr-defined]
            continue
        if t is ast.Name:
            scope = ctx.provenance.scope_of(expr).lookup(expr.id)  # type: ignore[attr-defined]
            bindings = scope.bindings.get(expr.id, []) if scope is not None else []  # type: ignore[attr-defined]
            if len(bindings) == 1 and bindings[0][0] == "value" and isinstance(bindings[0][1], ast.expr):
                expr = bindings[0][1]
                continue
        return expr, always
    return expr, False


def _names_dtype_or_tensor(ctx: FileContext, call: ast.Call) -> bool:
    """A ``dtype=`` / ``torch.float16`` argument (``x.view(torch.float16)``), or a second
    tensor operand (``torch.max(a, b)`` promotes): the step may change the dtype.
    ``v.to(x)`` / ``v.type_as(x)`` are told apart by their caller."""
    tensors = 0
    for arg in call_arguments(call):
        if arg_star(arg) or arg_keyword(arg) == "dtype":
            return True
        value = arg_value(arg)
        name = (ctx.provenance.imports.qualify(value) or "")
        if name.startswith("torch.") and name.rsplit(".", 1)[-1] in FLOATING_DTYPES | INTEGER_DTYPES | BOOL_DTYPES:
            return True
        tensors += ctx.kind(value) is Kind.TENSOR
    func = call.func
    receiver = type(func) is ast.Attribute and ctx.kind(func.value) is Kind.TENSOR  # type: ignore[attr-defined]
    if receiver and func.attr in ("to", "type_as"):  # type: ignore[attr-defined]
        return False
    return tensors > (0 if receiver else 1)


def _dtype_target(ctx: FileContext, call: ast.Call) -> ast.expr | None:
    """``x`` in ``v.type_as(x)`` / ``v.to(x)``."""
    if len(call.args) == 1 and not call.keywords and type(call.args[0]) is not ast.Starred:
        value = call.args[0]
        if ctx.kind(value) is Kind.TENSOR:
            return value
    return None


def _device_only(call: ast.Call) -> bool:
    """``v.to("cuda")``, ``v.to(device=d, non_blocking=True)``: the dtype is kept."""
    args = call_arguments(call)
    for i, arg in enumerate(args):
        if arg_star(arg):
            return False
        if type(arg) is ast.keyword:
            if arg.arg not in ("device", "non_blocking", "copy"):
                return False
        elif not (i == 0 and type(arg) is ast.Constant and type(arg.value) in (str, bytes)):  # type: ignore[attr-defined]
            return False
    return bool(args)


def _same_tensor(ctx: FileContext, a: ast.expr, b: ast.expr) -> bool:
    """Are ``a`` and ``b`` the same node, or reads of one name that see the same binding?"""
    if a is b:
        return True
    if not (type(a) is ast.Name and type(b) is ast.Name and a.id == b.id):  # type: ignore[attr-defined]
        return False
    name = a.id  # type: ignore[attr-defined]
    scope = ctx.provenance.scope_of(a).lookup(name)
    if scope is None or ctx.provenance.scope_of(b).lookup(name) is not scope:
        return False
    bindings = scope.bindings.get(name, [])
    if len(bindings) == 1 and bindings[0][0] == "param":
        return True
    return _no_binding_between(ctx, bindings, a, b) or _no_binding_between(ctx, bindings, b, a)  # type: ignore[arg-type]


def _statement_of(ctx: FileContext, node: object) -> ast.stmt | None:
    """The statement ``node`` is part of (libcst's enclosing ``SimpleStatementLine`` or
    compound statement): a simple statement itself, unless it stands on the line of its
    compound statement's header (``if c: x = v``), then that compound statement."""
    if isinstance(node, ast.stmt) and not isinstance(node, COMPOUND):
        current: ast.AST | None = node
    else:
        current = ctx.parents.get(node)  # type: ignore[arg-type]
        while current is not None and not isinstance(current, ast.stmt):
            current = ctx.parents.get(current)
    if current is not None and not isinstance(current, COMPOUND):
        start = ctx.positions[current].start
        if ctx.line(start.line)[:start.column].rstrip().endswith(":"):
            return ctx.parents.get(current)  # type: ignore[return-value]
    return current  # type: ignore[return-value]


def _in_block_of(ctx: FileContext, statement: ast.stmt, node: ast.AST) -> bool:
    """Does ``node`` lie in the statements of the block that holds ``statement``?"""
    parent = ctx.parents.get(statement)
    field = ctx.field_of(statement)
    block = getattr(parent, field, None) if parent is not None and field else None
    number = number_of(node)
    if not block or number is None:
        return False
    first, last = number_of(block[0]), number_of(block[-1])
    if first is None or last is None:
        return False
    return first <= number < subtree_stop(last)


def _no_binding_between(ctx: FileContext, bindings, first: ast.Name, then: ast.Name) -> bool:
    """``first`` is read in a simple statement that runs, in the same block, before
    ``then`` is read (or in the same statement), and no binding of the name lies between."""
    statement = _statement_of(ctx, first)
    if statement is None or isinstance(statement, COMPOUND):
        return False
    if not _in_block_of(ctx, statement, then):
        return False
    offset = ctx.positions.offset
    start, end = offset(statement), offset(then)
    if end < start:
        return False
    for how, node in bindings:
        if how == "param":
            continue
        if node is None:
            return False
        bound = _statement_of(ctx, node)
        if bound is None:
            return False
        if start <= offset(bound) <= end and not ctx.below(then, bound):
            return False  # bound after ``first`` was read, before ``then``
    return True


def same_dtype(ctx: FileContext, a: ast.expr, b: ast.expr) -> bool:
    """Do the tensors ``a`` and ``b`` certainly have one dtype (``y`` and ``y.norm()``)?"""
    root_a, always_a = _dtype_root(ctx, a)
    root_b, always_b = _dtype_root(ctx, b)
    if not _same_tensor(ctx, root_a, root_b):
        return False
    return (always_a and always_b) or visibly_floating(ctx, a) or visibly_floating(ctx, b) or visibly_floating(ctx, root_a)


_OPERATORS = {ast.Div: "/", ast.FloorDiv: "//", ast.Mod: "%", ast.Pow: "**"}


def scalar_operand_rounding(op: ast.operator, value_on_left: bool, augmented: bool = False) -> str:
    """Why a 0-dim tensor may not give the values the Python number gave as an operand of ``op``
    (the value on the left of it, or on the right); "" where it gives the same (``+``, ``-``,
    ``*``). Measured on torch 2.13 CPU, and read in ATen's CUDA kernels:

    - ``v / x``: Python computes a number divided by a tensor as ``x.reciprocal() * v``; a 0-dim
      tensor divides (CPU: a quarter of float32 results differ in the last bit);
    - ``x / v``, ``x // v``, ``x % v``: ATen's CUDA kernels multiply by the reciprocal of a
      Python number (a CPU scalar) and divide by a 0-dim device tensor;
    - ``x ** v``, ``v ** x``: a Python exponent takes pow's special paths (``x ** 2`` squares,
      ``x ** 0.5`` takes the square root); a tensor one the general pow (CPU: values differ).
    """
    operator = _OPERATORS.get(type(op))
    if operator is None:
        return ""
    if augmented:
        operator += "="
    if operator.startswith("**"):
        return (f"`{operator}` with a Python number takes pow's special paths (`x ** 2` squares) and with a "
                "0-dim tensor the general pow: values may differ in the last bit")
    if value_on_left:
        if operator != "/":
            return ""
        return ("Python divides a number by a tensor as the tensor's reciprocal times the number, a 0-dim "
                "tensor divides: float results differ in the last bit")
    return (f"on CUDA, `{operator}` by a Python number multiplies by its reciprocal (ATen's scalar path) and "
            "by a 0-dim tensor divides: float results may differ in the last bit")


def zero_dim_dtype_problem(
    ctx: FileContext,
    value: str,
    operand: ast.expr,
    sources: Sequence[ast.expr] = (),
    kind: str | None = None,
) -> str:
    """Why a 0-dim tensor standing where the Python number ``value`` was may give its
    operation with the tensor ``operand`` another dtype than the number did ("" when
    it cannot).

    ``sources``: the tensors the 0-dim tensor has its dtype from (``v`` for
    ``v.item()``); ``kind``: "integer" or "default_float" (``torch.where`` of
    float literals gives a float32 tensor) when that is all that is known.
    The dtype is kept when the two are certainly of one dtype; when
    ``operand`` has a dimension and is floating point (for a float32 value: of
    any dtype); or when the value is an integer and ``operand`` floating point
    (a lower category never decides the dtype).
    """
    if sources and all(same_dtype(ctx, s, operand) for s in sources):
        return ""
    if kind is None and sources and all(certainly_integer_or_bool(ctx, s) for s in sources):
        kind = "integer"
    from .scalar_shapes import (  # scalar_shapes builds on tensor_values
        certainly_dimensioned,
        plainly_zero_dim,
    )

    code = ctx.code(operand)
    floating = visibly_floating(ctx, operand)
    dimensioned = certainly_dimensioned(ctx, operand)
    if kind == "integer":
        if floating or (dimensioned and certainly_integer_or_bool(ctx, operand)):
            return ""
        return (f"`{value}` becomes a 0-dim integer tensor: fixitem cannot tell that `{code}` is floating point "
                f"or has a dimension, and a 0-dim integer `{code}` takes the wider of the two dtypes (int32 with an "
                f"int64 value gives int64), where the Python int kept `{code}`'s dtype")
    zero_dim = (f"`{code}` is 0-dim" if plainly_zero_dim(ctx, operand)
                else f"fixitem cannot see that `{code}` has a dimension")
    if kind == "default_float":
        if dimensioned:
            return ""
        return (f"`{value}` becomes a 0-dim float32 tensor: {zero_dim}, and two 0-dim tensors promote (a float16 or "
                f"bfloat16 `{code}` gives float32), where the Python number kept `{code}`'s dtype")
    if floating and dimensioned:
        return ""
    parts = []
    if not floating:
        parts.append(f"fixitem cannot tell that `{code}` is a floating-point tensor (an integer or bool one takes "
                     "the value's dtype, float64 for a float64 value, where the Python float gave float32)")
    if not dimensioned:
        parts.append(f"{zero_dim} (two 0-dim tensors promote: a float32 `{code}` with a float64 value gives "
                     f"float64, where the Python number kept `{code}`'s dtype)")
    return f"`{value}` becomes a 0-dim tensor of its own dtype: " + "; and ".join(parts)


def tensors_met(ctx: FileContext, expr: ast.expr) -> list[ast.expr]:
    """The tensors that ``expr``, about to become a 0-dim tensor, meets in an operation
    whose result dtype they decide together: the other operand of arithmetic, the
    other branches of ``torch.where``, the input of a ``torch.clamp`` bound. Followed
    through Python arithmetic with numbers and the local names it is stored in
    (uses fixitem cannot follow are not listed: ``value_flow`` reports them)."""
    found: list[ast.expr] = []
    _meet(ctx, expr, found, 0)
    return found


def _meet(ctx: FileContext, node: ast.expr, found: list[ast.expr], depth: int) -> None:
    parent = ctx.parents.get(node)
    t = type(parent)
    if t is ast.BinOp:
        other = parent.right if parent.left is node else parent.left  # type: ignore[union-attr]
        if ctx.kind(other) is Kind.TENSOR:
            found.append(other)
        else:
            _meet(ctx, parent, found, depth)  # type: ignore[arg-type]
    elif t is ast.UnaryOp and type(parent.op) is not ast.Not or t is ast.IfExp and parent.test is not node:  # type: ignore[union-attr]
        _meet(ctx, parent, found, depth)  # type: ignore[arg-type]
    elif t is ast.Call and node is not parent.func and any(a is node for a in parent.args):  # type: ignore[union-attr]
        found.extend(_call_partners(ctx, parent, node))  # type: ignore[arg-type]
    elif t is ast.keyword and parent.arg is not None:  # type: ignore[union-attr]
        call = ctx.parents.get(parent)
        if type(call) is ast.Call:
            found.extend(_call_partners(ctx, call, parent))  # type: ignore[arg-type]
    elif (t is ast.Assign or t is ast.AnnAssign) and parent.value is node and depth < 4:  # type: ignore[union-attr]
        targets = parent.targets if t is ast.Assign else [parent.target]  # type: ignore[union-attr]
        if len(targets) == 1 and type(targets[0]) is ast.Name:
            target = targets[0]
            scope = ctx.provenance.scope_of(target)
            for read in reads_of(ctx, scope, target.id):
                if read is not None and ctx.positions.offset(read) > ctx.positions.offset(target) or (
                    read is not None and _in_one_loop(ctx, read, target)
                ):
                    _meet(ctx, read, found, depth + 1)


_LOOPS = (ast.For, ast.AsyncFor, ast.While)


def _in_one_loop(ctx: FileContext, a: ast.AST, b: ast.AST) -> bool:
    loops = {id(n) for n in ctx.ancestors(b) if isinstance(n, _LOOPS)}
    return any(id(n) in loops for n in ctx.ancestors(a) if isinstance(n, _LOOPS))


def _call_partners(ctx: FileContext, call: ast.Call, arg: ast.AST) -> list[ast.expr]:
    """(``arg``: the argument, as :func:`~codemods.scalar_shapes.call_arguments` lists it.)"""
    qualified = ctx.provenance.imports.qualify(call.func) or ""
    args = call_arguments(call)
    others = [arg_value(a) for a in args if a is not arg and ctx.kind(arg_value(a)) is Kind.TENSOR]
    if qualified == "torch.where":
        condition = next((a for a in args if arg_keyword(a) is None), None)
        return [arg_value(a) for a in args if a is not arg and a is not condition
                and (arg_keyword(a) is None or arg_keyword(a) in ("input", "other"))
                and ctx.kind(arg_value(a)) is Kind.TENSOR]
    if qualified in ("torch.clamp", "torch.clip", "torch.clamp_min", "torch.clamp_max", "torch.maximum", "torch.minimum"):
        return others
    func = call.func
    methods = ("clamp", "clip", "clamp_min", "clamp_max", "where", "maximum", "minimum")
    if type(func) is ast.Attribute and ctx.kind(func.value) is Kind.TENSOR and func.attr in methods:
        return [func.value] + [o for o in others if func.attr != "where"]  # not `.where`'s condition
    return []


# -- two tensors selected by ``torch.where`` -------------------------------------------------------

_PROMOTING_OPS = (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv, ast.Mod, ast.Pow)


def selected_dtype_problem(
    ctx: FileContext, anchor: ast.AST, taken: ast.expr, other: ast.expr | None, kept: str = "",
) -> str:
    """Why ``torch.where(c, taken, other)`` may have another dtype than the value the
    original picked ("" when it cannot): ``torch.where`` promotes its two tensors to one
    dtype, so ``x + 1`` and ``x * 2.5`` both become float where the original kept an integer
    ``x + 1``. ``other`` None: the value is ``kept``, a name as it is before the statement
    (an ``if`` without ``else``).

    Each value's dtype is followed to the tensors it comes from (through dtype-keeping
    steps and arithmetic with Python numbers); the two have one dtype when they come
    from the same tensors, each changed the same way or floating point already (a Python
    float or a true division makes an integer tensor float, not a floating one)."""
    first = _dtype_terms(ctx, taken, anchor)
    if other is None:
        second = None if first is None else _kept_terms(ctx, anchor, first, kept)
    else:
        second = _dtype_terms(ctx, other, anchor)
    if (first is not None and second is not None and _same_terms(ctx, anchor, first, second)
            and _same_terms(ctx, anchor, second, first)):
        return ""
    shown = f"`{ctx.code(other)}`" if other is not None else f"`{kept}` as it was"
    return (f"`torch.where` gives `{ctx.code(taken)}` and {shown} one dtype: fixitem cannot show they "
            "have one already (an integer tensor selected with a float one becomes float)")


# Methods whose result has the receiver's dtype whatever their other arguments (a mask, an
# index, a fill value cast to the receiver's dtype).
_RECEIVER_DTYPE = frozenset(
    {"masked_fill", "index_fill", "index_select", "gather", "masked_select", "relu", "view_as", "expand_as",
     "reshape_as", "unflatten"}
)


# Elementwise functions whose result has a floating input's dtype (an integer one gives float).
_FLOAT_OF_INPUT = frozenset(
    {"log", "log1p", "log2", "log10", "exp", "expm1", "sqrt", "rsqrt", "reciprocal", "sigmoid", "tanh", "sin",
     "cos", "tan", "erf", "erfc", "softmax", "log_softmax", "gelu", "silu", "mish", "softplus", "elu", "selu",
     "celu", "logsigmoid"}
)


def _dtype_terms(
    ctx: FileContext, expr: ast.expr, anchor: ast.AST, changed: bool = False, depth: int = 0,
) -> list[tuple[ast.expr, bool]] | None:
    """The tensors ``expr``'s dtype comes from, each with whether a step may change an
    integer dtype (a Python float, a true division, a sum); None when it cannot be followed.
    A name bound earlier in the same branch of ``anchor`` is followed to that value."""
    if depth > MAX_DEPTH:
        return None
    root, always = _dtype_root(ctx, expr)
    changed = changed or not always
    t = type(root)
    if t is ast.UnaryOp and type(root.op) in (ast.USub, ast.UAdd):  # type: ignore[attr-defined]
        return _dtype_terms(ctx, root.operand, anchor, changed, depth + 1)  # type: ignore[attr-defined]
    if t is ast.BinOp and type(root.op) in _PROMOTING_OPS:  # type: ignore[attr-defined]
        op = type(root.op)  # type: ignore[attr-defined]
        return _operand_terms(ctx, [root.left, root.right], anchor, changed, op is ast.Div, depth)  # type: ignore[attr-defined]
    if t is ast.Call:
        func = root.func  # type: ignore[attr-defined]
        args = call_arguments(root)  # type: ignore[arg-type]
        if any(arg_star(a) or arg_keyword(a) == "dtype" for a in args):
            return None
        method = func.attr if type(func) is ast.Attribute and ctx.kind(func.value) is Kind.TENSOR else None
        short = (ctx.provenance.imports.qualify(func) or "").rsplit(".", 1)[-1] if method is None else method
        if method in _RECEIVER_DTYPE:
            return _dtype_terms(ctx, func.value, anchor, changed, depth + 1)
        if short in _FLOAT_OF_INPUT:
            operand = func.value if method is not None else (arg_value(args[0]) if args else None)
            if operand is not None and ctx.kind(operand) is Kind.TENSOR:
                return _dtype_terms(ctx, operand, anchor, True, depth + 1)
        if method is None and short == "where" and len(args) == 3 and not any(arg_keyword(a) for a in args):
            # ``torch.where(c, a, b)``: ``a`` and ``b`` promoted to one dtype (a fix made earlier).
            return _operand_terms(ctx, [arg_value(args[1]), arg_value(args[2])], anchor, changed, False, depth)
        if short in CLAMPS:
            # ``x.clamp(min=0)`` keeps an integer ``x`` integer, ``x.clamp(min=0.5)`` makes it float.
            operands = [func.value] if method is not None else []
            operands += [arg_value(a) for a in args if not (type(arg_value(a)) is ast.Constant
                                                             and arg_value(a).value is None)]  # type: ignore[attr-defined]
            return _operand_terms(ctx, operands, anchor, changed, False, depth)
    if t is ast.Name:
        value = _bound_in_branch(ctx, anchor, root)  # type: ignore[arg-type]
        if value is not None:
            return _dtype_terms(ctx, value, anchor, changed, depth + 1)
    if ctx.kind(root) is not Kind.TENSOR:
        return None
    return [(root, changed)]


def _operand_terms(
    ctx: FileContext, operands: list[ast.expr], anchor: ast.AST, changed: bool, divides: bool, depth: int,
) -> list[tuple[ast.expr, bool]] | None:
    """The terms of an operation on ``operands``: its tensors, changed when a Python number
    other than an int literal takes part (or ``divides``: a true division)."""
    numbers = [o for o in operands if ctx.kind(o) is Kind.NUMBER]
    promotes = divides or any(not _integer_literal(n) for n in numbers)
    terms: list[tuple[ast.expr, bool]] = []
    for operand in operands:
        if ctx.kind(operand) is Kind.NUMBER:
            continue
        if ctx.kind(operand) is not Kind.TENSOR:
            return None
        found = _dtype_terms(ctx, operand, anchor, changed or promotes, depth + 1)
        if found is None:
            return None
        terms.extend(found)
    return terms or None


def _bound_in_branch(ctx: FileContext, anchor: ast.AST, read: ast.Name) -> ast.expr | None:
    """The value ``read``'s name was last given before it in its own branch of ``anchor``."""
    branch = _branch_of(ctx, anchor, read)
    if branch is None:
        return None
    for how, binding in reversed(_bindings_inside(ctx, anchor, read)):
        if binding is None or _branch_of(ctx, anchor, binding) != branch or ctx.below(read, binding):
            continue
        return binding if how == "value" and isinstance(binding, ast.expr) else None
    return None


def _kept_terms(
    ctx: FileContext, anchor: ast.AST, terms: list[tuple[ast.expr, bool]], kept: str,
) -> list[tuple[ast.expr, bool]] | None:
    """The terms of the name ``kept`` as it was: a read of it in the selected value that
    sees the value it had before ``anchor``."""
    for root, _ in terms:
        if type(root) is ast.Name and root.id == kept and _read_before(ctx, anchor, root):  # type: ignore[attr-defined]
            return [(root, False)]
    return None


def _read_before(ctx: FileContext, anchor: ast.AST, read: ast.Name) -> bool:
    """Does ``read``, in a branch of the statement ``anchor``, see the value its name had
    before ``anchor`` (no binding of it before the read in the same branch)?"""
    branch = _branch_of(ctx, anchor, read)
    if branch is None:
        return False
    return not any(binding is None or (_branch_of(ctx, anchor, binding) == branch and not ctx.below(read, binding))
                   for _, binding in _bindings_inside(ctx, anchor, read))


def _bindings_inside(ctx: FileContext, anchor: ast.AST, read: ast.Name) -> list[tuple[str, ast.AST]]:
    """The bindings of ``read``'s name that start inside ``anchor`` before ``read``, by place.
    A binding of no known place counts as one."""
    scope = ctx.provenance.scope_of(read).lookup(read.id)
    if scope is None:
        return []
    places, bindings, unplaced = ctx.bindings_by_place(scope, read.id)
    low = bisect.bisect_left(places, ctx.positions.offset(anchor))
    high = bisect.bisect_left(places, ctx.positions.offset(read))
    return unplaced + bindings[low:high]  # type: ignore[return-value]


def _rebound_between(ctx: FileContext, read: ast.Name, start: int, end: int) -> bool:
    """Is ``read``'s name bound somewhere strictly between the offsets ``start`` and
    ``end`` (not by the assignment ``read`` is part of)?"""
    scope = ctx.provenance.scope_of(read).lookup(read.id)
    if scope is None:
        return False
    places, bindings, _ = ctx.bindings_by_place(scope, read.id)
    between = bindings[bisect.bisect_right(places, start):bisect.bisect_left(places, end)]
    return any(not ctx.below(read, binding) for _, binding in between)  # type: ignore[arg-type]


def _branch_of(ctx: FileContext, anchor: ast.AST, node: ast.AST) -> str | None:
    """The field of ``anchor`` (``body``, ``orelse``, ``test``) that holds ``node``, if any."""
    child, parent = node, ctx.parents.get(node)
    while parent is not None and parent is not anchor:
        child, parent = parent, ctx.parents.get(parent)
    return ctx.field_of(child) if parent is anchor else None


def _same_terms(
    ctx: FileContext, anchor: ast.AST, a: list[tuple[ast.expr, bool]], b: list[tuple[ast.expr, bool]],
) -> bool:
    """Does every tensor of ``a`` come in ``b`` too, changed the same way or floating already?"""
    for root, changed in a:
        partners = [c for r, c in b if _same_tensor(ctx, root, r) or _same_call(ctx, root, r)
                    or _same_before(ctx, anchor, root, r)]
        if not partners:
            return False
        if any(c != changed for c in partners) and not _floating_here(ctx, anchor, root):
            return False
    return True


def _floating_here(ctx: FileContext, anchor: ast.AST, root: ast.expr) -> bool:
    """Is the tensor ``root`` floating point where ``anchor`` runs: visibly so, by the value
    the name certainly holds there (``h = layer(h)``), or under a test of its dtype
    (``if h.dtype == torch.float16``, ``if h.is_floating_point()``)?"""
    if visibly_floating(ctx, root):
        return True
    if type(root) is not ast.Name:
        return False
    value = ctx.provenance.reaching(root)  # type: ignore[arg-type]
    if isinstance(value, ast.expr) and visibly_floating(ctx, value):
        return True
    read = ctx.positions.offset(root)
    # ``clamp_value = torch.finfo(h.dtype).max - 1000`` earlier in the branch: ``finfo`` has run.
    for statement in _statements_before(ctx, anchor, root):
        if not _rebound_between(ctx, root, ctx.positions.offset(statement), read) and any(  # type: ignore[arg-type]
                _tests_floating(ctx, node, root.id) for node in walk(statement)):  # type: ignore[attr-defined]
            return True
    for test in _tests_around(ctx, anchor):
        if _rebound_between(ctx, root, ctx.positions.offset(test), read):  # type: ignore[arg-type]
            continue  # the name was given another value since
        for node in walk(test):
            if _tests_floating(ctx, node, root.id):  # type: ignore[attr-defined]
                return True
            # ``norm = x.norm(dim=-1)`` then ``if norm.max().item() > 1``: ``x.norm`` has run.
            value = _only_value(ctx, node) if type(node) is ast.Name and node is not root else None
            if value is not None and not _rebound_between(ctx, root, ctx.positions.offset(value), read) and any(  # type: ignore[arg-type]
                    _tests_floating(ctx, inner, root.id) for inner in walk(value)):  # type: ignore[attr-defined]
                return True
    return False


def _only_value(ctx: FileContext, name: ast.Name) -> ast.expr | None:
    """The value of the one assignment that binds ``name`` in its scope, placed before it."""
    scope = ctx.provenance.scope_of(name).lookup(name.id)
    bindings = scope.bindings.get(name.id, []) if scope is not None else []
    if len(bindings) != 1 or bindings[0][0] != "value" or not isinstance(bindings[0][1], ast.expr):
        return None
    value = bindings[0][1]
    if value not in ctx.positions or ctx.positions.offset(value) >= ctx.positions.offset(name):
        return None
    return value


def _statements_before(ctx: FileContext, anchor: ast.AST, node: ast.AST) -> list[ast.stmt]:
    """The statements of ``anchor``'s branch that holds ``node`` which run before it."""
    branch = _branch_of(ctx, anchor, node)
    block = getattr(anchor, branch, None) if branch in ("body", "orelse") else None
    if not isinstance(block, list):
        return []
    place = ctx.positions.offset(node)
    return [s for s in block if ctx.positions.offset(s) < place and not ctx.below(node, s)]


def _tests_around(ctx: FileContext, anchor: ast.AST) -> list[ast.expr]:
    """The tests of the ``if`` statements whose body holds ``anchor`` (``anchor``'s own too)."""
    tests = []
    child: ast.AST = anchor
    for parent in [anchor, *ctx.ancestors(anchor)]:
        if type(parent) in (ast.If, ast.IfExp) and (parent is anchor or ctx.field_of(child) == "body"):
            tests.append(parent.test)  # type: ignore[attr-defined]
        if isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            break
        child = parent
    return tests


# Reductions that raise for an integer tensor ("mean(): could not infer output dtype"):
# a test that computes one of ``x`` has run only if ``x`` is floating.
_FLOATING_ONLY = frozenset({"mean", "nanmean", "norm", "std", "var", "softmax", "log_softmax"})


def _tests_floating(ctx: FileContext, node: ast.AST, name: str) -> bool:
    """``name.dtype == torch.float16`` / ``name.dtype in (torch.float16, ...)`` /
    ``name.is_floating_point()``: true only for a floating ``name``; ``name.norm()``,
    ``name.mean()``: computed only for a floating ``name``."""
    if type(node) is ast.Call and (ctx.provenance.imports.qualify(node.func) or "") == "torch.finfo":  # type: ignore[attr-defined]
        # ``torch.finfo(h.dtype)`` raises for an integer dtype.
        args = node.args  # type: ignore[attr-defined]
        return (len(args) == 1 and type(args[0]) is ast.Attribute and args[0].attr == "dtype"
                and type(args[0].value) is ast.Name and args[0].value.id == name)
    if type(node) is ast.Call and type(node.func) is ast.Attribute:  # type: ignore[attr-defined]
        method, value = node.func.attr, node.func.value  # type: ignore[attr-defined]
        if method == "is_floating_point" or (method in _FLOATING_ONLY and ctx.kind(value) is Kind.TENSOR):
            return type(value) is ast.Name and value.id == name
    if type(node) is not ast.Compare or len(node.ops) != 1:  # type: ignore[attr-defined]
        return False
    left, op, right = node.left, node.ops[0], node.comparators[0]  # type: ignore[attr-defined]
    if not (type(left) is ast.Attribute and left.attr == "dtype" and type(left.value) is ast.Name
            and left.value.id == name):
        return False
    dtypes = right.elts if type(op) is ast.In and type(right) in (ast.Tuple, ast.List, ast.Set) else (
        [right] if type(op) in (ast.Eq, ast.Is) else [])  # type: ignore[attr-defined]
    names = [(ctx.provenance.imports.qualify(d) or "") for d in dtypes]
    return bool(names) and all(n.startswith("torch.") and n.rsplit(".", 1)[-1] in FLOATING_DTYPES for n in names)


def _same_call(ctx: FileContext, a: ast.expr, b: ast.expr) -> bool:
    """Two calls of one module written alike (``self.down(h)`` in both branches of an ``if``):
    the same module on inputs of the same dtype gives the same dtype."""
    return (type(a) is ast.Call and type(b) is ast.Call and ctx.kind(a.func) is Kind.MODULE  # type: ignore[attr-defined]
            and ctx.code(a) == ctx.code(b))


def _same_before(ctx: FileContext, anchor: ast.AST, a: ast.expr, b: ast.expr) -> bool:
    """Reads of one name in the branches of ``anchor`` that both see its value from before it."""
    return (type(a) is ast.Name and type(b) is ast.Name and a.id == b.id  # type: ignore[attr-defined]
            and _read_before(ctx, anchor, a) and _read_before(ctx, anchor, b))  # type: ignore[arg-type]
