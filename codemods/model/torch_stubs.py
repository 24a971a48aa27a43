"""Return kinds of torch's own APIs, read from the type stubs of the installed torch.

torch ships ``.pyi`` stubs for its C++ functions and the ``Tensor`` methods
(``torch/_C/__init__.pyi``: ``def storage_offset(self) -> _int | SymInt``,
``def dim(self) -> _int``, ``def item(self) -> Number``; ``torch/_C/_VariableFunctions.pyi``:
the ``torch.*`` functions with their overloads; ``torch/nn/functional.pyi``), and
annotated Python code for the rest (``torch/_tensor.py``, ``torch/functional.py``).
Reading them with :mod:`ast` gives what every one of these APIs returns, as one
of :data:`KINDS`. The table is built once per installed torch (keyed by its
version and the stubs' sizes and modification times) and kept as a small JSON
file under the user's cache folder; a cache folder that is missing or read-only
only means the table is built again in memory.

torch is never imported: its files are found with ``importlib.util.find_spec``.
"""

from __future__ import annotations

import ast
import hashlib
import importlib.util
import json
import os
from dataclasses import dataclass
from pathlib import Path

FORMAT = "3"  # bump when the table's shape or the reading rules change

# What a call returns.
TENSOR = "tensor"
INT = "int"
FLOAT = "float"
BOOL = "bool"
NUMBER = "number"  # a Python number of a type the stubs leave open (``Number``: int, float or bool)
LIST = "list"  # a list of Python values (``tolist()``)
TENSORS = "tensors"  # a tuple or list of tensors (``split``, ``unbind``, ``torch.return_types.max``)
NONE = "none"
NUMPY = "numpy"  # a numpy array (``numpy()``)
OTHER = "other"  # a known type that is none of the above: a ``Size``, a ``device``, a string, a storage...
UNKNOWN = "unknown"  # not said (``Any``, a type variable) or not understood
KINDS = (TENSOR, INT, FLOAT, BOOL, NUMBER, LIST, TENSORS, NONE, NUMPY, OTHER, UNKNOWN)
NUMBERS = frozenset({INT, FLOAT, BOOL, NUMBER})

# The stub files, relative to torch's folder, and the namespace their functions live in.
FUNCTION_FILES = (
    ("_C/_VariableFunctions.pyi", "torch"),
    ("__init__.py", "torch"),  # torch.is_tensor, torch.set_default_device...: Python, annotated
    ("functional.py", "torch"),  # torch.split, torch.norm, torch.einsum...: Python, annotated
    ("nn/functional.pyi", "torch.nn.functional"),
    ("_C/_nn.pyi", "torch._C._nn"),  # what torch.nn.functional re-exports (``pad``, ``gelu``, ``linear``)
)
TENSOR_FILES = ("_C/__init__.pyi", "_tensor.py")  # TensorBase, then the Python-level Tensor over it
TENSOR_CLASSES = frozenset({"TensorBase", "Tensor"})

# Names of types, by what they are.
_TENSOR_TYPES = frozenset({"Tensor", "TensorBase", "Self", "Parameter"})
_INT_TYPES = frozenset({"int", "_int", "SymInt", "IntLikeType"})
_FLOAT_TYPES = frozenset({"float", "_float", "SymFloat"})
_BOOL_TYPES = frozenset({"bool", "_bool", "SymBool", "TypeIs", "TypeGuard", "_TypeIs", "_TypeGuard"})
_NUMBER_TYPES = frozenset({"Number", "_complex", "complex", "Scalar", "_number"})
_SEQUENCES = frozenset({"tuple", "Tuple", "list", "List", "Sequence", "_Sequence"})
_UNKNOWN_TYPES = frozenset({"Any", "_Any", "T", "S", "R", "T_co", "object"})


@dataclass(frozen=True)
class Overload:
    kind: str  # one of KINDS, or a union "a|b" (sorted)
    required: int  # positional arguments it needs (``self`` not counted)
    most: int | None  # positional arguments it takes at most (None: ``*args``)
    keywords: frozenset[str]  # names it takes by keyword


def _short(node: ast.expr) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return ""


def annotation_kind(node: ast.expr | None) -> str:
    """The kind of a return annotation (a union stays a union: ``"int|none"``)."""
    if node is None:
        return UNKNOWN
    if isinstance(node, ast.Constant):
        if node.value is None:
            return NONE
        if isinstance(node.value, str):  # ``-> "Tensor"``
            try:
                return annotation_kind(ast.parse(node.value, mode="eval").body)
            except SyntaxError:
                return UNKNOWN
        return UNKNOWN
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return union([annotation_kind(node.left), annotation_kind(node.right)])
    if isinstance(node, ast.Subscript):
        base = _short(node.value)
        args = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        if base in ("Union",):
            return union([annotation_kind(a) for a in args])
        if base == "Optional":
            return union([annotation_kind(args[0]), NONE])
        if base in _BOOL_TYPES:
            return BOOL
        if base in _SEQUENCES:
            items = [a for a in args if not (isinstance(a, ast.Constant) and a.value is Ellipsis)]
            if items and all(annotation_kind(a) == TENSOR for a in items):
                return TENSORS
            return LIST if base in ("list", "List") else OTHER
        return OTHER if base else UNKNOWN
    name = _short(node)
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Attribute) and node.value.attr == "return_types":
        return TENSORS  # ``torch.return_types.max``: a named tuple of tensors
    if name in _TENSOR_TYPES:
        return TENSOR
    if name in _INT_TYPES:
        return INT
    if name in _FLOAT_TYPES:
        return FLOAT
    if name in _BOOL_TYPES:
        return BOOL
    if name in _NUMBER_TYPES:
        return NUMBER
    if name in ("list", "List"):
        return LIST
    if name == "ndarray":
        return NUMPY
    if name in ("None", "NoReturn", "Never"):
        return NONE
    if not name or name in _UNKNOWN_TYPES:
        return UNKNOWN
    return OTHER  # Size, device, dtype, str, Generator, storages...


def union(kinds) -> str:
    parts: set[str] = set()
    for kind in kinds:
        parts.update(kind.split("|"))
    if UNKNOWN in parts:
        return UNKNOWN
    return "|".join(sorted(parts))


def _overload(function: ast.FunctionDef, method: bool) -> Overload:
    arguments = function.args
    positional = list(arguments.posonlyargs) + list(arguments.args)
    defaults = len(arguments.defaults)
    if method and positional:
        positional = positional[1:]  # self
    required = max(0, len(positional) - defaults)
    most = None if arguments.vararg is not None else len(positional)
    # A parameter typed ``None`` takes only None (``size(self, dim: None = None) -> Size``
    # beside ``size(self, dim: _int) -> _int``): a call passing another value there is
    # another overload's. (Callers say when they pass a literal None.)
    takes_none = {a.arg for a in list(arguments.args) + list(arguments.kwonlyargs) if _is_none(a.annotation)}
    for index, argument in enumerate(positional):
        if argument.arg in takes_none:
            most = index
            break
    keywords = frozenset(a.arg for a in list(arguments.args) + list(arguments.kwonlyargs) if a.arg not in takes_none)
    if arguments.kwarg is not None:
        keywords = keywords | {"**"}
    return Overload(annotation_kind(function.returns), required, most, keywords)


def _is_none(annotation: ast.expr | None) -> bool:
    return isinstance(annotation, ast.Constant) and annotation.value is None


def _is_property(function: ast.FunctionDef) -> bool:
    return any(_short(d) in ("property", "_property") for d in function.decorator_list)


def _read_functions(tree: ast.Module, into: dict[str, list[Overload]], prefix: str, public: set[str] | None,
                    aliases: dict[str, str]) -> None:
    for statement in tree.body:
        if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if public is not None and statement.name not in public:
                continue
            into.setdefault(f"{prefix}.{statement.name}", []).append(_overload(statement, method=False))
        elif isinstance(statement, ast.ImportFrom) and statement.module and statement.module.startswith("torch") and (
            prefix.endswith(".functional") and statement.level == 0
        ):
            # ``from torch._C._nn import log_sigmoid as logsigmoid`` in a stub: a re-export.
            for alias in statement.names:
                aliases[f"{prefix}.{alias.asname or alias.name}"] = f"{statement.module}.{alias.name}"


def _all_names(tree: ast.Module) -> set[str] | None:
    """The names of ``__all__ = [...]`` and ``__all__ += [...]`` (None without them)."""
    found: set[str] | None = None
    for statement in tree.body:
        targets = statement.targets if isinstance(statement, ast.Assign) else (
            [statement.target] if isinstance(statement, ast.AugAssign) else []
        )
        value = getattr(statement, "value", None)
        if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets) and isinstance(value, (ast.List, ast.Tuple)):
            found = (found or set()) | {
                e.value for e in value.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)
            }
    return found


def _read_tensor_class(cls: ast.ClassDef, methods: dict[str, list[Overload]], attributes: dict[str, str]) -> None:
    """One class's methods (overloads together) and attributes; an unannotated Python
    method keeps what the stub of the method it overrides says."""
    found: dict[str, list[Overload]] = {}
    for statement in cls.body:
        if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if _is_property(statement):
                attributes[statement.name] = annotation_kind(statement.returns)
                continue
            if any(isinstance(d, ast.Attribute) and d.attr in ("setter", "deleter") for d in statement.decorator_list):
                continue
            found.setdefault(statement.name, []).append(_overload(statement, method=True))
        elif isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name):
            attributes[statement.target.id] = annotation_kind(statement.annotation)
    for name, overloads in found.items():
        if all(o.kind == UNKNOWN for o in overloads) and name in methods:
            continue  # ``Tensor.split(self, split_size, dim=0)`` in _tensor.py: TensorBase's stub says it
        methods[name] = overloads


def torch_folder() -> Path | None:
    """The installed torch's folder, found without importing torch."""
    try:
        spec = importlib.util.find_spec("torch")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def _version(folder: Path) -> str:
    try:
        text = (folder / "version.py").read_text(encoding="utf-8")
    except OSError:
        return "?"
    for line in text.splitlines():
        if line.startswith("__version__"):
            return line.split("=", 1)[1].strip().strip("'\"")
    return "?"


def _sources(folder: Path) -> list[Path]:
    return [folder / f for f, _ in FUNCTION_FILES] + [folder / f for f in TENSOR_FILES]


def _key(folder: Path) -> str:
    parts = [FORMAT, str(folder), _version(folder)]
    for path in _sources(folder):
        try:
            stat = path.stat()
            parts.append(f"{path.name}:{stat.st_size}:{stat.st_mtime_ns}")
        except OSError:
            parts.append(f"{path.name}:-")
    return "|".join(parts)


@dataclass
class StubTable:
    """What torch's APIs return: ``functions`` by qualified name (``torch.zeros``,
    ``torch.nn.functional.relu``), ``methods`` and ``attributes`` of ``Tensor``.

    A table read from the cache holds each name's overloads as the JSON gave them until the
    name is first asked about (:func:`_overloads`): a run asks about a few dozen of 1,800."""

    version: str
    functions: dict[str, list[Overload]]
    methods: dict[str, list[Overload]]
    attributes: dict[str, str]

    def function_kind(self, qualified: str, positional: int | None = None, keywords: frozenset[str] = frozenset()) -> str | None:
        """What ``qualified`` returns (None when the stubs do not know it); with the call's
        number of positional arguments and its keywords, only the overloads that accept
        them count."""
        return _resolve(_overloads(self.functions, qualified), positional, keywords)

    def method_kind(self, name: str, positional: int | None = None, keywords: frozenset[str] = frozenset()) -> str | None:
        """What ``Tensor.name`` returns (None when the stubs do not know it)."""
        return _resolve(_overloads(self.methods, name), positional, keywords)

    def attribute_kind(self, name: str) -> str | None:
        return self.attributes.get(name)

    def __len__(self) -> int:
        return len(self.functions) + len(self.methods) + len(self.attributes)

    def to_json(self) -> dict:
        def overloads(table: dict[str, list[Overload]]) -> dict:
            # Where the overloads agree, the kind alone (most names): a small file, read fast.
            return {
                name: items[0].kind if len({o.kind for o in items}) == 1 else
                [[o.kind, o.required, o.most, sorted(o.keywords)] for o in items]
                for name, items in sorted((name, _overloads(table, name)) for name in table)
            }

        return {"version": self.version, "functions": overloads(self.functions), "methods": overloads(self.methods),
                "attributes": dict(sorted(self.attributes.items()))}

    @classmethod
    def from_json(cls, data: dict) -> StubTable:
        return cls(data["version"], dict(data["functions"]), dict(data["methods"]), dict(data["attributes"]))


def _overloads(table: dict, name: str) -> list[Overload] | None:
    """The overloads of ``name`` in ``table``, made from their JSON the first time they are
    asked for: the kind alone (overloads that agree) or ``[kind, required, most, keywords]``
    each."""
    found = table.get(name)
    if found is None or (type(found) is list and found and type(found[0]) is Overload):
        return found
    if type(found) is str:
        made = [Overload(found, 0, None, frozenset({"**"}))]
    else:
        made = [Overload(k, r, m, frozenset(w)) for k, r, m, w in found]
    table[name] = made
    return made


def _accepts(overload: Overload, positional: int, keywords: frozenset[str]) -> bool:
    if positional < overload.required and not keywords:
        return False
    if overload.most is not None and positional > overload.most:
        return False
    return "**" in overload.keywords or keywords <= overload.keywords


def _resolve(overloads: list[Overload] | None, positional: int | None, keywords: frozenset[str]) -> str | None:
    if not overloads:
        return None
    if positional is not None:
        fitting = [o for o in overloads if _accepts(o, positional, keywords)]
        if fitting:
            overloads = fitting
    return union(o.kind for o in overloads)


def build(folder: Path) -> StubTable:
    """Read the stubs under ``folder`` (torch's own folder)."""
    functions: dict[str, list[Overload]] = {}
    methods: dict[str, list[Overload]] = {}
    attributes: dict[str, str] = {}
    python_level: dict[str, list[Overload]] = {}
    aliases: dict[str, str] = {}
    for relative, prefix in FUNCTION_FILES:
        tree = _parse(folder / relative)
        if tree is None:
            continue
        if relative.endswith(".py"):
            # Python functions that replace the C++ ones of the same name (``torch.split``);
            # an unannotated one keeps what the C++ stub says.
            _read_functions(tree, python_level, prefix, _all_names(tree), aliases)
        else:
            _read_functions(tree, functions, prefix, None, aliases)
    for name, overloads in python_level.items():
        if all(o.kind == UNKNOWN for o in overloads) and name in functions:
            continue
        functions[name] = overloads
    for name, target in aliases.items():
        if name not in functions and target in functions:
            functions[name] = functions[target]
    for name in [n for n in functions if n.startswith("torch._C.")]:
        del functions[name]  # read only for the re-exports
    for relative in TENSOR_FILES:
        tree = _parse(folder / relative)
        if tree is None:
            continue
        for statement in tree.body:
            if isinstance(statement, ast.ClassDef) and statement.name in TENSOR_CLASSES:
                _read_tensor_class(statement, methods, attributes)
    return StubTable(_version(folder), functions, methods, attributes)


def _parse(path: Path) -> ast.Module | None:
    try:
        return ast.parse(path.read_bytes(), filename=str(path))
    except (OSError, SyntaxError, ValueError):
        return None


def cache_folder() -> Path:
    """``$FIXITEM_STUBS_CACHE_DIR``, else ``fixitem`` under ``$XDG_CACHE_HOME`` or ``~/.cache``."""
    configured = os.environ.get("FIXITEM_STUBS_CACHE_DIR", "").strip()
    if configured:
        return Path(configured)
    base = os.environ.get("XDG_CACHE_HOME", "").strip() or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "fixitem"


def load(folder: Path | None = None, cache: Path | None = None) -> StubTable:
    """The table for the torch in ``folder`` (the installed one by default), from the cache
    when it holds the table for these very stub files, else built and stored."""
    folder = folder if folder is not None else torch_folder()
    if folder is None:
        return StubTable("", {}, {}, {})
    # Not turned off with the per-file results (``FIXITEM_NO_CACHE``): the table is a function
    # of the stub files alone, and its key names them exactly.
    key = _key(folder)
    # One file per torch installation: environments with different torch builds share the folder.
    name = f"torch-stubs-{_version(folder)}-{hashlib.sha256(key.encode()).hexdigest()[:16]}.json"
    path = (cache if cache is not None else cache_folder()) / name
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if data.get("key") == key:
            return StubTable.from_json(data["table"])
    except (OSError, ValueError, KeyError, TypeError):
        pass
    table = build(folder)
    _store(path, {"key": key, "table": table.to_json()})
    return table


def _store(path: Path, data: dict) -> None:
    """Write atomically; a folder that cannot be written is left alone."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        import tempfile  # (only when the table is built: not at each start)

        handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=".torch-stubs-", suffix=".tmp")
        try:
            with os.fdopen(handle, "w", encoding="utf-8") as out:
                json.dump(data, out, separators=(",", ":"))
            os.replace(temporary, path)
        except BaseException:
            try:
                os.unlink(temporary)
            except OSError:
                pass
            raise
    except OSError:
        pass


def fingerprint() -> str:
    """What the table read depends on (torch's folder, version and stub files): results
    computed with the table are kept under it."""
    folder = torch_folder()
    return _key(folder) if folder is not None else ""


_table: StubTable | None = None


def table() -> StubTable:
    """The installed torch's table, loaded once per process."""
    global _table
    if _table is None:
        _table = load()
    return _table
