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

from collections.abc import Sequence

import libcst as cst

from .context import FileContext
from .name_reads import reads_of
from .provenance import Kind, Scope, is_module_class
from .tree import walk

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


def certainly_floating(ctx: FileContext, expr: cst.BaseExpression) -> bool:
    return _dtype(ctx, expr, 0) == "floating"


def certainly_integer(ctx: FileContext, expr: cst.BaseExpression) -> bool:
    """An integer tensor, not ``bool``: its ``.tolist()`` elements are ``int``."""
    return _dtype(ctx, expr, 0) == "integer"


def certainly_integer_or_bool(ctx: FileContext, expr: cst.BaseExpression) -> bool:
    """An integer or ``bool`` tensor: below every floating dtype in type promotion."""
    return _dtype(ctx, expr, 0) in ("integer", "bool")


def _explicit(ctx: FileContext, call: cst.Call) -> str | None:
    """The category of a ``dtype=torch.xxx`` argument, "" when there is another one."""
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == "dtype":
            name = (ctx.provenance.imports.qualify(arg.value) or "").rsplit(".", 1)[-1]
            if name in FLOATING_DTYPES:
                return "floating"
            if name in INTEGER_DTYPES:
                return "integer"
            if name in BOOL_DTYPES:
                return "bool"
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
            if (last in DTYPE_KEEPING or (last in CLAMPS and _integer_bounds(ctx, expr.args[1:]))) and expr.args:
                return _counted(last, _dtype(ctx, expr.args[0].value, depth + 1))
        if isinstance(func, cst.Attribute) and not qualified.startswith("torch."):
            method = func.attr.value
            if method in FLOATING_OPS:
                return "floating"
            if method in INTEGER_OPS:
                return "integer"
            if method == "bool" and not expr.args:
                return "bool"
            if method in DTYPE_KEEPING or (method in CLAMPS and _integer_bounds(ctx, expr.args)):
                return _counted(method, _dtype(ctx, func.value, depth + 1))
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
    if isinstance(expr, cst.Comparison) and not any(
        isinstance(t.operator, (cst.In, cst.NotIn, cst.Is, cst.IsNot)) for t in expr.comparisons
    ):
        tensors = [e for e in (expr.left, *(t.comparator for t in expr.comparisons)) if ctx.kind(e) is Kind.TENSOR]
        return "bool" if tensors and len(expr.comparisons) == 1 else None
    if isinstance(expr, cst.Name):
        annotated = _annotated_dtype(ctx, expr)
        if annotated:
            return annotated
        kinds = {_dtype(ctx, value, depth + 1) for value in ctx.provenance.assigned_values(expr)}
        return kinds.pop() if len(kinds) == 1 else None
    return None


def _counted(step: str, dtype: str | None) -> str | None:
    """The category after ``step``: the sum of a bool tensor is an int64 one."""
    return "integer" if dtype == "bool" and step in COUNTING else dtype


def _integer_bounds(ctx: FileContext, args: Sequence[cst.Arg]) -> bool:
    """``clamp`` bounds that keep an integer tensor integer: int literals (or ``None``)."""
    return bool(args) and all(
        not a.star and (isinstance(a.value, cst.Integer) or (isinstance(a.value, cst.Name) and a.value.value == "None"))
        for a in args
    )


def _annotated_dtype(ctx: FileContext, name: cst.Name) -> str | None:
    """"integer" / "bool" for a parameter bound only as ``mask: torch.BoolTensor``."""
    scope = ctx.provenance.scope_of(name).lookup(name.value)
    bindings = scope.bindings.get(name.value, []) if scope is not None else []
    if len(bindings) != 1 or bindings[0][0] != "param" or not isinstance(bindings[0][1], cst.Param):
        return None
    annotation = bindings[0][1].annotation
    qualified = (ctx.provenance.imports.qualify(annotation.annotation) or "") if annotation is not None else ""
    if qualified in INTEGER_ANNOTATIONS:
        return "integer"
    return "bool" if qualified in BOOL_ANNOTATIONS else None


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


def _loss_module(ctx: FileContext, func: cst.BaseExpression) -> bool:
    """``criterion`` in ``criterion(out, y)``, built from an ``nn.*Loss`` class."""
    values = ctx.provenance.assigned_values(func)

    def is_loss(value: cst.BaseExpression) -> bool:
        if not isinstance(value, cst.Call):
            return False
        qualified = ctx.provenance.imports.qualify(value.func)
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


def _dtype_of_keyword(ctx: FileContext, call: cst.Call) -> bool | None:
    """True / False when the call names a floating / integer ``dtype=``; None when it names none."""
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == "dtype":
            name = (ctx.provenance.imports.qualify(arg.value) or "").rsplit(".", 1)[-1]
            if name in FLOAT_DTYPES:
                return True
            return False if name in INT_DTYPES else None
    return None


def visibly_floating(ctx: FileContext, expr: cst.BaseExpression) -> bool:
    """Can fixitem see that the tensor ``expr`` is floating point? Wider than
    :func:`certainly_floating`: also ``sigmoid``, ``mean``, a module's output,
    a true division, a ``torch.FloatTensor`` annotation."""
    return _floating(ctx, expr, set())


def _floating(ctx: FileContext, expr: cst.BaseExpression, seen: set[tuple[int, str]]) -> bool:
    if isinstance(expr, cst.Call):
        return _floating_call(ctx, expr, seen)
    if isinstance(expr, cst.BinaryOperation):
        if isinstance(expr.operator, cst.Divide):
            return Kind.TENSOR in (ctx.kind(expr.left), ctx.kind(expr.right))
        sides = (expr.left, expr.right)
        return any(isinstance(s, cst.Float) or (ctx.kind(s) is Kind.TENSOR and _floating(ctx, s, seen)) for s in sides)
    if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, (cst.Minus, cst.Plus)):
        return _floating(ctx, expr.expression, seen)
    if isinstance(expr, cst.Subscript):
        return _floating(ctx, expr.value, seen)
    if isinstance(expr, cst.Attribute):
        if expr.attr.value in ("T", "mT", "H", "mH", "data", "grad"):
            return _floating(ctx, expr.value, seen)
        if isinstance(expr.value, cst.Name) and expr.value.value == "self":
            values = ctx.provenance.assigned_values(expr)
            return bool(values) and all(_floating_attribute_value(ctx, v, seen) for v in values)
        return False
    if isinstance(expr, cst.IfExp):
        return _floating(ctx, expr.body, seen) and _floating(ctx, expr.orelse, seen)
    if isinstance(expr, cst.Name):
        return _floating_name(ctx, expr, seen)
    return False


def _floating_attribute_value(ctx: FileContext, value: cst.BaseExpression, seen: set[tuple[int, str]]) -> bool:
    if isinstance(value, cst.Call) and (ctx.provenance.imports.qualify(value.func) or "").endswith(("nn.Parameter", "parameter.Parameter")):
        return True  # a parameter: trained, so floating point
    return _floating(ctx, value, seen)


def _floating_call(ctx: FileContext, call: cst.Call, seen: set[tuple[int, str]]) -> bool:
    if ctx.kind(call.func) is Kind.MODULE:
        return True  # a module's output: activations, logits, losses
    declared = _dtype_of_keyword(ctx, call)
    if declared is not None:
        return declared
    func = call.func
    qualified = ctx.provenance.imports.qualify(func) or ""
    if qualified.startswith("torch."):
        short = qualified.rsplit(".", 1)[-1]
        if short in FLOAT_RESULTS or short.endswith("_loss"):
            return True
        if short in SAME_DTYPE and call.args:
            first = call.args[0].value
            if isinstance(first, (cst.List, cst.Tuple)):  # torch.cat([a, b])
                return any(_floating(ctx, e.value, seen) for e in first.elements if not isinstance(e, cst.StarredElement))
            if short in ("maximum", "minimum", "add", "sub", "mul", "where") and len(call.args) > 1:
                operands = call.args[1:3] if short == "where" else call.args[:2]  # not where's condition
                return any(ctx.kind(a.value) is Kind.TENSOR and _floating(ctx, a.value, seen) for a in operands)
            return _floating(ctx, first, seen)
        if short in ("tensor", "as_tensor", "full", "arange"):
            return any(isinstance(node, cst.Float) for arg in call.args for node in walk(arg.value))
        return False
    if isinstance(func, cst.Attribute) and ctx.kind(func.value) is Kind.TENSOR:
        method = func.attr.value
        if method in FLOAT_RESULTS:
            return True
        if method == "to":
            for arg in call.args:
                if ctx.kind(arg.value) is Kind.TENSOR:
                    return _floating(ctx, arg.value, seen)  # ``x.to(other)`` takes other's dtype
                name = (ctx.provenance.imports.qualify(arg.value) or "").rsplit(".", 1)[-1]
                if name in FLOAT_DTYPES:
                    return True
                if name in INT_DTYPES:
                    return False
            return _floating(ctx, func.value, seen)
        if method == "type_as" and call.args:
            return _floating(ctx, call.args[0].value, seen)
        if method in SAME_DTYPE:
            return _floating(ctx, func.value, seen)
    return False


def _floating_name(ctx: FileContext, name: cst.Name, seen: set[tuple[int, str]]) -> bool:
    scope: Scope | None = ctx.provenance.scope_of(name).lookup(name.value)
    if scope is None:
        return False
    key = (id(scope), name.value)
    if key in seen:
        # ``h = h - m``: floating when the name's other bindings are (a name
        # cannot be bound by self-references alone).
        return True
    seen = seen | {key}
    bindings = [(how, node) for how, node in scope.bindings[name.value] if how != "aug"]
    if not bindings:
        return False
    for how, node in bindings:
        if how == "value" and isinstance(node, cst.BaseExpression):
            if not _floating(ctx, node, seen):
                return False
        elif how == "param" and isinstance(node, cst.Param):
            annotation = node.annotation.annotation if node.annotation is not None else None
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
    }
)
# Steps that keep a floating dtype, and give an integer (or fail) for an integer tensor:
# a floating result of them proves a floating input.
DTYPE_KEEPING_FLOATING = frozenset({"sum", "nansum", "prod", "cumsum", "cumprod", "mean", "nanmean", "norm", "std", "var"})


def _dtype_root(ctx: FileContext, expr: cst.BaseExpression) -> tuple[cst.BaseExpression, bool]:
    """The tensor whose dtype ``expr`` has (following dtype-keeping steps and names bound
    once), and whether every step keeps any dtype (not only a floating one)."""
    always = True
    for _ in range(16):
        if isinstance(expr, cst.Call) and not _names_dtype_or_tensor(ctx, expr):
            func = expr.func
            qualified = ctx.provenance.imports.qualify(func) or ""
            if qualified.startswith("torch.") and expr.args and not expr.args[0].star:
                short = qualified.rsplit(".", 1)[-1]
                if short in DTYPE_KEEPING_ALWAYS or short in DTYPE_KEEPING_FLOATING:
                    always = always and short in DTYPE_KEEPING_ALWAYS
                    expr = expr.args[0].value
                    continue
            elif isinstance(func, cst.Attribute) and ctx.kind(func.value) is Kind.TENSOR:
                method = func.attr.value
                target = _dtype_target(ctx, expr) if method in ("to", "type_as") else None
                if target is not None:
                    expr = target  # ``v.type_as(x)``, ``v.to(x)``: ``x``'s dtype
                    continue
                if method == "to" and _device_only(expr):
                    expr = func.value
                    continue
                if method in DTYPE_KEEPING_ALWAYS or method in DTYPE_KEEPING_FLOATING:
                    always = always and method in DTYPE_KEEPING_ALWAYS
                    expr = func.value
                    continue
            return expr, always
        if isinstance(expr, cst.Subscript):
            expr = expr.value
            continue
        if isinstance(expr, cst.Attribute) and expr.attr.value in ("data", "T", "mT"):
            expr = expr.value
            continue
        if isinstance(expr, cst.Name):
            scope = ctx.provenance.scope_of(expr).lookup(expr.value)
            bindings = scope.bindings.get(expr.value, []) if scope is not None else []
            if len(bindings) == 1 and bindings[0][0] == "value" and isinstance(bindings[0][1], cst.BaseExpression):
                expr = bindings[0][1]
                continue
        return expr, always
    return expr, False


def _names_dtype_or_tensor(ctx: FileContext, call: cst.Call) -> bool:
    """A ``dtype=`` / ``torch.float16`` argument (``x.view(torch.float16)``), or a second
    tensor operand (``torch.max(a, b)`` promotes): the step may change the dtype.
    ``v.to(x)`` / ``v.type_as(x)`` are told apart by their caller."""
    tensors = 0
    for arg in call.args:
        if arg.star or (arg.keyword is not None and arg.keyword.value == "dtype"):
            return True
        name = (ctx.provenance.imports.qualify(arg.value) or "")
        if name.startswith("torch.") and name.rsplit(".", 1)[-1] in FLOATING_DTYPES | INTEGER_DTYPES | BOOL_DTYPES:
            return True
        tensors += ctx.kind(arg.value) is Kind.TENSOR
    receiver = isinstance(call.func, cst.Attribute) and ctx.kind(call.func.value) is Kind.TENSOR
    if receiver and isinstance(call.func, cst.Attribute) and call.func.attr.value in ("to", "type_as"):
        return False
    return tensors > (0 if receiver else 1)


def _dtype_target(ctx: FileContext, call: cst.Call) -> cst.BaseExpression | None:
    """``x`` in ``v.type_as(x)`` / ``v.to(x)``."""
    if len(call.args) == 1 and call.args[0].keyword is None and not call.args[0].star:
        value = call.args[0].value
        if ctx.kind(value) is Kind.TENSOR:
            return value
    return None


def _device_only(call: cst.Call) -> bool:
    """``v.to("cuda")``, ``v.to(device=d, non_blocking=True)``: the dtype is kept."""
    for i, arg in enumerate(call.args):
        if arg.star:
            return False
        if arg.keyword is not None:
            if arg.keyword.value not in ("device", "non_blocking", "copy"):
                return False
        elif not (i == 0 and isinstance(arg.value, cst.SimpleString)):
            return False
    return bool(call.args)


def _same_tensor(ctx: FileContext, a: cst.BaseExpression, b: cst.BaseExpression) -> bool:
    """Are ``a`` and ``b`` the same node, or reads of one name that see the same binding?"""
    if a is b:
        return True
    if not (isinstance(a, cst.Name) and isinstance(b, cst.Name) and a.value == b.value):
        return False
    scope = ctx.provenance.scope_of(a).lookup(a.value)
    if scope is None or ctx.provenance.scope_of(b).lookup(b.value) is not scope:
        return False
    bindings = scope.bindings.get(a.value, [])
    if len(bindings) == 1 and bindings[0][0] == "param":
        return True
    return _no_binding_between(ctx, bindings, a, b) or _no_binding_between(ctx, bindings, b, a)


def _statement_of(ctx: FileContext, node: cst.CSTNode) -> cst.CSTNode | None:
    for ancestor in ctx.ancestors(node):
        if isinstance(ancestor, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
            return ancestor
    return None


def _no_binding_between(ctx: FileContext, bindings, first: cst.Name, then: cst.Name) -> bool:
    """``first`` is read in a simple statement that runs, in the same block, before
    ``then`` is read (or in the same statement), and no binding of the name lies between."""
    statement = _statement_of(ctx, first)
    if not isinstance(statement, cst.SimpleStatementLine):
        return False
    block = ctx.parents.get(statement)
    if not any(ancestor is block for ancestor in ctx.ancestors(then)):
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
        if start <= offset(bound) <= end and not any(ancestor is bound for ancestor in ctx.ancestors(then)):
            return False  # bound after ``first`` was read, before ``then``
    return True


def same_dtype(ctx: FileContext, a: cst.BaseExpression, b: cst.BaseExpression) -> bool:
    """Do the tensors ``a`` and ``b`` certainly have one dtype (``y`` and ``y.norm()``)?"""
    root_a, always_a = _dtype_root(ctx, a)
    root_b, always_b = _dtype_root(ctx, b)
    if not _same_tensor(ctx, root_a, root_b):
        return False
    return (always_a and always_b) or visibly_floating(ctx, a) or visibly_floating(ctx, b) or visibly_floating(ctx, root_a)


def zero_dim_dtype_problem(
    ctx: FileContext,
    value: str,
    operand: cst.BaseExpression,
    sources: Sequence[cst.BaseExpression] = (),
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


def tensors_met(ctx: FileContext, expr: cst.BaseExpression) -> list[cst.BaseExpression]:
    """The tensors that ``expr``, about to become a 0-dim tensor, meets in an operation
    whose result dtype they decide together: the other operand of arithmetic, the
    other branches of ``torch.where``, the input of a ``torch.clamp`` bound. Followed
    through Python arithmetic with numbers and the local names it is stored in
    (uses fixitem cannot follow are not listed: ``value_flow`` reports them)."""
    found: list[cst.BaseExpression] = []
    _meet(ctx, expr, found, 0)
    return found


def _meet(ctx: FileContext, node: cst.BaseExpression, found: list[cst.BaseExpression], depth: int) -> None:
    parent = ctx.parents.get(node)
    if isinstance(parent, cst.BinaryOperation):
        other = parent.right if parent.left is node else parent.left
        if ctx.kind(other) is Kind.TENSOR:
            found.append(other)
        else:
            _meet(ctx, parent, found, depth)
    elif isinstance(parent, cst.UnaryOperation) and not isinstance(parent.operator, cst.Not) or isinstance(parent, cst.IfExp) and parent.test is not node:
        _meet(ctx, parent, found, depth)
    elif isinstance(parent, cst.Arg) and parent.value is node and not parent.star:
        call = ctx.parents.get(parent)
        if isinstance(call, cst.Call):
            found.extend(_call_partners(ctx, call, parent))
    elif isinstance(parent, (cst.Assign, cst.AnnAssign)) and parent.value is node and depth < 4:
        targets = [t.target for t in parent.targets] if isinstance(parent, cst.Assign) else [parent.target]
        if len(targets) == 1 and isinstance(targets[0], cst.Name):
            target = targets[0]
            scope = ctx.provenance.scope_of(target)
            for read in reads_of(ctx, scope, target.value):
                if read is not None and ctx.positions.offset(read) > ctx.positions.offset(target) or (
                    read is not None and _in_one_loop(ctx, read, target)
                ):
                    _meet(ctx, read, found, depth + 1)


def _in_one_loop(ctx: FileContext, a: cst.CSTNode, b: cst.CSTNode) -> bool:
    loops = {id(n) for n in ctx.ancestors(b) if isinstance(n, (cst.For, cst.While))}
    return any(id(n) in loops for n in ctx.ancestors(a) if isinstance(n, (cst.For, cst.While)))


def _call_partners(ctx: FileContext, call: cst.Call, arg: cst.Arg) -> list[cst.BaseExpression]:
    qualified = ctx.provenance.imports.qualify(call.func) or ""
    others = [a.value for a in call.args if a is not arg and ctx.kind(a.value) is Kind.TENSOR]
    if qualified == "torch.where":
        condition = next((a for a in call.args if a.keyword is None), None)
        return [a.value for a in call.args if a is not arg and a is not condition
                and (a.keyword is None or a.keyword.value in ("input", "other")) and ctx.kind(a.value) is Kind.TENSOR]
    if qualified in ("torch.clamp", "torch.clip", "torch.clamp_min", "torch.clamp_max", "torch.maximum", "torch.minimum"):
        return others
    func = call.func
    methods = ("clamp", "clip", "clamp_min", "clamp_max", "where", "maximum", "minimum")
    if isinstance(func, cst.Attribute) and ctx.kind(func.value) is Kind.TENSOR and func.attr.value in methods:
        return [func.value] + [o for o in others if func.attr.value != "where"]  # not `.where`'s condition
    return []
