"""The command line as a user meets it: exit codes, output formats, bad input,
and files that must come out byte-for-byte right."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys

import pytest
from conftest import FIXTURES, ROOT
from fixitem.codemods.driver import source
from typer.testing import CliRunner

from fixitem.cli import app

runner = CliRunner()


def run(*args: str):
    return runner.invoke(app, list(args))


def test_scan_lists_findings_and_exits_1(copy_fixture):
    target = copy_fixture("threshold/scale_if.py")
    result = run("scan", str(target))
    assert result.exit_code == 1
    line = result.stdout.splitlines()[0]
    assert line.startswith(f"{target}:14:9: FX101 ")
    assert "(graph break, host sync)" in line
    assert line.endswith("[fix: safe]")


def test_scan_clean_file_exits_0(tmp_path):
    clean = tmp_path / "clean.py"
    clean.write_text("import torch\n\ndef f(x):\n    return x * 2\n")
    result = run("scan", str(clean))
    assert result.exit_code == 0
    assert "No host syncs found" in result.stdout


def test_scan_json(copy_fixture):
    target = copy_fixture("threshold/report_only.py")
    result = run("scan", "--format", "json", str(target))
    assert result.exit_code == 1
    data = json.loads(result.stdout)
    assert {"path", "line", "col", "rule", "message", "fix"} <= set(data[0])
    assert {d["fix"] for d in data} == {"none"}
    assert all(d["costs"] == ["graph-break", "host-sync"] for d in data)


def test_select_and_ignore(copy_fixture):
    target = copy_fixture("threshold/report_only.py")
    only = json.loads(run("scan", "--format", "json", "--select", "FX006", str(target)).stdout)
    assert {d["rule"] for d in only} == {"FX006"}
    without = json.loads(run("scan", "--format", "json", "--ignore", "FX006,FX004,FX001", str(target)).stdout)
    assert {d["rule"] for d in without} == {"FX101"}


def test_unknown_rule_is_a_usage_error(copy_fixture):
    target = copy_fixture("threshold/scale_if.py")
    result = run("scan", "--select", "XYZ9", str(target))
    assert result.exit_code == 2
    assert "unknown rule" in result.stderr


def test_missing_path_exits_2():
    result = run("scan", "does/not/exist.py")
    assert result.exit_code == 2
    assert "does not exist" in result.stderr


def test_bad_flag_exits_2(copy_fixture):
    result = run("apply", "--no-such-flag", str(copy_fixture("threshold/scale_if.py")))
    assert result.exit_code == 2


def test_diff_writes_nothing_and_exits_1(copy_fixture):
    target = copy_fixture("threshold/scale_if.py")
    before = target.read_bytes()
    result = run("apply", "--diff", str(target))
    assert result.exit_code == 1
    assert target.read_bytes() == before
    assert "-        if h.abs().max().item() > 2.0:  # too large: halve" in result.stdout
    assert "+        h = torch.where(h.abs().max() > 2.0, h * 0.5, h)" in result.stdout
    assert result.stdout.startswith("--- ")


def test_diff_exits_0_when_nothing_to_change(tmp_path):
    clean = tmp_path / "clean.py"
    clean.write_text("import torch\n")
    result = run("apply", "--diff", str(clean))
    assert result.exit_code == 0
    assert result.stdout == ""


def test_apply_rewrites_and_second_apply_changes_nothing(copy_fixture):
    folder = copy_fixture("threshold")
    first = run("apply", str(folder))
    assert first.exit_code == 0
    assert "Fixed 6 sites in 4 files" in first.stdout
    snapshot = {p: p.read_bytes() for p in folder.glob("*.py")}
    second = run("apply", "--diff", str(folder))
    assert second.exit_code == 0
    assert {p: p.read_bytes() for p in folder.glob("*.py")} == snapshot


def test_unsafe_flag(copy_fixture):
    target = copy_fixture("threshold/gate_if_else.py")  # a module called in one branch only
    assert run("apply", "--diff", str(target)).exit_code == 0
    result = run("apply", "--unsafe", str(target))
    assert result.exit_code == 0
    assert "out = torch.where(" in target.read_text()


def test_syntax_error_is_reported_and_other_files_processed(tmp_path, copy_fixture):
    bad = tmp_path / "broken.py"
    bad.write_bytes((FIXTURES / "bad" / "syntax_error.py").read_bytes())
    good = copy_fixture("threshold/scale_if.py")
    result = run("apply", str(tmp_path))
    assert result.exit_code == 2
    assert f"{bad}:3:" in result.stderr and "syntax error: '(' was never closed" in result.stderr
    assert "torch.where" in good.read_text()
    assert bad.read_bytes() == (FIXTURES / "bad" / "syntax_error.py").read_bytes()


def test_non_python_file_named_explicitly(tmp_path):
    notes = tmp_path / "notes.txt"
    notes.write_bytes((FIXTURES / "bad" / "notes.txt").read_bytes())
    result = run("scan", str(notes))
    assert result.exit_code == 0  # nothing in it looks like a sync: not even parsed
    with_torch = tmp_path / "odd.txt"
    with_torch.write_text("torch = {\n")
    assert run("scan", str(with_torch)).exit_code == 2


@pytest.mark.skipif(os.geteuid() == 0, reason="root can write read-only files")
def test_read_only_file_is_an_error(copy_fixture):
    target = copy_fixture("threshold/scale_if.py")
    target.chmod(stat.S_IRUSR)
    result = run("apply", str(target))
    assert result.exit_code == 2
    assert "not writable" in result.stderr


def test_read_only_file_is_an_error_even_for_root(copy_fixture, monkeypatch):
    target = copy_fixture("threshold/scale_if.py")
    before = target.read_bytes()
    target.chmod(stat.S_IRUSR)
    monkeypatch.setattr(source, "is_writable", lambda path: False)
    result = run("apply", str(target))
    assert result.exit_code == 2
    assert "not writable" in result.stderr
    assert target.read_bytes() == before


def test_permissions_are_kept(copy_fixture):
    target = copy_fixture("threshold/scale_if.py")
    target.chmod(0o751)
    run("apply", str(target))
    assert stat.S_IMODE(target.stat().st_mode) == 0o751
    assert not list(target.parent.glob(".*.fixitem")), "no temporary file left behind"


@pytest.mark.parametrize("name", ["crlf.py", "latin1.py", "bom.py"])
def test_encodings_and_line_endings_survive(copy_fixture, name):
    target = copy_fixture(f"bad/{name}")
    original = target.read_bytes()
    result = run("apply", str(target))
    assert result.exit_code == 0
    new = target.read_bytes()
    assert new != original
    assert b"torch.where(x.sum() > 0, x * 2, x)" in new
    if name == "crlf.py":
        assert new.count(b"\r\n") == new.count(b"\n")
    if name == "latin1.py":
        assert "café".encode("latin-1") in new
    if name == "bom.py":
        assert new.startswith(b"\xef\xbb\xbf")
    if name != "crlf.py":
        assert b"\r" not in new


def test_rule_command():
    result = run("rule", "FX101")
    assert result.exit_code == 0
    assert "## Fix safety" in result.stdout
    assert run("rule", "where-if").stdout == result.stdout
    listing = run("rule", "--all").stdout
    assert "FX001" in listing and "FX103" in listing
    assert run("rule", "FX999").exit_code == 2


def test_module_entry_point_and_demo(tmp_path):
    elsewhere = tmp_path / "a" / "b"  # not a parent of the demo's folder: paths must still read well
    elsewhere.mkdir(parents=True)
    completed = subprocess.run(
        [sys.executable, "-m", "fixitem", "demo"], capture_output=True, text=True, cwd=elsewhere, timeout=600,
        env={**os.environ, "COLUMNS": "110"},
    )
    assert completed.returncode == 0, completed.stderr
    out = completed.stdout
    assert "+        x = torch.where(x.norm() > 20.0, x * 0.25, x)" in out
    assert "Host-sync sites before: 3, after: 0." in out
    assert "PASSED: no graph breaks, compiles with fullgraph=True, no host syncs" in out
    # The demo's own inputs take every rewritten condition both ways: no warning that one was not.
    assert "warning" not in out + completed.stderr and "only inactive" not in out and "only active" not in out
    # Paths a person can read: the folder once, absolute; files by their names within it.
    first, *rest = out.splitlines()
    assert first.startswith("Demo folder: ")
    folder = first.split("Demo folder: ", 1)[1].split(" (", 1)[0]
    assert os.path.isabs(folder) and not os.path.exists(folder)  # removed at the end
    body = "\n".join(rest)
    assert "fixitem-demo-" not in body and "../" not in body
    assert "gated_mlp.py:21:9: FX101" in body and "--- a/gated_mlp.py" in body
    # The README shows what the demo prints now: the conditions seen, the inputs, the verdict.
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    sample = readme[readme.index("The end of `fixitem demo`"):]
    sample = sample[sample.index("```text\n") + 8:sample.index("\n```", sample.index("```text\n"))]
    report = out[out.index("fixitem verify  (device"):]

    def stable(text: str) -> list[str]:
        keep = ("│ line ", "Numerics:", "note: inputs", "PASSED", "FAILED")
        return [line.rstrip() for line in text.splitlines() if line.startswith(keep)]

    assert stable(sample) == stable(report) and len(stable(report)) == 6
    setup = readme[readme.index("## Set-up"):readme.index("## Before and after")]
    for line in body.splitlines():
        if line.startswith("gated_mlp.py:"):
            assert line in setup


def test_scan_formats_listed_and_apply_rejects_ci_formats(copy_fixture):
    target = copy_fixture("threshold/scale_if.py")
    assert run("scan", "--format", "github", "--isolated", str(target)).exit_code == 1
    assert run("scan", "--format", "xml", str(target)).exit_code == 2
    assert run("apply", "--format", "sarif", str(target)).exit_code == 2


def test_quiet_with_config_and_jobs(copy_fixture):
    folder = copy_fixture("threshold")
    (folder / "pyproject.toml").write_text('[tool.fixitem]\nselect = ["FX103"]\n')
    result = run("scan", "-q", "-j", "2", str(folder))
    assert result.exit_code == 1
    assert result.stdout.splitlines() and all(" FX103 " in line for line in result.stdout.splitlines())
    assert "note:" not in result.stdout and result.stderr == ""


def test_progress_bar_only_for_many_files():
    from fixitem import cli

    bar = cli._Bar()
    bar.start(cli.PROGRESS_MIN_FILES)
    assert bar.progress is None
    bar.start(cli.PROGRESS_MIN_FILES + 1)
    assert bar.progress is not None
    bar(None)
    assert bar.progress.tasks[0].completed == 1
    bar.stop()
    assert bar.progress is None
    assert cli._progress(quiet=True) is None and cli._progress(interactive=True) is None


def test_diff_lists_what_would_be_fixed(copy_fixture):
    target = copy_fixture("threshold/scale_if.py")
    planned = run("apply", "--diff", str(target))
    report = planned.stderr.splitlines()
    assert any(line.startswith("would fix: ") and " FX101 " in line for line in report), report
    assert not any(line.startswith("fixed:") for line in report)
    assert report[-1].startswith("Would fix 1 site in 1 file")
    done = run("apply", str(target))
    assert any(line.startswith("fixed: ") and " FX101 " in line for line in done.stdout.splitlines())
    assert done.stdout.splitlines()[-1].startswith("Fixed 1 site in 1 file")


# A fix that becomes possible only after another one (the outer `if` once the inner one is a
# `torch.where`), and two fixes of the same lines (the sum is read inside a deferred print).
NESTED = (
    "import torch\n\n\ndef f(x: torch.Tensor, a: torch.Tensor, b: torch.Tensor):\n"
    "    if a.item() > 0:\n        if b.item() > 0:\n            x = x * 2\n    return x + 1\n"
)
OVERLAPPING = (
    "import torch\n\nmodel = torch.nn.Linear(4, 1)\n\n\ndef run(xs, w):\n    total = 0.0\n"
    "    for i, x in enumerate(xs):\n        loss = model(x).sum()\n        total += loss.item()\n"
    '        if i % 10 == 0:\n            print(f"{loss.item():.3f} {total:.3f}", w.item())\n    return total\n'
)


def _counts(folder) -> tuple[tuple[int, int], tuple[int, int]]:
    """(safe, with --unsafe) as scan's summary says them, and as apply --diff fixes them."""
    import re

    summary = run("scan", "--isolated", "--no-cache", str(folder)).stdout
    safe = re.search(r"^(\d+) fixable with `fixitem apply`\.$", summary, re.M)
    both = re.search(r"^(\d+) fixable with `fixitem apply --unsafe`", summary, re.M)
    said_safe = int(safe.group(1)) if safe else 0
    said = (said_safe, int(both.group(1)) if both else said_safe)
    done = []
    for flags in ([], ["--unsafe"]):
        report = run("apply", "--diff", "--isolated", "--no-cache", *flags, str(folder)).stderr
        fixed = re.search(r"^Would fix (\d+) sites?", report, re.M)
        done.append(int(fixed.group(1)))
        assert sum(line.startswith("would fix: ") for line in report.splitlines()) == done[-1]
    return said, (done[0], done[1])


def test_scan_counts_what_apply_fixes_when_fixes_interact(tmp_path):
    (tmp_path / "nested.py").write_text(NESTED)
    (tmp_path / "overlapping.py").write_text(OVERLAPPING)
    said, done = _counts(tmp_path)
    assert said == done
    assert done == (3, 4)  # both `if`s and the sum; with --unsafe also the print (`w` may not be a tensor)
    findings = json.loads(run("scan", "--format", "json", "--isolated", "--no-cache", str(tmp_path / "nested.py")).stdout)
    assert [f["fix"] for f in findings] == ["safe", "safe"]


@pytest.mark.parametrize("tree", ["threshold", "logging", "accumulation", "assert_async", "advice", "verify"])
def test_scan_counts_what_apply_fixes_on_the_fixtures(tree, copy_fixture):
    folder = copy_fixture(tree)
    said, done = _counts(folder)
    assert said == done
    if tree in ("threshold", "logging", "accumulation"):
        assert done[0] > 0


def test_diff_places_what_is_left_in_the_file_as_it_is(tmp_path):
    """Nothing is written with --diff, so a finding left over is where scan saw it,
    not where it would be after the import line the fix adds."""
    target = tmp_path / "evaluate.py"
    target.write_text(
        "import torch\nimport torch.nn.functional as F\n\n\ndef test(model, loader):\n"
        "    test_loss, correct = 0, 0\n    for data, target in loader:\n        output = model(data)\n"
        "        test_loss += F.nll_loss(output, target).item()\n"
        "        correct += output.argmax(1).eq(target).sum().item()\n    return test_loss, correct\n"
    )
    scanned = json.loads(run("scan", "--format", "json", "--isolated", "--no-cache", str(target)).stdout)
    left = [f for f in scanned if f["fix"] != "safe"]
    assert [f["line"] for f in left] == [10]
    out = run("apply", "--diff", "--format", "json", "--isolated", "--no-cache", str(target)).stdout
    planned = json.loads(out[out.index("\n{") :])  # after the diff
    assert [(f["rule"], f["line"], f["col"]) for f in planned["remaining"]] == [(left[0]["rule"], 10, left[0]["col"])]
    assert "from fixitem import runtime as deferred" in run("apply", "--diff", "--isolated", "--no-cache", str(target)).stdout
