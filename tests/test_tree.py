"""The one-pass index (codemods/tree.py) agrees with libcst's own answers."""

from __future__ import annotations

from pathlib import Path

import libcst as cst
import pytest
from libcst.metadata import MetadataWrapper, PositionProvider

from fixitem.codemods import shortcuts
from fixitem.codemods.tree import children_of, index, module_code, nodes_within, parse_module, walk

ROOT = Path(__file__).resolve().parent.parent
SOURCES = sorted(
    [*ROOT.glob("fixtures/**/*.py"), *ROOT.glob("codemods/**/*.py"), *ROOT.glob("fixitem/*.py")]
)
TRICKY = {
    "crlf": "import torch\r\nif x:\r\n    y = (1 +\r\n         2)\r\n",
    "lone_cr": "a = 1\rb = [\r  2,\r]\r",
    "tabs_unicode": "def f(x):\n\ts = 'héllo ✓'  # ünïcode\n\treturn x.item()\n",
    "continuation": "x = 1 + \\\n    2\nwith a as b, c as d:\n    del b, d\n",
    "no_trailing_newline": "import torch as t\nt.ones(1).item()",
    "decorators": "@torch.compile\n@other(1)\ndef f(x: 'T' = 3, *a, k=lambda q: q, **kw) -> int:\n    return [i for i in x if i]\n",
}


def _modules():
    for path in SOURCES:
        try:
            text = path.read_bytes().decode("utf-8")
        except UnicodeDecodeError:
            continue
        try:
            yield path.name, cst.parse_module(text)
        except cst.ParserSyntaxError:
            continue
    for name, text in TRICKY.items():
        yield name, cst.parse_module(text)


MODULES = list(_modules())


@pytest.mark.parametrize("name,module", MODULES, ids=[m[0] for m in MODULES])
def test_positions_parents_and_children_match_libcst(name, module):
    expected = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
    found = index(module)
    assert set(found.positions) == set(expected)
    for node, where in expected.items():
        assert found.positions[node] == where, (name, type(node).__name__)
    for node in found.order:
        kids = list(node.children)
        assert set(map(id, children_of(node))) == set(map(id, kids))
        for kid in kids:
            assert found.parents[kid] is node


@pytest.mark.parametrize("name,module", MODULES, ids=[m[0] for m in MODULES])
def test_source_order_and_subtrees(name, module):
    found = index(module)
    lines = [found.positions[n].start.line for n in found.order if isinstance(n, cst.BaseStatement)]
    assert lines == sorted(lines)  # numbering follows the text
    assert list(walk(module)) == found.order
    for node in found.order[:: max(1, len(found.order) // 50)]:
        below = list(walk(node))
        # walk() of a node is its whole subtree, depth first
        stack, expected = [node], []
        while stack:
            current = stack.pop()
            expected.append(current)
            stack.extend(reversed(current.children))
        assert set(map(id, below)) == set(map(id, expected))
        assert [n for n in below if isinstance(n, cst.Call)] == nodes_within(node, cst.Call)


def test_nodes_built_after_indexing_fall_back_to_libcst():
    module = cst.parse_module("x = f(1)\n")
    index(module)
    fresh = cst.parse_expression("g(a, b)")
    assert [type(n).__name__ for n in walk(fresh)][:2] == ["Call", "Name"]
    assert nodes_within(fresh, cst.Name) == [fresh.func, fresh.args[0].value, fresh.args[1].value]
    assert children_of(fresh) == tuple(fresh.children)


@pytest.mark.parametrize("name,module", MODULES, ids=[m[0] for m in MODULES])
def test_lean_parse_and_code_generation_give_libcst_results(name, module):
    text = module.code
    lean = parse_module(text)
    assert lean.deep_equals(module)
    assert module_code(lean) == text
    fast = index(lean)
    fast_ranges = [fast.positions[n] for n in fast.order]
    with shortcuts.disabled():
        assert module_code(lean) == text
        slow = index(lean)
        assert slow.order == fast.order
        assert [slow.positions[n] for n in slow.order] == fast_ranges


def test_lean_parse_still_raises_and_validates_afterwards():
    with pytest.raises(cst.ParserSyntaxError):
        parse_module("def f(:\n")
    # validation of hand-built nodes is back on after a (failed) parse
    with pytest.raises(cst.CSTValidationError):
        cst.Name("not a name")
    found = index(parse_module("x = (a +\n     b)\n"))
    wrapper = MetadataWrapper(cst.parse_module("x = (a +\n     b)\n"), unsafe_skip_copy=True)
    expected = wrapper.resolve(PositionProvider)
    assert sorted((r.start.line, r.start.column, r.end.line, r.end.column) for r in found.positions.values()) == sorted(
        (r.start.line, r.start.column, r.end.line, r.end.column) for r in expected.values()
    )
