"""What torch's APIs return, read from the installed torch's type stubs."""

from __future__ import annotations

import ast
import json
import os
from pathlib import Path

import pytest
from fixitem.codemods.driver.engine import process
from fixitem.codemods.driver.registry import all_rules
from fixitem.codemods.model import torch_stubs
from fixitem.codemods.model.context import FileContext
from fixitem.codemods.model.provenance import Kind


@pytest.fixture(scope="module")
def table() -> torch_stubs.StubTable:
    folder = torch_stubs.torch_folder()
    assert folder is not None and (folder / "_C" / "__init__.pyi").is_file()
    return torch_stubs.build(folder)


@pytest.mark.parametrize(
    "method, kind",
    [
        ("storage_offset", "int"), ("dim", "int"), ("numel", "int"), ("element_size", "int"),
        ("is_contiguous", "bool"), ("item", "number"), ("tolist", "list"), ("numpy", "numpy"),
        ("sum", "tensor"), ("unbind", "tensors"),
    ],
)
def test_tensor_methods_return_what_the_stubs_say(table, method, kind):
    assert table.method_kind(method) == kind


def test_overloads_are_chosen_by_the_call_and_disagreeing_ones_give_a_union(table):
    assert table.method_kind("size", 0) == "other"  # ``t.size()``: a Size
    assert table.method_kind("size", 1) == "int"  # ``t.size(0)``
    assert table.method_kind("size") == "int|other"  # arguments unknown
    assert table.function_kind("torch.where", 1) == "tensors"  # ``torch.where(cond)``: indices
    assert table.function_kind("torch.where", 3) == "tensor"
    assert table.method_kind("max", 1) == "tensor|tensors"  # ``t.max(1)`` or ``t.max(other)``: by type only


def test_functions_of_torch_and_of_torch_nn_functional(table):
    assert table.function_kind("torch.zeros") == "tensor"
    assert table.function_kind("torch.split") == "tensors"  # torch/functional.py, annotated
    assert table.function_kind("torch.numel") == "int"
    assert table.function_kind("torch.is_tensor") == "bool"  # torch/__init__.py
    assert table.function_kind("torch.nn.functional.cross_entropy") == "tensor"
    assert table.function_kind("torch.no_such_function") is None
    assert len(table) > 1500


STUB = '''
class TensorBase:
    shape: Size
    grad: Tensor | None
    def storage_offset(self) -> _int | SymInt: ...
    @overload
    def size(self, dim: None = None) -> Size: ...
    @overload
    def size(self, dim: _int) -> _int: ...
    def item(self) -> Number: ...
    def split(self, split_size: _int, dim: _int = 0) -> Sequence[Tensor]: ...
    def odd(self) -> Any: ...
'''


def fake_torch(folder: Path, stub: str = STUB) -> Path:
    (folder / "_C").mkdir(parents=True)
    (folder / "_C" / "__init__.pyi").write_text(stub)
    (folder / "_C" / "_VariableFunctions.pyi").write_text("def zeros(*size: _int) -> Tensor: ...\n")
    (folder / "_tensor.py").write_text("class Tensor(TensorBase):\n    def split(self, split_size, dim=0):\n        pass\n")
    (folder / "version.py").write_text("__version__ = '9.9.9'\n")
    return folder


def test_reading_a_stub(tmp_path):
    table = torch_stubs.build(fake_torch(tmp_path / "torch"))
    assert table.version == "9.9.9"
    assert table.method_kind("storage_offset") == "int"
    assert table.method_kind("size", 1) == "int" and table.method_kind("size", 0) == "other"
    assert table.method_kind("split") == "tensors"  # an unannotated Python method keeps the stub's answer
    assert table.method_kind("odd") == "unknown"
    assert table.attribute_kind("grad") == "none|tensor"
    assert table.function_kind("torch.zeros") == "tensor"


def test_a_table_read_back_from_its_json_answers_every_name_as_the_one_built(table):
    stored = json.loads(json.dumps(table.to_json()))
    loaded = torch_stubs.StubTable.from_json(stored)
    assert len(loaded) == len(table)
    for arguments in ((None, frozenset()), (0, frozenset()), (1, frozenset()), (2, frozenset({"dim"}))):
        assert {n: loaded.method_kind(n, *arguments) for n in table.methods} == \
            {n: table.method_kind(n, *arguments) for n in table.methods}
        assert {n: loaded.function_kind(n, *arguments) for n in table.functions} == \
            {n: table.function_kind(n, *arguments) for n in table.functions}
    assert loaded.to_json() == stored  # overloads made from their JSON when asked are written back the same


def test_the_table_is_cached_per_stub_files(tmp_path, monkeypatch):
    folder = fake_torch(tmp_path / "torch")
    cache = tmp_path / "cache"
    first = torch_stubs.load(folder, cache)
    (stored,) = cache.glob("*.json")
    assert json.loads(stored.read_text())["table"]["methods"]["storage_offset"] == "int"

    def no_build(_folder):
        raise AssertionError("built again")

    monkeypatch.setattr(torch_stubs, "build", no_build)
    assert torch_stubs.load(folder, cache).to_json() == first.to_json()
    # Another torch (the stub changed): built again.
    monkeypatch.undo()
    stub = folder / "_C" / "__init__.pyi"
    stub.write_text(STUB.replace("def item(self) -> Number", "def item(self) -> _float"))
    os.utime(stub, ns=(1, 1))
    assert torch_stubs.load(folder, cache).method_kind("item") == "float"


def test_a_cache_folder_that_cannot_be_written_only_costs_a_rebuild(tmp_path, monkeypatch):
    folder = fake_torch(tmp_path / "torch")
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    table = torch_stubs.load(folder, blocked / "cache")  # its parent is a file: nothing can be stored
    assert table.method_kind("storage_offset") == "int"
    assert torch_stubs.load(tmp_path / "no-torch-here", tmp_path / "c").method_kind("dim") is None


# -- what provenance makes of it ---------------------------------------------------------------

QUERIES = ["t.storage_offset()", "t.dim()", "t.numel()", "t.size(0)", "t.element_size()", "t.is_contiguous()"]


@pytest.mark.parametrize("query", QUERIES)
def test_metadata_queries_are_no_tensors(query):
    code = f"import torch\n\ndef f(t: torch.Tensor):\n    n = {query}\n    return n\n"
    ctx = FileContext.build(Path("q.py"), code)
    call = next(node for node in ctx.nodes(ast.Call) if ctx.code(node) == query)
    assert ctx.kind(call) is Kind.NUMBER


@pytest.mark.parametrize("query", QUERIES)
def test_a_test_of_a_metadata_query_is_neither_reported_nor_rewritten(query):
    # A safe FX101 once rewrote ``if t.storage_offset() != 0:`` into ``torch.where(<bool>, ...)``,
    # which raised TypeError.
    code = (
        "import torch\n\n"
        "def f(t: torch.Tensor, y: torch.Tensor):\n"
        f"    if {query} != 0:\n"
        "        y = y * 2\n"
        "    return y\n"
    )
    result = process(Path("q.py"), code, all_rules(), fix=True, unsafe=True)
    assert result.findings == [] and result.new_text is None


def test_torch_split_gives_tensors_not_a_tensor():
    code = "import torch\n\ndef f(x: torch.Tensor):\n    parts = torch.split(x, 2)\n    return parts\n"
    ctx = FileContext.build(Path("q.py"), code)
    call = next(node for node in ctx.nodes(ast.Call) if ctx.code(node) == "torch.split(x, 2)")
    assert ctx.kind(call) is Kind.OTHER


@pytest.mark.parametrize(
    "binding",
    ["a, b = torch.chunk(x, 2)", "a, b = x.chunk(2)", "a = torch.where(x > 0)[0]", "a = x.split(2)[-1]",
     "for a in x.unbind(0):\n        pass"],
)
def test_the_elements_of_a_sequence_of_tensors_are_tensors(binding):
    code = f"import torch\n\ndef f(x: torch.Tensor):\n    {binding}\n    return a.item()\n"
    ctx = FileContext.build(Path("q.py"), code)
    (read,) = [n for n in ctx.nodes(ast.Name) if n.id == "a" and ctx.code(ctx.parents[n]) == "a.item"]
    assert ctx.kind(read) is Kind.TENSOR
