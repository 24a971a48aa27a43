"""Tests for fixitem.runtime: deferred logging and on-device accumulation."""

from __future__ import annotations

import collections
import logging
import os
import struct
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import torch
from fixitem.verify.syncs import count_host_syncs

from fixitem import runtime
from fixitem.runtime import Accumulator, Recorder

ROOT = Path(__file__).resolve().parents[1]
LOOP = ROOT / "fixtures" / "runtime" / "loop.py"


@pytest.fixture(autouse=True)
def _clean(clean_default_recorder):
    yield


# --------------------------------------------------------------------------
# record / flush: values and text


def test_values_equal_item_exactly_and_types():
    tensors = [
        torch.tensor(0.1, dtype=torch.float32),
        torch.tensor(1 / 3, dtype=torch.float64),
        torch.tensor(0.1, dtype=torch.float16),
        torch.tensor(0.1, dtype=torch.bfloat16),
        torch.tensor(2**60 + 1, dtype=torch.int64),  # not exact in float64
        torch.tensor(-5, dtype=torch.int8),
        torch.tensor(200, dtype=torch.uint8),
        torch.tensor(2**64 - 1, dtype=torch.uint64),
        torch.tensor(1 + 2j, dtype=torch.complex64),
        torch.tensor(True),
        torch.tensor([[7.5]]),  # one element, 2-d
        torch.tensor(float("nan")),
        torch.tensor(float("-inf")),
    ]
    got = []
    rec = Recorder()
    rec.record(lambda *vals: got.extend(vals), *tensors)
    rec.flush()
    expected = [t.item() for t in tensors]
    assert [type(v) for v in got] == [type(v) for v in expected]
    for a, b in zip(got, expected):
        assert struct.pack("<d", a) == struct.pack("<d", b) if isinstance(a, float) else a == b


def test_printed_text_is_byte_identical(capsys):
    losses = [torch.rand((), dtype=torch.float32) * 10 for _ in range(20)]
    for step, loss in enumerate(losses):
        print(f"step {step} loss {loss.item():.4f} raw {loss.item()} {loss.item()!r}")
    original = capsys.readouterr().out
    rec = Recorder()
    for step, loss in enumerate(losses):
        rec.record(lambda step, loss: print(f"step {step} loss {loss:.4f} raw {loss} {loss!r}"), step, loss)
    assert capsys.readouterr().out == ""
    rec.flush()
    assert capsys.readouterr().out == original


def test_arguments_captured_at_record_time_no_late_binding():
    got = []
    rec = Recorder()
    loss = torch.zeros(())
    for step in range(3):
        loss = loss + 1  # new tensor each step
        rec.record(lambda step, loss: got.append((step, loss)), step, loss)
    acc = torch.zeros(())
    rec.record(got.append, acc)
    acc.add_(5)  # in-place after record: the value at record time is replayed
    rec.record(got.append, acc)
    acc += 1
    rec.flush()
    assert got[:3] == [(0, 1.0), (1, 2.0), (2, 3.0)]
    assert got[3:] == [0.0, 5.0]
    assert acc.item() == 6.0


def test_nested_containers_and_kwargs():
    Point = collections.namedtuple("Point", "x y")
    got = []
    rec = Recorder()
    loss, step = torch.tensor(0.25), torch.tensor(3)
    rec.record(
        lambda d, lst, tup, pt, *, key: got.append((d, lst, tup, pt, key)),
        {"loss": loss, "step": step, "name": "run"},
        [loss, [step, "x"]],
        (loss, 1),
        Point(loss, 2),
        key={"inner": (step,)},
    )
    rec.flush()
    d, lst, tup, pt, key = got[0]
    assert d == {"loss": 0.25, "step": 3, "name": "run"}
    assert lst == [0.25, [3, "x"]]
    assert tup == (0.25, 1)
    assert isinstance(pt, Point) and pt == (0.25, 2)
    assert key == {"inner": (3,)} and type(key["inner"][0]) is int


def test_multi_element_tensor_rejected_at_record_time():
    rec = Recorder()
    with pytest.raises(TypeError, match="one-element"):
        rec.record(print, torch.ones(3))
    with pytest.raises(TypeError, match="one-element"):
        rec.record(print, {"x": [torch.ones(2)]})
    assert rec.pending() == 0


def test_non_tensor_args_pass_through_unchanged():
    sentinel = object()
    got = []
    rec = Recorder()
    rec.record(lambda a, b, c: got.append((a, b, c)), sentinel, 1.5, None)
    rec.flush()
    assert got == [(sentinel, 1.5, None)] and got[0][0] is sentinel


# --------------------------------------------------------------------------
# flush triggers and configuration


def test_flush_every_triggers_automatically_and_pending_counts():
    got = []
    rec = Recorder(flush_every=3)
    rec.record(got.append, torch.tensor(1))
    rec.record(got.append, torch.tensor(2))
    assert got == [] and rec.pending() == 2
    rec.record(got.append, torch.tensor(3))
    assert got == [1, 2, 3] and rec.pending() == 0
    rec.set_flush_every(1)
    rec.record(got.append, 4)
    assert got == [1, 2, 3, 4]
    with pytest.raises(ValueError):
        rec.set_flush_every(0)


def test_module_level_api(capsys):
    runtime.configure(flush_every=5)
    runtime.configure(flush_every=5)  # idempotent
    assert runtime._default.flush_every == 5
    for i in range(4):
        runtime.record(lambda i, t: print(i, t), i, torch.tensor(i * 0.5))
    assert runtime.pending() == 4 and capsys.readouterr().out == ""
    runtime.record(print, "five")
    assert runtime.pending() == 0
    assert capsys.readouterr().out == "0 0.0\n1 0.5\n2 1.0\n3 1.5\nfive\n"
    runtime.set_flush_every(2)
    assert runtime._default.flush_every == 2
    runtime.configure()  # no arguments: no change
    assert runtime._default.flush_every == 2


def test_env_var_wins_over_configure(monkeypatch):
    monkeypatch.setenv("FIXITEM_FLUSH_EVERY", "7")
    runtime.configure(flush_every=50)
    assert runtime._default.flush_every == 7
    monkeypatch.setenv("FIXITEM_FLUSH_EVERY", "zero")
    with pytest.raises(ValueError):
        runtime.configure(flush_every=50)


def test_env_var_read_at_import():
    env = dict(os.environ, FIXITEM_FLUSH_EVERY="13")
    out = subprocess.run(
        [sys.executable, "-c", "from fixitem import runtime; print(runtime._default.flush_every)"],
        env=env, capture_output=True, text=True, check=True,
    ).stdout
    assert out.strip() == "13"
    assert runtime.DEFAULT_FLUSH_EVERY == 100


# --------------------------------------------------------------------------
# ordering, errors, threads


def test_error_in_fn_does_not_lose_later_records():
    got = []
    rec = Recorder()

    def bad(x):
        raise ValueError(f"bad {x}")

    rec.record(got.append, torch.tensor(1))
    rec.record(bad, torch.tensor(2))
    rec.record(got.append, torch.tensor(3))
    rec.record(bad, torch.tensor(4))
    with pytest.raises(ValueError, match="bad 2"):
        rec.flush()
    assert got == [1, 3] and rec.pending() == 0


def test_error_in_auto_flush_raises_from_record():
    got = []
    rec = Recorder(flush_every=2)
    rec.record(lambda: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        rec.record(got.append, torch.tensor(9))
    assert got == [9]


def test_record_from_inside_replay_is_queued_after():
    got = []
    rec = Recorder()

    def outer(x):
        got.append(("outer", x))
        rec.record(lambda y: got.append(("inner", y)), torch.tensor(x + 100))
        rec.flush()  # re-entrant flush is a no-op, never reorders

    rec.record(outer, torch.tensor(1))
    rec.record(lambda x: got.append(("second", x)), torch.tensor(2))
    rec.flush()
    # the record made during the replay comes after everything recorded before it
    assert got == [("outer", 1), ("second", 2), ("inner", 101)]
    assert rec.pending() == 0


def test_order_across_threads():
    rec = Recorder(flush_every=16)
    seq_lock = threading.Lock()
    counter = [0]
    seen = []

    def worker():
        for _ in range(200):
            with seq_lock:  # recording order == sequence number order
                n = counter[0]
                counter[0] += 1
                rec.record(lambda n, t: seen.append((n, t)), n, torch.tensor(n))

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    rec.flush()
    assert [n for n, _ in seen] == list(range(800))
    assert all(n == t for n, t in seen)


def test_concurrent_flushes_do_not_interleave():
    rec = Recorder(flush_every=1000)
    seen = []
    for i in range(500):
        rec.record(lambda i: seen.append(i), torch.tensor(i))
    threads = [threading.Thread(target=rec.flush) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert seen == list(range(500))


# --------------------------------------------------------------------------
# host syncs


def test_record_does_not_sync_and_flush_reads_once_per_kind():
    rec = Recorder(flush_every=1000)
    sink = []
    with count_host_syncs() as at_record:
        for i in range(50):
            kind = i % 3
            t = [torch.tensor(i * 0.5), torch.tensor(i), torch.tensor(i % 2 == 0)][kind]
            rec.record(lambda i, t: sink.append((i, t)), i, t)
    assert at_record.total == 0
    with count_host_syncs() as at_flush:
        rec.flush()
    assert at_flush.by_kind["item"] == 0
    assert at_flush.by_kind["tolist"] <= 3
    assert at_flush.total == at_flush.by_kind["tolist"]
    assert len(sink) == 50 and sink[4] == (4, 4) and sink[3] == (3, 1.5) and sink[5] == (5, False)


# --------------------------------------------------------------------------
# logging


def test_logger_message_text_identical(caplog):
    logger = logging.getLogger("fixitem.test.runtime")
    loss, correct = torch.tensor(0.123456, dtype=torch.float32), torch.tensor(42)
    with caplog.at_level(logging.INFO, logger=logger.name):
        logger.info("loss %.3f acc %d", loss.item(), correct.item())
        logger.info("raw %s %r", loss.item(), correct.item())
        original = [r.getMessage() for r in caplog.records]
        caplog.clear()
        rec = Recorder()
        rec.record(lambda loss, correct: logger.info("loss %.3f acc %d", loss, correct), loss, correct)
        rec.record(lambda loss, correct: logger.info("raw %s %r", loss, correct), loss, correct)
        assert caplog.records == []
        rec.flush()
        assert [r.getMessage() for r in caplog.records] == original


# --------------------------------------------------------------------------
# exit paths (subprocesses)


ENDINGS = ["normal", "raise", "kbint", "exit"]


@pytest.fixture(scope="module")
def loop_outputs():
    """Run every (variant, ending) of fixtures/runtime/loop.py at once (in parallel)."""
    env = dict(os.environ)
    env.pop("FIXITEM_FLUSH_EVERY", None)
    procs = {
        (variant, ending): subprocess.Popen(
            [sys.executable, "-u", str(LOOP), variant, ending],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, text=True, cwd=ROOT,
        )
        for variant in ("eager", "deferred")
        for ending in ENDINGS
    }
    return {key: (p.communicate(timeout=120)[0], p.returncode) for key, p in procs.items()}


@pytest.mark.slow
@pytest.mark.parametrize("ending", ENDINGS)
def test_exit_paths_print_the_same_as_the_original(ending, loop_outputs):
    out_eager, rc_eager = loop_outputs["eager", ending]
    out_deferred, rc_deferred = loop_outputs["deferred", ending]
    assert rc_deferred == rc_eager
    assert out_deferred == out_eager
    if ending in ("raise", "kbint"):
        # the records come before the traceback
        assert out_deferred.index("step 5 loss") < out_deferred.index("Traceback")
    if ending == "normal":
        assert out_deferred.index("acc 3") < out_deferred.index("Exception in thread")
        assert out_deferred.endswith("done\n")
    if ending == "exit":
        assert rc_deferred == 3 and "step 5 loss 0.1250" in out_deferred


# --------------------------------------------------------------------------
# compiled regions

COMPILED_OUT = []


def _compiled_body(x, step):
    loss = (x * 2).sum()
    runtime.record(lambda step, loss: COMPILED_OUT.append(("lambda", step, loss)), step, loss)
    runtime.record(COMPILED_OUT.append, loss + 1)  # bound method as fn
    runtime.record(print, "compiled", loss, {"k": loss - 1})  # builtin as fn, nested dict
    return loss * 3


def test_record_in_compiled_region_no_graph_break():
    torch._dynamo.reset()
    explanation = torch._dynamo.explain(_compiled_body)(torch.ones(3), 0)
    assert explanation.graph_break_count == 0
    runtime.flush()
    COMPILED_OUT.clear()


def test_record_in_compiled_region_replays_each_call(capsys):
    torch._dynamo.reset()
    COMPILED_OUT.clear()
    frames = []

    def backend(gm, example_inputs):
        frames.append(gm)
        return gm.forward

    compiled = torch.compile(_compiled_body, fullgraph=True, backend=backend)
    runtime.configure(flush_every=1000)
    with count_host_syncs() as syncs:
        for i in range(10):
            out = compiled(torch.full((3,), float(i)), i)
            assert out.shape == ()
            runtime.record(lambda i: COMPILED_OUT.append(("eager", i)), i)  # drains the inbox
    assert syncs.total == 0
    runtime.flush()
    expected = []
    for i in range(10):
        loss = 6.0 * i
        expected += [("lambda", i, loss), loss + 1, ("eager", i)]
    assert COMPILED_OUT == expected
    printed = capsys.readouterr().out.splitlines()
    assert printed == [f"compiled {6.0 * i} {{'k': {6.0 * i - 1}}}" for i in range(10)]
    # step is specialized once, then dynamic: no recompilation per call
    assert len(frames) <= 2


def test_flush_inside_compiled_region_is_a_noop():
    torch._dynamo.reset()
    got = []

    def body(x):
        runtime.record(got.append, x.sum())
        runtime.flush()  # must not run (and must not break the graph)
        return x + 1

    compiled = torch.compile(body, fullgraph=True, backend="eager")
    expected = []
    for i in range(3):
        compiled(torch.full((2,), float(i)))
        assert got == expected  # this call's record is not emitted yet
        runtime.flush()
        expected.append(2.0 * i)
        assert got == expected


def test_compiled_records_without_eager_drain_still_correct():
    # Known limitation (see module docstring): Dynamo guards on the inbox length,
    # so consecutive compiled calls without an eager record/flush in between
    # recompile. Values stay right; a few calls stay under the recompile limit.
    torch._dynamo.reset()
    got = []

    def body(x):
        runtime.record(got.append, x.sum())
        return x + 1

    compiled = torch.compile(body, fullgraph=True, backend="eager")
    for i in range(4):
        compiled(torch.full((2,), float(i)))
    runtime.flush()
    assert got == [0.0, 2.0, 4.0, 6.0]


# --------------------------------------------------------------------------
# Accumulator


def test_accumulator_float_sum_bitwise_equal():
    gen = torch.Generator().manual_seed(0)
    losses = [torch.rand((), generator=gen, dtype=torch.float32) * 3 for _ in range(1000)]
    total = 0.0
    for loss in losses:
        total += loss.item()
    acc = Accumulator(0.0)
    with count_host_syncs() as syncs:
        for loss in losses:
            acc += loss
    assert syncs.total == 0
    assert struct.pack("<d", acc.value()) == struct.pack("<d", total)
    assert type(acc.value()) is float
    assert f"{acc:.4f}" == f"{total:.4f}" and str(acc) == str(total) and repr(acc) == repr(total)
    assert acc / 1000 == total / 1000 and 1000 / acc == 1000 / total
    assert acc * 2 == total * 2 and round(acc, 3) == round(total, 3) and float(acc) == total


def test_accumulator_mixed_python_numbers_in_order():
    items = [torch.tensor(0.1, dtype=torch.float32), 1e16, torch.tensor(1.0), -1e16, 0.3, torch.tensor(2.5, dtype=torch.float16)]
    total = 0.0
    acc = Accumulator(0.0)
    for x in items:
        total += x.item() if isinstance(x, torch.Tensor) else x
        acc += x
    assert acc.value() == total  # order matters with these magnitudes
    # Python numbers before any tensor stay on the host
    acc2 = Accumulator(1.5)
    acc2 += 2
    assert acc2._buf is None and acc2.value() == 3.5


def test_accumulator_int_stays_int_and_promotes_like_python():
    counts = [torch.tensor(i % 7) for i in range(100)]
    acc = Accumulator(0)
    total = 0
    for c in counts:
        acc += c
        total += c.item()
    acc += True
    total += True
    assert acc.value() == total and type(acc.value()) is int
    assert int(acc) == total and f"{acc:d}" == f"{total:d}" and [10, 20][acc % 2] in (10, 20)
    assert acc == total and acc >= total and not acc < total
    acc += torch.tensor(0.5)  # an int total becomes float, as in Python
    total += torch.tensor(0.5).item()
    assert acc.value() == total and type(acc.value()) is float
    acc3 = Accumulator(0)
    acc3 += 2.5
    assert type(acc3.value()) is float and acc3.value() == 2.5
    acc4 = Accumulator(3)
    acc4 -= torch.tensor(1)
    assert acc4.value() == 2 and type(acc4.value()) is int


def test_accumulator_rejects_bad_input():
    with pytest.raises(TypeError):
        Accumulator("0")
    acc = Accumulator(0.0)
    with pytest.raises(TypeError):
        acc += "x"


def test_accumulator_raises_what_item_raised_for_more_than_one_element():
    """``total += loss.item()`` raised ``RuntimeError`` with torch's message; a handler
    for it catches the accumulator's error too."""
    with pytest.raises(RuntimeError) as original:
        total = 0.0
        total += torch.ones(2).item()
    acc = Accumulator(0.0)
    with pytest.raises(RuntimeError) as deferred:
        acc += torch.ones(2)
    assert str(deferred.value) == str(original.value)


def test_accumulator_started_in_inference_mode_goes_on_outside_it():
    """Validation under ``torch.inference_mode()`` first, then a training loss: the sum
    made in inference mode is not updated in place outside it (torch forbids that)."""
    acc, total = Accumulator(0.0), 0.0
    with torch.inference_mode():
        acc += torch.tensor(0.25)
        total += torch.tensor(0.25).item()
    loss = torch.tensor(0.5, requires_grad=True) * 2
    acc += loss.detach()
    total += loss.item()
    acc -= torch.tensor(0.125)
    total -= torch.tensor(0.125).item()
    assert acc.value() == total == 1.125


def test_accumulator_detaches():
    w = torch.tensor(2.0, requires_grad=True)
    acc = Accumulator(0.0)
    acc += w * 3
    assert not acc._buf.requires_grad and acc.value() == 6.0


# --------------------------------------------------------------------------
# CUDA (skipped without a GPU; see also fixtures/runtime/cuda_check.py)

cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


@cuda
def test_cuda_batches_are_async_and_ordered():
    dev = torch.device("cuda")
    vals = [torch.randn((), device=dev) for _ in range(30)]
    ints = [torch.randint(0, 2**62, (), device=dev) for _ in range(30)]
    expected = [(v.item(), i.item()) for v, i in zip(vals, ints)]
    rec = Recorder(flush_every=5, max_outstanding=100)
    got = []
    with count_host_syncs() as syncs:
        for v, i in zip(vals, ints):
            rec.record(lambda v, i: got.append((v, i)), v, i)
    assert syncs.by_kind["item"] == 0 and syncs.by_kind["cpu"] == 0
    rec.flush()
    assert got == expected
    assert all(type(a) is float and type(b) is int for a, b in got)


@cuda
def test_cuda_max_outstanding_blocks():
    dev = torch.device("cuda")
    rec = Recorder(flush_every=1, max_outstanding=2)
    got = []
    for k in range(10):
        rec.record(got.append, torch.tensor(k, device=dev))
        assert len(rec._batches) <= 2
    rec.flush()
    assert got == list(range(10))


@cuda
def test_cuda_accumulator_bitwise():
    dev = torch.device("cuda")
    vals = [torch.rand((), device=dev) for _ in range(200)]
    acc = Accumulator(0.0)
    total = 0.0
    for v in vals:
        acc += v
        total += v.item()
    assert acc._buf.device.type == "cuda" and acc.value() == total


def test_a_value_passed_by_reference_reaches_the_call_as_itself():
    """``by_reference(x)``: a whole tensor (which a recorded value may not be) or a list of
    tensors is given to ``fn`` itself at replay, so it prints as the original printed it."""
    got = []
    h = torch.ones(2, 2, requires_grad=True) * 3
    history = [torch.tensor(0.5)]
    runtime.record(lambda loss, h, history: got.append(f"{loss} {h} {history}"),
                   torch.tensor(1.5), runtime.by_reference(h), runtime.by_reference(history))
    runtime.flush()
    assert got == [f"1.5 {h} {history}"] and "grad_fn=<MulBackward0>" in got[0]
    with pytest.raises(TypeError, match="one-element"):
        runtime.record(lambda h: None, h)  # a recorded value must still be one element


def test_by_reference_inside_a_compiled_region_breaks_no_graph():
    torch._dynamo.reset()
    got = []

    def body(x):
        y = x * 2
        runtime.record(lambda y, s: got.append((y.tolist(), s)), runtime.by_reference(y), y.sum())
        return y + 1

    compiled = torch.compile(body, fullgraph=True, backend="eager")  # fullgraph: a break raises
    compiled(torch.ones(3))
    runtime.flush()
    assert got == [([2.0, 2.0, 2.0], 6.0)]


def test_a_tensor_of_more_than_one_element_raises_what_the_original_read_raised():
    """``.item()`` of such a tensor raises ``RuntimeError``, ``float()`` ``ValueError``, a
    format spec ``TypeError``: a handler of the caller that caught the original's error
    catches the runtime's, raised where the original line read the value."""
    for original in (lambda t: t.item(), lambda t: float(t), lambda t: f"{t:.3f}"):
        try:
            original(torch.ones(2))
        except Exception as exc:  # noqa: BLE001 - what the original raised
            raised = type(exc)
        with pytest.raises(raised, match="one-element"):
            runtime.record(lambda v: print(v), torch.ones(2))
