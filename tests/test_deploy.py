"""Rewritten code runs where users deploy it: apply names the files that now need the
runtime and where to declare it, and ``no-runtime`` keeps the runtime out of chosen files."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

import fixitem
from fixitem.cli import app
from fixitem.config import ConfigError, load_config
from fixitem.deploy import REQUIREMENT, imports_runtime, newly_imports_runtime
from fixitem.lsp import settings_for
from fixitem.verified import apply_verified

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "deploy"
RUNTIME_IMPORT = "from fixitem import runtime as deferred"


def _project(tmp_path: Path, name: str) -> Path:
    """A copy of a fixture project, at the top of its own repository."""
    root = tmp_path / name
    shutil.copytree(FIXTURES / name, root)
    (root / ".git").mkdir()
    return root


def test_apply_names_the_files_that_now_import_the_runtime_and_the_project_file_to_declare_it(tmp_path):
    root = _project(tmp_path, "library")
    result = fixitem.apply([root], cache=False)
    assert result.runtime is not None
    assert result.runtime.files == [root / "examples" / "train.py"]
    [manifest] = result.runtime.manifests
    assert (manifest.path, manifest.kind, manifest.listed) == (root / "pyproject.toml", "pyproject", False)
    assert manifest.line == f'"{REQUIREMENT}"'
    assert RUNTIME_IMPORT in (root / "examples" / "train.py").read_text()
    # Run again: nothing new imports the runtime, so nothing is said.
    assert fixitem.apply([root], cache=False).runtime is None


def test_no_runtime_keeps_deferral_out_of_its_files_with_findings_and_other_fixes(tmp_path):
    root = _project(tmp_path, "library")
    layers = root / "src" / "tinylib" / "layers.py"
    found = {f.rule: f for f in fixitem.scan([layers], cache=False).findings}
    assert found["FX201"].fix == "none" and "`no-runtime`" in found["FX201"].note
    assert found["FX103"].fix == "safe"
    result = fixitem.apply([root], cache=False)
    text = layers.read_text()
    assert "fixitem" not in text and 'print(f"step {step} loss {loss.item():.4f}")' in text
    assert "max(x.norm().item()" not in text  # FX103 fixed
    assert [f.rule for f in result.applied if f.path.endswith("layers.py")] == ["FX103"]
    left = [f for f in result.findings if f.path.endswith("layers.py")]
    assert [(f.rule, f.fix) for f in left] == [("FX201", "none")] and "`no-runtime`" in left[0].note


def test_the_no_runtime_argument_replaces_the_configured_globs(tmp_path):
    root = _project(tmp_path, "library")
    layers = root / "src" / "tinylib" / "layers.py"
    result = fixitem.apply([root], cache=False, no_runtime=[])
    assert RUNTIME_IMPORT in layers.read_text()
    assert sorted(p.name for p in result.runtime.files) == ["layers.py", "train.py"]
    other = _project(tmp_path / "again", "library")
    fixitem.apply([other], cache=False, no_runtime=[str(other / "examples")])
    assert "fixitem" not in (other / "examples" / "train.py").read_text()


def test_requirements_txt_is_found_and_development_requirements_left_out(tmp_path):
    root = _project(tmp_path, "scripts")
    result = fixitem.apply([root / "train.py"], cache=False)
    assert [(m.path.name, m.kind, m.listed) for m in result.runtime.manifests] == [
        ("requirements.txt", "requirements", False)]
    assert result.runtime.manifests[0].line == REQUIREMENT


def test_a_project_that_lists_the_runtime_is_told_so(tmp_path):
    root = _project(tmp_path, "scripts")
    with open(root / "requirements.txt", "a") as handle:
        handle.write("fixitem_runtime>=0.1  # deferred logging\n")
    result = fixitem.apply([root / "train.py"], cache=False)
    [manifest] = result.runtime.manifests
    assert manifest.listed
    assert "requirements.txt already lists it." in result.runtime.text()


def test_with_no_project_file_the_advice_is_to_install_it(tmp_path):
    root = tmp_path / "bare"
    root.mkdir()
    (root / ".git").mkdir()
    shutil.copy(FIXTURES / "scripts" / "train.py", root / "train.py")
    need = fixitem.apply([root], cache=False, isolated=True).runtime
    assert need.manifests == [] and f'pip install "{REQUIREMENT}"' in need.text()


def test_the_command_line_says_it_once_and_json_carries_it(tmp_path, monkeypatch):
    root = _project(tmp_path, "library")
    shutil.copy(root / "examples" / "train.py", root / "examples" / "eval.py")
    monkeypatch.chdir(root)
    runner = CliRunner()
    before = (root / "examples" / "train.py").read_text()
    diff = runner.invoke(app, ["apply", "--diff", "--no-cache", "."])
    assert diff.exit_code == 1
    assert (root / "examples" / "train.py").read_text() == before
    assert diff.stderr.count("would import fixitem.runtime") == 1
    assert "2 files would import fixitem.runtime: examples/eval.py, examples/train.py." in diff.stderr
    assert "[project] dependencies in pyproject.toml" in diff.stderr
    data = json.loads(runner.invoke(app, ["apply", "--format", "json", "--no-cache", "."]).stdout)
    assert data["runtime"]["files"] == [str(Path("examples/eval.py")), str(Path("examples/train.py"))]
    assert data["runtime"]["requirement"] == REQUIREMENT
    assert data["runtime"]["manifests"][0]["kind"] == "pyproject"
    again = runner.invoke(app, ["apply", "--no-cache", "."])
    assert "now import" not in again.stdout  # nothing newly imports it


def test_newly_imports_runtime_reads_added_import_lines():
    added = "--- a/x.py\n+++ b/x.py\n@@ -1 +1,2 @@\n import torch\n+from fixitem import runtime as deferred\n"
    assert newly_imports_runtime(added)
    assert not newly_imports_runtime("--- a/x.py\n+++ b/x.py\n@@ -1 +1 @@\n-x = a\n+x = b\n")
    moved = added + "-from fixitem import runtime as deferred\n"
    assert not newly_imports_runtime(moved)


def test_no_runtime_configuration_is_checked(tmp_path):
    config = tmp_path / "fixitem.toml"
    config.write_text('no-runtime = "src/"\n')
    with pytest.raises(ConfigError, match="no-runtime must be a list of strings"):
        load_config(config)
    config.write_text('no_runtime = ["src/"]\n')
    with pytest.raises(ConfigError, match="did you mean 'no-runtime'"):
        load_config(config)


def test_the_language_server_offers_no_deferral_in_no_runtime_files(tmp_path):
    root = _project(tmp_path, "library")
    assert settings_for(root / "src" / "tinylib" / "layers.py", None).runtime is False
    assert settings_for(root / "examples" / "train.py", None).runtime is True


def test_imports_runtime_reads_python_files_and_notebook_cells():
    assert imports_runtime("import torch\nfrom fixitem import runtime as deferred\n")
    assert not imports_runtime('x = "from fixitem import runtime"\n')
    cell = {"cell_type": "code", "metadata": {}, "outputs": [], "source": ["import torch\n", RUNTIME_IMPORT + "\n"]}
    notebook = json.dumps({"cells": [cell], "nbformat": 4, "nbformat_minor": 5, "metadata": {}})
    assert imports_runtime(notebook, notebook=True) and not imports_runtime(notebook)


@pytest.mark.slow
def test_apply_verify_run_names_the_files_its_kept_fixes_made_import_the_runtime(tmp_path):
    root = _project(tmp_path, "scripts")
    result = apply_verified([root / "train.py"], f"{sys.executable} train.py", cwd=root, isolated=True)
    assert result.final is not None and result.final.passed, result.gave_up
    assert result.runtime is not None and result.runtime.files == [root / "train.py"]
    assert [m.path.name for m in result.runtime.manifests] == ["requirements.txt"]


def test_the_cache_keeps_results_with_and_without_the_runtime_apart(tmp_path):
    root = _project(tmp_path, "library")
    layers = root / "src" / "tinylib" / "layers.py"
    cache = tmp_path / "cache"

    def deferral(**options):
        return next(f.fix for f in fixitem.scan([layers], cache=cache, **options).findings if f.rule == "FX201")

    assert deferral(no_runtime=[]) == "safe"
    assert deferral() == "none"
    assert deferral(no_runtime=[]) == "safe"
