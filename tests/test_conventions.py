"""Conventions of Python tooling: --version, one error class, one copy of each module."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from typer.testing import CliRunner

import fixitem
from fixitem.cli import app

ROOT = Path(__file__).resolve().parent.parent


def test_version_flag():
    result = CliRunner().invoke(app, ["--version"])
    assert result.exit_code == 0
    assert result.stdout.strip() == f"fixitem {fixitem.__version__}"


def test_one_usage_error_for_scan_apply_and_verify():
    import fixitem.verify
    from fixitem.verify.git import GitError

    assert fixitem.UsageError is fixitem.verify.UsageError
    assert issubclass(GitError, fixitem.UsageError)
    error = fixitem.UsageError("factory not found", "Traceback ...")
    assert error.message == "factory not found" and str(error) == "factory not found\nTraceback ..."


def test_folder_names_import_the_installed_modules_not_copies():
    # From the repository root, `codemods` and `verify` are importable by their folder names too.
    code = (
        "import codemods.rule, fixitem.codemods.rule, codemods.rules.where_if, fixitem.codemods.rules.where_if\n"
        "import verify.run, fixitem.verify.run\n"
        "assert codemods.rule.Rule is fixitem.codemods.rule.Rule\n"
        "assert codemods.rules.where_if is fixitem.codemods.rules.where_if\n"
        "assert verify.run.compare_runs is fixitem.verify.run.compare_runs\n"
        "print('one copy')\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "one copy"


def test_exclude_on_the_command_line_matches_like_the_configured_glob(tmp_path, monkeypatch):
    for rel in ("src/model.py", "src/legacy/old.py", "src/legacy/deep/older.py"):
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("import torch\n\ndef f(x: torch.Tensor):\n    return x.sum().item()\n")
    monkeypatch.chdir(tmp_path)
    names = lambda result: sorted(r.path.as_posix() for r in result.files)  # noqa: E731
    # A folder named relative to the current folder, walked from below it: the same answer as configured.
    assert names(fixitem.scan(["src"], exclude=["src/legacy"], isolated=True, cache=False)) == ["src/model.py"]
    assert names(fixitem.scan(["."], exclude=["legacy"], isolated=True, cache=False)) == ["src/model.py"]
    (tmp_path / "pyproject.toml").write_text('[tool.fixitem]\nexclude = ["src/legacy"]\n')
    assert names(fixitem.scan(["src"], cache=False)) == ["src/model.py"]
    # Named explicitly (as pre-commit names files), an excluded file is still skipped.
    assert names(fixitem.scan(["src/legacy/old.py"], exclude=["src/legacy"], isolated=True, cache=False)) == []


def test_one_file_result_for_the_engine_and_the_api():
    from fixitem.codemods.driver import engine

    from fixitem import api

    assert api.FileResult is engine.FileResult is fixitem.FileResult
    assert not hasattr(engine, "FileOutcome")
