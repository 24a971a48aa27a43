"""Rewrites need certainty: a value taken for a tensor only by presumption, or
derived from `torch.load`, is never rewritten into tensor code, and what the
original returned keeps its Python type."""

from __future__ import annotations

from pathlib import Path

import torch
from conftest import load_module
from fixitem.codemods.driver.engine import process
from fixitem.codemods.driver.registry import all_rules

AUTOGRAD = '''
import torch


class Scale(torch.autograd.Function):
    @staticmethod
    def forward(ctx, scale, t):
        out = scale * t.item()
        if scale > 1:
            out = out * 0.5
        return out

    @staticmethod
    def backward(ctx, grad):
        return None, None
'''


def rewrite(code: str):
    return process(Path("example.py"), code, all_rules(), fix=True, unsafe=True)


def test_number_parameters_of_autograd_function_forward_are_not_rewritten(tmp_path):
    result = rewrite(AUTOGRAD)
    assert result.new_text is None, "nothing may be rewritten"
    rules = {f.rule for f in result.findings}
    # `scale` is used only as a number: not a tensor, so `if scale > 1:` is no finding at all;
    # `t.item()` still is.
    assert "FX101" not in rules and rules
    path = tmp_path / "autograd_scale.py"
    path.write_text(AUTOGRAD)
    out = load_module(path).Scale.apply(3, torch.tensor(2.0))
    assert type(out) is float and out == 3.0


def test_a_returned_bound_keeps_its_python_type():
    code = (
        "import torch\n\n"
        "def bound(x: torch.Tensor) -> float:\n"
        "    b = max(x.abs().max().item(), 1e-6)\n"
        "    return b\n\n"
        "def span(n: int, k: int, p: int, device: torch.device):\n"
        "    pos = torch.tensor([p], device=device)\n"
        "    m = min(k, (n - pos - 1).item())\n"
        "    return list(range(m + 1))\n"
    )
    result = rewrite(code)
    assert result.new_text is None
    notes = [f.note for f in result.findings if f.rule == "FX103"]
    assert any("-> float" in n for n in notes) and any("`range`" in n for n in notes)


def test_a_one_element_tensor_kept_by_clamp_is_reshaped_to_0_dim():
    code = (
        "import torch\n\n"
        "def f(x: torch.Tensor, p: torch.Tensor):\n"
        "    return x.sum() * min(p.item(), 2.0)\n"
    )
    result = rewrite(code)
    assert "torch.clamp(p.detach().reshape(()), max=2.0)" in result.new_text
    namespace: dict = {}
    exec(compile(result.new_text, "after", "exec"), namespace)
    before: dict = {}
    exec(compile(code, "before", "exec"), before)
    x, p = torch.randn(3), torch.tensor([5.0])
    assert namespace["f"](x, p).shape == before["f"](x, p).shape == ()


def test_an_assert_on_a_number_parameter_stays_an_assert():
    code = (
        "import torch\n\n"
        "class Shard(torch.autograd.Function):\n"
        "    @staticmethod\n"
        "    def forward(ctx, x, world):\n"
        "        assert world > 0, f'world size {world} must be positive'\n"
        "        return x * 1.0\n"
    )
    result = rewrite(code)
    assert result.new_text is None
    # `world` is compared and formatted only: a number, so the assert is no finding.
    assert [f for f in result.findings if f.rule == "FX401"] == []


def test_numbers_returned_under_a_number_annotation_are_never_tensors():
    code = (
        "import torch\n"
        "from typing import Optional\n\n"
        "def stats(x: torch.Tensor) -> tuple[float, float]:\n"
        "    lo = max(x.min().item(), 0.0)\n"
        "    return lo, 1.0\n\n"
        "def level(x: torch.Tensor) -> Optional[float]:\n"
        "    return 0.5 if x.mean().item() > 0 else 0.25\n"
    )
    result = rewrite(code)
    assert result.new_text is None
    notes = [f.note for f in result.findings if f.rule in ("FX102", "FX103")]
    assert len(notes) == 2 and all(n.startswith("no fix:") and "-> " in n for n in notes)


def test_a_one_element_condition_selecting_numbers_keeps_the_result_0_dim():
    code = (
        "import torch\n\n"
        "def f(x: torch.Tensor, p: torch.Tensor):\n"
        "    s = 2.0 if p.item() > 1 else 1.0\n"
        "    return x.sum() * s\n"
    )
    result = rewrite(code)
    assert "s = torch.where(p.reshape(()) > 1, 2.0, 1.0)" in result.new_text
    before: dict = {}
    after: dict = {}
    exec(compile(code, "before", "exec"), before)
    exec(compile(result.new_text, "after", "exec"), after)
    for p in (torch.tensor([3.0]), torch.tensor([[0.5]])):
        x = torch.randn(3)
        expected, got = before["f"](x, p), after["f"](x, p)
        assert got.shape == expected.shape == ()
        assert torch.equal(got, expected)


FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "module_level"


def test_a_module_level_counter_that_decides_control_flow_is_not_rewritten():
    """A script's top level is followed like a function's body: the counter later decides
    an `if` and is printed, so it must stay a Python number (no fix in either mode)."""
    path = FIXTURES / "counter_in_control_flow.py"
    result = rewrite(path.read_text())
    assert result.new_text is None
    (finding,) = [f for f in result.findings if f.rule == "FX101"]
    assert finding.fix == "none" and "`streak` then decides Python control flow" in finding.note


def test_a_module_level_name_used_only_in_tensor_code_is_an_unsafe_fix():
    code = (
        "import torch\n\n"
        "x = torch.randn(4, device='cuda')\n"  # without device=, a CPU tensor: no sync to remove
        "scale = 1.0\n"
        "if x.abs().max().item() > 2.0:\n"
        "    scale = 0.5\n"
        "y = x * scale\n"
    )
    result = process(Path("script.py"), code, all_rules())
    (finding,) = [f for f in result.findings if f.rule == "FX101"]
    assert finding.fix == "unsafe" and "module-level name: other modules may import it" in finding.note
