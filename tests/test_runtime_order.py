"""fixitem.runtime: output order by construction, capture by value, nothing lost.

The subprocess tests run fixtures/runtime/ordering.py twice, as the original
program ("eager": every value read with .item() where it is printed) and as
the rewritten one ("deferred": fixitem.runtime.record), and require the same
bytes in the same order and the same exit status.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import torch

from fixitem import runtime
from fixitem.runtime import Recorder

ROOT = Path(__file__).resolve().parents[1]
ORDERING = ROOT / "fixtures" / "runtime" / "ordering.py"


@pytest.fixture(autouse=True)
def _clean(clean_default_recorder):
    yield


# --------------------------------------------------------------------------
# capture by value (in process)


def test_in_place_update_after_record_replays_the_value_at_record_time(capsys):
    runtime.configure(flush_every=1000)
    step = torch.tensor(0)
    for _ in range(3):
        runtime.record(lambda s: print(s), step)
        step.add_(1)
    total = torch.tensor(0.5)
    runtime.record(lambda t: print(f"total {t}"), total)
    total += 2
    runtime.flush()
    assert capsys.readouterr().out == "0\n1\n2\ntotal 0.5\n"
    assert step.item() == 3 and total.item() == 2.5


def test_optimizer_step_after_record_does_not_change_the_record():
    w = torch.nn.Parameter(torch.tensor([1.0]))
    opt = torch.optim.SGD([w], lr=0.5)
    got = []
    rec = Recorder()
    for _ in range(2):
        w.grad = torch.tensor([1.0])
        rec.record(got.append, w[0])  # a view of the parameter, requires grad
        opt.step()
    rec.flush()
    assert got == [1.0, 0.5] and w.item() == 0.0


def test_only_one_element_tensors_are_deferred_values():
    rec = Recorder()
    with pytest.raises(TypeError, match=r"one-element.*shape \(4, 2\).*len\(x\)"):
        rec.record(lambda data: print(len(data)), torch.ones(4, 2))
    assert rec.pending() == 0


# --------------------------------------------------------------------------
# output order (in process, on streams of our own)


def test_write_replays_pending_records_first():
    sink = io.StringIO()
    stream = runtime._OrderedStream(sink)
    rec = Recorder(flush_every=1000)
    for i in range(3):
        rec.record(lambda v: stream.write(f"record {v}\n"), torch.tensor(i))
    stream.write("direct\n")
    assert sink.getvalue() == "record 0\nrecord 1\nrecord 2\ndirect\n"
    assert rec.pending() == 0 and runtime._order.dirty is False
    stream.writelines(["a\n", "b\n"])
    assert sink.getvalue().endswith("direct\na\nb\n")


def test_ordered_stream_behaves_like_the_original(tmp_path):
    with open(tmp_path / "out.txt", "w", encoding="utf-8") as f:
        stream = runtime._OrderedStream(f)
        assert isinstance(stream, io.TextIOWrapper)
        assert stream.fileno() == f.fileno() and stream.isatty() is False
        assert stream.encoding == "utf-8" and stream.buffer is f.buffer and stream.name == f.name
        stream.custom_attribute = 3  # set on the original
        assert f.custom_attribute == 3 and stream.custom_attribute == 3
        assert stream.write("text") == 4
        stream.flush()
    assert (tmp_path / "out.txt").read_text() == "text"
    assert stream.closed


def test_every_log_record_replays_pending_records_first():
    sink = io.StringIO()
    logger = logging.getLogger("fixitem.test.order.lib")
    handler = logging.StreamHandler(sink)  # the plain stream, not hooked itself
    logger.addHandler(handler)
    logger.propagate = False
    logger.setLevel(logging.INFO)
    try:
        rec = Recorder(flush_every=1000)
        rec.record(lambda v: logger.info("deferred %d", v), torch.tensor(1))
        rec.record(lambda v: sink.write(f"deferred write {v}\n"), torch.tensor(2))
        logger.info("library line")
        logger.debug("below the level: no replay needed")
        assert sink.getvalue() == "deferred 1\ndeferred write 2\nlibrary line\n"
        assert rec.pending() == 0
    finally:
        logger.removeHandler(handler)


@pytest.mark.parametrize("change", ["logger level", "handler level", "formatter", "disable", "handler",
                                    "logger filter", "handler filter", "stream", "disabled", "handlers",
                                    "handler level attribute", "propagate"])
def test_a_logging_configuration_change_replays_pending_records_first(change):
    sink = io.StringIO()
    logger = logging.getLogger(f"fixitem.test.order.config.{change}")
    handler = logging.StreamHandler(sink)
    logger.addHandler(handler)
    logger.propagate = False
    logger.setLevel(logging.DEBUG)
    try:
        rec = Recorder(flush_every=1000)
        rec.record(lambda v: logger.debug("step %d", v), torch.tensor(3))
        if change == "logger level":
            logger.setLevel(logging.WARNING)
        elif change == "handler level":
            handler.setLevel(logging.WARNING)
        elif change == "formatter":
            handler.setFormatter(logging.Formatter("changed: %(message)s"))
        elif change == "disable":
            logging.disable(logging.INFO)
        elif change == "logger filter":
            logger.addFilter(lambda record: False)
        elif change == "handler filter":
            handler.addFilter(lambda record: False)
        elif change == "stream":
            handler.setStream(io.StringIO())
        elif change == "disabled":
            logger.disabled = True
        elif change == "handlers":
            logger.handlers = []
        elif change == "handler level attribute":
            handler.level = logging.WARNING
        elif change == "propagate":
            logger.propagate = True  # the root logger's handlers too, from now on
        else:
            logger.removeHandler(handler)
        # The original logged "step 3" under the configuration of that moment.
        assert sink.getvalue() == "step 3\n"
        assert rec.pending() == 0
    finally:
        logging.disable(logging.NOTSET)
        logger.disabled, logger.propagate = False, False
        logger.removeHandler(handler)


def test_replayed_logging_does_not_recurse_or_reorder():
    seen = []

    class Handler(logging.Handler):
        def emit(self, record):
            seen.append(record.getMessage())

    logger = logging.getLogger("fixitem.test.order.replay")
    logger.addHandler(Handler())
    logger.propagate = False
    logger.setLevel(logging.INFO)
    rec = Recorder(flush_every=1000)
    for i in range(4):
        rec.record(lambda v: logger.info("value %d", v), torch.tensor(i))
    logger.info("after")
    assert seen == ["value 0", "value 1", "value 2", "value 3", "after"]


def test_a_write_after_a_compiled_record_replays_it_first():
    torch._dynamo.reset()
    sink = io.StringIO()
    stream = runtime._OrderedStream(sink)

    def body(x):
        runtime.record(lambda v: stream.write(f"compiled {v}\n"), x.sum())
        return x + 1

    compiled = torch.compile(body, fullgraph=True, backend="eager")
    compiled(torch.ones(2))
    assert sink.getvalue() == "" and runtime._order.dirty
    stream.write("eager\n")
    assert sink.getvalue() == "compiled 2.0\neager\n"


def test_replay_error_during_a_write_is_reported_not_raised(monkeypatch):
    err = io.StringIO()
    monkeypatch.setattr(sys, "stderr", err)
    sink = io.StringIO()
    stream = runtime._OrderedStream(sink)
    rec = Recorder(flush_every=1000)
    rec.record(lambda: 1 / 0)
    rec.record(lambda v: stream.write(f"kept {v}\n"), torch.tensor(1))
    stream.write("direct\n")
    assert sink.getvalue() == "kept 1\ndirect\n"
    assert "ZeroDivisionError" in err.getvalue()


def test_a_write_does_not_deadlock_with_a_replay_in_another_thread(monkeypatch):
    # Thread A replays a call that needs a lock held by this thread, which
    # writes: the write waits for A's replay a bounded time, then goes out.
    monkeypatch.setattr(runtime, "_WRITE_WAIT_S", 0.2)
    sink = io.StringIO()
    stream = runtime._OrderedStream(sink)
    lock = threading.Lock()
    started = threading.Event()

    def needs_lock(v):
        started.set()
        with lock:
            sink.write(f"replayed {v}\n")

    rec = Recorder(flush_every=1000)
    rec.record(needs_lock, torch.tensor(1))
    with lock:
        replayer = threading.Thread(target=rec.flush)
        replayer.start()
        assert started.wait(30)
        stream.write("written while holding the lock\n")
    replayer.join(30)
    assert not replayer.is_alive()
    assert sink.getvalue() == "written while holding the lock\nreplayed 1\n"


@pytest.mark.parametrize("fixture", ["capsys", "capfd"])
def test_a_stream_the_program_puts_in_place_keeps_working(fixture, request):
    cap = request.getfixturevalue(fixture)
    runtime.configure(flush_every=1000)
    runtime.record(lambda v: print(f"value {v}"), torch.tensor(3))
    print("direct")  # sys.stdout is the capture stream now: works, not hooked (documented)
    assert runtime.pending() == 1
    runtime.flush()
    assert cap.readouterr().out == "direct\nvalue 3\n"


def test_a_call_recorded_while_the_streams_are_replaced_runs_at_once(capsys):
    # ``redirect_stdout`` or a test's capture: replayed later, the line would reach the
    # stream put back, after the replacement was read. It runs now, as the original's did;
    # what was pending stays for the process's own stream.
    runtime.run_now_while_replaced = True
    runtime.configure(flush_every=1000)
    try:
        buffer = io.StringIO()
        with contextlib.redirect_stdout(buffer):
            runtime.record(lambda v: print(f"inside {v}"), torch.tensor(2))
            assert buffer.getvalue() == "inside 2\n"
        runtime.record(lambda v: print(f"captured {v}"), torch.tensor(3))  # capsys replaces sys.stdout
        print("after")
        assert runtime.pending() == 0
        assert capsys.readouterr().out == "captured 3\nafter\n"
    finally:
        runtime.run_now_while_replaced = False


def test_a_program_that_captures_a_deferred_line_gets_it_in_its_capture():
    # DALLE2's ``save()`` prints a checkpoint line; a caller captures it with
    # ``redirect_stdout``. Deferred, the line reached the real stdout after the capture was read.
    code = (
        "import contextlib, io, torch\n"
        "from fixitem import runtime\n"
        "runtime.record(lambda v: print(f'pending {v}'), torch.tensor(1))\n"
        "buffer = io.StringIO()\n"
        "with contextlib.redirect_stdout(buffer):\n"
        "    runtime.record(lambda v: print(f'saving at step {v}'), torch.tensor(3))\n"
        "print('captured:', repr(buffer.getvalue()))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=_env(),
                          check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "pending 1\ncaptured: 'saving at step 3\\n'\n"


def test_hooks_installed_at_import():
    code = (
        "import logging, signal, sys\n"
        "from fixitem import runtime\n"
        "assert type(sys.stdout) is runtime._OrderedStream and type(sys.stderr) is runtime._OrderedStream\n"
        "assert logging.Logger.callHandlers._fixitem_ordered and logging.shutdown._fixitem_ordered\n"
        "assert signal.getsignal(signal.SIGTERM) is runtime._on_sigterm\n"
        "print('ok')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout == "ok\n"


# --------------------------------------------------------------------------
# subprocess scenarios: the same bytes as the original program


COMBINED = "sibling,liblogger,warnings,interleave,children,threads"  # one process, in this order
RUNS = {"combined": [COMBINED], "exitmsg": ["exitmsg"], "fork": ["mp,loader"]}


def _env():
    env = dict(os.environ)
    env.pop("FIXITEM_FLUSH_EVERY", None)
    env.pop("PYTHONUNBUFFERED", None)
    return env


def _run(args, unbuffered):
    cmd = [sys.executable] + (["-u"] if unbuffered else []) + [str(ORDERING), *args]
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=_env(), cwd=ROOT, timeout=180)
    return p.stdout.decode(), p.returncode


@pytest.fixture(scope="module")
def outputs(tmp_path_factory):
    """Run every scenario in both variants (2>&1), a few processes at a time."""
    tmp = tmp_path_factory.mktemp("ordering")
    jobs = {}
    for variant in ("eager", "deferred"):
        for run, args in RUNS.items():
            jobs[run, variant, True] = [variant, *args]
        jobs["combined", variant, False] = [variant, COMBINED]  # block-buffered stdout, line-buffered stderr
        jobs["shutdown", variant, True] = [variant, "shutdown", str(tmp / f"shutdown-{variant}.log")]
    with ThreadPoolExecutor(max_workers=4) as pool:
        futures = {key: pool.submit(_run, args, key[2]) for key, args in jobs.items()}
        results = {key: f.result() for key, f in futures.items()}
    results["shutdown-logs"] = {v: (tmp / f"shutdown-{v}.log").read_text() for v in ("eager", "deferred")}
    return results


@pytest.mark.slow
@pytest.mark.parametrize(("run", "unbuffered"), [("combined", True), ("combined", False), ("exitmsg", True), ("fork", True)])
def test_same_output_in_the_same_order_as_the_original(run, unbuffered, outputs):
    out_eager, rc_eager = outputs[run, "eager", unbuffered]
    out_deferred, rc_deferred = outputs[run, "deferred", unbuffered]
    assert rc_deferred == rc_eager, out_deferred
    assert out_deferred == out_eager
    assert "Traceback" not in out_deferred


def _sections(text):
    """{scenario: its output} of a combined run."""
    parts = {}
    for chunk in text.split("== ")[1:]:
        name, _, body = chunk.partition("\n")
        parts[name] = body
    return parts


@pytest.mark.slow
def test_scenarios_print_what_they_claim(outputs):
    """Guard against a scenario that prints nothing (equal but empty)."""
    out = _sections(outputs["combined", "deferred", True][0])
    assert list(out) == COMBINED.split(",")
    lines = out["sibling"].splitlines()
    assert [line.split()[0] for line in lines] == (["Train"] * 3 + ["Test"]) * 3
    assert out["liblogger"].splitlines()[:3] == ["step 0", "train: loss 0.000", "lib INFO library says 42"]
    assert out["warnings"].count("UserWarning: deprecated thing") == 3
    assert out["warnings"].index("step 1 loss") > out["warnings"].index("deprecated thing 0")
    assert "\r4/4 [####]" in out["interleave"] and out["interleave"].index("out step 3") < out["interleave"].index("\r4/4")
    assert out["threads"] == "thread 0\nthread 1\nthread 2\ndaemon 0\ndaemon 1\n"
    assert outputs["exitmsg", "deferred", True] == ("last value 3\nstopping with a message\n", 1)
    fork = _sections(outputs["fork", "deferred", True][0])
    # the child's records are its own: the parent's pending line is printed once, before the child's
    assert fork["mp"] == "parent before 1\nmp worker value 0\nmp worker value 10\nmp worker value 20\nparent after 2 exitcode 0\n"
    assert fork["loader"].count("parent before 1") == 1
    assert [line for line in fork["loader"].splitlines() if line.startswith("loader item")] == [
        "loader item 0 value 0", "loader item 1 value 2", "loader item 2 value 4",
    ]


@pytest.mark.slow
def test_explicit_logging_shutdown_flushes_first(outputs):
    out_eager, rc_eager = outputs["shutdown", "eager", True]
    out_deferred, rc_deferred = outputs["shutdown", "deferred", True]
    assert rc_deferred == rc_eager == 0
    assert out_deferred == out_eager
    assert out_deferred.endswith("printed 7\n") and "step 2 value 3.00" in out_deferred
    logs = outputs["shutdown-logs"]
    assert logs["deferred"] == logs["eager"] == "step 0 value 0.00\nstep 1 value 1.50\nstep 2 value 3.00\n"


# --------------------------------------------------------------------------
# SIGTERM


def _run_until_sigterm(variant, how, tmp_path, n=3):
    ready = tmp_path / f"ready-{variant}-{how}"
    p = subprocess.Popen(
        [sys.executable, "-u", str(ORDERING), variant, "sigterm", how, str(ready), str(n)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=_env(), cwd=ROOT,
    )
    deadline = time.monotonic() + 120
    while not ready.exists():
        assert p.poll() is None, p.communicate()[0]
        assert time.monotonic() < deadline
        time.sleep(0.02)
    p.send_signal(signal.SIGTERM)
    out = p.communicate(timeout=120)[0].decode()
    return out, p.returncode


@pytest.mark.parametrize(("env", "installed"), [({}, True), ({"WORLD_SIZE": "2"}, False),
                                               ({"TORCHELASTIC_RUN_ID": "x"}, False), ({"SLURM_NTASKS": "1"}, True)])
def test_a_rank_of_a_group_of_processes_keeps_the_default_sigterm(env, installed):
    """Under torchrun (MPI, Slurm with tasks) SIGTERM stops the ranks left waiting in a
    collective: a Python handler would run only after the blocked C++ call returns."""
    code = "import signal\nfrom fixitem import runtime\nprint(signal.getsignal(signal.SIGTERM) is runtime._on_sigterm)\n"
    clean = {k: v for k, v in _env().items() if k not in ("WORLD_SIZE", "TORCHELASTIC_RUN_ID", "SLURM_NTASKS",
                                                           "OMPI_COMM_WORLD_SIZE", "PMI_SIZE")}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120,
                         env={**clean, **env})
    assert out.returncode == 0, out.stderr
    assert out.stdout == f"{installed}\n"


@pytest.mark.slow
@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="POSIX signals")
@pytest.mark.parametrize(("how", "status"), [("default", -signal.SIGTERM), ("before", 7), ("after", 9)])
def test_sigterm_prints_pending_records_and_keeps_the_exit_status(how, status, tmp_path):
    with ThreadPoolExecutor(max_workers=2) as pool:
        eager, deferred = pool.map(lambda v: _run_until_sigterm(v, how, tmp_path, n=50), ["eager", "deferred"])
    assert eager[1] == status
    assert deferred[1] == status
    assert deferred[0] == eager[0]
    lines = deferred[0].splitlines()
    assert lines[:50] == [f"step {i}" for i in range(50)]
    assert ("program handler ran" in lines) == (how != "default")
    assert "not reached" not in deferred[0]


@pytest.mark.slow
def test_sigterm_during_a_replay_waits_for_it_then_dies_of_the_signal():
    out, rc = _run(["deferred", "sigreplay"], unbuffered=True)
    assert rc == -signal.SIGTERM
    assert out == "first 1\nsame call\nafter 0\nafter 1\nafter 2\n"


def test_a_recorder_dropped_with_records_does_not_keep_writes_flushing():
    import gc

    rec = Recorder(flush_every=1000)
    rec.record(print, torch.tensor(1))
    del rec
    gc.collect()
    assert runtime._order.dirty
    runtime._OrderedStream(io.StringIO()).write("x")
    assert not runtime._order.dirty and runtime._order.count == 0


def test_flushing_stdout_writes_the_pending_records_before_a_hard_kill():
    """``sys.stdout.flush()`` asks for the text now: what is pending is written first, so a
    ``kill -9`` right after loses none of it."""
    script = ROOT / "fixtures" / "runtime" / "flush_then_kill.py"
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300, env=_env())
    assert done.returncode == -9
    assert done.stdout.splitlines() == ["step 0 loss 0.0000", "step 1 loss 0.2500", "step 2 loss 0.5000"]


def test_records_are_written_on_time_while_the_program_prints_nothing():
    """The 2 s promise holds in a quiet phase: the records appear while it lasts (it ends
    only when this test says so), written by the runtime's timer thread."""
    import queue

    script = ROOT / "fixtures" / "runtime" / "quiet_phase.py"
    # Unbuffered, as a terminal or `python -u` on a cluster shows the original's lines at once.
    child = subprocess.Popen([sys.executable, "-u", str(script)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             text=True, env=_env(), cwd=ROOT)
    lines: queue.Queue[str] = queue.Queue()
    reader = threading.Thread(target=lambda: [lines.put(line) for line in child.stdout], daemon=True)
    reader.start()
    seen = []
    try:
        assert lines.get(timeout=240) == "training\n"  # started (importing torch may be slow)
        while len(seen) < 3:
            seen.append(lines.get(timeout=60).rstrip("\n"))  # 2 s promised: generous on a loaded machine
    except queue.Empty:
        pass
    finally:
        child.stdin.write("end of the quiet phase\n")
        child.stdin.close()
        child.wait(timeout=120)
        reader.join(timeout=30)
    assert seen == ["step 0 loss 0.0000", "step 1 loss 0.2500", "step 2 loss 0.5000"]
    rest = []
    while not lines.empty():
        rest.append(lines.get().rstrip("\n"))
    assert rest == ["checkpoint written"] and child.returncode == 0
