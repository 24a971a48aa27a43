"""``verify --run`` trusts nothing a failed command says, and masks times and durations by default."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest
from fixitem.verify.run import (
    CommandRun,
    compare_runs,
    compile_masks,
    masked,
    verify_command_run,
)
from typer.testing import CliRunner

from fixitem.cli import app
from fixitem.verified import apply_verified

ROOT = Path(__file__).resolve().parent.parent
DURATIONS = ROOT / "fixtures" / "run_durations"
TRAIN = ROOT / "fixtures" / "run" / "train.py"


def _verify(*args: str):
    return CliRunner().invoke(app, ["verify", *args])


@pytest.mark.parametrize(
    ("command", "status", "says"),
    [("sh -c 'echo the data folder is missing >&2; exit 3'", "exit status 3", "the data folder is missing"),
     ("nosuchcmd", "exit status 127", "nosuchcmd: not found")],
    ids=["exit-3", "not-found"],
)
def test_a_failing_command_fails_the_profile_and_shows_its_stderr(tmp_path, command, status, says):
    result = _verify("--run", command, "--cwd", str(tmp_path))
    assert result.exit_code == 1, result.output
    assert f"FAILED: the command failed ({status})" in result.stdout
    assert "the command's stderr ends with:" in result.stdout and says in result.stdout
    data = json.loads(_verify("--run", command, "--cwd", str(tmp_path), "--format", "json").stdout)
    assert data["passed"] is False and status in data["failures"][0]
    assert says in data["command_run"]["stderr_tail"][-1]


def test_a_command_failing_the_same_way_before_and_after_fails(tmp_path):
    before, after = tmp_path / "before", tmp_path / "after"
    before.mkdir()
    after.mkdir()
    result = _verify("--run", "nosuchcmd", "--before", str(before), "--cwd", str(after))
    assert result.exit_code == 1, result.output
    assert "the before run failed (exit status 127)" in result.stdout
    assert "the after run failed (exit status 127)" in result.stdout
    assert "the before run's stderr ends with:" in result.stdout and "nosuchcmd: not found" in result.stdout
    assert "PASSED" not in result.stdout


def test_a_run_killed_by_a_signal_fails_with_the_signal_named():
    ok = CommandRun("before", ".", 0, "x\n", "", 0.1)
    killed = CommandRun("after", ".", -9, "x\n", "", 0.1)
    comparison = compare_runs("train", ok, killed)
    assert "the after run was killed by signal 9, with nothing on stderr" in comparison.failures


def test_apply_verify_run_judges_no_fix_by_a_command_that_fails(tmp_path):
    script = tmp_path / "train.py"
    shutil.copy(TRAIN, script)
    original = script.read_bytes()
    result = apply_verified([script], "nosuchcmd", cwd=tmp_path, isolated=True)
    assert script.read_bytes() == original and not result.kept
    assert result.gave_up.startswith("the command fails on the unchanged code, so it cannot judge a fix")
    assert "nosuchcmd: not found" in result.gave_up


@pytest.mark.parametrize(
    ("one", "two"),
    [("Iteration dur (s): 5.2e-05", "Iteration dur (s): 3.9e-05"),
     ("Elapsed Time: 1.2", "Elapsed Time: 1.5"),
     ("{'time_per_epoch': [2.8, 3.1]}", "{'time_per_epoch': [2.6, 3.4]}"),
     ("step_time=0.31", "step_time=0.29"),
     ("time per step: 0.12", "time per step: 0.2"),
     ("latency (ms): 0.75", "latency (ms): 0.5"),
     ("duration: 3", "duration: 4"),
     ("epoch 1 took 1.25 s", "epoch 1 took 3 s"),
     ("12.5ms/step", "9ms/step"),
     ("09:00:01 started", "09:00:07 started"),
     ("  2/4 [00:01, 12.50it/s] ", "  2/4 [00:02,  9.80it/s]"),
     ('File "/x/train.py", line 12, in <module>', 'File "/x/train.py", line 13, in <module>'),
     ("train.py:12: UserWarning: w", "train.py:13: UserWarning: w")],
)
def test_times_and_durations_are_masked_by_default(one, two):
    masks = compile_masks([])
    assert masked(one, masks) == masked(two, masks)
    assert masked(one, compile_masks([], default_masks=False)) == one


@pytest.mark.parametrize(
    "text",
    ["loss 0.25", "Accuracy: 9/64 (14.06%)", "procedure: 5", "lr=0.1", "step 3 total 14", "durable: 2",
     "tokens: 512", "2 samples"],
)
def test_the_numbers_a_program_computes_are_not_masked(text):
    assert masked(text, compile_masks([])) == text


@pytest.mark.slow
def test_raw_durations_pass_by_default_and_fail_without_the_default_masks():
    command = f"{sys.executable} train.py"
    before, after = DURATIONS / "before", DURATIONS / "after"
    result = verify_command_run(command, cwd=after, before_dir=before, timeout=120)
    assert result.passed, (result.failures, result.differences)
    plain = verify_command_run(command, cwd=after, before_dir=before, timeout=120, default_masks=False)
    assert plain.failures == ["stdout differs (first at line 4)"]
    cli = _verify("--run", command, "--before", str(before), "--cwd", str(after), "--no-default-masks")
    assert cli.exit_code == 1 and "stdout differs" in cli.stdout
    cli = _verify("--run", command, "--before", str(before), "--cwd", str(after))
    assert cli.exit_code == 0, cli.stdout


@pytest.mark.slow
def test_apply_verify_run_masks_durations_by_default_and_can_be_told_not_to(tmp_path, monkeypatch):
    script = tmp_path / "timed_train.py"
    shutil.copy(DURATIONS / "timed_train.py", script)
    command = f"{sys.executable} timed_train.py"
    result = apply_verified([script], command, cwd=tmp_path, isolated=True)
    assert result.final is not None and result.final.passed, result.gave_up
    assert [f.rule for _, f in result.kept] == ["FX201"]
    shutil.copy(DURATIONS / "timed_train.py", script)
    original = script.read_bytes()
    plain = apply_verified([script], command, cwd=tmp_path, isolated=True, default_masks=False)
    assert not plain.kept and "two runs of the unchanged code" in plain.gave_up
    assert script.read_bytes() == original
    monkeypatch.chdir(tmp_path)
    cli = CliRunner().invoke(app, ["apply", "--isolated", "--verify-run", command, "--verify-no-default-masks",
                                   "timed_train.py"])
    assert cli.exit_code == 0 and "no fix kept" in cli.stdout and script.read_bytes() == original
