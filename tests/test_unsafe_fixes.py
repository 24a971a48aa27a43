"""Unsafe fixes never crash, never add syncs, and say what they change: a
rewritten value is followed wherever it flows, a fix that keeps the read it
claims is no fix, and notes are facts about the code they describe."""

from __future__ import annotations

from pathlib import Path

from conftest import load_module
from fixitem.codemods.engine import process
from fixitem.codemods.registry import all_rules
from fixitem.verify import count_host_syncs

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "unsafe_fixes"


def _apply(path: Path, unsafe: bool = True):
    return process(path, path.read_text(), all_rules(), fix=True, unsafe=unsafe)


def _run_main(path: Path):
    module = load_module(path)
    with count_host_syncs() as syncs:
        results = module.main()
    return results, syncs.total


def test_a_bound_that_flows_into_a_python_number_is_not_rewritten(tmp_path):
    source = FIXTURES / "python_only_flow.py"
    result = _apply(source)
    assert not [f for f in result.applied if f.rule == "FX103"]
    notes = [f.note for f in result.findings if f.rule == "FX103"]
    assert len(notes) == 4 and all(n.startswith("no fix:") for n in notes)
    assert any("`window(scores, 3, pos)` returns it" in n for n in notes)
    assert any("self.keep` is then used as an index" in n for n in notes)
    # Whatever else was rewritten: the same Python types, and no more syncs.
    after = tmp_path / "after.py"
    after.write_text(result.new_text or source.read_text())
    before_results, before_syncs = _run_main(source)
    after_results, after_syncs = _run_main(after)
    assert repr(after_results) == repr(before_results)
    assert after_syncs <= before_syncs


def test_a_returned_bound_that_stays_unsafe_names_the_type_change():
    code = (
        "import torch\n\n"
        "def lr_for(loss: torch.Tensor):\n"
        "    lr = min(loss.item(), 0.1)\n"
        "    return lr\n"
    )
    result = process(Path("lr.py"), code, all_rules(), fix=True, unsafe=True)
    (applied,) = [f for f in result.applied if f.rule == "FX103"]
    assert applied.fix == "unsafe" and "0-dim tensor where it got a Python number" in applied.note


def test_a_fix_that_would_keep_the_read_it_claims_is_no_fix():
    source = FIXTURES / "kept_read.py"
    result = _apply(source)
    text = result.new_text or ""
    # `torch.tensor(y.item()) > 0` in a `torch.where` still reads `y.item()`: nothing removed.
    assert "torch.where(torch.tensor(y.item())" not in text
    (remade,) = [f for f in result.findings if f.rule == "FX102"]
    assert remade.fix == "none" and "would still read `y.item()`" in remade.note
    # `probs[idx.item()] > 0.5` tested as a truth value: the fix removes that sync and
    # claims it alone; `idx.item()` is kept as written and reported on its own.
    assert "torch.where((probs[idx.item()] > 0.5).reshape(()), 0.5, 1.0)" in text
    assert [f.rule for f in result.applied] == ["FX102"]
    assert any("`idx.item()`" in f.message for f in result.findings if f.rule != "FX102")
