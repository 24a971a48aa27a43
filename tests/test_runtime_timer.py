"""The runtime's timer: records older than ``flush_after`` are written when the program
goes quiet. Driven by hand (a clock the test moves, one look at a time, or a thread the
test wakes), so that nothing here depends on the machine's speed."""

from __future__ import annotations

import io
import logging
import sys
import threading

import pytest
import torch

from fixitem import runtime


@pytest.fixture(autouse=True)
def _clean(clean_default_recorder):
    yield


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _streams(monkeypatch):
    """``sys.stdout`` / ``sys.stderr`` as the runtime wraps them (the test runner replaced them;
    set in the test itself: the runner puts its own back between a fixture and the test)."""
    out, err = io.StringIO(), io.StringIO()
    monkeypatch.setattr(sys, "stdout", runtime._OrderedStream(out))
    monkeypatch.setattr(sys, "stderr", runtime._OrderedStream(err))
    return out, err


def test_a_look_writes_the_records_once_the_oldest_is_due(monkeypatch):
    _streams(monkeypatch)
    clock = _Clock()
    rec = runtime.Recorder(flush_every=1000, flush_after=2.0, clock=clock)
    timer = runtime._Timer()
    out = []
    rec.record(lambda v: out.append(v), torch.tensor(1))
    clock.now += 0.5
    rec.record(lambda v: out.append(v), torch.tensor(2))
    delay = timer.check()
    assert out == [] and delay is not None and 0 < delay <= timer.POLL_S  # 1.5 s left, looked at again sooner
    clock.now += 1.5  # the oldest is 2 s old: the promise is due
    assert timer.check() == 0.0 and out == [1, 2] and rec.pending() == 0
    assert timer.check() is None and timer.idle  # nothing pending: wait for a poke


def test_the_timer_does_not_write_while_the_streams_are_replaced(monkeypatch):
    """Under ``redirect_stdout`` (or a test's capture) a replay would write into the replacement."""
    monkeypatch.setattr(sys, "stdout", io.StringIO())
    clock = _Clock()
    rec = runtime.Recorder(flush_every=1000, flush_after=1.0, clock=clock)
    timer = runtime._Timer()
    out = []
    rec.record(lambda v: out.append(v), torch.tensor(1))
    clock.now += 5
    assert timer.check() == timer.POLL_S and out == [] and rec.pending() == 1
    rec.flush()


def test_a_disabled_or_stopped_timer_writes_nothing(monkeypatch):
    _streams(monkeypatch)
    clock = _Clock()
    rec = runtime.Recorder(flush_every=1000, flush_after=1.0, clock=clock)
    rec.record(lambda v: None, torch.tensor(1))
    clock.now += 5
    for change in ("enabled", "stopped"):
        timer = runtime._Timer()
        setattr(timer, change, change == "stopped")
        assert timer.check() is None and rec.pending() == 1
    rec.flush()


def test_the_thread_writes_a_due_record_when_woken_and_keeps_the_recording_threads_name(monkeypatch):
    """The thread itself: started by the first record that waits, woken by the test once its
    clock has moved. A log line replayed there names the thread that recorded it."""
    _streams(monkeypatch)
    clock = _Clock()
    rec = runtime.Recorder(flush_every=1000, flush_after=1.0, clock=clock)
    timer = runtime._Timer()
    written = threading.Event()
    seen = []

    class Handler(logging.Handler):
        def emit(self, record):
            seen.append((self.format(record), threading.current_thread().name))
            written.set()

    logger = logging.getLogger("fixitem.test.timer")
    handler = Handler()
    handler.setFormatter(logging.Formatter("%(threadName)s %(message)s"))
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False
    try:
        rec.record(lambda v: logger.info("loss %s", v), torch.tensor(3))
        timer.poke()  # what a record does for the process's timer
        assert timer.thread is not None and timer.thread.daemon
        clock.now += 1.0
        timer.wakeup.set()
        assert written.wait(timeout=60), "the timer did not write a due record"
        assert seen == [(f"{threading.current_thread().name} loss 3", "fixitem-flush")]
    finally:
        timer.stop()
        timer.thread.join(timeout=60)
        logger.removeHandler(handler)
    assert not timer.thread.is_alive()


def test_exit_waits_for_the_timer_thread_to_end(monkeypatch):
    """At exit the thread must be gone before the interpreter finalizes: a daemon thread
    that has called into torch and is still alive then can abort the process
    ("terminate called without an active exception"), where the original exited with 0.
    Here the exit comes while the thread is busy in a look (a replay writing to a slow
    pipe); the look ends when the test lets it, and the exit handler returns only after
    the thread has ended."""
    timer = runtime._Timer()
    monkeypatch.setattr(runtime, "_timer", timer)
    looking, release = threading.Event(), threading.Event()

    def slow_look():
        looking.set()
        release.wait(timeout=60)
        return None

    monkeypatch.setattr(timer, "check", slow_look)
    timer.poke()
    assert looking.wait(timeout=60), "the timer thread did not start"
    letting_go = threading.Timer(0.2, release.set)
    letting_go.start()
    try:
        runtime._at_exit()
        assert not timer.thread.is_alive()
    finally:
        release.set()
        letting_go.join()
        timer.thread.join(timeout=60)


def test_a_write_waits_for_the_timers_replay(monkeypatch):
    """Output order: a write of the program that comes while the timer replays goes after it."""
    out, _ = _streams(monkeypatch)
    clock = _Clock()
    rec = runtime.Recorder(flush_every=1000, flush_after=1.0, clock=clock)
    timer = runtime._Timer()
    started, release = threading.Event(), threading.Event()

    def slow(v):
        started.set()
        release.wait(timeout=60)
        print(f"record {v}")

    rec.record(slow, torch.tensor(1))
    clock.now += 1.0
    looking = threading.Thread(target=timer.check)
    looking.start()
    assert started.wait(timeout=60)
    writer = threading.Thread(target=lambda: print("written after"))
    writer.start()
    release.set()
    looking.join(timeout=60)
    writer.join(timeout=60)
    assert out.getvalue() == "record 1\nwritten after\n"


def test_a_record_pokes_the_timer_only_when_it_waits_for_nothing(monkeypatch):
    pokes = []
    monkeypatch.setattr(runtime._timer, "poke", lambda: pokes.append(1))
    monkeypatch.setattr(runtime._timer, "idle", True)
    runtime.record(lambda v: None, torch.tensor(1))
    assert pokes == [1]
    monkeypatch.setattr(runtime._timer, "idle", False)  # it has a deadline: no wake per record
    runtime.record(lambda v: None, torch.tensor(2))
    assert pokes == [1]
