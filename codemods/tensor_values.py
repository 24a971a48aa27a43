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
from dataclasses import dataclass, field
from typing import Union

from . import gen
from .context import COMPOUND, FUNCTIONS, FileContext
from .dtypes import same_dtype
from .effects import call_effect
from .gen import method_call  # noqa: F401 - rules import it from here
from .model.reductions import REDUCTIONS
from .name_reads import reads_of
from .provenance import Kind
from .scalar_shapes import (
    arg_keyword,
    arg_star,
    arg_value,
    call_arguments,
    detached_scalar,
    plainly_zero_dim,
    subscript_elements,
)
from .tree import walk

# Functions whose gradient is infinite or NaN somewhere in their domain: in the
# branch that was not taken, 0 * inf = NaN reaches the gradient.
NAN_GRADIENT_FUNCTIONS = frozenset(
    {
        "log", "log2", "log10", "log1p", "sqrt", "rsqrt", "reciprocal", "div", "true_divide",
        "floor_divide", "pow", "float_power", "acos", "asin", "atanh", "acosh", "logit", "xlogy",
        "digamma", "polygamma", "lgamma", "erfinv", "cdist", "norm", "pdist", "atan2",
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
            return None
        for o, c in zip(operands, converted):
            if c is None and not _plain_number(ctx, o):
                raise NotConvertible(f"`{ctx.code(o)}` may not be a number")
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
        return Converted(new, reads)
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
            from .tree import children_of

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
    from .grad_mode import gradients_off
    from .signs import zero_divisor

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


LINE_LENGTH = 88


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
    """``new`` replaces ``old``; wrap it when the line would grow past 88 columns."""
    line_number = ctx.position(old)[0]
    lines = ctx.memo("lines", ctx.source.splitlines)
    line = lines[line_number - 1] if line_number <= len(lines) else ""
    old_text = ctx.code(old)
    if "\n" in old_text:
        old_len = len(old_text.splitlines()[0])
    else:
        old_len = len(old_text)
    leading = _leading_lines(ctx, old) if isinstance(old, COMPOUND) else []
    if leading:
        # libcst's text of a compound statement began with the blank and comment lines
        # above it (its ``leading_lines``), printed without the block's indentation.
        indent = ctx.indent(old)
        first = ctx.line(leading[0])
        old_len = len(first.removeprefix(indent))
    length = len(line) - old_len + len(gen.show(ctx, new))
    return one_argument_per_line(new) if length > LINE_LENGTH else new


def _leading_lines(ctx: FileContext, statement: ast.AST) -> list[int]:
    """The blank and comment lines just above the compound ``statement`` that libcst gave it
    (its ``leading_lines``): those after the statement before it (after the last comment
    indented deeper, which the block before it owned) or after its block's header."""
    start = ctx.positions[statement].start.line
    parent = ctx.parents.get(statement)
    field_name = ctx.field_of(statement)
    block = getattr(parent, field_name, None) if parent is not None and field_name else None
    if not isinstance(block, list):
        return []
    index = next(i for i, s in enumerate(block) if s is statement)
    if index > 0:
        before = block[index - 1]
        first = ctx.positions[before].end.line + 1
        if isinstance(before, COMPOUND):
            depth = len(ctx.indent(statement))
            for number in range(first, start):
                text = ctx.line(number)
                if text.lstrip().startswith("#") and len(text) - len(text.lstrip()) > depth:
                    first = number + 1
    elif type(parent) is ast.Module:
        first = 1
    elif field_name == "body":
        header = ctx.header_end(parent)  # type: ignore[arg-type]
        if header is None:
            return []
        first = header[0] + 1
    elif field_name == "orelse":
        line = ctx.else_line(parent)  # type: ignore[arg-type]
        if line is None:
            return []  # an ``elif``
        first = line + 1
    else:
        return []
    return list(range(first, start))


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
    if column + len(text) <= LINE_LENGTH:
        return statement
    return gen.Assign(statement.targets, one_argument_per_line(value), statement.comments, statement.trailing)


UNKNOWN_VALUE_NOTE = (
    "no fix: fixitem cannot tell that the value read is a tensor (it could be a numpy value). "
    "Annotate where it comes from (`x: torch.Tensor`, `model: nn.Module`) to let fixitem rewrite it"
)


# -- following a value through the names it is stored in ------------------------------------

_LOOPS = (ast.For, ast.AsyncFor, ast.While)


def binding_of(ctx: FileContext, top: ast.expr) -> ast.Name | None:
    """The name ``top`` is assigned to, in a function, when every later read of
    the name reads this value: its only binding, or the last one of a name
    rebound from its own value (``num_boxes = torch.clamp(num_boxes, min=1).item()``)
    outside any loop, all other bindings coming before it."""
    assign = ctx.parents.get(top)
    if type(assign) is not ast.Assign or assign.value is not top or len(assign.targets) != 1:  # type: ignore[union-attr]
        return None
    target = assign.targets[0]  # type: ignore[union-attr]
    if type(target) is not ast.Name:
        return None
    scope = ctx.provenance.scope_of(target)
    if not isinstance(scope.node, FUNCTIONS):
        return None
    bindings = scope.bindings.get(target.id, [])
    if not any(how == "value" and node is top for how, node in bindings):
        return None
    if len(bindings) == 1:
        return target
    for ancestor in ctx.ancestors(assign):  # type: ignore[arg-type]
        if ancestor is scope.node:
            break
        if isinstance(ancestor, _LOOPS):
            return None  # a later iteration would see the value before this line
    start = ctx.positions[assign].start  # type: ignore[index]
    for how, node in bindings:
        if node is top or how == "param":
            continue
        if node is None:
            return None
        end = ctx.positions[node].end
        if (end.line, end.column) > (start.line, start.column):
            return None
    return target


def _in_block_of(ctx: FileContext, statement: ast.AST, node: ast.AST) -> bool:
    """Does ``node`` lie in the statements of the block that holds ``statement`` (libcst:
    below the ``IndentedBlock``)?"""
    from .tree import number_of, subtree_stop

    parent = ctx.parents.get(statement)
    field_name = ctx.field_of(statement)
    block = getattr(parent, field_name, None) if parent is not None and field_name else None
    number = number_of(node)
    if not isinstance(block, list) or not block or number is None:
        return False
    first, last = number_of(block[0]), number_of(block[-1])
    if first is None or last is None:
        return False
    return first <= number < subtree_stop(last)


def name_uses(ctx: FileContext, target: ast.Name) -> list[ast.Name] | None:
    """Every read of the value bound at ``target``, or None when one may escape analysis."""
    name = target.id
    scope = ctx.provenance.scope_of(target)
    function = scope.node
    assert isinstance(function, FUNCTIONS)
    assign = ctx.parents[target]
    rebound = len(scope.bindings[name]) > 1
    assign_end = ctx.positions[assign].end
    for node in ctx.nodes(ast.Global, ast.Nonlocal):
        if name in node.names:  # type: ignore[attr-defined]
            return None
    uses: list[ast.Name] = []
    for node in walk(function):  # a read of a local of ``function``, or a call of locals() in it, lies in it
        if type(node) is not ast.Name:
            continue
        if node is target:
            continue
        parent = ctx.parents.get(node)
        if node.id in ("locals", "vars", "eval", "exec") and type(parent) is ast.Call and parent.func is node:  # type: ignore[attr-defined,union-attr]
            if ctx.enclosing_function(node) is function:
                return None  # the name may be read by string
            continue
        if node.id != name:  # type: ignore[attr-defined]
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
            if not _in_block_of(ctx, assign, node):
                return None  # after the block: may read an earlier value
        uses.append(node)  # type: ignore[arg-type]
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


def value_flow(ctx: FileContext, expr: ast.expr, depth: int = 0) -> Flow:
    """Follow ``expr`` (about to become a 0-dim tensor) through arithmetic and
    the names it is stored in, to every use."""
    flow = Flow()
    _climb(ctx, expr, flow, depth)
    return flow


_DECIDING = (ast.Compare, ast.BoolOp, ast.If, ast.While, ast.Assert, ast.IfExp)


def _subscript_elements_tuple(ctx: FileContext, parent: ast.AST) -> bool:
    """Is ``parent`` the tuple of ``x[a, b]`` (libcst: no tuple, the subscript's elements)?"""
    if type(parent) is not ast.Tuple:
        return False
    holder = ctx.parents.get(parent)
    return (type(holder) is ast.Subscript and holder.slice is parent  # type: ignore[union-attr]
            and subscript_elements(ctx, holder)[0] is not parent)  # type: ignore[arg-type]


def _returns_number(returns: ast.expr | None) -> bool:
    """``-> float``, ``-> float | None``, ``-> Optional[int]``."""
    return returns is not None and any(type(n) is ast.Name and n.id in _RETURN_NUMBER for n in walk(returns))  # type: ignore[attr-defined]


def _climb(ctx: FileContext, node: ast.expr, flow: Flow, depth: int) -> None:
    if flow.blocking:
        return
    parent = ctx.parents.get(node)
    code = ctx.code(node)
    t = type(parent)
    if t is ast.BinOp:
        other = parent.right if parent.left is node else parent.left  # type: ignore[union-attr]
        if ctx.kind(other) is Kind.TENSOR and type(parent.op) not in (ast.MatMult, ast.Pow):  # type: ignore[union-attr]
            flow.roles.append("tensor arithmetic")
            return  # the result was a tensor already
        _climb(ctx, parent, flow, depth)  # type: ignore[arg-type]  # Python arithmetic: its result becomes a tensor too
        return
    if t is ast.UnaryOp:
        if type(parent.op) is ast.Not:  # type: ignore[union-attr]
            flow.blocking = f"`{ctx.code(parent)}` is Python control flow"  # type: ignore[arg-type]
            return
        _climb(ctx, parent, flow, depth)  # type: ignore[arg-type]
        return
    if t in _DECIDING:
        if t is ast.IfExp and parent.test is not node:  # type: ignore[union-attr]
            _climb(ctx, parent, flow, depth)  # type: ignore[arg-type]
            return
        flow.blocking = f"`{code}` then decides Python control flow (a comparison or truth test)"
        return
    if t is ast.Subscript or t is ast.Slice or _subscript_elements_tuple(ctx, parent):  # type: ignore[arg-type]
        flow.blocking = f"`{code}` is then used as an index or slice bound"
        return
    if t is ast.FormattedValue:
        flow.blocking = f"`{code}` is then formatted into text"
        return
    # An argument of a call (libcst's ``Arg``: the value itself, ``*value``'s ``Starred``, a ``keyword``).
    if t is ast.Call and node is not parent.func:  # type: ignore[union-attr]
        _call_flow(ctx, parent, node, code, flow, depth)  # type: ignore[arg-type]
        return
    if t is ast.Starred and type(ctx.parents.get(parent)) is ast.Call:  # type: ignore[arg-type]
        _call_flow(ctx, ctx.parents.get(parent), parent, code, flow, depth)  # type: ignore[arg-type]
        return
    if t is ast.keyword or (t is ast.ClassDef and node in parent.bases):  # type: ignore[union-attr]
        call = ctx.parents.get(parent) if t is ast.keyword else parent  # type: ignore[arg-type]
        if type(call) is ast.Call:
            _call_flow(ctx, call, parent, code, flow, depth)  # type: ignore[arg-type]
        else:
            flow.unsafe = flow.unsafe or f"`{code}` is passed on"
        return
    if t is ast.Return:
        function = ctx.enclosing_function(parent)  # type: ignore[arg-type]
        returns = function.returns if function is not None else None
        if returns is not None:
            annotation = ctx.code(returns)
            if _returns_number(returns):
                # ``-> float``, ``-> float | None``, ``-> Optional[int]``
                flow.blocking = f"the function returns `{code}` as `-> {annotation}`: it would return a 0-dim tensor"
                return
        flow.unsafe = flow.unsafe or f"`{code}` is returned: the caller gets a 0-dim tensor where it got a Python number"
        _caller_flow(ctx, function, flow, depth)
        return
    if (t is ast.Assign or t is ast.AnnAssign) and parent.value is node:  # type: ignore[union-attr]
        targets = parent.targets if t is ast.Assign else [parent.target]  # type: ignore[union-attr]
        if len(targets) == 1 and _self_attribute(targets[0]):
            _attribute_flow(ctx, targets[0], flow, depth)  # type: ignore[arg-type]
            return
        if len(targets) != 1 or type(targets[0]) is not ast.Name:
            flow.unsafe = flow.unsafe or f"`{code}` is stored where fixitem cannot follow it"
            return
        _name_flow(ctx, targets[0], node, flow, depth)
        return
    if t is ast.AugAssign and parent.value is node:  # type: ignore[union-attr]
        if type(parent.target) is ast.Name and ctx.kind(parent.target) is Kind.TENSOR:  # type: ignore[union-attr]
            flow.roles.append("tensor arithmetic")
            return
        flow.unsafe = flow.unsafe or f"`{ctx.code(parent.target)}` accumulates `{code}`: it becomes a tensor"  # type: ignore[union-attr]
        return
    if t in (ast.List, ast.Tuple, ast.Set, ast.Dict):
        container = parent
        unpacked = _unpacked_into(ctx, node, container)
        if unpacked is not None:  # ``k, m = min(...), 2``
            if _self_attribute(unpacked):
                _attribute_flow(ctx, unpacked, flow, depth)  # type: ignore[arg-type]
            elif type(unpacked) is ast.Name:
                _name_flow(ctx, unpacked, node, flow, depth)  # type: ignore[arg-type]
            else:
                flow.unsafe = flow.unsafe or f"`{code}` is stored where fixitem cannot follow it"
            return
        # (libcst held a dict's keys and values in a ``DictElement``: never returned as such.)
        returned = ctx.parents.get(container) if t is not ast.Dict else None  # type: ignore[arg-type]
        if type(returned) is ast.Return:
            function = ctx.enclosing_function(returned)  # type: ignore[arg-type]
            returns = function.returns if function is not None else None
            if returns is not None and _returns_number(returns):
                flow.blocking = f"the function returns `{code}` in `-> {ctx.code(returns)}`: it would return a 0-dim tensor"
                return
        flow.unsafe = flow.unsafe or f"`{code}` is stored in a container"
        return
    if t is ast.Expr:
        return  # the value is discarded
    used = _code_of_holder(ctx, parent, node) if parent is not None else code
    flow.unsafe = flow.unsafe or f"`{code}` is used as `{used}`"


def _code_of_holder(ctx: FileContext, parent: ast.AST, node: ast.AST) -> str:
    """The text libcst gave the node holding ``node``: a comprehension's ``if`` test
    (``CompIf``: `` if k``, with the space before it), a compound statement with the
    blank and comment lines above it and its lines unindented, else the node's own text."""
    if type(parent) is ast.comprehension:
        tests = parent.ifs  # type: ignore[attr-defined]
        for i, test in enumerate(tests):
            if test is node:
                before = tests[i - 1] if i else parent.iter  # type: ignore[attr-defined]
                return ctx.source[ctx.span(before)[1]:ctx.span(node)[1]]
    if not isinstance(parent, COMPOUND):
        return ctx.code(parent)
    from .tree import children_of

    indent = ctx.indent(parent)
    start, end = ctx.positions[parent].start, ctx.positions[parent].end
    lines = [ctx.line(start.line)[start.column:]]
    lines += [ctx.line(n).removeprefix(indent) for n in range(start.line + 1, end.line + 1)]
    # The blank and comment lines after the last statement, up to the last comment indented
    # as that statement's block, were the block's (its ``footer``).
    last: ast.AST = parent
    while not (isinstance(last, ast.stmt) and last is not parent):
        kids = children_of(last)
        if not kids:
            break
        last = kids[-1]
    block_indent = ctx.indent(last) if isinstance(last, ast.stmt) else indent + " "
    total = len(ctx.tree_index.text.line_starts) if ctx.tree_index is not None else end.line
    footer: list[str] = []
    kept = 0
    for number in range(end.line + 1, total + 1):
        text = ctx.line(number)
        if text.strip() and not text.lstrip().startswith("#"):
            break
        footer.append(text)
        if text.lstrip().startswith("#") and text.startswith(block_indent):
            kept = len(footer)
    lines += [text.removeprefix(indent) for text in footer[:kept]]
    leading = [ctx.line(n).removeprefix(indent) for n in _leading_lines(ctx, parent)]
    return "".join(f"{text}\n" for text in (*leading, *lines))


def _caller_flow(ctx: FileContext, function: ast.AST | None, flow: Flow, depth: int) -> None:
    """What the calls of ``function`` in this file do with what it returns (callers
    elsewhere are not seen: the return stays unsafe)."""
    if function is None or depth > 4:
        return
    name = function.name  # type: ignore[attr-defined]
    cls = ctx.parents.get(function)  # ``class C:`` holds the ``def``
    method = type(cls) is ast.ClassDef
    for call in ctx.nodes(ast.Call):
        func = call.func  # type: ignore[attr-defined]
        if method:
            if not (_self_attribute(func) and func.attr == name and ctx.provenance.enclosing_class(call) is cls):
                continue
        elif not (type(func) is ast.Name and func.id == name
                  and ctx.provenance.scope_of(call).lookup(name) is ctx.provenance.scope_of(function)):
            continue
        _climb(ctx, call, flow, depth + 1)  # type: ignore[arg-type]
        if flow.blocking:
            flow.blocking = f"`{ctx.code(call)}` returns it: {flow.blocking}"
            return


def _unpacked_into(ctx: FileContext, element: ast.AST, container: ast.AST | None) -> ast.expr | None:
    """The target ``element`` of a tuple or list is assigned to in ``a, b = x, y``."""
    assign = ctx.parents.get(container) if container is not None else None
    if not (type(container) in (ast.Tuple, ast.List) and type(assign) is ast.Assign
            and assign.value is container and len(assign.targets) == 1):  # type: ignore[union-attr]
        return None
    target = assign.targets[0]  # type: ignore[union-attr]
    if type(target) not in (ast.Tuple, ast.List) or len(target.elts) != len(container.elts):  # type: ignore[union-attr,attr-defined]
        return None
    if any(type(e) is ast.Starred for e in (*target.elts, *container.elts)):  # type: ignore[union-attr,attr-defined]
        return None
    index = next(i for i, e in enumerate(container.elts) if e is element)  # type: ignore[union-attr]
    return target.elts[index]  # type: ignore[attr-defined]


def _self_attribute(target: object) -> bool:
    return type(target) is ast.Attribute and type(target.value) is ast.Name and target.value.id == "self"  # type: ignore[attr-defined]


def _attribute_flow(ctx: FileContext, target: ast.Attribute, flow: Flow, depth: int) -> None:
    """``self.k = value``: the reads of ``self.k`` in the methods of the class; other
    code may read the attribute too."""
    cls = ctx.provenance.enclosing_class(target)
    code = ctx.code(target)
    flow.unsafe = flow.unsafe or f"`{code}` is stored on the object: other code may read it"
    if cls is None or depth > 4:
        return
    for node in ctx.nodes(ast.Attribute):
        if node is target or not _self_attribute(node) or node.attr != target.attr:  # type: ignore[attr-defined]
            continue
        parent = ctx.parents.get(node)
        if type(parent) is ast.Assign and any(t is node for t in parent.targets):  # type: ignore[union-attr]
            continue
        if type(parent) is ast.AugAssign and parent.target is node:  # type: ignore[union-attr]
            continue
        if ctx.provenance.enclosing_class(node) is not cls:
            continue
        _climb(ctx, node, flow, depth + 1)  # type: ignore[arg-type]
        if flow.blocking:
            return


def _call_flow(ctx: FileContext, call: ast.Call, arg: ast.AST, code: str, flow: Flow, depth: int = 0) -> None:
    """(``arg``: the argument as :func:`~codemods.scalar_shapes.call_arguments` lists it.)"""
    func = call.func
    qualified = ctx.provenance.imports.qualify(func) or ""
    name = func.id if type(func) is ast.Name else ""
    if name in PYTHON_ONLY_CALLS or qualified.startswith(PYTHON_ONLY_MODULES) or name == "float":
        flow.blocking = f"`{code}` is passed to `{ctx.code(func)}`, which needs a Python number"
        return
    short = ""
    receiver_tensor = False
    if qualified.startswith("torch."):
        short = qualified.rsplit(".", 1)[-1]
    elif type(func) is ast.Attribute:
        short = func.attr
        receiver_tensor = ctx.kind(func.value) is Kind.TENSOR
    if short in SIZE_TAKING and (qualified.startswith("torch.") or receiver_tensor):
        flow.blocking = f"`{code}` is passed to `{ctx.code(func)}` as a size or count, which needs a Python number"
        return
    if qualified == "torch.where" or (qualified in ("torch.clamp", "torch.clip") and arg is not call_arguments(call)[0]):
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


def _parameters(arguments: ast.arguments) -> list[ast.arg]:
    """Every parameter: positional-only, positional, keyword-only, ``*args``, ``**kwargs``."""
    found = [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs]
    if arguments.vararg is not None:
        found.append(arguments.vararg)
    if arguments.kwarg is not None:
        found.append(arguments.kwarg)
    return found


def _parameter_flow(ctx: FileContext, call: ast.Call, arg: ast.AST, depth: int) -> Flow:
    """Where a function of this file (``helper(n)``, ``self.helper(n)``) takes the
    argument ``arg``: the reads of its parameter."""
    flow = Flow()
    if depth > 4 or arg_star(arg):
        return flow
    func = call.func
    method = _self_attribute(func)
    if method:
        cls = ctx.provenance.enclosing_class(call)
        name = func.attr  # type: ignore[attr-defined]
    elif type(func) is ast.Name:
        cls, name = None, func.id
    else:
        return flow
    owner = ctx.provenance.scope_of(call).lookup(name) if not method else None
    for function in ctx.nodes(ast.FunctionDef, ast.AsyncFunctionDef):
        if function.name != name:  # type: ignore[attr-defined]
            continue
        parent = ctx.parents.get(function)
        if method and parent is not cls:
            continue
        if not method and (ctx.provenance.scope_of(function) is not owner or type(parent) is ast.ClassDef):
            continue
        arguments: ast.arguments = function.args  # type: ignore[attr-defined]
        params = [*arguments.posonlyargs, *arguments.args]
        if method:
            params = params[1:]
        keyword = arg_keyword(arg)
        if keyword is not None:
            chosen = next((p for p in _parameters(arguments) if p.arg == keyword), None)
        else:
            index = [a for a in call_arguments(call) if arg_keyword(a) is None].index(arg)
            chosen = params[index] if index < len(params) else None
        scope = ctx.provenance.scopes.get(function)
        if chosen is None or scope is None:
            return flow
        for read in reads_of(ctx, scope, chosen.arg, nested=True):
            if read is not None:
                _climb(ctx, read, flow, depth + 1)
                if flow.blocking:
                    return flow
        return flow
    return flow


def _name_flow(ctx: FileContext, target: ast.Name, value: ast.expr, flow: Flow, depth: int) -> None:
    """The reads of ``target`` that may see ``value``."""
    if depth > 4:
        flow.unsafe = flow.unsafe or f"`{target.id}` is passed through too many names to follow"
        return
    scope = ctx.provenance.scope_of(target)
    if not isinstance(scope.node, FUNCTIONS):
        flow.unsafe = flow.unsafe or f"`{target.id}` is a module-level name: other code may read it"
        return
    for read in reads_of(ctx, scope, target.id, nested=True):
        if read is None:
            flow.unsafe = flow.unsafe or f"`{target.id}` is read where fixitem cannot follow it"
            continue
        if ctx.positions[read].start.line < ctx.positions[target].start.line and not _in_loop_with(ctx, read, target):
            continue  # an earlier value of the name
        _nested_read(ctx, scope, read, target.id, flow)
        _climb(ctx, read, flow, depth + 1)
        if flow.blocking:
            return


def _in_loop_with(ctx: FileContext, a: ast.AST, b: ast.AST) -> bool:
    loops = {id(n) for n in ctx.ancestors(b) if isinstance(n, _LOOPS)}
    return any(id(n) in loops for n in ctx.ancestors(a) if isinstance(n, _LOOPS))


_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)


def _nested_read(ctx: FileContext, scope, read: ast.Name, name: str, flow: Flow) -> None:
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


def uncertain_tensor(ctx: FileContext, expr: ast.expr) -> str:
    """Why the tensor read in ``expr`` is not certainly a tensor ("" when it is).

    A ``forward`` parameter taken for a tensor only because it is one
    (``forward(ctx, bias, tp_degree)`` of an ``autograd.Function`` passes
    Python numbers too) is certain only when ``.item()`` is called on it; a value
    derived from ``torch.load``, ``torch.jit`` or ``state_dict()`` is a
    container, not a tensor.
    """
    return _uncertain(ctx, expr, set())


PYTHON_NUMBER_METHODS = frozenset({"conjugate", "is_integer", "hex", "as_integer_ratio", "bit_length", "to_bytes", "bit_count"})


def _uncertain(ctx: FileContext, expr: ast.expr, seen: set[tuple[int, str]], proven: bool = False) -> str:
    """Follows what makes ``expr`` a tensor: a call to a torch function or a module
    gives a tensor whatever its arguments, a tensor method called on a value proves
    it is not a Python number (``proven``: only a container origin is left to
    find), arithmetic is a tensor when one tensor operand is."""
    t = type(expr)
    if t is ast.Call:
        func = expr.func  # type: ignore[attr-defined]
        qualified = ctx.provenance.imports.qualify(func) or ""
        if qualified in NOT_TENSOR_RESULTS or qualified.startswith("torch.jit."):
            return f"`{ctx.code(expr)}` returns what was saved or compiled, not a tensor"
        if type(func) is ast.Attribute:
            if func.attr in NOT_TENSOR_METHODS:
                return f"`{ctx.code(expr)}` is a container of tensors, not a tensor"
            method_proves = func.attr not in PYTHON_NUMBER_METHODS
            return _uncertain(ctx, func.value, seen, proven or method_proves)
        if type(func) is ast.Name and func.id in ("float", "int", "bool") and (expr.args or expr.keywords):  # type: ignore[attr-defined]
            return _uncertain(ctx, arg_value(call_arguments(expr)[0]), seen, proven)  # type: ignore[arg-type]
        return ""
    if t is ast.BinOp or t is ast.Compare:
        operands = [expr.left, expr.right] if t is ast.BinOp else [expr.left, *expr.comparators]  # type: ignore[attr-defined]
        reasons = [_uncertain(ctx, o, seen, proven) for o in operands if ctx.kind(o) is Kind.TENSOR]
        if reasons and all(reasons):
            return reasons[0]
        return ""
    if t is ast.UnaryOp:
        return _uncertain(ctx, expr.operand, seen, proven)  # type: ignore[attr-defined]
    if t is ast.Subscript:
        return _uncertain(ctx, expr.value, seen, proven)  # type: ignore[attr-defined]
    if t is ast.Attribute:
        if type(expr.value) is ast.Name and expr.value.id == "self":  # type: ignore[attr-defined]
            return ""
        return _uncertain(ctx, expr.value, seen, proven)  # type: ignore[attr-defined]
    if t is ast.Name:
        name = expr.id  # type: ignore[attr-defined]
        if not proven and ctx.provenance.presumed_tensor(expr):
            return (f"`{name}` is a tensor only if the caller passes one (a parameter of "
                    f"`{_function_name(ctx, expr)}` never used as a tensor)")
        scope = ctx.provenance.scope_of(expr).lookup(name)
        if scope is None or (id(scope), name) in seen:
            return ""
        for how, value in scope.bindings.get(name, []):
            if how == "value" and isinstance(value, ast.expr) and ctx.kind(value) is not Kind.NUMBER:
                reason = _uncertain(ctx, value, seen | {(id(scope), name)}, proven)
                if reason:
                    return reason
    return ""


def _function_name(ctx: FileContext, node: ast.AST) -> str:
    function = ctx.enclosing_function(node)
    if function is None:
        return "the function"
    cls = ctx.provenance.enclosing_class(function)
    return f"{cls.name}.{function.name}" if cls is not None else function.name


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


def name_flow_after(ctx: FileContext, anchor: ast.AST, name: str) -> Flow:
    """Where the value ``anchor`` (an ``if`` that assigns ``name``) leaves in ``name`` goes:
    every later read, and every read in a loop around ``anchor``."""
    flow = Flow()
    scope = ctx.provenance.scope_of(anchor)
    if scope.lookup(name) is not scope or not isinstance(scope.node, (*FUNCTIONS, ast.Module)):
        flow.unsafe = f"`{name}` is not a local of the function: other code may read it"
        return flow
    if type(scope.node) is ast.Module:
        # A script's top level: its own later reads are followed (one may need a
        # number), but other modules may import the name.
        flow.unsafe = f"`{name}` is a module-level name: other modules may import it"
    end = ctx.positions[anchor].end.line
    for read in reads_of(ctx, scope, name, nested=True):
        if read is None:
            flow.unsafe = flow.unsafe or f"`{name}` is read where fixitem cannot follow it"
            continue
        if ctx.below(read, anchor):
            continue
        if ctx.positions[read].start.line <= end and not _in_loop_with(ctx, read, anchor):
            continue
        _nested_read(ctx, scope, read, name, flow)
        _climb(ctx, read, flow, 1)
        if flow.blocking:
            break
    return flow


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
    from .signs import seen_value

    value = seen_value(ctx, operand) if type(operand) is ast.Name else None  # type: ignore[arg-type]
    read = _read_of(ctx, value) if value is not None else None
    return read[0] if read is not None and read[1] != "int" else None


def zero_dim_condition(ctx: FileContext, condition: Code, sites, values: list[ast.expr]) -> Code:
    """``condition`` with ``.reshape(())`` on each tensor it reads that is not plainly
    0-dim, when a selected value is a number or a 0-dim tensor: ``.item()`` accepts
    any one-element tensor, ``(1,)`` too, and a ``(1,)`` condition would make the
    selection ``(1,)`` where the value was 0-dim. (Selected tensors that are not
    plainly 0-dim are taken to have at least the condition's dimensions.)"""
    if all(ctx.kind(v) is Kind.TENSOR and not plainly_zero_dim(ctx, v) for v in values):
        return condition
    from .syncs import kept_reads

    kept = kept_reads(ctx, sites, [condition])  # ``idx.item()`` of ``probs[idx.item()] > 0.5`` stays a number
    targets: dict[ast.AST, None] = {}
    for s in sites:
        if s not in kept and not plainly_zero_dim(ctx, s.value):
            targets[s.value] = None
    if not targets:
        return condition
    # Inner ones first: a tensor read inside another one is reshaped in it too.
    from .tree import number_of

    reshaped: dict[ast.AST, gen.Expr_] = {}
    for target in sorted(targets, key=lambda n: number_of(n) or 0, reverse=True):
        inside = {k: v for k, v in reshaped.items() if ctx.below(k, target)}
        value = gen.substitute(target, inside, ctx) if inside else target
        reshaped[target] = gen.method_call(ctx, value, "reshape", [gen.Tuple([])])
    return gen.substitute(condition, reshaped, ctx)
