"""Data-dependent sizes and indices in traced code (FX006, FX601, FX602, FX603): what the model
says each value is used for, which configuration removes each break (checked against Dynamo on
the installed torch, backend "eager"), the fixes, and that a configuration never counts as a
removed host sync."""

from __future__ import annotations

import shutil
import warnings
from pathlib import Path

import pytest
import torch
from conftest import FIXTURES, load_module
from fixitem.codemods.driver.engine import process
from fixitem.codemods.driver.registry import all_rules
from fixitem.codemods.model.context import FileContext
from fixitem.codemods.model.data_dependent import (
    compile_calls,
    config_settings,
    dynamic_shape_ops,
    is_script,
    scalar_read,
)
from fixitem.codemods.model.syncs import find_sync_sites
from fixitem.verify.breaks import count_graph_breaks

import fixitem

SIZES = FIXTURES / "data_dependent" / "sizes.py"
TRAIN = FIXTURES / "data_dependent" / "train.py"
CONFIG = ("capture_scalar_outputs", "capture_dynamic_output_shape_ops")


def findings(code: str, fix: bool = False, unsafe: bool = False):
    return process(Path("m.py"), code, all_rules(), fix=fix, unsafe=unsafe)


def uses(code: str) -> dict[str, list[str]]:
    """For each read of the file: the kinds of its uses."""
    ctx = FileContext.build(Path("m.py"), code)
    return {ctx.code(s.node): [u.kind for u in scalar_read(ctx, s.node, s.value, s.kind).uses]
            for s in find_sync_sites(ctx) if s.kind in ("item", "int", "float", "tolist")}


MODULE = "import torch\nfrom torch import nn\n\nclass M(nn.Module):\n    def forward(self, x, t):\n"


def test_what_a_read_value_is_used_for():
    found = uses(MODULE + (
        "        n = t.max().item()\n"
        "        a = x[:, :n]\n"                     # a slice bound
        "        b = x.new_zeros(n // 2, 3)\n"       # a size, through Python arithmetic
        "        c = torch.split(x, t.tolist(), dim=1)\n"   # split sizes: a list
        "        d = x.split(t[0].item(), dim=1)\n"  # a chunk size: the number of results
        "        if n > 3:\n"                        # a branch
        "            a = a * 2\n"
        "        for i in range(int(t.sum())):\n"    # a loop of that length
        "            a = a + i\n"
        "        return a, b, c, d\n"
    ))
    assert found["t.max().item()"] == ["slice", "size", "branch"]
    assert found["t.tolist()"] == ["size"]
    assert found["t[0].item()"] == ["specialize"]
    assert found["int(t.sum())"] == ["loop"]


def test_elements_of_a_list_read_from_a_tensor_are_followed():
    found = uses(MODULE + (
        "        t_, h, w = t.tolist()\n"
        "        y = torch.arange(h).view(1, -1).expand(w, -1)\n"
        "        return y, x\n"
    ))
    assert found["t.tolist()"] == ["size", "size"]


def test_compile_calls_scripts_and_settings():
    code = (
        "import os\nimport torch\n\n"
        "@torch.compile\ndef f(x):\n    return x\n\n"
        "def g(x):\n    return x\n\n"
        "step = torch.compile(g, fullgraph=True)\n\n"
        "if __name__ == '__main__':\n"
        "    torch._dynamo.config.capture_scalar_outputs = True\n"
        "    os.environ['TORCHDYNAMO_CAPTURE_DYNAMIC_OUTPUT_SHAPE_OPS'] = '1'\n"
        "    model = torch.compile(torch.nn.Linear(2, 2))\n"
    )
    ctx = FileContext.build(Path("m.py"), code)
    calls = compile_calls(ctx)
    assert [(c.decorated is not None, c.fullgraph) for c in calls] == [(True, False), (True, True), (False, False)]
    assert is_script(ctx)
    assert set(config_settings(ctx)) == set(CONFIG)
    patched = FileContext.build(Path("m.py"), "import torch\n\n@torch._dynamo.config.patch(capture_scalar_outputs=True)\n"
                                "@torch.compile\ndef f(x):\n    return x\n")
    assert set(config_settings(patched)) == {"capture_scalar_outputs"}
    assert not is_script(patched)


@pytest.mark.parametrize(("line", "op"), [
    ("y = torch.nonzero(x > 0)", "nonzero"),
    ("y = (x > 0).nonzero()", "nonzero"),
    ("y = torch.where(x > 0)", "torch.where"),
    ("y = torch.masked_select(x, x > 0)", "masked_select"),
    ("y = x[x > 0]", "boolean mask"),
    ("y = x[~torch.isnan(x)]", "boolean mask"),
    ("y = torch.unique(x)", "unique"),
    ("y = x.repeat_interleave(x.long(), dim=0)", "repeat_interleave"),
])
def test_operators_with_a_data_dependent_output_size(line, op):
    ctx = FileContext.build(Path("m.py"), MODULE + f"        {line}\n        return y\n")
    assert [o.op for o in dynamic_shape_ops(ctx)] == [op]


@pytest.mark.parametrize("line", [
    "y = torch.where(x > 0, x, 0.0)",                       # three arguments: a fixed size
    "y = x.repeat_interleave(2, dim=0)",                    # a number of repeats
    "y = x.repeat_interleave(x.long(), dim=0, output_size=8)",
    "y = x[t.long()]",                                      # an integer index: a fixed size
])
def test_operators_with_a_fixed_output_size(line):
    ctx = FileContext.build(Path("m.py"), MODULE + f"        {line}\n        return y\n")
    assert dynamic_shape_ops(ctx) == []


def test_an_index_that_is_a_slice_or_a_number_needs_no_question_about_values(monkeypatch):
    """``x[..., -1]``, ``x[-2:]``, ``x[0]``: never a mask, so nothing is asked about ``x`` (in a
    model file, most subscripts of traced code are of this kind)."""
    code = MODULE + "        a = x[..., -1]\n        b = x[-2:, +1]\n        c = x[0]\n        return a + b + c\n"
    ctx = FileContext.build(Path("m.py"), code)
    asked = []
    monkeypatch.setattr(FileContext, "is_tensor", lambda self, expr: asked.append(expr) or True)
    monkeypatch.setattr(FileContext, "kind", lambda self, expr: asked.append(expr))
    assert dynamic_shape_ops(ctx) == [] and asked == []


def test_the_findings_are_the_breaks_dynamo_reports_and_the_configuration_removes_them():
    """Each break Dynamo reports in the fixture's forward is a finding of the family, on its line;
    under the configuration the findings name, Dynamo reports none, and the results are equal."""
    result = fixitem.scan([SIZES], isolated=True, cache=False)
    family = {f.line: f for f in result.findings if f.rule in ("FX006", "FX601", "FX602")}
    model, inputs = load_module(SIZES).make()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        default = count_graph_breaks(model, inputs)
        with torch._dynamo.config.patch(**dict.fromkeys(CONFIG, True)):
            configured = count_graph_breaks(model, inputs)
            torch._dynamo.reset()
            compiled = torch.compile(model, backend="eager")(*inputs[0])
    lines = {b.line for b in default.breaks if b.file == str(SIZES)}
    assert lines and lines <= set(family)
    assert configured.count == 0 and configured.error is None
    assert torch.allclose(compiled, model(*inputs[0]))
    for line, finding in family.items():
        assert finding.costs == ("graph-break", "host-sync")
        flag = "capture_dynamic_output_shape_ops" if finding.rule == "FX602" else "capture_scalar_outputs"
        assert flag in finding.message + finding.note and finding.fix == "none"  # a library module: advice
        assert "host sync" in finding.message


def test_the_configuration_fix_removes_breaks_and_keeps_every_host_sync(tmp_path):
    target = tmp_path / "train.py"
    shutil.copyfile(TRAIN, target)
    before = fixitem.scan([target], isolated=True, cache=False).findings
    fixitem.apply([target], unsafe=True, isolated=True, cache=False)
    text = target.read_text()
    assert ("    torch._dynamo.config.capture_scalar_outputs = True\n"
            "    torch._dynamo.config.capture_dynamic_output_shape_ops = True\n"
            "    model = torch.compile(Router(), backend=\"eager\")\n") in text
    after = fixitem.scan([target], isolated=True, cache=False).findings

    def family(found):
        return [f for f in found if f.rule in ("FX006", "FX601", "FX602")]

    assert len(family(before)) == len(family(after)) == 3
    assert all("graph-break" in f.costs and "host-sync" in f.costs for f in family(before))
    # The breaks are gone; every sync is still counted, and said to be one.
    assert all(f.costs == ("host-sync",) and "still" in f.message for f in family(after))
    # Without --unsafe nothing of the family is applied.
    again = tmp_path / "again.py"
    shutil.copyfile(TRAIN, again)
    safe = fixitem.apply([again], isolated=True, cache=False)
    assert not [f for f in safe.applied if f.rule in ("FX006", "FX601", "FX602")]


def test_a_library_module_gets_advice_never_a_global_setting():
    code = MODULE + "        n = t.max().item()\n        return x[:, :n]\n\n\ndef build(m):\n    return torch.compile(m)\n"
    result = findings(code, fix=True, unsafe=True)
    assert result.new_text is None
    note = next(f.note for f in result.findings if f.rule == "FX601")
    assert "torch._dynamo.config.patch(capture_scalar_outputs=True)" in note and "library" in note


def test_a_compiled_function_is_patched_where_it_is_compiled():
    code = ("import torch\n\n\ndef route(x: torch.Tensor, k: torch.Tensor):\n    n = k.item()\n    return x[:n]\n\n\n"
            "step = torch.compile(route)\n")
    result = findings(code, fix=True, unsafe=True)
    assert result.new_text.endswith(
        "step = torch._dynamo.config.patch(capture_scalar_outputs=True)(torch.compile(route))\n")


def test_fullgraph_true_captures_already():
    code = ("import torch\n\n\n@torch.compile(fullgraph=True)\ndef head(x: torch.Tensor, k: torch.Tensor):\n"
            "    n = k.item()\n    return x[:n]\n")
    (finding,) = [f for f in findings(code).findings if f.rule == "FX601"]
    assert finding.costs == ("host-sync",) and "fullgraph=True" in finding.message


def test_the_check_fix_makes_unflatten_compile_under_the_configuration():
    """FX603: without `torch._check(n > 0)`, torch 2.13 cannot compile `unflatten(1, (n, -1))` with a traced
    `n`; with the check written by the fix it compiles and computes the same."""
    code = ("import torch\nfrom torch import nn\n\n\nclass Heads(nn.Module):\n    def forward(self, x, heads):\n"
            "        n = heads.max().item()\n        return x.unflatten(1, (n, -1)) * 2\n")
    fixed = findings(code, fix=True).new_text
    assert "        torch._check(n > 0)\n        return x.unflatten(1, (n, -1)) * 2\n" in fixed
    x, heads = torch.randn(2, 12), torch.tensor([3, 4])
    namespace: dict = {}
    for source, works in ((code, False), (fixed, True)):
        exec(compile(source, "heads.py", "exec"), namespace)  # noqa: S102 - the test's own code
        model = namespace["Heads"]()
        torch._dynamo.reset()
        with torch._dynamo.config.patch(capture_scalar_outputs=True), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if works:
                out = torch.compile(model, backend="eager", fullgraph=True)(x, heads)
                assert torch.equal(out, model(x, heads))
            else:
                with pytest.raises(Exception, match="data-dependent"):
                    torch.compile(model, backend="eager", fullgraph=True)(x, heads)
    torch._dynamo.reset()


def test_a_compile_in_a_function_the_program_never_calls_is_a_librarys():
    """A file with a `__main__` block whose compiling function the program does not call: no global
    setting is written there."""
    body = MODULE + "        n = t.max().item()\n        return x[:, :n]\n\n\n"
    library = body + "def build(m):\n    return torch.compile(m)\n\n\nif __name__ == '__main__':\n    print('hello')\n"
    assert findings(library, fix=True, unsafe=True).new_text is None
    program = body + "def main():\n    model = torch.compile(M())\n\n\nif __name__ == '__main__':\n    main()\n"
    assert ("def main():\n    torch._dynamo.config.capture_scalar_outputs = True\n    model = torch.compile(M())\n"
            in findings(program, fix=True, unsafe=True).new_text)


def test_a_read_in_traced_code_of_a_value_not_known_to_be_a_tensor_says_so():
    # transformers' ``spatial_merge_size.tolist()`` in a helper ``forward`` calls.
    code = (
        "import torch\nfrom torch import nn\n\n\n"
        "def shape_of(grid):\n    return grid.tolist()\n\n\n"
        "class M(nn.Module):\n    def forward(self, x):\n        sizes = shape_of(self.grid)\n"
        "        return x.view(sizes[0], -1)\n"
    )
    [finding] = [f for f in process(Path("model.py"), code, all_rules()).findings if f.rule == "FX601"]
    assert finding.note.startswith("(if `grid` is a tensor) ")
