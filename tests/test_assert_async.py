"""FX401 on running code: checks move onto the device, graph breaks go to zero,
results stay equal, and a failing check still raises (a RuntimeError) on the CPU."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import test_threshold_fixtures as threshold
import torch
import torch._dynamo
from conftest import FIXTURES, load_module
from fixitem.codemods.driver.engine import process
from fixitem.codemods.driver.registry import all_rules

from fixitem import apply


def rewrite(code: str, unsafe: bool = True):
    return process(Path("checks.py"), code, all_rules(), fix=True, unsafe=unsafe)


FIXTURE = FIXTURES / "assert_async" / "assertions.py"


def load(code: str, name: str):
    namespace: dict = {}
    exec(compile(code, f"<{name}>", "exec"), namespace)
    return namespace


def test_assertions_fixture_breaks_go_to_zero_and_numbers_stay_equal(copy_fixture):
    """What tests/test_threshold_fixtures.py checks for the threshold fixtures. The file lives
    in its own folder: the tests of fixtures/threshold count its files and rules."""
    target = copy_fixture("assert_async/assertions.py")
    result = apply([target], unsafe=True)
    assert not result.errors
    assert {f.rule for f in result.applied} == {"FX401"} and len(result.applied) == 4
    assert result.findings == [], "every check must be rewritten"
    assert apply([target], unsafe=True, write=False).diff == "", "a second apply must change nothing"
    assert "assert h.shape[-1] == 8" in target.read_text()  # a size check is no sync: left alone
    before = load_module(FIXTURE)
    after = load_module(target)
    model_before, inputs = before.make()
    model_after, _ = after.make()
    model_after.load_state_dict(model_before.state_dict())
    threshold.assert_breaks_removed_and_numbers_equal(model_before, model_after, inputs)


def test_assertions_fixture_needs_unsafe_and_still_fails_loudly(copy_fixture):
    target = copy_fixture("assert_async/assertions.py")
    assert apply([target], unsafe=False).applied == []
    apply([target], unsafe=True)
    before = load_module(FIXTURE)
    after = load_module(target)
    model_before, _ = before.make()
    model_after, _ = after.make()
    model_after.load_state_dict(model_before.state_dict())
    compiled = torch.compile(model_after, fullgraph=True, backend="eager")
    bad_inputs = [
        ((torch.randn(4, 8), torch.tensor(-1.0)), AssertionError, "scale must be positive"),
        ((torch.full((4, 8), 1e6), torch.tensor(1.0)), AssertionError, "activations exploded"),
        ((torch.full((4, 8), float("nan")), torch.tensor(1.0)), AssertionError, "activations exploded"),
    ]
    torch._dynamo.reset()
    for args, error, message in bad_inputs:
        with pytest.raises(error):
            model_before(*args)
        with pytest.raises(RuntimeError, match=message):
            model_after(*args)
        with pytest.raises(RuntimeError, match=message):
            compiled(*args)
    torch._dynamo.reset()


CHECKS = """\
import torch

def check(loss: torch.Tensor, x: torch.Tensor):
    if torch.isnan(loss).any():
        raise FloatingPointError("NaN loss")
    if loss.item() > 100.0:
        raise ValueError("loss diverged")
    assert not float(x.min()) < -10, "input out of range"
    assert bool((x < 10).all())
    return loss * 2 + x.sum()
"""


def test_if_raise_and_assert_forms_keep_their_meaning():
    result = rewrite(CHECKS)
    assert result.error is None and result.new_text is not None
    assert "raise" not in result.new_text and "assert " not in result.new_text
    assert "torch._assert_async(~(loss > 100.0), \"loss diverged\")" in result.new_text
    before = load(CHECKS, "before")["check"]
    after = load(result.new_text, "after")["check"]

    ok = (torch.tensor(1.5), torch.randn(5))
    assert threshold.graph_breaks(before, ok) >= 1
    assert threshold.graph_breaks(after, ok) == 0
    torch._dynamo.reset()
    compiled = torch.compile(after, fullgraph=True, backend="eager")
    torch.testing.assert_close(after(*ok), before(*ok))
    torch.testing.assert_close(compiled(*ok), before(*ok))

    nan = float("nan")
    failing = [
        ((torch.tensor(nan), torch.zeros(5)), FloatingPointError, "NaN loss"),
        ((torch.tensor(1e3), torch.zeros(5)), ValueError, "loss diverged"),
        ((torch.tensor(1.0), torch.full((5,), -20.0)), AssertionError, "input out of range"),
        ((torch.tensor(1.0), torch.full((5,), 20.0)), AssertionError, "nonzero"),
    ]
    for args, error, message in failing:
        with pytest.raises(error):
            before(*args)
        with pytest.raises(RuntimeError, match=message):
            after(*args)
        with pytest.raises(RuntimeError, match=message):
            compiled(*args)
    # ``not loss > 100`` is true for NaN: the negated check must not flip into ``<=``.
    with pytest.raises(RuntimeError, match="NaN loss"):
        after(torch.tensor(nan), torch.zeros(5))
    torch._dynamo.reset()


@pytest.mark.parametrize(
    ("code", "note"),
    [
        # Python logic mixed with the tensor test.
        ("def f(x: torch.Tensor, n):\n    assert n is None or x.max().item() < n\n", "Python logic"),
        # The message reads a tensor value.
        ("def f(x: torch.Tensor):\n    assert x.min().item() >= 0, f'min {x.min().item()}'\n", "formats tensor values"),
        # The exception type may be caught.
        (
            "def f(x: torch.Tensor):\n    try:\n        assert (x > 0).all()\n    except AssertionError:\n        pass\n",
            "inside `try`",
        ),
        # A test's assertion.
        # (on a device: ``torch.ones(3)`` alone is a CPU tensor, whose read syncs nothing)
        ("def test_f():\n    x = torch.ones(3, device='cuda')\n    assert (x > 0).all()\n", "in a test"),
    ],
)
def test_no_fix_cases_say_what_to_do(code, note):
    code = "import torch\n\n" + code
    result = rewrite(code)
    assert result.new_text is None
    (finding,) = [f for f in result.findings if f.rule == "FX401"]
    assert finding.fix == "none" and note in finding.note


def test_if_with_else_or_more_than_a_raise_is_left_to_fx101():
    code = (
        "import torch\n\n"
        "def f(x: torch.Tensor):\n"
        "    if x.max().item() > 1:\n"
        "        raise ValueError('big')\n"
        "    else:\n"
        "        x = x * 2\n"
        "    return x\n"
    )
    assert [f.rule for f in rewrite(code).findings] == ["FX101"]


def test_messages_that_are_not_literals_are_left_out_and_a_number_is_tested_against_zero():
    code = (
        "import torch\n\n"
        "def f(x: torch.Tensor, msg: str):\n"
        "    assert x.sum().item(), msg\n"
        "    if (x < -1).sum():\n"
        "        raise ValueError('{} {{braces}}'.format(msg))\n"
        "    assert (x > 0).all(), f'{{x}} at {msg!r:>5}' 'tail'\n"
    )
    result = rewrite(code)
    lines = result.new_text.splitlines()
    assert lines[3] == "    torch._assert_async(x.sum() != 0)"
    assert lines[4] == "    torch._assert_async((x < -1).sum() == 0)"
    assert lines[5] == "    torch._assert_async((x > 0).all(), f'{{x}} at {msg!r:>5}' 'tail')"
    notes = [f.note for f in result.applied]
    assert "is left out" in notes[0] and "formatted on every call" in notes[2]
    f = load(result.new_text, "after")["f"]
    f(torch.ones(3), "m")
    with pytest.raises(RuntimeError):
        f(torch.tensor([1.0, -1.0]), "m")  # sums to zero
    with pytest.raises(RuntimeError):
        f(torch.tensor([2.0, -3.0]), "m")  # one value below -1
    with pytest.raises(AssertionError) as before:
        load(code, "before")["f"](torch.tensor([2.0, -0.5]), "m")
    # The f-string is filled in exactly as the original message was.
    with pytest.raises(RuntimeError, match=f"^{re.escape(str(before.value))}$"):
        f(torch.tensor([2.0, -0.5]), "m")
