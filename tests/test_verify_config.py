"""`fixitem verify --config`: code checked under the Dynamo configuration a finding names. It
counts the breaks with and without it, says which sites it removed, compares the compiled
results with the eager ones, and never counts a remaining host sync as removed."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest
from conftest import FIXTURES, ROOT
from fixitem.verify import run_verify
from fixitem.verify.dynamo_config import parse_config
from fixitem.verify.errors import UsageError
from fixitem.verify.run import without_dynamo_messages

SIZES = FIXTURES / "data_dependent" / "sizes.py"
TRAIN = FIXTURES / "data_dependent" / "train.py"
FLAGS = ("capture_scalar_outputs", "capture_dynamic_output_shape_ops")


def test_config_names_are_checked():
    assert parse_config(["capture_scalar_outputs,torch._dynamo.config.capture_dynamic_output_shape_ops"]) == FLAGS
    assert parse_config(None) == ()
    with pytest.raises(UsageError, match="not a boolean setting"):
        parse_config(["capture_everything"])


def test_model_under_the_configuration_proves_the_sites_and_keeps_the_syncs():
    report = run_verify(SIZES, before=SIZES, factory="make", backend="eager", config=FLAGS)
    assert report.passed, report.failures
    b, a = report.before, report.after
    assert a.graph_breaks >= 4 and a.config_graph_breaks == 0
    assert {gb.line for gb in report.proved} == {19, 21, 22, 23}
    # The syncs are the same before and after, and said to remain.
    assert a.syncs_per_call == b.syncs_per_call == 3
    assert any("host syncs remain" in n for n in report.notes)
    assert report.config_inputs and all(r.status == "equal" and r.compared_grads for r in report.config_inputs)
    data = json.loads(report.to_json())
    assert data["config"] == list(FLAGS) and len(data["proved"]) == len(report.proved)


def test_without_the_configuration_the_same_model_fails_on_its_breaks():
    report = run_verify(SIZES, before=SIZES, factory="make", backend="eager")
    assert not report.passed
    assert any(f.startswith("graph breaks") for f in report.failures)
    assert any(f.startswith("syncs") for f in report.failures)


def test_too_little_configuration_leaves_the_mask_break():
    report = run_verify(SIZES, before=SIZES, factory="make", backend="eager", config=FLAGS[:1])
    assert not report.passed
    assert [gb.line for gb in report.after.config_breaks] == [23]


def test_dynamo_messages_are_not_the_programs_output():
    text = ("step 0\n"
            "W1202 17:46:20.646000 7184 torch/_dynamo/variables/tensor.py:1759] [0/0] Graph break from `Tensor.item()`\n"
            "/x/torch/_dynamo/variables/functions.py:2431: UserWarning: Dynamo does not know how to trace\n"
            "If it is a Python builtin, please file an issue\n"
            "  torch._dynamo.utils.warn_once(explanation)\n"
            "step 1\n")
    assert without_dynamo_messages(text) == "step 0\nstep 1\n"


@pytest.mark.slow
def test_run_under_the_configuration_alone(tmp_path):
    """`verify --run CMD --config ...` without a before tree: the same script, run without and then with the
    configuration. Same output, the break sites gone, and the host syncs not said to be fewer."""
    shutil.copyfile(TRAIN, tmp_path / "train.py")
    proc = subprocess.run(
        [sys.executable, "-m", "fixitem", "verify", "--run", f"{sys.executable} train.py", "--config",
         ",".join(FLAGS), "--cwd", str(tmp_path), "--format", "json"],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )
    data = json.loads(proc.stdout)
    assert proc.returncode == 0, (data["failures"], proc.stderr[-2000:])
    assert data["config"] == list(FLAGS)
    assert data["before"]["graph_breaks"] >= 3 and data["after"]["graph_breaks"] == 0
    assert {b["line"] for b in data["proved"]} >= {20, 22, 23}
    assert data["after"]["host_syncs"] >= data["before"]["host_syncs"]
