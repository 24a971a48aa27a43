"""Where a file reads a tensor's value back to the host.

A *sync site* is one expression that makes Python wait for the device:
``t.item()``, ``t.tolist()``, ``float(t)`` / ``int(t)`` / ``bool(t)``, a
tensor used as a truth value (``if t:``, ``while``, ``assert``, ``and`` /
``or`` / ``not``), a tensor formatted into text (f-strings, ``print``,
logging), ``t.cpu()`` / ``t.numpy()`` / ``t.to("cpu")``, and tensors used as
Python sizes and slice bounds (``range(n)``, ``x[:n]``).

Rules look the sites up here and *claim* the ones they report, so that a
site is reported once, by the most specific rule.
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from .context import FileContext
from .output_calls import LOG_METHODS, output_call  # noqa: F401  (LOG_METHODS: re-exported)
from .provenance import Kind, dotted_name


@dataclass(eq=False)
class SyncSite:
    node: cst.CSTNode  # the expression that syncs
    kind: str  # "item", "tolist", "float", "int", "bool", "truth", "format", "cpu", "numpy", "size"
    value: cst.BaseExpression  # the tensor expression that is read
    certain: bool  # provenance proved the value is a tensor


def is_item_call(node: cst.CSTNode) -> bool:
    """``x.item()``."""
    return (
        isinstance(node, cst.Call)
        and isinstance(node.func, cst.Attribute)
        and node.func.attr.value == "item"
        and not node.args
    )


def find_sync_sites(ctx: FileContext) -> list[SyncSite]:
    sites: list[SyncSite] = []
    seen: set[cst.CSTNode] = set()

    def add(node: cst.CSTNode, kind: str, value: cst.BaseExpression, certain: bool = True) -> None:
        if node not in seen:
            seen.add(node)
            sites.append(SyncSite(node, kind, value, certain))

    for call in ctx.nodes(cst.Call):
        assert isinstance(call, cst.Call)
        func = call.func
        if isinstance(func, cst.Attribute):
            method = func.attr.value
            receiver = func.value
            if method == "item" and not call.args:
                kind = ctx.kind(receiver)
                if kind in (Kind.TENSOR, Kind.UNKNOWN):
                    add(call, "item", receiver, kind is Kind.TENSOR)
            elif method == "tolist" and not call.args and ctx.is_tensor(receiver):
                add(call, "tolist", receiver)
            elif method == "numpy" and ctx.is_tensor(receiver):
                add(call, "numpy", receiver)
                inner = receiver
                while isinstance(inner, cst.Call) and isinstance(inner.func, cst.Attribute) and inner.func.attr.value in ("cpu", "detach"):
                    seen.add(inner)
                    inner = inner.func.value
            elif method == "cpu" and not call.args and ctx.is_tensor(receiver):
                add(call, "cpu", receiver)
            elif method == "to" and ctx.is_tensor(receiver) and _moves_to_cpu(call):
                add(call, "cpu", receiver)
        elif isinstance(func, cst.Name) and len(call.args) == 1 and call.args[0].keyword is None:
            arg = call.args[0].value
            if func.value in ("float", "int", "bool", "complex") and ctx.is_tensor(arg):
                add(call, func.value if func.value != "complex" else "float", arg)
            elif func.value in ("range",) and ctx.is_tensor(arg):
                add(arg, "size", arg)
        found = output_call(ctx, call)
        if found is not None and found.kind.formats_text:
            for arg in call.args:
                if ctx.is_tensor(arg.value) and not is_item_call(arg.value):
                    add(arg.value, "format", arg.value)

    for node in ctx.nodes(cst.FormattedStringExpression):
        assert isinstance(node, cst.FormattedStringExpression)
        if ctx.is_tensor(node.expression):
            add(node.expression, "format", node.expression)

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
    for node in ctx.nodes(cst.If, cst.While, cst.Assert, cst.IfExp, cst.UnaryOperation, cst.BooleanOperation):
        if isinstance(node, (cst.If, cst.While, cst.Assert, cst.IfExp)):
            tests.append(node.test)
        elif isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Not):
            tests.append(node.expression)
        elif isinstance(node, cst.BooleanOperation):
            tests.extend([node.left, node.right])
    # ``if a and b:``: the operands are the truth tests, not the whole expression.
    return [t for t in tests if not isinstance(t, (cst.BooleanOperation,)) and not (isinstance(t, cst.UnaryOperation) and isinstance(t.operator, cst.Not))]


