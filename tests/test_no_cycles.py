"""Processing a file makes no reference cycles.

A run of many files pauses Python's cyclic collector while each file is
processed, and freezes what outlives the file (codemods/shortcuts.py): a
cycle made while a file is processed would never be collected in that run,
and one that reaches the file's analysis (a nested function that calls itself
holds its closure, and with it the file's whole tree) would keep that tree
alive. Every fixture is scanned and rewritten, and the collector must then
find no garbage among the objects made meanwhile.
"""

from __future__ import annotations

import ast
import gc
import shutil
from collections import Counter
from pathlib import Path

import pytest
from fixitem.codemods.driver.engine import Analyses, new_run, process, release
from fixitem.codemods.driver.source import SourceError, read_source

from fixitem.api import rules_for

ROOT = Path(__file__).resolve().parent.parent


def readable(path: Path) -> bool:
    try:
        read_source(path)
    except SourceError:  # a fixture of a file fixitem reports it cannot read
        return False
    return True


FIXTURES = [path for path in sorted((ROOT / "fixtures").rglob("*.py")) if readable(path)]


def cyclic_garbage(path: Path) -> Counter[str]:
    """The types of the objects that processing ``path`` (scan, then apply with unsafe
    fixes) left in reference cycles, and no longer reachable."""
    text = read_source(path).text
    rules = rules_for(["ALL"])

    def run() -> None:
        new_run()  # the project's modules are read again, within the check
        try:
            process(path, text, rules, analyses=Analyses())
            process(path, text, rules, fix=True, unsafe=True, analyses=Analyses())
        finally:
            release()

    run()  # first: what is imported or cached on first use is made now
    new_run()
    gc.collect()
    gc.freeze()  # the collector below looks only at objects made after this
    debug = gc.get_debug()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        run()
        gc.collect()
        return Counter(type(o).__name__ for o in gc.garbage)
    finally:
        gc.garbage.clear()
        gc.set_debug(debug)
        gc.unfreeze()
        new_run()


def test_fixtures_are_many():
    assert len(FIXTURES) > 50


@pytest.mark.parametrize("path", FIXTURES, ids=[str(p.relative_to(ROOT / "fixtures")) for p in FIXTURES])
def test_processing_a_file_leaves_no_cyclic_garbage(path):
    assert cyclic_garbage(path) == Counter()


def test_a_cycle_through_the_analysis_is_found(monkeypatch, tmp_path):
    """The check sees a cycle that holds the tree: a nested function calling itself."""
    from fixitem.codemods.model import context

    build = context.FileContext.build.__func__

    def build_with_a_cycle(cls, *args, **kwargs):
        ctx = build(cls, *args, **kwargs)

        def walk(node: ast.AST) -> int:  # calls itself: its closure holds it, and ``ctx``
            return 0 if node is ctx.module else walk(ctx.module)

        ctx._memo["walk"] = walk(ctx.module)
        ctx._memo["held"] = walk
        return ctx

    monkeypatch.setattr(context.FileContext, "build", classmethod(build_with_a_cycle))
    path = tmp_path / "train.py"
    path.write_text("import torch\n\ndef f(x):\n    return x.sum().item()\n")
    found = cyclic_garbage(path)
    assert found["Module"] >= 1 and found["cell"] >= 1


def test_a_run_in_this_process_gives_frozen_objects_back(tmp_path):
    """A run freezes what outlives each file (the collector would walk those caches after
    every file) and gives it back to the collector when it ends, unless the program that
    calls fixitem had frozen objects itself (its choice is kept)."""
    from fixitem import api

    for i in range(3):
        (tmp_path / f"m{i}.py").write_text(f"import torch\n\ndef f{i}(x):\n    return x.sum().item()\n")
    assert gc.get_freeze_count() == 0
    frozen = []
    real_freeze = gc.freeze

    def freeze() -> None:
        frozen.append(True)
        real_freeze()

    gc.freeze = freeze
    try:
        result = api.scan([tmp_path], jobs=1, cache=False, isolated=True)
    finally:
        gc.freeze = real_freeze
    assert sum(len(f.findings) for f in result.files) == 3
    assert len(frozen) == 3  # after each file
    assert gc.get_freeze_count() == 0

    gc.collect()
    gc.freeze()  # the caller's own
    try:
        before = gc.get_freeze_count()
        api.scan([tmp_path], jobs=1, cache=False, isolated=True)
        assert gc.get_freeze_count() >= before
    finally:
        gc.unfreeze()


def test_an_interactive_apply_gives_frozen_objects_back(tmp_path):
    """Answered "all", the files left run as ordinary jobs, which freeze what outlives them."""
    from fixitem import api

    for name in ("a.py", "b.py"):
        shutil.copy(ROOT / "fixtures" / "threshold" / "scale_if.py", tmp_path / name)  # one safe fix each
    frozen = []
    real_freeze = gc.freeze

    def freeze() -> None:
        frozen.append(True)
        real_freeze()

    assert gc.get_freeze_count() == 0
    gc.freeze = freeze
    try:
        result = api.apply([tmp_path], write=False, cache=False, isolated=True, confirm=lambda finding, diff: "all")
    finally:
        gc.freeze = real_freeze
    assert [len(f.applied) for f in result.files] == [1, 1] and frozen  # the second file ran as a job
    assert gc.get_freeze_count() == 0
