"""What an output call is: the one definition every rule asks.

An *output call* writes something the user reads or collects, and does
nothing else a program depends on:

* ``print(...)``, ``tqdm.write(...)``, ``sys.stdout.write(...)``, Accelerate's
  ``accelerator.print(...)`` (:attr:`OutputKind.PRINT`);
* ``logging.info(...)`` and the other functions of ``logging`` (or absl's) (:attr:`OutputKind.LOGGING`);
* logger methods: ``logger.info(...)``, ``self.log.warning(...)``,
  ``logging.getLogger(__name__).debug(...)``, and Hugging Face's
  ``logger.warning_once`` / ``logger.info_once``                (:attr:`OutputKind.LOGGER`);
* metric writers: ``writer.add_scalar(s)``, ``wandb.log``, ``log_metrics`` (:attr:`OutputKind.METRICS`);
* progress bars: ``pbar.set_postfix(...)`` / ``set_description(...)`` (:attr:`OutputKind.PROGRESS`);
* ``warnings.warn(...)``                                       (:attr:`OutputKind.WARNING`);
* a function of the same file whose body only makes such calls, under
  conditions on values that do not change while the program runs
  (``def print0(s): if master_process: print(s)``)              (:attr:`OutputKind.WRAPPER`).

A logger is recognised by the name it is bound to (``logger``, ``log``,
``_LOGGER``, ``train_logger``: the last component ends in ``log`` or
``logger``), by ``logging.getLogger(...)`` / ``get_logger(...)`` called on the
spot, or by ``logging`` itself. A name says what a call is for, not what the
object does: :func:`logger_origin` tells whether the code shows that such a
receiver is a ``logging`` logger (or loguru's), which is what deferring its
calls relies on. :func:`stable_receiver` tells whether the object a method is
called on is certainly the same object later (an imported module, a name bound
once): otherwise a deferred call must take the object of the moment.
"""

from __future__ import annotations

import collections
import enum
from dataclasses import dataclass
from typing import TYPE_CHECKING

import libcst as cst

from .provenance import dotted_name

if TYPE_CHECKING:
    from .context import FileContext

LOG_METHODS = frozenset({"debug", "info", "warning", "warn", "error", "critical", "exception", "log"})
# Hugging Face's helpers (``transformers.utils.logging``): log each distinct message once.
LOG_ONCE_METHODS = frozenset({"warning_once", "info_once"})
METRIC_METHODS = frozenset({"add_scalar", "add_scalars", "log_metrics"})
PROGRESS_METHODS = frozenset({"set_postfix", "set_description", "set_postfix_str", "set_description_str"})
# Modules whose functions log through a logger (``logging.info``, absl's ``logging.info``).
LOGGING_MODULES = frozenset({"logging", "absl.logging"})
LOGGER_FACTORIES = frozenset({"getLogger", "get_logger"})
WRITE_FUNCTIONS = frozenset({"tqdm.write", "tqdm.tqdm.write", "tqdm.auto.tqdm.write", "sys.stdout.write", "sys.stderr.write"})
_COMPREHENSIONS = (cst.ListComp, cst.SetComp, cst.DictComp, cst.GeneratorExp)
_OUTPUT_METHODS = LOG_METHODS | LOG_ONCE_METHODS | METRIC_METHODS | PROGRESS_METHODS | {"warn", "write", "print"}
# Hugging Face Accelerate's ``Accelerator``: its ``print`` is ``print`` on the main process.
ACCELERATOR_CLASSES = frozenset({"accelerate.Accelerator", "accelerate.accelerator.Accelerator"})
# Calls whose replay at another moment is not the same call: they read the live
# exception or the caller's stack.
LIVE_METHODS = frozenset({"exception"})
LIVE_KEYWORDS = frozenset({"exc_info", "stack_info", "stacklevel"})
# Classes whose instances log through ``logging`` (annotations, ``logging.LoggerAdapter(...)``).
LOGGER_CLASSES = frozenset({"logging.Logger", "logging.LoggerAdapter", "logging.RootLogger"})
# Loggers imported ready-made.
IMPORTED_LOGGERS = frozenset({"loguru.logger"})


class OutputKind(enum.Enum):
    PRINT = "print"
    LOGGING = "logging"
    LOGGER = "logger"
    METRICS = "metrics"
    PROGRESS = "progress"
    WARNING = "warning"
    WRAPPER = "wrapper"

    @property
    def formats_text(self) -> bool:
        """Does the call turn its arguments into text (so a tensor argument is formatted)?

        Metric writers take numbers or tensors and read them themselves.
        """
        return self is not OutputKind.METRICS

    @property
    def logs(self) -> bool:
        """A ``logging`` record: the logger decides at call time whether its level is enabled."""
        return self in (OutputKind.LOGGING, OutputKind.LOGGER)


@dataclass(frozen=True)
class OutputCall:
    kind: OutputKind
    callee: str  # the callee as written: "print", "logger.info", "print0"
    method: str | None = None  # "info", "warning_once", "add_scalar"; None for a plain function
    wrapper: cst.FunctionDef | None = None  # the definition, for OutputKind.WRAPPER

    @property
    def once(self) -> bool:
        return self.method in LOG_ONCE_METHODS


def is_logger_name(receiver: str) -> bool:
    """``logger``, ``log``, ``_LOGGER``, ``train_logger``, ``logger_`` (the last component)."""
    last = receiver.split(".")[-1].lower().strip("_")
    return last.endswith("log") or last.endswith("logger")


def _is_logger(ctx: FileContext, receiver: cst.BaseExpression) -> bool:
    if isinstance(receiver, cst.Call):
        factory = dotted_name(receiver.func)
        return factory is not None and factory.split(".")[-1] in LOGGER_FACTORIES
    name = dotted_name(receiver)
    if name is None:
        return False
    return ctx.provenance.imports.qualify(receiver) == "logging" or is_logger_name(name)


def _import_origin(ctx: FileContext, name: str) -> str | None:
    """What a name is imported as: ``logging`` -> ``"logging"``; relative imports
    too (``from ...utils import logging`` -> ``"...utils.logging"``)."""
    origin = ctx.provenance.imports.aliases.get(name)
    if origin is not None:
        return origin
    for node in ctx.nodes(cst.ImportFrom):
        if not node.relative or isinstance(node.names, cst.ImportStar):
            continue
        base = "." * len(node.relative) + ((dotted_name(node.module) or "") if node.module is not None else "")
        for alias in node.names:
            if (alias.evaluated_alias or alias.evaluated_name) == name:
                return (base if base.endswith(".") else base + ".") + alias.evaluated_name
    return None


def _logger_factory(ctx: FileContext, func: cst.BaseExpression) -> bool:
    """``logging.getLogger``, ``transformers.utils.logging.get_logger``,
    ``accelerate.logging.get_logger``, a model file's ``from ...utils import
    logging``: a ``getLogger`` / ``get_logger`` of an imported ``logging``
    module (a library's wrapper around the standard one)."""
    name = dotted_name(func)
    root, _, rest = (name or "").partition(".")
    origin = _import_origin(ctx, root) if root else None
    if origin is None:
        return False
    qualified = f"{origin}.{rest}" if rest else origin
    module, _, factory = qualified.rpartition(".")
    if qualified in LOGGER_CLASSES:
        return True
    return factory in LOGGER_FACTORIES and module.split(".")[-1] == "logging"


def _logger_value(ctx: FileContext, value: cst.CSTNode | None, depth: int) -> bool:
    """Is ``value`` (what a name or attribute is bound to) certainly a logger?"""
    if isinstance(value, cst.Call):
        func = value.func
        if isinstance(func, cst.Attribute) and func.attr.value == "getChild":
            return _known_logger(ctx, func.value, depth + 1)
        return _logger_factory(ctx, func)
    if isinstance(value, (cst.Name, cst.Attribute)):
        return _known_logger(ctx, value, depth + 1)
    return False


def _logger_annotation(ctx: FileContext, annotation: cst.Annotation | None) -> bool:
    return annotation is not None and (ctx.provenance.imports.qualify(annotation.annotation) or "") in LOGGER_CLASSES


def _known_logger(ctx: FileContext, receiver: cst.BaseExpression, depth: int = 0) -> bool:
    if depth > 4:
        return False
    if isinstance(receiver, cst.Call):
        return _logger_value(ctx, receiver, depth)
    provenance = ctx.provenance
    if isinstance(receiver, cst.Name):
        scope = provenance.scope_of(receiver).lookup(receiver.value)
        if scope is None:
            return False
        bindings = scope.bindings[receiver.value]
        if all(how == "import" for how, _ in bindings):
            return (provenance.imports.aliases.get(receiver.value) or "") in IMPORTED_LOGGERS
        for how, value in bindings:
            if how == "param":
                if not (isinstance(value, cst.Param) and _logger_annotation(ctx, value.annotation)):
                    return False
            elif how in ("value", "annotation"):
                parent = ctx.parents.get(value) if value is not None else None
                annotated = isinstance(parent, cst.AnnAssign) and _logger_annotation(ctx, parent.annotation)
                if not annotated and not (how == "value" and _logger_value(ctx, value, depth)):
                    return False
            else:
                return False
        return True
    if isinstance(receiver, cst.Attribute) and isinstance(receiver.value, cst.Name) and receiver.value.value == "self":
        values = provenance.assigned_values(receiver)
        return bool(values) and all(_logger_value(ctx, v, depth) for v in values)
    return False


def logger_origin(ctx: FileContext, call: cst.Call) -> str:
    """For a logger method call (:attr:`OutputKind.LOGGER`): "" when the code shows
    that the receiver is a ``logging`` logger (``logging.getLogger(...)``, a library's
    ``logging.get_logger(...)``, a ``logging.Logger`` annotation, ``self.logger``
    assigned one of those) or loguru's ``logger``; else why it is not known.

    Replayed later, a ``logging`` call makes the same record: the runtime keeps
    it in order with everything else the process writes. An object that is only
    *named* ``logger`` (a project module, a class of the file) may buffer lines
    or write to its own files, which nothing keeps in order.
    """
    func = call.func
    if not isinstance(func, cst.Attribute):
        return ""
    receiver = func.value
    if _known_logger(ctx, receiver):
        return ""
    code = ctx.code(receiver)
    if isinstance(receiver, cst.Name):
        scope = ctx.provenance.scope_of(receiver).lookup(receiver.value)
        bindings = scope.bindings[receiver.value] if scope is not None else []
        if bindings and all(how == "import" for how, _ in bindings):
            origin = ctx.provenance.imports.aliases.get(receiver.value)
            what = f"`{origin}`" if origin else "a module of the project"
            return (f"`{code}` is imported from {what}, not known to be a `logging` logger: what it buffers "
                    "or writes to its own files is not kept in order at replay")
    return (f"`{code}` is not known to be a `logging` logger: a logger of another kind may buffer lines or "
            "write to its own files, which are not kept in order at replay")


def stable_receiver(ctx: FileContext, receiver: cst.BaseExpression) -> bool:
    """Is ``receiver`` (what a method is called on) certainly the same object later?

    True for an imported module and what hangs on one (``wandb``, ``logging``,
    ``sys.stderr``, ``tqdm.write``: looked up there), for a name bound once by
    an import, and for a name with exactly one binding in its scope, outside
    any loop of that scope and never declared ``global`` / ``nonlocal`` (a
    module-level ``writer = SummaryWriter()``, a parameter). A name rebound
    (``writer = SummaryWriter(run)`` for each run of a sweep), a loop variable,
    an attribute (``self.writer``), an item (``writers[i]``) or a call
    (``get_writer(i)``) may stand for another object by then.
    """
    root = receiver
    while isinstance(root, cst.Attribute):
        root = root.value
    if not isinstance(root, cst.Name):
        return False
    provenance = ctx.provenance
    scope = provenance.scope_of(root).lookup(root.value)
    if scope is None:
        return False
    bindings = scope.bindings[root.value]
    if all(how == "import" for how, _ in bindings):
        return True
    if root is not receiver or len(bindings) != 1:
        return False
    if any(item.name.value == root.value for node in ctx.nodes(cst.Global, cst.Nonlocal) for item in node.names):
        return False
    how, value = bindings[0]
    if how == "param":
        return True
    if how in ("value", "unpack", "annotation") and value is not None:
        site: cst.CSTNode | None = value
    elif how == "opaque":
        site = _opaque_binding(ctx, scope, root.value)
    else:
        return False  # a loop variable, an augmented assignment
    if site is None:
        return False
    for parent in ctx.ancestors(site):
        if parent is scope.node:
            return True
        if isinstance(parent, (cst.For, cst.While, *_COMPREHENSIONS)):
            return False
    return scope.node is ctx.module


def _opaque_binding(ctx: FileContext, scope, name: str) -> cst.CSTNode | None:
    """The statement that binds ``name`` where provenance records no value:
    ``with ... as name``, ``def name``, ``class name``."""
    for node in ctx.memo("opaque bindings", lambda: _opaque_bindings(ctx)).get(name, ()):
        if ctx.provenance.scope_of(node) is scope:
            return node
    return None


def _opaque_bindings(ctx: FileContext) -> dict[str, list[cst.CSTNode]]:
    """The ``with ... as name``, ``def name`` and ``class name`` of the file by the name they
    bind, in source order."""
    found: dict[str, list[cst.CSTNode]] = {}
    for node in ctx.nodes(cst.WithItem, cst.FunctionDef, cst.ClassDef):
        if isinstance(node, cst.WithItem):
            if node.asname is not None and isinstance(node.asname.name, cst.Name):
                found.setdefault(node.asname.name.value, []).append(node)
        else:
            found.setdefault(node.name.value, []).append(node)  # type: ignore[attr-defined]
    return found


def output_call(ctx: FileContext, call: cst.Call) -> OutputCall | None:
    """What kind of output call ``call`` is, or None when it is not one."""
    found = _library_output_call(ctx, call)
    if found is not None:
        return found
    func = call.func
    if isinstance(func, cst.Name):
        wrapper = output_wrappers(ctx).get(func.value)
        if wrapper is not None and ctx.provenance.scope_of(call).lookup(func.value) is ctx.provenance.scopes[ctx.module]:
            return OutputCall(OutputKind.WRAPPER, func.value, wrapper=wrapper)
    return None


def _library_output_call(ctx: FileContext, call: cst.Call) -> OutputCall | None:
    """An output call of Python or a library (not a wrapper of this file)."""
    func = call.func
    imports = ctx.provenance.imports
    if isinstance(func, cst.Name):
        if func.value == "print":
            if ctx.provenance.scope_of(call).lookup("print") is None:
                return OutputCall(OutputKind.PRINT, "print")
            return None
        qualified = imports.qualify(func) or ""
        if qualified == "warnings.warn":
            return OutputCall(OutputKind.WARNING, func.value)
        if qualified.rpartition(".")[0] in LOGGING_MODULES and qualified.split(".")[-1] in LOG_METHODS:
            return OutputCall(OutputKind.LOGGING, func.value, qualified.split(".")[-1])
        return None
    if not isinstance(func, cst.Attribute):
        return None
    method = func.attr.value
    kind = _method_kind(ctx, func)
    if kind is None:
        return None
    return OutputCall(kind, dotted_name(func) or ctx.code(func), method)


def _method_kind(ctx: FileContext, func: cst.Attribute) -> OutputKind | None:
    method = func.attr.value
    if method not in _OUTPUT_METHODS:
        return None  # the common case, decided without qualifying the name
    qualified = ctx.provenance.imports.qualify(func) or ""
    if qualified == "warnings.warn":
        return OutputKind.WARNING
    if method in LOG_METHODS or method in LOG_ONCE_METHODS:
        if qualified.rpartition(".")[0] in LOGGING_MODULES:
            return OutputKind.LOGGING
        if qualified == "wandb.log":
            return OutputKind.METRICS
        return OutputKind.LOGGER if _is_logger(ctx, func.value) else None
    if method == "write":
        return OutputKind.PRINT if qualified in WRITE_FUNCTIONS else None
    if method == "print":
        return OutputKind.PRINT if _is_accelerator(ctx, func.value) else None
    if method in METRIC_METHODS:
        return OutputKind.METRICS
    if method in PROGRESS_METHODS:
        return OutputKind.PROGRESS
    return None


def _is_accelerator(ctx: FileContext, receiver: cst.BaseExpression) -> bool:
    """``accelerator`` (or ``self.accelerator``) made only by ``Accelerator(...)``."""
    values = ctx.provenance.assigned_values(receiver)
    return bool(values) and all(
        isinstance(v, cst.Call) and ctx.provenance.imports.qualify(v.func) in ACCELERATOR_CLASSES for v in values
    )


def is_output_call(ctx: FileContext, call: cst.Call) -> bool:
    return output_call(ctx, call) is not None


def live_context(found: OutputCall, call: cst.Call) -> str:
    """Why the call reads the moment it runs (the live exception, the caller's
    stack), so that calling it later is not the same call; "" when it does not."""
    if found.method in LIVE_METHODS and found.kind.logs:
        return f"`{found.callee}` logs the exception being handled, which is gone at replay"
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value in LIVE_KEYWORDS:
            return f"`{arg.keyword.value}=` reads the caller's exception or stack, which differ at replay"
    return ""


# -- where a print writes, and when --------------------------------------------------------

# The streams the deferred-logging runtime keeps in order (it wraps them at import).
STANDARD_STREAMS = frozenset({"sys.stdout", "sys.stderr"})


def own_file(ctx: FileContext, call: cst.Call, found: OutputCall) -> str:
    """For a print-like call (:attr:`OutputKind.PRINT`), the file it writes to when that
    is not ``sys.stdout`` / ``sys.stderr`` (``f`` in ``print(..., file=f)``), as written;
    "" otherwise.

    Writes to such a file are the program's own: it may close the file (``with
    open(...) as f:``) or read it back, and nothing keeps them in order with the
    other writes to it. A call that writes there cannot be replayed later.
    """
    if found.kind is not OutputKind.PRINT:
        return ""
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == "file" and not _none(arg.value):
            if (ctx.provenance.imports.qualify(arg.value) or "") not in STANDARD_STREAMS:
                return ctx.code(arg.value)
    return ""


def flushes_now(call: cst.Call) -> bool:
    """``print(..., flush=True)``: the program asks for the text to reach the stream
    now, before it goes on (a line that must survive a hard kill right after)."""
    return any(arg.keyword is not None and arg.keyword.value == "flush" and not _none(arg.value)
               and not (isinstance(arg.value, cst.Name) and arg.value.value == "False") for arg in call.args)


def _none(value: cst.BaseExpression) -> bool:
    return isinstance(value, cst.Name) and value.value == "None"


# -- wrappers -------------------------------------------------------------------------------

# Queries whose answer does not change while a program runs: a wrapper's condition
# on them (``if dist.get_rank() == 0:``) gives the same answer at replay.
PROCESS_CONSTANTS = frozenset(
    {
        "torch.distributed.get_rank", "torch.distributed.get_world_size", "torch.distributed.is_initialized",
        "torch.distributed.is_available", "os.environ.get", "os.getenv",
    }
)
# Builtins a wrapper may use to build its text: they give the same result later.
TEXT_BUILTINS = frozenset({"str", "repr", "format", "len", "int", "float", "round", "abs"})

# The wrappers of the last few modules (libcst modules take no weak references).
_WRAPPERS: collections.OrderedDict[int, tuple[cst.Module, dict[str, cst.FunctionDef]]] = collections.OrderedDict()


def output_wrappers(ctx: FileContext) -> dict[str, cst.FunctionDef]:
    """Functions of the module level of this file that only write output.

    The body may hold a docstring, ``pass``, a bare ``return``, output call
    statements (calls of other such wrappers included) whose arguments are the
    function's parameters, literals and text built from them, and ``if`` tests
    of values that stay the same while the program runs: parameters, module-level
    names that no function rebinds (``master_process``), ``dist.get_rank()``,
    ``os.environ.get(...)``. Calling such a function later, with the same
    arguments, writes the same output.
    """
    cached = _WRAPPERS.get(id(ctx.module))
    if cached is not None and cached[0] is ctx.module:
        return cached[1]
    module_scope = ctx.provenance.scopes[ctx.module]
    rebound = {item.name.value for node in ctx.nodes(cst.Global) for item in node.names}  # type: ignore[attr-defined]
    candidates: dict[str, cst.FunctionDef] = {}
    for stmt in ctx.module.body:
        if isinstance(stmt, cst.FunctionDef) and not stmt.decorators and stmt.asynchronous is None:
            name = stmt.name.value
            if len(module_scope.bindings.get(name, [])) == 1:
                candidates[name] = stmt
    stable_globals = {
        name for name, bindings in module_scope.bindings.items()
        if name not in rebound and name not in candidates and all(how in ("value", "import", "number") for how, _ in bindings)
    }
    found: dict[str, cst.FunctionDef] = {}
    changed = True
    while changed:
        changed = False
        for name, func in candidates.items():
            if name in found:
                continue
            checker = _WrapperCheck(ctx, func, stable_globals, found)
            if checker.body_ok(func.body.body, top=True) and checker.writes:
                found[name] = func
                changed = True
    _WRAPPERS[id(ctx.module)] = (ctx.module, found)
    while len(_WRAPPERS) > 8:
        _WRAPPERS.popitem(last=False)
    return found


class _WrapperCheck:
    def __init__(self, ctx: FileContext, func: cst.FunctionDef, stable: set[str], wrappers: dict[str, cst.FunctionDef]) -> None:
        from .provenance import all_params

        self.ctx = ctx
        self.params = {p.name.value for p in all_params(func.params)}
        self.stable = stable
        self.wrappers = wrappers
        self.writes = False

    def body_ok(self, body, top: bool = False) -> bool:
        for i, stmt in enumerate(body):
            if isinstance(stmt, cst.SimpleStatementLine):
                for small in stmt.body:
                    if isinstance(small, cst.Pass) or (isinstance(small, cst.Return) and small.value is None):
                        continue
                    if isinstance(small, cst.Expr) and isinstance(small.value, (cst.SimpleString, cst.ConcatenatedString)) and top and i == 0:
                        continue  # docstring
                    if isinstance(small, cst.Expr) and isinstance(small.value, cst.Call) and self.output_ok(small.value):
                        self.writes = True
                        continue
                    return False
            elif isinstance(stmt, cst.If):
                if not self.value_ok(stmt.test) or not self.body_ok(stmt.body.body):
                    return False
                orelse = stmt.orelse
                if isinstance(orelse, cst.If):
                    if not self.body_ok([orelse]):
                        return False
                elif isinstance(orelse, cst.Else) and not self.body_ok(orelse.body.body):
                    return False
            else:
                return False
        return True

    def output_ok(self, call: cst.Call) -> bool:
        func = call.func
        if not (isinstance(func, cst.Name) and func.value in self.wrappers):
            found = _library_output_call(self.ctx, call)
            if found is None or live_context(found, call):
                return False
            if isinstance(func, cst.Attribute) and not self.value_ok(func.value):
                return False
        return all(self.value_ok(arg.value) for arg in call.args)

    def value_ok(self, node: cst.BaseExpression) -> bool:
        """Gives the same value later as now: parameters, stable names, literals, text of them."""
        if isinstance(node, cst.Name):
            value = node.value
            return value in self.params or value in self.stable or value in ("True", "False", "None")
        if isinstance(node, (cst.SimpleString, cst.Integer, cst.Float, cst.Imaginary)):
            return True
        if isinstance(node, cst.ConcatenatedString):
            return self.value_ok(node.left) and self.value_ok(node.right)
        if isinstance(node, cst.FormattedString):
            return all(self.value_ok(part.expression) and all(
                not isinstance(p, cst.FormattedStringExpression) or self.value_ok(p.expression) for p in (part.format_spec or ()))
                for part in node.parts if isinstance(part, cst.FormattedStringExpression))
        if isinstance(node, cst.Attribute):
            # ``sys.stderr``, ``logging.INFO``, ``args.verbose`` of a stable name.
            return self.value_ok(node.value)
        if isinstance(node, cst.Subscript):
            return self.value_ok(node.value) and all(
                isinstance(e.slice, cst.Index) and self.value_ok(e.slice.value) for e in node.slice)
        if isinstance(node, (cst.Tuple, cst.List)):
            return all(self.value_ok(e.value) for e in node.elements)
        if isinstance(node, cst.BinaryOperation):
            return self.value_ok(node.left) and self.value_ok(node.right)
        if isinstance(node, cst.UnaryOperation):
            return self.value_ok(node.expression)
        if isinstance(node, cst.BooleanOperation):
            return self.value_ok(node.left) and self.value_ok(node.right)
        if isinstance(node, cst.Comparison):
            return self.value_ok(node.left) and all(self.value_ok(c.comparator) for c in node.comparisons)
        if isinstance(node, cst.Call):
            func = node.func
            qualified = self.ctx.provenance.imports.qualify(func) or ""
            if isinstance(func, cst.Name) and func.value in TEXT_BUILTINS and \
                    self.ctx.provenance.scope_of(node).lookup(func.value) is None:
                pass
            elif qualified in PROCESS_CONSTANTS:
                pass
            elif isinstance(func, cst.Attribute) and func.attr.value in ("format", "join") and \
                    isinstance(func.value, (cst.SimpleString, cst.ConcatenatedString)):
                pass
            else:
                return False
            return all(self.value_ok(a.value) for a in node.args)
        return False
