"""Every rule's documented examples are tests: valid code is left alone,
invalid code is reported, and rewritten exactly as documented."""

from __future__ import annotations

from pathlib import Path

import pytest
from fixitem.codemods.driver.engine import process
from fixitem.codemods.driver.registry import RULE_CLASSES, all_rules
from fixitem.codemods.rule import Invalid, Valid

CASES = [
    pytest.param(cls, example, id=f"{cls.code}-{type(example).__name__.lower()}-{index}")
    for cls in RULE_CLASSES
    for index, example in enumerate(cls.examples)
]


@pytest.mark.parametrize(("cls", "example"), CASES)
def test_example(cls, example):
    path = Path("example.py")
    scanned = process(path, example.code, all_rules())
    codes = [f.rule for f in scanned.findings]
    if isinstance(example, Valid):
        assert cls.code not in codes
        return
    assert isinstance(example, Invalid)
    assert cls.code in codes
    fixed = process(path, example.code, all_rules(), fix=True, unsafe=example.unsafe)
    if example.fixed is None:
        assert all(f.rule != cls.code for f in fixed.applied)
        return
    assert fixed.error is None
    assert fixed.new_text == example.fixed
    if example.unsafe:
        safe_only = process(path, example.code, all_rules(), fix=True, unsafe=False)
        assert safe_only.new_text is None, "an unsafe example must not be fixed without --unsafe"
    again = process(path, example.fixed, all_rules(), fix=True, unsafe=example.unsafe)
    assert again.new_text is None, "a second apply must change nothing"


@pytest.mark.parametrize("cls", RULE_CLASSES, ids=lambda c: c.code)
def test_rule_is_documented(cls):
    doc = cls.documentation()
    for section in ("## What it does", "## Why is this bad?", "## Example", "## Fix safety"):
        assert section in doc, f"{cls.code} lacks {section}"
    assert any(isinstance(e, Valid) for e in cls.examples)
    assert any(isinstance(e, Invalid) for e in cls.examples)


def test_codes_are_unique():
    codes = [cls.code for cls in RULE_CLASSES]
    names = [cls.name for cls in RULE_CLASSES]
    assert len(set(codes)) == len(codes)
    assert len(set(names)) == len(names)
