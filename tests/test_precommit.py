"""The pre-commit hooks of .pre-commit-hooks.yaml, run by pre-commit in a
temporary git repository.

The hooks themselves are `language: python`: pre-commit would build a virtual
environment and install fixitem - and torch - into it. The test runs the same
entries as `repo: local` hooks with `language: system`, using the fixitem
installed here. Skipped when pre-commit or git is not installed.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT

yaml = pytest.importorskip("yaml", reason="PyYAML is not installed")

HOOKS_FILE = ROOT / ".pre-commit-hooks.yaml"
SYNC = ("import torch\nfrom torch import nn\n\n\nclass Norm(nn.Module):\n"
        "    def forward(self, y):\n        return y / max(y.norm().item(), 1.0)\n")


def hooks() -> dict[str, dict]:
    return {hook["id"]: hook for hook in yaml.safe_load(HOOKS_FILE.read_text(encoding="utf-8"))}


def test_hooks_file_declares_both_hooks():
    found = hooks()
    assert set(found) == {"fixitem-scan", "fixitem-apply"}
    assert found["fixitem-scan"]["entry"] == "fixitem scan"
    assert found["fixitem-apply"]["entry"] == "fixitem apply"
    for hook in found.values():
        assert hook["language"] == "python"
        assert hook["types_or"] == ["python", "jupyter"]
        assert hook["name"] and hook["description"]


def _pre_commit() -> list[str]:
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    if shutil.which("fixitem") is None:
        pytest.skip("the fixitem command is not on PATH (pip install -e .)")
    try:
        import pre_commit  # noqa: F401
    except ImportError:
        pytest.skip("pre-commit is not installed (pip install pre-commit)")
    return [sys.executable, "-m", "pre_commit"]


def _repo(tmp_path: Path, hook_ids: list[str]) -> tuple[Path, dict[str, str]]:
    repo = tmp_path / "repo"
    repo.mkdir()
    env = {**os.environ, "PRE_COMMIT_HOME": str(tmp_path / "cache"), "GIT_CONFIG_NOSYSTEM": "1",
           "HOME": str(tmp_path), "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com",
           # The fixitem command of this interpreter's environment (this checkout), not another one on PATH.
           "PATH": str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", "")}
    local = []
    for hook_id in hook_ids:
        hook = dict(hooks()[hook_id])
        hook["language"] = "system"  # fixitem and torch are already installed here
        local.append(hook)
    config = {"repos": [{"repo": "local", "hooks": local}]}
    (repo / ".pre-commit-config.yaml").write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    (repo / "model.py").write_text(SYNC, encoding="utf-8")
    (repo / "clean.py").write_text("import torch\n\n\ndef g(x):\n    return x * 2\n", encoding="utf-8")
    (repo / "notes.txt").write_text("x.item()\n", encoding="utf-8")
    (repo / "rescale.ipynb").write_bytes((ROOT / "fixtures" / "notebooks" / "rescale.ipynb").read_bytes())
    subprocess.run(["git", "init", "-q"], cwd=repo, env=env, check=True)
    subprocess.run(["git", "add", "."], cwd=repo, env=env, check=True)
    return repo, env


@pytest.mark.slow
def test_scan_hook_fails_on_a_sync(tmp_path):
    cmd = _pre_commit()
    repo, env = _repo(tmp_path, ["fixitem-scan"])
    run = subprocess.run([*cmd, "run", "--all-files", "--color=never"], cwd=repo, env=env,
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 1, run.stdout + run.stderr
    assert "fixitem scan" in run.stdout and "Failed" in run.stdout
    assert "model.py:7:" in run.stdout and "FX103" in run.stdout
    assert "notes.txt" not in run.stdout  # types_or: [python, jupyter]
    assert "rescale.ipynb:cell 5:1:1: FX101" in run.stdout
    assert (repo / "model.py").read_text(encoding="utf-8") == SYNC  # scan writes nothing

    # Once fixed, the hook passes.
    (repo / "rescale.ipynb").unlink()
    (repo / "model.py").write_text("import torch\n\n\ndef f(x):\n    return x * 2\n", encoding="utf-8")
    run = subprocess.run([*cmd, "run", "--all-files", "--color=never"], cwd=repo, env=env,
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "Passed" in run.stdout


@pytest.mark.slow
def test_apply_hook_rewrites_and_fails_for_review(tmp_path):
    cmd = _pre_commit()
    repo, env = _repo(tmp_path, ["fixitem-apply"])
    run = subprocess.run([*cmd, "run", "--all-files", "--color=never"], cwd=repo, env=env,
                         capture_output=True, text=True, timeout=300)
    # The hook exits 0, but it modified a file: pre-commit fails so the user reviews.
    assert run.returncode == 1, run.stdout + run.stderr
    assert "files were modified by this hook" in run.stdout
    rewritten = (repo / "model.py").read_text(encoding="utf-8")
    assert "torch.clamp(y.norm().detach(), min=1.0)" in rewritten
    assert ".item()" not in rewritten
    assert (repo / "notes.txt").read_text(encoding="utf-8") == "x.item()\n"
    assert "torch.where(" in (repo / "rescale.ipynb").read_text(encoding="utf-8")

    # A second run has nothing left to change: it passes.
    run = subprocess.run([*cmd, "run", "--all-files", "--color=never"], cwd=repo, env=env,
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
