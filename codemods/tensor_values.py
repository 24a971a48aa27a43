"""Turning Python reads of tensor values back into tensor expressions.

Shared by the rules that replace host-side decisions with tensor ops:

* :func:`convert_condition` turns a Python condition that reads tensors
  (``t.item() > c``, ``float(a) < float(b)``, ``x.any()``, ``and``/``or``/
  ``not``) into a boolean tensor expression (``t > c``, ``a < b``, ``&``...);
* :func:`convert_value` does the same for arithmetic on values read with
  ``.item()`` / ``float()`` / ``int()`` (and ``max`` / ``min`` of them);
* :func:`purity` says whether an expression may be evaluated even when the
  original code would not have evaluated it (both branches of a
  ``torch.where`` always run), and why not.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst

from .context import FileContext
from .dtypes import same_dtype
from .effects import call_effect
from .model.reductions import REDUCTIONS
from .provenance import Kind
from .name_reads import reads_of
from .scalar_shapes import detached_scalar, plainly_zero_dim
from .tree import method_call, walk

# Functions whose gradient is infinite or NaN somewhere in their domain: in the
# branch that was not taken, 0 * inf = NaN reaches the gradient.
NAN_GRADIENT_FUNCTIONS = frozenset(
    {
        "log", "log2", "log10", "log1p", "sqrt", "rsqrt", "reciprocal", "div", "true_divide",
        "floor_divide", "pow", "float_power", "acos", "asin", "atanh", "acosh", "logit", "xlogy",
        "digamma", "polygamma", "lgamma", "erfinv", "cdist", "norm", "pdist", "atan2",
    }
)


class NotConvertible(Exception):
    """The expression mixes tensor values with Python logic fixitem cannot translate."""


@dataclass
class Converted:
    expr: cst.BaseExpression
    reads: list[cst.CSTNode] = field(default_factory=list)  # the sync nodes it removed


def _paren(expr: cst.BaseExpression) -> cst.BaseExpression:
    if isinstance(expr, (cst.Name, cst.Attribute, cst.Call, cst.Subscript, cst.Integer, cst.Float)):
        return expr
    if expr.lpar:
        return expr
    return expr.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])


def _operand(expr: cst.BaseExpression) -> cst.BaseExpression:
    """``expr`` as an operand of ``&`` / ``|``: unary ``~`` and ``-`` bind tighter."""
    if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, (cst.BitInvert, cst.Minus)):
        return expr
    return _paren(expr)


def _strip_parens(expr: cst.BaseExpression) -> cst.BaseExpression:
    if isinstance(expr, (cst.Tuple, cst.GeneratorExp, cst.Yield, cst.NamedExpr)):
        return expr  # the parentheses are part of the syntax
    return expr.with_changes(lpar=[], rpar=[]) if getattr(expr, "lpar", None) else expr


def _torch_attr(ctx: FileContext, name: str) -> cst.Attribute:
    return cst.Attribute(value=cst.Name(ctx.torch_name()), attr=cst.Name(name))


def torch_call(ctx: FileContext, name: str, *args: cst.BaseExpression, **kwargs: cst.BaseExpression) -> cst.Call:
    arguments = [cst.Arg(_strip_parens(a)) for a in args]
    arguments += [
        cst.Arg(_strip_parens(v), keyword=cst.Name(k), equal=cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace("")))
        for k, v in kwargs.items()
    ]
    return cst.Call(func=_torch_attr(ctx, name), args=arguments)


def _read_of(ctx: FileContext, expr: cst.BaseExpression) -> tuple[cst.BaseExpression, str] | None:
    """``t.item()`` -> (t, "item"), ``float(t)`` -> (t, "float"), ``int(t)`` -> (t, "int")."""
    if not isinstance(expr, cst.Call):
        return None
    func = expr.func
    if isinstance(func, cst.Attribute) and func.attr.value == "item" and not expr.args:
        if ctx.is_tensor(func.value):
            return func.value, "item"
        return None
    if isinstance(func, cst.Name) and func.value in ("float", "int") and len(expr.args) == 1:
        arg = expr.args[0]
        if arg.keyword is None and not arg.star and ctx.is_tensor(arg.value):
            return arg.value, func.value
    return None


def convert_value(ctx: FileContext, expr: cst.BaseExpression, detach: bool = False) -> Converted | None:
    """Arithmetic over tensor reads as a tensor expression; None if it reads no tensor.

    ``.item()`` also cut the value off from autograd: with ``detach`` (for
    values that flow into arithmetic) the read becomes ``.detach()`` so that
    gradients stay what they were. Comparisons need no detaching.

    Raises :class:`NotConvertible` when it reads a tensor in a way that cannot
    be kept on the device.
    """
    read = _read_of(ctx, expr)
    if read is not None:
        tensor, how = read
        if how == "int":
            converted = method_call(tensor, "long")
        elif detach:
            # ``.reshape(())`` unless plainly 0-dim: a ``(1,)`` tensor would broadcast
            # into the result's shape where the number did not.
            converted = detached_scalar(ctx, tensor)
        else:
            converted = tensor
        if expr.lpar and not tensor.lpar and not isinstance(converted, (cst.Name, cst.Call, cst.Attribute, cst.Subscript)):
            converted = _paren(converted)
        return Converted(converted, [expr])
    if isinstance(expr, cst.BinaryOperation):
        left = convert_value(ctx, expr.left, detach)
        right = convert_value(ctx, expr.right, detach)
        if left is None and right is None:
            return None
        if left is None and not _plain_number(ctx, expr.left):
            raise NotConvertible(f"`{ctx.code(expr.left)}` may not be a number")
        if right is None and not _plain_number(ctx, expr.right):
            raise NotConvertible(f"`{ctx.code(expr.right)}` may not be a number")
        new = expr.with_changes(
            left=left.expr if left else expr.left, right=right.expr if right else expr.right
        )
        return Converted(new, (left.reads if left else []) + (right.reads if right else []))
    if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, (cst.Minus, cst.Plus)):
        inner = convert_value(ctx, expr.expression, detach)
        if inner is None:
            return None
        return Converted(expr.with_changes(expression=_paren(inner.expr)), inner.reads)
    if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Name) and expr.func.value in ("max", "min", "abs"):
        if any(a.keyword is not None or a.star for a in expr.args):
            raise NotConvertible(f"`{expr.func.value}(...)` with keyword or starred arguments")
        parts = [convert_value(ctx, a.value, detach) for a in expr.args]
        if all(p is None for p in parts):
            return None
        reads = [r for p in parts if p for r in p.reads]
        if expr.func.value == "abs" and len(parts) == 1 and parts[0] is not None:
            return Converted(expr.with_changes(args=[cst.Arg(parts[0].expr)]), reads)
        new = convert_min_max(ctx, expr.func.value, expr.args, parts)
        return Converted(new, reads)
    if ctx.kind(expr) is Kind.TENSOR:
        return None  # already a tensor: nothing read here
    for sub in walk(expr):
        if _read_of(ctx, sub) is not None:
            raise NotConvertible(f"`{ctx.code(expr)}` uses the value in a way fixitem cannot keep on the device")
    return None


def convert_min_max(ctx: FileContext, which: str, args, parts: list[Converted | None]) -> cst.BaseExpression:
    if len(args) != 2:
        raise NotConvertible(f"`{which}(...)` with {len(args)} arguments")
    (a, b), (pa, pb) = [x.value for x in args], parts
    if pa is not None and pb is not None:
        return torch_call(ctx, "maximum" if which == "max" else "minimum", pa.expr, pb.expr)
    tensor, bound, bound_node = (pa.expr, b, b) if pa is not None else (pb.expr, a, a)  # type: ignore[union-attr]
    if not _plain_number(ctx, bound_node):
        raise NotConvertible(f"`{ctx.code(bound_node)}` may not be a number")
    key = "min" if which == "max" else "max"
    return torch_call(ctx, "clamp", tensor, **{key: bound})


def _plain_number(ctx: FileContext, expr: cst.BaseExpression) -> bool:
    """Could ``expr`` be a Python number (not a tensor read, not numpy)?"""
    kind = ctx.kind(expr)
    if kind in (Kind.NUMBER, Kind.TENSOR):
        return True
    if kind in (Kind.NUMPY, Kind.OTHER, Kind.MODULE):
        return False
    return not any(_read_of(ctx, sub) is not None for sub in walk(expr))


# Calls whose result is a boolean tensor (the stubs say "a tensor", not its dtype).
BOOLEAN_CALLS = frozenset(
    {
        "any", "all", "isnan", "isinf", "isfinite", "isposinf", "isneginf", "isreal", "isclose",
        "isin", "signbit", "logical_not", "logical_and", "logical_or", "logical_xor",
        "eq", "ne", "lt", "le", "gt", "ge", "greater", "greater_equal", "less", "less_equal",
        "not_equal", "bool",
    }
)


def is_boolean(ctx: FileContext, expr: cst.BaseExpression) -> bool:
    """Is ``expr`` certainly a boolean tensor (a comparison, ``.any()``, ``torch.isnan``, ...)?"""
    if isinstance(expr, cst.Comparison):
        return True
    if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.BitInvert):
        return is_boolean(ctx, expr.expression)
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, (cst.BitAnd, cst.BitOr, cst.BitXor)):
        return is_boolean(ctx, expr.left) and is_boolean(ctx, expr.right)
    if isinstance(expr, cst.Call):
        func = expr.func
        qualified = ctx.provenance.imports.qualify(func) or ""
        if qualified.startswith("torch."):
            return qualified.rsplit(".", 1)[-1] in BOOLEAN_CALLS
        if isinstance(func, cst.Attribute) and ctx.kind(func.value) is Kind.TENSOR:
            return func.attr.value in BOOLEAN_CALLS
    return False


def convert_condition(ctx: FileContext, expr: cst.BaseExpression) -> Converted | None:
    """A Python truth test over tensor values as a boolean tensor expression.

    None when the test reads no tensor; raises :class:`NotConvertible` when it
    does but cannot be translated.
    """
    if isinstance(expr, cst.BooleanOperation):
        left = convert_condition(ctx, expr.left)
        right = convert_condition(ctx, expr.right)
        if left is None and right is None:
            return None
        if left is None or right is None:
            plain = expr.left if left is None else expr.right
            raise NotConvertible(f"`{ctx.code(plain)}` is Python logic mixed with a tensor condition")
        op = cst.BitAnd() if isinstance(expr.operator, cst.And) else cst.BitOr()
        new = cst.BinaryOperation(left=_operand(left.expr), operator=op, right=_operand(right.expr), lpar=expr.lpar, rpar=expr.rpar)
        return Converted(new, left.reads + right.reads)
    if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Not):
        inner = convert_condition(ctx, expr.expression)
        if inner is None:
            return None
        test = inner.expr
        if isinstance(test, cst.Comparison) and len(test.comparisons) == 1 and not test.lpar:
            # ``not a != b`` is ``a == b`` (for NaN too); ``<`` is never flipped to ``>=``.
            (target,) = test.comparisons
            flipped = {cst.Equal: cst.NotEqual, cst.NotEqual: cst.Equal}.get(type(target.operator))
            if flipped is not None:
                operator = flipped(whitespace_before=target.operator.whitespace_before,
                                   whitespace_after=target.operator.whitespace_after)
                return Converted(test.with_changes(comparisons=[target.with_changes(operator=operator)]), inner.reads)
        return Converted(cst.UnaryOperation(operator=cst.BitInvert(), expression=_paren(test)), inner.reads)
    if isinstance(expr, cst.Comparison):
        if any(isinstance(c.operator, (cst.Is, cst.IsNot, cst.In, cst.NotIn)) for c in expr.comparisons):
            for sub in walk(expr):
                if _read_of(ctx, sub) is not None:
                    raise NotConvertible("`is` / `in` tests have no tensor equivalent")
            return None
        operands = [expr.left] + [c.comparator for c in expr.comparisons]
        converted = [convert_value(ctx, o) for o in operands]
        is_tensor = [c is not None or ctx.is_tensor(o) for o, c in zip(operands, converted)]
        if all(c is None for c in converted):
            if any(is_tensor) and len(expr.comparisons) == 1:
                return Converted(expr, [expr])  # ``t > 0``: a bool tensor already
            return None
        for o, c in zip(operands, converted):
            if c is None and not _plain_number(ctx, o):
                raise NotConvertible(f"`{ctx.code(o)}` may not be a number")
        values = [c.expr if c else o for o, c in zip(operands, converted)]
        reads = [r for c in converted if c for r in c.reads]
        pairs = []
        for i, comparison in enumerate(expr.comparisons):
            if not (is_tensor[i] or is_tensor[i + 1]):
                raise NotConvertible(f"`{ctx.code(operands[i])} ... {ctx.code(operands[i + 1])}` compares Python values")
            pairs.append(cst.Comparison(left=values[i], comparisons=[comparison.with_changes(comparator=values[i + 1])]))
        if len(pairs) == 1:
            return Converted(pairs[0].with_changes(lpar=expr.lpar, rpar=expr.rpar), reads)
        new: cst.BaseExpression = _paren(pairs[0])
        for pair in pairs[1:]:
            new = cst.BinaryOperation(left=new, operator=cst.BitAnd(), right=_paren(pair))
        return Converted(new, reads)
    value = convert_value(ctx, expr)
    if value is not None:
        # ``if t.item():`` tests for non-zero.
        return Converted(cst.Comparison(left=_paren(value.expr), comparisons=[cst.ComparisonTarget(cst.NotEqual(), cst.Integer("0"))]), value.reads)
    if ctx.is_tensor(expr):
        if is_boolean(ctx, expr):
            return Converted(expr, [expr])
        # ``if t:`` tests a number for non-zero; ``~`` / ``&`` and ``torch.where``
        # need that as a boolean tensor (``~`` of an integer is bitwise).
        nonzero = cst.ComparisonTarget(cst.NotEqual(), cst.Integer("0"))
        return Converted(cst.Comparison(left=_paren(expr), comparisons=[nonzero]), [expr])
    if isinstance(expr, cst.Call) and (ctx.provenance.imports.qualify(expr.func) or "").startswith("math.") and any(
            ctx.is_tensor(a.value) for a in expr.args):
        name = (ctx.provenance.imports.qualify(expr.func) or "").split(".")[-1]
        instead = f"`torch.{name}`" if name in ("isfinite", "isnan", "isinf") else "torch's own function"
        raise NotConvertible(f"`{ctx.code(expr)}` reads the tensor into Python's `math`: {instead} decides on the device")
    return None


@dataclass
class Purity:
    safe: bool
    reason: str = ""
    blocking: bool = False  # not even an unsafe fix: the rewrite would most likely be wrong


def purity(ctx: FileContext, expr: cst.BaseExpression) -> Purity:
    """May ``expr`` run when the original code would have skipped it?

    (Under ``torch.no_grad()`` no gradient can turn into NaN: only what the
    forward computation itself does counts.)"""
    from .grad_mode import gradients_off
    from .signs import zero_divisor

    grad = not gradients_off(ctx, expr)
    for node in walk(expr):
        if isinstance(node, (cst.Lambda, cst.NamedExpr, cst.Yield, cst.Await)):
            return Purity(False, f"`{ctx.code(node)}` is not a plain value")
        if isinstance(node, cst.BinaryOperation):
            if isinstance(node.operator, (cst.Divide, cst.FloorDivide, cst.Modulo)):
                zero = zero_divisor(ctx, node.right)
                kind = ctx.kind(node) if node in ctx.parents else Kind.UNKNOWN
                if zero and (kind is Kind.NUMBER or (kind is Kind.UNKNOWN and not grad)):
                    maybe = "" if kind is Kind.NUMBER else " (if both are Python numbers)"
                    return Purity(False, f"`{ctx.code(node)}` divides by `{ctx.code(node.right)}`, which may be zero: "
                                         f"computed where the branch was not taken, it can raise `ZeroDivisionError`{maybe}")
                if zero and grad:
                    return Purity(False, f"`{ctx.code(node)}` divides by `{ctx.code(node.right)}`, which {zero}: "
                                         "the untaken branch's gradient can turn into NaN")
            if grad and isinstance(node.operator, cst.Power) and not (_is_constant(node.right) and _non_negative_integer(node.right)):
                return Purity(False, f"`{ctx.code(node)}` can have an infinite gradient: the untaken branch's gradient can turn into NaN")
        if isinstance(node, cst.Subscript) and ctx.kind(node.value) is not Kind.MODULE:
            return Purity(False, f"`{ctx.code(node)}` indexes a tensor: the branches may differ in shape "
                                 "(torch.where then broadcasts or fails) or compute on empty data", blocking=True)
        if isinstance(node, cst.Call):
            shape = _shape_problem(ctx, node, top=node is expr)
            if shape:
                return Purity(False, shape, blocking=True)
            problem = _call_problem(ctx, node, grad)
            if problem:
                return Purity(False, problem)
    return Purity(True)


# Operations whose result need not have the shape of their input: torch.where
# needs both branches to agree (or it silently broadcasts).
SHAPE_CHANGING = frozenset(
    {
        "cat", "concat", "concatenate", "stack", "hstack", "vstack", "reshape", "view", "flatten",
        "unflatten", "squeeze", "unsqueeze", "narrow", "expand", "repeat", "repeat_interleave", "tile",
        "pad", "permute", "transpose", "t", "index_select", "masked_select", "nonzero", "unique",
        "topk", "split", "chunk", "interpolate", "gather", "einsum", "matmul", "mm", "bmm",
    }
)


def _shape_problem(ctx: FileContext, call: cst.Call, top: bool) -> str:
    func = call.func
    qualified = ctx.provenance.imports.qualify(func) or ""
    if qualified.startswith("torch."):
        name = qualified.rsplit(".", 1)[-1]
    elif isinstance(func, cst.Attribute) and ctx.kind(func.value) is Kind.TENSOR:
        name = func.attr.value  # a tensor method
    else:
        return ""  # modules and other callables: see _call_problem
    if name in SHAPE_CHANGING or (top and name in REDUCTIONS):
        return (f"`{ctx.code(call)}` may change the shape: torch.where needs both branches "
                "to have the same shape (or silently broadcasts them)")
    return ""


def _is_constant(expr: cst.BaseExpression) -> bool:
    if isinstance(expr, (cst.Integer, cst.Float)):
        return True
    if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, (cst.Minus, cst.Plus)):
        return _is_constant(expr.expression)
    return False


def _non_negative_integer(expr: cst.BaseExpression) -> bool:
    return isinstance(expr, cst.Integer)


def _call_problem(ctx: FileContext, call: cst.Call, grad: bool = True) -> str:
    """Why evaluating ``call`` also where the original did not (both branches of ``torch.where``)
    changes the program, or "": its effects (:func:`~fixitem.codemods.effects.call_effect`), and a
    gradient that is infinite somewhere (0 * inf = NaN reaches the untaken branch's gradient)."""
    func = call.func
    qualified = ctx.provenance.imports.qualify(func) or ""
    if qualified.startswith("torch."):
        name = qualified.rsplit(".", 1)[-1]
    elif isinstance(func, cst.Attribute) and ctx.kind(func.value) is Kind.TENSOR:
        name = func.attr.value
    else:
        name = ""
    found = call_effect(ctx, call)
    if not found.effect.pure:
        return found.reason
    if grad and name in NAN_GRADIENT_FUNCTIONS:
        return f"`{ctx.code(call)}` can have an infinite gradient: the untaken branch's gradient can turn into NaN"
    return ""


def sites_within(ctx: FileContext, sites, root: cst.CSTNode) -> list:
    """The sync sites at or below ``root`` that a rewrite may turn into tensor code
    (``all(t)`` / ``any(t)``, which read element by element, and a tensor a metric writer
    reads itself, are only reported)."""
    return [site for site in ctx.sites_below(sites, root) if site.kind not in ("elements", "metric")]


LINE_LENGTH = 88


def _newline_indent(extra: str) -> cst.ParenthesizedWhitespace:
    return cst.ParenthesizedWhitespace(
        first_line=cst.TrailingWhitespace(), empty_lines=[], indent=True, last_line=cst.SimpleWhitespace(extra)
    )


def one_argument_per_line(call: cst.Call) -> cst.Call:
    """Lay a call out the way black does when it does not fit on one line."""
    args = []
    for index, arg in enumerate(call.args):
        last = index == len(call.args) - 1
        comma = cst.Comma(whitespace_after=_newline_indent("" if last else "    "))
        args.append(arg.with_changes(comma=comma))
    return call.with_changes(whitespace_before_args=_newline_indent("    "), args=args)


def fit_line(ctx: FileContext, old: cst.CSTNode, new: cst.Call) -> cst.Call:
    """``new`` replaces ``old``; wrap it when the line would grow past 88 columns."""
    line_number = ctx.position(old)[0]
    lines = ctx.memo("lines", ctx.source.splitlines)
    line = lines[line_number - 1] if line_number <= len(lines) else ""
    old_text = ctx.code(old)
    if "\n" in old_text:
        old_len = len(old_text.splitlines()[0])
    else:
        old_len = len(old_text)
    length = len(line) - old_len + len(ctx.module.code_for_node(new))
    return one_argument_per_line(new) if length > LINE_LENGTH else new


def fit_statement(indent: int, statement: cst.SimpleStatementLine) -> cst.SimpleStatementLine:
    """Wrap the call assigned by ``name = call(...)`` when the line is too long."""
    small = statement.body[0]
    if not isinstance(small, cst.Assign) or not isinstance(small.value, cst.Call):
        return statement
    text = cst.Module(body=[statement]).code.rstrip("\n")
    if indent + len(text) <= LINE_LENGTH:
        return statement
    return statement.with_changes(body=[small.with_changes(value=one_argument_per_line(small.value))])


UNKNOWN_VALUE_NOTE = (
    "no fix: fixitem cannot tell that the value read is a tensor (it could be a numpy value). "
    "Annotate where it comes from (`x: torch.Tensor`, `model: nn.Module`) to let fixitem rewrite it"
)


# -- following a value through the names it is stored in ------------------------------------


def binding_of(ctx: FileContext, top: cst.BaseExpression) -> cst.Name | None:
    """The name ``top`` is assigned to, in a function, when every later read of
    the name reads this value: its only binding, or the last one of a name
    rebound from its own value (``num_boxes = torch.clamp(num_boxes, min=1).item()``)
    outside any loop, all other bindings coming before it."""
    assign = ctx.parents.get(top)
    if not isinstance(assign, cst.Assign) or assign.value is not top or len(assign.targets) != 1:
        return None
    target = assign.targets[0].target
    if not isinstance(target, cst.Name):
        return None
    scope = ctx.provenance.scope_of(target)
    if not isinstance(scope.node, cst.FunctionDef):
        return None
    bindings = scope.bindings.get(target.value, [])
    if ("value", top) not in bindings:
        return None
    if len(bindings) == 1:
        return target
    for ancestor in ctx.ancestors(assign):
        if ancestor is scope.node:
            break
        if isinstance(ancestor, (cst.For, cst.While)):
            return None  # a later iteration would see the value before this line
    start = ctx.positions[assign].start
    for how, node in bindings:
        if node is top or how == "param":
            continue
        if node is None:
            return None
        end = ctx.positions[node].end
        if (end.line, end.column) > (start.line, start.column):
            return None
    return target


def name_uses(ctx: FileContext, target: cst.Name) -> list[cst.Name] | None:
    """Every read of the value bound at ``target``, or None when one may escape analysis."""
    name = target.value
    scope = ctx.provenance.scope_of(target)
    function = scope.node
    assert isinstance(function, cst.FunctionDef)
    assign = ctx.parents[ctx.parents[target]]
    rebound = len(scope.bindings[name]) > 1
    statement = ctx.parents[assign]
    block = ctx.parents[statement] if isinstance(statement, cst.SimpleStatementLine) else statement
    assign_end = ctx.positions[assign].end
    for node in ctx.nodes(cst.Global, cst.Nonlocal):
        if any(item.name.value == name for item in node.names):  # type: ignore[attr-defined]
            return None
    uses: list[cst.Name] = []
    for node in walk(function):  # a read of a local of ``function``, or a call of locals() in it, lies in it
        if type(node) is not cst.Name:
            continue
        assert isinstance(node, cst.Name)
        if node is target:
            continue
        parent = ctx.parents.get(node)
        if node.value in ("locals", "vars", "eval", "exec") and isinstance(parent, cst.Call) and parent.func is node:
            if ctx.enclosing_function(node) is function:
                return None  # the name may be read by string
            continue
        if node.value != name:
            continue
        if isinstance(parent, cst.Attribute) and parent.attr is node:
            continue
        if isinstance(parent, cst.Arg) and parent.keyword is node:
            continue
        if isinstance(parent, cst.Param) or isinstance(parent, (cst.FunctionDef, cst.ClassDef)):
            continue
        owner = ctx.provenance.scope_of(node).lookup(name)
        if owner is not scope:
            continue  # another variable of the same name
        if ctx.provenance.scope_of(node) is not scope:
            return None  # read from a nested function, lambda or comprehension
        if rebound:
            position = ctx.positions[node].start
            if (position.line, position.column) < (assign_end.line, assign_end.column):
                continue  # reads an earlier value of the name
            if block not in set(ctx.ancestors(node)):
                return None  # after the block: may read an earlier value
        uses.append(node)
    return uses


@dataclass
class Flow:
    """Where a value that becomes a 0-dim tensor (it was a Python number) goes.

    ``blocking``: a use that needs a Python number (a size, an index, ``range``,
    a ``-> float`` return, Python control flow): no fix. ``unsafe``: a use whose
    effect fixitem cannot see (returned, stored, passed to a function). Neither:
    every use is tensor arithmetic, where a 0-dim tensor acts as the number did.
    """

    blocking: str = ""
    unsafe: str = ""
    roles: list[str] = field(default_factory=list)


# Calls that need a Python number (or format the value as text).
PYTHON_ONLY_CALLS = frozenset(
    {
        "range", "int", "round", "len", "isinstance", "str", "repr", "format", "bool", "list", "tuple",
        "enumerate", "slice", "print", "hex", "bin", "chr", "divmod", "sorted", "hash", "id",
    }
)
PYTHON_ONLY_MODULES = ("math.", "json.", "numpy.", "np.", "random.", "time.", "os.", "logging.")
# torch functions and tensor methods whose arguments after the first tensor are sizes.
SIZE_TAKING = frozenset(
    {
        "arange", "full", "zeros", "ones", "empty", "rand", "randn", "randint", "randperm", "linspace",
        "logspace", "eye", "tensor", "as_tensor", "view", "reshape", "expand", "repeat", "narrow", "topk",
        "split", "chunk", "new_zeros", "new_ones", "new_full", "new_empty", "full_like", "zeros_like",
        "ones_like", "empty_like", "unflatten", "tile", "roll", "kthvalue", "select", "multinomial",
        "pad", "interpolate", "flatten", "squeeze", "unsqueeze", "transpose", "permute", "movedim",
        "index_select", "diagonal", "triu", "tril", "histc", "bincount", "one_hot",
    }
)
_RETURN_NUMBER = ("int", "float", "bool", "complex", "str")


def value_flow(ctx: FileContext, expr: cst.BaseExpression, depth: int = 0) -> Flow:
    """Follow ``expr`` (about to become a 0-dim tensor) through arithmetic and
    the names it is stored in, to every use."""
    flow = Flow()
    _climb(ctx, expr, flow, depth)
    return flow


def _climb(ctx: FileContext, node: cst.BaseExpression, flow: Flow, depth: int) -> None:
    if flow.blocking:
        return
    parent = ctx.parents.get(node)
    code = ctx.code(node)
    if isinstance(parent, cst.BinaryOperation):
        other = parent.right if parent.left is node else parent.left
        if ctx.kind(other) is Kind.TENSOR and not isinstance(parent.operator, (cst.MatrixMultiply, cst.Power)):
            flow.roles.append("tensor arithmetic")
            return  # the result was a tensor already
        _climb(ctx, parent, flow, depth)  # Python arithmetic: its result becomes a tensor too
        return
    if isinstance(parent, cst.UnaryOperation):
        if isinstance(parent.operator, cst.Not):
            flow.blocking = f"`{ctx.code(parent)}` is Python control flow"
            return
        _climb(ctx, parent, flow, depth)
        return
    if isinstance(parent, (cst.Comparison, cst.ComparisonTarget, cst.BooleanOperation, cst.If, cst.While, cst.Assert, cst.IfExp)):
        if isinstance(parent, cst.IfExp) and parent.test is not node:
            _climb(ctx, parent, flow, depth)
            return
        flow.blocking = f"`{code}` then decides Python control flow (a comparison or truth test)"
        return
    if isinstance(parent, (cst.Index, cst.Slice, cst.SubscriptElement, cst.Subscript)):
        flow.blocking = f"`{code}` is then used as an index or slice bound"
        return
    if isinstance(parent, (cst.FormattedStringExpression,)):
        flow.blocking = f"`{code}` is then formatted into text"
        return
    if isinstance(parent, cst.Arg):
        call = ctx.parents.get(parent)
        if isinstance(call, cst.Call):
            _call_flow(ctx, call, parent, code, flow, depth)
        else:
            flow.unsafe = flow.unsafe or f"`{code}` is passed on"
        return
    if isinstance(parent, cst.Return):
        function = ctx.enclosing_function(parent)
        returns = function.returns.annotation if function is not None and function.returns is not None else None
        if returns is not None:
            annotation = ctx.code(returns)
            if any(isinstance(n, cst.Name) and n.value in _RETURN_NUMBER for n in walk(returns)):
                # ``-> float``, ``-> float | None``, ``-> Optional[int]``
                flow.blocking = f"the function returns `{code}` as `-> {annotation}`: it would return a 0-dim tensor"
                return
        flow.unsafe = flow.unsafe or f"`{code}` is returned: the caller gets a 0-dim tensor where it got a Python number"
        _caller_flow(ctx, function, flow, depth)
        return
    if isinstance(parent, (cst.Assign, cst.AnnAssign)) and parent.value is node:
        targets = [t.target for t in parent.targets] if isinstance(parent, cst.Assign) else [parent.target]
        if len(targets) == 1 and _self_attribute(targets[0]):
            _attribute_flow(ctx, targets[0], flow, depth)  # type: ignore[arg-type]
            return
        if len(targets) != 1 or not isinstance(targets[0], cst.Name):
            flow.unsafe = flow.unsafe or f"`{code}` is stored where fixitem cannot follow it"
            return
        _name_flow(ctx, targets[0], node, flow, depth)
        return
    if isinstance(parent, cst.AugAssign) and parent.value is node:
        if isinstance(parent.target, cst.Name) and ctx.kind(parent.target) is Kind.TENSOR:
            flow.roles.append("tensor arithmetic")
            return
        flow.unsafe = flow.unsafe or f"`{ctx.code(parent.target)}` accumulates `{code}`: it becomes a tensor"
        return
    if isinstance(parent, (cst.Element, cst.DictElement, cst.List, cst.Tuple, cst.Dict, cst.Set)):
        container = ctx.parents.get(parent) if isinstance(parent, cst.Element) else parent
        unpacked = _unpacked_into(ctx, parent, container)
        if unpacked is not None:  # ``k, m = min(...), 2``
            if _self_attribute(unpacked):
                _attribute_flow(ctx, unpacked, flow, depth)  # type: ignore[arg-type]
            elif isinstance(unpacked, cst.Name):
                _name_flow(ctx, unpacked, node, flow, depth)
            else:
                flow.unsafe = flow.unsafe or f"`{code}` is stored where fixitem cannot follow it"
            return
        returned = ctx.parents.get(container)
        if isinstance(returned, cst.Return):
            function = ctx.enclosing_function(returned)
            returns = function.returns.annotation if function is not None and function.returns is not None else None
            if returns is not None and any(isinstance(n, cst.Name) and n.value in _RETURN_NUMBER for n in walk(returns)):
                flow.blocking = f"the function returns `{code}` in `-> {ctx.code(returns)}`: it would return a 0-dim tensor"
                return
        flow.unsafe = flow.unsafe or f"`{code}` is stored in a container"
        return
    if isinstance(parent, cst.Expr):
        return  # the value is discarded
    flow.unsafe = flow.unsafe or f"`{code}` is used as `{ctx.code(parent) if parent is not None else code}`"


def _caller_flow(ctx: FileContext, function: cst.FunctionDef | None, flow: Flow, depth: int) -> None:
    """What the calls of ``function`` in this file do with what it returns (callers
    elsewhere are not seen: the return stays unsafe)."""
    if function is None or depth > 4:
        return
    name = function.name.value
    cls = ctx.parents.get(ctx.parents.get(function))  # ``class C:`` -> IndentedBlock -> def
    method = isinstance(cls, cst.ClassDef)
    for call in ctx.nodes(cst.Call):
        assert isinstance(call, cst.Call)
        func = call.func
        if method:
            if not (_self_attribute(func) and func.attr.value == name and ctx.provenance.enclosing_class(call) is cls):  # type: ignore[union-attr]
                continue
        elif not (isinstance(func, cst.Name) and func.value == name
                  and ctx.provenance.scope_of(call).lookup(name) is ctx.provenance.scope_of(function)):
            continue
        _climb(ctx, call, flow, depth + 1)
        if flow.blocking:
            flow.blocking = f"`{ctx.code(call)}` returns it: {flow.blocking}"
            return


def _unpacked_into(ctx: FileContext, element: cst.CSTNode, container: cst.CSTNode | None) -> cst.BaseExpression | None:
    """The target ``element`` of a tuple or list is assigned to in ``a, b = x, y``."""
    assign = ctx.parents.get(container) if container is not None else None
    if not (isinstance(element, cst.Element) and isinstance(container, (cst.Tuple, cst.List))
            and isinstance(assign, cst.Assign) and assign.value is container and len(assign.targets) == 1):
        return None
    target = assign.targets[0].target
    if not isinstance(target, (cst.Tuple, cst.List)) or len(target.elements) != len(container.elements):
        return None
    if any(isinstance(e, cst.StarredElement) for e in (*target.elements, *container.elements)):
        return None
    return target.elements[list(container.elements).index(element)].value


def _self_attribute(target: cst.BaseExpression) -> bool:
    return isinstance(target, cst.Attribute) and isinstance(target.value, cst.Name) and target.value.value == "self"


def _attribute_flow(ctx: FileContext, target: cst.Attribute, flow: Flow, depth: int) -> None:
    """``self.k = value``: the reads of ``self.k`` in the methods of the class; other
    code may read the attribute too."""
    cls = ctx.provenance.enclosing_class(target)
    code = ctx.code(target)
    flow.unsafe = flow.unsafe or f"`{code}` is stored on the object: other code may read it"
    if cls is None or depth > 4:
        return
    for node in ctx.nodes(cst.Attribute):
        assert isinstance(node, cst.Attribute)
        if node is target or not _self_attribute(node) or node.attr.value != target.attr.value:
            continue
        parent = ctx.parents.get(node)
        if isinstance(parent, cst.AssignTarget) or (isinstance(parent, cst.AugAssign) and parent.target is node):
            continue
        if ctx.provenance.enclosing_class(node) is not cls:
            continue
        _climb(ctx, node, flow, depth + 1)
        if flow.blocking:
            return


def _call_flow(ctx: FileContext, call: cst.Call, arg: cst.Arg, code: str, flow: Flow, depth: int = 0) -> None:
    func = call.func
    qualified = ctx.provenance.imports.qualify(func) or ""
    name = func.value if isinstance(func, cst.Name) else ""
    if name in PYTHON_ONLY_CALLS or qualified.startswith(PYTHON_ONLY_MODULES) or name == "float":
        flow.blocking = f"`{code}` is passed to `{ctx.code(func)}`, which needs a Python number"
        return
    short = ""
    receiver_tensor = False
    if qualified.startswith("torch."):
        short = qualified.rsplit(".", 1)[-1]
    elif isinstance(func, cst.Attribute):
        short = func.attr.value
        receiver_tensor = ctx.kind(func.value) is Kind.TENSOR
    if short in SIZE_TAKING and (qualified.startswith("torch.") or receiver_tensor):
        flow.blocking = f"`{code}` is passed to `{ctx.code(func)}` as a size or count, which needs a Python number"
        return
    if qualified == "torch.where" or (qualified in ("torch.clamp", "torch.clip") and arg is not call.args[0]):
        flow.roles.append(f"an operand of `{qualified}`")
        return
    if receiver_tensor and short in ("masked_fill", "masked_fill_", "fill_", "clamp", "clamp_", "clamp_min", "clamp_max", "where"):
        flow.roles.append(f"an operand of `.{short}`")
        return
    inner = _parameter_flow(ctx, call, arg, depth)
    if inner.blocking:
        flow.blocking = f"`{code}` is passed to `{ctx.code(func)}`, where {inner.blocking}"
        return
    if inner.roles and not inner.unsafe:
        flow.unsafe = flow.unsafe or (f"`{code}` is passed to `{ctx.code(func)}`, which uses it in tensor arithmetic: "
                                      "a 0-dim tensor there may promote differently than the Python number did")
        return
    flow.unsafe = flow.unsafe or (f"`{code}` is passed to `{ctx.code(func)}`, which may need a Python number "
                                  "(where it does, it reads the tensor back, or raises)")


def _parameter_flow(ctx: FileContext, call: cst.Call, arg: cst.Arg, depth: int) -> Flow:
    """Where a function of this file (``helper(n)``, ``self.helper(n)``) takes the
    argument ``arg``: the reads of its parameter."""
    flow = Flow()
    if depth > 4 or arg.star:
        return flow
    func = call.func
    method = _self_attribute(func)
    if method:
        cls = ctx.provenance.enclosing_class(call)
        name = func.attr.value  # type: ignore[union-attr]
    elif isinstance(func, cst.Name):
        cls, name = None, func.value
    else:
        return flow
    owner = ctx.provenance.scope_of(call).lookup(name) if not method else None
    for function in ctx.nodes(cst.FunctionDef):
        assert isinstance(function, cst.FunctionDef)
        if function.name.value != name:
            continue
        parent = ctx.parents.get(ctx.parents.get(function))
        if method and parent is not cls:
            continue
        if not method and (ctx.provenance.scope_of(function) is not owner or isinstance(parent, cst.ClassDef)):
            continue
        from .provenance import all_params

        params = list(function.params.posonly_params) + list(function.params.params)
        if method:
            params = params[1:]
        if arg.keyword is not None:
            chosen = next((p for p in all_params(function.params) if p.name.value == arg.keyword.value), None)
        else:
            index = [a for a in call.args if a.keyword is None].index(arg)
            chosen = params[index] if index < len(params) else None
        scope = ctx.provenance.scopes.get(function)
        if chosen is None or scope is None:
            return flow
        for read in reads_of(ctx, scope, chosen.name.value, nested=True):
            if read is not None:
                _climb(ctx, read, flow, depth + 1)
                if flow.blocking:
                    return flow
        return flow
    return flow


def _name_flow(ctx: FileContext, target: cst.Name, value: cst.BaseExpression, flow: Flow, depth: int) -> None:
    """The reads of ``target`` that may see ``value``."""
    if depth > 4:
        flow.unsafe = flow.unsafe or f"`{target.value}` is passed through too many names to follow"
        return
    scope = ctx.provenance.scope_of(target)
    if not isinstance(scope.node, cst.FunctionDef):
        flow.unsafe = flow.unsafe or f"`{target.value}` is a module-level name: other code may read it"
        return
    for read in reads_of(ctx, scope, target.value, nested=True):
        if read is None:
            flow.unsafe = flow.unsafe or f"`{target.value}` is read where fixitem cannot follow it"
            continue
        if ctx.positions[read].start.line < ctx.positions[target].start.line and not _in_loop_with(ctx, read, target):
            continue  # an earlier value of the name
        _nested_read(ctx, scope, read, target.value, flow)
        _climb(ctx, read, flow, depth + 1)
        if flow.blocking:
            return


def _in_loop_with(ctx: FileContext, a: cst.CSTNode, b: cst.CSTNode) -> bool:
    loops = {id(n) for n in ctx.ancestors(b) if isinstance(n, (cst.For, cst.While))}
    return any(id(n) in loops for n in ctx.ancestors(a) if isinstance(n, (cst.For, cst.While)))


_COMPREHENSIONS = (cst.ListComp, cst.SetComp, cst.DictComp, cst.GeneratorExp)


def _nested_read(ctx: FileContext, scope, read: cst.Name, name: str, flow: Flow) -> None:
    """A read from a nested function or lambda runs when that is called, with
    whatever the name holds then (a comprehension's runs in place: it is followed
    like any other read)."""
    inner = ctx.provenance.scope_of(read)
    while inner is not scope and inner is not None and isinstance(inner.node, _COMPREHENSIONS):
        inner = inner.parent
    if inner is not scope:
        flow.unsafe = flow.unsafe or f"`{name}` is read in a nested function: it then reads a 0-dim tensor"


# -- is the value certainly a tensor? -------------------------------------------------------------

# Calls whose result is a container, a module or a function, never a tensor itself
# (``torch.load`` gives what was saved: usually a dict).
NOT_TENSOR_RESULTS = frozenset(
    {"torch.load", "torch.jit.load", "torch.jit.script", "torch.jit.trace", "torch.compile", "torch.hub.load"}
)
NOT_TENSOR_METHODS = frozenset({"state_dict", "load_state_dict", "named_parameters", "parameters", "items"})


def uncertain_tensor(ctx: FileContext, expr: cst.BaseExpression) -> str:
    """Why the tensor read in ``expr`` is not certainly a tensor ("" when it is).

    A ``forward`` parameter taken for a tensor only because it is one
    (``forward(ctx, bias, tp_degree)`` of an ``autograd.Function`` passes
    Python numbers too) is certain only when ``.item()`` is called on it; a value
    derived from ``torch.load``, ``torch.jit`` or ``state_dict()`` is a
    container, not a tensor.
    """
    return _uncertain(ctx, expr, set())


PYTHON_NUMBER_METHODS = frozenset({"conjugate", "is_integer", "hex", "as_integer_ratio", "bit_length", "to_bytes", "bit_count"})


def _uncertain(ctx: FileContext, expr: cst.BaseExpression, seen: set[tuple[int, str]], proven: bool = False) -> str:
    """Follows what makes ``expr`` a tensor: a call to a torch function or a module
    gives a tensor whatever its arguments, a tensor method called on a value proves
    it is not a Python number (``proven``: only a container origin is left to
    find), arithmetic is a tensor when one tensor operand is."""
    if isinstance(expr, cst.Call):
        qualified = ctx.provenance.imports.qualify(expr.func) or ""
        if qualified in NOT_TENSOR_RESULTS or qualified.startswith("torch.jit."):
            return f"`{ctx.code(expr)}` returns what was saved or compiled, not a tensor"
        if isinstance(expr.func, cst.Attribute):
            if expr.func.attr.value in NOT_TENSOR_METHODS:
                return f"`{ctx.code(expr)}` is a container of tensors, not a tensor"
            method_proves = expr.func.attr.value not in PYTHON_NUMBER_METHODS
            return _uncertain(ctx, expr.func.value, seen, proven or method_proves)
        if isinstance(expr.func, cst.Name) and expr.func.value in ("float", "int", "bool") and expr.args:
            return _uncertain(ctx, expr.args[0].value, seen, proven)
        return ""
    if isinstance(expr, (cst.BinaryOperation, cst.Comparison)):
        operands = (
            [expr.left, expr.right] if isinstance(expr, cst.BinaryOperation)
            else [expr.left] + [c.comparator for c in expr.comparisons]
        )
        reasons = [_uncertain(ctx, o, seen, proven) for o in operands if ctx.kind(o) is Kind.TENSOR]
        if reasons and all(reasons):
            return reasons[0]
        return ""
    if isinstance(expr, (cst.UnaryOperation,)):
        return _uncertain(ctx, expr.expression, seen, proven)
    if isinstance(expr, cst.Subscript):
        return _uncertain(ctx, expr.value, seen, proven)
    if isinstance(expr, cst.Attribute):
        if isinstance(expr.value, cst.Name) and expr.value.value == "self":
            return ""
        return _uncertain(ctx, expr.value, seen, proven)
    if isinstance(expr, cst.Name):
        if not proven and ctx.provenance.presumed_tensor(expr):
            return (f"`{expr.value}` is a tensor only if the caller passes one (a parameter of "
                    f"`{_function_name(ctx, expr)}` never used as a tensor)")
        scope = ctx.provenance.scope_of(expr).lookup(expr.value)
        if scope is None or (id(scope), expr.value) in seen:
            return ""
        for how, value in scope.bindings.get(expr.value, []):
            if how == "value" and isinstance(value, cst.BaseExpression) and ctx.kind(value) is not Kind.NUMBER:
                reason = _uncertain(ctx, value, seen | {(id(scope), expr.value)}, proven)
                if reason:
                    return reason
    return ""


def _function_name(ctx: FileContext, node: cst.CSTNode) -> str:
    function = ctx.enclosing_function(node)
    if function is None:
        return "the function"
    cls = ctx.provenance.enclosing_class(function)
    return f"{cls.name.value}.{function.name.value}" if cls is not None else function.name.value


# -- numbers that every floating dtype holds exactly ----------------------------------------------


def exact_in_every_float_dtype(expr: cst.BaseExpression) -> bool:
    """Is ``expr`` a number literal that float16 and bfloat16 (and so float32 and
    float64) represent exactly? Then comparing or combining it in the tensor's
    dtype gives what Python's float64 gave."""
    if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, (cst.Minus, cst.Plus)):
        return exact_in_every_float_dtype(expr.expression)
    if not isinstance(expr, (cst.Integer, cst.Float)):
        return False
    try:
        value = float(expr.evaluated_value)
    except (ValueError, OverflowError):
        return False
    return _exact_half(value) and _exact_bfloat16(value)


def _exact_half(value: float) -> bool:
    import struct

    try:
        return struct.unpack("<e", struct.pack("<e", value))[0] == value
    except (OverflowError, struct.error):
        return False


def _exact_bfloat16(value: float) -> bool:
    import struct

    try:
        bits = struct.unpack("<I", struct.pack("<f", value))[0]
    except (OverflowError, struct.error):
        return False
    return struct.unpack("<f", struct.pack("<I", bits))[0] == value and bits & 0xFFFF == 0


def name_flow_after(ctx: FileContext, anchor: cst.CSTNode, name: str) -> Flow:
    """Where the value ``anchor`` (an ``if`` that assigns ``name``) leaves in ``name`` goes:
    every later read, and every read in a loop around ``anchor``."""
    flow = Flow()
    scope = ctx.provenance.scope_of(anchor)
    if scope.lookup(name) is not scope or not isinstance(scope.node, (cst.FunctionDef, cst.Module)):
        flow.unsafe = f"`{name}` is not a local of the function: other code may read it"
        return flow
    if isinstance(scope.node, cst.Module):
        # A script's top level: its own later reads are followed (one may need a
        # number), but other modules may import the name.
        flow.unsafe = f"`{name}` is a module-level name: other modules may import it"
    end = ctx.positions[anchor].end.line
    for read in reads_of(ctx, scope, name, nested=True):
        if read is None:
            flow.unsafe = flow.unsafe or f"`{name}` is read where fixitem cannot follow it"
            continue
        if any(a is anchor for a in ctx.ancestors(read)):
            continue
        if ctx.positions[read].start.line <= end and not _in_loop_with(ctx, read, anchor):
            continue
        _nested_read(ctx, scope, read, name, flow)
        _climb(ctx, read, flow, 1)
        if flow.blocking:
            break
    return flow


def threshold_rounding(ctx: FileContext, test: cst.BaseExpression) -> str:
    """Why comparing in the tensor's dtype may decide differently than Python's float64
    did: the test compares a value read from a tensor with a number that float16 /
    bfloat16 do not hold exactly (``0.1``, ``1e-6``, a Python variable). In
    float64 Python compares with the exact number; the tensor compares with the
    number rounded to its own dtype, so a value equal to that rounding falls on
    the other side. "" when every such number is exact in every floating dtype
    (``4.0``, ``0.5``, ``-1``), or when two tensor values are compared."""
    for node in walk(test):
        if not isinstance(node, cst.Comparison) or any(
            isinstance(c.operator, (cst.Is, cst.IsNot, cst.In, cst.NotIn)) for c in node.comparisons
        ):
            continue
        operands = [node.left] + [c.comparator for c in node.comparisons]
        reads = [any(_read_of(ctx, sub) is not None for sub in walk(o)) or ctx.kind(o) is Kind.TENSOR for o in operands]
        if not any(reads):
            continue
        for operand, is_read in zip(operands, reads):
            if is_read or exact_in_every_float_dtype(operand):
                continue
            held = _held_read(ctx, operand)
            if held is not None:  # ``best = y.min().item()``: two tensor values are compared
                other = next((o for o, r in zip(operands, reads) if r), None)
                tensor = _read_of(ctx, other) if other is not None else None
                if tensor is not None and same_dtype(ctx, tensor[0], held):
                    continue
                return (f"`{ctx.code(operand)}` holds the value of `{ctx.code(held)}`: Python compared it with "
                        f"`{ctx.code(other)}` exactly, the tensor comparison first rounds it to the tensor's dtype, "
                        f"which decides differently where `{ctx.code(held)}` has a wider dtype (float64 against float32)")
            literal = isinstance(_strip_parens(operand), (cst.Integer, cst.Float, cst.UnaryOperation))
            if literal:
                what = f"`{ctx.code(operand)}` is not exact"
            elif ctx.kind(operand) is Kind.NUMBER:
                what = f"`{ctx.code(operand)}` may not be exact"
            else:
                what = f"if `{ctx.code(operand)}` is a Python number, it may not be exact"
            return (f"{what} in float16/bfloat16 (nor, as a rule, float32): Python "
                    "compared the value in float64, the tensor compares in its own dtype, with the rounded "
                    "number, so a value equal to that rounding decides the other way")
    return ""


def _held_read(ctx: FileContext, operand: cst.BaseExpression) -> cst.BaseExpression | None:
    """The tensor whose value the name ``operand`` holds, read into it with ``.item()``
    / ``float()`` (``best = y.min().item()`` gives ``y.min()``)."""
    from .signs import seen_value

    value = seen_value(ctx, operand) if isinstance(operand, cst.Name) else None
    read = _read_of(ctx, value) if value is not None else None
    return read[0] if read is not None and read[1] != "int" else None


def zero_dim_condition(ctx: FileContext, condition: cst.BaseExpression, sites, values: list[cst.BaseExpression]) -> cst.BaseExpression:
    """``condition`` with ``.reshape(())`` on each tensor it reads that is not plainly
    0-dim, when a selected value is a number or a 0-dim tensor: ``.item()`` accepts
    any one-element tensor, ``(1,)`` too, and a ``(1,)`` condition would make the
    selection ``(1,)`` where the value was 0-dim. (Selected tensors that are not
    plainly 0-dim are taken to have at least the condition's dimensions.)"""
    if all(ctx.kind(v) is Kind.TENSOR and not plainly_zero_dim(ctx, v) for v in values):
        return condition
    from .syncs import kept_reads

    kept = kept_reads(sites, [condition])  # ``idx.item()`` of ``probs[idx.item()] > 0.5`` stays a number
    targets = {id(s.value) for s in sites if s not in kept and not plainly_zero_dim(ctx, s.value)}
    if not targets:
        return condition

    class Reshape(cst.CSTTransformer):
        def on_leave(self, original, updated):
            if id(original) in targets:
                return cst.Call(func=cst.Attribute(value=method_call(updated, "reshape").func.value, attr=cst.Name("reshape")),
                                args=[cst.Arg(cst.Tuple([]))])
            return updated

    return condition.visit(Reshape())
