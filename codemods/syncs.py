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

from dataclasses import dataclass

import libcst as cst

from .context import FileContext
from .output_calls import LOG_METHODS, output_call  # noqa: F401  (LOG_METHODS: re-exported)
from .provenance import Certainty, Kind, dotted_name, is_text
from .tree import children_of


# Explicit waits for the device: ``torch.cuda.synchronize()`` and its kin.
SYNCHRONIZE_CALLS = frozenset(
    {"torch.cuda.synchronize", "torch.xpu.synchronize", "torch.mps.synchronize", "torch.npu.synchronize",
     "torch.accelerator.synchronize", "torch.cuda.current_stream.synchronize"}
)


@dataclass(eq=False)
class SyncSite:
    node: cst.CSTNode  # the expression that syncs
    # "item", "tolist", "float", "int", "bool", "truth", "format", "cpu", "numpy", "size",
    # "contains" (``x in t``), "elements" (``all(t)`` / ``any(t)``), "compare" (``max(t, c)``),
    # "metric" (a tensor given to ``writer.add_scalar``), "synchronize" (``torch.cuda.synchronize()``)
    kind: str
    value: cst.BaseExpression  # the tensor expression that is read
    certain: bool  # provenance proved the value is a tensor (certainty is Certainty.TENSOR)
    certainty: Certainty = Certainty.TENSOR
    on_host: bool = False  # the tensor certainly lives in host memory: a graph break, no device sync

    @property
    def host_sync(self) -> bool:
        """Does the read make the host wait for a device?"""
        return not self.on_host

    @property
    def graph_break(self) -> bool:
        """In traced code, does it break the graph? Every read does; torch traces an
        explicit ``synchronize()`` into the graph."""
        return self.kind != "synchronize"


def is_item_call(node: cst.CSTNode) -> bool:
    """``x.item()``."""
    return (
        isinstance(node, cst.Call)
        and isinstance(node.func, cst.Attribute)
        and node.func.attr.value == "item"
        and not node.args
    )


# Sites where the node itself reads the value (``t.item()``, ``float(t)``): wherever
# that node stands, it still reads. (A truth test or a formatting syncs by where the
# tensor stands: moved into ``torch.where``, it reads nothing.)
SELF_READING_KINDS = frozenset({"item", "tolist", "float", "int", "bool", "cpu", "numpy"})


def kept_reads(sites: list[SyncSite], replacements) -> list[SyncSite]:
    """The sites of ``sites`` whose read a rewrite keeps: the reading node stands,
    as it was, in one of ``replacements`` (a lambda's body excepted: a deferred
    read runs later, not where the value was read)."""
    wanted = {id(s.node): s for s in sites if s.kind in SELF_READING_KINDS}
    if not wanted:
        return []
    found: list[SyncSite] = []
    stack = [r for r in replacements if isinstance(r, cst.CSTNode)]
    stack += [n for r in replacements if isinstance(r, cst.FlattenSentinel) for n in r.nodes]
    while stack:
        node = stack.pop()
        if isinstance(node, cst.Lambda):
            continue
        site = wanted.pop(id(node), None)
        if site is not None:
            found.append(site)
            continue
        stack.extend(children_of(node))
    return [s for s in sites if s in found]


def find_sync_sites(ctx: FileContext) -> list[SyncSite]:
    sites: list[SyncSite] = []
    seen: set[cst.CSTNode] = set()

    def add(node: cst.CSTNode, kind: str, value: cst.BaseExpression, certain: bool | None = None,
            host: bool = False) -> None:
        """``host``: the read works only on a tensor in host memory (``.numpy()``)."""
        if node in seen:
            return
        seen.add(node)
        certainty = Certainty.TENSOR if kind == "synchronize" else ctx.certainty(value)
        if certain is not None and not certain:
            certainty = Certainty.POSSIBLY
        on_host = kind != "synchronize" and (host or ctx.on_cpu(value))
        if on_host and not ctx.in_traced_code(node):
            return  # a host tensor read outside traced code costs nothing
        sites.append(SyncSite(node, kind, value, certainty is Certainty.TENSOR, certainty, on_host))

    def possible(value: cst.BaseExpression) -> bool:
        return ctx.certainty(value) is not Certainty.NOT_TENSOR

    for call in ctx.nodes(cst.Call):
        assert isinstance(call, cst.Call)
        func = call.func
        if isinstance(func, cst.Attribute):
            method = func.attr.value
            receiver = func.value
            if method == "item" and not call.args:
                if possible(receiver):
                    add(call, "item", receiver)
            elif method == "tolist" and not call.args and ctx.is_tensor(receiver):
                add(call, "tolist", receiver)
            elif method == "numpy" and (ctx.is_tensor(receiver) or module_output(ctx, receiver)):
                # ``x.detach().cpu().numpy()`` is one copy, of ``x``.
                inner = receiver
                chain = []
                while isinstance(inner, cst.Call) and isinstance(inner.func, cst.Attribute) and (
                    inner.func.attr.value in ("cpu", "detach") or (inner.func.attr.value == "to" and _moves_to_cpu(inner))
                ):
                    chain.append(inner)
                    inner = inner.func.value
                # ``.numpy()`` works only on a tensor in host memory (it raises for a device
                # tensor): without a ``.cpu()`` before it, it copies nothing from a device.
                copies = any(c.func.attr.value in ("cpu", "to") for c in chain)  # type: ignore[attr-defined]
                add(call, "numpy", inner if chain and ctx.certainty(inner) is not Certainty.NOT_TENSOR else receiver,
                    host=not copies)
                seen.update(chain)
            elif method == "cpu" and not call.args and (ctx.is_tensor(receiver) or module_output(ctx, receiver)):
                add(call, "cpu", receiver)
            elif method == "to" and ctx.is_tensor(receiver) and _moves_to_cpu(call):
                add(call, "cpu", receiver)
            elif method == "format" and _is_text(ctx, receiver):
                # ``"{:.3f}".format(loss)``
                for arg in call.args:
                    if ctx.is_tensor(arg.value) and not is_item_call(arg.value):
                        add(arg.value, "format", arg.value)
        elif isinstance(func, cst.Name) and len(call.args) == 1 and call.args[0].keyword is None:
            arg = call.args[0].value
            if func.value in ("float", "int", "bool", "complex") and ctx.is_tensor(arg):
                add(call, func.value if func.value != "complex" else "float", arg)
            elif func.value in ("range",) and ctx.is_tensor(arg):
                add(arg, "size", arg)
            elif func.value in ("all", "any") and ctx.certainly_tensor(arg):
                add(call, "elements", arg)  # ``all(t)``: ``bool()`` of each element in turn
        if isinstance(func, cst.Name) and func.value in ("max", "min") and len(call.args) >= 2 and _builtin(ctx, func):
            # ``max(1e-3 * norm, 1e-6)`` compares on the host: ``bool()`` of a tensor comparison.
            tensor = next((a.value for a in call.args if not a.star and a.keyword is None and ctx.is_tensor(a.value)), None)
            if tensor is not None:
                add(call, "compare", tensor)
        elif (ctx.provenance.imports.qualify(func) or "").startswith("math.") and call.args:
            # ``math.isfinite(norm)``, ``math.sqrt(var)``: ``float()`` of the tensor.
            tensor = next((a.value for a in call.args if not a.star and ctx.is_tensor(a.value)), None)
            if tensor is not None:
                add(call, "float", tensor)
        if is_synchronize(ctx, call):
            add(call, "synchronize", call)
        found = output_call(ctx, call)
        if found is not None:
            # A metric writer reads a tensor it is given itself (TensorBoard's ``make_np`` copies it
            # to the host); text output formats it.
            kind = "format" if found.kind.formats_text else "metric"
            for arg in call.args:
                if (ctx.is_tensor(arg.value) if kind == "format" else ctx.certainly_tensor(arg.value)) and (
                    not is_item_call(arg.value)
                ):
                    add(arg.value, kind, arg.value)

    for node in ctx.nodes(cst.FormattedStringExpression):
        assert isinstance(node, cst.FormattedStringExpression)
        if ctx.is_tensor(node.expression):
            add(node.expression, "format", node.expression)

    for operation in ctx.nodes(cst.BinaryOperation):
        # ``"%.3f" % loss`` and ``"%d: %.3f" % (step, loss)``
        assert isinstance(operation, cst.BinaryOperation)
        if isinstance(operation.operator, cst.Modulo) and is_text(operation.left):
            for value in _percent_values(ctx, operation.right):
                if ctx.is_tensor(value) and not is_item_call(value):
                    add(value, "format", value)

    for comparison in ctx.nodes(cst.Comparison):
        # ``x in t`` runs ``Tensor.__contains__``: ``(t == x).any().item()``. Only on a
        # certain tensor and for an element that can be one: ``"loss" in outputs`` is a dict's.
        assert isinstance(comparison, cst.Comparison)
        element = comparison.left
        for target in comparison.comparisons:
            if (
                isinstance(target.operator, (cst.In, cst.NotIn))
                and ctx.certainly_tensor(target.comparator)
                and ctx.kind(element) in (Kind.NUMBER, Kind.TENSOR, Kind.UNKNOWN)
                and not _is_text(ctx, element)
            ):
                add(comparison, "contains", target.comparator)
            element = target.comparator

    for test in _truth_tests(ctx):
        if ctx.is_tensor(test) and not ctx.provenance.presumed_tensor(test):
            add(test, "truth", test)

    for node in ctx.nodes(cst.Slice):
        assert isinstance(node, cst.Slice)
        for bound in (node.lower, node.upper, node.step):
            if bound is not None and ctx.is_tensor(bound):
                add(bound, "size", bound)

    sites = [s for s in sites if not _on_error_path(ctx, s.node)]
    sites.sort(key=lambda s: ctx.positions.offset(s.node))
    return sites


def _percent_values(ctx: FileContext, right: cst.BaseExpression) -> list[cst.BaseExpression]:
    """The values ``"..." % right`` formats: the items of a tuple, the tensor unpacked by
    ``(*t,)`` or ``tuple(t)`` (each element is formatted: one read of it)."""
    if isinstance(right, cst.Tuple):
        return [e.value for e in right.elements]
    if isinstance(right, cst.Call) and isinstance(right.func, cst.Name) and right.func.value in ("tuple", "list") and \
            len(right.args) == 1 and right.args[0].keyword is None and not right.args[0].star and _builtin(ctx, right.func):
        return [right.args[0].value]
    return [right]


def _builtin(ctx: FileContext, name: cst.Name) -> bool:
    """``name`` is the builtin of that name (nothing in the file rebinds it)."""
    return ctx.provenance.scope_of(name).lookup(name.value) is None


def is_synchronize(ctx: FileContext, call: cst.Call) -> bool:
    """``torch.cuda.synchronize()`` (and the other devices'), ``torch.cuda.current_stream().synchronize()``,
    and a name bound to one (``synchronize = torch.cuda.synchronize if cuda else (lambda: None)``)."""
    func = call.func
    if isinstance(func, cst.Name) and not call.args:
        return any(q in SYNCHRONIZE_CALLS for q in ctx.provenance.callee_names(func))
    if not (isinstance(func, cst.Attribute) and func.attr.value == "synchronize"):
        return False
    q = ctx.provenance.imports.qualify(func) or ""
    if q in SYNCHRONIZE_CALLS:
        return True
    receiver = func.value
    if isinstance(receiver, cst.Call):
        inner = ctx.provenance.imports.qualify(receiver.func) or ""
        return inner in ("torch.cuda.current_stream", "torch.cuda.default_stream", "torch.xpu.current_stream")
    return False


def module_output(ctx: FileContext, expr: cst.BaseExpression) -> bool:
    """``model(x)`` where ``model`` is a callable object of this function (a parameter
    or a local, not a function or class defined or imported here): almost always a
    module, whose output is possibly a tensor. Also a name bound only from such a call."""
    if ctx.certainty(expr) is not Certainty.POSSIBLY:
        return False
    if isinstance(expr, cst.Name):
        scope = ctx.provenance.scope_of(expr).lookup(expr.value)
        bindings = scope.bindings.get(expr.value, []) if scope is not None else []
        return len(bindings) == 1 and bindings[0][0] == "value" and isinstance(bindings[0][1], cst.Call) and (
            _callable_object(ctx, bindings[0][1])
        )
    return isinstance(expr, cst.Call) and _callable_object(ctx, expr)


def _callable_object(ctx: FileContext, call: cst.Call) -> bool:
    if not call.args:
        return False
    func = call.func
    if isinstance(func, cst.Attribute):
        return isinstance(func.value, cst.Name) and func.value.value == "self" and func.attr.value not in ("forward",)
    if not isinstance(func, cst.Name):
        return False
    scope = ctx.provenance.scope_of(func).lookup(func.value)
    if scope is None:
        return False
    return all(how in ("param", "value") for how, _ in scope.bindings.get(func.value, []))


def _is_text(ctx: FileContext, expr: cst.BaseExpression) -> bool:
    return isinstance(expr, (cst.SimpleString, cst.ConcatenatedString, cst.FormattedString))


def _on_error_path(ctx: FileContext, node: cst.CSTNode) -> bool:
    """Inside ``raise ...`` or an ``assert``'s message: runs only when the program
    is failing anyway, so the read costs nothing in a working run."""
    child = node
    for parent in ctx.ancestors(node):
        if isinstance(parent, cst.Raise):
            return True
        if isinstance(parent, cst.Assert):
            return parent.msg is not None and child is parent.msg
        if isinstance(parent, cst.BaseStatement):
            return False
        child = parent
    return False


def _moves_to_cpu(call: cst.Call) -> bool:
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value != "device":
            continue
        value = arg.value
        if isinstance(value, cst.SimpleString) and value.evaluated_value in ("cpu",):
            return True
        if isinstance(value, cst.Call) and dotted_name(value.func) in ("torch.device", "device"):
            first = value.args[0].value if value.args else None
            if isinstance(first, cst.SimpleString) and first.evaluated_value == "cpu":
                return True
    return False


def _truth_tests(ctx: FileContext) -> list[cst.BaseExpression]:
    tests: list[cst.BaseExpression] = []
    for node in ctx.nodes(cst.If, cst.While, cst.Assert, cst.IfExp, cst.CompIf, cst.UnaryOperation, cst.BooleanOperation):
        if isinstance(node, (cst.If, cst.While, cst.Assert, cst.IfExp, cst.CompIf)):
            tests.append(node.test)
        elif isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Not):
            tests.append(node.expression)
        elif isinstance(node, cst.BooleanOperation):
            tests.extend([node.left, node.right])
    # ``if a and b:``: the operands are the truth tests, not the whole expression.
    return [t for t in tests if not isinstance(t, (cst.BooleanOperation,)) and not (isinstance(t, cst.UnaryOperation) and isinstance(t.operator, cst.Not))]


