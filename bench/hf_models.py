"""What fixitem does to real Hugging Face transformers models (tiny random configs).

    python bench/hf_models.py [--unsafe] [--advised-config] [--transformers 5.24.0|4.52.4]
                              [--models bert,gpt2,...] [--json out.json] [--jobs N] [--timeout S]
                              [--full-tree] [--no-cache] [--keep DIR]
    python bench/hf_models.py --report out.json   # the report of an earlier --json again

``--models`` takes model names and groups: ``default`` (22 common architectures,
the default), ``rewritten`` (6 models whose code fixitem does rewrite, with the
inputs or dtype that run the rewritten lines), ``warning_once`` (3 models whose
``forward`` calls ``logger.warning_once`` with these inputs), ``vl`` (qwen2-vl and
qwen2.5-vl with an image: grid shapes read with ``.item()``, split sizes from
``.tolist()``), ``all`` (those four), ``causal_lm`` (every causal LM of the
version's auto mapping, ``causal:<model_type>``, from its default config shrunk to
hidden size 32 and 2 layers) and ``tiny`` (default, warning_once, vl and
causal_lm: about 170 models). A model whose folder or classes do not exist in the
chosen version is skipped with a note. On a 2-core machine ``default`` takes 4-10
minutes (more when the cores are shared), ``all`` about 5 on idle cores, ``tiny``
about 40.

``--advised-config`` adds a third count: the rewritten code's breaks under the
Dynamo configuration fixitem advises for them. Each finding of FX006, FX601 and
FX602 that costs a graph break names ``capture_scalar_outputs`` (and, FX602,
``capture_dynamic_output_shape_ops``); the after run takes the flags named by
the findings at its own break sites (``file:line``), counts its breaks again
under them (and again with what the breaks then left advise), and, when the full
advice does not compile (a guard Dynamo cannot decide), says so and measures with
less of it. It then runs the model compiled under that configuration
(``fullgraph=False``, backend ``eager``), an eval forward and a training step, and
compares outputs and gradients with the eager before run. The report adds a table
by model, the sites by cause (item, tolist, branch, other) before, after the
fixes and after the fixes under the advised configuration, and every site left
with its reason.

1. **Install** ``transformers==5.24.0`` (or ``--transformers 4.52.4``) and its
   dependencies, pinned per version, with ``pip install --no-deps --target`` into
   ``~/.cache/fixitem-bench/hf-site-transformers-VERSION`` (once per version; never
   into the running environment). torch and numpy are not
   installed there: the environment's own are used.
2. **Rewrite** a copy of the installed ``transformers`` package with
   ``fixitem.apply`` (safe fixes; ``--unsafe`` adds the unsafe ones). By
   default only the files the benchmarked models run are rewritten: the
   top-level modules, ``integrations/``, ``utils/``, ``loss/``,
   ``generation/`` and the selected models' folders (``--full-tree``
   rewrites the whole package, 2-7 minutes on 2 cores). The rewritten
   tree is cached under ``~/.cache/fixitem-bench/hf-rewritten/``, keyed by a
   hash of fixitem's source, the mode, the version's pins and the file list (``--no-cache``
   rewrites again). The diff is written next to it (``apply.diff``) and its
   path printed. Every module whose file changed is imported, before and
   after, in a subprocess: one that imports before but not after is a bug.
3. **Measure** each model in its own subprocesses, one with ``PYTHONPATH`` on
   the original package (*before*), then one on the rewritten copy
   (*after*): ``torch.manual_seed(0)``, build from a tiny config
   (hidden 32, 2 layers, 4 heads, vocabulary 99), eval mode, fixed random
   inputs (with ``labels`` where the head takes them, so the loss code runs
   too). The after process loads the before process's ``state_dict`` and
   inputs (and says whether its own initialisation was already identical).
   Each process runs the model eagerly (outputs saved), counts graphs and
   graph breaks with ``torch._dynamo.explain(model)(**inputs)`` (its
   compiler is eager: no code generation) and
   ``torch._dynamo.utils.counters["graph_break"]``, records the distinct
   break reasons with ``file:line`` (and whether each is a logging break: its
   reason, file or source line names ``warning_once``/``info_once``/``logging``/
   ``logger``/GB0291), and runs one training step
   (``model.train()``, seeded, ``loss.backward()``; gradients saved). Log
   records of the ``transformers`` logger during the eager runs are kept (after
   ``fixitem.runtime.flush()``), so deferred logging is checked to print the
   same text.
4. **Compare and report**: outputs before vs after (``torch.equal`` count
   and ``torch.allclose``), gradients likewise, log text; a table with totals,
   versions, machine and time; ``--json`` writes the same data.

A model that fails to build, run or trace is an error row, not a crash.
Exit status: 0 when every model ran and nothing differs, 1 when an output,
gradient or log differs, a rewritten module no longer imports or a model
fails after but not before, 2 on usage or installation errors.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import hashlib
import json
import linecache
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, NamedTuple

HERE = Path(__file__).resolve()
DEFAULT_VERSION = "5.24.0"
CACHE = Path(os.environ.get("FIXITEM_BENCH_CACHE", Path.home() / ".cache" / "fixitem-bench"))
TEST_CACHE = Path.home() / ".cache" / "fixitem-tests"  # may already hold the transformers wheel
REWRITTEN = CACHE / "hf-rewritten"

# Each transformers version and the closure of its Requires-Dist (and its dependencies'),
# resolved once with `pip install --dry-run --report - --ignore-installed transformers==V` and
# pinned. Not numpy or torch: the running environment's are used (a second numpy on the path
# would shadow torch's).
PINS_BY_VERSION: dict[str, list[str]] = {
    "5.24.0": [
        "transformers==5.24.0",
        "huggingface_hub==2.4.0",
        "tokenizers==0.23.3",
        "safetensors==0.8.0",
        "regex==2026.11.19",
        "pyyaml==6.0.4",
        "packaging==26.4",
        "tqdm==4.70.1",
        "typer==0.29.2",
        "filelock==4.3.1",
        "fsspec==2026.9.0",
        "hf-xet==1.8.0",
        "httpx2==2.16.2",
        "httpcore2==2.16.2",
        "anyio==4.16.0",
        "idna==3.20",
        "h11==0.16.0",
        "truststore==0.10.5",
        "click==8.5.1",
        "typing_extensions==4.16.0",
        "shellingham==1.5.4",
        "annotated-doc==0.0.7",
        "rich==15.0.0",
        "markdown-it-py==4.3.0",
        "mdurl==0.1.2",
        "pygments==2.21.0",
        "pydantic==2.14.4",
        "pydantic_core==2.50.5",
        "annotated-types==0.8.0",
        "typing-inspection==0.4.5",
    ],
    "4.52.4": [
        "transformers==4.52.4",
        "huggingface_hub==0.36.2",
        "tokenizers==0.21.4",
        "safetensors==0.8.0",
        "regex==2026.11.19",
        "pyyaml==6.0.4",
        "packaging==26.4",
        "tqdm==4.70.1",
        "filelock==4.3.1",
        "fsspec==2026.9.0",
        "hf-xet==1.8.0",
        "requests==2.34.2",
        "certifi==2026.10.19.post1",
        "charset-normalizer==3.5.3",
        "idna==3.20",
        "urllib3==2.8.0",
        "typing_extensions==4.16.0",
    ],
}
PINS = PINS_BY_VERSION[DEFAULT_VERSION]


def site_dir(version: str) -> Path:
    """The per-version install folder (``pip install --target``)."""
    return CACHE / f"hf-site-transformers-{version}"


SITE = site_dir(DEFAULT_VERSION)

# Folders of the package (besides the models' own) that the models run.
CORE_DIRS = ["integrations", "utils", "loss", "generation"]

BATCH, SEQ, VOCAB = 2, 12, 99

_TEXT = dict(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
             intermediate_size=37, max_position_embeddings=64)
_DECODER = dict(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
_SEQ2SEQ = dict(vocab_size=VOCAB, d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
                decoder_attention_heads=4, encoder_ffn_dim=37, decoder_ffn_dim=37)

class Spec(NamedTuple):
    config: str  # config class in transformers
    model: str  # model class in transformers
    kwargs: dict[str, Any]  # config arguments
    kind: str  # input kind (below)
    folder: str | None = None  # transformers/models/<folder> (default: the name)
    dtype: str | None = None  # e.g. "float16": model and floating inputs cast to it


# name -> Spec(config class, model class, config kwargs, input kind, ...)
#   input kinds: mlm (input_ids, attention_mask, labels), mlm_tt (+ token_type_ids),
#   causal (input_ids, attention_mask, labels), seq2seq (input_ids, attention_mask, labels),
#   seq2seq_cache (+ use_cache=True, which BART warns about in forward when labels are given),
#   binary (input_ids, attention_mask, 0/1 token labels), cls (input_ids, attention_mask, class labels),
#   cls_embeds (inputs_embeds instead of input_ids), text (input_ids, attention_mask), image (pixel_values, labels), pixels (pixel_values),
#   whisper (input_features, labels), ctc (input_values, labels)
MODELS: dict[str, Spec] = {
    "bert": Spec("BertConfig", "BertForMaskedLM", dict(_TEXT, type_vocab_size=2), "mlm_tt"),
    "roberta": Spec("RobertaConfig", "RobertaForMaskedLM", dict(_TEXT, type_vocab_size=1), "mlm"),
    "albert": Spec("AlbertConfig", "AlbertForMaskedLM", dict(_TEXT, embedding_size=16), "mlm_tt"),
    "distilbert": Spec("DistilBertConfig", "DistilBertForMaskedLM",
                   dict(vocab_size=VOCAB, dim=32, n_layers=2, n_heads=4, hidden_dim=37,
                        max_position_embeddings=64), "mlm"),
    "electra": Spec("ElectraConfig", "ElectraForPreTraining", dict(_TEXT, embedding_size=16), "binary"),
    "mobilebert": Spec("MobileBertConfig", "MobileBertForMaskedLM",
                   dict(_TEXT, embedding_size=16, intra_bottleneck_size=16, num_feedforward_networks=2),
                   "mlm_tt"),
    "deberta_v2": Spec("DebertaV2Config", "DebertaV2ForMaskedLM",
                   dict(_TEXT, relative_attention=True, position_biased_input=False,
                        pos_att_type=["p2c", "c2p"], position_buckets=16, max_relative_positions=32), "mlm"),
    "gpt2": Spec("GPT2Config", "GPT2LMHeadModel",
             dict(vocab_size=VOCAB, n_embd=32, n_layer=2, n_head=4, n_positions=64), "causal"),
    "gpt_neo": Spec("GPTNeoConfig", "GPTNeoForCausalLM",
                dict(vocab_size=VOCAB, hidden_size=32, num_layers=2, num_heads=4, max_position_embeddings=64,
                     attention_types=[[["global", "local"], 1]], window_size=8), "causal"),
    "opt": Spec("OPTConfig", "OPTForCausalLM",
            dict(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, ffn_dim=37, num_attention_heads=4,
                 max_position_embeddings=64, word_embed_proj_dim=32), "causal"),
    "bloom": Spec("BloomConfig", "BloomForCausalLM", dict(vocab_size=VOCAB, hidden_size=32, n_layer=2, n_head=4),
              "causal"),
    "falcon": Spec("FalconConfig", "FalconForCausalLM",
               dict(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                    max_position_embeddings=64), "causal"),
    "llama": Spec("LlamaConfig", "LlamaForCausalLM", dict(_DECODER), "causal"),
    "mistral": Spec("MistralConfig", "MistralForCausalLM", dict(_DECODER, sliding_window=8), "causal"),
    "qwen2": Spec("Qwen2Config", "Qwen2ForCausalLM", dict(_DECODER), "causal"),
    "mixtral": Spec("MixtralConfig", "MixtralForCausalLM",
                dict(_DECODER, num_local_experts=4, num_experts_per_tok=2, output_router_logits=True), "causal"),
    "t5": Spec("T5Config", "T5ForConditionalGeneration",
           dict(vocab_size=VOCAB, d_model=32, d_kv=8, d_ff=37, num_layers=2, num_heads=4,
                relative_attention_num_buckets=8, decoder_start_token_id=0, pad_token_id=0, eos_token_id=1),
           "seq2seq"),
    "switch_transformers": Spec("SwitchTransformersConfig", "SwitchTransformersForConditionalGeneration",
                            dict(vocab_size=VOCAB, d_model=32, d_kv=8, d_ff=37, num_layers=2, num_decoder_layers=2,
                                 num_heads=4, num_experts=4, expert_capacity=8, num_sparse_encoder_layers=1,
                                 num_sparse_decoder_layers=1, relative_attention_num_buckets=8,
                                 decoder_start_token_id=0, pad_token_id=0, eos_token_id=1), "seq2seq"),
    "bart": Spec("BartConfig", "BartForConditionalGeneration",
             dict(_SEQ2SEQ, max_position_embeddings=64, pad_token_id=1, bos_token_id=0, eos_token_id=2,
                  decoder_start_token_id=2), "seq2seq_cache"),
    "vit": Spec("ViTConfig", "ViTForImageClassification",
            dict(image_size=32, patch_size=8, num_channels=3, hidden_size=32, num_hidden_layers=2,
                 num_attention_heads=4, intermediate_size=37, num_labels=3), "image"),
    "whisper": Spec("WhisperConfig", "WhisperForConditionalGeneration",
                dict(_SEQ2SEQ, num_mel_bins=16, max_source_positions=30, max_target_positions=40,
                     pad_token_id=1, bos_token_id=0, eos_token_id=2, decoder_start_token_id=0,
                     begin_suppress_tokens=None, suppress_tokens=None), "whisper"),
    "wav2vec2": Spec("Wav2Vec2Config", "Wav2Vec2ForCTC",
                 dict(vocab_size=32, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                      intermediate_size=37, conv_dim=(32, 32, 32), conv_stride=(4, 4, 4), conv_kernel=(8, 8, 8),
                      num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=2, mask_time_length=2,
                      ctc_loss_reduction="mean"), "ctc"),
}

# Models whose code fixitem rewrites when it runs on the whole package (`--full-tree`), with
# inputs or dtypes that make the rewritten lines run: `--models rewritten` (or `all`).
REWRITTEN_MODELS: dict[str, Spec] = {
    # FX201 (safe): the "use_cache ... labels" warning in forward, deferred
    "mbart": Spec("MBartConfig", "MBartForConditionalGeneration",
                  dict(_SEQ2SEQ, max_position_embeddings=64, pad_token_id=1, bos_token_id=0, eos_token_id=2,
                       decoder_start_token_id=2), "seq2seq_cache"),
    # FX401 (unsafe): `assert lengths.max().item() <= slen` in forward
    "xlm": Spec("XLMConfig", "XLMWithLMHeadModel",
                dict(vocab_size=VOCAB, emb_dim=32, n_layers=2, n_heads=4, max_position_embeddings=64), "mlm"),
    "flaubert": Spec("FlaubertConfig", "FlaubertWithLMHeadModel",
                     dict(vocab_size=VOCAB, emb_dim=32, n_layers=2, n_heads=4, max_position_embeddings=64), "mlm"),
    # FX303 in __init__
    "swinv2": Spec("Swinv2Config", "Swinv2Model",
                   dict(image_size=32, patch_size=4, embed_dim=16, depths=[1, 1], num_heads=[2, 2], window_size=4),
                   "pixels"),
    # FX101 (unsafe): the float16 "clamp when not finite" blocks, which only run in float16
    "bart_fp16": Spec("BartConfig", "BartForConditionalGeneration",
                      dict(_SEQ2SEQ, max_position_embeddings=64, pad_token_id=1, bos_token_id=0, eos_token_id=2,
                           decoder_start_token_id=2), "seq2seq", folder="bart", dtype="float16"),
    "longt5_fp16": Spec("LongT5Config", "LongT5ForConditionalGeneration",
                        dict(vocab_size=VOCAB, d_model=32, d_kv=8, d_ff=37, num_layers=2, num_heads=4,
                             local_radius=4, global_block_size=4, relative_attention_num_buckets=8,
                             decoder_start_token_id=0, pad_token_id=0, eos_token_id=1),
                        "seq2seq", folder="longt5", dtype="float16"),
}
# Models whose `forward` calls `logger.warning_once` on every call with these inputs (found by
# looking for `warning_once` inside `forward` in models/*/modeling_*.py of both versions and keeping
# the calls whose condition ordinary inputs meet): `--models warning_once`.
WARNING_ONCE_MODELS: dict[str, Spec] = {
    # "`attention_mask` was passed, but it is unused in this model." (RwkvForCausalLM does not pass
    # the mask on, so the base model)
    "rwkv": Spec("RwkvConfig", "RwkvModel",
                 dict(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, attention_hidden_size=32,
                      intermediate_size=64, context_length=64), "text"),
    # "Initializing global attention on CLS token..." (no global_attention_mask given)
    "longformer": Spec("LongformerConfig", "LongformerForSequenceClassification",
                       dict(_TEXT, attention_window=4, pad_token_id=1, num_labels=3), "cls"),
    # "... will not detect padding tokens in `inputs_embeds`. ..." (inputs_embeds, no input_ids)
    "gpt2_cls": Spec("GPT2Config", "GPT2ForSequenceClassification",
                     dict(vocab_size=VOCAB, n_embd=32, n_layer=2, n_head=4, n_positions=64, pad_token_id=0,
                          num_labels=3), "cls_embeds", folder="gpt2"),
}
_VL_TEXT = dict(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                num_key_value_heads=2, max_position_embeddings=64,
                rope_parameters={"rope_type": "default", "mrope_section": [1, 1, 2], "rope_theta": 10000.0})
_VL_TOKENS = dict(image_token_id=95, video_token_id=96, vision_start_token_id=97, vision_end_token_id=98)
# Vision-language models with an image (a 4x4 grid of patches): the data-dependent sizes the issue of
# data-dependent breaks names (grid shapes read with `.item()`, split sizes from `.tolist()`,
# `repeat_interleave` of the grid): `--models vl`.
VL_MODELS: dict[str, Spec] = {
    "qwen2_vl": Spec("Qwen2VLConfig", "Qwen2VLForConditionalGeneration",
                     dict(text_config=_VL_TEXT, vision_config=dict(depth=2, embed_dim=32, hidden_size=32, num_heads=4,
                                                                    patch_size=4, spatial_merge_size=2,
                                                                    temporal_patch_size=2, mlp_ratio=2), **_VL_TOKENS),
                     "vl_grid"),
    "qwen2_5_vl": Spec("Qwen2_5_VLConfig", "Qwen2_5_VLForConditionalGeneration",
                       dict(text_config=_VL_TEXT, vision_config=dict(depth=2, hidden_size=32, out_hidden_size=32,
                                                                      intermediate_size=64, num_heads=4, patch_size=4,
                                                                      spatial_merge_size=2, temporal_patch_size=2,
                                                                      window_size=16, fullatt_block_indexes=[1]),
                            **_VL_TOKENS), "vl_grid"),
}
ALL_MODELS: dict[str, Spec] = {**MODELS, **REWRITTEN_MODELS, **WARNING_ONCE_MODELS, **VL_MODELS}
GROUPS = {"default": list(MODELS), "rewritten": list(REWRITTEN_MODELS), "warning_once": list(WARNING_ONCE_MODELS),
          "vl": list(VL_MODELS), "all": list(ALL_MODELS)}
# ``--models causal_lm``: every causal language model of the installed version's auto mapping
# (``MODEL_FOR_CAUSAL_LM_MAPPING_NAMES``), built from its default config shrunk by :func:`shrink_config`
# (named ``causal:<model_type>``); the list is made at run time (:func:`auto_causal_specs`), and a
# model whose config does not shrink below :data:`AUTO_MAX_PARAMETERS` or that fails to build or run
# is an error row. ``--models tiny``: default, warning_once, vl and causal_lm together.
AUTO_PREFIX = "causal:"
AUTO_MAX_PARAMETERS = 3_000_000
DYNAMIC_GROUPS = ("causal_lm", "tiny")
_SHRINK = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, intermediate_size=64,
               vocab_size=VOCAB, max_position_embeddings=64, head_dim=8, d_model=32, n_embd=32, n_layer=2, n_head=4,
               num_layers=2, num_heads=4, d_ff=37, d_kv=8, ffn_dim=37, encoder_layers=2, decoder_layers=2,
               encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=37, decoder_ffn_dim=37,
               num_local_experts=4, num_experts=4, n_routed_experts=4, moe_intermediate_size=16,
               shared_expert_intermediate_size=16, num_experts_per_tok=2, embedding_size=16, n_positions=64,
               kv_lora_rank=8, q_lora_rank=8, qk_rope_head_dim=4, qk_nope_head_dim=4, v_head_dim=8,
               linear_num_key_heads=2, linear_num_value_heads=4, linear_key_head_dim=8, linear_value_head_dim=8,
               first_k_dense_replace=1, n_shared_experts=1, topk_group=1, n_group=1, sliding_window=8,
               attention_window=4)


def shrink_config(config, depth: int = 0):
    """A default config made tiny: every size of :data:`_SHRINK` it has, lowered to that value;
    ``layer_types`` kept with one layer of each kind; special token ids inside the vocabulary;
    sub-configs (``text_config``, ``vision_config``, ...) likewise."""
    for key, value in _SHRINK.items():
        try:
            current = getattr(config, key)
        except Exception:  # noqa: BLE001 - a property that needs other fields
            continue
        if isinstance(current, int) and not isinstance(current, bool) and current > value:
            try:
                setattr(config, key, value)
            except Exception:  # noqa: BLE001
                pass
    layer_types = getattr(config, "layer_types", None)
    if isinstance(layer_types, list) and layer_types:
        kinds = list(dict.fromkeys(layer_types))
        layers = getattr(config, "num_hidden_layers", 2) or 2
        new = (kinds + [kinds[-1]] * layers)[:max(layers, len(kinds))]
        try:
            config.layer_types = new
            config.num_hidden_layers = len(new)
        except Exception:  # noqa: BLE001
            pass
    vocab = getattr(config, "vocab_size", None)
    for attr, value in (("pad_token_id", 0), ("bos_token_id", 1), ("eos_token_id", 2)):
        token = getattr(config, attr, None)
        if isinstance(token, int) and isinstance(vocab, int) and token >= vocab:
            try:
                setattr(config, attr, min(vocab - 1, value))
            except Exception:  # noqa: BLE001
                pass
    for sub in ("text_config", "vision_config", "audio_config", "encoder", "decoder"):
        inner = getattr(config, sub, None)
        if inner is not None and hasattr(inner, "to_dict") and depth < 2:
            shrink_config(inner, depth + 1)
    return config


def auto_causal_specs(site: Path) -> dict[str, Spec]:
    """The causal LMs of the installed version's auto mapping, as specs (read in a subprocess: the
    parent does not import transformers)."""
    code = ("import json, transformers\n"
            "from transformers.models.auto import modeling_auto as m\n"
            "out = []\n"
            "for model_type, cls in m.MODEL_FOR_CAUSAL_LM_MAPPING_NAMES.items():\n"
            "    klass = getattr(transformers, cls, None)\n"
            "    if klass is None: continue\n"
            "    folder = klass.__module__.split('.')[2] if klass.__module__.startswith('transformers.models.') else None\n"
            "    out.append((model_type, klass.config_class.__name__, cls, folder))\n"
            "print(json.dumps(out))\n")
    proc = subprocess.run([sys.executable, "-c", code], env=child_env([site]), capture_output=True, text=True,
                          timeout=600)
    if proc.returncode != 0:
        raise RuntimeError(f"listing the causal LMs failed: {proc.stderr[-2000:]}")
    specs: dict[str, Spec] = {}
    for model_type, config_class, model_class, folder in json.loads(proc.stdout.strip().splitlines()[-1]):
        if folder:
            specs[AUTO_PREFIX + model_type] = Spec(config_class, model_class, {}, "auto_causal", folder=folder)
    return specs

# Tolerances for "close" (the same code on the same machine should be bitwise equal).
RTOL, ATOL = 1e-5, 1e-6


# =========================================================================== worker (subprocess)


def _seed_all(seed: int = 0) -> None:
    import random

    import numpy as np
    import torch

    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def _make_inputs(kind: str, config) -> dict[str, Any]:
    import torch

    g = torch.Generator().manual_seed(1234)

    def ids(n: int, high: int = VOCAB) -> torch.Tensor:
        return torch.randint(3, high, (BATCH, n), generator=g)  # 0..2: special tokens

    mask = torch.ones(BATCH, SEQ, dtype=torch.long)
    mask[1, -3:] = 0  # one padded row
    if kind in ("mlm", "mlm_tt", "causal", "binary"):
        inputs = {"input_ids": ids(SEQ), "attention_mask": mask}
        if kind == "mlm_tt":
            inputs["token_type_ids"] = torch.zeros(BATCH, SEQ, dtype=torch.long)
            inputs["token_type_ids"][:, SEQ // 2:] = 1
        if kind == "binary":
            inputs["labels"] = torch.randint(0, 2, (BATCH, SEQ), generator=g)
        elif kind == "causal":
            inputs["labels"] = inputs["input_ids"].clone()
        else:  # masked LM: -100 except a few positions
            labels = torch.full((BATCH, SEQ), -100)
            labels[:, 1:SEQ:3] = inputs["input_ids"][:, 1:SEQ:3]
            inputs["labels"] = labels
        return inputs
    if kind == "text":
        return {"input_ids": ids(SEQ), "attention_mask": mask}
    if kind == "cls":
        return {"input_ids": ids(SEQ), "attention_mask": mask, "labels": torch.tensor([0, 2])}
    if kind == "cls_embeds":
        embeds = torch.randn(BATCH, SEQ, config.hidden_size, generator=g)
        return {"inputs_embeds": embeds, "attention_mask": mask, "labels": torch.tensor([0, 2])}
    if kind in ("seq2seq", "seq2seq_cache"):
        inputs = {"input_ids": ids(SEQ), "attention_mask": mask, "labels": ids(7)}
        if kind == "seq2seq_cache":  # labels with use_cache=True: BART logs a warning in forward
            inputs["use_cache"] = True
        return inputs
    if kind == "pixels":
        return {"pixel_values": torch.randn(BATCH, 3, 32, 32, generator=g)}
    if kind == "image":
        return {"pixel_values": torch.randn(BATCH, 3, 32, 32, generator=g), "labels": torch.tensor([0, 2])}
    if kind == "whisper":
        features = torch.randn(BATCH, config.num_mel_bins, 2 * config.max_source_positions, generator=g)
        return {"input_features": features, "labels": ids(5)}
    if kind == "ctc":
        labels = torch.randint(3, config.vocab_size, (BATCH, 5), generator=g)
        labels[1, -2:] = -100
        return {"input_values": torch.randn(BATCH, 1600, generator=g), "labels": labels}
    if kind == "auto_causal":
        high = min(VOCAB, getattr(config, "vocab_size", VOCAB) or VOCAB)
        input_ids = torch.randint(3, high, (BATCH, SEQ), generator=g)
        return {"input_ids": input_ids, "attention_mask": mask, "labels": input_ids.clone()}
    if kind == "vl_grid":
        # One image per row: a 1x4x4 grid of patches, merged 2x2 into 4 image tokens.
        vision = config.vision_config
        grid = torch.tensor([[1, 4, 4]] * BATCH)
        patches = int(grid[0].prod())
        tokens = patches // vision.spatial_merge_size ** 2
        width = 3 * vision.temporal_patch_size * vision.patch_size ** 2
        input_ids = ids(SEQ, 90)
        input_ids[:, 2:2 + tokens] = config.image_token_id
        token_types = torch.zeros(BATCH, SEQ, dtype=torch.long)
        token_types[:, 2:2 + tokens] = 1
        return {"input_ids": input_ids, "attention_mask": torch.ones(BATCH, SEQ, dtype=torch.long),
                "pixel_values": torch.randn(BATCH * patches, width, generator=g), "image_grid_thw": grid,
                "mm_token_type_ids": token_types, "labels": input_ids.clone()}
    raise ValueError(f"unknown input kind {kind!r}")


def _tensors(out, detach: bool = True) -> dict[str, Any]:
    """The tensors of a model output (ModelOutput, tuple or tensor), by name; caches are skipped."""
    import torch

    found: dict[str, torch.Tensor] = {}

    def visit(prefix: str, value) -> None:
        if isinstance(value, torch.Tensor):
            found[prefix] = value.detach().clone() if detach else value
        elif isinstance(value, (tuple, list)):
            for i, v in enumerate(value):
                visit(f"{prefix}.{i}", v)
        elif hasattr(value, "items") and not hasattr(value, "get_seq_length"):
            for k, v in value.items():
                visit(f"{prefix}.{k}" if prefix else str(k), v)

    visit("", out)
    return found


def _short_path(filename: str) -> str:
    marker = os.sep + "transformers" + os.sep
    if marker in filename:
        return "transformers/" + filename.rsplit(marker, 1)[1].replace(os.sep, "/")
    return filename


class _LogCollector:
    """Collects the text of the records of the ``transformers`` logger."""

    def __init__(self) -> None:
        import logging

        self.lines: list[str] = []
        collector = self

        class Handler(logging.Handler):
            def emit(self, record: logging.LogRecord) -> None:
                try:
                    collector.lines.append(f"{record.levelname}: {record.getMessage()}")
                except Exception:  # noqa: BLE001
                    collector.lines.append(f"{record.levelname}: <unformattable>")

        self.handler = Handler(level=logging.DEBUG)
        self.logger = logging.getLogger("transformers")

    def __enter__(self):
        self.logger.addHandler(self.handler)
        return self

    def __exit__(self, *exc) -> None:
        self.logger.removeHandler(self.handler)


def _flush_deferred() -> None:
    mod = sys.modules.get("fixitem.runtime")
    if mod is not None:
        mod.flush()


def _break_reasons(explanation, messages: list[str]) -> list[dict[str, Any]]:
    """Distinct break reasons with file:line: from Dynamo's graph-break log, else from explain."""
    try:
        from fixitem.verify.breaks import _parse, summarise_reason  # internal helpers
    except Exception:  # noqa: BLE001 - the bench must not depend on their shape
        _parse = None

        def summarise_reason(text: str) -> str:
            return next((ln.strip() for ln in str(text).splitlines() if ln.strip()), "unknown")

    found: dict[tuple, dict[str, Any]] = {}

    def add(reason: str, file: str | None, line: int | None) -> None:
        location = f"{_short_path(file)}:{line}" if file else None
        key = (reason, location)
        if key in found:
            found[key]["events"] += 1
        else:
            # The source line lets the parent match a break across a rewrite that moved it.
            code = linecache.getline(file, line).strip()[:120] if file and line else ""
            found[key] = {"reason": reason[:160], "location": location, "code": code, "events": 1,
                          "logging": is_logging_break(reason, location, code)}

    if messages and _parse is not None:
        for message in messages:
            gb = _parse(message)
            add(gb.reason, gb.file, gb.line)
    elif explanation is not None:
        for br in explanation.break_reasons:
            stack = getattr(br, "user_stack", None) or []
            add(summarise_reason(getattr(br, "reason", str(br))),
                stack[-1].filename if stack else None, stack[-1].lineno if stack else None)
    return list(found.values())


_LOGGING_WORDS = ("warning_once", "info_once", "logging", "logger", "GB0291")


def is_logging_break(reason: str, location: str | None, code: str) -> bool:
    """Whether a break is attributed to logging: its reason, file or source line names it."""
    text = f"{reason} {location or ''} {code}"
    return any(w in text for w in _LOGGING_WORDS)


def missing_in(site: Path, name: str) -> str | None:
    """Why a model spec cannot run on this install (its folder or classes do not exist), or None."""
    spec = ALL_MODELS[name]
    folder = site / "transformers" / "models" / (spec.folder or name)
    if not folder.is_dir():
        return f"transformers/models/{spec.folder or name} does not exist in this version"
    text = "\n".join(f.read_text(errors="replace") for f in folder.glob("*.py"))
    absent = [c for c in (spec.config, spec.model) if f"class {c}(" not in text]
    return f"no class {', '.join(absent)} in this version" if absent else None


def _explain(model, inputs) -> dict[str, Any]:
    import torch
    import torch._dynamo
    from torch._dynamo.utils import counters

    try:
        from fixitem.verify.breaks import _listen_for_breaks
    except Exception:  # noqa: BLE001
        import contextlib

        def _listen_for_breaks():
            return contextlib.nullcontext(None)

    result: dict[str, Any] = {}
    torch._dynamo.reset()
    counters.clear()
    explanation = None
    start = time.perf_counter()
    with _listen_for_breaks() as collector, torch.no_grad():
        try:
            explanation = torch._dynamo.explain(model)(**inputs)
        except Exception as exc:  # noqa: BLE001
            result["error"] = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"[:300]
    result["seconds"] = round(time.perf_counter() - start, 2)
    _flush_deferred()
    result["counter_breaks"] = sum(counters["graph_break"].values())
    if explanation is not None:
        result["graphs"] = explanation.graph_count
        result["breaks"] = max(0, explanation.graph_break_count)
        result["ops"] = explanation.op_count
    messages = collector.messages if collector is not None else []
    reasons = _break_reasons(explanation, messages)
    result["break_sites"] = len(reasons)
    result["logging_sites"] = sum(1 for r in reasons if r["logging"])
    result["logging_events"] = sum(r["events"] for r in reasons if r["logging"])
    result["reasons"] = reasons
    torch._dynamo.reset()
    return result


def _spec_for(name: str, transformers) -> Spec:
    """The spec of a model: a fixed one, or one of the installed version's causal LMs (``causal:<type>``)."""
    if name in ALL_MODELS:
        return ALL_MODELS[name]
    if name.startswith(AUTO_PREFIX):
        from transformers.models.auto import modeling_auto

        model_class = modeling_auto.MODEL_FOR_CAUSAL_LM_MAPPING_NAMES[name[len(AUTO_PREFIX):]]
        klass = getattr(transformers, model_class)
        return Spec(klass.config_class.__name__, model_class, {}, "auto_causal", folder=klass.__module__.split(".")[2])
    raise KeyError(name)


# The flags fixitem's data-dependent rules name, as they appear in a finding's note.
CONFIG_FLAGS = ("capture_scalar_outputs", "capture_dynamic_output_shape_ops")


def advised_flags(advice: dict[str, list[str]], reasons: list[dict[str, Any]]) -> list[str]:
    """The configuration fixitem advises for a run's breaks: the flags named by the findings at the
    break sites (``file:line`` of each break, as ``transformers/...py:LINE``)."""
    flags: list[str] = []
    for reason in reasons:
        for flag in advice.get(reason.get("location") or "", []):
            if flag not in flags:
                flags.append(flag)
    return [f for f in CONFIG_FLAGS if f in flags]


def _advised(model, inputs, advice: dict[str, list[str]], result: dict[str, Any], saved: dict[str, Any]) -> None:
    """Count the breaks again under the configuration fixitem advises for the breaks found (again with
    what the new breaks advise, up to three rounds), then run the model compiled with
    ``fullgraph=False`` under it, eval and one training step, for outputs and gradients to compare
    with the eager before run (backend ``eager``: Dynamo's graphs run as traced)."""
    import torch

    flags = advised_flags(advice, result["explain"].get("reasons") or [])
    explained = result["explain"]
    attempts: list[dict[str, Any]] = []
    rounds = 0
    while flags and rounds < 4:
        rounds += 1
        with torch._dynamo.config.patch(**{f: True for f in flags}):
            explained = _explain(model, inputs)
        attempts.append({"flags": list(flags), "sites": explained.get("break_sites"), "error": explained.get("error")})
        if explained.get("error"):
            # The advised configuration does not compile this model (a guard Dynamo cannot decide on a
            # value it now traces): said, and measured again with what is left of the advice.
            flags = flags[:-1]
            explained = result["explain"]
            continue
        more = [f for f in advised_flags(advice, explained.get("reasons") or []) if f not in flags]
        if not more or any(a["flags"] == sorted(set(flags) | set(more), key=CONFIG_FLAGS.index) for a in attempts):
            break
        flags = [f for f in CONFIG_FLAGS if f in flags or f in more]
    result["advised_flags"] = flags
    result["config_attempts"] = attempts
    result["explain_config"] = explained
    if not flags:
        return
    torch._dynamo.reset()
    try:
        with torch._dynamo.config.patch(**{f: True for f in flags}):
            compiled = torch.compile(model, backend="eager")
            with torch.no_grad():
                saved["config_eval"] = _tensors(compiled(**inputs))
            model.train()
            _seed_all(0)
            model.zero_grad(set_to_none=True)
            out = compiled(**inputs)
            loss = getattr(out, "loss", None)
            if loss is None:
                loss = sum(t.float().pow(2).mean() for t in _tensors(out, detach=False).values()
                           if t.is_floating_point() and t.requires_grad)
            loss.backward()
            saved["config_train_loss"] = loss.detach().clone()
            saved["config_grads"] = {n: (None if p.grad is None else p.grad.detach().clone())
                                     for n, p in model.named_parameters()}
    except Exception as exc:  # noqa: BLE001 - reported, not raised
        result["config_error"] = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"[:300]
    finally:
        model.eval()
        model.zero_grad(set_to_none=True)
        torch._dynamo.reset()


def worker(args: argparse.Namespace) -> int:
    """One model, one version: build, run eagerly, explain, train one step; writes result.json."""
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    result: dict[str, Any] = {"model": args.worker, "version": args.version, "stage": "import"}

    def save() -> None:
        (out / "result.json").write_text(json.dumps(result, indent=1, default=str))

    save()
    try:
        import torch

        torch.set_num_threads(1)
        import transformers

        result["transformers_file"] = transformers.__file__
        result["transformers_version"] = transformers.__version__
        spec = _spec_for(args.worker, transformers)
        result["stage"] = "build"
        _seed_all(0)
        config = getattr(transformers, spec.config)(**spec.kwargs)
        if spec.kind == "auto_causal":
            config = shrink_config(config)
            with torch.device("meta"):
                size = sum(p.numel() for p in getattr(transformers, spec.model)(config).parameters())
            if size > AUTO_MAX_PARAMETERS:
                raise RuntimeError(f"the shrunk config still has {size:,} parameters (more than "
                                   f"{AUTO_MAX_PARAMETERS:,}): not a tiny model")
            _seed_all(0)
        model = getattr(transformers, spec.model)(config).eval()
        inputs = _make_inputs(spec.kind, config)
        if spec.dtype:
            dtype = getattr(torch, spec.dtype)
            model = model.to(dtype)
            inputs = {k: v.to(dtype) if isinstance(v, torch.Tensor) and v.is_floating_point() else v
                      for k, v in inputs.items()}
        result["parameters"] = sum(p.numel() for p in model.parameters())
        result["attn_implementation"] = getattr(config, "_attn_implementation", None)
        if args.reference:
            ref = torch.load(Path(args.reference) / "state.pt", weights_only=True)
            own = model.state_dict()
            result["same_init"] = own.keys() == ref["state"].keys() and all(
                torch.equal(own[k], ref["state"][k]) for k in own)
            model.load_state_dict(ref["state"])
            inputs = ref["inputs"]
        else:
            torch.save({"state": model.state_dict(), "inputs": inputs}, out / "state.pt")
        save()

        saved: dict[str, Any] = {}
        with _LogCollector() as logs:
            result["stage"] = "eager"
            with torch.no_grad():
                saved["eval"] = _tensors(model(**inputs))
            _flush_deferred()
            result["eager_logs"] = list(logs.lines)
            save()

            result["stage"] = "explain"
            result["explain"] = _explain(model, inputs)
            save()

            result["stage"] = "train"
            logs.lines.clear()
            model.train()
            _seed_all(0)
            model.zero_grad(set_to_none=True)
            train_out = model(**inputs)
            loss = getattr(train_out, "loss", None)
            if loss is None:
                loss = sum(t.float().pow(2).mean() for t in _tensors(train_out, detach=False).values()
                           if t.is_floating_point() and t.requires_grad)
            loss.backward()
            _flush_deferred()
            result["train_logs"] = list(logs.lines)
            saved["train_loss"] = loss.detach().clone()
            saved["grads"] = {n: (None if p.grad is None else p.grad.detach().clone())
                              for n, p in model.named_parameters()}
            if args.advice:
                # Last: the compiled runs must not change what the eager runs above compare.
                result["stage"] = "explain under the advised configuration"
                model.eval()
                _advised(model, inputs, json.loads(Path(args.advice).read_text()), result, saved)
                _flush_deferred()
        torch.save(saved, out / "outputs.pt")
        result["stage"] = "done"
    except BaseException as exc:  # noqa: BLE001 - reported, not raised
        import traceback

        result["error"] = f"{type(exc).__name__}: {exc}"[:1000]
        result["traceback"] = traceback.format_exc()[-4000:]
    save()
    return 0


def import_check(args: argparse.Namespace) -> int:
    """Import each module of a list (in this process); writes {module: error or None}."""
    import importlib
    import traceback

    modules = json.loads(Path(args.import_check).read_text())
    results: dict[str, Any] = {}
    for name in modules:
        try:
            importlib.import_module(name)
            results[name] = None
        except BaseException as exc:  # noqa: BLE001
            results[name] = f"{type(exc).__name__}: {exc}"[:500] + "\n" + traceback.format_exc()[-1500:]
    Path(args.out).write_text(json.dumps(results, indent=1))
    return 0


# =========================================================================== parent


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def ensure_site(version: str = DEFAULT_VERSION) -> Path:
    """The pinned install of one transformers version (``pip install --target``), made once."""
    pins = PINS_BY_VERSION[version]
    site = site_dir(version)
    marker = site / ".fixitem-pins"
    wanted = "\n".join(pins) + "\n"
    if marker.is_file() and marker.read_text() == wanted and (site / "transformers" / "__init__.py").is_file():
        return site
    staging = site.with_name(site.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    log(f"installing {pins[0]} and {len(pins) - 1} pinned dependencies into {site} ...")
    command = [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-deps",
               "--only-binary=:all:", "--no-compile", "--target", str(staging)]
    for folder in (CACHE, TEST_CACHE):
        if folder.is_dir():
            command += ["--find-links", str(folder)]
    proc = subprocess.run(command + pins, capture_output=True, text=True)
    if proc.returncode != 0:
        shutil.rmtree(staging, ignore_errors=True)
        raise RuntimeError(f"pip install --target failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
    for leaked in ("torch", "numpy"):
        if (staging / leaked).exists():
            raise RuntimeError(f"pip put {leaked} into {staging}: refusing to shadow the environment's")
    (staging / ".fixitem-pins").write_text(wanted)
    shutil.rmtree(site, ignore_errors=True)
    staging.rename(site)
    return site


def fixitem_source_hash() -> str:
    """A hash of fixitem's rewriting code (the package and the codemods)."""
    import fixitem.codemods

    import fixitem

    h = hashlib.sha256()
    for root in sorted({Path(fixitem.__file__).parent, Path(fixitem.codemods.__file__).parent}):
        for p in sorted(root.rglob("*.py")):
            h.update(str(p.relative_to(root)).encode())
            h.update(p.read_bytes())
    return h.hexdigest()


def rewrite_targets(tree: Path, models: list[str], full: bool) -> list[Path]:
    pkg = tree / "transformers"
    if full:
        return [pkg]
    targets = sorted(pkg.glob("*.py"))
    targets += [pkg / d for d in CORE_DIRS if (pkg / d).is_dir()]
    folders = sorted({ALL_MODELS[m].folder or m for m in models})
    targets += [pkg / "models" / f for f in folders if (pkg / "models" / f).is_dir()]
    return targets


def rewrite(site: Path, models: list[str], unsafe: bool, full: bool, use_cache: bool,
            version: str = DEFAULT_VERSION) -> tuple[Path, dict[str, Any]]:
    """A rewritten copy of the installed package: (folder holding ``transformers``, apply record)."""
    import fixitem

    scope = "full" if full else ",".join(sorted(models))
    pins = "|".join(PINS_BY_VERSION[version])
    key = hashlib.sha256(f"{fixitem_source_hash()}|{unsafe}|{scope}|{pins}".encode()).hexdigest()[:16]
    dest = REWRITTEN / f"{'unsafe' if unsafe else 'safe'}-{version}-{key}"
    record_path = dest / "apply.json"
    if use_cache and record_path.is_file() and (dest / "transformers" / "__init__.py").is_file():
        record = json.loads(record_path.read_text())
        record["cached"] = True
        log(f"reusing the rewritten copy {dest}")
        return dest, record
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    shutil.copytree(site / "transformers", dest / "transformers")
    targets = rewrite_targets(dest, models, full)
    log(f"fixitem apply{' --unsafe' if unsafe else ''} on {'the whole package' if full else f'{len(targets)} paths'}"
        f" of the copy in {dest} ...")
    start = time.perf_counter()
    cwd = os.getcwd()
    os.chdir(dest)  # paths in the diff relative to the copy
    try:
        result = fixitem.apply(
            [t.relative_to(dest) for t in targets], unsafe=unsafe, isolated=True, write=True, cache=False
        )
    finally:
        os.chdir(cwd)
    seconds = time.perf_counter() - start
    (dest / "apply.diff").write_text(result.diff)
    changed = []
    for fr in result.changed:
        rules: dict[str, int] = {}
        for f in fr.applied:
            rules[f.rule] = rules.get(f.rule, 0) + 1
        changed.append({"path": fr.path.as_posix(), "rules": rules, "written": fr.written})
    applied: dict[str, int] = {}
    for f in result.applied:
        applied[f.rule] = applied.get(f.rule, 0) + 1
    remaining: dict[str, int] = {}
    for f in result.findings:
        remaining[f.rule] = remaining.get(f.rule, 0) + 1
    record = {
        "advice": advice_of(result.findings),
        "mode": "unsafe" if unsafe else "safe",
        "scope": "whole package" if full else "core + selected models",
        "files": len(result.files),
        "changed": changed,
        "applied_by_rule": dict(sorted(applied.items())),
        "remaining_by_rule": dict(sorted(remaining.items())),
        "errors": result.errors,
        "seconds": round(seconds, 1),
        "diff": str(dest / "apply.diff"),
        "folder": str(dest),
        "cached": False,
    }
    record_path.write_text(json.dumps(record, indent=1))
    return dest, record


def advice_of(findings) -> dict[str, list[str]]:
    """The configuration fixitem advises, by site: ``"transformers/...py:LINE" -> [flags]`` for each
    finding of the data-dependent rules that costs a graph break and names a flag (FX006, FX601,
    FX602: a library, so advice rather than a fix)."""
    advice: dict[str, list[str]] = {}
    for f in findings:
        if f.rule not in ("FX006", "FX601", "FX602") or "graph-break" not in f.costs:
            continue
        text = f"{f.message} {f.note}"
        if "capture_dynamic_output_shape_ops" in text:
            flags = list(CONFIG_FLAGS)
        elif "capture_scalar_outputs" in text:
            flags = [CONFIG_FLAGS[0]]
        else:
            continue
        path = Path(f.path).as_posix()
        key = f"{path[path.index('transformers/'):] if 'transformers/' in path else path}:{f.line}"
        advice[key] = sorted(set(advice.get(key, [])) | set(flags), key=CONFIG_FLAGS.index)
    return advice


def module_name(path: str) -> str:
    parts = Path(path).with_suffix("").parts
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def child_env(pythonpath: list[Path]) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(str(p) for p in pythonpath)
    env.update({
        "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_HUB_DISABLE_TELEMETRY": "1",
        "TOKENIZERS_PARALLELISM": "false", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
        "PYTHONHASHSEED": "0", "FIXITEM_FLUSH_EVERY": env.get("FIXITEM_FLUSH_EVERY", "100"),
    })
    env.pop("TORCH_LOGS", None)
    return env


def run_child(command: list[str], env: dict[str, str], timeout: float) -> tuple[int | None, str, float]:
    start = time.perf_counter()
    try:
        proc = subprocess.run(command, env=env, capture_output=True, text=True, timeout=timeout)
        return proc.returncode, (proc.stderr or "")[-3000:], time.perf_counter() - start
    except subprocess.TimeoutExpired as exc:
        tail = exc.stderr.decode("utf-8", "replace") if isinstance(exc.stderr, bytes) else (exc.stderr or "")
        return None, tail[-3000:], time.perf_counter() - start


def check_imports(changed: list[dict[str, Any]], site: Path, rewritten: Path, work: Path,
                  timeout: float) -> dict[str, Any]:
    """Import every changed module before and after; a module that only fails after is a bug."""
    modules = [module_name(c["path"]) for c in changed if c["path"].endswith(".py")]
    if not modules:
        return {"modules": 0, "broken": {}}
    listing = work / "modules.json"
    listing.write_text(json.dumps(modules))
    found: dict[str, Any] = {}
    for version, path in (("before", [site]), ("after", [rewritten, site])):
        out = work / f"imports-{version}.json"
        rc, tail, _ = run_child([sys.executable, str(HERE), "--import-check", str(listing), "--out", str(out)],
                                child_env(path), timeout)
        found[version] = json.loads(out.read_text()) if out.is_file() else {m: f"import check died: {tail}" for m in modules}
    broken = {m: found["after"][m] for m in modules if found["before"].get(m) is None and found["after"].get(m)}
    failing_both = sorted(m for m in modules if found["before"].get(m) and found["after"].get(m))
    return {"modules": len(modules), "broken": broken, "failing_before_too": failing_both}


def compare_tensors(before: dict, after: dict) -> dict[str, Any]:
    import torch

    keys = sorted(set(before) | set(after))
    exact = close = 0
    max_diff = 0.0
    differing: list[str] = []
    for k in keys:
        a, b = before.get(k), after.get(k)
        if a is None and b is None:
            exact += 1
            close += 1
            continue
        if a is None or b is None:  # a None gradient equals an all-zero one
            t = a if a is not None else b
            if not torch.count_nonzero(t):
                close += 1
                continue
            differing.append(f"{k} (None on one side)")
            continue
        if a.shape != b.shape or a.dtype != b.dtype:
            differing.append(f"{k} (shape/dtype {tuple(a.shape)} {a.dtype} vs {tuple(b.shape)} {b.dtype})")
            continue
        if torch.equal(a, b) or (a.is_floating_point() and torch.equal(torch.isnan(a), torch.isnan(b))
                                 and torch.equal(a.nan_to_num(), b.nan_to_num())):
            exact += 1
            close += 1
            continue
        if a.is_floating_point():
            d = (a.double() - b.double()).abs().nan_to_num(nan=float("inf")).max().item()
            max_diff = max(max_diff, d)
            if torch.allclose(a, b, rtol=RTOL, atol=ATOL, equal_nan=True):
                close += 1
                continue
        differing.append(k)
    return {"tensors": len(keys), "exact": exact, "close": close, "max_abs_diff": max_diff,
            "differing": differing[:10], "equal": close == len(keys)}


def measure_model(name: str, site: Path, rewritten: Path, work: Path, timeout: float,
                  advice: Path | None = None) -> dict[str, Any]:
    """``advice``: with ``--advised-config``, the JSON of :func:`advice_of` for the after run, which
    then also counts its breaks under the configuration advised for them."""
    spec = ALL_MODELS[name]
    row: dict[str, Any] = {"model": name, "class": spec.model, "dtype": spec.dtype or "float32"}
    folder = work / name
    start = time.perf_counter()
    for version, path in (("before", [site]), ("after", [rewritten, site])):
        out = folder / version
        command = [sys.executable, str(HERE), "--worker", name, "--version", version, "--out", str(out)]
        if version == "after":
            command += ["--reference", str(folder / "before")]
            if advice is not None:
                command += ["--advice", str(advice)]
        rc, tail, seconds = run_child(command, child_env(path), timeout)
        res_path = out / "result.json"
        res = json.loads(res_path.read_text()) if res_path.is_file() else {"stage": "start"}
        res["seconds"] = round(seconds, 1)
        if rc is None:
            res["error"] = f"timed out after {timeout:.0f} s (in stage {res.get('stage')})"
        elif rc != 0 and not res.get("error"):
            res["error"] = f"exit status {rc} in stage {res.get('stage')}: {tail.strip().splitlines()[-1] if tail.strip() else ''}"
        if res.get("error"):
            res["stderr_tail"] = tail
        expected = rewritten if version == "after" else site
        tf_file = res.get("transformers_file")
        if tf_file and not Path(tf_file).resolve().is_relative_to(expected.resolve()):
            res["error"] = f"imported transformers from {tf_file}, not from {expected}"
        row[version] = res
        if version == "before" and res.get("stage") not in ("done",) and not (out / "state.pt").is_file():
            row["after"] = {"error": "skipped: the before run failed"}
            break
    row["seconds"] = round(time.perf_counter() - start, 1)
    b, a = row.get("before", {}), row.get("after", {})
    if (folder / "before" / "outputs.pt").is_file() and (folder / "after" / "outputs.pt").is_file():
        import torch

        ob = torch.load(folder / "before" / "outputs.pt", weights_only=True)
        oa = torch.load(folder / "after" / "outputs.pt", weights_only=True)
        row["outputs"] = compare_tensors(ob["eval"], oa["eval"])
        row["loss"] = compare_tensors({"loss": ob["train_loss"]}, {"loss": oa["train_loss"]})
        row["grads"] = compare_tensors(ob["grads"], oa["grads"])
        row["logs_equal"] = (b.get("eager_logs") == a.get("eager_logs") and b.get("train_logs") == a.get("train_logs"))
        if "config_eval" in oa:  # compiled under the advised configuration, against eager before
            row["config_outputs"] = compare_tensors(ob["eval"], oa["config_eval"])
            row["config_loss"] = compare_tensors({"loss": ob["train_loss"]}, {"loss": oa["config_train_loss"]})
            row["config_grads"] = compare_tensors(ob["grads"], oa["config_grads"])
    if b.get("error"):
        row["status"] = "error"
    elif a.get("error"):
        row["status"] = "BROKEN AFTER"  # ran before, fails after: a rewrite broke it
    elif not (row.get("outputs", {}).get("equal") and row.get("grads", {}).get("equal")
              and row.get("loss", {}).get("equal") and row.get("logs_equal")):
        row["status"] = "DIFFERS"
    else:
        row["status"] = "ok"
    return row


# ---------------------------------------------------------------------------- report


def fmt_equal(cmp: dict[str, Any] | None) -> str:
    if not cmp:
        return "-"
    if cmp["exact"] == cmp["tensors"]:
        return f"yes {cmp['exact']}/{cmp['tensors']}"
    if cmp["equal"]:
        return f"close {cmp['exact']}/{cmp['tensors']} (max {cmp['max_abs_diff']:.1e})"
    return f"NO {cmp['close']}/{cmp['tensors']} (max {cmp['max_abs_diff']:.1e})"


def _get(row: dict, version: str, key: str):
    return row.get(version, {}).get("explain", {}).get(key)


def logging_lines(row: dict, version: str) -> int | None:
    """Distinct source lines of the logging breaks of one run (from its break reasons)."""
    explain = row.get(version, {}).get("explain")
    if not explain or explain.get("breaks") is None:
        return None
    return len({r.get("location") for r in explain.get("reasons") or [] if r.get("logging")})


def fmt_int(x) -> str:
    return "-" if x is None else str(x)


def fmt_reason(r: dict[str, Any]) -> str:
    return f"{r['reason'][:90]} @ {r['location'] or '?'}" + (f" (x{r['events']})" if r["events"] > 1 else "")


def top_reasons(row: dict, version: str, n: int = 5) -> list[str]:
    reasons = row.get(version, {}).get("explain", {}).get("reasons") or []
    return [fmt_reason(r) for r in reasons[:n]]


def _site_key(r: dict[str, Any]) -> tuple:
    """A break site independent of line numbers: reason, file and the source line's text."""
    file = (r.get("location") or "").rsplit(":", 1)[0]
    return (r["reason"], file, r.get("code") or r.get("location"))


def print_table(header: list[str], rows: list[list[str]]) -> None:
    widths = [max([len(h)] + [len(r[k]) for r in rows]) for k, h in enumerate(header)]
    line = lambda cells: "  ".join(c.ljust(w) if k in (0, len(cells) - 1) else c.rjust(w)  # noqa: E731
                                   for k, (c, w) in enumerate(zip(cells, widths))).rstrip()
    print(line(header))
    print(line(["-" * w for w in widths]))
    for r in rows:
        print(line(r))


def report(data: dict[str, Any]) -> None:
    rows = []
    for row in data["models"]:
        if row["status"] == "error" or (row["status"] == "BROKEN AFTER" and not row.get("outputs")):
            err = row.get("before", {}).get("error") or row.get("after", {}).get("error") or "?"
            rows.append([row["model"], "-", "-", "-", "-", "-", "-", "-", "-", "-", "-", "-", "-", "-",
                         f"{row['status'].upper()}: {err.splitlines()[0][:110]}"])
            continue
        reasons = top_reasons(row, "after", 1)
        rows.append([
            row["model"],
            fmt_int(_get(row, "before", "breaks")), fmt_int(_get(row, "after", "breaks")),
            fmt_int(_get(row, "before", "counter_breaks")), fmt_int(_get(row, "after", "counter_breaks")),
            fmt_int(_get(row, "before", "break_sites")), fmt_int(_get(row, "after", "break_sites")),
            fmt_int(_get(row, "before", "graphs")), fmt_int(_get(row, "after", "graphs")),
            fmt_int(logging_lines(row, "before")), fmt_int(logging_lines(row, "after")),
            fmt_equal(row.get("outputs")), fmt_equal(row.get("grads")),
            "yes" if row.get("logs_equal") else "NO",
            (reasons[0] if reasons else "")
            + (f"  (after: {row['after']['explain']['error'][:60]})" if _get(row, "after", "error") else ""),
        ])
    print_table(["model", "brk b", "brk a", "ctr b", "ctr a", "site b", "site a", "gr b", "gr a", "log b", "log a", "outputs equal",
                 "grads equal", "logs", "top remaining break reason (after)"], rows)
    t = data["totals"]
    print(f"{'TOTAL':<10} breaks {t['breaks_before']} -> {t['breaks_after']} (counter {t['counter_before']} -> "
          f"{t['counter_after']}, sites {t['sites_before']} -> {t['sites_after']}; logging lines "
          f"{t['logging_lines_before']} -> {t['logging_lines_after']} in {t['logging_models_before']} -> "
          f"{t['logging_models_after']} models), graphs {t['graphs_before']} -> {t['graphs_after']}; models ok {t['ok']}/"
          f"{t['models']}, outputs equal {t['outputs_equal']}/{t['compared']}, grads equal {t['grads_equal']}/"
          f"{t['compared']}, logs equal {t.get('logs_equal', '?')}/{t['compared']}, errors {t['errors']}, "
          f"broken after {t['broken_after']}, differing {t['differing']}")
    for m, why in (data.get("skipped") or {}).items():
        print(f"skipped {m}: {why}")
    if data.get("advised_config"):
        report_config(data)
    print("(brk: torch._dynamo.explain graph breaks (misses a break before the first traced op); ctr: "
          "counters['graph_break']; site: distinct break locations (file:line, reason) from Dynamo's graph-break "
          "log; gr: graphs; log: distinct source lines of the breaks whose reason, file or line names warning_once/info_once/logging/"
          "logger/GB0291; b/a: before/after; outputs: eval forward, exact/total tensors; grads: one train step; "
          "logs: transformers log text equal)")
    print()
    ap = data["apply"]
    print(f"fixitem apply ({ap['mode']}, {ap['scope']}): {ap['files']} files, {len(ap['changed'])} changed, "
          f"fixes {ap['applied_by_rule'] or 'none'}; left (report only / not applied) {ap['remaining_by_rule']}; "
          f"errors {len(ap['errors'])}; {ap['seconds']} s{' (cached)' if ap.get('cached') else ''}")
    for c in ap["changed"]:
        print(f"  {c['path']}: {c['rules']}")
    print(f"  diff: {ap['diff']}")
    ic = data["import_check"]
    print(f"import check of changed modules: {ic['modules']} modules, {len(ic['broken'])} broken by the rewrite"
          + (f": {sorted(ic['broken'])}" if ic["broken"] else "")
          + (f"; failing before too: {ic['failing_before_too']}" if ic.get("failing_before_too") else ""))
    print()
    print("Break sites (left: in both; NEW: only after; gone: removed by the rewrite; up to 5 each):")
    for row in data["models"]:
        if row["status"] == "error":
            print(f"  {row['model']}: error: {(row.get('before', {}).get('error') or '?')[:300]}")
            continue
        before = row.get("before", {}).get("explain", {}).get("reasons") or []
        after = row.get("after", {}).get("explain", {}).get("reasons") or []
        if not before and not after:
            continue
        print(f"  {row['model']}:")
        before_keys = {_site_key(r) for r in before}
        after_keys = {_site_key(r) for r in after}
        for r in after[:5]:
            print(f"    {'left' if _site_key(r) in before_keys else 'NEW'}  : {fmt_reason(r)}")
        for r in [r for r in before if _site_key(r) not in after_keys][:5]:
            print(f"    gone  : {fmt_reason(r)}")
        if row.get("after", {}).get("error"):
            print(f"    AFTER ERROR: {row['after']['error'][:300]}")
        if row["status"] == "DIFFERS":
            print(f"    DIFFERS: outputs {row.get('outputs', {}).get('differing')}, "
                  f"grads {row.get('grads', {}).get('differing')}, logs equal {row.get('logs_equal')}")
    other_init = [r["model"] for r in data["models"] if r.get("after", {}).get("same_init") is False]
    if other_init:
        print(f"initialised differently after the rewrite (the before weights were loaded): {other_init}")
    print()
    v, m = data["versions"], data["machine"]
    print(f"transformers {v['transformers']}, torch {v['torch']}, python {v['python']}, fixitem {v['fixitem']}; "
          f"{m['platform']}, {m['cpus']} CPUs, {m['processor']}; jobs {data['jobs']}; "
          f"total {data['seconds']:.0f} s (install {data['timing']['install_s']:.0f} s, "
          f"apply {data['timing']['apply_s']:.0f} s, models {data['timing']['models_s']:.0f} s)")


# Causes of a graph-break site, for the table by cause (the four: item, tolist, branch, other;
# "other" split into dynamic-shape operators, logging and the rest).
CAUSES = ("item", "tolist", "branch", "dynamic shape", "logging", "other")
# Reasons Dynamo gives in addition to the break itself, at the same place ("Failed to handle graph
# break gracefully", ...): such a site takes the cause of another site on its line.
_SECONDARY = ("Failed to handle graph break gracefully", "Encountered graph break that we cannot resume",
              "Graph break in user code")


def _sum_causes(runs: list[list[dict[str, Any]]]) -> dict[str, int]:
    total = dict.fromkeys(CAUSES, 0)
    for reasons in runs:
        for cause, n in causes_of(reasons).items():
            total[cause] += n
    return total


def cause_of(site: dict[str, Any]) -> str:
    """The cause of one break site (a reason with its location and source line)."""
    text = f"{site.get('reason', '')} {site.get('code', '')}"
    if site.get("logging"):
        return "logging"
    if "tolist" in text:
        return "tolist"
    if "Tensor.item()" in text or ".item()" in text or "_local_scalar_dense" in text:
        return "item"
    if any(w in text for w in ("Data-dependent branching", "generic_jump", "Could not guard on data-dependent",
                               "Could not extract specialized integer")):
        return "branch"
    if "Dynamic shape operator" in text or "nonzero" in text or "masked_select" in text:
        return "dynamic shape"
    return "other"


def causes_of(reasons: list[dict[str, Any]]) -> dict[str, int]:
    """Break sites by cause; a secondary reason takes the cause of a primary one on its line."""
    primary: dict[str, str] = {}
    for r in reasons:
        if not any(r.get("reason", "").startswith(x) for x in _SECONDARY):
            primary.setdefault(r.get("location") or "", cause_of(r))
    counts = dict.fromkeys(CAUSES, 0)
    for r in reasons:
        secondary = any(r.get("reason", "").startswith(x) for x in _SECONDARY)
        cause = primary.get(r.get("location") or "", "other") if secondary else cause_of(r)
        counts[cause] += 1
    return counts


def config_reasons(row: dict[str, Any]) -> list[dict[str, Any]] | None:
    """The after run's break sites under the advised configuration (its default ones when nothing
    was advised); None when not measured."""
    after = row.get("after", {})
    if "explain_config" in after:
        return after["explain_config"].get("reasons") or []
    return None


def report_config(data: dict[str, Any]) -> None:
    """``--advised-config``: the break sites by cause before, after fixitem's fixes, and after its fixes
    under the configuration it advises; the compiled numerics; the sites left, with their reasons."""
    t = data["totals"]
    print()
    print("Break sites under the configuration fixitem advises (site c: after fixes + advised config; "
          "config outputs/grads: compiled under it against eager before):")
    rows = []
    for row in data["models"]:
        after = row.get("after", {})
        left = config_reasons(row)
        if left is None and not after.get("config_attempts"):
            continue
        rows.append([row["model"], fmt_int(_get(row, "before", "break_sites")), fmt_int(_get(row, "after", "break_sites")),
                     fmt_int(None if left is None else len(left)),
                     ",".join({"capture_scalar_outputs": "a", "capture_dynamic_output_shape_ops": "b"}[f]
                              for f in after.get("advised_flags") or []) or "-",
                     fmt_equal(row.get("config_outputs")), fmt_equal(row.get("config_grads")),
                     "does not compile under " + "+".join(
                         {"capture_scalar_outputs": "a", "capture_dynamic_output_shape_ops": "b"}[f]
                         for f in next(a["flags"] for a in after["config_attempts"] if a.get("error")))
                     if any(a.get("error") for a in after.get("config_attempts") or []) else ""])
    print_table(["model", "site b", "site a", "site c", "config", "config outputs", "config grads", "note"], rows)
    print("(config: a = capture_scalar_outputs, b = capture_dynamic_output_shape_ops)")
    print()
    print(f"Graph-break sites by cause ({t['measured']} models measured; the advised configuration was set for "
          f"{t['config_models']} of them):")
    four = ("item", "tolist", "branch")
    header = ["run", *four, "other", "(dynamic shape", "logging", "rest)", "total"]
    rows = []
    for label, key in (("before", "causes_before"), ("after fixes", "causes_after"),
                       ("after fixes + advised config", "causes_config")):
        c = t[key]
        other = c["dynamic shape"] + c["logging"] + c["other"]
        rows.append([label, *[str(c[k]) for k in four], str(other), str(c["dynamic shape"]), str(c["logging"]),
                     str(c["other"]), str(sum(c.values()))])
    print_table(header, rows)
    print(f"compiled under the advised configuration (backend eager, fullgraph=False) against eager before: outputs "
          f"equal {t['config_outputs_equal']}/{t['config_compared']}, gradients equal "
          f"{t['config_grads_equal']}/{t['config_compared']}; compile or run errors under it: {t['config_errors']}; "
          f"models the full advice does not compile (measured with less of it): {t['config_failed']}")
    print("Break sites left after fixes + advised configuration (model: flags; reason @ location | code):")
    for row in data["models"]:
        left = config_reasons(row)
        after = row.get("after", {})
        for attempt in after.get("config_attempts") or []:
            if attempt.get("error"):
                print(f"  {row['model']}: does not compile under {', '.join(attempt['flags'])} (measured with less): "
                      f"{attempt['error'][:160]}")
        if after.get("config_error"):
            print(f"  {row['model']}: ERROR under {after.get('advised_flags')}: {after['config_error'][:200]}")
        if not left:
            continue
        print(f"  {row['model']}: {', '.join(after.get('advised_flags') or []) or 'nothing advised'}")
        for r in left:
            print(f"    [{cause_of(r)}] {fmt_reason(r)} | {r.get('code', '')[:80]}")


def totals(rows: list[dict[str, Any]]) -> dict[str, Any]:
    measured = [r for r in rows if _get(r, "before", "breaks") is not None and _get(r, "after", "breaks") is not None]

    def s(version: str, key: str) -> int:
        return sum(_get(r, version, key) or 0 for r in measured)

    compared = [r for r in rows if r.get("outputs")]
    return {
        "models": len(rows),
        "measured": len(measured),
        "breaks_before": s("before", "breaks"), "breaks_after": s("after", "breaks"),
        "counter_before": s("before", "counter_breaks"), "counter_after": s("after", "counter_breaks"),
        "sites_before": s("before", "break_sites"), "sites_after": s("after", "break_sites"),
        "graphs_before": s("before", "graphs"), "graphs_after": s("after", "graphs"),
        "logging_lines_before": sum(logging_lines(r, "before") or 0 for r in measured),
        "logging_lines_after": sum(logging_lines(r, "after") or 0 for r in measured),
        "logging_events_before": s("before", "logging_events"), "logging_events_after": s("after", "logging_events"),
        "logging_models_before": sum(1 for r in measured if logging_lines(r, "before")),
        "logging_models_after": sum(1 for r in measured if logging_lines(r, "after")),
        "compared": len(compared),
        "outputs_equal": sum(1 for r in compared if r["outputs"]["equal"]),
        "outputs_exact": sum(1 for r in compared if r["outputs"]["exact"] == r["outputs"]["tensors"]),
        "grads_equal": sum(1 for r in compared if r["grads"]["equal"]),
        "logs_equal": sum(1 for r in compared if r.get("logs_equal")),
        "sites_config": sum(len(config_reasons(r) or []) for r in measured if config_reasons(r) is not None),
        "config_measured": sum(1 for r in measured if config_reasons(r) is not None),
        "config_models": sum(1 for r in measured if r.get("after", {}).get("advised_flags")),
        "config_compared": sum(1 for r in compared if r.get("config_outputs")),
        "config_outputs_equal": sum(1 for r in compared if (r.get("config_outputs") or {}).get("equal")),
        "config_grads_equal": sum(1 for r in compared if (r.get("config_grads") or {}).get("equal")),
        "config_errors": sum(1 for r in rows if r.get("after", {}).get("config_error")),
        "config_failed": sum(1 for r in rows if any(a.get("error") for a in r.get("after", {}).get("config_attempts") or [])),
        "causes_before": _sum_causes([r.get("before", {}).get("explain", {}).get("reasons") or [] for r in measured]),
        "causes_after": _sum_causes([r.get("after", {}).get("explain", {}).get("reasons") or [] for r in measured]),
        "causes_config": _sum_causes([config_reasons(r) or [] for r in measured if config_reasons(r) is not None]),
        "ok": sum(1 for r in rows if r["status"] == "ok"),
        "errors": sum(1 for r in rows if r["status"] == "error"),
        "broken_after": sum(1 for r in rows if r["status"] == "BROKEN AFTER"),
        "differing": sum(1 for r in rows if r["status"] == "DIFFERS"),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--unsafe", action="store_true", help="also apply fixitem's unsafe fixes")
    parser.add_argument("--advised-config", action="store_true",
                        help="also count the breaks of the rewritten code under the Dynamo configuration fixitem "
                        "advises for them (capture_scalar_outputs, capture_dynamic_output_shape_ops: FX006, FX601, "
                        "FX602), and compare its compiled outputs and gradients with the eager before run")
    parser.add_argument("--transformers", default=DEFAULT_VERSION, choices=list(PINS_BY_VERSION),
                        metavar="VERSION", help=f"transformers version: {', '.join(PINS_BY_VERSION)} "
                        f"(default {DEFAULT_VERSION})")
    parser.add_argument("--models", default=None,
                        help="comma-separated models or groups (default: the group 'default'; 'rewritten': models "
                        f"whose code fixitem rewrites; 'all'): {','.join(ALL_MODELS)}")
    parser.add_argument("--json", type=Path, default=None, help="write the results as JSON to this file")
    parser.add_argument("--jobs", type=int, default=None, help="models measured at once (default: min(2, CPUs))")
    parser.add_argument("--timeout", type=float, default=240.0, help="seconds per model subprocess (default 240)")
    parser.add_argument("--full-tree", action="store_true", help="rewrite the whole package (slow), not only "
                        "the core and the selected models")
    parser.add_argument("--no-cache", action="store_true", help="rewrite again even if a cached rewrite exists")
    parser.add_argument("--keep", type=Path, default=None, help="keep the per-model outputs in this folder")
    parser.add_argument("--report", type=Path, default=None, metavar="JSON",
                        help="print the report of a --json file written earlier (totals recomputed) and exit")
    # internal: subprocess modes
    parser.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--version", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--out", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--reference", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--import-check", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--advice", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        return worker(args)
    if args.import_check:
        return import_check(args)
    if args.report:
        data = json.loads(args.report.read_text())
        data["totals"] = totals(data["models"])
        report(data)
        return 0

    requested = [item.strip() for item in (args.models or "default").split(",") if item.strip()]
    dynamic = [item for item in requested if item in DYNAMIC_GROUPS]
    models: list[str] = []
    for item in requested:
        for m in GROUPS.get(item, [] if item in DYNAMIC_GROUPS else [item]):
            if m not in models:
                models.append(m)
        if item == "tiny":
            for m in [*MODELS, *WARNING_ONCE_MODELS, *VL_MODELS]:
                if m not in models:
                    models.append(m)
    unknown = [m for m in models if m not in ALL_MODELS and not m.startswith(AUTO_PREFIX)]
    if unknown or not (models or dynamic):
        parser.error(f"--models: unknown {unknown or models}; choose from the groups "
                     f"{','.join([*GROUPS, *DYNAMIC_GROUPS])} or {','.join(ALL_MODELS)}")
    jobs = args.jobs or max(1, min(2, os.cpu_count() or 1))
    t0 = time.perf_counter()
    try:
        site = ensure_site(args.transformers)
        if dynamic or any(m.startswith(AUTO_PREFIX) for m in models):
            auto = auto_causal_specs(site)
            ALL_MODELS.update(auto)
            for m in auto if dynamic else []:
                if m not in models:
                    models.append(m)
            unknown = [m for m in models if m not in ALL_MODELS]
            if unknown:
                parser.error(f"--models: unknown {unknown}")
    except (RuntimeError, OSError) as exc:
        log(f"error: {exc}")
        return 2
    t_install = time.perf_counter() - t0

    t1 = time.perf_counter()
    skipped = {m: why for m in models if (why := missing_in(site, m))}
    for m, why in skipped.items():
        log(f"skipping {m}: {why}")
    models = [m for m in models if m not in skipped]
    rewritten, apply_record = rewrite(site, models, args.unsafe, args.full_tree, not args.no_cache,
                                      args.transformers)
    t_apply = time.perf_counter() - t1

    work_ctx = tempfile.TemporaryDirectory(prefix="fixitem-hf-") if args.keep is None else None
    work = Path(work_ctx.name) if work_ctx else args.keep.resolve()
    work.mkdir(parents=True, exist_ok=True)
    try:
        t2 = time.perf_counter()
        imports = check_imports(apply_record["changed"], site, rewritten, work, args.timeout)
        log(f"measuring {len(models)} models, {jobs} at a time ...")
        rows: dict[str, dict[str, Any]] = {}
        with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
            advice = None
            if args.advised_config:
                advice = work / "advice.json"
                advice.write_text(json.dumps(apply_record.get("advice", {})))
            futures = {pool.submit(measure_model, m, site, rewritten, work, args.timeout, advice): m for m in models}
            for fut in concurrent.futures.as_completed(futures):
                m = futures[fut]
                try:
                    rows[m] = fut.result()
                except Exception as exc:  # noqa: BLE001 - a bug here must not lose the other rows
                    rows[m] = {"model": m, "status": "error", "before": {"error": f"{type(exc).__name__}: {exc}"}}
                log(f"  {m}: {rows[m]['status']} ({rows[m].get('seconds', '?')} s)")
        t_models = time.perf_counter() - t2
    finally:
        if work_ctx:
            work_ctx.cleanup()

    import torch

    import fixitem

    ordered = [rows[m] for m in models]
    data = {
        "mode": "unsafe" if args.unsafe else "safe",
        "advised_config": bool(args.advised_config),
        "versions": {"transformers": args.transformers, "torch": torch.__version__, "python": platform.python_version(),
                     "fixitem": getattr(fixitem, "__version__", "?")},
        "machine": {"platform": platform.platform(), "processor": platform.processor() or platform.machine(),
                    "cpus": os.cpu_count()},
        "jobs": jobs,
        "skipped": skipped,
        "seconds": round(time.perf_counter() - t0, 1),
        "timing": {"install_s": round(t_install, 1), "apply_s": round(t_apply, 1), "models_s": round(t_models, 1)},
        "apply": apply_record,
        "import_check": imports,
        "totals": totals(ordered),
        "models": ordered,
    }
    report(data)
    if args.json:
        args.json.write_text(json.dumps(data, indent=1, default=str))
        log(f"wrote {args.json}")
    t = data["totals"]
    bad = t["broken_after"] or t["differing"] or imports["broken"]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
