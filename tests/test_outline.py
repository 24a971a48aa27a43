"""A module's outline (its text cut at the definitions written at column 0), and the
summaries made from it: what another file asks is parsed alone, and every wrong cut is
caught, the module then parsed whole."""

from __future__ import annotations

import ast
import json

import pytest
from conftest import parsed_fixture_modules
from fixitem.codemods.model import project
from fixitem.codemods.model.outline import outline, parse_part
from fixitem.codemods.model.provenance import Kind

MODULE = (
    "import torch\n"
    "from .utils import helper\n\n\n"
    "@torch.no_grad()\n"
    "@staticmethod\n"
    "def first(x) -> torch.Tensor:\n"
    "    return x * 2\n\n\n"
    "# a comment at column 0 stays with the definition above\n"
    "class Net(\n"
    "    torch.nn.Module,\n"
    "):\n"
    "    def forward(self, x):\n"
    "        return x\n\n\n"
    "if helper():\n"
    "    def nested(x):\n"
    "        return x\n\n\n"
    "async def fetch(url):\n"
    "    return url\n\n\n"
    "VALUE = first(1)\n"
)


def described(definitions: dict[str, project.Defined]) -> dict[str, tuple]:
    """Definitions as comparable values (their bases as trees' dumps)."""
    return {name: (d.kind, [ast.dump(b) for b in d.bases], d.methods, d.may_write, d.returns, d.opaque, d.passes)
            for name, d in definitions.items()}


def test_the_outline_cuts_each_definition_at_column_0_with_its_decorators():
    found = outline(MODULE)
    assert found is not None
    assert [(p.kind, p.name, p.line) for p in found.parts] == [
        ("function", "first", 5), ("class", "Net", 12), ("function", "fetch", 24)]
    first = found.parts[0]
    assert MODULE[first.start:first.end].startswith("@torch.no_grad()\n@staticmethod\ndef first")
    # ``):`` of the class's bases does not cut it; the comment after ``first`` goes with it.
    assert "# a comment" in MODULE[first.start:first.end]
    assert MODULE[found.parts[1].start:found.parts[1].end].rstrip().endswith("return x")
    # The outline's tree: the other statements, on their own lines, parts left out.
    assert [type(s).__name__ for s in found.module.body] == ["Import", "ImportFrom", "If", "Assign"]
    assert found.module.body[-1].lineno == MODULE.count("\n")
    # Each part parses alone (its lines counted from its first), as it is in the module.
    node = parse_part(MODULE, found.parts[1])
    assert isinstance(node, ast.ClassDef) and node.lineno == 1 and node.body[0].lineno == 4
    whole = ast.parse(MODULE)
    ast.increment_lineno(node, found.parts[1].line - 1)
    assert ast.dump(node, include_attributes=True) == ast.dump(whole.body[3], include_attributes=True)


@pytest.mark.parametrize("text", [
    # A template holds what looks like a definition: the outline's string spans its part.
    'TEMPLATE = """\ndef forward(x):\n    return x.item()\n"""\n',
    # A line of a docstring at column 0 ends the part early: the outline does not parse.
    'def f(x):\n    """Scale.\nTwice."""\n    return x * 2\n',
    # A matrix product continued at column 0, inside parentheses.
    "y = (a\n@ b)\n",
    # Decorators of something else than a definition, cut by a line at column 0.
    '@register(\n"name")\ndef f(x):\n    return x\n',
])
def test_a_wrong_cut_is_caught_by_the_outline(text):
    try:
        assert outline(text) is None
    except SyntaxError:
        pass  # (its caller then parses the text whole)
    summary, module = project.Summary.of_text(text, "digest")
    assert module is not None  # parsed whole
    assert summary.to_data() == project.Summary(ast.parse(text), "digest", text).to_data()
    assert summary.kind_of("forward") is None


def test_a_part_that_does_not_parse_alone_makes_the_summary_read_the_module_whole(parsed_texts):
    # The outline parses (the line at column 0 starts a string of its own), but ``f``'s part
    # ends in the middle of its string: asked about, ``f`` is not there, and the module is
    # read again whole.
    text = (
        "import torch\n\n\n"
        "def f(x) -> torch.Tensor:\n"
        "    return x == \\\n"
        '"""digraph{\n'
        '"ordering"="out"\n'
        '"""\n\n\n'
        "def g(x) -> torch.Tensor:\n"
        "    return x\n"
    )
    summary, module = project.Summary.of_text(text, "digest")
    assert module is None and summary.kind_of("f") == "function"
    eager = project.Summary(ast.parse(text), "digest", text)
    assert described({"f": summary.definition("f")}) == described({"f": eager.definition("f")})
    assert summary.definition("f").returns is Kind.TENSOR and summary._rebuilt == 1
    assert summary.to_data() == eager.to_data()


@pytest.fixture
def parsed_texts(monkeypatch) -> list[str]:
    texts: list[str] = []
    parse = ast.parse

    def counting(source, *args, **options):
        texts.append(source)
        return parse(source, *args, **options)

    monkeypatch.setattr(ast, "parse", counting)
    return texts


def test_a_summary_parses_only_the_definitions_asked_about(parsed_texts):
    text = "import torch\n\n\n" + "".join(
        f"def f{i}(x) -> torch.Tensor:\n    return x * {i}\n\n\n" for i in range(50)) + \
        "def log0(*args):\n    _emit(*args)\n\n\ndef _emit(*args):\n    print(*args)\n"
    summary, module = project.Summary.of_text(text, "digest")
    assert module is None and len(parsed_texts) == 1  # the outline alone
    assert summary.names >= {"torch", "f0", "f49", "log0", "_emit"}
    assert summary.kind_of("f7") == "function" and len(parsed_texts) == 1
    assert summary.definition("f7").returns is Kind.TENSOR
    assert [t.strip() for t in parsed_texts[1:]] == ["def f7(x) -> torch.Tensor:\n    return x * 7"]
    # A wrapper of a wrapper: the functions it calls are parsed to know.
    assert summary.definition("log0").may_write
    assert [t.strip().splitlines()[0] for t in parsed_texts[2:]] == ["def log0(*args):", "def _emit(*args):"]
    assert summary.definition("f3").may_write is False
    eager = project.Summary(ast.parse(text), "digest", text)
    assert described(summary.definitions()) == described(eager.definitions())


def test_a_summary_kept_with_parts_not_parsed_reads_them_from_the_text_it_is_given():
    text = "import torch\n\n\n" + "".join(
        f"def f{i}(x) -> torch.Tensor:\n    return x * {i}\n\n\n" for i in range(5)) + \
        "class Net(torch.nn.Module):\n    def forward(self, x):\n        return x\n"
    summary, _ = project.Summary.of_text(text, "digest")
    summary.definition("f1")
    back = project.Summary.from_data(json.loads(json.dumps(summary.to_data())))
    assert set(back.to_data()["parts"]) == {"f0", "f2", "f3", "f4", "Net"}
    back.attach(text)
    eager = project.Summary(ast.parse(text), "digest", text)
    assert described(back.definitions()) == described(eager.definitions())
    assert back.definition("Net").methods == frozenset({"forward"})
    # Once every part is worked out, the text is let go of and none is left to write.
    assert back.to_data()["parts"] == {} and back._text is None


def test_every_fixture_module_s_summary_from_its_outline_is_its_summary_from_its_tree():
    checked = 0
    for path, text, module in parsed_fixture_modules():
        eager = project.Summary(module, "digest", text)
        lazy, _ = project.Summary.of_text(text, "digest")
        assert described(lazy.definitions()) == described(eager.definitions()), path
        assert (lazy.names, lazy.origins, lazy._kinds, lazy._single) == \
            (eager.names, eager.origins, eager._kinds, eager._single), path
        checked += 1
    assert checked > 90


CLASSES = (
    "import torch\nfrom torch import nn\n\n\n"
    "@register(\n    'big',\n)\n"
    "class Big(  # a comment: with a colon\n    nn.Module,\n    Mixin,\n):\n"
    '    """A model.\n\n        def not_a_method(self):\n    is in its docstring.\n    """\n\n'
    "    size = 3\n\n"
    "    @property\n    def width(self):\n        return 2\n\n"
    "    def forward(self, x):\n        return x\n\n"
    "    class Config:\n        def inner(self):\n            pass\n\n"
    "    async def fetch(self):\n        return 1\n\n\n"
    "class Small(nn.Module):\n    def forward(self, x):\n        return x * 2\n\n\n"
    "class Tiny: pass\n"
)


def test_a_class_s_bases_come_from_its_header_alone():
    from fixitem.codemods.model.outline import parse_header

    found = outline(CLASSES)
    big, small, tiny = found.parts
    header = parse_header(CLASSES, big)
    assert [ast.unparse(b) for b in header.bases] == ["nn.Module", "Mixin"] and len(header.decorator_list) == 1
    assert [type(s) for s in header.body] == [ast.Pass]  # (its body is not read)
    assert [ast.unparse(b) for b in parse_header(CLASSES, small).bases] == ["nn.Module"]
    assert parse_header(CLASSES, tiny) is None  # a header that does not end its line: parsed whole


def test_a_class_s_methods_are_read_from_its_body_cut_at_them():
    from fixitem.codemods.model.outline import method_names

    big, small, _ = outline(CLASSES).parts
    whole = ast.parse(CLASSES)
    for part, node in ((big, whole.body[2]), (small, whole.body[3])):
        expected = frozenset(s.name for s in node.body if type(s) in (ast.FunctionDef, ast.AsyncFunctionDef))
        assert method_names(CLASSES, part) == expected
    assert method_names(CLASSES, big) == {"width", "forward", "fetch"}  # not the nested class's, nor the docstring's
    # A line of the docstring at the body's indentation that looks like a method: a wrong cut, caught.
    fooled = CLASSES.replace("        def not_a_method", "    def not_a_method")
    assert method_names(fooled, outline(fooled).parts[0]) is None
    summary, _ = project.Summary.of_text(fooled, "digest")
    assert summary.methods("Big") == {"width", "forward", "fetch"}  # the class parsed whole instead


def test_whether_a_class_is_a_module_parses_its_header_not_its_body(parsed_texts):
    summary, _ = project.Summary.of_text(CLASSES, "digest")
    parsed_texts.clear()
    assert [ast.unparse(b) for b in summary.definition("Big").bases] == ["nn.Module", "Mixin"]
    assert len(parsed_texts) == 1 and parsed_texts[0].rstrip().endswith("):\n pass")  # the header alone
    assert summary.methods("Big") == {"width", "forward", "fetch"}
    assert "return 2" not in "".join(parsed_texts)  # the methods' bodies are never parsed
    eager = project.Summary(ast.parse(CLASSES), "digest", CLASSES)
    assert described(summary.definitions()) == described(eager.definitions())
