"""Results kept between runs (fixitem/cache.py): same answers, less work."""

from __future__ import annotations

import json
import shutil
import os
import sqlite3
from pathlib import Path

import pytest
from typer.testing import CliRunner

import fixitem.api as api
from fixitem.cache import DIR_NAME, ResultCache
from fixitem.cli import app

FIXABLE = "import torch\n\ndef f(x: torch.Tensor):\n    return x / max(x.norm().item(), 1.0)\n"
REPORT_ONLY = "import torch\n\ndef g(x: torch.Tensor):\n    n = int(x.sum().item())\n    return x[:n]\n"
CLEAN = "import torch\n\ndef h(x):\n    return torch.relu(x)\n"


@pytest.fixture
def tree(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "src").mkdir()
    for name, text in {"fixable.py": FIXABLE, "report_only.py": REPORT_ONLY, "clean.py": CLEAN}.items():
        (tmp_path / "src" / name).write_text(text)
    return tmp_path


@pytest.fixture
def processed(monkeypatch):
    """The files the engine really analysed."""
    seen: list[str] = []
    real = api.process

    def counting(path, text, rules, **kwargs):
        seen.append(path.name)
        return real(path, text, rules, **kwargs)

    monkeypatch.setattr(api, "process", counting)
    return seen


def _rows(store) -> list[tuple[str, str, float]]:
    with sqlite3.connect(ResultCache(store).database) as database:
        return database.execute("SELECT key, data, written FROM entries").fetchall()


def _change(store, statement: str) -> None:
    database = sqlite3.connect(ResultCache(store).database)
    with database:
        database.execute(statement)
    database.close()


def _view(result: api.RunResult):
    return [(f.path, f.line, f.col, f.rule, f.message, f.fix, f.note) for f in result.findings], result.errors


def test_second_scan_reads_kept_results(tree, processed):
    store = tree / "kept"
    first = api.scan(["src"], cache=store, jobs=1)
    # (A file with fixes is also rewritten in memory, so that its tags say what apply does.)
    assert sorted(set(processed)) == ["clean.py", "fixable.py", "report_only.py"]
    processed.clear()
    second = api.scan(["src"], cache=store, jobs=1)
    assert processed == []
    assert _view(second) == _view(first)
    assert (store / ".gitignore").read_text().splitlines()[-1] == "*"
    assert _view(api.scan(["src"], cache=False, jobs=1)) == _view(first)


def test_an_edited_file_is_analysed_again(tree, processed):
    store = tree / "kept"
    api.scan(["src"], cache=store, jobs=1)
    processed.clear()
    (tree / "src" / "clean.py").write_text(CLEAN + "\ndef k(t: torch.Tensor):\n    return t.item()\n")
    result = api.scan(["src"], cache=store, jobs=1)
    assert processed == ["clean.py"]
    assert any(f.path.endswith("clean.py") and f.rule == "FX001" for f in result.findings)


def test_other_rules_are_another_key(tree, processed):
    store = tree / "kept"
    api.scan(["src"], cache=store, jobs=1)
    processed.clear()
    only = api.scan(["src"], cache=store, jobs=1, select=["FX103"])
    assert len(set(processed)) == 3
    assert {f.rule for f in only.findings} == {"FX103"}


def test_apply_skips_files_with_nothing_to_fix_and_fixes_the_rest(tree, processed):
    store = tree / "kept"
    api.scan(["src"], cache=store, jobs=1)
    processed.clear()
    result = api.apply(["src"], cache=store, jobs=1)
    assert processed == []  # the fixable file's rewrite was kept by the scan
    assert "clamp" in (tree / "src" / "fixable.py").read_text()
    assert (tree / "src" / "report_only.py").read_text() == REPORT_ONLY
    assert [f.rule for f in result.findings] == [f.rule for f in api.scan(["src"], cache=False).findings]


def test_apply_without_cache_gives_the_same_files(tree, tmp_path_factory):
    other = tmp_path_factory.mktemp("copy")
    for path in (tree / "src").iterdir():
        (other / path.name).write_text(path.read_text())
    api.scan(["src"], cache=tree / "kept", jobs=1)
    api.apply(["src"], cache=tree / "kept", jobs=1)
    api.apply([other], cache=False, jobs=1)
    for path in (tree / "src").iterdir():
        assert path.read_text() == (other / path.name).read_text()


def test_apply_without_a_scan_first_analyses_the_fixable_file(tree, processed):
    store = tree / "kept"
    api.apply(["src"], cache=store, jobs=1, write=False)
    assert sorted(processed) == ["clean.py", "fixable.py", "report_only.py"]
    processed.clear()
    api.apply(["src"], cache=store, jobs=1, write=False)
    assert processed == ["fixable.py"]  # apply keeps no rewrite of its own


def test_kept_rewrites_give_what_apply_gives(tmp_path, monkeypatch, processed):
    """On every fixture: apply after a scan (from the kept rewrites) reports, diffs and
    writes exactly what apply without the cache does, in both modes."""
    import shutil
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent / "fixtures"
    shutil.copytree(root, tmp_path / "fixtures")
    monkeypatch.chdir(tmp_path)
    store = tmp_path / "kept"
    options = {"isolated": True, "jobs": 1}

    def outcome(result):
        return [(str(r.path), r.diff, [f.to_dict() for f in r.applied], [f.to_dict() for f in r.findings], r.error)
                for r in result.files]

    scanned = api.scan(["fixtures"], cache=store, **options)
    with_fixes = {Path(f.path).name for f in scanned.findings if f.fix != "none"}
    for unsafe in (False, True):
        processed.clear()
        kept = api.apply(["fixtures"], write=False, unsafe=unsafe, cache=store, **options)
        again = {p for p in processed if p.endswith(".py")}
        # Only files with a fix are analysed again, and none whose fixes interact: scan
        # rewrote those in memory and kept the rewrite.
        assert again <= with_fixes
        assert "selections.py" in with_fixes and "selections.py" not in again
        fresh = api.apply(["fixtures"], write=False, unsafe=unsafe, cache=False, **options)
        assert outcome(kept) == outcome(fresh)
        assert sum(1 for r in kept.files if r.diff) > 10
    copy = tmp_path / "copy"
    shutil.copytree(root, copy)
    api.apply(["fixtures"], unsafe=True, cache=store, **options)
    api.apply([copy], unsafe=True, cache=False, **options)
    for path in (tmp_path / "fixtures").rglob("*.py"):
        assert path.read_bytes() == (copy / path.relative_to(tmp_path / "fixtures")).read_bytes(), path


def test_a_file_the_engine_would_not_parse_is_not_kept(tree, processed):
    """Its entry would cost more to write and read back than the text check it stands for."""
    (tree / "src" / "plain.py").write_text("def add(a, b):\n    return a + b\n")
    store = tree / "kept"
    first = api.scan(["src"], cache=store, jobs=1)
    assert len(_rows(store)) == 3  # the three files that mention torch
    assert "plain.py" not in processed
    processed.clear()
    second = api.scan(["src"], cache=store, jobs=1)
    assert processed == []
    assert _view(second) == _view(first)


def test_a_broken_entry_is_a_miss(tree, processed):
    store = tree / "kept"
    api.scan(["src"], cache=store, jobs=1)
    _change(store, "UPDATE entries SET data = '{not json'")
    processed.clear()
    result = api.scan(["src"], cache=store, jobs=1)
    assert len(set(processed)) == 3 and len(result.findings) == 2
    assert all(json.loads(data)["findings"] is not None for _, data, _ in _rows(store))  # rewritten


def test_a_file_that_is_not_a_database_is_made_anew(tree, processed):
    store = tree / "kept"
    first = api.scan(["src"], cache=store, jobs=1)
    ResultCache(store).database.write_bytes(b"not a database" * 100)
    processed.clear()
    second = api.scan(["src"], cache=store, jobs=1)
    assert len(set(processed)) == 3 and _view(second) == _view(first) and len(_rows(store)) == 3
    processed.clear()
    api.scan(["src"], cache=store, jobs=1)
    assert processed == []


def test_the_entries_of_an_earlier_format_are_removed(tree):
    store = tree / "kept"
    old = store / "v2" / "ab"
    old.mkdir(parents=True)
    (old / "ab12.json").write_text("{}")
    (store / "notes.txt").write_text("mine")
    api.scan(["src"], cache=store, jobs=1)
    assert not (store / "v2").exists() and (store / "notes.txt").read_text() == "mine" and len(_rows(store)) == 3


def test_a_database_another_process_holds_locked_is_done_without(tree, monkeypatch):
    # A process that cannot get at the database in time runs on without the cache: same findings.
    import fixitem.cache as cache

    store = tree / "kept"
    first = api.scan(["src"], cache=store, jobs=1)
    monkeypatch.setattr(cache, "LOCK_WAIT_S", 0.05)
    holder = sqlite3.connect(ResultCache(store).database, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        (tree / "src" / "clean.py").write_text(CLEAN + "\n# edited\n")  # a miss, then a write that waits
        assert _view(api.scan(["src"], cache=store, jobs=1)) == _view(first)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert len(_rows(store)) == 3  # the edited file's result was not kept
    api.scan(["src"], cache=store, jobs=1)
    assert len(_rows(store)) == 4  # and is, once the database is free


def test_entries_not_written_for_a_month_are_dropped(tree, processed):
    store = tree / "kept"
    api.scan(["src"], cache=store, jobs=1)
    _change(store, "UPDATE entries SET written = written - 31 * 86400 WHERE key IN (SELECT key FROM entries LIMIT 1)")
    processed.clear()
    api.scan(["src"], cache=store, jobs=1)
    assert len(set(processed)) == 1 and len(_rows(store)) == 3  # analysed once more, and kept again


def test_the_workers_of_a_run_write_one_database_side_by_side(tree, monkeypatch, processed):
    monkeypatch.setattr(api, "PARALLEL_MIN_FILES", 1)  # workers even for a small project
    for i in range(12):
        (tree / "src" / f"more_{i}.py").write_text(FIXABLE.replace("def f", f"def f{i}"))
    store = tree / "kept"
    first = api.scan(["src"], cache=store, jobs=2)
    kept = sorted(_rows(store))
    assert len(kept) == 15
    assert _view(api.scan(["src"], cache=store, jobs=2)) == _view(first)
    assert sorted(_rows(store)) == kept  # all read back: none written again


def test_unparseable_files_keep_their_error(tree, processed):
    (tree / "src" / "broken.py").write_text("import torch\ndef f(:\n")
    store = tree / "kept"
    first = api.scan(["src"], cache=store, jobs=1)
    processed.clear()
    second = api.scan(["src"], cache=store, jobs=1)
    assert processed == [] and second.errors == first.errors and first.errors


def test_default_folder_is_beside_the_configuration(tree):
    (tree / "pyproject.toml").write_text("[tool.fixitem]\nignore = ['FX006']\n")
    api.scan(["src"], cache=True, jobs=1)
    assert (tree / DIR_NAME / ".gitignore").is_file()


def test_environment_turns_it_off_and_moves_it(tree, monkeypatch):
    monkeypatch.setenv("FIXITEM_NO_CACHE", "1")
    api.scan(["src"], jobs=1)
    assert not (tree / DIR_NAME).exists()
    monkeypatch.setenv("FIXITEM_NO_CACHE", "0")
    monkeypatch.setenv("FIXITEM_CACHE_DIR", str(tree / "elsewhere"))
    api.scan(["src"], jobs=1)
    assert (tree / "elsewhere" / ".gitignore").is_file() and not (tree / DIR_NAME).exists()


def test_cli_no_cache_flag(tree, monkeypatch):
    monkeypatch.setenv("FIXITEM_NO_CACHE", "0")
    result = CliRunner().invoke(app, ["scan", "--no-cache", "src"])
    assert result.exit_code == 1 and "FX103" in result.stdout
    assert not (tree / DIR_NAME).exists()
    result = CliRunner().invoke(app, ["scan", "src"])
    assert result.exit_code == 1 and (tree / DIR_NAME).is_dir()


def test_unwritable_folder_changes_nothing(tree, processed):
    blocker = tree / "file_not_folder"
    blocker.write_text("")
    result = api.scan(["src"], cache=blocker / "kept", jobs=1)
    assert len(result.findings) == 2 and not result.errors


def test_keys_differ_by_text_path_rules_and_settings():
    kept = ResultCache("unused")
    base = kept.key("a.py", "x = 1\n", ("FX001",), None)
    assert base != kept.key("b.py", "x = 1\n", ("FX001",), None)
    assert base != kept.key("a.py", "x = 2\n", ("FX001",), None)
    assert base != kept.key("a.py", "x = 1\n", ("FX002",), None)
    assert base != kept.key("a.py", "x = 1\n", ("FX001",), 50)
    assert base == kept.key("a.py", "x = 1\n", ("FX001",), None)


def test_a_default_device_set_elsewhere_in_the_run_is_part_of_the_key(tmp_path):
    # Alone, ``torch.randint`` makes a CPU tensor (no finding); once another file of the run
    # sets a default device, the answer kept for the unchanged file must not be reused.
    (tmp_path / "sample.py").write_text("import torch\n\ndef f():\n    idx = torch.randint(0, 10, (4,))\n    return int(idx[0])\n")
    kept = tmp_path / "kept"
    assert api.scan([tmp_path / "sample.py"], cache=kept, jobs=1).findings == []
    (tmp_path / "main.py").write_text("import torch\n\ntorch.set_default_device('cuda')\n")
    assert [f.rule for f in api.scan([tmp_path / "sample.py", tmp_path / "main.py"], cache=kept, jobs=1).findings] == ["FX001"]


def test_the_code_fingerprint_changes_with_any_file_of_the_code(tmp_path):
    from fixitem.cache import code_folder_fingerprint

    code = tmp_path / "code"
    (code / "rules").mkdir(parents=True)
    (code / "a.py").write_text("A = 1\n")
    (code / "rules" / "b.py").write_text("B = 2\n")
    (code / "notes.txt").write_text("not code\n")
    first = code_folder_fingerprint(code, "1.0")
    assert code_folder_fingerprint(code, "1.0") == first
    (code / "notes.txt").write_text("still not code\n")
    assert code_folder_fingerprint(code, "1.0") == first
    assert code_folder_fingerprint(code, "1.1") != first  # another version
    stat = (code / "rules" / "b.py").stat()
    os.utime(code / "rules" / "b.py", ns=(stat.st_atime_ns, stat.st_mtime_ns + 1))  # same size, written again
    second = code_folder_fingerprint(code, "1.0")
    assert second != first
    (code / "a.py").write_text("A = 10\n")  # another size
    assert code_folder_fingerprint(code, "1.0") not in (first, second)
    (code / "c.py").write_text("")  # a new module
    third = code_folder_fingerprint(code, "1.0")
    (code / "c.py").unlink()
    fourth = code_folder_fingerprint(code, "1.0")
    assert fourth != third
    moved = tmp_path / "elsewhere"
    code.rename(moved)  # the same files, times kept, in another place
    assert code_folder_fingerprint(moved, "1.0") != fourth


HELPERS = "import torch\n\n\ndef is_ready(x) -> bool:\n    return bool(x)\n"
TRAIN = "import torch\nfrom helpers import is_ready\n\n\ndef step(x):\n    if is_ready(x):\n        return x.sum().item()\n"


@pytest.fixture
def project_tree(tmp_path, monkeypatch):
    from fixitem.codemods.model import project

    monkeypatch.chdir(tmp_path)
    (tmp_path / "helpers.py").write_text(HELPERS)
    (tmp_path / "train.py").write_text(TRAIN)
    project.forget()
    yield tmp_path
    project.forget()


@pytest.fixture
def parsed_texts(monkeypatch) -> list[str]:
    """The first line of each text the analysis parses (a definition parsed alone: its own)."""
    seen: list[str] = []
    from fixitem.codemods.model import context, outline, project

    real = project.parse_module

    def counting(source):
        seen.append(source.lstrip("\n").splitlines()[0])
        return real(source)

    monkeypatch.setattr(project, "parse_module", counting)
    monkeypatch.setattr(context, "parse_module", counting)
    monkeypatch.setattr(outline, "parse_module", counting)
    return seen


def _summary_rows(store) -> list[tuple[str, str]]:
    with sqlite3.connect(ResultCache(store).database) as database:
        return database.execute("SELECT key, data FROM summaries").fetchall()


def _scan_rules(store: Path | bool) -> list[str]:
    """The rules of the findings in ``train.py`` (of the current folder), scanned as a new
    process would (nothing of the project in memory) with the cache ``store`` (False: none)."""
    from fixitem.codemods.model import project

    project.forget()
    return [f.rule for f in api.scan(["train.py"], cache=store, jobs=1).findings]


def _scan_edited(tree, store, text: str) -> list[str]:
    """:func:`_scan_rules`, after writing ``text`` to ``train.py``."""
    (tree / "train.py").write_text(text)
    return _scan_rules(store)


def test_an_edited_file_reads_the_summaries_of_the_modules_it_imports_back(project_tree, parsed_texts):
    store = project_tree / "kept"
    assert _scan_edited(project_tree, store, TRAIN) == ["FX001"]  # ``is_ready(x)`` is a bool: no truth test
    # train.py, helpers.py's outline for its summary, and the function asked about, alone
    assert parsed_texts == ["import torch", "import torch", "def is_ready(x) -> bool:"]
    ((_, data),) = _summary_rows(store)  # the one module asked about
    assert json.loads(data)["parts"]["is_ready"][0] == "function"  # (kept before it was asked about)
    # The file edited, the module it imports not: the module's summary is read back, not parsed;
    # the function asked about is parsed alone from the module's text.
    parsed_texts.clear()
    assert _scan_edited(project_tree, store, TRAIN + "\n\nSTEPS = 10\n") == ["FX001"]
    assert parsed_texts == ["import torch", "def is_ready(x) -> bool:"]
    ((_, data),) = _summary_rows(store)  # kept again, with what was worked out
    assert json.loads(data)["definitions"]["is_ready"][4] == "number" and json.loads(data)["parts"] == {}
    parsed_texts.clear()
    assert _scan_edited(project_tree, store, TRAIN + "\n\nSTEPS = 11\n") == ["FX001"]
    assert parsed_texts == ["import torch"]  # train.py alone
    # The module edited: its summary is made again, from its new text.
    (project_tree / "helpers.py").write_text(HELPERS.replace("-> bool", "-> torch.Tensor"))
    parsed_texts.clear()
    assert _scan_edited(project_tree, store, TRAIN + "\n\nSTEPS = 20\n") == ["FX101", "FX001"]  # now a tensor's truth
    # (and helpers.py whole at last: whether ``is_ready`` certainly returns a tensor needs its analysis)
    assert parsed_texts == ["import torch", "import torch", "def is_ready(x) -> torch.Tensor:", "import torch"]
    assert len(_summary_rows(store)) == 2


def test_a_kept_summary_that_does_not_read_back_is_made_again(project_tree, parsed_texts):
    store = project_tree / "kept"
    assert _scan_edited(project_tree, store, TRAIN) == ["FX001"]
    for n, broken in enumerate(['{"digest": "x"}', "[1, 2]", "not json",
                                '{"digest": "D", "names": [], "aliases": {}, "origins": {}, '
                                '"definitions": {"is_ready": ["function", [], [], false, "no such kind", false, null]}}']):
        ((_, data),) = _summary_rows(store)
        broken = broken.replace("D", json.loads(data)["digest"]) if n == 3 else broken
        _change(store, f"UPDATE summaries SET data = '{broken}'")
        parsed_texts.clear()
        assert _scan_edited(project_tree, store, TRAIN + f"\n\nSTEPS = {n}\n") == ["FX001"]
        # helpers.py's outline parsed again (and kept again), and ``is_ready`` alone
        assert parsed_texts == ["import torch", "import torch", "def is_ready(x) -> bool:"]


def test_no_summary_is_kept_without_the_cache_or_for_a_module_nobody_asks_about(project_tree, monkeypatch):
    store = project_tree / "kept"
    api.scan(["helpers.py"], cache=store, jobs=1)  # asks about no other module
    assert _summary_rows(store) == []
    monkeypatch.setenv("FIXITEM_CACHE_DIR", str(project_tree / "elsewhere"))
    api.scan(["train.py"], cache=False, jobs=1)
    assert not (project_tree / "elsewhere").exists()


def _three_modules(tmp_path, monkeypatch, train: str) -> Path:
    """``train.py`` (the text ``train``), ``m.py`` and ``m2.py``, which ``m.py`` imports from,
    in the current folder; the folder of the cache the tests keep results in."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "m2.py").write_text("import torch\n\n\ndef g(x):\n    return torch.zeros(3).sum()\n\n\n"
                                    "class Base2(torch.nn.Module):\n    pass\n")
    (tmp_path / "m.py").write_text("from m2 import Base2, g\n\n\ndef f(x):\n    return g(x)\n\n\n"
                                   "class Base(Base2):\n    pass\n")
    (tmp_path / "train.py").write_text(train)
    return tmp_path / "kept"


def test_a_kept_result_is_dropped_when_a_module_read_through_another_changes(tmp_path, monkeypatch):
    """``train.py`` uses ``f`` of ``m``, which returns what ``g`` of ``m2`` returns: the
    result depends on ``m2`` too, though ``train.py`` does not import it."""
    store = _three_modules(tmp_path, monkeypatch, (
        "import torch\nfrom m import f\n\n\ndef step(x: torch.Tensor):\n    loss = f(x)\n    if loss > 0:\n"
        "        print('positive')\n"))

    assert _scan_rules(store) == ["FX101"]  # ``loss`` is a tensor
    (tmp_path / "m2.py").write_text((tmp_path / "m2.py").read_text().replace(
        "return torch.zeros(3).sum()", "return float(torch.zeros(3).sum().item())"))
    assert _scan_rules(store) == []  # now a float: the kept result is not used
    assert _scan_rules(False) == []  # as without the cache


def test_a_kept_result_is_dropped_when_a_base_class_read_through_another_module_changes(tmp_path, monkeypatch):
    """``Base`` of ``m`` is an ``nn.Module`` through ``Base2`` of ``m2``: calling an instance
    gives a tensor, until ``Base2`` is no module."""
    store = _three_modules(tmp_path, monkeypatch, (
        "import torch\nfrom m import Base\n\n\ndef step(x):\n    out = Base()(x)\n    if out > 0:\n"
        "        print('positive')\n"))

    assert _scan_rules(store) == ["FX101"]
    ((_, data, _),) = _rows(store)
    assert sorted(Path(p).name for p in json.loads(data)["depends"]) == ["m.py", "m2.py"]
    (tmp_path / "m2.py").write_text((tmp_path / "m2.py").read_text().replace("(torch.nn.Module)", "(object)"))
    assert _scan_rules(store) == []


def test_a_kept_result_depends_on_the_modules_its_traced_calls_were_followed_into(tmp_path, monkeypatch):
    """The functions of other modules that a file's traced code calls are kept with its result
    (they are traced too): found through ``m``, defined in ``m2``."""
    from fixitem.codemods.model import project

    monkeypatch.chdir(tmp_path)
    (tmp_path / "m2.py").write_text("def helper(x):\n    return x * 2\n")
    (tmp_path / "m.py").write_text("from m2 import helper\n")
    (tmp_path / "model.py").write_text(
        "import torch\nfrom m import helper\n\n\nclass Net(torch.nn.Module):\n    def forward(self, x):\n"
        "        return helper(x)\n")
    project.forget()
    api.scan(["model.py", "m2.py"], cache=tmp_path / "kept", jobs=1)
    (model,) = [kept for kept in (json.loads(data) for _, data, _ in _rows(tmp_path / "kept"))
                if kept["traced_elsewhere"]]
    assert [Path(p).name for p, _ in model["traced_elsewhere"]] == ["m2.py"]
    assert sorted(Path(p).name for p in model["depends"]) == ["m.py", "m2.py"]


def test_a_kept_result_is_dropped_when_a_module_comes_to_define_a_name_it_lacked(tmp_path, monkeypatch):

    monkeypatch.chdir(tmp_path)
    (tmp_path / "m.py").write_text("import torch\n")
    (tmp_path / "train.py").write_text(
        "import torch\nfrom m import f\n\n\ndef step(x):\n    loss = f(x)\n    if loss > 0:\n        print('positive')\n")
    store = tmp_path / "kept"

    assert _scan_rules(store) == []  # what ``f`` is, nobody knows
    (tmp_path / "m.py").write_text("import torch\n\n\ndef f(x) -> torch.Tensor:\n    return x\n")
    assert _scan_rules(store) == ["FX101"]


def test_no_summary_is_kept_in_a_run_s_cache_after_the_run(project_tree):
    from fixitem.codemods.model import project

    api.scan(["train.py"], cache=project_tree / "kept", jobs=1)
    assert project._KEPT_SUMMARIES is None  # a later analysis outside a run keeps nothing there


def test_a_kept_result_is_dropped_when_a_module_it_looked_for_is_made(tmp_path, monkeypatch):

    monkeypatch.chdir(tmp_path)
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "train.py").write_text(
        "import torch\nfrom pkg import helpers\n\n\ndef step(x):\n    loss = helpers.f(x)\n    if loss > 0:\n"
        "        print('positive')\n")
    store = tmp_path / "kept"

    assert _scan_rules(store) == []  # no ``pkg/helpers.py`` yet: what ``helpers.f`` is, nobody knows
    (tmp_path / "pkg" / "helpers.py").write_text("import torch\n\n\ndef f(x) -> torch.Tensor:\n    return x\n")
    assert _scan_rules(store) == ["FX101"]


def test_a_tree_copied_with_its_cache_is_analysed_as_itself(tmp_path, monkeypatch):
    """A result names the files its traced code was followed into by path: copied with the
    tree (``cp -r``), it sent the copy's second round to the original's files, and the copy's
    ``m2.py`` lost the print its traced code makes. A file's place is part of its key."""
    from fixitem.codemods.model import project

    original = tmp_path / "p"
    original.mkdir()
    (original / "m2.py").write_text("import torch\n\n\ndef helper(x):\n    print('in helper')\n    return x * 2\n")
    (original / "model.py").write_text(
        "import torch\nfrom m2 import helper\n\n\nclass Net(torch.nn.Module):\n    def forward(self, x):\n"
        "        return helper(x)\n")
    monkeypatch.chdir(original)
    project.forget()
    found = api.scan(["."], cache=original / ".fixitem_cache", jobs=1).findings
    assert [(Path(f.path).name, f.rule) for f in found] == [("m2.py", "FX201")]
    copy = tmp_path / "q"
    shutil.copytree(original, copy)
    monkeypatch.chdir(copy)
    project.forget()
    assert [(Path(f.path).name, f.rule) for f in api.scan(["."], cache=copy / ".fixitem_cache", jobs=1).findings] == [
        ("m2.py", "FX201")]
    kept = ResultCache("unused")
    assert kept.key("a.py", "x = 1\n", ("FX001",), None, place="/p/a.py") != kept.key(
        "a.py", "x = 1\n", ("FX001",), None, place="/q/a.py")
