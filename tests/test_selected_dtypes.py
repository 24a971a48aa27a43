"""``torch.where`` gives its two values one dtype: a selection is safe only when fixitem
can show that they have one already (fixtures/dtypes/selections.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from conftest import load_module
from fixitem.codemods.driver.engine import process
from fixitem.codemods.driver.registry import all_rules

SELECTIONS = Path(__file__).resolve().parent.parent / "fixtures" / "dtypes" / "selections.py"
DIFFER = {"float_or_int", "converted", "divided", "scaled_input", "rebound_after_the_test"}
SAME = {"shifted", "scaled_output", "scaled_by_norm", "clamped_half", "clamped_when_not_finite"}


def _selections() -> dict[str, str]:
    """The fix tag of each function's FX101 / FX102 finding."""
    import ast

    text = SELECTIONS.read_text()
    functions = [n for n in ast.parse(text).body if isinstance(n, ast.FunctionDef)]
    found = process(SELECTIONS, text, all_rules()).findings
    tags = {}
    for finding in found:
        if finding.rule in ("FX101", "FX102"):
            (function,) = [f.name for f in functions if f.lineno <= finding.line <= f.end_lineno]
            tags.setdefault(function, []).append((finding.fix, finding.note))
    return {name: tags[name][-1] for name in tags}


def test_values_that_may_have_two_dtypes_are_unsafe_and_say_why():
    tags = _selections()
    assert DIFFER | SAME <= set(tags)
    for name in DIFFER:
        fix, note = tags[name]
        assert fix == "unsafe" and "one dtype" in note, (name, fix, note)
    for name in SAME:
        assert tags[name][0] == "safe", (name, tags[name])


@pytest.mark.parametrize("name", sorted(DIFFER - {"rebound_after_the_test"}))
def test_the_unsafe_rewrite_changes_the_dtype_of_an_integer_tensor(name):
    """What the note says happens: on integer inputs the rewritten function gives another dtype."""
    result = process(SELECTIONS, SELECTIONS.read_text(), all_rules(), fix=True, unsafe=True)
    after: dict = {}
    exec(compile(result.new_text, "after", "exec"), after)
    before = load_module(SELECTIONS)
    x, t = torch.arange(4), torch.tensor(3)
    dtypes = set()
    for gate in (t, -t):
        original, rewritten = getattr(before, name)(x, gate), after[name](x, gate)
        dtypes.add(original.dtype == rewritten.dtype)
    assert False in dtypes


def test_the_safe_rewrites_keep_every_dtype():
    result = process(SELECTIONS, SELECTIONS.read_text(), all_rules(), fix=True)
    after: dict = {}
    exec(compile(result.new_text, "after", "exec"), after)
    before = load_module(SELECTIONS)
    layer = nn_identity()
    for x in (torch.arange(4), torch.arange(4.0) * 10, torch.arange(4.0).half()):
        for t in (torch.tensor(1), torch.tensor(-1)):
            cases = [("shifted", (x, t)), ("scaled_by_norm", (x.float() if not x.is_floating_point() else x,)),
                     ("scaled_output", (layer, x.float(), t)), ("clamped_half", (x.half(), layer)),
                     ("clamped_when_not_finite", (torch.cat([x.half(), torch.tensor([float("inf")]).half()]),))]
            for name, args in cases:
                original, rewritten = getattr(before, name)(*args), after[name](*args)
                assert original.dtype == rewritten.dtype and torch.equal(original, rewritten), name


def nn_identity():
    return torch.nn.Identity()
