"""Worker processes that end when the process that started them ends.

A ``ProcessPoolExecutor`` worker waits on a pipe for its next file. If the
``fixitem`` process is killed (``kill -9``, the OOM killer), nobody ever
writes to that pipe or closes it (the workers hold its ends too), so the
workers would wait forever, reparented to init. Each worker therefore:

- on Linux, asks the kernel to kill it when its parent dies
  (``prctl(PR_SET_PDEATHSIG, SIGKILL)``);
- everywhere, watches its parent from a daemon thread and exits once the
  parent is gone (within :data:`POLL_SECONDS`).

A worker killed this way may leave a hidden ``.NAME.*.fixitem`` temporary
file beside a file it was writing; the file itself is whole, old or new
(see :func:`fixitem.codemods.driver.source.write_atomically`).
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import sys
import threading
from collections.abc import Callable

PR_SET_PDEATHSIG = 1  # from <linux/prctl.h>
POLL_SECONDS = 1.0


def pool_options(summaries: str | None = None) -> dict[str, object]:
    """``ProcessPoolExecutor`` arguments for workers that end with the process making the pool
    (and share the summaries of the project's modules through the folder ``summaries``)."""
    context = multiprocessing.get_context()
    # fork and spawn start each worker from this process; forkserver from a server process.
    direct = context.get_start_method() != "forkserver"
    return {"mp_context": context, "initializer": started, "initargs": (os.getpid(), direct, summaries)}


def started(parent: int, direct: bool, summaries: str | None = None) -> None:
    """The pool's initializer, run in each worker as it starts. ``parent``: the pid of the
    process that made the pool; ``direct``: whether it started this worker itself;
    ``summaries``: the run's folder of shared module summaries. Never raises (a failing
    initializer breaks the pool)."""
    from fixitem.codemods.model.project import share_summaries

    share_summaries(summaries)
    _die_with_parent()
    if not parent_alive(parent, direct):  # it died before the kernel was asked
        os._exit(1)
    thread = threading.Thread(target=watch, args=(parent, direct), name="fixitem-parent-watch", daemon=True)
    thread.start()


def _die_with_parent() -> bool:
    """Linux: the kernel kills this process when its parent dies. False where it cannot."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0) == 0
    except (OSError, AttributeError, ValueError):
        return False


def parent_alive(parent: int, direct: bool, getppid: Callable[[], int] = os.getppid) -> bool:
    """Whether the process ``parent`` still runs. A worker it started itself (``direct``: fork,
    spawn) has it as its parent until it dies, and is then given another; one started through a
    server process (forkserver) asks for it by pid."""
    if direct:
        return getppid() == parent
    try:
        os.kill(parent, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # the pid now belongs to another user's process: the parent is gone
        return False
    except OSError:
        return True
    return True


def watch(
    parent: int,
    direct: bool,
    *,
    alive: Callable[[int, bool], bool] = parent_alive,
    wait: Callable[[float], object] = threading.Event().wait,
    leave: Callable[[int], object] = os._exit,
) -> None:
    """Check every :data:`POLL_SECONDS` that ``parent`` runs; leave (``os._exit``) once it does not."""
    while alive(parent, direct):
        wait(POLL_SECONDS)
    leave(1)
