"""One pass over a module parsed by Python's own ``ast``: every node's parent, its
place in source order, where its subtree ends, and where it stands in the text.

``ast.parse`` is Python's own C parser: several times faster than any parser
written in Python, and its nodes are plain C-backed objects (hashed by
identity, compared by identity). The analysis reads this tree only; rewritten
code is produced as text edits over the source (:mod:`codemods.gen`), so the
tree never has to be printed back.

One pass (:class:`Index`) numbers the nodes in source order, records each
node's parent and where its subtree ends (a subtree is a run of numbers), and
files the nodes by type. Lines and columns are worked out only for the nodes
someone asks about, in characters (``ast`` counts columns in UTF-8 bytes).

The module-level lookups (``walk``, ``nodes_within``, ``children_of``,
``number_of``) answer for the index made or :meth:`Index.activate`-d last:
one file is analysed at a time per process.
"""

from __future__ import annotations

import ast
import bisect
from itertools import accumulate, repeat
from operator import add
import warnings
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cached_property

# Node types that carry no position and nothing to analyse: ``Load``/``Store``, operators.
# (CPython shares one instance of each between all trees, so they have no parent.)
_SHARED = (ast.expr_context, ast.operator, ast.unaryop, ast.cmpop, ast.boolop)
# Fields that never hold nodes: skipped without looking at their values.
_SCALAR_FIELDS = frozenset(
    {"ctx", "op", "ops", "id", "attr", "arg", "name", "n", "s", "kind", "type_comment", "conversion", "level",
     "module", "is_async", "simple", "tag", "asname", "rest"}
)
# Fields that hold nodes or not by the node's type: ``Constant.value`` is a Python value,
# ``Global.names`` strings, ``MatchClass.kwd_attrs`` strings.
_FIELDS_BY_TYPE = {ast.Constant: (), ast.Global: (), ast.Nonlocal: (), ast.MatchSingleton: (),
                   ast.MatchClass: ("cls", "patterns", "kwd_patterns")}
_FIELDS: dict[type, tuple[str, ...]] = {}

# id(node) -> its place in source order, for the file being analysed.
_number: dict[int, int] = {}
_order: list[ast.AST] = []
_stop: list[int] = []  # node number -> one past the number of its last descendant
_by_type: dict[type, list[int]] = {}  # node type -> numbers of the nodes of that type, ascending


def parse_module(source: str) -> ast.Module:
    """``ast.parse`` without the warnings Python prints for the code it parses (an
    invalid escape sequence such as ``"\\d"`` in the user's file is not fixitem's to report).
    Raises ``SyntaxError`` (``ValueError`` for a null byte) as ``ast.parse`` does."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return ast.parse(source)


def _fields(t: type) -> tuple[str, ...]:
    found = _FIELDS.get(t)
    if found is None:
        found = _FIELDS[t] = _FIELDS_BY_TYPE.get(t, tuple(f for f in t._fields if f not in _SCALAR_FIELDS))
    return found


def _in_source_order(node: ast.AST) -> list[ast.AST]:
    """The children of ``node`` in the order they stand in the text (``ast``'s field order
    differs for decorators, conditional expressions, dict displays, arguments and calls
    that mix positional and keyword arguments)."""
    t = type(node)
    special = _ORDER.get(t)
    if special is not None:
        return [c for c in special(node) if c is not None]
    kids: list[ast.AST] = []
    for field in _fields(t):
        value = getattr(node, field, None)
        if type(value) is list:
            kids.extend(item for item in value if item is not None and not type(item) is str)
        elif value is not None:
            kids.append(value)
    return kids


def _function_children(node):
    return [*node.decorator_list, node.args, node.returns, *node.body]


def _class_children(node):
    return [*node.decorator_list, *node.bases, *node.keywords, *node.body]


def _dict_children(node):
    kids = []
    for key, value in zip(node.keys, node.values):
        kids.append(key)
        kids.append(value)
    return kids


def _call_children(node):
    if node.args and node.keywords:
        return [node.func, *sorted([*node.args, *node.keywords], key=lambda n: (n.lineno, n.col_offset))]
    return [node.func, *node.args, *node.keywords]


def _arguments_children(node: ast.arguments):
    kids: list = []
    positional = [*node.posonlyargs, *node.args]
    defaults = [None] * (len(positional) - len(node.defaults)) + list(node.defaults)
    for arg, default in zip(positional, defaults):
        kids.append(arg)
        kids.append(default)
    kids.append(node.vararg)
    for arg, default in zip(node.kwonlyargs, node.kw_defaults):
        kids.append(arg)
        kids.append(default)
    kids.append(node.kwarg)
    return kids


_ORDER = {
    ast.FunctionDef: _function_children,
    ast.AsyncFunctionDef: _function_children,
    ast.ClassDef: _class_children,
    ast.IfExp: lambda n: [n.body, n.test, n.orelse],
    ast.Dict: _dict_children,
    ast.Call: _call_children,
    ast.arguments: _arguments_children,
}


@dataclass(frozen=True)
class Position:
    line: int  # 1-based
    column: int  # 0-based, in characters


@dataclass(frozen=True)
class Range:
    start: Position
    end: Position


class Text:
    """The source text: lines, and conversions between ``ast``'s (line, byte column)
    and character offsets."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.ascii = source.isascii()
        self._encoded: dict[int, bytes] = {}

    @cached_property
    def line_starts(self) -> list[int]:
        """The offset where each line starts (worked out when first asked: the analysis of a
        file with nothing to report never asks)."""
        source = self.source
        starts = [0]
        if "\r" in source:
            i, n = 0, len(source)
            while i < n:
                c = source[i]
                if c == "\n" or (c == "\r" and (i + 1 == n or source[i + 1] != "\n")):
                    starts.append(i + 1)
                i += 1
        else:  # one C-level split, then the running sum of the line lengths
            starts.extend(accumulate(map(add, map(len, source.split("\n")[:-1]), repeat(1))))
        return starts

    def offset(self, line: int, byte_column: int) -> int:
        """The character offset of ``ast``'s (1-based line, UTF-8 byte column)."""
        start = self.line_starts[line - 1]
        if self.ascii or byte_column == 0:
            return start + byte_column
        encoded = self._encoded.get(line)
        if encoded is None:
            end = self.line_starts[line] if line < len(self.line_starts) else len(self.source)
            encoded = self._encoded[line] = self.source[start:end].encode("utf-8", "surrogatepass")
        return start + len(encoded[:byte_column].decode("utf-8", "replace"))

    def position(self, offset: int) -> Position:
        line = bisect.bisect_right(self.line_starts, offset)
        return Position(line, offset - self.line_starts[line - 1])

    def line_text(self, line: int) -> str:
        """Line ``line`` (1-based) without its line ending."""
        start = self.line_starts[line - 1]
        end = self.line_starts[line] if line < len(self.line_starts) else len(self.source)
        return self.source[start:end].rstrip("\r\n")


def _how_children(t: type):
    """How a node of type ``t`` gives its children: a function (:data:`_ORDER`), the
    names of the fields that may hold nodes, or None for a leaf."""
    found = _HOW.get(t, _HOW)
    if found is _HOW:
        found = _HOW[t] = _ORDER.get(t) or _fields(t) or None
    return found


_HOW: dict[type, object] = {}


def _numbered(module: ast.Module) -> tuple[list[ast.AST], list[int], list[int], dict[type, list[int]]]:
    """The nodes of ``module`` in source order; each one's parent's number (-1 for the
    module), the number one past its subtree, and the numbers of each type's nodes.
    (The hottest loop of an analysis: it runs once per node. Recursion, which CPython
    3.11 runs without a C frame per call, costs less here than a stack of our own.)"""
    order: list[ast.AST] = []
    parent: list[int] = []
    stop: list[int] = []
    numbers_by_type: dict[type, list[int]] = {}
    add, add_parent, add_stop = order.append, parent.append, stop.append
    how_of = _HOW

    def visit(node: ast.AST, up: int) -> None:
        number = len(order)
        add(node)
        add_parent(up)
        add_stop(number + 1)
        t = node.__class__
        numbers = numbers_by_type.get(t)
        if numbers is None:
            numbers_by_type[t] = [number]
        else:
            numbers.append(number)
        how = how_of.get(t, how_of)
        if how is how_of:
            how = _how_children(t)
        if how is None:  # a leaf: ``Name``, ``Constant``, ``Pass``...
            return
        if how.__class__ is tuple:
            for field in how:  # type: ignore[attr-defined]
                value = getattr(node, field)
                if value.__class__ is list:
                    for kid in value:
                        if kid is not None and kid.__class__ is not str:
                            visit(kid, number)
                elif value is not None:
                    visit(value, number)
        else:
            for kid in how(node):  # type: ignore[operator]
                if kid is not None:
                    visit(kid, number)
        stop[number] = len(order)

    try:
        visit(module, -1)
    finally:
        # ``visit`` refers to itself through its closure: a reference cycle that would keep
        # the lists (and through them the tree) until the cyclic collector ran.
        del visit
    return order, parent, stop, numbers_by_type


def _numbered_with_a_stack(module: ast.Module) -> tuple[list[ast.AST], list[int], list[int], dict[type, list[int]]]:
    """:func:`_numbered` for trees nested too deep to recurse: depth-first with a stack of
    our own, children pushed in reverse so that they come out in source order (a negative
    entry closes the subtree of node ~entry)."""
    order: list[ast.AST] = []
    parent: list[int] = []
    stop: list[int] = []
    numbers_by_type: dict[type, list[int]] = {}
    stack: list = [(module, -1)]
    while stack:
        item = stack.pop()
        if item.__class__ is int:
            stop[~item] = len(order)
            continue
        node, up = item
        number = len(order)
        order.append(node)
        parent.append(up)
        numbers_by_type.setdefault(node.__class__, []).append(number)
        kids = _in_source_order(node)
        if not kids:
            stop.append(number + 1)
            continue
        stop.append(0)
        stack.append(~number)
        stack.extend((kid, number) for kid in reversed(kids))
    return order, parent, stop, numbers_by_type


class Index:
    """What one pass over ``module`` found: nodes in source order, parents, spans."""

    def __init__(self, module: ast.Module, source: str) -> None:
        try:
            order, parent, stop, numbers_by_type = _numbered(module)
        except RecursionError:  # nested deeper than Python's stack allows (``a + b + ...`` of thousands)
            order, parent, stop, numbers_by_type = _numbered_with_a_stack(module)
        self.order = order
        self.parent = parent
        self.stop = stop
        self.number: dict[int, int] = dict(zip(map(id, order), range(len(order))))
        self.parents = Parents(self.number, parent, order)
        self.numbers_by_type = numbers_by_type
        self.by_type = ByType(numbers_by_type, order)  # node type -> its nodes, in source order
        self.text = Text(source)
        self.positions = Positions(self.number, order, self.parents, self.text)
        self._names: dict[str, tuple[list[int], list[ast.Name]]] | None = None
        self.activate()

    def names_by_spelling(self) -> dict[str, tuple[list[int], list[ast.Name]]]:
        """Each name spelled in the file -> the numbers of its ``Name`` nodes, and the nodes,
        in source order (made when first asked for)."""
        found = self._names
        if found is None:
            found = self._names = {}
            order = self.order
            for number in self.numbers_by_type.get(ast.Name, ()):
                node = order[number]
                entry = found.get(node.id)  # type: ignore[attr-defined]
                if entry is None:
                    found[node.id] = ([number], [node])  # type: ignore[attr-defined,list-item]
                else:
                    entry[0].append(number)
                    entry[1].append(node)  # type: ignore[arg-type]
        return found

    def activate(self) -> None:
        """Make the module-level lookups answer for this index again."""
        global _number, _order, _stop, _by_type
        _number, _order, _stop = self.number, self.order, self.stop
        _by_type = self.numbers_by_type


class ByType(dict):
    """Node type -> the nodes of that type, in source order; each list made when first asked for."""

    def __init__(self, numbers_by_type: dict[type, list[int]], order: list[ast.AST]) -> None:
        super().__init__()
        self._numbers = numbers_by_type
        self._order = order

    def __missing__(self, t: type) -> list[ast.AST]:
        numbers = self._numbers.get(t)
        if numbers is None:
            return []
        order = self._order
        found = self[t] = [order[i] for i in numbers]
        return found

    def get(self, t: type, default=None):  # type: ignore[override]
        return self[t] if t in self._numbers else default


class Parents(Mapping):
    """Node -> its parent node (the module has none)."""

    def __init__(self, number: dict[int, int], parent: list[int], order: list[ast.AST]) -> None:
        # The index's tables themselves, not the index: no reference cycle, so that a file's
        # tree is freed as soon as its analysis is dropped (without the cyclic collector).
        self._number = number
        self._parent = parent
        self._order = order

    def get(self, node: ast.AST, default=None):  # type: ignore[override]
        number = self._number.get(id(node))
        if number is None:
            return default
        up = self._parent[number]
        return self._order[up] if up >= 0 else default

    def tables(self) -> tuple[dict[int, int], list[int], list[ast.AST]]:
        """id(node) -> number, each number's parent number (-1: none), nodes by number:
        for walks up that hold numbers rather than nodes."""
        return self._number, self._parent, self._order

    def __getitem__(self, node: ast.AST) -> ast.AST:
        found = self.get(node)
        if found is None:
            raise KeyError(node)
        return found

    def __contains__(self, node: object) -> bool:
        number = self._number.get(id(node))
        return number is not None and self._parent[number] >= 0

    def __iter__(self) -> Iterator[ast.AST]:
        return iter(self._order[1:])

    def __len__(self) -> int:
        return len(self._order) - 1


class Positions(Mapping):
    """Node -> :class:`Range` (1-based lines, 0-based character columns), worked out on
    first access. The span of a node is the span ``ast`` gives it, without the
    parentheses around it (as libcst's syntactic positions); nodes ``ast`` gives no
    position (``arguments``, ``comprehension``, ``withitem``) span their children, and
    a ``{...}`` of an f-string spans its braces."""

    def __init__(self, number: dict[int, int], order: list[ast.AST], parents: Parents, text: Text) -> None:
        self._number = number
        self._order = order
        self._parents = parents
        self._text = text
        self._spans: dict[int, tuple[int, int]] = {}

    def span(self, node: ast.AST) -> tuple[int, int]:
        """Start and end character offsets of ``node``."""
        key = id(node)
        found = self._spans.get(key)
        if found is None:
            found = self._spans[key] = self._span(node)
        return found

    def _span(self, node: ast.AST) -> tuple[int, int]:
        text = self._text
        t = type(node)
        if t is ast.FormattedValue:
            return _braces(text.source, self.span(node.value))  # type: ignore[attr-defined]
        if t is ast.Constant and self._in_fstring(node):
            return self.span(self._parents.get(node))  # ``ast`` gives the whole f-string
        if t is ast.Module:
            return 0, len(text.source)
        if t is ast.GeneratorExp:
            # ``ast`` gives a generator expression the parentheses around it (its own, or the
            # call's of ``sum(x for x in y)``); its span is what is inside them.
            start = text.offset(node.lineno, node.col_offset)  # type: ignore[attr-defined]
            end = text.offset(node.end_lineno, node.end_col_offset)  # type: ignore[attr-defined]
            source = text.source
            if source[start:start + 1] == "(" and source[end - 1:end] == ")":
                return _skip_space(source, start + 1, 1), _skip_space(source, end - 1, -1)
            return start, end
        if t is ast.Tuple:
            # ``ast`` counts a tuple's own parentheses in its span; libcst, and the rest of
            # fixitem, count them as parentheses around it (``ctx.span`` adds them back).
            start = text.offset(node.lineno, node.col_offset)  # type: ignore[attr-defined]
            end = text.offset(node.end_lineno, node.end_col_offset)  # type: ignore[attr-defined]
            if self._enclosing_pair(node, start, end):
                return _skip_space(text.source, start + 1, 1), _skip_space(text.source, end - 1, -1)
            return start, end
        lineno = getattr(node, "lineno", None)
        if lineno is not None and getattr(node, "end_lineno", None) is not None:
            return text.offset(lineno, node.col_offset), text.offset(node.end_lineno, node.end_col_offset)  # type: ignore[attr-defined]
        kids = _in_source_order(node)
        if not kids:
            up = self._parents.get(node)
            return self.span(up) if up is not None else (0, 0)
        first, last = self.span(kids[0]), self.span(kids[-1])
        start = first[0]
        if t is ast.comprehension:
            start = text.source.rfind("for", 0, start)
            if getattr(node, "is_async", 0):
                start = text.source.rfind("async", 0, start)
        return start, last[1]

    def _enclosing_pair(self, node: ast.AST, start: int, end: int) -> bool:
        """Are the first and last characters of ``start:end`` a ``(`` and the ``)`` that
        closes it (not ``(a), (b)``)? Strings inside are skipped by their spans."""
        source = self._text.source
        if source[start:start + 1] != "(" or source[end - 1:end] != ")":
            return False
        strings = sorted(self.span(n) for n in walk_subtree(node) if type(n) in (ast.Constant, ast.JoinedStr)
                         and isinstance(getattr(n, "value", ""), (str, bytes)) or type(n) is ast.JoinedStr)
        depth, i, k = 0, start, 0
        while i < end:
            while k < len(strings) and strings[k][1] <= i:
                k += 1
            if k < len(strings) and strings[k][0] <= i:
                i = strings[k][1]
                continue
            c = source[i]
            if c in "([{":
                depth += 1
            elif c in ")]}":
                depth -= 1
                if depth == 0:
                    return i == end - 1
            elif c == "#":
                newline = source.find("\n", i)
                i = end if newline < 0 else newline
                continue
            i += 1
        return False

    def _in_fstring(self, node: ast.AST) -> bool:
        """Is ``node`` a literal part of an f-string (``ast`` gives it the whole f-string's
        span)? A constant written as a field's expression (``f"{'-':>10s}"``) has its own."""
        return type(self._parents.get(node)) is ast.JoinedStr

    def __getitem__(self, node: ast.AST) -> Range:
        if id(node) not in self._number:
            raise KeyError(node)
        start, end = self.span(node)
        text = self._text
        return Range(text.position(start), text.position(end))

    def __contains__(self, node: object) -> bool:
        return id(node) in self._number

    def __iter__(self) -> Iterator[ast.AST]:
        return iter(self._order)

    def __len__(self) -> int:
        return len(self._order)

    def offset(self, node: ast.AST) -> int:
        """Where ``node`` starts, as a character offset: cheap, and orders nodes like positions."""
        return self.span(node)[0]


def _skip_space(source: str, i: int, step: int) -> int:
    """From ``i``, past whitespace (and comments, going forward) in direction ``step``."""
    if step > 0:
        n = len(source)
        while i < n:
            c = source[i]
            if c in " \t\f\r\n\\":
                i += 1
            elif c == "#":
                end = source.find("\n", i)
                i = n if end < 0 else end
            else:
                break
        return i
    while i > 0 and source[i - 1] in " \t\f\r\n":
        i -= 1
    return i


def _braces(source: str, inner: tuple[int, int]) -> tuple[int, int]:
    """The span of the ``{...}`` of an f-string around the expression spanning ``inner``."""
    start = source.rfind("{", 0, inner[0])
    depth, i, n = 0, inner[1], len(source)
    while i < n:
        c = source[i]
        if c in "([{":
            depth += 1
        elif c in ")]":
            depth = max(depth - 1, 0)  # a closing parenthesis of the expression's own
        elif c == "}":
            if depth == 0:
                return start, i + 1
            depth -= 1
        i += 1
    return start, inner[1]


@contextmanager
def activated(found: Index) -> Iterator[None]:
    """Answer for ``found`` inside the block (the analysis of another module of the project,
    asked from the middle of this one's), then for the index active before."""
    with keeping_active():
        found.activate()
        yield


@contextmanager
def keeping_active() -> Iterator[None]:
    """The index active before the block is active again after it (the block may index
    another file: a module of the project read in the middle of this file's analysis)."""
    before = (_number, _order, _stop, _by_type)
    try:
        yield
    finally:
        _set_active(*before)


def _set_active(number: dict[int, int], order: list[ast.AST], stop: list[int], by_type: dict[type, list[int]]) -> None:
    global _number, _order, _stop, _by_type
    _number, _order, _stop, _by_type = number, order, stop, by_type


def forget() -> None:
    """Let go of the index made last (the module-level lookups then answer for no file)."""
    global _number, _order, _stop, _by_type
    _number, _order, _stop, _by_type = {}, [], [], {}


def index(module: ast.Module, source: str) -> Index:
    """Record the parent, source-order place and span of every node of ``module``."""
    return Index(module, source)


def callee_name(func: ast.AST) -> str:
    """The last name a called expression spells: ``print`` of ``print(...)``, ``info`` of
    ``logger.info(...)``; "" for anything else (``fns[0](...)``)."""
    return func.attr if type(func) is ast.Attribute else func.id if type(func) is ast.Name else ""  # type: ignore[attr-defined]


def children_of(node: ast.AST) -> list[ast.AST]:
    """The children of ``node`` in source order."""
    return _in_source_order(node)


def tables() -> tuple[dict[int, int], list[ast.AST], list[int]]:
    """The active index's tables: id(node) -> number, nodes by number, subtree ends by
    number (for loops that walk numbers themselves, in the hottest code)."""
    return _number, _order, _stop


def number_of(node: ast.AST) -> int | None:
    """``node``'s place in source order, or None for a node of another tree."""
    return _number.get(id(node))


def subtree_stop(number: int) -> int:
    """One past the number of the last node below node ``number``."""
    return _stop[number]


def node_at(number: int) -> ast.AST:
    return _order[number]


def nodes_within(root: ast.AST, *types: type) -> list[ast.AST]:
    """The nodes of exactly these types in ``root``'s subtree (``root`` included), in source order."""
    number = _number.get(id(root))
    if number is None:
        return [n for n in _walk_unindexed(root) if type(n) in types]
    return _nodes_numbered(number, _stop[number], types)


def numbered_within(root: ast.AST, t: type) -> Iterator[tuple[int, ast.AST]]:
    """The nodes of type ``t`` in ``root``'s subtree with their source-order numbers, in order
    (none where ``root`` is not in the active index)."""
    number = _number.get(id(root))
    if number is None:
        return
    numbers = _by_type.get(t, ())
    for i in numbers[bisect.bisect_left(numbers, number):bisect.bisect_left(numbers, _stop[number])]:
        yield i, _order[i]


def nodes_in_body(body: list[ast.stmt], *types: type) -> list[ast.AST]:
    """The nodes of exactly these types in the statements ``body`` (a block: consecutive
    statements of one parent, such as a function's body), in source order."""
    if not body:
        return []
    first, last = _number.get(id(body[0])), _number.get(id(body[-1]))
    if first is None or last is None:
        return [n for stmt in body for n in nodes_within(stmt, *types)]
    return _nodes_numbered(first, _stop[last], types)


def _nodes_numbered(start: int, stop: int, types: tuple[type, ...]) -> list[ast.AST]:
    """The nodes of exactly these types numbered from ``start`` up to ``stop`` in the active
    index (a subtree, or a block of statements), in source order."""
    found: list[int] = []
    for t in types:
        numbers = _by_type.get(t, ())
        found.extend(numbers[bisect.bisect_left(numbers, start):bisect.bisect_left(numbers, stop)])
    if len(types) > 1:
        found.sort()
    return [_order[i] for i in found]


def walk_subtree(root: ast.AST) -> Iterator[ast.AST]:
    """``root`` and everything below it, whatever the active index."""
    return _walk_unindexed(root)


def walk(root: ast.AST) -> Iterable[ast.AST]:
    """``root`` and everything below it, in source order."""
    number = _number.get(id(root))
    if number is not None:  # a contiguous run of the source-order list
        return _order[number:_stop[number]]
    return _walk_unindexed(root)


def _walk_unindexed(root: ast.AST) -> Iterator[ast.AST]:
    stack = [root]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(reversed(_in_source_order(node)))
