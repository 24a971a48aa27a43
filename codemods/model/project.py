"""The project a file belongs to: the other modules it imports from, read when the
analysis asks about one of their names.

A file of a project uses names that its other modules define: a helper that
returns a tensor (``from .losses import compute_loss``), a print or log wrapper
(``from .distributed import print0``), a base class that is an ``nn.Module``
(``from ...modeling_utils import PreTrainedModel``). The analysis of one file
asks its :class:`External` what such a name is; the :class:`Project` finds the
module's file from the importing file's place and the import (relative
imports, the file's own package, modules beside a script) and answers from
that module:

* where a name is defined, through re-exports (a package's ``__init__``), and
  whether a class is an ``nn.Module`` (its bases, followed across modules):
  from a *summary* of the module, its top-level statements only;
* what a function returns (and whether certainly a tensor), and whether it
  only writes output: from the module's own analysis, with the same model,
  made only for the functions asked about.

The other direction is asked by the driver after a file is analysed
(:func:`calls_elsewhere`): the functions of other modules that this file's
traced code calls (``helper(x)``, ``self.loss_function(...)`` of a base class
defined elsewhere) are traced too, and their module is analysed again with
them as traced roots.

What is read: files of the project only (found next to the importing file, or
in the package it belongs to, never in installed libraries). What an answer
used is recorded (``consulted``: the files and a hash of their text), so that
a kept result is used again only while those files are unchanged.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import importlib.util
import os
import re
import sys
import time
from collections import Counter, OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TypeVar

from .. import real_paths
from ..real_paths import real_path
from .context import FileContext
from .outline import Part, method_names, outline, parse_header, parse_part
from .output_calls import LOG_METHODS, LOG_ONCE_METHODS, may_only_write, output_wrappers
from .provenance import (
    Imports,
    Kind,
    Provenance,
    annotation_kind,
    is_module_class,
    passed_through,
    transparent,
)
from .streams import replaces_streams
from .tree import Text, activated, keeping_active, parse_module, walk

# How many imports are followed through re-exports (``from .x import f`` in a package's
# ``__init__``), and how many base classes up, before a name is taken as unknown.
MAX_HOPS = 4
# How many analyses of modules are made one inside another (a function that returns what a
# function of a third module returns...) before the next is taken as unknown.
MAX_NESTED_READS = 3
# Modules parsed for their summary, kept for an analysis of the same file (what one of its
# functions returns, or the file's own analysis later in the run): the last 8, and older ones
# while their text comes to no more than this many characters (a tree takes some 20 bytes of
# memory per character of its text).
KEEP_PARSED = 8
KEEP_PARSED_CHARS = 1_000_000
T = TypeVar("T")
_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)
_NN_MODULE = ("torch.nn.Module", "torch.nn.modules.module.Module")
# How many imports deep a module that puts its own object in place of the output streams is looked for.
_TEE_DEPTH = 2
# Modules imported absolutely that are never the project's own (a file of the project named
# like one of them would shadow it only where Python is run from that folder).
_NOT_PROJECT = frozenset({*sys.stdlib_module_names, "torch", "numpy", "jax", "scipy", "pandas", "__future__",
                          "typing_extensions"})


@dataclass(frozen=True)
class Definition:
    """A name of another module: where it is defined, and what it is."""

    path: Path
    qualname: str  # "helper", "Base.loss_function"; "" for the module itself
    kind: str  # "function", "class" or "module"
    via: tuple[tuple[str, str], ...] = ()  # the files read to find it, with the hash of their text


@dataclass(frozen=True)
class Defined:
    """A function or class a module defines, as much as questions about it need (the
    module's tree is not kept)."""

    kind: str  # "function" or "class"
    bases: tuple[ast.expr, ...] = ()  # a class's bases, as written
    methods: frozenset[str] | None = frozenset()  # a class's methods (None: not read yet, see ``Summary.methods``)
    may_write: bool = False  # a function that could be an output wrapper (see Summary and output_calls.output_wrappers)
    # A function (without decorators that change what it returns) whose return annotation
    # says its kind (``-> bool``, ``-> torch.Tensor``): what it returns, known without
    # analysing its module.
    returns: Kind = Kind.UNKNOWN
    # A function with a decorator that may change what it returns: its analysis says UNKNOWN.
    opaque: bool = False
    # The positional parameter (its place, its name) that every ``return`` gives back (see
    # ``passed_through``): called with a tensor, the function returns one.
    passes: tuple[int, str] | None = None


def _methods_of(node: ast.ClassDef) -> frozenset[str]:
    """The functions of a class's body."""
    return frozenset(s.name for s in node.body if type(s) in _FUNCTIONS)  # type: ignore[attr-defined]


def _line_of(item: ast.stmt | Part) -> int:
    return item.line if type(item) is Part else item.lineno  # type: ignore[union-attr]


class Summary:
    """A module's top-level statements: what it defines and what it imports (the names
    it binds at its top level, including under ``if`` and ``try``).

    Made from the module's whole tree (a file this process analyses), or from its
    :mod:`outline` (:meth:`of_text`): then each function or class written at column 0 is
    parsed when a question about it first comes (what does ``is_torch_available``
    return?), the others never."""

    def __init__(self, module: ast.Module, digest: str, text: str | Text) -> None:
        """The summary of the whole tree ``module``. ``text``: the module's text (a
        :class:`Text` where its lines are known already)."""
        self._rebuilt = 0  # times read again whole after a wrong cut (see ``_parse_whole``)
        self._whole(module, digest, text)

    def _whole(self, module: ast.Module, digest: str, text: str | Text) -> None:
        self._fill(module.body, [], digest, text if isinstance(text, str) else text.source)
        self._writes = _writing_functions(
            {name: node for name, node in self._nodes.items() if self._kinds[name] == "function"}, text)  # type: ignore[misc]
        for name in self._kinds:  # every definition worked out now: the tree is not kept
            self.definition(name)
        self._text, self._nodes, self._decorators, self._known = None, {}, set(), {}

    @classmethod
    def of_text(cls, text: str, digest: str) -> tuple[Summary | None, ast.Module | None]:
        """The summary of ``text``, made from its outline where it can be, and the module's
        whole tree where it had to be parsed whole (None: it was not). (None, None): the text
        does not parse."""
        try:
            found = outline(text)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            found = None  # (a wrong cut, or a text that does not parse: parsed whole, it says which)
        if found is not None:
            summary = cls.__new__(cls)
            summary._rebuilt = 0
            summary._fill(found.module.body, found.parts, digest, text)
            summary._work_out_outline()
            return summary, None
        try:
            module = parse_module(text)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return None, None
        return cls(module, digest, text), module

    def _fill(self, body: list[ast.stmt], parts: list[Part], digest: str, text: str) -> None:
        """Read the top-level statements ``body``, and the ``parts`` of the module not parsed."""
        self.digest = digest
        self.shared = False  # handed to the other processes of the run (see ``_share``)
        self.names: set[str] = set()  # every name bound at the top level
        self._defined: dict[str, Defined] = {}  # the definitions worked out so far
        self._kinds: dict[str, str] = {}  # each name the module defines: "function" or "class"
        self._parts: dict[str, Part] = {}  # the definitions written at column 0, where not parsed with the rest
        self._nodes: dict[str, ast.stmt] = {}  # the trees of definitions, while needed
        self._decorators: set[str] = set()  # the module's functions used as decorators (their trees kept)
        self._single: set[str] = set()  # the functions its analysis reads (see below)
        self._writes: dict[str, bool] = {}  # which functions may write output (``_writing_functions``)
        self._known: dict[int, bool] = {}  # the module's decorators that give back what they are given
        self._text: str | None = text  # while a part is not worked out
        self._rest_texts: dict[str, str] = {}  # the text of each short function of the outline's tree, while read
        functions: dict[str, ast.stmt | Part] = {}
        classes: dict[str, ast.stmt | Part] = {}
        defs: list[str] = []  # the names of the top-level functions, once per ``def``
        bound: Counter[str] = Counter()  # how many statements bind each top-level name
        imports: list[ast.AST] = []
        in_body = {id(stmt) for stmt in body}
        # The statements and the parts, in the order of the text.
        statements: list[ast.stmt | Part] = sorted([*body, *parts], key=_line_of) if parts else list(body)
        while statements:
            stmt = statements.pop(0)
            t = type(stmt)
            if t is Part:
                name = stmt.name  # type: ignore[union-attr]
                if stmt.kind == "function":  # type: ignore[union-attr]
                    functions[name] = stmt
                    defs.append(name)
                else:
                    classes[name] = stmt
                self.names.add(name)
                bound[name] += 1
            elif t is ast.ClassDef:
                classes[stmt.name] = stmt  # type: ignore[union-attr]
                self.names.add(stmt.name)  # type: ignore[union-attr]
                bound[stmt.name] += 1  # type: ignore[union-attr]
            elif t in _FUNCTIONS:
                functions[stmt.name] = stmt  # type: ignore[union-attr]
                defs.append(stmt.name)  # type: ignore[union-attr]
                self.names.add(stmt.name)  # type: ignore[union-attr]
                bound[stmt.name] += 1  # type: ignore[union-attr]
            elif t is ast.Import:
                imports.append(stmt)  # type: ignore[arg-type]
                bound.update(alias.asname or alias.name.split(".")[0] for alias in stmt.names)  # type: ignore[union-attr]
                self.names.update(alias.asname or alias.name.split(".")[0] for alias in stmt.names)  # type: ignore[union-attr]
            elif t is ast.ImportFrom and stmt.names[0].name != "*":  # type: ignore[union-attr]
                imports.append(stmt)  # type: ignore[arg-type]
                bound.update(alias.asname or alias.name for alias in stmt.names)  # type: ignore[union-attr]
                self.names.update(alias.asname or alias.name for alias in stmt.names)  # type: ignore[union-attr]
            elif t in (ast.If, ast.Try) or (hasattr(ast, "TryStar") and t is getattr(ast, "TryStar")):
                statements[:0] = [*stmt.body, *getattr(stmt, "orelse", []), *getattr(stmt, "finalbody", []),  # type: ignore[union-attr]
                                  *(s for h in getattr(stmt, "handlers", []) for s in h.body)]
            elif t in (ast.Assign, ast.AnnAssign, ast.AugAssign):
                targets = stmt.targets if t is ast.Assign else [stmt.target]  # type: ignore[union-attr]
                for target in targets:
                    for node in ast.walk(target):
                        if type(node) is ast.Name:
                            self.names.add(node.id)
                            bound[node.id] += 1
        # The names its top-level imports bind, read as a file's own imports are.
        self.imports = Imports(imports)
        self.origins = self.imports.origins
        # A name both a class and a function is taken for the function.
        for named, kind in ((classes, "class"), (functions, "function")):
            for name, found in named.items():
                self._kinds[name] = kind
                self._parts.pop(name, None)
                self._nodes.pop(name, None)
                if type(found) is Part:
                    self._parts[name] = found  # type: ignore[assignment]
                else:
                    self._nodes[name] = found  # type: ignore[assignment]
        # The functions its analysis reads: one ``def`` of the name, in the module's own body,
        # the name bound nowhere else at the top level.
        def_counts = Counter(defs)
        self._single = {name for name, function in functions.items() if def_counts[name] == 1 and bound[name] == 1
                        and (type(function) is Part or id(function) in in_body)}

    def _work_out_outline(self) -> None:
        """Work out the definitions the outline's tree holds (those under ``if`` and ``try``),
        whose trees are then let go of: only the parts stay to be parsed when asked about."""
        rest = list(self._nodes)
        if not rest:
            return
        text = self._text or ""
        lines = Text(text)
        self._rest_texts = {name: _text_of(node, lines) for name, node in self._nodes.items()
                            if _short(node)}
        for name in rest:
            self.definition(name)
        self._rest_texts = {}
        for name in rest:
            if name not in self._decorators:
                self._nodes.pop(name, None)

    def kind_of(self, name: str) -> str | None:
        """"function" or "class" where the module defines ``name`` at its top level, else
        None (the definition itself is not parsed to know)."""
        return self._kinds.get(name)

    def definition(self, name: str) -> Defined | None:
        """The function or class ``name`` the module defines, as much as questions need."""
        found = self._defined.get(name)
        if found is not None or name not in self._kinds:
            return found
        if self._kinds[name] == "class" and name in self._parts and name not in self._nodes and self._text is not None:
            header = parse_header(self._text, self._parts[name])
            if header is not None:  # its bases; its methods read when asked for
                found = self._defined[name] = Defined("class", tuple(header.bases), None)
                return found
        rebuilt = self._rebuilt
        node = self._node(name)
        if self._rebuilt != rebuilt:  # read again whole: every definition is worked out
            return self._defined.get(name)
        if node is None:
            found = Defined(self._kinds[name])  # a definition that does not parse: nothing more is known of it
        elif type(node) is ast.ClassDef:
            found = Defined("class", tuple(node.bases), _methods_of(node))
        else:
            found = self._function(name, node)  # type: ignore[arg-type]
        self._defined[name] = found
        if name in self._parts and name not in self._decorators:
            self._nodes.pop(name, None)  # (parsed again from its part if needed)
        self._let_text_go()
        return found

    def methods(self, name: str) -> frozenset[str]:
        """The methods of the class ``name`` (its part parsed whole if only its header was)."""
        found = self.definition(name)
        if found is None:
            return frozenset()
        if found.methods is None:
            # Its body cut at its methods, as the module at its definitions; else parsed whole.
            part = self._parts.get(name)
            methods = method_names(self._text, part) if self._text is not None and part is not None else None
            if methods is None:
                rebuilt = self._rebuilt
                node = self._node(name)
                if self._rebuilt != rebuilt:  # read again whole
                    return self.methods(name)
                methods = _methods_of(node) if type(node) is ast.ClassDef else frozenset()  # type: ignore[arg-type]
            found = self._defined[name] = replace(found, methods=methods)
            self._nodes.pop(name, None)
            self._let_text_go()
        return found.methods  # type: ignore[return-value]

    def _pending(self) -> Iterator[str]:
        """The parts not worked out yet (a class whose methods are not read counts)."""
        return (name for name in self._parts if name not in self._defined or self._defined[name].methods is None)

    def _let_text_go(self) -> None:
        """Let go of the module's text once every part is worked out."""
        if self._text is not None and next(self._pending(), None) is None:
            self._text = None

    def definitions(self) -> dict[str, Defined]:
        """Every definition of the module (each part parsed that is not yet)."""
        for name in list(self._kinds):
            if self._kinds.get(name) == "class":  # (a wrong cut found on the way reads the module again)
                self.methods(name)
        return {name: found for name in list(self._kinds) if (found := self.definition(name)) is not None}

    def _function(self, name: str, function: ast.FunctionDef | ast.AsyncFunctionDef) -> Defined:
        returns = Kind.UNKNOWN
        opaque = False
        single = name in self._single
        if single:
            if all(transparent(d, self.imports, self._local, self._known) for d in function.decorator_list):
                if function.returns is not None:
                    returns = annotation_kind(self.imports, function.returns)
            else:
                opaque = True
        # An output wrapper (see ``output_wrappers``) has no decorator, and only statements that
        # may write: for any other function, a file that imports it need not analyse this module.
        may_write = not function.decorator_list and self._writes_output(name) and may_only_write(function.body)
        return Defined("function", may_write=may_write, returns=returns, opaque=opaque,
                       passes=passed_through(function) if single else None)

    def _local(self, name: ast.Name) -> ast.AST | None:
        """The module's function a decorator names (as ``Provenance.local_function`` finds it)."""
        if name.id not in self._single:
            return None
        node = self._node(name.id)
        if node is not None:
            self._decorators.add(name.id)  # (its answer is kept by the tree's ``id``)
        return node

    def _node(self, name: str) -> ast.stmt | None:
        """The definition ``name``'s tree, its part parsed if it is not yet."""
        node = self._nodes.get(name)
        if node is not None or name not in self._parts or self._text is None:
            return node
        node = parse_part(self._text, self._parts[name])
        if node is None:  # a wrong cut: the module is read again whole
            if not self._parse_whole(self._text):
                del self._parts[name]  # (the text does not parse: nothing more is known of it)
            return None
        self._nodes[name] = node
        return node

    def _parse_whole(self, text: str) -> bool:
        """After a wrong cut (a part that is not the definition it looked like): the module
        read again from its whole tree. False if the text does not parse."""
        try:
            module = parse_module(text)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return False
        shared = self.shared
        self._rebuilt += 1
        self._whole(module, self.digest, text)
        self.shared = shared
        return True

    def _writes_output(self, name: str) -> bool:
        """Could the function ``name`` be an output wrapper? (See ``_writing_functions``:
        here for it and the module's functions it calls, parsed as they are reached.)"""
        found = self._writes.get(name)
        if found is not None:
            return found
        rebuilt = self._rebuilt
        calls: dict[str, tuple[bool, set[str]]] = {}
        todo = [name]
        while todo:
            reached = todo.pop()
            if reached in calls or reached in self._writes:
                continue
            parsed = reached in self._nodes
            node = self._node(reached)
            if self._rebuilt != rebuilt:  # read again whole: every function's answer is known
                return self._writes.get(name, False)
            calls[reached] = _calls_in(self._function_text(reached, node)) if _short(node) else (False, set())
            todo.extend(c for c in calls[reached][1] if self._kinds.get(c) == "function")
            if not parsed and reached != name and reached not in self._decorators:
                self._nodes.pop(reached, None)  # (a tree parsed for this answer only)
        self._writes.update(_writing_fixed_point(calls, self._writes))
        return self._writes.get(name, False)

    def _function_text(self, name: str, function: ast.AST) -> str:
        """The text of a function's lines, from its ``def`` to its last line."""
        found = self._rest_texts.get(name)
        if found is not None:
            return found
        part = self._parts[name]
        text = self._text or ""
        at = part.start
        for _ in range(function.lineno - 1):  # type: ignore[attr-defined]
            at = text.index("\n", at, part.end) + 1  # (past the decorators)
        stop = at
        for _ in range(function.end_lineno - function.lineno + 1):  # type: ignore[attr-defined]
            stop = text.find("\n", stop, part.end)
            if stop < 0:
                return text[at:part.end]
            stop += 1
        return text[at:stop]

    def attach(self, text: str) -> None:
        """Give a summary read back (kept by a run, or shared by another process) its module's
        text, whose digest it has: its parts not worked out are parsed from it."""
        if self._text is None and next(self._pending(), None) is not None:
            self._text = text

    def __getstate__(self) -> dict:
        # Shared with the other processes of the run without the text and the trees.
        state = dict(self.__dict__)
        state.update(_text=None, _nodes={}, _decorators=set(), _known={})
        return state

    def qualify(self, expr: ast.AST) -> str | None:
        return self.imports.qualify(expr)

    def to_data(self) -> dict:
        """The summary as JSON data, which :meth:`from_data` reads back (a class's bases as
        their source text; a part not worked out yet as where it is in the text)."""
        return {
            "digest": self.digest,
            "names": sorted(self.names),
            "aliases": self.imports.aliases,
            "origins": {name: list(origin) for name, origin in self.imports.origins.items()},
            "definitions": {
                name: [d.kind, [ast.unparse(base) for base in d.bases], None if d.methods is None else sorted(d.methods),
                       d.may_write,
                       d.returns.value, d.opaque, None if d.passes is None else list(d.passes)]
                for name, d in self._defined.items()
            },
            "kinds": self._kinds,
            "parts": {name: [self._parts[name].kind, self._parts[name].start, self._parts[name].end,
                             self._parts[name].line] for name in self._pending()},
            "single": sorted(self._single),
            "writes": self._writes,
        }

    @classmethod
    def from_data(cls, data: dict) -> Summary:
        """The summary :meth:`to_data` gave (its parts not worked out need :meth:`attach`).
        Raises ``ValueError``, ``TypeError``, ``KeyError`` or ``SyntaxError`` for data it did
        not give."""
        summary = cls.__new__(cls)
        summary.digest = str(data["digest"])
        summary.shared = False
        summary.names = {str(name) for name in data["names"]}
        summary.imports = Imports.from_data(
            {str(k): str(v) for k, v in data["aliases"].items()},
            {str(k): (str(module), int(level), None if name is None else str(name))
             for k, (module, level, name) in data["origins"].items()})
        summary.origins = summary.imports.origins
        summary._defined = {}
        for name, (kind, bases, methods, may_write, returns, opaque, passes) in data["definitions"].items():
            summary._defined[str(name)] = Defined(
                _definition_kind(kind), tuple(ast.parse(str(base), mode="eval").body for base in bases),
                None if methods is None else frozenset(str(m) for m in methods), bool(may_write), Kind(returns), bool(opaque),
                None if passes is None else (int(passes[0]), str(passes[1])))
        summary._kinds = {str(name): _definition_kind(kind) for name, kind in data["kinds"].items()}
        summary._parts = {str(name): Part(_definition_kind(kind), str(name), int(start), int(end), int(line))
                          for name, (kind, start, end, line) in data["parts"].items()}
        summary._single = {str(name) for name in data["single"]}
        summary._writes = {str(name): bool(writes) for name, writes in data["writes"].items()}
        summary._nodes, summary._decorators, summary._known, summary._text, summary._rest_texts = {}, set(), {}, None, {}
        summary._rebuilt = 0
        return summary


def _definition_kind(kind: object) -> str:
    if kind not in ("function", "class"):
        raise ValueError(f"not a definition: {kind!r}")
    return kind  # type: ignore[return-value]


# A folder through which the processes of one run share the summaries of the modules
# they are asked about (None: this process keeps its own). A worker then does not parse a
# module for what it defines when another worker was asked about it already. (Not each file
# a worker analyses: writing a file costs as much as parsing a small module, and most
# files of a run are asked about by none.)
_SHARED_SUMMARIES: Path | None = None


def share_summaries(folder: str | None) -> None:
    """Share summaries through ``folder`` (made for the run, readable by its processes
    alone), or not (None)."""
    global _SHARED_SUMMARIES
    _SHARED_SUMMARIES = Path(folder) if folder else None


def _shared_summary(digest: str) -> Summary | None:
    """The summary another process of the run made of a text with this digest."""
    if _SHARED_SUMMARIES is None:
        return None
    import pickle  # (a run of several processes only: not at each start)

    try:
        data = (_SHARED_SUMMARIES / f"{digest}.summary").read_bytes()
        found = pickle.loads(data)
    except (OSError, pickle.UnpicklingError, EOFError, AttributeError, ValueError):
        return None
    return found if isinstance(found, Summary) and found.digest == digest else None


# The run's result cache (``fixitem.cache.ResultCache``: ``summary(digest)``,
# ``keep_summary(digest, data)``), which keeps the summaries files ask about for later runs:
# a file edited since then is analysed again, the modules it imports, unchanged, are not
# parsed for what they define. None: nothing kept.
_KEPT_SUMMARIES: Any = None


# The summaries this process read back from the result cache, each with how many definitions
# it held then: what a file's analysis worked out of their parts is kept in turn.
_READ_BACK: dict[int, tuple[Summary, int]] = {}


def keep_summaries_in(cache: Any) -> None:
    """Keep the summaries files ask about in ``cache`` (a ``ResultCache``), and read them
    back from it; None: neither."""
    global _KEPT_SUMMARIES
    if cache is None:  # (the end of a run)
        _READ_BACK.clear()
    _KEPT_SUMMARIES = cache


def keep_learned_summaries() -> None:
    """Keep again the summaries read back from the result cache whose parts the file just
    analysed had worked out (a summary is kept as soon as it is made, before it is asked
    about): the next run that asks the same needs no part of their modules parsed. (A
    summary made in this run is not kept again: in a run of a whole tree, the modules most
    asked about would be written after nearly every file.)"""
    if _KEPT_SUMMARIES is None:
        return
    for key, (summary, count) in list(_READ_BACK.items()):
        if len(summary._defined) > count:
            _KEPT_SUMMARIES.keep_summary(summary.digest, summary.to_data())
            _READ_BACK[key] = (summary, len(summary._defined))


def _kept_summary(digest: str) -> Summary | None:
    """The summary an earlier run kept of a text with this digest."""
    if _KEPT_SUMMARIES is None:
        return None
    data = _KEPT_SUMMARIES.summary(digest)
    if data is None:
        return None
    try:
        found = Summary.from_data(data)
    except (KeyError, TypeError, ValueError, SyntaxError, RecursionError, MemoryError):
        return None  # not what this version keeps: the module is parsed
    if found.digest != digest:
        return None
    found.shared = True  # kept already, and readable by every process of the run
    _READ_BACK[id(found)] = (found, len(found._defined))
    return found


def _share(summary: Summary) -> None:
    """Keep ``summary`` for later runs, and hand it to the other processes of this one
    (written whole, then renamed: a process reading it never sees half of it), once."""
    if summary.shared or (_SHARED_SUMMARIES is None and _KEPT_SUMMARIES is None):
        return
    summary.shared = True
    if _KEPT_SUMMARIES is not None:
        _KEPT_SUMMARIES.keep_summary(summary.digest, summary.to_data())
    if _SHARED_SUMMARIES is None:
        return
    target = _SHARED_SUMMARIES / f"{summary.digest}.summary"
    if target.exists():
        return
    temporary = target.with_name(f".{summary.digest}.{os.getpid()}")
    import pickle

    try:
        temporary.write_bytes(pickle.dumps(summary, pickle.HIGHEST_PROTOCOL))
        os.replace(temporary, target)
    except (OSError, pickle.PicklingError, RecursionError):
        try:
            temporary.unlink()
        except OSError:
            pass


@dataclass
class _Read:
    context: FileContext | None  # None: the file does not parse
    digest: str


# What a file looked for and not found is recorded as read with this digest (that of a file
# that cannot be read: see ``fixitem.cache.file_digest``), so that a kept result goes once
# the file is made.
ABSENT = ""


class _Reading:
    """The block of :meth:`Project.reading`: what it read, then counted as read by the
    answer around it, if any."""

    __slots__ = ("_frames", "read")

    def __init__(self, frames: list[dict[str, str]]) -> None:
        self._frames = frames
        self.read: dict[str, str] = {}

    def __enter__(self) -> dict[str, str]:
        self._frames.append(self.read)
        return self.read

    def __exit__(self, *exc: object) -> None:
        self._frames.pop()
        if self._frames:
            self._frames[-1].update(self.read)


class Project:
    """The modules of the project read so far in this process: summaries (the last many),
    analyses (the last few, and those whose nodes were handed out), answers (all)."""

    # ``keep_summaries``: a summary is a few kilobytes, and each file a run analyses leaves one (a
    # code base of 2,900 files kept 1,024 of them and parsed 40 modules again for theirs).
    def __init__(self, keep: int = 32, keep_summaries: int = 4096) -> None:
        self._keep = keep
        self._keep_summaries = keep_summaries
        self._checked = 0.0  # when ``fresh`` last looked at the files
        self._clear()

    def _clear(self) -> None:
        self._summaries: OrderedDict[Path, Summary | None] = OrderedDict()
        self._reads: OrderedDict[Path, _Read] = OrderedDict()
        self._pinned: dict[Path, _Read] = {}
        # The last modules parsed for a summary, by path: (digest, tree, text). A file whose
        # summary was asked for is often analysed next (what one of its functions returns, or
        # as a file of the run), and its analysis then takes this tree rather than parsing the
        # text again.
        self._parsed: OrderedDict[Path, tuple[str, ast.Module, str]] = OrderedDict()
        self._parsed_chars = 0
        self._reading: set[Path] = set()
        self._answers: dict[tuple, tuple[object, dict[str, str]]] = {}  # key -> (answer, the files it read)
        self._computing: set[tuple] = set()
        # While answers are computed, one inside another: the files each has read so far
        # (path -> sha1 of the text), the innermost last. See :meth:`reading`.
        self._recording: list[dict[str, str]] = []
        self._stats: dict[Path, tuple[int, int]] = {}  # every file read: its time and size then

    def for_file(self, path: Path | str | None) -> External | None:
        """What the file at ``path`` may ask about the rest of its project (None where the
        file is not on disk: code given as text, a file of a test)."""
        if path is None:
            return None
        try:
            real = real_path(path)
            if not real.is_file():
                return None
        except (OSError, RuntimeError):
            return None
        return External(self, real)

    def fresh(self) -> None:
        """Forget everything when a file read so far has changed on disk since (an editor
        keeps the process, and the project changes under it). Looked at once a second."""
        now = time.monotonic()
        if now - self._checked < 1.0:
            return
        self._checked = now
        for path, stat in self._stats.items():
            try:
                now = path.stat()
                if (now.st_mtime_ns, now.st_size) == stat:
                    continue
            except OSError:
                pass
            self._clear()
            real_paths.forget()
            return

    def module_file(self, importer: Path, module: str, level: int) -> Path | None:
        """The file of ``module`` as ``importer`` imports it (``level`` dots before it)."""
        parts = [p for p in module.split(".") if p] if module else []
        if level:
            base = importer.parent
            for _ in range(level - 1):
                base = base.parent
            roots = [base]
        else:
            if not parts:
                return None
            roots = list(dict.fromkeys([_package_root(importer), importer.parent]))
        for root in roots:
            target = root.joinpath(*parts)
            candidates = [target.with_suffix(".py")] if parts else []
            candidates.append(target / "__init__.py")
            for candidate in candidates:
                if not candidate.is_file():
                    # Read as absent: a module made there later would change the answer.
                    self._read_file(candidate, ABSENT)
                    continue
                found = real_path(candidate)
                if found != importer:
                    return found
        return None

    def _text(self, path: Path) -> tuple[str, str] | None:
        try:
            stat = path.stat()
            data = path.read_bytes()
        except OSError:
            return None
        self._stats[path] = (stat.st_mtime_ns, stat.st_size)
        return _decoded(data), hashlib.sha1(data).hexdigest()  # type: ignore[return-value]

    def remember(self, path: Path | str, module: ast.Module, text: str, lines: Text | None = None) -> None:
        """The summary of a file this process has parsed anyway (a file of the run), when its
        text is the file's on disk: a file that asks about it later needs no parse of its own.
        ``lines``: the file's :class:`Text`, whose lines its analysis may have found already."""
        try:
            real = real_path(path)
        except (OSError, RuntimeError):
            return
        if real in self._summaries:
            return
        read = self._text(real)
        if read is not None and read[0] == text:
            self._summaries[real] = Summary(module, read[1], lines if lines is not None and lines.source == text
                                            else text)

    def summary(self, path: Path) -> Summary | None:
        """``path``'s top-level statements (None when it cannot be read or parsed)."""
        if path in self._summaries:
            self._summaries.move_to_end(path)
            found = self._summaries[path]
            if found is not None:
                self._read_file(path, found.digest)
                _share(found)  # (a file analysed here, asked about: likely asked about elsewhere too)
            return found
        found: Summary | None = None
        read = self._text(path)
        if read is not None and read[0] is not None:
            found = _shared_summary(read[1]) or _kept_summary(read[1])
            if found is not None:
                found.attach(read[0])
            else:
                found, module = Summary.of_text(read[0], read[1])
                if found is not None:
                    _share(found)
                if module is not None:  # parsed whole: kept for an analysis of the file
                    self._keep_parsed(path, read[1], module, read[0])
        self._summaries[path] = found
        while len(self._summaries) > self._keep_summaries:
            self._summaries.popitem(last=False)
        if found is not None:
            self._read_file(path, found.digest)
        return found

    def _keep_parsed(self, path: Path, digest: str, module: ast.Module, text: str) -> None:
        self._drop_parsed(path)
        self._parsed[path] = (digest, module, text)
        self._parsed_chars += len(text)
        while len(self._parsed) > KEEP_PARSED and self._parsed_chars > KEEP_PARSED_CHARS:
            self._drop_parsed(next(iter(self._parsed)))

    def _drop_parsed(self, path: Path) -> tuple[str, ast.Module, str] | None:
        found = self._parsed.pop(path, None)
        if found is not None:
            self._parsed_chars -= len(found[2])
        return found

    def parsed(self, path: Path | str, text: str) -> ast.Module | None:
        """The tree of ``path`` this process parsed already, when ``text`` is the text parsed:
        for its summary (given once, to the analysis of the file), or for an analysis kept here
        (what one of its functions returns), which then shares its tree with the file's own."""
        try:
            real = real_path(path)
        except (OSError, RuntimeError):
            return None
        kept = self._parsed.get(real)
        if kept is not None and kept[2] == text:
            self._drop_parsed(real)
            return kept[1]
        read = self._reads.get(real) or self._pinned.get(real)
        if read is not None and read.context is not None and read.context.source == text:
            return read.context.module
        return None

    def read(self, path: Path) -> _Read | None:
        """``path`` parsed and analysed (None when it cannot be read, while it is being read:
        an import circle, and beyond a few analyses made one inside another)."""
        found = self._reads.get(path) or self._pinned.get(path)
        if found is not None:
            if path in self._reads:
                self._reads.move_to_end(path)
            self._read_file(path, found.digest)
            return found
        if path in self._reading or len(self._reading) >= MAX_NESTED_READS:
            return None
        read = self._text(path)
        if read is None:
            return None
        text, digest = read
        parsed = self._drop_parsed(path)
        module = parsed[1] if parsed is not None and parsed[0] == digest else None
        self._reading.add(path)
        context: FileContext | None = None
        try:
            if text is not None:
                with keeping_active():  # the file asking goes on with its own index
                    context = FileContext.build(path, text, module=module, external=External(self, path))
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            context = None
        finally:
            self._reading.discard(path)
        found = self._reads[path] = _Read(context, digest)
        while len(self._reads) > self._keep:
            self._reads.popitem(last=False)
        self._read_file(path, digest)
        return found

    def pin(self, path: Path) -> None:
        """Keep the analysis of ``path`` for the run (its nodes are handed out)."""
        found = self._reads.get(path)
        if found is not None:
            self._pinned[path] = found

    def answer(self, key: tuple, compute: Callable[[], T], meanwhile: T | None = None) -> T:
        """``compute()``, kept under ``key``; ``meanwhile`` while it is being computed (a
        question that leads back to itself through modules that import each other). The
        files the computation read are kept with it: asked again, the answer counts them
        as read again (see :meth:`reading`)."""
        kept = self._answers.get(key)
        if kept is not None:
            self.count_read(kept[1])
            return kept[0]  # type: ignore[return-value]
        if key in self._computing:
            return meanwhile  # type: ignore[return-value]
        self._computing.add(key)
        read: dict[str, str] = {}
        self._recording.append(read)
        try:
            found = compute()
        finally:
            self._computing.discard(key)
            self._recording.pop()
            self.count_read(read)
        self._answers[key] = (found, read)
        return found

    def reading(self) -> _Reading:
        """A block whose reads of the project's files are collected (``with project.reading()
        as read:``): the summaries and analyses it asks for, directly or through answers
        computed or kept, with those of every answer they needed in turn. What a file's
        result depends on is what its questions read (``External.consulted``)."""
        return _Reading(self._recording)

    def count_read(self, read: dict[str, str]) -> None:
        """Count these files (path -> sha1 of the text) as read by the answer being computed,
        if any (they were read for an answer it asked for, or one kept from earlier)."""
        if self._recording and read:
            self._recording[-1].update(read)

    def _read_file(self, path: Path, digest: str) -> None:
        if self._recording:
            self._recording[-1][str(path)] = digest

    # -- names, from summaries ---------------------------------------------------------------

    def resolve(self, importer: Path, module: str, level: int, names: tuple[str, ...],
                hops: int = 0) -> Definition | None:
        """The definition that ``names`` of ``module`` (imported by ``importer``) leads to."""
        if hops > MAX_HOPS:
            return None
        path = self._module_from(importer, module, level)
        if path is None:
            return None
        return self.answer(("resolve", path, names), lambda: self._resolve_in(path, names, hops))

    def _resolve_in(self, path: Path, names: tuple[str, ...], hops: int) -> Definition | None:
        via: list[tuple[str, str]] = []
        # ``from . import sub`` / ``pkg.sub.f``: leading names that are submodules.
        while names and path.name == "__init__.py":
            summary = self._summary(path, via)
            if summary is not None and names[0] in summary.names:
                break  # a name the package itself defines or imports
            sub = self.module_file(path, names[0], 1)
            if sub is None:
                break
            path, names = sub, names[1:]
        summary = self._summary(path, via)
        if summary is None:
            return None
        if not names:
            return Definition(path, "", "module", tuple(via))
        first, rest = names[0], names[1:]
        kind = summary.kind_of(first)
        if kind is not None:
            if not rest:
                return Definition(path, first, kind, tuple(via))
            if kind == "class" and len(rest) == 1:
                return _with_via(self.member(path, summary, first, rest[0], 0), via)
            return None
        origin = summary.origins.get(first)  # a name the module imports in turn
        if origin is None:
            return None
        module, level, name = origin
        return _with_via(self.resolve(path, module, level, ((name,) if name else ()) + rest, hops + 1), via)

    def _summary(self, path: Path, via: list[tuple[str, str]]) -> Summary | None:
        found = self.summary(path)
        if found is not None:
            via.append((str(path), found.digest))
        return found

    def defined(self, found: Definition) -> Defined | None:
        """What ``found`` is, from its module's summary (a top-level function or class)."""
        summary = self.summary(found.path)
        if summary is None or "." in found.qualname:
            return None
        return summary.definition(found.qualname)

    def imported_files(self, importer: Path, module: str, level: int, name: str | None) -> list[Path]:
        """The files of the project that ``from module import name`` (``level`` dots before
        ``module``; ``import module``: no ``name``) in ``importer`` runs: the module, and the
        module ``name`` where it is one (``from . import tee_logger``)."""
        if not level and module.partition(".")[0] in _NOT_PROJECT:
            return []
        found: list[Path] = []
        path = self._module_from(importer, module, level) if module else None
        if path is not None:
            found.append(path)
        # ``from pkg import name`` runs the module ``pkg/name.py`` where there is one: looked for
        # only in a package of the project (``from . import tee_logger``), not in every module.
        if name and (not module or (found and found[0].name == "__init__.py")):
            path = self._module_from(importer, f"{module}.{name}" if module else name, level)
            if path is not None:
                found.append(path)
        return found

    def _module_from(self, importer: Path, module: str, level: int) -> Path | None:
        """The file of ``module`` as ``importer`` imports it (None: not the project's, or
        ``importer`` itself), kept for every file of ``importer``'s folder."""
        path = self.answer(("module", importer.parent, module, level),
                           lambda: self.module_file(importer.parent / "__fixitem__.py", module, level))
        return path if path != importer else None

    def replaces_streams(self, path: Path, depth: int = 0) -> bool:
        """Does the module at ``path``, or a module of the project it imports (two imports
        deep), put an object of its own in place of ``sys.stdout`` / ``sys.stderr``?"""
        return self.answer(("replaces streams", path), lambda: self._replaces_streams(path, depth), False)

    def _replaces_streams(self, path: Path, depth: int) -> bool:
        read = self._text(path)
        if read is None or read[0] is None:
            return False
        self._read_file(path, read[1])
        if replaces_streams(read[0]):
            return True
        summary = self.summary(path) if depth < _TEE_DEPTH else None
        if summary is None:
            return False
        return any(self.replaces_streams(imported, depth + 1)
                   for module, level, name in summary.origins.values()
                   for imported in self.imported_files(path, module, level, name))

    def is_module_class(self, path: Path, summary: Summary, name: str, depth: int = 0) -> bool:
        """Is the class ``name`` of the module at ``path`` an ``nn.Module`` (through its bases,
        in that module and the ones they come from)?"""
        defined = summary.definition(name) if summary.kind_of(name) == "class" else None
        if defined is None or defined.kind != "class":
            return False

        def compute() -> bool:
            if depth > MAX_HOPS:
                return False
            for base in defined.bases:
                qualified = summary.qualify(base)
                if qualified in _NN_MODULE or qualified == "nn.Module" or is_module_class(qualified, set()):
                    return True
                found = self._base(path, summary, base)
                if found is not None and self.is_module_class(*found, depth + 1):
                    return True
            return False

        return self.answer(("module class", path, name), compute, False)

    def _base(self, path: Path, summary: Summary, base: ast.expr) -> tuple[Path, Summary, str] | None:
        """Where a base class named in the module at ``path`` is defined: (its module's path,
        that module's summary, the class's name)."""
        if type(base) is ast.Name and summary.kind_of(base.id) is not None:  # type: ignore[attr-defined]
            return path, summary, base.id  # type: ignore[attr-defined]
        names: list[str] = []
        while type(base) is ast.Attribute:
            names.append(base.attr)  # type: ignore[attr-defined]
            base = base.value  # type: ignore[attr-defined]
        if type(base) is not ast.Name or base.id not in summary.origins:  # type: ignore[attr-defined]
            return None
        module, level, name = summary.origins[base.id]  # type: ignore[attr-defined]
        found = self.resolve(path, module, level, ((name,) if name else ()) + tuple(reversed(names)))
        if found is None or found.kind != "class" or "." in found.qualname:
            return None
        other = self.summary(found.path)
        return (found.path, other, found.qualname) if other is not None else None

    def member(self, path: Path, summary: Summary, cls: str, attr: str, depth: int) -> Definition | None:
        """The method (or property) ``attr`` of the class ``cls`` or of its bases, followed
        into the other modules of the project the bases come from."""
        defined = summary.definition(cls) if summary.kind_of(cls) == "class" else None
        if defined is None or defined.kind != "class":
            return None

        def compute() -> Definition | None:
            if attr in summary.methods(cls):
                return Definition(path, f"{cls}.{attr}", "function")
            if depth >= MAX_HOPS:
                return None
            for base in defined.bases:
                found = self._base(path, summary, base)
                if found is not None:
                    inherited = self.member(*found, attr, depth + 1)
                    if inherited is not None:
                        return _with_via(inherited, [(str(found[0]), found[1].digest)])
            return None

        return self.answer(("member", path, cls, attr), compute)


def _question(method: Callable[..., T]) -> Callable[..., T]:
    """A question a file asks about its project: every file its answer read (the summaries
    and analyses of other modules, and those that answers kept from earlier read in turn)
    is one the file's result depends on (``External.consulted``)."""

    @functools.wraps(method)
    def ask(self: External, *args: object) -> T:
        with self.project.reading() as read:
            found = method(self, *args)
        self.consulted.update(read)
        return found

    return ask


@dataclass
class External:
    """What one file may ask about the rest of its project (its provenance's ``external``)."""

    project: Project
    path: Path
    consulted: dict[str, str] = field(default_factory=dict)  # path -> sha1 of the text read
    # id(expression) -> (the expression, what it names, the files read to know): asked again
    # and again per node.
    _definitions: dict[int, tuple[ast.AST, Definition | None, dict[str, str]]] = field(default_factory=dict, repr=False)
    # (module, level, names) -> what the project resolves them to, from this file, and the
    # files read to know
    _resolved: dict[tuple, tuple[Definition | None, dict[str, str]]] = field(default_factory=dict, repr=False)

    def definition(self, provenance: Provenance, expr: ast.AST) -> Definition | None:
        """The function or class of another module of the project that ``expr`` (``name``,
        ``module.name``) names, when the name it starts with is bound by an import and
        by nothing else."""
        key = id(expr)
        kept = self._definitions.get(key)
        if kept is not None and kept[0] is expr:
            found, read = kept[1], kept[2]
        else:
            found, read = self._definition(provenance, expr)
            self._definitions[key] = (expr, found, read)
        if read:  # (found or not: a module that comes to define the name changes the answer)
            self._depend(read)
        return found

    def _depend(self, read: dict[str, str]) -> None:
        """The file's result depends on these files (path -> sha1 of the text), and so does
        the answer being computed, if any (asked again inside one, an answer kept here was
        read for it too)."""
        self.consulted.update(read)
        self.project.count_read(read)

    def _definition(self, provenance: Provenance, expr: ast.AST) -> tuple[Definition | None, dict[str, str]]:
        """What :meth:`definition` finds, and the files read to find it."""
        attrs: list[str] = []
        while type(expr) is ast.Attribute:
            attrs.append(expr.attr)  # type: ignore[attr-defined]
            expr = expr.value  # type: ignore[attr-defined]
        if type(expr) is not ast.Name:
            return None, {}
        name = expr.id  # type: ignore[attr-defined]
        origin = provenance.imports.origins.get(name)
        if origin is None:
            return None, {}
        module, level, imported = origin
        if not level and module.partition(".")[0] in _NOT_PROJECT:
            return None, {}  # torch, numpy, the standard library: not the project's
        scope = provenance.scope_of(expr).lookup(name)
        if scope is None:
            return None, {}
        bindings = scope.bindings.get(name, [])
        if not bindings or any(how != "import" for how, _ in bindings):
            return None, {}
        # ``import a.b as c``: ``c.f`` is ``f`` of ``a.b``; ``from .m import g``: ``g`` of ``.m``.
        names = ((imported,) if imported else ()) + tuple(reversed(attrs))
        key = (module, level, names)
        kept = self._resolved.get(key)
        if kept is None:
            with self.project.reading() as read:
                found = self.project.resolve(self.path, module, level, names)
            kept = self._resolved[key] = (found, read)
        return kept

    def _analysis(self, found: Definition) -> tuple[FileContext, ast.AST] | None:
        """The analysis of the module ``found`` is in, and its definition there."""
        read = self.project.read(found.path)
        if read is None or read.context is None:
            return None
        context = read.context
        node: ast.AST | None = None
        for part in found.qualname.split("."):
            body = context.module.body if node is None else node.body  # type: ignore[attr-defined]
            node = next((s for s in body if type(s) in (*_FUNCTIONS, ast.ClassDef) and s.name == part), None)  # type: ignore[attr-defined]
            if node is None:
                return None
        return (context, node) if node is not None else None

    @_question
    def passed_through(self, provenance: Provenance, func: ast.expr) -> tuple[int, str] | None:
        """The positional parameter a function of another module that ``func`` names gives
        back from every ``return`` (see ``provenance.passed_through``): its place and name."""
        found = self.definition(provenance, func)
        if found is None or found.kind != "function":
            return None
        defined = self.project.defined(found)
        return defined.passes if defined is not None else None

    @_question
    def call_kind(self, provenance: Provenance, func: ast.expr) -> Kind | None:
        """What calling ``func`` gives, when it names a function or class of another module
        of the project: the function's return kind there, MODULE for an ``nn.Module`` class."""
        found = self.definition(provenance, func)
        if found is None or found.kind == "module":
            return None
        if found.kind == "class":
            return Kind.MODULE if self._is_module_class(found) else None

        def compute() -> Kind:
            defined = self.project.defined(found)
            if defined is not None and defined.returns is not Kind.UNKNOWN:
                return defined.returns  # as its analysis would say, from the annotation alone
            if defined is not None and defined.opaque:
                return Kind.UNKNOWN  # as its analysis would say
            where = self._analysis(found)
            if where is None:
                return Kind.UNKNOWN
            context, node = where
            return _in(context, lambda: context.provenance.return_kind(node))

        kind = self.project.answer(("returns", found.path, found.qualname), compute, Kind.UNKNOWN)
        return kind if kind not in (Kind.UNKNOWN, Kind.PENDING) else None

    @_question
    def returns_certainly_tensor(self, provenance: Provenance, func: ast.expr) -> bool:
        """Does every ``return`` of the function of another module that ``func`` names give
        a tensor its module proves is one?"""
        found = self.definition(provenance, func)
        if found is None or found.kind != "function":
            return False

        def compute() -> bool:
            where = self._analysis(found)
            if where is None:
                return False
            context, node = where
            return _in(context, lambda: context.provenance.returns_certainly_tensor(node))

        return self.project.answer(("certain returns", found.path, found.qualname), compute, False)

    @_question
    def module_class(self, provenance: Provenance, base: ast.expr) -> bool:
        """Is ``base`` a class of another module of the project that is an ``nn.Module``?"""
        found = self.definition(provenance, base)
        return found is not None and found.kind == "class" and self._is_module_class(found)

    def _is_module_class(self, found: Definition) -> bool:
        summary = self.project.summary(found.path)
        return summary is not None and self.project.is_module_class(found.path, summary, found.qualname)

    @_question
    def imports_replacing_streams(self, provenance: Provenance) -> bool:
        """Does a module of the project this file imports (anywhere in it, two imports deep)
        put an object of its own in place of the output streams (``utils.setup_logger()``
        setting ``sys.stdout = Logger(path)``)?"""
        origins = set(provenance.imports.origins.values())
        return any(self.project.replaces_streams(imported)
                   for module, level, name in sorted(origins, key=repr)
                   for imported in self.project.imported_files(self.path, module, level, name))

    @_question
    def wrapper(self, provenance: Provenance, func: ast.expr) -> tuple[FileContext, ast.FunctionDef] | None:
        """The output wrapper (a function that only writes output: ``print0``) of another
        module of the project that ``func`` names, with its module's analysis."""
        found = self.definition(provenance, func)
        if found is None or found.kind != "function" or "." in found.qualname:
            return None
        defined = self.project.defined(found)
        if defined is None or not defined.may_write:
            return None

        def compute() -> bool:
            where = self._analysis(found)
            return where is not None and _in(where[0], lambda: found.qualname in output_wrappers(where[0]))

        if not self.project.answer(("wrapper", found.path, found.qualname), compute, False):
            return None
        where = self._analysis(found)
        self.project.pin(found.path)
        return where  # type: ignore[return-value]

    @_question
    def member(self, provenance: Provenance, cls: ast.ClassDef, attr: str) -> Definition | None:
        """The method or property ``attr`` that the class ``cls`` of this file inherits from
        a base class of another module of the project (the first base that has one)."""
        for base in cls.bases:
            found = self.definition(provenance, base)
            if found is None or found.kind != "class" or "." in found.qualname:
                continue
            summary = self.project.summary(found.path)
            if summary is None:
                continue
            inherited = self.project.member(found.path, summary, found.qualname, attr, 0)
            if inherited is not None:
                inherited = _with_via(inherited, list(found.via))
                self._depend(dict(inherited.via))  # type: ignore[union-attr]
                return inherited
        return None


# A call in a function's text: ``name(`` (not ``.name(``), or a method ``.name(``, matched
# in the text read backwards: ``(``, the name reversed, then the ``.`` before a method.
# Forwards, the pattern would be tried at every letter of the text; backwards, it starts
# with a literal ``(``, which the regular expression engine jumps between (5x faster).
_CALL_TEXT_REVERSED = re.compile(r"\(\s*(\w*[A-Za-z_])(?!\w)(\.?)")
_WRITE_METHODS = frozenset({*LOG_METHODS, *LOG_ONCE_METHODS, "print", "write"})


def _writing_functions(functions: dict[str, ast.FunctionDef], text: str | Text) -> dict[str, bool]:
    """Which top-level functions could be output wrappers: a short body that calls
    ``print``, a logging method or ``write``, or another such function of the module (a
    wrapper of a wrapper). Only for those is the module analysed to know.

    Read from the functions' text, not their trees (every module a file imports is
    summarised, and a walk of each function's tree costs more than its parse): a call
    written in a string or comment counts too, which only costs that module's analysis."""
    lines = text if isinstance(text, Text) else Text(text)
    return _writing_fixed_point({name: _calls_in(_text_of(f, lines)) if _short(f) else (False, set())
                                 for name, f in functions.items()})


def _short(function: ast.AST | None) -> bool:
    return type(function) is ast.FunctionDef and len(function.body) <= 20  # type: ignore[attr-defined]


def _text_of(function: ast.AST, lines: Text) -> str:
    """The text of a function's lines, from its ``def`` to its last line."""
    starts = lines.line_starts  # the lines as ``ast`` counts them
    end = function.end_lineno  # type: ignore[attr-defined]
    return lines.source[starts[function.lineno - 1]:starts[end] if end < len(starts) else None]  # type: ignore[attr-defined]


def _calls_in(text: str) -> tuple[bool, set[str]]:
    """Whether a function's text calls ``print``, a logging method or ``write``, and the plain
    names it calls (matched on the text reversed: see ``_CALL_TEXT_REVERSED``)."""
    writes = False
    callees: set[str] = set()
    for called, dot in _CALL_TEXT_REVERSED.findall(text[::-1]):
        called = called[::-1]
        if not dot:
            callees.add(called)
            writes = writes or called == "print"
        elif called in _WRITE_METHODS:
            writes = True
    return writes, callees


def _writing_fixed_point(calls: dict[str, tuple[bool, set[str]]], known: dict[str, bool] | None = None) -> dict[str, bool]:
    """Which of the functions of ``calls`` (each: whether it writes itself, the names it calls)
    write, themselves or through a function they call; ``known``: the answers for functions
    outside ``calls``."""
    known = known or {}
    writes = {name: direct for name, (direct, _) in calls.items()}
    changed = True
    while changed:
        changed = False
        for name, (_, callees) in calls.items():
            if not writes[name] and any(writes.get(c) or known.get(c) for c in callees):
                writes[name] = changed = True
    return writes


def _decoded(data: bytes) -> str | None:
    """A file's bytes as Python reads them (its coding declaration), with "\\n" line endings
    as the analysis sees them; None when they do not decode."""
    try:
        return importlib.util.decode_source(data).replace("\r\n", "\n").replace("\r", "\n")
    except (UnicodeDecodeError, LookupError, SyntaxError):
        return None


def _with_via(found: Definition | None, via: list[tuple[str, str]]) -> Definition | None:
    if found is None:
        return None
    return Definition(found.path, found.qualname, found.kind, tuple(dict.fromkeys((*via, *found.via))))


def _in(context: FileContext, compute: Callable[[], T]) -> T:
    """``compute()`` with ``context``'s index active (the module-level lookups of the tree
    answer for the file being asked about)."""
    if context.tree_index is None:
        return compute()
    with activated(context.tree_index):
        return compute()


def _package_root(path: Path) -> Path:
    """The folder above the outermost package holding ``path`` (where ``import pkg.x``
    looks for ``pkg``)."""
    folder = path.parent
    while (folder / "__init__.py").is_file() and folder.parent != folder:
        folder = folder.parent
    return folder


# -- traced code across modules ----------------------------------------------------------------


def calls_elsewhere(ctx: FileContext) -> list[tuple[str, str]]:
    """The functions of other modules of the project that this file's traced code calls:
    (the module's path, the function's qualified name: ``"helper"``, ``"Base.loss"``).
    A function traced code calls is traced too; so is a property it reads."""
    external = ctx.provenance.external
    if external is None or not ctx.traced:
        return []
    found_marks: dict[tuple[str, str], None] = {}
    for func in sorted(ctx.traced, key=ctx.positions.offset):
        cls = ctx.parents.get(func)
        for node in _calls_and_self_reads(func):
            found: Definition | None = None
            if type(node) is ast.Call:
                found = external.definition(ctx.provenance, node.func)  # type: ignore[attr-defined]
            elif type(cls) is ast.ClassDef and not _defined_in(cls, node.attr):  # type: ignore[attr-defined,arg-type]
                found = external.member(ctx.provenance, cls, node.attr)  # type: ignore[arg-type,attr-defined]
            if found is not None and found.kind == "function":
                found_marks[(str(found.path), found.qualname)] = None
    return list(found_marks)


def _calls_and_self_reads(func: ast.AST) -> Iterator[ast.AST]:
    """The calls of names of other modules (``helper(x)``, ``mod.helper(x)``), and the
    reads of ``self.x``, in ``func``'s body."""
    seen: set[str] = set()
    for stmt in func.body:  # type: ignore[attr-defined]
        for node in walk(stmt):
            t = type(node)
            if t is ast.Call:
                callee = node.func  # type: ignore[attr-defined]
                if type(callee) is ast.Name or (type(callee) is ast.Attribute and type(callee.value) is ast.Name
                                                and callee.value.id not in ("self", "cls")):  # type: ignore[attr-defined]
                    yield node
            elif t is ast.Attribute and type(node.value) is ast.Name and node.value.id == "self":  # type: ignore[attr-defined]
                if node.attr not in seen:  # type: ignore[attr-defined]
                    seen.add(node.attr)  # type: ignore[attr-defined]
                    yield node


def _defined_in(cls: ast.ClassDef, name: str) -> bool:
    """Does the class's own body define ``name`` (a method, or an attribute it assigns)?"""
    for stmt in cls.body:
        if type(stmt) in _FUNCTIONS and stmt.name == name:  # type: ignore[attr-defined]
            return True
        if type(stmt) in (ast.Assign, ast.AnnAssign):
            targets = stmt.targets if type(stmt) is ast.Assign else [stmt.target]  # type: ignore[attr-defined]
            if any(type(t) is ast.Name and t.id == name for t in targets):  # type: ignore[attr-defined]
                return True
    return False


_PROJECT: Project | None = None


def current() -> Project:
    """The project of this process: modules read once, answers kept while the files read
    are unchanged on disk."""
    global _PROJECT
    if _PROJECT is None:
        _PROJECT = Project()
    return _PROJECT


def forget() -> None:
    """Start afresh (a new run): the files may have changed. What the old project kept is
    let go of at once (its analyses refer back to it: left to the cyclic collector, they
    would stay while a run keeps the collector paused)."""
    global _PROJECT
    if _PROJECT is not None:
        _PROJECT._clear()
    _PROJECT = None
