"""``verify_command`` through typer's CliRunner: exit codes, JSON, git refs, errors."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
import typer
from conftest import commit_tree
from fixitem.verify.command import verify_command
from typer.testing import CliRunner

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "verify"
GOOD_BEFORE = str(FIXTURES / "good_before.py")


@pytest.fixture(scope="module")
def app() -> typer.Typer:
    app = typer.Typer()
    app.command("verify")(verify_command)

    @app.command("noop")
    def noop() -> None:  # a second command, so "verify" is a subcommand as in the real CLI
        pass

    return app


@pytest.fixture()
def invoke(app):
    runner = CliRunner()

    def run(*args: str):
        return runner.invoke(app, ["verify", *args])

    return run


def test_passing_rewrite_exits_0_with_text_table(invoke):
    result = invoke(str(FIXTURES / "good_after.py"), "--before", GOOD_BEFORE, "--backend", "eager")
    assert result.exit_code == 0, result.output
    assert "graph breaks" in result.stdout
    assert "PASSED" in result.stdout
    assert "before" in result.stdout and "after" in result.stdout


def test_failing_rewrite_exits_1_naming_the_check(invoke):
    result = invoke(str(FIXTURES / "wrong_print_after.py"), "--before", GOOD_BEFORE, "--backend", "eager")
    assert result.exit_code == 1, result.output
    assert "FAILED" in result.stdout
    assert "graph breaks: the after version has 1 graph break(s)" in " ".join(result.stdout.split())
    assert "forward (3, 4)" not in result.stdout  # the user's print output is not mixed into the report


def test_json_output(invoke):
    result = invoke(str(FIXTURES / "wrong_item_after.py"), "--before", GOOD_BEFORE, "--backend", "eager",
                    "--format", "json")
    assert result.exit_code == 1, result.output
    data = json.loads(result.stdout)
    assert data["passed"] is False
    assert data["before"]["graph_breaks"] == 2 and data["before"]["syncs_per_call"] == 2
    assert data["after"]["compiled_scalar_reads"] == 1 and data["after"]["syncs_per_call"] == 1
    assert data["equivalent"] is True
    assert any(f.startswith("syncs:") for f in data["failures"])
    assert isinstance(data["conditions"], list)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["missing_after.py", "--before", GOOD_BEFORE], "after file not found"),
        ([str(FIXTURES / "good_after.py"), "--before", "missing_before.py"], "before file not found"),
        ([str(FIXTURES / "good_after.py"), "--before", GOOD_BEFORE, "--factory", "build"], "factory 'build' not found"),
        ([str(FIXTURES / "good_after.py"), "--before", GOOD_BEFORE, "--device", "tpu"], "--device"),
        ([str(FIXTURES / "good_after.py"), "--before", GOOD_BEFORE, "--format", "xml"], "--format"),
        ([str(FIXTURES / "good_after.py")], "missing the before version"),
        ([str(FIXTURES / "good_after.py"), "--before", GOOD_BEFORE, "--before-ref", "HEAD"], "not both"),
    ],
)
def test_usage_errors_exit_2(invoke, args, message):
    result = invoke(*args)
    assert result.exit_code == 2, result.output
    assert message in " ".join(result.stderr.split())


def test_import_error_shows_the_users_traceback(invoke):
    result = invoke(str(FIXTURES / "broken_import_after.py"), "--before", GOOD_BEFORE, "--backend", "eager")
    assert result.exit_code == 2, result.output
    err = result.stderr
    assert "Traceback (most recent call last)" in err
    assert 'broken_import_after.py", line 10, in <module>' in err
    assert "in _load_settings" in err
    assert "RuntimeError: settings file is missing" in err
    assert "importlib" not in err  # the traceback starts at the user's code


@pytest.fixture()
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / "pkg").mkdir(parents=True)
    shutil.copy(FIXTURES / "sibling" / "before" / "model.py", root / "pkg" / "model.py")
    shutil.copy(FIXTURES / "sibling" / "after" / "helpers.py", root / "pkg" / "helpers.py")
    commit_tree(root)
    # The rewrite, not committed yet.
    shutil.copy(FIXTURES / "sibling" / "after" / "model.py", root / "pkg" / "model.py")
    return root


def test_before_ref_reads_the_committed_version(invoke, repo):
    result = invoke(str(repo / "pkg" / "model.py"), "--before-ref", "HEAD", "--backend", "eager",
                    "--format", "json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["before"]["path"] == "HEAD:pkg/model.py"
    assert data["before"]["graph_breaks"] == 1 and data["before"]["breaks"][0]["file"].startswith("HEAD:")
    assert data["after"]["graph_breaks"] == 0


def test_before_ref_errors_exit_2(invoke, repo, tmp_path):
    new_file = repo / "pkg" / "new.py"
    shutil.copy(FIXTURES / "good_after.py", new_file)
    result = invoke(str(new_file), "--before-ref", "HEAD")
    assert result.exit_code == 2 and "pkg/new.py is not in HEAD" in result.stderr
    result = invoke(str(repo / "pkg" / "model.py"), "--before-ref", "no-such-branch")
    assert result.exit_code == 2 and "unknown git revision" in result.stderr
    outside = tmp_path / "outside"
    outside.mkdir()
    shutil.copy(FIXTURES / "good_after.py", outside / "m.py")
    result = invoke(str(outside / "m.py"), "--before-ref", "HEAD")
    assert result.exit_code == 2 and "not inside a git repository" in result.stderr


def test_json_stays_pure_when_the_model_defers_its_prints():
    # A forward whose print fixitem deferred: left pending, the records would be
    # replayed at interpreter exit, after the JSON document. Only a real process
    # shows that (CliRunner never reaches interpreter exit).
    import sys

    proc = subprocess.run(
        [sys.executable, "-m", "fixitem", "verify", str(FIXTURES / "deferred_print_after.py"),
         "--before", GOOD_BEFORE, "--backend", "eager", "--format", "json"],
        capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    data = json.loads(proc.stdout)  # nothing but the document on stdout
    assert data["passed"] is True
    assert "hidden mean" not in proc.stdout + proc.stderr
    assert any("printed" in note and "not shown" in note for note in data["notes"])


def test_text_report_fits_80_columns_with_short_names_and_full_paths_once(app):
    result = CliRunner().invoke(app, ["verify", str(FIXTURES / "good_after.py"), "--before", GOOD_BEFORE,
                                      "--backend", "eager"], env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert max(len(line) for line in lines) <= 80
    assert any("good_before.py:14:" in line for line in lines)  # a break's location, unwrapped
    full = [line for line in lines if line.startswith("before: ")]
    assert len(full) == 1 and full[0].endswith("good_before.py")
