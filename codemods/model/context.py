"""Everything rules need to know about one parsed file."""

from __future__ import annotations

import ast
import bisect
import io
import re
import tokenize
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from .provenance import Certainty, Kind, Provenance
from .suppression import Suppressions
from .traced import traced_functions
from .tree import (
    Index,
    Parents,
    Positions,
    activated,
    index,
    number_of,
    parse_module,
    subtree_stop,
    walk,
)

COMPILE_CHECKS = frozenset(
    {"is_compiling", "is_dynamo_compiling", "is_tracing", "is_scripting", "is_exporting", "is_fx_tracing"}
)
DISPLAY_METHODS = frozenset({"__repr__", "__str__", "__format__", "extra_repr"})
FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)
# Statements with a body: their header ends with ``:``.
COMPOUND = (ast.If, ast.For, ast.AsyncFor, ast.While, ast.With, ast.AsyncWith, ast.Try, ast.FunctionDef,
            ast.AsyncFunctionDef, ast.ClassDef, ast.Match) + ((ast.TryStar,) if hasattr(ast, "TryStar") else ())
T = TypeVar("T")
_COMMENT_LINE = re.compile(r"^[ \t\f]*(#.*)$")


# A list field this long (a block of statements) is searched through a set made once.
_SHORT_LIST = 16


@dataclass
class FileContext:
    path: Path
    source: str
    module: ast.Module
    positions: Positions
    parents: Parents
    by_type: dict[type, list[ast.AST]]
    provenance: Provenance
    traced: set[ast.AST]
    suppressions: Suppressions
    flush_every: int | None = None  # ``apply --flush-every N`` for the deferred-logging runtime
    tree_index: Index | None = field(default=None, repr=False)
    line_length: int = 88  # the project's (ruff's or black's): rewritten lines are wrapped beyond it
    # Indexes of this file built on first use (see :meth:`memo`).
    _memo: dict[object, object] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def build(cls, path: Path, source: str, flush_every: int | None = None,
              module: ast.Module | None = None, external: object | None = None,
              traced_roots: tuple[str, ...] = ()) -> FileContext:
        """Parse ``source`` (unless ``module`` is its parse already); raises ``SyntaxError``
        (or ``ValueError``) when it does not parse. ``external``: what the file may ask
        about the other modules of its project (:class:`codemods.model.project.External`);
        ``traced_roots``: functions (``"f"``, ``"Class.method"``) that traced code of other
        modules calls."""
        if module is None:
            module = parse_module(source)
        found = index(module, source)
        parents = found.parents
        provenance = Provenance(module, parents, external, names_by_spelling=found.names_by_spelling)
        traced = traced_functions(module, provenance.imports, parents, traced_roots)
        return cls(path, source, module, found.positions, parents, found.by_type, provenance, traced,
                   Suppressions(source), flush_every, found)

    def activate(self) -> None:
        """Analyse this file again after another one was parsed in this process."""
        if self.tree_index is not None:
            self.tree_index.activate()

    def asked(self) -> AbstractContextManager[None]:
        """A block that asks this file's analysis from another's (a module of the project):
        the module-level lookups of the tree answer for this file inside it."""
        return activated(self.tree_index) if self.tree_index is not None else nullcontext()

    # -- navigation ---------------------------------------------------------------------------

    def nodes(self, *types: type) -> list[ast.AST]:
        if len(types) == 1:
            return self.by_type.get(types[0], [])
        found = [n for t in types for n in self.by_type.get(t, [])]
        found.sort(key=number_of)  # type: ignore[arg-type,return-value]
        return found

    def ancestors(self, node: ast.AST) -> Iterator[ast.AST]:
        current = self.parents.get(node)
        while current is not None:
            yield current
            current = self.parents.get(current)

    def field_of(self, node: ast.AST) -> str | None:
        """The field of its parent that holds ``node`` (``"body"``, ``"orelse"``, ``"test"``...)."""
        parent = self.parents.get(node)
        if parent is None:
            return None
        for name in parent._fields:
            value = getattr(parent, name, None)
            if value is node:
                return name
            if type(value) is list:
                if len(value) <= _SHORT_LIST:
                    if any(item is node for item in value):
                        return name
                elif id(node) in self.memo(("field", id(parent), name), lambda value=value: {id(v) for v in value}):
                    return name  # a long block: looked up, not searched (a function of a thousand statements)
        return None

    def memo(self, key: object, build: Callable[[], T]) -> T:
        """``build()``, made once for this file under ``key``: the indexes that answer a
        question per site (which names spell ``x`` in this function, which sites lie below
        this test) without a pass over the whole file for each site."""
        try:
            return self._memo[key]  # type: ignore[return-value]
        except KeyError:
            found = self._memo[key] = build()
            return found

    def bindings_by_place(self, scope, name: str) -> tuple[list[int], list[tuple[str, object]], list[tuple[str, object]]]:
        """The bindings of ``name`` in ``scope`` (a :class:`~.provenance.Scope`) in source
        order: their places (character offsets; a parameter at -1, before every statement of
        its function), the bindings in that order (those of one place as ``scope.bindings``
        lists them), and the bindings of no known place. Made once per name, so that the
        bindings before or between statements are found by bisection, not by a pass over
        all of them for each question (a long function rebinds a name in every ``if``)."""
        def build() -> tuple[list[int], list[tuple[str, object]], list[tuple[str, object]]]:
            placed: list[tuple[int, tuple[str, object]]] = []
            unplaced: list[tuple[str, object]] = []
            for how, binding in scope.bindings.get(name, []):
                if how == "param" and type(binding) is ast.arg:
                    placed.append((-1, (how, binding)))
                elif binding is not None and binding in self.positions:
                    placed.append((self.positions.offset(binding), (how, binding)))  # type: ignore[arg-type]
                else:
                    unplaced.append((how, binding))
            placed.sort(key=lambda p: p[0])
            return [place for place, _ in placed], [binding for _, binding in placed], unplaced

        return self.memo(("bindings by place", id(scope), name), build)

    def kept(self, key: object) -> object | None:
        """What :meth:`keep` (or :meth:`memo`) kept under ``key``, None if nothing: for an
        answer whose making asks for itself (a name's bindings that read the name)."""
        return self._memo.get(key)

    def keep(self, key: object, value: object) -> None:
        self._memo[key] = value

    def sites_below(self, sites: Sequence, root: ast.AST) -> list:
        """The sync sites of ``sites`` whose node is ``root`` or lies below it, in the order of
        ``sites``. A subtree is a run of source-order numbers: this is a search in the sites
        sorted by number (sorted once per list), not a walk up from every site for each root."""
        number = number_of(root)
        if number is None:
            return [s for s in sites if s.node is root]

        def by_number() -> tuple[Sequence, int, list[int], list[int]]:
            numbered = sorted((n, k) for k, n in enumerate(number_of(s.node) for s in sites) if n is not None)
            return sites, len(sites), [n for n, _ in numbered], [k for _, k in numbered]

        key = ("sites", id(sites))
        found = self.memo(key, by_number)
        if found[0] is not sites or found[1] != len(sites):  # another list, or this one grew
            found = self._memo[key] = by_number()
        _, _, numbers, places = found
        lo = bisect.bisect_left(numbers, number)
        hi = bisect.bisect_left(numbers, subtree_stop(number), lo)
        return [sites[k] for k in sorted(places[lo:hi])]

    def names(self, value: str, within: ast.AST | None = None) -> list[ast.Name]:
        """The ``Name`` nodes spelled ``value`` (at or below ``within``), in source order."""
        def by_value() -> dict[str, tuple[list[int], list[ast.Name]]]:
            if self.tree_index is not None:
                return self.tree_index.names_by_spelling()
            found: dict[str, tuple[list[int], list[ast.Name]]] = {}
            for node in self.nodes(ast.Name):
                numbers, nodes = found.setdefault(node.id, ([], []))  # type: ignore[attr-defined]
                numbers.append(number_of(node))  # type: ignore[arg-type]
                nodes.append(node)  # type: ignore[arg-type]
            return found

        numbers, nodes = self.memo("names", by_value).get(value, ([], []))
        if within is None:
            return list(nodes)
        number = number_of(within)
        if number is None:
            return [n for n in walk(within) if type(n) is ast.Name and n.id == value]  # type: ignore[attr-defined]
        lo = bisect.bisect_left(numbers, number)
        return nodes[lo:bisect.bisect_left(numbers, subtree_stop(number), lo)]

    def augmented_names(self, value: str) -> list[ast.Name]:
        """The targets of ``value += ...`` (and the other augmented assignments), in source order."""
        def by_value() -> dict[str, list[ast.Name]]:
            found: dict[str, list[ast.Name]] = {}
            for node in self.nodes(ast.AugAssign):
                target = node.target  # type: ignore[attr-defined]
                if type(target) is ast.Name:
                    found.setdefault(target.id, []).append(target)
            return found

        return self.memo("augmented names", by_value).get(value, [])

    def below(self, node: ast.AST, root: ast.AST) -> bool:
        """Is ``node`` ``root`` or inside it?"""
        number, top = number_of(node), number_of(root)
        if number is None or top is None:
            return node is root or any(parent is root for parent in self.ancestors(node))
        return top <= number < subtree_stop(top)

    def enclosing_function(self, node: ast.AST) -> ast.FunctionDef | None:
        for parent in self.ancestors(node):
            if isinstance(parent, FUNCTIONS):
                return parent  # type: ignore[return-value]
        return None

    def enclosing_statement(self, node: ast.AST) -> ast.stmt | None:
        """The statement ``node`` is part of (``node`` itself when it is one)."""
        current: ast.AST | None = node
        while current is not None and not isinstance(current, ast.stmt):
            current = self.parents.get(current)
        return current  # type: ignore[return-value]

    def in_traced_code(self, node: ast.AST) -> bool:
        func = self.enclosing_function(node)
        return func is not None and func in self.traced and not self.compile_guard(node)

    def compile_guard(self, node: ast.AST) -> ast.If | None:
        """The enclosing ``if`` that tests ``torch.compiler.is_compiling()`` (or
        ``torch.jit.is_tracing()``, ...): code under it already keeps out of, or
        is written for, compiled regions."""
        child = node
        for parent in self.ancestors(node):
            in_branch = type(parent) is ast.If and child is not parent.test  # type: ignore[attr-defined]
            child = parent
            if in_branch:
                for sub in walk(parent.test):  # type: ignore[attr-defined]
                    if type(sub) is ast.Call:
                        func = sub.func  # type: ignore[attr-defined]
                        name = func.attr if type(func) is ast.Attribute else getattr(func, "id", "")
                        if name in COMPILE_CHECKS:
                            return parent  # type: ignore[return-value]
        return None

    def in_display_method(self, node: ast.AST) -> bool:
        """Inside ``__repr__`` / ``__str__`` / ``extra_repr``: code that exists to show values."""
        func = self.enclosing_function(node)
        return func is not None and func.name in DISPLAY_METHODS

    # -- the text -----------------------------------------------------------------------------

    def position(self, node: ast.AST) -> tuple[int, int]:
        """1-based line and column of ``node``."""
        start = self.positions[node].start
        return start.line, start.column + 1

    def span(self, node: ast.AST) -> tuple[int, int]:
        """Start and end character offsets of ``node``, with the parentheses around an
        expression that belong to it (``(a + b)`` in ``(a + b).sum()``): the text a
        replacement of ``node`` replaces."""
        start, end = self.positions.span(node)
        if not isinstance(node, ast.expr):
            return start, end
        return self.memo(("span", id(node)), lambda: self._with_parentheses(node, start, end))

    def parenthesized(self, node: ast.AST) -> bool:
        """Is the expression ``node`` written in parentheses of its own (libcst's ``node.lpar``)?"""
        return isinstance(node, ast.expr) and self.span(node)[0] != self.positions.span(node)[0]

    def code(self, node: ast.AST) -> str:
        """The source text of ``node`` (an expression with its own parentheses). Lines after
        the first that continue it inside brackets lose the indentation of the block it
        stands in, as libcst prints a node alone: the text it has wherever it is put."""
        start, end = self.span(node)
        text = self.source[start:end]
        if "\n" not in text:
            return text
        return self.memo(("code", id(node)), lambda: self.moved(node, start, end, ""))

    def moved(self, node: ast.AST, start: int, end: int, indent: str) -> str:
        """``source[start:end]`` (part of the text of ``node``) for a place indented by
        ``indent``: its lines that continue an expression inside brackets, and start with
        the indentation of the block ``node`` stands in, get ``indent`` instead. Lines inside
        a string, and after a ``\\``, are the string's and the backslash's: kept."""
        text = self.source[start:end]
        if "\n" not in text:
            return text
        statement = self.enclosing_statement(node)
        block = self.indent(statement) if statement is not None else ""
        if block == indent:
            return text
        lines = text.split("\n")
        offset = start
        for i, line in enumerate(lines):
            if i:
                previous = lines[i - 1].rstrip("\r")
                if line.startswith(block) and not previous.endswith("\\") and not self._in_string(node, offset):
                    lines[i] = indent + line[len(block):]
            offset += len(line) + 1
        return "\n".join(lines)

    def _in_string(self, node: ast.AST, offset: int) -> bool:
        """Is ``offset`` inside a string token of ``node``'s text (a line of a multi-line string)?"""
        for found in self.memo(("strings", id(node)), lambda: self._string_tokens(node)):
            if found[0] < offset < found[1]:
                return True
        return False

    def _string_tokens(self, node: ast.AST) -> list[tuple[int, int]]:
        """The spans of the string tokens of ``node``'s text that run over several lines."""
        spans: list[tuple[int, int]] = []
        for sub in walk(node):
            if type(sub) is ast.JoinedStr or (type(sub) is ast.Constant and isinstance(sub.value, (str, bytes))):  # type: ignore[attr-defined]
                if type(self.parents.get(sub)) in (ast.JoinedStr, ast.FormattedValue):
                    continue
                start, end = self.positions.span(sub)
                text = self.source[start:end]
                if "\n" not in text:
                    continue
                spans.extend(_multiline_strings(text, start))
        return spans

    def _with_parentheses(self, node: ast.AST, start: int, end: int) -> tuple[int, int]:
        source = self.source
        holder = self.parents.get(node)
        while holder is not None and getattr(holder, "end_lineno", None) is None and type(holder) is not ast.Module:
            holder = self.parents.get(holder)  # ``comprehension``, ``withitem``, ``arguments``: no position
        if holder is None:
            return start, end
        low, high = self.positions.span(holder)
        call_paren = self._call_parenthesis(holder)
        while True:
            i = _skip_back(source, start)
            j = _skip_forward(source, end)
            if (i - 1 >= low and j + 1 <= high and source[i - 1:i] == "(" and source[j:j + 1] == ")"
                    and i - 1 != call_paren):
                start, end = i - 1, j + 1
            else:
                return start, end

    def _call_parenthesis(self, holder: ast.AST) -> int:
        """Where the ``(`` of a call's (or a class's) own argument list stands, or -1."""
        if type(holder) is ast.Call:
            # After the function's text and the closing parentheses of its own.
            i = self.positions.span(holder.func)[1]  # type: ignore[attr-defined]
            source = self.source
            while True:
                i = _skip_forward(source, i)
                if source[i:i + 1] != ")":
                    return i
                i += 1
        if type(holder) is ast.ClassDef:
            return self.source.find("(", self.positions.span(holder)[0])
        return -1

    def line(self, number: int) -> str:
        """Line ``number`` (1-based) of the file, without its line ending."""
        assert self.tree_index is not None
        return self.tree_index.text.line_text(number)

    def indent(self, statement: ast.AST) -> str:
        """The indentation of the line ``statement`` starts on."""
        line = self.line(self.positions[statement].start.line)
        return line[:len(line) - len(line.lstrip(" \t\f"))]

    def trailing_comment(self, statement: ast.AST) -> str | None:
        """The comment after ``statement`` on its last line (``x = 1  # note``), when nothing
        else follows it there; for a statement with a body, the comment of its last line."""
        end = self.positions[statement].end
        rest = self.line(end.line)[end.column:]
        match = _COMMENT_LINE.match(rest)
        return match.group(1).rstrip() if match else None

    def header_comment(self, node: ast.AST) -> str | None:
        """The comment at the end of a compound statement's header (``if x:  # note``)."""
        header = self.header_end(node)
        if header is None:
            return None
        line, column = header
        match = _COMMENT_LINE.match(self.line(line)[column:])
        return match.group(1).rstrip() if match else None

    def header_end(self, node: ast.AST) -> tuple[int, int] | None:
        """(line, column) just after the ``:`` that ends ``node``'s header."""
        body = getattr(node, "body", None)
        if not isinstance(node, COMPOUND) or not body:
            return None
        first = self.positions.span(body[0])[0]
        colon = self._colon_before(first)
        if colon < 0:
            return None
        position = self.tree_index.text.position(colon + 1)  # type: ignore[union-attr]
        return position.line, position.column

    def _colon_before(self, offset: int) -> int:
        """The ``:`` that ends the header whose body starts at ``offset``: the last code
        character before it, leaving out comments and blank lines."""
        source = self.source
        i = offset
        while i > 0:
            i = _skip_back(source, i)
            line_start = source.rfind("\n", 0, i) + 1
            text = source[line_start:i]
            hash_at = _comment_start(text)
            if hash_at >= 0:  # the line ends with a comment: look before it
                i = line_start + hash_at
                continue
            return i - 1 if source[i - 1:i] == ":" else -1
        return -1

    def else_line(self, node: ast.AST) -> int | None:
        """The line of the ``else:`` of an ``if`` / ``for`` / ``while`` / ``try`` (None when it has
        none, or has ``elif``)."""
        orelse = getattr(node, "orelse", None)
        if not orelse:
            return None
        if type(node) is ast.If and len(orelse) == 1 and type(orelse[0]) is ast.If:
            first = self.positions[orelse[0]].start
            if self.line(first.line)[first.column:].startswith("elif"):
                return None
        colon = self._colon_before(self.positions.span(orelse[0])[0])
        if colon < 0:
            return None
        return self.tree_index.text.position(colon).line  # type: ignore[union-attr]

    def else_comments(self, node: ast.AST) -> list[str]:
        """The comments of an ``if``'s ``else:`` line and of the lines just above it that are
        indented as the ``if`` (libcst's ``Else.leading_lines`` and header comment)."""
        line = self.else_line(node)
        if line is None:
            return []
        found = self._comments_above(line, len(self.indent(node)))
        match = _COMMENT_LINE.match(self.line(line)[self.line(line).index(":") + 1:]) if ":" in self.line(line) else None
        if match:
            found.append(match.group(1).rstrip())
        return found

    def leading_lines(self, statement: ast.AST) -> list[int]:
        """The blank and comment lines just above the compound ``statement`` that libcst gave it
        (its ``leading_lines``): those after the statement before it (after the last comment
        indented deeper, which the block before it owned) or after its block's header."""
        start = self.positions[statement].start.line
        parent = self.parents.get(statement)
        field_name = self.field_of(statement)
        block = getattr(parent, field_name, None) if parent is not None and field_name else None
        if not isinstance(block, list):
            return []
        index = next(i for i, s in enumerate(block) if s is statement)
        if index > 0:
            before = block[index - 1]
            first = self.positions[before].end.line + 1
            if isinstance(before, COMPOUND):
                depth = len(self.indent(statement))
                for number in range(first, start):
                    text = self.line(number)
                    if text.lstrip().startswith("#") and len(text) - len(text.lstrip()) > depth:
                        first = number + 1
        elif type(parent) is ast.Module:
            first = 1
        elif field_name == "body":
            header = self.header_end(parent)  # type: ignore[arg-type]
            if header is None:
                return []
            first = header[0] + 1
        elif field_name == "orelse":
            line = self.else_line(parent)  # type: ignore[arg-type]
            if line is None:
                return []  # an ``elif``
            first = line + 1
        else:
            return []
        return list(range(first, start))

    def leading_comments(self, statement: ast.AST) -> list[str]:
        """The comment lines just above ``statement`` (blank lines between them allowed), not
        indented deeper than it: those of the block before it belong to that block."""
        start = self.positions[statement].start
        return self._comments_above(start.line, start.column)

    def _comments_above(self, line: int, column: int) -> list[str]:
        found: list[str] = []
        number = line - 1
        while number >= 1:
            text = self.line(number)
            if not text.strip():
                number -= 1
                continue
            match = _COMMENT_LINE.match(text)
            if match is None or len(text) - len(text.lstrip()) > column:
                break
            found.append(match.group(1).rstrip())
            number -= 1
        found.reverse()
        return found

    # -- provenance ---------------------------------------------------------------------------

    def kind(self, expr: ast.AST) -> Kind:
        return self.provenance.kind(expr)

    def is_tensor(self, expr: ast.AST) -> bool:
        return self.provenance.is_tensor(expr)

    def certainty(self, expr: ast.AST) -> Certainty:
        """:attr:`Certainty.TENSOR` where the code proves ``expr`` is a tensor (what a
        rewrite needs), :attr:`Certainty.POSSIBLY` where only a heuristic or nothing
        says so (a report then says "if `x` is a tensor"), :attr:`Certainty.NOT_TENSOR`."""
        return self.provenance.certainty(expr)

    def certainly_tensor(self, expr: ast.AST) -> bool:
        return self.provenance.certainty(expr) is Certainty.TENSOR

    def on_cpu(self, expr: ast.AST) -> bool:
        """Does the tensor ``expr`` certainly live in host memory? Reading it is no
        device sync (but still a graph break in traced code)."""
        return self.provenance.on_cpu(expr)

    def runtime_alias(self) -> str:
        """The name rewritten code calls ``fixitem.runtime`` by: ``deferred``, unless
        the file binds that name to something else anywhere (a parameter, a
        variable), then ``fixitem_deferred`` (or ``fixitem_deferred_1``, ...)."""
        name, n = "deferred", 0  # a name the file imports ``fixitem.runtime`` as is free (a second apply)
        while not self._runtime_name_free(name):
            name = "fixitem_deferred" if n == 0 else f"fixitem_deferred_{n}"
            n += 1
        return name

    def _runtime_name_free(self, name: str) -> bool:
        """No scope binds ``name`` other than by importing ``fixitem.runtime``."""
        ours = self.provenance.imports.aliases.get(name) == "fixitem.runtime"
        return all(how == "import" and ours for how in self.memo("binding kinds", self._binding_kinds).get(name, ()))

    def _binding_kinds(self) -> dict[str, set[str]]:
        """Each name bound anywhere in the file, and how its scopes bind it."""
        found: dict[str, set[str]] = {}
        for scope in self.provenance.scopes.values():
            for name, bindings in scope.bindings.items():
                found.setdefault(name, set()).update(how for how, _ in bindings)
        return found

    def runtime_imports(self) -> tuple[str, ...]:
        """What code using ``fixitem.runtime`` needs at the top of the file."""
        alias = self.runtime_alias()
        imports = (f"from fixitem import runtime as {alias}",)
        if self.flush_every is not None:
            imports += (f"{alias}.configure(flush_every={self.flush_every})",)
        return imports

    def torch_name(self) -> str:
        """How this file spells ``torch`` (``import torch as th`` gives ``th``)."""
        return self.provenance.imports.torch_alias() or "torch"


def _multiline_strings(text: str, base: int) -> list[tuple[int, int]]:
    """The spans (offsets from ``base``) of the string tokens of ``text`` that hold a line break."""
    starts = [0]
    for line in text.split("\n"):
        starts.append(starts[-1] + len(line) + 1)
    found: list[tuple[int, int]] = []
    try:
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            if token.type == tokenize.STRING and token.start[0] != token.end[0]:
                found.append((base + starts[token.start[0] - 1] + token.start[1],
                              base + starts[token.end[0] - 1] + token.end[1]))
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return [(base, base + len(text))]
    return found


def _skip_back(source: str, i: int) -> int:
    """The offset just after the last character before ``i`` that is not whitespace or a
    line continuation."""
    while i > 0:
        c = source[i - 1]
        if c in " \t\f\r\n":
            i -= 1
        elif c == "\\" and i < len(source) and source[i] in "\r\n":
            i -= 1
        else:
            return i
    return i


def _skip_forward(source: str, i: int) -> int:
    """The offset of the first character at or after ``i`` that is not whitespace, a line
    continuation or a comment."""
    n = len(source)
    while i < n:
        c = source[i]
        if c in " \t\f\r\n":
            i += 1
        elif c == "\\" and i + 1 < n and source[i + 1] in "\r\n":
            i += 1
        elif c == "#":
            end = source.find("\n", i)
            i = n if end < 0 else end
        else:
            return i
    return i


def _comment_start(line: str) -> int:
    """Where the comment of a line of code starts (-1 when it has none), outside strings."""
    quote = ""
    i, n = 0, len(line)
    while i < n:
        c = line[i]
        if quote:
            if c == "\\":
                i += 1
            elif line.startswith(quote, i):
                i += len(quote) - 1
                quote = ""
        elif c in "\"'":
            quote = c * 3 if line.startswith(c * 3, i) else c
            i += len(quote) - 1
        elif c == "#":
            return i
        i += 1
    return -1
