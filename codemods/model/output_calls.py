"""What an output call is: the one definition every rule asks.

An *output call* writes something the user reads or collects, and does
nothing else a program depends on:

* ``print(...)``, ``tqdm.write(...)``, ``sys.stdout.write(...)``, Accelerate's
  ``accelerator.print(...)`` (:attr:`OutputKind.PRINT`);
* ``logging.info(...)`` and the other functions of ``logging`` (or absl's) (:attr:`OutputKind.LOGGING`);
* logger methods: ``logger.info(...)``, ``self.log.warning(...)``,
  ``logging.getLogger(__name__).debug(...)``, and Hugging Face's
  ``logger.warning_once`` / ``logger.info_once``                (:attr:`OutputKind.LOGGER`);
* metric writers: ``writer.add_scalar(s)``, ``wandb.log`` (and a wandb run's ``log``), ``log_metrics``
  (:attr:`OutputKind.METRICS`);
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

import ast
import enum
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

from .aliasing import changed_in_place, first_after
from .provenance import dotted_name
from .tree import children_of

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
_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)
_CONTAINERS = (ast.Dict, ast.List, ast.Set, *_COMPREHENSIONS)
_LOOPS = (ast.For, ast.AsyncFor, ast.While, *_COMPREHENSIONS)
_OUTPUT_METHODS = LOG_METHODS | LOG_ONCE_METHODS | METRIC_METHODS | PROGRESS_METHODS | {"warn", "write", "print"}
# Hugging Face Accelerate's ``Accelerator``: its ``print`` is ``print`` on the main process.
ACCELERATOR_CLASSES = frozenset({"accelerate.Accelerator", "accelerate.accelerator.Accelerator"})
# What makes a wandb run, whose ``log`` is ``wandb.log``'s.
_WANDB_RUNS = frozenset({"wandb.init"})
# Calls whose replay at another moment is not the same call: they read the live
# exception or the caller's stack.
LIVE_METHODS = frozenset({"exception"})
LIVE_KEYWORDS = frozenset({"exc_info", "stack_info", "stacklevel"})
# Classes whose instances log through ``logging`` (annotations, ``logging.LoggerAdapter(...)``).
LOGGER_CLASSES = frozenset({"logging.Logger", "logging.LoggerAdapter", "logging.RootLogger"})
# Loggers imported ready-made.
IMPORTED_LOGGERS = frozenset({"loguru.logger"})


def call_arguments(call: ast.Call) -> list[tuple[str | None, str, ast.expr]]:
    """The arguments of ``call`` as one list in source order, as libcst kept them: for each,
    (keyword or None, star: ``""`` / ``"*"`` / ``"**"``, value). ``ast`` keeps positional
    arguments (``*x`` as ``Starred``) and keywords (``**x``: ``arg`` None) apart."""
    args, keywords = call.args, call.keywords
    if not keywords:
        return [(None, "*", a.value) if type(a) is ast.Starred else (None, "", a) for a in args]  # type: ignore[attr-defined]
    if not args:
        return [(k.arg, "", k.value) if k.arg is not None else (None, "**", k.value) for k in keywords]
    found: list[tuple[str | None, str, ast.expr]] = []
    for node in children_of(call)[1:]:
        if type(node) is ast.keyword:
            found.append((node.arg, "", node.value) if node.arg is not None else (None, "**", node.value))  # type: ignore[attr-defined]
        elif type(node) is ast.Starred:
            found.append((None, "*", node.value))  # type: ignore[attr-defined]
        else:
            found.append((None, "", node))  # type: ignore[arg-type]
    return found


def argument_values(call: ast.Call) -> list[ast.expr]:
    """The value of every argument of ``call`` (``x`` of ``*x``, ``k=x`` and ``**x``), in source order."""
    if not call.keywords:
        return [a.value if type(a) is ast.Starred else a for a in call.args]  # type: ignore[attr-defined]
    return [value for _, _, value in call_arguments(call)]


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
    wrapper: ast.FunctionDef | None = None  # the definition, for OutputKind.WRAPPER
    # For a wrapper another module of the project defines: that module's FileContext
    # (its nodes are that file's; ask about them there). None: this file.
    context: object | None = None

    @property
    def once(self) -> bool:
        return self.method in LOG_ONCE_METHODS


def is_logger_name(receiver: str) -> bool:
    """``logger``, ``log``, ``_LOGGER``, ``train_logger``, ``logger_`` (the last component)."""
    last = receiver.split(".")[-1].lower().strip("_")
    return last.endswith("log") or last.endswith("logger")


def _is_logger(ctx: FileContext, receiver: ast.expr) -> bool:
    if type(receiver) is ast.Call:
        factory = dotted_name(receiver.func)  # type: ignore[attr-defined]
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
    for node in ctx.nodes(ast.ImportFrom):
        if not node.level or node.names[0].name == "*":  # type: ignore[attr-defined]
            continue
        base = "." * node.level + (node.module or "")  # type: ignore[attr-defined]
        for alias in node.names:  # type: ignore[attr-defined]
            if (alias.asname or alias.name) == name:
                return (base if base.endswith(".") else base + ".") + alias.name
    return None


def _logger_factory(ctx: FileContext, func: ast.expr) -> bool:
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


def _logger_value(ctx: FileContext, value: ast.AST | None, depth: int) -> bool:
    """Is ``value`` (what a name or attribute is bound to) certainly a logger?"""
    if type(value) is ast.Call:
        func = value.func  # type: ignore[attr-defined]
        if type(func) is ast.Attribute and func.attr == "getChild":
            return _known_logger(ctx, func.value, depth + 1)
        return _logger_factory(ctx, func)
    if type(value) is ast.Name or type(value) is ast.Attribute:
        return _known_logger(ctx, value, depth + 1)  # type: ignore[arg-type]
    return False


def _logger_annotation(ctx: FileContext, annotation: ast.expr | None) -> bool:
    return annotation is not None and (ctx.provenance.imports.qualify(annotation) or "") in LOGGER_CLASSES


def _known_logger(ctx: FileContext, receiver: ast.expr, depth: int = 0) -> bool:
    if depth > 4:
        return False
    if type(receiver) is ast.Call:
        return _logger_value(ctx, receiver, depth)
    provenance = ctx.provenance
    if type(receiver) is ast.Name:
        scope = provenance.scope_of(receiver).lookup(receiver.id)  # type: ignore[attr-defined]
        if scope is None:
            return False
        bindings = scope.bindings[receiver.id]  # type: ignore[attr-defined]
        if all(how == "import" for how, _ in bindings):
            return (provenance.imports.aliases.get(receiver.id) or "") in IMPORTED_LOGGERS  # type: ignore[attr-defined]
        for how, value in bindings:
            if how == "param":
                if not (type(value) is ast.arg and _logger_annotation(ctx, value.annotation)):
                    return False
            elif how in ("value", "annotation"):
                parent = ctx.parents.get(value) if value is not None else None
                annotated = type(parent) is ast.AnnAssign and _logger_annotation(ctx, parent.annotation)  # type: ignore[attr-defined]
                if not annotated and not (how == "value" and _logger_value(ctx, value, depth)):
                    return False
            else:
                return False
        return True
    if type(receiver) is ast.Attribute and type(receiver.value) is ast.Name and receiver.value.id == "self":  # type: ignore[attr-defined]
        values = provenance.assigned_values(receiver)
        return bool(values) and all(_logger_value(ctx, v, depth) for v in values)
    return False


def logger_origin(ctx: FileContext, call: ast.Call) -> str:
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
    if type(func) is not ast.Attribute:
        return ""
    receiver = func.value  # type: ignore[attr-defined]
    if _known_logger(ctx, receiver):
        return ""
    code = ctx.code(receiver)
    if type(receiver) is ast.Name:
        scope = ctx.provenance.scope_of(receiver).lookup(receiver.id)
        bindings = scope.bindings[receiver.id] if scope is not None else []
        if bindings and all(how == "import" for how, _ in bindings):
            origin = ctx.provenance.imports.aliases.get(receiver.id)
            what = f"`{origin}`" if origin else "a module of the project"
            return (f"`{code}` is imported from {what}, not known to be a `logging` logger: what it buffers "
                    "or writes to its own files is not kept in order at replay")
    return (f"`{code}` is not known to be a `logging` logger: a logger of another kind may buffer lines or "
            "write to its own files, which are not kept in order at replay")


def stable_receiver(ctx: FileContext, receiver: ast.expr) -> bool:
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
    while type(root) is ast.Attribute:
        root = root.value  # type: ignore[attr-defined]
    if type(root) is not ast.Name:
        return False
    name = root.id  # type: ignore[attr-defined]
    provenance = ctx.provenance
    scope = provenance.scope_of(root).lookup(name)
    if scope is None:
        return False
    bindings = scope.bindings[name]
    if all(how == "import" for how, _ in bindings):
        return True
    if root is not receiver or len(bindings) != 1:
        return False
    if any(name in node.names for node in ctx.nodes(ast.Global, ast.Nonlocal)):  # type: ignore[attr-defined]
        return False
    how, value = bindings[0]
    if how == "param":
        return True
    if how in ("value", "unpack", "annotation") and value is not None:
        site: ast.AST | None = value
    elif how == "opaque":
        site = _opaque_binding(ctx, scope, name)
    else:
        return False  # a loop variable, an augmented assignment
    if site is None:
        return False
    for parent in ctx.ancestors(site):
        if parent is scope.node:
            return True
        if isinstance(parent, _LOOPS):
            return False
    return scope.node is ctx.module


def _opaque_binding(ctx: FileContext, scope, name: str) -> ast.AST | None:
    """The statement that binds ``name`` where provenance records no value:
    ``with ... as name``, ``def name``, ``class name``."""
    for node in ctx.memo("opaque bindings", lambda: _opaque_bindings(ctx)).get(name, ()):
        if ctx.provenance.scope_of(node) is scope:
            return node
    return None


def _opaque_bindings(ctx: FileContext) -> dict[str, list[ast.AST]]:
    """The ``with ... as name``, ``def name`` and ``class name`` of the file by the name they
    bind, in source order."""
    found: dict[str, list[ast.AST]] = {}
    for node in ctx.nodes(ast.withitem, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef):
        if type(node) is ast.withitem:
            target = node.optional_vars  # type: ignore[attr-defined]
            if type(target) is ast.Name:
                found.setdefault(target.id, []).append(node)  # type: ignore[attr-defined]
        else:
            found.setdefault(node.name, []).append(node)  # type: ignore[attr-defined]
    return found


def output_call(ctx: FileContext, call: ast.Call) -> OutputCall | None:
    """What kind of output call ``call`` is, or None when it is not one."""
    calls = ctx.memo("output calls", dict)
    key = id(call)
    if key in calls:
        return calls[key]
    found = calls[key] = _output_call(ctx, call)
    return found


def _output_call(ctx: FileContext, call: ast.Call) -> OutputCall | None:
    found = _library_output_call(ctx, call)
    if found is not None:
        return found
    func = call.func
    if type(func) is ast.Name:
        wrapper = output_wrappers(ctx).get(func.id)  # type: ignore[attr-defined]
        if wrapper is not None and ctx.provenance.scope_of(call).lookup(func.id) is ctx.provenance.scopes[ctx.module]:  # type: ignore[attr-defined]
            return OutputCall(OutputKind.WRAPPER, func.id, wrapper=wrapper)  # type: ignore[attr-defined]
    external = ctx.provenance.external
    if external is not None and (call.args or call.keywords) and (type(func) is ast.Name or type(func) is ast.Attribute) \
            and type(ctx.parents.get(call)) is ast.Expr:
        # ``from .distributed import print0``: a wrapper another module of the project defines.
        # Only a call made for its effect is asked about: a wrapper returns nothing, and the
        # question reads the other module (``x = make_cache(config)`` is not a wrapper's call).
        found = external.wrapper(ctx.provenance, func)  # type: ignore[attr-defined]
        if found is not None:
            other, definition = found
            return OutputCall(OutputKind.WRAPPER, ctx.code(func), wrapper=definition, context=other)
    return None


def _library_output_call(ctx: FileContext, call: ast.Call) -> OutputCall | None:
    """An output call of Python or a library (not a wrapper of this file)."""
    func = call.func
    imports = ctx.provenance.imports
    if type(func) is ast.Name:
        name = func.id  # type: ignore[attr-defined]
        if name == "print":
            if ctx.provenance.scope_of(call).lookup("print") is None:
                return OutputCall(OutputKind.PRINT, "print")
            return None
        qualified = imports.qualify(func) or ""
        if qualified == "warnings.warn":
            return OutputCall(OutputKind.WARNING, name)
        if qualified.rpartition(".")[0] in LOGGING_MODULES and qualified.split(".")[-1] in LOG_METHODS:
            return OutputCall(OutputKind.LOGGING, name, qualified.split(".")[-1])
        return None
    if type(func) is not ast.Attribute:
        return None
    method = func.attr  # type: ignore[attr-defined]
    kind = _method_kind(ctx, func)  # type: ignore[arg-type]
    if kind is None:
        return None
    return OutputCall(kind, dotted_name(func) or ctx.code(func), method)


def _method_kind(ctx: FileContext, func: ast.Attribute) -> OutputKind | None:
    method = func.attr
    if method not in _OUTPUT_METHODS:
        return None  # the common case, decided without qualifying the name
    qualified = ctx.provenance.imports.qualify(func) or ""
    if qualified == "warnings.warn":
        return OutputKind.WARNING
    if method in LOG_METHODS or method in LOG_ONCE_METHODS:
        if qualified.rpartition(".")[0] in LOGGING_MODULES:
            return OutputKind.LOGGING
        if qualified in ("wandb.log", "wandb.run.log") or (method == "log" and _made_only_by(ctx, func.value, _WANDB_RUNS)):
            return OutputKind.METRICS
        return OutputKind.LOGGER if _is_logger(ctx, func.value) else None
    if method == "write":
        return OutputKind.PRINT if qualified in WRITE_FUNCTIONS else None
    if method == "print":
        return OutputKind.PRINT if _made_only_by(ctx, func.value, ACCELERATOR_CLASSES) else None
    if method in METRIC_METHODS:
        return OutputKind.METRICS
    if method in PROGRESS_METHODS:
        return OutputKind.PROGRESS
    return None


def _made_only_by(ctx: FileContext, receiver: ast.expr, callees: frozenset[str]) -> bool:
    """Is every value assigned to ``receiver`` (a name, or ``self.x``) a call of one of
    ``callees``? ``accelerator = Accelerator(...)``, ``run = wandb.init(...)``."""
    values = ctx.provenance.assigned_values(receiver)
    return bool(values) and all(
        type(v) is ast.Call and ctx.provenance.imports.qualify(v.func) in callees for v in values  # type: ignore[attr-defined]
    )


def is_output_call(ctx: FileContext, call: ast.Call) -> bool:
    return output_call(ctx, call) is not None


def live_context(found: OutputCall, call: ast.Call) -> str:
    """Why the call reads the moment it runs (the live exception, the caller's
    stack), so that calling it later is not the same call; "" when it does not."""
    if found.method in LIVE_METHODS and found.kind.logs:
        return f"`{found.callee}` logs the exception being handled, which is gone at replay"
    for keyword in call.keywords:
        if keyword.arg is not None and keyword.arg in LIVE_KEYWORDS:
            return f"`{keyword.arg}=` reads the caller's exception or stack, which differ at replay"
    return ""


# -- where a print writes, and when --------------------------------------------------------

# The streams the deferred-logging runtime keeps in order (it wraps them at import).
STANDARD_STREAMS = frozenset({"sys.stdout", "sys.stderr"})


def own_file(ctx: FileContext, call: ast.Call, found: OutputCall) -> str:
    """For a print-like call (:attr:`OutputKind.PRINT`), the file it writes to when that
    is not ``sys.stdout`` / ``sys.stderr`` (``f`` in ``print(..., file=f)``), as written;
    "" otherwise.

    Writes to such a file are the program's own: it may close the file (``with
    open(...) as f:``) or read it back, and nothing keeps them in order with the
    other writes to it. A call that writes there cannot be replayed later.
    """
    if found.kind is not OutputKind.PRINT:
        return ""
    for keyword in call.keywords:
        if keyword.arg == "file" and not _none(keyword.value):
            if (ctx.provenance.imports.qualify(keyword.value) or "") not in STANDARD_STREAMS:
                return ctx.code(keyword.value)
    return ""


# Methods that write out, or end, what a metric writer was given so far: ``flush()``,
# ``close()``, ``finish()``, an MLflow or Comet run's ``end()``.
_WRITER_ENDS = frozenset({"flush", "close", "finish", "end"})
# Writers whose calls, flushes and closes the runtime sees (``fixitem.runtime`` hooks them):
# it replays what is pending before the program's own call of any of them.
HOOKED_WRITERS = frozenset({
    "wandb", "wandb.init", "torch.utils.tensorboard.SummaryWriter", "torch.utils.tensorboard.writer.SummaryWriter",
    "tensorboardX.SummaryWriter", "tensorboardX.writer.SummaryWriter",
})


def writer_ended_by(ctx: FileContext, call: ast.Call, found: OutputCall) -> str:
    """For a metric writer's call (:attr:`OutputKind.METRICS`: ``writer.add_scalar(...)``)
    of a writer the runtime does not hook, a call of the file that flushes or closes the
    same writer (``writer.close()``), as written; "" when there is none.

    A value given to such a writer before that call is written by it (or, after ``close()``,
    given to a closed writer): replayed later, it would miss the flush, or reach a writer
    closed by then. TensorBoard's ``SummaryWriter`` and wandb are hooked by the runtime,
    which replays what is pending first (:data:`HOOKED_WRITERS`).
    """
    if found.kind is not OutputKind.METRICS or type(call.func) is not ast.Attribute:
        return ""
    receiver = call.func.value  # type: ignore[attr-defined]
    imports = ctx.provenance.imports
    if imports.qualify(receiver) in HOOKED_WRITERS:
        return ""  # ``wandb.log(...)``
    if _made_only_by(ctx, receiver, HOOKED_WRITERS):
        return ""  # ``writer = SummaryWriter(...)``, ``run = wandb.init(...)``
    writer = ctx.code(receiver)

    def find() -> dict[str, str]:
        ends: dict[str, str] = {}
        for other in ctx.nodes(ast.Call):
            func = other.func  # type: ignore[attr-defined]
            if type(func) is ast.Attribute and func.attr in _WRITER_ENDS:
                ends.setdefault(ctx.code(func.value), ctx.code(other))
        return ends

    return ctx.memo("writer ends", find).get(writer, "")


def flushes_now(call: ast.Call) -> bool:
    """``print(..., flush=True)``: the program asks for the text to reach the stream
    now, before it goes on (a line that must survive a hard kill right after)."""
    return any(k.arg == "flush" and not _none(k.value)
               and not (type(k.value) is ast.Constant and k.value.value is False) for k in call.keywords)  # type: ignore[attr-defined]


def _none(value: ast.expr) -> bool:
    return type(value) is ast.Constant and value.value is None  # type: ignore[attr-defined]


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

def output_wrappers(ctx: FileContext) -> dict[str, ast.FunctionDef]:
    """Functions of the module level of this file that only write output.

    The body may hold a docstring, ``pass``, a bare ``return``, output call
    statements (calls of other such wrappers included) whose arguments are the
    function's parameters, literals and text built from them, and ``if`` tests
    of values that stay the same while the program runs: parameters, module-level
    names that no function rebinds (``master_process``), ``dist.get_rank()``,
    ``os.environ.get(...)``. Calling such a function later, with the same
    arguments, writes the same output.
    """
    return ctx.memo("output wrappers", lambda: _output_wrappers(ctx))


def _output_wrappers(ctx: FileContext) -> dict[str, ast.FunctionDef]:
    module_scope = ctx.provenance.scopes[ctx.module]
    rebound = {name for node in ctx.nodes(ast.Global) for name in node.names}  # type: ignore[attr-defined]
    candidates: dict[str, ast.FunctionDef] = {}
    for stmt in ctx.module.body:
        if type(stmt) is ast.FunctionDef and not stmt.decorator_list and may_only_write(stmt.body):
            name = stmt.name
            if len(module_scope.bindings.get(name, [])) == 1:
                candidates[name] = stmt
    if not candidates:
        return {}
    # Names whose value stays as it is: not rebound by a function, not a container the code
    # may fill (``STEP = {"n": 0}``), not changed in place anywhere (``STEP["n"] += 1``).
    # Asked only of the names a candidate reads (the in-place question walks every read).
    known: dict[str, bool] = {}

    def stable(name: str) -> bool:
        if name not in known:
            bindings = module_scope.bindings.get(name)
            known[name] = bool(bindings) and name not in rebound and name not in candidates and all(
                how in ("import", "number") or (how == "value" and type(value) not in _CONTAINERS)
                for how, value in bindings
            ) and changed_in_place(ctx, module_scope, name) is None
        return known[name]

    found: dict[str, ast.FunctionDef] = {}
    changed = True
    while changed:
        changed = False
        for name, func in candidates.items():
            if name in found:
                continue
            checker = _WrapperCheck(ctx, func, stable, found)
            if checker.block_ok(func, func.body, top=True) and checker.writes:
                found[name] = func
                changed = True
    return found


def may_only_write(body: list[ast.stmt]) -> bool:
    """Could :meth:`_WrapperCheck.body_ok` accept ``body``, from its statements' types alone?
    (Most functions fail this at once, before their lines are looked at; a module that
    imports one of them need not analyse its module to know it is no wrapper.)"""
    return all(type(stmt) in _WRAPPER_STATEMENTS and (type(stmt) is not ast.Return or stmt.value is None)
               for stmt in body)


_WRAPPER_STATEMENTS = frozenset({ast.If, ast.Pass, ast.Return, ast.Expr})


class _WrapperCheck:
    def __init__(self, ctx: FileContext, func: ast.FunctionDef, stable: Callable[[str], bool], wrappers: dict[str, ast.FunctionDef]) -> None:
        from .provenance import all_params

        self.ctx = ctx
        self.params = {p.arg for p in all_params(func.args)}
        self.stable = stable
        self.wrappers = wrappers
        self.writes = False

    def block_ok(self, owner: ast.AST, body: list[ast.stmt], top: bool = False) -> bool:
        """:meth:`body_ok` for the body of ``owner``. A body written on the line of its header
        (``def f(s): print(s)``, ``if x: print(s)``) is not accepted, as before the port (libcst's
        ``SimpleStatementSuite``, whose statements the check did not take)."""
        header = self.ctx.header_end(owner)
        if header is not None and body and self.ctx.positions[body[0]].start.line == header[0]:
            return False
        return self.body_ok(body, top)

    def body_ok(self, body, top: bool = False) -> bool:
        line_start = 0  # where the statements of the line of ``body[i]`` start (``a; b``)
        for i, stmt in enumerate(body):
            t = type(stmt)
            if i and not _same_line(self.ctx, body[i - 1], stmt):
                line_start = i
            if t is ast.If:
                if not self.value_ok(stmt.test) or not self.block_ok(stmt, stmt.body):
                    return False
                orelse = stmt.orelse
                if len(orelse) == 1 and type(orelse[0]) is ast.If and self.ctx.else_line(stmt) is None:
                    if not self.body_ok(orelse):  # ``elif``
                        return False
                elif orelse and not self._else_ok(stmt):
                    return False
                continue
            if t is ast.Pass or (t is ast.Return and stmt.value is None):
                continue
            if t is ast.Expr and _is_string(stmt.value) and top and line_start == 0:
                continue  # docstring
            if t is ast.Expr and type(stmt.value) is ast.Call and self.output_ok(stmt.value):
                self.writes = True
                continue
            return False
        return True

    def _else_ok(self, stmt: ast.If) -> bool:
        """The ``else:`` body of ``stmt`` (not on the line of its ``else:``, as :meth:`block_ok`)."""
        line = self.ctx.else_line(stmt)
        if line is not None and self.ctx.positions[stmt.orelse[0]].start.line == line:
            return False
        return self.body_ok(stmt.orelse)

    def output_ok(self, call: ast.Call) -> bool:
        func = call.func
        if not (type(func) is ast.Name and func.id in self.wrappers):  # type: ignore[attr-defined]
            found = _library_output_call(self.ctx, call)
            if found is None or live_context(found, call):
                return False
            if type(func) is ast.Attribute and not self.value_ok(func.value):  # type: ignore[attr-defined]
                return False
        return all(self.value_ok(value) for value in argument_values(call))

    def value_ok(self, node: ast.expr) -> bool:
        """Gives the same value later as now: parameters, stable names, literals, text of them."""
        t = type(node)
        if t is ast.Name:
            value = node.id  # type: ignore[attr-defined]
            return value in self.params or self.stable(value)
        if t is ast.Constant:
            return node.value is not Ellipsis  # type: ignore[attr-defined]
        if t is ast.JoinedStr:
            return all(self.value_ok(part.value) and (part.format_spec is None or self.value_ok(part.format_spec))
                       for part in node.values if type(part) is ast.FormattedValue)  # type: ignore[attr-defined]
        if t is ast.Attribute:
            # ``sys.stderr``, ``logging.INFO``, ``args.verbose`` of a stable name.
            return self.value_ok(node.value)  # type: ignore[attr-defined]
        if t is ast.Subscript:
            # ``x[a, b]``: each index (a slice is no value).
            return self.value_ok(node.value) and self.value_ok(node.slice)  # type: ignore[attr-defined]
        if t is ast.Tuple or t is ast.List:
            return all(self.value_ok(e.value if type(e) is ast.Starred else e) for e in node.elts)  # type: ignore[attr-defined]
        if t is ast.BinOp:
            return self.value_ok(node.left) and self.value_ok(node.right)  # type: ignore[attr-defined]
        if t is ast.UnaryOp:
            return self.value_ok(node.operand)  # type: ignore[attr-defined]
        if t is ast.BoolOp:
            return all(self.value_ok(v) for v in node.values)  # type: ignore[attr-defined]
        if t is ast.Compare:
            return self.value_ok(node.left) and all(self.value_ok(c) for c in node.comparators)  # type: ignore[attr-defined]
        if t is ast.Call:
            func = node.func  # type: ignore[attr-defined]
            qualified = self.ctx.provenance.imports.qualify(func) or ""
            if type(func) is ast.Name and func.id in TEXT_BUILTINS and \
                    self.ctx.provenance.scope_of(node).lookup(func.id) is None:
                pass
            elif qualified in PROCESS_CONSTANTS:
                pass
            elif type(func) is ast.Attribute and func.attr in ("format", "join") and _is_string(func.value):
                pass
            else:
                return False
            return all(self.value_ok(v) for v in argument_values(node))  # type: ignore[arg-type]
        return False


def _is_string(node: ast.expr) -> bool:
    """A string literal (``"..."``, ``b"..."``, implicitly concatenated ones)."""
    return type(node) is ast.Constant and isinstance(node.value, (str, bytes))  # type: ignore[attr-defined]


def _same_line(ctx: FileContext, before: ast.stmt, after: ast.stmt) -> bool:
    """Are two statements of a block on one line (``a; b``)?"""
    return ctx.positions[before].end.line == ctx.positions[after].start.line


def printed_whole_after(ctx: FileContext, anchor: ast.AST, name: str) -> ast.AST | None:
    """A place after ``anchor`` (or in a loop around it) that writes the tensor the local
    ``name`` holds as text, whole (``print(loss)``, ``f"{loss}"``, ``str(loss)``), or reads
    its ``grad_fn``: the text shows the operation that made it (``grad_fn=<MulBackward0>``)."""
    return first_after(ctx, anchor, name, "printed whole", lambda read: _printed_whole(ctx, read))


def _printed_whole(ctx: FileContext, read: ast.Name) -> ast.AST | None:
    """Where this read writes its tensor as text, whole, or reads its ``grad_fn``."""
    parent = ctx.parents.get(read)
    t = type(parent)
    if t is ast.Attribute and parent.attr == "grad_fn":  # type: ignore[union-attr]
        return parent
    if t is ast.FormattedValue and parent.format_spec is None:  # type: ignore[union-attr]
        return parent
    if t is ast.Call and read in parent.args:  # type: ignore[union-attr]
        func = parent.func  # type: ignore[union-attr]
        if (type(func) is ast.Name and func.id in ("str", "repr")) or output_call(ctx, parent) is not None:  # type: ignore[arg-type]
            return parent
    return None
