"""The command line at its edges: links, files that cannot be written, a killed run,
the usual flags, and what it says when there is nothing to say."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import FIXTURES
from fixitem.codemods.driver import source
from typer.testing import CliRunner

from fixitem import api
from fixitem.cli import app

runner = CliRunner()
needs_links = pytest.mark.skipif(not hasattr(os, "symlink") or os.name == "nt", reason="symbolic links")


def run(*args: str):
    return runner.invoke(app, list(args))


# --------------------------------------------------------------------------- symbolic links


@needs_links
def test_apply_through_a_link_rewrites_its_target_and_keeps_the_link(copy_fixture):
    target = copy_fixture("threshold/scale_if.py")
    link = target.parent / "link.py"
    link.symlink_to(target.name)
    before = target.read_text()
    result = run("apply", str(link))
    assert result.exit_code == 0, result.output
    assert link.is_symlink() and os.readlink(link) == target.name
    assert target.read_text() != before and "torch.where(" in target.read_text()
    assert result.stdout.count("fixed:") == 1
    assert not list(target.parent.glob(".*.fixitem")), "no temporary file left behind"


@needs_links
def test_a_link_to_a_file_elsewhere_keeps_the_temporary_file_beside_the_target(tmp_path):
    real = tmp_path / "real"
    real.mkdir()
    (real / "model.py").write_bytes((FIXTURES / "threshold" / "scale_if.py").read_bytes())
    (real / "model.py").chmod(0o640)
    links = tmp_path / "links"
    links.mkdir()
    (links / "model.py").symlink_to(real / "model.py")
    result = api.apply([links / "model.py"], isolated=True, cache=False)
    assert not result.errors and len(result.applied) == 1
    assert (links / "model.py").is_symlink()
    assert "torch.where(" in (real / "model.py").read_text()
    assert stat.S_IMODE((real / "model.py").stat().st_mode) == 0o640
    assert sorted(p.name for p in links.iterdir()) == ["model.py"]


@needs_links
def test_a_folder_holding_a_file_and_a_link_to_it_reports_each_finding_once(copy_fixture):
    folder = copy_fixture("threshold")
    (folder / "zz_link.py").symlink_to("scale_if.py")
    (folder / "aa_link.py").symlink_to("scale_if.py")
    found = api.scan([folder], isolated=True, cache=False)
    resolved = [os.path.realpath(r.path) for r in found.files]
    assert len(resolved) == len(set(resolved)) == len(list(folder.glob("[!az]*.py")))
    keys = [(f.path, f.line, f.col, f.rule) for f in found.findings]
    assert len(keys) == len(set(keys))
    # Named twice on the command line, by its name and through the link: once too.
    twice = api.scan([folder / "scale_if.py", folder / "zz_link.py"], isolated=True, cache=False)
    assert len(twice.files) == 1
    applied = api.apply([folder], isolated=True, cache=False)
    assert sum(f.path.endswith("scale_if.py") for f in applied.applied) == 1
    assert (folder / "zz_link.py").is_symlink() and (folder / "aa_link.py").is_symlink()


@needs_links
def test_a_link_loop_or_a_broken_link_named_on_the_command_line_says_so(tmp_path):
    (tmp_path / "one.py").symlink_to("two.py")
    (tmp_path / "two.py").symlink_to("one.py")
    (tmp_path / "broken.py").symlink_to("nowhere.py")
    loop = run("scan", str(tmp_path / "one.py"))
    assert loop.exit_code == 2
    assert "symbolic link loop" in loop.stderr and "does not exist" not in loop.stderr
    inside = run("apply", str(tmp_path / "one.py" / "x.py"))
    assert inside.exit_code == 2 and "symbolic link loop" in inside.stderr
    broken = run("scan", str(tmp_path / "broken.py"))
    assert broken.exit_code == 2 and "broken symbolic link" in broken.stderr and "nowhere.py" in broken.stderr


# --------------------------------------------------------------------------- a file that cannot be written


@pytest.fixture
def unwritable(monkeypatch):
    """Files are not writable (as for a user other than root; chmod alone does not stop root)."""
    monkeypatch.setattr(source, "is_writable", lambda path: False)


@pytest.mark.parametrize("cached", [False, True], ids=["analysed", "kept"])
def test_a_file_that_cannot_be_written_is_not_reported_as_fixed(
    copy_fixture, unwritable, tmp_path, monkeypatch, cached,
):
    target = copy_fixture("threshold/clamp_norm.py")
    before = target.read_bytes()
    if cached:  # scan first: apply then takes the kept rewrite
        monkeypatch.delenv("FIXITEM_NO_CACHE")
        monkeypatch.setenv("FIXITEM_CACHE_DIR", str(tmp_path / "kept"))
        run("scan", str(target))
        assert (tmp_path / "kept").exists()
    result = run("apply", str(target))
    assert result.exit_code == 2
    assert "not writable" in result.stderr
    assert target.read_bytes() == before
    assert "fixed:" not in result.stdout
    assert "Fixed 0 sites in 0 files" in result.stdout
    # What the file still holds is listed as left, where it stands in the file.
    scanned = api.scan([target], isolated=True, cache=False)
    left = [line for line in result.stdout.splitlines() if line.startswith("left:")]
    assert len(left) == len(scanned.findings) > 0
    assert [line.split()[1] for line in left] == [f"{f.path}:{f.line}:{f.col}:" for f in scanned.findings]


def test_the_api_counts_only_what_was_written(copy_fixture, unwritable):
    folder = copy_fixture("threshold")
    result = api.apply([folder], isolated=True, cache=False)
    assert result.applied == [] and result.changed == [] and not any(r.written for r in result.files)
    assert all("not writable" in e for e in result.errors) and result.errors


def test_a_notebook_that_cannot_be_written_is_not_reported_as_fixed(copy_fixture, unwritable):
    notebook = copy_fixture("notebooks/rescale.ipynb")
    before = notebook.read_bytes()
    result = api.apply([notebook], isolated=True, cache=False)
    assert result.errors and result.applied == [] and result.changed == []
    assert notebook.read_bytes() == before
    assert [(f.cell, f.line) for f in result.findings] == [
        (f.cell, f.line) for f in api.scan([notebook], isolated=True, cache=False).findings
    ]


# --------------------------------------------------------------------------- kill -9 of a parallel run

# A worker that holds its file until killed: the run is then surely under way when its parent dies.
HELD_WORKER = """
import os, sys, time
from pathlib import Path

from fixitem import api


def held(job):
    Path(os.environ["FIXITEM_TEST_MARKS"], str(os.getpid())).touch()
    time.sleep(3600)


if __name__ == "__main__":
    api._run_job = held
    from fixitem.cli import main

    sys.argv = ["fixitem", "apply", "--jobs", "2", "--no-cache", sys.argv[1]]
    main()
"""


def _running(pid: int) -> bool:
    """Whether ``pid`` is a live process (a zombie, dead and not yet reaped, is not)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return False
    return fields[0] not in ("Z", "X")


def _until(condition, seconds: float) -> bool:
    """Poll ``condition`` for at most ``seconds`` (a bound on the wait, not a measured time)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return condition()


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")
def test_workers_end_when_apply_is_killed(tmp_path):
    folder = tmp_path / "code"
    folder.mkdir()
    for i in range(api.PARALLEL_MIN_FILES * 2):
        (folder / f"m{i}.py").write_bytes((FIXTURES / "threshold" / "scale_if.py").read_bytes())
    marks = tmp_path / "marks"
    marks.mkdir()
    script = tmp_path / "held.py"
    script.write_text(HELD_WORKER)
    env = {**os.environ, "FIXITEM_TEST_MARKS": str(marks)}
    proc = subprocess.Popen([sys.executable, str(script), str(folder)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        assert _until(lambda: len(list(marks.iterdir())) == 2, 120), "the workers did not start"
        workers = [int(p.name) for p in marks.iterdir()]
        assert all(_running(pid) for pid in workers)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        assert _until(lambda: not any(_running(pid) for pid in workers), 30), "workers outlived their parent"
    finally:
        proc.kill()
        for pid in (int(p.name) for p in marks.iterdir()):
            if _running(pid):
                os.kill(pid, signal.SIGKILL)


def test_a_worker_leaves_once_its_parent_is_gone():
    from fixitem import workers

    checks, waits, left = [], [], []
    answers = iter([True, True, False])

    def alive(parent, direct):
        checks.append((parent, direct))
        return next(answers)

    workers.watch(1234, True, alive=alive, wait=waits.append, leave=left.append)
    assert checks == [(1234, True)] * 3
    assert waits == [workers.POLL_SECONDS] * 2 and left == [1]


def test_a_worker_knows_its_parent_is_gone():
    from fixitem import workers

    me = os.getpid()
    assert workers.parent_alive(me, True, getppid=lambda: me)
    assert not workers.parent_alive(me, True, getppid=lambda: 1)  # reparented: the parent died
    assert workers.parent_alive(me, False)  # started through a server process: asked by pid
    finished = subprocess.Popen([sys.executable, "-c", "pass"])
    finished.wait()
    assert not workers.parent_alive(finished.pid, False)
    options = workers.pool_options()
    assert options["initializer"] is workers.started and options["initargs"][0] == me


# --------------------------------------------------------------------------- the usual flags and help


def test_short_help_and_version_flags_as_ruff_black_and_pytest_take_them():
    import fixitem

    assert run("-V").stdout.strip() == f"fixitem {fixitem.__version__}"
    for args in (["-h"], ["scan", "-h"], ["apply", "-h"], ["rule", "-h"], ["verify", "-h"]):
        result = run(*args)
        assert result.exit_code == 0, args
        assert "Usage: fixitem" in result.stdout and "-h" in result.stdout


def _help(*command: str) -> str:
    result = run(*command, "--help")
    assert result.exit_code == 0, command
    return result.stdout


@pytest.mark.parametrize("command", [[], ["scan"], ["apply"], ["rule"], ["demo"], ["lsp"], ["verify"]])
def test_help_names_what_options_take_not_python_types(command):
    import re

    text = _help(*command)
    assert not re.findall(r"<[^>\s]*>", text), text  # <bool>, <list[Path]>, <int range>, <text|json>
    assert "{" not in text  # {paths}...
    if command in (["scan"], ["apply"]):
        assert f"Usage: fixitem {command[0]} [OPTIONS] PATH..." in text
        assert "CODES" in text and "GLOB" in text


def test_help_says_which_files_folders_are_searched_for(tmp_path):
    from fixitem.codemods.driver.discovery import SUFFIXES, discover

    (tmp_path / "model.py").write_text("x = 1\n")
    (tmp_path / "train.ipynb").write_bytes((FIXTURES / "notebooks" / "rescale.ipynb").read_bytes())
    assert sorted(p.suffix for p in discover([tmp_path])) == sorted(SUFFIXES)
    for command in ("scan", "apply"):
        flat = " ".join(_help(command).split())
        assert all(f"*{suffix}" in flat for suffix in SUFFIXES), flat


def test_rule_with_a_code_and_all_is_a_usage_error():
    result = run("rule", "--all", "FX101")
    assert result.exit_code == 2
    assert "not both" in result.stderr and result.stdout == ""
    assert run("rule", "--all").exit_code == 0 and run("rule", "FX101").exit_code == 0


@pytest.mark.parametrize("args, status", [
    (["rule"], 0), (["rule", "--all"], 0), (["rule", "FX101"], 0), (["--help"], 0), (["scan", "--help"], 0),
    (["scan", "--no-cache", str(FIXTURES / "threshold" / "scale_if.py")], 1),  # found: still 1
])
def test_output_cut_short_by_its_reader_is_no_error(args, status):
    read, write = os.pipe()
    os.close(read)  # the reader is gone before the first line is written (as `| head` is, soon)
    try:
        proc = subprocess.run([sys.executable, "-m", "fixitem", *args], stdout=write, stderr=subprocess.PIPE,
                              text=True, timeout=300)
    finally:
        os.close(write)
    assert (proc.returncode, proc.stderr) == (status, "")


@pytest.mark.parametrize("command", ["scan", "apply"])
def test_an_unknown_format_names_the_formats(command, copy_fixture):
    result = run(command, "--format", "xml", str(copy_fixture("threshold/scale_if.py")))
    assert result.exit_code == 2
    assert "Value error" not in result.output
    assert "--format must be one of text, json" in result.stderr and "'xml'" in result.stderr


@pytest.mark.parametrize("command", ["scan", "apply"])
def test_an_empty_folder_says_so_and_exits_0_as_ruff_does(command, tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "notes.txt").write_text("not Python\n")
    result = run(command, str(empty))
    assert result.exit_code == 0
    assert f"warning: no Python files or notebooks found in {empty}" in result.stderr
    assert "0 files" not in result.stdout
    as_json = run(command, "--format", "json", str(empty))
    assert as_json.exit_code == 0 and "no Python files" in as_json.stderr


def test_a_file_that_cannot_be_read_is_an_error_not_a_clean_file(tmp_path):
    bad = tmp_path / "not_utf8.py"
    bad.write_bytes((FIXTURES / "bad" / "not_utf8.py").read_bytes())
    alone = run("scan", str(bad))
    assert alone.exit_code == 2 and "not_utf8.py" in alone.stderr
    assert "No host syncs found in 0 files." in alone.stdout
    (tmp_path / "clean.py").write_text("import torch\n")
    both = run("scan", str(tmp_path))
    assert both.exit_code == 2 and "No host syncs found in 1 file." in both.stdout


@pytest.mark.parametrize("value", ["", ",", " "])
def test_an_empty_select_is_a_usage_error(value, copy_fixture):
    target = copy_fixture("threshold/scale_if.py")
    for command in ("scan", "apply"):
        result = run(command, "--select", value, str(target))
        assert result.exit_code == 2
        assert "select names no rule" in result.stderr
    with pytest.raises(api.UsageError, match="select names no rule"):
        api.scan([target], select=[], isolated=True)
    assert "torch.where" not in target.read_text()


# --------------------------------------------------------------------------- start-up


def test_a_scan_of_one_file_starts_without_pydantic_rich_or_torch(tmp_path):
    """A pre-commit hook runs ``fixitem scan FILE`` on every commit: it imports only what
    the scan needs (pydantic, which typer 0.29 imports for its parameters, took half of
    such a run; rich is for the commands that print through it; torch, numpy and the
    language server are never needed to read code)."""
    code = (
        "import sys\n"
        "sys.argv = ['fixitem', *sys.argv[1:]]\n"
        "from fixitem.cli import main\n"
        "try:\n"
        "    main()\n"
        "except SystemExit:\n"
        "    pass\n"
        "print(sorted(m for m in ('pydantic', 'rich', 'torch', 'numpy', 'pygls') if m in sys.modules))\n"
    )
    script = tmp_path / "modules.py"
    script.write_text(code)
    target = FIXTURES / "threshold" / "scale_if.py"
    done = subprocess.run([sys.executable, str(script), "scan", "--no-cache", str(target)],
                          capture_output=True, text=True, timeout=120)
    assert "scale_if.py" in done.stdout  # it did scan: the finding is listed
    assert done.stdout.strip().splitlines()[-1] == "[]", done.stdout + done.stderr


def test_line_100_is_printed_as_a_number_not_an_emoji(tmp_path):
    """rich turns ``:100:`` into 💯 unless its emoji codes are off: ``apply``'s ``left:``
    lines showed ``train.py💯9``."""
    path = tmp_path / "train.py"
    lines = ["import torch", "def f(x: torch.Tensor):"] + ["    pass"] * 97 + ["    y = x.sum().item()", "    return y"]
    path.write_text("\n".join(lines) + "\n")
    result = run("apply", "--diff", str(path))
    shown = result.stdout + result.stderr
    assert "train.py:100:9: FX001" in shown and "\U0001f4af" not in shown, shown


def test_the_command_ends_with_its_status_output_and_exit_handlers(tmp_path):
    """``fixitem`` ends without taking the interpreter apart (``entry``): what it printed,
    its status and the program's ``atexit`` handlers are those of a normal exit."""
    script = tmp_path / "run.py"
    script.write_text(
        "import atexit, sys\n"
        "atexit.register(lambda: print('exit handler ran'))\n"
        "sys.argv = ['fixitem', *sys.argv[1:]]\n"
        "from fixitem.cli import entry\n"
        "entry()\n"
        "print('not reached')\n"
    )
    target = FIXTURES / "threshold" / "scale_if.py"
    # Buffered output, as a pipe has it by default: what an exit handler prints is not lost.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    found = subprocess.run([sys.executable, str(script), "scan", "--no-cache", str(target)],
                           capture_output=True, text=True, timeout=120, env=env)
    assert found.returncode == 1  # findings
    lines = found.stdout.splitlines()
    assert "scale_if.py" in found.stdout and lines[-1] == "exit handler ran"
    assert "not reached" not in found.stdout
    clean = tmp_path / "clean.py"
    clean.write_text("x = 1\n")
    none = subprocess.run([sys.executable, str(script), "scan", "--no-cache", str(clean)],
                          capture_output=True, text=True, timeout=120)
    assert none.returncode == 0 and none.stdout.splitlines()[-1] == "exit handler ran"
    bad = subprocess.run([sys.executable, str(script), "scan", "--bogus", str(clean)],
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "--bogus" in bad.stderr
    module = subprocess.run([sys.executable, "-m", "fixitem", "scan", "--no-cache", str(target)],
                            capture_output=True, text=True, timeout=120)
    assert module.returncode == 1 and "scale_if.py" in module.stdout
