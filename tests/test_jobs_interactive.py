"""--jobs (parallel workers give the sequential result) and apply --interactive."""

from __future__ import annotations

import concurrent.futures
import pickle
import shutil
from concurrent.futures import ProcessPoolExecutor
from dataclasses import replace

import pytest
from conftest import FIXTURES
from typer.testing import CliRunner

import fixitem
from fixitem import api
from fixitem.codemods import shortcuts
from fixitem.codemods.model import project
from fixitem.cli import app

runner = CliRunner()


@pytest.fixture
def pools(monkeypatch):
    """Counts the worker pools started, so that a test knows the parallel path ran."""
    started = []

    class Counting(ProcessPoolExecutor):
        def __init__(self, *args, **kwargs):
            started.append(kwargs.get("max_workers"))
            super().__init__(*args, **kwargs)

    # fixitem imports the pool where it makes one (a run of a few files starts without it)
    monkeypatch.setattr(concurrent.futures, "ProcessPoolExecutor", Counting)
    return started


def test_scan_jobs_2_equals_jobs_1(pools):
    sequential = fixitem.scan([FIXTURES], jobs=1, isolated=True)
    assert pools == []
    parallel = fixitem.scan([FIXTURES], jobs=2, isolated=True)
    assert pools == [2]
    assert len(parallel.files) >= api.PARALLEL_MIN_FILES
    assert parallel.files == sequential.files  # same results, same (sorted path) order
    assert parallel.findings and parallel.errors  # fixtures/bad holds a file that does not parse
    assert pickle.loads(pickle.dumps(parallel)).files == parallel.files


def test_apply_jobs_2_equals_jobs_1(tmp_path, monkeypatch, pools):
    results, contents = [], []
    for jobs in (1, 2):
        root = tmp_path / f"copy{jobs}"
        shutil.copytree(FIXTURES, root)
        monkeypatch.chdir(root)
        results.append(fixitem.apply(["."], jobs=jobs, isolated=True))
        contents.append({p.relative_to(root): p.read_bytes() for p in sorted(root.rglob("*.py"))})
    assert pools == [2]
    assert results[0].files == results[1].files
    assert results[0].applied and contents[0] == contents[1]


def _traced_elsewhere_project(root, modules: int) -> None:
    """``modules`` modules, each with a function that only ``model.py``'s ``forward`` calls:
    each is analysed a second time, with that function traced."""
    for i in range(modules):
        (root / f"layers{i}.py").write_text(f"import torch\n\n\ndef other{i}(x):\n    print(x)\n    return x\n")
    imports = "".join(f"from layers{i} import other{i}\n" for i in range(modules))
    body = "".join(f"        x = other{i}(x)\n" for i in range(modules))
    (root / "model.py").write_text(f"import torch\n{imports}\n\nclass Net(torch.nn.Module):\n"
                                   f"    def forward(self, x):\n{body}        return x\n")


def test_files_analysed_again_go_to_the_same_workers(pools, tmp_path, monkeypatch):
    # The second round (8 files, enough for workers) runs in the workers of the first: they
    # have read the modules its files ask about. Results as in-process.
    _traced_elsewhere_project(tmp_path, api.PARALLEL_MIN_FILES)
    rounds = []
    run_all = api._run_all

    def counting(jobs, pool, progress):
        rounds.append(len(jobs))
        return run_all(jobs, pool, progress)

    monkeypatch.setattr(api, "_run_all", counting)
    sequential = fixitem.scan([tmp_path], jobs=1, isolated=True, cache=False)
    parallel = fixitem.scan([tmp_path], jobs=2, isolated=True, cache=False)
    assert rounds == [9, 8, 9, 8]  # each layers module analysed again, with its function traced
    assert pools == [2]  # one pool for both rounds
    assert parallel.files == sequential.files
    assert [(f.path.rsplit("/", 1)[-1], f.line, "graph-break" in f.costs) for f in parallel.findings] == [
        (f"layers{i}.py", 5, True) for i in range(api.PARALLEL_MIN_FILES)]


def test_a_new_round_of_a_run_that_writes_reads_the_project_afresh(tmp_path):
    # Files written by the first round may have been read before: a writing run's later
    # round starts from a fresh project; a run that writes nothing keeps what it read.
    (tmp_path / "m.py").write_text("import torch\nprint(torch.ones(1).item())\n")
    job = api._Job(tmp_path / "m.py", api._codes(None, None), fix=True, unsafe=False, write=False)
    for write, kept in ((False, True), (True, False)):
        api._last_round[0] = 0
        before = project.current()
        with shortcuts.thawed_after():  # as a run does: what the job froze is given back
            api._run_job(replace(job, write=write, round=1))
        assert (project.current() is before) is kept


def test_few_files_run_in_process(pools, copy_fixture):
    result = fixitem.scan([copy_fixture("threshold")], jobs=4, isolated=True)
    assert len(result.files) < api.PARALLEL_MIN_FILES and pools == []


def test_progress_hook_is_started_with_the_count(copy_fixture):
    seen = []

    class Hook:
        def start(self, total):
            seen.append(("start", total))

        def __call__(self, path):
            seen.append(path.name)

    fixitem.scan([copy_fixture("threshold")], jobs=1, isolated=True, progress=Hook())
    assert seen[0] == ("start", 7) and len(seen) == 8


def test_cli_jobs_flag(copy_fixture):
    folder = copy_fixture("threshold")
    one = runner.invoke(app, ["scan", "--jobs", "1", "--isolated", str(folder)])
    two = runner.invoke(app, ["scan", "-j", "2", "--isolated", str(folder)])
    assert one.exit_code == two.exit_code == 1 and one.stdout == two.stdout
    assert runner.invoke(app, ["scan", "--jobs", "-1", str(folder)]).exit_code == 2


def test_flush_every_reaches_the_engine(monkeypatch, tmp_path):
    seen = []
    real = api.process

    def spy(*args, **kwargs):
        seen.append(kwargs.get("flush_every"))
        return real(*args, **kwargs)

    monkeypatch.setattr(api, "process", spy)
    (tmp_path / "pyproject.toml").write_text("[tool.fixitem]\nflush-every = 9\n")
    (tmp_path / "m.py").write_text("import torch\nprint(torch.ones(1).item())\n")
    fixitem.apply([tmp_path], jobs=1, write=False)
    fixitem.apply([tmp_path], jobs=1, write=False, flush_every=3)  # the argument wins over the file
    fixitem.apply([tmp_path], jobs=1, write=False, isolated=True)
    assert seen == [9, 3, None]
    assert api.rules_for(()) == [] and [r.code for r in api.rules_for(("FX101", "FX001"))] == ["FX101", "FX001"]
    with pytest.raises(fixitem.UsageError):
        fixitem.apply([tmp_path], flush_every=0)


# ----------------------------------------------------------------------------- interactive

FIX_MAX = "x = x / torch.clamp(x.norm().detach(), min=1.0)"
FIX_MIN = "torch.minimum(limit.detach().reshape(()), x.abs().sum().detach())"


def interactive(answers: str, *paths, extra=()):
    return runner.invoke(app, ["apply", "--interactive", "--isolated", *extra, *map(str, paths)], input=answers)


def test_interactive_accept_and_skip(copy_fixture):
    target = copy_fixture("threshold/clamp_norm.py")
    result = interactive("n\ny\n", target)
    assert result.exit_code == 0, result.output
    text = target.read_text()
    assert FIX_MAX not in text and FIX_MIN in text
    assert result.stderr.count("Apply this fix?") == 2
    assert "-        x = x / max(x.norm().item(), 1.0)" in result.stderr  # the diff of the one fix shown
    assert "Fixed 1 site in 1 file; 1 left to review." in result.stdout


def test_interactive_reasks_on_a_bad_answer(copy_fixture):
    target = copy_fixture("threshold/clamp_norm.py")
    result = interactive("maybe\ny\ny\n", target)
    assert "Please answer y, n, a or q." in result.stderr
    assert FIX_MAX in target.read_text() and FIX_MIN in target.read_text()


def test_interactive_all_applies_the_rest_without_asking(copy_fixture, tmp_path):
    folder = copy_fixture("threshold")
    reference = tmp_path / "reference"
    shutil.copytree(folder, reference)
    fixitem.apply([reference], isolated=True, jobs=1)
    result = interactive("n\na\n", folder)
    assert result.exit_code == 0
    assert result.stderr.count("Apply this fix?") == 2
    clamp = (folder / "clamp_norm.py").read_text()
    assert FIX_MAX not in clamp and FIX_MIN in clamp
    for path in sorted(folder.glob("*.py")):
        if path.name != "clamp_norm.py":
            assert path.read_text() == (reference / path.name).read_text(), path.name


def test_interactive_quit_keeps_what_was_accepted(copy_fixture):
    folder = copy_fixture("threshold")
    before = {p.name: p.read_text() for p in folder.glob("*.py")}
    result = interactive("y\nq\n", folder)
    assert result.exit_code == 0
    assert result.stderr.count("Apply this fix?") == 2
    changed = {p.name for p in folder.glob("*.py") if p.read_text() != before[p.name]}
    assert changed == {"clamp_norm.py"}
    assert FIX_MAX in (folder / "clamp_norm.py").read_text()


def test_interactive_end_of_input_quits(copy_fixture):
    folder = copy_fixture("threshold")
    before = {p.name: p.read_text() for p in folder.glob("*.py")}
    assert interactive("", folder).exit_code == 0
    assert {p.name: p.read_text() for p in folder.glob("*.py")} == before


def test_interactive_with_diff_writes_nothing(copy_fixture):
    target = copy_fixture("threshold/clamp_norm.py")
    before = target.read_text()
    result = interactive("y\nn\n", target, extra=("--diff",))
    assert result.exit_code == 1
    assert target.read_text() == before
    assert result.stdout.startswith("--- ") and "+        " + FIX_MAX in result.stdout


def test_api_confirm_yes_to_all_equals_plain_apply(copy_fixture, tmp_path):
    folder = copy_fixture("threshold")
    reference = tmp_path / "reference"
    shutil.copytree(folder, reference)
    asked = []
    one_by_one = fixitem.apply([folder], isolated=True, confirm=lambda finding, diff: asked.append(finding) or True)
    batch = fixitem.apply([reference], isolated=True, jobs=1)
    assert len(asked) == len(one_by_one.applied) == len(batch.applied)
    for path in sorted(folder.glob("*.py")):
        assert path.read_text() == (reference / path.name).read_text(), path.name
    assert [f.rule for f in one_by_one.findings] == [f.rule for f in batch.findings]
