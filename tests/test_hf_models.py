"""bench/hf_models.py on a few real Hugging Face transformers models.

Opt-in: runs only with ``FIXITEM_NETWORK_TESTS=1`` (it installs the pinned
``transformers==5.24.0`` and its dependencies into ``~/.cache/fixitem-bench``
and takes a few minutes), and is skipped when that install fails (offline)::

    FIXITEM_NETWORK_TESTS=1 python -m pytest -s -m network tests/test_hf_models.py

``-s`` shows the table.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [
    pytest.mark.network,
    pytest.mark.slow,
    pytest.mark.skipif(os.environ.get("FIXITEM_NETWORK_TESTS") != "1",
                       reason="installs transformers: set FIXITEM_NETWORK_TESTS=1 to run"),
]

ROOT = Path(__file__).resolve().parents[1]
# gpt2: a graph break left (a logger call in a property); bart: a logger call in
# forward that the safe fixes defer; bert: no break at all.
MODELS = ["bert", "gpt2", "bart"]


def run_bench(tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess, dict]:
    """bench/hf_models.py with ``args``: the process and its JSON report (skips when offline)."""
    out = tmp_path / "hf.json"
    proc = subprocess.run(
        [sys.executable, "bench/hf_models.py", *args, "--json", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=1200,
    )
    print(proc.stdout)
    if proc.returncode == 2 and "pip install --target failed" in proc.stderr:
        pytest.skip(f"installing transformers failed (offline?): {proc.stderr.strip()[-300:]}")
    assert out.is_file(), proc.stderr[-3000:]
    return proc, json.loads(out.read_text())


def test_hf_models_keep_outputs_and_do_not_add_breaks(tmp_path):
    proc, data = run_bench(tmp_path, "--models", ",".join(MODELS))
    assert data["import_check"]["broken"] == {}, data["import_check"]
    rows = {row["model"]: row for row in data["models"]}
    assert sorted(rows) == sorted(MODELS)
    for name, row in rows.items():
        assert row["status"] == "ok", (name, row["status"], row.get("before", {}).get("error"),
                                       row.get("after", {}).get("error"), row.get("outputs"), row.get("grads"))
        before, after = row["before"]["explain"], row["after"]["explain"]
        assert after["breaks"] <= before["breaks"], name
        assert after["counter_breaks"] <= before["counter_breaks"], name
        assert row["outputs"]["equal"] and row["grads"]["equal"] and row["loss"]["equal"], name
        assert row["logs_equal"], name
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "TOTAL" in proc.stdout and "transformers 5.24.0" in proc.stdout


@pytest.mark.parametrize("version", ["5.24.0", "4.52.4"])
def test_hf_models_warning_once_in_forward_no_longer_breaks(tmp_path, version):
    """The models whose forward calls `logger.warning_once`: after the safe fixes no break is a logging
    break there any more, and outputs, gradients and the warning text stay the same."""
    proc, data = run_bench(tmp_path, "--transformers", version, "--models", "warning_once")
    assert data["versions"]["transformers"] == version
    assert data["totals"]["logging_lines_before"] >= len(data["models"]) > 0
    assert data["totals"]["logging_lines_after"] == 0
    for row in data["models"]:
        assert row["status"] == "ok", (row["model"], row["status"])
        assert row["before"]["eager_logs"] and row["logs_equal"], row["model"]
        assert row["after"]["explain"]["counter_breaks"] < row["before"]["explain"]["counter_breaks"], row["model"]
    assert proc.returncode == 0, proc.stderr[-3000:]


def test_hf_models_under_the_advised_configuration(tmp_path):
    """--advised-config: the breaks of a MoE model's `.tolist()` split sizes and of electra's `nonzero` go
    under the configuration fixitem advises for them, with equal outputs and gradients."""
    proc, data = run_bench(tmp_path, "--models", "causal:jetmoe,electra", "--advised-config")
    assert data["advised_config"] is True
    for row in data["models"]:
        assert row["status"] == "ok", (row["model"], row["status"])
        after = row["after"]
        assert after["advised_flags"], row["model"]
        assert after["explain_config"]["break_sites"] == 0, after["explain_config"]["reasons"]
        assert row["config_outputs"]["equal"] and row["config_grads"]["equal"], row["model"]
    assert data["totals"]["causes_config"] == dict.fromkeys(data["totals"]["causes_config"], 0)
    assert "Graph-break sites by cause" in proc.stdout
