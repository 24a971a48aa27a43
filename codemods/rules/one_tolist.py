"""FX303: per-element ``.item()`` in a loop or comprehension: one ``.tolist()`` instead."""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from .. import gen
from ..advice import usage
from ..model.context import FileContext
from ..model.dtypes import certainly_floating, certainly_integer
from ..model.effects import CONTAINER_WRITES, TENSOR_SAFE_BUILTINS, Effect, call_effect
from ..model.provenance import Kind, Scope, dotted_name
from ..model.syncs import SyncSite, is_item_call
from ..model.tree import children_of, nodes_within, walk
from ..rule import Fix, Invalid, Report, Rule, Safety, Valid, dedent

READ_KINDS = ("item", "float", "int")
ARITHMETIC = (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv, ast.Mod, ast.Pow)

# Calls that consume a generator at once, and treat a list the same way.
CONSUMERS = frozenset({"sum", "min", "max", "sorted", "list", "tuple", "set", "frozenset", "any", "all"})
QUALIFIED_CONSUMERS = frozenset(
    {
        "math.fsum", "math.prod", "statistics.mean", "statistics.fmean", "statistics.median",
        "statistics.stdev", "statistics.pstdev", "statistics.variance", "statistics.pvariance",
    }
)
COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)
LOOPS = (ast.For, ast.AsyncFor)


@dataclass
class _Lane:
    """One element variable bound from a tensor, and where it is used."""

    target: ast.Name
    iterable: ast.expr  # the tensor expression the loop iterates (what gets replaced)
    items: list[ast.Call] = field(default_factory=list)  # ``v.item()`` calls, replaced by ``v``
    uses: list[ast.AST] = field(default_factory=list)  # items + ``float(v)`` / ``int(v)``
    sites: list[SyncSite] = field(default_factory=list)
    other: bool = False  # used some other way (as a tensor)


@dataclass(frozen=True)
class _Arg:
    """One argument of a call as libcst listed them: ``value``, ``keyword=value``,
    ``*value`` or ``**value`` (``ast`` keeps positional and keyword arguments apart)."""

    value: ast.expr
    keyword: str | None
    star: str


def _arguments(call: ast.Call) -> list[_Arg]:
    """The arguments of ``call`` in source order."""
    found: list[_Arg] = []
    for node in children_of(call)[1:]:
        if type(node) is ast.keyword:
            found.append(_Arg(node.value, node.arg, "" if node.arg is not None else "**"))
        elif type(node) is ast.Starred:
            found.append(_Arg(node.value, None, "*"))
        else:
            found.append(_Arg(node, None, ""))  # type: ignore[arg-type]
    return found


def _no_arguments(call: ast.Call) -> bool:
    return not call.args and not call.keywords


def _argument_count(call: ast.Call) -> int:
    return len(call.args) + len(call.keywords)


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
    `TypeError`. The fix raises eagerly, before the first element, so it is
    safe only where the read is the first thing each pass does that can be
    seen: in a statement of the loop's own body (or in a comprehension's
    element, or its first filter), not under a condition (`if`,
    `x if c else y`, `and` / `or`), with nothing before it in the pass that
    leaves the pass (`break`, `continue`, `return`, `raise`) or has an effect
    (a call that is not pure, a write to an object); the loop is not a `zip`
    (which stops at its shortest argument), nor inside a `try` of its
    function that handles exceptions (they would differ). A handler in a
    caller that catches the `ValueError` of `float(v)` is not looked for. A
    loop that stops early now copies the whole tensor (one copy instead of a
    few element reads), and `float(x)` of a tensor that requires grad no
    longer warns.

    **Unsafe** where a pass may read no row (`for v in t: if c: out.append(v.item())`,
    `zip(names, t)`, a filter that may reject every row) or does something
    first (`print(...)` before the read), and inside a `try`: over rows of
    several elements the fix raises before the loop, where the original raised
    later (after what the pass did first, or into the handler) or not at all.
    Also when the loop iterates an expression (`for p in logits.softmax(-1)`):
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
            unsafe=True,  # ``names`` may be empty: then no row of ``values`` was read
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
        # ``async for`` is an ``ast.AsyncFor``: left alone, as the loop and the comprehension
        # checks below leave asynchronous ones.
        for node in ctx.nodes(ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp, ast.For):
            if type(node) is ast.For:
                report = self._loop(ctx, node, reads, claimed)  # type: ignore[arg-type]
            else:
                report = self._comprehension(ctx, node, reads, claimed)
            if report is not None:
                suppressed = any(ctx.suppressions.suppressed(ctx.position(s.node)[0], self.code) for s in report.sites)
                if not suppressed:
                    yield report

    # -- comprehensions -------------------------------------------------------------------------

    def _comprehension(self, ctx: FileContext, comp, reads, claimed) -> Report | None:
        if len(comp.generators) != 1 or comp.generators[0].is_async:
            return None
        for_in = comp.generators[0]
        scope = ctx.provenance.scopes.get(comp)
        if scope is None:
            return None
        region: list[ast.AST] = [comp.key, comp.value] if type(comp) is ast.DictComp else [comp.elt]
        region += for_in.ifs
        indexed = self._indexed(ctx, comp, for_in.target, for_in.iter, region, scope, reads, claimed)
        if indexed is not None:
            return indexed
        lanes = self._lanes(ctx, for_in.target, for_in.iter, region, scope, reads, claimed)
        if not lanes:
            return None
        sites = [s for lane in lanes for s in lane.sites]
        message = self._message(ctx, lanes)
        problem = self._interference(ctx, region + self._partners(for_in.iter, lanes), lanes)
        if not problem and type(comp) is ast.GeneratorExp:
            problem = self._consumer_problem(ctx, comp)
        if not problem:
            problem = self._shadowed(ctx, comp, lanes, "set" if type(comp) is ast.SetComp else None)
        if problem:
            return Report(comp, message, sites=sites, note=self._note(ctx, lanes, problem, "comprehension"))
        replacements: dict[ast.AST, gen.Replacement] = {}
        lane = lanes[0]
        identity = (
            len(lanes) == 1
            and lane.iterable is for_in.iter
            and not for_in.ifs
            and type(comp) in (ast.ListComp, ast.SetComp, ast.GeneratorExp)
            and any(comp.elt is item for item in lane.items)
            and "#" not in ctx.code(comp)
        )
        if identity:
            whole: gen.Node = self._read_once(ctx, lane.iterable)
            if type(comp) is ast.SetComp:
                whole = gen.Call(gen.Name("set"), [whole])
            replacements[comp] = _in_place_of(ctx, comp, whole)
        else:
            replacements.update(self._element_replacements(ctx, lanes))
        return Report(comp, message, fix=self._fix(ctx, comp, lanes, replacements), sites=sites)

    def _indexed(self, ctx: FileContext, node, target, iterable, region, scope: Scope, reads, claimed) -> Report | None:
        """``[t[i].item() for i in range(len(t))]`` (also ``t.shape[0]``, ``t.size(0)``, ``t.numel()``)."""
        tensor = self._range_of_tensor(ctx, iterable)
        if tensor is None or type(target) is not ast.Name:
            return None
        index = target.id
        calls: list[ast.Call] = []
        for sub in (n for root in region for n in walk(root)):
            if not is_item_call(sub):
                continue
            value = sub.func.value  # type: ignore[attr-defined]
            if type(value) is not ast.Subscript or type(value.value) is not ast.Name or value.value.id != tensor.id:
                continue
            element = _single_index(ctx, value)
            if (
                type(element) is ast.Name
                and element.id == index
                and ctx.provenance.scope_of(element).lookup(index) is scope
            ):
                calls.append(sub)  # type: ignore[arg-type]
        sites = [reads[c] for c in calls if c in reads]
        if not sites or any(s in claimed or not s.certain for s in sites):
            return None
        message = f"`{tensor.id}` is read one element at a time (`{ctx.code(calls[0])}`): one host sync per element"
        identity = (
            type(node) in (ast.ListComp, ast.GeneratorExp)
            and not node.generators[0].ifs
            and node.elt is calls[0]
            and len(calls) == 1
            and "#" not in ctx.code(node)
        )
        problem = ""
        if not identity:
            problem = "the index is used for more than reading one element"
        elif type(node) is ast.GeneratorExp:
            problem = self._consumer_problem(ctx, node)
        if not problem and self._builtin_shadowed(ctx, node, "len"):
            problem = "`len` is rebound in this file"
        read_once = f"{tensor.id}.reshape(len({tensor.id})).tolist()"
        if problem:
            if type(node) is ast.For and self._accumulates(ctx, sites):
                return None  # FX202 keeps the running sum on the device: better than a note
            note = (f"no fix: {problem}. Read the tensor once before the loop, `values = {read_once}`, "
                    f"and use `values[{index}]` in place of `{ctx.code(calls[0])}`")
            return Report(node, message, sites=sites, note=note)
        whole = _in_place_of(ctx, node, self._read_once(ctx, tensor))
        return Report(node, message, fix=Fix({node: whole}, Safety.SAFE, "", imports=()), sites=sites)

    def _range_of_tensor(self, ctx: FileContext, iterable: ast.expr) -> ast.Name | None:
        """The tensor ``t`` of ``range(len(t))`` / ``range(t.shape[0])`` / ``range(t.size(0))`` / ``range(t.numel())``."""
        if not (type(iterable) is ast.Call and type(iterable.func) is ast.Name and iterable.func.id == "range"):
            return None
        args = _arguments(iterable)
        if len(args) != 1 or args[0].keyword is not None or args[0].star:
            return None
        if self._builtin_shadowed(ctx, iterable, "range"):
            return None
        bound = args[0].value
        tensor: ast.expr | None = None
        if type(bound) is ast.Call and type(bound.func) is ast.Name and bound.func.id == "len" and _argument_count(bound) == 1:
            tensor = _arguments(bound)[0].value
        elif type(bound) is ast.Call and type(bound.func) is ast.Attribute:
            method = bound.func.attr
            if method == "numel" and _no_arguments(bound):
                tensor = bound.func.value
            elif method == "size" and _argument_count(bound) == 1 and _is_zero(ctx, _arguments(bound)[0].value):
                tensor = bound.func.value
        elif type(bound) is ast.Subscript and type(bound.value) is ast.Attribute and bound.value.attr == "shape":
            if _is_zero(ctx, _single_index(ctx, bound)):
                tensor = bound.value.value
        if type(tensor) is ast.Name and ctx.is_tensor(tensor):
            return tensor  # type: ignore[return-value]
        return None

    # -- loops ----------------------------------------------------------------------------------

    def _loop(self, ctx: FileContext, loop: ast.For, reads, claimed) -> Report | None:
        scope = ctx.provenance.scope_of(loop)
        region: list[ast.AST] = list(loop.body)
        indexed = self._indexed(ctx, loop, loop.target, loop.iter, region, scope, reads, claimed)
        if indexed is not None:
            return indexed
        lanes = self._lanes(ctx, loop.target, loop.iter, region, scope, reads, claimed)
        if not lanes:
            return None
        for lane in lanes:
            if self._declared_global(ctx, scope, lane.target.id):
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
        return Report(loop, message, fix=self._fix(ctx, loop, lanes, replacements), sites=sites)

    def _accumulates(self, ctx: FileContext, sites: list[SyncSite]) -> bool:
        return any(usage(ctx, site.node) == "accumulate" for site in sites)

    def _declared_global(self, ctx: FileContext, scope: Scope, name: str) -> bool:
        for node in ctx.nodes(ast.Global, ast.Nonlocal):
            if name in node.names:  # type: ignore[attr-defined]
                if ctx.provenance.scope_of(node) is scope:
                    return True
        return False

    def _read_outside(self, ctx: FileContext, loop: ast.For, scope: Scope, lanes: list[_Lane]) -> str:
        """The loop variable must not be read after (or before) the loop: it would now
        hold a Python number where it held a tensor."""
        for lane in lanes:
            name = lane.target.id
            problem = f"`{name}` is read outside the loop, where it would now be a Python number"
            for node, _ in _references(ctx, ctx.names(name, scope.node), name, scope):  # its names lie below it
                if node is lane.target:
                    continue
                if _in_block(ctx, node, loop.body):
                    continue
                if self._inside_other_loop_binding(ctx, node, loop, name) or _is_store(ctx, node):
                    continue
                return problem
            # ``def name``, ``import name``, ``except ... as name`` (no ``Name`` node in ``ast``).
            for node in _unnamed_references(ctx, scope.node, name, scope):
                if _in_block(ctx, node, loop.body) or self._inside_other_loop_binding(ctx, node, loop, name):
                    continue
                return problem
        return ""

    def _inside_other_loop_binding(self, ctx: FileContext, node: ast.AST, loop: ast.For, name: str) -> bool:
        for parent in ctx.ancestors(node):
            if type(parent) in LOOPS and parent is not loop:
                bound = {n.id for n in walk(parent.target) if type(n) is ast.Name}  # type: ignore[attr-defined]
                if name in bound and (_in_block(ctx, node, parent.body) or ctx.below(node, parent.target)):  # type: ignore[attr-defined]
                    return True
        return False

    # -- shared analysis ------------------------------------------------------------------------

    def _lanes(self, ctx: FileContext, target, iterable, region, scope: Scope, reads, claimed) -> list[_Lane]:
        pairs: list[tuple[ast.Name, ast.expr]] = []
        if type(target) is ast.Name:
            if ctx.is_tensor(iterable):
                pairs.append((target, iterable))
        elif type(target) in (ast.Tuple, ast.List) and type(iterable) is ast.Call:
            func = dotted_name(iterable.func)
            args = _arguments(iterable)
            # libcst's ``StarredElement.value`` is the starred expression, as here.
            elements = [e.value if type(e) is ast.Starred else e for e in target.elts]
            if any(a.star for a in args) or self._builtin_shadowed(ctx, iterable, func or ""):
                return []
            if func == "enumerate" and len(elements) == 2 and args and args[0].keyword is None:
                start = args[1:]
                if len(start) <= 1 and all(a.keyword is None or a.keyword == "start" for a in start):
                    element = elements[1]
                    if type(element) is ast.Name and ctx.is_tensor(args[0].value):
                        pairs.append((element, args[0].value))
            elif func == "zip" and len(elements) == len(args) and not any(a.keyword for a in args):
                for element, arg in zip(elements, args):
                    if type(element) is ast.Name and ctx.is_tensor(arg.value):
                        pairs.append((element, arg.value))
        lanes = []
        for name, it in pairs:
            lane = self._uses(ctx, _Lane(name, it), region, scope, reads, claimed)
            if lane is not None:
                lanes.append(lane)
        return lanes

    def _uses(self, ctx: FileContext, lane: _Lane, region, scope: Scope, reads, claimed) -> _Lane | None:
        name = lane.target.id
        for root in region:
            for _ in _unnamed_references(ctx, root, name, scope):
                return None  # rebound by ``def``, ``import``, ``except ... as``...
        for root in region:
            for node, parent in _references(ctx, ctx.names(name, root), name, scope):
                use = self._use_of(ctx, node, parent)
                if use is None:
                    return None  # used as a tensor, rebound, deleted...
                if self._detachable(ctx, use):
                    return None  # FX301 turns it into `.detach()`: no sync at all
                lane.uses.append(use)
                if type(use.func) is ast.Attribute or self._same_type(ctx, use, lane):
                    lane.items.append(use)
                site = reads.get(use)
                if site is not None:
                    if site in claimed or not site.certain:
                        return None
                    lane.sites.append(site)
        return lane if lane.sites else None

    def _same_type(self, ctx: FileContext, call: ast.Call, lane: _Lane) -> bool:
        """``int(v)`` over an integer tensor, ``float(v)`` over a floating one: the element
        that ``.tolist()`` gives is already that number, so the call can go."""
        assert type(call.func) is ast.Name
        if call.func.id == "int":
            return certainly_integer(ctx, lane.iterable)
        return certainly_floating(ctx, lane.iterable)

    def _detachable(self, ctx: FileContext, use: ast.Call) -> bool:
        """``x * v.item()`` with ``x`` a tensor: the value goes straight back into a tensor."""
        if type(use.func) is ast.Name and use.func.id == "int":
            return False  # FX301 leaves `int(v)` alone (it truncates)
        parent = ctx.parents.get(use)
        if type(parent) is not ast.BinOp or not isinstance(parent.op, ARITHMETIC):
            return False
        other = parent.right if parent.left is use else parent.left
        return ctx.kind(other) is Kind.TENSOR

    def _use_of(self, ctx: FileContext, name: ast.Name, parent: ast.AST | None) -> ast.Call | None:
        """``v.item()`` or ``float(v)`` / ``int(v)`` around ``name``; None for any other use."""
        if type(parent) is ast.Attribute and parent.value is name and parent.attr == "item":
            call = ctx.parents.get(parent)
            if type(call) is ast.Call and call.func is parent and _no_arguments(call):
                return call
            return None
        if type(parent) is ast.Call and any(a is name for a in parent.args):  # a positional argument
            call = parent
            if (
                type(call.func) is ast.Name
                and call.func.id in ("float", "int")
                and _argument_count(call) == 1
                and not self._builtin_shadowed(ctx, call, call.func.id)
            ):
                return call
        return None

    def _partners(self, iterable: ast.expr, lanes: list[_Lane]) -> list[ast.AST]:
        """The other arguments of ``zip(...)`` / ``enumerate(...)``: they run between element reads."""
        if type(iterable) is not ast.Call:
            return []
        replaced = {lane.iterable for lane in lanes}
        return [a.value for a in _arguments(iterable) if a.value not in replaced]

    def _interference(self, ctx: FileContext, region: list[ast.AST], lanes: list[_Lane]) -> str:
        """Why something between two element reads might write to the tensor ('' if nothing can)."""
        allowed = {use for lane in lanes for use in lane.uses}
        for root in region:
            for node in walk(root):
                t = type(node)
                if t is ast.Yield or t is ast.YieldFrom or t is ast.Await:
                    return f"`{ctx.code(node)}` lets other code run between two element reads"
                if t is ast.AugAssign:
                    if self._tensor_target(ctx, node.target):  # type: ignore[attr-defined]
                        return f"`{ctx.code(node).strip()}` modifies a tensor in place"
                elif t is ast.Assign or t is ast.AnnAssign:
                    targets = node.targets if t is ast.Assign else [node.target]  # type: ignore[attr-defined]
                    for target in targets:
                        for sub in walk(target):
                            if type(sub) in (ast.Subscript, ast.Attribute) and ctx.kind(sub.value) is Kind.TENSOR:  # type: ignore[attr-defined]
                                return f"`{ctx.code(sub)} = ...` writes to a tensor"
                elif t is ast.Call and node not in allowed:
                    problem = self._call_problem(ctx, node)  # type: ignore[arg-type]
                    if problem:
                        return problem
        return ""

    def _tensor_target(self, ctx: FileContext, target: ast.expr) -> bool:
        if type(target) in (ast.Subscript, ast.Attribute):
            return ctx.kind(target.value) is Kind.TENSOR or ctx.kind(target) is Kind.TENSOR  # type: ignore[attr-defined]
        return ctx.kind(target) is Kind.TENSOR

    def _call_problem(self, ctx: FileContext, call: ast.Call) -> str:
        """Why ``call``, made between two element reads, may change the tensor being read, or ""."""
        func = call.func
        unknown = f"fixitem cannot see what `{ctx.code(call)}` does: it may write to the tensor between two element reads"
        if type(func) is ast.Name and func.id in TENSOR_SAFE_BUILTINS:
            return "" if not self._builtin_shadowed(ctx, call, func.id) else unknown
        found = call_effect(ctx, call)
        if found.effect.writes_no_tensor:
            return ""
        if type(func) is ast.Attribute and func.attr in CONTAINER_WRITES and \
                ctx.kind(func.value) not in (Kind.TENSOR, Kind.MODULE):
            return ""  # a list or dict changes, not a tensor
        if found.effect is Effect.WRITES:
            return found.reason
        return unknown

    def _consumer_problem(self, ctx: FileContext, generator: ast.GeneratorExp) -> str:
        """A generator reads lazily: only one consumed on the spot reads the same values."""
        call = ctx.parents.get(generator)
        if type(call) is ast.Call and call.args and call.args[0] is generator:  # its first argument, not starred
            func = call.func
            rest: list[ast.AST] = [a.value for a in _arguments(call)[1:]]
            if type(func) is ast.Name and func.id in CONSUMERS and not self._builtin_shadowed(ctx, call, func.id):
                return self._interference(ctx, rest, [])
            if ctx.provenance.imports.qualify(func) in QUALIFIED_CONSUMERS:
                return self._interference(ctx, rest, [])
            if type(func) is ast.Attribute and func.attr == "join" and type(func.value) is ast.Constant \
                    and isinstance(func.value.value, (str, bytes)):
                return ""
        return "the generator is not consumed on the spot: its elements would be read before the code that consumes it runs"

    def _builtin_shadowed(self, ctx: FileContext, node: ast.AST, name: str) -> bool:
        return bool(name) and ctx.provenance.scope_of(node).lookup(name) is not None

    def _shadowed(self, ctx: FileContext, node: ast.AST, lanes: list[_Lane], extra: str | None) -> str:
        for name in ("len", extra):
            if name and any(type(lane.iterable) is ast.Name for lane in lanes) and self._builtin_shadowed(ctx, node, name):
                return f"`{name}` is rebound in this file"
        return ""

    # -- the rewrite ----------------------------------------------------------------------------

    def _read_once(self, ctx: FileContext, tensor: ast.expr) -> gen.Call:
        if _one_dimensional(ctx, tensor):
            return gen.method_call(ctx, tensor, "tolist")
        if type(tensor) is ast.Name:
            exact = gen.Raw(f"{tensor.id}.reshape(len({tensor.id}))")
            return gen.method_call(ctx, exact, "tolist")
        return gen.method_call(ctx, gen.method_call(ctx, tensor, "flatten"), "tolist")

    def _element_replacements(self, ctx: FileContext, lanes: list[_Lane]) -> dict[ast.AST, gen.Replacement]:
        replacements: dict[ast.AST, gen.Replacement] = {}
        for lane in lanes:
            new: gen.Node = self._read_once(ctx, lane.iterable)
            if type(lane.iterable) is ast.Name and ctx.parenthesized(lane.iterable):
                new = gen.Paren(new)
            replacements[lane.iterable] = new
            for call in lane.items:
                name = gen.Name(lane.target.id)
                replacements[call] = gen.Paren(name) if ctx.parenthesized(call) else name
        return replacements

    def _fix(self, ctx: FileContext, node: ast.AST, lanes: list[_Lane], replacements) -> Fix:
        inexact = [
            lane.iterable for lane in lanes
            if type(lane.iterable) is not ast.Name and not _one_dimensional(ctx, lane.iterable)
        ]
        if inexact:
            text = ctx.code(inexact[0])
            reason = (
                f"`{text}` is not a name, so `.flatten().tolist()` reads it: where the original raised "
                f"(rows of `{text}` holding several elements, or a 0-dim tensor) the fix returns the "
                "elements flattened; bind it to a name first for an exact fix"
            )
            return Fix(replacements, Safety.UNSAFE, reason, imports=())
        strict = [lane for lane in lanes if not _one_dimensional(ctx, lane.iterable)]
        handler = _handled_around(ctx, node) if strict else None
        if handler is not None:
            text = ctx.code(strict[0].iterable)
            reason = (f"the `try` around it (line {ctx.position(handler)[0]}) handles exceptions: where the reads "
                      f"of `{text}` raised, `{text}.reshape(len({text}))` raises another one (`RuntimeError`), "
                      "before the loop")
            return Fix(replacements, Safety.UNSAFE, reason, imports=())
        skipping = _may_read_no_row(ctx, node, strict) if strict else ""
        if skipping:
            text = ctx.code(strict[0].iterable)
            reason = (
                f"{skipping}: where the rows of `{text}` hold several elements, `{text}.reshape(len({text}))` "
                "raises before the loop, where the original raised later (after what a pass does first) or "
                "not at all (a loop that reads no row)"
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
        elif type(lane.iterable) is ast.Name:
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


def _in_place_of(ctx: FileContext, comp: ast.AST, whole: gen.Node) -> gen.Node:
    """``whole`` as the replacement of the comprehension ``comp`` read at once. A list or set
    display keeps the parentheses written around it; a generator loses its own. ``ast``
    gives a generator that is a call's only argument the call's parentheses
    (``sum(v for v in t)``): those stay, with the spacing inside them."""
    if type(comp) is ast.GeneratorExp:
        if not _call_parentheses(ctx, comp):
            return whole
        start, end = ctx.span(comp)
        generator = comp.generators[-1]  # type: ignore[attr-defined]
        last = generator.ifs[-1] if generator.ifs else generator.iter
        before = ctx.source[start:ctx.span(comp.elt)[0]]  # type: ignore[attr-defined]
        after = ctx.source[ctx.span(last)[1]:end]
        return _Enclosed(before, whole, after)
    return gen.Paren(whole) if ctx.parenthesized(comp) else whole


class _Enclosed(gen.Node):
    """``value`` between two texts of the file kept as written: the parentheses of the call
    a generator was the only argument of, and the spacing inside them."""

    kind = "Paren"

    def __init__(self, before: str, value: gen.Expr_, after: str) -> None:
        self.before = before
        self.value = gen.expr(value)
        self.after = after

    def render(self, ctx: FileContext, indent: str = "") -> str:
        return f"{self.before}{self.value.render(ctx, indent)}{self.after}"

    def children(self) -> list[gen.Expr_]:
        return [self.value]

    def rebuilt(self, kids: list[gen.Expr_]) -> gen.Node:
        return _Enclosed(self.before, kids[0], self.after)


def _call_parentheses(ctx: FileContext, generator: ast.AST) -> bool:
    """Does the text of ``generator`` start with the ``(`` of the call it is the only argument of?"""
    call = ctx.parents.get(generator)
    if type(call) is not ast.Call or call.func is generator:
        return False
    between = ctx.source[ctx.span(call.func)[1]:ctx.positions.span(generator)[0]]
    return not between.replace("\\", "").strip()


def _references(ctx: FileContext, nodes: Iterable[ast.AST], name: str, scope: Scope) -> Iterator[tuple[ast.Name, ast.AST | None]]:
    """The ``Name`` nodes among ``nodes`` that are the variable ``name`` of ``scope`` (not a
    same-named variable of a nested scope), with their parents. (An attribute or a
    keyword of that name is a string in ``ast``, never a ``Name``.)"""
    for node in nodes:
        if type(node) is not ast.Name or node.id != name:  # type: ignore[attr-defined]
            continue
        if ctx.provenance.scope_of(node).lookup(name) is not scope:
            continue
        yield node, ctx.parents.get(node)  # type: ignore[misc]


# Nodes that spell a name as a string where libcst had a ``Name`` node: ``def name``,
# ``class name``, ``import name``, ``from name import ...``, ``except ... as name``,
# ``global name``, ``case name`` patterns.
_UNNAMED = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Global, ast.Nonlocal, ast.alias,
            ast.ImportFrom, ast.ExceptHandler, ast.MatchAs, ast.MatchStar, ast.MatchMapping, ast.MatchClass)


def _spells(node: ast.AST, name: str) -> bool:
    t = type(node)
    if t is ast.Global or t is ast.Nonlocal:
        return name in node.names  # type: ignore[attr-defined]
    if t is ast.alias:
        return node.name.split(".")[0] == name or node.asname == name  # type: ignore[attr-defined]
    if t is ast.ImportFrom:
        return (node.module or "").split(".")[0] == name  # type: ignore[attr-defined]
    if t is ast.MatchMapping:
        return node.rest == name  # type: ignore[attr-defined]
    if t is ast.MatchClass:
        return name in node.kwd_attrs  # type: ignore[attr-defined]
    return getattr(node, "name", None) == name


def _unnamed_references(ctx: FileContext, root: ast.AST, name: str, scope: Scope) -> Iterator[ast.AST]:
    """The nodes in ``root`` that bind or name the variable ``name`` of ``scope`` without a
    ``Name`` node (``def name``, ``import name``, ``except E as name``...): libcst
    listed them among the variable's names, and they are neither a read of the element
    nor a store of it."""
    for node in nodes_within(root, *_UNNAMED):
        if _spells(node, name) and ctx.provenance.scope_of(node).lookup(name) is scope:
            yield node


_EXITS = (ast.Break, ast.Continue, ast.Return, ast.Raise)


def _may_read_no_row(ctx: FileContext, node: ast.AST, lanes: list[_Lane]) -> str:
    """Why the loop or comprehension ``node`` may run over rows of a lane's tensor without
    reading any ('' when each lane's first row is read whenever the loop runs at all):
    ``reshape(len(t))`` checks every row before the first, where ``.item()`` checked only
    the rows it read."""
    loop_iter = node.iter if type(node) is ast.For else node.generators[0].iter  # type: ignore[attr-defined]
    if type(loop_iter) is ast.Call and dotted_name(loop_iter.func) == "zip":
        return f"`{ctx.code(loop_iter)}` stops at its shortest argument"
    # A comprehension's first filter runs in every pass; what follows it only where it let the row through.
    filters = [] if type(node) is ast.For else node.generators[0].ifs  # type: ignore[attr-defined]
    for lane in lanes:
        if not any((not filters or ctx.below(use, filters[0])) and _read_each_time(ctx, node, use)
                   for use in lane.uses):
            if filters:
                return f"`if {ctx.code(filters[0])}` may reject every row"
            return f"`{ctx.code(lane.uses[0])}` is not the first thing each pass does (it may be skipped, or come after an effect)"
    return ""


def _read_each_time(ctx: FileContext, node: ast.AST, use: ast.AST) -> bool:
    """Is ``use`` the first thing each pass of the loop or comprehension ``node`` does that
    can be seen: evaluated in every pass, with nothing before it in the pass that leaves the
    pass (``break``, ``continue``, ``return``, ``raise``) or has an effect (a call that is not
    pure, a write to an object)? Then, over rows the reads reject, the original failed at the
    first row before anything of the pass happened, as the fix fails before the loop."""
    child = use
    statement: ast.stmt | None = None
    for parent in ctx.ancestors(use):
        if parent is node:
            break
        t = type(parent)
        if t is ast.IfExp and child is not parent.test:  # type: ignore[attr-defined]
            return False
        if t is ast.BoolOp and child is not parent.values[0]:  # type: ignore[attr-defined]
            return False
        if t in (ast.Lambda, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, *COMPREHENSIONS):
            return False
        if isinstance(parent, ast.stmt):
            # A statement of the loop's own body, holding the read in its expressions (``if
            # v.item() > 0:``), not in a block of its own (``if c: out.append(v.item())``).
            if type(node) is not ast.For or not any(parent is s for s in node.body):  # type: ignore[attr-defined]
                return False
            if any(child is s for field in ("body", "orelse", "handlers", "finalbody")
                   for s in getattr(parent, field, ())):
                return False
            statement = parent
            break
        child = parent
    # What the pass evaluates before the read: the statements before its own, and what
    # stands before it in its statement (or in the comprehension's element or first filter).
    if statement is not None:
        body = node.body  # type: ignore[attr-defined]
        earlier = [n for s in body[:next(i for i, s in enumerate(body) if s is statement)] for n in walk(s)]
        region: ast.AST = statement
    else:
        earlier = []
        generator = node.generators[0]  # type: ignore[attr-defined]
        region = generator.ifs[0] if generator.ifs else (node.key if type(node) is ast.DictComp else node.elt)  # type: ignore[attr-defined]
    start = ctx.positions.offset(use)
    above = set(map(id, ctx.ancestors(use)))
    earlier += [n for n in walk(region) if ctx.positions.offset(n) < start and id(n) not in above]
    return not any(_seen(ctx, n) for n in earlier)


def _seen(ctx: FileContext, node: ast.AST) -> bool:
    """Can evaluating ``node`` (not what it holds) be seen, or leave the pass?"""
    t = type(node)
    if t in _EXITS or t is ast.Yield or t is ast.YieldFrom or t is ast.Await or t is ast.Delete:
        return True
    if t is ast.Call:
        return not call_effect(ctx, node).pure  # type: ignore[arg-type]
    if t in (ast.Assign, ast.AugAssign, ast.AnnAssign):
        targets = node.targets if t is ast.Assign else [node.target]  # type: ignore[attr-defined]
        return any(type(target) is not ast.Name for target in targets)  # an object's attribute or item
    return False


def _handled_around(ctx: FileContext, node: ast.AST) -> ast.Try | None:
    """The ``try`` with handlers around ``node`` in its function, if any."""
    for parent in ctx.ancestors(node):
        if isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            return None
        if type(parent) is ast.Try and parent.handlers and not any(ctx.below(node, h) for h in parent.handlers):
            return parent  # type: ignore[return-value]
    return None


def _one_dimensional(ctx: FileContext, tensor: ast.expr) -> bool:
    """Is ``tensor`` certainly 1-D (``torch.linspace(...)``, ``x.flatten()``, ``x.view(-1)``)? Then
    ``tensor.tolist()`` is exactly the per-element reads."""
    if type(tensor) is not ast.Call:
        return False
    if (ctx.provenance.imports.qualify(tensor.func) or "") in ONE_DIMENSIONAL_FUNCTIONS:
        return True
    func = tensor.func
    if type(func) is not ast.Attribute or ctx.kind(func.value) is not Kind.TENSOR:
        return False
    if func.attr in FLATTENING_METHODS and _no_arguments(tensor):
        return True
    if func.attr in ("view", "reshape") and _argument_count(tensor) == 1:
        value = _arguments(tensor)[0].value
        return type(value) is ast.UnaryOp and type(value.op) is ast.USub and _is_literal(ctx, value.operand, "1")
    return False


def _is_literal(ctx: FileContext, expr: ast.AST | None, text: str) -> bool:
    """Is ``expr`` the integer literal written ``text`` (libcst's ``Integer(value=text)``)?"""
    if type(expr) is not ast.Constant or type(expr.value) is not int:  # type: ignore[attr-defined]
        return False
    start, end = ctx.positions.span(expr)
    return ctx.source[start:end] == text


def _is_zero(ctx: FileContext, expr: ast.AST | None) -> bool:
    return _is_literal(ctx, expr, "0")


def _single_index(ctx: FileContext, subscript: ast.Subscript) -> ast.expr | None:
    """The one index of ``x[i]`` (also ``x[i,]``, one element for libcst too), or None
    for a slice or several indices."""
    index = subscript.slice
    if type(index) is ast.Tuple:
        if len(index.elts) == 1 and type(index.elts[0]) is not ast.Starred and ctx.source[ctx.positions.span(index)[0]] != "(":
            return index.elts[0]
        return None
    if type(index) is ast.Slice:
        return None
    return index


def _in_block(ctx: FileContext, node: ast.AST, statements: list[ast.stmt]) -> bool:
    """Is ``node`` in one of ``statements`` (a block: a loop's body)?"""
    return any(ctx.below(node, statement) for statement in statements)


def _is_store(ctx: FileContext, node: ast.AST) -> bool:
    """Is ``node`` (a name) an assignment target (``v = ...``, ``for v in ...``, ``a, v = ...``)?"""
    child = node
    for parent in ctx.ancestors(node):
        t = type(parent)
        if t is ast.Tuple or t is ast.List or t is ast.Starred:
            child = parent
            continue
        if t is ast.Assign:
            return any(target is child for target in parent.targets)  # type: ignore[attr-defined]
        if t is ast.For or t is ast.AsyncFor or t is ast.comprehension:
            return child is parent.target  # type: ignore[attr-defined]
        if t is ast.AugAssign:
            return False
        if t is ast.AnnAssign or t is ast.NamedExpr:
            return child is parent.target  # type: ignore[attr-defined]
        return False
    return False
