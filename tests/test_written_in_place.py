"""A name that ``torch.where`` would bind to a new tensor, and that the code then writes
in place: the fix is safe only when no other code can hold the tensor the original left
in it (fixtures/aliasing/written_in_place.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from conftest import load_module
from fixitem.codemods.driver.engine import process
from fixitem.codemods.driver.registry import all_rules

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "aliasing" / "written_in_place.py"
SHARED = {"clear_first", "doubled", "through_a_view", "zeroed"}
FRESH = {"fresh_copy", "rebound_first", "layer_output", "normed_output"}
READ_ONLY = {"copied_into"}  # written after, but into another tensor
RETURNED = {"Capped"}  # a parameter itself, returned
HANDED_BACK = {"scaled_input", "leaf_grad"}  # the caller's input returned, or its leaf's `.grad` read
PRINTED = {"halved_and_shown"}  # printed whole afterwards


def _tags() -> dict[str, tuple[str, str]]:
    import ast

    text = FIXTURE.read_text()
    functions = [n for n in ast.parse(text).body if isinstance(n, (ast.FunctionDef, ast.ClassDef))]
    tags = {}
    for finding in process(FIXTURE, text, all_rules()).findings:
        if finding.rule in ("FX101", "FX102"):
            (function,) = [f.name for f in functions if f.lineno <= finding.line <= f.end_lineno]
            tags[function] = (finding.fix, finding.note)
    return tags


def _rewritten(unsafe: bool) -> dict:
    result = process(FIXTURE, FIXTURE.read_text(), all_rules(), fix=True, unsafe=unsafe)
    after: dict = {}
    exec(compile(result.new_text, "after", "exec"), after)
    return after


def test_a_write_that_may_reach_a_shared_tensor_makes_the_fix_unsafe_and_says_which():
    tags = _tags()
    assert SHARED | FRESH | READ_ONLY | RETURNED | PRINTED | HANDED_BACK <= set(tags)
    for name in SHARED:
        fix, note = tags[name]
        assert fix == "unsafe" and "written in place later" in note, (name, fix, note)
    for name in FRESH | READ_ONLY:
        assert tags[name][0] == "safe", (name, tags[name])


@pytest.mark.parametrize("name", sorted(SHARED))
def test_the_unsafe_rewrite_no_longer_writes_the_callers_tensor(name):
    """What the note says: on the path that kept ``x.float()`` (``x`` itself for a float32
    ``x``), the original wrote the caller's tensor; the rewrite does not."""
    before, after = load_module(FIXTURE), _rewritten(unsafe=True)
    gate = torch.tensor(-1.0)  # the condition is false: the name keeps the input
    x1, x2 = torch.arange(1.0, 5.0), torch.arange(1.0, 5.0)
    original, rewritten = getattr(before, name)(x1, gate), after[name](x2, gate)
    assert torch.equal(original, rewritten)  # the same value returned...
    assert not torch.equal(x1, x2)  # ...but only the original changed its input


def test_the_safe_rewrites_give_the_same_values_and_leave_the_input_alone():
    text = process(FIXTURE, FIXTURE.read_text(), all_rules(), fix=True).new_text
    for name in FRESH:  # rewritten...
        start = text.index(f"def {name}(")
        assert "torch.where(" in text[start:text.find("\ndef ", start + 1)], name
    before, after = load_module(FIXTURE), _rewritten(unsafe=False)
    for name in FRESH:  # ...as the same program
        for gate in (torch.tensor(1.0), torch.tensor(-1.0)):
            x1, x2 = torch.arange(1.0, 5.0), torch.arange(1.0, 5.0)
            assert torch.equal(getattr(before, name)(x1, gate), after[name](x2, gate)), name
            assert torch.equal(x1, x2), name
    for gate in (torch.tensor(1.0), torch.tensor(-1.0)):
        p1, p2, x1, x2 = torch.zeros(4), torch.zeros(4), torch.arange(1.0, 5.0), torch.arange(1.0, 5.0)
        assert torch.equal(before.copied_into(p1, x1, gate), after["copied_into"](p2, x2, gate))
        assert torch.equal(x1, x2)


def test_returning_a_parameter_where_the_original_did_makes_the_fix_unsafe():
    """The original returns the parameter itself when the condition is false: it keeps
    ``requires_grad`` under ``no_grad`` and the caller's in-place update reaches it.
    ``torch.where`` returns a new tensor."""
    fix, note = _tags()["Capped"]
    assert fix == "unsafe" and "`w` is returned" in note, note
    before, after = load_module(FIXTURE).Capped(), _rewritten(unsafe=True)["Capped"]()
    with torch.no_grad():
        original, rewritten = before.capped(), after.capped()
        assert original.requires_grad and not rewritten.requires_grad
        original.add_(1.0)
        rewritten.add_(1.0)
    assert torch.equal(before.weight, torch.full((3,), 2.0)) and torch.equal(after.weight, torch.ones(3))


def test_a_selection_printed_whole_afterwards_is_unsafe(capsys):
    """``print("loss", loss)`` of a tensor that requires grad shows the operation that
    made it: ``<MulBackward0>`` before, ``<WhereBackward0>`` after the fix."""
    fix, note = _tags()["halved_and_shown"]
    assert fix == "unsafe" and "printed whole later" in note, note
    before, after = load_module(FIXTURE), _rewritten(unsafe=True)
    x = torch.ones(4, requires_grad=True)
    before.halved_and_shown(x)
    after["halved_and_shown"](x)
    printed = capsys.readouterr().out.splitlines()
    assert "MulBackward0" in printed[0] and "WhereBackward0" in printed[1]


def test_the_callers_own_tensor_handed_back_makes_the_fix_unsafe():
    """Where the condition is false the original returns the caller's tensor itself (an
    in-place update of the result reaches the input), and a leaf keeps its ``.grad``;
    ``torch.where`` gives a new tensor, a non-leaf whose ``.grad`` is None."""
    tags = _tags()
    assert tags["scaled_input"][0] == "unsafe" and "`x` is returned" in tags["scaled_input"][1]
    assert tags["leaf_grad"][0] == "unsafe" and "`w.grad`" in tags["leaf_grad"][1]
    before, after = load_module(FIXTURE), _rewritten(unsafe=True)
    gate = torch.tensor(-1.0)
    x1, x2 = torch.ones(3), torch.ones(3)
    before.scaled_input(x1, gate).add_(1.0)
    after["scaled_input"](x2, gate).add_(1.0)
    assert torch.equal(x1, torch.full((3,), 2.0)) and torch.equal(x2, torch.ones(3))
    w1, w2 = torch.ones(3, requires_grad=True), torch.ones(3, requires_grad=True)
    assert torch.equal(before.leaf_grad(w1, gate), torch.full((3,), 2.0))
    with pytest.warns(UserWarning, match="non-leaf"):
        assert after["leaf_grad"](w2, gate) is None
