"""Semantic traps from real code: what must be left alone, and why."""

from __future__ import annotations

from pathlib import Path

from fixitem.codemods.driver.engine import process
from fixitem.codemods.driver.registry import all_rules


def run(code: str, unsafe: bool = True):
    return process(Path("trap.py"), code, all_rules(), fix=True, unsafe=unsafe)


def scan(code: str):
    return process(Path("trap.py"), code, all_rules()).findings


def test_numpy_item_is_never_touched():
    code = (
        "import numpy as np\nimport torch\n\n"
        "def f(x: torch.Tensor):\n"
        "    v = np.random.rand(1)\n"
        "    w = np.float32(2.0)\n"
        "    if v.item() > 0.5 and w.item() > 1:\n"
        "        x = x * 2\n"
        "    return x, np.random.rand(1).item()\n"
    )
    assert run(code).new_text is None
    assert scan(code) == []


def test_dict_items_and_non_tensor_calls_are_not_syncs():
    code = "import torch\nconfig = {'a': 1}\nfor k, v in config.items():\n    print(k, float(v), int('3'))\n"
    assert scan(code) == []


def test_name_rebound_from_item_is_a_number_and_left_alone():
    code = (
        "import torch\n\n"
        "def f(x: torch.Tensor):\n"
        "    m = x.max()\n"
        "    m = m.item()\n"
        "    if m > 3:\n"
        "        x = x * 2\n"
        "    return x, int(m)\n"
    )
    result = run(code)
    assert result.new_text is None
    assert [f.rule for f in result.findings] == ["FX001"]


def test_item_used_to_detach_becomes_detach_only_next_to_a_tensor():
    code = "import torch\n\ndef f(value: torch.Tensor, R: torch.Tensor):\n    return R - value.item()\n"
    # Unsafe: `R` may be 0-dim, and `value`'s dtype would then win (float32 - float64 gives float64).
    assert run(code, unsafe=False).new_text is None
    assert run(code, unsafe=True).new_text.endswith("    return R - value.detach().reshape(())\n")
    # R may be a Python number: the result would turn from a float into a tensor.
    code = "import torch\n\ndef f(value: torch.Tensor, R):\n    return R - value.item()\n"
    result = run(code)
    assert result.new_text is None
    assert [f.rule for f in result.findings] == ["FX001"]


def test_python_type_matters_min_max_result_stays_unsafe():
    code = "import json\nimport torch\n\ndef f(loss: torch.Tensor):\n    return json.dumps({'lr': min(loss.item(), 0.1)})\n"
    result = process(Path("trap.py"), code, all_rules(), fix=True, unsafe=False)
    assert result.new_text is None
    assert [f.fix for f in result.findings] == ["unsafe"]


def test_item_in_lambda_and_comprehension_is_reported_only():
    code = (
        "import torch\n\n"
        "def f(xs: torch.Tensor):\n"
        "    key = lambda t: t.item()\n"
        "    return [x.item() for x in xs], key\n"
    )
    result = run(code)
    # FX303 reads the comprehension's tensor once (the one `.tolist()` left is FX002's);
    # the lambda's read stays reported only.
    assert result.new_text == code.replace("[x.item() for x in xs]", "xs.reshape(len(xs)).tolist()")
    assert {f.rule for f in result.findings} == {"FX001", "FX002"}


def test_docstrings_and_doctests_are_never_touched():
    code = (
        '"""Module.\n\n>>> if t.item() > 0:\n...     x = x * 2\n"""\n'
        "import torch\n\n"
        "def f(x: torch.Tensor):\n"
        '    """>>> print(f"{x.item():.3f}")"""\n'
        "    return x\n"
    )
    assert scan(code) == []
    assert run(code).new_text is None


def test_code_guarded_by_is_compiling_is_left_as_written():
    code = (
        "import torch\nfrom torch import nn\n\n"
        "class M(nn.Module):\n"
        "    def forward(self, x):\n"
        "        if not torch.compiler.is_compiling():\n"
        "            if x.max().item() > 1:\n"
        "                x = x / 2\n"
        "        return x\n"
    )
    result = run(code)
    assert result.new_text is None
    [finding] = result.findings
    assert finding.costs == ("host-sync",)
    assert "guarded by `if not torch.compiler.is_compiling():`" in finding.note


def test_repr_methods_are_not_reported():
    code = (
        "import torch\nfrom torch import nn\n\n"
        "class M(nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.scale = nn.Parameter(torch.ones(()))\n"
        "    def extra_repr(self):\n"
        "        return f'scale={self.scale.item():.3f}'\n"
    )
    assert scan(code) == []


def test_tensor_mutated_after_read_keeps_order_of_evaluation():
    code = (
        "import torch\n\n"
        "def f(x: torch.Tensor, t: torch.Tensor):\n"
        "    if t.item() > 0:\n"
        "        x = x + 1\n"
        "        t = t - 1\n"
        "    return x, t\n"
    )
    new = run(code).new_text
    # The condition is computed once, before either name changes.
    assert new is not None
    lines = [line.strip() for line in new.splitlines()]
    assert lines.index("cond = t > 0") < lines.index("x = torch.where(cond, x + 1, x)")
    assert "t = torch.where(cond, t - 1, t)" in lines


def test_annotated_forward_parameter_is_not_assumed_a_tensor():
    # From timm's twins.py: ``size`` is a (H, W) pair, annotated.
    code = (
        "import torch\nfrom torch import nn\n\n"
        "class Attn(nn.Module):\n"
        "    def forward(self, x, size: tuple[int, int], mask: torch.Tensor | None = None):\n"
        "        H, W = size\n"
        "        pad = (7 - W % 7) % 7\n"
        "        if pad > 0:\n"
        "            x = x[:, :H]\n"
        "        if mask is not None and mask.sum().item() > 0:\n"
        "            x = x * 2\n"
        "        return x\n"
    )
    findings = scan(code)
    assert [f.line for f in findings] == [10]  # only the mask test reads a tensor


def test_math_functions_are_not_tensor_methods():
    code = (
        "import math\nimport torch\n\n"
        "def check(shift: float | None):\n"
        "    if shift is not None and (not math.isfinite(shift) or shift < 0):\n"
        "        raise ValueError(shift)\n"
    )
    assert scan(code) == []


def test_container_branches_are_not_selected():
    code = "import torch\n\ndef f(x: torch.Tensor):\n    return () if x.sum().item() > 0 else (1,)\n"
    result = run(code)
    assert result.error is None and result.new_text is None
    assert result.findings[0].note == "no fix: `()` is neither a tensor nor a number"


def test_a_rule_that_crashes_is_an_error_for_that_file_only(monkeypatch):
    from fixitem.codemods.rules.where_if import WhereIf

    def boom(self, ctx, sites, claimed):
        raise RuntimeError("bug")
        yield  # pragma: no cover

    monkeypatch.setattr(WhereIf, "check", boom)
    result = run("import torch\n\ndef f(x: torch.Tensor):\n    return x.item()\n")
    assert result.new_text is None
    assert "internal error in fixitem (RuntimeError: bug)" in result.error


def test_reads_on_the_error_path_are_not_reported():
    code = (
        "import torch\n\n"
        "def f(x: torch.Tensor):\n"
        "    if x.dim() != 2:\n"
        "        raise ValueError(f'bad input {x.shape} max {x.max().item()}')\n"
        "    assert x.dim() == 2, f'got {x}'\n"
        "    return x\n"
    )
    assert scan(code) == []


def test_flags_and_none_are_never_selected_with_where():
    # From transformers: a bool flag annotated as a tensor, and a None branch.
    code = (
        "import torch\nfrom torch import nn\n\n"
        "class Attn(nn.Module):\n"
        "    def forward(self, x, output_attentions: torch.Tensor | None = False):\n"
        "        weights = x.softmax(-1)\n"
        "        if not output_attentions:\n"
        "            weights = None\n"
        "        if x.sum().item() > 0:\n"
        "            weights = None\n"
        "        return x, weights\n"
    )
    result = run(code)
    assert result.new_text is None
    assert [(f.line, f.fix) for f in result.findings] == [(9, "none")]
    assert "`None` is neither a tensor nor a number" in result.findings[0].note


def test_python_flags_set_under_a_tensor_condition_are_left_alone():
    # transformers' layerdrop: the flag feeds ``if not to_drop:`` right after.
    code = (
        "import torch\n\n"
        "def f(x: torch.Tensor, layerdrop: float):\n"
        "    to_drop = False\n"
        # (on the device: ``torch.rand([])`` alone is a CPU tensor, whose read syncs nothing)
        "    dropout_probability = torch.rand([], device=x.device)\n"
        "    if dropout_probability < layerdrop:\n"
        "        to_drop = True\n"
        "    return x if to_drop else x * 2\n"
    )
    result = run(code)
    assert result.new_text is None
    assert "sets a Python flag" in result.findings[0].note


def test_branches_that_may_change_shape_are_not_selected():
    # From transformers: candidate tokens concatenated, a BOS token sliced off.
    code = (
        "import torch\n\n"
        "def f(input_ids: torch.Tensor, t: torch.Tensor, n: torch.Tensor, bos: int):\n"
        "    if n > 0:\n"
        "        valid = torch.cat((input_ids, t), dim=-1)\n"
        "    else:\n"
        "        valid = t\n"
        "    if input_ids[0, 0] == bos:\n"
        "        input_ids = input_ids[:, 1:]\n"
        "    return valid, input_ids\n"
    )
    result = run(code)
    assert result.new_text is None
    notes = [f.note for f in result.findings if f.rule == "FX101"]
    assert "may change the shape" in notes[0] and "indexes a tensor" in notes[1]


def test_truth_of_a_number_tensor_becomes_a_boolean_condition(tmp_path):
    """``if not m.sum():`` tests for zero: ``~m.sum()`` would be bitwise on an integer tensor."""
    import torch

    from fixitem import apply

    path = tmp_path / "truth.py"
    path.write_text(
        "import torch\n"
        "def f(x: torch.Tensor, m: torch.Tensor):\n"
        "    if not m.sum():\n"
        "        x = x * 2\n"
        "    return x\n"
        "def g(x: torch.Tensor, flag: torch.Tensor):\n"
        "    if flag:\n"
        "        x = x + 1\n"
        "    return x\n"
    )
    apply([path], cache=False, unsafe=True)  # unsafe: each returns the caller's `x` where the condition is false
    text = path.read_text()
    assert "torch.where(m.sum() == 0, x * 2, x)" in text
    assert "torch.where(flag != 0, x + 1, x)" in text
    namespace: dict = {}
    exec(compile(text, str(path), "exec"), namespace)
    x = torch.ones(3)
    for m in (torch.tensor([0, 0]), torch.tensor([1, 2]), torch.tensor([-1, 1])):
        assert torch.equal(namespace["f"](x, m), x * 2 if not m.sum() else x)
    for flag in (torch.tensor(0), torch.tensor(3), torch.tensor(0.0), torch.tensor(float("nan"))):
        assert torch.equal(namespace["g"](x, flag), x + 1 if flag else x)


def test_torch_runtime_questions_are_not_tensors():
    """``torch.get_device_module(d).is_available()``, ``torch.are_deterministic_algorithms_enabled()``
    and the like answer with Python values (found in transformers' generation code)."""
    code = (
        "import torch\n"
        "from torch import nn\n\n"
        "def check(device):\n"
        "    if not torch.get_device_module(device).is_available():\n"
        "        raise RuntimeError('needs a device')\n"
        "    n = torch.get_device_module('cpu').device_count()\n"
        "    print(n)\n\n"
        "class M(nn.Module):\n"
        "    def forward(self, y):\n"
        "        if torch.are_deterministic_algorithms_enabled():\n"
        "            y = torch.relu(y)\n"
        "        if torch.is_autocast_enabled() and torch.get_float32_matmul_precision() == 'high':\n"
        "            y = y * 2\n"
        "        return y\n"
    )
    outcome = run(code, unsafe=True)
    assert outcome.findings == [] and outcome.applied == [] and outcome.new_text is None


def test_a_bare_forward_parameter_tested_for_truth_is_a_flag():
    """``if interpolate_pos_encoding:`` in a ``forward`` (transformers' Swin embeddings):
    ``torch.where`` over a Python bool fails at run time."""
    code = (
        "import torch\n"
        "from torch import nn\n\n"
        "class Embeddings(nn.Module):\n"
        "    def forward(self, x, interpolate_pos_encoding, mask):\n"
        "        if interpolate_pos_encoding:\n"
        "            x = x * 2\n"
        "        if mask.sum():\n"
        "            x = x + 1\n"
        "        return x\n"
    )
    outcome = run(code, unsafe=True)
    assert [f.line for f in outcome.findings + outcome.applied] == [8]  # `mask.sum()` is used as a tensor
    assert "if interpolate_pos_encoding:" in outcome.new_text


def test_a_comparison_of_a_bare_forward_parameter_is_a_python_bool():
    """``teacher_force = random.random() < teacher_forcing_ratio`` in a seq2seq ``forward``
    (the ratio is 0.5 or 0 at every call): ``random.random() < t`` is a tensor only if
    the caller passes one, as a bare parameter tested for truth is."""
    code = (
        "import random\n"
        "import torch\n"
        "from torch import nn\n\n"
        "class Seq2Seq(nn.Module):\n"
        "    def forward(self, src, trg, teacher_forcing_ratio, limit):\n"
        "        teacher_force = random.random() < teacher_forcing_ratio\n"
        "        x = trg if teacher_force else src\n"
        "        if limit > 0:\n"
        "            x = x * 2\n"
        "        if src.sum() < limit:\n"
        "            x = x + 1\n"
        "        return x\n"
    )
    outcome = run(code, unsafe=True)
    assert [f.line for f in outcome.findings + outcome.applied] == [11]  # `src.sum()` is used as a tensor


def test_the_kept_value_of_an_if_without_else_may_be_none():
    """``image_embeds = None`` before ``if ...: image_embeds = ...`` (transformers' Phi-4
    multimodal): ``torch.where(c, new, None)`` fails at run time."""
    code = (
        "import torch\n"
        "from torch import nn\n\n"
        "class M(nn.Module):\n"
        "    def forward(self, input_ids: torch.Tensor, pixel_values=None, bias=None):\n"
        "        image_embeds = None\n"
        "        if pixel_values is not None and (input_ids == 7).any():\n"
        "            image_embeds = pixel_values * 2\n"
        "        if (input_ids > 3).any():\n"
        "            bias = input_ids * 3\n"
        "        return image_embeds, bias\n"
    )
    outcome = run(code, unsafe=True)
    assert outcome.new_text is None and len(outcome.findings) == 2
    assert all("may still be `None`" in f.note for f in outcome.findings)


CHAINED = (
    "import torch\n\n\n"
    "def f(t: torch.Tensor, x: torch.Tensor, lo: float, hi: float):\n"
    "    if lo <= t <= hi:\n"
    "        x = x * 2\n"
    "    return x\n"
)


def test_a_chained_comparison_of_a_tensor_takes_its_truth():
    """``lo <= t <= hi`` is ``lo <= t and t <= hi``: the truth of ``lo <= t`` is read (edm's
    and k-diffusion's samplers test ``S_tmin <= t_cur <= S_tmax`` every step)."""
    import torch

    assert [(f.rule, f.line) for f in scan(CHAINED)] == [("FX101", 5)]
    # Outside an ``if`` too: ``ok`` is the last comparison, a tensor (its truth is read again).
    named = CHAINED.replace("    if lo <= t <= hi:\n", "    ok = lo <= t <= hi\n    if ok:\n")
    assert [(f.rule, f.line) for f in scan(named)] == [("FX004", 5)]
    assert scan(CHAINED.replace("t: torch.Tensor", "t: float")) == []
    outcome = run(CHAINED)
    assert "x = torch.where((lo <= t) & (t <= hi), x * 2, x)" in outcome.new_text
    original, rewritten = {}, {}
    exec(compile(CHAINED, "original", "exec"), original)
    exec(compile(outcome.new_text, "rewritten", "exec"), rewritten)
    x = torch.arange(3.0)
    for value in (-1.0, 0.0, 0.5, 1.0, 2.0):
        t = torch.tensor(value)
        assert torch.equal(original["f"](t, x, 0.0, 1.0), rewritten["f"](t, x, 0.0, 1.0))


def test_a_chained_comparison_splits_only_around_a_value_read_twice_alike():
    outcome = run(CHAINED.replace("lo <= t <= hi", "lo <= t.norm() <= hi"))
    [finding] = outcome.findings
    assert finding.fix == "none" and "evaluated twice" in finding.note


def test_a_branch_that_makes_a_tensor_of_its_own_shape_has_no_fix():
    """TinyLlama's KV cache: ``input_pos = torch.tensor(max_seq_length - 1, ...)`` where
    ``input_pos`` held a (T,) tensor. ``torch.where`` broadcast the 0-dim tensor to (T,),
    so the rewrite wrote every row to the last slot where the original raised."""
    code = (
        "import torch\nfrom torch import nn\n\n"
        "class Attn(nn.Module):\n"
        "    def forward(self, k: torch.Tensor, input_pos: torch.Tensor, n: int):\n"
        "        if input_pos[-1] >= n:\n"
        "            input_pos = torch.tensor(n - 1, device=input_pos.device)\n"
        "        return k.index_select(0, input_pos)\n"
    )
    outcome = run(code, unsafe=True)
    [finding] = outcome.findings
    assert finding.fix == "none" and "makes a tensor of its own shape" in finding.note
    like = code.replace("torch.tensor(n - 1, device=input_pos.device)", "torch.full_like(input_pos, n - 1)")
    assert run(like, unsafe=True).applied  # the same shape as the tensor it replaces
