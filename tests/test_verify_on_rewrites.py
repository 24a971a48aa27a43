"""Verify passes on every fixture the codemods rewrite: breaks N -> 0,
syncs N -> 0, outputs and gradients equal, each condition seen both ways."""

from __future__ import annotations

import pytest
from conftest import FIXTURES
from fixitem.verify import run_verify
from test_threshold_fixtures import FIXTURE_FILES

from fixitem import apply


@pytest.mark.parametrize(("name", "unsafe"), FIXTURE_FILES.items())
def test_verify_passes_on_rewritten_fixture(copy_fixture, name, unsafe):
    after = copy_fixture(f"threshold/{name}")
    apply([after], unsafe=unsafe)
    report = run_verify(after, before=FIXTURES / "threshold" / name, factory="make", backend="eager")
    assert report.passed, report.failures
    assert report.before.graph_breaks >= 1
    assert report.after.graph_breaks == 0
    assert report.before.syncs_per_call >= 1
    assert report.after.syncs_per_call == 0
    assert report.conditions, "the rewritten conditions must be observed"
    for condition in report.conditions:
        assert condition.true_seen and condition.false_seen, condition
