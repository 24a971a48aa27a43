"""fixitem.runtime beyond stdout and logging: the metric sinks a deferred call writes
to, the process exits that skip atexit, a notebook's cells, and what a replayed
logging call says about where it was made."""

from __future__ import annotations

import io
import logging
import subprocess
import sys
import time
import types
from pathlib import Path

import pytest
import torch

from fixitem import runtime

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def _clean(clean_default_recorder):
    runtime.set_flush_every(1000)
    yield


@pytest.fixture
def fresh_sinks(monkeypatch):
    """Sinks hooked from scratch (fake modules stand in for wandb and TensorBoard)."""
    monkeypatch.setattr(runtime._Sinks, "done", set())
    monkeypatch.setattr(runtime._Sinks, "hooked", False)
    monkeypatch.setattr(runtime._Sinks, "modules_seen", -1)


def _fake_module(monkeypatch, name: str, **attrs) -> types.ModuleType:
    module = types.ModuleType(name)
    for key, value in attrs.items():
        setattr(module, key, value)
    monkeypatch.setitem(sys.modules, name, module)
    return module


def test_a_direct_wandb_log_comes_after_the_deferred_ones(monkeypatch, fresh_sinks):
    """wandb numbers `log` calls (its implicit step): a direct call while deferred ones are
    pending replays them first, whether through `wandb.log` or a run's `log`."""
    calls = []

    class Run:
        def log(self, data):
            calls.append(("run", data))

    wandb = _fake_module(monkeypatch, "wandb", log=lambda data: calls.append(("wandb", data)))
    _fake_module(monkeypatch, "wandb.sdk.wandb_run", Run=Run)
    run = Run()
    for step in range(3):
        loss = torch.tensor(float(step))
        runtime.record(lambda value: wandb.log({"loss": value}), loss)
        wandb.log({"lr": 0.1 * step})
        runtime.record(lambda value: run.log({"loss": value}), loss)
        run.log({"epoch": step})
    runtime.flush()
    expected = []
    for step in range(3):
        expected += [("wandb", {"loss": float(step)}), ("wandb", {"lr": 0.1 * step}),
                     ("run", {"loss": float(step)}), ("run", {"epoch": step})]
    assert calls == expected
    assert runtime._Sinks.hooked is False  # TensorBoard's modules are not loaded: looked at again later


def test_a_direct_tensorboard_event_comes_after_the_deferred_ones(monkeypatch, fresh_sinks):
    events = []

    class FileWriter:
        def add_event(self, event):
            events.append(event)

    _fake_module(monkeypatch, "torch.utils.tensorboard.writer", FileWriter=FileWriter)
    writer = FileWriter()
    runtime.record(lambda value: writer.add_event(("loss", value)), torch.tensor(2))
    writer.add_event(("lr", 0.5))
    runtime.flush()
    assert events == [("loss", 2), ("lr", 0.5)]


def test_a_replayed_tensorboard_event_has_the_time_it_was_recorded_at(monkeypatch, fresh_sinks):
    """TensorBoard stamps each event with ``time.time()`` unless given a ``walltime``: a
    replayed ``add_scalar`` gets the time the original line ran, an explicit one is kept."""
    events = []

    class FileWriter:
        def add_event(self, event, step=None, walltime=None):
            events.append((event, step, time.time() if walltime is None else walltime))

    _fake_module(monkeypatch, "torch.utils.tensorboard.writer", FileWriter=FileWriter)
    writer = FileWriter()
    made = []
    for step in range(2):
        made.append(time.time())
        runtime.record(lambda value, step=step: writer.add_event(("loss", value), step), torch.tensor(step))
        time.sleep(0.3)
    runtime.record(lambda value: writer.add_event(("lr", value), 2, 123.0), torch.tensor(0.5))
    runtime.flush()
    assert [(e, s) for e, s, _ in events] == [(("loss", 0), 0), (("loss", 1), 1), (("lr", 0.5), 2)]
    assert all(abs(events[i][2] - made[i]) < 0.05 for i in range(2))
    assert events[2][2] == 123.0
    writer.add_event(("direct", 1), 3)  # not replayed: the time it runs at
    assert time.time() - events[3][2] < 0.05


def test_a_replayed_logging_call_names_the_function_and_line_that_recorded_it():
    sink = io.StringIO()
    logger = logging.getLogger("fixitem.test.sinks.origin")
    handler = logging.StreamHandler(sink)
    handler.setFormatter(logging.Formatter("%(funcName)s:%(lineno)d %(message)s"))
    logger.addHandler(handler)
    logger.propagate = False
    logger.setLevel(logging.INFO)

    def train():
        line = sys._getframe().f_lineno + 1
        runtime.record(
            lambda value: logger.info("loss %d", value),
            torch.tensor(3),
        )
        return line

    try:
        line = train()
        runtime.flush()
        assert sink.getvalue() == f"train:{line} loss 3\n"  # not "<lambda>" and the lambda's line
    finally:
        logger.removeHandler(handler)


def test_a_replayed_logging_call_has_the_time_it_was_recorded_at():
    """``%(asctime)s`` shows when the original line logged, not the later flush: records made
    0.3 s apart keep their times and their gap (a training log's timestamps)."""
    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    logger = logging.getLogger("fixitem.test.sinks.times")
    handler = Keep()
    logger.addHandler(handler)
    logger.propagate = False
    logger.setLevel(logging.INFO)
    try:
        made = []
        for step in range(2):
            made.append(time.time())
            runtime.record(lambda value: logger.info("loss %.1f", value), torch.tensor(float(step)))
            time.sleep(0.3)
        flushed = time.time()
        runtime.flush()
        assert [r.getMessage() for r in records] == ["loss 0.0", "loss 1.0"]
        for record, when in zip(records, made):
            assert abs(record.created - when) < 0.05 < flushed - record.created
            assert record.msecs == int((record.created - int(record.created)) * 1000) or \
                abs(record.msecs - (record.created % 1) * 1000) < 1.0
        assert records[1].created - records[0].created > 0.25
        gap = (records[1].created - records[0].created) * 1000
        assert abs(records[1].relativeCreated - records[0].relativeCreated - gap) < 1.0
    finally:
        logger.removeHandler(handler)


def _python(code: str, tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    script = tmp_path / "script.py"
    script.write_text(code)
    return subprocess.run([sys.executable, "-u", str(script), *args], capture_output=True, text=True,
                          cwd=tmp_path, timeout=120)


def test_os_exit_replays_pending_records_first(tmp_path):
    """`os._exit` skips atexit (fail-fast code, forked children): what was printed before it
    still appears, with the same exit status."""
    code = (
        "import os, torch\n"
        "from fixitem import runtime as deferred\n"
        "loss = torch.tensor(float('nan'))\n"
        "deferred.record(lambda value: print('Loss is', value, 'stopping training'), loss)\n"
        "os._exit(3)\n"
    )
    done = _python(code, tmp_path)
    assert (done.stdout, done.returncode) == ("Loss is nan stopping training\n", 3)


NOTEBOOK_KERNEL = """
import os, sys, types

class Events:
    def __init__(self):
        self.callbacks = {"post_run_cell": []}
    def register(self, event, function):
        self.callbacks[event].append(function)

shell = types.SimpleNamespace(events=Events())
sys.modules["IPython"] = types.SimpleNamespace(get_ipython=lambda: shell)

import torch
from fixitem import runtime as deferred  # the import cell

def run_cell(body):  # how a kernel runs a cell, then fires post_run_cell
    os.write(1, f"--- cell {body.__name__}\\n".encode())  # unseen by the runtime, as a kernel's cell boundary
    body()
    for callback in shell.events.callbacks["post_run_cell"]:
        callback(types.SimpleNamespace(success=True))

def on_step(loss):
    deferred.record(lambda value: print(f"loss {value:.3f}"), loss)

def train():
    for step in range(3):
        on_step(torch.tensor(float(step)))

def evaluate():
    os.write(1, b"evaluation\\n")

run_cell(train)
run_cell(evaluate)
deferred._install_notebook_hook()  # a second time registers nothing more
assert len(shell.events.callbacks["post_run_cell"]) == 1
"""


def test_in_a_notebook_kernel_a_cell_replays_its_records_when_it_ends(tmp_path):
    done = _python(NOTEBOOK_KERNEL, tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "--- cell train", "loss 0.000", "loss 1.000", "loss 2.000", "--- cell evaluate", "evaluation",
    ]


# --------------------------------------------------------------------------
# time: a record is never held back long


class _Clock:
    """A monotonic clock the test moves by hand: what time does to the runtime, whatever the machine's speed."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_sparse_log_is_replayed_when_it_is_recorded():
    """A record that comes long after the previous one gains nothing by waiting: it is
    replayed at once (a loop that prints every 100 steps shows each line as it did)."""
    out = []
    clock = _Clock()
    rec = runtime.Recorder(flush_every=1000, flush_after=1.0, clock=clock)
    rec.record(lambda v: out.append(v), torch.tensor(1))
    assert rec.pending() == 1 and out == []  # right after the recorder was made: a burst may follow
    clock.now += 0.9
    rec.record(lambda v: out.append(v), torch.tensor(2))
    assert rec.pending() == 2 and out == []  # not sparse yet, and the oldest is 0.9 s old
    clock.now += 1.0
    rec.record(lambda v: out.append(v), torch.tensor(3))
    assert out == [1, 2, 3] and rec.pending() == 0


def test_a_burst_is_replayed_once_its_oldest_record_is_old_enough():
    out = []
    clock = _Clock()
    rec = runtime.Recorder(flush_every=1000, flush_after=0.3, clock=clock)
    for n in range(10):  # one record every 0.1 s: never sparse
        rec.record(lambda v: out.append(v), torch.tensor(n))
        clock.now += 0.1
    # The records at 0.0 .. 0.3 went out when the fourth came (the oldest was 0.3 s old),
    # and so on: what is left is younger than 0.3 s.
    assert out == list(range(len(out))) and len(out) >= 4
    assert rec.pending() == 10 - len(out) and rec.pending() <= 3
    rec.flush()
    assert out == list(range(10))


@pytest.mark.parametrize("bad", [0, -1.0])
def test_flush_after_must_be_positive(bad):
    with pytest.raises(ValueError, match="flush_after"):
        runtime.Recorder(flush_after=bad)


def test_closing_a_tensorboard_writer_replays_its_pending_records_first(monkeypatch, fresh_sinks):
    """A record replayed after `writer.close()` would open a second event file, or be lost."""
    events = []

    class SummaryWriter:
        closed = False

        def add_scalar(self, tag, value, step):
            assert not self.closed, "written after close"
            events.append((tag, value, step))

        def flush(self):
            pass

        def close(self):
            self.closed = True

    class FileWriter:
        def add_event(self, event):
            pass

    _fake_module(monkeypatch, "torch.utils.tensorboard.writer", SummaryWriter=SummaryWriter, FileWriter=FileWriter)
    writer = SummaryWriter()
    runtime.record(lambda value: writer.add_scalar("loss", value, 0), torch.tensor(3))
    writer.close()
    assert events == [("loss", 3, 0)] and runtime.pending() == 0


# --------------------------------------------------------------------------
# devices without float64 (Apple's MPS), played on the CPU


def test_values_on_a_device_without_float64_are_read_exactly(monkeypatch):
    monkeypatch.setattr(runtime, "NO_FLOAT64_DEVICES", frozenset({"cpu"}))
    values = [torch.tensor(0.1, dtype=torch.float16), torch.tensor(1 / 3, dtype=torch.bfloat16),
              torch.tensor(1 / 3, dtype=torch.float32), torch.tensor(1 / 3, dtype=torch.float64),
              torch.tensor(2**40 + 1), torch.tensor(True)]
    out = []
    for value in values:
        runtime.record(lambda v: out.append(v), value)
    runtime.flush()
    assert out == [v.item() for v in values] and [type(v) for v in out] == [float] * 4 + [int, bool]
    assert runtime._target_dtype(torch.float16, torch.device("cpu")) is torch.float32


def test_a_float_sum_on_a_device_without_float64_is_added_on_the_host_exactly(monkeypatch):
    monkeypatch.setattr(runtime, "NO_FLOAT64_DEVICES", frozenset({"cpu"}))
    losses = [torch.tensor(x, dtype=torch.float32) for x in (0.1, 0.2, 0.3)]
    total, expected = runtime.Accumulator(0), 0
    count = runtime.Accumulator(0)
    for loss in losses:
        total += loss
        expected += loss.item()
        count += torch.tensor(2)  # an integer sum stays on the device
        count += 0.5  # a Python float moves it to the host, where float64 exists
    assert total.value() == expected and type(total.value()) is float
    assert count.value() == 7.5 and total._buf is None and count._buf is None


def test_a_measurement_can_hold_records_by_count_only():
    """`fixitem verify` counts reads per call: a slow machine must not add time flushes."""
    out = []
    clock = _Clock()
    runtime._default.flush_after = 0.05  # the fixture puts the default back
    runtime._default.clock = clock
    with runtime.by_count_only():
        runtime.record(lambda v: out.append(v), torch.tensor(1))
        clock.now += 0.1
        runtime.record(lambda v: out.append(v), torch.tensor(2))
        assert out == [] and runtime.pending() == 2
    clock.now += 0.1
    runtime.record(lambda v: out.append(v), torch.tensor(3))  # by time again
    assert out == [1, 2, 3]


def test_torch_compile_trace_records_do_not_replay_pending_records():
    """torch's structured compile trace (``torch.__trace``) logs at every compile and never
    reaches the program's output; a runner that captures it (pytest 9.2) must not make
    each compile read the pending values. A record of any other logger still does."""
    out = []
    trace = logging.getLogger("torch.__trace")
    handler = logging.Handler()
    handler.emit = lambda record: None
    trace.addHandler(handler)
    try:
        runtime.record(lambda v: out.append(v), torch.tensor(1))
        trace.debug("compile step")
        assert out == [] and runtime.pending() == 1
        user = logging.getLogger("fixitem.tests.user")
        user.addHandler(handler)
        try:
            user.warning("something else is written")
        finally:
            user.removeHandler(handler)
        assert out == [1] and runtime.pending() == 0
    finally:
        trace.removeHandler(handler)
