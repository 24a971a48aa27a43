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

import ast
import enum
import weakref
from collections.abc import Callable, Iterable, Iterator, Mapping

from .. import shortcuts
from . import devices, torch_stubs
from .reaching import Bindings, assigned_value, branch_values, reaching_binding, unpacked_value
from .reductions import REDUCTIONS
from .tree import Parents, callee_name, children_of, nodes_within, number_of, tables


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
# Modules of Python's standard library whose functions and classes make values of their own
# (``datetime.timedelta(...)``, ``os.path.join(...)``, ``time.strftime(...)``, ``json.dumps(...)``),
# never one of the objects they are given: what they return is no tensor. (No stubs of the
# standard library come with Python; generic modules that may hand back what they are given,
# ``copy``, ``functools``, ``itertools``, ``operator``, ``random.choice``, ``statistics``,
# ``pickle``, are not listed.)
STDLIB_VALUE_MODULES = frozenset(
    {"argparse", "base64", "calendar", "csv", "datetime", "getpass", "glob", "gzip", "hashlib", "json",
     "locale", "os", "pathlib", "platform", "re", "shlex", "shutil", "socket", "string", "subprocess",
     "sysconfig", "tempfile", "textwrap", "time", "urllib", "uuid", "zipfile", "zlib"}
)
# Of those, the modules whose values cannot change once made (``datetime.timedelta``, the
# strings of ``os.path.join`` and ``time.strftime``, ``uuid.UUID``).
STDLIB_IMMUTABLE_MODULES = frozenset({"base64", "calendar", "datetime", "getpass", "os.path", "platform",
                                      "shlex", "string", "textwrap", "time", "uuid"})
# Of those (and ``random``), the functions that give a number.
STDLIB_NUMBERS = frozenset(
    {"time.time", "time.perf_counter", "time.monotonic", "time.process_time", "time.thread_time", "time.time_ns",
     "time.perf_counter_ns", "time.monotonic_ns", "os.getpid", "os.cpu_count", "random.random", "random.uniform",
     "random.randint", "random.randrange", "random.gauss", "random.normalvariate", "random.betavariate",
     "random.expovariate", "random.triangular", "random.getrandbits"}
)
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
# nn.Module methods that return the module itself (``model = Net().to(device)``).
MODULE_SELF_METHODS = frozenset(
    {"to", "cuda", "cpu", "xpu", "mps", "train", "eval", "float", "half", "double", "bfloat16",
     "requires_grad_", "share_memory", "to_empty", "type", "apply"}
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
    # ``.numpy()`` converts to a NumPy array, whatever has it (a torch tensor, TensorFlow's, an
    # ONNX IR tensor): what it gives is a host array, never a torch tensor. (The stubs say it of
    # a tensor only, and the receiver is often not known: ``value.const_value.numpy()``.)
    "numpy": Kind.NUMPY,
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
# Methods of ``str`` that give a bool or a number.
_TEXT_NUMBER_METHODS = frozenset({"startswith", "endswith", "count", "find", "rfind", "index", "rindex"})
# Attributes that are a value's shape, whatever the value (a hand-written fact: the stubs
# say it of tensors only, numpy of its arrays).
SHAPE_ATTRIBUTES = {"shape": Kind.OTHER, "ndim": Kind.NUMBER}
# The annotations of a NumPy array.
NUMPY_ARRAY_TYPES = frozenset({"numpy.ndarray", "numpy.typing.NDArray"})
# Methods that ask a value its size (a hand-written fact, as ``SHAPE_ATTRIBUTES``: the stubs say
# what they give for a tensor, ``x.size(1)`` a number and ``x.size()`` a ``torch.Size``; no other
# value has them and gives a tensor), so that of a value of unknown kind they are what the stubs say.
SIZE_QUERY_METHODS = frozenset({"size", "dim", "ndimension", "numel", "nelement", "element_size", "stride"})
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


COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)

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


_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)
# Nodes whose scope holds their statements and parameters only: their decorators, return
# annotation, bases and keywords are evaluated in the enclosing scope.
_DEFINITIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
# Statements with a body (libcst's ``BaseCompoundStatement``).
_COMPOUND = (
    ast.If, ast.For, ast.AsyncFor, ast.While, ast.With, ast.AsyncWith, ast.Try, ast.FunctionDef,
    ast.AsyncFunctionDef, ast.ClassDef, ast.Match,
) + ((ast.TryStar,) if hasattr(ast, "TryStar") else ())
_FOR = (ast.For, ast.AsyncFor)


class _Rest:
    """What a starred target (``*xyxy`` in ``for *xyxy, conf, cls in det``) is bound to: a
    list of the items of ``source`` (of each of its elements, for a loop) it does not name."""

    __slots__ = ("each", "source")

    def __init__(self, source: ast.expr, each: bool) -> None:
        self.source = source
        self.each = each


class _Item:
    """The ``index``-th item of each element of ``iterable`` (a loop's tuple target)."""

    __slots__ = ("index", "iterable")

    def __init__(self, iterable: ast.expr, index: int) -> None:
        self.iterable = iterable
        self.index = index


class _Added:
    """What one statement puts into a container: one ``element``, or the elements of
    a container (``extend``)."""

    __slots__ = ("how", "value")

    def __init__(self, how: str, value: ast.expr) -> None:
        self.how = how
        self.value = value


# In the hottest functions below, ``type(node) is ast.X`` stands for ``isinstance(node,
# ast.X)``: it is faster, and the concrete node classes have no subclasses.


def dotted_name(node: ast.AST) -> str | None:
    """``a.b.c`` for a Name / Attribute chain, else None."""
    parts: list[str] = []
    while type(node) is ast.Attribute:
        parts.append(node.attr)  # type: ignore[attr-defined]
        node = node.value  # type: ignore[attr-defined]
    if type(node) is ast.Name:
        parts.append(node.id)  # type: ignore[attr-defined]
        return ".".join(reversed(parts))
    if type(node) is ast.Constant and (node.value is None or node.value is True or node.value is False):  # type: ignore[attr-defined]
        parts.append(str(node.value))  # type: ignore[attr-defined]  # names to libcst
        return ".".join(reversed(parts))
    return None


def call_arguments(call: ast.Call) -> list[ast.expr | ast.keyword]:
    """libcst's ``Call.args``: one list of the positional arguments (``*x`` an ``ast.Starred``)
    and the keywords (``**x`` a keyword whose ``arg`` is None), in the order they are written."""
    args, keywords = call.args, call.keywords
    if not keywords:
        return args  # type: ignore[return-value]
    if not args:
        return keywords  # type: ignore[return-value]
    for arg in args:
        if type(arg) is ast.Starred:  # ``f(a=1, *rest)``: a star may follow keywords
            return sorted([*args, *keywords], key=lambda n: (n.lineno, n.col_offset))
    return [*args, *keywords]


def argument_value(arg: ast.expr | ast.keyword) -> ast.expr:
    """libcst's ``Arg.value``: the expression passed (inside a ``*`` / ``**`` / ``k=``)."""
    t = type(arg)
    if t is ast.keyword or t is ast.Starred:
        return arg.value  # type: ignore[union-attr,return-value]
    return arg  # type: ignore[return-value]


def argument_keyword(arg: ast.expr | ast.keyword) -> str | None:
    """libcst's ``Arg.keyword`` (as a string): the keyword of ``k=v``, None otherwise (``**x`` too)."""
    return arg.arg if type(arg) is ast.keyword else None  # type: ignore[union-attr]


def argument_star(arg: ast.expr | ast.keyword) -> str:
    """libcst's ``Arg.star``: ``"*"``, ``"**"`` or ``""``."""
    t = type(arg)
    if t is ast.Starred:
        return "*"
    if t is ast.keyword and arg.arg is None:  # type: ignore[union-attr]
        return "**"
    return ""


# Generic containers an annotation names (by the last part of the name, lower-cased: ``List``,
# ``list``, ``typing.Sequence``, ``collections.abc.Iterable``): iterating one gives its type.
_SEQUENCES = frozenset({"list", "tuple", "sequence", "mutablesequence", "iterable", "iterator", "set",
                        "frozenset", "collection"})
_MAPPINGS = frozenset({"dict", "mapping", "mutablemapping", "ordereddict"})


def _tensor_like_call(method: str, call: ast.Call) -> bool:
    """Is ``x.method(...)`` called as a tensor's method is? ``accelerator.backward(loss)``
    (Accelerate, DeepSpeed: the loss passed in) and ``accelerator.gather(t)`` (one argument,
    where ``Tensor.gather`` takes a dimension and an index) are other objects' methods."""
    if method == "backward":
        return not call.args  # ``loss.backward()``, ``loss.backward(retain_graph=True)``
    if method in ("gather", "scatter", "scatter_add"):
        return len(call.args) + len(call.keywords) >= 2
    return True


def annotation_kind(imports: Imports, annotation: ast.expr) -> Kind:
    """The kind an annotation of a module with ``imports`` says: TENSOR, NUMBER, NUMPY or OTHER
    (``Optional[...]`` and ``... | None`` of one too), else UNKNOWN (modules: see
    :meth:`Provenance._annotation_kind`)."""
    if _is_none(annotation):
        return Kind.OTHER  # ``-> None``
    annotation = _without_none(imports, annotation)
    q = imports.qualify(annotation)
    if q in ("torch.Tensor", "Tensor", "torch.nn.Parameter", "torch.FloatTensor", "torch.LongTensor"):
        return Kind.TENSOR
    if q in ("int", "float", "bool"):
        return Kind.NUMBER
    if q in ("str", "list", "dict", "tuple", "bytes"):
        return Kind.OTHER
    if q in NUMPY_ARRAY_TYPES or (type(annotation) is ast.Subscript
                                  and imports.qualify(annotation.value) in NUMPY_ARRAY_TYPES):  # type: ignore[attr-defined]
        return Kind.NUMPY  # ``-> np.ndarray``, ``x: npt.NDArray[np.float32]``
    if type(annotation) is ast.Constant and type(annotation.value) is str:  # type: ignore[attr-defined]
        if annotation.value in ("torch.Tensor", "Tensor"):  # type: ignore[attr-defined]
            return Kind.TENSOR
    return Kind.UNKNOWN


def _without_none(imports: Imports, annotation: ast.expr) -> ast.expr:
    """``Optional[X]`` and ``X | None`` (nested too): ``X``."""
    while True:
        t = type(annotation)
        if t is ast.Subscript and imports.qualify(annotation.value) in ("typing.Optional", "Optional"):  # type: ignore[attr-defined]
            inner = annotation.slice  # type: ignore[attr-defined]
            if type(inner) in (ast.Tuple, ast.Slice):
                return annotation
            annotation = inner
        elif t is ast.BinOp and type(annotation.op) is ast.BitOr and _is_none(annotation.right):  # type: ignore[attr-defined]
            annotation = annotation.left  # type: ignore[attr-defined]
        elif t is ast.BinOp and type(annotation.op) is ast.BitOr and _is_none(annotation.left):  # type: ignore[attr-defined]
            annotation = annotation.right  # type: ignore[attr-defined]
        else:
            return annotation


def items_of(call: ast.expr) -> ast.expr | None:
    """The mapping ``d`` of ``d.items()``, or None for any other expression."""
    if type(call) is ast.Call and type(call.func) is ast.Attribute and call.func.attr == "items" and \
            not call.args and not call.keywords:  # type: ignore[attr-defined]
        return call.func.value  # type: ignore[attr-defined]
    return None


def subscript_elements(node: ast.Subscript) -> list[ast.expr]:
    """libcst's ``Subscript.slice``: ``x[a, b]`` has two elements, ``x[i]`` and ``x[(a, b)]``
    one. An element is an ``ast.Slice`` (libcst's ``Slice``) or an expression (libcst's ``Index``)."""
    index = node.slice
    if type(index) is ast.Tuple and index.elts:  # type: ignore[attr-defined]
        first = index.elts[0]  # type: ignore[attr-defined]
        # Without parentheses of its own, the tuple starts where its first element does.
        if index.lineno == first.lineno and index.col_offset == first.col_offset:
            return index.elts  # type: ignore[attr-defined,no-any-return]
    return [index]


def _unstarred(element: ast.expr) -> ast.expr:
    """libcst's ``Element.value`` / ``StarredElement.value``."""
    return element.value if type(element) is ast.Starred else element  # type: ignore[attr-defined]


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
    """Local names bound by imports, mapped to what they stand for: those of ``statements``
    (the import statements of a module, in source order; see :func:`import_statements`)."""

    def __init__(self, statements: Iterable[ast.AST]) -> None:
        self.aliases: dict[str, str] = {}
        self._qualified: dict[int, tuple[ast.AST, str | None]] = {}  # id(node) -> (node, its answer)
        # Local name -> (module, level, name in it): ``from ..utils import print0 as p`` gives
        # ``p -> ("utils", 2, "print0")``, ``import a.b as c`` gives ``c -> ("a.b", 0, None)``;
        # relative imports too (what the project's other modules are asked about).
        self.origins: dict[str, tuple[str, int, str | None]] = {}
        for node in statements:
            if type(node) is ast.Import:
                for alias in node.names:  # type: ignore[attr-defined]
                    full = alias.name
                    if alias.asname is not None:
                        self.aliases[alias.asname] = full
                        self.origins[alias.asname] = (full, 0, None)
                    else:
                        root = full.split(".")[0]
                        self.aliases[root] = root
                        self.origins[root] = (root, 0, None)
            elif type(node) is ast.ImportFrom and node.names[0].name != "*":  # type: ignore[attr-defined]
                for alias in node.names:  # type: ignore[attr-defined]
                    self.origins[alias.asname or alias.name] = (node.module or "", node.level, alias.name)  # type: ignore[attr-defined]
            if type(node) is ast.ImportFrom and node.module is not None and node.level == 0:  # type: ignore[attr-defined]
                base = node.module  # type: ignore[attr-defined]
                if node.names[0].name == "*":  # type: ignore[attr-defined]
                    continue
                for alias in node.names:  # type: ignore[attr-defined]
                    name = alias.name
                    local = name
                    if alias.asname is not None:
                        local = alias.asname
                    self.aliases[local] = f"{base}.{name}"

    @classmethod
    def from_data(cls, aliases: dict[str, str], origins: dict[str, tuple[str, int, str | None]]) -> Imports:
        """The imports whose ``aliases`` and ``origins`` these are (a module's summary read back)."""
        imports = cls(())
        imports.aliases, imports.origins = aliases, origins
        return imports

    def imports_module(self, *roots: str) -> bool:
        """Does the file import one of the packages ``roots`` (``"jax"``: ``import jax``,
        ``import jax.numpy as jnp``, ``from jax import jit``)?"""
        return any(module.split(".")[0] in roots and level == 0 for module, level, _ in self.origins.values())

    def qualify(self, node: ast.AST) -> str | None:
        """The full dotted name an expression refers to, through imports."""
        key = id(node)
        found = self._qualified.get(key)
        if found is not None and found[0] is node:
            return found[1]
        name = dotted_name(node)
        if name is not None:
            root, _, rest = name.partition(".")
            if root in self.aliases:
                full = self.aliases[root]
                name = f"{full}.{rest}" if rest else full
        self._qualified[key] = (node, name)
        return name

    def torch_alias(self) -> str | None:
        """The local name of the ``torch`` module, if the file imports it."""
        for local, full in self.aliases.items():
            if full == "torch":
                return local
        return None


def import_statements(module: ast.Module) -> list[ast.AST]:
    """Every import statement of the module, at any depth."""
    return nodes_within(module, ast.Import, ast.ImportFrom)


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


def call_shape(call: ast.Call) -> tuple[int | None, frozenset[str]]:
    """How many positional arguments ``call`` passes and its keywords, to choose among a
    stub's overloads; None when that cannot be told (``*args``, ``**kwargs``) or when an
    argument is a literal ``None`` (an overload whose parameter is typed ``None`` takes it)."""
    positional = 0
    keywords: set[str] = set()
    for arg in call.args:
        if type(arg) is ast.Starred:
            return None, frozenset()
        if type(arg) is ast.Constant and arg.value is None:  # type: ignore[attr-defined]
            return None, frozenset()
        positional += 1
    for keyword in call.keywords:
        if keyword.arg is None:
            return None, frozenset()
        keywords.add(keyword.arg)
    return positional, frozenset(keywords)


def torch_function_kind(qualified: str, call: ast.Call | None = None) -> Kind | None:
    """What the stubs say the torch function ``qualified`` returns (None where they are silent)."""
    positional, keywords = call_shape(call) if call is not None else (None, frozenset())
    return stub_kind(torch_stubs.table().function_kind(qualified, positional, keywords))


def tensor_method_kind(call: ast.Call) -> Kind | None:
    """What the stubs say the tensor method called by ``call`` returns (None where silent)."""
    assert type(call.func) is ast.Attribute
    positional, keywords = call_shape(call)
    return stub_kind(torch_stubs.table().method_kind(call.func.attr, positional, keywords))


class ModuleClasses(set):
    """The names of a file's classes that are ``nn.Module`` subclasses.

    Those whose bases are ``nn.Module`` or such classes of the file are added as the
    file is read. A class with a base imported from another module of the project
    (``class GPT2Model(GPT2PreTrainedModel)``, ``PreTrainedModel`` elsewhere) is looked
    up only when its name is first asked about: the question reads (parses) that module,
    and most such classes (a configuration built on another) are never asked about."""

    def __init__(self) -> None:
        super().__init__()
        self._pending: dict[str, list[ast.ClassDef]] = {}
        self._elsewhere: Callable[[ast.expr], bool] | None = None

    def ask_elsewhere(self, classes: list[ast.ClassDef], elsewhere: Callable[[ast.expr], bool]) -> None:
        """``classes`` are looked up when asked about; ``elsewhere(base)``: is ``base`` an
        ``nn.Module`` class of another module?"""
        for cls in classes:
            self._pending.setdefault(cls.name, []).append(cls)
        self._elsewhere = elsewhere

    def __contains__(self, name: object) -> bool:
        if set.__contains__(self, name):
            return True
        classes = self._pending.pop(name, None)  # type: ignore[arg-type]
        if classes is None:  # not a class of the file, decided already, or being decided (a cycle)
            return False
        for cls in classes:  # (a name the file defines a class under twice: either one)
            for base in cls.bases:
                local = type(base) is ast.Name and base.id in self  # type: ignore[attr-defined]
                if local or self._elsewhere(base):  # type: ignore[misc]
                    self.add(name)  # type: ignore[arg-type]
                    return True
        return False


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
    """The bindings of one function (or of the module, a class, a lambda, a comprehension)."""

    def __init__(self, node: ast.AST, parent: Scope | None) -> None:
        self.node = node
        self.parent = parent
        self.bindings: dict[str, list[tuple[str, object]]] = {}
        # How a name was bound: ("value", expr), ("iter", expr), ("param", ast.arg),
        # ("annotation", the annotation expression of ``x: T``), ("aug", ast.AugAssign),
        # ("opaque", None) for bindings fixitem cannot see through.
        self.evidence: set[str] = set()
        # Names used as Python sizes (``x.view(B, H, W)``, ``range(n)``, ``x[:, :n]``,
        # ``L == H * W`` against a shape): evidence of an int, not of a tensor. Worked out
        # when first asked for (:attr:`size_uses`), from what the scope's pass kept:
        self.size_calls: list[ast.Call] = []  # every call of the scope
        self.size_bounds: list[ast.expr] = []  # slice bounds
        self.size_comparisons: list[tuple[ast.expr, ast.expr]] = []  # ``a == b``
        self.imports: Imports | None = None
        self._size_uses: set[str] | None = None

    @property
    def size_uses(self) -> set[str]:
        if self._size_uses is None:
            found: set[str] = set()
            for call in self.size_calls:
                found.update(_size_names_of_call(call, self.imports))  # type: ignore[arg-type]
            for bound in self.size_bounds:
                found.update(_size_names(bound))
            self._size_uses = found
            self.settle_size_uses()
        return self._size_uses

    def shape_derived(self, expr: ast.expr) -> bool:
        """``x.shape[1]``, ``x.size(1)``, ``len(x)``, or a name unpacked from ``x.shape``
        (``B, L, C = x.shape``): a size read from a tensor's header."""
        if _is_shape_query(expr):
            return True
        if type(expr) is ast.Name and expr.id in self.bindings:  # type: ignore[attr-defined]
            bindings = self.bindings[expr.id]  # type: ignore[attr-defined]
            return all(how in ("unpack", "value") and isinstance(node, ast.expr) and _is_shape_query(node)
                       for how, node in bindings)
        return False

    def settle_size_uses(self) -> None:
        """``assert L == H * W`` with ``B, L, C = x.shape``: H and W are sizes."""
        found = self._size_uses
        assert found is not None
        for left, right in self.size_comparisons:
            if self.shape_derived(left):
                found.update(_size_names(right))
            elif self.shape_derived(right):
                found.update(_size_names(left))

    def bind(self, name: str, how: str, node: object) -> None:
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

    def __init__(self, module: ast.Module, parents: Parents, external: object | None = None, *,
                 names_by_spelling: Callable[[], dict[str, tuple[list[int], list[ast.Name]]]]) -> None:
        self.module = module
        self.parents = parents
        # The index's table of the names spelled in the file (made when first asked for).
        self._names_by_spelling = names_by_spelling
        # What this file may ask about the other modules of its project (None: nothing;
        # :class:`codemods.model.project.External`): names they define that it imports.
        self.external = external
        self.imports = Imports(import_statements(module))
        self.scopes: dict[ast.AST, Scope] = {}
        # nn.Module subclasses defined here (those built on a class of another module of the
        # project are looked up when first asked about: see ModuleClasses)
        self.module_classes: ModuleClasses = ModuleClasses()
        self.autograd_classes: set[str] = set()  # torch.autograd.Function subclasses defined here
        self.class_attrs: dict[ast.ClassDef, dict[str, list[ast.expr]]] = {}
        self.tensor_functions: set[str] = set()  # local functions annotated "-> Tensor"
        self._cache: dict[ast.AST, Kind] = {}
        self._transparent: dict[int, bool] = {}  # the file's decorators that return what they are given
        self._names: dict[tuple[int, str], Kind] | None = None  # (scope, name) -> kind
        self._equations: dict[tuple[int, str], tuple] = {}  # key -> how its kind is computed
        self._final: set[tuple[int, str]] = set()  # keys solved
        self._group: list[tuple[int, str]] | None = None  # while solving: the keys being solved
        self._solving = False
        self._pending_reads = 0
        self._reads: set[tuple[int, str]] | None = None  # while solving: the names a computation reads
        self._scope_cache: dict[ast.AST, Scope] = {}
        self._scopes_by_number: dict[int, Scope] = {}  # the scopes, by their node's number
        self._reaching: dict[int, ast.stmt | ast.arg | None] = {}  # id(Name) -> the binding it sees
        self._reaching_depth = 0
        self._bindings: Bindings | None = None  # where each name is bound, for reaching()
        self._global_names: frozenset[str] | None = None
        self._certain_cache: dict[ast.AST, bool] = {}
        # What the bindings of a name say (see ``_bindings_certain``), by (scope id, name).
        self._bindings_certain_cache: dict[tuple[int, str], bool] = {}
        self._tensor_use_cache: dict[tuple[int, str], bool] = {}
        self._cpu_cache: dict[ast.AST, bool] = {}
        self._default_device: bool | None = None  # does the file change the default device?
        self._moves: bool | None = None  # does anything in the file move to a device?
        self._defaults: dict[int, ast.expr | None] = {}  # id(ast.arg) -> its default value
        # Flow facts (filled while scopes are collected, resolved after):
        # ``t.loss = v`` of a local object ``t``: (scope of ``t``, "t.loss") -> how it is bound;
        self._object_attrs: dict[tuple[int, str], list[tuple[str, ast.AST]]] = {}
        # what is put into a container name (``xs.append(v)``, ``xs[i] = v``, ``xs += [v]``);
        self._container_adds: dict[tuple[int, str], list[_Added]] = {}
        self._pending_targets: list[tuple[Scope, str, str, str, object]] = []
        self._object_scopes: dict[tuple[int, str], Scope] = {}
        self._tested_names: set[str] = set()  # names an ``isinstance`` or ``is None`` test reads
        self._truth_tested: set[str] = set()  # names an ``if x:`` test reads
        self._guard_cache: dict[int, list[tuple[ast.expr, bool]]] = {}
        self._exported: bool | None = None  # does the module list its names in ``__all__``? (asked once)
        self._passing: set[int] = set()  # parameters whose passed values are being worked out
        self._presuming: set[ast.AST] = set()  # values being asked whether a parameter heuristic alone makes them tensors
        # the functions and methods of this file, and the values they return.
        self.functions: dict[str, ast.FunctionDef] = {}
        self.methods: dict[tuple[ast.ClassDef, str], ast.FunctionDef] = {}
        self._returns: dict[ast.FunctionDef, list[ast.expr | None]] = {}
        self._generators: set[ast.FunctionDef] = set()
        self._element_guard: set[tuple[int, str]] = set()
        self._element_kinds_open: set[object] = set()
        self._collect_classes()
        self._collect_scopes()
        if external is not None:
            # (a weak reference: a cycle would keep the file's tree until the cyclic collector runs)
            owner = weakref.ref(self)
            self.module_classes.ask_elsewhere(
                [c for c in nodes_within(self.module, ast.ClassDef) if c.name not in self.module_classes],  # type: ignore[attr-defined]
                lambda base: external.module_class(owner(), base),  # type: ignore[attr-defined]
            )

    # -- collection -------------------------------------------------------------------------

    def return_kind(self, func: ast.AST) -> Kind:
        """What the function ``func`` of this file returns (asked by other modules)."""
        if self._names is None:
            self._solve_names()
        key = (id(func), "return")
        if key not in self._equations:
            return Kind.UNKNOWN
        return self._lookup(key)

    def returns_certainly_tensor(self, func: ast.AST) -> bool:
        """Does every ``return`` of ``func`` give a value this file proves is a tensor?"""
        returns = self._returns.get(func)  # type: ignore[call-overload]
        if not returns or self.return_kind(func) is not Kind.TENSOR:
            return False
        return all(v is not None and self._certain_tensor_part(v, frozenset()) for v in returns)

    def _collect_classes(self) -> None:
        classes = nodes_within(self.module, ast.ClassDef)
        changed = True
        while changed:
            changed = False
            for cls in classes:
                name = cls.name  # type: ignore[attr-defined]
                if name in self.module_classes:
                    continue
                for base in cls.bases:  # type: ignore[attr-defined]
                    q = self.imports.qualify(base)
                    if q in ("torch.nn.Module", "nn.Module") or is_module_class(q, self.module_classes):
                        self.module_classes.add(name)
                        changed = True
                        break
                    if name not in self.autograd_classes and (q in AUTOGRAD_FUNCTIONS or q in self.autograd_classes):
                        self.autograd_classes.add(name)
                        changed = True
        for cls in classes:
            attrs: dict[str, list[ast.expr]] = {}
            for node in nodes_within(cls, ast.Assign, ast.AnnAssign, ast.Call):
                t = type(node)
                if t is ast.Assign:
                    for target in node.targets:  # type: ignore[attr-defined]
                        if type(target) is ast.Attribute and type(target.value) is ast.Name and target.value.id == "self":
                            attrs.setdefault(target.attr, []).append(node.value)  # type: ignore[attr-defined]
                elif t is ast.AnnAssign and node.value is not None:  # type: ignore[attr-defined]
                    target = node.target  # type: ignore[attr-defined]
                    if type(target) is ast.Attribute and type(target.value) is ast.Name and target.value.id == "self":
                        attrs.setdefault(target.attr, []).append(node.value)  # type: ignore[attr-defined]
                elif t is ast.Call and type(node.func) is ast.Attribute:  # type: ignore[attr-defined]
                    if node.func.attr == "register_buffer" and (node.args or node.keywords):  # type: ignore[attr-defined]
                        first = argument_value(call_arguments(node)[0])  # type: ignore[arg-type]
                        if type(first) is ast.Constant and type(first.value) is str:
                            attrs.setdefault(first.value, []).append(ast.Name(id="__buffer__", ctx=ast.Load()))
            self.class_attrs[cls] = attrs  # type: ignore[index]
        for node in nodes_within(self.module, *_FUNCTIONS):
            if node.returns is not None:  # type: ignore[attr-defined]
                if self._annotation_kind(node.returns) is Kind.TENSOR:  # type: ignore[attr-defined]
                    self.tensor_functions.add(node.name)  # type: ignore[attr-defined]

    def _collect_scopes(self) -> None:
        root = Scope(self.module, None)
        self.scopes[self.module] = root
        self._fill_scope(root, self.module.body)
        for scope in self.scopes.values():
            scope.imports = self.imports
        for scope, base, attr, how, node in self._pending_targets:
            owner = scope.lookup(base)
            if owner is None:
                continue
            if how == "add":
                self._container_adds.setdefault((id(owner), base), []).append(node)  # type: ignore[arg-type]
            else:
                self._object_attrs.setdefault((id(owner), f"{base}.{attr}"), []).append((how, node))  # type: ignore[arg-type]
                self._object_scopes[(id(owner), f"{base}.{attr}")] = owner
        self._pending_targets = []
        for node in nodes_within(self.module, *_FUNCTIONS):
            parent = self.parents.get(node)  # a method's parent is its class
            if type(parent) is ast.ClassDef:
                self.methods[(parent, node.name)] = node  # type: ignore[index,attr-defined,assignment]
            elif type(parent) is ast.Module:
                self.functions[node.name] = node  # type: ignore[attr-defined,assignment]
            self._returns[node] = []  # type: ignore[index]
        # A function's own ``return``s and ``yield``s (not those of a function, lambda or
        # comprehension inside it), in source order: each belongs to the scope it is in.
        for node in nodes_within(self.module, ast.Return):
            values = self._returns.get(self.scope_of(node).node)  # type: ignore[call-overload]
            if values is not None:
                values.append(node.value)  # type: ignore[attr-defined]
        for node in nodes_within(self.module, ast.Yield, ast.YieldFrom, ast.Await):
            owner = self.scope_of(node).node
            if owner in self._returns:
                self._generators.add(owner)  # type: ignore[arg-type]

    def _fill_scope(self, scope: Scope, body: object) -> None:
        for node in _scope_nodes(body):
            t = type(node)
            if t is ast.Attribute:  # the commonest first
                if type(node.value) is ast.Name and node.attr in TENSOR_ONLY_ATTRIBUTES:  # type: ignore[attr-defined]
                    if node.value.id not in ("self", "cls"):  # type: ignore[attr-defined]
                        scope.evidence.add(node.value.id)  # type: ignore[attr-defined]
            elif t is ast.Call:
                scope.size_calls.append(node)  # type: ignore[arg-type]
                func = node.func  # type: ignore[attr-defined]
                called = callee_name(func)
                if (called == "isinstance" or called == "is_tensor") and (dotted_name(func) or "").endswith(called):
                    arguments = call_arguments(node)  # type: ignore[arg-type]
                    if arguments and type(argument_value(arguments[0])) is ast.Name:
                        self._tested_names.add(argument_value(arguments[0]).id)  # type: ignore[attr-defined]
                if type(func) is ast.Attribute:
                    receiver = func.value
                    method = func.attr
                    arguments = call_arguments(node) if method in CONTAINER_ADDS or method == "save_for_backward" else []  # type: ignore[arg-type]
                    if type(receiver) is ast.Name and method in CONTAINER_ADDS and arguments:
                        # ``xs.append(v)``, ``xs.insert(i, v)``: ``v`` is an element; ``xs.extend(ys)``: ys's are.
                        added = argument_value(arguments[-1])
                        how = "extend" if method in ("extend", "update") else "element"
                        self._pending_targets.append((scope, receiver.id, how, "add", _Added(how, added)))
                    if type(receiver) is ast.Name and method in TENSOR_ONLY_NAMES and \
                            _tensor_like_call(method, node):  # type: ignore[arg-type]
                        if receiver.id not in ("self", "cls"):
                            scope.evidence.add(receiver.id)
                    elif type(receiver) is ast.Name and method in ("cpu", "cuda") and receiver.id not in (
                            "self", "cls") and copy_is_read(node, self.parents) and not _type_tested_around(
                            node, receiver.id, self.parents):  # type: ignore[arg-type]
                        # ``ts.cpu().numpy()``: a module's ``cpu()`` gives the module, which has no
                        # ``numpy()`` (nor ``tolist()``, ``item()``); numpy arrays have no ``cpu()``.
                        # (Under ``if isinstance(ts, torch.Tensor):`` it says nothing of ``ts`` elsewhere.)
                        scope.evidence.add(receiver.id)
                    elif method == "save_for_backward":
                        # ``ctx.save_for_backward`` takes tensors only.
                        for arg in arguments:
                            value = argument_value(arg)
                            if type(value) is ast.Name:
                                scope.evidence.add(value.id)
            elif t is ast.FunctionDef or t is ast.AsyncFunctionDef or t is ast.Lambda:
                if t is not ast.Lambda:
                    scope.bind(node.name, "opaque", None)  # type: ignore[attr-defined]
                inner = Scope(node, scope)
                self.scopes[node] = inner
                arguments = node.args  # type: ignore[attr-defined]
                for param in all_params(arguments):
                    inner.bind(param.arg, "param", param)
                self._fill_scope(inner, node.body)  # type: ignore[attr-defined]
            elif t is ast.ClassDef:
                scope.bind(node.name, "opaque", None)  # type: ignore[attr-defined]
                inner = Scope(node, scope)
                self.scopes[node] = inner
                self._fill_scope(inner, node.body)  # type: ignore[attr-defined]
            elif t in _COMPREHENSION_TYPES:
                inner = Scope(node, scope)
                self.scopes[node] = inner
                for comp in node.generators:  # type: ignore[attr-defined]
                    self._bind_target(inner, comp.target, "iter", comp.iter)
                # What the comprehension evaluates in its own scope (all but the first iterable),
                # with the comprehensions and lambdas nested there: ``[[t[1:] for t in s] for s in x]``.
                parts = [node.key, node.value] if t is ast.DictComp else [node.elt]  # type: ignore[attr-defined]
                for k, comp in enumerate(node.generators):  # type: ignore[attr-defined]
                    parts += ([comp.iter] if k else []) + list(comp.ifs)
                self._fill_scope(inner, parts)
            elif t is ast.Assign:
                for target in node.targets:  # type: ignore[attr-defined]
                    self._bind_target(scope, target, "value", node.value)  # type: ignore[attr-defined]
                    self._note_target(scope, target, "value", node.value)  # type: ignore[attr-defined]
            elif t is ast.AnnAssign:
                how = "value" if node.value is not None else "annotation"  # type: ignore[attr-defined]
                self._bind_target(scope, node.target, how, node.value if node.value is not None else node.annotation)  # type: ignore[attr-defined]
            elif t is ast.AugAssign:
                self._bind_target(scope, node.target, "aug", node)  # type: ignore[attr-defined]
                self._note_target(scope, node.target, "aug", node)  # type: ignore[attr-defined]
            elif t is ast.NamedExpr:
                self._bind_target(scope, node.target, "value", node.value)  # type: ignore[attr-defined]
            elif t is ast.For or t is ast.AsyncFor:
                self._bind_target(scope, node.target, "iter", node.iter)  # type: ignore[attr-defined]
            elif t is ast.withitem:
                if node.optional_vars is not None:  # type: ignore[attr-defined]
                    self._bind_target(scope, node.optional_vars, "opaque", None)  # type: ignore[attr-defined]
            elif t is ast.Import or t is ast.ImportFrom:
                if t is ast.ImportFrom and node.names[0].name == "*":  # type: ignore[attr-defined]
                    continue
                for alias in node.names:  # type: ignore[attr-defined]
                    local = alias.asname or alias.name.split(".")[0]
                    scope.bind(local, "import", None)
            elif t is ast.ExceptHandler:
                if node.name is not None:  # type: ignore[attr-defined]
                    scope.bind(node.name, "opaque", None)  # type: ignore[attr-defined]
            elif t is ast.Global or t is ast.Nonlocal:
                for item in node.names:  # type: ignore[attr-defined]
                    scope.bind(item, "opaque", None)
            elif t is ast.Slice:
                for bound in (node.lower, node.upper, node.step):  # type: ignore[attr-defined]
                    if bound is not None:
                        scope.size_bounds.append(bound)
            elif t is ast.Compare:
                op = type(node.ops[0])  # type: ignore[attr-defined]
                if len(node.ops) == 1 and (op is ast.Eq or op is ast.NotEq):  # type: ignore[attr-defined]
                    scope.size_comparisons.append((node.left, node.comparators[0]))  # type: ignore[attr-defined]
                elif type(node.left) is ast.Name and (op is ast.Is or op is ast.IsNot):  # type: ignore[attr-defined]
                    self._tested_names.add(node.left.id)  # type: ignore[attr-defined]
            elif t is ast.If or t is ast.While or t is ast.IfExp:
                test = node.test  # type: ignore[attr-defined]
                while type(test) is ast.UnaryOp and type(test.op) is ast.Not:  # type: ignore[attr-defined]
                    test = test.operand  # type: ignore[attr-defined]
                if type(test) is ast.Name:  # ``if acc:`` true: ``acc`` is not None
                    self._truth_tested.add(test.id)  # type: ignore[attr-defined]

    def _note_target(self, scope: Scope, target: ast.expr, how: str, value: ast.AST | None) -> None:
        """``t.loss = v`` of a local object, ``xs[i] = v`` and ``xs += [v]`` of a container."""
        t = type(target)
        if t is ast.Attribute and type(target.value) is ast.Name and target.value.id not in ("self", "cls"):  # type: ignore[attr-defined]
            self._pending_targets.append((scope, target.value.id, target.attr, how, value))  # type: ignore[attr-defined]
        elif t is ast.Subscript and type(target.value) is ast.Name and how == "value":  # type: ignore[attr-defined]
            self._pending_targets.append((scope, target.value.id, "", "add", _Added("element", value)))  # type: ignore[attr-defined,arg-type]
        elif t is ast.Name and how == "aug" and type(value) is ast.AugAssign:
            if type(value.op) is ast.Add and type(value.value) in (ast.List, ast.Tuple, ast.ListComp):  # type: ignore[attr-defined]
                self._pending_targets.append((scope, target.id, "", "add", _Added("extend", value.value)))  # type: ignore[attr-defined]

    def _bind_target(self, scope: Scope, target: ast.expr, how: str, value: object) -> None:
        t = type(target)
        if t is ast.Name:
            scope.bind(target.id, how, value)  # type: ignore[attr-defined]
            return
        if t is ast.Tuple or t is ast.List:
            elements = target.elts  # type: ignore[attr-defined]
            if how == "iter" and type(value) is ast.Call:
                callee = dotted_name(value.func)
                if callee == "enumerate" and len(elements) == 2 and (value.args or value.keywords):
                    # ``for i, item in enumerate(xs)``: an int, and an element of xs.
                    self._bind_target(scope, _unstarred(elements[0]), "number", None)
                    self._bind_target(scope, _unstarred(elements[1]), "iter", argument_value(call_arguments(value)[0]))
                    return
                if (
                    callee == "zip" and not value.keywords and len(elements) == len(value.args)
                    and not any(type(a) is ast.Starred for a in value.args)
                ):
                    # ``for a, b in zip(xs, ys)``: an element of each.
                    for element, arg in zip(elements, value.args):
                        self._bind_target(scope, _unstarred(element), "iter", arg)
                    return
            if how == "iter" and isinstance(value, ast.expr) and not any(type(e) is ast.Starred for e in elements):
                # ``for data, target in batches``: the first and second item of each element.
                for i, element in enumerate(elements):
                    if type(element) is ast.Name:
                        scope.bind(element.id, "iter_item", _Item(value, i))
                    else:
                        self._bind_target(scope, element, "opaque", None)
                return
            values = None
            if how == "value" and type(value) in (ast.Tuple, ast.List) and len(value.elts) == len(elements):  # type: ignore[attr-defined]
                values = [_unstarred(e) for e in value.elts]  # type: ignore[attr-defined]
            for i, element in enumerate(elements):
                inner = _unstarred(element)
                if type(element) is ast.Starred:
                    if type(inner) is ast.Name and how in ("value", "iter") and isinstance(value, ast.expr):
                        scope.bind(inner.id, "rest", _Rest(value, how == "iter"))  # always a list
                    else:
                        self._bind_target(scope, inner, "opaque", None)
                elif values is not None:
                    self._bind_target(scope, inner, "value", values[i])
                elif how == "value" and isinstance(value, ast.expr):
                    # Unpacking a tensor (``a, b = t``) gives tensors; anything else, unknown.
                    self._bind_target(scope, inner, "unpack", value)
                else:
                    self._bind_target(scope, inner, "unpack" if how == "value" else "opaque", value)
        elif t is ast.Starred:
            self._bind_target(scope, target.value, "opaque", None)  # type: ignore[attr-defined]

    # -- queries ------------------------------------------------------------------------------

    def scope_of(self, node: ast.AST) -> Scope:
        cached = self._scope_cache.get(node)
        if cached is None:
            cached = self._scope_cache[node] = self._find_scope(node)
        return cached

    def _find_scope(self, node: ast.AST) -> Scope:
        number_of_id, parent, order = self.parents.tables()
        k = number_of_id.get(id(node))
        if k is None or order[k] is not node:  # a node built after the file was indexed
            return self._find_scope_by_nodes(node)
        by_number = self._scopes_by_number
        if len(by_number) != len(self.scopes):
            by_number.clear()
            for owner, scope in self.scopes.items():
                number = number_of_id.get(id(owner))
                if number is not None:
                    by_number[number] = scope
        below = -1  # the child of node ``k`` on the way up
        while k >= 0:
            up = parent[k]
            scope = by_number.get(up)
            if scope is not None and not _evaluated_outside(order[up], order[k], order[below] if below >= 0 else None):
                return scope
            below, k = k, up
        return self.scopes[self.module]

    def _find_scope_by_nodes(self, node: ast.AST) -> Scope:
        """:meth:`_find_scope` through the parents' mapping, node by node."""
        scopes = self.scopes
        parents = self.parents
        current: ast.AST | None = node
        below: ast.AST | None = None  # the child of ``current`` on the way up
        while current is not None:
            parent = parents.get(current)
            if parent is not None and parent in scopes and not _evaluated_outside(parent, current, below):
                return scopes[parent]
            below, current = current, parent
        return scopes[self.module]

    def enclosing_class(self, node: ast.AST) -> ast.ClassDef | None:
        current = self.parents.get(node)
        while current is not None:
            if type(current) is ast.ClassDef:
                return current  # type: ignore[return-value]
            current = self.parents.get(current)
        return None

    def kind(self, expr: ast.AST) -> Kind:
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
        """Set up the equations that give every name of every scope one kind; each is
        solved when something asks for it (:meth:`_lookup`), with what it reads.

        A name's kind is what all its assignments in its scope agree on, and an
        assignment's value may read other names (or the name itself:
        ``x = x * 2``). Names start as PENDING (no information) and are
        recomputed until nothing changes, so evaluating an expression never
        recurses through names: each name is a table lookup.

        Most names are never asked about (in 60 transformers model files, 5,400 of
        37,000 are needed to answer every question the rules ask), so the names are
        solved a group at a time: the one asked for and every name its kind reads,
        and what those read, iterated to their fixed point in the order of the
        whole file's equations (:meth:`_solve_group`), and kept.
        """
        self._names = {}
        # key -> how its kind is computed: (method, its arguments). Not closures: they would
        # hold this object in a reference cycle, which only the cyclic collector frees.
        equations: dict[tuple[int, str], tuple] = {}
        for scope in self.scopes.values():
            for name in scope.bindings:
                equations[(id(scope), name)] = (Provenance._compute_name, scope, name)
        for cls, attrs in self.class_attrs.items():
            for attr in attrs:
                equations[(id(cls), "self." + attr)] = (Provenance._compute_attribute, cls, attr)
        for key in self._object_attrs:
            equations[key] = (Provenance._compute_object_attribute, key)
        for func in self._returns:
            equations[(id(func), "return")] = (Provenance._compute_return, func)
        # Names also bound to ``None``: their kind where a test proved them not None.
        for scope in self.scopes.values():
            for name, bindings in scope.bindings.items():
                if any(how == "value" and _is_none(node) for how, node in bindings):
                    equations[(id(scope), name + NOT_NONE)] = (Provenance._compute_name, scope, name, True)
        self._equations = equations
        self._rank = {key: rank for rank, key in enumerate(equations)}
        self._final: set[tuple[int, str]] = set()
        self._group: list[tuple[int, str]] | None = None  # the keys being solved
        # A name's kind is a function of the kinds it reads: one whose reads are all
        # unchanged since it was last computed would come out the same, and is skipped.
        self._key_reads: dict[tuple[int, str], set[tuple[int, str]]] = {}
        self._computed_at: dict[tuple[int, str], int] = {}
        self._changed_at: dict[tuple[int, str], int] = {}
        self._tick = 0

    def _update(self, key: tuple[int, str]) -> bool:
        """Compute ``key`` again (unless what it read is unchanged); did its kind change?"""
        names = self._names
        assert names is not None
        reads = self._key_reads.get(key)
        computed = self._computed_at.get(key)
        if shortcuts.ENABLED and computed is not None and reads is not None and all(
                self._changed_at.get(r, -1) <= computed for r in reads):
            return False
        self._reads = set()
        self._computed_at[key] = self._tick
        method, *arguments = self._equations[key]
        new = method(self, *arguments)
        self._key_reads[key], self._reads = self._reads, None
        if names[key] is new:
            return False
        names[key] = new
        self._tick += 1
        self._changed_at[key] = self._tick
        return True

    def _solve_group(self, first: tuple[int, str]) -> None:
        """Solve ``first`` and every unsolved name it reads, directly or not.

        First the group is found: each key is computed once and what it reads joins
        the group. Then, from PENDING again, the group is iterated as the whole
        file's equations would be, in their order, until nothing changes (at most
        8 rounds); a key a computation reads for the first time joins it then.
        Keys solved before are constants here."""
        names = self._names
        assert names is not None
        self._solving = True
        group = self._group = [first]
        names[first] = Kind.PENDING
        i = 0
        while i < len(group):  # finding the group: ``_lookup`` appends what is read
            self._update(group[i])
            i += 1
        if shortcuts.ENABLED and len(group) == 1 and first not in self._key_reads[first]:
            # It read only solved keys: iterating again would compute the same kind.
            if names[first] is Kind.PENDING:
                names[first] = Kind.UNKNOWN
            self._final.add(first)
            self._group = None
            self._solving = False
            return
        for key in group:
            names[key] = Kind.PENDING
            self._computed_at.pop(key, None)
        rank = self._rank
        for _ in range(8):
            group.sort(key=rank.__getitem__)
            size = len(group)
            changed = False
            i = 0
            while i < len(group):
                if self._update(group[i]):
                    changed = True
                i += 1
            if not changed and len(group) == size:
                break
        for key in group:
            if names[key] is Kind.PENDING:
                names[key] = Kind.UNKNOWN
        self._final.update(group)
        self._group = None
        self._solving = False

    def _compute_attribute(self, cls: ast.ClassDef, attr: str) -> Kind:
        """``self.attr``: what every ``self.attr = ...`` of the class agrees on."""
        kinds = []
        for value in self.class_attrs[cls][attr]:
            if type(value) is ast.Name and value.id == "__buffer__":
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
            if how == "value" and isinstance(node, ast.expr):
                kinds.append(self._settled(lambda node=node: self.kind(node)))
            elif how == "aug" and type(node) is ast.AugAssign:
                if self._settled(lambda node=node: self.kind(node.value)) is Kind.TENSOR:
                    kinds.append(Kind.TENSOR)
        for cls in made:
            if attr in self.class_attrs.get(cls, {}):
                kinds.append(self._lookup((id(cls), "self." + attr)))
            elif any(n.name in ("__getattr__", "__setattr__", "__getattribute__")  # type: ignore[attr-defined]
                     for n in nodes_within(cls, *_FUNCTIONS)) or any(
                    n.name == attr for n in nodes_within(cls, *_FUNCTIONS)):  # type: ignore[attr-defined]
                return Kind.UNKNOWN  # a property, or attributes the class computes
        return _join(kinds)

    def _made_here(self, scope: Scope, base: str) -> list[ast.ClassDef] | None:
        """The classes of this file an object ``base`` is made from, when every binding of
        it in ``scope`` makes one (``t = State()``, ``t = SimpleNamespace()``); else None."""
        bindings = scope.bindings.get(base, [])
        if not bindings:
            return None
        classes: list[ast.ClassDef] = []
        for how, node in bindings:
            if how != "value" or type(node) is not ast.Call:
                return None
            q = self.imports.qualify(node.func) or ""  # type: ignore[attr-defined]
            if q in ("types.SimpleNamespace", "argparse.Namespace") and not node.args and not node.keywords:  # type: ignore[attr-defined]
                continue
            local = next((c for c in self.class_attrs if c.name == q), None)
            if local is None or any(argument_star(a) for a in call_arguments(node)) or local.bases:  # type: ignore[arg-type]
                return None  # a class of another module (or with bases): its ``__init__`` may set anything
            classes.append(local)
        return classes

    def _passed_tensor(self, call: ast.Call, place: int, name: str) -> bool:
        """Is the argument ``call`` passes for the positional parameter ``name`` (the
        ``place``-th) a tensor?"""
        argument: ast.expr | None = None
        if place < len(call.args) and not any(type(a) is ast.Starred for a in call.args[:place + 1]):
            argument = call.args[place]
        else:
            argument = next((k.value for k in call.keywords if k.arg == name), None)
        return argument is not None and self.kind(argument) is Kind.TENSOR

    def _compute_return(self, func: ast.FunctionDef) -> Kind:
        """What a function of this file returns: what all its ``return``s agree on."""
        if not all(transparent(decorator, self.imports, self.local_function, self._transparent)
                   for decorator in func.decorator_list):
            return Kind.UNKNOWN
        if func.returns is not None:
            annotated = self._annotation_kind(func.returns)
            if annotated is not Kind.UNKNOWN:
                return annotated  # ``def _do_all_reduce(self, ...) -> torch.Tensor: pass``, overridden
        if func in self._generators:
            return Kind.OTHER  # a generator or a coroutine
        values = self._returns.get(func, [])
        if not values:
            # ``pass``, ``...`` or ``raise NotImplementedError``: a stub a subclass overrides.
            return Kind.UNKNOWN if _stub_body(func) else Kind.OTHER  # else: None
        return _join([Kind.OTHER if v is None else self._settled(lambda v=v: self.kind(v)) for v in values])

    def callee_names(self, func: ast.expr) -> set[str]:
        """The qualified names of what a call of ``func`` may call: through imports, and
        through a name bound to a function (``synchronize = torch.cuda.synchronize if cuda
        else (lambda: None)``: ``torch.cuda.synchronize`` or a lambda)."""
        found: set[str] = set()
        # ``(boolop, n)`` stands for the operation on the first ``n`` values of a BoolOp
        # (libcst nested ``a or b or c`` as ``(a or b) or c``).
        todo: list = [func]
        seen: set[object] = set()
        while todo:
            expr = todo.pop()
            part = type(expr) is tuple
            key: object = (id(expr[0]), expr[1]) if part else id(expr)
            if key in seen or len(seen) > 16:
                continue
            seen.add(key)
            if part or type(expr) is ast.BoolOp:
                boolop, n = expr if part else (expr, len(expr.values))
                todo += [boolop.values[0] if n == 2 else (boolop, n - 1), boolop.values[n - 1]]
                continue
            if type(expr) is ast.IfExp:
                todo += [expr.body, expr.orelse]
                continue
            if type(expr) is ast.Name:
                scope = self.scope_of(expr).lookup(expr.id)
                if scope is not None and not any(how == "import" for how, _ in scope.bindings[expr.id]):
                    todo += self.assigned_values(expr)
                    continue
            q = self.imports.qualify(expr)
            if q is not None:
                found.add(q)
        return found

    def local_function(self, func: ast.expr) -> ast.FunctionDef | None:
        """The function of this file a call's callee certainly is: ``helper`` defined once at
        the top of the module, or ``self.method`` of the enclosing class."""
        if type(func) is ast.Name:
            node = self.functions.get(func.id)
            scope = self.scope_of(func).lookup(func.id)
            if node is not None and scope is self.scopes[self.module] and len(scope.bindings[func.id]) == 1:
                return node
            return None
        if type(func) is ast.Attribute and type(func.value) is ast.Name and func.value.id == "self":
            cls = self.enclosing_class(func)
            if cls is not None and func.attr not in self.class_attrs.get(cls, {}):
                return self.methods.get((cls, func.attr))
            return None
        if type(func) is ast.Attribute:
            # ``model.decode(z)`` where ``model = VAE().to(device)``, ``VAE`` a class of this file.
            cls = self._instance_class(func.value, 0)
            if cls is not None and func.attr not in self.class_attrs.get(cls, {}):
                return self.methods.get((cls, func.attr))
        return None

    def instance_class(self, expr: ast.expr) -> ast.ClassDef | None:
        """The module-level class of this file ``expr`` is certainly an instance of, or None."""
        return self._instance_class(expr, 0)

    def _instance_class(self, expr: ast.expr, depth: int) -> ast.ClassDef | None:
        """The class of this file (a module-level ``class``, bound once) that ``expr`` is
        certainly an instance of: ``VAE()``, ``VAE().to(device)`` (a module's ``to``, ``cuda``,
        ``eval``, ``train`` return it), or a name every binding of which is one."""
        t = type(expr)
        if t is ast.Call:
            func = expr.func  # type: ignore[attr-defined]
            if type(func) is ast.Name:
                scope = self.scope_of(func).lookup(func.id)
                if scope is self.scopes[self.module] and len(scope.bindings.get(func.id, ())) == 1:
                    return next((c for c in self.module.body if type(c) is ast.ClassDef and c.name == func.id), None)
                return None
            if type(func) is ast.Attribute and func.attr in MODULE_SELF_METHODS and depth < 4:
                cls = self._instance_class(func.value, depth + 1)
                # ``Module.to`` returns the module: only for a module class that keeps it.
                module = cls is not None and cls.name in self.module_classes
                return cls if module and (cls, func.attr) not in self.methods else None
            return None
        if t is ast.Name and depth < 4:
            scope = self.scope_of(expr).lookup(expr.id)  # type: ignore[attr-defined]
            bindings = scope.bindings.get(expr.id, ()) if scope is not None else ()  # type: ignore[attr-defined]
            if not bindings or any(how != "value" or not isinstance(node, ast.expr) for how, node in bindings):
                return None
            found = {self._instance_class(node, depth + 1) for _, node in bindings}
            return found.pop() if len(found) == 1 else None
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

    def is_tensor(self, expr: ast.AST) -> bool:
        return self.kind(expr) is Kind.TENSOR

    def _annotation_kind(self, annotation: ast.expr) -> Kind:
        # ``Optional[Tensor]`` and ``Tensor | None``: a tensor wherever it is used as one.
        q = self.imports.qualify(_without_none(self.imports, annotation))
        if q in ("torch.nn.Module", "torch.nn.modules.module.Module") or is_module_class(q, self.module_classes):
            return Kind.MODULE  # (``model: nn.Linear`` too)
        return annotation_kind(self.imports, annotation)

    def _kind(self, expr: ast.AST) -> Kind:
        t = type(expr)
        if t is ast.Constant:
            value = expr.value  # type: ignore[attr-defined]
            if value is None or type(value) in (str, bytes):
                return Kind.OTHER  # ``None`` (a name to libcst), strings
            if value is Ellipsis:
                return Kind.UNKNOWN
            return Kind.NUMBER  # numbers, ``True`` and ``False``
        if t in (ast.JoinedStr, ast.List, ast.Dict, ast.Set, ast.ListComp, ast.DictComp, ast.SetComp, ast.Lambda):
            return Kind.OTHER
        if t is ast.Tuple:
            return Kind.OTHER
        if t is ast.Name or t is ast.arg:  # a parameter's name was a ``Name`` to libcst
            return self._name_kind(expr)  # type: ignore[arg-type]
        if t is ast.Attribute:
            return self._attribute_kind(expr)  # type: ignore[arg-type]
        if t is ast.Call:
            return self._call_kind(expr)  # type: ignore[arg-type]
        if t is ast.Subscript:
            container = expr.value  # type: ignore[attr-defined]
            base = self.kind(container)
            if base in (Kind.TENSOR, Kind.NUMPY):
                return base
            elements = subscript_elements(expr)  # type: ignore[arg-type]
            if base is Kind.OTHER and self.tensor_sequence(container) and all(
                type(e) is not ast.Slice for e in elements
            ):
                return Kind.TENSOR  # ``torch.where(mask)[0]``, ``x.split(2)[-1]``
            single = len(elements) == 1 and type(elements[0]) is not ast.Slice
            if base is Kind.OTHER and single and type(container) is ast.Call and \
                    type(container.func) is ast.Attribute and container.func.attr in PAIR_METHODS and \
                    self.kind(container.func.value) is Kind.TENSOR and self.tensor_pair(container):
                return Kind.TENSOR  # ``y.max(1)[0]``: the values (or the indices) of the pair
            if _is_shape_query(container) and single and (
                self.kind(container.value if type(container) is ast.Attribute else container) in (Kind.TENSOR, Kind.NUMPY)
            ):
                return Kind.NUMBER  # ``x.shape[0]``: an int
            if base is not Kind.MODULE and single:
                keyed = self._keyed_value(container, elements[0])
                if keyed is not None:
                    return self.kind(keyed)  # ``parts["loss"]`` of ``parts = {"loss": loss, "n": 3}``
                return self.element_kind(container, "item")  # ``losses[-1]``
            return Kind.UNKNOWN
        if t is ast.UnaryOp:
            if type(expr.op) is ast.Not:  # type: ignore[attr-defined]
                return Kind.UNKNOWN if self.kind(expr.operand) is Kind.TENSOR else Kind.NUMBER  # type: ignore[attr-defined]
            return self.kind(expr.operand)  # type: ignore[attr-defined]
        if t is ast.BinOp:
            if made_from_text(expr):  # type: ignore[arg-type]
                return Kind.OTHER  # ``"%.3f" % loss``, ``' ' * 8``, ``"loss: " + s``: a string (with a tensor, an error)
            left, right = self.kind(expr.left), self.kind(expr.right)  # type: ignore[attr-defined]
            if Kind.PENDING in (left, right) and not {left, right} & {Kind.TENSOR, Kind.NUMPY}:
                return Kind.PENDING
            if Kind.NUMPY in (left, right):
                return Kind.NUMPY if Kind.TENSOR not in (left, right) else Kind.UNKNOWN
            if Kind.TENSOR in (left, right):
                return Kind.TENSOR
            if left is Kind.NUMBER and right is Kind.NUMBER:
                return Kind.NUMBER
            return Kind.UNKNOWN
        if t is ast.Compare:
            ops_are_identity = all(type(op) in (ast.Is, ast.IsNot, ast.In, ast.NotIn) for op in expr.ops)  # type: ignore[attr-defined]
            if (ops_are_identity or _equals_text(expr)) and not self._solving:  # type: ignore[arg-type]
                # A Python bool whatever the operands are. (While names are solved the
                # operands are still read: what a name's kind read is part of the answer.)
                return Kind.NUMBER
            kinds = [self.kind(expr.left)] + [self.kind(c) for c in expr.comparators]  # type: ignore[attr-defined]
            if ops_are_identity or _equals_text(expr):  # type: ignore[arg-type]
                return Kind.NUMBER
            if Kind.TENSOR in kinds and len(expr.ops) == 1:  # type: ignore[attr-defined]
                return Kind.TENSOR
            if all(k in (Kind.NUMBER, Kind.OTHER, Kind.MODULE) for k in kinds):
                # ``t.dtype == torch.float16``, ``x.shape == y.shape``: a Python bool
                return Kind.NUMBER
            return Kind.UNKNOWN
        if t is ast.BoolOp:
            # As libcst's nesting ``(a and b) and c``: the kind all operands share, else UNKNOWN.
            values = expr.values  # type: ignore[attr-defined]
            left = self.kind(values[0])
            for value in values[1:]:
                right = self.kind(value)
                left = left if left is right else Kind.UNKNOWN
            return left
        if t is ast.IfExp:
            return _join([self.kind(expr.body), self.kind(expr.orelse)])  # type: ignore[attr-defined]
        if t is ast.NamedExpr:
            return self.kind(expr.value)  # type: ignore[attr-defined]
        return Kind.UNKNOWN

    def _name_kind(self, name: ast.Name | ast.arg) -> Kind:
        spelled = _spelling(name)
        if self._may_be_narrowed(name, spelled):
            narrowed = self.narrowed(name)
            if narrowed is not None:
                return narrowed
        value = self.reaching(name)
        if value is not None:
            kind = self._deeper(lambda: self._reaching_kind(name, value))
            if kind not in (Kind.UNKNOWN, Kind.PENDING):
                return kind
        else:
            values = self.reaching_branches(name)
            if values:
                # ``if shuffle: idx = randperm(n)`` / ``else: idx = arange(n)``, then ``idx = idx.tolist()``:
                # what the branches leave, not every binding of the name.
                kind = self._deeper(lambda: _join([self.kind(v) for v in values]))
                if kind not in (Kind.UNKNOWN, Kind.PENDING):
                    return kind
            unpacked = self.reaching_unpacked(name)
            if unpacked is not None and self._deeper(lambda: self._unpacks_tensors(unpacked)):
                return Kind.TENSOR  # ``a, b = torch.unique(t, return_counts=True)``, then ``a = a.tolist()``
        return self.name_kind_at(spelled, name)

    def _may_be_narrowed(self, name: ast.Name | ast.arg, spelled: str) -> bool:
        """Can a test around this read say what it is? Where its name is tested with
        ``isinstance`` or ``is None``, or tested bare (``if acc:``) and bound to ``None``
        somewhere (a bare test says only that it is not None). Asked before the tests
        around the read are looked for: a flag tested bare (``if use_cache:``) is read often."""
        if spelled in self._tested_names:
            return True
        if spelled not in self._truth_tested or self._names is None:
            return False
        scope = self.scope_of(name).lookup(spelled)
        return scope is not None and (id(scope), spelled + NOT_NONE) in self._equations

    def narrowed(self, name: ast.Name | ast.arg) -> Kind | None:
        """The kind a test around this read proves: ``isinstance(x, torch.Tensor)`` (TENSOR in
        its branch, OTHER in the other), ``x is None`` (OTHER), ``x is not None`` (what the
        bindings other than ``None`` agree on); None where no test says anything, or where
        the name is rebound between the test and the read."""
        for test, truth in self._guards(name):
            found = self._test_proves(test, name, truth)
            if found is not None:
                return found
        return None

    def _guards(self, name: ast.Name | ast.arg) -> list[tuple[ast.expr, bool]]:
        """The tests around a read, innermost first, each with the value it has there,
        up to where the name is rebound (computed once per read)."""
        cached = self._guard_cache.get(id(name))
        if cached is not None:
            return cached
        if self._bindings is None:
            self._bindings = Bindings(self.module)
        guards: list[tuple[ast.expr, bool]] = []
        spelled = _spelling(name)
        scope_node = self.scope_of(name).node
        child: ast.AST = name
        node = self.parents.get(name)
        while node is not None and node is not scope_node:
            if isinstance(child, ast.stmt):
                # ``node`` holds the block ``child`` is a statement of: a binding earlier in it
                # comes after any test further out.
                found = self._bindings.last_binding_before(node, child, spelled)
                if found is not None and found[0] is not None:
                    break
            t = type(node)
            if (t is ast.If or t is ast.IfExp or t is ast.While) and child is not node.test:  # type: ignore[attr-defined]
                guards.append((node.test, _in_body(node, child)))  # type: ignore[attr-defined]
            elif t is ast.BoolOp and child is not node.values[0]:  # type: ignore[attr-defined]
                # As libcst's ``(a and b) and c``: a read in ``c`` is guarded by ``a and b``.
                values = node.values  # type: ignore[attr-defined]
                index = next(i for i, value in enumerate(values) if value is child)
                left = values[0] if index == 1 else ast.BoolOp(op=node.op, values=values[:index])  # type: ignore[attr-defined]
                guards.append((left, type(node.op) is ast.And))  # type: ignore[attr-defined]
            elif isinstance(node, _COMPOUND) and not isinstance(node, (ast.If, ast.With, ast.AsyncWith)):
                if not (t in _FOR and child is node.iter) and self._bindings.binds(node, spelled):  # type: ignore[attr-defined]
                    break  # a loop that rebinds it
            child = node
            node = self.parents.get(node)
        self._guard_cache[id(name)] = guards
        return guards

    def _not_none_kind(self, name: ast.Name | ast.arg) -> Kind | None:
        """The kind of ``name`` (bound to ``None`` on some path) where it is not None; None
        where that is not known."""
        spelled = _spelling(name)
        scope = self.scope_of(name).lookup(spelled)
        if scope is None or (id(scope), spelled + NOT_NONE) not in self._equations:
            return None
        kind = self._lookup((id(scope), spelled + NOT_NONE))
        return kind if kind not in (Kind.UNKNOWN, Kind.PENDING) else None

    def kind_unless_none(self, name: ast.Name) -> Kind | None:
        """What a read of ``name``, a name bound to ``None`` on some paths and to values of
        one kind on the others, holds when it is not None (``acc = None``, later ``acc =
        correct.float().mean()``); None for any other name."""
        if self._names is None:
            self._solve_names()
        return self._not_none_kind(name)

    def _test_proves(self, test: ast.expr, name: ast.Name | ast.arg, truth: bool) -> Kind | None:
        """What ``test`` being ``truth`` says about the kind of ``name``."""
        t = type(test)
        spelled = _spelling(name)
        if t is ast.UnaryOp and type(test.op) is ast.Not:  # type: ignore[attr-defined]
            return self._test_proves(test.operand, name, not truth)  # type: ignore[attr-defined]
        if t is ast.BoolOp:
            # ``a and b`` true: both are; ``a or b`` false: neither is.
            if (type(test.op) is ast.And) == truth:  # type: ignore[attr-defined]
                for value in test.values:  # type: ignore[attr-defined]
                    found = self._test_proves(value, name, truth)
                    if found is not None:
                        return found
            return None
        if t is ast.Compare and len(test.ops) == 1 and type(test.left) is ast.Name and \
                test.left.id == spelled and _is_none(test.comparators[0]):  # type: ignore[attr-defined]
            operator = type(test.ops[0])  # type: ignore[attr-defined]
            if operator is not ast.Is and operator is not ast.IsNot:
                return None
            if (operator is ast.Is) == truth:
                return Kind.OTHER  # ``None``
            return self._not_none_kind(name)
        if t is ast.Name and test.id == spelled and truth:  # type: ignore[attr-defined]
            return self._not_none_kind(name)  # ``if acc:`` true: ``acc`` is not None
        if t is ast.Call and (test.args or test.keywords):  # type: ignore[attr-defined]
            arguments = call_arguments(test)  # type: ignore[arg-type]
            first = argument_value(arguments[0])
            if type(first) is not ast.Name or first.id != spelled:
                return None
            q = self.imports.qualify(test.func) or ""  # type: ignore[attr-defined]
            if q == "torch.is_tensor" and len(arguments) == 1:
                return Kind.TENSOR if truth else Kind.OTHER
            if q == "isinstance" and len(arguments) == 2:
                classes = argument_value(arguments[1])
                names = [_unstarred(e) for e in classes.elts] if type(classes) is ast.Tuple else [classes]  # type: ignore[attr-defined]
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

    def _reaching_kind(self, name: ast.Name | ast.arg, value: ast.expr | ast.arg) -> Kind:
        if type(value) is ast.arg:
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

    def _reaching_binding(self, name: ast.Name | ast.arg) -> ast.stmt | ast.arg | None:
        """The statement binding ``name`` that this read certainly sees last, or the parameter,
        in straight-line code of its own scope (see :mod:`.reaching`); None where there is no
        such one (and while names are being solved: a name has one kind for its scope there)."""
        if self._solving or self._reaching_depth > MAX_REACHING_DEPTH:
            return None
        key = id(name)
        if key in self._reaching:
            return self._reaching[key]
        scope = self.scope_of(name)
        spelled = _spelling(name)
        found = None
        # A name bound once has that binding's kind everywhere: only rebound names need the search.
        if (
            len(scope.bindings.get(spelled, ())) > 1 and scope.lookup(spelled) is scope
            and spelled not in self._declared_elsewhere()
        ):
            if self._bindings is None:
                self._bindings = Bindings(self.module)
            found = reaching_binding(name, scope.node, self.parents, self._bindings)
        self._reaching[key] = found
        return found

    def reaching(self, name: ast.Name | ast.arg) -> ast.expr | ast.arg | None:
        """The value of the assignment this read of ``name`` certainly sees; None where there
        is no such one. A parameter (its ``ast.arg``: libcst's ``Name`` of it) sees itself,
        where its name is rebound."""
        found = self._reaching_binding(name)
        if found is None or type(found) is ast.arg:
            return found
        return assigned_value(found, _spelling(name), self._bindings)  # type: ignore[arg-type]

    def reaching_unpacked(self, name: ast.Name | ast.arg) -> ast.expr | None:
        """The value whose items a tuple of names that binds ``name`` last before this read
        unpacks (see :func:`.reaching.unpacked_value`); None otherwise."""
        if type(name) is not ast.Name:
            return None
        return unpacked_value(self._reaching_binding(name), name.id)

    def _unpacks_tensors(self, value: ast.expr) -> bool:
        """Does unpacking ``value`` give tensors (a tensor's rows, a pair such as ``t.max(1)``, a
        tuple of them such as ``torch.split(x, 2)``)? As an ``unpack`` binding's kind says."""
        return self.kind(value) is Kind.TENSOR or (type(value) is ast.Call and self.tensor_pair(value)) or (
            self.tensor_sequence(value))

    def reaching_branches(self, name: ast.Name | ast.arg) -> list[ast.expr] | None:
        """The values the branches of an ``if`` before this read leave in ``name``, where each
        branch assigns it last (see :func:`.reaching.branch_values`); None otherwise."""
        if type(name) is not ast.Name:
            return None
        return branch_values(self._reaching_binding(name), name.id, self._bindings)  # type: ignore[arg-type]

    def _declared_elsewhere(self) -> frozenset[str]:
        """Names some function declares ``global`` or ``nonlocal``: a call may rebind them."""
        if self._global_names is None:
            self._global_names = frozenset(
                item for kind in (ast.Global, ast.Nonlocal) for node in nodes_within(self.module, kind)
                for item in node.names  # type: ignore[attr-defined]
            )
        return self._global_names

    def name_kind_at(self, value: str, anchor: ast.AST) -> Kind:
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
        names = self._names
        assert names is not None
        if key in self._final:
            kind = names[key]
        elif key not in self._equations:
            kind = Kind.UNKNOWN
        elif self._group is not None:  # solving: the key joins the group being solved
            kind = names.get(key)  # type: ignore[assignment]
            if kind is None:
                kind = names[key] = Kind.PENDING
                self._group.append(key)
        else:
            self._solve_group(key)
            kind = names[key]
        if self._reads is not None:
            self._reads.add(key)
        if kind is Kind.PENDING:
            self._pending_reads += 1
        return kind

    def _binding_kind(self, scope: Scope, name: str, how: str, node: object) -> Kind | None:
        if how == "value" and isinstance(node, ast.expr):
            return self.kind(node)
        if how == "rest":
            return Kind.OTHER  # ``*xyxy, conf = row``: a list
        if how == "annotation" and isinstance(node, ast.expr):
            return self._annotation_kind(node)
        if how == "aug" and type(node) is ast.AugAssign:
            value = self.kind(node.value)
            if value is Kind.PENDING:
                return Kind.PENDING  # ``total += model(x).mean()`` while ``model`` is worked out
            # ``x += t`` keeps x's own kind unless it mixes in a tensor.
            return Kind.TENSOR if value is Kind.TENSOR else None
        if how == "iter" and isinstance(node, ast.expr):
            node = self._progress_bar_items(node)
            it = self.kind(node)
            if it is Kind.TENSOR or self.tensor_sequence(node):
                return Kind.TENSOR  # rows of a tensor, or ``for part in x.split(2)``
            if it is Kind.NUMPY:
                return Kind.NUMPY
            if type(node) is ast.Call and dotted_name(node.func) in ("range", "enumerate"):
                return Kind.NUMBER if dotted_name(node.func) == "range" else Kind.UNKNOWN
            if type(node) is ast.Call and self.imports.qualify(node.func) in ("tqdm.trange", "tqdm.auto.trange"):
                return Kind.NUMBER  # ``for i in trange(n)``
            return self.element_kind(node)
        if how == "iter_item" and isinstance(node, _Item):
            return self._item_kind(self._progress_bar_items(node.iterable), node.index)
        if how == "param" and type(node) is ast.arg:
            return self._param_kind(scope, node)
        if how == "number":
            return Kind.NUMBER
        if how == "unpack" and isinstance(node, ast.expr):
            # ``a, b = t`` and ``_, predicted = outputs.max(1)``: tensors.
            tensors = self.kind(node) is Kind.TENSOR or (type(node) is ast.Call and self.tensor_pair(node)) or (
                self.tensor_sequence(node)  # ``a, b = torch.chunk(x, 2)``
            )
            return Kind.TENSOR if tensors else self.element_kind(node)
        if how == "import":
            # A module, or a value imported from one (``from config import LIMIT``).
            return Kind.UNKNOWN
        return Kind.UNKNOWN

    # -- containers ---------------------------------------------------------------------------

    def element_kind(self, container: ast.expr, of: str = "iter") -> Kind:
        """The kind of the elements of a container: what iterating it gives (``of="iter"``),
        or indexing it (``of="item"``: a dict's values). UNKNOWN where fixitem cannot see
        every element (a parameter, a container filled elsewhere)."""
        key: object = id(container)
        if type(container) is ast.Name:
            key = (id(self.scope_of(container).lookup(container.id)), container.id)
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

    def _item_kind(self, container: ast.expr, index: int) -> Kind:
        """``for data, target in batches``: the kind of item ``index`` of each element."""
        mapping = items_of(container)
        if mapping is not None:  # ``for name, value in d.items()``: a key, then a value
            if index > 1 or (index == 0 and self.kind(mapping) is Kind.TENSOR):
                # A tensor has no ``items()``: what is taken for one (a module's output, here
                # a dict of its outputs) has keys fixitem cannot see, and values as its rows.
                return Kind.UNKNOWN
            return self.element_kind(mapping, "iter" if index == 0 else "item")
        elements = self._elements(container, "iter")
        if elements is None:
            return Kind.UNKNOWN
        kinds: list[Kind] = []
        for element in elements:
            if isinstance(element, Kind):
                kinds.append(element if element in (Kind.TENSOR, Kind.NUMPY) else Kind.UNKNOWN)
            elif type(element) in (ast.Tuple, ast.List) and not any(
                    type(e) is ast.Starred for e in element.elts):  # type: ignore[attr-defined]
                items = element.elts  # type: ignore[attr-defined]
                kinds.append(self.kind(items[index]) if index < len(items) else Kind.UNKNOWN)
            else:
                kind = self.kind(element)  # unpacking a tensor gives its rows
                kinds.append(kind if kind in (Kind.TENSOR, Kind.NUMPY, Kind.PENDING) else Kind.UNKNOWN)
        return _join(kinds)

    def _elements(self, expr: ast.expr, of: str = "iter") -> list[ast.expr | Kind] | None:
        """Where the elements of a container come from: the expressions put into it (or
        their kind, where that is all there is to know); None where fixitem cannot see them all."""
        t = type(expr)
        if t in (ast.List, ast.Tuple, ast.Set):
            found: list[ast.expr | Kind] = []
            for element in expr.elts:  # type: ignore[attr-defined]
                if type(element) is ast.Starred:
                    inner = self._elements(element.value)
                    if inner is None:
                        return None
                    found += inner
                else:
                    found.append(element)
            return found
        if t in (ast.ListComp, ast.SetComp, ast.GeneratorExp):
            return [expr.elt]  # type: ignore[attr-defined]
        if t is ast.Dict:
            if of != "item" or any(key is None for key in expr.keys):  # type: ignore[attr-defined]
                return None
            return list(expr.values)  # type: ignore[attr-defined]
        if t is ast.DictComp:
            return [expr.value] if of == "item" else None  # type: ignore[attr-defined]
        if t is ast.Constant or t is ast.JoinedStr:
            return None  # strings, numbers (``True``, ``None``: names to libcst, with no elements either)
        if t is ast.BoolOp:  # ``scores or []``: the elements of one of them
            found = []
            for value in expr.values:  # type: ignore[attr-defined]
                inner = self._elements(value, of)
                if inner is None:
                    return None
                found += inner
            return found
        kind = self.kind(expr)
        if kind in (Kind.TENSOR, Kind.NUMPY):
            return [kind]  # the rows of a tensor are tensors
        if kind is Kind.MODULE:
            # ``for block in self.blocks`` over an ``nn.ModuleList`` / ``nn.Sequential``.
            return [Kind.MODULE] if module_class_of(self, expr) in MODULE_CONTAINERS else None
        if t is ast.Call:
            q = self.imports.qualify(expr.func)  # type: ignore[attr-defined]
            args = expr.args  # type: ignore[attr-defined]
            if q in SAME_ELEMENTS and len(args) == 1 and not expr.keywords and type(args[0]) is not ast.Starred:  # type: ignore[attr-defined]
                if q in ("sorted", "reversed", "iter") or of == "iter" or q == "list" or q == "tuple":
                    return self._elements(args[0], "iter")
            func = expr.func  # type: ignore[attr-defined]
            if type(func) is ast.Attribute and func.attr == "values" and not args and not expr.keywords:  # type: ignore[attr-defined]
                return self._elements(func.value, "item")
            return None
        if t is ast.Subscript and any(type(e) is ast.Slice for e in subscript_elements(expr)):  # type: ignore[arg-type]
            return self._elements(expr.value, of)  # type: ignore[attr-defined]  # ``xs[1:]``: a part of xs
        if t is ast.Name:
            return self._name_elements(expr, of)  # type: ignore[arg-type]
        if t is ast.Attribute and type(expr.value) is ast.Name and expr.value.id == "self":  # type: ignore[attr-defined]
            cls = self.enclosing_class(expr)
            values = self.class_attrs.get(cls, {}).get(expr.attr) if cls is not None else None  # type: ignore[attr-defined]
            key = (id(cls), "self." + expr.attr)  # type: ignore[attr-defined]
            if not values or key in self._element_guard or self._reaching_depth > MAX_REACHING_DEPTH:
                return None
            self._element_guard.add(key)
            try:
                return self._deeper(lambda: self._union_elements(values, [], of))
            finally:
                self._element_guard.discard(key)
        return None

    def _keyed_value(self, container: ast.expr, key: ast.expr) -> ast.expr | None:
        """``parts["loss"]`` where ``parts`` is bound once, to a dict literal with that key,
        and nothing is stored into it: the value written there."""
        if type(container) is not ast.Name or not (type(key) is ast.Constant and type(key.value) in (str, bytes)):
            return None
        scope = self.scope_of(container).lookup(container.id)
        bindings = scope.bindings.get(container.id, []) if scope is not None else []
        if len(bindings) != 1 or bindings[0][0] != "value" or type(bindings[0][1]) is not ast.Dict:
            return None
        if (id(scope), container.id) in self._container_adds:
            return None
        literal = bindings[0][1]
        for element_key, element_value in zip(literal.keys, literal.values):  # type: ignore[attr-defined]
            if element_key is None:  # ``**other``
                return None
            if type(element_key) is ast.Constant and type(element_key.value) in (str, bytes) and element_key.value == key.value:
                return element_value
        return None

    def rest_source(self, expr: ast.expr) -> ast.expr | None:
        """For a name bound only by one starred target (``*xyxy`` in ``for *xyxy, conf in det``),
        what that target unpacks (``det``); None otherwise."""
        if type(expr) is not ast.Name:
            return None
        scope = self.scope_of(expr).lookup(expr.id)
        bindings = scope.bindings.get(expr.id, []) if scope is not None else []
        if len(bindings) == 1 and bindings[0][0] == "rest":
            return bindings[0][1].source  # type: ignore[union-attr]
        return None

    def _name_elements(self, name: ast.Name, of: str) -> list[ast.expr | Kind] | None:
        scope = self.scope_of(name).lookup(name.id)
        if scope is None or (id(scope), name.id) in self._element_guard or self._reaching_depth > MAX_REACHING_DEPTH:
            return None
        bindings = scope.bindings.get(name.id, [])
        if bindings and all(how == "iter" and type(node) is ast.Name for how, node in bindings):
            # ``for group in batch`` with ``batch: List[List[Tensor]]``: the elements of an element.
            kinds: list[ast.expr | Kind] = []
            for _, node in bindings:
                held = self._name_element_types(node, "iter")  # type: ignore[arg-type]
                inner = [self._annotation_element_types(t, of) for t in held or []]
                if not held or any(i is None for i in inner):
                    kinds = []
                    break
                kinds += [self._annotation_kind(t) for types in inner for t in types]  # type: ignore[union-attr]
            if kinds:
                return kinds
        if bindings and all(how == "rest" for how, _ in bindings):
            # ``for *xyxy, conf, cls in det``: the items of a row of a tensor are tensors.
            for _, rest in bindings:
                source = rest.source  # type: ignore[attr-defined]
                unpacked = self.element_kind(source) if rest.each else self.kind(source)  # type: ignore[attr-defined]
                if unpacked is not Kind.TENSOR:
                    return None
            return [Kind.TENSOR]
        if bindings and all(how == "iter" and isinstance(node, ast.expr) for how, node in bindings):
            # ``rows = [[t[1:] for t in s] for s in tokens]`` ... ``for row in rows``: the
            # elements of ``row`` are those of the elements of ``rows``.
            return self._elements_of_elements(scope, name.id, [node for _, node in bindings], of)
        value = self.reaching(name)
        if value is not None and type(value) is not ast.arg and len(bindings) > 1:
            # ``tokens: Tensor`` rebound to ``[[...] for s in tokens]``: as the binding this read sees.
            self._element_guard.add((id(scope), name.id))
            try:
                return self._deeper(lambda: self._elements(value, of))  # type: ignore[arg-type]
            finally:
                self._element_guard.discard((id(scope), name.id))
        if not bindings or any(not (how == "value" and isinstance(node, ast.expr) or how == "param")
                               for how, node in bindings):
            return None
        annotated: list[ast.expr | Kind] = []
        for how, node in bindings:
            if how == "param":  # ``xs: list[torch.Tensor]``: what its annotation says
                declared = self._declared_elements(node, of)  # type: ignore[arg-type]
                if declared is None:
                    return None
                annotated.append(declared)
        self._element_guard.add((id(scope), name.id))
        try:
            values = [node for how, node in bindings if how == "value"]
            adds = self._container_adds.get((id(scope), name.id), [])
            found = self._deeper(lambda: self._union_elements(values, adds, of))  # type: ignore[arg-type]
            return None if found is None else annotated + found
        finally:
            self._element_guard.discard((id(scope), name.id))

    def _elements_of_elements(self, scope: Scope, name: str, iterables: list[ast.expr],
                              of: str) -> list[ast.expr | Kind] | None:
        key = (id(scope), name)
        self._element_guard.add(key)
        try:
            found: list[ast.expr | Kind] = []
            for iterable in iterables:
                outer = self._deeper(lambda iterable=iterable: self._elements(iterable, "iter"))
                if outer is None:
                    return None
                for element in outer:
                    if isinstance(element, Kind):
                        if element not in (Kind.TENSOR, Kind.NUMPY):
                            return None
                        found.append(element)  # the rows of a row
                        continue
                    inner = self._deeper(lambda element=element: self._elements(element, of))
                    if inner is None:
                        return None
                    found += inner
            return found
        finally:
            self._element_guard.discard(key)

    def _sum_kind(self, call: ast.Call) -> Kind:
        """``sum(xs)``, ``sum(xs, start)``: a tensor when ``xs`` is one (the sum of its rows)
        or its elements are tensors (``sum(loss for loss in loss_dict.values())``), or the
        start is a tensor; a number when the elements and the start are numbers."""
        arguments = [a for a in call_arguments(call) if type(a) is not ast.Starred]
        if not arguments or len(arguments) != len(call.args) + len(call.keywords):
            return Kind.UNKNOWN
        iterable = argument_value(arguments[0])
        start = argument_value(arguments[1]) if len(arguments) > 1 else None
        start_kind = self.kind(start) if start is not None else Kind.NUMBER
        if self.kind(iterable) is Kind.TENSOR or start_kind is Kind.TENSOR:
            return Kind.TENSOR
        elements = self.element_kind(iterable)
        if elements is Kind.PENDING:
            return Kind.PENDING
        if elements is Kind.TENSOR:
            return Kind.TENSOR
        return Kind.NUMBER if elements is Kind.NUMBER and start_kind is Kind.NUMBER else Kind.UNKNOWN

    def _declared_elements(self, param: ast.arg, of: str) -> Kind | None:
        """The kind of the elements of a parameter annotated as a container of one type
        (``List[Tensor]``, ``list[Tensor]``, ``Sequence[Tensor]``, ``Tuple[Tensor, ...]``,
        ``Dict[str, Tensor]``, each maybe ``Optional``), iterated (``of="iter"``: a dict's
        keys) or indexed (``of="item"``: a dict's values); None for any other parameter."""
        types = self._declared_element_types(param, of)
        return None if types is None else _join([self._annotation_kind(t) for t in types])

    def _declared_element_types(self, param: ast.arg, of: str) -> list[ast.expr] | None:
        """The annotations of the elements :meth:`_declared_elements` reads; None for a
        parameter with a default other than ``None`` (the default says more)."""
        default = self._default(param)
        annotation = param.annotation
        if annotation is None or (default is not None and not _is_none(default)):
            return None
        return self._annotation_element_types(annotation, of)

    def _annotation_element_types(self, annotation: ast.expr, of: str) -> list[ast.expr] | None:
        """The annotations of the elements of a value annotated ``annotation`` (``List[Tensor]``:
        ``[Tensor]``), iterated or indexed (``of``); None where it names no such container."""
        annotation = _without_none(self.imports, annotation)
        if type(annotation) is not ast.Subscript:
            return None
        container = (self.imports.qualify(annotation.value) or "").rpartition(".")[2].lower()
        index = annotation.slice
        types = index.elts if type(index) is ast.Tuple else [index]  # type: ignore[attr-defined]
        if container in _MAPPINGS:
            return [types[1 if of == "item" else 0]] if len(types) == 2 else None
        if container == "tuple" and len(types) == 2 and type(types[1]) is ast.Constant and \
                types[1].value is Ellipsis:  # type: ignore[attr-defined]
            return types[:1]  # ``Tuple[Tensor, ...]``
        if container == "tuple":
            return list(types) or None
        return list(types) if container in _SEQUENCES and len(types) == 1 else None

    def declared_text(self, name: ast.expr) -> bool:
        """Is ``name`` a string by its annotations: every binding a parameter annotated
        ``str``, or an element (a key) of one annotated as a container of ``str``
        (``for name, loss in zip(names, losses)`` with ``names: Sequence[str]``)? A string is
        passed by value: nothing changes it later, it never prints as a tensor."""
        if type(name) is not ast.Name:
            return False
        scope = self.scope_of(name).lookup(name.id)
        bindings = scope.bindings.get(name.id, []) if scope is not None else []
        if not bindings:
            return False
        for how, node in bindings:
            types: list[ast.expr] | None = None
            if how == "param" and node.annotation is not None:  # type: ignore[attr-defined]
                types = [_without_none(self.imports, node.annotation)]  # type: ignore[attr-defined]
            elif how == "iter" and type(node) is ast.Name:
                types = self._name_element_types(node, "iter")
            elif how == "iter_item" and node.index == 0:  # type: ignore[attr-defined]
                mapping = items_of(node.iterable)  # type: ignore[attr-defined]
                if type(mapping) is ast.Name:
                    types = self._name_element_types(mapping, "iter")  # a dict's keys
            if not types or any(self.imports.qualify(t) not in ("str", "bytes") for t in types):
                return False
        return True

    def _name_element_types(self, name: ast.Name, of: str) -> list[ast.expr] | None:
        """The declared element types of a name bound only as an annotated parameter."""
        scope = self.scope_of(name).lookup(name.id)
        bindings = scope.bindings.get(name.id, []) if scope is not None else []
        if len(bindings) != 1 or bindings[0][0] != "param":
            return None
        return self._declared_element_types(bindings[0][1], of)  # type: ignore[arg-type]

    def _union_elements(self, values: list[ast.expr], adds: list[_Added], of: str
                        ) -> list[ast.expr | Kind] | None:
        found: list[ast.expr | Kind] = []
        for value in values:
            inner = self._elements(value, of)
            if inner is None:
                return None
            found += inner
        for add in adds:
            if add.how == "element":
                value = add.value
                if type(value) is ast.Name:
                    # ``vals.append(res_type)`` where ``res_type`` is rebound to a tensor only
                    # after the loop: what the append sees.
                    seen = self.reaching(value)
                    if seen is not None and type(seen) is not ast.arg:
                        value = seen  # type: ignore[assignment]
                found.append(value)
            else:
                inner = self._elements(add.value, "iter")
                if inner is None:
                    return None
                found += inner
        return found

    def _progress_bar_items(self, iterable: ast.expr) -> ast.expr:
        """``tqdm(xs, ...)`` yields the items of ``xs``: iterate ``xs`` instead."""
        if type(iterable) is ast.Call and (iterable.args or iterable.keywords):
            first = call_arguments(iterable)[0]
            if (
                type(first) is not ast.keyword and type(first) is not ast.Starred
                and self.imports.qualify(iterable.func) in ("tqdm.tqdm", "tqdm.auto.tqdm", "tqdm.notebook.tqdm")
            ):
                return first  # type: ignore[return-value]
        return iterable

    def _default(self, param: ast.arg) -> ast.expr | None:
        """The default value of a parameter (libcst's ``Param.default``)."""
        key = id(param)
        try:
            return self._defaults[key]
        except KeyError:
            arguments = self.parents.get(param)
            found = self._defaults[key] = param_default(arguments, param) if type(arguments) is ast.arguments else None  # type: ignore[arg-type]
            return found

    def _starred(self, param: ast.arg) -> bool:
        """Is ``param`` the ``*args`` or the ``**kwargs`` of its function (libcst's ``Param.star``)?"""
        arguments = self.parents.get(param)
        return type(arguments) is ast.arguments and (arguments.vararg is param or arguments.kwarg is param)  # type: ignore[union-attr]

    def _param_kind(self, scope: Scope, param: ast.arg) -> Kind:
        default = self._default(param)
        if default is not None and not _is_none(default):
            # A literal default says more than the annotation: real code has
            # ``output_attentions: torch.Tensor | None = False``.
            default_kind = self.kind(default)
            if default_kind in (Kind.NUMBER, Kind.OTHER):
                return default_kind
        if param.annotation is not None:
            # An annotation that is not a tensor type (``size: Size_``) overrides
            # the ``forward`` heuristic below.
            return self._annotation_kind(param.annotation)
        func = scope.node
        name = param.arg
        if isinstance(func, _FUNCTIONS) and func.name in AUTOGRAD_METHODS:
            cls = self.enclosing_class(func)
            if cls is not None and cls.name in self.autograd_classes:
                # ``forward(ctx, bias, tp_degree, dtype)``: ``ctx`` is the context object;
                # the others are tensors only where the function uses them as tensors.
                if _first_param(func) is param:  # type: ignore[arg-type]
                    return Kind.OTHER
                if self._starred(param):
                    return Kind.UNKNOWN
                used = name in scope.evidence or self._used_as_tensor(scope, name, by_syntax_only=True)
                return Kind.TENSOR if used else Kind.UNKNOWN
        if isinstance(func, _FUNCTIONS) and func.name == "forward":
            cls = self.enclosing_class(func)
            if cls is not None and name not in ("self", "cls"):
                if self._starred(param) or default is not None:
                    return Kind.UNKNOWN
                if name in scope.size_uses and name not in scope.evidence:
                    # ``forward(self, x, H, W)`` with ``x.view(B, H, W, C)``: sizes, not tensors.
                    return Kind.UNKNOWN
                return Kind.TENSOR
        if isinstance(func, _FUNCTIONS) and not self._starred(param):
            return self._passed_kind(func, param)  # type: ignore[arg-type]
        return Kind.UNKNOWN

    def _passed_kind(self, func: ast.FunctionDef, param: ast.arg) -> Kind:
        """``def train(model, loader, epoch)`` called as ``train(model, loader, epoch)`` with
        ``for epoch in range(n)``: what every call of a module-level function of this file
        passes for the parameter. UNKNOWN where the function is used other than called by
        name (passed as a callback, exported in ``__all__``), or a call passes ``*args``."""
        calls = self._call_sites(func)
        if not calls or id(param) in self._passing or self._reaching_depth > MAX_REACHING_DEPTH:
            return Kind.UNKNOWN
        positional = [p.arg for p in (*func.args.posonlyargs, *func.args.args)]
        name = param.arg
        index = positional.index(name) if name in positional else None
        default = self._default(param)
        kinds: list[Kind] = []
        self._passing.add(id(param))
        try:
            for call in calls:
                args = call.args  # no ``*args`` (nor ``**kwargs``): see _call_sites
                passed = args[index] if index is not None and index < len(args) else next(
                    (k.value for k in call.keywords if k.arg == name), default)
                if passed is None:
                    return Kind.UNKNOWN
                kinds.append(self._settled(lambda passed=passed: self._deeper(lambda: self.kind(passed))))
        finally:
            self._passing.discard(id(param))
        return _join(kinds)

    def _call_sites(self, func: ast.FunctionDef) -> list[ast.Call] | None:
        """The calls of a module-level function of this file, when every use of its name is one."""
        name = func.name
        if self.functions.get(name) is not func or len(self.scopes[self.module].bindings.get(name, [])) != 1:
            return None
        spelled = self._names_by_spelling()
        if self._exported is None:  # names exported (``__all__``) may be called from elsewhere
            self._exported = "__all__" in spelled or "__all__" in _names_spelled_elsewhere(self.module)
        if self._exported:
            return None
        calls: list[ast.Call] = []
        for use in spelled.get(name, ((), ()))[1]:
            parent = self.parents.get(use)
            if self.scope_of(use).lookup(name) is not self.scopes[self.module]:
                continue  # another ``train`` (a parameter or a local of another function)
            if not (type(parent) is ast.Call and parent.func is use):  # type: ignore[attr-defined]
                return None
            if any(type(a) is ast.Starred for a in parent.args) or any(k.arg is None for k in parent.keywords):  # type: ignore[attr-defined]
                return None
            calls.append(parent)  # type: ignore[arg-type]
        return calls

    # -- certainty ----------------------------------------------------------------------------

    def certainty(self, expr: ast.AST) -> Certainty:
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

    def _certain(self, expr: ast.AST, seen: frozenset[tuple[int, str]]) -> bool:
        """For an expression of kind TENSOR: does that rest on proof rather than on
        the ``forward`` parameter heuristic?"""
        cached = self._certain_cache.get(expr)
        if cached is not None:
            return cached
        result = self._certain_uncached(expr, seen)
        self._certain_cache[expr] = result
        return result

    def _certain_tensor_part(self, expr: ast.expr, seen: frozenset[tuple[int, str]]) -> bool:
        return self.kind(expr) is not Kind.TENSOR or self._certain(expr, seen)

    def _certain_uncached(self, expr: ast.AST, seen: frozenset[tuple[int, str]]) -> bool:
        t = type(expr)
        if t is ast.Name or t is ast.arg:  # a parameter's name was a ``Name`` to libcst
            name = _spelling(expr)  # type: ignore[arg-type]
            if self._may_be_narrowed(expr, name) and self.narrowed(expr) is Kind.TENSOR:  # type: ignore[arg-type]
                return True  # ``isinstance(x, torch.Tensor)`` holds here
            value = self.reaching(expr)  # type: ignore[arg-type]
            if value is not None and self._deeper(lambda: self._reaching_kind(expr, value)) is Kind.TENSOR:  # type: ignore[arg-type]
                if type(value) is ast.arg:
                    return self._param_certain(self.scope_of(expr), value)
                return self._deeper(lambda: self._certain(value, seen))
            scope = self.scope_of(expr).lookup(name)
            if scope is None:
                return True
            key = (id(scope), name)
            if key in seen or name in scope.evidence:
                return True
            return self._bindings_certain(scope, name, seen | {key})
        if t is ast.Call:
            func = expr.func  # type: ignore[attr-defined]
            if type(func) is ast.Attribute and self.kind(func.value) is Kind.TENSOR:
                if func.attr in TENSOR_ONLY_NAMES:
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
            if local is None and self.external is not None and (type(func) is ast.Name or type(func) is ast.Attribute):
                found = self.external.definition(self, func)  # type: ignore[attr-defined]
                if found is not None and found.kind == "function":
                    return self.external.returns_certainly_tensor(self, func)  # type: ignore[attr-defined]
            return True
        if t is ast.Subscript and self.kind(expr.value) is not Kind.TENSOR:  # type: ignore[attr-defined]
            return self._elements_certain(expr.value, "item", seen)  # type: ignore[attr-defined]  # ``losses[-1]``: as its elements
        if t is ast.Attribute and type(expr.value) is ast.Name and expr.value.id not in ("self", "cls"):  # type: ignore[attr-defined]
            base = expr.value  # type: ignore[attr-defined]
            owner = self.scope_of(base).lookup(base.id)
            for how, node in self._object_attrs.get((id(owner), f"{base.id}.{expr.attr}"), []):  # type: ignore[attr-defined]
                value = node.value if type(node) is ast.AugAssign else node  # type: ignore[attr-defined]
                if isinstance(value, ast.expr) and not self._certain_tensor_part(value, seen):
                    return False
        if t is ast.Attribute or t is ast.Subscript:
            return self._certain_tensor_part(expr.value, seen)  # type: ignore[attr-defined]
        if t is ast.BinOp:
            sides = [side for side in (expr.left, expr.right) if self.kind(side) is Kind.TENSOR]  # type: ignore[attr-defined]
            return any(self._certain(side, seen) for side in sides) if sides else True
        if t is ast.Compare:
            sides = [expr.left, *expr.comparators]  # type: ignore[attr-defined]
            sides = [side for side in sides if self.kind(side) is Kind.TENSOR]
            return any(self._certain(side, seen) for side in sides) if sides else True
        if t is ast.UnaryOp:
            return self._certain_tensor_part(expr.operand, seen)  # type: ignore[attr-defined]
        if t is ast.IfExp:
            return self._certain_tensor_part(expr.body, seen) and self._certain_tensor_part(expr.orelse, seen)  # type: ignore[attr-defined]
        if t is ast.NamedExpr:
            return self._certain_tensor_part(expr.value, seen)  # type: ignore[attr-defined]
        return True

    def _bindings_certain(self, scope: Scope, name: str, seen: frozenset[tuple[int, str]]) -> bool:
        """Does every binding of ``name`` in ``scope`` that gives a tensor give one for certain?

        Kept per name when no binding takes elements of a container: what decides it
        then is kept per expression already (:meth:`_certain`), so a second look gives the
        same answer, and each read of a name rebound in every ``if`` of a long function
        no longer goes through all its bindings again."""
        key = (id(scope), name)
        cached = self._bindings_certain_cache.get(key)
        if cached is not None:
            return cached
        bindings = scope.bindings.get(name, [])
        found = self._bindings_certain_uncached(scope, bindings, seen)
        if not any(how in ("iter", "unpack", "iter_item") for how, _ in bindings):
            self._bindings_certain_cache[key] = found
        return found

    def _bindings_certain_uncached(
        self, scope: Scope, bindings: list[tuple[str, ast.AST]], seen: frozenset[tuple[int, str]],
    ) -> bool:
        if any(how == "aug" for how, _ in bindings) and any(
                how == "value" and isinstance(node, ast.expr) and self.kind(node) is Kind.NUMBER
                for how, node in bindings):
            return False  # ``total = 0`` then ``total += loss``: a number until the first ``+=``
        for how, node in bindings:
            if how == "param" and type(node) is ast.arg:
                if not self._param_certain(scope, node):
                    return False
            elif how in ("value", "iter", "unpack") and isinstance(node, ast.expr):
                if not self._certain_tensor_part(node, seen):
                    return False
                if how != "value" and not self._elements_certain(node, "iter", seen):
                    return False  # ``for t in xs`` over a list of possible tensors
            elif how == "iter_item" and isinstance(node, _Item):
                if not self._elements_certain(node.iterable, "iter", seen):
                    return False
                if self.kind(node.iterable) is Kind.TENSOR and not self._certain_tensor_part(node.iterable, seen):
                    return False  # ``for i, j in pairs`` over what may be a tensor, or a list of pairs
            elif how == "aug" and type(node) is ast.AugAssign:
                if not self._certain_tensor_part(node.value, seen):
                    return False
        return True

    def _elements_certain(self, container: ast.expr, of: str, seen: frozenset[tuple[int, str]]) -> bool:
        """Is every element of a container that is a tensor certainly one?"""
        key = (id(container), "[]")
        if type(container) is ast.Name:
            key = (id(self.scope_of(container).lookup(container.id)), container.id + "[]")
        if key in seen or self._reaching_depth > MAX_REACHING_DEPTH:
            return True  # ``xs[0] = xs[0] * a``: as the other elements say
        elements = self._elements(container, of) if self.kind(container) not in (Kind.TENSOR, Kind.NUMPY) else None
        if not elements:
            return True
        return self._deeper(lambda: all(isinstance(e, Kind) or self._certain_tensor_part(e, seen | {key}) for e in elements))

    def _param_certain(self, scope: Scope, param: ast.arg) -> bool:
        """A tensor parameter by its annotation, or a ``forward`` parameter that the
        function uses as a tensor."""
        if param.annotation is not None or self._default(param) is not None:
            return True
        if self._param_kind(scope, param) is not Kind.TENSOR:
            return True  # not a tensor at all: nothing to doubt here
        return param.arg in scope.evidence or self._used_as_tensor(scope, param.arg)

    def _used_as_tensor(self, scope: Scope, name: str, by_syntax_only: bool = False) -> bool:
        """Is the name used the way only tensors (and arrays) are: ``x.shape``,
        ``x.item()``, ``self.fc(x)``, ``torch.relu(x)``, ``x @ w``? ``by_syntax_only``
        leaves out module calls, whose kind may still be being worked out."""
        key = (id(scope), name + ("#syntax" if by_syntax_only else ""))
        cached = self._tensor_use_cache.get(key)
        if cached is not None:
            return cached
        found = False
        for node in nodes_within(scope.node, ast.Name):
            if node.id != name or self.scope_of(node).lookup(name) is not scope:  # type: ignore[attr-defined]
                continue
            parent = self.parents.get(node)
            tp = type(parent)
            if tp is ast.Attribute and parent.value is node and parent.attr in TENSOR_USES:  # type: ignore[union-attr]
                found = True
            elif tp is ast.BinOp and type(parent.op) is ast.MatMult:  # type: ignore[union-attr]
                found = True
            else:
                # The argument ``node`` is passed as, other than by keyword (libcst's ``Arg``
                # without ``keyword``: ``x``, ``*x``, ``**x``), and the call it is passed to.
                argument: ast.AST | None = None
                call: ast.AST | None = None
                if tp is ast.Call and parent.func is not node:  # type: ignore[union-attr]
                    argument, call = node, parent
                elif tp is ast.Starred or (tp is ast.keyword and parent.arg is None):  # type: ignore[union-attr]
                    argument, call = parent, self.parents.get(parent)
                if type(call) is ast.Call and (call.args or call.keywords) and call_arguments(call)[0] is argument:  # type: ignore[union-attr,arg-type]
                    q = self.imports.qualify(call.func)  # type: ignore[union-attr]
                    if (is_torch_function(q) and q is not None and q.split(".")[-1] not in CREATION_FUNCTIONS) or (
                        not by_syntax_only and self.kind(call.func) is Kind.MODULE  # type: ignore[union-attr]
                    ):
                        found = True
            if found:
                break
        self._tensor_use_cache[key] = found
        return found

    # -- device -------------------------------------------------------------------------------

    def on_cpu(self, expr: ast.AST) -> bool:
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
            for call in nodes_within(self.module, ast.Call):
                q = self.imports.qualify(call.func) or ""  # type: ignore[attr-defined]
                if q in ("torch.set_default_device", "torch.set_default_tensor_type"):
                    self._default_device = True
                    break
                if q == "torch.device" and type(self.parents.get(call)) is ast.withitem:
                    self._default_device = True  # ``with torch.device("cuda"):``
                    break
        return self._default_device

    def _cpu(self, expr: ast.AST, seen: frozenset[tuple[int, str]]) -> bool:
        cached = self._cpu_cache.get(expr)
        if cached is None:
            cached = self._cpu_cache[expr] = self._cpu_uncached(expr, seen)
        return cached

    def _cpu_or_not_tensor(self, expr: ast.expr, seen: frozenset[tuple[int, str]]) -> bool:
        kind = self.kind(expr)
        if kind is Kind.TENSOR:
            return self._cpu(expr, seen)
        return kind in (Kind.NUMBER, Kind.OTHER, Kind.NUMPY)

    def _cpu_uncached(self, expr: ast.AST, seen: frozenset[tuple[int, str]]) -> bool:
        t = type(expr)
        if t is ast.Call:
            return self._cpu_call(expr, seen)  # type: ignore[arg-type]
        if t is ast.Name or t is ast.arg:  # a parameter's name was a ``Name`` to libcst
            name = _spelling(expr)  # type: ignore[arg-type]
            scope = self.scope_of(expr).lookup(name)
            if scope is None:
                return False
            key = (id(scope), name)
            if key in seen:
                return True  # ``x = x + 1``: as the other bindings say
            value = self.reaching(expr) if t is ast.Name else None  # type: ignore[arg-type]
            if value is not None and type(value) is not ast.arg:
                # ``m = masks.argmax(-1)``, then ``m = torch.from_numpy(a)``: the binding this
                # read sees decides, not every binding of the name.
                return self._deeper(lambda: self._cpu(value, seen))
            branches = self.reaching_branches(expr) if value is None and t is ast.Name else None  # type: ignore[arg-type]
            if branches:
                return self._deeper(lambda: all(self._cpu(v, seen) for v in branches))
            unpacked = self.reaching_unpacked(expr) if value is None and t is ast.Name else None  # type: ignore[arg-type]
            if unpacked is not None and self._unpacks_tensors(unpacked):
                return self._deeper(lambda: self._cpu(unpacked, seen))
            bindings = scope.bindings.get(name, [])
            if not bindings:
                return False
            summed = any(how == "aug" for how, _ in bindings)
            for how, node in bindings:
                if how == "value" and summed and isinstance(node, ast.expr) and self.kind(node) is Kind.NUMBER:
                    continue  # ``correct = 0``, then ``correct += pred.eq(y).cpu().sum()``: a sum's start
                if how in ("value", "iter", "unpack") and isinstance(node, ast.expr):
                    if not self._cpu(node, seen | {key}):
                        return False
                elif how == "aug" and type(node) is ast.AugAssign:
                    if not self._cpu_or_not_tensor(node.value, seen | {key}):
                        return False
                else:
                    return False
            return True
        if t is ast.Subscript:
            return self.kind(expr.value) is Kind.TENSOR and self._cpu(expr.value, seen)  # type: ignore[attr-defined]
        if t is ast.Attribute:
            if expr.attr in ("T", "mT", "H", "mH", "data", "real", "imag", "grad"):  # type: ignore[attr-defined]
                return self.kind(expr.value) is Kind.TENSOR and self._cpu(expr.value, seen)  # type: ignore[attr-defined]
            if type(expr.value) is ast.Name and expr.value.id == "self":  # type: ignore[attr-defined]
                # ``self.ixes = torch.randperm(n)``: every value the class gives it is a host
                # tensor (a buffer is not: ``module.to(device)`` moves it).
                values = self.assigned_values(expr)
                key = (id(self.enclosing_class(expr)), "self." + expr.attr)  # type: ignore[attr-defined]
                if not values or key in seen:
                    return bool(values)
                return all(not (type(v) is ast.Name and v.id == "__buffer__") and self._cpu(v, seen | {key})
                           for v in values)
            return False
        if t is ast.BinOp:
            sides = [expr.left, expr.right]  # type: ignore[attr-defined]
            return any(self.kind(s) is Kind.TENSOR for s in sides) and all(self._cpu_or_not_tensor(s, seen) for s in sides)
        if t is ast.UnaryOp:
            return self._cpu_or_not_tensor(expr.operand, seen) and self.kind(expr.operand) is Kind.TENSOR  # type: ignore[attr-defined]
        if t is ast.IfExp:
            return self._cpu(expr.body, seen) and self._cpu(expr.orelse, seen)  # type: ignore[attr-defined]
        if t is ast.Compare:
            sides = [expr.left, *expr.comparators]  # type: ignore[attr-defined]
            return any(self.kind(s) is Kind.TENSOR for s in sides) and all(self._cpu_or_not_tensor(s, seen) for s in sides)
        return False

    def _names_host_tensor_type(self, expr: ast.expr) -> bool:
        """``torch.LongTensor`` (or ``"torch.LongTensor"``): a tensor type of the CPU's."""
        if type(expr) is ast.Constant:
            return expr.value in devices.HOST_TENSOR_TYPES  # type: ignore[attr-defined]
        return self.imports.qualify(expr) in devices.HOST_TENSOR_TYPES

    def _cpu_call(self, call: ast.Call, seen: frozenset[tuple[int, str]]) -> bool:
        func = call.func
        arguments = call_arguments(call)
        positional = [a for a in call.args if type(a) is not ast.Starred]
        device = next((k.value for k in call.keywords if k.arg == "device"), None)
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
            tensors = [a for a in arguments if self.kind(argument_value(a)) is Kind.TENSOR]
            return bool(tensors) and all(self._cpu_or_not_tensor(argument_value(a), seen) for a in arguments)
        if type(func) is ast.Attribute and self.kind(func.value) is Kind.TENSOR:
            method = func.attr
            if method == "cpu":
                return True
            if method == "to":
                if any(_names_cpu(argument_value(a)) for a in arguments
                       if argument_keyword(a) is None or argument_keyword(a) == "device"):
                    return True
                only_dtypes = all(argument_keyword(a) in ("dtype", "non_blocking", "copy")
                                  or self._is_dtype(argument_value(a)) for a in arguments)
                return only_dtypes and self._cpu(func.value, seen)
            if method == "type" and arguments and self._names_host_tensor_type(argument_value(arguments[0])):
                return True  # ``y.type(torch.LongTensor)``: a legacy type of the CPU's, a copy there
            if method in DEVICE_MOVES:
                return False
            if not self._cpu(func.value, seen):
                return False
            if method.endswith("_") and not method.startswith("_"):
                return True  # ``x.uniform_(a, b)`` is ``x``, updated in place where it lives
            return all(self._cpu_or_not_tensor(argument_value(a), seen) for a in arguments)
        function = self.local_function(func)
        if function is not None:
            # ``def summary(n): return torch.zeros(n).mean()``: every value the function of this
            # file returns is a host tensor (or no tensor) whatever it is given.
            key = (id(function), "return")
            returns = self._returns.get(function)  # type: ignore[call-overload]
            if not returns or key in seen or any(v is None for v in returns) or \
                    self._reaching_depth > MAX_REACHING_DEPTH:
                return False
            return any(self.kind(v) is Kind.TENSOR for v in returns) and all(
                self._deeper(lambda v=v: self._cpu_or_not_tensor(v, seen | {key})) for v in returns)
        if type(func) is ast.Name and self._module_on_host(func):
            # ``net = ResNet18()`` ... ``y = net(torch.randn(1, 3, 32, 32))``: a module never
            # moved, of host tensors.
            tensors = [a for a in arguments if self.kind(argument_value(a)) is Kind.TENSOR]
            return bool(tensors) and all(self._cpu_or_not_tensor(argument_value(a), seen) for a in arguments)
        return False

    def _module_on_host(self, name: ast.Name) -> bool:
        """Is ``name`` a module built in its function, in host memory, and never moved? Bound
        once to a constructor (``torch.nn.Conv2d(...)``, or a module class of this file, which
        moves nothing anywhere: no ``.cuda()``, ``.to(...)`` or ``device=``), without a
        ``device``, and used only as modules are used where nothing moves them: called, or
        ``net.eval()``."""
        scope = self.scope_of(name).lookup(name.id)
        if scope is None or scope.node is self.module or self._default_device_changed():
            return False  # (a module of the file's top level: another module may import and move it)
        bindings = scope.bindings.get(name.id, [])
        if len(bindings) != 1 or bindings[0][0] != "value" or type(bindings[0][1]) is not ast.Call:
            return False
        built = bindings[0][1]
        if any(k.arg == "device" or k.arg is None for k in built.keywords):  # type: ignore[attr-defined]
            return False
        q = self.imports.qualify(built.func) or ""  # type: ignore[attr-defined]
        parts = q.split(".")
        if not (len(parts) == 3 and parts[:2] == ["torch", "nn"] and parts[2][:1].isupper()):
            constructor = built.func  # type: ignore[attr-defined]
            if not (type(constructor) is ast.Name and constructor.id in self.module_classes
                    and any(c.name == constructor.id for c in nodes_within(self.module, ast.ClassDef))  # type: ignore[attr-defined]
                    and not self._moves_to_devices()):
                return False
        for use in nodes_within(scope.node, ast.Name):
            if use.id != name.id or self.scope_of(use).lookup(name.id) is not scope:  # type: ignore[attr-defined]
                continue
            parent = self.parents.get(use)
            if type(parent) is ast.Call and parent.func is use:  # type: ignore[attr-defined]
                continue
            if type(parent) is ast.Attribute and parent.attr in _STAYING_MODULE_METHODS:  # type: ignore[attr-defined]
                continue
            if type(parent) is ast.Assign and use in parent.targets:  # type: ignore[attr-defined]
                continue  # its binding
            return False
        return True

    def _moves_to_devices(self) -> bool:
        """Does anything in this file move to a device, or make a tensor on one?"""
        if self._moves is None:
            self._moves = any(
                node.attr in ("cuda", "to", "to_empty", "xpu", "mps") for node in nodes_within(self.module, ast.Attribute)  # type: ignore[attr-defined]
            ) or any(k.arg == "device" for node in nodes_within(self.module, ast.Call) for k in node.keywords)  # type: ignore[attr-defined]
        return self._moves

    def _is_dtype(self, expr: ast.expr) -> bool:
        q = self.imports.qualify(expr) or ""
        return q.count(".") == 1 and q.startswith("torch.") and q.split(".")[1] in DTYPES

    def made_by_the_standard_library(self, expr: ast.AST, immutable: bool = False) -> bool:
        """Is ``expr`` a call of the standard library that makes a value of its own, never
        one it was given (``datetime.timedelta(...)``, ``time.strftime(...)``): no tensor,
        nor a container that could hold one? ``immutable``: and one that cannot change."""
        if type(expr) is not ast.Call:
            return False
        q = self.imports.qualify(expr.func) or ""  # type: ignore[attr-defined]
        if q in STDLIB_NUMBERS:
            return True
        module = q.rpartition(".")[0]
        if immutable:
            return module in STDLIB_IMMUTABLE_MODULES or module.split(".")[0] in STDLIB_IMMUTABLE_MODULES
        return "." in q and q.split(".")[0] in STDLIB_VALUE_MODULES

    def presumed_tensor(self, expr: ast.AST) -> bool:
        """Is ``expr`` a tensor only by the ``forward`` parameter heuristic: a bare,
        unannotated parameter without default, never rebound and never used as a
        tensor in its function? Such a parameter tested for truth (``if
        interpolate_pos_encoding:``) is far more often a Python flag. So is a comparison
        that is a tensor only through such parameters (``random.random() < ratio``), and a
        name assigned once from one (``teacher_force = random.random() < ratio``)."""
        if type(expr) is ast.Compare:
            sides = [expr.left, *expr.comparators]  # type: ignore[attr-defined]
            presumed = [self.presumed_tensor(side) for side in sides]
            return any(presumed) and all(p or self.kind(side) is not Kind.TENSOR for p, side in zip(presumed, sides))
        if type(expr) is not ast.Name and type(expr) is not ast.arg:
            return False
        name = _spelling(expr)  # type: ignore[arg-type]
        scope = self.scope_of(expr).lookup(name)
        if scope is None or name in scope.evidence:
            return False
        bindings = scope.bindings.get(name, [])
        if len(bindings) == 1 and bindings[0][0] == "value" and type(bindings[0][1]) is ast.Compare:
            value = bindings[0][1]
            if value in self._presuming:  # ``done = done < 1``
                return False
            self._presuming.add(value)
            try:
                return self.presumed_tensor(value)
            finally:
                self._presuming.discard(value)
        if len(bindings) != 1 or bindings[0][0] != "param":
            return False
        param = bindings[0][1]
        return type(param) is ast.arg and param.annotation is None and self._default(param) is None and (
            self._param_kind(scope, param) is Kind.TENSOR
        )

    def assigned_values(self, expr: ast.AST) -> list[ast.expr]:
        """What ``expr`` is assigned: for a name, the values of its assignments in its scope
        (none when it is also bound another way: a parameter, a loop, an import); for
        ``self.attr`` in a method, every ``self.attr = ...`` of the class."""
        if type(expr) is ast.Name or type(expr) is ast.arg:
            name = _spelling(expr)  # type: ignore[arg-type]
            scope = self.scope_of(expr).lookup(name)
            bindings = scope.bindings.get(name, []) if scope is not None else []
            values = [node for how, node in bindings if how == "value" and isinstance(node, ast.expr)]
            return values if len(values) == len(bindings) else []
        if type(expr) is ast.Attribute and type(expr.value) is ast.Name and expr.value.id == "self":
            cls = self.enclosing_class(expr)
            return list(self.class_attrs.get(cls, {}).get(expr.attr, [])) if cls is not None else []
        return []

    def tensors_shown(self, container: ast.expr) -> list[ast.expr]:
        """The certain tensors that text made of ``container`` shows (its ``repr`` shows each
        element's), where ``container`` is a name whose value here is a list, tuple, set or
        dict written in the file (a display or a comprehension) and fixitem sees every element
        put into it (a dict's values); [] otherwise."""
        if type(container) is not ast.Name:
            return []
        value = self.reaching(container)
        if value is not None:
            values = [value]
        else:  # every binding of the name
            scope = self.scope_of(container).lookup(container.id)
            bindings = scope.bindings.get(container.id, []) if scope is not None else []
            values = [node if how == "value" else None for how, node in bindings]
        if not values or any(type(v) not in _SHOWN_CONTAINERS for v in values):
            return []
        elements = self._deeper(lambda: self._elements(container, "item")) or []
        return [e for e in elements if not isinstance(e, Kind) and self.certainty(e) is Certainty.TENSOR]

    def tensor_sequence(self, expr: ast.AST) -> bool:
        """Is ``expr`` a call that the stubs say gives a tuple or list of tensors
        (``torch.split(x, 2)``, ``x.unbind(0)``, ``torch.where(mask)``)?"""
        if type(expr) is not ast.Call:
            return False
        func = expr.func
        if _unique_with_extras(expr) and (self.imports.qualify(func) in _UNIQUE_FUNCTIONS or (
                type(func) is ast.Attribute and func.attr in ("unique", "unique_consecutive")
                and self.kind(func.value) is Kind.TENSOR)):
            return True
        positional, keywords = call_shape(expr)
        q = self.imports.qualify(func)
        if q is not None and q.startswith("torch."):
            return torch_stubs.table().function_kind(q, positional, keywords) == torch_stubs.TENSORS
        if type(func) is ast.Attribute and self.kind(func.value) is Kind.TENSOR:
            return torch_stubs.table().method_kind(func.attr, positional, keywords) == torch_stubs.TENSORS
        return False

    def tensor_pair(self, call: ast.Call) -> bool:
        """``t.max(1)``, ``t.sort()``, ``t.topk(k)``: a (values, indices) pair of tensors."""
        func = call.func
        if not (type(func) is ast.Attribute and func.attr in PAIR_METHODS):
            return False
        if self.kind(func.value) is not Kind.TENSOR:
            return False
        if func.attr in ("sort", "topk", "kthvalue"):
            return True
        arguments = call_arguments(call)
        first = arguments[0] if arguments else None  # ``t.max()`` is one tensor; ``t.max(dim)`` a pair
        return first is not None and argument_keyword(first) in (None, "dim") and (
            self.kind(argument_value(first)) is not Kind.TENSOR
        )

    def _attribute_kind(self, expr: ast.Attribute) -> Kind:
        attr = expr.attr
        value = expr.value
        if attr in ("values", "indices") and type(value) is ast.Call and self.tensor_pair(value):
            return Kind.TENSOR  # ``x.max(1).indices``
        if type(value) is ast.Name and value.id not in ("self", "cls"):
            owner = self.scope_of(value).lookup(value.id)
            key = (id(owner), f"{value.id}.{attr}")
            if owner is not None and key in self._object_attrs:
                kind = self._lookup(key)  # ``t.loss`` of ``t = State()``, set in this function
                if kind is not Kind.UNKNOWN:
                    return kind
        base_kind = self.kind(value)
        if type(value) is ast.Name and value.id == "self":
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
        if type(value) is ast.Call and self.imports.qualify(value.func) in ("torch.finfo", "torch.iinfo"):
            return Kind.NUMBER if attr not in ("dtype",) else Kind.OTHER
        q = self.imports.qualify(expr)
        if q and q.startswith("torch.") and q.split(".")[-1] in ("pi", "e", "inf", "nan"):
            return Kind.NUMBER
        if q and q.count(".") == 1 and q.startswith("torch.") and q.split(".")[1] in DTYPES:
            return Kind.OTHER  # ``torch.float16``: a dtype
        if q and q.startswith("math."):
            return Kind.NUMBER
        if attr in SHAPE_ATTRIBUTES and not self._is_imported_name(expr):
            # ``im0.shape`` of a value of unknown kind: a tensor's, a numpy array's or an image's
            # shape is a tuple of sizes (``torch.Size``), never a tensor.
            return SHAPE_ATTRIBUTES[attr]
        return Kind.UNKNOWN

    def _is_imported_name(self, expr: ast.expr) -> bool:
        """Is ``expr`` a module (or a name in one) bound by an import?"""
        root = expr
        while type(root) is ast.Attribute:
            root = root.value
        if type(root) is not ast.Name:
            return False
        scope = self.scope_of(root).lookup(root.id)
        return scope is not None and any(how == "import" for how, _ in scope.bindings[root.id])

    def _call_kind(self, call: ast.Call) -> Kind:
        func = call.func
        q = self.imports.qualify(func)
        if q is not None:
            root = q.split(".")[0]
            if root in ("numpy", "jax"):
                return Kind.NUMPY  # a host array (or a JAX array, which reads like one): not a tensor
            if q in NON_TENSOR_RESULTS:
                return Kind.NUMBER if NON_TENSOR_RESULTS[q] == "number" else Kind.OTHER
            if q in STDLIB_NUMBERS:
                return Kind.NUMBER
            if root in STDLIB_VALUE_MODULES and "." in q:
                return Kind.OTHER
            if q in WRAPPING_CALLS:
                arguments = call_arguments(call)
                wrapped = self.kind(argument_value(arguments[0])) if arguments else Kind.UNKNOWN
                if wrapped is Kind.PENDING:
                    return Kind.PENDING  # ``model = torch.compile(model)``: what ``model`` is, once known
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
            if q == "sum":
                return self._sum_kind(call)
            if q in ("float", "int", "bool", "len", "round", "abs", "math.sqrt", "math.log", "math.exp"):
                if q in ("abs", "round"):
                    arguments = call_arguments(call)
                    if arguments and self.kind(argument_value(arguments[0])) is Kind.TENSOR:
                        return Kind.TENSOR if q != "round" or len(arguments) == 1 else Kind.UNKNOWN
                return Kind.NUMBER
            if q in ("str", "repr", "list", "dict", "tuple", "set", "range", "enumerate", "zip", "sorted", "open", "print", "isinstance", "hasattr", "getattr"):
                return Kind.OTHER if q != "isinstance" and q != "hasattr" else Kind.NUMBER
            if q in ("max", "min") and (call.args or call.keywords):
                kinds = [self.kind(argument_value(a)) for a in call_arguments(call)]
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
            through = passed_through(local) if type(func) is ast.Name else None
            if through is not None and self._passed_tensor(call, *through):
                return Kind.TENSOR
        elif self.external is not None and (type(func) is ast.Name or type(func) is ast.Attribute):
            # A function or class another module of the project defines (``from .losses
            # import compute_loss``): what it returns there.
            found = self.external.call_kind(self, func)  # type: ignore[attr-defined]
            if found is not None:
                return found
            passes = self.external.passed_through(self, func)  # type: ignore[attr-defined]
            if passes is not None and self._passed_tensor(call, *passes):
                return Kind.TENSOR  # ``buf = reduce_sum(buf)``: what it is given, or a copy
        if self.kind(func) is Kind.MODULE:
            return Kind.TENSOR
        if type(func) is ast.Attribute:
            method = func.attr
            receiver = self.kind(func.value)
            if method in NON_TENSOR_ANY_METHODS:
                return NON_TENSOR_ANY_METHODS[method]
            if method == "format" and receiver is Kind.OTHER:
                return Kind.OTHER  # ``"{}".format(t)``: a string
            if is_text(func.value):
                # ``' '.join(parts)``, ``"a,b".split(",")``: a string's methods give strings and lists
                # of them, or a bool or a number (``startswith``, ``count``); never a tensor.
                return Kind.NUMBER if method in _TEXT_NUMBER_METHODS or method.startswith("is") else Kind.OTHER
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
            if receiver is Kind.UNKNOWN and method in SIZE_QUERY_METHODS:
                found = tensor_method_kind(call)
                if found in (Kind.NUMBER, Kind.OTHER):
                    return found  # ``ids.size(1) // seq_len``: a size, whatever ``ids`` is
            if receiver is Kind.UNKNOWN and method in TENSOR_ONLY_NAMES and method not in NON_TENSOR_METHODS and (
                tensor_method_kind(call) in (None, Kind.TENSOR)  # ``x.data_ptr()`` is a number
            ):
                if not self._is_imported_name(func.value):  # ``math.isfinite(x)`` is a function
                    return Kind.TENSOR
            return Kind.UNKNOWN
        callee = self.kind(func)
        if callee is Kind.MODULE:
            return Kind.TENSOR
        return Kind.UNKNOWN


# What a module may be asked without moving it.
_STAYING_MODULE_METHODS = frozenset({
    "eval", "train", "forward", "parameters", "named_parameters", "buffers", "named_buffers", "modules",
    "named_modules", "children", "state_dict", "zero_grad", "requires_grad_",
})


def copy_is_read(call: ast.Call, parents: Mapping[ast.AST, ast.AST]) -> bool:
    """``x.cpu().numpy()``, ``x.cpu().tolist()``, ``x.cpu().item()``: the copy's values are read,
    so ``x`` is a tensor (a module's ``cpu()`` gives the module, which has none of these)."""
    if call.args or call.keywords:
        return False
    attribute = parents.get(call)
    if type(attribute) is not ast.Attribute or attribute.attr not in ("numpy", "tolist", "item"):  # type: ignore[attr-defined]
        return False
    read = parents.get(attribute)
    return type(read) is ast.Call and read.func is attribute  # type: ignore[attr-defined]


def _type_tested_around(node: ast.AST, name: str, parents: Mapping[ast.AST, ast.AST]) -> bool:
    """Is ``node`` in a branch of an ``if`` (or a conditional expression) of its function whose
    test checks the type of ``name`` (``isinstance(name, ...)``, ``torch.is_tensor(name)``)?"""
    child, current = node, parents.get(node)
    while current is not None and not isinstance(current, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
        if type(current) in (ast.If, ast.IfExp) and child is not current.test:  # type: ignore[attr-defined]
            for call in _calls_in(current.test):  # type: ignore[attr-defined]
                callee = dotted_name(call.func) or ""
                if callee.rsplit(".", 1)[-1] in ("isinstance", "is_tensor") and call.args and \
                        type(call.args[0]) is ast.Name and call.args[0].id == name:  # type: ignore[attr-defined]
                    return True
        child, current = current, parents.get(current)
    return False


def _calls_in(expr: ast.AST) -> Iterator[ast.Call]:
    for node in ast.walk(expr):
        if type(node) is ast.Call:
            yield node  # type: ignore[misc]


def _equals_text(compare: ast.Compare) -> bool:
    """``mode == "edit"``: a Python bool, whatever ``mode`` is (a tensor compared with a
    string gives ``False``, or ``True`` for ``!=``, and reads nothing)."""
    return all(type(op) is ast.Eq or type(op) is ast.NotEq for op in compare.ops) and any(
        type(side) is ast.JoinedStr or type(side) is ast.Constant and type(side.value) in (str, bytes)
        for side in (compare.left, *compare.comparators))


def _spelling(name: ast.Name | ast.arg) -> str:
    """The name a ``Name`` reads, or the name of a parameter."""
    return name.id if type(name) is ast.Name else name.arg  # type: ignore[union-attr]


def _in_body(node: ast.AST, child: ast.AST) -> bool:
    """Is ``child`` (a child of the ``if`` / ``while`` / conditional expression ``node``, not
    its test) in its body rather than its ``else``?"""
    if type(node) is ast.IfExp:
        return child is node.body  # type: ignore[attr-defined]
    orelse = node.orelse  # type: ignore[attr-defined]
    if not orelse:
        return True
    number, first_else = number_of(child), number_of(orelse[0])
    if number is None or first_else is None:
        return any(item is child for item in node.body)  # type: ignore[attr-defined]
    return number < first_else


def _names_spelled_elsewhere(module: ast.Module) -> set[str]:
    """The names written in ``module`` other than as ``Name`` expressions: attribute names,
    keywords, imported names, defined names, parameters, ``global`` names (libcst spelled
    each of them with a ``Name`` node)."""
    found: set[str] = set()
    for node in nodes_within(module, ast.Attribute, ast.keyword, ast.alias, ast.FunctionDef, ast.AsyncFunctionDef,
                             ast.ClassDef, ast.arg, ast.Global, ast.Nonlocal, ast.ExceptHandler, ast.ImportFrom):
        t = type(node)
        if t is ast.Attribute:
            found.add(node.attr)  # type: ignore[attr-defined]
        elif t is ast.keyword:
            if node.arg is not None:  # type: ignore[attr-defined]
                found.add(node.arg)  # type: ignore[attr-defined]
        elif t is ast.alias:
            found.update(node.name.split("."))  # type: ignore[attr-defined]
            if node.asname is not None:  # type: ignore[attr-defined]
                found.add(node.asname)  # type: ignore[attr-defined]
        elif t in (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef):
            found.add(node.name)  # type: ignore[attr-defined]
        elif t is ast.arg:
            found.add(node.arg)  # type: ignore[attr-defined]
        elif t in (ast.Global, ast.Nonlocal):
            found.update(node.names)  # type: ignore[attr-defined]
        elif t is ast.ExceptHandler:
            if node.name is not None:  # type: ignore[attr-defined]
                found.add(node.name)  # type: ignore[attr-defined]
        elif t is ast.ImportFrom and node.module is not None:  # type: ignore[attr-defined]
            found.update(node.module.split("."))  # type: ignore[attr-defined]
    return found


def _names_cpu(expr: ast.expr) -> bool:
    """``"cpu"`` or ``torch.device("cpu")``."""
    if type(expr) is ast.Constant:
        return type(expr.value) is str and expr.value == "cpu"
    if type(expr) is ast.Call and (dotted_name(expr.func) or "").split(".")[-1] == "device" and (expr.args or expr.keywords):
        first = argument_value(call_arguments(expr)[0])
        return type(first) is ast.Constant and type(first.value) is str and first.value == "cpu"
    return False


def module_class_of(provenance: Provenance, func: ast.expr) -> str | None:
    """The class a called module was built from (``self.fc`` -> ``torch.nn.Linear``),
    or the module's own dotted name when fixitem cannot tell."""
    if provenance.kind(func) is not Kind.MODULE:
        return None
    values: list[ast.expr] = []
    if type(func) is ast.Attribute and type(func.value) is ast.Name and func.value.id == "self":
        cls = provenance.enclosing_class(func)
        if cls is not None:
            values = provenance.class_attrs.get(cls, {}).get(func.attr, [])
    elif type(func) is ast.Name:
        scope = provenance.scope_of(func).lookup(func.id)
        if scope is not None:
            values = [node for how, node in scope.bindings.get(func.id, []) if how == "value" and isinstance(node, ast.expr)]
    classes = set()
    for value in values:
        if type(value) is ast.Call:
            q = provenance.imports.qualify(value.func)
            if is_module_class(q, provenance.module_classes):
                classes.add(q)
    if len(classes) == 1:
        return classes.pop()
    return dotted_name(func)


def _is_text(expr: ast.expr) -> bool:
    t = type(expr)
    return (t is ast.Constant and type(expr.value) in (str, bytes)) or t is ast.JoinedStr  # type: ignore[attr-defined]


def made_from_text(expr: ast.expr) -> bool:
    """Is ``expr`` made from a string literal by string operations (``"%d" % n``, ``' ' * 8``,
    ``"a" + s``, ``' '.join(parts)``, ``"a,b".split(",")``)? A string, strings, a bool or a number
    then: never a tensor."""
    if type(expr) is ast.BinOp:
        op = type(expr.op)  # type: ignore[attr-defined]
        return (op is ast.Mod and is_text(expr.left)) or (  # type: ignore[attr-defined]
            op in (ast.Add, ast.Mult) and (is_text(expr.left) or is_text(expr.right)))  # type: ignore[attr-defined]
    return type(expr) is ast.Call and type(expr.func) is ast.Attribute and is_text(expr.func.value)  # type: ignore[attr-defined]


def is_text(expr: ast.expr) -> bool:
    """A string by its syntax: a literal, or one repeated or joined (``"%g " * 3``, ``"a" + s``,
    ``"%11s" * 2 + "%11.4g" * 5``)."""
    while True:
        if _is_text(expr):
            return True
        if type(expr) is not ast.BinOp or type(expr.op) not in (ast.Mult, ast.Add):  # type: ignore[attr-defined]
            return False
        if is_text(expr.left):  # type: ignore[attr-defined]
            return True
        if type(expr.op) is ast.Add:  # type: ignore[attr-defined]
            return False  # ``s + "a"``: ``s`` may be a list
        expr = expr.right  # type: ignore[attr-defined]  # ``3 * "%g "``


def _stub_body(func: ast.FunctionDef) -> bool:
    """A body of only a docstring, ``pass``, ``...`` and ``raise``: a method left to subclasses."""
    for statement in func.body:
        t = type(statement)
        if t is ast.Pass or t is ast.Raise:
            continue
        if t is ast.Expr and type(statement.value) is ast.Constant and (  # type: ignore[attr-defined]
                statement.value.value is Ellipsis or type(statement.value.value) in (str, bytes)):  # type: ignore[attr-defined]
            continue
        return False
    return True


def transparent(decorator: ast.expr, imports: Imports,
                local_function: Callable[[ast.Name], ast.AST | None], known: dict[int, bool] | None = None) -> bool:
    """Does a function decorated with ``decorator`` still return what its body returns? A known
    decorator (``lru_cache``, ``torch.no_grad``), or a function of the module (``local_function``
    finds it: the one the module's analysis reads) that gives back the function it is given.
    ``known``: the answers for the module's functions so far, by ``id`` (transformers'
    ``import_utils.py`` decorates 150 functions with one of its own)."""
    target = decorator.func if type(decorator) is ast.Call else decorator  # type: ignore[attr-defined]
    if (imports.qualify(target) or "") in TRANSPARENT_DECORATORS:
        return True
    local = local_function(decorator) if type(decorator) is ast.Name else None  # type: ignore[arg-type]
    if local is None:
        return False
    if known is None:
        return returns_its_argument(local)
    found = known.get(id(local))
    if found is None:
        found = known[id(local)] = returns_its_argument(local)
    return found


def returns_its_argument(func: ast.AST) -> bool:
    """A decorator that gives back the function it is given (``def mark(fn): fn.flag = True;
    return fn``): every ``return`` of its body returns its first parameter, never rebound.
    What the decorated function returns is then what its own body returns."""
    if type(func) is not ast.FunctionDef:
        return False
    first = _first_param(func)  # type: ignore[arg-type]
    return first is not None and _gives_back(func, first, lambda assign: False)


def passed_through(func: ast.AST) -> tuple[int, str] | None:
    """The positional parameter (its place, its name) every ``return`` of ``func`` gives back:
    itself, or a copy a tensor method made of it (stylegan2's ``def reduce_sum(tensor)``, which
    returns ``tensor`` or ``tensor.clone()`` summed over processes in place). Called with a
    tensor, such a function returns a tensor; with anything else, nothing is known."""
    if type(func) is not ast.FunctionDef or func.decorator_list:
        return None
    params = [*func.args.posonlyargs, *func.args.args]  # type: ignore[attr-defined]
    last = func.body[-1]  # type: ignore[attr-defined]
    if not (type(last) is ast.Return and type(last.value) is ast.Name):
        return None  # (decided without a walk for almost every function: every module summarised asks)
    name = last.value.id  # type: ignore[attr-defined]
    place = next((i for i, p in enumerate(params) if p.arg == name), None)

    def copies_it(assign: ast.Assign) -> bool:  # ``tensor = tensor.clone()``: a tensor of a tensor
        value = assign.value
        return (type(value) is ast.Call and type(value.func) is ast.Attribute and type(value.func.value) is ast.Name
                and value.func.value.id == name and tensor_method_kind(value) is Kind.TENSOR)  # type: ignore[attr-defined]

    return (place, name) if place is not None and _gives_back(func, params[place], copies_it) else None


def _gives_back(func: ast.FunctionDef, param: ast.arg, may_rebind: Callable[[ast.Assign], bool]) -> bool:
    """Does every ``return`` of ``func``'s own body (not its nested functions') give back
    ``param``, rebound only by assignments ``may_rebind`` accepts? Not where the function is
    a generator or a coroutine, or declares a name ``global``."""
    name = param.arg
    returns = 0
    nodes: list[ast.AST] = list(func.body)
    while nodes:
        node = nodes.pop()
        t = type(node)
        if t in (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda):
            continue  # a nested scope's ``return`` is not this function's
        if t is ast.Return:
            value = node.value  # type: ignore[attr-defined]
            if not (type(value) is ast.Name and value.id == name):
                return False
            returns += 1
        elif t in (ast.Yield, ast.YieldFrom, ast.Await, ast.Global, ast.Nonlocal):
            return False
        elif t is ast.Assign and may_rebind(node):  # type: ignore[arg-type]
            # The name as a target of this assignment is a rebinding allowed: not a store refused.
            nodes.append(node.value)  # type: ignore[attr-defined]
            nodes.extend(tg for tg in node.targets if not (type(tg) is ast.Name and tg.id == name))  # type: ignore[attr-defined]
            continue
        elif t is ast.Name and node.id == name and type(node.ctx) is not ast.Load:  # type: ignore[attr-defined]
            return False
        nodes.extend(ast.iter_child_nodes(node))
    return returns > 0


# ``torch.unique`` and ``torch.unique_consecutive`` are Python functions made by
# ``boolean_dispatch`` (``torch/functional.py``), with no annotation the stubs reader can use:
# a hand-written fact. With ``return_inverse=True`` or ``return_counts=True`` they give a
# tuple of tensors (regnet's ``widths, depths = torch.unique(t, return_counts=True)``).
_UNIQUE_FUNCTIONS = frozenset({"torch.unique", "torch.unique_consecutive"})


def _unique_with_extras(call: ast.Call) -> bool:
    return any(k.arg in ("return_inverse", "return_counts") and type(k.value) is ast.Constant
               and k.value.value is True for k in call.keywords)  # type: ignore[attr-defined]


def _is_none(node: object) -> bool:
    return type(node) is ast.Constant and node.value is None  # type: ignore[attr-defined]


# Classes an ``isinstance`` test names that only tensors are instances of.
TENSOR_CLASSES = frozenset({"torch.Tensor", "Tensor", "torch.nn.Parameter", "torch.nn.parameter.Parameter"})
# The key suffix of a name's kind where a test proved it is not ``None``.
NOT_NONE = "#not-none"


def _first_param(func: ast.FunctionDef) -> ast.arg | None:
    params = func.args.posonlyargs + func.args.args
    return params[0] if params else None


def all_params(params: ast.arguments) -> list[ast.arg]:
    """Every parameter: positional-only, positional, keyword-only, then ``*args`` and ``**kwargs``."""
    found = list(params.posonlyargs) + list(params.args) + list(params.kwonlyargs)
    if params.vararg is not None:
        found.append(params.vararg)
    if params.kwarg is not None:
        found.append(params.kwarg)
    return found


def param_default(func_args: ast.arguments, arg: ast.arg) -> ast.expr | None:
    """The default value of the parameter ``arg`` of ``func_args`` (libcst's ``Param.default``):
    ``defaults`` right-aligns with the positional parameters, ``kw_defaults[i]`` goes with
    ``kwonlyargs[i]``; None where it has none (and for ``*args`` / ``**kwargs``)."""
    positional = func_args.posonlyargs + func_args.args
    for i, param in enumerate(positional):
        if param is arg:
            j = i - (len(positional) - len(func_args.defaults))
            return func_args.defaults[j] if j >= 0 else None
    for param, default in zip(func_args.kwonlyargs, func_args.kw_defaults):
        if param is arg:
            return default
    return None


# What ``_fill_scope`` looks at (checked by exact type first: a set lookup of the type
# is cheaper than a chain of tests on every node).
_BINDING_NODES = frozenset({
    ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef, *COMPREHENSIONS, ast.Assign, ast.AnnAssign,
    ast.AugAssign, ast.NamedExpr, ast.For, ast.AsyncFor, ast.withitem, ast.Import, ast.ImportFrom,
    ast.ExceptHandler, ast.Global, ast.Nonlocal, ast.Call, ast.Attribute, ast.Slice, ast.Compare,
    ast.If, ast.While, ast.IfExp,
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


def _size_names(expr: ast.expr) -> set[str]:
    """The names an expression used as a size is computed from (``H * W`` -> H, W)."""
    t = type(expr)
    if t is ast.Name:
        return {expr.id}  # type: ignore[attr-defined]
    if t is ast.BinOp:
        return _size_names(expr.left) | _size_names(expr.right)  # type: ignore[attr-defined]
    if t is ast.UnaryOp:
        return _size_names(expr.operand)  # type: ignore[attr-defined]
    if t is ast.Tuple or t is ast.List:
        found: set[str] = set()
        for element in expr.elts:  # type: ignore[attr-defined]
            if type(element) is not ast.Starred:
                found |= _size_names(element)
        return found
    return set()


def _size_names_of_call(call: ast.Call, imports: Imports) -> set[str]:
    found: set[str] = set()
    for keyword in call.keywords:
        if keyword.arg is not None and keyword.arg in SIZE_KEYWORDS:
            found |= _size_names(keyword.value)
    positional = [a for a in call.args if type(a) is not ast.Starred]
    func = call.func
    q = imports.qualify(func) or ""
    if q == "range":
        sizes = positional
    elif q.startswith("torch.") and q.count(".") == 1:
        name = q.split(".")[1]
        sizes = positional[1:] if name in SIZE_AFTER_FIRST else positional if name in SIZE_ALL else []
        if name == "full" and positional:
            sizes = positional[:1]
    elif type(func) is ast.Attribute and func.attr in SIZE_METHODS and not (
        type(func.value) is ast.Name and (func.value.id in ("self", "cls") or func.value.id in imports.aliases)
    ):
        sizes = positional
    else:
        sizes = []
    for value in sizes:
        found |= _size_names(value)
    return found


def _is_shape_query(expr: ast.expr) -> bool:
    """``x.shape[1]``, ``x.size(1)``, ``len(x)``, ``x.numel()``: a size read from a tensor's header."""
    if type(expr) is ast.Subscript:
        expr = expr.value  # type: ignore[attr-defined]
    t = type(expr)
    if t is ast.Attribute:
        return expr.attr in ("shape", "ndim")  # type: ignore[attr-defined]
    if t is ast.Call:
        func = expr.func  # type: ignore[attr-defined]
        if type(func) is ast.Attribute:
            return func.attr in ("size", "numel", "dim")
        return type(func) is ast.Name and func.id == "len"
    return False


def _evaluated_outside(owner: ast.AST, child: ast.AST, below: ast.AST | None) -> bool:
    """Is ``child`` of the scope node ``owner`` (``below``: the child of ``child`` on the way
    up) evaluated in the enclosing scope? Decorators, a return annotation and a class's bases
    are; a function's parameters (their annotations and default values included, as libcst's
    ``Parameters`` were) and its statements are its own. The first iterable of a
    comprehension is evaluated outside it."""
    if type(owner) in _DEFINITIONS and not isinstance(child, ast.stmt) and type(child) is not ast.arguments:
        return True
    return type(child) is ast.comprehension and below is not None and below is child.iter and \
        child is owner.generators[0]  # type: ignore[attr-defined]


# Containers whose text shows their elements' (a generator's shows none of them).
_SHOWN_CONTAINERS = (ast.List, ast.Tuple, ast.Set, ast.Dict, ast.ListComp, ast.SetComp, ast.DictComp)
_NESTED_SCOPES = frozenset({ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda})
_COMPREHENSION_TYPES = frozenset(COMPREHENSIONS)


def _scope_nodes(body: object) -> list[ast.AST]:
    """The nodes of one scope that :meth:`Provenance._fill_scope` looks at (those of
    ``_BINDING_NODES``), in source order; nested scopes are listed, not entered (their
    decorators, and a comprehension's first iterable, are this scope's)."""
    number_of_id, order, stops = tables()
    found: list[ast.AST] = []
    wanted = _BINDING_NODES
    nested = _NESTED_SCOPES
    comprehensions = _COMPREHENSION_TYPES
    for root in [body] if isinstance(body, ast.AST) else list(body):  # type: ignore[call-overload]
        number = number_of_id.get(id(root))
        if number is None or order[number] is not root:  # code built after the file was indexed
            found.extend(n for n in _scope_nodes_below(root) if type(n) in wanted)
            continue
        # Source order is depth-first, so a subtree is a run of numbers: skip nested
        # scopes by jumping to the end of theirs.
        stop = stops[number]
        while number < stop:
            node = order[number]
            kind = type(node)
            if kind in wanted:
                found.append(node)
                if kind in nested:
                    # Decorators are evaluated in this scope (the parameters' defaults and
                    # annotations, a class's bases, are looked at by neither scope).
                    if kind is not ast.Lambda and node.decorator_list:  # type: ignore[attr-defined]
                        found.extend(_scope_nodes(node.decorator_list))  # type: ignore[attr-defined]
                    number = stops[number]
                    continue
                if kind in comprehensions:
                    found.extend(_scope_nodes(node.generators[0].iter))  # type: ignore[attr-defined]
                    number = stops[number]
                    continue
            number += 1
    return found


def _scope_nodes_below(root: ast.AST) -> Iterator[ast.AST]:
    """The nodes of one scope below ``root``, for a tree that was not indexed."""
    nodes: list[ast.AST] = [root]
    while nodes:
        node = nodes.pop()
        yield node
        if type(node) in _NESTED_SCOPES:
            if type(node) is not ast.Lambda:
                nodes.extend(reversed(node.decorator_list))  # type: ignore[attr-defined]
        elif type(node) in _COMPREHENSION_TYPES:
            nodes.append(node.generators[0].iter)  # type: ignore[attr-defined]
        else:
            nodes.extend(reversed(children_of(node)))
