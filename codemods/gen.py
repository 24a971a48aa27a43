"""The code a fix writes: new expressions and statements, built as small trees and
printed as text.

The analysis reads Python's own ``ast``; a fix replaces nodes of it. A
replacement is built from these classes, whose leaves may be nodes of the
file itself: such a node prints as its own text, sliced from the source
(comments, spacing and parentheses inside it kept as the user wrote them), and
only the new code around it is printed by fixitem, with the spacing black and
libcst use (``f(a, b)``, ``a + b``, ``x = v``).

Nothing is parenthesised behind the rule's back: a rule that puts an
expression where it needs parentheses says so (:class:`Paren`,
:func:`parenthesized`, :func:`method_call`), as it would by hand.

:func:`substitute` replaces nodes of the file inside a replacement, and
:func:`original_nodes` lists the file's nodes a replacement keeps, which is how
the engine tells which reads a fix keeps (a node under a :class:`Lambda` runs
later, not where it stands).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Union

if TYPE_CHECKING:
    from .model.context import FileContext

# One level of indentation in the code fixitem writes.
INDENT = "    "


class Node:
    """New code. ``kind`` names the ``ast`` class the printed code parses as (``"Call"``,
    ``"Name"``, ...), which is what decides where it needs parentheses."""

    kind = ""

    def render(self, ctx: FileContext, indent: str = "") -> str:
        raise NotImplementedError

    def children(self) -> list[Expr_]:
        return []

    def rebuilt(self, kids: list[Expr_]) -> Node:
        """This node with ``kids`` in place of :meth:`children`."""
        return self

    def code(self, ctx: FileContext) -> str:
        return self.render(ctx)


Expr_ = Union[Node, ast.AST, str]


def expr(value: Expr_) -> Node:
    """``value`` as new code: a node of the file becomes :class:`Source`, a string :class:`Raw`."""
    if isinstance(value, Node):
        return value
    if isinstance(value, ast.AST):
        return Source(value)
    return Raw(value)


def show(ctx: FileContext, value: Expr_, indent: str = "") -> str:
    return expr(value).render(ctx, indent)


class Source(Node):
    """A node of the file, printed as its own text (with the parentheses that belong to it,
    unless ``parentheses=False``)."""

    def __init__(self, node: ast.AST, parentheses: bool = True) -> None:
        self.node = node
        self.parentheses = parentheses

    @property
    def kind(self) -> str:  # type: ignore[override]
        return type(self.node).__name__

    def render(self, ctx: FileContext, indent: str = "") -> str:
        start, end = ctx.span(self.node) if self.parentheses else ctx.positions.span(self.node)
        return ctx.moved(self.node, start, end, indent)

    def parenthesized(self, ctx: FileContext) -> bool:
        """Does the node's own text start with parentheses of its own?"""
        return self.parentheses and ctx.span(self.node)[0] != ctx.positions.span(self.node)[0]


class Raw(Node):
    """Code given as text (``"torch"``, ``"deferred.record"``, ``"0.0"``)."""

    def __init__(self, text: str) -> None:
        self.text = text
        self._kind: str | None = None

    @property
    def kind(self) -> str:  # type: ignore[override]
        if self._kind is None:
            try:
                body = ast.parse(self.text.strip(), mode="eval").body
                self._kind = type(body).__name__
            except SyntaxError:
                self._kind = ""
        return self._kind

    def render(self, ctx: FileContext, indent: str = "") -> str:
        return self.text


def Name(value: str) -> Raw:  # noqa: N802 - reads like the node it builds
    return Raw(value)


class Paren(Node):
    """``(value)``."""

    kind = "Paren"

    def __init__(self, value: Expr_) -> None:
        self.value = expr(value)

    def render(self, ctx: FileContext, indent: str = "") -> str:
        return f"({self.value.render(ctx, indent)})"

    def children(self) -> list[Expr_]:
        return [self.value]

    def rebuilt(self, kids: list[Expr_]) -> Node:
        return Paren(kids[0])


class Attribute(Node):
    kind = "Attribute"

    def __init__(self, value: Expr_, attr: str) -> None:
        self.value = expr(value)
        self.attr = attr

    def render(self, ctx: FileContext, indent: str = "") -> str:
        return f"{self.value.render(ctx, indent)}.{self.attr}"

    def children(self) -> list[Expr_]:
        return [self.value]

    def rebuilt(self, kids: list[Expr_]) -> Node:
        return Attribute(kids[0], self.attr)


class Arg:
    """One argument of a :class:`Call`: ``value``, ``keyword=value``, ``*value`` or ``**value``."""

    def __init__(self, value: Expr_, keyword: str | None = None, star: str = "") -> None:
        self.value = expr(value)
        self.keyword = keyword
        self.star = star

    def render(self, ctx: FileContext, indent: str = "") -> str:
        text = self.value.render(ctx, indent)
        if self.keyword is not None:
            return f"{self.keyword}={text}"
        return f"{self.star}{text}"


class Call(Node):
    """``func(args)``; with ``one_per_line``, each argument on a line of its own, as black
    lays out a call that does not fit."""

    kind = "Call"

    def __init__(self, func: Expr_, args: Sequence[Arg | Expr_] = (), one_per_line: bool = False) -> None:
        self.func = expr(func)
        self.args = [a if isinstance(a, Arg) else Arg(a) for a in args]
        self.one_per_line = one_per_line

    def render(self, ctx: FileContext, indent: str = "") -> str:
        func = self.func.render(ctx, indent)
        if not self.one_per_line or not self.args:
            return f"{func}({', '.join(a.render(ctx, indent) for a in self.args)})"
        # Each argument on a line of its own, one level in; what continues an argument on
        # further lines keeps its place relative to the block (as libcst prints it).
        inner = indent + INDENT
        lines = "".join(f"\n{inner}{a.render(ctx, indent)}," for a in self.args)
        return f"{func}({lines}\n{indent})"

    def children(self) -> list[Expr_]:
        return [self.func, *(a.value for a in self.args)]

    def rebuilt(self, kids: list[Expr_]) -> Node:
        args = [Arg(value, a.keyword, a.star) for a, value in zip(self.args, kids[1:])]
        return Call(kids[0], args, self.one_per_line)

    def with_one_per_line(self) -> Call:
        return Call(self.func, self.args, True)


class Subscript(Node):
    kind = "Subscript"

    def __init__(self, value: Expr_, index: Expr_) -> None:
        self.value = expr(value)
        self.index = expr(index)

    def render(self, ctx: FileContext, indent: str = "") -> str:
        return f"{self.value.render(ctx, indent)}[{self.index.render(ctx, indent)}]"

    def children(self) -> list[Expr_]:
        return [self.value, self.index]

    def rebuilt(self, kids: list[Expr_]) -> Node:
        return Subscript(kids[0], kids[1])


class BinaryOperation(Node):
    """``left op right`` (``op``: ``"+"``, ``"*"``, ``"&"``, ...)."""

    kind = "BinOp"

    def __init__(self, left: Expr_, op: str, right: Expr_) -> None:
        self.left = expr(left)
        self.op = op
        self.right = expr(right)

    def render(self, ctx: FileContext, indent: str = "") -> str:
        return f"{self.left.render(ctx, indent)} {self.op} {self.right.render(ctx, indent)}"

    def children(self) -> list[Expr_]:
        return [self.left, self.right]

    def rebuilt(self, kids: list[Expr_]) -> Node:
        return BinaryOperation(kids[0], self.op, kids[1])


class BooleanOperation(BinaryOperation):
    """``left and right`` / ``left or right``."""

    kind = "BoolOp"

    def rebuilt(self, kids: list[Expr_]) -> Node:
        return BooleanOperation(kids[0], self.op, kids[1])


class UnaryOperation(Node):
    """``-x``, ``~x``, ``not x``."""

    kind = "UnaryOp"

    def __init__(self, op: str, operand: Expr_) -> None:
        self.op = op
        self.operand = expr(operand)

    def render(self, ctx: FileContext, indent: str = "") -> str:
        space = " " if self.op.isalpha() else ""
        return f"{self.op}{space}{self.operand.render(ctx, indent)}"

    def children(self) -> list[Expr_]:
        return [self.operand]

    def rebuilt(self, kids: list[Expr_]) -> Node:
        return UnaryOperation(self.op, kids[0])


class Comparison(Node):
    """``left op1 right1 op2 right2 ...`` (``op``: ``"<"``, ``"in"``, ``"is not"``, ...)."""

    kind = "Compare"

    def __init__(self, left: Expr_, comparisons: Sequence[tuple[str, Expr_]]) -> None:
        self.left = expr(left)
        self.comparisons = [(op, expr(right)) for op, right in comparisons]

    def render(self, ctx: FileContext, indent: str = "") -> str:
        text = self.left.render(ctx, indent)
        for op, right in self.comparisons:
            text += f" {op} {right.render(ctx, indent)}"
        return text

    def children(self) -> list[Expr_]:
        return [self.left, *(right for _, right in self.comparisons)]

    def rebuilt(self, kids: list[Expr_]) -> Node:
        return Comparison(kids[0], [(op, right) for (op, _), right in zip(self.comparisons, kids[1:])])


class IfExp(Node):
    """``body if test else orelse``."""

    kind = "IfExp"

    def __init__(self, test: Expr_, body: Expr_, orelse: Expr_) -> None:
        self.test = expr(test)
        self.body = expr(body)
        self.orelse = expr(orelse)

    def render(self, ctx: FileContext, indent: str = "") -> str:
        return f"{self.body.render(ctx, indent)} if {self.test.render(ctx, indent)} else {self.orelse.render(ctx, indent)}"

    def children(self) -> list[Expr_]:
        return [self.test, self.body, self.orelse]

    def rebuilt(self, kids: list[Expr_]) -> Node:
        return IfExp(kids[0], kids[1], kids[2])


class Lambda(Node):
    """``lambda params: body``: code that runs later, when the lambda is called."""

    kind = "Lambda"

    def __init__(self, params: Sequence[str], body: Expr_) -> None:
        self.params = list(params)
        self.body = expr(body)

    def render(self, ctx: FileContext, indent: str = "") -> str:
        params = f" {', '.join(self.params)}" if self.params else ""
        return f"lambda{params}: {self.body.render(ctx, indent)}"

    def children(self) -> list[Expr_]:
        return [self.body]

    def rebuilt(self, kids: list[Expr_]) -> Node:
        return Lambda(self.params, kids[0])


class Tuple(Node):
    """``(a, b)``, ``(a,)``, ``()``; without ``parentheses``, ``a, b``."""

    kind = "Tuple"

    def __init__(self, elements: Sequence[Expr_], parentheses: bool = True) -> None:
        self.elements = [expr(e) for e in elements]
        self.parentheses = parentheses

    def render(self, ctx: FileContext, indent: str = "") -> str:
        items = [e.render(ctx, indent) for e in self.elements]
        inner = f"{items[0]}," if len(items) == 1 else ", ".join(items)
        return f"({inner})" if self.parentheses else inner

    def children(self) -> list[Expr_]:
        return list(self.elements)

    def rebuilt(self, kids: list[Expr_]) -> Node:
        return Tuple(kids, self.parentheses)


class List(Node):
    kind = "List"

    def __init__(self, elements: Sequence[Expr_]) -> None:
        self.elements = [expr(e) for e in elements]

    def render(self, ctx: FileContext, indent: str = "") -> str:
        return f"[{', '.join(e.render(ctx, indent) for e in self.elements)}]"

    def children(self) -> list[Expr_]:
        return list(self.elements)

    def rebuilt(self, kids: list[Expr_]) -> Node:
        return List(kids)


class Starred(Node):
    """``*value`` in a display."""

    kind = "Starred"

    def __init__(self, value: Expr_) -> None:
        self.value = expr(value)

    def render(self, ctx: FileContext, indent: str = "") -> str:
        return f"*{self.value.render(ctx, indent)}"

    def children(self) -> list[Expr_]:
        return [self.value]

    def rebuilt(self, kids: list[Expr_]) -> Node:
        return Starred(kids[0])


class Splice(Node):
    """A node of the file printed as its own text, with some of the nodes inside it
    replaced (``{loss.item()}`` of an f-string becoming ``{loss}``)."""

    def __init__(self, node: ast.AST, replacements: dict[ast.AST, Expr_], parentheses: bool = True) -> None:
        self.node = node
        self.replacements = {k: expr(v) for k, v in replacements.items()}
        self.parentheses = parentheses

    @property
    def kind(self) -> str:  # type: ignore[override]
        return type(self.node).__name__

    def render(self, ctx: FileContext, indent: str = "") -> str:
        start, end = ctx.span(self.node) if self.parentheses else ctx.positions.span(self.node)
        pieces: list[str] = []
        at = start
        for node, new in sorted(self.replacements.items(), key=lambda kv: ctx.span(kv[0])[0]):
            s, e = ctx.span(node)
            if s < at:  # inside a replacement already made
                continue
            pieces.append(ctx.moved(self.node, at, s, indent))
            pieces.append(new.render(ctx, indent))
            at = e
        pieces.append(ctx.moved(self.node, at, end, indent))
        return "".join(pieces)

    def children(self) -> list[Expr_]:
        return list(self.replacements.values())

    def rebuilt(self, kids: list[Expr_]) -> Node:
        return Splice(self.node, dict(zip(self.replacements, kids)), self.parentheses)


def parenthesized(value: Expr_) -> Node:
    """``value`` in parentheses, unless it has them already."""
    node = expr(value)
    if isinstance(node, Paren) or (isinstance(node, Raw) and node.text.startswith("(") and node.kind not in ("Tuple", "GeneratorExp")):
        return node
    return Paren(node)


def strip_parentheses(value: Expr_) -> Node:
    """``value`` without the parentheses around it (libcst's ``with_changes(lpar=[], rpar=[])``)."""
    node = expr(value)
    while isinstance(node, Paren):
        node = node.value
    if isinstance(node, Source):
        return Source(node.node, parentheses=False)
    if isinstance(node, Splice):
        return Splice(node.node, node.replacements, parentheses=False)
    return node


ATOMS = frozenset({"Name", "Attribute", "Call", "Subscript", "Constant", "List", "Tuple", "Dict", "Set", "ListComp",
                   "SetComp", "DictComp", "GeneratorExp", "JoinedStr", "Paren"})


def needs_parentheses_for_attribute(ctx: FileContext, value: Expr_) -> bool:
    """Would ``value.attr`` read another attribute than ``value``'s (``a + b.sum()``)?"""
    node = expr(value)
    if isinstance(node, Source) and node.parenthesized(ctx):
        return False
    if isinstance(node, Source) and type(node.node) is ast.Constant and isinstance(node.node.value, (int, float)):
        return True  # ``1.real`` does not parse
    return node.kind not in ("Name", "Attribute", "Call", "Subscript")


def method_call(ctx: FileContext, value: Expr_, name: str, args: Sequence[Arg | Expr_] = ()) -> Call:
    """``value.name(args)``, with parentheses around ``value`` where the syntax needs them."""
    node = expr(value)
    if needs_parentheses_for_attribute(ctx, node):
        node = Paren(node)
    return Call(Attribute(node, name), args)


# -- statements ------------------------------------------------------------------------------


class Statement:
    """A new statement. ``comments``: comment lines above it (``"# note"``); ``trailing``: the
    text after it on its line (``"  # note"``)."""

    def __init__(self, comments: Sequence[str] = (), trailing: str = "") -> None:
        self.comments = list(comments)
        self.trailing = trailing

    def body(self, ctx: FileContext, indent: str) -> str:
        raise NotImplementedError

    def render(self, ctx: FileContext, indent: str) -> str:
        """The statement, its first line not indented (it goes where the old one started),
        its other lines indented by ``indent``."""
        head = "".join(f"{c}\n{indent}" for c in self.comments)
        return f"{head}{self.body(ctx, indent)}{self.trailing}"

    def with_comments(self, comments: Sequence[str]) -> Statement:
        self.comments = list(comments)
        return self

    def expressions(self) -> list[Expr_]:
        return []


class Assign(Statement):
    """``target = value`` (``targets``: several for ``a = b = value``)."""

    def __init__(self, targets: Sequence[Expr_] | Expr_, value: Expr_, comments: Sequence[str] = (),
                 trailing: str = "") -> None:
        super().__init__(comments, trailing)
        if isinstance(targets, (list, tuple)):
            self.targets = [expr(t) for t in targets]
        else:
            self.targets = [expr(targets)]  # type: ignore[arg-type]
        self.value = expr(value)

    def body(self, ctx: FileContext, indent: str) -> str:
        targets = "".join(f"{t.render(ctx, indent)} = " for t in self.targets)
        return f"{targets}{self.value.render(ctx, indent)}"

    def expressions(self) -> list[Expr_]:
        return [*self.targets, self.value]


class AugAssign(Statement):
    """``target op= value`` (``op``: ``"+"`` for ``+=``)."""

    def __init__(self, target: Expr_, op: str, value: Expr_, comments: Sequence[str] = (), trailing: str = "") -> None:
        super().__init__(comments, trailing)
        self.target = expr(target)
        self.op = op
        self.value = expr(value)

    def body(self, ctx: FileContext, indent: str) -> str:
        return f"{self.target.render(ctx, indent)} {self.op}= {self.value.render(ctx, indent)}"

    def expressions(self) -> list[Expr_]:
        return [self.target, self.value]


class ExprStatement(Statement):
    """An expression as a statement (a call made for its effect)."""

    def __init__(self, value: Expr_, comments: Sequence[str] = (), trailing: str = "") -> None:
        super().__init__(comments, trailing)
        self.value = expr(value)

    def body(self, ctx: FileContext, indent: str) -> str:
        return self.value.render(ctx, indent)

    def expressions(self) -> list[Expr_]:
        return [self.value]


class RawStatement(Statement):
    """A statement given as text (one line)."""

    def __init__(self, text: str, comments: Sequence[str] = (), trailing: str = "") -> None:
        super().__init__(comments, trailing)
        self.text = text

    def body(self, ctx: FileContext, indent: str) -> str:
        return self.text


class SourceStatement(Statement):
    """A statement of the file, kept as its own text (its lines after the first moved from
    their indentation to the new one), with some of the nodes inside it replaced."""

    def __init__(self, node: ast.AST, replacements: dict[ast.AST, Expr_] | None = None,
                 comments: Sequence[str] = (), trailing: str = "") -> None:
        super().__init__(comments, trailing)
        self.node = node
        self.replacements = {k: expr(v) for k, v in (replacements or {}).items()}

    def body(self, ctx: FileContext, indent: str) -> str:
        return Splice(self.node, self.replacements).render(ctx, indent)

    def expressions(self) -> list[Expr_]:
        return list(self.replacements.values())


class If(Statement):
    """``if test:`` with ``body`` (and ``orelse``) statements."""

    def __init__(self, test: Expr_, body: Sequence[Statement], orelse: Sequence[Statement] = (),
                 comments: Sequence[str] = (), trailing: str = "") -> None:
        super().__init__(comments, trailing)
        self.test = expr(test)
        self.body_statements = list(body)
        self.orelse = list(orelse)

    def body(self, ctx: FileContext, indent: str) -> str:
        inner = indent + INDENT
        text = f"if {self.test.render(ctx, indent)}:"
        text += "".join(f"\n{inner}{s.render(ctx, inner)}" for s in self.body_statements)
        if self.orelse:
            text += f"\n{indent}else:" + "".join(f"\n{inner}{s.render(ctx, inner)}" for s in self.orelse)
        return text

    def expressions(self) -> list[Expr_]:
        found: list[Expr_] = [self.test]
        for statement in (*self.body_statements, *self.orelse):
            found.extend(statement.expressions())
        return found


class Statements:
    """Several statements in place of one."""

    def __init__(self, statements: Sequence[Statement]) -> None:
        self.statements = list(statements)


class _Removal:
    """The statement is deleted (with its line, when it is alone on it)."""

    def __repr__(self) -> str:
        return "REMOVE"


REMOVE = _Removal()
Replacement = Union[Node, Statement, Statements, _Removal, ast.AST, str]


def render_statements(ctx: FileContext, statements: Sequence[Statement], indent: str) -> str:
    return f"\n{indent}".join(s.render(ctx, indent) for s in statements)


# -- walking new code -----------------------------------------------------------------------


def substitute(value: Expr_, replacements: dict[ast.AST, Expr_], ctx: FileContext) -> Node:
    """``value`` with the file's nodes of ``replacements`` replaced wherever they stand in it
    (also deep inside a node of the file it keeps as text)."""
    if not replacements:
        return expr(value)
    node = expr(value)
    if isinstance(node, Source):
        if node.node in replacements:
            return expr(replacements[node.node])
        inside = {k: v for k, v in replacements.items() if k is not node.node and ctx.below(k, node.node)}
        return Splice(node.node, inside, node.parentheses) if inside else node
    if isinstance(node, Splice):
        if node.node in replacements:
            return expr(replacements[node.node])
        merged = {k: substitute(v, replacements, ctx) for k, v in node.replacements.items()}
        for k, v in replacements.items():
            if k is not node.node and ctx.below(k, node.node) and not any(ctx.below(k, old) for old in node.replacements):
                merged[k] = expr(v)
        return Splice(node.node, merged, node.parentheses)
    kids = node.children()
    if not kids:
        return node
    return node.rebuilt([substitute(k, replacements, ctx) for k in kids])


def original_nodes(value: Replacement) -> Iterator[tuple[ast.AST, tuple[ast.AST, ...]]]:
    """The file's nodes that ``value`` prints as text, each with the nodes inside it that
    it replaces (and so does not keep). Code under a :class:`Lambda` is
    left out: it runs when the lambda is called, not where it stands."""
    stack: list[object] = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, Statements):
            stack.extend(item.statements)
        elif isinstance(item, Statement):
            stack.extend(item.expressions())
            if isinstance(item, SourceStatement):
                yield item.node, tuple(item.replacements)
        elif isinstance(item, Lambda):
            continue
        elif isinstance(item, Source):
            yield item.node, ()
        elif isinstance(item, Splice):
            yield item.node, tuple(item.replacements)
            stack.extend(item.replacements.values())
        elif isinstance(item, ast.AST):
            yield item, ()
        elif isinstance(item, Node):
            stack.extend(item.children())


def kept_nodes(ctx: FileContext, candidates: Sequence[ast.AST], replacements: Sequence[Replacement]) -> list[ast.AST]:
    """The nodes of ``candidates`` that ``replacements`` keep as they were (printed as part
    of a node of the file they keep, outside a lambda), in the order of ``candidates``."""
    kept: list[ast.AST] = []
    originals = [pair for r in replacements for pair in original_nodes(r)]
    for candidate in candidates:
        for node, replaced in originals:
            if ctx.below(candidate, node) and not any(ctx.below(candidate, r) for r in replaced):
                kept.append(candidate)
                break
    return kept
