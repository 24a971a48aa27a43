"""Everything rules need to know about one parsed file."""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import libcst as cst

from .provenance import Certainty, Kind, Provenance
from .suppression import Suppressions
from .traced import traced_functions
from .tree import Index, Positions, index, number_of, parse_module, subtree_stop, walk


COMPILE_CHECKS = frozenset(
    {"is_compiling", "is_dynamo_compiling", "is_tracing", "is_scripting", "is_exporting", "is_fx_tracing"}
)
DISPLAY_METHODS = frozenset({"__repr__", "__str__", "__format__", "extra_repr"})
T = TypeVar("T")


@dataclass
class FileContext:
    path: Path
    source: str
    module: cst.Module
    positions: Positions
    parents: dict[cst.CSTNode, cst.CSTNode]
    by_type: dict[type, list[cst.CSTNode]]
    provenance: Provenance
    traced: set[cst.FunctionDef]
    suppressions: Suppressions
    flush_every: int | None = None  # ``apply --flush-every N`` for the deferred-logging runtime
    tree_index: Index | None = field(default=None, repr=False)
    # Indexes of this file built on first use (see :meth:`memo`).
    _memo: dict[object, object] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def build(cls, path: Path, source: str, flush_every: int | None = None) -> FileContext:
        """Parse ``source``; raises ``libcst.ParserSyntaxError`` when it does not parse."""
        module = parse_module(source)
        found = index(module)
        parents = found.parents
        provenance = Provenance(module, parents)
        traced = traced_functions(module, provenance.imports, parents)
        return cls(path, source, module, found.positions, parents, found.by_type, provenance, traced,
                   Suppressions(source), flush_every, found)

    def activate(self) -> None:
        """Analyse this file again after another one was parsed in this process."""
        if self.tree_index is not None:
            self.tree_index.activate()

    # -- navigation ---------------------------------------------------------------------------

    def nodes(self, *types: type) -> list[cst.CSTNode]:
        if len(types) == 1:
            return self.by_type.get(types[0], [])
        found = [n for t in types for n in self.by_type.get(t, [])]
        found.sort(key=self.positions.offset)
        return found

    def ancestors(self, node: cst.CSTNode) -> Iterator[cst.CSTNode]:
        current = self.parents.get(node)
        while current is not None:
            yield current
            current = self.parents.get(current)

    def memo(self, key: object, build: Callable[[], T]) -> T:
        """``build()``, made once for this file under ``key``: the indexes that answer a
        question per site (which names spell ``x`` in this function, which sites lie below
        this test) without a pass over the whole file for each site."""
        try:
            return self._memo[key]  # type: ignore[return-value]
        except KeyError:
            found = self._memo[key] = build()
            return found

    def sites_below(self, sites: Sequence, root: cst.CSTNode) -> list:
        """The sync sites of ``sites`` whose node is ``root`` or lies below it, in the order of
        ``sites``. A subtree is a run of source-order numbers: this is a search in the sites
        sorted by number (sorted once per list), not a walk up from every site for each root."""
        number = number_of(root)
        if number is None:  # a node built after indexing: nothing indexed lies below it
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

    def names(self, value: str, within: cst.CSTNode | None = None) -> list[cst.Name]:
        """The ``Name`` nodes spelled ``value`` (at or below ``within``), in source order."""
        def by_value() -> dict[str, tuple[list[int], list[cst.Name]]]:
            found: dict[str, tuple[list[int], list[cst.Name]]] = {}
            for node in self.nodes(cst.Name):
                numbers, nodes = found.setdefault(node.value, ([], []))  # type: ignore[attr-defined]
                numbers.append(number_of(node))  # type: ignore[arg-type]  # every node of the index has one
                nodes.append(node)  # type: ignore[arg-type]
            return found

        numbers, nodes = self.memo("names", by_value).get(value, ([], []))
        if within is None:
            return list(nodes)
        number = number_of(within)
        if number is None:  # a node built after indexing
            return [n for n in walk(within) if type(n) is cst.Name and n.value == value]  # type: ignore[attr-defined]
        lo = bisect.bisect_left(numbers, number)
        return nodes[lo:bisect.bisect_left(numbers, subtree_stop(number), lo)]

    def augmented_names(self, value: str) -> list[cst.Name]:
        """The targets of ``value += ...`` (and the other augmented assignments), in source order."""
        def by_value() -> dict[str, list[cst.Name]]:
            found: dict[str, list[cst.Name]] = {}
            for node in self.nodes(cst.AugAssign):
                target = node.target  # type: ignore[attr-defined]
                if type(target) is cst.Name:
                    found.setdefault(target.value, []).append(target)
            return found

        return self.memo("augmented names", by_value).get(value, [])

    def below(self, node: cst.CSTNode, root: cst.CSTNode) -> bool:
        """Is ``node`` ``root`` or inside it? (As a walk up from ``node`` would say.)"""
        number, top = number_of(node), number_of(root)
        if number is None or top is None:
            return node is root or any(parent is root for parent in self.ancestors(node))
        return top <= number < subtree_stop(top)

    def enclosing_function(self, node: cst.CSTNode) -> cst.FunctionDef | None:
        for parent in self.ancestors(node):
            if isinstance(parent, cst.FunctionDef):
                return parent
        return None

    def in_traced_code(self, node: cst.CSTNode) -> bool:
        func = self.enclosing_function(node)
        return func is not None and func in self.traced and not self.compile_guard(node)

    def compile_guard(self, node: cst.CSTNode) -> cst.If | None:
        """The enclosing ``if`` that tests ``torch.compiler.is_compiling()`` (or
        ``torch.jit.is_tracing()``, ...): code under it already keeps out of, or
        is written for, compiled regions."""
        child = node
        for parent in self.ancestors(node):
            in_branch = isinstance(parent, cst.If) and (child is parent.body or child is parent.orelse)
            child = parent
            if in_branch:
                for sub in walk(parent.test):
                    if isinstance(sub, cst.Call):
                        func = sub.func
                        name = func.attr.value if isinstance(func, cst.Attribute) else getattr(func, "value", "")
                        if name in COMPILE_CHECKS:
                            return parent
        return None

    def in_display_method(self, node: cst.CSTNode) -> bool:
        """Inside ``__repr__`` / ``__str__`` / ``extra_repr``: code that exists to show values."""
        func = self.enclosing_function(node)
        return func is not None and func.name.value in DISPLAY_METHODS

    def position(self, node: cst.CSTNode) -> tuple[int, int]:
        """1-based line and column of ``node``."""
        start = self.positions[node].start
        return start.line, start.column + 1

    def code(self, node: cst.CSTNode) -> str:
        return self.module.code_for_node(node)

    # -- provenance ---------------------------------------------------------------------------

    def kind(self, expr: cst.CSTNode) -> Kind:
        return self.provenance.kind(expr)

    def is_tensor(self, expr: cst.CSTNode) -> bool:
        return self.provenance.is_tensor(expr)

    def certainty(self, expr: cst.CSTNode) -> Certainty:
        """:attr:`Certainty.TENSOR` where the code proves ``expr`` is a tensor (what a
        rewrite needs), :attr:`Certainty.POSSIBLY` where only a heuristic or nothing
        says so (a report then says "if `x` is a tensor"), :attr:`Certainty.NOT_TENSOR`."""
        return self.provenance.certainty(expr)

    def certainly_tensor(self, expr: cst.CSTNode) -> bool:
        return self.provenance.certainty(expr) is Certainty.TENSOR

    def on_cpu(self, expr: cst.CSTNode) -> bool:
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
