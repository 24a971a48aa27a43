"""bench/hf_models.py --advised-config: the configuration fixitem advises for a model's breaks, and the
causes the table counts them by (pure functions; the benchmark itself is opt-in, tests/test_hf_models.py)."""

from __future__ import annotations

from pathlib import Path

from conftest import ROOT, load_module
from fixitem.codemods.driver.engine import Finding

hf = load_module(ROOT / "bench" / "hf_models.py")


def finding(rule: str, line: int, note: str, costs=("graph-break", "host-sync")) -> Finding:
    return Finding(str(Path("transformers/models/x/modeling_x.py")), line, 1, rule, "name", "message", "none",
                   costs, note)


def test_advice_is_read_from_the_findings_that_cost_a_break_and_name_a_setting():
    advice = hf.advice_of([
        finding("FX601", 10, "... set `torch._dynamo.config.capture_scalar_outputs = True` ..."),
        finding("FX602", 20, "... capture_scalar_outputs ... capture_dynamic_output_shape_ops ..."),
        finding("FX006", 30, "... capture_scalar_outputs (FX601) ...", costs=("host-sync",)),  # outside traced code
        finding("FX001", 40, "... capture_scalar_outputs ..."),
    ])
    assert advice == {
        "transformers/models/x/modeling_x.py:10": ["capture_scalar_outputs"],
        "transformers/models/x/modeling_x.py:20": ["capture_scalar_outputs", "capture_dynamic_output_shape_ops"],
    }
    reasons = [{"location": "transformers/models/x/modeling_x.py:20"}, {"location": "elsewhere.py:1"}]
    assert hf.advised_flags(advice, reasons) == ["capture_scalar_outputs", "capture_dynamic_output_shape_ops"]
    assert hf.advised_flags(advice, [{"location": "elsewhere.py:1"}]) == []


def test_break_sites_by_cause():
    reasons = [
        {"reason": "Unsupported Tensor.item() call with capture_scalar_outputs=False", "location": "a.py:1", "code": ""},
        {"reason": "Failed to handle graph break gracefully. Skipping", "location": "a.py:1", "code": ""},
        {"reason": "Data dependent operator: Operator `aten._local_scalar_dense.default`", "location": "a.py:2",
         "code": "sizes = t.tolist()"},
        {"reason": "Data-dependent branching: Detected data-dependent branching", "location": "a.py:3", "code": ""},
        {"reason": "Dynamic shape operator: Operator `aten.nonzero.default`", "location": "a.py:4", "code": ""},
        {"reason": "logging.Logger method not supported", "location": "a.py:5", "code": "", "logging": True},
        {"reason": "Attempted to call function marked as skipped", "location": "a.py:6", "code": ""},
    ]
    assert hf.causes_of(reasons) == {"item": 2, "tolist": 1, "branch": 1, "dynamic shape": 1, "logging": 1, "other": 1}


def test_a_default_config_is_shrunk_with_one_layer_of_each_kind():
    class Config:
        def __init__(self, **values):
            self.__dict__.update(values)

        def to_dict(self):
            return dict(self.__dict__)

    text = Config(hidden_size=4096, vocab_size=151_000, pad_token_id=150_000, use_cache=True)
    config = Config(hidden_size=4096, num_hidden_layers=48, layer_types=["linear"] * 3 + ["full"] + ["linear"] * 44,
                    vocab_size=151_000, text_config=text, rope_theta=10000.0)
    hf.shrink_config(config)
    assert (config.hidden_size, config.vocab_size, config.rope_theta) == (32, hf.VOCAB, 10000.0)
    assert config.layer_types == ["linear", "full"] and config.num_hidden_layers == 2
    assert (text.hidden_size, text.pad_token_id, text.use_cache) == (32, 0, True)
