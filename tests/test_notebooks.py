"""Jupyter notebooks: code cells as one module, IPython lines kept, only changed sources written."""

from __future__ import annotations

import ast
import json
import shutil
from dataclasses import replace
from pathlib import Path

import pytest
from conftest import FIXTURES
from fixitem.codemods.driver.discovery import discover
from fixitem.codemods.driver.notebooks import (
    NotebookError,
    _prepare,
    analyse_cells,
    parse_notebook,
    process_notebook,
    source_spans,
)
from fixitem.codemods.driver.registry import select_rules
from typer.testing import CliRunner

import fixitem
from fixitem import formats, output
from fixitem.api import rules_for
from fixitem.cli import app

runner = CliRunner()
NOTEBOOKS = FIXTURES / "notebooks"
RESCALE = NOTEBOOKS / "rescale.ipynb"


def _copy(tmp_path, *names):
    for name in names:
        shutil.copy(NOTEBOOKS / name, tmp_path / name)
    return [tmp_path / name for name in names]


def _without_sources(raw: str, cells: set[int]) -> str:
    """The notebook's text with the ``"source"`` values of ``cells`` (1-based) cut out."""
    spans = source_spans(raw)
    for number in sorted(cells, reverse=True):
        start, end = spans[number - 1]
        raw = raw[:start] + raw[end:]
    return raw


def _notebook(*cells: tuple[str, str]) -> str:
    """A notebook as Jupyter writes it; ``cells`` are (cell_type, source text)."""
    items = []
    for index, (kind, text) in enumerate(cells):
        cell = {"cell_type": kind, "id": f"cell-{index}", "metadata": {}, "source": text.splitlines(keepends=True)}
        if kind == "code":
            cell.update(execution_count=None, outputs=[])
        items.append(cell)
    nb = {"cells": items, "metadata": {"language_info": {"name": "python"}}, "nbformat": 4, "nbformat_minor": 5}
    return json.dumps(nb, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


# --------------------------------------------------------------------------- reading


def test_findings_name_the_cell_and_the_line_in_it():
    result = fixitem.scan([RESCALE], isolated=True, cache=False)
    assert not result.errors
    where = [(f.cell, f.line, f.col, f.rule) for f in result.findings]
    assert where == [(5, 1, 1, "FX101"), (7, 3, 5, "FX101"), (8, 2, 5, "FX201")]
    text = output.finding_line(result.findings[0])
    assert text.startswith(f"{result.findings[0].path}:cell 5:1:1: FX101 ")
    assert json.loads(output.findings_json(result))[0]["cell"] == 5


def test_a_name_bound_in_an_earlier_cell_is_known_as_a_tensor(tmp_path):
    nb = tmp_path / "cross.ipynb"
    nb.write_text(_notebook(
        ("code", "import torch"),
        ("code", "t = torch.ones(3, device='cuda')"),
        ("markdown", "Some prose with t.item() in it."),
        ("code", "if t.sum().item() > 0:\n    t = t * 2"),
    ), encoding="utf-8")
    [finding] = fixitem.scan([nb], isolated=True, cache=False).findings
    assert (finding.cell, finding.line, finding.fix) == (4, 1, "safe")
    # Without the binding in cell 2, nothing says `t` is a tensor: no fix is offered.
    nb.write_text(_notebook(
        ("code", "import torch"),
        ("code", "t = load()"),
        ("code", "if t.sum().item() > 0:\n    t = t * 2"),
    ), encoding="utf-8")
    [finding] = fixitem.scan([nb], isolated=True, cache=False).findings
    assert finding.fix == "none"


def test_cell_magics_are_skipped_and_a_broken_cell_is_a_note_not_an_error():
    result = fixitem.scan([RESCALE], isolated=True, cache=False)
    # Cell 6 is `%%capture` with a `.item()` in it: left out, as is the draft in cell 9.
    assert 6 not in {f.cell for f in result.findings}
    assert result.errors == []
    [note] = result.notes
    assert "cell 9: not analysed: it does not parse as Python" in note


@pytest.mark.parametrize(
    "text, ipython",
    [
        ("%time y = f(x)\n", [0]),
        ("!pip install -q torch\n", [0]),
        ("files = !ls\na, b = %sx echo 1 2\n", [0, 1]),
        ("model?\n??nn.Linear\n", [0, 1]),
        ("for i in range(2):\n    %time g(i)\n", [1]),
        ("%run -i script.py \\\n    --flag\nx = 1\n", [0, 1]),
        # Not IPython: a continuation line, a line inside a string, a comment ending in `?`.
        ("y = (a\n     % b)\n", []),
        ('doc = """\n!important\n%s?\n"""\n', []),
        ("x = 1  # why?\n", []),
        ("s = 'what?'\n", []),
    ],
)
def test_ipython_lines_are_found_at_statement_starts(text, ipython):
    prepared = _prepare(text, [0])
    assert prepared is not None
    lines = prepared.text.splitlines()
    assert len(lines) == len(text.splitlines())  # line numbers stay
    changed = [i for i, (a, b) in enumerate(zip(text.splitlines(), lines)) if a != b]
    assert changed == ipython
    assert sorted(prepared.ipython.values()) == sorted(text.splitlines()[i] for i in ipython)
    compile(prepared.text, "<cell>", "exec")


def test_only_newlines_end_lines():
    text = 's = "a\u2028b\x0cc"\n%time f()\n'
    prepared = _prepare(text, [0])
    assert prepared.text.split("\n")[0] == 's = "a\u2028b\x0cc"' and list(prepared.ipython.values()) == ["%time f()"]


def test_a_cell_magic_cell_is_left_out():
    assert _prepare("%%capture\nprint(x.item())\n", [0]) is None


def test_folders_include_notebooks(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "mod.py").write_text("x = 1\n")
    shutil.copy(RESCALE, tmp_path / "pkg" / "rescale.ipynb")
    (tmp_path / "pkg" / "notes.txt").write_text("not code\n")
    assert [p.name for p in discover([tmp_path])] == ["mod.py", "rescale.ipynb"]
    result = fixitem.scan([tmp_path], isolated=True, cache=False)
    assert {f.path.rsplit("/", 1)[-1] for f in result.findings} == {"rescale.ipynb"}


def test_invalid_json_and_old_formats_are_errors_for_that_file_only(tmp_path, monkeypatch):
    _copy(tmp_path, "rescale.ipynb", "not_json.ipynb", "nbformat3.ipynb")
    monkeypatch.chdir(tmp_path)
    result = fixitem.scan(["."], isolated=True, cache=False)
    assert sorted(result.errors) == [
        "nbformat3.ipynb: not a notebook in nbformat 4 (nbformat is 3); only nbformat 4 is read",
        "not_json.ipynb: not a valid notebook: invalid JSON at line 4 column 1: Expecting ',' delimiter",
    ]
    assert {f.cell for f in result.findings} == {5, 7, 8}  # the good notebook is still read
    cli = runner.invoke(app, ["scan", "--isolated", "--no-cache", "."])
    assert cli.exit_code == 2
    assert "not_json.ipynb: not a valid notebook: invalid JSON" in cli.output


# --------------------------------------------------------------------------- writing


def test_apply_changes_only_the_fixed_cells_sources(tmp_path):
    [nb] = _copy(tmp_path, "rescale.ipynb")
    before = nb.read_text(encoding="utf-8")
    # unsafe: cell 7's threshold 0.1 is not exact in the tensor's dtype, which makes its fix unsafe.
    result = fixitem.apply([nb], isolated=True, cache=False, unsafe=True)
    assert not result.errors and result.files[0].written
    after = nb.read_text(encoding="utf-8")
    changed = {2, 5, 7, 8}
    # Byte for byte the same file once those four sources are cut out of both.
    assert _without_sources(after, changed) == _without_sources(before, changed)
    old, new = json.loads(before), json.loads(after)
    assert [c["source"] for c in new["cells"]][:1] == [c["source"] for c in old["cells"]][:1]
    cells = new["cells"]
    assert all(isinstance(c["source"], list) for c in cells)  # the list form is kept
    assert cells[1]["source"][-1] == "from fixitem import runtime as deferred"  # after the cell's imports
    assert cells[1]["source"][:2] == ["%matplotlib inline\n", "!pip install -q torch\n"]
    assert cells[4]["source"] == ["h = torch.where(h.abs().max() > 2.0, h * 0.5, h)\n", "loss = h.pow(2).mean()"]
    assert cells[6]["source"] == [
        "for step in range(3):\n", "    %time out = model(x)\n", "    x = torch.where(loss > 0.1, x * 0.9, x)",
    ]
    # Output stays under its cell: the deferred print is emitted before the displayed value.
    assert cells[7]["source"] == [
        "for step in range(2):\n",
        '    deferred.record(lambda step, loss: print(f"step {step}: {loss:.3f}"), step, loss)\n',
        "deferred.flush()\n",
        "loss",
    ]
    # Outputs (an image among them), metadata, ids and counts: untouched (also checked bytewise above).
    assert [c.get("outputs") for c in cells] == [c.get("outputs") for c in old["cells"]]
    assert cells[4]["outputs"][0]["data"]["image/png"] == old["cells"][4]["outputs"][0]["data"]["image/png"]
    assert after == json.dumps(new, indent=1, sort_keys=True, ensure_ascii=False) + "\n"  # still Jupyter's layout
    # The second run finds nothing more to do.
    again = fixitem.apply([nb], isolated=True, cache=False)
    assert again.applied == [] and again.diff == "" and nb.read_text(encoding="utf-8") == after


def test_a_notebook_in_another_layout_keeps_it(tmp_path):
    [nb] = _copy(tmp_path, "string_sources.ipynb")
    before = nb.read_text(encoding="utf-8")
    result = fixitem.apply([nb], isolated=True, cache=False)
    assert not result.errors and len(result.applied) == 1
    after = nb.read_text(encoding="utf-8")
    assert _without_sources(after, {1, 2}) == _without_sources(before, {1, 2})
    cells = json.loads(after)["cells"]
    assert cells[0]["source"] == (
        'import torch\nfrom fixitem import runtime as deferred\nscore = torch.randn(3, device="cuda")  # Schätzwert\n'
    )
    assert cells[1]["source"] == (
        "!nvidia-smi\ndeferred.record(lambda score_sum: print(score_sum), score.sum())\ndeferred.flush()"
    )
    assert "Sch\\u00e4tzwert" in after  # escaped as the file had it


def test_a_layout_that_cannot_be_reproduced_is_refused(tmp_path):
    nb = tmp_path / "odd.ipynb"
    text = _notebook(("code", "import torch\nt = torch.ones(2, device='cuda')\nprint(t.sum().item())\n"))
    text = text.replace('"import torch\\n",\n    ', '"import torch\\n",   ')  # hand-edited spacing
    nb.write_text(text, encoding="utf-8")
    result = fixitem.apply([nb], isolated=True, cache=False)
    [error] = result.errors
    assert "cannot reproduce; notebook left unchanged" in error
    assert nb.read_text(encoding="utf-8") == text and result.applied == []


def test_diff_names_the_cell(tmp_path, monkeypatch):
    [nb] = _copy(tmp_path, "rescale.ipynb")
    before = nb.read_bytes()
    monkeypatch.chdir(tmp_path)
    cli = runner.invoke(app, ["apply", "--diff", "--isolated", "--no-cache", "rescale.ipynb"])
    assert cli.exit_code == 1, cli.output
    assert "--- a/rescale.ipynb:cell 5\n+++ b/rescale.ipynb:cell 5\n" in cli.output
    assert "-if h.abs().max().item() > 2.0:\n-    h = h * 0.5\n+h = torch.where(" in cli.output
    assert "cell 4" not in cli.output  # the magics' cell is not touched
    assert nb.read_bytes() == before


def test_sarif_points_at_the_notebook_line(tmp_path, monkeypatch):
    [nb] = _copy(tmp_path, "rescale.ipynb")
    monkeypatch.chdir(tmp_path)
    result = fixitem.scan(["rescale.ipynb"], isolated=True, cache=False)
    log = formats.sarif(result)
    first = log["runs"][0]["results"][0]
    line = first["locations"][0]["physicalLocation"]["region"]["startLine"]
    assert nb.read_text(encoding="utf-8").splitlines()[line - 1].strip().startswith('"if h.abs().max().item()')
    assert first["properties"]["cell"] == 5 and first["properties"]["cellLine"] == 1
    assert f"line={line}," in formats.github(result)


def test_interactive_apply_leaves_notebooks_alone(tmp_path):
    [nb] = _copy(tmp_path, "rescale.ipynb")
    before = nb.read_bytes()
    result = fixitem.apply([nb], isolated=True, cache=False, confirm=lambda finding, diff: "yes")
    assert "not offered one by one" in result.errors[0] and nb.read_bytes() == before


def test_a_notebook_of_another_language_is_not_read(tmp_path):
    nb = tmp_path / "r.ipynb"
    text = _notebook(("code", "import torch\nprint(torch.ones(1).item())"))
    data = json.loads(text)
    data["metadata"] = {"kernelspec": {"language": "R", "name": "ir"}}
    nb.write_text(json.dumps(data), encoding="utf-8")
    assert fixitem.scan([nb], isolated=True, cache=False).findings == []
    assert parse_notebook(nb, nb.read_bytes()).is_python is False


@pytest.mark.parametrize("fixture", ["threshold/hoisted_condition.py", "threshold/gate_if_else.py",
                                     "logging/train_loop.py", "assert_async/assertions.py"])
def test_a_file_cut_into_cells_is_fixed_as_the_file_is(tmp_path, fixture):
    """One cell per top-level statement: the fixes (provenance across cells) are those of the file."""
    text = (FIXTURES / fixture).read_text(encoding="utf-8")
    lines = text.splitlines(keepends=True)
    tree = ast.parse(text)
    starts = [1] + [(n.decorator_list[0] if getattr(n, "decorator_list", None) else n).lineno for n in tree.body[1:]]
    chunks = ["".join(lines[a - 1:b - 1]) for a, b in zip(starts, starts[1:] + [len(lines) + 1])]
    nb, py = tmp_path / "cells.ipynb", tmp_path / "whole.py"
    nb.write_text(_notebook(*(("code", chunk) for chunk in chunks)), encoding="utf-8")
    py.write_text(text, encoding="utf-8")
    whole = fixitem.apply([py], isolated=True, cache=False, unsafe=True)
    cells = fixitem.apply([nb], isolated=True, cache=False, unsafe=True)
    assert not cells.errors and [f.rule for f in cells.applied] == [f.rule for f in whole.applied] != []
    joined = "".join("".join(c["source"]) for c in json.loads(nb.read_text(encoding="utf-8"))["cells"])
    fixed = py.read_text(encoding="utf-8").splitlines()
    got = [line for line in joined.splitlines() if line != "deferred.flush()"]  # a notebook flushes per cell

    def imports(found):
        return sorted(line for line in found if line.startswith(("import ", "from ")))

    assert imports(got) == imports(fixed)  # the same imports, after the first cell's own
    assert [line for line in got if line not in imports(got)] == [line for line in fixed if line not in imports(fixed)]


# --------------------------------------------------------------------------- cells in, results per cell out


# The notebooks below are analysed, never run: their tensors are made on a device, where
# reading them syncs (a tensor made without ``device=`` is a CPU tensor, whose reads do not).
CELLS = [
    "import torch\n\nt = torch.ones(3, device='cuda')",
    None,  # a markdown cell
    "%time print(t.sum().item())\nif t.sum().item() > 0:\n    t = t * 2\nprint(t.max().item())",
    "%%capture\nprint(t.item())",
    "def draft(:\n",
]


def _rules():
    return rules_for([rule.code for rule in select_rules(None, None)])


def test_analyse_cells_gives_each_cell_its_findings_in_its_own_lines(tmp_path):
    results = analyse_cells(CELLS, _rules(), name="nb.ipynb")
    assert len(results) == len(CELLS)
    assert [r.findings for r in results[:2]] == [[], []] and results[3].findings == []  # magic lines never read
    where = [(f.cell, f.line, f.col, f.rule, f.fix) for f in results[2].findings]
    assert where == [(3, 2, 1, "FX101", "safe"), (3, 4, 1, "FX201", "safe")]
    assert all(f.end_line in (0, f.line) or f.end_line > f.line for f in results[2].findings)
    assert [r.note for r in results[:4]] == [None] * 4  # a cell magic's cell is left out without a note
    assert "cell 5: not analysed: it does not parse as Python" in results[4].note
    assert all(r.new_text is None and r.applied == [] for r in results)
    # The same analysis as the .ipynb path: one notebook, the same findings.
    assert [f for r in results for f in r.findings] == [
        replace(f, path="nb.ipynb") for f in _scan_cells(tmp_path / "nb.ipynb", CELLS)
    ]


def _as_notebook(cells):
    return _notebook(*(("code", c) if c is not None else ("markdown", "prose") for c in cells))


def _scan_cells(nb, cells):
    nb.write_text(_as_notebook(cells), encoding="utf-8")
    return fixitem.scan([nb], isolated=True, cache=False).findings


def test_analyse_cells_fixes_cells_and_keeps_ipython_lines():
    results = analyse_cells(CELLS, _rules(), name="nb.ipynb", fix=True)
    first, gate = results[0].new_text, results[2].new_text
    # The import the deferred print needs goes after the first cell's imports.
    assert first == CELLS[0].replace("import torch\n", "import torch\nfrom fixitem import runtime as deferred\n")
    assert gate.splitlines()[0] == "%time print(t.sum().item())"  # byte for byte
    assert "t = torch.where(t.sum() > 0, t * 2, t)" in gate and gate.endswith("deferred.flush()")
    assert [f.rule for f in results[2].applied] == ["FX101", "FX201"]
    assert [r.new_text for r in (results[1], results[3], results[4])] == [None, None, None]

    # One finding's fix alone, named as an earlier call reported it.
    [gate_finding, _] = analyse_cells(CELLS, _rules())[2].findings
    alone = analyse_cells(CELLS, _rules(), fix=True, only=gate_finding)
    assert alone[0].new_text is None  # no import needed
    gate_fixed = CELLS[2].replace("if t.sum().item() > 0:\n    t = t * 2", "t = torch.where(t.sum() > 0, t * 2, t)")
    assert alone[2].new_text == gate_fixed


def test_analyse_cells_without_a_binding_in_an_earlier_cell_offers_no_fix():
    cells = ["import torch", "t = load()", CELLS[2]]
    [finding, *_] = analyse_cells(cells, _rules())[2].findings
    assert (finding.rule, finding.fix) == ("FX101", "none")
    assert analyse_cells([None, "x = 1"], _rules())[1].findings == []


def test_analyse_cells_reports_what_cannot_be_analysed():
    class Broken:
        code, name, summary = "FX999", "broken", "a rule that fails"

        def check(self, ctx, sites, claimed):
            raise RuntimeError("boom")

    with pytest.raises(NotebookError, match=r"nb.ipynb: internal error in fixitem \(RuntimeError: boom\)"):
        analyse_cells(CELLS, [Broken()], name="nb.ipynb")
    # The .ipynb path says it as an error of that file.
    data = _as_notebook(CELLS).encode("utf-8")
    result = process_notebook(Path("nb.ipynb"), "nb.ipynb", [Broken()], data=data)
    assert result.error.startswith("nb.ipynb: internal error") and result.findings == []


LEFT_AFTER_FIXES = [
    "import torch\na = torch.ones((), device='cuda') * 2",
    "for step in range(2):\n    print(f\"step {step} a {a.item():.3f} and a long tail of text that is wrapped\")\nv = a.tolist()",
    "x = torch.randn(3, device='cuda')\nvals = x.tolist()",
    "y = 1\ny = 2\ny = 3",
]


def _where_left(result):
    return [(f.cell, f.line, f.col, f.rule) for f in result.findings]


def test_what_is_left_after_fixes_stands_where_it_is_in_each_cell(tmp_path):
    """Fixes add lines to one cell and an import to another: what is left is placed in the
    cells as they were when nothing is written, and in the cells as written after apply."""
    nb = tmp_path / "left.ipynb"
    nb.write_text(_as_notebook(LEFT_AFTER_FIXES), encoding="utf-8")
    before = _where_left(fixitem.scan([nb], isolated=True, cache=False))
    assert before == [(2, 2, 5, "FX201"), (2, 3, 5, "FX002"), (3, 2, 8, "FX002")]

    preview = fixitem.apply([nb], write=False, isolated=True, cache=False)
    assert [(f.cell, f.line) for f in preview.applied] == [(2, 2)]
    assert _where_left(preview) == [(2, 3, 5, "FX002"), (3, 2, 8, "FX002")]  # as it was

    written = fixitem.apply([nb], isolated=True, cache=False)
    cells = [c for c in json.loads(nb.read_text(encoding="utf-8"))["cells"]]
    after = _where_left(fixitem.scan([nb], isolated=True, cache=False))
    assert _where_left(written) == after  # as it is now
    for cell, line, col, _ in after:
        assert "".join(cells[cell - 1]["source"]).splitlines()[line - 1][col - 1:].endswith(".tolist()")
    assert after != before[1:]  # the rewritten cell 2 is longer now
