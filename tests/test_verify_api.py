"""The verify stage's Python API on real before/after fixture files."""

from __future__ import annotations

import json
import shutil
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import commit_tree
from fixitem.verify import UsageError, run_verify

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "verify"
GOOD_BEFORE = FIXTURES / "good_before.py"


@pytest.fixture(scope="module")
def good_report():
    return run_verify(FIXTURES / "good_after.py", before=GOOD_BEFORE, backend="eager")


def test_correct_rewrite_passes(good_report):
    r = good_report
    assert r.passed, r.failures
    assert r.failures == []
    assert r.equivalent
    assert r.before.graph_breaks == 2
    assert {b.line for b in r.before.breaks} == {14, 16}
    assert all(b.file.endswith("good_before.py") for b in r.before.breaks)
    assert r.before.syncs_per_call == 2 and r.before.sync_kinds == {"item": 2}
    assert r.before.fullgraph_ok is False
    assert r.after.graph_breaks == 0
    assert r.after.fullgraph_ok is True
    assert r.after.compiled_scalar_reads == 0
    assert r.after.syncs_per_call == 0


def test_every_rewritten_condition_is_seen_both_ways(good_report):
    seen = {(c.line, c.op): c for c in good_report.conditions}
    assert set(seen) == {(14, "where"), (15, "clamp")}
    assert all(c.both_seen for c in seen.values())
    assert not any("condition at line" in w for w in good_report.warnings)


def test_numerics_cover_inputs_derived_inputs_compiled_and_gradients(good_report):
    names = [r.name for r in good_report.inputs]
    assert names[:2] == ["input 0", "input 1"]
    assert "input 1 x10" in names and "input 0 x-1" in names and len(names) == 12
    assert all(r.status == "equal" and r.compared_compiled and r.compared_grads for r in good_report.inputs)


def test_json_shape(good_report):
    data = json.loads(good_report.to_json())
    assert data["passed"] is True and data["equivalent"] is True and data["failures"] == []
    assert data["before"]["graph_breaks"] == 2 and data["before"]["syncs_per_call"] == 2
    assert data["after"]["graph_breaks"] == 0 and data["after"]["compiled_scalar_reads"] == 0
    assert data["after"]["syncs_per_call"] == 0
    assert {c["line"] for c in data["conditions"]} == {14, 15}
    assert data["conditions"][0]["both_seen"] is True
    assert {"file", "line", "reason"} <= set(data["before"]["breaks"][0])
    assert any(t["dtype"] == "float32" and t["eager_rtol"] == 1.3e-6 for t in data["tolerances"])


@pytest.mark.parametrize(
    ("after", "before", "check", "needle"),
    [
        ("wrong_flipped_after.py", "good_before.py", "numerics:", "differ"),
        ("wrong_dropped_after.py", "good_before.py", "numerics:", "differ"),
        ("wrong_dtype_after.py", "dtype_before.py", "numerics:", "dtype changed int64 -> float32"),
        ("wrong_item_after.py", "good_before.py", "syncs: the compiled after graph still reads 1 scalar",
         "wrong_item_after.py:15"),
        ("wrong_print_after.py", "good_before.py", "graph breaks:", "wrong_print_after.py:14"),
        ("wrong_grad_after.py", "good_before.py", "numerics:", "grad of param lin."),
    ],
)
def test_wrong_rewrites_fail_naming_the_reason(after, before, check, needle):
    r = run_verify(FIXTURES / after, before=FIXTURES / before, backend="eager")
    assert not r.passed
    hits = [f for f in r.failures if f.startswith(check)]
    assert hits, r.failures
    assert any(needle in f for f in hits), hits


def test_remaining_item_compiles_with_fullgraph_yet_counts_as_sync():
    r = run_verify(FIXTURES / "wrong_item_after.py", before=GOOD_BEFORE, backend="eager")
    assert r.equivalent
    assert r.after.fullgraph_ok is True  # fullgraph=True captured the .item() ...
    assert r.after.compiled_scalar_reads == 1  # ... and the graph still reads it back
    assert r.after.scalar_reads[0].op == "item" and r.after.scalar_reads[0].line == 15
    assert r.after.syncs_per_call == 1 and r.after.sync_kinds == {"item": 1}
    assert r.after.graph_breaks == 1  # without fullgraph it breaks the graph


def test_print_in_forward_breaks_and_fails_fullgraph():
    r = run_verify(FIXTURES / "wrong_print_after.py", before=GOOD_BEFORE, backend="eager")
    assert r.after.graph_breaks == 1
    assert "print" in r.after.breaks[0].reason
    assert r.after.fullgraph_ok is False
    assert any(f.startswith("fullgraph:") for f in r.failures)
    assert r.equivalent  # the numbers are right; the break is the problem
    assert any("printed" in n for n in r.notes)  # the user's print output was kept off stdout


def test_dropped_branch_is_caught_only_by_derived_inputs():
    r = run_verify(FIXTURES / "wrong_dropped_after.py", before=GOOD_BEFORE, backend="eager")
    status = {x.name: x.status for x in r.inputs}
    assert status["input 0"] == "equal"  # the factory's inputs never take the branch
    assert status["input 0 x10"] == "different"


def test_sibling_modules_of_each_version_do_not_clash():
    r = run_verify(FIXTURES / "sibling" / "after" / "model.py", before=FIXTURES / "sibling" / "before" / "model.py",
                   backend="eager")
    assert r.passed, r.failures
    # Loading in the other order works too: each version imports its own helpers.
    r2 = run_verify(FIXTURES / "sibling" / "before" / "model.py", before=FIXTURES / "sibling" / "after" / "model.py",
                    backend="eager")
    assert r2.equivalent


def test_before_from_source_resolves_siblings_from_the_after_folder():
    after = FIXTURES / "sibling" / "after" / "model.py"
    source = (FIXTURES / "sibling" / "before" / "model.py").read_text()
    r = run_verify(after, before_source=source, backend="eager")
    assert r.passed, r.failures


def _write(tmp_path: Path, name: str, body: str) -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(body))
    return path


def test_derived_inputs_where_before_raises_are_skipped_and_one_sided_conditions_reported(tmp_path):
    before = _write(tmp_path, "before.py", """
        import torch

        def f(x):
            if torch.isnan(x).any().item() or x.abs().max().item() > 5.0:
                raise ValueError("bad input")
            if x.sum().item() > 100.0:
                x = x * 0
            return x + 1

        def make():
            return f, (torch.full((4,), 0.75),)
        """)
    after = _write(tmp_path, "after.py", """
        import torch

        def f(x):
            x = torch.where(x.sum() > 100.0, x * 0, x)
            return x + 1

        def make():
            return f, (torch.full((4,), 0.75),)
        """)
    r = run_verify(after, before=before, backend="eager")
    skipped = {x.name for x in r.inputs if x.status == "skipped"}
    assert skipped == {"input 0 x10"}
    assert "before raised ValueError" in next(x for x in r.inputs if x.status == "skipped").details[0]
    (cond,) = [c for c in r.conditions if c.op == "where"]
    assert not cond.both_seen and cond.seen == "only false"
    assert any("condition at line 5" in w for w in r.warnings)
    assert r.equivalent


def test_usage_errors(tmp_path):
    with pytest.raises(UsageError, match="not found"):
        run_verify(tmp_path / "missing.py", before=GOOD_BEFORE)
    with pytest.raises(UsageError, match="factory 'nope' not found"):
        run_verify(FIXTURES / "good_after.py", before=GOOD_BEFORE, factory="nope", backend="eager")
    with pytest.raises(UsageError, match="--device"):
        run_verify(FIXTURES / "good_after.py", before=GOOD_BEFORE, device="tpu")
    with pytest.raises(UsageError, match="--backend"):
        run_verify(FIXTURES / "good_after.py", before=GOOD_BEFORE, backend="no_such_backend")
    with pytest.raises(UsageError, match="exactly one"):
        run_verify(FIXTURES / "good_after.py")
    with pytest.raises(UsageError) as info:
        run_verify(FIXTURES / "broken_import_after.py", before=GOOD_BEFORE, backend="eager")
    assert "RuntimeError: settings file is missing" in str(info.value)
    assert 'broken_import_after.py", line 10' in info.value.details


def test_factory_must_return_model_and_inputs(tmp_path):
    bad = _write(tmp_path, "bad.py", """
        import torch

        def make():
            return torch.nn.Identity()
        """)
    with pytest.raises(UsageError, match=r"pair \(model, inputs\)"):
        run_verify(bad, before=bad, backend="eager")


@pytest.mark.slow
def test_inductor_and_timeit():
    r = run_verify(FIXTURES / "good_after.py", before=GOOD_BEFORE, backend="inductor", timeit=True)
    assert r.passed, r.failures
    assert r.after.fullgraph_backend == "inductor"
    assert r.before.median_ms > 0 and r.after.median_ms > 0


def test_before_raising_on_a_factory_input_is_a_failure(tmp_path):
    before = _write(tmp_path, "before.py", """
        import torch

        def f(x):
            if x.sum().item() > 0:
                raise ValueError("positive")
            return x

        def make():
            return f, [(torch.ones(2),), (-torch.ones(2),)]
        """)
    after = _write(tmp_path, "after.py", """
        import torch

        def f(x):
            return x

        def make():
            return f, [(torch.ones(2),), (-torch.ones(2),)]
        """)
    r = run_verify(after, before=before, backend="eager")
    assert not r.passed
    assert [f for f in r.failures if f.startswith("numerics:")] == [
        "numerics: the before version raised on input 0: ValueError: positive"]


PROJECT = Path(__file__).resolve().parent.parent / "fixtures" / "verify" / "project"


@pytest.fixture()
def project_repo(tmp_path, monkeypatch):
    root = tmp_path / "project"
    shutil.copytree(PROJECT, root)
    commit_tree(root)
    shutil.copy(PROJECT.parent / "project_model_after.py", root / "pkg" / "model.py")
    monkeypatch.chdir(root)
    return root


@pytest.mark.parametrize("factory", ["checks/factories.py:make_model", "checks.factories:make_model"])
def test_factory_elsewhere_in_the_project_with_the_tree_at_a_revision(project_repo, factory):
    report = run_verify("pkg/model.py", before_ref="HEAD", factory=factory, backend="eager")
    assert report.before.path == f"HEAD:{factory}"
    assert report.before.graph_breaks == 1 and report.after.graph_breaks == 0
    assert report.before.syncs_per_call == 1 and report.after.syncs_per_call == 0
    assert report.equivalent and report.passed, report.failures
    assert [c.line for c in report.conditions] == [16]  # the after file's torch.where was watched
    assert "pkg.model" not in sys.modules  # neither version's modules are left behind


def test_factory_elsewhere_with_a_before_folder(project_repo, tmp_path):
    before = tmp_path / "before"
    shutil.copytree(PROJECT, before)
    report = run_verify("pkg/model.py", before=before, factory="checks/factories.py:make_model", backend="eager")
    assert report.before.graph_breaks == 1 and report.after.graph_breaks == 0 and report.passed


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"before_ref": "HEAD", "factory": "checks/factories.py:"}, "--factory must be"),
        ({"before_ref": "HEAD", "factory": "checks/missing.py:make_model"}, "factory file of the before version not found"),
        ({"before_ref": "HEAD", "factory": "checks.factories:build"}, "factory 'build' not found"),
        ({"before": "pkg/model.py", "factory": "checks/factories.py:make_model"}, "--before is the folder"),
    ],
)
def test_project_factory_usage_errors(project_repo, kwargs, message):
    with pytest.raises(UsageError, match=message):
        run_verify("pkg/model.py", backend="eager", **kwargs)
