"""``apply --verify-run``: a fix that changes what the command prints is found and reverted, the rest kept."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from fixitem import verified
from fixitem.verified import apply_verified

pytestmark = pytest.mark.slow

PLANTED = Path(__file__).resolve().parent.parent / "fixtures" / "run" / "planted.py"
COMMAND = f"{sys.executable} planted.py"


@pytest.fixture()
def script(tmp_path: Path) -> Path:
    shutil.copy(PLANTED, tmp_path / "planted.py")
    return tmp_path / "planted.py"


def test_the_fix_that_changes_the_numbers_is_reverted_and_the_others_kept(script):
    original = script.read_text()
    lines: list[str] = []
    result = apply_verified([script], COMMAND, cwd=script.parent, unsafe=True, isolated=True, log=lines.append)
    assert [f.finding.rule for f in result.reverted] == ["FX101"]
    assert "stdout differs" in " ".join(result.reverted[0].failures)
    assert "nan" in result.reverted[0].diff
    assert sorted(f.rule for _, f in result.kept) == ["FX201", "FX202"]
    assert result.final is not None and result.final.passed
    text = script.read_text()
    assert "if w.min().item() > 0:" in text  # the guilty fix is not in the file
    assert "deferred.Accumulator(0.0)" in text and text != original
    assert any("reverted FX101" in line for line in lines)


def test_a_file_is_restored_when_the_run_is_interrupted(script, monkeypatch):
    original = script.read_bytes()
    calls = {"n": 0}
    real = verified.run_command

    def interrupted(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 3:  # while the fixes are written (after the two reference runs)
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(verified, "run_command", interrupted)
    with pytest.raises(KeyboardInterrupt):
        apply_verified([script], COMMAND, cwd=script.parent, unsafe=True, isolated=True)
    assert script.read_bytes() == original


def test_nothing_to_fix_runs_nothing(tmp_path):
    quiet = tmp_path / "quiet.py"
    quiet.write_text("print('hello')\n")
    result = apply_verified([quiet], f"{sys.executable} quiet.py", cwd=tmp_path, isolated=True)
    assert result.runs == 0 and not result.kept and not result.reverted


def test_command_line_reports_kept_and_reverted_fixes(script):
    from typer.testing import CliRunner

    from fixitem.cli import app

    runner = CliRunner()
    result = runner.invoke(app, ["apply", "--verify-run", COMMAND, "--diff", str(script)])
    assert result.exit_code == 2 and "not with --diff" in result.stderr
    result = runner.invoke(app, ["apply", "--isolated", "--unsafe", "--verify-run", COMMAND,
                                 "--verify-cwd", str(script.parent), str(script)])
    assert result.exit_code == 0, result.output
    assert "reverted: " in result.stdout and "FX101" in result.stdout
    assert "fixed: " in result.stdout and "FX202" in result.stdout
    assert "run(s) of the check" in result.stdout


MODEL = Path(__file__).resolve().parent.parent / "fixtures" / "verify" / "planted_model.py"


def test_verify_factory_reverts_the_fix_that_changes_the_gradients(tmp_path):
    from fixitem.verified import apply_verified_model

    model = tmp_path / "model.py"
    shutil.copy(MODEL, model)
    result = apply_verified_model([model], "make", unsafe=True, isolated=True)
    assert [f.finding.rule for f in result.reverted] == ["FX101"]
    assert "gradients differ" in " ".join(result.reverted[0].failures)
    assert [f.rule for _, f in result.kept] == ["FX103"]
    text = model.read_text()
    assert "if h.min().item() > 0:" in text and "torch.clamp(h.std().detach(), min=0.5)" in text


def test_verify_factory_of_the_project_on_the_command_line(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from fixitem.cli import app

    (tmp_path / "checks").mkdir()
    shutil.copy(MODEL, tmp_path / "model.py")
    (tmp_path / "checks" / "factories.py").write_text("from model import make as make_model\n")
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["apply", "--isolated", "--unsafe", "--verify-factory",
                                      "checks/factories.py:make_model", "model.py"])
    assert result.exit_code == 0, result.output
    assert "reverted: " in result.stdout and "FX101" in result.stdout and "FX103" in result.stdout
    assert "if h.min().item() > 0:" in (tmp_path / "model.py").read_text()
    result = CliRunner().invoke(app, ["apply", "--verify-factory", "make", "--verify-run", "x", "model.py"])
    assert result.exit_code == 2 and "not both" in result.stderr


def test_a_command_that_varies_on_the_same_code_judges_no_fix(tmp_path):
    """An unseeded script prints another loss on each run: that is no fix's doing, and no
    fix can be judged by it; nothing is written, and the result says why."""
    script = tmp_path / "noisy.py"
    script.write_text(
        "import torch\n\n"
        "device = 'cuda' if torch.cuda.is_available() else 'cpu'\n"
        "x = torch.randn(8, device=device)\n"
        "if x.abs().max().item() > 1e9:\n"
        "    x = x * 0.5\n"
        "print(f'loss {x.sum().item():.6f}')\n"
    )
    original = script.read_bytes()
    result = apply_verified([script], f"{sys.executable} noisy.py", cwd=tmp_path, unsafe=True, isolated=True)
    assert script.read_bytes() == original
    assert not result.kept and not result.reverted and result.runs == 2
    assert "two runs of the unchanged code" in result.gave_up and "stdout differs" in result.gave_up
