"""Deferred logging and on-device accumulation: the runtime that rewritten code imports.

fixitem rewrites a logging line that reads tensor values every step, such as
``print(f"step {step} loss {loss.item():.4f}")``, into::

    from fixitem import runtime as deferred
    deferred.record(lambda step, loss: print(f"step {step} loss {loss:.4f}"), step, loss)

and ``total += loss.item()`` into ``total = deferred.Accumulator(0.0)`` ...
``total += loss``. This module imports only torch and the standard library.

record(fn, /, *args, **kwargs)
    Captures the arguments now, by value. Every tensor among them, also inside
    list / tuple / dict values, is snapshotted: ``clone()``-d (and detached)
    on its device, a copy queued on the current stream, with no host sync, so
    an in-place update after ``record`` (``step.add_(1)``, ``total += x``, an
    optimizer step) does not change what is replayed. A recorded tensor must
    hold exactly one element (what ``.item()`` accepts); others raise
    ``NotOneElementError`` at once (a ``TypeError``, ``ValueError`` and
    ``RuntimeError``: what the original's read raised is caught where it was),
    since only scalars are deferred values (pass
    ``len(x)`` or ``x.shape[0]``, computed at record time, instead, or
    ``by_reference(x)`` for ``fn`` to get ``x`` itself at replay). Lists,
    tuples and dicts among the arguments are copied (nested ones too, not
    their other items); other arguments pass through unchanged, by reference: an object whose
    attribute changes after ``record`` is seen changed at replay, so pass
    ``trainer.iter_num``, not ``trainer`` (the codemod does). At replay each
    tensor is replaced by exactly the Python value ``.item()`` would have
    returned (``int`` for integer dtypes, ``bool`` for ``torch.bool``,
    ``float`` for floating dtypes, ``complex`` for complex), then
    ``fn(*args, **kwargs)`` is called, so the text printed or logged is byte
    for byte the original's. Cost on CPU: about 1 us per recorded tensor for
    the copy, on top of the bookkeeping.

One host transfer per flush
    A flush stacks the pending tensors per (device, kind) - integers as int64,
    floats as float64 (exact for float16 / bfloat16 / float32 / float64, so
    ``float(x)`` equals ``x.item()`` bit for bit), bools as bool - and reads each
    stack with one ``tolist()``. On CUDA the copy starts early instead:
    ``copy_(non_blocking=True)`` into pinned memory plus a ``torch.cuda.Event``;
    batches whose event is done are emitted by the next records, and the host
    blocks only on ``flush()``, at exit, or when more than ``max_outstanding``
    (default 4) batches are in flight.

Ordering guarantee (by construction)
    Whatever the process writes while records are pending comes after them:
    the runtime replays the pending records first. Importing this module
    installs the hooks that see every such write:

    * ``sys.stdout`` and ``sys.stderr`` are wrapped, so ``print``, progress
      bars, ``warnings.warn`` (which writes to ``sys.stderr``), tracebacks,
      the message of ``sys.exit("msg")`` and libraries writing to them
      replay pending records before their text, and ``sys.stdout.flush()``
      replays them before it flushes (the program asks for its text now).
      The wrapper forwards everything else to the original stream
      (``isatty``, ``fileno``, ``encoding``, ``buffer``, attributes; ``isinstance`` sees
      the original's class). When nothing is pending a write costs one
      attribute check more (about 0.1 us on CPU).
    * ``logging.Logger.callHandlers``: every LogRecord a logger hands to its
      handlers, whatever their stream (also handlers created before this
      import, which hold the original stream objects, and file handlers).
    * ``os.fork``: pending records are replayed (and the Python stream
      buffers flushed) before the fork, so a child's output comes after
      what the parent printed before starting it; the same for the other
      ways to start a child that writes to the inherited streams
      (``subprocess``, ``os.system``, ``os.posix_spawn``, a ``multiprocessing``
      spawn), without the flush (no buffer is copied into such a child).
    * the metric sinks a deferred call writes to, when the program calls
      them directly: ``wandb.log`` and a wandb run's ``log`` (wandb numbers
      the calls for its implicit step), TensorBoard's ``FileWriter.add_event``
      (``torch.utils.tensorboard`` and ``tensorboardX``: every ``add_*`` of a
      ``SummaryWriter``), and their ``flush`` / ``close`` / ``finish``, so that
      no record is replayed into a closed writer. A TensorBoard event a
      replayed record writes gets the time the original line ran as its
      ``wall_time`` (unless the call passed its own ``walltime``). Hooked once
      their module is loaded (looked at on each ``record``);
    * a change of logging configuration (``Logger.setLevel`` /
      ``addHandler`` / ``removeHandler``, ``Handler.setLevel`` /
      ``setFormatter``, ``addFilter`` / ``removeFilter`` of either,
      ``StreamHandler.setStream``, ``logging.disable``, hence ``basicConfig``
      and ``dictConfig``): pending logging calls are replayed under the
      configuration they were made under; so does assigning one of those
      attributes (``logger.disabled``, ``logger.propagate``,
      ``logger.handlers``, ``handler.stream``, ...). (Not seen: a list of
      handlers or filters changed in place, ``logger.handlers.clear()``.)

    Replaying costs the one host read that keeps the order, paid only when
    something else is written while records are pending. Records are
    replayed strictly in recording order (one order per recorder, across
    threads: a lock guards the buffers and a second, separate lock makes
    replays never interleave). Output of a replayed ``fn`` is not hooked again,
    and a record made by ``fn`` itself during a replay is queued after
    everything already recorded. If a replayed ``fn`` raises, the remaining
    records are still emitted and then the first exception is re-raised from
    the ``record``/``flush`` call that triggered the replay; when an unrelated
    write or log record triggered it, the exception is printed to stderr
    instead (at exit likewise). A write waits at most 5 s for a replay in
    another thread (a bound against a lock cycle with that thread's call).

    Not ordered against pending records: writes to file descriptors directly
    (``os.write(1, ...)``, C extensions writing to fd 1 / 2,
    ``sys.stdout.buffer``), the output of child processes (``subprocess``,
    and the workers' output beyond what is said above), and a stream the
    program put in place of ``sys.stdout`` / ``sys.stderr`` after this import
    (``sys.stdout = open(...)``, a tee, ``contextlib.redirect_stdout``,
    pytest's ``capsys``): writes to the replaced stream are not hooked (they
    work as usual). A call *recorded* while such a stream is in place is not
    deferred: it runs at once, as the original's did, so its text reaches
    the stream in place then (a capture read right after holds it); records
    pending from before stay for the stream put back, and one replayed while
    the replacement is in place writes to it. Call ``flush()`` before such a
    replacement when the order of earlier records matters. A logger class
    that overrides ``callHandlers`` is not hooked either.

Flush triggers
    * automatically once ``flush_every`` records are pending; the default is
      100: one host transfer per 100 log lines is negligible. Change it with
      ``configure(flush_every=N)`` (what the codemod inserts for
      ``--flush-every N``) or the environment variable ``FIXITEM_FLUSH_EVERY``
      (read at import; it wins over ``configure`` so that a run can be switched
      to immediate output, ``FIXITEM_FLUSH_EVERY=1``, without editing code);
    * by time, so that output still appears as a run goes: a record that comes
      2 s or more after the previous one (a sparse log, which gains nothing by
      waiting) is replayed at once, and pending records are replayed once the
      oldest is 2 s old (``Recorder(flush_after=...)``): checked at each
      ``record``, and, when the program goes quiet (a long evaluation, a
      checkpoint), by a daemon thread of this module (``fixitem-flush``, started
      by the first record that waits, asleep while nothing is pending). It takes
      the same locks as every replay: its output never interleaves with
      another replay, and a write of the program that comes meanwhile waits for
      it (at most 5 s, as for any replay in another thread). It does not write
      while ``sys.stdout`` / ``sys.stderr`` are replaced (``redirect_stdout``),
      leaves records made inside compiled regions to the program's thread, and
      on CUDA makes its stream wait (on the device) for the streams the copies
      were queued on. A forked child starts its own; at exit it stops before
      the atexit flush. A logging record it replays keeps the recording
      thread's ``thread`` / ``threadName``;
    * ``sys.stdout.flush()`` / ``sys.stderr.flush()``: the program asks for its
      text now, so what is pending is written first (a ``kill -9`` right
      after loses nothing);
    * any other output (see the ordering guarantee);
    * ``flush()``, on demand (blocks until everything is emitted);
    * never inside a ``torch.compile`` region (``torch.compiler.is_compiling()``).

Nothing is lost
    * an uncaught exception or ``KeyboardInterrupt``: ``sys.excepthook`` and
      ``threading.excepthook`` are chained so that pending records appear
      BEFORE the traceback;
    * interpreter exit (``atexit``), including ``sys.exit(n)`` and records
      made in threads (daemon threads too). atexit handlers run
      last-registered first: import this module after the libraries whose
      own atexit handler must still be open when records are replayed
      (``logging`` is imported here first for that reason; wandb /
      tensorboard writers likewise);
    * ``logging.shutdown()`` called by the program: records are replayed
      first (``from logging import shutdown`` done before this import is not
      covered);
    * SIGTERM: if the program's handler at import is the default one or a
      Python function, a handler is installed (main thread only) that
      replays pending records, then chains to the program's handler, or,
      under the default handling, flushes the Python streams, restores the
      default and re-delivers the signal, so the exit status is the one
      without fixitem (-15, 143 in a shell). A SIGTERM that arrives while the
      main thread is inside the runtime (a replay) is handled when it leaves
      it. A handler the program installs after this import replaces ours:
      it runs, and if it exits with ``sys.exit`` the atexit flush covers it.
      In a process one of a group started together (torchrun, MPI, Slurm
      with more than one task: ``WORLD_SIZE`` and the like above 1) no handler
      is installed: there SIGTERM stops the ranks left waiting in a
      collective, where a Python handler would run only after the C++ call
      returns; what is pending then is lost, as with SIGKILL.
      ``signal.getsignal(SIGTERM)`` returns our handler; an ignored SIGTERM
      or one handled in C is left alone. Other signals are not handled;
    * ``fork``: the child starts with an empty buffer (the records belong to
      the parent) and flushes its own: at exit as above, and a
      ``multiprocessing`` child (``Process``, ``Pool`` and ``DataLoader``
      workers, any start method), which ends with ``os._exit`` (no atexit)
      under fork and forkserver, through a ``multiprocessing.util.Finalize``
      run when its ``run()`` returns;
    * ``os._exit`` and ``os.abort`` (which skip atexit: fail-fast code, a
      child of a bare ``os.fork()``): pending records are replayed first, and
      the Python streams are left as they are (unflushed text is lost as it
      would have been without fixitem);
    * in a Jupyter kernel (IPython), the end of each cell (``post_run_cell``):
      a cell's records appear under that cell, also those made inside a
      function the cell calls.

Compiled regions
    ``record`` inside a function compiled with ``torch.compile(fullgraph=True)``
    causes no graph break and no host sync: Dynamo traces the snapshot of the
    tensors and their append to a plain list (``_COMPILED_INBOX``) as a side
    effect, and replays it after every call of the compiled function, with
    the values of that call (a write after the call replays them first, like
    any other record). Limitation (torch 2.13): Dynamo guards on the length
    of that list, so the compiled function is recompiled whenever it is
    entered with compiled records still in the inbox. Any ``record``/``flush``
    /``pending`` outside compiled code empties the inbox, so a loop that
    records something eagerly each step (the usual case) compiles once; a loop
    that only records inside the compiled function should call ``flush()``
    (cheap when little is pending) between calls, or it recompiles until
    ``torch._dynamo.config.recompile_limit``. Recording inside compiled
    regions from several threads at once is not supported.

What is not deferred
    ``fn`` itself (its side effects happen at replay time) and the objects
    passed to it other than tensors and their containers (captured by
    reference); multi-element tensors are rejected. Logging: a replayed
    ``lambda ...: logger.info(...)`` produces the same message text, and its
    LogRecord's ``funcName`` and ``lineno`` are those of the ``record`` call
    (the function that made the original call, and the line where the
    rewritten call starts); its times (``created``, ``msecs``,
    ``relativeCreated``: what ``%(asctime)s`` shows) and ``threadName`` are those
    of the ``record`` call. Checking the logger level at record time is the
    codemod's job.

Thread safety
    ``record``/``flush`` may be called from any thread (a DataLoader worker
    thread, a logging thread). ``Accumulator`` is not thread-safe.
"""

from __future__ import annotations

import atexit
import collections
import contextlib
import functools
import logging  # imported first so that its atexit shutdown runs after our flush
import math
import multiprocessing.util
import os
import signal
import sys
import threading
import time
import traceback
import weakref
from collections.abc import Callable
from typing import Any

import torch

__all__ = [
    "Accumulator",
    "DEFAULT_FLUSH_EVERY",
    "NotOneElementError",
    "Recorder",
    "by_reference",
    "configure",
    "flush",
    "pending",
    "record",
    "set_flush_every",
]

DEFAULT_FLUSH_EVERY = 100
ENV_FLUSH_EVERY = "FIXITEM_FLUSH_EVERY"
# Records are never held back longer than this (seconds): a record that comes this
# long after the previous one is replayed at once, and a burst is replayed once its
# oldest record is this old.
DEFAULT_FLUSH_AFTER_S = 2.0


def _env_flush_every() -> int | None:
    raw = os.environ.get(ENV_FLUSH_EVERY, "").strip()
    if not raw:
        return None
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(f"{ENV_FLUSH_EVERY} must be a positive integer, got {raw!r}") from None
    if value < 1:
        raise ValueError(f"{ENV_FLUSH_EVERY} must be a positive integer, got {raw!r}")
    return value


# --------------------------------------------------------------------------
# Capturing arguments


class _ByReference(collections.namedtuple("by_reference", "value")):
    """What :func:`by_reference` wraps (a named tuple: Dynamo traces it in compiled regions)."""

    __slots__ = ()


def by_reference(value: Any) -> Any:
    """``record(fn, ..., by_reference(x))``: pass ``x`` itself to ``fn`` at replay.

    Not snapshotted and not converted, whatever it is: a tensor stays that tensor
    (printed at replay as ``print(x)`` prints it, all its elements), a list of
    tensors stays that list. Read at replay, so a change made to it meanwhile
    shows. The codemod passes so a value it cannot tell is not a tensor (a call's
    result, an untyped parameter), rather than one read as a number.
    """
    return _ByReference(value)


class NotOneElementError(TypeError, ValueError, RuntimeError):
    """A deferred value that is not a one-element tensor. Raised where the original line
    read it, and caught by the handlers that caught the original's error: ``.item()``
    raises ``RuntimeError``, ``float(t)`` / ``int(t)`` ``ValueError``, and a tensor
    formatted with ``:.3f`` ``TypeError``."""


def _snapshot_tree(value: Any) -> Any:
    """Copy the containers of ``value`` with every tensor snapshotted.

    A tensor becomes ``detach().clone()``: a copy on its device, made by a
    kernel queued on the current stream (no host sync), so an in-place update
    after ``record`` (``step.add_(1)``, an optimizer step) does not change the
    value replayed. Written so that Dynamo can trace it (used inside compiled
    regions too).
    """
    if type(value) is _ByReference:
        return value
    if isinstance(value, torch.Tensor):
        if value.numel() != 1:
            raise NotOneElementError(
                "fixitem.runtime.record: only one-element tensors can be deferred values "
                f"(what .item() accepts); got a tensor of shape {tuple(value.shape)}. "
                "Pass what the call needs from it instead (len(x), x.shape[0], ...), "
                "evaluated at record time"
            )
        return value.detach().clone() if value.requires_grad else value.clone()
    if isinstance(value, list):
        return [_snapshot_tree(v) for v in value]
    if isinstance(value, tuple):
        items = [_snapshot_tree(v) for v in value]
        if type(value) is tuple:
            return tuple(items)
        if hasattr(value, "_fields"):  # namedtuple
            return type(value)(*items)
        return type(value)(items)
    if isinstance(value, dict):
        return {k: _snapshot_tree(v) for k, v in value.items()}
    return value


def _collect_tensors(value: Any, out: list[torch.Tensor]) -> None:
    """Append the tensors of ``value`` to ``out`` in a fixed walk order."""
    if type(value) is _ByReference:
        return
    if isinstance(value, torch.Tensor):
        out.append(value)
    elif isinstance(value, (list, tuple)):
        for v in value:
            _collect_tensors(v, out)
    elif isinstance(value, dict):
        for v in value.values():
            _collect_tensors(v, out)


def _substitute(value: Any, numbers: Any) -> Any:
    """Rebuild ``value`` with each tensor replaced by ``next(numbers)`` (same walk order)."""
    if type(value) is _ByReference:
        return value.value
    if isinstance(value, torch.Tensor):
        return next(numbers)
    if isinstance(value, list):
        return [_substitute(v, numbers) for v in value]
    if isinstance(value, tuple):
        items = [_substitute(v, numbers) for v in value]
        if type(value) is tuple:
            return tuple(items)
        if hasattr(value, "_fields"):
            return type(value)(*items)
        return type(value)(items)
    if isinstance(value, dict):
        return {k: _substitute(v, numbers) for k, v in value.items()}
    return value


class _Record:
    """One deferred call: ``fn``, its captured arguments and their tensors."""

    __slots__ = ("fn", "args", "kwargs", "tensors", "origin", "thread", "stream", "at")

    def __init__(self, fn: Callable[..., Any], args: tuple, kwargs: dict,
                 origin: tuple[str, int] | None = None) -> None:
        self.fn = fn
        self.args = args
        self.kwargs = kwargs
        self.tensors: list[torch.Tensor] = []
        self.origin = origin  # (function, line) of the ``record`` call
        # The thread that recorded (a replay in another thread logs with its name) and, for
        # CUDA tensors, the stream their copies were queued on.
        self.thread = (threading.get_ident(), threading.current_thread().name)
        self.at = time.time_ns()  # when the original line ran: the time its log records show
        self.stream: Any = None
        _collect_tensors(args, self.tensors)
        _collect_tensors(kwargs, self.tensors)
        for t in self.tensors:
            if t.is_cuda:
                self.stream = torch.cuda.current_stream(t.device)
                break

    def call(self, numbers: list[Any]) -> None:
        it = iter(numbers)
        args = _substitute(self.args, it)
        kwargs = _substitute(self.kwargs, it)
        tls = _tls
        outer, tls.origin = tls.origin, self.origin
        outer_thread, tls.thread = tls.thread, self.thread
        outer_at, tls.at = tls.at, self.at
        try:
            self.fn(*args, **kwargs)
        finally:
            tls.origin = outer
            tls.thread = outer_thread
            tls.at = outer_at


def _caller_origin() -> tuple[str, int] | None:
    """The function and line that called ``record`` (the first frame outside this module)."""
    try:
        frame = sys._getframe(2)
    except ValueError:
        return None
    while frame is not None and frame.f_globals.get("__name__") == __name__:
        frame = frame.f_back
    return None if frame is None else (frame.f_code.co_name, frame.f_lineno)


# --------------------------------------------------------------------------
# Host transfer


# Devices without float64 tensors (Apple's MPS): their values are stacked in float32, which
# holds every float16/bfloat16/float32 value exactly.
NO_FLOAT64_DEVICES = frozenset({"mps"})


def _target_dtype(dtype: torch.dtype, device: torch.device | None = None) -> torch.dtype:
    """The dtype a value is read in so that ``tolist()`` equals ``.item()`` exactly."""
    narrow = device is not None and device.type in NO_FLOAT64_DEVICES
    if dtype == torch.bool:
        return torch.bool
    if dtype.is_floating_point:
        return torch.float32 if narrow and dtype != torch.float64 else torch.float64
    if dtype.is_complex:
        return torch.complex64 if narrow and dtype != torch.complex128 else torch.complex128
    if dtype == torch.uint64:
        return torch.uint64  # does not fit in int64
    return torch.int64


class _Batch:
    """Records whose tensors are being (or have been) transferred to the host.

    One stacked tensor per (device, target dtype). On CUDA the device-to-host
    copy is started at construction (pinned memory, ``non_blocking=True``,
    an event); elsewhere the stack is read with ``tolist()`` in :meth:`values`.
    """

    def __init__(self, records: list[_Record], oldest: float = 0.0) -> None:
        self.records = records
        self.oldest = oldest  # when its oldest record came (the recorder's clock)
        tensors = [t for r in records for t in r.tensors]
        self.count = len(tensors)
        groups: dict[tuple[torch.device, torch.dtype], list[int]] = {}
        for i, t in enumerate(tensors):
            groups.setdefault((t.device, _target_dtype(t.dtype, t.device)), []).append(i)
        # (indices, tensor to read, CUDA event or None, device tensor kept alive)
        self._parts: list[tuple[list[int], torch.Tensor, Any, Any]] = []
        for (device, dtype), indices in groups.items():
            if device.type == "cuda":
                _wait_for_record_streams(device, records)
            stacked = torch.stack([tensors[i].reshape(()).to(dtype) for i in indices])
            if device.type == "cuda":
                self._parts.append(_start_cuda_copy(indices, stacked, device))
            else:
                self._parts.append((indices, stacked, None, None))

    def ready(self) -> bool:
        """Whether :meth:`values` can run without waiting for a device."""
        return all(event is None or event.query() for _, _, event, _ in self._parts)

    def values(self) -> list[Any]:
        """The Python numbers of the batch's tensors, in recording order."""
        out: list[Any] = [None] * self.count
        for indices, host, event, _ in self._parts:
            if event is not None:
                event.synchronize()
            for i, v in zip(indices, host.tolist()):
                out[i] = v
        return out


def _wait_for_record_streams(device: torch.device, records: list[_Record]) -> None:
    """Make this thread's current stream on ``device`` wait (on the device, no host sync) for
    the streams the records' copies were queued on: a batch started in another thread
    (the timer) or under another stream reads them after they are written."""
    current = torch.cuda.current_stream(device)
    seen = []
    for r in records:
        stream = r.stream
        if stream is not None and stream.device == device and stream != current and stream not in seen:
            seen.append(stream)
            current.wait_stream(stream)


def _start_cuda_copy(indices: list[int], stacked: torch.Tensor, device: torch.device):
    """Start the copy of ``stacked`` into pinned host memory; return a batch part."""
    with torch.cuda.device(device):
        host = torch.empty(stacked.shape, dtype=stacked.dtype, pin_memory=True)
        host.copy_(stacked, non_blocking=True)
        event = torch.cuda.Event()
        event.record(torch.cuda.current_stream(device))
    return (indices, host, event, stacked)


# --------------------------------------------------------------------------
# Shared state: one lock for the buffers of every recorder, one replay at a
# time, and the flag the output hooks check.


class _ThreadState(threading.local):
    depth = 0  # > 0 while this thread runs runtime code (holds _LOCK or replays)
    replaying = False  # this thread is replaying records
    in_logging = 0  # > 0 inside Logger.callHandlers (already flushed there)
    origin: tuple[str, int] | None = None  # while a record is replayed: where it was recorded
    thread: tuple[int, str] | None = None  # while a record is replayed: the thread that recorded it
    at: int | None = None  # while a record is replayed: when it was recorded (``time.time_ns()``)


class _OrderState:
    """``dirty`` is the one attribute the output hooks read on every write:
    True while records (or compiled-region records) may be pending."""

    __slots__ = ("dirty", "count")

    def __init__(self) -> None:
        self.dirty = False
        self.count = 0  # records not yet replayed, all recorders (under _LOCK)


_LOCK = threading.Lock()  # guards every recorder's _pending / _batches, _COMPILED_INBOX, _order.count
_REPLAY_LOCK = threading.RLock()  # one replay at a time, process-wide
_tls = _ThreadState()
_order = _OrderState()
# Appended to only inside torch.compile regions (traced by Dynamo as a side
# effect): (recorder, fn, args, kwargs); moved to the recorders' buffers by
# the next eager call of the runtime.
_COMPILED_INBOX: list[tuple[Any, Callable[..., Any], tuple, dict]] = []
_RECORDERS: list[weakref.ref] = []  # every Recorder, in creation order
_MAIN_IDENT = threading.main_thread().ident


class _Signals:
    """A SIGTERM that arrived while the main thread was inside the runtime."""

    deferred: tuple[int, Any] | None = None


class _InRuntime:
    """``with _IN_RUNTIME:`` marks this thread as busy inside the runtime (it may hold ``_LOCK``):
    a SIGTERM that arrives meanwhile is handled when the outermost such block is left."""

    __slots__ = ()

    def __enter__(self) -> None:
        _tls.depth += 1

    def __exit__(self, *exc: object) -> bool:
        tls = _tls
        tls.depth -= 1
        if not tls.depth and _Signals.deferred is not None:
            _leave()
        return False


_IN_RUNTIME = _InRuntime()


def _leave() -> None:
    """Run a SIGTERM handling postponed while this (main) thread was busy."""
    if _Signals.deferred is not None and threading.get_ident() == _MAIN_IDENT:
        signum, frame = _Signals.deferred
        _Signals.deferred = None
        _handle_sigterm(signum, frame)


def _drain_inbox_locked() -> None:
    items = _COMPILED_INBOX[:]
    del _COMPILED_INBOX[: len(items)]  # an append in between (another thread) stays
    for rec, fn, args, kwargs in items:
        rec._pending.append(_Record(fn, args, kwargs))
    _order.count += len(items)


# --------------------------------------------------------------------------
# Recorder


class Recorder:
    """A buffer of deferred calls; the module functions use one default instance.

    ``flush_every``: emit automatically once that many records are pending.
    ``max_outstanding``: device-to-host batches allowed in flight (CUDA) before
    a record blocks on the oldest one. ``flush_after``: seconds a record may wait:
    one that comes that long after the previous record (a sparse log) is emitted
    at once, and pending records are emitted once the oldest is that old.
    ``clock``: the monotonic clock those seconds are read from (tests pass their own).
    """

    def __init__(self, flush_every: int = DEFAULT_FLUSH_EVERY, max_outstanding: int = 4,
                 flush_after: float = DEFAULT_FLUSH_AFTER_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._pending: list[_Record] = []
        self._batches: collections.deque[_Batch] = collections.deque()
        if not flush_after > 0:
            raise ValueError(f"flush_after must be a positive number of seconds, got {flush_after!r}")
        self.flush_after = float(flush_after)
        self.clock = clock
        self._last = clock()  # when the previous record came (or the recorder was made)
        self._oldest = self._last  # when the oldest pending record came
        self.flush_every = DEFAULT_FLUSH_EVERY
        self.set_flush_every(flush_every)
        if max_outstanding < 1:
            raise ValueError("max_outstanding must be >= 1")
        self.max_outstanding = max_outstanding
        with _IN_RUNTIME:  # a SIGTERM handled now must not wait for _LOCK held here
            with _LOCK:
                _RECORDERS[:] = [r for r in _RECORDERS if r() is not None]
                _RECORDERS.append(weakref.ref(self))

    # -- configuration ----------------------------------------------------
    def set_flush_every(self, n: int) -> None:
        """Flush automatically once ``n`` (>= 1) records are pending."""
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ValueError(f"flush_every must be a positive integer, got {n!r}")
        self.flush_every = n

    # -- recording --------------------------------------------------------
    def record(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> None:
        """Defer ``fn(*args, **kwargs)``; tensors in the arguments are snapshotted now, read at flush."""
        if torch.compiler.is_compiling():
            # Traced by Dynamo: no lock (not traceable), no flush, no sync.
            _COMPILED_INBOX.append((self, fn, _snapshot_tree(args), _snapshot_tree(kwargs)))
            _order.dirty = True
            return
        if not callable(fn):
            raise TypeError(f"fixitem.runtime.record: fn must be callable, got {fn!r}")
        rec = _Record(fn, _snapshot_tree(args), _snapshot_tree(kwargs), _caller_origin())
        if not _Sinks.hooked:
            _Sinks.hook()
        if run_now_while_replaced and not _streams_in_place():
            # ``sys.stdout`` / ``sys.stderr`` are replaced (``redirect_stdout``, a test's capture,
            # a tee put in place after this import): a replay would come after the replacement
            # is read or gone. The call runs now, as the original's did; what is pending was
            # recorded for the streams put back, and a write there replays it first.
            rec.call(_Batch([rec]).values())
            return
        now = self.clock()
        with _IN_RUNTIME:
            with _LOCK:
                if _COMPILED_INBOX:
                    _drain_inbox_locked()
                sparse = now - self._last >= self.flush_after  # a sparse log gains nothing by waiting
                self._last = now
                poke = False
                if not self._pending:
                    self._oldest = now
                    poke = _timer.idle  # the timer waits for nothing: tell it a record waits
                self._pending.append(rec)
                _order.count += 1
                _order.dirty = True
                full = len(self._pending) >= self.flush_every or sparse or now - self._oldest >= self.flush_after
                if full:
                    self._start_batch_locked()
                outstanding = len(self._batches)
            if poke:
                _timer.poke()
            if outstanding:
                self._emit(block=sparse, keep=self.max_outstanding if full else None)

    def pending(self) -> int:
        """Number of records not yet emitted."""
        with _IN_RUNTIME:
            with _LOCK:
                if _COMPILED_INBOX:
                    _drain_inbox_locked()
                return len(self._pending) + sum(len(b.records) for b in self._batches)

    def flush(self) -> None:
        """Emit every pending record, blocking on device transfers as needed.

        Does nothing inside a compiled region. Re-raises the first exception
        raised by a replayed ``fn`` after emitting all the others.
        """
        if torch.compiler.is_compiling():
            return
        self._flush(wait=-1)

    def _flush(self, wait: float) -> None:
        """``flush``; ``wait``: seconds to wait for another thread's replay (-1: forever)."""
        with _IN_RUNTIME:
            with _LOCK:
                if _COMPILED_INBOX:
                    _drain_inbox_locked()
                self._start_batch_locked()
            self._emit(block=True, wait=wait)

    # -- internals --------------------------------------------------------
    def _start_batch_locked(self) -> None:
        if self._pending:
            records, self._pending = self._pending, []
            self._batches.append(_Batch(records, self._oldest))

    def _due_in_locked(self) -> float | None:
        """Seconds until the oldest record not yet emitted is ``flush_after`` old (0 or
        less: it is); None when nothing is pending."""
        if self._batches:
            oldest = self._batches[0].oldest
        elif self._pending:
            oldest = self._oldest
        else:
            return None
        return self.flush_after - (self.clock() - oldest)

    def _replay_timed(self) -> None:
        """The timer's replay: everything pending, in order, from the timer's thread.

        It leaves the compiled-region inbox alone (the thread running compiled code
        appends to it without the lock) and leaves ``_order.dirty`` set: the next
        write or record of the program's own threads settles it.
        """
        with _IN_RUNTIME:
            with _LOCK:
                self._start_batch_locked()
            self._emit(block=True, wait=_WRITE_WAIT_S, settle=False)

    def _emit(self, block: bool, keep: int | None = None, wait: float = -1, settle: bool = True) -> None:
        """Replay finished batches in order.

        ``block``: wait for every batch. Otherwise emit the ready prefix, and
        if ``keep`` is given also wait until at most ``keep`` batches remain.
        ``settle``: clear ``_order.dirty`` once nothing is left.
        """
        if _tls.replaying:
            return  # a replayed fn recorded or flushed: it stays queued, in order
        if not _REPLAY_LOCK.acquire(timeout=wait):
            return
        first_error: BaseException | None = None
        try:
            _tls.replaying = True
            while True:
                with _LOCK:
                    if not self._batches:
                        break
                    batch = self._batches[0]
                    must_wait = block or (keep is not None and len(self._batches) > keep)
                    if not must_wait and not batch.ready():
                        break
                    self._batches.popleft()
                try:
                    numbers = batch.values()
                    start = 0
                    for rec in batch.records:
                        n = len(rec.tensors)
                        try:
                            rec.call(numbers[start : start + n])
                        except BaseException as exc:  # keep emitting; re-raise later
                            if first_error is None:
                                first_error = exc
                        start += n
                finally:
                    with _LOCK:
                        _order.count -= len(batch.records)
                        if settle and _order.count <= 0 and not _COMPILED_INBOX:
                            _order.count = 0
                            _order.dirty = False
        finally:
            _tls.replaying = False
            _REPLAY_LOCK.release()
        if first_error is not None:
            raise first_error


def _recorders() -> list[Recorder]:
    return [r for r in (ref() for ref in list(_RECORDERS)) if r is not None]


def _flush_all(wait: float = -1) -> None:
    """Flush every recorder; re-raise the first replay error after all.

    ``wait``: seconds to wait for a replay running in another thread (-1:
    as long as it takes); after that, nothing is flushed.
    """
    if _tls.replaying:
        return
    with _IN_RUNTIME:
        if _REPLAY_LOCK.acquire(timeout=wait):
            _flush_all_locked()


def _flush_all_locked() -> None:
    first_error: BaseException | None = None
    try:
        for rec in _recorders():
            try:
                rec._flush(-1)  # re-enters _REPLAY_LOCK, held here
            except BaseException as exc:  # noqa: BLE001
                if first_error is None:
                    first_error = exc
        with _LOCK:  # no replay runs now: recount (a recorder dropped with records counts no more)
            live = _recorders()
            if not _COMPILED_INBOX and not any(r._pending or r._batches for r in live):
                _order.count = 0
                _order.dirty = False
    finally:
        _REPLAY_LOCK.release()
    if first_error is not None:
        raise first_error


def _report(exc: BaseException) -> None:
    try:
        print("Exception in a deferred call replayed by fixitem.runtime:", file=sys.stderr)
        traceback.print_exception(type(exc), exc, exc.__traceback__, file=sys.stderr)
    except BaseException:  # noqa: BLE001
        pass


def _flush_reporting_errors() -> None:
    """Flush for exit paths: never raises; a replay error is printed to stderr."""
    try:
        _flush_all()
    except BaseException as exc:  # noqa: BLE001
        _report(exc)


# --------------------------------------------------------------------------
# Time: records older than the promise are written when the program goes quiet


class _Timer:
    """A daemon thread that writes records once the oldest is ``flush_after`` old, when
    nothing else (a record, a write) does: a line recorded before a long evaluation or
    a checkpoint appears on time, as the original's did.

    Started by the first record that waits (never at import, never inside a compiled
    region); while nothing is pending it sleeps until a record pokes it. Each look
    (:meth:`check`) takes the same locks as every other replay, so its output never
    interleaves with another replay and a write of the program waits for it (at most
    ``_WRITE_WAIT_S``), as a write waits for another thread's replay. It does not write
    while ``sys.stdout`` / ``sys.stderr`` are replaced (``redirect_stdout``, a test's
    capture), where a replay would go to the replacement. Stopped at exit (the atexit
    flush writes the rest); a forked child starts its own. ``enabled = False`` stops
    it from writing (tests that move a recorder's clock by hand drive :meth:`check`
    themselves).
    """

    POLL_S = 0.5  # how soon it looks again when it could not write, or when a clock may have moved

    def __init__(self) -> None:
        self.thread: threading.Thread | None = None
        self.wakeup = threading.Event()
        self.idle = True  # waiting for a poke (nothing pending when it last looked)
        self.stopped = False
        self.enabled = True

    def poke(self) -> None:
        """A record waits: start the thread, or wake it to look at the new deadline."""
        if self.stopped:
            return
        self.idle = False
        if self.thread is None:
            thread = threading.Thread(target=self._run, name="fixitem-flush", daemon=True)
            try:
                thread.start()
            except RuntimeError:  # interpreter shutting down: the atexit flush covers it
                return
            self.thread = thread
        else:
            self.wakeup.set()

    def stop(self, wait_s: float = 0.0) -> None:
        """Stop looking; with ``wait_s``, wait that long for the thread to end.

        At exit the thread must be gone before the interpreter finalizes: a daemon
        thread that has called into torch (a record's ``f"{loss:.4f}"``) and is still
        alive then can abort the process ("terminate called without an active
        exception", pytorch/pytorch#38228), and the original program exited cleanly.
        """
        self.stopped = True
        self.wakeup.set()
        thread = self.thread
        if wait_s > 0 and thread is not None and thread is not threading.current_thread():
            thread.join(wait_s)

    def _run(self) -> None:
        while not self.stopped:
            try:
                delay = self.check()
            except BaseException as exc:  # noqa: BLE001 - never let the thread die silently
                _report(exc)
                delay = self.POLL_S
            if self.stopped:
                return
            if delay is None or delay > 0:
                self.wakeup.wait(delay)
            self.wakeup.clear()

    def check(self) -> float | None:
        """Write the records that are due; return how many seconds until the next look
        (0: at once; None: nothing is pending, wait for a poke)."""
        if not self.enabled or self.stopped:
            self.idle = True
            return None
        due: list[Recorder] = []
        delay: float | None = None
        with _IN_RUNTIME:
            with _LOCK:
                for rec in _recorders():
                    left = rec._due_in_locked()
                    if left is None:
                        continue
                    if left <= 0:
                        due.append(rec)
                    else:
                        delay = left if delay is None else min(delay, left)
                self.idle = not due and delay is None
        if not due:
            # Polled at least every POLL_S while records wait: a recorder's flush_after or
            # clock may change meanwhile (``by_count_only``), and a clock is the program's.
            return None if delay is None else min(delay, self.POLL_S)
        if not _streams_in_place():
            return self.POLL_S
        for rec in due:
            try:
                rec._replay_timed()
            except Exception as exc:  # noqa: BLE001 - a replayed call failed: report it, as for a write
                _report(exc)
        return 0.0


# A call recorded while ``sys.stdout`` / ``sys.stderr`` are not the streams this module wrapped
# runs at once, as the original's did (see ``Recorder.record``). Tests of the deferral itself,
# which read the replays through a test's capture, set it to False.
run_now_while_replaced = True


def _streams_in_place() -> bool:
    """Are ``sys.stdout`` / ``sys.stderr`` the streams this module wrapped (not replaced)?"""
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name, None)
        if stream is not None and not getattr(type(stream), "_fixitem_ordered", False):
            return False
    return True


_timer = _Timer()


def _at_exit() -> None:
    _timer.stop(wait_s=_WRITE_WAIT_S)
    _flush_reporting_errors()


# --------------------------------------------------------------------------
# Module-level API on the default recorder

_default = Recorder()
_env_value = _env_flush_every()
if _env_value is not None:
    _default.set_flush_every(_env_value)


def record(fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> None:
    """Defer ``fn(*args, **kwargs)`` on the default recorder (see the module docstring)."""
    _default.record(fn, *args, **kwargs)


def flush() -> None:
    """Emit everything pending on the default recorder; blocks as needed."""
    _default.flush()


def pending() -> int:
    """Number of records of the default recorder not yet emitted."""
    return _default.pending()


def set_flush_every(n: int) -> None:
    """Flush the default recorder automatically once ``n`` records are pending."""
    _default.set_flush_every(n)


@contextlib.contextmanager
def by_count_only():
    """Within the block, the default recorder replays by count and on demand only, never
    by time: for measurements that count reads per call (``fixitem verify``), which a
    slow machine must not change."""
    saved = _default.flush_after
    _default.flush_after = math.inf
    try:
        yield
    finally:
        _default.flush_after = saved


def configure(*, flush_every: int | None = None) -> None:
    """Configure the default recorder; idempotent (calling it again with the
    same values changes nothing). ``FIXITEM_FLUSH_EVERY``, when set, wins over
    ``flush_every``."""
    if flush_every is not None:
        env = _env_flush_every()
        _default.set_flush_every(env if env is not None else flush_every)


# --------------------------------------------------------------------------
# Output order: whatever is written while records are pending comes after them

# How long a write or log record waits for another thread's replay before it
# goes out anyway: a bound against a lock cycle (this thread holds a lock that
# the other thread's replayed call needs).
_WRITE_WAIT_S = 5.0


def _before_output(wait: float) -> None:
    """Replay everything pending before an unrelated write or log record."""
    if _tls.depth or torch.compiler.is_compiling():
        return  # the runtime's own output (a replay), a write from inside the runtime, or traced code
    try:
        _flush_all(wait)
    except Exception as exc:  # a replayed call failed: report it, do not fail the write
        _report(exc)


class _OrderedStream:
    """``sys.stdout`` / ``sys.stderr`` as seen by the program: the original
    stream, whose writes first replay pending records.

    Everything but ``write`` / ``writelines`` / ``flush`` is forwarded (``isatty``,
    ``fileno``, ``encoding``, ``buffer``, attributes), and
    ``isinstance`` sees the original's class.
    """

    _fixitem_ordered = True
    __slots__ = ("_fixitem_stream", "__weakref__")

    def __init__(self, stream: Any) -> None:
        object.__setattr__(self, "_fixitem_stream", stream)

    def write(self, s):
        if _order.dirty and not _tls.in_logging:
            _before_output(_WRITE_WAIT_S)
        return self._fixitem_stream.write(s)

    def writelines(self, lines):
        if _order.dirty and not _tls.in_logging:
            _before_output(_WRITE_WAIT_S)
        return self._fixitem_stream.writelines(lines)

    def flush(self):
        # ``sys.stdout.flush()`` asks for what was printed to reach the stream now: the
        # pending records too (not while the interpreter is finalizing: atexit replayed them).
        if _order.dirty and not _tls.in_logging and not sys.is_finalizing():
            _before_output(_WRITE_WAIT_S)
        return self._fixitem_stream.flush()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._fixitem_stream, name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._fixitem_stream, name, value)

    def __delattr__(self, name: str) -> None:
        delattr(self._fixitem_stream, name)

    @property  # type: ignore[misc]
    def __class__(self):  # isinstance(sys.stdout, io.TextIOWrapper) stays True
        return type(self._fixitem_stream)

    def __dir__(self):
        return dir(self._fixitem_stream)

    def __repr__(self) -> str:
        return repr(self._fixitem_stream)

    def __iter__(self):
        return iter(self._fixitem_stream)

    def __next__(self):
        return next(self._fixitem_stream)

    def __enter__(self):
        self._fixitem_stream.__enter__()
        return self

    def __exit__(self, *exc):
        return self._fixitem_stream.__exit__(*exc)


def _install_stream_hooks() -> None:
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name, None)
        if stream is None or getattr(type(stream), "_fixitem_ordered", False):
            continue
        setattr(sys, name, _OrderedStream(stream))


#: What changes how a later replayed logging call is handled: levels, handlers, formats.
_LOGGING_CHANGES = (
    (logging.Logger, "setLevel"), (logging.Logger, "addHandler"), (logging.Logger, "removeHandler"),
    (logging.Handler, "setLevel"), (logging.Handler, "setFormatter"), (logging, "disable"),
    # Filters decide which records pass, a stream where a handler writes.
    (logging.Filterer, "addFilter"), (logging.Filterer, "removeFilter"), (logging.StreamHandler, "setStream"),
)


# The same changes made by assigning an attribute (``logger.disabled = True``, ``logger.handlers = []``).
_LOGGING_ATTRIBUTES = (
    (logging.Logger, frozenset({"disabled", "propagate", "handlers", "filters", "level"})),
    (logging.Handler, frozenset({"level", "formatter", "filters", "stream"})),
)


def _replay_before_setting(owner: type, names: frozenset[str]) -> None:
    """Make setting one of ``names`` on an instance of ``owner`` replay pending records first."""
    original = owner.__setattr__
    if getattr(original, "_fixitem_ordered", False):
        return

    def __setattr__(self, name, value):  # noqa: N807  (the slot's name)
        if name in names and _order.dirty and not _tls.in_logging:
            _before_output(_WRITE_WAIT_S)
        original(self, name, value)

    __setattr__._fixitem_ordered = True  # type: ignore[attr-defined]
    owner.__setattr__ = __setattr__  # type: ignore[method-assign,assignment]


def _replay_before(owner: Any, name: str) -> None:
    """Make ``owner.name(...)`` replay the pending records before it runs."""
    original = getattr(owner, name)
    if getattr(original, "_fixitem_ordered", False):
        return

    @functools.wraps(original)
    def changed(*args, **kwargs):
        if _order.dirty and not _tls.in_logging:
            _before_output(_WRITE_WAIT_S)
        return original(*args, **kwargs)

    changed._fixitem_ordered = True  # type: ignore[attr-defined]
    setattr(owner, name, changed)


class _Sinks:
    """Metric sinks a deferred call may write to, and the program may call directly
    too: a direct call replays what is pending first, as a write to ``sys.stdout``
    does, so that the sink sees the calls in the original order (wandb numbers
    ``log`` calls for its implicit step), and closing or flushing a sink replays
    them while it is still open. Hooked when their module is loaded: looked at on
    each ``record`` that comes after more modules were loaded, until all are hooked."""

    # (module, object in it or "", function)
    KNOWN = (
        ("wandb", "", "log"),
        ("wandb", "", "finish"),
        ("wandb.sdk.wandb_run", "Run", "log"),
        ("wandb.sdk.wandb_run", "Run", "finish"),
        ("torch.utils.tensorboard.writer", "FileWriter", "add_event"),
        ("torch.utils.tensorboard.writer", "SummaryWriter", "flush"),
        ("torch.utils.tensorboard.writer", "SummaryWriter", "close"),
        ("tensorboardX.writer", "FileWriter", "add_event"),
        ("tensorboardX.writer", "SummaryWriter", "flush"),
        ("tensorboardX.writer", "SummaryWriter", "close"),
    )
    hooked = False  # every known sink is hooked
    done: set[tuple[str, str, str]] = set()
    modules_seen = -1  # len(sys.modules) when last looked: no new module, nothing new to hook

    @classmethod
    def hook(cls) -> None:
        loaded = len(sys.modules)
        if loaded == cls.modules_seen:
            return
        cls.modules_seen = loaded
        for sink in cls.KNOWN:
            module = sys.modules.get(sink[0])
            if sink in cls.done or module is None:
                continue
            owner = getattr(module, sink[1], None) if sink[1] else module
            if owner is not None and callable(getattr(owner, sink[2], None)):
                if sink[2] == "add_event":
                    _with_record_time(owner, sink[2])
                _replay_before(owner, sink[2])
            cls.done.add(sink)
        cls.hooked = len(cls.done) == len(cls.KNOWN)



def _with_record_time(owner: Any, name: str) -> None:
    """Make ``owner.name(..., walltime=None)`` (TensorBoard's ``FileWriter.add_event``), called
    by a replayed record, stamp the event with the time the original line ran, not the replay's."""
    import inspect

    original = getattr(owner, name)
    if getattr(original, "_fixitem_timed", False):
        return
    try:
        signature = inspect.signature(original)
    except (TypeError, ValueError):
        return
    if "walltime" not in signature.parameters:
        return

    @functools.wraps(original)
    def timed(*args, **kwargs):
        at = _tls.at
        if at is not None:
            try:
                bound = signature.bind(*args, **kwargs)
            except TypeError:
                return original(*args, **kwargs)
            if bound.arguments.get("walltime") is None:
                bound.arguments["walltime"] = at / 1e9
                return original(*bound.args, **bound.kwargs)
        return original(*args, **kwargs)

    timed._fixitem_timed = True  # type: ignore[attr-defined]
    setattr(owner, name, timed)


# Loggers whose records never reach the program's output, so they need not wait for what
# is pending. ``torch.__trace`` is torch's structured compile trace: it never propagates,
# and its own handler writes only to a ``TORCH_TRACE`` file (or removes itself). Every
# compile logs to it, and a test runner that captures non-propagating loggers (pytest 9.2)
# keeps it active: replaying there would read pending values at each compile.
_SILENT_LOGGERS = frozenset({"torch.__trace"})


def _stamp(record: logging.LogRecord, at: int) -> None:
    """Give ``record`` the times a LogRecord made at ``at`` (``time.time_ns()``) has."""
    created = at / 1e9
    record.relativeCreated -= (record.created - created) * 1000  # logging's start, whatever its unit
    record.created = created
    record.msecs = (at % 1_000_000_000) // 1_000_000 + 0.0


def _install_logging_hooks() -> None:
    original = logging.Logger.callHandlers
    if getattr(original, "_fixitem_ordered", False):
        return

    @functools.wraps(original)
    def callHandlers(self, record):  # noqa: N802  (logging's name)
        tls = _tls
        # A handler logging is flushed by the outer call.
        if _order.dirty and not tls.in_logging and record.name not in _SILENT_LOGGERS:
            _before_output(_WRITE_WAIT_S)
        if tls.origin is not None and record.funcName == "<lambda>":
            # A replayed ``lambda ...: logger.info(...)``: the function and line that recorded it.
            record.funcName, record.lineno = tls.origin
        if tls.thread is not None:
            # Replayed in another thread (the timer, a flush from a worker): the thread that recorded it.
            record.thread, record.threadName = tls.thread
        if tls.at is not None:
            # The time the original line logged at (``%(asctime)s``, ``%(msecs)d``, ``%(relativeCreated)d``).
            _stamp(record, tls.at)
        tls.in_logging += 1
        try:
            return original(self, record)
        finally:
            tls.in_logging -= 1

    callHandlers._fixitem_ordered = True  # type: ignore[attr-defined]
    logging.Logger.callHandlers = callHandlers  # type: ignore[method-assign]

    # A change of level, handler or format applies to the records still to be replayed, not only
    # to later ones: replay what is pending first, so that it logs as the original did.
    for owner, name in _LOGGING_CHANGES:
        _replay_before(owner, name)
    for owner, names in _LOGGING_ATTRIBUTES:
        _replay_before_setting(owner, names)

    original_shutdown = logging.shutdown
    if not getattr(original_shutdown, "_fixitem_ordered", False):

        @functools.wraps(original_shutdown)
        def shutdown(*args, **kwargs):
            _flush_reporting_errors()
            return original_shutdown(*args, **kwargs)

        shutdown._fixitem_ordered = True  # type: ignore[attr-defined]
        logging.shutdown = shutdown


# --------------------------------------------------------------------------
# Exit paths: nothing is lost

_previous_excepthook = sys.excepthook
_previous_threading_excepthook = threading.excepthook


def _excepthook(exc_type, exc_value, exc_tb) -> None:
    _flush_reporting_errors()
    _previous_excepthook(exc_type, exc_value, exc_tb)


def _threading_excepthook(args) -> None:
    _flush_reporting_errors()
    _previous_threading_excepthook(args)


_previous_sigterm: Any = None


def _flush_std_streams() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except BaseException:  # noqa: BLE001
            pass


def _handle_sigterm(signum: int, frame: Any) -> None:
    _flush_reporting_errors()
    previous = _previous_sigterm
    if callable(previous):
        previous(signum, frame)
        return
    # SIG_DFL: die of the signal, as the program would have (exit status -15).
    _flush_std_streams()
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


def _on_sigterm(signum: int, frame: Any) -> None:
    if _tls.depth:  # the main thread was interrupted inside the runtime: finish first
        _Signals.deferred = (signum, frame)
        return
    _handle_sigterm(signum, frame)


# Set by launchers of processes that work together (torchrun, MPI, Slurm): there SIGTERM is how
# the others are stopped when one fails, while they wait in a collective. A Python handler runs
# only when the blocked C++ call returns (after the collective's timeout, if ever).
_LAUNCHER_SIZES = ("WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS")


def _in_a_group_of_processes() -> bool:
    if os.environ.get("TORCHELASTIC_RUN_ID"):
        return True
    for name in _LAUNCHER_SIZES:
        try:
            if int(os.environ.get(name, "1")) > 1:
                return True
        except ValueError:
            continue
    return False


def _install_sigterm_handler() -> None:
    global _previous_sigterm
    if not hasattr(signal, "SIGTERM") or threading.current_thread() is not threading.main_thread():
        return
    if _in_a_group_of_processes():
        return  # a rank must die at once, even inside a collective: SIGTERM is left alone
    try:
        previous = signal.getsignal(signal.SIGTERM)
    except (ValueError, OSError):
        return
    if previous is _on_sigterm or previous is None or previous == signal.SIG_IGN:
        return  # ours already, a handler set from C, or ignored: leave it alone
    _previous_sigterm = previous
    signal.signal(signal.SIGTERM, _on_sigterm)


def _before_fork() -> None:
    """Before ``fork``: what the parent recorded comes before the child's output.

    The child would otherwise start with a copy of the parent's unwritten
    text: replayed text is pushed out of the Python stream buffers too.
    """
    if _order.dirty and not _tls.depth:
        _before_output(-1)
        _flush_std_streams()


def _reset_after_fork() -> None:
    """In a forked child: empty buffers (the records belong to the parent)."""
    global _LOCK, _REPLAY_LOCK, _tls, _MAIN_IDENT, _timer
    _LOCK = threading.Lock()
    _REPLAY_LOCK = threading.RLock()
    _tls = _ThreadState()
    enabled = _timer.enabled
    _timer = _Timer()  # the parent's thread is not in the child: it starts its own
    _timer.enabled = enabled
    _MAIN_IDENT = threading.get_ident()
    _Signals.deferred = None
    _COMPILED_INBOX.clear()
    for rec in _recorders():
        rec._pending = []
        rec._batches = collections.deque()
    _order.count = 0
    _order.dirty = False


def _install_child_hooks() -> None:
    """A child process the program starts (``subprocess``, ``os.system``, ``os.posix_spawn``,
    a ``multiprocessing`` spawn) writes to the streams it inherits: pending records are
    replayed first, so that its output comes after what the parent printed before starting
    it. The replayed text is not flushed: it waits in the Python stream's buffer as the
    original's text did (a child started while stdout is a pipe writes before it, as then)."""
    import subprocess

    _replay_before(subprocess.Popen, "__init__")
    for name in ("system", "posix_spawn", "posix_spawnp"):
        if callable(getattr(os, name, None)):
            _replay_before(os, name)
    if callable(getattr(multiprocessing.util, "spawnv_passfds", None)):
        _replay_before(multiprocessing.util, "spawnv_passfds")


def _install_exit_hooks() -> None:
    """``os._exit`` and ``os.abort`` skip atexit: replay pending records first (what
    the program printed before them reaches the stream, as it did without fixitem)."""
    for name in ("_exit", "abort"):
        if callable(getattr(os, name, None)):
            _replay_before(os, name)


def _after_cell(*_args: Any) -> None:
    _flush_reporting_errors()


def _install_notebook_hook() -> None:
    """In a Jupyter kernel (IPython): replay pending records when a cell finishes, so that
    a cell's output stays under that cell (a record made inside a function the cell calls,
    too)."""
    ipython = sys.modules.get("IPython")
    get = getattr(ipython, "get_ipython", None)
    try:
        shell = get() if callable(get) else None
        events = getattr(shell, "events", None)
        if events is not None and _after_cell not in events.callbacks.get("post_run_cell", []):
            events.register("post_run_cell", _after_cell)
    except Exception:  # noqa: BLE001 - an unusual shell: cells flush at exit as in a script
        pass


def _register_child_flush(_recorder: Recorder) -> None:
    """In a multiprocessing child (ends with os._exit: no atexit): flush at its exit."""
    multiprocessing.util.Finalize(None, _flush_reporting_errors, exitpriority=100)


sys.excepthook = _excepthook
threading.excepthook = _threading_excepthook
atexit.register(_at_exit)
if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=_before_fork, after_in_child=_reset_after_fork)
multiprocessing.util.register_after_fork(_default, _register_child_flush)
if multiprocessing.parent_process() is not None:  # imported inside a started child
    _register_child_flush(_default)
_install_stream_hooks()
_install_logging_hooks()
_install_child_hooks()
_install_sigterm_handler()
_install_exit_hooks()
_install_notebook_hook()


# --------------------------------------------------------------------------
# Accumulator


def _is_number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, complex)


class Accumulator:
    """An on-device running sum for ``total += loss.item()``.

    ``Accumulator(0.0)`` / ``Accumulator(0)`` keep the start value and its
    type. ``acc += x`` adds a tensor (detached, on its device, no sync) or a
    Python number. The sum is kept in a 0-dim float64 (float start, or once a
    floating value is added) or int64 (int start and integer / bool tensors)
    tensor created on the first tensor's device; from then on Python numbers
    are folded into it too, so every addition happens in the original order
    and a float sum is bitwise the Python one (float64 addition is IEEE double
    addition, and float16/bfloat16/float32 values are exact in float64). An
    int start stays ``int`` unless a floating value is added, like Python.
    Integer sums wrap at 2**63 (Python ints do not). On a device without
    float64 (MPS) a float sum is added on the host, one read per addition as in
    the original, so that it stays exact.

    Reading (``value()``, ``float``, ``int``, formatting, comparisons,
    arithmetic) returns / uses the Python number: one host sync per read,
    intended to happen once at the end instead of every step. Results of
    arithmetic are plain Python numbers.
    """

    __hash__ = None  # mutable, like a running total

    def __init__(self, start: int | float = 0) -> None:
        if isinstance(start, Accumulator):
            start = start.value()
        if isinstance(start, bool) or not _is_number(start):
            raise TypeError(f"Accumulator start must be an int or a float, got {start!r}")
        self._py: int | float = start
        self._buf: torch.Tensor | None = None

    def _add(self, x: Any, sign: int) -> None:
        if isinstance(x, Accumulator):
            x = x.value()
        if isinstance(x, torch.Tensor):
            if x.numel() != 1:  # what ``total += x.item()`` raised, caught by the same handlers
                raise NotOneElementError(f"a Tensor with {x.numel()} elements cannot be converted to Scalar")
            if x.dtype.is_complex:
                raise TypeError("Accumulator: complex tensors are not supported")
            x = x.detach().reshape(())
            floating = x.dtype.is_floating_point
            if x.device.type in NO_FLOAT64_DEVICES and (
                floating or isinstance(self._py, float) or self._buf is not None and self._buf.dtype == torch.float64
            ):
                # No float64 on that device: add on the host, as the original did (one read, exact).
                if self._buf is not None:
                    self._py, self._buf = self._buf.item(), None
                x = x.item()
                self._py = self._py + x if sign > 0 else self._py - x
                return None
            if self._buf is None:
                is_float = floating or isinstance(self._py, float)
                dtype = torch.float64 if is_float else torch.int64
                self._buf = torch.tensor(self._py, dtype=dtype, device=x.device)
            elif floating and self._buf.dtype != torch.float64:
                self._buf = self._buf.to(torch.float64)
            x = x.to(device=self._buf.device, dtype=self._buf.dtype)
            # A new sum, not an update in place: a sum made under ``torch.inference_mode()``
            # cannot be updated in place outside it.
            self._buf = self._buf + x if sign > 0 else self._buf - x
        elif isinstance(x, bool) or _is_number(x):
            if self._buf is not None and isinstance(x, float) and self._buf.device.type in NO_FLOAT64_DEVICES:
                self._py, self._buf = self._buf.item(), None  # no float64 there: go on on the host
            if self._buf is None:
                self._py = self._py + x if sign > 0 else self._py - x
            else:
                if isinstance(x, float) and self._buf.dtype != torch.float64:
                    self._buf = self._buf.to(torch.float64)
                self._buf = self._buf + x if sign > 0 else self._buf - x
        else:
            return NotImplemented  # type: ignore[return-value]
        return None

    def __iadd__(self, x: Any) -> Accumulator:
        if self._add(x, +1) is NotImplemented:
            return NotImplemented
        return self

    def __isub__(self, x: Any) -> Accumulator:
        if self._add(x, -1) is NotImplemented:
            return NotImplemented
        return self

    def value(self) -> int | float:
        """The sum as a Python number (one host sync if a tensor was added)."""
        if self._buf is None:
            return self._py
        return self._buf.item()

    # -- conversions and formatting --------------------------------------
    def __float__(self) -> float:
        return float(self.value())

    def __int__(self) -> int:
        return int(self.value())

    def __index__(self) -> int:
        v = self.value()
        if not isinstance(v, int):
            raise TypeError(f"'{type(v).__name__}' object cannot be interpreted as an integer")
        return v

    def __bool__(self) -> bool:
        return bool(self.value())

    def __format__(self, spec: str) -> str:
        return format(self.value(), spec)

    def __str__(self) -> str:
        return str(self.value())

    def __repr__(self) -> str:
        return repr(self.value())

    def __round__(self, ndigits: int | None = None):
        return round(self.value(), ndigits)

    def __trunc__(self) -> int:
        return math.trunc(self.value())

    def __floor__(self) -> int:
        return math.floor(self.value())

    def __ceil__(self) -> int:
        return math.ceil(self.value())

    # -- comparisons ------------------------------------------------------
    def __eq__(self, other: Any) -> bool:
        return self.value() == _plain(other)

    def __ne__(self, other: Any) -> bool:
        return self.value() != _plain(other)

    def __lt__(self, other: Any) -> bool:
        return self.value() < _plain(other)

    def __le__(self, other: Any) -> bool:
        return self.value() <= _plain(other)

    def __gt__(self, other: Any) -> bool:
        return self.value() > _plain(other)

    def __ge__(self, other: Any) -> bool:
        return self.value() >= _plain(other)

    # -- arithmetic (results are Python numbers) --------------------------
    def __add__(self, o):
        return self.value() + _plain(o)

    def __radd__(self, o):
        return _plain(o) + self.value()

    def __sub__(self, o):
        return self.value() - _plain(o)

    def __rsub__(self, o):
        return _plain(o) - self.value()

    def __mul__(self, o):
        return self.value() * _plain(o)

    def __rmul__(self, o):
        return _plain(o) * self.value()

    def __truediv__(self, o):
        return self.value() / _plain(o)

    def __rtruediv__(self, o):
        return _plain(o) / self.value()

    def __floordiv__(self, o):
        return self.value() // _plain(o)

    def __rfloordiv__(self, o):
        return _plain(o) // self.value()

    def __mod__(self, o):
        return self.value() % _plain(o)

    def __rmod__(self, o):
        return _plain(o) % self.value()

    def __pow__(self, o):
        return self.value() ** _plain(o)

    def __rpow__(self, o):
        return _plain(o) ** self.value()

    def __neg__(self):
        return -self.value()

    def __pos__(self):
        return +self.value()

    def __abs__(self):
        return abs(self.value())


def _plain(x: Any) -> Any:
    return x.value() if isinstance(x, Accumulator) else x
