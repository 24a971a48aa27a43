"""Measurements inside a command run by ``fixitem verify --run``.

``verify --run`` copies this file as ``sitecustomize.py`` into a temporary
folder put first on the child's ``PYTHONPATH``, so every Python process the
command starts loads it at start-up without any change to the command. It
imports only the standard library; torch is never imported by it: when (and
if) the program imports torch, the probe

* counts host syncs: Python reads of tensor values (``item``, ``tolist``,
  ``__bool__``, ``__float__``, ``__int__``, ``__index__``, ``__format__``,
  ``__repr__``, ``numpy``, and ``cpu`` of a tensor that is not on the CPU),
  each with the first source line outside torch that made it. Reads made by
  torch itself inside another read (``__format__`` calls ``item``) count once.
  Inside code that ``torch.compile`` traces the wrapper steps aside, so
  compiled code is traced exactly as without the probe;
* listens on Dynamo's graph-break logger (file:line and reason of every break,
  without printing anything) and reads Dynamo's graph-break counter at exit.

At exit the process writes what it saw as JSON to
``$FIXITEM_PROBE_OUT.<pid>``. The program's own output, exit status and
behaviour are unchanged. A ``sitecustomize`` the environment already had is
still imported after this one.
"""

from __future__ import annotations

import atexit
import importlib
import importlib.abc
import json
import os
import sys
import threading

_OUT = os.environ.get("FIXITEM_PROBE_OUT", "")
_HERE = os.path.dirname(os.path.abspath(__file__))
_GRAPH_BREAK_LOGGER = "torch._dynamo.symbolic_convert.__graph_breaks"
_READS = ("item", "tolist", "__bool__", "__float__", "__int__", "__index__", "__format__", "__repr__", "numpy")

_syncs: dict[tuple[str, int, str], list[int]] = {}  # (file, line, kind) -> [count, on_device]
_break_messages: list[str] = []
_state = {"torch": None, "skip": ()}
_local = threading.local()


def _runtime_file() -> str:
    """fixitem's runtime module, once rewritten code has imported it: its reads are the flushes."""
    module = sys.modules.get("fixitem.runtime")
    return os.path.abspath(module.__file__) if module is not None and getattr(module, "__file__", None) else ""


def _site(skip: tuple[str, ...]) -> tuple[str, int, bool]:
    """The first frame outside torch, the probe and fixitem's runtime; and whether the runtime made the read."""
    runtime = _runtime_file()
    through_runtime = False
    frame = sys._getframe(2)
    while frame is not None:
        filename = frame.f_code.co_filename
        if runtime and filename == runtime:
            through_runtime = True
        elif not filename.startswith(skip):
            return os.path.abspath(filename), frame.f_lineno, through_runtime
        frame = frame.f_back
    return "<exit>", 0, through_runtime


def _counting(original, kind: str, torch):
    is_compiling = torch.compiler.is_compiling

    def read(self, *args, **kwargs):
        if is_compiling():
            return original(self, *args, **kwargs)
        if kind == "cpu" and self.device.type == "cpu":
            return original(self, *args, **kwargs)
        depth = getattr(_local, "depth", 0)
        if depth == 0:
            file, line, through_runtime = _site(_state["skip"])
            key = (file, line, f"{kind} (fixitem runtime)" if through_runtime else kind)
            entry = _syncs.setdefault(key, [0, 0])
            entry[0] += 1
            if self.device.type not in ("cpu", "meta"):
                entry[1] += 1
        _local.depth = depth + 1
        try:
            return original(self, *args, **kwargs)
        finally:
            _local.depth = depth

    read.__name__ = getattr(original, "__name__", kind)
    read.__qualname__ = getattr(original, "__qualname__", kind)
    read.__doc__ = getattr(original, "__doc__", None)
    read.__wrapped__ = original
    return read


def _install_sync_counting(torch) -> None:
    _state["torch"] = torch
    _state["skip"] = (os.path.dirname(os.path.abspath(torch.__file__)) + os.sep, os.path.abspath(__file__))
    for kind in (*_READS, "cpu"):
        original = getattr(torch.Tensor, kind, None)
        if original is not None:
            setattr(torch.Tensor, kind, _counting(original, kind, torch))


def _install_break_listener(_module) -> None:
    import logging

    logger = logging.getLogger(_GRAPH_BREAK_LOGGER)
    handler = logging.Handler(level=logging.DEBUG)
    handler.emit = lambda record: _break_messages.append(record.getMessage())  # type: ignore[method-assign]
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    logger.propagate = False  # the program's own logging sees nothing new
    logger.disabled = False


class _Watcher(importlib.abc.MetaPathFinder):
    """Runs a callback right after a module has been executed, without importing it earlier."""

    def __init__(self, callbacks) -> None:
        self.callbacks = dict(callbacks)

    def find_spec(self, name, path=None, target=None):
        callback = self.callbacks.pop(name, None)
        if callback is None:
            return None
        if not self.callbacks and self in sys.meta_path:
            sys.meta_path.remove(self)
        spec = None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                break
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        original = spec.loader.exec_module

        def exec_module(module):
            original(module)
            try:
                callback(module)
            except Exception:  # noqa: BLE001 - never let the probe break the program
                pass

        spec.loader.exec_module = exec_module
        return spec


def _dump() -> None:
    if not _OUT:
        return
    breaks: dict[str, int] = {}
    torch = _state["torch"]
    dynamo_utils = sys.modules.get("torch._dynamo.utils")
    if torch is not None and dynamo_utils is not None:
        try:
            breaks = {str(k): int(v) for k, v in dynamo_utils.counters["graph_break"].items()}
        except Exception:  # noqa: BLE001
            breaks = {}
    data = {
        "pid": os.getpid(),
        "argv": sys.argv,
        "torch": torch is not None,
        "syncs": [[f, line, kind, n, dev] for (f, line, kind), (n, dev) in _syncs.items()],
        "break_messages": _break_messages,
        "break_counter": breaks,
    }
    try:
        with open(f"{_OUT}.{os.getpid()}", "w", encoding="utf-8") as fh:
            json.dump(data, fh)
    except OSError:
        pass


def _chain_existing_sitecustomize() -> None:
    """Import the environment's own ``sitecustomize`` too, and leave ``sys.path`` as it would be."""
    ours = sys.modules.pop("sitecustomize", None)
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _HERE]
    try:
        importlib.import_module("sitecustomize")
    except ImportError:
        pass
    except Exception:  # noqa: BLE001 - the environment's sitecustomize failed as it would without us
        import traceback

        traceback.print_exc()
    finally:
        if ours is not None:
            sys.modules["sitecustomize"] = ours


if _OUT:
    # Registered first, so it runs last: after the program's and fixitem.runtime's exit handlers.
    atexit.register(_dump)
    if "torch" in sys.modules:
        _install_sync_counting(sys.modules["torch"])
    else:
        sys.meta_path.insert(0, _Watcher({"torch": _install_sync_counting,
                                          "torch._dynamo.symbolic_convert": _install_break_listener}))
_chain_existing_sitecustomize()
