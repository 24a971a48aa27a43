"""The work fixitem skips (codemods/shortcuts.py) changes no finding and no rewrite.

Every fixture is scanned and rewritten (safe and unsafe fixes) with the
shortcuts and without, and the findings (with their positions, fix tags and
notes), diffs and errors must be identical. The opt-in network test does the
same on the 304 files of a real package (``FIXITEM_NETWORK_TESTS=1``; the
pinned wheel is downloaded at run time and cached).
"""

from __future__ import annotations

import os
import zipfile
from pathlib import Path

import pytest
from fixitem.codemods import shortcuts

from fixitem import api

ROOT = Path(__file__).resolve().parent.parent


def outcomes(folder: Path) -> dict[str, object]:
    """Everything scan and apply report for ``folder``, in-process, without the cache."""
    found: dict[str, object] = {}
    options = {"cache": False, "isolated": True, "jobs": 1}
    for result in api.scan([folder], **options).files:
        found[f"scan {result.path}"] = (
            [(f.to_dict(), f.end_line, f.end_col) for f in result.findings], result.error, result.notes,
        )
    for unsafe in (False, True):
        for result in api.apply([folder], write=False, unsafe=unsafe, **options).files:
            found[f"apply unsafe={unsafe} {result.path}"] = (
                result.diff, [f.to_dict() for f in result.applied], [f.to_dict() for f in result.findings],
                result.error,
            )
    return found


def assert_same_both_ways(folder: Path) -> dict[str, object]:
    fast = outcomes(folder)
    with shortcuts.disabled():
        slow = outcomes(folder)
    assert fast.keys() == slow.keys()
    differing = [key for key in fast if fast[key] != slow[key]]
    assert not differing, differing[:10]
    return fast


def test_fixtures_give_the_same_findings_and_rewrites_without_shortcuts():
    found = assert_same_both_ways(ROOT / "fixtures")
    # the comparison covers findings, fixes and rewrites, not empty results
    assert sum(len(v[0]) for k, v in found.items() if k.startswith("scan ")) > 100
    assert sum(1 for k, v in found.items() if k.startswith("apply unsafe=True") and v[0]) > 20


def test_disabled_is_scoped():
    assert shortcuts.ENABLED
    with shortcuts.disabled():
        assert not shortcuts.ENABLED
    assert shortcuts.ENABLED


@pytest.mark.network
@pytest.mark.slow
@pytest.mark.skipif(os.environ.get("FIXITEM_NETWORK_TESTS") != "1",
                    reason="downloads a wheel: set FIXITEM_NETWORK_TESTS=1 to run")
def test_a_real_package_gives_the_same_findings_and_rewrites_without_shortcuts(tmp_path):
    from test_real_code import download

    with zipfile.ZipFile(download("timm==1.0.31")) as wheel:
        wheel.extractall(tmp_path)
    files = sorted((tmp_path / "timm").rglob("*.py"))
    assert len(files) >= 300
    found = assert_same_both_ways(tmp_path / "timm")
    assert sum(len(v[0]) for k, v in found.items() if k.startswith("scan ")) > 50


def test_scan_analyses_each_text_of_a_file_once(monkeypatch):
    """``scan`` tags fixes that interact by rewriting the file in memory both ways; every
    text (the file's own, and each rewrite) is parsed and analysed once, not once per use."""
    from fixitem.codemods.model import context

    texts: list[str] = []
    build = context.FileContext.build.__func__

    def counting(cls, path, source, *args, **kwargs):
        texts.append(source)
        return build(cls, path, source, *args, **kwargs)

    monkeypatch.setattr(context.FileContext, "build", classmethod(counting))
    path = ROOT / "fixtures" / "dtypes" / "selections.py"  # an ``if`` fixed inside another
    result = api.scan([path], cache=False, isolated=True, jobs=1)
    assert "safe" in {f.fix for f in result.findings}
    # the file and its rewrites (with safe fixes, with unsafe ones, and their next passes), once each
    assert len(texts) == len(set(texts)) >= 3
    texts.clear()
    with shortcuts.disabled():
        api.scan([path], cache=False, isolated=True, jobs=1)
    assert len(texts) > len(set(texts))


def test_collection_paused_puts_the_collector_back():
    import gc

    assert gc.isenabled()
    with shortcuts.collection_paused():
        assert not gc.isenabled()
        with shortcuts.collection_paused():  # nested: the outer block re-enables
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()
    gc.disable()
    try:
        with shortcuts.collection_paused():
            pass
        assert not gc.isenabled()  # paused by the caller: left paused
    finally:
        gc.enable()
    with pytest.raises(ZeroDivisionError):
        with shortcuts.collection_paused():
            1 / 0
    assert gc.isenabled()
    with shortcuts.disabled(), shortcuts.collection_paused():
        assert gc.isenabled()


def test_exact_type_checks_stand_for_isinstance():
    """The analysis tests ``type(node) is ast.X`` in its hottest code instead of
    ``isinstance``: the same as long as the parser makes no node of a subclass of a class
    it names (``ast.Num`` and the other deprecated aliases subclass ``ast.Constant``; the
    parser makes ``Constant`` itself)."""
    import ast

    named: set[str] = set()
    for path in (ROOT / "codemods").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Compare) and isinstance(node.ops[0], (ast.Is, ast.IsNot, ast.In)):
                left = node.left
                if isinstance(left, ast.Call) and isinstance(left.func, ast.Name) and left.func.id == "type":
                    for sub in ast.walk(node.comparators[0]):
                        if isinstance(sub, ast.Attribute) and isinstance(sub.value, ast.Name) and sub.value.id == "ast":
                            named.add(sub.attr)
    classes = {getattr(ast, name) for name in named if isinstance(getattr(ast, name, None), type)}
    assert len(classes) > 20
    checked = 0
    for path in [*(ROOT / "fixtures").rglob("*.py"), *(ROOT / "codemods").rglob("*.py")]:
        try:
            tree = ast.parse(path.read_bytes())
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            for cls in classes:
                if isinstance(node, cls):
                    assert type(node) is cls, (path, type(node), cls)
                    checked += 1
    assert checked > 10000


def test_the_last_file_is_left_to_the_exit_only_when_the_process_ends_after_the_run(tmp_path, monkeypatch):
    from fixitem.codemods.model import tree

    for name in ("a.py", "b.py"):
        (tmp_path / name).write_text("import torch\n\n\ndef f(x):\n    return x.sum().item()\n")
    released: list[int] = []
    real_forget = tree.forget

    def forget() -> None:
        released.append(len(tree.tables()[1]))
        real_forget()

    monkeypatch.setattr(tree, "forget", forget)
    monkeypatch.setattr(api, "_ENDS_AFTER_RUN", [False])
    assert len(api.scan([tmp_path], jobs=1).findings) == 2
    assert len(released) == 2 and all(released)  # each file's tables freed once it is done
    released.clear()
    api.ends_after_run()  # as the ``fixitem`` command does
    assert len(api.scan([tmp_path], jobs=1).findings) == 2
    assert len(released) == 1  # the first file's; the last one's stay for the exit
    assert tree.tables()[1]
    real_forget()
