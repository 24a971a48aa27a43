"""Scan tags each finding with what ``apply`` does with it. Where fixes interact, it
finds out by rewriting the file in memory; elsewhere the one analysis's tags stand.
These tests hold the shortcut to the long way round."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

import fixitem.api as api
from fixitem.codemods.driver import engine
from fixitem.codemods.driver.registry import select_rules

ROOT = Path(__file__).resolve().parent.parent


def interact(source: str, tmp_path: Path) -> bool:
    path = tmp_path / "example.py"
    path.write_text(source)
    return engine.process(path, source, select_rules()).fixes_interact


def test_fixes_of_separate_code_do_not_interact(tmp_path):
    assert not interact(
        "import torch\n\n\ndef f(x: torch.Tensor, t: torch.Tensor):\n    if t.item() > 0:\n        x = x * 2\n"
        "    if t.item() < 9:\n        x = x + 1\n    return x\n", tmp_path)


def test_a_fix_inside_another_finding_interacts(tmp_path):
    assert interact(
        "import torch\n\n\ndef f(x: torch.Tensor, a: torch.Tensor, b: torch.Tensor):\n"
        "    if a.item() > 0:\n        if b.item() > 0:\n            x = x * 2\n    return x + 1\n", tmp_path)


def test_a_fix_that_makes_a_tensor_of_a_number_interacts(tmp_path):
    assert interact(
        "import torch\n\n\ndef run(model: torch.nn.Module, xs):\n    total = 0.0\n    for x in xs:\n"
        "        total += model(x).sum().item()\n    return total\n", tmp_path)


def test_nothing_to_fix_does_not_interact(tmp_path):
    assert not interact("import torch\n\n\ndef f(t):\n    return t.item()\n", tmp_path)


@pytest.mark.parametrize("folder", ["fixtures"])
def test_scan_tags_are_those_of_rewriting_every_file_in_memory(folder, tmp_path, monkeypatch):
    """On every fixture, scan's tags and its summary counts are the same when every file
    with a fix is rewritten in memory, interacting or not."""
    shutil.copytree(ROOT / folder, tmp_path / folder)
    monkeypatch.chdir(tmp_path)
    options = {"isolated": True, "jobs": 1, "cache": False}

    def tags(result):
        return [(f.path, f.line, f.col, f.rule, f.fix, f.note) for f in result.findings]

    quick = api.scan([folder], **options)
    simulated: list[str] = []
    as_applied = api._as_applied

    def counting(path, *args):
        simulated.append(Path(path).name)
        return as_applied(path, *args)

    monkeypatch.setattr(api, "_as_applied", counting)
    assert tags(api.scan([folder], **options)) == tags(quick)
    few = len(simulated)
    monkeypatch.setattr(engine, "_fixes_interact", lambda ctx, reports: True)
    simulated.clear()
    assert tags(api.scan([folder], **options)) == tags(quick)
    assert few < len(simulated) / 2  # the shortcut is taken for most files with fixes
