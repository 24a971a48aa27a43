"""One pass over a parsed file: every node's children, parent and position.

libcst offers each of these separately, and each is slow on large files:
``CSTNode.children`` visits the node on every access, and
``PositionProvider`` runs a full code generation that builds a ``CodeRange``
for every node through generator-based context managers. Here a single code
generation pass, with a lean :class:`_IndexingState`, records the nodes in
source order, their parents and children, and the character offsets where
each starts and ends; offsets become line and column only for the nodes
someone asks about. The positions are the same as ``PositionProvider``'s
(tests compare them on real files).

``children_of`` answers from the record and falls back to libcst for nodes
built later (replacement code). One file is analysed at a time per process.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Iterator, Mapping

import libcst as cst
from libcst._nodes.base import CSTNode
from libcst._nodes.expression import _BaseParenthesizedNode
from libcst._nodes.internal import CodegenState
from libcst._position import CodePosition, CodeRange

from . import shortcuts

# id(node) -> its place in source order, for the file being analysed. Keyed by id: a
# libcst node's __hash__ is Python code, id() is not (the index keeps every node alive).
_number: dict[int, int] = {}
_order: list[cst.CSTNode] = []
_stop: list[int] = []  # node number -> one past the number of its last descendant
_by_type: dict[type, list[int]] = {}  # node type -> numbers of the nodes of that type, ascending
_child_tuples: dict[int, tuple[cst.CSTNode, ...]] = {}  # node number -> its children


# libcst's own methods, put back after each parse or code generation (saved once, so
# that two overlapping uses in different threads cannot leave the lean ones in place).
_VALIDATE = CSTNode.__post_init__
_PARENTHESIZE = _BaseParenthesizedNode._parenthesize


def _no_validation(self: CSTNode) -> None:
    pass


def parse_module(source: str) -> cst.Module:
    """``libcst.parse_module`` without validating each node as it is built.

    A node validates its fields when constructed (for nodes built by hand);
    the parser builds only valid nodes from valid source, and the checks cost
    about a tenth of the parse. Raises ``libcst.ParserSyntaxError`` as libcst does.
    """
    if not shortcuts.ENABLED:
        return cst.parse_module(source)
    CSTNode.__post_init__ = _no_validation  # type: ignore[method-assign]
    try:
        return cst.parse_module(source)
    finally:
        CSTNode.__post_init__ = _VALIDATE  # type: ignore[method-assign]


class _Parentheses:
    """``_BaseParenthesizedNode._parenthesize`` as a plain context manager: libcst's is a
    generator-based one, created for every expression generated, about a tenth of the
    time of code generation. Same tokens, same order."""

    __slots__ = ("node", "state", "inner")

    def __init__(self, node: _BaseParenthesizedNode, state: CodegenState) -> None:
        self.node = node
        self.state = state

    def __enter__(self) -> None:
        for lpar in self.node.lpar:
            lpar._codegen(self.state)
        self.inner = self.state.record_syntactic_position(self.node)
        self.inner.__enter__()

    def __exit__(self, kind, value, traceback) -> bool:
        suppressed = bool(self.inner.__exit__(kind, value, traceback))
        if kind is not None and not suppressed:
            return False
        for rpar in self.node.rpar:
            rpar._codegen(self.state)
        return suppressed


def _lean_parenthesize(self: _BaseParenthesizedNode, state: CodegenState) -> _Parentheses:
    return _Parentheses(self, state)


def _generate(module: cst.Module, state: CodegenState) -> None:
    """``module._codegen(state)``, with lean parentheses."""
    if not shortcuts.ENABLED:
        module._codegen(state)
        return
    _BaseParenthesizedNode._parenthesize = _lean_parenthesize  # type: ignore[method-assign,assignment]
    try:
        module._codegen(state)
    finally:
        _BaseParenthesizedNode._parenthesize = _PARENTHESIZE  # type: ignore[method-assign]


class _TextState(CodegenState):
    """Code generation of text alone: positions are not recorded (libcst's own state
    opens a generator-based context manager for each of them)."""

    def record_syntactic_position(self, node, *, start_node=None, end_node=None):  # type: ignore[override]
        return self

    def __enter__(self) -> None:
        pass

    def __exit__(self, *exc) -> None:
        pass


def module_code(module: cst.Module) -> str:
    """``module.code``, generated faster (see :class:`_Parentheses`, :class:`_TextState`)."""
    if not shortcuts.ENABLED:
        return module.code
    state = _TextState(default_indent=module.default_indent, default_newline=module.default_newline)
    _generate(module, state)
    return "".join(state.tokens)


class _IndexingState(CodegenState):
    """Code generation that keeps offsets, source order and parents instead of text positions.

    Nodes are numbered in the order they are generated (source order), and
    everything is kept in lists by number: hashing a libcst node runs Python
    code, so dictionaries keyed by nodes are built once, at the end.
    """

    def __init__(self, module: cst.Module) -> None:
        super().__init__(default_indent=module.default_indent, default_newline=module.default_newline)
        self.offset = 0
        self.popped = ""
        self.order: list[cst.CSTNode] = []
        self.parent: list[int] = []
        self.start: list[int] = []
        self.end: list[int] = []
        self.stop: list[int] = []
        self._open: list[int] = []
        self._syntactic: list[tuple] = []

    def add_indent_tokens(self) -> None:
        for token in self.indent_tokens:
            self.tokens.append(token)
            self.offset += len(token)

    def add_token(self, value: str) -> None:
        self.tokens.append(value)
        self.offset += len(value)

    def pop_trailing_newline(self) -> None:
        # The module's text loses its last newline; positions keep counting it
        # (as ``PositionProvider`` does), so lines are counted on the text with it.
        if self.tokens:
            self.popped = self.tokens.pop()

    def before_codegen(self, node: cst.CSTNode) -> None:
        number = len(self.order)
        self.order.append(node)
        self.parent.append(self._open[-1] if self._open else -1)
        self._open.append(number)
        self.start.append(self.offset)
        self.end.append(-1)
        self.stop.append(-1)

    def after_codegen(self, node: cst.CSTNode) -> None:
        number = self._open.pop()
        self.stop[number] = len(self.order)
        if self.end[number] < 0:  # else a syntactic position recorded inside wins
            self.end[number] = self.offset

    # ``with state.record_syntactic_position(node, start_node=..., end_node=...)``:
    # the state is its own context manager (no generator, no object per call).
    def record_syntactic_position(self, node, *, start_node=None, end_node=None):  # type: ignore[override]
        self._syntactic.append((self._open[-1], self.offset, start_node, end_node))
        return self

    def __enter__(self) -> None:
        pass

    def __exit__(self, *exc) -> None:
        number, start, start_node, end_node = self._syntactic.pop()
        end = self.offset
        if start_node is not None or end_node is not None:
            for kid in _child_numbers(self.stop, number, len(self.order)):
                if self.order[kid] is start_node:
                    start = self.start[kid]
                if self.order[kid] is end_node:
                    end = self.end[kid]
        self.start[number] = start
        self.end[number] = end


class Positions(Mapping):
    """Node -> ``CodeRange`` (as ``PositionProvider`` gives), computed on first access."""

    def __init__(self, order: list[cst.CSTNode], number: dict[int, int], start: list[int], end: list[int],
                 text: str) -> None:
        self._order = order
        self._number = number
        self._start = start
        self._end = end
        self._text = text
        self._line_starts: list[int] | None = None
        self._ranges: dict[int, CodeRange] = {}

    def _position(self, offset: int) -> CodePosition:
        if self._line_starts is None:
            starts = [0]
            text = self._text
            i = text.find("\n")
            while i >= 0:
                starts.append(i + 1)
                i = text.find("\n", i + 1)
            self._line_starts = starts
        line = bisect.bisect_right(self._line_starts, offset)
        return CodePosition(line, offset - self._line_starts[line - 1])

    def __getitem__(self, node: cst.CSTNode) -> CodeRange:
        number = self._number[id(node)]
        found = self._ranges.get(number)
        if found is None:
            found = CodeRange(self._position(self._start[number]), self._position(self._end[number]))
            self._ranges[number] = found
        return found

    def __contains__(self, node: object) -> bool:
        return id(node) in self._number

    def __iter__(self) -> Iterator[cst.CSTNode]:
        return iter(self._order)

    def __len__(self) -> int:
        return len(self._number)

    def offset(self, node: cst.CSTNode) -> int:
        """Where ``node`` starts, as a character offset: cheap, and orders nodes like positions."""
        return self._start[self._number[id(node)]]


class Index:
    """What one pass over ``module`` found: nodes in source order, parents, positions.

    The module-level lookups (``children_of``, ``walk``, ``nodes_within``) answer
    for the index made or :meth:`activate`-d last.
    """

    def __init__(self, module: cst.Module) -> None:
        state = _IndexingState(module)
        _generate(module, state)
        text = "".join(state.tokens) + state.popped
        # Lines are counted on the generated text, which is the source with
        # its own line endings; "\r\n" and a lone "\r" end lines too.
        if "\r" in text:
            text = text.replace("\r\n", " \n").replace("\r", "\n")
        order = state.order
        self.order = order
        self.stop = state.stop
        self.number: dict[int, int] = dict(zip(map(id, order), range(len(order))))
        self.parents = {node: order[p] for node, p in zip(order, state.parent) if p >= 0}
        self.positions = Positions(order, self.number, state.start, state.end, text)
        self.numbers_by_type: dict[type, list[int]] = {}
        self.by_type: dict[type, list[cst.CSTNode]] = {}  # node type -> its nodes, in source order
        for number, node in enumerate(order):
            numbers = self.numbers_by_type.get(type(node))
            if numbers is None:
                self.numbers_by_type[type(node)] = [number]
                self.by_type[type(node)] = [node]
            else:
                numbers.append(number)
                self.by_type[type(node)].append(node)
        self.child_tuples: dict[int, tuple[cst.CSTNode, ...]] = {}
        self.activate()

    def activate(self) -> None:
        """Make the module-level lookups answer for this index again."""
        global _number, _order, _stop, _by_type, _child_tuples
        _number, _order, _stop = self.number, self.order, self.stop
        _by_type, _child_tuples = self.numbers_by_type, self.child_tuples


def index(module: cst.Module) -> Index:
    """Record the children of every node of ``module``, with parents and positions."""
    return Index(module)


def _child_numbers(stop: list[int], number: int, end: int) -> Iterator[int]:
    """The children of node ``number`` among the nodes numbered below ``end``: in source
    order each child follows the whole subtree of the one before."""
    child = number + 1
    while child < end:
        yield child
        child = stop[child]


def children_of(node: cst.CSTNode) -> tuple[cst.CSTNode, ...]:
    number = _number.get(id(node))
    if number is None:
        return tuple(node.children)
    kids = _child_tuples.get(number)
    if kids is None:
        kids = _child_tuples[number] = tuple([_order[k] for k in _child_numbers(_stop, number, _stop[number])])
    return kids


def number_of(node: cst.CSTNode) -> int | None:
    """``node``'s place in source order, or None for a node built after indexing."""
    return _number.get(id(node))


def subtree_stop(number: int) -> int:
    """One past the number of the last node below node ``number``."""
    return _stop[number]


def node_at(number: int) -> cst.CSTNode:
    return _order[number]


def nodes_within(root: cst.CSTNode, *types: type) -> list[cst.CSTNode]:
    """The nodes of exactly these types in ``root``'s subtree (``root`` included), in source order."""
    number = _number.get(id(root))
    if number is None:
        return [n for n in _walk_unindexed(root) if type(n) in types]
    stop = _stop[number]
    found: list[int] = []
    for t in types:
        numbers = _by_type.get(t, ())
        found.extend(numbers[bisect.bisect_left(numbers, number):bisect.bisect_left(numbers, stop)])
    if len(types) > 1:
        found.sort()
    return [_order[i] for i in found]


def walk(root: cst.CSTNode) -> Iterable[cst.CSTNode]:
    """``root`` and everything below it, in source order."""
    number = _number.get(id(root))
    if number is not None:  # a contiguous run of the source-order list
        return _order[number:_stop[number]]
    return _walk_unindexed(root)


def _walk_unindexed(root: cst.CSTNode) -> Iterator[cst.CSTNode]:
    stack = [root]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(reversed(children_of(node)))


def method_call(value: cst.BaseExpression, name: str) -> cst.Call:
    """``value.name()``, with parentheses around ``value`` where the syntax needs them."""
    if not isinstance(value, (cst.Name, cst.Attribute, cst.Call, cst.Subscript)) and not value.lpar:
        value = value.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
    return cst.Call(func=cst.Attribute(value=value, attr=cst.Name(name)))
