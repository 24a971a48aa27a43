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

The code these functions build is new code (:mod:`codemods.gen`) whose leaves are
nodes of the file: a node of the file prints as its own text, with the
parentheses that belong to it, as libcst printed an original node with its
``lpar``/``rpar``.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Union

from .. import gen
from ..gen import method_call  # noqa: F401 - rules import it from here
from ..model.context import COMPOUND, FileContext
from ..model.dtypes import same_dtype
from ..model.effects import call_effect
from ..model.provenance import CREATION_FUNCTIONS, DEVICE_OF_INPUT, Kind
from ..model.reductions import REDUCTIONS
from ..model.scalar_shapes import (
    arg_keyword,
    arg_star,
    arg_value,
    call_arguments,
    detached_scalar,
    plainly_zero_dim,
)
from ..model.tree import walk

# Functions whose gradient is infinite or NaN somewhere in their domain, or infinite where
# the value overflows (``exp`` of a large input, the very case an ``if`` guards against):
# in the branch that was not taken, 0 * inf = NaN reaches the gradient.
NAN_GRADIENT_FUNCTIONS = frozenset(
    {
        "log", "log2", "log10", "log1p", "sqrt", "rsqrt", "reciprocal", "div", "true_divide",
        "floor_divide", "pow", "float_power", "acos", "asin", "atanh", "acosh", "logit", "xlogy",
        "digamma", "polygamma", "lgamma", "erfinv", "cdist", "norm", "pdist", "atan2",
        "exp", "expm1", "exp2", "cosh", "sinh", "tan", "ldexp",
    }
)


# An expression of new code: a :mod:`codemods.gen` node, or a node of the file (printed as its text).
Code = Union[gen.Node, ast.AST]  # noqa: UP007 - a runtime alias (as gen.Expr_)


class NotConvertible(Exception):
    """The expression mixes tensor values with Python logic fixitem cannot translate."""


@dataclass
class Converted:
    expr: Code  # new code (:mod:`codemods.gen`), or the node of the file itself
    reads: list[ast.AST] = field(default_factory=list)  # the sync nodes it removed


# -- parentheses, as libcst kept them on the node -------------------------------------------------

# What fit_statement renders with when it is not given the file (see :func:`_context`).
def own_parentheses(ctx: FileContext, node: ast.AST) -> bool:
    """Is the node of the file written in parentheses of its own (libcst's ``bool(node.lpar)``)?
    (Also where a tuple's or a generator expression's span counts its parentheses.)"""
    if ctx.parenthesized(node):
        return True
    t = type(node)
    if t is ast.Tuple:
        return not node.elts or ctx.positions.span(node)[0] < ctx.span(node.elts[0])[0]  # type: ignore[attr-defined]
    if t is ast.GeneratorExp:
        return ctx.source[ctx.positions.span(node)[0]:][:1] == "("
    return False


def _paren_texts(ctx: FileContext, node: ast.AST) -> tuple[str, str]:
    """The text of the parentheses around ``node`` (``"( "``, ``" )"``), as written."""
    start, end = ctx.span(node)
    inner_start, inner_end = ctx.positions.span(node)
    return ctx.source[start:inner_start], ctx.source[inner_end:end]


class _ParenUnlessOwn(gen.Paren):
    """``(value)`` for a node of the file, unless it has parentheses of its own (libcst's
    ``_paren``: ``lpar`` added only where there is none), decided when printed."""

    def render(self, ctx: FileContext, indent: str = "") -> str:
        value = self.value
        if isinstance(value, (gen.Source, gen.Splice)) and value.parentheses and own_parentheses(ctx, value.node):
            return value.render(ctx, indent)
        return super().render(ctx, indent)

    def rebuilt(self, kids: list[gen.Expr_]) -> gen.Node:
        return _ParenUnlessOwn(kids[0])


class _KeptParens(gen.Paren):
    """New code in place of a node of the file, in that node's parentheses as written
    (libcst: ``lpar=node.lpar, rpar=node.rpar``)."""

    def __init__(self, value: gen.Expr_, opening: str, closing: str) -> None:
        super().__init__(value)
        self.opening = opening
        self.closing = closing

    def render(self, ctx: FileContext, indent: str = "") -> str:
        return f"{self.opening}{self.value.render(ctx, indent)}{self.closing}"

    def rebuilt(self, kids: list[gen.Expr_]) -> gen.Node:
        return _KeptParens(kids[0], self.opening, self.closing)


def _with_parentheses_of(ctx: FileContext, original: ast.AST, new: gen.Expr_) -> gen.Node:
    """``new`` in the parentheses ``original`` is written in (none: ``new`` as it is)."""
    if not ctx.parenthesized(original):
        return gen.expr(new)
    opening, closing = _paren_texts(ctx, original)
    return _KeptParens(new, opening, closing)


class _SpacedComparison(gen.Comparison):
    """A comparison whose operators keep the spacing they have in the file where it is not
    one space (libcst kept a ``ComparisonTarget``'s whitespace: ``a!=b``): ``spacing[i]`` is
    the text before and after operator i."""

    def __init__(self, left: gen.Expr_, comparisons, spacing: list[tuple[str, str]]) -> None:
        super().__init__(left, comparisons)
        self.spacing = list(spacing)

    def render(self, ctx: FileContext, indent: str = "") -> str:
        text = self.left.render(ctx, indent)
        for (op, right), (before, after) in zip(self.comparisons, self.spacing):
            text += f"{before}{op}{after}{right.render(ctx, indent)}"
        return text

    def rebuilt(self, kids: list[gen.Expr_]) -> gen.Node:
        return _SpacedComparison(kids[0], [(op, right) for (op, _), right in zip(self.comparisons, kids[1:])],
                                 self.spacing)


def _comparison(left: gen.Expr_, op: str, right: gen.Expr_, spacing: tuple[str, str] = (" ", " ")) -> gen.Node:
    """``left op right``, the operator spaced as ``spacing`` (as in the file)."""
    if spacing == (" ", " "):
        return gen.Comparison(left, [(op, right)])
    return _SpacedComparison(left, [(op, right)], [spacing])


def _operator_spacing(ctx: FileContext, left: ast.AST, right: ast.AST) -> tuple[str, str]:
    """The text before and after the operator between the operands ``left`` and ``right``
    of a comparison of the file."""
    text = ctx.source[ctx.span(left)[1]:ctx.span(right)[0]]
    i, n = 0, len(text)
    while i < n:  # whitespace, line continuations and comments before the operator
        c = text[i]
        if c in " \t\f\r\n\\":
            i += 1
        elif c == "#":
            end = text.find("\n", i)
            i = n if end < 0 else end
        else:
            break
    j = i
    while j < n and text[j] in "=!<>":
        j += 1
    if j == i:  # a word operator (``in``, ``is not``): not flipped or rewritten
        return " ", " "
    return text[:i], text[j:]


_FLIPPED = {"==": "!=", "!=": "=="}


_COMPARISONS = {ast.Eq: "==", ast.NotEq: "!=", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">="}


def _flip_comparison(ctx: FileContext, test: Code) -> gen.Node | None:
    """``a != b`` for ``not a == b`` (and back), for a comparison of one operator without
    parentheses of its own; None for any other test."""
    replaced: dict = {}
    if isinstance(test, gen.Source) and test.parentheses:
        test = test.node
    elif isinstance(test, gen.Splice) and test.parentheses:
        replaced = test.replacements
        test = test.node
    if isinstance(test, ast.AST):
        if type(test) is not ast.Compare or len(test.ops) != 1 or own_parentheses(ctx, test):  # type: ignore[attr-defined]
            return None
        op = _COMPARISONS.get(type(test.ops[0]))  # type: ignore[attr-defined]
        if op not in _FLIPPED:
            return None
        left, right = test.left, test.comparators[0]  # type: ignore[attr-defined]
        return _comparison(gen.substitute(left, replaced, ctx), _FLIPPED[op], gen.substitute(right, replaced, ctx),
                           _operator_spacing(ctx, left, right))
    if isinstance(test, gen.Comparison) and len(test.comparisons) == 1:
        ((op, right),) = test.comparisons
        if op not in _FLIPPED:
            return None
        spacing = test.spacing[0] if isinstance(test, _SpacedComparison) else (" ", " ")
        return _comparison(test.left, _FLIPPED[op], right, spacing)
    return None


def _innermost(value: gen.Expr_) -> gen.Node:
    """``value`` without the parentheses new code put around it."""
    node = gen.expr(value)
    while isinstance(node, gen.Paren):
        node = node.value
    return node


def _simple_node(node: ast.AST) -> bool:
    """A name, attribute, call, subscript or number: never needs parentheses (``True`` and
    ``None`` were names to libcst)."""
    t = type(node)
    if t is ast.Constant:
        value = node.value  # type: ignore[attr-defined]
        return value is None or type(value) in (int, float, bool)
    return t is ast.Name or t is ast.Attribute or t is ast.Call or t is ast.Subscript


def _paren(expr: gen.Expr_) -> gen.Node:
    """``expr`` in parentheses, unless it is a name, attribute, call, subscript or number, or
    has parentheses already."""
    node = gen.expr(expr)
    if isinstance(node, gen.Paren):
        return node
    if isinstance(node, (gen.Source, gen.Splice)):
        if _simple_node(node.node):
            return node
        return _ParenUnlessOwn(node) if node.parentheses else gen.Paren(node)
    if isinstance(node, gen.Tuple) and node.parentheses:
        return node
    if isinstance(node, gen.Raw):
        try:
            parsed = ast.parse(node.text.strip(), mode="eval").body
        except SyntaxError:
            return gen.Paren(node)
        return node if _simple_node(parsed) else gen.Paren(node)
    if node.kind in ("Name", "Attribute", "Call", "Subscript"):
        return node
    return gen.Paren(node)


def _operand(expr: gen.Expr_) -> gen.Node:
    """``expr`` as an operand of ``&`` / ``|``: unary ``~`` and ``-`` bind tighter."""
    inner = _innermost(expr)
    if isinstance(inner, gen.UnaryOperation) and inner.op in ("~", "-"):
        return gen.expr(expr)
    if isinstance(inner, (gen.Source, gen.Splice)) and type(inner.node) is ast.UnaryOp and type(
            inner.node.op) in (ast.Invert, ast.USub):  # type: ignore[attr-defined]
        return gen.expr(expr)
    return _paren(expr)


def _strip_parens(expr: gen.Expr_) -> gen.Node:
    """``expr`` without the parentheses around it, where they are not part of its syntax."""
    node = gen.expr(expr)
    if _innermost(node).kind in ("Tuple", "GeneratorExp", "Yield", "YieldFrom", "NamedExpr"):
        return node  # the parentheses are part of the syntax
    return gen.strip_parentheses(node)


def _torch_attr(ctx: FileContext, name: str) -> gen.Attribute:
    return gen.Attribute(gen.Name(ctx.torch_name()), name)


def torch_call(ctx: FileContext, name: str, *args: Code, **kwargs: Code) -> gen.Call:
    """``torch.name(args, key=value)`` (as this file spells ``torch``), the arguments
    without parentheses of their own."""
    arguments = [gen.Arg(_strip_parens(a)) for a in args]
    arguments += [gen.Arg(_strip_parens(v), keyword=k) for k, v in kwargs.items()]
    return gen.Call(_torch_attr(ctx, name), arguments)


def _read_of(ctx: FileContext, expr: object) -> tuple[ast.expr, str] | None:
    """``t.item()`` -> (t, "item"), ``float(t)`` -> (t, "float"), ``int(t)`` -> (t, "int")."""
    if type(expr) is not ast.Call:
        return None
    func = expr.func  # type: ignore[attr-defined]
    if type(func) is ast.Attribute and func.attr == "item" and not expr.args and not expr.keywords:  # type: ignore[attr-defined]
        if ctx.is_tensor(func.value):
            return func.value, "item"
        return None
    if type(func) is ast.Name and func.id in ("float", "int") and len(expr.args) == 1 and not expr.keywords:  # type: ignore[attr-defined]
        arg = expr.args[0]  # type: ignore[attr-defined]
        if type(arg) is not ast.Starred and ctx.is_tensor(arg):
            return arg, func.id
    return None


def convert_value(ctx: FileContext, expr: ast.expr, detach: bool = False) -> Converted | None:
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
        converted: Code
        if how == "int":
            converted = gen.method_call(ctx, tensor, "long")
        elif detach:
            # ``.reshape(())`` unless plainly 0-dim: a ``(1,)`` tensor would broadcast
            # into the result's shape where the number did not.
            converted = detached_scalar(ctx, tensor)
        else:
            converted = tensor
        simple = isinstance(converted, gen.Call) or (isinstance(converted, ast.AST) and type(converted) in (
            ast.Name, ast.Call, ast.Attribute, ast.Subscript))
        if ctx.parenthesized(expr) and not own_parentheses(ctx, tensor) and not simple:
            converted = _paren(converted)
        return Converted(converted, [expr])
    t = type(expr)
    if t is ast.BinOp:
        left = convert_value(ctx, expr.left, detach)  # type: ignore[attr-defined]
        right = convert_value(ctx, expr.right, detach)  # type: ignore[attr-defined]
        if left is None and right is None:
            return None
        if left is None and not _plain_number(ctx, expr.left):  # type: ignore[attr-defined]
            raise NotConvertible(f"`{ctx.code(expr.left)}` may not be a number")  # type: ignore[attr-defined]
        if right is None and not _plain_number(ctx, expr.right):  # type: ignore[attr-defined]
            raise NotConvertible(f"`{ctx.code(expr.right)}` may not be a number")  # type: ignore[attr-defined]
        replaced = {side: part.expr for side, part in ((expr.left, left), (expr.right, right)) if part is not None}  # type: ignore[attr-defined]
        return Converted(gen.Splice(expr, replaced), (left.reads if left else []) + (right.reads if right else []))
    if t is ast.UnaryOp and type(expr.op) in (ast.USub, ast.UAdd):  # type: ignore[attr-defined]
        inner = convert_value(ctx, expr.operand, detach)  # type: ignore[attr-defined]
        if inner is None:
            return None
        return Converted(gen.Splice(expr, {expr.operand: _paren(inner.expr)}), inner.reads)  # type: ignore[attr-defined]
    if t is ast.Call and type(expr.func) is ast.Name and expr.func.id in ("max", "min", "abs"):  # type: ignore[attr-defined]
        which = expr.func.id  # type: ignore[attr-defined]
        if expr.keywords or any(type(a) is ast.Starred for a in expr.args):  # type: ignore[attr-defined]
            raise NotConvertible(f"`{which}(...)` with keyword or starred arguments")
        parts = [convert_value(ctx, a, detach) for a in expr.args]  # type: ignore[attr-defined]
        if all(p is None for p in parts):
            return None
        reads = [r for p in parts if p for r in p.reads]
        if which == "abs" and len(parts) == 1 and parts[0] is not None:
            return Converted(gen.Splice(expr, {expr.args[0]: parts[0].expr}), reads)  # type: ignore[attr-defined]
        new = convert_min_max(ctx, which, expr.args, parts)  # type: ignore[attr-defined]
        return Converted(new, reads)
    if ctx.kind(expr) is Kind.TENSOR:
        return None  # already a tensor: nothing read here
    for sub in walk(expr):
        if _read_of(ctx, sub) is not None:
            raise NotConvertible(f"`{ctx.code(expr)}` uses the value in a way fixitem cannot keep on the device")
    return None


def convert_min_max(ctx: FileContext, which: str, args, parts: list[Converted | None]) -> gen.Node:
    """``max(a, b)`` / ``min(a, b)`` (``args``: the arguments, positional) with ``parts``
    their conversions, as ``torch.maximum`` / ``torch.clamp``."""
    if len(args) != 2:
        raise NotConvertible(f"`{which}(...)` with {len(args)} arguments")
    (a, b), (pa, pb) = [arg_value(x) for x in args], parts
    if pa is not None and pb is not None:
        return torch_call(ctx, "maximum" if which == "max" else "minimum", pa.expr, pb.expr)
    tensor, bound, bound_node = (pa.expr, b, b) if pa is not None else (pb.expr, a, a)  # type: ignore[union-attr]
    if not _plain_number(ctx, bound_node):
        raise NotConvertible(f"`{ctx.code(bound_node)}` may not be a number")
    key = "min" if which == "max" else "max"
    return torch_call(ctx, "clamp", tensor, **{key: bound})


def _plain_number(ctx: FileContext, expr: ast.expr) -> bool:
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


def is_boolean(ctx: FileContext, expr: Code) -> bool:
    """Is ``expr`` certainly a boolean tensor (a comparison, ``.any()``, ``torch.isnan``, ...)?
    (``expr``: a node of the file, or new code built by this module.)"""
    node = _innermost(expr)
    replaced: dict = {}
    if isinstance(node, gen.Source):
        node = node.node  # type: ignore[assignment]
    elif isinstance(node, gen.Splice):
        replaced = node.replacements
        node = node.node  # type: ignore[assignment]
    if isinstance(node, ast.AST):
        def part(child: ast.AST) -> Code:
            return replaced.get(child, child)

        t = type(node)
        if t is ast.Compare:
            return True
        if t is ast.UnaryOp and type(node.op) is ast.Invert:  # type: ignore[attr-defined]
            return is_boolean(ctx, part(node.operand))  # type: ignore[attr-defined]
        if t is ast.BinOp and type(node.op) in (ast.BitAnd, ast.BitOr, ast.BitXor):  # type: ignore[attr-defined]
            return is_boolean(ctx, part(node.left)) and is_boolean(ctx, part(node.right))  # type: ignore[attr-defined]
        if t is ast.Call:
            func = node.func  # type: ignore[attr-defined]
            qualified = ctx.provenance.imports.qualify(func) or ""
            if qualified.startswith("torch."):
                return qualified.rsplit(".", 1)[-1] in BOOLEAN_CALLS
            if type(func) is ast.Attribute and ctx.kind(func.value) is Kind.TENSOR:
                return func.attr in BOOLEAN_CALLS
        return False
    # New code.
    if isinstance(node, gen.Comparison):
        return True
    if isinstance(node, gen.UnaryOperation) and node.op == "~":
        return is_boolean(ctx, node.operand)
    if type(node) is gen.BinaryOperation and node.op in ("&", "|", "^"):
        return is_boolean(ctx, node.left) and is_boolean(ctx, node.right)
    if isinstance(node, gen.Call) and isinstance(node.func, gen.Attribute):
        receiver = _innermost(node.func.value)
        if isinstance(receiver, gen.Raw) and receiver.text == ctx.torch_name():
            return node.func.attr in BOOLEAN_CALLS  # ``torch.logical_not(...)``
        if isinstance(receiver, gen.Source):
            if (ctx.provenance.imports.qualify(receiver.node) or "") == "torch":
                return node.func.attr in BOOLEAN_CALLS
            if ctx.kind(receiver.node) is Kind.TENSOR:
                return node.func.attr in BOOLEAN_CALLS
    return False


def _convert_boolean(ctx: FileContext, expr: ast.BoolOp, values: list[ast.expr]) -> Converted | None:
    """``a and b`` / ``a or b`` as ``a & b`` / ``a | b``. libcst nested ``a and b and c``
    as ``(a and b) and c``: ``values[:-1]`` is the left operand."""
    if len(values) > 2:
        left = _convert_boolean(ctx, expr, values[:-1])
        left_code = ctx.moved(expr, ctx.span(values[0])[0], ctx.span(values[-2])[1], "")
    else:
        left = convert_condition(ctx, values[0])
        left_code = ctx.code(values[0])
    right = convert_condition(ctx, values[-1])
    if left is None and right is None:
        return None
    if left is None or right is None:
        plain = left_code if left is None else ctx.code(values[-1])
        raise NotConvertible(f"`{plain}` is Python logic mixed with a tensor condition")
    op = "&" if type(expr.op) is ast.And else "|"
    new: gen.Node = gen.BinaryOperation(_operand(left.expr), op, _operand(right.expr))
    if len(values) == len(expr.values):
        new = _with_parentheses_of(ctx, expr, new)
    return Converted(new, left.reads + right.reads)


def _names_only(expr: ast.expr) -> bool:
    """Is ``expr`` a name, a constant, or attributes and subscripts of them (``self.lo``,
    ``t[0]``): evaluated twice, it gives the same and does nothing else?"""
    while True:
        t = type(expr)
        if t is ast.Name or t is ast.Constant:
            return True
        if t is ast.Attribute:
            expr = expr.value  # type: ignore[attr-defined]
        elif t is ast.Subscript and _names_only(expr.slice):  # type: ignore[attr-defined]
            expr = expr.value  # type: ignore[attr-defined]
        else:
            return False


def convert_condition(ctx: FileContext, expr: ast.expr) -> Converted | None:
    """A Python truth test over tensor values as a boolean tensor expression.

    None when the test reads no tensor; raises :class:`NotConvertible` when it
    does but cannot be translated.
    """
    t = type(expr)
    if t is ast.BoolOp:
        return _convert_boolean(ctx, expr, list(expr.values))  # type: ignore[arg-type,attr-defined]
    if t is ast.UnaryOp and type(expr.op) is ast.Not:  # type: ignore[attr-defined]
        inner = convert_condition(ctx, expr.operand)  # type: ignore[attr-defined]
        if inner is None:
            return None
        test = inner.expr
        # ``not a != b`` is ``a == b`` (for NaN too); ``<`` is never flipped to ``>=``.
        flipped = _flip_comparison(ctx, test)
        if flipped is not None:
            return Converted(flipped, inner.reads)
        return Converted(gen.UnaryOperation("~", _paren(test)), inner.reads)
    if t is ast.Compare:
        ops = expr.ops  # type: ignore[attr-defined]
        if any(type(op) in (ast.Is, ast.IsNot, ast.In, ast.NotIn) for op in ops):
            for sub in walk(expr):
                if _read_of(ctx, sub) is not None:
                    raise NotConvertible("`is` / `in` tests have no tensor equivalent")
            return None
        operands = [expr.left, *expr.comparators]  # type: ignore[attr-defined]
        converted = [convert_value(ctx, o) for o in operands]
        is_tensor = [c is not None or ctx.is_tensor(o) for o, c in zip(operands, converted)]
        if all(c is None for c in converted):
            if any(is_tensor) and len(ops) == 1:
                return Converted(expr, [expr])  # ``t > 0``: a bool tensor already
            if not any(is_tensor):
                return None
            # ``lo <= t <= hi``: Python takes the truth of ``lo <= t`` (a read), then of ``t <= hi``.
        for o, c, tensor in zip(operands, converted, is_tensor):
            if c is None and not (tensor and ctx.certainly_tensor(o)) and not _plain_number(ctx, o):
                raise NotConvertible(f"`{ctx.code(o)}` may not be a number")
        for middle in operands[1:-1]:
            if not _names_only(middle):
                raise NotConvertible(f"`{ctx.code(middle)}` is evaluated once in a chained comparison; "
                                     "split in two comparisons it would be evaluated twice")
        values: list[Code] = [c.expr if c else o for o, c in zip(operands, converted)]
        reads = [r for c in converted if c for r in c.reads]
        pairs: list[gen.Node] = []
        for i in range(len(ops)):
            if not (is_tensor[i] or is_tensor[i + 1]):
                raise NotConvertible(f"`{ctx.code(operands[i])} ... {ctx.code(operands[i + 1])}` compares Python values")
            spacing = _operator_spacing(ctx, operands[i], operands[i + 1])
            pairs.append(_comparison(values[i], _COMPARISONS[type(ops[i])], values[i + 1], spacing))
        if len(pairs) == 1:
            # The comparison as written (its parentheses, its spacing), the reads in it converted.
            replaced = {o: c.expr for o, c in zip(operands, converted) if c is not None}
            return Converted(gen.Splice(expr, replaced), reads)
        new: gen.Node = _paren(pairs[0])
        for pair in pairs[1:]:
            new = gen.BinaryOperation(new, "&", _paren(pair))
        return Converted(new, reads or [expr])
    value = convert_value(ctx, expr)
    if value is not None:
        # ``if t.item():`` tests for non-zero.
        return Converted(gen.Comparison(_paren(value.expr), [("!=", "0")]), value.reads)
    if ctx.is_tensor(expr):
        if is_boolean(ctx, expr):
            return Converted(expr, [expr])
        # ``if t:`` tests a number for non-zero; ``~`` / ``&`` and ``torch.where``
        # need that as a boolean tensor (``~`` of an integer is bitwise).
        return Converted(gen.Comparison(_paren(expr), [("!=", "0")]), [expr])
    if t is ast.Call and (ctx.provenance.imports.qualify(expr.func) or "").startswith("math.") and any(  # type: ignore[attr-defined]
            ctx.is_tensor(arg_value(a)) for a in call_arguments(expr)):  # type: ignore[arg-type]
        name = (ctx.provenance.imports.qualify(expr.func) or "").split(".")[-1]  # type: ignore[attr-defined]
        instead = f"`torch.{name}`" if name in ("isfinite", "isnan", "isinf") else "torch's own function"
        raise NotConvertible(f"`{ctx.code(expr)}` reads the tensor into Python's `math`: {instead} decides on the device")
    return None


@dataclass
class Purity:
    safe: bool
    reason: str = ""
    blocking: bool = False  # not even an unsafe fix: the rewrite would most likely be wrong


def _analysed(ctx: FileContext, value: Code):
    """The nodes of ``value`` in order, each as (node, replaced): ``replaced`` None for a
    node of the file as it stands, or new code's node; for a node of the file that new
    code rebuilds with nodes inside it replaced (libcst: a new copy of it), those
    replacements."""
    stack: list = [(value, None)]
    while stack:
        item, replaced = stack.pop()
        if isinstance(item, gen.Source):
            stack.append((item.node, None))
        elif isinstance(item, gen.Splice):
            stack.append((item.node, item.replacements))
        elif isinstance(item, gen.Node):
            yield item, None
            stack.extend((kid, None) for kid in reversed(item.children()))
        elif isinstance(item, ast.AST):
            if not replaced:
                yield from ((node, None) for node in walk(item))
                continue
            if item in replaced:
                stack.append((replaced[item], None))
                continue
            inside = {k: v for k, v in replaced.items() if ctx.below(k, item)}
            if not inside:
                yield from ((node, None) for node in walk(item))
                continue
            yield item, inside
            from ..model.tree import children_of

            stack.extend((kid, inside) for kid in reversed(children_of(item)))


def _part(ctx: FileContext, child: ast.AST, replaced: dict | None) -> Code:
    """``child`` of a node that new code rebuilds with ``replaced`` inside it."""
    if not replaced:
        return child
    if child in replaced:
        return replaced[child]
    inside = {k: v for k, v in replaced.items() if ctx.below(k, child)}
    return gen.Splice(child, inside) if inside else child


def _as_file_node(value: Code) -> Code:
    """A node of the file for ``Source(node)``; anything else as it is."""
    if isinstance(value, gen.Source) and value.parentheses:
        return value.node
    return value


_DIVISIONS = {ast.Div: "/", ast.FloorDiv: "//", ast.Mod: "%"}


def purity(ctx: FileContext, expr: Code) -> Purity:
    """May ``expr`` run when the original code would have skipped it?

    (Under ``torch.no_grad()`` no gradient can turn into NaN: only what the
    forward computation itself does counts.) ``expr``: a node of the file, or new
    code (:mod:`codemods.gen`) around nodes of the file; new code is not in the
    file, so its grad mode and kinds are unknown, as they were to libcst.
    """
    from ..model.grad_mode import gradients_off
    from ..model.signs import zero_divisor

    top = _as_file_node(expr)
    grad = not gradients_off(ctx, top) if isinstance(top, ast.AST) else True
    for node, replaced in _analysed(ctx, top):
        if isinstance(node, gen.Node):
            if isinstance(node, gen.Lambda):
                return Purity(False, f"`{gen.show(ctx, node)}` is not a plain value")
            if type(node) is gen.BinaryOperation:
                if node.op in ("/", "//", "%"):
                    right = _as_file_node(_innermost(node.right))
                    zero = zero_divisor(ctx, right)  # type: ignore[arg-type]
                    if zero and not grad:
                        maybe = " (if both are Python numbers)"
                        return Purity(False, f"`{gen.show(ctx, node)}` divides by `{gen.show(ctx, node.right)}`, which "
                                             f"may be zero: computed where the branch was not taken, it can raise "
                                             f"`ZeroDivisionError`{maybe}")
                    if zero and grad:
                        return Purity(False, f"`{gen.show(ctx, node)}` divides by `{gen.show(ctx, node.right)}`, which "
                                             f"{zero}: the untaken branch's gradient can turn into NaN")
                if grad and node.op == "**":
                    right = _as_file_node(_innermost(node.right))
                    if not (isinstance(right, ast.AST) and _is_constant(right) and _non_negative_integer(right)):
                        return Purity(False, f"`{gen.show(ctx, node)}` can have an infinite gradient: the untaken "
                                             "branch's gradient can turn into NaN")
            continue
        t = type(node)
        code = ctx.code(node) if replaced is None else gen.show(ctx, gen.Splice(node, replaced))
        if t in (ast.Lambda, ast.NamedExpr, ast.Yield, ast.YieldFrom, ast.Await):
            return Purity(False, f"`{code}` is not a plain value")
        if t is ast.BinOp:
            op = type(node.op)  # type: ignore[attr-defined]
            right = _part(ctx, node.right, replaced)  # type: ignore[attr-defined]
            if op in _DIVISIONS:
                zero = zero_divisor(ctx, right)  # type: ignore[arg-type]
                kind = ctx.kind(node) if replaced is None else Kind.UNKNOWN
                if zero and (kind is Kind.NUMBER or (kind is Kind.UNKNOWN and not grad)):
                    maybe = "" if kind is Kind.NUMBER else " (if both are Python numbers)"
                    return Purity(False, f"`{code}` divides by `{gen.show(ctx, right)}`, which may be zero: "
                                         f"computed where the branch was not taken, it can raise `ZeroDivisionError`{maybe}")
                if zero and grad:
                    return Purity(False, f"`{code}` divides by `{gen.show(ctx, right)}`, which {zero}: "
                                         "the untaken branch's gradient can turn into NaN")
            if grad and op is ast.Pow and not (isinstance(right, ast.AST) and _is_constant(right) and _non_negative_integer(right)):
                return Purity(False, f"`{code}` can have an infinite gradient: the untaken branch's gradient can turn into NaN")
        if t is ast.Subscript and ctx.kind(node.value) is not Kind.MODULE:  # type: ignore[attr-defined]
            return Purity(False, f"`{code}` indexes a tensor: the branches may differ in shape "
                                 "(torch.where then broadcasts or fails) or compute on empty data", blocking=True)
        if t is ast.Call:
            shape = _shape_problem(ctx, node, top=node is top)  # type: ignore[arg-type]
            if shape:
                return Purity(False, shape, blocking=True)
            problem = _call_problem(ctx, node, grad)  # type: ignore[arg-type]
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


def _shape_problem(ctx: FileContext, call: ast.Call, top: bool) -> str:
    func = call.func
    qualified = ctx.provenance.imports.qualify(func) or ""
    if qualified.startswith("torch."):
        name = qualified.rsplit(".", 1)[-1]
    elif type(func) is ast.Attribute and ctx.kind(func.value) is Kind.TENSOR:
        name = func.attr  # a tensor method
    else:
        return ""  # modules and other callables: see _call_problem
    if name in SHAPE_CHANGING or (top and name in REDUCTIONS):
        return (f"`{ctx.code(call)}` may change the shape: torch.where needs both branches "
                "to have the same shape (or silently broadcasts them)")
    if top and qualified.startswith("torch.") and name in CREATION_FUNCTIONS and name not in DEVICE_OF_INPUT:
        # ``input_pos = torch.tensor(n - 1)`` where ``input_pos`` held a (T,) tensor: a tensor
        # made with a shape of its own, broadcast by torch.where to the other branch's.
        return (f"`{ctx.code(call)}` makes a tensor of its own shape, which need not be the other "
                "branch's: torch.where would silently broadcast it")
    return ""


def _is_constant(expr: ast.AST) -> bool:
    if type(expr) is ast.Constant:
        return type(expr.value) in (int, float)  # type: ignore[attr-defined]
    if type(expr) is ast.UnaryOp and type(expr.op) in (ast.USub, ast.UAdd):  # type: ignore[attr-defined]
        return _is_constant(expr.operand)  # type: ignore[attr-defined]
    return False


def _non_negative_integer(expr: ast.AST) -> bool:
    return type(expr) is ast.Constant and type(expr.value) is int  # type: ignore[attr-defined]


def _call_problem(ctx: FileContext, call: ast.Call, grad: bool = True) -> str:
    """Why evaluating ``call`` also where the original did not (both branches of ``torch.where``)
    changes the program, or "": its effects (:func:`~fixitem.codemods.effects.call_effect`), and a
    gradient that is infinite somewhere (0 * inf = NaN reaches the untaken branch's gradient)."""
    func = call.func
    qualified = ctx.provenance.imports.qualify(func) or ""
    if qualified.startswith("torch."):
        name = qualified.rsplit(".", 1)[-1]
    elif type(func) is ast.Attribute and ctx.kind(func.value) is Kind.TENSOR:
        name = func.attr
    else:
        name = ""
    found = call_effect(ctx, call)
    if not found.effect.pure:
        return found.reason
    if grad and name in NAN_GRADIENT_FUNCTIONS:
        return f"`{ctx.code(call)}` can have an infinite gradient: the untaken branch's gradient can turn into NaN"
    return ""


def sites_within(ctx: FileContext, sites, root: ast.AST) -> list:
    """The sync sites at or below ``root`` that a rewrite may turn into tensor code
    (``all(t)`` / ``any(t)``, which read element by element, and a tensor a metric writer
    reads itself, are only reported)."""
    return [site for site in ctx.sites_below(sites, root) if site.kind not in ("elements", "metric")]


def tensor_sites_within(ctx: FileContext, sites, root: ast.AST) -> list:
    """The sites below ``root`` whose value a tensor rewrite of ``root`` could keep on the
    device: a read used as the key of what is not a tensor (``is_thing_map[label.item()]``)
    must reach the host whatever ``root`` becomes (FX006 reports it)."""
    return [site for site in sites_within(ctx, sites, root) if not _key_of_python_container(ctx, site.node)]


def _key_of_python_container(ctx: FileContext, node: ast.AST) -> bool:
    parent = ctx.parents.get(node)
    return (type(parent) is ast.Subscript and parent.slice is node  # type: ignore[attr-defined]
            and ctx.kind(parent.value) is not Kind.TENSOR)  # type: ignore[attr-defined]



def _call_of_file(call: ast.Call) -> gen.Call:
    """A call of the file as new code, its function and arguments kept as written."""
    args: list[gen.Arg] = []
    for arg in call_arguments(call):
        star = arg_star(arg)
        args.append(gen.Arg(arg_value(arg), keyword=arg_keyword(arg), star=star))
    return gen.Call(call.func, args)


def one_argument_per_line(call: Code) -> gen.Call:
    """Lay a call out the way black does when it does not fit on one line."""
    if isinstance(call, gen.Source) and type(call.node) is ast.Call:
        call = call.node
    if isinstance(call, ast.Call):
        call = _call_of_file(call)
    assert isinstance(call, gen.Call), call
    return call.with_one_per_line()


def fit_line(ctx: FileContext, old: ast.AST, new: gen.Call) -> gen.Call:
    """``new`` replaces ``old``; wrap it when the line would grow past the project's line
    length (88 columns unless its ruff or black configuration says otherwise)."""
    line_number = ctx.position(old)[0]
    lines = ctx.memo("lines", ctx.source.splitlines)
    line = lines[line_number - 1] if line_number <= len(lines) else ""
    old_text = ctx.code(old)
    if "\n" in old_text:
        old_len = len(old_text.splitlines()[0])
    else:
        old_len = len(old_text)
    leading = ctx.leading_lines(old) if isinstance(old, COMPOUND) else []
    if leading:
        # libcst's text of a compound statement began with the blank and comment lines
        # above it (its ``leading_lines``), printed without the block's indentation.
        indent = ctx.indent(old)
        first = ctx.line(leading[0])
        old_len = len(first.removeprefix(indent))
    length = len(line) - old_len + len(gen.show(ctx, new))
    if length <= ctx.line_length or not _ends_its_line(ctx, old):
        # (A call wrapped in the middle of a line, with more of the expression after it, reads
        # worse than the long line: the wrapping is left to the project's formatter.)
        return new
    return one_argument_per_line(new)


_CLOSING = re.compile(r"[)\]}]*,?:?\s*(#.*)?")


def _ends_its_line(ctx: FileContext, node: ast.AST) -> bool:
    """Does only closing brackets (a comma, a colon, a comment) follow ``node`` on its last line?"""
    end = ctx.positions[node].end
    lines = ctx.memo("lines", ctx.source.splitlines)
    tail = lines[end.line - 1][end.column:] if end.line <= len(lines) else ""
    return _CLOSING.fullmatch(tail.rstrip("\r")) is not None


def fit_statement(ctx: FileContext, indent: int | str, statement: gen.Statement) -> gen.Statement:
    """Wrap the call assigned by ``name = call(...)`` (a :class:`gen.Assign`) when the line,
    at column ``indent``, is too long."""
    if not isinstance(statement, gen.Assign):
        return statement
    value = statement.value
    if isinstance(value, gen.Source) and type(value.node) is ast.Call and value.parentheses:
        value = value.node  # type: ignore[assignment]
    if not isinstance(value, (gen.Call, ast.Call)):
        return statement
    column = indent if isinstance(indent, int) else len(indent)
    text = f"{statement.body(ctx, ' ' * column)}{statement.trailing}"
    if column + len(text) <= ctx.line_length:
        return statement
    return gen.Assign(statement.targets, one_argument_per_line(value), statement.comments, statement.trailing)


# -- numbers that every floating dtype holds exactly ----------------------------------------------


def exact_in_every_float_dtype(expr: Code) -> bool:
    """Is ``expr`` a number literal that float16 and bfloat16 (and so float32 and
    float64) represent exactly? Then comparing or combining it in the tensor's
    dtype gives what Python's float64 gave."""
    expr = _as_file_node(expr)
    if type(expr) is ast.UnaryOp and type(expr.op) in (ast.USub, ast.UAdd):  # type: ignore[attr-defined]
        return exact_in_every_float_dtype(expr.operand)  # type: ignore[attr-defined]
    if not (type(expr) is ast.Constant and type(expr.value) in (int, float)):  # type: ignore[attr-defined]
        return False
    try:
        value = float(expr.value)  # type: ignore[attr-defined]
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


def threshold_rounding(ctx: FileContext, test: ast.expr) -> str:
    """Why comparing in the tensor's dtype may decide differently than Python's float64
    did: the test compares a value read from a tensor with a number that float16 /
    bfloat16 do not hold exactly (``0.1``, ``1e-6``, a Python variable). In
    float64 Python compares with the exact number; the tensor compares with the
    number rounded to its own dtype, so a value equal to that rounding falls on
    the other side. "" when every such number is exact in every floating dtype
    (``4.0``, ``0.5``, ``-1``), or when two tensor values are compared."""
    for node in walk(test):
        if type(node) is not ast.Compare or any(
            type(op) in (ast.Is, ast.IsNot, ast.In, ast.NotIn) for op in node.ops  # type: ignore[attr-defined]
        ):
            continue
        operands = [node.left, *node.comparators]  # type: ignore[attr-defined]
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
                        f"`{ctx.code(other)}` exactly, the tensor comparison first rounds it to the tensor's dtype, "  # type: ignore[arg-type]
                        f"which decides differently where `{ctx.code(held)}` has a wider dtype (float64 against float32)")
            literal = (type(operand) is ast.Constant and type(operand.value) in (int, float)) or type(operand) is ast.UnaryOp
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


def _held_read(ctx: FileContext, operand: ast.expr) -> ast.expr | None:
    """The tensor whose value the name ``operand`` holds, read into it with ``.item()``
    / ``float()`` (``best = y.min().item()`` gives ``y.min()``)."""
    from ..model.signs import seen_value

    value = seen_value(ctx, operand) if type(operand) is ast.Name else None  # type: ignore[arg-type]
    read = _read_of(ctx, value) if value is not None else None
    return read[0] if read is not None and read[1] != "int" else None


def _operands(expr: ast.AST) -> Iterator[ast.AST]:
    """``expr`` and the operands of its comparisons, arithmetic and logic, not what calls
    take (``x.norm(dim=-1).max()`` is a full reduction of a partial one)."""
    yield expr
    t = type(expr)
    if t is ast.Compare:
        for operand in (expr.left, *expr.comparators):  # type: ignore[attr-defined]
            yield from _operands(operand)
    elif t is ast.BinOp:
        yield from _operands(expr.left)  # type: ignore[attr-defined]
        yield from _operands(expr.right)  # type: ignore[attr-defined]
    elif t is ast.UnaryOp:
        yield from _operands(expr.operand)  # type: ignore[attr-defined]
    elif t is ast.BoolOp:
        for value in expr.values:  # type: ignore[attr-defined]
            yield from _operands(value)


def _reduced_along_a_dimension(ctx: FileContext, expr: ast.AST) -> bool:
    """``h.norm(dim=-1)``, ``x.sum(1, keepdim=True)``, ``torch.mean(x, 0)``: a reduction
    that keeps dimensions, so the tensor may hold more than one element."""
    if type(expr) is not ast.Call:
        return False
    func = expr.func  # type: ignore[attr-defined]
    keywords = {k.arg for k in expr.keywords}  # type: ignore[attr-defined]
    along = bool(keywords & {"dim", "axis", "keepdim"})
    if type(func) is ast.Attribute and func.attr in REDUCTIONS and ctx.kind(func.value) is Kind.TENSOR:
        return along or bool(expr.args)  # type: ignore[attr-defined]
    qualified = ctx.provenance.imports.qualify(func) or ""
    if qualified.startswith("torch.") and qualified.rsplit(".", 1)[-1] in REDUCTIONS:
        return along or len(expr.args) > 1  # type: ignore[attr-defined]
    return False


def zero_dim_condition(ctx: FileContext, condition: Code, sites, values: list[ast.expr]) -> Code:
    """``condition`` with ``.reshape(())`` on each tensor it reads that is not plainly
    0-dim, when a selected value is a number or a 0-dim tensor: ``.item()`` accepts
    any one-element tensor, ``(1,)`` too, and a ``(1,)`` condition would make the
    selection ``(1,)`` where the value was 0-dim. (Selected tensors that are not
    plainly 0-dim are taken to have at least the condition's dimensions.) A read reduced
    along a dimension (``h.norm(dim=-1, keepdim=True)``) is reshaped whatever is selected:
    the original raised unless it held one element, and ``torch.where`` would select
    element by element instead."""
    only_reduced = all(ctx.kind(v) is Kind.TENSOR and not plainly_zero_dim(ctx, v) for v in values)
    if only_reduced:  # only the reads reduced along a dimension
        reduced = {s: [n for n in _operands(s.value) if _reduced_along_a_dimension(ctx, n)] for s in sites}
        if not any(reduced.values()):
            return condition
    from ..model.syncs import kept_reads

    kept = kept_reads(ctx, sites, [condition])  # ``idx.item()`` of ``probs[idx.item()] > 0.5`` stays a number
    targets: dict[ast.AST, None] = {}
    for s in sites:
        if s in kept:
            continue
        if only_reduced:
            targets.update((n, None) for n in reduced[s])
        elif not plainly_zero_dim(ctx, s.value):
            targets[s.value] = None
    if not targets:
        return condition
    # Inner ones first: a tensor read inside another one is reshaped in it too.
    from ..model.tree import number_of

    reshaped: dict[ast.AST, gen.Expr_] = {}
    for target in sorted(targets, key=lambda n: number_of(n) or 0, reverse=True):
        inside = {k: v for k, v in reshaped.items() if ctx.below(k, target)}
        value = gen.substitute(target, inside, ctx) if inside else target
        reshaped[target] = gen.method_call(ctx, value, "reshape", [gen.Tuple([])])
    return gen.substitute(condition, reshaped, ctx)
