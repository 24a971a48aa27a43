"""Safe threshold rewrites train the same: a few steps of AdamW (weight decay,
moments) and SGD with momentum on the code before and after `apply`, on inputs
that take both sides of every condition, end with identical parameters.

AdamW and momentum update a parameter whose gradient is zero but skip one whose
gradient is None, so a `torch.where` that gives the parameters of the untaken
branch zero gradients shows up here as different parameters.
"""

from __future__ import annotations

import pytest
import torch
from conftest import FIXTURES, load_module
from fixitem.verify import run_verify

from fixitem import apply

# Fixture models whose default-mode rewrite must train exactly as the original did.
SAFE_MODELS = [
    "threshold/scale_if.py",
    "threshold/conditional_expression.py",
    "threshold/clamp_norm.py",
    "threshold/unsafe_updates.py",
    "threshold_models/readme_gated_mlp.py",
    "threshold_models/stored_energy.py",
    "threshold_models/selected_scale.py",
    "threshold_models/norm_divisor.py",
    "threshold_models/fresh_local.py",
]
# Models whose torch.where would train differently: the default mode leaves them
# alone, `--unsafe` rewrites them, and then training does differ.
BRANCH_ONLY_PARAMETERS = [
    "threshold/gate_if_else.py",
    "threshold/hoisted_condition.py",
    "threshold_models/branch_modules.py",
    "threshold_models/readme_gated_mlp.py",
]

OPTIMIZERS = {
    # eps large enough for float16 leaves (1e-8 is 0 there, and 0 / 0 is NaN)
    "adamw": lambda params: torch.optim.AdamW(params, lr=0.05, weight_decay=0.1, eps=1e-3),
    "sgd-momentum": lambda params: torch.optim.SGD(params, lr=0.05, momentum=0.9),
}


def train(module, optimizer: str, steps: int = 6) -> list[torch.Tensor]:
    """Train the fixture's model and its floating inputs (so that models without
    parameters are trained too) for ``steps`` steps, cycling through its inputs."""
    model, inputs = module.make()
    model.train()
    leaves = [[a.clone().requires_grad_(a.is_floating_point()) for a in args] for args in inputs]
    trained = list(model.parameters()) + [a for args in leaves for a in args if a.requires_grad]
    opt = OPTIMIZERS[optimizer](trained)
    for step in range(steps):
        args = leaves[step % len(leaves)]
        opt.zero_grad(set_to_none=True)
        out = model(*args)
        loss = out.float().pow(2).mean()
        loss.backward()
        opt.step()
    return [t.detach().clone() for t in trained]


def assert_same_training(before, after) -> None:
    for optimizer in OPTIMIZERS:
        torch.manual_seed(0)
        trained_before = train(before, optimizer)
        torch.manual_seed(0)
        trained_after = train(after, optimizer)
        assert len(trained_before) == len(trained_after)
        for b, a in zip(trained_before, trained_after):
            torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-7, msg=lambda m: f"{optimizer}: {m}")


def rewritten(copy_fixture, name: str, unsafe: bool):
    target = copy_fixture(name)
    result = apply([target], unsafe=unsafe)
    assert not result.errors
    return result, load_module(target)


@pytest.mark.parametrize("name", SAFE_MODELS)
def test_safe_rewrite_trains_identically(copy_fixture, name):
    result, after = rewritten(copy_fixture, name, unsafe=False)
    assert result.applied, "the default mode must rewrite the model"
    assert {f.rule for f in result.applied} <= {"FX101", "FX102", "FX103", "FX301", "FX302"}
    assert_same_training(load_module(FIXTURES / name), after)


@pytest.mark.parametrize("name", BRANCH_ONLY_PARAMETERS)
def test_branch_only_parameters_are_left_to_unsafe_and_would_change_training(copy_fixture, name):
    safe, _ = rewritten(copy_fixture, name, unsafe=False)
    assert all("part in only one branch" not in f.note for f in safe.applied)
    unsafe, after = rewritten(copy_fixture, name, unsafe=True)
    reasons = [f.note for f in unsafe.applied if "part in only one branch" in f.note]
    assert reasons, "the unsafe fix must name the branch-only parameters"
    with pytest.raises(AssertionError):
        assert_same_training(load_module(FIXTURES / name), after)


def test_python_values_are_never_selected_or_returned_as_tensors(copy_fixture):
    target = copy_fixture("threshold_models/python_values.py")
    original = target.read_bytes()
    result = apply([target], unsafe=True)
    assert target.read_bytes() == original
    notes = [f.note for f in result.findings if f.rule in ("FX101", "FX102", "FX103")]
    assert len(notes) == 6 and all(n.startswith("no fix:") for n in notes)
    joined = "\n".join(notes)
    for reason in ("`Mode.TRAIN` is not known", "Python flag", "torch.load", "torch.arange", "-> float"):
        assert reason in joined
    # `tp_degree`, a number parameter of autograd.Function.forward, is not a tensor: no finding at all.
    assert not [f for f in result.findings if f.line == 11]
    module = load_module(target)
    bias, (mode, resumed), span, peak = module.run()
    assert isinstance(mode, module.Mode) and isinstance(resumed, bool)
    assert span.shape == (4,) and type(peak) is float


@pytest.mark.parametrize("name", [n for n in SAFE_MODELS if n.startswith("threshold_models/")])
def test_inputs_take_both_sides_of_every_rewritten_condition(copy_fixture, name):
    """(The fixtures under threshold/ are checked so by test_verify_on_rewrites.)"""
    after = copy_fixture(name)
    apply([after])
    report = run_verify(after, before=FIXTURES / name, factory="make", backend="eager")
    assert report.after.syncs_per_call < report.before.syncs_per_call
    for condition in report.conditions:
        assert condition.true_seen and condition.false_seen, condition


# -- the rules' own safe examples ---------------------------------------------------------------

def _randn(*shape, scale=1.0, shift=0.0):
    return torch.randn(*shape) * scale + shift


def _mask(*trues):
    mask = torch.zeros(3, 4, dtype=torch.bool)
    for i, j in trues:
        mask[i, j] = True
    return mask


def _half_layer():
    layer = torch.nn.Linear(4, 4).half()
    with torch.no_grad():
        layer.weight.fill_(0.5)
        layer.bias.zero_()
    return layer


def _unit_layer():
    """A layer that passes its input on unchanged (at first: it trains)."""
    layer = torch.nn.Linear(4, 4, bias=False)
    with torch.no_grad():
        layer.weight.copy_(torch.eye(4))
    return layer


def _overflowing_row():
    """float16 rows whose first row overflows to inf in the layer (and is clamped),
    the others small: gradients stay in float16's range."""
    x = _randn(3, 4, scale=0.1)
    x[0] = 4e4
    return x.half()


# Inputs for every safe torch.where / clamp example of FX101, FX102 and FX103,
# chosen so that each condition is seen both ways, keyed by the rule and a piece
# of the example's code; a new safe example must be given its inputs here.
EXAMPLE_INPUTS = {
    ("FX101", "if y.abs().max().item() > 1.0"): lambda: [(_unit_layer(), _randn(3, 4, scale=0.1)), (_unit_layer(), _randn(3, 4, scale=5))],
    ("FX101", "energy = float("): lambda: [(_unit_layer(), _randn(3, 4, scale=0.1, shift=-1)),
                                           (_unit_layer(), _randn(3, 4, scale=5))],
    ("FX101", "h.norm(dim=-1, keepdim=True)"): lambda: [(_randn(1, 4, scale=0.01),), (_randn(1, 4, scale=50),)],
    ("FX101", "h = h / h.norm()"): lambda: [(_randn(3, 4, shift=3),), (_randn(3, 4, shift=-3),)],
    ("FX101", "h += 1.0"): lambda: [(_randn(3, 4, shift=-5),), (_randn(3, 4, shift=5),)],
    ("FX101", "y = x * 3"): lambda: [(_randn(2, 5, shift=3), _randn(2, 5)), (_randn(2, 5, shift=-3), _randn(2, 5))],
    ("FX101", "mask.sum().item()"): lambda: [(_randn(3, 4), _mask()), (_randn(3, 4), _mask((0, 1), (2, 3))), (_randn(3, 4), None)],
    ("FX101", "clamp_value"): lambda: [(_randn(3, 4, scale=0.1).half(), _half_layer()), (_overflowing_row(), _half_layer())],
    ("FX102", "return x * 0.5 if"): lambda: [(_randn(3, 4, scale=0.1),), (_randn(3, 4, scale=20),)],
    ("FX102", "scale = 0.5 if"): lambda: [(_randn(3, 4, scale=0.1),), (_randn(3, 4, scale=5),)],
    ("FX103", "x / max("): lambda: [(_randn(3, 4),), (torch.zeros(3, 4),)],
}


def _safe_examples():
    from fixitem.codemods.driver.registry import RULE_CLASSES
    from fixitem.codemods.rule import Invalid

    for cls in RULE_CLASSES:
        if cls.code in ("FX101", "FX102", "FX103"):
            for index, example in enumerate(cls.examples):
                if isinstance(example, Invalid) and example.fixed is not None and not example.unsafe:
                    yield pytest.param(cls.code, example, id=f"{cls.code}-{index}")


def _entry_point(code: str):
    """The example's model: its nn.Module class, built, or its first function."""
    namespace: dict = {"__name__": "example"}
    exec(compile(code, "example", "exec"), namespace)
    for value in namespace.values():
        if isinstance(value, type) and issubclass(value, torch.nn.Module) and value.__module__ == namespace.get("__name__"):
            torch.manual_seed(0)
            return value()
    import inspect

    functions = [v for k, v in namespace.items() if callable(v) and not isinstance(v, type)
                 and getattr(inspect.unwrap(v), "__code__", None) is not None
                 and inspect.unwrap(v).__code__.co_filename == "example"]  # ``@torch.no_grad()`` wraps
    return functions[0]


def _train_example(code: str, inputs, optimizer: str, steps: int = 6) -> list[torch.Tensor]:
    model = _entry_point(code)
    trained = list(model.parameters()) if isinstance(model, torch.nn.Module) else []
    leaves = []
    for args in inputs:
        row = []
        for a in args:
            if isinstance(a, torch.Tensor) and a.is_floating_point():
                a = a.clone().requires_grad_(True)
                trained.append(a)
            row.append(a)  # a module argument is used, not trained (float16 weights would overflow)
        leaves.append(row)
    opt = OPTIMIZERS[optimizer](trained)
    results = []
    for step in range(steps):
        opt.zero_grad(set_to_none=True)
        out = model(*leaves[step % len(leaves)])
        outs = out if isinstance(out, tuple) else (out,)
        results.extend(o.detach().clone() for o in outs)
        loss = sum(o.float().pow(2).mean() for o in outs)
        if loss.requires_grad:  # a ``torch.no_grad()`` example computes no gradient
            loss.backward()
        opt.step()
    return [t.detach().clone() for t in trained] + results


@pytest.mark.parametrize(("rule", "example"), list(_safe_examples()))
def test_safe_rule_example_trains_identically(rule, example):
    keys = [k for k in EXAMPLE_INPUTS if k[0] == rule and k[1] in example.code]
    assert len(keys) == 1, f"give this safe {rule} example inputs that take both branches:\n{example.code}"
    (key,) = keys
    for optimizer in OPTIMIZERS:
        results = []
        for code in (example.code, example.fixed):
            torch.manual_seed(0)
            inputs = EXAMPLE_INPUTS[key]()
            results.append(_train_example(code, inputs, optimizer))
        for b, a in zip(*results):
            torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-7, msg=lambda m: f"{key} {optimizer}: {m}")


def test_only_a_condition_reduced_along_a_dimension_keeps_its_one_element_check():
    """``h.norm(dim=-1, keepdim=True) > 1`` raised for more than one row, and the fix
    still does (``.reshape(())``); ``x.norm(dim=-1).max() > 20`` is one element already."""
    from pathlib import Path

    from fixitem.codemods.driver.engine import process
    from fixitem.codemods.driver.registry import all_rules

    code = (
        "import torch\nfrom torch import nn\n\n"
        "class M(nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.lin = nn.Linear(4, 4)\n"
        "    def forward(self, x):\n"
        "        x = self.lin(x)\n"
        "        if x.norm(dim=-1).max() > 20.0:\n"
        "            x = x * 0.5\n"
        "        if x.norm(dim=-1, keepdim=True) > 1.0:\n"
        "            x = x * 0.5\n"
        "        return x\n"
    )
    text = process(Path("m.py"), code, all_rules(), fix=True).new_text
    assert "torch.where(x.norm(dim=-1).max() > 20.0, x * 0.5, x)" in text
    assert "torch.where(x.norm(dim=-1, keepdim=True).reshape(()) > 1.0, x * 0.5, x)" in text
    after: dict = {}
    exec(compile(text, "after", "exec"), after)
    with pytest.raises(RuntimeError):
        after["M"]()(torch.randn(3, 4))  # three rows: the original's ``bool()`` raised too
