"""A 0-dim tensor standing where a Python number was (FX301, FX302, FX103, FX102)
keeps the result's dtype only against a floating operand with a dimension, or
one of the same dtype: two 0-dim tensors promote (float32 with float64 gives
float64, float16 with float32 gives float32), and an integer tensor takes a 0-dim
float's dtype. Each case runs the code before and after the fix on real tensors."""

from __future__ import annotations

import textwrap

import numpy as np

import pytest
import torch
from conftest import load_module

from fixitem import apply

F16, F32, F64 = torch.float16, torch.float32, torch.float64


def _rewrite(tmp_path, source: str, unsafe: bool, name: str):
    path = tmp_path / f"{name}.py"
    path.write_text(textwrap.dedent(source).lstrip())
    before = load_module(path)
    result = apply([path], unsafe=unsafe)
    assert not result.errors
    return before, load_module(path), result


def _run(module, args):
    out = module.f(*[a.clone() for a in args])
    return out if isinstance(out, tuple) else (out,)


# name: (rule, source, inputs that the unsafe rewrite turns into another dtype, what the note says)
UNSAFE = {
    # A 0-dim float32 loss times a float64 class weight.
    "fx301_zero_dim_loss": (
        "FX301",
        """
        import torch
        def f(x: torch.Tensor, class_weight: torch.Tensor):
            loss = x.float().pow(2).mean()
            return loss * class_weight[1].item()
        """,
        (torch.randn(4, 3), torch.tensor([0.2, 0.3], dtype=F64)),
        "`loss` is 0-dim",
    ),
    # An integer tensor times a float64 value: float64 where the Python float gave float32.
    "fx301_integer_tensor": (
        "FX301",
        """
        import torch
        def f(t: torch.Tensor):
            n = torch.arange(3)
            return n * t.item()
        """,
        (torch.tensor(0.1, dtype=F64),),
        "cannot tell that `n` is a floating-point tensor",
    ),
    "fx302_zero_dim_sum": (
        "FX302",
        """
        import torch
        def f(x: torch.Tensor, wt: torch.Tensor):
            s = x.float().sum()
            scale = wt.max().item()
            return s * scale
        """,
        (torch.tensor([1.1, 2.2]), torch.tensor([0.1, 0.3], dtype=F64)),
        "`s` is 0-dim",
    ),
    "fx103_zero_dim_numerator": (
        "FX103",
        """
        import torch
        def f(x: torch.Tensor, y: torch.Tensor):
            s = x.float().sum()
            n = max(y.norm().item(), 1.0)
            return s / n
        """,
        (torch.tensor([1.1, 2.2]), torch.tensor([0.3, 0.4], dtype=F64)),
        "`s` is 0-dim",
    ),
    # `torch.where(..., 2.0, 1.0)` is a 0-dim float32: a 0-dim float16 `s` becomes float32.
    "fx102_zero_dim_half": (
        "FX102",
        """
        import torch
        def f(y: torch.Tensor):
            s = y.half().sum()
            scale = 2.0 if y.max().item() < 0.5 else 1.0
            return s * scale
        """,
        (torch.tensor([0.1, 0.2]),),
        "`s` is 0-dim",
    ),
}


@pytest.mark.parametrize("name", UNSAFE)
def test_promoting_stand_in_is_unsafe_and_would_change_the_dtype(tmp_path, name):
    rule, source, witness, note = UNSAFE[name]
    _, _, safe = _rewrite(tmp_path, source, unsafe=False, name=name)
    assert all(f.rule != rule for f in safe.applied), "a fix that changes the dtype must not be safe"
    (finding,) = [f for f in safe.findings if f.rule == rule]
    assert finding.fix == "unsafe" and note in finding.note, finding.note
    before, after, forced = _rewrite(tmp_path, source, unsafe=True, name=name + "_unsafe")
    assert [f.rule for f in forced.applied] == [rule]
    (old,), (new,) = _run(before, witness), _run(after, witness)
    assert old.dtype != new.dtype, "the reason given must be real: the unsafe rewrite changes the dtype"


# name: (rule, source, inputs in several dtypes and shapes)
SAFE = {
    # A floating operand with a dimension keeps its dtype against any 0-dim value.
    "fx301_dimensioned": (
        "FX301",
        """
        import torch
        def f(x: torch.Tensor, t: torch.Tensor):
            h = x.float().flatten()
            return h * t.item()
        """,
        [(torch.randn(2, 3), torch.tensor(0.3, dtype=d)) for d in (F16, F32, F64)],
    ),
    # The value has the operand's own dtype: `x / x.norm()` for any shape of `x`.
    "fx103_same_dtype": (
        "FX103",
        """
        import torch
        def f(x: torch.Tensor):
            return x / max(x.norm().item(), 1.0)
        """,
        [(torch.randn(3, dtype=d),) for d in (F32, F64)] + [(torch.tensor(2.5, dtype=d),) for d in (F16, F32, F64)],
    ),
    # An integer count never decides a floating result's dtype, 0-dim or not.
    "fx302_integer_count": (
        "FX302",
        """
        import torch
        def f(loss: torch.Tensor, mask: torch.Tensor):
            total = loss.float().sum()
            count = mask.count_nonzero().item()
            return total * count  # (a divisor would be unsafe: CUDA rounds a Python divisor otherwise)
        """,
        [(torch.randn(5, 3), torch.rand(5, 3) > 0.3)],
    ),
    # A layer's output has a dimension: the 0-dim float32 selection keeps its dtype.
    "fx102_layer_output": (
        "FX102",
        """
        import torch
        from torch import nn
        lin = nn.Linear(4, 4)
        def f(x: torch.Tensor):
            y = lin(x)
            scale = 2.0 if y.max().item() < 0.5 else 1.0
            return y * scale
        """,
        [(torch.randn(3, 4) * 0.01,), (torch.randn(3, 4) * 10,), (torch.randn(4),)],
    ),
}


@pytest.mark.parametrize("name", SAFE)
def test_dtype_keeping_stand_in_stays_safe_with_the_same_numbers(tmp_path, name):
    rule, source, inputs = SAFE[name]
    before, after, result = _rewrite(tmp_path, source, unsafe=False, name=name)
    assert [f.rule for f in result.applied] == [rule]
    if hasattr(before, "lin"):
        after.lin.load_state_dict(before.lin.state_dict())
    for args in inputs:
        for old, new in zip(_run(before, args), _run(after, args)):
            assert old.dtype == new.dtype and old.shape == new.shape
            torch.testing.assert_close(new, old, rtol=0, atol=0)


def test_promotion_facts():
    """The torch behaviour the rule rests on."""
    s32, v64, v32 = torch.tensor(1.1), torch.tensor(0.3, dtype=F64), torch.tensor(0.3)
    assert (s32 * v64.item()).dtype == F32 and (s32 * v64).dtype == F64  # two 0-dim tensors promote
    assert (torch.ones(3) * v64).dtype == F32  # a dimension wins within a category
    assert (torch.tensor(1.0, dtype=F16) * v32).dtype == F32 and (torch.ones(2, dtype=F16) * v32).dtype == F16
    ints = torch.arange(3)
    assert (ints * v64.item()).dtype == F32 and (ints * v64).dtype == F64  # a higher category wins
    assert (s32 / torch.tensor(3)).dtype == F32 and (torch.tensor(2.0, dtype=F16) * torch.tensor(3)).dtype == F16
    assert torch.where(torch.tensor(True), torch.tensor(1.0, dtype=F16), v64).dtype == F64


# -- the facts themselves, on expressions ------------------------------------------------------------

FACTS_SOURCE = """
import torch
from torch import nn

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.act = nn.Softmax(dim=-1)

    def forward(self, x: torch.Tensor, y: torch.Tensor):
        h = self.fc(x)
        g = torch.sigmoid(h) * 2
        p = self.act(x)
        s = h.sum()
        v = x.view(-1)
        e = x[None]
        a = torch.arange(4)
        z = torch.zeros(3, 4)
        q = x.mean(dim=0)
        halves = x.view(torch.float16)
        both = torch.max(x, y)
        aligned = y.type_as(x)
        moved = y.to("cuda")
        return h, g, p, s, v, e, a, z, q, halves, both, aligned, moved
"""


def _facts():
    import ast
    from pathlib import Path

    from fixitem.codemods.model.context import FileContext

    ctx = FileContext.build(Path("facts.py"), FACTS_SOURCE)
    ret = next(n for n in ctx.nodes(ast.Return))
    names = {e.id: e for e in ret.value.elts}  # the reads in `return`
    values = {a.targets[0].id: a.value for a in ctx.nodes(ast.Assign) if isinstance(a.targets[0], ast.Name)}
    return ctx, names, values


def test_which_tensors_certainly_have_a_dimension():
    from fixitem.codemods.model.scalar_shapes import certainly_dimensioned

    ctx, names, _ = _facts()
    dimensioned = {name for name, node in names.items() if certainly_dimensioned(ctx, node)}
    # A Linear's output and what keeps its shape, view(-1), x[None], arange and a sized zeros do;
    # a Softmax module's output (a 0-dim input gives 0-dim), a reduction with `dim` and a plain
    # parameter may be 0-dim.
    assert {"h", "g", "v", "e", "a", "z"} <= dimensioned
    assert not dimensioned & {"p", "s", "q", "halves", "both", "aligned", "moved"}


def test_which_tensors_certainly_share_a_dtype():
    from fixitem.codemods.model.dtypes import same_dtype

    ctx, names, values = _facts()
    x_read = values["halves"].func.value
    assert same_dtype(ctx, names["s"], names["h"])  # the sum of a floating tensor has its dtype
    assert same_dtype(ctx, names["aligned"], x_read)  # `y.type_as(x)` has x's dtype
    assert same_dtype(ctx, names["v"], x_read) and same_dtype(ctx, names["e"], x_read)
    assert not same_dtype(ctx, names["halves"], x_read)  # `x.view(torch.float16)` reinterprets
    assert not same_dtype(ctx, names["both"], x_read)  # `torch.max(x, y)` promotes the two
    assert not same_dtype(ctx, names["moved"], x_read)  # `y.to("cuda")` keeps y's dtype, not x's
    assert not same_dtype(ctx, names["a"], names["z"])  # int64 and float32


def test_fx101_selecting_numbers_against_a_possibly_0_dim_tensor_is_unsafe():
    """`scale = 2.0` or `1.0` under a tensor test becomes `torch.where(..., 2.0, 1.0)`, a 0-dim
    float32 tensor: against a 0-dim float16 `s`, `s * scale` would be float32."""
    from pathlib import Path

    import torch
    from fixitem.codemods.driver.engine import process
    from fixitem.codemods.driver.registry import all_rules

    code = (
        "import torch\n\n"
        "def scale_half(s: torch.Tensor, y: torch.Tensor):\n"
        "    if y.max().item() < 0.5:\n"
        "        scale = 2.0\n"
        "    else:\n"
        "        scale = 1.0\n"
        "    return s * scale\n"
    )
    result = process(Path("a.py"), code, all_rules(), fix=True)
    assert result.new_text is None
    [finding] = result.findings
    assert finding.fix == "unsafe" and "two 0-dim tensors promote" in finding.note
    s = torch.tensor(3.0, dtype=torch.float16)
    assert (s * 2.0).dtype == torch.float16
    assert (s * torch.where(torch.tensor(True), 2.0, 1.0)).dtype == torch.float32  # what the fix would give


def test_a_python_float_selected_by_torch_where_says_it_becomes_float32(tmp_path):
    # edm's sampler: ``min(S_churn / num_steps, np.sqrt(2) - 1)`` was a float64 Python number;
    # selected by ``torch.where`` it is a float32 tensor, and its last digits go.
    source = (
        "import numpy as np\nimport torch\n\n\n"
        "def f(t_cur: torch.Tensor, churn: float, steps: int, lo: float, hi: float):\n"
        "    gamma = min(churn / steps, np.sqrt(2) - 1) if lo <= t_cur <= hi else 0\n"
        "    return t_cur + gamma * t_cur\n"
    )
    path = tmp_path / "sampler.py"
    path.write_text(source)
    (finding,) = [f for f in apply([path], write=False, unsafe=True).applied if f.rule == "FX102"]
    assert finding.fix == "unsafe" and "float32, torch's default dtype" in finding.note
    gamma = min(40 / 6, np.sqrt(2) - 1)
    assert torch.where(torch.tensor(True), gamma, 0).item() != gamma  # what the note says: float32
