"""FX303: per-element ``.item()`` in a loop or comprehension: one ``.tolist()`` instead."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import libcst as cst

from ..advice import usage
from ..context import FileContext
from ..effects import CONTAINER_WRITES, TENSOR_SAFE_BUILTINS, Effect, call_effect
from ..dtypes import certainly_floating, certainly_integer
from ..provenance import Kind, Scope, dotted_name
from ..rule import Fix, Invalid, Report, Rule, Safety, Valid, dedent
from ..syncs import SyncSite, is_item_call
from ..tensor_values import method_call
from ..tree import walk

READ_KINDS = ("item", "float", "int")
ARITHMETIC = (cst.Add, cst.Subtract, cst.Multiply, cst.Divide, cst.FloorDivide, cst.Modulo, cst.Power)

# Calls that consume a generator at once, and treat a list the same way.
CONSUMERS = frozenset({"sum", "min", "max", "sorted", "list", "tuple", "set", "frozenset", "any", "all"})
QUALIFIED_CONSUMERS = frozenset(
    {
        "math.fsum", "math.prod", "statistics.mean", "statistics.fmean", "statistics.median",
        "statistics.stdev", "statistics.pstdev", "statistics.variance", "statistics.pvariance",
    }
)


@dataclass
class _Lane:
    """One element variable bound from a tensor, and where it is used."""

    target: cst.Name
    iterable: cst.BaseExpression  # the tensor expression the loop iterates (what gets replaced)
    items: list[cst.Call] = field(default_factory=list)  # ``v.item()`` calls, replaced by ``v``
    uses: list[cst.CSTNode] = field(default_factory=list)  # items + ``float(v)`` / ``int(v)``
    sites: list[SyncSite] = field(default_factory=list)
    other: bool = False  # used some other way (as a tensor)


class OneToList(Rule):
    """## What it does
    Finds loops and comprehensions that read a tensor one element at a time,
    `[v.item() for v in t]`, `sum(v.item() for v in t)`,
    `for v in t: out.append(v.item())`, `[t[i].item() for i in range(len(t))]`,
    and reads the whole tensor with a single `.tolist()` instead:
    `t.reshape(len(t)).tolist()`, and `v` where the code said `v.item()`.
    `int(v)` / `float(v)` go too where the tensor's dtype already gives that
    type (`[int(i) for i in idx]` with `idx = x.argsort()` is
    `idx.reshape(len(idx)).tolist()`; `float(p)` of a `softmax` likewise);
    elsewhere they are kept around the new Python element (`int(v)` of a
    float element truncates, `float(v)` of an int converts: the same value and
    type for every dtype). Also through `enumerate(t)` and `zip(names, t)`.

    ## Why is this bad?
    Every `.item()` makes the host wait for the device (a **host sync**; a
    **graph break** in compiled code): a tensor of n elements costs n round
    trips where one copy of the whole tensor costs one.

    ## Example
    ```python
    scores = [s.item() for s in probs]
    total = 0.0
    for loss in losses:
        total += loss.item()
    ```

    ## Use instead
    ```python
    scores = probs.reshape(len(probs)).tolist()
    total = 0.0
    for loss in losses.reshape(len(losses)).tolist():
        total += loss
    ```

    ## Fix safety
    **Safe** when the loop iterates a name: `t.reshape(len(t)).tolist()`
    gives exactly the values and Python types (`int`, `float`, `bool`,
    `complex`) that `.item()` gave, element by element, for every shape on
    which the original runs: `(n,)`, `(n, 1)`, `(n, 1, 1)`, `(0, k)`. Plain
    `t.tolist()` would not: for `(n, 1)` it gives a list of one-element lists
    (and `t.flatten()` would silently accept `(n, 2)`, where `.item()` raises).
    Also safe when the iterable is certainly 1-D (`torch.linspace(...)`,
    `torch.arange(...)`, `x.flatten()`, `x.view(-1)`): then plain `.tolist()`.
    `float(x)` / `int(x)` of the Python element equal `float(row)` /
    `int(row)` for every dtype, NaN and infinities included; they are dropped
    only where fixitem knows the dtype (`argmax`, `argsort`, `nonzero`,
    `.long()`: integer, never `bool`; `softmax`, `.float()`, losses: real
    floating), where the element already is that `int` or `float`. Python sums add
    in the same order, so `total` is bitwise the same.

    Where the original raises, the fix raises too: for `.item()`, with the
    same exception type (rows of several elements: `RuntimeError`; a 0-dim
    tensor: `TypeError`); `float(v)` / `int(v)` over rows of several
    elements raised `ValueError` and now raise `RuntimeError`, and the
    indexed forms over a 0-dim tensor raised `IndexError` and now raise
    `TypeError`. The fix raises eagerly, before the first element: the one
    case where it raises and the original did not is a loop that reads no
    row at all (a filter that rejects every row, `zip` with an empty partner,
    an early `break`) over a tensor whose rows hold several elements, code
    that fails as soon as it reads one. A loop that stops early now copies
    the whole tensor (one copy instead of a few element reads), and
    `float(x)` of a tensor that requires grad no longer warns.

    **Unsafe** when the loop iterates an expression (`for p in logits.softmax(-1)`):
    the expression cannot be repeated in `len(...)` without computing it
    twice, so the fix is `expr.flatten().tolist()`, which returns all the
    elements flattened where the original raised (rows of several elements,
    a 0-dim tensor).

    **No fix** (reported with what to do by hand) when fixitem cannot prove
    that nothing between two element reads writes to the tensor: the body
    calls a function or module it does not know, modifies a tensor in place,
    yields or awaits; when a generator is not consumed on the spot; when the
    loop variable is read after the loop; and for indexed loops
    (`for i in range(len(t))`) other than a plain `[t[i].item() for i in ...]`.

    Nothing is reported when the element is also used as a tensor, or when
    the values iterated are not known to be tensors (numpy arrays, lists:
    `.item()` of a numpy value is no sync). Reads that other rules rewrite
    better are left to them: `x - v.item()` with `x` a tensor (FX301,
    `.detach()`: no sync at all), and a running sum `total += v.item()` in a
    loop this rule could only report (FX202 keeps it on the device).
    """

    code = "FX303"
    name = "one-tolist"
    summary = "per-element `.item()` in a loop or comprehension: read the tensor once with `.tolist()`"
    graph_breaks = ("GB0124", "GB0109")
    examples = [
        Invalid(
            dedent(
                """
                import torch
                def rates(rate: float, depth: int, device: torch.device):
                    return [x.item() for x in torch.linspace(0, rate, depth, device=device)]
                """
            ),
            fixed=dedent(
                """
                import torch
                def rates(rate: float, depth: int, device: torch.device):
                    return torch.linspace(0, rate, depth, device=device).tolist()
                """
            ),
        ),
        Invalid(
            dedent(
                """
                import torch

                def scores(logits: torch.Tensor):
                    probs = logits.softmax(-1)
                    return [p.item() for p in probs]
                """
            ),
            fixed=dedent(
                """
                import torch

                def scores(logits: torch.Tensor):
                    probs = logits.softmax(-1)
                    return probs.reshape(len(probs)).tolist()
                """
            ),
        ),
        Invalid(
            dedent(
                """
                import torch

                def rounded(t: torch.Tensor, counts: torch.Tensor):
                    return [round(v.item(), 2) for v in t], [float(c) for c in counts]
                """
            ),
            fixed=dedent(
                """
                import torch

                def rounded(t: torch.Tensor, counts: torch.Tensor):
                    return [round(v, 2) for v in t.reshape(len(t)).tolist()], [float(c) for c in counts.reshape(len(counts)).tolist()]
                """
            ),
        ),
        Invalid(
            dedent(
                """
                import torch

                def ranking(scores: torch.Tensor):
                    order = scores.argsort(descending=True)
                    probs = scores.softmax(-1)
                    out = []
                    for p in probs:
                        out.append(float(p))
                    return [int(i) for i in order], out, [int(p) for p in probs]
                """
            ),
            fixed=dedent(
                """
                import torch

                def ranking(scores: torch.Tensor):
                    order = scores.argsort(descending=True)
                    probs = scores.softmax(-1)
                    out = []
                    for p in probs.reshape(len(probs)).tolist():
                        out.append(p)
                    return order.reshape(len(order)).tolist(), out, [int(p) for p in probs.reshape(len(probs)).tolist()]
                """
            ),
        ),
        Invalid(
            dedent(
                """
                import torch

                def mean_loss(losses: torch.Tensor):
                    return sum(x.item() for x in losses) / len(losses)
                """
            ),
            fixed=dedent(
                """
                import torch

                def mean_loss(losses: torch.Tensor):
                    return sum(losses.reshape(len(losses)).tolist()) / len(losses)
                """
            ),
        ),
        Invalid(
            dedent(
                """
                import torch

                def named(names, values: torch.Tensor):
                    return {name: v.item() for name, v in zip(names, values)}
                """
            ),
            fixed=dedent(
                """
                import torch

                def named(names, values: torch.Tensor):
                    return {name: v for name, v in zip(names, values.reshape(len(values)).tolist())}
                """
            ),
        ),
        Invalid(
            dedent(
                """
                import torch

                def collect(model: torch.nn.Module, x):
                    scores = model(x).sigmoid()
                    out = []
                    for i, s in enumerate(scores):
                        out.append({"index": i, "score": s.item()})
                    return out
                """
            ),
            fixed=dedent(
                """
                import torch

                def collect(model: torch.nn.Module, x):
                    scores = model(x).sigmoid()
                    out = []
                    for i, s in enumerate(scores.reshape(len(scores)).tolist()):
                        out.append({"index": i, "score": s})
                    return out
                """
            ),
        ),
        Invalid(
            dedent(
                """
                import torch

                def total(losses: torch.Tensor):
                    total = 0.0
                    for loss in losses:
                        total += loss.item()
                    return total
                """
            ),
            fixed=dedent(
                """
                import torch

                def total(losses: torch.Tensor):
                    total = 0.0
                    for loss in losses.reshape(len(losses)).tolist():
                        total += loss
                    return total
                """
            ),
        ),
        Invalid(
            dedent(
                """
                import torch

                def per_class(t: torch.Tensor):
                    return [t[i].item() for i in range(len(t))]
                """
            ),
            fixed=dedent(
                """
                import torch

                def per_class(t: torch.Tensor):
                    return t.reshape(len(t)).tolist()
                """
            ),
        ),
        Invalid(
            dedent(
                """
                import torch

                def probabilities(logits: torch.Tensor):
                    return [p.item() for p in logits.softmax(-1)]
                """
            ),
            fixed=dedent(
                """
                import torch

                def probabilities(logits: torch.Tensor):
                    return logits.softmax(-1).flatten().tolist()
                """
            ),
            unsafe=True,
        ),
        Invalid(
            dedent(
                """
                import torch

                def track(weights: torch.Tensor, optimizer):
                    history = []
                    for w in weights:
                        history.append(w.item())
                        optimizer.step()
                    return history
                """
            )
        ),
        Valid(
            dedent(
                """
                import numpy as np
                import torch

                def f(values):
                    arr = np.asarray(values)
                    out = [v.item() for v in arr]
                    for v in arr:
                        out.append(v.item())
                    return out
                """
            )
        ),
        Valid(
            dedent(
                """
                import torch

                def f(xs: list):
                    return [x.item() for x in xs]
                """
            )
        ),
        Valid(
            dedent(
                """
                import torch

                def f(t: torch.Tensor):
                    kept = [v.item() for v in t if v > 0]
                    doubled = [(v * 2).item() for v in t]
                    return kept, doubled
                """
            )
        ),
    ]

    def check(self, ctx: FileContext, sites: list[SyncSite], claimed: set[SyncSite]) -> Iterator[Report]:
        reads = {s.node: s for s in sites if s.kind in READ_KINDS}
        if not reads:
            return
        for node in ctx.nodes(cst.ListComp, cst.SetComp, cst.GeneratorExp, cst.DictComp, cst.For):
            if isinstance(node, cst.For):
                report = self._loop(ctx, node, reads, claimed)
            else:
                report = self._comprehension(ctx, node, reads, claimed)
            if report is not None:
                suppressed = any(ctx.suppressions.suppressed(ctx.position(s.node)[0], self.code) for s in report.sites)
                if not suppressed:
                    yield report

    # -- comprehensions -------------------------------------------------------------------------

    def _comprehension(self, ctx: FileContext, comp, reads, claimed) -> Report | None:
        for_in = comp.for_in
        if for_in.inner_for_in is not None or for_in.asynchronous is not None:
            return None
        scope = ctx.provenance.scopes.get(comp)
        if scope is None:
            return None
        region: list[cst.CSTNode] = [comp.key, comp.value] if isinstance(comp, cst.DictComp) else [comp.elt]
        region += [c.test for c in for_in.ifs]
        indexed = self._indexed(ctx, comp, for_in.target, for_in.iter, region, scope, reads, claimed)
        if indexed is not None:
            return indexed
        lanes = self._lanes(ctx, for_in.target, for_in.iter, region, scope, reads, claimed)
        if not lanes:
            return None
        sites = [s for lane in lanes for s in lane.sites]
        message = self._message(ctx, lanes)
        problem = self._interference(ctx, region + self._partners(for_in.iter, lanes), lanes)
        if not problem and isinstance(comp, cst.GeneratorExp):
            problem = self._consumer_problem(ctx, comp)
        if not problem:
            problem = self._shadowed(ctx, comp, lanes, "set" if isinstance(comp, cst.SetComp) else None)
        if problem:
            return Report(comp, message, sites=sites, note=self._note(ctx, lanes, problem, "comprehension"))
        replacements: dict[cst.CSTNode, cst.CSTNode] = {}
        lane = lanes[0]
        identity = (
            len(lanes) == 1
            and lane.iterable is for_in.iter
            and not for_in.ifs
            and isinstance(comp, (cst.ListComp, cst.SetComp, cst.GeneratorExp))
            and comp.elt in lane.items
            and "#" not in ctx.code(comp)
        )
        if identity:
            whole = self._read_once(ctx, lane.iterable)
            if isinstance(comp, cst.SetComp):
                whole = cst.Call(func=cst.Name("set"), args=[cst.Arg(whole)])
            if isinstance(comp, (cst.ListComp, cst.SetComp)):
                whole = whole.with_changes(lpar=comp.lpar, rpar=comp.rpar)
            replacements[comp] = whole
        else:
            replacements.update(self._element_replacements(ctx, lanes))
        return Report(comp, message, fix=self._fix(ctx, lanes, replacements), sites=sites)

    def _indexed(self, ctx: FileContext, node, target, iterable, region, scope: Scope, reads, claimed) -> Report | None:
        """``[t[i].item() for i in range(len(t))]`` (also ``t.shape[0]``, ``t.size(0)``, ``t.numel()``)."""
        tensor = self._range_of_tensor(ctx, iterable)
        if tensor is None or not isinstance(target, cst.Name):
            return None
        index = target.value
        calls: list[cst.Call] = []
        for sub in (n for root in region for n in walk(root)):
            if not is_item_call(sub):
                continue
            value = sub.func.value
            if (
                isinstance(value, cst.Subscript)
                and isinstance(value.value, cst.Name)
                and value.value.value == tensor.value
                and len(value.slice) == 1
                and isinstance(value.slice[0].slice, cst.Index)
                and isinstance(value.slice[0].slice.value, cst.Name)
                and value.slice[0].slice.value.value == index
                and ctx.provenance.scope_of(value.slice[0].slice.value).lookup(index) is scope
            ):
                calls.append(sub)
        sites = [reads[c] for c in calls if c in reads]
        if not sites or any(s in claimed or not s.certain for s in sites):
            return None
        message = f"`{tensor.value}` is read one element at a time (`{ctx.code(calls[0])}`): one host sync per element"
        identity = (
            isinstance(node, (cst.ListComp, cst.GeneratorExp))
            and not node.for_in.ifs
            and node.elt is calls[0]
            and len(calls) == 1
            and "#" not in ctx.code(node)
        )
        problem = ""
        if not identity:
            problem = "the index is used for more than reading one element"
        elif isinstance(node, cst.GeneratorExp):
            problem = self._consumer_problem(ctx, node)
        if not problem and self._builtin_shadowed(ctx, node, "len"):
            problem = "`len` is rebound in this file"
        read_once = f"{tensor.value}.reshape(len({tensor.value})).tolist()"
        if problem:
            if isinstance(node, cst.For) and self._accumulates(ctx, sites):
                return None  # FX202 keeps the running sum on the device: better than a note
            note = (f"no fix: {problem}. Read the tensor once before the loop, `values = {read_once}`, "
                    f"and use `values[{index}]` in place of `{ctx.code(calls[0])}`")
            return Report(node, message, sites=sites, note=note)
        whole = self._read_once(ctx, tensor)
        if isinstance(node, cst.ListComp):
            whole = whole.with_changes(lpar=node.lpar, rpar=node.rpar)
        return Report(node, message, fix=Fix({node: whole}, Safety.SAFE, "", imports=()), sites=sites)

    def _range_of_tensor(self, ctx: FileContext, iterable: cst.BaseExpression) -> cst.Name | None:
        """The tensor ``t`` of ``range(len(t))`` / ``range(t.shape[0])`` / ``range(t.size(0))`` / ``range(t.numel())``."""
        if not (isinstance(iterable, cst.Call) and isinstance(iterable.func, cst.Name) and iterable.func.value == "range"):
            return None
        if len(iterable.args) != 1 or iterable.args[0].keyword is not None or iterable.args[0].star:
            return None
        if self._builtin_shadowed(ctx, iterable, "range"):
            return None
        bound = iterable.args[0].value
        tensor: cst.BaseExpression | None = None
        if isinstance(bound, cst.Call) and isinstance(bound.func, cst.Name) and bound.func.value == "len" and len(bound.args) == 1:
            tensor = bound.args[0].value
        elif isinstance(bound, cst.Call) and isinstance(bound.func, cst.Attribute):
            method = bound.func.attr.value
            if method == "numel" and not bound.args:
                tensor = bound.func.value
            elif method == "size" and len(bound.args) == 1 and _is_zero(bound.args[0].value):
                tensor = bound.func.value
        elif isinstance(bound, cst.Subscript) and isinstance(bound.value, cst.Attribute) and bound.value.attr.value == "shape":
            if len(bound.slice) == 1 and isinstance(bound.slice[0].slice, cst.Index) and _is_zero(bound.slice[0].slice.value):
                tensor = bound.value.value
        if isinstance(tensor, cst.Name) and ctx.is_tensor(tensor):
            return tensor
        return None

    # -- loops ----------------------------------------------------------------------------------

    def _loop(self, ctx: FileContext, loop: cst.For, reads, claimed) -> Report | None:
        if loop.asynchronous is not None:
            return None
        scope = ctx.provenance.scope_of(loop)
        region: list[cst.CSTNode] = [loop.body]
        indexed = self._indexed(ctx, loop, loop.target, loop.iter, region, scope, reads, claimed)
        if indexed is not None:
            return indexed
        lanes = self._lanes(ctx, loop.target, loop.iter, region, scope, reads, claimed)
        if not lanes:
            return None
        for lane in lanes:
            if self._declared_global(ctx, scope, lane.target.value):
                return None
        sites = [s for lane in lanes for s in lane.sites]
        message = self._message(ctx, lanes)
        problem = self._interference(ctx, region + self._partners(loop.iter, lanes), lanes)
        if not problem:
            problem = self._read_outside(ctx, loop, scope, lanes)
        if not problem:
            problem = self._shadowed(ctx, loop, lanes, None)
        if problem:
            if self._accumulates(ctx, sites):
                return None  # FX202 keeps the running sum on the device: better than a note
            return Report(loop, message, sites=sites, note=self._note(ctx, lanes, problem, "loop"))
        replacements = self._element_replacements(ctx, lanes)
        return Report(loop, message, fix=self._fix(ctx, lanes, replacements), sites=sites)

    def _accumulates(self, ctx: FileContext, sites: list[SyncSite]) -> bool:
        return any(usage(ctx, site.node) == "accumulate" for site in sites)

    def _declared_global(self, ctx: FileContext, scope: Scope, name: str) -> bool:
        for node in ctx.nodes(cst.Global, cst.Nonlocal):
            if any(item.name.value == name for item in node.names):  # type: ignore[attr-defined]
                if ctx.provenance.scope_of(node) is scope:
                    return True
        return False

    def _read_outside(self, ctx: FileContext, loop: cst.For, scope: Scope, lanes: list[_Lane]) -> str:
        """The loop variable must not be read after (or before) the loop: it would now
        hold a Python number where it held a tensor."""
        for lane in lanes:
            name = lane.target.value
            for node, _ in _references(ctx, ctx.names(name, scope.node), name, scope):  # its names lie below it
                if node is lane.target:
                    continue
                if _inside(ctx, node, loop.body):
                    continue
                if self._inside_other_loop_binding(ctx, node, loop, name) or _is_store(ctx, node):
                    continue
                return f"`{name}` is read outside the loop, where it would now be a Python number"
        return ""

    def _inside_other_loop_binding(self, ctx: FileContext, node: cst.CSTNode, loop: cst.For, name: str) -> bool:
        for parent in ctx.ancestors(node):
            if isinstance(parent, cst.For) and parent is not loop:
                bound = {n.value for n in walk(parent.target) if isinstance(n, cst.Name)}
                if name in bound and (_inside(ctx, node, parent.body) or _inside(ctx, node, parent.target)):
                    return True
        return False

    # -- shared analysis ------------------------------------------------------------------------

    def _lanes(self, ctx: FileContext, target, iterable, region, scope: Scope, reads, claimed) -> list[_Lane]:
        pairs: list[tuple[cst.Name, cst.BaseExpression]] = []
        if isinstance(target, cst.Name):
            if ctx.is_tensor(iterable):
                pairs.append((target, iterable))
        elif isinstance(target, (cst.Tuple, cst.List)) and isinstance(iterable, cst.Call):
            func = dotted_name(iterable.func)
            args = iterable.args
            elements = target.elements
            if any(a.star for a in args) or self._builtin_shadowed(ctx, iterable, func or ""):
                return []
            if func == "enumerate" and len(elements) == 2 and args and args[0].keyword is None:
                start = args[1:]
                if len(start) <= 1 and all(a.keyword is None or a.keyword.value == "start" for a in start):
                    element = elements[1].value
                    if isinstance(element, cst.Name) and ctx.is_tensor(args[0].value):
                        pairs.append((element, args[0].value))
            elif func == "zip" and len(elements) == len(args) and not any(a.keyword for a in args):
                for element, arg in zip(elements, args):
                    if isinstance(element.value, cst.Name) and ctx.is_tensor(arg.value):
                        pairs.append((element.value, arg.value))
        lanes = []
        for name, it in pairs:
            lane = self._uses(ctx, _Lane(name, it), region, scope, reads, claimed)
            if lane is not None:
                lanes.append(lane)
        return lanes

    def _uses(self, ctx: FileContext, lane: _Lane, region, scope: Scope, reads, claimed) -> _Lane | None:
        name = lane.target.value
        for root in region:
            for node, parent in _references(ctx, walk(root), name, scope):
                use = self._use_of(ctx, node, parent)
                if use is None:
                    return None  # used as a tensor, rebound, deleted...
                if self._detachable(ctx, use):
                    return None  # FX301 turns it into `.detach()`: no sync at all
                lane.uses.append(use)
                if isinstance(use, cst.Call) and (isinstance(use.func, cst.Attribute) or self._same_type(ctx, use, lane)):
                    lane.items.append(use)
                site = reads.get(use)
                if site is not None:
                    if site in claimed or not site.certain:
                        return None
                    lane.sites.append(site)
        return lane if lane.sites else None

    def _same_type(self, ctx: FileContext, call: cst.Call, lane: _Lane) -> bool:
        """``int(v)`` over an integer tensor, ``float(v)`` over a floating one: the element
        that ``.tolist()`` gives is already that number, so the call can go."""
        assert isinstance(call.func, cst.Name)
        if call.func.value == "int":
            return certainly_integer(ctx, lane.iterable)
        return certainly_floating(ctx, lane.iterable)

    def _detachable(self, ctx: FileContext, use: cst.CSTNode) -> bool:
        """``x * v.item()`` with ``x`` a tensor: the value goes straight back into a tensor."""
        if isinstance(use, cst.Call) and isinstance(use.func, cst.Name) and use.func.value == "int":
            return False  # FX301 leaves `int(v)` alone (it truncates)
        parent = ctx.parents.get(use)
        if not isinstance(parent, cst.BinaryOperation) or not isinstance(parent.operator, ARITHMETIC):
            return False
        other = parent.right if parent.left is use else parent.left
        return ctx.kind(other) is Kind.TENSOR

    def _use_of(self, ctx: FileContext, name: cst.Name, parent: cst.CSTNode | None) -> cst.CSTNode | None:
        """``v.item()`` or ``float(v)`` / ``int(v)`` around ``name``; None for any other use."""
        if isinstance(parent, cst.Attribute) and parent.value is name and parent.attr.value == "item":
            call = ctx.parents.get(parent)
            if isinstance(call, cst.Call) and call.func is parent and not call.args:
                return call
            return None
        if isinstance(parent, cst.Arg) and parent.keyword is None and not parent.star:
            call = ctx.parents.get(parent)
            if (
                isinstance(call, cst.Call)
                and isinstance(call.func, cst.Name)
                and call.func.value in ("float", "int")
                and len(call.args) == 1
                and not self._builtin_shadowed(ctx, call, call.func.value)
            ):
                return call
        return None

    def _partners(self, iterable: cst.BaseExpression, lanes: list[_Lane]) -> list[cst.CSTNode]:
        """The other arguments of ``zip(...)`` / ``enumerate(...)``: they run between element reads."""
        if not isinstance(iterable, cst.Call):
            return []
        replaced = {lane.iterable for lane in lanes}
        return [a.value for a in iterable.args if a.value not in replaced]

    def _interference(self, ctx: FileContext, region: list[cst.CSTNode], lanes: list[_Lane]) -> str:
        """Why something between two element reads might write to the tensor ('' if nothing can)."""
        allowed = {use for lane in lanes for use in lane.uses}
        for root in region:
            for node in walk(root):
                if isinstance(node, (cst.Yield, cst.Await)):
                    return f"`{ctx.code(node)}` lets other code run between two element reads"
                if isinstance(node, cst.AugAssign):
                    if self._tensor_target(ctx, node.target):
                        return f"`{ctx.code(node).strip()}` modifies a tensor in place"
                elif isinstance(node, (cst.Assign, cst.AnnAssign)):
                    targets = [t.target for t in node.targets] if isinstance(node, cst.Assign) else [node.target]
                    for target in targets:
                        for sub in walk(target):
                            if isinstance(sub, (cst.Subscript, cst.Attribute)) and ctx.kind(sub.value) is Kind.TENSOR:
                                return f"`{ctx.code(sub)} = ...` writes to a tensor"
                elif isinstance(node, cst.Call) and node not in allowed:
                    problem = self._call_problem(ctx, node)
                    if problem:
                        return problem
        return ""

    def _tensor_target(self, ctx: FileContext, target: cst.BaseExpression) -> bool:
        if isinstance(target, (cst.Subscript, cst.Attribute)):
            return ctx.kind(target.value) is Kind.TENSOR or ctx.kind(target) is Kind.TENSOR
        return ctx.kind(target) is Kind.TENSOR

    def _call_problem(self, ctx: FileContext, call: cst.Call) -> str:
        """Why ``call``, made between two element reads, may change the tensor being read, or ""."""
        func = call.func
        unknown = f"fixitem cannot see what `{ctx.code(call)}` does: it may write to the tensor between two element reads"
        if isinstance(func, cst.Name) and func.value in TENSOR_SAFE_BUILTINS:
            return "" if not self._builtin_shadowed(ctx, call, func.value) else unknown
        found = call_effect(ctx, call)
        if found.effect.writes_no_tensor:
            return ""
        if isinstance(func, cst.Attribute) and func.attr.value in CONTAINER_WRITES and \
                ctx.kind(func.value) not in (Kind.TENSOR, Kind.MODULE):
            return ""  # a list or dict changes, not a tensor
        if found.effect is Effect.WRITES:
            return found.reason
        return unknown

    def _consumer_problem(self, ctx: FileContext, gen: cst.GeneratorExp) -> str:
        """A generator reads lazily: only one consumed on the spot reads the same values."""
        arg = ctx.parents.get(gen)
        call = ctx.parents.get(arg) if isinstance(arg, cst.Arg) else None
        if isinstance(call, cst.Call) and isinstance(arg, cst.Arg) and call.args and call.args[0] is arg and arg.keyword is None and not arg.star:
            func = call.func
            if isinstance(func, cst.Name) and func.value in CONSUMERS and not self._builtin_shadowed(ctx, call, func.value):
                return self._interference(ctx, [a.value for a in call.args[1:]], [])
            if ctx.provenance.imports.qualify(func) in QUALIFIED_CONSUMERS:
                return self._interference(ctx, [a.value for a in call.args[1:]], [])
            if isinstance(func, cst.Attribute) and func.attr.value == "join" and isinstance(func.value, (cst.SimpleString, cst.ConcatenatedString)):
                return ""
        return "the generator is not consumed on the spot: its elements would be read before the code that consumes it runs"

    def _builtin_shadowed(self, ctx: FileContext, node: cst.CSTNode, name: str) -> bool:
        return bool(name) and ctx.provenance.scope_of(node).lookup(name) is not None

    def _shadowed(self, ctx: FileContext, node: cst.CSTNode, lanes: list[_Lane], extra: str | None) -> str:
        for name in ("len", extra):
            if name and any(isinstance(lane.iterable, cst.Name) for lane in lanes) and self._builtin_shadowed(ctx, node, name):
                return f"`{name}` is rebound in this file"
        return ""

    # -- the rewrite ----------------------------------------------------------------------------

    def _read_once(self, ctx: FileContext, tensor: cst.BaseExpression) -> cst.Call:
        if _one_dimensional(ctx, tensor):
            return method_call(tensor, "tolist")
        if isinstance(tensor, cst.Name):
            exact = cst.parse_expression(f"{tensor.value}.reshape(len({tensor.value}))")
            return method_call(exact, "tolist")
        return method_call(method_call(tensor, "flatten"), "tolist")

    def _element_replacements(self, ctx: FileContext, lanes: list[_Lane]) -> dict[cst.CSTNode, cst.CSTNode]:
        replacements: dict[cst.CSTNode, cst.CSTNode] = {}
        for lane in lanes:
            new = self._read_once(ctx, lane.iterable)
            if isinstance(lane.iterable, cst.Name) and lane.iterable.lpar:
                new = new.with_changes(lpar=lane.iterable.lpar, rpar=lane.iterable.rpar)
            replacements[lane.iterable] = new
            for call in lane.items:
                replacements[call] = cst.Name(lane.target.value, lpar=call.lpar, rpar=call.rpar)
        return replacements

    def _fix(self, ctx: FileContext, lanes: list[_Lane], replacements) -> Fix:
        inexact = [
            lane.iterable for lane in lanes
            if not isinstance(lane.iterable, cst.Name) and not _one_dimensional(ctx, lane.iterable)
        ]
        if inexact:
            text = ctx.code(inexact[0])
            reason = (
                f"`{text}` is not a name, so `.flatten().tolist()` reads it: where the original raised "
                f"(rows of `{text}` holding several elements, or a 0-dim tensor) the fix returns the "
                "elements flattened; bind it to a name first for an exact fix"
            )
            return Fix(replacements, Safety.UNSAFE, reason, imports=())
        return Fix(replacements, Safety.SAFE, "", imports=())

    def _message(self, ctx: FileContext, lanes: list[_Lane]) -> str:
        lane = lanes[0]
        first = ctx.code(lane.sites[0].node)
        return f"`{ctx.code(lane.iterable)}` is read one element at a time (`{first}`): one host sync per element"

    def _note(self, ctx: FileContext, lanes: list[_Lane], problem: str, where: str) -> str:
        lane = lanes[0]
        it = ctx.code(lane.iterable)
        if _one_dimensional(ctx, lane.iterable):
            read_once = f"{it}.tolist()"
        elif isinstance(lane.iterable, cst.Name):
            read_once = f"{it}.reshape(len({it})).tolist()"
        else:
            read_once = f"{it}.flatten().tolist()"
        return (
            f"no fix: {problem}. If nothing in the {where} writes to `{it}`, read it once before the {where} "
            f"(`values = {read_once}`), iterate over `values` and drop the `.item()`"
        )


# torch functions whose result is always 1-D, and methods that make one.
ONE_DIMENSIONAL_FUNCTIONS = frozenset({"torch.linspace", "torch.arange", "torch.logspace", "torch.randperm"})
FLATTENING_METHODS = frozenset({"flatten", "ravel"})


def _references(ctx: FileContext, nodes, name: str, scope: Scope) -> Iterator[tuple[cst.Name, cst.CSTNode | None]]:
    """The ``Name`` nodes among ``nodes`` that are the variable ``name`` of ``scope`` (not an
    attribute or keyword of that name, not a same-named variable of a nested scope), with
    their parents."""
    for node in nodes:
        if not isinstance(node, cst.Name) or node.value != name:
            continue
        parent = ctx.parents.get(node)
        if isinstance(parent, cst.Attribute) and parent.attr is node:
            continue
        if isinstance(parent, cst.Arg) and parent.keyword is node:
            continue
        if ctx.provenance.scope_of(node).lookup(name) is not scope:
            continue
        yield node, parent


def _one_dimensional(ctx: FileContext, tensor: cst.BaseExpression) -> bool:
    """Is ``tensor`` certainly 1-D (``torch.linspace(...)``, ``x.flatten()``, ``x.view(-1)``)? Then
    ``tensor.tolist()`` is exactly the per-element reads."""
    if not isinstance(tensor, cst.Call):
        return False
    if (ctx.provenance.imports.qualify(tensor.func) or "") in ONE_DIMENSIONAL_FUNCTIONS:
        return True
    func = tensor.func
    if not isinstance(func, cst.Attribute) or ctx.kind(func.value) is not Kind.TENSOR:
        return False
    if func.attr.value in FLATTENING_METHODS and not tensor.args:
        return True
    if func.attr.value in ("view", "reshape") and len(tensor.args) == 1:
        value = tensor.args[0].value
        return isinstance(value, cst.UnaryOperation) and isinstance(value.operator, cst.Minus) and (
            isinstance(value.expression, cst.Integer) and value.expression.value == "1"
        )
    return False


def _is_zero(expr: cst.BaseExpression) -> bool:
    return isinstance(expr, cst.Integer) and expr.value == "0"


def _inside(ctx: FileContext, node: cst.CSTNode, root: cst.CSTNode) -> bool:
    return node is root or any(parent is root for parent in ctx.ancestors(node))


def _is_store(ctx: FileContext, node: cst.CSTNode) -> bool:
    """Is ``node`` (a name) an assignment target (``v = ...``, ``for v in ...``, ``a, v = ...``)?"""
    child = node
    for parent in ctx.ancestors(node):
        if isinstance(parent, (cst.Tuple, cst.List, cst.Element, cst.StarredElement)):
            child = parent
            continue
        if isinstance(parent, cst.AssignTarget):
            return True
        if isinstance(parent, (cst.For, cst.CompFor)):
            return child is parent.target
        if isinstance(parent, (cst.AugAssign, cst.AnnAssign)):
            return child is parent.target and isinstance(parent, cst.AnnAssign)
        if isinstance(parent, cst.NamedExpr):
            return child is parent.target
        return False
    return False
