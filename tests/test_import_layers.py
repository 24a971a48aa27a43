"""The analysis is built in layers: no module of ``codemods/`` imports, even inside a
function, a module that imports it back. A circle means two modules each answer half
of one question; the fact belongs in a module below both (as ``model.reductions`` and
``name_reads`` are)."""

from __future__ import annotations

import ast
from pathlib import Path

CODEMODS = Path(__file__).resolve().parent.parent / "codemods"


def _module_name(path: Path) -> str:
    parts = path.relative_to(CODEMODS).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports() -> dict[str, set[str]]:
    """Module -> the modules of ``codemods/`` it imports, at any depth of its code."""
    modules = {_module_name(p): p for p in CODEMODS.rglob("*.py")}
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.ImportFrom) or not node.level:
                continue
            base = package[: len(package) - (node.level - 1)]
            target = ".".join(base + ([node.module] if node.module else []))
            for candidate in [target, *(f"{target}.{a.name}".strip(".") for a in node.names)]:
                if candidate in graph and candidate != name:
                    graph[name].add(candidate)
    return graph


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_finder_sees_a_circle_made_inside_a_function():
    assert _circles({"a": {"b"}, "b": {"a"}, "c": {"a"}}) == [["a", "b"]]


def test_no_module_of_the_analysis_imports_one_that_imports_it_back():
    graph = _imports()
    assert {"model.provenance", "model.effects", "fixes.tensor_code", "model.scalar_shapes", "model.dtypes"} <= set(graph)
    assert "model.provenance" in graph["model.effects"] and "model.scalar_shapes" in graph["fixes.tensor_code"]
    assert _circles(graph) == []


# The packages, lowest first: a module may import its own package's and lower ones'.
# ``gen`` (new code as text) and ``shortcuts`` sit below them all; the rule interface
# (``rule``, ``site_rule``, ``advice``) sits between the fixes and the rules.
LAYERS = ("model", "fixes", "rule", "rules", "driver")
BASE = {"gen", "shortcuts", "graph_break_codes", "real_paths"}


def _layer(module: str) -> int:
    if module in BASE or module == "":
        return -1
    head = module.split(".")[0]
    return LAYERS.index("rule") if head in ("rule", "site_rule", "advice") else LAYERS.index(head)


def test_the_model_asks_nothing_of_the_fixes_the_rules_or_the_driver():
    graph = _imports()
    assert {"model.provenance", "fixes.tensor_code", "rules.where_if", "driver.engine"} <= set(graph)
    upward = {}
    for name, deps in graph.items():
        if name in BASE or name == "":
            continue
        above = sorted(dep for dep in deps if _layer(dep) > _layer(name))
        if above:
            upward[name] = above
    assert upward == {}
    # The one import of a base module from above: gen names FileContext to check types.
    assert {dep for dep in graph["gen"] if dep not in BASE} == {"model.context"}
