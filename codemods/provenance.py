"""Tensor provenance: is this expression a tensor, a numpy value, a number?

fixitem decides from the code alone, without running it:

* calls of ``torch.*`` / ``torch.nn.functional.*`` functions give tensors
  (except a list of functions that give other things: ``torch.is_tensor``,
  ``torch.device``, ...); ``np.*`` calls and ``.numpy()`` give numpy values;
* tensor methods give tensors (``.sum()``, ``.float()``, ``.detach()``...)
  except the ones that give Python values (``.item()``, ``.tolist()``,
  ``.size()``, ``.dim()``...);
* calling a module gives a tensor: ``self.fc(x)`` when ``self.fc`` was built
  from ``nn.*`` (or a module class of this file) in ``__init__``,
  ``model(x)`` when ``model = Net()``;
* parameters of ``forward`` in an ``nn.Module`` subclass, and parameters
  annotated ``Tensor``, are tensors;
* a name is what all its assignments in its function agree on; a name
  used with a method only tensors have (``loss.backward()``) is a tensor.

Anything else is ``UNKNOWN``: fixitem reports it when the call itself is a
sync (``x.item()``) but never rewrites it.

Beside the kind, :meth:`Provenance.certainty` says how sure that answer is
(:class:`Certainty`): a ``forward`` parameter is only *possibly* a tensor
until the function uses it as one, and so is anything derived from it.
:meth:`Provenance.on_cpu` says whether a tensor certainly lives in host
memory (``torch.from_numpy``, ``torch.tensor([...])`` without a device):
reading it costs a graph break in traced code but no device sync.
"""

from __future__ import annotations

import enum
from collections.abc import Iterator

import libcst as cst

from . import shortcuts
from .model.reductions import REDUCTIONS
from .model import devices, torch_stubs
from .reaching import Bindings, reaching_value
from .tree import children_of, node_at, nodes_within, number_of, subtree_stop


class Certainty(enum.Enum):
    """How sure provenance is that a value is a tensor."""

    TENSOR = "certainly a tensor"
    POSSIBLY = "possibly a tensor"  # unknown, or a tensor only by a heuristic (a bare ``forward`` parameter)
    NOT_TENSOR = "certainly not a tensor"


class Kind(enum.Enum):
    TENSOR = "tensor"
    NUMPY = "numpy"
    NUMBER = "number"  # a Python int / float / bool
    MODULE = "module"  # an nn.Module instance
    OTHER = "other"  # strings, containers, ... : known not to be a tensor
    UNKNOWN = "unknown"
    # Internal: the value depends on itself (``x = x * 2``); carries no information.
    PENDING = "pending"


# torch.* names that are not functions returning a tensor, where the stubs say nothing
# (what ``torch.numel`` or ``torch.is_tensor`` return, the stubs say): classes and
# submodules, and functions of torch's Python code without an annotated return.
NON_TENSOR_TORCH = frozenset(
    {
        "device", "dtype", "Size", "Generator", "set_default_dtype",
        "manual_seed", "seed", "initial_seed", "no_grad", "enable_grad",
        "inference_mode", "set_grad_enabled", "autocast", "save", "load", "jit", "cuda",
        "backends", "distributed", "set_printoptions", "finfo", "iinfo",
        "cond", "_assert", "_check",
        "utils", "compiler", "profiler", "optim", "autograd", "testing", "hub", "library", "fx",
        "overrides", "Tensor", "nn", "_dynamo", "_inductor", "export", "onnx", "multiprocessing",
        "get_device_module", "xpu", "mps", "npu",
        "accelerator", "amp", "random", "version", "package", "sparse", "quantization", "ao",
        "deterministic_algorithms_warn_only", "vmap", "func", "futures", "masked", "nested", "signal",
        "storage",
    }
)
# torch callables whose result is known and is not a tensor (a loaded
# checkpoint is a dict, a scripted or compiled model is a module or a function).
NON_TENSOR_RESULTS = {
    "torch.load": "other", "torch.jit.load": "other", "torch.hub.load": "other",
    "torch.hub.load_state_dict_from_url": "other", "torch.hub.list": "other", "torch.hub.help": "other",
    "torch.finfo": "other", "torch.iinfo": "other", "torch.device": "other", "torch.Size": "other",
    "torch.cuda.get_device_properties": "other", "torch.cuda.memory_allocated": "number",
    "torch.cuda.max_memory_allocated": "number", "torch.cuda.memory_reserved": "number",
    "torch.cuda.device_count": "number", "torch.cuda.is_available": "number",
    "torch.distributed.get_rank": "number", "torch.distributed.get_world_size": "number",
}
# Calls that wrap a module (or a function) into one that runs the same way:
# the result is a module when the argument is one, else a callable.
WRAPPING_CALLS = frozenset(
    {"torch.compile", "torch.jit.script", "torch.jit.trace", "torch.jit.trace_module", "torch.jit.freeze",
     "torch.jit.optimize_for_inference", "torch.compiler.compile", "torch.nn.DataParallel",
     "torch.nn.parallel.DistributedDataParallel", "torch.nn.parallel.DataParallel"}
)
# Creation functions: they build on the default device unless given ``device=``.
CREATION_FUNCTIONS = frozenset(
    {"tensor", "as_tensor", "zeros", "ones", "empty", "full", "arange", "linspace", "logspace", "eye",
     "rand", "randn", "randint", "randperm", "range", "zeros_like", "ones_like", "empty_like", "full_like",
     "rand_like", "randn_like", "randint_like", "from_numpy", "from_file", "frombuffer", "empty_strided",
     "scalar_tensor", "asarray"}
)
# Of those, the ones that keep their input's device (``*_like``) and the ones
# that always build on the host.
DEVICE_OF_INPUT = frozenset({"zeros_like", "ones_like", "empty_like", "full_like", "rand_like", "randn_like", "randint_like"})
ALWAYS_ON_HOST = frozenset({"from_numpy", "from_file", "frombuffer"})
# How far a read's kind follows the values that reach it before it takes its name's
# scope-wide kind (each step is a few frames of recursion).
MAX_REACHING_DEPTH = 40
# Tensor methods that give a (values, indices) pair (``max``/``min``/... with a dim). The
# stubs say "a tensor or a pair" for most of them: ``t.max(1)`` and ``t.max(other)`` differ
# only by the argument's type, which :meth:`Provenance.tensor_pair` looks at.
PAIR_METHODS = frozenset({"max", "min", "sort", "topk", "kthvalue", "median", "mode"})
# nn.Module methods that return the module itself.
MODULE_SELF_METHODS = frozenset(
    {"to", "cuda", "cpu", "xpu", "mps", "train", "eval", "float", "half", "double", "bfloat16",
     "requires_grad_", "share_memory", "to_empty", "type"}
)
# Tensor methods that may move a tensor to another device.
DEVICE_MOVES = frozenset({"to", "cuda", "xpu", "mps", "npu", "hpu", "ipu", "type", "copy_", "set_", "type_as", "to_device"})
DTYPES = frozenset(
    {"float", "float16", "float32", "float64", "half", "double", "bfloat16", "int", "int8", "int16", "int32",
     "int64", "uint8", "uint16", "uint32", "uint64", "long", "short", "bool", "complex64", "complex128",
     "cfloat", "cdouble", "float8_e4m3fn", "float8_e5m2", "qint8", "quint8"}
)
# torch.<prefix>... functions answer questions about the runtime, not tensors:
# is_autocast_enabled, are_deterministic_algorithms_enabled, get_float32_matmul_precision,
# set_default_device, use_deterministic_algorithms, has_lapack, can_cast ...
NON_TENSOR_PREFIXES = ("is_", "are_", "get_", "set_", "use_", "has_", "can_", "enable_", "disable_")

# What tensor methods, tensor attributes and torch functions return comes from the
# installed torch's own type stubs (:mod:`fixitem.codemods.model.torch_stubs`:
# ``def storage_offset(self) -> _int | SymInt``, ``def size(self, dim: _int) -> _int``).
# The facts below are kept only where the stubs say nothing.
NON_TENSOR_METHODS = {
    # Python-level methods of torch/_tensor.py without a return annotation:
    "backward": Kind.OTHER, "register_hook": Kind.OTHER, "storage": Kind.OTHER, "is_shared": Kind.NUMBER,
    "dim_order": Kind.OTHER, "__len__": Kind.NUMBER,
    # Overloads that give a tensor or not by their arguments (``type()`` is a string,
    # ``type(torch.float16)`` a tensor): where the call's arguments do not choose one.
    "type": Kind.OTHER,
}
# The method names that only tensors' metadata queries and reads carry: using one on a
# ``forward`` parameter shows it is a tensor (what each returns: the stubs).
TENSOR_QUERY_METHODS = frozenset(
    {
        "item", "tolist", "numpy", "size", "dim", "ndimension", "numel", "nelement", "element_size",
        "is_contiguous", "is_floating_point", "stride", "data_ptr", "get_device", "backward", "register_hook",
        "storage", "untyped_storage", "type", "split", "chunk", "unbind", "tensor_split", "equal", "allclose",
        "is_nonzero", "__len__", "is_complex", "is_signed", "is_pinned", "is_shared", "is_inference", "is_conj",
        "is_neg", "is_set_to", "has_names", "dim_order", "nbytes", "state_dict",
    }
)
# Methods whose result is never a tensor, whatever the receiver (a module's
# ``state_dict()`` is a dict of tensors, ``parameters()`` an iterator).
NON_TENSOR_ANY_METHODS = {
    "state_dict": Kind.OTHER, "load_state_dict": Kind.OTHER, "parameters": Kind.OTHER,
    "named_parameters": Kind.OTHER, "buffers": Kind.OTHER, "named_buffers": Kind.OTHER,
    "modules": Kind.OTHER, "named_modules": Kind.OTHER, "children": Kind.OTHER,
    "named_children": Kind.OTHER, "register_buffer": Kind.OTHER, "register_parameter": Kind.OTHER,
    "register_forward_hook": Kind.OTHER, "register_forward_pre_hook": Kind.OTHER,
}
# Tensor attributes the stubs do not declare (the others: ``TensorBase``'s annotations).
NON_TENSOR_ATTRIBUTES = {"names": Kind.OTHER, "is_complex": Kind.NUMBER}
# Attributes whose use on a ``forward`` parameter shows it is a tensor.
TENSOR_QUERY_ATTRIBUTES = frozenset(
    {
        "shape", "dtype", "device", "ndim", "requires_grad", "is_cuda", "is_leaf", "grad_fn", "layout", "names",
        "is_sparse", "is_quantized", "is_meta", "is_mps", "is_xpu", "is_cpu", "is_nested", "is_mkldnn",
        "is_complex", "nbytes", "itemsize",
    }
)
# Attributes of a numpy value that are not numpy values.
NUMPY_METADATA = {
    "shape": Kind.OTHER, "dtype": Kind.OTHER, "ndim": Kind.NUMBER, "size": Kind.NUMBER,
    "nbytes": Kind.NUMBER, "itemsize": Kind.NUMBER, "strides": Kind.OTHER, "flags": Kind.OTHER,
}
# Methods and attributes that tensors have and numpy arrays do not: using one
# on a value is evidence that it is a tensor.
TENSOR_ONLY_NAMES = frozenset(
    {
        "backward", "detach", "detach_", "unsqueeze", "masked_fill", "masked_fill_", "numel", "dim",
        "view", "view_as", "permute", "contiguous", "long", "softmax", "log_softmax", "clamp",
        "clamp_", "expand", "expand_as", "new_zeros", "new_ones", "new_full", "new_empty", "type_as",
        "masked_select", "index_select", "gather", "scatter", "scatter_add", "sigmoid", "relu",
        "data_ptr", "pin_memory", "isnan", "isinf", "isfinite", "logical_not",
    }
)
# Attributes and methods whose use on a ``forward`` parameter shows it is a
# tensor (numpy arrays have some of them too, but do not reach ``forward``).
TENSOR_USES = TENSOR_ONLY_NAMES | TENSOR_QUERY_METHODS | TENSOR_QUERY_ATTRIBUTES | REDUCTIONS | frozenset(
    {"to", "float", "half", "double", "bfloat16", "int", "bool", "abs", "cpu", "cuda", "reshape", "transpose",
     "flatten", "squeeze", "exp", "log", "pow", "sqrt", "matmul", "T", "mT", "masked_fill", "clone", "repeat", "size"}
)
# Attributes (not called) that only tensors have.
TENSOR_ONLY_ATTRIBUTES = frozenset({"grad", "requires_grad", "grad_fn", "is_cuda", "is_leaf"})

# Base classes of custom autograd functions: their ``forward(ctx, ...)`` and
# ``backward(ctx, ...)`` take tensors and plain Python arguments alike.
AUTOGRAD_FUNCTIONS = frozenset(
    {"torch.autograd.Function", "torch.autograd.function.Function", "torch.autograd.function.InplaceFunction",
     "torch.autograd.InplaceFunction"}
)
AUTOGRAD_METHODS = frozenset({"forward", "backward", "setup_context", "jvp", "vjp", "vmap"})

# Names of the ``nn`` classes whose instances are modules (anything in torch.nn
# starting with an upper-case letter, except these).
NN_NON_MODULES = frozenset({"Parameter", "ParameterList", "ParameterDict", "Buffer", "Module"})


COMPREHENSIONS = (cst.ListComp, cst.SetComp, cst.GeneratorExp, cst.DictComp)

# Methods that put values into a list (or a set, or a deque) they are called on.
CONTAINER_ADDS = frozenset({"append", "extend", "insert", "add", "appendleft", "update", "setdefault"})
# Builtins that give a container of the same elements as their argument, and
# functions of torch that give a list of the modules / tensors they are given.
SAME_ELEMENTS = frozenset({"list", "tuple", "sorted", "reversed", "set", "iter"})
# Containers of modules: iterating them (or indexing them with a number) gives modules.
MODULE_CONTAINERS = frozenset({"torch.nn.ModuleList", "torch.nn.Sequential"})
# Decorators after which a function still returns what its body returns.
TRANSPARENT_DECORATORS = frozenset(
    {"staticmethod", "classmethod", "torch.no_grad", "torch.inference_mode", "torch.enable_grad",
     "functools.cache", "functools.lru_cache", "torch.compile", "torch.jit.script", "torch.jit.ignore",
     "torch.jit.unused", "torch.compiler.disable", "torch._dynamo.disable"}
)
# Python functions of torch that return a tensor (not in its type stubs, which
# cover the functions written in C++).
TENSOR_RESULTS = frozenset(
    {"torch.nn.utils.clip_grad_norm_", "torch.nn.utils.clip_grad.clip_grad_norm_", "torch.nn.utils.get_total_norm",
     "torch.nn.utils.clip_grad.get_total_norm", "torch.nn.utils.parameters_to_vector"}
)


class _Item:
    """The ``index``-th item of each element of ``iterable`` (a loop's tuple target)."""

    __slots__ = ("index", "iterable")

    def __init__(self, iterable: cst.BaseExpression, index: int) -> None:
        self.iterable = iterable
        self.index = index


class _Added:
    """What one statement puts into a container: one ``element``, or the elements of
    a container (``extend``)."""

    __slots__ = ("how", "value")

    def __init__(self, how: str, value: cst.BaseExpression) -> None:
        self.how = how
        self.value = value


# In the hottest functions below, ``type(node) is cst.X`` stands for ``isinstance(node,
# cst.X)``: libcst's nodes are ABCs, so an isinstance test that fails runs ABCMeta's
# Python-level check, and the concrete node classes have no subclasses (a test checks).


def dotted_name(node: cst.BaseExpression) -> str | None:
    """``a.b.c`` for a Name / Attribute chain, else None."""
    parts: list[str] = []
    while type(node) is cst.Attribute:
        parts.append(node.attr.value)  # type: ignore[attr-defined]
        node = node.value  # type: ignore[attr-defined]
    if type(node) is cst.Name:
        parts.append(node.value)
        return ".".join(reversed(parts))
    return None


def _join(kinds: list[Kind]) -> Kind:
    kinds = [k for k in kinds if k is not Kind.PENDING]
    if not kinds:
        return Kind.PENDING
    if Kind.NUMPY in kinds:
        return Kind.NUMPY
    first = kinds[0]
    if all(k is first for k in kinds):
        return first
    return Kind.UNKNOWN


class Imports:
    """Local names bound by imports, mapped to what they stand for."""

    def __init__(self, module: cst.Module) -> None:
        self.aliases: dict[str, str] = {}
        for node in _walk_statements(module):
            if isinstance(node, cst.Import):
                for alias in node.names:
                    full = dotted_name(alias.name) or ""
                    if alias.asname is not None:
                        local = alias.asname.name
                        if isinstance(local, cst.Name):
                            self.aliases[local.value] = full
                    else:
                        root = full.split(".")[0]
                        self.aliases[root] = root
            elif isinstance(node, cst.ImportFrom) and node.module is not None and node.relative == ():
                base = dotted_name(node.module) or ""
                if isinstance(node.names, cst.ImportStar):
                    continue
                for alias in node.names:
                    name = dotted_name(alias.name) or ""
                    local = name
                    if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                        local = alias.asname.name.value
                    self.aliases[local] = f"{base}.{name}"

    def qualify(self, node: cst.BaseExpression) -> str | None:
        """The full dotted name an expression refers to, through imports."""
        name = dotted_name(node)
        if name is None:
            return None
        root, _, rest = name.partition(".")
        if root in self.aliases:
            full = self.aliases[root]
            return f"{full}.{rest}" if rest else full
        return name

    def torch_alias(self) -> str | None:
        """The local name of the ``torch`` module, if the file imports it."""
        for local, full in self.aliases.items():
            if full == "torch":
                return local
        return None


def _walk_statements(module: cst.Module) -> list[cst.CSTNode]:
    """Every import statement of the module, at any depth."""
    return nodes_within(module, cst.Import, cst.ImportFrom)


def is_torch_function(qualified: str | None) -> bool:
    """Is ``qualified`` a torch function that returns a tensor? The stubs say, where they
    know it; else the rules below do."""
    if not qualified or not qualified.startswith("torch."):
        return False
    stub = torch_function_kind(qualified)
    if stub is not None:
        return stub is Kind.TENSOR
    parts = qualified.split(".")
    if parts[1] == "nn":
        return len(parts) >= 4 and parts[2] == "functional"
    if parts[1] in ("linalg", "fft", "special"):
        return True
    if len(parts) != 2:
        return False
    name = parts[1]
    if name in NON_TENSOR_TORCH or name.startswith(("_", *NON_TENSOR_PREFIXES)) or name[0].isupper():
        return False
    return True


_STUB_KINDS = {
    torch_stubs.TENSOR: Kind.TENSOR, torch_stubs.INT: Kind.NUMBER, torch_stubs.FLOAT: Kind.NUMBER,
    torch_stubs.BOOL: Kind.NUMBER, torch_stubs.NUMBER: Kind.NUMBER, torch_stubs.NUMPY: Kind.NUMPY,
    torch_stubs.LIST: Kind.OTHER, torch_stubs.TENSORS: Kind.OTHER, torch_stubs.NONE: Kind.OTHER,
    torch_stubs.OTHER: Kind.OTHER,
}


def stub_kind(kind: str | None) -> Kind | None:
    """The provenance kind of a return kind the stubs give; None where they leave it open:
    not listed, ``Any``, or overloads that give a tensor for some arguments and something
    else for others (``torch.max(x, 1)`` is a pair, ``torch.max(x, y)`` a tensor)."""
    if kind is None or kind == torch_stubs.UNKNOWN:
        return None
    parts = set(kind.split("|"))
    if parts == {torch_stubs.TENSOR, torch_stubs.NONE}:
        return Kind.TENSOR  # ``t.grad``: a tensor where there is one
    kinds = {_STUB_KINDS[p] for p in parts if p in _STUB_KINDS}
    if len(kinds) == 1 and len(parts) == len([p for p in parts if p in _STUB_KINDS]):
        return kinds.pop()
    if Kind.TENSOR in kinds or Kind.NUMPY in kinds:
        return None
    return Kind.OTHER


def call_shape(call: cst.Call) -> tuple[int | None, frozenset[str]]:
    """How many positional arguments ``call`` passes and its keywords, to choose among a
    stub's overloads; None when that cannot be told (``*args``, ``**kwargs``) or when an
    argument is a literal ``None`` (an overload whose parameter is typed ``None`` takes it)."""
    positional = 0
    keywords: set[str] = set()
    for arg in call.args:
        if arg.star:
            return None, frozenset()
        if arg.keyword is not None:
            keywords.add(arg.keyword.value)
        else:
            if isinstance(arg.value, cst.Name) and arg.value.value == "None":
                return None, frozenset()
            positional += 1
    return positional, frozenset(keywords)


def torch_function_kind(qualified: str, call: cst.Call | None = None) -> Kind | None:
    """What the stubs say the torch function ``qualified`` returns (None where they are silent)."""
    positional, keywords = call_shape(call) if call is not None else (None, frozenset())
    return stub_kind(torch_stubs.table().function_kind(qualified, positional, keywords))


def tensor_method_kind(call: cst.Call) -> Kind | None:
    """What the stubs say the tensor method called by ``call`` returns (None where silent)."""
    assert isinstance(call.func, cst.Attribute)
    positional, keywords = call_shape(call)
    return stub_kind(torch_stubs.table().method_kind(call.func.attr.value, positional, keywords))


def is_module_class(qualified: str | None, local_modules: set[str]) -> bool:
    if not qualified:
        return False
    if qualified in local_modules:
        return True
    parts = qualified.split(".")
    return (
        len(parts) >= 3
        and parts[0] == "torch"
        and parts[1] == "nn"
        and parts[-1][:1].isupper()
        and parts[-1] not in NN_NON_MODULES
        and parts[2] not in ("functional", "utils", "init", "parameter")
    )


class Scope:
    """The bindings of one function (or of the module)."""

    def __init__(self, node: cst.CSTNode, parent: Scope | None) -> None:
        self.node = node
        self.parent = parent
        self.bindings: dict[str, list[tuple[str, cst.CSTNode | None]]] = {}
        # How a name was bound: ("value", expr), ("iter", expr), ("param", Param),
        # ("opaque", None) for bindings fixitem cannot see through.
        self.evidence: set[str] = set()
        # Names used as Python sizes (``x.view(B, H, W)``, ``range(n)``, ``x[:, :n]``,
        # ``L == H * W`` against a shape): evidence of an int, not of a tensor.
        self.size_uses: set[str] = set()
        self.size_comparisons: list[tuple[cst.BaseExpression, cst.BaseExpression]] = []  # ``a == b``

    def shape_derived(self, expr: cst.BaseExpression) -> bool:
        """``x.shape[1]``, ``x.size(1)``, ``len(x)``, or a name unpacked from ``x.shape``
        (``B, L, C = x.shape``): a size read from a tensor's header."""
        if _is_shape_query(expr):
            return True
        if isinstance(expr, cst.Name) and expr.value in self.bindings:
            bindings = self.bindings[expr.value]
            return all(how in ("unpack", "value") and isinstance(node, cst.BaseExpression) and _is_shape_query(node)
                       for how, node in bindings)
        return False

    def settle_size_uses(self) -> None:
        """``assert L == H * W`` with ``B, L, C = x.shape``: H and W are sizes."""
        for left, right in self.size_comparisons:
            if self.shape_derived(left):
                self.size_uses.update(_size_names(right))
            elif self.shape_derived(right):
                self.size_uses.update(_size_names(left))

    def bind(self, name: str, how: str, node: cst.CSTNode | None) -> None:
        self.bindings.setdefault(name, []).append((how, node))

    def lookup(self, name: str) -> Scope | None:
        scope: Scope | None = self
        while scope is not None:
            if name in scope.bindings:
                return scope
            scope = scope.parent
        return None


class Provenance:
    """Answers ``kind(expr)`` for the expressions of one parsed module."""

    def __init__(self, module: cst.Module, parents: dict[cst.CSTNode, cst.CSTNode]) -> None:
        self.module = module
        self.parents = parents
        self.imports = Imports(module)
        self.scopes: dict[cst.CSTNode, Scope] = {}
        self.module_classes: set[str] = set()  # nn.Module subclasses defined here
        self.autograd_classes: set[str] = set()  # torch.autograd.Function subclasses defined here
        self.class_attrs: dict[cst.ClassDef, dict[str, list[cst.BaseExpression]]] = {}
        self.tensor_functions: set[str] = set()  # local functions annotated "-> Tensor"
        self._cache: dict[cst.CSTNode, Kind] = {}
        self._names: dict[tuple[int, str], Kind] | None = None  # (scope, name) -> kind
        self._solving = False
        self._pending_reads = 0
        self._reads: set[tuple[int, str]] | None = None  # while solving: the names a computation reads
        self._scope_cache: dict[cst.CSTNode, Scope] = {}
        self._reaching: dict[int, cst.BaseExpression | cst.Param | None] = {}  # id(Name) -> what it sees
        self._reaching_depth = 0
        self._bindings: Bindings | None = None  # where each name is bound, for reaching()
        self._global_names: frozenset[str] | None = None
        self._certain_cache: dict[cst.CSTNode, bool] = {}
        self._tensor_use_cache: dict[tuple[int, str], bool] = {}
        self._cpu_cache: dict[cst.CSTNode, bool] = {}
        self._default_device: bool | None = None  # does the file change the default device?
        # Flow facts (filled while scopes are collected, resolved after):
        # ``t.loss = v`` of a local object ``t``: (scope of ``t``, "t.loss") -> how it is bound;
        self._object_attrs: dict[tuple[int, str], list[tuple[str, cst.CSTNode]]] = {}
        # what is put into a container name (``xs.append(v)``, ``xs[i] = v``, ``xs += [v]``);
        self._container_adds: dict[tuple[int, str], list[_Added]] = {}
        self._pending_targets: list[tuple[Scope, str, str, str, cst.CSTNode]] = []
        self._object_scopes: dict[tuple[int, str], Scope] = {}
        self._tested_names: set[str] = set()  # names an ``isinstance`` or ``is None`` test reads
        self._guard_cache: dict[int, list[tuple[cst.BaseExpression, bool]]] = {}
        self._uses_by_name: dict[str, list[cst.Name]] | None = None  # for the call sites of functions
        self._exported = False
        self._passing: set[int] = set()  # parameters whose passed values are being worked out
        # the functions and methods of this file, and the values they return.
        self.functions: dict[str, cst.FunctionDef] = {}
        self.methods: dict[tuple[cst.ClassDef, str], cst.FunctionDef] = {}
        self._returns: dict[cst.FunctionDef, list[cst.BaseExpression | None]] = {}
        self._generators: set[cst.FunctionDef] = set()
        self._element_guard: set[tuple[int, str]] = set()
        self._element_kinds_open: set[object] = set()
        self._collect_classes()
        self._collect_scopes()

    # -- collection -------------------------------------------------------------------------

    def _collect_classes(self) -> None:
        classes = nodes_within(self.module, cst.ClassDef)
        changed = True
        while changed:
            changed = False
            for cls in classes:
                name = cls.name.value
                if name in self.module_classes:
                    continue
                for base in cls.bases:
                    q = self.imports.qualify(base.value)
                    if q in ("torch.nn.Module", "nn.Module") or is_module_class(q, self.module_classes):
                        self.module_classes.add(name)
                        changed = True
                        break
                    if name not in self.autograd_classes and (q in AUTOGRAD_FUNCTIONS or q in self.autograd_classes):
                        self.autograd_classes.add(name)
                        changed = True
        for cls in classes:
            attrs: dict[str, list[cst.BaseExpression]] = {}
            for node in nodes_within(cls, cst.Assign, cst.AnnAssign, cst.Call):
                if isinstance(node, cst.Assign):
                    for target in node.targets:
                        t = target.target
                        if isinstance(t, cst.Attribute) and isinstance(t.value, cst.Name) and t.value.value == "self":
                            attrs.setdefault(t.attr.value, []).append(node.value)
                elif isinstance(node, cst.AnnAssign) and node.value is not None:
                    t = node.target
                    if isinstance(t, cst.Attribute) and isinstance(t.value, cst.Name) and t.value.value == "self":
                        attrs.setdefault(t.attr.value, []).append(node.value)
                elif isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):
                    if node.func.attr.value == "register_buffer" and node.args:
                        first = node.args[0].value
                        if isinstance(first, cst.SimpleString):
                            attrs.setdefault(first.evaluated_value, []).append(cst.Name("__buffer__"))
            self.class_attrs[cls] = attrs
        for node in nodes_within(self.module, cst.FunctionDef):
            if node.returns is not None:
                if self._annotation_kind(node.returns.annotation) is Kind.TENSOR:
                    self.tensor_functions.add(node.name.value)

    def _collect_scopes(self) -> None:
        root = Scope(self.module, None)
        self.scopes[self.module] = root
        self._fill_scope(root, self.module.body)
        for scope in self.scopes.values():
            scope.settle_size_uses()
        for scope, base, attr, how, node in self._pending_targets:
            owner = scope.lookup(base)
            if owner is None:
                continue
            if how == "add":
                self._container_adds.setdefault((id(owner), base), []).append(node)  # type: ignore[arg-type]
            else:
                self._object_attrs.setdefault((id(owner), f"{base}.{attr}"), []).append((how, node))
                self._object_scopes[(id(owner), f"{base}.{attr}")] = owner
        self._pending_targets = []
        for node in nodes_within(self.module, cst.FunctionDef):
            parent = self.parents.get(node)
            owner = self.parents.get(parent) if isinstance(parent, cst.IndentedBlock) else None
            if isinstance(owner, cst.ClassDef):
                self.methods[(owner, node.name.value)] = node
            elif isinstance(parent, cst.Module):
                self.functions[node.name.value] = node
            inner = self.scopes.get(node)
            self._returns[node] = [r.value for r in nodes_within(node.body, cst.Return) if self.scope_of(r) is inner]
            if any(self.scope_of(n) is inner for n in nodes_within(node.body, cst.Yield, cst.Await)):
                self._generators.add(node)

    def _fill_scope(self, scope: Scope, body: object) -> None:
        for node in _iter_scope_nodes(body):
            t = type(node)
            if t not in _BINDING_NODES:
                continue
            if t in (cst.FunctionDef, cst.Lambda):
                if t is cst.FunctionDef:
                    scope.bind(node.name.value, "opaque", None)
                inner = Scope(node, scope)
                self.scopes[node] = inner
                for param in all_params(node.params):
                    inner.bind(param.name.value, "param", param)
                self._fill_scope(inner, node.body)
            elif t is cst.ClassDef:
                scope.bind(node.name.value, "opaque", None)
                inner = Scope(node, scope)
                self.scopes[node] = inner
                self._fill_scope(inner, node.body)
            elif t in COMPREHENSIONS:
                inner = Scope(node, scope)
                self.scopes[node] = inner
                comp = node.for_in
                while comp is not None:
                    self._bind_target(inner, comp.target, "iter", comp.iter)
                    comp = comp.inner_for_in
            elif t is cst.Assign:
                for target in node.targets:
                    self._bind_target(scope, target.target, "value", node.value)
                    self._note_target(scope, target.target, "value", node.value)
            elif t is cst.AnnAssign:
                how = "value" if node.value is not None else "annotation"
                self._bind_target(scope, node.target, how, node.value if node.value is not None else node.annotation)
            elif t is cst.AugAssign:
                self._bind_target(scope, node.target, "aug", node)
                self._note_target(scope, node.target, "aug", node)
            elif t is cst.NamedExpr:
                self._bind_target(scope, node.target, "value", node.value)
            elif t is cst.For:
                self._bind_target(scope, node.target, "iter", node.iter)
            elif t is cst.WithItem and node.asname is not None:
                self._bind_target(scope, node.asname.name, "opaque", None)
            elif t in (cst.Import, cst.ImportFrom):
                if t is cst.ImportFrom and isinstance(node.names, cst.ImportStar):
                    continue
                for alias in node.names:  # type: ignore[union-attr]
                    local = alias.evaluated_alias or (alias.evaluated_name.split(".")[0])
                    scope.bind(local, "import", None)
            elif t is cst.ExceptHandler and node.name is not None:
                self._bind_target(scope, node.name.name, "opaque", None)
            elif t in (cst.Global, cst.Nonlocal):
                for item in node.names:
                    scope.bind(item.name.value, "opaque", None)
            elif t is cst.Call:
                scope.size_uses.update(_size_names_of_call(node, self.imports))
                if node.args and type(node.args[0].value) is cst.Name and (dotted_name(node.func) or "").split(".")[-1] in (
                        "isinstance", "is_tensor"):
                    self._tested_names.add(node.args[0].value.value)  # type: ignore[attr-defined]
                if isinstance(node.func, cst.Attribute):
                    receiver = node.func.value
                    if isinstance(receiver, cst.Name) and node.func.attr.value in CONTAINER_ADDS and node.args:
                        # ``xs.append(v)``, ``xs.insert(i, v)``: ``v`` is an element; ``xs.extend(ys)``: ys's are.
                        added = node.args[-1].value
                        how = "extend" if node.func.attr.value in ("extend", "update") else "element"
                        self._pending_targets.append((scope, receiver.value, how, "add", _Added(how, added)))
                    if isinstance(receiver, cst.Name) and node.func.attr.value in TENSOR_ONLY_NAMES:
                        if receiver.value not in ("self", "cls"):
                            scope.evidence.add(receiver.value)
                    elif node.func.attr.value == "save_for_backward":
                        # ``ctx.save_for_backward`` takes tensors only.
                        for arg in node.args:
                            if isinstance(arg.value, cst.Name):
                                scope.evidence.add(arg.value.value)
            elif t is cst.Slice:
                for bound in (node.lower, node.upper, node.step):
                    if bound is not None:
                        scope.size_uses.update(_size_names(bound))
            elif t is cst.Comparison:
                if len(node.comparisons) == 1 and isinstance(node.comparisons[0].operator, (cst.Equal, cst.NotEqual)):
                    scope.size_comparisons.append((node.left, node.comparisons[0].comparator))
                elif type(node.left) is cst.Name and isinstance(node.comparisons[0].operator, (cst.Is, cst.IsNot)):
                    self._tested_names.add(node.left.value)
            elif t is cst.Attribute:
                if isinstance(node.value, cst.Name) and node.attr.value in TENSOR_ONLY_ATTRIBUTES:
                    if node.value.value not in ("self", "cls"):
                        scope.evidence.add(node.value.value)

    def _note_target(self, scope: Scope, target: cst.BaseExpression, how: str, value: cst.CSTNode | None) -> None:
        """``t.loss = v`` of a local object, ``xs[i] = v`` and ``xs += [v]`` of a container."""
        if type(target) is cst.Attribute and type(target.value) is cst.Name and target.value.value not in ("self", "cls"):
            self._pending_targets.append((scope, target.value.value, target.attr.value, how, value))  # type: ignore[arg-type]
        elif type(target) is cst.Subscript and type(target.value) is cst.Name and how == "value":
            self._pending_targets.append((scope, target.value.value, "", "add", _Added("element", value)))  # type: ignore[arg-type]
        elif type(target) is cst.Name and how == "aug" and isinstance(value, cst.AugAssign):
            if isinstance(value.operator, cst.AddAssign) and isinstance(value.value, (cst.List, cst.Tuple, cst.ListComp)):
                self._pending_targets.append((scope, target.value, "", "add", _Added("extend", value.value)))

    def _bind_target(self, scope: Scope, target: cst.BaseExpression, how: str, value: cst.CSTNode | None) -> None:
        if isinstance(target, cst.Name):
            scope.bind(target.value, how, value)
        elif (
            isinstance(target, (cst.Tuple, cst.List))
            and how == "iter"
            and isinstance(value, cst.Call)
            and dotted_name(value.func) == "enumerate"
            and len(target.elements) == 2
            and value.args
        ):
            # ``for i, item in enumerate(xs)``: an int, and an element of xs.
            self._bind_target(scope, target.elements[0].value, "number", None)
            self._bind_target(scope, target.elements[1].value, "iter", value.args[0].value)
        elif (
            isinstance(target, (cst.Tuple, cst.List))
            and how == "iter"
            and isinstance(value, cst.Call)
            and dotted_name(value.func) == "zip"
            and len(target.elements) == len(value.args)
            and not any(a.star or a.keyword for a in value.args)
        ):
            # ``for a, b in zip(xs, ys)``: an element of each.
            for element, arg in zip(target.elements, value.args):
                self._bind_target(scope, element.value, "iter", arg.value)
        elif isinstance(target, (cst.Tuple, cst.List)) and how == "iter" and isinstance(value, cst.BaseExpression) and not any(
                isinstance(e, cst.StarredElement) for e in target.elements):
            # ``for data, target in batches``: the first and second item of each element.
            for i, element in enumerate(target.elements):
                if isinstance(element.value, cst.Name):
                    scope.bind(element.value.value, "iter_item", _Item(value, i))
                else:
                    self._bind_target(scope, element.value, "opaque", None)
        elif isinstance(target, (cst.Tuple, cst.List)):
            values = None
            if how == "value" and isinstance(value, (cst.Tuple, cst.List)) and len(value.elements) == len(target.elements):
                values = [e.value for e in value.elements]
            for i, element in enumerate(target.elements):
                inner = element.value
                if isinstance(element, cst.StarredElement):
                    self._bind_target(scope, inner, "opaque", None)
                elif values is not None:
                    self._bind_target(scope, inner, "value", values[i])
                elif how == "value" and isinstance(value, cst.BaseExpression):
                    # Unpacking a tensor (``a, b = t``) gives tensors; anything else, unknown.
                    self._bind_target(scope, inner, "unpack", value)
                else:
                    self._bind_target(scope, inner, "unpack" if how == "value" else "opaque", value)
        elif isinstance(target, cst.StarredElement):
            self._bind_target(scope, target.value, "opaque", None)

    # -- queries ------------------------------------------------------------------------------

    def scope_of(self, node: cst.CSTNode) -> Scope:
        cached = self._scope_cache.get(node)
        if cached is None:
            cached = self._scope_cache[node] = self._find_scope(node)
        return cached

    def _find_scope(self, node: cst.CSTNode) -> Scope:
        current: cst.CSTNode | None = node
        while current is not None:
            parent = self.parents.get(current)
            if parent is not None and parent in self.scopes:
                scope_node = parent
                # Default values and decorators belong to the enclosing scope.
                if isinstance(parent, (cst.FunctionDef, cst.Lambda, cst.ClassDef)) and current is not getattr(parent, "body", None):
                    if not isinstance(current, cst.Parameters):
                        current = parent
                        continue
                # The first iterable of a comprehension is evaluated outside it.
                return self.scopes[scope_node]
            current = parent
        return self.scopes[self.module]

    def enclosing_class(self, node: cst.CSTNode) -> cst.ClassDef | None:
        current = self.parents.get(node)
        while current is not None:
            if type(current) is cst.ClassDef:
                return current  # type: ignore[return-value]
            current = self.parents.get(current)
        return None

    def kind(self, expr: cst.CSTNode) -> Kind:
        if self._names is None:
            self._solve_names()
        cached = self._cache.get(expr)
        if cached is not None:
            return cached
        result = self._kind(expr)
        if not self._solving and result is not Kind.PENDING:  # PENDING: inside an element of its own container
            self._cache[expr] = result
        return result

    def _solve_names(self) -> None:
        """Give every name of every scope one kind, by iterating to a fixed point.

        A name's kind is what all its assignments in its scope agree on, and an
        assignment's value may read other names (or the name itself:
        ``x = x * 2``). Names start as PENDING (no information) and are
        recomputed until nothing changes, so evaluating an expression never
        recurses through names: each name is a table lookup.
        """
        self._names = {}
        self._solving = True
        pairs = [(scope, name) for scope in self.scopes.values() for name in scope.bindings]
        attributes = [(cls, attr) for cls, attrs in self.class_attrs.items() for attr in attrs]
        for scope, name in pairs:
            self._names[(id(scope), name)] = Kind.PENDING
        for cls, attr in attributes:
            self._names[(id(cls), "self." + attr)] = Kind.PENDING
        objects = list(self._object_attrs)
        returns = list(self._returns)
        # Names also bound to ``None``: their kind where a test proved them not None.
        maybe_none = [(scope, name) for scope, name in pairs if any(
            how == "value" and _is_none(node) for how, node in scope.bindings[name])]
        for key in objects:
            self._names[key] = Kind.PENDING
        for func in returns:
            self._names[(id(func), "return")] = Kind.PENDING
        for scope, name in maybe_none:
            self._names[(id(scope), name + NOT_NONE)] = Kind.PENDING
        # A name's kind is a function of the kinds it reads: one whose reads are all
        # unchanged since it was last computed would come out the same, and is skipped.
        reads: dict[tuple[int, str], set[tuple[int, str]]] = {}
        computed_at: dict[tuple[int, str], int] = {}
        changed_at: dict[tuple[int, str], int] = {}
        tick = 0

        def update(key: tuple[int, str], compute) -> bool:
            nonlocal tick
            assert self._names is not None
            if shortcuts.ENABLED and key in computed_at and all(changed_at.get(r, -1) <= computed_at[key] for r in reads[key]):
                return False
            self._reads = set()
            computed_at[key] = tick
            new = compute()
            reads[key], self._reads = self._reads, None
            if self._names[key] is new:
                return False
            self._names[key] = new
            tick += 1
            changed_at[key] = tick
            return True

        for _ in range(8):
            changed = False
            for scope, name in pairs:
                if update((id(scope), name), lambda: self._compute_name(scope, name)):
                    changed = True
            for cls, attr in attributes:
                if update((id(cls), "self." + attr), lambda: self._compute_attribute(cls, attr)):
                    changed = True
            for key in objects:
                if update(key, lambda: self._compute_object_attribute(key)):
                    changed = True
            for func in returns:
                if update((id(func), "return"), lambda: self._compute_return(func)):
                    changed = True
            for scope, name in maybe_none:
                if update((id(scope), name + NOT_NONE), lambda: self._compute_name(scope, name, not_none=True)):
                    changed = True
            if not changed:
                break
        for key, value in self._names.items():
            if value is Kind.PENDING:
                self._names[key] = Kind.UNKNOWN
        self._solving = False

    def _compute_attribute(self, cls: cst.ClassDef, attr: str) -> Kind:
        """``self.attr``: what every ``self.attr = ...`` of the class agrees on."""
        kinds = []
        for value in self.class_attrs[cls][attr]:
            if isinstance(value, cst.Name) and value.value == "__buffer__":
                kinds.append(Kind.TENSOR)
            else:
                kinds.append(self._settled(lambda: self.kind(value)))
        return _join(kinds)

    def _settled(self, compute) -> Kind:
        """``compute()``, but PENDING where it could only say UNKNOWN for lack of a
        value still being worked out: keeps the fixed-point iteration monotone."""
        before = self._pending_reads
        kind = compute()
        if kind is Kind.UNKNOWN and self._pending_reads > before:
            return Kind.PENDING
        return kind

    def _compute_object_attribute(self, key: tuple[int, str]) -> Kind:
        """``t.loss`` of an object ``t`` made in this function: what every ``t.loss = ...``
        of it (and ``self.loss = ...`` of its class, if defined here) agrees on."""
        base = key[1].split(".")[0]
        made = self._made_here(self._object_scopes[key], base)
        if made is None:
            return Kind.UNKNOWN
        attr = key[1].split(".", 1)[1]
        kinds: list[Kind] = []
        for how, node in self._object_attrs[key]:
            if how == "value" and isinstance(node, cst.BaseExpression):
                kinds.append(self._settled(lambda node=node: self.kind(node)))
            elif how == "aug" and isinstance(node, cst.AugAssign):
                if self._settled(lambda node=node: self.kind(node.value)) is Kind.TENSOR:
                    kinds.append(Kind.TENSOR)
        for cls in made:
            if attr in self.class_attrs.get(cls, {}):
                kinds.append(self._lookup((id(cls), "self." + attr)))
            elif any(type(n) is cst.FunctionDef and n.name.value in ("__getattr__", "__setattr__", "__getattribute__")
                     for n in nodes_within(cls, cst.FunctionDef)) or any(
                    type(n) is cst.FunctionDef and n.name.value == attr for n in nodes_within(cls, cst.FunctionDef)):
                return Kind.UNKNOWN  # a property, or attributes the class computes
        return _join(kinds)

    def _made_here(self, scope: Scope, base: str) -> list[cst.ClassDef] | None:
        """The classes of this file an object ``base`` is made from, when every binding of
        it in ``scope`` makes one (``t = State()``, ``t = SimpleNamespace()``); else None."""
        bindings = scope.bindings.get(base, [])
        if not bindings:
            return None
        classes: list[cst.ClassDef] = []
        for how, node in bindings:
            if how != "value" or not isinstance(node, cst.Call):
                return None
            q = self.imports.qualify(node.func) or ""
            if q in ("types.SimpleNamespace", "argparse.Namespace") and not node.args:
                continue
            local = next((c for c in self.class_attrs if c.name.value == q), None)
            if local is None or node.args and any(a.star for a in node.args) or local.bases:
                return None  # a class of another module (or with bases): its ``__init__`` may set anything
            classes.append(local)
        return classes

    def _compute_return(self, func: cst.FunctionDef) -> Kind:
        """What a function of this file returns: what all its ``return``s agree on."""
        for decorator in func.decorators:
            target = decorator.decorator.func if isinstance(decorator.decorator, cst.Call) else decorator.decorator
            if (self.imports.qualify(target) or "") not in TRANSPARENT_DECORATORS:
                return Kind.UNKNOWN
        if func.returns is not None:
            annotated = self._annotation_kind(func.returns.annotation)
            if annotated is not Kind.UNKNOWN:
                return annotated  # ``def _do_all_reduce(self, ...) -> torch.Tensor: pass``, overridden
        if func in self._generators:
            return Kind.OTHER  # a generator or a coroutine
        values = self._returns.get(func, [])
        if not values:
            # ``pass``, ``...`` or ``raise NotImplementedError``: a stub a subclass overrides.
            return Kind.UNKNOWN if _stub_body(func) else Kind.OTHER  # else: None
        return _join([Kind.OTHER if v is None else self._settled(lambda v=v: self.kind(v)) for v in values])

    def callee_names(self, func: cst.BaseExpression) -> set[str]:
        """The qualified names of what a call of ``func`` may call: through imports, and
        through a name bound to a function (``synchronize = torch.cuda.synchronize if cuda
        else (lambda: None)``: ``torch.cuda.synchronize`` or a lambda)."""
        found: set[str] = set()
        todo: list[cst.BaseExpression] = [func]
        seen: set[int] = set()
        while todo:
            expr = todo.pop()
            if id(expr) in seen or len(seen) > 16:
                continue
            seen.add(id(expr))
            if type(expr) is cst.IfExp:
                todo += [expr.body, expr.orelse]
                continue
            if type(expr) is cst.BooleanOperation:
                todo += [expr.left, expr.right]
                continue
            if type(expr) is cst.Name:
                scope = self.scope_of(expr).lookup(expr.value)
                if scope is not None and not any(how == "import" for how, _ in scope.bindings[expr.value]):
                    todo += self.assigned_values(expr)
                    continue
            q = self.imports.qualify(expr)
            if q is not None:
                found.add(q)
        return found

    def local_function(self, func: cst.BaseExpression) -> cst.FunctionDef | None:
        """The function of this file a call's callee certainly is: ``helper`` defined once at
        the top of the module, or ``self.method`` of the enclosing class."""
        if type(func) is cst.Name:
            node = self.functions.get(func.value)
            scope = self.scope_of(func).lookup(func.value)
            if node is not None and scope is self.scopes[self.module] and len(scope.bindings[func.value]) == 1:
                return node
            return None
        if type(func) is cst.Attribute and type(func.value) is cst.Name and func.value.value == "self":
            cls = self.enclosing_class(func)
            if cls is not None and func.attr.value not in self.class_attrs.get(cls, {}):
                return self.methods.get((cls, func.attr.value))
        return None

    def _compute_name(self, scope: Scope, value: str, not_none: bool = False) -> Kind:
        bindings = scope.bindings[value]
        if not_none:
            bindings = [(how, node) for how, node in bindings if not (how == "value" and _is_none(node))]
        kinds = [
            self._settled(lambda how=how, node=node: self._binding_kind(scope, value, how, node))
            for how, node in bindings
        ]
        known = [k for k in kinds if k is not None]
        result = _join(known)
        if result is Kind.UNKNOWN and Kind.TENSOR in known and all(k in (Kind.TENSOR, Kind.NUMBER) for k in known) and all(
            k is not Kind.TENSOR or how == "aug" for k, (how, _) in zip(kinds, bindings)
        ):
            # ``total = 0.0`` then ``total += loss``: a tensor from the first ``+=`` on (a
            # number only where the loop never ran; see :meth:`certainty`).
            return Kind.TENSOR
        if result is Kind.UNKNOWN and Kind.TENSOR in known and Kind.NUMPY not in known:
            # e.g. ``loss = 0.0`` then ``loss = criterion(...)``: a tensor when
            # a tensor method is called on it.
            if all(k in (Kind.TENSOR, Kind.NUMBER, Kind.UNKNOWN) for k in known) and value in scope.evidence:
                return Kind.TENSOR
        if result in (Kind.UNKNOWN, Kind.PENDING) and value in scope.evidence and Kind.NUMPY not in known:
            return Kind.TENSOR
        return result

    def is_tensor(self, expr: cst.CSTNode) -> bool:
        return self.kind(expr) is Kind.TENSOR

    def _annotation_kind(self, annotation: cst.BaseExpression) -> Kind:
        # ``Optional[Tensor]`` and ``Tensor | None``: a tensor wherever it is used as one.
        if isinstance(annotation, cst.Subscript) and len(annotation.slice) == 1:
            if self.imports.qualify(annotation.value) in ("typing.Optional", "Optional"):
                inner = annotation.slice[0].slice
                if isinstance(inner, cst.Index):
                    return self._annotation_kind(inner.value)
        if isinstance(annotation, cst.BinaryOperation) and isinstance(annotation.operator, cst.BitOr):
            for side, other in ((annotation.left, annotation.right), (annotation.right, annotation.left)):
                if isinstance(other, cst.Name) and other.value == "None":
                    return self._annotation_kind(side)
        q = self.imports.qualify(annotation)
        if q in ("torch.Tensor", "Tensor", "torch.nn.Parameter", "torch.FloatTensor", "torch.LongTensor"):
            return Kind.TENSOR
        if q in ("torch.nn.Module", "torch.nn.modules.module.Module") or (q is not None and q in self.module_classes):
            return Kind.MODULE
        if q in ("int", "float", "bool"):
            return Kind.NUMBER
        if q in ("str", "list", "dict", "tuple", "bytes"):
            return Kind.OTHER
        if isinstance(annotation, cst.SimpleString):
            inner = annotation.evaluated_value
            if inner in ("torch.Tensor", "Tensor"):
                return Kind.TENSOR
        return Kind.UNKNOWN

    def _kind(self, expr: cst.CSTNode) -> Kind:
        t = type(expr)
        if t in (cst.Integer, cst.Float, cst.Imaginary):
            return Kind.NUMBER
        if t in (cst.SimpleString, cst.ConcatenatedString, cst.FormattedString, cst.List,
                 cst.Dict, cst.Set, cst.ListComp, cst.DictComp, cst.SetComp, cst.Lambda):
            return Kind.OTHER
        if t is cst.Tuple:
            return Kind.OTHER
        if t is cst.Name:
            return self._name_kind(expr)
        if t is cst.Attribute:
            return self._attribute_kind(expr)
        if t is cst.Call:
            return self._call_kind(expr)
        if t is cst.Subscript:
            base = self.kind(expr.value)
            if base in (Kind.TENSOR, Kind.NUMPY):
                return base
            if base is Kind.OTHER and self.tensor_sequence(expr.value) and all(
                type(e.slice) is cst.Index for e in expr.slice
            ):
                return Kind.TENSOR  # ``torch.where(mask)[0]``, ``x.split(2)[-1]``
            if _is_shape_query(expr.value) and len(expr.slice) == 1 and isinstance(expr.slice[0].slice, cst.Index) and (
                self.kind(expr.value.value if isinstance(expr.value, cst.Attribute) else expr.value) in (Kind.TENSOR, Kind.NUMPY)
            ):
                return Kind.NUMBER  # ``x.shape[0]``: an int
            if base is not Kind.MODULE and len(expr.slice) == 1 and isinstance(expr.slice[0].slice, cst.Index):
                keyed = self._keyed_value(expr.value, expr.slice[0].slice.value)
                if keyed is not None:
                    return self.kind(keyed)  # ``parts["loss"]`` of ``parts = {"loss": loss, "n": 3}``
                return self.element_kind(expr.value, "item")  # ``losses[-1]``
            return Kind.UNKNOWN
        if t is cst.UnaryOperation:
            if isinstance(expr.operator, cst.Not):
                return Kind.UNKNOWN if self.kind(expr.expression) is Kind.TENSOR else Kind.NUMBER
            return self.kind(expr.expression)
        if t is cst.BinaryOperation:
            if isinstance(expr.operator, cst.Modulo) and is_text(expr.left):
                return Kind.OTHER  # ``"%.3f" % loss``, ``("%g" * 3) % t``: a string
            left, right = self.kind(expr.left), self.kind(expr.right)
            if Kind.PENDING in (left, right) and not {left, right} & {Kind.TENSOR, Kind.NUMPY}:
                return Kind.PENDING
            if Kind.NUMPY in (left, right):
                return Kind.NUMPY if Kind.TENSOR not in (left, right) else Kind.UNKNOWN
            if Kind.TENSOR in (left, right):
                return Kind.TENSOR
            if left is Kind.NUMBER and right is Kind.NUMBER:
                return Kind.NUMBER
            return Kind.UNKNOWN
        if t is cst.Comparison:
            kinds = [self.kind(expr.left)] + [self.kind(c.comparator) for c in expr.comparisons]
            ops_are_identity = all(isinstance(c.operator, (cst.Is, cst.IsNot, cst.In, cst.NotIn)) for c in expr.comparisons)
            if ops_are_identity:
                return Kind.NUMBER
            if Kind.TENSOR in kinds and len(expr.comparisons) == 1:
                return Kind.TENSOR
            if all(k in (Kind.NUMBER, Kind.OTHER, Kind.MODULE) for k in kinds):
                # ``t.dtype == torch.float16``, ``x.shape == y.shape``: a Python bool
                return Kind.NUMBER
            return Kind.UNKNOWN
        if t is cst.BooleanOperation:
            left, right = self.kind(expr.left), self.kind(expr.right)
            return left if left is right else Kind.UNKNOWN
        if t is cst.IfExp:
            return _join([self.kind(expr.body), self.kind(expr.orelse)])
        if t is cst.NamedExpr:
            return self.kind(expr.value)
        return Kind.UNKNOWN

    def _name_kind(self, name: cst.Name) -> Kind:
        if name.value in self._tested_names:
            narrowed = self.narrowed(name)
            if narrowed is not None:
                return narrowed
        value = self.reaching(name)
        if value is not None:
            kind = self._deeper(lambda: self._reaching_kind(name, value))
            if kind not in (Kind.UNKNOWN, Kind.PENDING):
                return kind
        return self.name_kind_at(name.value, name)

    def narrowed(self, name: cst.Name) -> Kind | None:
        """The kind a test around this read proves: ``isinstance(x, torch.Tensor)`` (TENSOR in
        its branch, OTHER in the other), ``x is None`` (OTHER), ``x is not None`` (what the
        bindings other than ``None`` agree on); None where no test says anything, or where
        the name is rebound between the test and the read."""
        for test, truth in self._guards(name):
            found = self._test_proves(test, name, truth)
            if found is not None:
                return found
        return None

    def _guards(self, name: cst.Name) -> list[tuple[cst.BaseExpression, bool]]:
        """The tests around a read, innermost first, each with the value it has there,
        up to where the name is rebound (computed once per read)."""
        cached = self._guard_cache.get(id(name))
        if cached is not None:
            return cached
        if self._bindings is None:
            self._bindings = Bindings(self.module)
        guards: list[tuple[cst.BaseExpression, bool]] = []
        scope_node = self.scope_of(name).node
        child: cst.CSTNode = name
        node = self.parents.get(name)
        while node is not None and node is not scope_node:
            t = type(node)
            if t in (cst.If, cst.IfExp, cst.While) and child is not node.test:  # type: ignore[attr-defined]
                guards.append((node.test, child is node.body))  # type: ignore[attr-defined]
            elif t is cst.BooleanOperation and child is node.right:  # type: ignore[attr-defined]
                guards.append((node.left, isinstance(node.operator, cst.And)))  # type: ignore[attr-defined]
            elif t in (cst.IndentedBlock, cst.SimpleStatementLine, cst.SimpleStatementSuite):
                body = node.body  # type: ignore[attr-defined]
                index = next((i for i, item in enumerate(body) if item is child), len(body))
                if any(self._bindings.binds(earlier, name.value) for earlier in body[:index]):
                    break  # rebound after any test further out
            elif isinstance(node, cst.BaseCompoundStatement) and not isinstance(node, (cst.If, cst.With)):
                if not (t is cst.For and child is node.iter) and self._bindings.binds(node, name.value):  # type: ignore[attr-defined]
                    break  # a loop that rebinds it
            child = node
            node = self.parents.get(node)
        self._guard_cache[id(name)] = guards
        return guards

    def _test_proves(self, test: cst.BaseExpression, name: cst.Name, truth: bool) -> Kind | None:
        """What ``test`` being ``truth`` says about the kind of ``name``."""
        if type(test) is cst.UnaryOperation and isinstance(test.operator, cst.Not):
            return self._test_proves(test.expression, name, not truth)
        if type(test) is cst.BooleanOperation:
            # ``a and b`` true: both are; ``a or b`` false: neither is.
            if isinstance(test.operator, cst.And) == truth:
                return self._test_proves(test.left, name, truth) or self._test_proves(test.right, name, truth)
            return None
        if type(test) is cst.Comparison and len(test.comparisons) == 1 and type(test.left) is cst.Name and \
                test.left.value == name.value and _is_none(test.comparisons[0].comparator):
            operator = test.comparisons[0].operator
            if not isinstance(operator, (cst.Is, cst.IsNot)):
                return None
            if isinstance(operator, cst.Is) == truth:
                return Kind.OTHER  # ``None``
            scope = self.scope_of(name).lookup(name.value)
            if scope is None or (id(scope), name.value + NOT_NONE) not in (self._names or {}):
                return None
            kind = self._lookup((id(scope), name.value + NOT_NONE))
            return kind if kind not in (Kind.UNKNOWN, Kind.PENDING) else None
        if type(test) is cst.Call and test.args and type(test.args[0].value) is cst.Name and \
                test.args[0].value.value == name.value:
            q = self.imports.qualify(test.func) or ""
            if q == "torch.is_tensor" and len(test.args) == 1:
                return Kind.TENSOR if truth else Kind.OTHER
            if q == "isinstance" and len(test.args) == 2:
                classes = test.args[1].value
                names = [e.value for e in classes.elements] if type(classes) is cst.Tuple else [classes]
                qualified = [self.imports.qualify(c) or "" for c in names]
                tensors = [c in TENSOR_CLASSES for c in qualified]
                if truth and all(tensors):
                    return Kind.TENSOR
                if not truth and any(tensors):
                    return Kind.OTHER  # not a tensor (whatever else it is)
                if truth and all(c in ("int", "float", "bool", "numbers.Number", "numbers.Real") for c in qualified):
                    return Kind.NUMBER
                if truth and all(c in ("str", "list", "tuple", "dict", "set") for c in qualified):
                    return Kind.OTHER
        return None

    def _reaching_kind(self, name: cst.Name, value: cst.BaseExpression | cst.Param) -> Kind:
        if isinstance(value, cst.Param):
            return self._param_kind(self.scope_of(name), value)
        return self.kind(value)

    def _deeper(self, compute):
        """``compute()``, one step further along a chain of reaching values (``x = x + 1``
        repeated): past :data:`MAX_REACHING_DEPTH` steps, reads keep their scope-wide kind."""
        self._reaching_depth += 1
        try:
            return compute()
        finally:
            self._reaching_depth -= 1

    def reaching(self, name: cst.Name) -> cst.BaseExpression | cst.Param | None:
        """The value of the assignment this read of ``name`` certainly sees, in straight-line
        code of its own scope (see :mod:`.reaching`); None where there is no such one (and
        while names are being solved: a name has one kind for its scope there)."""
        if self._solving or self._reaching_depth > MAX_REACHING_DEPTH:
            return None
        key = id(name)
        if key in self._reaching:
            return self._reaching[key]
        scope = self.scope_of(name)
        found = None
        # A name bound once has that binding's kind everywhere: only rebound names need the search.
        if (
            len(scope.bindings.get(name.value, ())) > 1 and scope.lookup(name.value) is scope
            and name.value not in self._declared_elsewhere()
        ):
            if self._bindings is None:
                self._bindings = Bindings(self.module)
            found = reaching_value(name, scope.node, self.parents, self._bindings)
        self._reaching[key] = found
        return found

    def _declared_elsewhere(self) -> frozenset[str]:
        """Names some function declares ``global`` or ``nonlocal``: a call may rebind them."""
        if self._global_names is None:
            self._global_names = frozenset(
                item.name.value for kind in (cst.Global, cst.Nonlocal) for node in nodes_within(self.module, kind)
                for item in node.names  # type: ignore[attr-defined]
            )
        return self._global_names

    def name_kind_at(self, value: str, anchor: cst.CSTNode) -> Kind:
        """The kind of the name ``value`` as seen from the scope of ``anchor``."""
        if value in ("True", "False"):
            return Kind.NUMBER
        if value == "None":
            return Kind.OTHER
        scope = self.scope_of(anchor).lookup(value)
        if scope is None:
            if value in self.module_classes:
                return Kind.OTHER
            return Kind.UNKNOWN
        if self._names is None:
            self._solve_names()
        assert self._names is not None
        return self._lookup((id(scope), value))

    def _lookup(self, key: tuple[int, str]) -> Kind:
        assert self._names is not None
        kind = self._names.get(key, Kind.UNKNOWN)
        if self._reads is not None:
            self._reads.add(key)
        if kind is Kind.PENDING:
            self._pending_reads += 1
        return kind

    def _binding_kind(self, scope: Scope, name: str, how: str, node: cst.CSTNode | None) -> Kind | None:
        if how == "value" and isinstance(node, cst.BaseExpression):
            return self.kind(node)
        if how == "annotation" and isinstance(node, cst.Annotation):
            return self._annotation_kind(node.annotation)
        if how == "aug" and isinstance(node, cst.AugAssign):
            value = self.kind(node.value)
            # ``x += t`` keeps x's own kind unless it mixes in a tensor.
            return Kind.TENSOR if value is Kind.TENSOR else None
        if how == "iter" and isinstance(node, cst.BaseExpression):
            node = self._progress_bar_items(node)
            it = self.kind(node)
            if it is Kind.TENSOR or self.tensor_sequence(node):
                return Kind.TENSOR  # rows of a tensor, or ``for part in x.split(2)``
            if it is Kind.NUMPY:
                return Kind.NUMPY
            if isinstance(node, cst.Call) and dotted_name(node.func) in ("range", "enumerate"):
                return Kind.NUMBER if dotted_name(node.func) == "range" else Kind.UNKNOWN
            if isinstance(node, cst.Call) and self.imports.qualify(node.func) in ("tqdm.trange", "tqdm.auto.trange"):
                return Kind.NUMBER  # ``for i in trange(n)``
            return self.element_kind(node)
        if how == "iter_item" and isinstance(node, _Item):
            return self._item_kind(self._progress_bar_items(node.iterable), node.index)
        if how == "param" and isinstance(node, cst.Param):
            return self._param_kind(scope, node)
        if how == "number":
            return Kind.NUMBER
        if how == "unpack" and isinstance(node, cst.BaseExpression):
            # ``a, b = t`` and ``_, predicted = outputs.max(1)``: tensors.
            tensors = self.kind(node) is Kind.TENSOR or (isinstance(node, cst.Call) and self.tensor_pair(node)) or (
                self.tensor_sequence(node)  # ``a, b = torch.chunk(x, 2)``
            )
            return Kind.TENSOR if tensors else self.element_kind(node)
        if how == "import":
            # A module, or a value imported from one (``from config import LIMIT``).
            return Kind.UNKNOWN
        return Kind.UNKNOWN

    # -- containers ---------------------------------------------------------------------------

    def element_kind(self, container: cst.BaseExpression, of: str = "iter") -> Kind:
        """The kind of the elements of a container: what iterating it gives (``of="iter"``),
        or indexing it (``of="item"``: a dict's values). UNKNOWN where fixitem cannot see
        every element (a parameter, a container filled elsewhere)."""
        key: object = id(container)
        if type(container) is cst.Name:
            key = (id(self.scope_of(container).lookup(container.value)), container.value)  # type: ignore[attr-defined]
        if key in self._element_kinds_open or self._reaching_depth > MAX_REACHING_DEPTH:
            return Kind.PENDING  # ``xs[0] = xs[0] * a``: an element computed from the container itself
        elements = self._elements(container, of)
        if elements is None:
            return Kind.UNKNOWN
        self._element_kinds_open.add(key)
        try:
            return self._deeper(lambda: _join([e if isinstance(e, Kind) else self.kind(e) for e in elements]))
        finally:
            self._element_kinds_open.discard(key)

    def _item_kind(self, container: cst.BaseExpression, index: int) -> Kind:
        """``for data, target in batches``: the kind of item ``index`` of each element."""
        elements = self._elements(container, "iter")
        if elements is None:
            return Kind.UNKNOWN
        kinds: list[Kind] = []
        for element in elements:
            if isinstance(element, Kind):
                kinds.append(element if element in (Kind.TENSOR, Kind.NUMPY) else Kind.UNKNOWN)
            elif type(element) in (cst.Tuple, cst.List) and not any(
                    isinstance(e, cst.StarredElement) for e in element.elements):  # type: ignore[attr-defined]
                items = element.elements  # type: ignore[attr-defined]
                kinds.append(self.kind(items[index].value) if index < len(items) else Kind.UNKNOWN)
            else:
                kind = self.kind(element)  # unpacking a tensor gives its rows
                kinds.append(kind if kind in (Kind.TENSOR, Kind.NUMPY, Kind.PENDING) else Kind.UNKNOWN)
        return _join(kinds)

    def _elements(self, expr: cst.BaseExpression, of: str = "iter") -> list[cst.BaseExpression | Kind] | None:
        """Where the elements of a container come from: the expressions put into it (or
        their kind, where that is all there is to know); None where fixitem cannot see them all."""
        t = type(expr)
        if t in (cst.List, cst.Tuple, cst.Set):
            found: list[cst.BaseExpression | Kind] = []
            for element in expr.elements:  # type: ignore[attr-defined]
                if isinstance(element, cst.StarredElement):
                    inner = self._elements(element.value)
                    if inner is None:
                        return None
                    found += inner
                else:
                    found.append(element.value)
            return found
        if t in (cst.ListComp, cst.SetComp, cst.GeneratorExp):
            return [expr.elt]  # type: ignore[attr-defined]
        if t is cst.Dict:
            if of != "item" or any(not isinstance(e, cst.DictElement) for e in expr.elements):  # type: ignore[attr-defined]
                return None
            return [e.value for e in expr.elements]  # type: ignore[attr-defined]
        if t is cst.DictComp:
            return [expr.value] if of == "item" else None  # type: ignore[attr-defined]
        if t in (cst.SimpleString, cst.ConcatenatedString, cst.FormattedString, cst.Integer, cst.Float):
            return None
        kind = self.kind(expr)
        if kind in (Kind.TENSOR, Kind.NUMPY):
            return [kind]  # the rows of a tensor are tensors
        if kind is Kind.MODULE:
            # ``for block in self.blocks`` over an ``nn.ModuleList`` / ``nn.Sequential``.
            return [Kind.MODULE] if module_class_of(self, expr) in MODULE_CONTAINERS else None
        if t is cst.Call:
            q = self.imports.qualify(expr.func)  # type: ignore[attr-defined]
            args = expr.args  # type: ignore[attr-defined]
            if q in SAME_ELEMENTS and len(args) == 1 and args[0].keyword is None and not args[0].star:
                if q in ("sorted", "reversed", "iter") or of == "iter" or q == "list" or q == "tuple":
                    return self._elements(args[0].value, "iter")
            func = expr.func  # type: ignore[attr-defined]
            if type(func) is cst.Attribute and func.attr.value == "values" and not args:
                return self._elements(func.value, "item")
            return None
        if t is cst.Subscript and any(isinstance(e.slice, cst.Slice) for e in expr.slice):  # type: ignore[attr-defined]
            return self._elements(expr.value, of)  # type: ignore[attr-defined]  # ``xs[1:]``: a part of xs
        if t is cst.Name:
            return self._name_elements(expr, of)  # type: ignore[arg-type]
        if t is cst.Attribute and type(expr.value) is cst.Name and expr.value.value == "self":  # type: ignore[attr-defined]
            cls = self.enclosing_class(expr)
            values = self.class_attrs.get(cls, {}).get(expr.attr.value) if cls is not None else None  # type: ignore[attr-defined]
            key = (id(cls), "self." + expr.attr.value)  # type: ignore[attr-defined]
            if not values or key in self._element_guard or self._reaching_depth > MAX_REACHING_DEPTH:
                return None
            self._element_guard.add(key)
            try:
                return self._deeper(lambda: self._union_elements(values, [], of))
            finally:
                self._element_guard.discard(key)
        return None

    def _keyed_value(self, container: cst.BaseExpression, key: cst.BaseExpression) -> cst.BaseExpression | None:
        """``parts["loss"]`` where ``parts`` is bound once, to a dict literal with that key,
        and nothing is stored into it: the value written there."""
        if type(container) is not cst.Name or type(key) is not cst.SimpleString:
            return None
        scope = self.scope_of(container).lookup(container.value)
        bindings = scope.bindings.get(container.value, []) if scope is not None else []
        if len(bindings) != 1 or bindings[0][0] != "value" or type(bindings[0][1]) is not cst.Dict:
            return None
        if (id(scope), container.value) in self._container_adds:
            return None
        for element in bindings[0][1].elements:  # type: ignore[union-attr]
            if not isinstance(element, cst.DictElement):
                return None
            if type(element.key) is cst.SimpleString and element.key.evaluated_value == key.evaluated_value:
                return element.value
        return None

    def _name_elements(self, name: cst.Name, of: str) -> list[cst.BaseExpression | Kind] | None:
        scope = self.scope_of(name).lookup(name.value)
        if scope is None or (id(scope), name.value) in self._element_guard or self._reaching_depth > MAX_REACHING_DEPTH:
            return None
        bindings = scope.bindings.get(name.value, [])
        if not bindings or any(how != "value" or not isinstance(node, cst.BaseExpression) for how, node in bindings):
            return None
        self._element_guard.add((id(scope), name.value))
        try:
            values = [node for _, node in bindings]
            adds = self._container_adds.get((id(scope), name.value), [])
            return self._deeper(lambda: self._union_elements(values, adds, of))  # type: ignore[arg-type]
        finally:
            self._element_guard.discard((id(scope), name.value))

    def _union_elements(self, values: list[cst.BaseExpression], adds: list[_Added], of: str
                        ) -> list[cst.BaseExpression | Kind] | None:
        found: list[cst.BaseExpression | Kind] = []
        for value in values:
            inner = self._elements(value, of)
            if inner is None:
                return None
            found += inner
        for add in adds:
            if add.how == "element":
                found.append(add.value)
            else:
                inner = self._elements(add.value, "iter")
                if inner is None:
                    return None
                found += inner
        return found

    def _progress_bar_items(self, iterable: cst.BaseExpression) -> cst.BaseExpression:
        """``tqdm(xs, ...)`` yields the items of ``xs``: iterate ``xs`` instead."""
        if (
            isinstance(iterable, cst.Call) and iterable.args and iterable.args[0].keyword is None
            and not iterable.args[0].star
            and self.imports.qualify(iterable.func) in ("tqdm.tqdm", "tqdm.auto.tqdm", "tqdm.notebook.tqdm")
        ):
            return iterable.args[0].value
        return iterable

    def _param_kind(self, scope: Scope, param: cst.Param) -> Kind:
        if param.default is not None and not (isinstance(param.default, cst.Name) and param.default.value == "None"):
            # A literal default says more than the annotation: real code has
            # ``output_attentions: torch.Tensor | None = False``.
            default = self.kind(param.default)
            if default in (Kind.NUMBER, Kind.OTHER):
                return default
        if param.annotation is not None:
            # An annotation that is not a tensor type (``size: Size_``) overrides
            # the ``forward`` heuristic below.
            return self._annotation_kind(param.annotation.annotation)
        func = scope.node
        name = param.name.value
        if isinstance(func, cst.FunctionDef) and func.name.value in AUTOGRAD_METHODS:
            cls = self.enclosing_class(func)
            if cls is not None and cls.name.value in self.autograd_classes:
                # ``forward(ctx, bias, tp_degree, dtype)``: ``ctx`` is the context object;
                # the others are tensors only where the function uses them as tensors.
                if _first_param(func) is param:
                    return Kind.OTHER
                if param.star in ("*", "**"):
                    return Kind.UNKNOWN
                used = name in scope.evidence or self._used_as_tensor(scope, name, by_syntax_only=True)
                return Kind.TENSOR if used else Kind.UNKNOWN
        if isinstance(func, cst.FunctionDef) and func.name.value == "forward":
            cls = self.enclosing_class(func)
            if cls is not None and name not in ("self", "cls"):
                if param.star in ("*", "**") or param.default is not None:
                    return Kind.UNKNOWN
                if name in scope.size_uses and name not in scope.evidence:
                    # ``forward(self, x, H, W)`` with ``x.view(B, H, W, C)``: sizes, not tensors.
                    return Kind.UNKNOWN
                return Kind.TENSOR
        if isinstance(func, cst.FunctionDef) and param.star not in ("*", "**"):
            return self._passed_kind(func, param)
        return Kind.UNKNOWN

    def _passed_kind(self, func: cst.FunctionDef, param: cst.Param) -> Kind:
        """``def train(model, loader, epoch)`` called as ``train(model, loader, epoch)`` with
        ``for epoch in range(n)``: what every call of a module-level function of this file
        passes for the parameter. UNKNOWN where the function is used other than called by
        name (passed as a callback, exported in ``__all__``), or a call passes ``*args``."""
        calls = self._call_sites(func)
        if not calls or id(param) in self._passing or self._reaching_depth > MAX_REACHING_DEPTH:
            return Kind.UNKNOWN
        positional = [p.name.value for p in (*func.params.posonly_params, *func.params.params)]
        name = param.name.value
        index = positional.index(name) if name in positional else None
        kinds: list[Kind] = []
        self._passing.add(id(param))
        try:
            for call in calls:
                args = [a for a in call.args if a.keyword is None]
                passed = args[index].value if index is not None and index < len(args) else next(
                    (a.value for a in call.args if a.keyword is not None and a.keyword.value == name), param.default)
                if passed is None:
                    return Kind.UNKNOWN
                kinds.append(self._settled(lambda passed=passed: self._deeper(lambda: self.kind(passed))))
        finally:
            self._passing.discard(id(param))
        return _join(kinds)

    def _call_sites(self, func: cst.FunctionDef) -> list[cst.Call] | None:
        """The calls of a module-level function of this file, when every use of its name is one."""
        name = func.name.value
        if self.functions.get(name) is not func or len(self.scopes[self.module].bindings.get(name, [])) != 1:
            return None
        if self._uses_by_name is None:
            self._uses_by_name = {}
            for node in nodes_within(self.module, cst.Name):
                self._uses_by_name.setdefault(node.value, []).append(node)  # type: ignore[attr-defined]
            if "__all__" in self._uses_by_name:
                self._uses_by_name["__all__"] = []  # names exported may be called from elsewhere
                self._exported = True
        if self._exported:
            return None
        calls: list[cst.Call] = []
        for use in self._uses_by_name.get(name, []):
            parent = self.parents.get(use)
            if parent is func or (type(parent) is cst.Attribute and parent.attr is use) or (
                    type(parent) is cst.Arg and parent.keyword is use):
                continue  # the ``def`` itself, ``model.train()``, ``MNIST(train=True)``
            if self.scope_of(use).lookup(name) is not self.scopes[self.module]:
                continue  # another ``train`` (a parameter or a local of another function)
            if not (type(parent) is cst.Call and parent.func is use):
                return None
            if any(a.star for a in parent.args):  # type: ignore[attr-defined]
                return None
            calls.append(parent)  # type: ignore[arg-type]
        return calls

    # -- certainty ----------------------------------------------------------------------------

    def certainty(self, expr: cst.CSTNode) -> Certainty:
        """How sure it is that ``expr`` is a tensor: :attr:`Certainty.TENSOR` where
        the code proves it, :attr:`Certainty.POSSIBLY` where only a heuristic (a bare
        ``forward`` parameter) or nothing says so, :attr:`Certainty.NOT_TENSOR` where
        the value is known to be something else (numpy, a number, a module, ...)."""
        kind = self.kind(expr)
        if kind in (Kind.NUMPY, Kind.NUMBER, Kind.MODULE, Kind.OTHER):
            return Certainty.NOT_TENSOR
        if kind is not Kind.TENSOR:
            return Certainty.POSSIBLY
        return Certainty.TENSOR if self._certain(expr, frozenset()) else Certainty.POSSIBLY

    def _certain(self, expr: cst.CSTNode, seen: frozenset[tuple[int, str]]) -> bool:
        """For an expression of kind TENSOR: does that rest on proof rather than on
        the ``forward`` parameter heuristic?"""
        cached = self._certain_cache.get(expr)
        if cached is not None:
            return cached
        result = self._certain_uncached(expr, seen)
        self._certain_cache[expr] = result
        return result

    def _certain_tensor_part(self, expr: cst.BaseExpression, seen: frozenset[tuple[int, str]]) -> bool:
        return self.kind(expr) is not Kind.TENSOR or self._certain(expr, seen)

    def _certain_uncached(self, expr: cst.CSTNode, seen: frozenset[tuple[int, str]]) -> bool:
        if isinstance(expr, cst.Name):
            if expr.value in self._tested_names and self.narrowed(expr) is Kind.TENSOR:
                return True  # ``isinstance(x, torch.Tensor)`` holds here
            value = self.reaching(expr)
            if value is not None and self._deeper(lambda: self._reaching_kind(expr, value)) is Kind.TENSOR:
                if isinstance(value, cst.Param):
                    return self._param_certain(self.scope_of(expr), value)
                return self._deeper(lambda: self._certain(value, seen))
            scope = self.scope_of(expr).lookup(expr.value)
            if scope is None:
                return True
            key = (id(scope), expr.value)
            if key in seen or expr.value in scope.evidence:
                return True
            bindings = scope.bindings.get(expr.value, [])
            if any(how == "aug" for how, _ in bindings) and any(
                    how == "value" and isinstance(node, cst.BaseExpression) and self.kind(node) is Kind.NUMBER
                    for how, node in bindings):
                return False  # ``total = 0`` then ``total += loss``: a number until the first ``+=``
            for how, node in bindings:
                if how == "param" and isinstance(node, cst.Param):
                    if not self._param_certain(scope, node):
                        return False
                elif how in ("value", "iter", "unpack") and isinstance(node, cst.BaseExpression):
                    if not self._certain_tensor_part(node, seen | {key}):
                        return False
                    if how != "value" and not self._elements_certain(node, "iter", seen | {key}):
                        return False  # ``for t in xs`` over a list of possible tensors
                elif how == "iter_item" and isinstance(node, _Item):
                    if not self._elements_certain(node.iterable, "iter", seen | {key}):
                        return False
                elif how == "aug" and isinstance(node, cst.AugAssign):
                    if not self._certain_tensor_part(node.value, seen | {key}):
                        return False
            return True
        if isinstance(expr, cst.Call):
            func = expr.func
            if isinstance(func, cst.Attribute) and self.kind(func.value) is Kind.TENSOR:
                if func.attr.value in TENSOR_ONLY_NAMES:
                    return True  # it would fail on anything but a tensor
                return self._certain(func.value, seen)
            local = self.local_function(func)
            if local is not None and self.kind(func) is not Kind.MODULE:
                key = (id(local), "return")
                if key in seen:
                    return True
                if self._reaching_depth > MAX_REACHING_DEPTH:
                    return False  # a long chain of helpers: not followed to its end
                return self._deeper(lambda: all(
                    v is None or self._certain_tensor_part(v, seen | {key}) for v in self._returns.get(local, [])))
            return True
        if isinstance(expr, cst.Subscript) and self.kind(expr.value) is not Kind.TENSOR:
            return self._elements_certain(expr.value, "item", seen)  # ``losses[-1]``: as its elements
        if isinstance(expr, cst.Attribute) and type(expr.value) is cst.Name and expr.value.value not in ("self", "cls"):
            owner = self.scope_of(expr.value).lookup(expr.value.value)
            for how, node in self._object_attrs.get((id(owner), f"{expr.value.value}.{expr.attr.value}"), []):
                value = node.value if isinstance(node, cst.AugAssign) else node
                if isinstance(value, cst.BaseExpression) and not self._certain_tensor_part(value, seen):
                    return False
        if isinstance(expr, (cst.Attribute, cst.Subscript)):
            return self._certain_tensor_part(expr.value, seen)
        if isinstance(expr, cst.BinaryOperation):
            sides = [side for side in (expr.left, expr.right) if self.kind(side) is Kind.TENSOR]
            return any(self._certain(side, seen) for side in sides) if sides else True
        if isinstance(expr, cst.Comparison):
            sides = [expr.left] + [c.comparator for c in expr.comparisons]
            sides = [side for side in sides if self.kind(side) is Kind.TENSOR]
            return any(self._certain(side, seen) for side in sides) if sides else True
        if isinstance(expr, cst.UnaryOperation):
            return self._certain_tensor_part(expr.expression, seen)
        if isinstance(expr, cst.IfExp):
            return self._certain_tensor_part(expr.body, seen) and self._certain_tensor_part(expr.orelse, seen)
        if isinstance(expr, cst.NamedExpr):
            return self._certain_tensor_part(expr.value, seen)
        return True

    def _elements_certain(self, container: cst.BaseExpression, of: str, seen: frozenset[tuple[int, str]]) -> bool:
        """Is every element of a container that is a tensor certainly one?"""
        key = (id(container), "[]")
        if type(container) is cst.Name:
            key = (id(self.scope_of(container).lookup(container.value)), container.value + "[]")  # type: ignore[attr-defined]
        if key in seen or self._reaching_depth > MAX_REACHING_DEPTH:
            return True  # ``xs[0] = xs[0] * a``: as the other elements say
        elements = self._elements(container, of) if self.kind(container) not in (Kind.TENSOR, Kind.NUMPY) else None
        if not elements:
            return True
        return self._deeper(lambda: all(isinstance(e, Kind) or self._certain_tensor_part(e, seen | {key}) for e in elements))

    def _param_certain(self, scope: Scope, param: cst.Param) -> bool:
        """A tensor parameter by its annotation, or a ``forward`` parameter that the
        function uses as a tensor."""
        if param.annotation is not None or param.default is not None:
            return True
        if self._param_kind(scope, param) is not Kind.TENSOR:
            return True  # not a tensor at all: nothing to doubt here
        return param.name.value in scope.evidence or self._used_as_tensor(scope, param.name.value)

    def _used_as_tensor(self, scope: Scope, name: str, by_syntax_only: bool = False) -> bool:
        """Is the name used the way only tensors (and arrays) are: ``x.shape``,
        ``x.item()``, ``self.fc(x)``, ``torch.relu(x)``, ``x @ w``? ``by_syntax_only``
        leaves out module calls, whose kind may still be being worked out."""
        key = (id(scope), name + ("#syntax" if by_syntax_only else ""))
        cached = self._tensor_use_cache.get(key)
        if cached is not None:
            return cached
        found = False
        for node in nodes_within(scope.node, cst.Name):
            if node.value != name or self.scope_of(node).lookup(name) is not scope:
                continue
            parent = self.parents.get(node)
            if isinstance(parent, cst.Attribute) and parent.value is node and parent.attr.value in TENSOR_USES:
                found = True
            elif isinstance(parent, cst.BinaryOperation) and isinstance(parent.operator, cst.MatrixMultiply):
                found = True
            elif isinstance(parent, cst.Arg) and parent.keyword is None:
                call = self.parents.get(parent)
                if isinstance(call, cst.Call) and call.args and call.args[0] is parent:
                    q = self.imports.qualify(call.func)
                    if (is_torch_function(q) and q is not None and q.split(".")[-1] not in CREATION_FUNCTIONS) or (
                        not by_syntax_only and self.kind(call.func) is Kind.MODULE
                    ):
                        found = True
            if found:
                break
        self._tensor_use_cache[key] = found
        return found

    # -- device -------------------------------------------------------------------------------

    def on_cpu(self, expr: cst.CSTNode) -> bool:
        """Does the tensor ``expr`` certainly live in host memory (``torch.from_numpy``,
        ``torch.tensor([...])`` or ``torch.zeros(n)`` without a device, ``t.cpu()``)?
        Reading it waits for no device; in traced code it still breaks the graph."""
        if self.kind(expr) is not Kind.TENSOR:
            return False
        return self._cpu(expr, frozenset())

    def _default_device_changed(self) -> bool:
        """Does this file, or another file of the run (:mod:`~fixitem.codemods.model.devices`),
        set torch's default device? Then a tensor made without ``device=`` may be anywhere."""
        if devices.project_sets_default_device():
            return True
        if self._default_device is None:
            self._default_device = False
            for call in nodes_within(self.module, cst.Call):
                q = self.imports.qualify(call.func) or ""
                if q in ("torch.set_default_device", "torch.set_default_tensor_type"):
                    self._default_device = True
                    break
                if q == "torch.device" and isinstance(self.parents.get(call), cst.WithItem):
                    self._default_device = True  # ``with torch.device("cuda"):``
                    break
        return self._default_device

    def _cpu(self, expr: cst.CSTNode, seen: frozenset[tuple[int, str]]) -> bool:
        cached = self._cpu_cache.get(expr)
        if cached is None:
            cached = self._cpu_cache[expr] = self._cpu_uncached(expr, seen)
        return cached

    def _cpu_or_not_tensor(self, expr: cst.BaseExpression, seen: frozenset[tuple[int, str]]) -> bool:
        kind = self.kind(expr)
        if kind is Kind.TENSOR:
            return self._cpu(expr, seen)
        return kind in (Kind.NUMBER, Kind.OTHER, Kind.NUMPY)

    def _cpu_uncached(self, expr: cst.CSTNode, seen: frozenset[tuple[int, str]]) -> bool:
        if isinstance(expr, cst.Call):
            return self._cpu_call(expr, seen)
        if isinstance(expr, cst.Name):
            scope = self.scope_of(expr).lookup(expr.value)
            if scope is None:
                return False
            key = (id(scope), expr.value)
            if key in seen:
                return True  # ``x = x + 1``: as the other bindings say
            bindings = scope.bindings.get(expr.value, [])
            if not bindings:
                return False
            for how, node in bindings:
                if how in ("value", "iter", "unpack") and isinstance(node, cst.BaseExpression):
                    if not self._cpu(node, seen | {key}):
                        return False
                elif how == "aug" and isinstance(node, cst.AugAssign):
                    if not self._cpu_or_not_tensor(node.value, seen | {key}):
                        return False
                else:
                    return False
            return True
        if isinstance(expr, cst.Subscript):
            return self.kind(expr.value) is Kind.TENSOR and self._cpu(expr.value, seen)
        if isinstance(expr, cst.Attribute):
            if expr.attr.value in ("T", "mT", "H", "mH", "data", "real", "imag", "grad"):
                return self.kind(expr.value) is Kind.TENSOR and self._cpu(expr.value, seen)
            return False
        if isinstance(expr, cst.BinaryOperation):
            sides = [expr.left, expr.right]
            return any(self.kind(s) is Kind.TENSOR for s in sides) and all(self._cpu_or_not_tensor(s, seen) for s in sides)
        if isinstance(expr, cst.UnaryOperation):
            return self._cpu_or_not_tensor(expr.expression, seen) and self.kind(expr.expression) is Kind.TENSOR
        if isinstance(expr, cst.IfExp):
            return self._cpu(expr.body, seen) and self._cpu(expr.orelse, seen)
        if isinstance(expr, cst.Comparison):
            sides = [expr.left] + [c.comparator for c in expr.comparisons]
            return any(self.kind(s) is Kind.TENSOR for s in sides) and all(self._cpu_or_not_tensor(s, seen) for s in sides)
        return False

    def _cpu_call(self, call: cst.Call, seen: frozenset[tuple[int, str]]) -> bool:
        func = call.func
        positional = [a.value for a in call.args if a.keyword is None and not a.star]
        device = next((a.value for a in call.args if a.keyword is not None and a.keyword.value == "device"), None)
        q = self.imports.qualify(func) or ""
        if q.startswith("torch.") and q.count(".") == 1:
            name = q.split(".")[1]
            if name in ALWAYS_ON_HOST:
                return True
            if device is not None:
                return _names_cpu(device)
            if name in DEVICE_OF_INPUT:
                return bool(positional) and self._cpu_or_not_tensor(positional[0], seen) and self.kind(positional[0]) is Kind.TENSOR
            if name in ("tensor", "as_tensor", "asarray"):
                # ``torch.tensor([...])`` of Python values or numpy builds on the host (unless the
                # program changes the default device); of a tensor it keeps that tensor's device.
                if self._default_device_changed() or not positional:
                    return False
                return self.kind(positional[0]) in (Kind.NUMBER, Kind.OTHER, Kind.NUMPY) or (
                    self.kind(positional[0]) is Kind.TENSOR and self._cpu(positional[0], seen)
                )
            if name in CREATION_FUNCTIONS:
                # ``torch.zeros(n)``, ``torch.randint(0, 9, (4,))``, ``torch.randperm(n)`` build on
                # the default device: the CPU unless a file of the run sets another one.
                return not self._default_device_changed()
            # ``torch.dot(a, b)`` of host tensors; an argument of unknown kind may be a device tensor.
            tensors = [a.value for a in call.args if self.kind(a.value) is Kind.TENSOR]
            return bool(tensors) and all(self._cpu_or_not_tensor(a.value, seen) for a in call.args)
        if isinstance(func, cst.Attribute) and self.kind(func.value) is Kind.TENSOR:
            method = func.attr.value
            if method == "cpu":
                return True
            if method == "to":
                if any(_names_cpu(a.value) for a in call.args if a.keyword is None or a.keyword.value == "device"):
                    return True
                only_dtypes = all(a.keyword is not None and a.keyword.value in ("dtype", "non_blocking", "copy")
                                  or self._is_dtype(a.value) for a in call.args)
                return only_dtypes and self._cpu(func.value, seen)
            if method in DEVICE_MOVES:
                return False
            if not self._cpu(func.value, seen):
                return False
            if method.endswith("_") and not method.startswith("_"):
                return True  # ``x.uniform_(a, b)`` is ``x``, updated in place where it lives
            return all(self._cpu_or_not_tensor(a.value, seen) for a in call.args)
        return False

    def _is_dtype(self, expr: cst.BaseExpression) -> bool:
        q = self.imports.qualify(expr) or ""
        return q.count(".") == 1 and q.startswith("torch.") and q.split(".")[1] in DTYPES

    def presumed_tensor(self, expr: cst.CSTNode) -> bool:
        """Is ``expr`` a tensor only by the ``forward`` parameter heuristic: a bare,
        unannotated parameter without default, never rebound and never used as a
        tensor in its function? Such a parameter tested for truth (``if
        interpolate_pos_encoding:``) is far more often a Python flag."""
        if not isinstance(expr, cst.Name):
            return False
        scope = self.scope_of(expr).lookup(expr.value)
        if scope is None or expr.value in scope.evidence:
            return False
        bindings = scope.bindings.get(expr.value, [])
        if len(bindings) != 1 or bindings[0][0] != "param":
            return False
        param = bindings[0][1]
        return isinstance(param, cst.Param) and param.annotation is None and param.default is None and (
            self._param_kind(scope, param) is Kind.TENSOR
        )

    def assigned_values(self, expr: cst.CSTNode) -> list[cst.BaseExpression]:
        """What ``expr`` is assigned: for a name, the values of its assignments in its scope
        (none when it is also bound another way: a parameter, a loop, an import); for
        ``self.attr`` in a method, every ``self.attr = ...`` of the class."""
        if isinstance(expr, cst.Name):
            scope = self.scope_of(expr).lookup(expr.value)
            bindings = scope.bindings.get(expr.value, []) if scope is not None else []
            values = [node for how, node in bindings if how == "value" and isinstance(node, cst.BaseExpression)]
            return values if len(values) == len(bindings) else []
        if isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name) and expr.value.value == "self":
            cls = self.enclosing_class(expr)
            return list(self.class_attrs.get(cls, {}).get(expr.attr.value, [])) if cls is not None else []
        return []

    def tensor_sequence(self, expr: cst.CSTNode) -> bool:
        """Is ``expr`` a call that the stubs say gives a tuple or list of tensors
        (``torch.split(x, 2)``, ``x.unbind(0)``, ``torch.where(mask)``)?"""
        if type(expr) is not cst.Call:
            return False
        func = expr.func
        positional, keywords = call_shape(expr)
        q = self.imports.qualify(func)
        if q is not None and q.startswith("torch."):
            return torch_stubs.table().function_kind(q, positional, keywords) == torch_stubs.TENSORS
        if isinstance(func, cst.Attribute) and self.kind(func.value) is Kind.TENSOR:
            return torch_stubs.table().method_kind(func.attr.value, positional, keywords) == torch_stubs.TENSORS
        return False

    def tensor_pair(self, call: cst.Call) -> bool:
        """``t.max(1)``, ``t.sort()``, ``t.topk(k)``: a (values, indices) pair of tensors."""
        func = call.func
        if not (isinstance(func, cst.Attribute) and func.attr.value in PAIR_METHODS):
            return False
        if self.kind(func.value) is not Kind.TENSOR:
            return False
        if func.attr.value in ("sort", "topk", "kthvalue"):
            return True
        first = call.args[0] if call.args else None  # ``t.max()`` is one tensor; ``t.max(dim)`` a pair
        return first is not None and (first.keyword is None or first.keyword.value == "dim") and (
            self.kind(first.value) is not Kind.TENSOR
        )

    def _attribute_kind(self, expr: cst.Attribute) -> Kind:
        attr = expr.attr.value
        if attr in ("values", "indices") and isinstance(expr.value, cst.Call) and self.tensor_pair(expr.value):
            return Kind.TENSOR  # ``x.max(1).indices``
        if type(expr.value) is cst.Name and expr.value.value not in ("self", "cls"):
            owner = self.scope_of(expr.value).lookup(expr.value.value)
            key = (id(owner), f"{expr.value.value}.{attr}")
            if owner is not None and key in self._object_attrs:
                kind = self._lookup(key)  # ``t.loss`` of ``t = State()``, set in this function
                if kind is not Kind.UNKNOWN:
                    return kind
        base_kind = self.kind(expr.value)
        if isinstance(expr.value, cst.Name) and expr.value.value == "self":
            cls = self.enclosing_class(expr)
            if cls is not None and attr in self.class_attrs.get(cls, {}):
                return self._lookup((id(cls), "self." + attr))
        if base_kind is Kind.TENSOR:
            stub = stub_kind(torch_stubs.table().attribute_kind(attr))
            if stub is not None:
                return stub
            if attr in NON_TENSOR_ATTRIBUTES:
                return NON_TENSOR_ATTRIBUTES[attr]
            if attr in ("T", "mT", "H", "mH", "data", "grad", "real", "imag"):
                return Kind.TENSOR
            return Kind.UNKNOWN
        if base_kind is Kind.NUMPY:
            # ``np.finfo(np.float32).eps``, ``arr.T``: numpy values, whatever the origin.
            return NUMPY_METADATA.get(attr, Kind.NUMPY)
        if isinstance(expr.value, cst.Call) and self.imports.qualify(expr.value.func) in ("torch.finfo", "torch.iinfo"):
            return Kind.NUMBER if attr not in ("dtype",) else Kind.OTHER
        q = self.imports.qualify(expr)
        if q and q.startswith("torch.") and q.split(".")[-1] in ("pi", "e", "inf", "nan"):
            return Kind.NUMBER
        if q and q.count(".") == 1 and q.startswith("torch.") and q.split(".")[1] in DTYPES:
            return Kind.OTHER  # ``torch.float16``: a dtype
        if q and q.startswith("math."):
            return Kind.NUMBER
        return Kind.UNKNOWN

    def _is_imported_name(self, expr: cst.BaseExpression) -> bool:
        """Is ``expr`` a module (or a name in one) bound by an import?"""
        root = expr
        while isinstance(root, cst.Attribute):
            root = root.value
        if not isinstance(root, cst.Name):
            return False
        scope = self.scope_of(root).lookup(root.value)
        return scope is not None and any(how == "import" for how, _ in scope.bindings[root.value])

    def _call_kind(self, call: cst.Call) -> Kind:
        func = call.func
        q = self.imports.qualify(func)
        if q is not None:
            root = q.split(".")[0]
            if root in ("numpy", "jax"):
                return Kind.NUMPY  # a host array (or a JAX array, which reads like one): not a tensor
            if q in NON_TENSOR_RESULTS:
                return Kind.NUMBER if NON_TENSOR_RESULTS[q] == "number" else Kind.OTHER
            if q in WRAPPING_CALLS:
                wrapped = self.kind(call.args[0].value) if call.args else Kind.UNKNOWN
                return Kind.MODULE if wrapped is Kind.MODULE else Kind.OTHER
            if q.startswith("torch.jit."):
                return Kind.OTHER
            if q in ("torch.nn.Parameter", "torch.nn.parameter.Parameter", "torch.tensor", "torch.as_tensor", "torch.from_numpy"):
                return Kind.TENSOR
            stub = torch_function_kind(q, call) if q.startswith("torch.") else None
            if stub is not None:
                return stub
            if q in TENSOR_RESULTS:  # Python functions of torch the stubs do not cover
                return Kind.TENSOR
            if is_torch_function(q):  # where the stubs are silent (or say "a tensor or a pair")
                return Kind.TENSOR
            if is_module_class(q, self.module_classes):
                return Kind.MODULE
            if q in ("float", "int", "bool", "len", "round", "abs", "sum", "math.sqrt", "math.log", "math.exp"):
                if q in ("abs", "round", "sum") and call.args and self.kind(call.args[0].value) is Kind.TENSOR:
                    return Kind.TENSOR if q != "round" or len(call.args) == 1 else Kind.UNKNOWN
                return Kind.NUMBER
            if q in ("str", "repr", "list", "dict", "tuple", "set", "range", "enumerate", "zip", "sorted", "open", "print", "isinstance", "hasattr", "getattr"):
                return Kind.OTHER if q != "isinstance" and q != "hasattr" else Kind.NUMBER
            if q in ("max", "min") and call.args:
                kinds = [self.kind(a.value) for a in call.args]
                if all(k is Kind.NUMBER for k in kinds):
                    return Kind.NUMBER
                return Kind.UNKNOWN
            if q in self.tensor_functions and "." not in q:
                return Kind.TENSOR
        local = self.local_function(func)
        if local is not None:
            returned = self._lookup((id(local), "return"))
            if returned is not Kind.UNKNOWN:
                return returned  # ``self.stats(x)`` where ``stats`` returns ``torch.stack(...)``
        if self.kind(func) is Kind.MODULE:
            return Kind.TENSOR
        if isinstance(func, cst.Attribute):
            method = func.attr.value
            receiver = self.kind(func.value)
            if method in NON_TENSOR_ANY_METHODS:
                return NON_TENSOR_ANY_METHODS[method]
            if method == "format" and receiver is Kind.OTHER:
                return Kind.OTHER  # ``"{}".format(t)``: a string
            if receiver is Kind.TENSOR:
                stub = tensor_method_kind(call)
                if stub is not None:
                    return stub
                if method in NON_TENSOR_METHODS:
                    return NON_TENSOR_METHODS[method]
                if method in PAIR_METHODS and self.tensor_pair(call):
                    return Kind.OTHER  # ``t.max(dim)``: a (values, indices) pair
                # Not in the stubs (a method of a tensor subclass, or one torch has since
                # added), or "a tensor or a pair" by the argument's type: a tensor, as most are.
                return Kind.TENSOR
            if receiver is Kind.NUMPY:
                return Kind.NUMBER if method == "item" else Kind.NUMPY if method != "tolist" else Kind.OTHER
            if receiver is Kind.MODULE:
                if method in ("forward", "__call__"):
                    return Kind.TENSOR
                if method in MODULE_SELF_METHODS:
                    return Kind.MODULE  # ``model = model.to(device)``
                return Kind.UNKNOWN
            if receiver is Kind.UNKNOWN and method in TENSOR_ONLY_NAMES and method not in NON_TENSOR_METHODS and (
                tensor_method_kind(call) in (None, Kind.TENSOR)  # ``x.numel()`` is a number
            ):
                if not self._is_imported_name(func.value):  # ``math.isfinite(x)`` is a function
                    return Kind.TENSOR
            return Kind.UNKNOWN
        callee = self.kind(func)
        if callee is Kind.MODULE:
            return Kind.TENSOR
        return Kind.UNKNOWN


def _names_cpu(expr: cst.BaseExpression) -> bool:
    """``"cpu"`` or ``torch.device("cpu")``."""
    if isinstance(expr, cst.SimpleString):
        return expr.evaluated_value == "cpu"
    if isinstance(expr, cst.Call) and (dotted_name(expr.func) or "").split(".")[-1] == "device" and expr.args:
        first = expr.args[0].value
        return isinstance(first, cst.SimpleString) and first.evaluated_value == "cpu"
    return False


def module_class_of(provenance: Provenance, func: cst.BaseExpression) -> str | None:
    """The class a called module was built from (``self.fc`` -> ``torch.nn.Linear``),
    or the module's own dotted name when fixitem cannot tell."""
    if provenance.kind(func) is not Kind.MODULE:
        return None
    values: list[cst.BaseExpression] = []
    if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == "self":
        cls = provenance.enclosing_class(func)
        if cls is not None:
            values = provenance.class_attrs.get(cls, {}).get(func.attr.value, [])
    elif isinstance(func, cst.Name):
        scope = provenance.scope_of(func).lookup(func.value)
        if scope is not None:
            values = [node for how, node in scope.bindings.get(func.value, []) if how == "value" and isinstance(node, cst.BaseExpression)]
    classes = set()
    for value in values:
        if isinstance(value, cst.Call):
            q = provenance.imports.qualify(value.func)
            if is_module_class(q, provenance.module_classes):
                classes.add(q)
    if len(classes) == 1:
        return classes.pop()
    return dotted_name(func)


def _is_text(expr: cst.BaseExpression) -> bool:
    return isinstance(expr, (cst.SimpleString, cst.ConcatenatedString, cst.FormattedString))


def is_text(expr: cst.BaseExpression) -> bool:
    """A string by its syntax: a literal, or one repeated or joined (``"%g " * 3``, ``"a" + s``)."""
    if _is_text(expr):
        return True
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, (cst.Multiply, cst.Add)):
        return _is_text(expr.left) or (isinstance(expr.operator, cst.Multiply) and _is_text(expr.right))
    return False


def _stub_body(func: cst.FunctionDef) -> bool:
    """A body of only a docstring, ``pass``, ``...`` and ``raise``: a method left to subclasses."""
    body = func.body.body
    for statement in body:
        if not isinstance(statement, cst.SimpleStatementLine):
            return False
        for small in statement.body:
            if isinstance(small, (cst.Pass, cst.Raise)):
                continue
            if isinstance(small, cst.Expr) and isinstance(small.value, (cst.Ellipsis, cst.SimpleString, cst.ConcatenatedString)):
                continue
            return False
    return True


def _is_none(node: cst.CSTNode | None) -> bool:
    return type(node) is cst.Name and node.value == "None"  # type: ignore[union-attr]


# Classes an ``isinstance`` test names that only tensors are instances of.
TENSOR_CLASSES = frozenset({"torch.Tensor", "Tensor", "torch.nn.Parameter", "torch.nn.parameter.Parameter"})
# The key suffix of a name's kind where a test proved it is not ``None``.
NOT_NONE = "#not-none"


def _first_param(func: cst.FunctionDef) -> cst.Param | None:
    params = list(func.params.posonly_params) + list(func.params.params)
    return params[0] if params else None


def all_params(params: cst.Parameters) -> list[cst.Param]:
    found = list(params.posonly_params) + list(params.params) + list(params.kwonly_params)
    if isinstance(params.star_arg, cst.Param):
        found.append(params.star_arg)
    if params.star_kwarg is not None:
        found.append(params.star_kwarg)
    return found


# What ``_fill_scope`` looks at (checked by exact type first: ``isinstance``
# on libcst classes goes through ``ABCMeta`` and is slow on every node).
_BINDING_NODES = frozenset({
    cst.FunctionDef, cst.Lambda, cst.ClassDef, *COMPREHENSIONS, cst.Assign, cst.AnnAssign, cst.AugAssign,
    cst.NamedExpr, cst.For, cst.WithItem, cst.Import, cst.ImportFrom, cst.ExceptHandler, cst.Global,
    cst.Nonlocal, cst.Call, cst.Attribute, cst.Slice, cst.Comparison,
})

# Tensor methods whose arguments are all Python sizes or dimensions.
SIZE_METHODS = frozenset(
    {"view", "reshape", "expand", "repeat", "narrow", "new_zeros", "new_ones", "new_empty", "unflatten", "tile",
     "permute", "transpose", "split", "chunk", "topk", "roll", "unfold", "movedim", "flatten", "size",
     "tensor_split", "kthvalue"}
)
# torch functions whose arguments after the tensor are sizes, and creation
# functions whose positional arguments all are.
SIZE_AFTER_FIRST = frozenset({"split", "chunk", "narrow", "roll", "tile", "topk", "unflatten", "reshape", "movedim"})
SIZE_ALL = frozenset({"zeros", "ones", "empty", "rand", "randn", "eye", "randperm", "arange"})
SIZE_KEYWORDS = frozenset({"size", "shape", "dim", "output_size", "kernel_size", "stride", "padding", "sizes", "split_size_or_sections"})


def _size_names(expr: cst.BaseExpression) -> set[str]:
    """The names an expression used as a size is computed from (``H * W`` -> H, W)."""
    if isinstance(expr, cst.Name):
        return {expr.value}
    if isinstance(expr, cst.BinaryOperation):
        return _size_names(expr.left) | _size_names(expr.right)
    if isinstance(expr, cst.UnaryOperation):
        return _size_names(expr.expression)
    if isinstance(expr, (cst.Tuple, cst.List)):
        found: set[str] = set()
        for element in expr.elements:
            if not isinstance(element, cst.StarredElement):
                found |= _size_names(element.value)
        return found
    return set()


def _size_names_of_call(call: cst.Call, imports: Imports) -> set[str]:
    found: set[str] = set()
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value in SIZE_KEYWORDS:
            found |= _size_names(arg.value)
    positional = [a.value for a in call.args if a.keyword is None and not a.star]
    func = call.func
    q = imports.qualify(func) or ""
    if q == "range":
        sizes = positional
    elif q.startswith("torch.") and q.count(".") == 1:
        name = q.split(".")[1]
        sizes = positional[1:] if name in SIZE_AFTER_FIRST else positional if name in SIZE_ALL else []
        if name == "full" and positional:
            sizes = positional[:1]
    elif isinstance(func, cst.Attribute) and func.attr.value in SIZE_METHODS and not (
        isinstance(func.value, cst.Name) and (func.value.value in ("self", "cls") or func.value.value in imports.aliases)
    ):
        sizes = positional
    else:
        sizes = []
    for value in sizes:
        found |= _size_names(value)
    return found


def _is_shape_query(expr: cst.BaseExpression) -> bool:
    """``x.shape[1]``, ``x.size(1)``, ``len(x)``, ``x.numel()``: a size read from a tensor's header."""
    if isinstance(expr, cst.Subscript):
        expr = expr.value
    if isinstance(expr, cst.Attribute):
        return expr.attr.value in ("shape", "ndim")
    if isinstance(expr, cst.Call):
        func = expr.func
        if isinstance(func, cst.Attribute):
            return func.attr.value in ("size", "numel", "dim")
        return isinstance(func, cst.Name) and func.value == "len"
    return False
_NESTED_SCOPES = frozenset({cst.FunctionDef, cst.ClassDef, cst.Lambda})
_COMPREHENSION_TYPES = frozenset(COMPREHENSIONS)


def _iter_scope_nodes(body: object) -> Iterator[cst.CSTNode]:
    """Nodes of one scope, yielding (but not entering) nested scopes."""
    for root in [body] if isinstance(body, cst.CSTNode) else list(body):  # type: ignore[call-overload]
        yield from _scope_nodes_below(root)


def _scope_nodes_below(root: cst.CSTNode) -> Iterator[cst.CSTNode]:
    number = number_of(root)
    if number is None:  # code built after the file was indexed
        nodes: list[cst.CSTNode] = [root]
        while nodes:
            node = nodes.pop()
            yield node
            if type(node) in _NESTED_SCOPES:
                if type(node) is not cst.Lambda:
                    nodes.extend(reversed([d.decorator for d in node.decorators]))  # type: ignore[attr-defined]
            elif type(node) in _COMPREHENSION_TYPES:
                nodes.append(node.for_in.iter)  # type: ignore[attr-defined]
            else:
                nodes.extend(reversed(children_of(node)))
        return
    # Source order is depth-first, so a subtree is a run of numbers: skip
    # nested scopes by jumping to the end of theirs.
    stop = subtree_stop(number)
    while number < stop:
        node = node_at(number)
        yield node
        kind = type(node)
        if kind in _NESTED_SCOPES:
            # Decorators and defaults are evaluated in this scope.
            if kind is not cst.Lambda:
                for decorator in node.decorators:  # type: ignore[attr-defined]
                    yield from _scope_nodes_below(decorator.decorator)
            number = subtree_stop(number)
        elif kind in _COMPREHENSION_TYPES:
            yield from _scope_nodes_below(node.for_in.iter)  # type: ignore[attr-defined]
            number = subtree_stop(number)
        else:
            number += 1
