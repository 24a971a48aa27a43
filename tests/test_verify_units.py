"""Units of the verify stage: break counting, graph syncs, conditions, numerics, loading."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest
import torch
from fixitem.verify.breaks import count_graph_breaks
from fixitem.verify.conditions import ConditionRecorder
from fixitem.verify.loading import UsageError, load_version
from fixitem.verify.numerics import (
    compare,
    compare_grads,
    derive_inputs,
    run_once,
    tolerance,
)
from fixitem.verify.syncs import InspectingBackend

THIS_FILE = str(Path(__file__).resolve())


def _print_first(x):
    print("start")  # the break comes before any traced op: explain() misses it
    return x * 2


def _print_middle(x):
    y = x + 1
    print("middle")
    return y * 2


def _clean(x):
    return torch.where(x.abs().max() > 1.0, x / 2, x)


def test_break_before_first_op_is_counted_with_its_location(capsys):
    report = count_graph_breaks(_print_first, [(torch.ones(3),)])
    assert report.count == 1
    (brk,) = report.breaks
    assert brk.file == THIS_FILE and brk.line == _print_first.__code__.co_firstlineno + 1
    assert "print" in brk.reason


def test_break_in_the_middle_and_no_break():
    assert count_graph_breaks(_print_middle, [(torch.ones(3),)]).breaks[0].line == \
        _print_middle.__code__.co_firstlineno + 2
    assert count_graph_breaks(_clean, [(torch.ones(3),), (torch.ones(5),)]).count == 0


def test_same_break_on_two_input_shapes_is_one_site():
    report = count_graph_breaks(_print_middle, [(torch.ones(3),), (torch.ones(4),), (torch.ones(5),)])
    assert report.count == 1


def test_inspecting_backend_finds_captured_item_and_data_dependent_ops():
    def f(x):
        return x * x.sum().item() + x[x > 0].sum()

    backend = InspectingBackend("eager")
    torch._dynamo.reset()
    torch.compile(f, backend=backend, fullgraph=True)(torch.randn(6))
    assert [s.op for s in backend.scalar_reads] == ["item"]
    assert backend.scalar_reads[0].file == THIS_FILE
    assert len(backend.data_dependent) == 1
    torch._dynamo.reset()


def test_condition_recorder_tracks_where_and_clamp_outcomes():
    def g(x):
        y = torch.where(x > 0, x, -x)
        z = x.clamp(min=0.0)
        return y + z + torch.maximum(x, torch.tensor(5.0))

    recorder = ConditionRecorder(THIS_FILE)
    with recorder:
        g(torch.tensor([1.0, 2.0]))
    sites = {c.op: c for c in recorder.results()}
    assert set(sites) == {"where", "Tensor.clamp", "maximum"}
    assert sites["where"].seen == "only true"
    assert sites["Tensor.clamp"].seen == "only inactive"
    assert sites["maximum"].seen == "only active"
    with recorder:
        g(torch.tensor([-1.0, 7.0]))
    assert all(c.both_seen for c in recorder.results())


def test_condition_recorder_ignores_other_files():
    recorder = ConditionRecorder("/somewhere/else.py")
    with recorder:
        torch.where(torch.tensor([True]), torch.ones(1), torch.zeros(1))
    assert recorder.results() == []


def test_compare_nested_outputs_and_dtypes():
    a = {"y": (torch.ones(2), [torch.tensor([1, 2])]), "n": 3}
    assert compare(a, {"y": (torch.ones(2), [torch.tensor([1, 2])]), "n": 3}) == []
    assert compare(a, {"y": (torch.ones(2) + 1e-7, [torch.tensor([1, 2])]), "n": 3}) == []
    diffs = compare(a, {"y": (torch.ones(2), [torch.tensor([1, 3])]), "n": 3})
    assert diffs and "exact compare" in diffs[0] and "output['y'][1][0]" in diffs[0]
    assert "dtype changed float32 -> float64" in compare(torch.ones(2), torch.ones(2, dtype=torch.float64))[0]
    assert "dtype changed int64 -> float32" in compare(torch.tensor(3), torch.tensor(3.0))[0]
    assert "type changed float -> Tensor" in compare(1.5, torch.tensor(1.5))[0]
    assert compare(torch.tensor([float("nan")]), torch.tensor([float("nan")])) == []
    # Compiled comparisons are looser than eager ones.
    assert compare(torch.ones(2), torch.ones(2) * (1 + 5e-5), "eager")
    assert not compare(torch.ones(2), torch.ones(2) * (1 + 5e-5), "compiled")
    assert tolerance(torch.int32, "compiled") == (0.0, 0.0)


def test_none_gradient_equals_zero_gradient():
    assert compare_grads({"p": None}, {"p": torch.zeros(3)}, "eager") == []
    assert compare_grads({"p": None}, {"p": torch.ones(3)}, "eager")


def test_run_once_backpropagates_a_fixed_projection():
    lin = torch.nn.Linear(3, 2)
    r1 = run_once(lin, (torch.ones(1, 3),))
    r2 = run_once(lin, (torch.ones(1, 3),))
    assert r1.backward and set(r1.grads) == {"param weight", "param bias"}
    assert compare_grads(r1.grads, r2.grads, "eager") == []
    assert lin.weight.grad is None  # gradients are collected and cleared


def test_derive_inputs_scales_floating_tensors_only():
    named = derive_inputs([(torch.ones(2), torch.tensor([1, 2]), 3.0)], scales=(0.0, 2.0))
    assert [n.name for n in named] == ["input 0", "input 0 x0", "input 0 x2"]
    assert torch.equal(named[2].args[0], torch.full((2,), 2.0))
    assert torch.equal(named[2].args[1], torch.tensor([1, 2])) and named[2].args[2] == 3.0


def _write(folder: Path, name: str, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(textwrap.dedent(text))
    return path


def test_two_versions_with_the_same_sibling_name_get_their_own_sibling(tmp_path):
    for tag in ("a", "b"):
        _write(tmp_path / tag, "helper.py", f"TAG = {tag!r}\n")
        _write(tmp_path / tag, "model.py", """
            import torch
            import helper

            def make():
                return (lambda x: x), (torch.ones(1),)
            """)
    before_mods = set(sys.modules)
    va = load_version(tmp_path / "a" / "model.py", "before", "make")
    vb = load_version(tmp_path / "b" / "model.py", "after", "make")
    assert va.module.helper.TAG == "a" and vb.module.helper.TAG == "b"
    assert "helper" not in sys.modules and "helper" not in before_mods
    assert va.module.__name__ != vb.module.__name__
    assert str(tmp_path / "a") not in sys.path


def test_factory_inputs_are_normalised(tmp_path):
    path = _write(tmp_path, "m.py", """
        import torch

        def one():
            return (lambda x: x), (torch.ones(1),)

        def many():
            return (lambda x: x), [(torch.ones(1),), (torch.zeros(1),)]

        def bad():
            return (lambda x: x), torch.ones(1)
        """)
    assert len(load_version(path, "after", "one").inputs) == 1
    assert len(load_version(path, "after", "many").inputs) == 2
    with pytest.raises(UsageError, match="tuple of positional arguments"):
        load_version(path, "after", "bad")


def test_a_version_is_loaded_from_its_source_never_from_stale_bytecode(tmp_path):
    # Two versions of the file and of a module it imports, each of the same size, written
    # within the same second: Python's bytecode check (mtime in seconds, size) cannot tell
    # them apart, so a .pyc written by the first load would run in the second.
    model = _write(tmp_path, "model.py", """
        import torch
        import helper

        SCALE = 1.0

        def make():
            return (lambda x: x * SCALE), (torch.ones(1),)
        """)
    _write(tmp_path, "helper.py", "TAG = 'a'\n")
    (tmp_path / "__pycache__").mkdir()  # where Python would write the bytecode of both
    first = load_version(model, "before", "make")
    model.write_text(model.read_text().replace("SCALE = 1.0", "SCALE = 2.0"))
    (tmp_path / "helper.py").write_text("TAG = 'b'\n")
    second = load_version(model, "after", "make")
    assert (first.module.SCALE, first.module.helper.TAG) == (1.0, "a")
    assert (second.module.SCALE, second.module.helper.TAG) == (2.0, "b")
    assert list((tmp_path / "__pycache__").iterdir()) == []
