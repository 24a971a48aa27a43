"""Deferred logging and on-device accumulation: the runtime that rewritten code imports.

fixitem rewrites a logging line that reads tensor values every step, such as
``print(f"step {step} loss {loss.item():.4f}")``, into::

    from fixitem import runtime as deferred
    deferred.record(lambda step, loss: print(f"step {step} loss {loss:.4f}"), step, loss)

and ``total += loss.item()`` into ``total = deferred.Accumulator(0.0)`` ...
``total += loss``. This module imports only torch and the standard library.

record(fn, /, *args, **kwargs)
    Captures the arguments now (no late binding). Every tensor among them,
    also inside list / tuple / dict values, is ``detach()``-ed and kept on its
    device: nothing is read at record time. A recorded tensor must hold exactly
    one element (what ``.item()`` accepts); others raise ``TypeError`` at once:
    multi-element tensors are not supported. Other arguments pass through
    unchanged (they are not copied: a list mutated after ``record`` is seen
    mutated at replay). At replay each tensor is replaced by exactly the Python
    value ``.item()`` would have returned (``int`` for integer dtypes, ``bool``
    for ``torch.bool``, ``float`` for floating dtypes, ``complex`` for complex),
    then ``fn(*args, **kwargs)`` is called, so the text printed or logged is
    byte-for-byte the original's.

One host transfer per flush
    A flush stacks the pending tensors per (device, kind) - integers as int64,
    floats as float64 (exact for float16 / bfloat16 / float32 / float64, so
    ``float(x)`` equals ``x.item()`` bit for bit), bools as bool - and reads each
    stack with one ``tolist()``. On CUDA the copy starts early instead:
    ``copy_(non_blocking=True)`` into pinned memory plus a ``torch.cuda.Event``;
    batches whose event is done are emitted by the next records, and the host
    blocks only on ``flush()``, at exit, or when more than ``max_outstanding``
    (default 4) batches are in flight.

Ordering guarantee
    Records are replayed strictly in recording order (one global order for the
    whole process, across threads: a lock guards the buffer and a second,
    separate lock makes replays never interleave). A record made by ``fn``
    itself during a replay is queued after everything already recorded. If a
    replayed ``fn`` raises, the remaining records are still emitted and then
    the first exception is re-raised from the ``record``/``flush`` call that
    triggered the replay (at exit it is printed to stderr instead).
    Calls that were left immediate (not deferred) are not ordered against
    deferred ones: the codemod defers every output call of a loop that has a
    deferred one for that reason.

Flush triggers
    * automatically once ``flush_every`` records are pending; the default is
      100: one host transfer per 100 log lines is negligible, while output is
      still emitted often enough to watch a run (a training loop that logs
      every step prints in bursts of 100 lines). Change it with
      ``configure(flush_every=N)`` (what the codemod inserts for
      ``--flush-every N``) or the environment variable ``FIXITEM_FLUSH_EVERY``
      (read at import; it wins over ``configure`` so that a run can be switched
      to immediate output, ``FIXITEM_FLUSH_EVERY=1``, without editing code);
    * ``flush()``, on demand (blocks until everything is emitted);
    * an uncaught exception or ``KeyboardInterrupt``: ``sys.excepthook`` and
      ``threading.excepthook`` are chained so that pending records appear
      BEFORE the traceback;
    * interpreter exit (``atexit``), including ``sys.exit(n)``. A message of
      ``sys.exit("msg")`` is printed by Python before atexit handlers run, so
      it comes before the last records. atexit handlers run last-registered
      first: import this module after the libraries whose own atexit handler
      must still be open when records are replayed (``logging`` is imported
      here first for that reason; wandb / tensorboard writers likewise).
    * never inside a ``torch.compile`` region (``torch.compiler.is_compiling()``).

Compiled regions
    ``record`` inside a function compiled with ``torch.compile(fullgraph=True)``
    causes no graph break and no host sync: Dynamo traces the append of the
    detached tensors to a plain list (``Recorder._compiled_inbox``) as a side
    effect and replays it after every call of the compiled function, with the
    values of that call. Limitation (torch 2.13): Dynamo guards on the length
    of that list, so the compiled function is recompiled whenever it is
    entered with compiled records still in the inbox. Any ``record``/``flush``
    /``pending`` outside compiled code empties the inbox, so a loop that
    records something eagerly each step (the usual case) compiles once; a loop
    that only records inside the compiled function should call ``flush()``
    (cheap when little is pending) between calls, or it recompiles until
    ``torch._dynamo.config.recompile_limit``. Recording inside compiled
    regions from several threads at once is not supported.

What is not deferred
    ``fn`` itself (its side effects happen at replay time), non-tensor
    arguments (captured by reference), and multi-element tensors (rejected).
    Logging: a replayed ``logger.info`` produces the same message text, but
    the LogRecord's ``lineno`` is the lambda's (the same line if the codemod
    kept the call on one line), ``funcName`` is ``"<lambda>"``, and
    ``created`` / ``threadName`` are those of the flush. Checking the logger
    level at record time is the codemod's job.

Thread safety
    ``record``/``flush`` may be called from any thread (a DataLoader worker
    thread, a logging thread). After ``fork`` the child starts with an empty
    buffer (the records belong to the parent). ``Accumulator`` is not
    thread-safe.
"""

from __future__ import annotations

import atexit
import collections
import logging  # noqa: F401  (imported first so that its atexit shutdown runs after our flush)
import math
import os
import sys
import threading
import traceback
from collections.abc import Callable
from typing import Any

import torch

__all__ = [
    "Accumulator",
    "DEFAULT_FLUSH_EVERY",
    "Recorder",
    "configure",
    "flush",
    "pending",
    "record",
    "set_flush_every",
]

DEFAULT_FLUSH_EVERY = 100
ENV_FLUSH_EVERY = "FIXITEM_FLUSH_EVERY"


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


def _detach_tree(value: Any) -> Any:
    """Copy the containers of ``value`` with every tensor detached.

    Written so that Dynamo can trace it (used inside compiled regions too).
    """
    if isinstance(value, torch.Tensor):
        if value.numel() != 1:
            raise TypeError(
                "fixitem.runtime.record: only one-element tensors can be recorded "
                f"(what .item() accepts); got a tensor of shape {tuple(value.shape)}"
            )
        return value.detach()
    if isinstance(value, list):
        return [_detach_tree(v) for v in value]
    if isinstance(value, tuple):
        items = [_detach_tree(v) for v in value]
        if type(value) is tuple:
            return tuple(items)
        if hasattr(value, "_fields"):  # namedtuple
            return type(value)(*items)
        return type(value)(items)
    if isinstance(value, dict):
        return {k: _detach_tree(v) for k, v in value.items()}
    return value


def _collect_tensors(value: Any, out: list[torch.Tensor]) -> None:
    """Append the tensors of ``value`` to ``out`` in a fixed walk order."""
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

    __slots__ = ("fn", "args", "kwargs", "tensors")

    def __init__(self, fn: Callable[..., Any], args: tuple, kwargs: dict) -> None:
        self.fn = fn
        self.args = args
        self.kwargs = kwargs
        self.tensors: list[torch.Tensor] = []
        _collect_tensors(args, self.tensors)
        _collect_tensors(kwargs, self.tensors)

    def call(self, numbers: list[Any]) -> None:
        it = iter(numbers)
        args = _substitute(self.args, it)
        kwargs = _substitute(self.kwargs, it)
        self.fn(*args, **kwargs)


# --------------------------------------------------------------------------
# Host transfer


def _target_dtype(dtype: torch.dtype) -> torch.dtype:
    """The dtype a value is read in so that ``tolist()`` equals ``.item()`` exactly."""
    if dtype == torch.bool:
        return torch.bool
    if dtype.is_floating_point:
        return torch.float64
    if dtype.is_complex:
        return torch.complex128
    if dtype == torch.uint64:
        return torch.uint64  # does not fit in int64
    return torch.int64


class _Batch:
    """Records whose tensors are being (or have been) transferred to the host.

    One stacked tensor per (device, target dtype). On CUDA the device-to-host
    copy is started at construction (pinned memory, ``non_blocking=True``,
    an event); elsewhere the stack is read with ``tolist()`` in :meth:`values`.
    """

    def __init__(self, records: list[_Record]) -> None:
        self.records = records
        tensors = [t for r in records for t in r.tensors]
        self.count = len(tensors)
        groups: dict[tuple[torch.device, torch.dtype], list[int]] = {}
        for i, t in enumerate(tensors):
            groups.setdefault((t.device, _target_dtype(t.dtype)), []).append(i)
        # (indices, tensor to read, CUDA event or None, device tensor kept alive)
        self._parts: list[tuple[list[int], torch.Tensor, Any, Any]] = []
        for (device, dtype), indices in groups.items():
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


def _start_cuda_copy(indices: list[int], stacked: torch.Tensor, device: torch.device):
    """Start the copy of ``stacked`` into pinned host memory; return a batch part."""
    with torch.cuda.device(device):
        host = torch.empty(stacked.shape, dtype=stacked.dtype, pin_memory=True)
        host.copy_(stacked, non_blocking=True)
        event = torch.cuda.Event()
        event.record(torch.cuda.current_stream(device))
    return (indices, host, event, stacked)


# --------------------------------------------------------------------------
# Recorder


class Recorder:
    """A buffer of deferred calls; the module functions use one default instance.

    ``flush_every``: emit automatically once that many records are pending.
    ``max_outstanding``: device-to-host batches allowed in flight (CUDA) before
    a record blocks on the oldest one.
    """

    def __init__(self, flush_every: int = DEFAULT_FLUSH_EVERY, max_outstanding: int = 4) -> None:
        self._lock = threading.Lock()  # guards _pending, _batches, _compiled_inbox
        self._replay_lock = threading.RLock()  # one replay at a time
        self._replaying: int | None = None  # ident of the thread replaying
        self._pending: list[_Record] = []
        self._batches: collections.deque[_Batch] = collections.deque()
        # Appended to only inside torch.compile regions (traced by Dynamo as a
        # side effect); moved into _pending by the next eager call.
        self._compiled_inbox: list[tuple[Callable[..., Any], tuple, dict]] = []
        self.flush_every = DEFAULT_FLUSH_EVERY
        self.set_flush_every(flush_every)
        if max_outstanding < 1:
            raise ValueError("max_outstanding must be >= 1")
        self.max_outstanding = max_outstanding

    # -- configuration ----------------------------------------------------
    def set_flush_every(self, n: int) -> None:
        """Flush automatically once ``n`` (>= 1) records are pending."""
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ValueError(f"flush_every must be a positive integer, got {n!r}")
        self.flush_every = n

    # -- recording --------------------------------------------------------
    def record(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> None:
        """Defer ``fn(*args, **kwargs)``; tensors in the arguments are read at flush."""
        if torch.compiler.is_compiling():
            # Traced by Dynamo: no lock (not traceable), no flush, no sync.
            self._compiled_inbox.append((fn, _detach_tree(args), _detach_tree(kwargs)))
            return
        if not callable(fn):
            raise TypeError(f"fixitem.runtime.record: fn must be callable, got {fn!r}")
        rec = _Record(fn, _detach_tree(args), _detach_tree(kwargs))
        with self._lock:
            self._drain_inbox_locked()
            self._pending.append(rec)
            full = len(self._pending) >= self.flush_every
            if full:
                self._start_batch_locked()
            outstanding = len(self._batches)
        if outstanding:
            self._emit(block=False, keep=self.max_outstanding if full else None)

    def pending(self) -> int:
        """Number of records not yet emitted."""
        with self._lock:
            self._drain_inbox_locked()
            return len(self._pending) + sum(len(b.records) for b in self._batches)

    def flush(self) -> None:
        """Emit every pending record, blocking on device transfers as needed.

        Does nothing inside a compiled region. Re-raises the first exception
        raised by a replayed ``fn`` after emitting all the others.
        """
        if torch.compiler.is_compiling():
            return
        with self._lock:
            self._drain_inbox_locked()
            self._start_batch_locked()
        self._emit(block=True)

    # -- internals --------------------------------------------------------
    def _drain_inbox_locked(self) -> None:
        if self._compiled_inbox:
            items = self._compiled_inbox[:]
            self._compiled_inbox.clear()
            self._pending.extend(_Record(fn, args, kwargs) for fn, args, kwargs in items)

    def _start_batch_locked(self) -> None:
        if self._pending:
            records, self._pending = self._pending, []
            self._batches.append(_Batch(records))

    def _emit(self, block: bool, keep: int | None = None) -> None:
        """Replay finished batches in order.

        ``block``: wait for every batch. Otherwise emit the ready prefix, and
        if ``keep`` is given also wait until at most ``keep`` batches remain.
        """
        me = threading.get_ident()
        if self._replaying == me:
            return  # a replayed fn recorded or flushed: it stays queued, in order
        first_error: BaseException | None = None
        with self._replay_lock:
            self._replaying = me
            try:
                while True:
                    with self._lock:
                        if not self._batches:
                            break
                        batch = self._batches[0]
                        must_wait = block or (keep is not None and len(self._batches) > keep)
                        if not must_wait and not batch.ready():
                            break
                        self._batches.popleft()
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
                self._replaying = None
        if first_error is not None:
            raise first_error

    def _reset_after_fork(self) -> None:
        self._lock = threading.Lock()
        self._replay_lock = threading.RLock()
        self._replaying = None
        self._pending = []
        self._batches = collections.deque()
        self._compiled_inbox.clear()


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


def configure(*, flush_every: int | None = None) -> None:
    """Configure the default recorder; idempotent (calling it again with the
    same values changes nothing). ``FIXITEM_FLUSH_EVERY``, when set, wins over
    ``flush_every``."""
    if flush_every is not None:
        env = _env_flush_every()
        _default.set_flush_every(env if env is not None else flush_every)


def _flush_reporting_errors() -> None:
    """Flush for exit paths: never raises; a replay error is printed to stderr."""
    try:
        _default.flush()
    except BaseException as exc:  # noqa: BLE001
        try:
            print("Exception in a deferred call replayed by fixitem.runtime:", file=sys.stderr)
            traceback.print_exception(type(exc), exc, exc.__traceback__, file=sys.stderr)
        except BaseException:  # noqa: BLE001
            pass


_previous_excepthook = sys.excepthook
_previous_threading_excepthook = threading.excepthook


def _excepthook(exc_type, exc_value, exc_tb) -> None:
    _flush_reporting_errors()
    _previous_excepthook(exc_type, exc_value, exc_tb)


def _threading_excepthook(args) -> None:
    _flush_reporting_errors()
    _previous_threading_excepthook(args)


sys.excepthook = _excepthook
threading.excepthook = _threading_excepthook
atexit.register(_flush_reporting_errors)
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_default._reset_after_fork)


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
    Integer sums wrap at 2**63 (Python ints do not).

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
            if x.numel() != 1:
                raise TypeError(
                    "Accumulator: only one-element tensors can be added "
                    f"(what .item() accepts); got shape {tuple(x.shape)}"
                )
            if x.dtype.is_complex:
                raise TypeError("Accumulator: complex tensors are not supported")
            x = x.detach().reshape(())
            floating = x.dtype.is_floating_point
            if self._buf is None:
                is_float = floating or isinstance(self._py, float)
                dtype = torch.float64 if is_float else torch.int64
                self._buf = torch.tensor(self._py, dtype=dtype, device=x.device)
            elif floating and self._buf.dtype != torch.float64:
                self._buf = self._buf.to(torch.float64)
            x = x.to(device=self._buf.device, dtype=self._buf.dtype)
            if sign > 0:
                self._buf.add_(x)
            else:
                self._buf.sub_(x)
        elif isinstance(x, bool) or _is_number(x):
            if self._buf is None:
                self._py = self._py + x if sign > 0 else self._py - x
            else:
                if isinstance(x, float) and self._buf.dtype != torch.float64:
                    self._buf = self._buf.to(torch.float64)
                if sign > 0:
                    self._buf.add_(x)
                else:
                    self._buf.sub_(x)
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
