"""FX201: output calls that read tensor values, deferred with ``fixitem.runtime``."""

from __future__ import annotations

import builtins
from collections.abc import Iterator
from dataclasses import dataclass, field

import libcst as cst

from ..context import FileContext
from ..provenance import COMPREHENSIONS, Kind, all_params, dotted_name
from ..rule import Fix, Invalid, Report, Rule, Safety, Valid, dedent
from ..syncs import LOG_METHODS, SyncSite
from ..tensor_values import LINE_LENGTH, one_argument_per_line, sites_within
from ..tree import children_of, walk

LOG_LEVELS = LOG_METHODS - {"exception"}  # logger.exception needs the live exception
OUTPUT_METHODS = frozenset({"add_scalar", "add_scalars", "set_postfix", "set_description", "log_metrics"})
READ_KINDS = ("item", "float", "int")
BUILTINS = frozenset(dir(builtins))


def output_callee(call: cst.Call) -> str | None:
    """The dotted callee when ``call`` is an output call this rule knows, else None."""
    func = call.func
    if isinstance(func, cst.Name):
        return "print" if func.value == "print" else None
    if not isinstance(func, cst.Attribute):
        return None
    method = func.attr.value
    receiver = dotted_name(func.value)
    if receiver is None:
        # a receiver that is a call or subscript (`get_logger().info`) is not recognised
        return None
    if method in LOG_LEVELS:
        last = receiver.split(".")[-1].lower()
        if receiver == "logging" or last.endswith("log") or last.endswith("logger"):
            return f"{receiver}.{method}"
        if receiver == "wandb" and method == "log":
            return "wandb.log"
        return None
    if method in OUTPUT_METHODS:
        return f"{receiver}.{method}"
    return None


def _is_deferred_record(ctx: FileContext, call: cst.Call) -> bool:
    return ctx.provenance.imports.qualify(call.func) == "fixitem.runtime.record"


@dataclass
class _Plan:
    stmt: cst.Expr
    call: cst.Call
    reads: list[SyncSite] = field(default_factory=list)
    blocker: str = ""  # why the call cannot be deferred
    unsafe: list[str] = field(default_factory=list)
    new: cst.Call | None = None

    @property
    def trigger(self) -> bool:
        return bool(self.reads)


class _Collector:
    """Walks the arguments of an output call: captured names, reads, problems."""

    def __init__(self, ctx: FileContext, reads: dict[cst.CSTNode, SyncSite], other_sites: set[cst.CSTNode]) -> None:
        self.ctx = ctx
        self.reads = reads
        self.other_sites = other_sites
        self.aliases = ctx.provenance.imports.aliases
        self.names: dict[str, list[tuple[cst.Name, str]]] = {}  # name -> (node, use)
        self.order: list[tuple[str, object]] = []  # ("name", str) or ("read", node)
        self.found_reads: list[cst.CSTNode] = []
        self.problem = ""

    def _use(self, name: cst.Name, use: str) -> None:
        if name.value not in self.names:
            self.order.append(("name", name.value))
        self.names.setdefault(name.value, []).append((name, use))

    def walk(self, node: cst.CSTNode, bound: frozenset[str], use: str, nested: bool) -> None:
        if isinstance(node, (cst.Await, cst.Yield, cst.NamedExpr)):
            self.problem = self.problem or "it contains `await`, `yield` or `:=`, which a lambda cannot hold"
            return
        if node in self.reads:
            if nested:
                self.problem = self.problem or "a tensor value is read inside a lambda or comprehension"
                return
            self.found_reads.append(node)
            self.order.append(("read", node))
            value = self.reads[node].value
            if any(n in self.reads or n in self.other_sites for n in walk(value)):
                self.problem = self.problem or "a tensor value is read inside another read"
            if isinstance(value, cst.Name) and value.value not in bound:
                self._use(value, "read")
            return
        if isinstance(node, cst.Name):
            if node.value in bound or node.value in BUILTINS or node.value in self.aliases:
                return
            self._use(node, use)
            return
        if isinstance(node, cst.Attribute):
            self.walk(node.value, bound, "other", nested)
            return
        if isinstance(node, cst.Arg):
            if not node.star and self.capturable(node.value, bound, nested):
                self.order.append(("expr", node.value))
                return
            if node.star:
                if any(n in self.reads or n in self.other_sites for n in walk(node.value)) or \
                        self.ctx.kind(node.value) is Kind.TENSOR:
                    self.problem = self.problem or "a starred argument reads a tensor"
                    return
            direct = "direct" if isinstance(node.value, cst.Name) and not node.star else "other"
            self.walk(node.value, bound, direct, nested)
            return
        if isinstance(node, cst.FormattedStringExpression):
            if self.capturable(node.expression, bound, nested):
                self.order.append(("expr", node.expression))
                if node.format_spec is not None:
                    for part in node.format_spec:
                        self.walk(part, bound, "other", nested)
                return
            inner = "format" if isinstance(node.expression, cst.Name) else "other"
            self.walk(node.expression, bound, inner, nested)
            if node.format_spec is not None:
                for part in node.format_spec:
                    self.walk(part, bound, "other", nested)
            return
        if isinstance(node, (cst.DictElement, cst.Element)):
            key = getattr(node, "key", None)
            if key is not None:
                self.walk(key, bound, "other", nested)
            if self.capturable(node.value, bound, nested):
                self.order.append(("expr", node.value))
                return
            direct = "direct" if isinstance(node.value, cst.Name) else "other"
            self.walk(node.value, bound, direct, nested)
            return
        if isinstance(node, cst.Lambda):
            params = frozenset(p.name.value for p in all_params(node.params))
            for p in all_params(node.params):
                if p.default is not None:
                    self.walk(p.default, bound, "other", nested)
            self.walk(node.body, bound | params, "other", True)
            return
        if isinstance(node, COMPREHENSIONS):
            targets: set[str] = set()
            comp = node.for_in
            while comp is not None:
                targets |= {n.value for n in walk(comp.target) if isinstance(n, cst.Name)}
                comp = comp.inner_for_in
            for child in children_of(node):
                self.walk(child, bound | targets, "other", True)
            return
        for child in children_of(node):
            self.walk(child, bound, "other", nested)


    def capturable(self, node: cst.BaseExpression, bound: frozenset[str], nested: bool) -> bool:
        """A value computed without tensor reads: evaluate it now, as the original did.

        Plain names and literals stay in the lambda's body; anything else (a call,
        arithmetic, a subscript) is passed in whole, so that ``len(loader)`` or
        ``scheduler.get_last_lr()[0]`` is evaluated at record time, not at replay.
        """
        if nested or isinstance(node, (cst.Name, cst.SimpleString, cst.Integer, cst.Float, cst.Imaginary,
                                       cst.ConcatenatedString, cst.FormattedString, cst.Dict, cst.List,
                                       cst.Tuple, cst.Set, cst.Lambda, *COMPREHENSIONS)):
            return False
        if isinstance(node, cst.Attribute) and isinstance(node.value, cst.Name):
            return False  # ``args.lr``: keep it readable; its root name is captured
        for sub in walk(node):
            if sub in self.reads or sub in self.other_sites:
                return False
            if isinstance(sub, (cst.Await, cst.Yield, cst.NamedExpr, cst.Lambda, *COMPREHENSIONS)):
                return False
            if isinstance(sub, cst.Name) and sub.value in bound:
                return False
        return True


def _callers_of(ctx: FileContext, deferring: set[cst.CSTNode | None]) -> set[cst.CSTNode | None]:
    """``deferring`` and every function of the file that calls one of them, transitively.

    Output of a caller comes after the callee's deferred output, so it must be
    deferred too or it would overtake it (``main()`` printing "done" after
    ``train()`` logged every step). ``None`` stands for the module level.
    """
    calls: dict[cst.CSTNode | None, set[str]] = {}
    for call in ctx.nodes(cst.Call):
        assert isinstance(call, cst.Call)
        func = call.func
        if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == "self":
            name = func.attr.value
        elif isinstance(func, cst.Name):
            name = func.value
        else:
            continue
        calls.setdefault(ctx.enclosing_function(call), set()).add(name)
    result = set(deferring)
    changed = True
    while changed:
        changed = False
        names = {f.name.value for f in result if isinstance(f, cst.FunctionDef)}
        for caller, callees in calls.items():
            if caller not in result and callees & names:
                result.add(caller)
                changed = True
    return result


def _is_plain(ctx: FileContext, name: cst.Name) -> bool:
    """A number or a string: formatting it later gives the same text."""
    kind = ctx.kind(name)
    if kind is Kind.NUMBER:
        return True
    scope = ctx.provenance.scope_of(name).lookup(name.value)
    if scope is None:
        return False
    bindings = scope.bindings.get(name.value, [])
    return bool(bindings) and all(_fresh_binding(ctx, how, value) for how, value in bindings)


def _fresh_binding(ctx: FileContext, how: str, value: cst.CSTNode | None) -> bool:
    """Bound to a string, or to a fresh result nothing else holds (``a, b = f()``)?

    A function's result or arithmetic is a new object: nothing else can mutate it
    before the replay. Parameters, loop variables, aliases of other names and
    container literals (which the code may go on to fill) may change.
    """
    if how not in ("value", "unpack"):
        return False
    if isinstance(value, (cst.SimpleString, cst.ConcatenatedString, cst.FormattedString, cst.Integer, cst.Float)):
        return True
    if isinstance(value, (cst.Call, cst.BinaryOperation, cst.UnaryOperation, cst.Comparison)):
        return ctx.kind(value) not in (Kind.TENSOR, Kind.MODULE, Kind.OTHER) or _is_text(value) or how == "unpack"
    return False


def _is_text(expr: cst.CSTNode) -> bool:
    return isinstance(expr, cst.Call) and dotted_name(expr.func) in ("str", "repr", "format")


class _Indent(cst.CSTTransformer):
    """Indent the continuation lines of a call that spans several lines."""

    def __init__(self, extra: str) -> None:
        super().__init__()
        self.extra = extra

    def leave_ParenthesizedWhitespace(self, original_node, updated_node):  # noqa: N802 (libcst API)
        last = updated_node.last_line
        return updated_node.with_changes(last_line=last.with_changes(value=last.value + self.extra))


class _Rewrite(cst.CSTTransformer):
    def __init__(self, replacements: dict[cst.CSTNode, cst.BaseExpression]) -> None:
        super().__init__()
        self.replacements = replacements

    def on_leave(self, original_node, updated_node):  # type: ignore[override]
        return self.replacements.get(original_node, updated_node)


class DeferredLogging(Rule):
    """## What it does
    Finds output call statements - `print(...)`, `logger.info(...)` and the
    other logger levels, `logging.info(...)`, `writer.add_scalar(...)` /
    `add_scalars`, `wandb.log(...)`, `pbar.set_postfix(...)` /
    `set_description(...)`, `log_metrics(...)` - whose arguments read tensor
    values with `.item()`, `float(t)` or `int(t)`, and rewrites them into
    `deferred.record(lambda ...: <call>, ...)` using `fixitem.runtime`: the
    tensors are recorded (detached, left on the device) and the call is
    replayed later with the Python numbers, printing exactly the same text.
    Inside traced code (`forward` and what `torch.compile` reaches) every
    `print` / logger call is deferred, even one that reads no tensor.

    ## Why is this bad?
    Each `.item()` in a log line is a **host sync** every step: the host
    waits for the device to finish before it can format the number. Inside
    compiled code `print` and logger calls are also **graph breaks**. The
    runtime reads all pending values with one transfer per flush (every 100
    records by default, on `flush()`, at exit and before a traceback).

    Deferring only some output calls would reorder them against the calls
    left immediate (a `print("epoch done")` would overtake the step losses
    printed before it). So when a function (or the module level) has one
    deferred output call, every other output call statement of that same
    function is deferred as well, keeping their relative order; so are the
    output calls of every function of the same file that calls such a
    function (`main()` printing "done" after `train()` returns). Output of
    other files, and anything written to stdout by other means, is not
    ordered against the deferred output: call `deferred.flush()` before it.

    ## Example
    ```python
    print(f"step {step} loss {loss.item():.4f}")
    logger.info("loss %.3f acc %d", loss.item(), correct.item())
    ```

    ## Use instead
    ```python
    from fixitem import runtime as deferred
    deferred.record(lambda step, loss: print(f"step {step} loss {loss:.4f}"), step, loss)
    deferred.record(lambda loss, correct: logger.info("loss %.3f acc %d", loss, correct), loss, correct)
    ```
    The lambda takes every name the arguments read (not the callee: `print`,
    `logger.info`, `writer.add_scalar` are looked up at replay), builtins and
    imported modules excepted. A read of an expression (`out.loss.item()`)
    gets a generated parameter (`value`, `value_1`, ...). `float(t)` and
    `int(t)` stay `float(...)` / `int(...)` in the lambda, so the type is the
    original's.

    ## Fix safety
    **Safe** when every captured name is a tensor read with `.item()` /
    `float()` / `int()`, a number, a string, or a fresh result (bound from a
    call or arithmetic, `mean, n = evaluate(...)`), and other values computed
    in the call (`len(loader)`, `sched.get_last_lr()[0]`) are evaluated at
    record time as before: the output is the same text,
    replayed later (every N records, at exit, before a traceback). Logging
    records keep their `lineno` (the call stays on one line when it fits)
    but `funcName` becomes `<lambda>` and `created` is the replay time.
    **Unsafe** when a captured name may be a mutable object (a dict, a list,
    `self`): it is passed by reference and formatted at replay, not now, so a
    later mutation shows; and when a tensor read is not known to be a tensor
    (`x.item()` of an untyped `x`). It is also unsafe when an output call of
    the same function cannot be deferred (its order against the deferred
    ones changes).
    **No fix** when the call holds `await`, `yield` or `:=`, a tensor read
    inside a lambda or comprehension, a starred argument that reads a tensor,
    or formats a tensor itself (`print(x)`: the runtime replays only
    one-element tensors as numbers, which would change the text).
    """

    code = "FX201"
    name = "deferred-logging"
    summary = "output call reads tensor values: defer it with `fixitem.runtime.record`"
    examples = [
        Invalid(
            dedent(
                """
                import torch

                def train(data: torch.Tensor):
                    for step in range(10):
                        loss = (data * step).sum()
                        print(f"step {step} loss {loss.item():.4f}")
                """
            ),
            fixed=dedent(
                """
                import torch
                from fixitem import runtime as deferred

                def train(data: torch.Tensor):
                    for step in range(10):
                        loss = (data * step).sum()
                        deferred.record(
                            lambda step, loss: print(f"step {step} loss {loss:.4f}"),
                            step,
                            loss,
                        )
                """
            ),
        ),
        Invalid(
            dedent(
                """
                import logging
                import torch

                logger = logging.getLogger(__name__)

                def report(loss: torch.Tensor, correct: torch.Tensor):
                    logger.info("loss %.3f acc %d", loss.item(), correct.item())
                    logger.debug("done")
                """
            ),
            fixed=dedent(
                """
                import logging
                import torch
                from fixitem import runtime as deferred

                logger = logging.getLogger(__name__)

                def report(loss: torch.Tensor, correct: torch.Tensor):
                    deferred.record(
                        lambda loss, correct: logger.info("loss %.3f acc %d", loss, correct),
                        loss,
                        correct,
                    )
                    deferred.record(lambda: logger.debug("done"))
                """
            ),
        ),
        Invalid(
            dedent(
                """
                import torch
                import wandb

                def log(out: torch.Tensor, step: int):
                    wandb.log({"loss": out[0].item(), "step": step})
                """
            ),
            fixed=dedent(
                """
                import torch
                import wandb
                from fixitem import runtime as deferred

                def log(out: torch.Tensor, step: int):
                    deferred.record(
                        lambda value, step: wandb.log({"loss": value, "step": step}),
                        out[0],
                        step,
                    )
                """
            ),
        ),
        Invalid(
            dedent(
                """
                import torch

                def train(data: torch.Tensor):
                    for step in range(10):
                        loss = data.sum() * step
                        print(step, loss.item())
                    print("epoch done")
                """
            ),
            fixed=dedent(
                """
                import torch
                from fixitem import runtime as deferred

                def train(data: torch.Tensor):
                    for step in range(10):
                        loss = data.sum() * step
                        deferred.record(lambda step, loss: print(step, loss), step, loss)
                    deferred.record(lambda: print("epoch done"))
                """
            ),
        ),
        Invalid(
            dedent(
                """
                import torch

                def train(data: torch.Tensor, history):
                    loss = data.sum()
                    print(loss.item(), history)
                """
            ),
            fixed=dedent(
                """
                import torch
                from fixitem import runtime as deferred

                def train(data: torch.Tensor, history):
                    loss = data.sum()
                    deferred.record(lambda loss, history: print(loss, history), loss, history)
                """
            ),
            unsafe=True,
        ),
        Invalid(
            dedent(
                """
                import torch
                from torch import nn

                class Net(nn.Module):
                    def forward(self, x: torch.Tensor):
                        print("forward")
                        return x * 2
                """
            ),
            fixed=dedent(
                """
                import torch
                from torch import nn
                from fixitem import runtime as deferred

                class Net(nn.Module):
                    def forward(self, x: torch.Tensor):
                        deferred.record(lambda: print("forward"))
                        return x * 2
                """
            ),
        ),
        Invalid(
            dedent(
                """
                import torch

                def f(losses: torch.Tensor):
                    print([l.item() for l in losses])
                """
            ),
        ),
        Valid(
            dedent(
                """
                import numpy as np

                def f():
                    a = np.ones(3)
                    print(f"{a.sum().item():.3f}")
                """
            )
        ),
        Valid(
            dedent(
                """
                import torch

                def f(n: int):
                    print("done", n)
                """
            )
        ),
    ]

    def check(self, ctx: FileContext, sites: list[SyncSite], claimed: set[SyncSite]) -> Iterator[Report]:
        groups: dict[cst.CSTNode | None, list[_Plan]] = {}
        deferred_already: set[cst.CSTNode | None] = set()
        for stmt in ctx.nodes(cst.Expr):
            assert isinstance(stmt, cst.Expr)
            call = stmt.value
            if not isinstance(call, cst.Call):
                continue
            func = ctx.enclosing_function(stmt)
            if _is_deferred_record(ctx, call):
                deferred_already.add(func)
                continue
            callee = output_callee(call)
            if callee is None:
                continue
            plan = self._plan(ctx, stmt, call, sites, claimed)
            groups.setdefault(func, []).append(plan)

        deferring = _callers_of(ctx, {f for f, plans in groups.items() if any(p.trigger for p in plans)} | deferred_already)
        for func, plans in groups.items():
            traced = func is not None and func in ctx.traced
            active = traced or func in deferring
            if not active:
                continue
            immediate = [p for p in plans if p.new is None]
            group_reasons: list[str] = []
            if immediate and any(p.new is not None for p in plans):
                lines = ", ".join(str(ctx.position(p.stmt)[0]) for p in immediate)
                group_reasons.append(f"the output call(s) on line {lines} stay immediate and are reordered against it")
            group_unsafe = sorted({r for p in plans for r in p.unsafe}) + group_reasons
            for plan in plans:
                if not plan.trigger and plan.new is None:
                    continue  # an ordinary call that cannot be deferred: reported as the group's reason
                message = f"`{ctx.code(plan.call.func)}(...)` " + (
                    "reads tensor values on the host" if plan.reads else
                    ("breaks the graph in traced code" if traced else "would be reordered against deferred output")
                )
                if plan.new is None:
                    yield Report(plan.stmt, message, sites=plan.reads, note=f"no fix: {plan.blocker}")
                    continue
                safety = Safety.UNSAFE if group_unsafe else Safety.SAFE
                fix = Fix({plan.stmt: cst.Expr(plan.new, semicolon=plan.stmt.semicolon)}, safety,
                          "; ".join(group_unsafe), imports=ctx.runtime_imports())
                yield Report(plan.stmt, message, fix=fix, sites=plan.reads)

    def _plan(self, ctx: FileContext, stmt: cst.Expr, call: cst.Call, sites: list[SyncSite],
              claimed: set[SyncSite]) -> _Plan:
        inner = [s for s in sites_within(ctx, sites, call) if s not in claimed]
        reads = {s.node: s for s in inner if s.kind in READ_KINDS and isinstance(s.node, cst.Call)}
        others = {s.node for s in inner if s.node not in reads}
        plan = _Plan(stmt, call, reads=[s for s in inner if s.node in reads])
        if any(s.node in walk(call.func) for s in inner):
            plan.blocker = "the callee itself reads a tensor value"
            return plan
        collector = _Collector(ctx, reads, others)
        for arg in call.args:
            collector.walk(arg, frozenset(), "other", False)
        if collector.problem:
            plan.blocker = collector.problem
            return plan
        if others:
            plan.blocker = "it formats a tensor itself; only one-element values read with `.item()` can be deferred"
            return plan

        # Parameters, in order of first appearance.
        attributes = {n.attr for n in walk(call) if isinstance(n, cst.Attribute)}
        taken = {n.value for n in walk(call) if isinstance(n, cst.Name) and n not in attributes}
        params: list[str] = []
        values: list[cst.BaseExpression] = []
        body_replacements: dict[cst.CSTNode, cst.BaseExpression] = {}
        counter = 0

        def fresh(hint: cst.CSTNode | None = None) -> str:
            nonlocal counter
            # ``self.config.block_size`` is passed as ``block_size``: read as the original.
            if isinstance(hint, cst.Attribute):
                name = hint.attr.value
                if name.isidentifier() and name not in taken and name not in params and name not in BUILTINS:
                    return name
            while True:
                name = "value" if counter == 0 else f"value_{counter}"
                counter += 1
                if name not in taken and name not in params:
                    return name

        read_names: dict[str, str] = {}
        for what, item in collector.order:
            if what == "name":
                name = str(item)
                uses = collector.names[name]
                only_read = all(use == "read" for _, use in uses)
                if only_read:
                    read_names[name] = name
                    params.append(name)
                    values.append(cst.Name(name))
                    continue
                node = uses[0][0]
                kind = ctx.kind(node)
                if kind is Kind.TENSOR:
                    plan.blocker = f"`{name}` is a tensor used other than through `.item()`"
                    return plan
                params.append(name)
                values.append(cst.Name(name))
                if not _is_plain(ctx, node):
                    plan.unsafe.append(f"`{name}` is passed by reference and read at replay, not now")
            elif what == "expr":
                expr = item
                param = fresh(expr)
                params.append(param)
                values.append(expr)  # type: ignore[arg-type]
                body_replacements[expr] = cst.Name(param)  # type: ignore[index]
                kind = ctx.kind(expr)  # type: ignore[arg-type]
                if kind is Kind.TENSOR:
                    plan.blocker = f"`{ctx.code(expr)}` is a tensor used other than through `.item()`"
                    return plan
                # A value computed in the call (a function's result, arithmetic) is
                # fresh: nothing else holds it to mutate before the replay. Only
                # containers and modules are suspicious.
                if kind in (Kind.OTHER, Kind.MODULE) and not _is_text(expr):
                    plan.unsafe.append(f"`{ctx.code(expr)}` is computed now but formatted at replay")
            else:
                site = reads[item]  # type: ignore[index]
                value = site.value
                if not site.certain:
                    plan.unsafe.append(f"`{ctx.code(value)}` is not known to be a tensor")
                if isinstance(value, cst.Name) and collector.names.get(value.value) and all(
                    use == "read" for _, use in collector.names[value.value]
                ):
                    param = value.value
                else:
                    param = fresh()
                    params.append(param)
                    values.append(value)
                new_expr: cst.BaseExpression = cst.Name(param)
                if site.kind in ("float", "int"):
                    new_expr = cst.Call(cst.Name(site.kind), [cst.Arg(cst.Name(param))])
                body_replacements[item] = new_expr  # type: ignore[index]
        body = call.visit(_Rewrite(body_replacements))
        if "\n" in cst.Module(body=[]).code_for_node(body):
            # The call moves one level in, as the lambda argument of ``deferred.record(``.
            body = body.visit(_Indent("    "))
        empty = cst.Module(body=[])
        head = f"lambda {', '.join(params)}:" if params else "lambda:"
        pieces = [f"{head} {empty.code_for_node(body)}", *[empty.code_for_node(v) for v in values]]
        record = cst.ensure_type(cst.parse_expression(f"deferred.record({', '.join(pieces)})"), cst.Call)
        indent = ctx.positions[stmt].start.column
        text = empty.code_for_node(record)
        if "\n" in text or indent + len(text) > LINE_LENGTH:
            record = one_argument_per_line(record)
        plan.new = record
        plan.unsafe = list(dict.fromkeys(plan.unsafe))
        return plan
