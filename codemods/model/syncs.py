"""Where a file reads a tensor's value back to the host.

A *sync site* is one expression that makes Python wait for the device:
``t.item()``, ``t.tolist()``, ``float(t)`` / ``int(t)`` / ``bool(t)``, a
tensor used as a truth value (``if t:``, ``while``, ``assert``, ``and`` /
``or`` / ``not``, a comprehension's ``if``), a tensor formatted into text (f-strings, ``print``,
logging), ``t.cpu()`` / ``t.numpy()`` / ``t.to("cpu")`` (also of a module's output,
``model(x).cpu()``, as *possibly* a tensor), tensors used as Python sizes and
slice bounds (``range(n)``, ``x[:n]``), membership tests (``x in t`` calls
``Tensor.__contains__``), ``%`` and ``str.format`` formatting of tensors (also
unpacked: ``"%g %g" % tuple(t)``), ``math.isfinite(t)`` and ``max(t, c)`` of a tensor, and
explicit device syncs (``torch.cuda.synchronize()``, or a name bound to it).

Each site says how sure provenance is that the value is a tensor
(:class:`Certainty`; rewrites require :attr:`Certainty.TENSOR`), and whether
the tensor certainly lives in host memory (``on_host``): such a read waits for
no device, so it is only a site in traced code, where it breaks the graph.

Rules look the sites up here and *claim* the ones they report, so that a
site is reported once, by the most specific rule.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from .. import gen
from .aliasing import changed_in_place
from .context import FileContext
from .name_reads import reads_of
from .output_calls import LOG_METHODS, argument_values, call_arguments, output_call  # noqa: F401  (LOG_METHODS: re-exported)
from .provenance import CONTAINER_ADDS, Certainty, Kind, copy_is_read, dotted_name, is_text
from .tree import callee_name

# Explicit waits for the device: ``torch.cuda.synchronize()`` and its kin.
SYNCHRONIZE_CALLS = frozenset(
    {"torch.cuda.synchronize", "torch.xpu.synchronize", "torch.mps.synchronize", "torch.npu.synchronize",
     "torch.accelerator.synchronize", "torch.cuda.current_stream.synchronize"}
)


# Reads that Dynamo traces into the graph: they cost a host sync on a device, no graph break.
_TRACED_KINDS = frozenset({"synchronize", "cpu", "numpy"})


@dataclass(eq=False)
class SyncSite:
    node: ast.AST  # the expression that syncs
    # "item", "tolist", "float", "int", "complex", "bool", "truth", "format", "cpu", "numpy", "size",
    # "contains" (``x in t``), "elements" (``all(t)`` / ``any(t)``), "compare" (``max(t, c)``),
    # "metric" (a tensor given to ``writer.add_scalar``), "synchronize" (``torch.cuda.synchronize()``)
    kind: str
    value: ast.expr  # the tensor expression that is read
    certain: bool  # provenance proved the value is a tensor (certainty is Certainty.TENSOR)
    certainty: Certainty = Certainty.TENSOR
    on_host: bool = False  # the tensor certainly lives in host memory: a graph break, no device sync
    # Why Dynamo traces the read without a break (the file sets ``capture_scalar_outputs``, say): the
    # graph break is gone, the host sync is not. Set by the rules of data-dependent values.
    captured: str = ""
    # The method that reads the tensors when the value is shown (``print(meter)`` runs
    # ``Meter.__str__``, which reads them), where the value is no tensor itself.
    via: ast.FunctionDef | None = None

    @property
    def host_sync(self) -> bool:
        """Does the read make the host wait for a device?"""
        return not self.on_host

    @property
    def graph_break(self) -> bool:
        """In traced code, does it break the graph? Every read does, unless the program's
        configuration lets Dynamo trace it (``captured``); torch traces an explicit
        ``synchronize()`` into the graph, and a copy to host memory (``t.cpu()``, and
        ``t.numpy()``, which Dynamo traces as a NumPy array)."""
        return self.kind not in _TRACED_KINDS and not self.captured


def is_item_call(node: ast.AST) -> bool:
    """``x.item()``."""
    return (
        type(node) is ast.Call
        and type(node.func) is ast.Attribute  # type: ignore[attr-defined]
        and node.func.attr == "item"  # type: ignore[attr-defined]
        and not node.args  # type: ignore[attr-defined]
        and not node.keywords  # type: ignore[attr-defined]
    )


def _no_arguments(call: ast.Call) -> bool:
    return not call.args and not call.keywords


def _host_copy(expr: ast.expr) -> bool:
    """``x.cpu()``: of a tensor, whatever ``x`` was bound to elsewhere, when ``.numpy()`` reads it
    (a module's ``cpu()`` gives the module, which has no ``numpy()``)."""
    return type(expr) is ast.Call and type(expr.func) is ast.Attribute and expr.func.attr == "cpu" and \
        _no_arguments(expr)  # type: ignore[attr-defined,arg-type]


# Sites where the node itself reads the value (``t.item()``, ``float(t)``): wherever
# that node stands, it still reads. (A truth test or a formatting syncs by where the
# tensor stands: moved into ``torch.where``, it reads nothing.)
SELF_READING_KINDS = frozenset({"item", "tolist", "float", "int", "complex", "bool", "cpu", "numpy"})


def kept_reads(ctx: FileContext, sites: list[SyncSite], replacements) -> list[SyncSite]:
    """The sites of ``sites`` whose read a rewrite keeps: the reading node stands,
    as it was, in one of ``replacements`` (a lambda's body excepted: a deferred
    read runs later, not where the value was read)."""
    wanted = [s for s in sites if s.kind in SELF_READING_KINDS]
    if not wanted:
        return []
    kept = {id(n) for n in gen.kept_nodes(ctx, [s.node for s in wanted], list(replacements))}
    return [s for s in wanted if id(s.node) in kept]


def find_sync_sites(ctx: FileContext) -> list[SyncSite]:
    sites: list[SyncSite] = []
    seen: set[int] = set()  # ids of the nodes that are sites (or part of one)

    def add(node: ast.AST, kind: str, value: ast.expr, certain: bool | None = None,
            host: bool = False, holds: bool = False, via: ast.FunctionDef | None = None) -> None:
        """``host``: the read works only on a tensor in host memory (``.numpy()``); ``holds``:
        ``value`` is a container of certain tensors, each one read, or (``via``) an object whose
        method ``via`` reads them when it is shown."""
        if id(node) in seen:
            return
        seen.add(id(node))
        # (``torch.tensor(xs)`` reads the tensors ``xs`` holds, a list: the elements are tensors.)
        certainty = Certainty.TENSOR if kind in ("synchronize", "build") or holds else ctx.certainty(value)
        if certain is not None and not certain:
            certainty = Certainty.POSSIBLY
        if certainty is Certainty.POSSIBLY and uses_jax:
            return  # a value fixitem cannot place in a file that uses JAX is as likely a JAX array
        on_host = kind != "synchronize" and (host or ctx.on_cpu(value))
        if on_host and (kind in _TRACED_KINDS or not ctx.in_traced_code(node)):
            return  # a host tensor read outside traced code costs nothing, nor a copy of one anywhere
        sites.append(SyncSite(node, kind, value, certainty is Certainty.TENSOR, certainty, on_host, via=via))

    uses_jax = ctx.provenance.imports.imports_module("jax", "flax")
    shown_by = _text_methods(ctx)
    objects: list[ast.Name] = []  # objects of this file's classes that output shows (``print(meter)``)

    def add_held(value: ast.expr, as_text: bool) -> None:
        """The reads of a value formatted into text that is no tensor: each tensor of a display
        (``print({"m": x.mean()})``), those a named container holds (``print(losses)``), and,
        for an object of this file's classes shown by ``str()`` (``as_text``), what its
        ``__str__`` reads (worked out once every site is found)."""
        for shown in _displayed_tensors(ctx, value):
            add(shown, "format", shown)
        held = _held_tensors(ctx, value)
        if held:
            add(value, "format", value, holds=True, host=all(ctx.on_cpu(e) for e in held))
        elif type(value) is ast.Name and shown_by and as_text:
            objects.append(value)

    def possible(value: ast.expr) -> bool:
        return ctx.certainty(value) is not Certainty.NOT_TENSOR

    for call in ctx.nodes(ast.Call):
        assert type(call) is ast.Call
        func = call.func
        if type(func) is ast.Attribute:
            method = func.attr
            receiver = func.value
            if method == "item" and _no_arguments(call):
                if possible(receiver):
                    add(call, "item", receiver)
            elif method == "tolist" and _no_arguments(call) and possible(receiver):
                add(call, "tolist", receiver)
            elif method == "numpy" and (ctx.is_tensor(receiver) or module_output(ctx, receiver) or _host_copy(receiver)):
                # ``x.detach().cpu().numpy()`` is one copy, of ``x``.
                inner = receiver
                chain = []
                while type(inner) is ast.Call and type(inner.func) is ast.Attribute and (  # type: ignore[attr-defined]
                    inner.func.attr in ("cpu", "detach") or (inner.func.attr == "to" and _moves_to_cpu(inner))  # type: ignore[attr-defined]
                ):
                    chain.append(inner)
                    inner = inner.func.value  # type: ignore[attr-defined]
                # ``.numpy()`` works only on a tensor in host memory (it raises for a device
                # tensor): without a ``.cpu()`` before it, it copies nothing from a device.
                copies = any(c.func.attr in ("cpu", "to") for c in chain)  # type: ignore[attr-defined]
                add(call, "numpy", inner if chain and ctx.certainty(inner) is not Certainty.NOT_TENSOR else receiver,
                    host=not copies)
                seen.update(id(c) for c in chain)
            elif method == "cpu" and _no_arguments(call) and (
                    ctx.is_tensor(receiver) or module_output(ctx, receiver) or copy_is_read(call, ctx.parents)):
                add(call, "cpu", receiver)
            elif method == "to" and _moves_to_cpu(call) and ctx.is_tensor(receiver):
                add(call, "cpu", receiver)
            elif method == "format" and _is_text(ctx, receiver):
                # ``"{:.3f}".format(loss)``
                for value in argument_values(call):
                    if ctx.is_tensor(value) and not is_item_call(value):
                        add(value, "format", value)
        elif type(func) is ast.Name and len(call.args) + len(call.keywords) == 1 and (
                call.args or call.keywords[0].arg is None):
            # One argument, not a keyword one (``*x`` and ``**x`` count, as they did).
            arg = call.args[0] if call.args else call.keywords[0].value
            if type(arg) is ast.Starred:
                arg = arg.value
            name = func.id
            if name in ("float", "int", "bool", "complex") and ctx.is_tensor(arg):
                add(call, name, arg)
            elif name in ("range",) and ctx.is_tensor(arg):
                add(arg, "size", arg)
            elif name in ("all", "any") and ctx.certainly_tensor(arg):
                add(call, "elements", arg)  # ``all(t)``: ``bool()`` of each element in turn
        if type(func) is ast.Name and func.id in ("max", "min") and len(call.args) + len(call.keywords) >= 2 and \
                _builtin(ctx, func):
            # ``max(1e-3 * norm, 1e-6)`` compares on the host: ``bool()`` of a tensor comparison.
            tensor = next((a for a in call.args if type(a) is not ast.Starred and ctx.is_tensor(a)), None)
            if tensor is not None:
                add(call, "compare", tensor)
        elif type(func) is ast.Name and func.id in ("max", "min") and len(call.args) == 1 and not call.keywords and \
                type(call.args[0]) is not ast.Starred and _builtin(ctx, func) and \
                ctx.provenance.element_kind(call.args[0]) is Kind.TENSOR:
            # ``max(g.norm() for g in grads)``: each comparison of two elements is ``bool()`` of a tensor.
            elements = call.args[0]
            add(call, "compare", elements.elt if type(elements) in (ast.GeneratorExp, ast.ListComp) else elements)  # type: ignore[attr-defined]
        elif (call.args or call.keywords) and (ctx.provenance.imports.qualify(func) or "").startswith("math."):
            # ``math.isfinite(norm)``, ``math.sqrt(var)``: ``float()`` of the tensor.
            tensor = next((value for _, star, value in call_arguments(call) if not star and ctx.is_tensor(value)), None)
            if tensor is not None:
                add(call, "float", tensor)
        if is_synchronize(ctx, call):
            add(call, "synchronize", call)
        elif call.args and type(call.args[0]) is not ast.Starred and _builds_from_elements(ctx, call):
            add(call, "build", call.args[0], host=_elements_on_host(ctx, call.args[0]))
        found = output_call(ctx, call)
        if found is not None:
            # A metric writer reads a tensor it is given itself (TensorBoard's ``make_np`` copies it
            # to the host); text output formats it.
            kind = "format" if found.kind.formats_text else "metric"
            for value in argument_values(call):
                if (ctx.is_tensor(value) if kind == "format" else ctx.certainly_tensor(value)) and (
                    not is_item_call(value)
                ):
                    add(value, kind, value)
                elif kind == "format":
                    add_held(value, as_text=True)

    for node in ctx.nodes(ast.FormattedValue):
        expression = node.value  # type: ignore[attr-defined]
        # (A message on the error path is left out below: not asked about first. Most
        # f-strings of a library are the messages of its ``raise`` statements.)
        if not _on_error_path(ctx, expression):
            if ctx.is_tensor(expression):
                add(expression, "format", expression)
            else:
                add_held(expression, as_text=node.conversion in (-1, ord("s")))  # type: ignore[attr-defined]

    for operation in ctx.nodes(ast.BinOp):
        # ``"%.3f" % loss`` and ``"%d: %.3f" % (step, loss)``
        if type(operation.op) is ast.Mod and is_text(operation.left):  # type: ignore[attr-defined]
            for value in _percent_values(ctx, operation.right):  # type: ignore[attr-defined]
                if ctx.is_tensor(value) and not is_item_call(value):
                    add(value, "format", value)

    for comparison in ctx.nodes(ast.Compare):
        # ``x in t`` runs ``Tensor.__contains__``: ``(t == x).any().item()``. Only on a
        # certain tensor and for an element that can be one: ``"loss" in outputs`` is a dict's.
        element = comparison.left  # type: ignore[attr-defined]
        for op, comparator in zip(comparison.ops, comparison.comparators):  # type: ignore[attr-defined]
            if (
                (type(op) is ast.In or type(op) is ast.NotIn)
                and ctx.certainly_tensor(comparator)
                and ctx.kind(element) in (Kind.NUMBER, Kind.TENSOR, Kind.UNKNOWN)
                and not _is_text(ctx, element)
            ):
                add(comparison, "contains", comparator)
            element = comparator

    for comparison in ctx.nodes(ast.Compare):
        # ``lo <= t <= hi`` is ``lo <= t and t <= hi``: Python takes the truth of each
        # comparison but the last, ``bool()`` of a tensor where one side is one.
        operands = [comparison.left, *comparison.comparators]  # type: ignore[attr-defined]
        ops = comparison.ops  # type: ignore[attr-defined]
        for i in range(len(ops) - 1):
            if type(ops[i]) in (ast.Is, ast.IsNot, ast.In, ast.NotIn):
                continue
            tensor = next((o for o in operands[i:i + 2] if ctx.is_tensor(o)), None)
            if tensor is not None:
                add(comparison, "truth", tensor)
                break

    for test in _truth_tests(ctx):
        if ctx.is_tensor(test) and not ctx.provenance.presumed_tensor(test):
            add(test, "truth", test)
        elif type(test) is ast.Name and ctx.provenance.kind_unless_none(test) is Kind.TENSOR:
            add(test, "truth", test, certain=False)  # ``if acc:`` of ``None`` or a tensor

    for node in ctx.nodes(ast.Slice):
        for bound in (node.lower, node.upper, node.step):  # type: ignore[attr-defined]
            if bound is not None and ctx.is_tensor(bound):
                add(bound, "size", bound)

    for shown in objects:
        # ``print(confmat)`` runs ``ConfusionMatrix.__str__``: its reads of device tensors happen here.
        cls = ctx.provenance.instance_class(shown)
        method = shown_by.get(cls) if cls is not None else None  # type: ignore[call-overload]
        if method is not None and any(s.certain and not s.on_host and ctx.below(s.node, method) for s in sites):
            add(shown, "format", shown, holds=True, via=method)

    sites = [s for s in sites if not _on_error_path(ctx, s.node)]
    sites.sort(key=lambda s: ctx.positions.offset(s.node))
    return sites


def _text_methods(ctx: FileContext) -> dict[ast.ClassDef, ast.FunctionDef]:
    """The method ``str()`` of an object of each module-level class of the file runs, where the
    class defines it: ``__str__``, else ``__repr__`` of a class without bases (a base's
    ``__str__`` would come first)."""
    found: dict[ast.ClassDef, ast.FunctionDef] = {}
    for cls in ctx.module.body:
        if type(cls) is not ast.ClassDef:
            continue
        methods = {m.name: m for m in cls.body if type(m) is ast.FunctionDef and m.name in ("__str__", "__repr__")}
        method = methods.get("__str__") or (methods.get("__repr__") if not cls.bases and not cls.keywords else None)
        if method is not None:
            found[cls] = method
    return found


# Functions that build a new tensor from nested Python sequences, reading each number in them.
_BUILDERS = frozenset({"torch.tensor", "torch.as_tensor", "torch.asarray"})
_BUILDER_NAMES = frozenset(q.rpartition(".")[2] for q in _BUILDERS)


def _builds_from_elements(ctx: FileContext, call: ast.Call) -> bool:
    """``torch.tensor(xs)`` of a list (or tuple) of tensors (``torch.tensor([a.sum(), b.sum()])``,
    yolov5's ``torch.tensor(xyxy)`` of ``for *xyxy, conf, cls in det``): the new tensor is
    built from each element's value, read on the host one by one."""
    if callee_name(call.func) not in _BUILDER_NAMES or (ctx.provenance.imports.qualify(call.func) or "") not in _BUILDERS:
        return False  # (the name first: this is asked of every call of the file)
    data = call.args[0]
    kind = ctx.kind(data)
    return kind is not Kind.TENSOR and kind is not Kind.NUMPY and ctx.provenance.element_kind(data) is Kind.TENSOR


def _elements_on_host(ctx: FileContext, data: ast.expr) -> bool:
    """Are the tensors the list ``data`` holds in host memory (a list display of host tensors,
    or the rest of a row of a host tensor)?"""
    if type(data) in (ast.List, ast.Tuple):
        return all(type(e) is not ast.Starred and ctx.on_cpu(e) for e in data.elts)  # type: ignore[attr-defined]
    rest = ctx.provenance.rest_source(data)
    return rest is not None and ctx.on_cpu(rest)


_DISPLAYS = (ast.List, ast.Tuple, ast.Set, ast.Dict)


def _displayed_tensors(ctx: FileContext, value: ast.expr) -> list[ast.expr]:
    """The tensors a list, tuple, set or dict display written as ``value`` holds (in nested
    displays too): text made of the container shows each one's ``repr``, which reads it."""
    if type(value) not in _DISPLAYS:
        return []
    found: list[ast.expr] = []
    pending = [value]
    while pending:
        display = pending.pop()
        elements = [*display.keys, *display.values] if type(display) is ast.Dict else display.elts  # type: ignore[attr-defined]
        for element in elements:
            if element is None or type(element) is ast.Starred:
                continue  # ``{**extra}``, ``[*xs]``: what they hold is not written here
            if type(element) in _DISPLAYS:
                pending.append(element)
            elif ctx.is_tensor(element) and not is_item_call(element):
                found.append(element)
    return found


# Builtins that read a container they are given and change nothing in it.
_READING_BUILTINS = frozenset({"len", "str", "repr", "list", "tuple", "dict", "set", "sorted", "sum", "min", "max",
                               "any", "all", "enumerate", "zip", "iter", "reversed", "isinstance", "id"})


def _held_tensors(ctx: FileContext, value: ast.expr) -> list[ast.expr]:
    """The certain tensors the list, tuple, set or dict named ``value`` holds where text is
    made of it (see :meth:`Provenance.tensors_shown`), where nothing in its function changes
    the container but adding to it (``d["loss"] = d["loss"].item()`` puts a number in place
    of a tensor) or hands it to a call that might."""
    held = ctx.provenance.tensors_shown(value)
    if not held:
        return []
    scope = ctx.provenance.scope_of(value).lookup(value.id)  # type: ignore[attr-defined]
    if scope is None or changed_in_place(ctx, scope, value.id, besides=CONTAINER_ADDS) is not None:  # type: ignore[attr-defined]
        return []
    for read in reads_of(ctx, scope, value.id, nested=True):  # type: ignore[attr-defined]
        parent = ctx.parents.get(read) if read is not None else None
        if type(parent) is ast.keyword or type(parent) is ast.Starred:
            parent = ctx.parents.get(parent)
        if type(parent) is not ast.Call or parent.func is read:  # type: ignore[attr-defined]
            continue
        func = parent.func  # type: ignore[attr-defined]
        if type(func) is ast.Name and func.id in _READING_BUILTINS and _builtin(ctx, func):
            continue
        if output_call(ctx, parent) is None:  # type: ignore[arg-type]
            return []  # ``to_float(stats)`` may change what it holds
    return held


def _percent_values(ctx: FileContext, right: ast.expr) -> list[ast.expr]:
    """The values ``"..." % right`` formats: the items of a tuple, the tensor unpacked by
    ``(*t,)`` or ``tuple(t)`` (each element is formatted: one read of it)."""
    if type(right) is ast.Tuple:
        return [e.value if type(e) is ast.Starred else e for e in right.elts]  # type: ignore[attr-defined]
    if type(right) is ast.Call and type(right.func) is ast.Name and right.func.id in ("tuple", "list") and \
            len(right.args) == 1 and not right.keywords and type(right.args[0]) is not ast.Starred and \
            _builtin(ctx, right.func):
        return [right.args[0]]
    return [right]


def _builtin(ctx: FileContext, name: ast.Name) -> bool:
    """``name`` is the builtin of that name (nothing in the file rebinds it)."""
    return ctx.provenance.scope_of(name).lookup(name.id) is None


def is_synchronize(ctx: FileContext, call: ast.Call) -> bool:
    """``torch.cuda.synchronize()`` (and the other devices'), ``torch.cuda.current_stream().synchronize()``,
    and a name bound to one (``synchronize = torch.cuda.synchronize if cuda else (lambda: None)``)."""
    func = call.func
    if type(func) is ast.Name and _no_arguments(call):
        return any(q in SYNCHRONIZE_CALLS for q in ctx.provenance.callee_names(func))
    if not (type(func) is ast.Attribute and func.attr == "synchronize"):  # type: ignore[attr-defined]
        return False
    q = ctx.provenance.imports.qualify(func) or ""
    if q in SYNCHRONIZE_CALLS:
        return True
    receiver = func.value  # type: ignore[attr-defined]
    if type(receiver) is ast.Call:
        inner = ctx.provenance.imports.qualify(receiver.func) or ""
        return inner in ("torch.cuda.current_stream", "torch.cuda.default_stream", "torch.xpu.current_stream")
    return False


def module_output(ctx: FileContext, expr: ast.expr) -> bool:
    """``model(x)`` where ``model`` is a callable object of this function (a parameter
    or a local, not a function or class defined or imported here): almost always a
    module, whose output is possibly a tensor. Also a name bound only from such a call."""
    if ctx.certainty(expr) is not Certainty.POSSIBLY:
        return False
    if type(expr) is ast.Name:
        scope = ctx.provenance.scope_of(expr).lookup(expr.id)
        bindings = scope.bindings.get(expr.id, []) if scope is not None else []
        return len(bindings) == 1 and bindings[0][0] == "value" and type(bindings[0][1]) is ast.Call and (
            _callable_object(ctx, bindings[0][1])
        )
    return type(expr) is ast.Call and _callable_object(ctx, expr)  # type: ignore[arg-type]


def _callable_object(ctx: FileContext, call: ast.Call) -> bool:
    if _no_arguments(call):
        return False
    func = call.func
    if type(func) is ast.Attribute:
        return type(func.value) is ast.Name and func.value.id == "self" and func.attr not in ("forward",)  # type: ignore[attr-defined]
    if type(func) is not ast.Name:
        return False
    scope = ctx.provenance.scope_of(func).lookup(func.id)  # type: ignore[attr-defined]
    if scope is None:
        return False
    return all(how in ("param", "value") for how, _ in scope.bindings.get(func.id, []))  # type: ignore[attr-defined]


def _is_text(ctx: FileContext, expr: ast.AST) -> bool:
    """A string literal or an f-string."""
    t = type(expr)
    return t is ast.JoinedStr or (t is ast.Constant and isinstance(expr.value, (str, bytes)))  # type: ignore[attr-defined]


def _on_error_path(ctx: FileContext, node: ast.AST) -> bool:
    """Inside ``raise ...``, an ``assert``'s message, or the message of a check that makes it
    only when the check fails (``torch._check(cond, lambda: f"... {int(n)}")``): runs only
    when the program is failing anyway, so the read costs nothing in a working run."""
    child = node
    for parent in ctx.ancestors(node):
        if type(parent) is ast.Raise:
            return True
        if type(parent) is ast.Assert:
            return parent.msg is not None and child is parent.msg  # type: ignore[attr-defined]
        if type(child) is ast.Lambda and _message_of_check(ctx, parent, child):  # type: ignore[arg-type]
            return True
        if isinstance(parent, ast.stmt):
            return False
        child = parent
    return False


def _message_of_check(ctx: FileContext, parent: ast.AST, message: ast.Lambda) -> bool:
    """``message`` is what the call it is given to (``torch._check(cond, msg)``, or a function
    of the program named as one: ``torch_compilable_check``, ``_check_shape``) says when it fails."""
    call = ctx.parents.get(parent) if type(parent) is ast.keyword else parent
    if type(call) is not ast.Call:
        return False
    if "check" not in callee_name(call.func).lower() or message.args.args:  # type: ignore[attr-defined]
        return False
    return (len(call.args) > 1 and call.args[1] is message) or any(
        k.arg in ("msg", "message") and k.value is message for k in call.keywords)


def _moves_to_cpu(call: ast.Call) -> bool:
    for keyword, _, value in call_arguments(call):
        if keyword is not None and keyword != "device":
            continue
        if type(value) is ast.Constant and value.value == "cpu":  # type: ignore[attr-defined]
            return True
        if type(value) is ast.Call and dotted_name(value.func) in ("torch.device", "device"):  # type: ignore[attr-defined]
            arguments = argument_values(value)  # type: ignore[arg-type]
            first = arguments[0] if arguments else None
            if type(first) is ast.Constant and first.value == "cpu":  # type: ignore[attr-defined]
                return True
    return False


def _truth_tests(ctx: FileContext) -> list[ast.expr]:
    """The expressions Python takes the truth of: the tests of ``if`` / ``while`` / ``assert`` /
    conditional expressions and comprehensions' ``if``, the operand of ``not``, and the operands
    of ``and`` / ``or`` (``if a and b:``: the operands are the truth tests, not the whole
    expression)."""
    tests: list[ast.expr] = []
    for node in ctx.nodes(ast.If, ast.While, ast.Assert, ast.IfExp, ast.comprehension, ast.UnaryOp, ast.BoolOp):
        t = type(node)
        if t is ast.comprehension:
            tests.extend(node.ifs)  # type: ignore[attr-defined]
        elif t is ast.UnaryOp:
            if type(node.op) is ast.Not:  # type: ignore[attr-defined]
                tests.append(node.operand)  # type: ignore[attr-defined]
        elif t is ast.BoolOp:
            tests.extend(node.values)  # type: ignore[attr-defined]
        else:
            tests.append(node.test)  # type: ignore[attr-defined]
    return [t for t in tests if type(t) is not ast.BoolOp and not (type(t) is ast.UnaryOp and type(t.op) is ast.Not)]  # type: ignore[attr-defined]
