"""``fixitem verify --run``: real scripts run before and after, compared from outside and inside."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest
import typer
from conftest import commit_tree
from fixitem.verify.command import verify_command
from fixitem.verify.errors import UsageError
from fixitem.verify.run import (
    compile_masks,
    masked,
    profile_command,
    verify_command_run,
)
from typer.testing import CliRunner

pytestmark = pytest.mark.slow

SCRIPT = Path(__file__).resolve().parent.parent / "fixtures" / "run" / "train.py"
COMMAND = f"{sys.executable} train.py"

# A faithful rewrite, written as fixitem's runtime is meant to be used.
FAITHFUL = {
    "import torch\n": "import torch\nfrom fixitem import runtime as deferred\n",
    "total = 0.0\n": "total = deferred.Accumulator(0.0)\n",
    "    total += loss.item()\n": "    total += loss.detach()\n",
    '    print(f"step {step} loss {loss.item():.4f}")\n':
        '    deferred.record(lambda step, loss: print(f"step {step} loss {loss:.4f}"), step, loss)\n',
    "{total / 6:.4f}": "{total.value() / 6:.4f}",
}


@pytest.fixture()
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    shutil.copy(SCRIPT, root / "train.py")
    return commit_tree(root)


def _rewrite(root: Path, replacements: dict[str, str]) -> None:
    path = root / "train.py"
    text = path.read_text()
    for old, new in replacements.items():
        assert old in text, old
        text = text.replace(old, new)
    path.write_text(text)


def test_faithful_rewrite_passes_with_fewer_syncs(repo):
    _rewrite(repo, FAITHFUL)
    result = verify_command_run(COMMAND, cwd=repo, before_ref="HEAD", timeout=120)
    assert result.passed, result.failures
    assert result.before.stdout == result.after.stdout and "step 5 loss" in result.after.stdout
    assert result.before.sync_count == 12  # .item() twice per step, 6 steps
    assert result.after.sync_count < result.before.sync_count
    lines = {(Path(s.file).name, s.line): s.count for s in result.before.syncs if s.kind == "item"}
    assert lines == {("train.py", 20): 6, ("train.py", 21): 6}


def test_what_fixitem_apply_writes_passes(repo):
    import fixitem

    fixitem.apply([repo / "train.py"], isolated=True, cache=False)
    result = verify_command_run(COMMAND, cwd=repo, before_ref="HEAD", timeout=120)
    assert result.passed, (result.failures, result.differences)


@pytest.mark.parametrize(
    ("planted", "failure"),
    [
        # the start-up line moved after the training output
        ({'print("training", sum(p.numel() for p in model.parameters()), "parameters")\n': "",
          'print(f"mean loss': 'print("training", sum(p.numel() for p in model.parameters()), "parameters")\n'
                               'print(f"mean loss'}, "stdout differs (first at line 1)"),
        ({"lr=0.1)": "lr=0.11)"}, "stdout differs (first at line 3)"),
        ({"    opt.step()\n": "    opt.step()\n    assert step < 3\n"}, "exit status: 0 before, 1 after"),
        ({"    opt.step()\n": "    opt.step()\n    _ = float(loss)\n"}, "host syncs: 18 after, more than 12 before"),
    ],
    ids=["reordered", "changed-number", "crash", "added-sync"],
)
def test_planted_changes_fail_with_the_right_message(repo, planted, failure):
    _rewrite(repo, planted)
    result = verify_command_run(COMMAND, cwd=repo, before_ref="HEAD", timeout=120)
    assert not result.passed
    assert failure in result.failures, result.failures
    if failure.startswith("stdout"):
        stream, diff = result.differences[0]
        assert stream == "stdout" and diff.startswith("--- before/stdout")
    if failure.startswith("exit"):
        assert "stderr differs" in " ".join(result.failures)  # the traceback
        assert any("AssertionError" in d for _, d in result.differences)


def test_profile_lists_the_lines_that_read_tensor_values(tmp_path):
    shutil.copy(SCRIPT, tmp_path / "train.py")
    profile = profile_command(COMMAND, cwd=tmp_path, timeout=120)
    assert profile.run.returncode == 0
    rows = [(Path(s.file).name, s.line, s.kind, s.count) for s in profile.user_lines]
    assert rows == [("train.py", 20, "item", 6), ("train.py", 21, "item", 6)]
    by_line = {s.line: s for s in profile.user_lines}
    assert by_line[20].code == "total += loss.item()"
    assert by_line[20].fixable.startswith("FX202")


def test_masks_hide_what_differs_between_runs():
    masks = compile_masks([r"run-\d+"])
    text = "2026-12-01 10:00:01,123 step 3 took 12.5ms (80.1 it/s) at 0x7f3a2b1c9d40 in run-17 [00:01<00:02"
    assert masked(text, masks) == "<timestamp> step 3 took <duration> (<rate>) at <address> in <mask1> <elapsed>"
    assert masked("loss 0.25", masks) == "loss 0.25"  # numbers of the program are kept


def test_before_folder_and_usage_errors(tmp_path):
    before = tmp_path / "before"
    after = tmp_path / "after"
    for folder in (before, after):
        folder.mkdir()
        shutil.copy(SCRIPT, folder / "train.py")
    result = verify_command_run(COMMAND, cwd=after, before_dir=before, timeout=120)
    assert result.passed, result.failures
    with pytest.raises(UsageError, match="exactly one"):
        verify_command_run(COMMAND, cwd=after)
    with pytest.raises(UsageError, match="not a regular expression"):
        verify_command_run(COMMAND, cwd=after, before_dir=before, masks=["("])


def test_command_line_json_and_exit_status(repo):
    app = typer.Typer()
    app.command("verify")(verify_command)
    app.command("noop")(lambda: None)
    runner = CliRunner()
    _rewrite(repo, {"lr=0.1)": "lr=0.11)"})
    result = runner.invoke(app, ["verify", "--run", COMMAND, "--before-ref", "HEAD", "--cwd", str(repo),
                                 "--format", "json", "--timeout", "120"])
    assert result.exit_code == 1, result.output
    data = json.loads(result.stdout)
    assert data["passed"] is False and data["differences"][0]["stream"] == "stdout"
    assert data["before"]["host_syncs"] == 12
    result = runner.invoke(app, ["verify", "--run", COMMAND, "--cwd", str(repo), "--env", "NOEQUALS"])
    assert result.exit_code == 2 and "KEY=VALUE" in result.stderr
    result = runner.invoke(app, ["verify", "--run", COMMAND, "--cwd", str(repo)])
    assert result.exit_code == 0 and "Lines that read tensor values" in result.stdout


def test_a_check_run_never_runs_the_bytecode_of_a_file_as_it_was(tmp_path):
    from fixitem.verify.run import run_command

    # Two versions of a module of the same size, written within the same second: Python's
    # bytecode cache (source mtime in seconds, and size) cannot tell them apart.
    (tmp_path / "m.py").write_text("X = 'before'\n")
    command = f'"{sys.executable}" -c "import m; print(m.X)"'
    first = run_command(command, tmp_path, "first")
    (tmp_path / "m.py").write_text("X = 'after!'\n")
    second = run_command(command, tmp_path, "second")
    assert (first.stdout.strip(), second.stdout.strip()) == ("before", "after!")
    assert not (tmp_path / "__pycache__").exists()
