"""The one-pass index over Python's ``ast`` (codemods/tree.py) and the text answers of
``FileContext`` (spans with their parentheses, comments) agree with Python's own view."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from fixitem.codemods import gen
from fixitem.codemods.model.context import FileContext
from fixitem.codemods.model.reaching import Bindings, _names_bound_by
from fixitem.codemods.model.suppression import Suppressions
from fixitem.codemods.model.tree import (
    _numbered,
    _numbered_with_a_stack,
    children_of,
    index,
    nodes_in_body,
    nodes_within,
    number_of,
    parse_module,
    walk,
)

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
    "mixed_call": "f(a, *b, k=1, *c, **d)\n{1: x, **y, 2: z}\nv = p if q else r\n",
    "fstring": 'print(f"é {x.item():.3f} {(y)!r} {z:{w}}")\n',
}


def _modules():
    for path in SOURCES:
        try:
            text = path.read_bytes().decode("utf-8")
            yield path.name, text, parse_module(text)
        except (UnicodeDecodeError, SyntaxError):
            continue
    for name, text in TRICKY.items():
        yield name, text, parse_module(text)


MODULES = list(_modules())
SHARED = (ast.expr_context, ast.operator, ast.unaryop, ast.cmpop, ast.boolop)


def _context(text: str, module: ast.Module) -> FileContext:
    found = index(module, text)
    return FileContext(Path("x.py"), text, module, found.positions, found.parents, found.by_type, None,  # type: ignore[arg-type]
                       set(), Suppressions(text), None, found)


def _char_columns(text: str):
    lines = [line.encode("utf-8") for line in text.replace("\r\n", "\n").replace("\r", "\n").split("\n")]
    return lambda line, byte_column: len(lines[line - 1][:byte_column].decode("utf-8"))


@pytest.mark.parametrize("name,text,module", MODULES, ids=[m[0] for m in MODULES])
def test_every_node_once_with_its_parent_and_position(name, text, module):
    found = index(module, text)
    expected = [n for n in ast.walk(module) if not isinstance(n, SHARED)]
    assert len(found.order) == len(expected)
    assert set(map(id, found.order)) == set(map(id, expected))
    column = _char_columns(text)
    in_fstring = {id(n) for j in ast.walk(module) if isinstance(j, ast.JoinedStr) for n in ast.walk(j) if n is not j}
    for node in found.order:
        kids = [k for k in ast.iter_child_nodes(node) if not isinstance(k, SHARED)]
        assert set(map(id, children_of(node))) == set(map(id, kids))
        for kid in kids:
            assert found.parents[kid] is node
        # (A tuple's and a generator's parentheses are counted around them, below.)
        if isinstance(node, (ast.expr, ast.stmt)) and id(node) not in in_fstring and not isinstance(
                node, (ast.Tuple, ast.GeneratorExp)):
            where = found.positions[node]
            assert (where.start.line, where.start.column) == (node.lineno, column(node.lineno, node.col_offset))
            assert (where.end.line, where.end.column) == (
                node.end_lineno, column(node.end_lineno, node.end_col_offset))


@pytest.mark.parametrize("name,text,module", MODULES, ids=[m[0] for m in MODULES])
def test_source_order_and_subtrees(name, text, module):
    found = index(module, text)
    starts = [found.positions.offset(n) for n in found.order if isinstance(n, (ast.Name, ast.Call, ast.stmt))
              and not isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
              and not isinstance(found.parents.get(n), (ast.JoinedStr, ast.FormattedValue))]
    assert starts == sorted(starts)  # numbering follows the text
    assert list(walk(module)) == found.order
    for node in found.order[:: max(1, len(found.order) // 50)]:
        below = list(walk(node))
        expected = [n for n in ast.walk(node) if not isinstance(n, SHARED)]
        assert set(map(id, below)) == set(map(id, expected))
        assert [n for n in below if isinstance(n, ast.Call)] == nodes_within(node, ast.Call)


@pytest.mark.parametrize("name,text,module", MODULES, ids=[m[0] for m in MODULES])
def test_the_recursive_numbering_is_the_one_of_the_plain_walk(name, text, module):
    # The fast numbering recurses; the one it falls back on (for trees too deep to recurse)
    # keeps a stack of its own. Both give the same tables.
    assert _numbered(module) == _numbered_with_a_stack(module)


def test_a_tree_deeper_than_the_recursion_limit_is_indexed(monkeypatch):
    # ``a0 + a1 + ... + a1999`` nests 2,000 deep: deeper than Python lets a function recurse.
    text = "x = " + " + ".join(f"a{i}" for i in range(2000)) + "\ny = f(x)\n"
    module = parse_module(text)
    with pytest.raises(RecursionError):
        _numbered(module)
    found = index(module, text)
    assert len(found.order) == len([n for n in ast.walk(module) if not isinstance(n, SHARED)])
    assert [n.id for n in nodes_within(module, ast.Name)][-3:] == ["y", "f", "x"]
    last = module.body[1].value.args[0]
    assert found.parents[last] is module.body[1].value
    assert found.positions[last].start.line == 2


def test_the_nodes_of_a_block_are_those_of_its_statements_only():
    # Calls in a decorator, a default value or an annotation are the function's, not its body's.
    text = ("@deco(a())\ndef f(x=b(), *, y: c() = d()) -> e():\n    g()\n    def h(z=i()):\n        j()\n"
            "    return [k() for _ in l()]\n")
    module = parse_module(text)
    index(module, text)
    func = module.body[0]
    found = nodes_in_body(func.body, ast.Call, ast.Return)
    assert [n.func.id if isinstance(n, ast.Call) else "return" for n in found] == ["g", "i", "j", "return", "k", "l"]
    assert found == sorted((n for stmt in func.body for n in nodes_within(stmt, ast.Call, ast.Return)),
                           key=lambda n: (n.lineno, n.col_offset))
    assert nodes_in_body([], ast.Call) == []
    fresh = ast.parse("m()\nn()\n").body  # statements of a tree that was not indexed
    assert [n.func.id for n in nodes_in_body(fresh, ast.Call)] == ["m", "n"]


def test_a_tree_that_was_not_indexed_is_walked_in_source_order():
    index(parse_module("x = f(1)\n"), "x = f(1)\n")
    fresh = ast.parse("g(a, k=b, *c)", mode="eval").body
    assert [type(n).__name__ for n in walk(fresh)][:2] == ["Call", "Name"]
    assert [n.id for n in nodes_within(fresh, ast.Name)] == ["g", "a", "b", "c"]


def test_parse_raises_syntax_errors_and_prints_no_warnings(capfd):
    with pytest.raises(SyntaxError):
        parse_module("def f(:\n")
    parse_module('pattern = "\\d+"\n')  # an invalid escape: Python warns when it compiles this
    assert capfd.readouterr().err == ""


@pytest.mark.parametrize(("code", "text", "expected"), [
    ("(a + b).sum()\n", "a + b", "(a + b)"),
    ("f((a))\n", "a", "(a)"),
    ("f(a)\n", "a", "a"),
    ("f(( a ), b)\n", "a", "( a )"),
    ("(f)(a)\n", "f", "(f)"),
    ("x = ((a  # note\n     + b))\n", "a  # note\n     + b", "((a  # note\n     + b))"),
    ("class A(B): pass\n", "B", "B"),
    ("g(k=(1))\n", "1", "(1)"),
    ("y = [(a) for a in (b)]\n", "b", "(b)"),
    ("t = (a, b)\n", "a, b", "(a, b)"),
    ("t = (a), (b)\n", "(a), (b)", "(a), (b)"),
    ("t = ((a, b),)\n", "a, b", "(a, b)"),
    ("f(x for x in y)\n", "x for x in y", "x for x in y"),
    ("g = (x for x in y)\n", "x for x in y", "(x for x in y)"),
    ("f(( x for x in y ))\n", "x for x in y", "( x for x in y )"),
])
def test_an_expression_has_the_parentheses_that_are_its_own(code, text, expected):
    module = parse_module(code)
    ctx = _context(code, module)
    [node] = [n for n in walk(module) if isinstance(n, ast.expr) and ctx.source.__getitem__(
        slice(*ctx.positions.span(n))) == text]
    assert ctx.code(node) == expected
    assert ctx.parenthesized(node) is (expected != text)


def test_f_string_parts_span_their_braces():
    code = TRICKY["fstring"]
    ctx = _context(code, parse_module(code))
    parts = [ctx.code(n) for n in ctx.nodes(ast.FormattedValue)]
    assert parts == ["{x.item():.3f}", "{(y)!r}", "{z:{w}}", "{w}"]
    [read] = [n for n in ctx.nodes(ast.Call) if ctx.code(n) == "x.item()"]
    assert ctx.position(read) == (1, 12)  # characters: the UTF-8 bytes of "é" would make it 13


def test_a_constant_written_as_an_f_string_field_spans_itself():
    """``f"{'time (ms)':>10s}"``: the field's expression is a constant with a place of its
    own (the literal parts of an f-string are spanned by the f-string)."""
    code = "LOGGER.info(f\"{'time (ms)':>10s}  module {'-'}\")\n"
    ctx = _context(code, parse_module(code))
    assert [ctx.code(n) for n in ctx.nodes(ast.FormattedValue)] == ["{'time (ms)':>10s}", "{'-'}"]
    fields = [n.value for n in ctx.nodes(ast.FormattedValue)]
    assert [ctx.code(n) for n in fields] == ["'time (ms)'", "'-'"]


def test_comments_that_ast_drops_are_read_from_the_text():
    code = (
        "def f(x):  # header\n"
        "    # above the if\n"
        "\n"
        "    if x:  # on the if\n"
        "        y = 1  # after y\n"
        "        # end of the body\n"
        "    # above else\n"
        "    else:  # on else\n"
        "        y = 2; z = 3\n"
        "    return y\n"
    )
    module = parse_module(code)
    ctx = _context(code, module)
    func = module.body[0]
    test = func.body[0]
    assert ctx.header_comment(func) == "# header"
    assert ctx.header_comment(test) == "# on the if"
    assert ctx.leading_comments(test) == ["# above the if"]
    assert ctx.trailing_comment(test.body[0]) == "# after y"
    assert ctx.trailing_comment(test.orelse[0]) is None  # ``z = 3`` follows it
    assert ctx.else_line(test) == 8
    assert ctx.else_comments(test) == ["# above else", "# on else"]
    assert ctx.leading_comments(func.body[1]) == []  # the body's own comment is not the next statement's
    assert ctx.indent(test.orelse[1]) == "        " and ctx.field_of(test.orelse[1]) == "orelse"


def test_new_code_prints_the_files_nodes_as_their_own_text():
    code = "if (x.sum()).item() > 0:\n    y = (x  # keep\n         + 1)\n"
    module = parse_module(code)
    ctx = _context(code, module)
    test = module.body[0].test
    read = test.left
    where = gen.Call(gen.Attribute("torch", "where"), [test, module.body[0].body[0].value, "y"])
    # Printed where the ``if`` stands (no indentation), the value's second line loses the
    # indentation of the block it stood in, as it would moving out of that block by hand.
    assert gen.show(ctx, where) == "torch.where((x.sum()).item() > 0, (x  # keep\n     + 1), y)"
    assert gen.show(ctx, where, "    ") == "torch.where((x.sum()).item() > 0, (x  # keep\n         + 1), y)"
    assert ctx.code(module.body[0].body[0].value) == "(x  # keep\n     + 1)"
    assert gen.show(ctx, gen.method_call(ctx, test, "float")) == "((x.sum()).item() > 0).float()"
    assert gen.show(ctx, gen.method_call(ctx, read, "float")) == "(x.sum()).item().float()"
    spliced = gen.Splice(test, {read: "t"})
    assert gen.show(ctx, spliced) == "t > 0"
    assert gen.kept_nodes(ctx, [read], [spliced]) == []
    assert gen.kept_nodes(ctx, [read], [where]) == [read]
    assert gen.kept_nodes(ctx, [read], [gen.Lambda(["x"], test)]) == []  # runs later
    assert gen.show(ctx, gen.substitute(where, {read: gen.Raw("t")}, ctx), "    ") == (
        "torch.where(t > 0, (x  # keep\n         + 1), y)")
    wide = gen.Assign("y", gen.Call("torch.where", ["c", "a", "b"], one_per_line=True), comments=["# moved"])
    assert wide.render(ctx, "    ") == "# moved\n    y = torch.where(\n        c,\n        a,\n        b,\n    )"


@pytest.mark.parametrize("name,text,module", MODULES, ids=[m[0] for m in MODULES])
def test_each_nodes_scope_is_found_by_numbers_as_by_parents(name, text, module):
    # The walk up by node numbers (the fast one) and the walk up through the parents'
    # mapping place every node of the file in the same scope.
    provenance = FileContext.build(Path("x.py"), text, module=module).provenance
    for node in walk(module):
        assert provenance._find_scope(node) is provenance._find_scope_by_nodes(node)


@pytest.mark.parametrize("name,text,module", MODULES, ids=[m[0] for m in MODULES])
def test_where_each_name_is_bound_is_what_a_walk_of_the_binding_nodes_finds(name, text, module):
    # ``Bindings`` reads the index a node type at a time; a walk of the tree in source order,
    # asking each binding node which names it binds, gives the same numbers.
    index(module, text)
    expected: dict[str, list[int]] = {}
    for node in walk(module):
        if type(node) in Bindings.TYPES:
            for spelled in _names_bound_by(node):
                expected.setdefault(spelled, []).append(number_of(node))
    assert Bindings(module)._at == expected
