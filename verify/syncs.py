"""Count the host syncs that Python code performs, on any device.

A host sync is a read of a tensor's value by Python: ``t.item()``, ``float(t)``,
``if t:``, ``f"{t:.3f}"``, ``t.tolist()``, ``t.cpu()``... On an accelerator each
one makes the host wait until the device has computed the value. A
``TorchFunctionMode`` sees every such call, so the count is the same on CPU,
where nothing waits, as on CUDA, where everything does.
"""

from __future__ import annotations

import collections
import contextlib
import re
from collections.abc import Iterator
from dataclasses import dataclass

import torch
import torch._dynamo
import torch.fx
from torch.overrides import TorchFunctionMode

# Tensor methods through which Python reads a tensor's value.
SYNC_METHODS: dict[object, str] = {
    torch.Tensor.item: "item",
    torch.Tensor.tolist: "tolist",
    torch.Tensor.__bool__: "__bool__",
    torch.Tensor.__float__: "__float__",
    torch.Tensor.__int__: "__int__",
    torch.Tensor.__index__: "__index__",
    torch.Tensor.__format__: "__format__",
    torch.Tensor.__repr__: "__repr__",
    torch.Tensor.numpy: "numpy",
}


class SyncCounter(TorchFunctionMode):
    """Counts host syncs by kind while active; see :func:`count_host_syncs`."""

    def __init__(self) -> None:
        super().__init__()
        self.by_kind: collections.Counter[str] = collections.Counter()
        self.on_device = 0  # reads of tensors that live on an accelerator: the ones that wait there
        self._depth = 0

    @property
    def total(self) -> int:
        return sum(self.by_kind.values())

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        kind = SYNC_METHODS.get(func)
        if kind is None and func is torch.Tensor.cpu and args:
            if args[0].device.type != "cpu":
                kind = "cpu"
        # ``__format__`` calls ``item`` (and ``__repr__`` more) internally:
        # count the outermost read only.
        if kind is not None and self._depth == 0:
            self.by_kind[kind] += 1
            if args and isinstance(args[0], torch.Tensor) and args[0].device.type not in ("cpu", "meta"):
                self.on_device += 1
        if kind is not None:
            self._depth += 1
            try:
                return func(*args, **kwargs)
            finally:
                self._depth -= 1
        return func(*args, **kwargs)


@contextlib.contextmanager
def count_host_syncs() -> Iterator[SyncCounter]:
    """Count the host syncs of the code run inside the ``with`` block.

    >>> import torch
    >>> with count_host_syncs() as syncs:
    ...     _ = torch.ones(3).sum().item()
    >>> syncs.total
    1
    """
    counter = SyncCounter()
    with counter:
        yield counter


# --- Syncs left inside compiled graphs --------------------------------------
#
# Under ``torch.compile(fullgraph=True)`` Dynamo turns on
# ``capture_scalar_outputs``: ``t.item()`` no longer breaks the graph, it is
# captured as a node and the compiled code still reads the value back to the
# host. So "compiles with fullgraph=True" is not "no sync". An inspecting
# backend sees every FX graph Dynamo produces and lists those nodes. A node
# that introduces an unbacked symbol (``meta["unbacked_bindings"]``) produced a
# value the host must know: a scalar read (``item``) or an op whose output
# size depends on the data (``nonzero``, boolean-mask indexing...), which
# also waits for the device on CUDA.

_SCALAR_READ_NAMES = {"item", "tolist", "_local_scalar_dense"}
_FRAME = re.compile(r'File "(?P<file>[^"]+)", line (?P<line>\d+)')


@dataclass(frozen=True)
class GraphSync:
    """A node of a compiled graph that makes the host wait for the device."""

    kind: str  # "scalar_read" or "data_dependent"
    op: str
    file: str | None
    line: int | None
    code: str = ""

    @property
    def location(self) -> str:
        return "unknown location" if self.file is None else f"{self.file}:{self.line}"

    def to_json(self) -> dict:
        return {"kind": self.kind, "op": self.op, "file": self.file, "line": self.line, "code": self.code}


def _target_name(node: torch.fx.Node) -> str:
    target = node.target
    if isinstance(target, str):
        return target
    name = getattr(target, "__name__", None) or str(target)
    # OpOverload: aten._local_scalar_dense.default -> _local_scalar_dense
    overload_packet = getattr(target, "overloadpacket", None)
    if overload_packet is not None:
        name = getattr(overload_packet, "__name__", name)
    return name.split(".")[-1]


def _node_location(node: torch.fx.Node) -> tuple[str | None, int | None, str]:
    trace = node.meta.get("stack_trace") or ""
    frames = list(_FRAME.finditer(trace))
    if not frames:
        return None, None, ""
    last = frames[-1]
    rest = trace[last.end():].splitlines()
    code = rest[1].strip() if len(rest) > 1 else ""
    return last.group("file"), int(last.group("line")), code


def find_graph_syncs(gm: torch.fx.GraphModule) -> list[GraphSync]:
    """The nodes of ``gm`` that read a value back to the host."""
    found: list[GraphSync] = []
    for node in gm.graph.nodes:
        if node.op not in ("call_function", "call_method"):
            continue
        name = _target_name(node)
        if name in _SCALAR_READ_NAMES:
            kind = "scalar_read"
        elif node.meta.get("unbacked_bindings"):
            kind = "data_dependent"
        else:
            continue
        file, line, code = _node_location(node)
        found.append(GraphSync(kind=kind, op=name, file=file, line=line, code=code))
    return found


class InspectingBackend:
    """A ``torch.compile`` backend that records graph syncs, then delegates.

    >>> backend = InspectingBackend("eager")
    >>> fn = torch.compile(lambda x: x * x.sum().item(), backend=backend, fullgraph=True)
    >>> _ = fn(torch.ones(2))
    >>> [s.op for s in backend.scalar_reads]
    ['item']
    """

    def __init__(self, inner: str = "inductor") -> None:
        self.inner_name = inner
        self.inner = torch._dynamo.lookup_backend(inner)
        self.__name__ = inner  # shown by Dynamo in errors such as BackendCompilerFailed
        self.graph_count = 0
        self._syncs: dict[GraphSync, None] = {}  # ordered set over re-compilations

    def __repr__(self) -> str:
        return self.inner_name

    def __call__(self, gm: torch.fx.GraphModule, example_inputs):
        self.graph_count += 1
        for sync in find_graph_syncs(gm):
            self._syncs.setdefault(sync)
        return self.inner(gm, example_inputs)

    @property
    def syncs(self) -> list[GraphSync]:
        return list(self._syncs)

    @property
    def scalar_reads(self) -> list[GraphSync]:
        return [s for s in self._syncs if s.kind == "scalar_read"]

    @property
    def data_dependent(self) -> list[GraphSync]:
        return [s for s in self._syncs if s.kind == "data_dependent"]
