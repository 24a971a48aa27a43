"""[tool.fixitem] in pyproject.toml: discovery, keys, precedence of flags, per-file-ignores."""

from __future__ import annotations

import json
import shutil

import pytest
from conftest import FIXTURES
from typer.testing import CliRunner

import fixitem
from fixitem.cli import app
from fixitem.config import ConfigError, find_config, glob_matches, load_config

runner = CliRunner()


def run(*args: str):
    return runner.invoke(app, list(args))


@pytest.fixture
def project(tmp_path):
    """A project folder (with .git) holding the threshold fixtures under src/."""
    root = tmp_path / "proj"
    (root / ".git").mkdir(parents=True)
    shutil.copytree(FIXTURES / "threshold", root / "src")
    return root


def write_config(root, body: str):
    (root / "pyproject.toml").write_text("[project]\nname = 'x'\n\n[tool.fixitem]\n" + body)
    return root / "pyproject.toml"


def rules_of(result) -> set[str]:
    return {d["rule"] for d in json.loads(result.stdout)}


def test_found_from_the_path_upwards_and_stops_at_git(project, tmp_path):
    config = write_config(project, 'select = ["FX1"]\n')
    assert find_config(project / "src" / "scale_if.py") == config.resolve()
    assert find_config(project / "src") == config.resolve()
    # A pyproject.toml without the table is passed over; one above .git is never read.
    (project / "src" / "pyproject.toml").write_text("[project]\nname = 'inner'\n")
    assert find_config(project / "src") == config.resolve()
    config.unlink()
    (tmp_path / "pyproject.toml").write_text("[tool.fixitem]\nselect = ['FX0']\n")
    assert find_config(project / "src") is None


def test_config_is_used_and_flags_override_it(project):
    write_config(project, 'select = ["FX006"]\n')
    target = str(project / "src" / "report_only.py")
    assert rules_of(run("scan", "--format", "json", target)) == {"FX006"}
    assert rules_of(run("scan", "--format", "json", "--select", "FX101", target)) == {"FX101"}
    everything = rules_of(run("scan", "--format", "json", "--isolated", target))
    assert {"FX101", "FX006"} <= everything and len(everything) > 2


def test_ignore_and_exclude_from_config_and_their_flags(project):
    write_config(project, 'ignore = ["FX006", "FX004", "FX001"]\nexclude = ["src/scale_*"]\n')
    result = run("scan", "--format", "json", str(project / "src"))
    data = json.loads(result.stdout)
    assert {d["rule"] for d in data} <= {"FX101", "FX102", "FX103"}
    assert not any(d["path"].endswith("scale_if.py") for d in data)
    # --exclude replaces the configured globs; --ignore replaces the configured codes.
    flagged = json.loads(run("scan", "--format", "json", "--exclude", "nothing", str(project / "src")).stdout)
    assert any(d["path"].endswith("scale_if.py") for d in flagged)
    assert rules_of(run("scan", "--format", "json", "--ignore", "FX1", str(project / "src"))) >= {"FX006"}


def test_folder_glob_excludes_what_is_inside(project, monkeypatch):
    write_config(project, 'exclude = ["src"]\n')
    monkeypatch.chdir(project)
    result = fixitem.scan(["."])
    assert result.files == [] and result.config == (project / "pyproject.toml").resolve()
    assert glob_matches(project / "src" / "a.py", "src/", project)
    assert not glob_matches(project / "src" / "a.py", "tests", project)


def test_per_file_ignores_drop_findings_and_fixes(project):
    write_config(project, '[tool.fixitem.per-file-ignores]\n"src/scale_if.py" = ["FX101", "FX001"]\n"*.py" = ["FX006"]\n')
    scale = project / "src" / "scale_if.py"
    before = scale.read_text()
    data = json.loads(run("scan", "--format", "json", str(project / "src")).stdout)
    assert not any(d["path"].endswith("scale_if.py") and d["rule"] in ("FX101", "FX001") for d in data)
    assert "FX006" not in {d["rule"] for d in data}
    assert run("apply", str(project / "src")).exit_code == 0
    assert scale.read_text() == before  # its fix belongs to an ignored rule: not applied
    assert "torch.where" in (project / "src" / "conditional_expression.py").read_text()


def test_unsafe_from_config_and_no_unsafe_flag(project):
    write_config(project, "unsafe = true\n")
    target = project / "src" / "gate_if_else.py"
    assert run("apply", "--diff", "--no-unsafe", str(target)).exit_code == 0
    assert run("apply", "--diff", str(target)).exit_code == 1


def test_unknown_key_is_an_error_naming_key_and_file(project):
    config = write_config(project, 'select = ["FX1"]\nflush_every = 3\n')
    result = run("scan", str(project / "src"))
    assert result.exit_code == 2
    assert "'flush_every'" in result.stderr and "flush-every" in result.stderr
    assert str(config.resolve()) in result.stderr.replace("\n", "")
    assert run("scan", "--isolated", str(project / "src")).exit_code == 1  # --isolated: not read


@pytest.mark.parametrize(
    "body, words",
    [
        ('select = "FX1"\n', "list of strings"),
        ('select = ["XYZ"]\n', "unknown rule"),
        ("flush-every = 0\n", "positive integer"),
        ('unsafe = "yes"\n', "true or false"),
        ('[tool.fixitem.per-file-ignores]\n"*.py" = ["NOPE"]\n', "unknown rule"),
        ("select = [\n", "invalid TOML"),
    ],
)
def test_bad_values_exit_2(project, body, words):
    write_config(project, body)
    result = run("scan", str(project / "src"))
    assert result.exit_code == 2
    assert words in result.stderr.replace("\n", " ")


def test_explicit_config_file(project, tmp_path):
    other = tmp_path / "fixitem.toml"
    other.write_text('select = ["FX006"]\nflush-every = 7\n')
    config = load_config(other)
    assert config.select == ["FX006"] and config.flush_every == 7
    write_config(project, 'select = ["FX101"]\n')
    target = str(project / "src" / "report_only.py")
    assert rules_of(run("scan", "--format", "json", "--config", str(other), target)) == {"FX006"}
    assert run("scan", "--config", str(tmp_path / "missing.toml"), target).exit_code == 2
    bare = tmp_path / "pyproject.toml"
    bare.write_text("[project]\nname = 'x'\n")
    with pytest.raises(ConfigError, match="no \\[tool.fixitem\\] table"):
        load_config(bare)


def test_api_takes_config_and_arguments_override(project):
    write_config(project, 'select = ["FX006"]\nflush-every = 5\n')
    target = project / "src" / "report_only.py"
    assert {f.rule for f in fixitem.scan([target]).findings} == {"FX006"}
    assert {f.rule for f in fixitem.scan([target], select=["FX101"]).findings} == {"FX101"}
    assert len({f.rule for f in fixitem.scan([target], isolated=True).findings}) > 2
    with pytest.raises(fixitem.UsageError, match="unknown key"):
        write_config(project, "colour = 1\n")
        fixitem.scan([target])


def test_exclude_skips_files_named_explicitly_too(project, monkeypatch):
    write_config(project, 'exclude = ["src/scale_if.py"]\n')
    scale = project / "src" / "scale_if.py"
    assert fixitem.scan([scale]).files == []  # as pre-commit passes it
    assert "scale_if.py" not in {r.path.name for r in fixitem.scan([project / "src"]).files}
    assert [r.path.name for r in fixitem.scan([scale], isolated=True).files] == ["scale_if.py"]
    monkeypatch.chdir(project)
    assert fixitem.scan(["src/scale_if.py"], exclude=["src/*"]).files == []
    assert len(fixitem.scan(["src/scale_if.py"], exclude=[]).files) == 1
