"""FX302 keep-scalar-tensor on real tensors: the rewritten code gives the same
outputs, dtypes and gradients, reads no value back (no `.item()`), and
compiles without a graph break; plus the measured torch facts the rule's
safety rests on."""

from __future__ import annotations

import importlib.util
import textwrap

import pytest
import torch
import torch._dynamo
from conftest import FIXTURES, load_module
from fixitem.codemods.driver.registry import rule_class
from fixitem.verify.syncs import count_host_syncs
from torch._dynamo.utils import counters

from fixitem import apply


def graph_breaks(fn, *args) -> int:
    torch._dynamo.reset()
    counters["graph_break"].clear()
    explained = torch._dynamo.explain(fn)(*args)
    return max(explained.graph_break_count, sum(counters["graph_break"].values()))


def rewrite(tmp_path, source: str, unsafe: bool = False, name: str = "code.py"):
    """Write ``source``, apply the fixes; the modules before and after, and the result."""
    path = tmp_path / name
    path.write_text(textwrap.dedent(source).lstrip())
    before = load_module(path)
    result = apply([path], unsafe=unsafe)
    assert not result.errors
    after = load_module(path)
    return before, after, result, path.read_text()


def run_with_grads(fn, *args):
    """Output and input gradients of ``fn``; the number of `.item()` reads it made."""
    args = [a.detach().clone().requires_grad_(a.is_floating_point()) for a in args]
    with count_host_syncs() as syncs:
        out = fn(*args)
    out.float().sum().backward()
    grads = [a.grad for a in args if a.is_floating_point()]
    return out.detach(), grads, syncs.by_kind["item"] + syncs.by_kind["__float__"]


def apply_note(tmp_path, source: str, rule: str, name: str = "notes.py") -> str:
    """The note of the one ``rule`` finding a safe apply leaves in ``source`` (nothing written)."""
    path = tmp_path / name
    path.write_text(textwrap.dedent(source).lstrip())
    result = apply([path], write=False)
    (note,) = [f.note for f in result.findings if f.rule == rule]
    return note


def assert_same(before, after, *args):
    out_b, grads_b, reads_b = run_with_grads(before, *args)
    out_a, grads_a, reads_a = run_with_grads(after, *args)
    assert out_a.dtype == out_b.dtype and out_a.shape == out_b.shape
    torch.testing.assert_close(out_a, out_b, rtol=0, atol=0)
    for a, b in zip(grads_a, grads_b):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
    assert reads_b >= 1
    assert reads_a == 0


# -- a model using all four consumers ----------------------------------------------------------
# (Kept here rather than in fixtures/threshold/: tests/test_threshold_fixtures.py
# lists its fixtures by name and tests/test_bench.py counts that folder's files.)

MODEL = """
'''Values read with `.item()` only to feed tensor operations (FX302): a fill
value, a clamp bound, a `torch.where` branch and a factor.'''

import torch
from torch import nn


class KeepScalar(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(8, 8)

    def forward(self, x, mask):
        logits = self.proj(x)
        floor = logits.min().item()  # fill the masked positions with the smallest logit
        logits = logits.masked_fill(~mask, floor)
        low = logits.mean().item()
        h = torch.clamp(logits, min=low)
        top = logits.max().item()
        h = torch.where(mask, h, top)
        # an integer count: it never decides the result's dtype
        count = torch.clamp(mask.count_nonzero(), min=1).item()
        return h.sum(dim=-1) * count


def make():
    torch.manual_seed(0)
    model = KeepScalar()
    x = torch.randn(4, 8)
    return model, [(x, torch.rand(4, 8) > 0.5), (x * 10, torch.rand(4, 8) > 0.9)]
"""


def test_model_loses_its_breaks_and_keeps_its_numbers(tmp_path):
    before, after, result, text = rewrite(tmp_path, MODEL, name="keep_scalar.py")
    assert {f.rule for f in result.applied} == {"FX302"} and len(result.applied) == 4
    assert not result.findings, "every read must be fixed, with safe fixes only"
    assert ".item()\n" not in text and "count = torch.clamp(mask.count_nonzero(), min=1).detach()\n" in text

    model_before, inputs = before.make()
    model_after, _ = after.make()
    model_after.load_state_dict(model_before.state_dict())
    for args in inputs:
        assert graph_breaks(model_before, *args) >= 1
        assert graph_breaks(model_after, *args) == 0
        compiled = torch.compile(model_after, fullgraph=True, backend="eager")
        torch.testing.assert_close(compiled(*args), model_after(*args))
        assert_same(model_before, model_after, *args)
        # Parameter gradients too.
        model_before.zero_grad(set_to_none=True)
        model_after.zero_grad(set_to_none=True)
        model_before(*args).sum().backward()
        model_after(*args).sum().backward()
        for (name, p_b), (_, p_a) in zip(model_before.named_parameters(), model_after.named_parameters()):
            torch.testing.assert_close(p_a.grad, p_b.grad, rtol=0, atol=0, msg=name)
    torch._dynamo.reset()


# -- shapes: `.item()` of a one-element tensor that is not 0-dim -----------------------------------

DETR_LOSS = """
import torch
import torch.nn.functional as F

def box_loss(pred: torch.Tensor, target: torch.Tensor, valid: torch.Tensor):
    num_boxes = valid.sum().float().unsqueeze(0)  # shape [1], as DETR's torch.as_tensor([n])
    num_boxes = torch.clamp(num_boxes / 2, min=1).item()
    loss_bbox = F.l1_loss(pred, target, reduction="none")
    return loss_bbox.sum() / num_boxes
"""


def test_one_element_value_becomes_0_dim_not_1_element(tmp_path):
    # Unsafe: the 0-dim float32 value against the 0-dim loss of a float16 `pred` would make it float32.
    assert "`loss_bbox.sum()` is 0-dim" in apply_note(tmp_path, DETR_LOSS, "FX302")
    before, after, result, text = rewrite(tmp_path, DETR_LOSS, unsafe=True)
    assert "num_boxes = torch.clamp(num_boxes / 2, min=1).detach().reshape(())\n" in text
    args = (torch.randn(6, 4), torch.randn(6, 4), torch.tensor([1, 1, 0, 1, 1, 1]))
    assert_same(before.box_loss, after.box_loss, *args)
    assert after.box_loss(*args).shape == torch.Size([])  # `.detach()` alone would give [1]
    assert graph_breaks(before.box_loss, *args) >= 1
    assert graph_breaks(after.box_loss, *args) == 0


# -- each consumer -------------------------------------------------------------------------------

CONSUMERS_SOURCE = """
import torch

def divisor(loss: torch.FloatTensor, mask: torch.Tensor):
    count = mask.count_nonzero().item()
    return loss.sum() / count

def fill(logits: torch.FloatTensor, mask: torch.Tensor):
    floor = logits.min().item()
    return logits.masked_fill(~mask, floor)

def branch(scores: torch.FloatTensor, keep: torch.Tensor, fallback: torch.Tensor):
    value = float(fallback.type_as(scores))
    return torch.where(keep, scores, value)

def bound(x: torch.FloatTensor):
    low = x.mean().item()
    return torch.clamp(x, min=low) + x.clamp_max(low)

def in_place(x: torch.FloatTensor, s: torch.Tensor):
    scale = s.abs().sum().item()
    y = x * 1.0
    y /= scale
    return y
"""

CONSUMER_ARGS = {
    "divisor": (torch.randn(5, 3), torch.rand(5, 3) > 0.3),
    "fill": (torch.randn(5, 3), torch.rand(5, 3) > 0.3),
    "branch": (torch.randn(5, 3), torch.rand(5, 3) > 0.3, torch.randn(1, 1)),
    "bound": (torch.randn(5, 3),),
    "in_place": (torch.randn(5, 3), torch.randn(2)),
}


@pytest.fixture(scope="module")
def consumers(tmp_path_factory):
    return rewrite(tmp_path_factory.mktemp("consumers"), CONSUMERS_SOURCE, unsafe=True)


def test_every_consumer_is_fixed_and_a_divisor_unsafely(consumers):
    # ATen's CUDA division multiplies by the reciprocal of a Python number and divides by a 0-dim
    # tensor (BinaryDivTrueKernel.cu): float results may differ in the last bit there.
    _, _, result, text = consumers
    assert [f.rule for f in result.applied] == ["FX302"] * len(CONSUMER_ARGS)
    assert [f.fix for f in result.applied] == ["unsafe", "safe", "safe", "safe", "unsafe"]
    divisor, in_place = result.applied[0], result.applied[-1]
    assert "`/` by a Python number multiplies by its reciprocal" in divisor.note
    assert "`/=` by a Python number multiplies by its reciprocal" in in_place.note
    assert ".item()" not in text and "float(" not in text
    assert "value = fallback.type_as(scores).detach().reshape(())\n" in text


@pytest.mark.filterwarnings("ignore:Converting a tensor with requires_grad")
@pytest.mark.parametrize("name", CONSUMER_ARGS)
def test_consumer_keeps_values_dtypes_and_gradients(consumers, name):
    before, after, _, _ = consumers
    args = CONSUMER_ARGS[name]
    assert_same(getattr(before, name), getattr(after, name), *args)
    for dtype in (torch.float64, torch.bfloat16):
        converted = tuple(a.to(dtype) if a.is_floating_point() else a for a in args)
        assert_same(getattr(before, name), getattr(after, name), *converted)


@pytest.mark.parametrize("name", CONSUMER_ARGS)
def test_consumer_compiles_without_a_break(consumers, name):
    before, after, _, _ = consumers
    args = CONSUMER_ARGS[name]
    assert graph_breaks(getattr(before, name), *args) >= 1
    assert graph_breaks(getattr(after, name), *args) == 0
    torch._dynamo.reset()


# -- unsafe fixes --------------------------------------------------------------------------------

UNSAFE_SOURCE = """
import torch

def mask_logits(logits: torch.Tensor, mask: torch.Tensor):
    mask_value = logits.min().item() - 1.0
    return logits.masked_fill(~mask, mask_value)

def rescale(x: torch.Tensor, scale: torch.Tensor):
    s = scale.item()
    return x * s
"""


def test_python_arithmetic_and_unknown_dtypes_need_unsafe(tmp_path):
    path = tmp_path / "unsafe.py"
    path.write_text(textwrap.dedent(UNSAFE_SOURCE).lstrip())
    safe_only = apply([path], write=False)
    assert safe_only.diff == ""
    notes = {f.line: f.note for f in safe_only.findings if f.rule == "FX302"}
    assert "float64" in notes[4] and "dtype" in notes[4]
    assert "cannot tell that `x` is a floating-point tensor" in notes[8]

    before, after, result, text = rewrite(tmp_path, UNSAFE_SOURCE, unsafe=True, name="unsafe2.py")
    assert "mask_value = logits.min().detach() - 1.0\n" in text
    assert "s = scale.detach().reshape(())\n" in text
    logits, mask = torch.randn(4, 6), torch.rand(4, 6) > 0.5
    # float32 and one subtraction of 1.0: the same numbers (the unsafe cases are
    # other dtypes and constants; see test_measured_facts below).
    assert_same(before.mask_logits, after.mask_logits, logits, mask)
    assert_same(before.rescale, after.rescale, torch.randn(3), torch.randn(()))
    ints = torch.arange(4)
    assert before.rescale(ints, torch.tensor(0.5, dtype=torch.float64)).dtype == torch.float32
    assert after.rescale(ints, torch.tensor(0.5, dtype=torch.float64)).dtype == torch.float64  # why it is unsafe


# -- the measured facts behind CONSUMERS -------------------------------------------------------------


def test_measured_facts():
    x = torch.randn(64) * 10
    v32, v64 = torch.tensor(2.3), torch.tensor(2.3, dtype=torch.float64)
    ints, mask = torch.arange(64), torch.rand(64) > 0.5
    # Integer tensors take a float 0-dim value's dtype (not float32 as with a Python float)...
    assert (ints * v64.item()).dtype == torch.float32 and (ints * v64).dtype == torch.float64
    assert (ints * v32).dtype == torch.float32
    # ...floating tensors keep theirs, with the same values.
    for dtype in (torch.float32, torch.bfloat16, torch.float16, torch.float64):
        t = x.to(dtype)
        for value in (v32, v64):
            for op in (torch.add, torch.sub, torch.mul, torch.div):
                assert torch.equal(op(t, value), op(t, value.item()))
            assert torch.equal(torch.where(mask, t, value), torch.where(mask, t, value.item()))
            assert torch.equal(torch.clamp(t, min=value), torch.clamp(t, min=value.item()))
    # masked_fill and fill_ keep the tensor's dtype for any value dtype.
    for t in (x, ints, x.to(torch.bfloat16)):
        assert torch.equal(t.masked_fill(mask, v64), t.masked_fill(mask, v64.item()))
        assert torch.equal(t.clone().fill_(v64), t.clone().fill_(v64.item()))
    # Python's `c / x` multiplies by the reciprocal: not a consumer.
    y = torch.randn(4096)
    assert not torch.equal(v32 / y, v32.item() / y)
    # Python arithmetic on the number first runs in float64: not exact on the device.
    values = torch.rand(300) * 1000
    first = torch.tensor([True, False])
    on_device = [torch.zeros(2).masked_fill(first, v * 3.3)[0] for v in values]
    in_python = [torch.zeros(2).masked_fill(first, v.item() * 3.3)[0] for v in values]
    assert any(not torch.equal(a, b) for a, b in zip(on_device, in_python))


def test_consumers_take_no_python_scalar_under_dynamo():
    """The consumers of the standalone CUDA script, on CPU: no graph break and no
    `item` / `_local_scalar_dense` in the captured graph, and no `.item()` call."""
    spec = importlib.util.spec_from_file_location("scalar_consumers_cuda", FIXTURES / "runtime" / "scalar_consumers_cuda.py")
    assert spec is not None and spec.loader is not None
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    x, mask, v = torch.randn(16), torch.rand(16) > 0.5, torch.tensor(1.5)
    for name, fn in script.CONSUMERS + script.EAGER_SYNC_CONSUMERS:
        with count_host_syncs() as syncs:
            fn(x, mask, v)
        assert syncs.total == 0, name
        torch._dynamo.reset()
        counters["graph_break"].clear()
        explained = torch._dynamo.explain(fn)(x, mask, v)
        graphs = "\n".join(str(g.graph) for g in explained.graphs)
        assert explained.graph_break_count == 0 and not counters["graph_break"], name
        assert "item" not in graphs and "_local_scalar_dense" not in graphs, name
    torch._dynamo.reset()


def test_rule_documents_every_consumer():
    from fixitem.codemods.rules.keep_scalar_tensor import CONSUMERS

    doc = rule_class("FX302").documentation()
    assert "masked_fill" in doc and "torch.where" in doc and "torch.clamp" in doc
    assert all(consumer.checked for consumer in CONSUMERS.values())
