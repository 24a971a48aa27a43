"""The threshold rewrites on real model files: graph breaks go to zero and
outputs and gradients stay equal, on inputs that take each side of every
condition."""

from __future__ import annotations

import pytest
import torch
import torch._dynamo
from conftest import FIXTURES, load_module
from torch._dynamo.utils import counters

from fixitem import apply, scan

FIXTURE_FILES = {
    "scale_if.py": False,
    "gate_if_else.py": True,  # self.fc / self.norm in one branch only: needs --unsafe
    "hoisted_condition.py": True,  # self.scale in one branch only
    "conditional_expression.py": False,
    "clamp_norm.py": False,
    "unsafe_updates.py": False,  # provably the same since fresh locals and exact numbers are followed
}
# fixtures/threshold_models: the README's model and the patterns of real code.
MODEL_FILES = {
    "readme_gated_mlp.py": True,  # the gate's branch alone calls self.down
    "stored_energy.py": False,
    "selected_scale.py": False,
    "norm_divisor.py": False,
    "fresh_local.py": False,
    "branch_modules.py": True,
}


def graph_breaks(model, args) -> int:
    """Breaks seen by ``explain``, or by Dynamo's counters where explain misses them."""
    torch._dynamo.reset()
    counters["graph_break"].clear()
    explained = torch._dynamo.explain(model)(*args)
    return max(explained.graph_break_count, sum(counters["graph_break"].values()))


def outputs_and_grads(model, args):
    torch.manual_seed(0)
    args = tuple(a.clone().requires_grad_(a.is_floating_point()) for a in args)
    model.zero_grad(set_to_none=True)
    out = model(*args)
    out.float().sum().backward()
    grads = {name: (p.grad if p.grad is not None else torch.zeros_like(p)) for name, p in model.named_parameters()}
    inputs = [a.grad if a.grad is not None else torch.zeros_like(a) for a in args if a.is_floating_point()]
    return out.detach(), grads, inputs


def assert_breaks_removed_and_numbers_equal(model_before, model_after, inputs) -> None:
    """Before breaks the graph, after does not (and compiles with fullgraph=True), and
    outputs, parameter gradients and input gradients are equal on every input."""
    for args in inputs:
        assert graph_breaks(model_before, args) >= 1
        assert graph_breaks(model_after, args) == 0
        compiled = torch.compile(model_after, fullgraph=True, backend="eager")
        torch.testing.assert_close(compiled(*args), model_after(*args))
        out_b, grads_b, in_b = outputs_and_grads(model_before, args)
        out_a, grads_a, in_a = outputs_and_grads(model_after, args)
        torch.testing.assert_close(out_a, out_b)
        for key in grads_b:
            torch.testing.assert_close(grads_a[key], grads_b[key])
        for a, b in zip(in_a, in_b):
            torch.testing.assert_close(a, b)
    torch._dynamo.reset()


@pytest.mark.parametrize(
    ("folder", "name", "unsafe"),
    [("threshold", n, u) for n, u in FIXTURE_FILES.items()] + [("threshold_models", n, u) for n, u in MODEL_FILES.items()],
)
def test_rewrite_removes_breaks_and_keeps_numbers(copy_fixture, folder, name, unsafe):
    target = copy_fixture(f"{folder}/{name}")
    before = load_module(FIXTURES / folder / name)
    result = apply([target], unsafe=unsafe)
    assert not result.errors
    assert result.applied, "the fixture must be rewritten"
    assert not [f for f in result.findings if f.fix != "none"], "every fixable site must be fixed"
    after = load_module(target)

    model_before, inputs = before.make()
    model_after, _ = after.make()
    model_after.load_state_dict(model_before.state_dict())
    assert_breaks_removed_and_numbers_equal(model_before, model_after, inputs)


def test_rewritten_fixture_has_no_remaining_fixable_sites(copy_fixture):
    folder = copy_fixture("threshold")
    apply([folder], unsafe=True)
    left = scan([folder])
    assert all(f.fix == "none" for f in left.findings)
    assert {f.rule for f in left.findings} == {"FX101", "FX004", "FX006"}  # report_only.py
    second = apply([folder], unsafe=True, write=False)
    assert second.diff == ""


def test_report_only_fixture_is_not_rewritten(copy_fixture):
    target = copy_fixture("threshold/report_only.py")
    original = target.read_bytes()
    result = apply([target], unsafe=True)
    assert target.read_bytes() == original
    notes = {f.rule: f.note for f in result.findings}
    assert "a branch returns" in notes["FX101"]
    assert "size" in notes["FX006"]
    lines = [f.line for f in result.findings]
    assert 15 not in lines  # np.random.rand(1).item() is numpy, not a tensor sync
