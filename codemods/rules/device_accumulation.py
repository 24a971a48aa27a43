"""FX202: running sums of tensor values read every step (``total += loss.item()``)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import libcst as cst

from ..context import FileContext
from ..provenance import Kind, Scope
from ..rule import Fix, Invalid, Report, Rule, Safety, Valid, dedent
from ..syncs import SyncSite
from ..tensor_values import _plain_number, method_call



@dataclass
class _Total:
    scope: Scope
    name: str
    inits: list[cst.Assign] = field(default_factory=list)
    steps: list[tuple[cst.AugAssign, cst.BaseExpression, SyncSite]] = field(default_factory=list)
    loads: list[cst.Name] = field(default_factory=list)
    problem: str = ""


def _number_literal(expr: cst.BaseExpression) -> str | None:
    """``"int"`` / ``"float"`` for a numeric literal (``0``, ``0.0``, ``-1.5``), else None."""
    if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, (cst.Minus, cst.Plus)):
        expr = expr.expression
    if isinstance(expr, cst.Integer):
        return "int"
    if isinstance(expr, cst.Float):
        return "float"
    return None


class DeviceAccumulation(Rule):
    """## What it does
    Finds running sums of tensor values read on the host every step,
    `total += loss.item()` (also `float(loss)`, and `loss.item() * n`),
    where `total` starts from a number literal in the same function, and
    turns `total` into an on-device accumulator from `fixitem.runtime`:
    the additions stay on the device and the number is read once, where the
    code uses `total`.

    ## Why is this bad?
    Every `.item()` makes the host wait for the device (a **host sync**), once
    per step, only to add a number that nobody looks at until the end of the
    epoch.

    ## Example
    ```python
    total, correct = 0.0, 0
    for x, y in loader:
        loss = criterion(model(x), y)
        total += loss.item()
        correct += (model(x).argmax(1) == y).sum().item()
    print(f"loss {total / len(loader):.4f} acc {correct / n:.3f}")
    ```

    ## Use instead
    ```python
    total = deferred.Accumulator(0.0)
    ...
        total += loss.detach()
    print(f"loss {total.value() / len(loader):.4f}")
    ```

    ## Fix safety
    **Safe**: the accumulator adds in float64 (a float start) or int64 (an
    int start and integer tensors) in the original order, so the result is
    bitwise the Python sum and an `int` stays an `int`. Every read of the name
    becomes `total.value()`, a Python number, so what is printed, returned or
    stored is unchanged. `loss.item() * n` becomes `loss.detach().double() * n`
    (float64 on the device, like Python) and is only accepted with a float
    start. Integer sums wrap at 2**63 where Python ints would not.

    **Unsafe** when fixitem cannot tell that the summed value is a tensor
    (`.item()` of a numpy value would fail on `.detach()`); annotate the
    parameter it comes from (`model: nn.Module`, `x: torch.Tensor`) to make
    the fix safe.

    There is **no fix** (report only) when the name is also assigned in another
    way, declared `global` / `nonlocal`, or read from a nested function.
    """

    code = "FX202"
    name = "device-accumulation"
    summary = "running sum of `.item()` values: accumulate on the device, read once"
    examples = [
        Invalid(
            dedent(
                """
                import torch

                def evaluate(model: torch.nn.Module, batches):
                    total = 0.0
                    correct = 0
                    for x, y in batches:
                        out = model(x)
                        total += torch.nn.functional.cross_entropy(out, y).item()
                        correct += (out.argmax(1) == y).sum().item()
                    return total / len(batches), correct
                """
            ),
            fixed=dedent(
                """
                import torch
                from fixitem import runtime as deferred

                def evaluate(model: torch.nn.Module, batches):
                    total = deferred.Accumulator(0.0)
                    correct = deferred.Accumulator(0)
                    for x, y in batches:
                        out = model(x)
                        total += torch.nn.functional.cross_entropy(out, y).detach()
                        correct += (out.argmax(1) == y).sum().detach()
                    return total.value() / len(batches), correct.value()
                """
            ),
        ),
        Invalid(
            dedent(
                """
                import torch

                def train(losses: torch.Tensor, sizes):
                    running = 0.0
                    for i, n in enumerate(sizes):
                        running += losses[i].item() * n
                    print(f"{running:.3f}")
                """
            ),
            fixed=dedent(
                """
                import torch
                from fixitem import runtime as deferred

                def train(losses: torch.Tensor, sizes):
                    running = deferred.Accumulator(0.0)
                    for i, n in enumerate(sizes):
                        running += losses[i].detach().double() * n
                    print(f"{running.value():.3f}")
                """
            ),
        ),
        Invalid(
            dedent(
                """
                import torch

                def f(xs: torch.Tensor, history: list):
                    total = 0.0
                    for i in range(len(xs)):
                        total += xs[i].item()
                        total = round(total, 2)
                    return total
                """
            )
        ),
        Valid(
            dedent(
                """
                import numpy as np

                def f(values):
                    total = 0.0
                    for v in np.asarray(values):
                        total += v.item()
                    return total
                """
            )
        ),
    ]

    def check(self, ctx: FileContext, sites: list[SyncSite], claimed: set[SyncSite]) -> Iterator[Report]:
        reads = {s.node: s for s in sites if s.kind in ("item", "float") and s not in claimed}
        totals: dict[tuple[int, str], _Total] = {}
        for node in ctx.nodes(cst.AugAssign):
            assert isinstance(node, cst.AugAssign)
            if not isinstance(node.operator, cst.AddAssign) or not isinstance(node.target, cst.Name):
                continue
            read = self._read(ctx, node.value, reads)
            if read is None:
                continue
            scope = ctx.provenance.scope_of(node).lookup(node.target.value)
            if scope is None:
                continue
            key = (id(scope), node.target.value)
            total = totals.setdefault(key, _Total(scope, node.target.value))
            total.steps.append((node, node.value, read))
        for total in totals.values():
            self._check_bindings(ctx, total)
            yield self._report(ctx, total)

    def _read(self, ctx: FileContext, value: cst.BaseExpression, reads: dict) -> SyncSite | None:
        if value in reads:
            return reads[value]
        if isinstance(value, cst.BinaryOperation) and isinstance(value.operator, cst.Multiply):
            for side, other in ((value.left, value.right), (value.right, value.left)):
                if side in reads and _plain_number(ctx, other) and ctx.kind(other) is not Kind.TENSOR:
                    return reads[side]
        return None

    def _check_bindings(self, ctx: FileContext, total: _Total) -> None:
        steps = {aug for aug, _, _ in total.steps}
        kinds = set()
        for how, node in total.scope.bindings[total.name]:
            if how == "aug" and node in steps:
                continue
            if how == "value" and isinstance(node, cst.BaseExpression) and _number_literal(node):
                parent = ctx.parents.get(node)
                if isinstance(parent, cst.Assign) and len(parent.targets) == 1:
                    total.inits.append(parent)
                    kinds.add(_number_literal(node))
                    continue
            total.problem = f"`{total.name}` is also assigned in another way"
            return
        if not total.inits:
            total.problem = f"`{total.name}` does not start from a number literal in this function"
            return
        if "int" in kinds and any(isinstance(v, cst.BinaryOperation) for _, v, _ in total.steps):
            total.problem = f"`{total.name}` starts as an int; only plain `.item()` terms can be summed exactly"
            return
        # Every other use of the name: it must resolve to this scope, outside nested functions.
        targets = {a.targets[0].target for a in total.inits} | {aug.target for aug, _, _ in total.steps}
        for name in ctx.nodes(cst.Name):
            assert isinstance(name, cst.Name)
            if name.value != total.name or name in targets:
                continue
            parent = ctx.parents.get(name)
            if isinstance(parent, cst.Attribute) and parent.attr is name:
                continue
            if isinstance(parent, (cst.Arg,)) and parent.keyword is name:
                continue
            if isinstance(parent, (cst.Global, cst.Nonlocal, cst.NameItem)):
                if ctx.provenance.scope_of(name).lookup(total.name) is total.scope or isinstance(parent, cst.NameItem):
                    total.problem = f"`{total.name}` is declared global or nonlocal"
                    return
                continue
            scope = ctx.provenance.scope_of(name)
            owner = scope.lookup(total.name)
            if owner is not total.scope:
                continue
            if scope is not total.scope:
                total.problem = f"`{total.name}` is read from a nested function or comprehension"
                return
            if isinstance(parent, cst.Del):
                total.problem = f"`{total.name}` is deleted"
                return
            total.loads.append(name)

    def _report(self, ctx: FileContext, total: _Total) -> Report:
        first = total.steps[0][0]
        message = f"`{ctx.code(first)}` reads a tensor value every step to sum it on the host"
        sites = [site for _, _, site in total.steps]
        if total.problem:
            return Report(first, message, sites=sites, note=f"no fix: {total.problem}")
        replacements: dict[cst.CSTNode, cst.CSTNode] = {}
        for init in total.inits:
            start = init.value
            replacements[start] = cst.parse_expression(f"deferred.Accumulator({ctx.code(start)})")
        for aug, value, site in total.steps:
            tensor = site.value
            detached = method_call(tensor, "detach")
            if value is site.node:
                replacements[value] = detached
            else:
                assert isinstance(value, cst.BinaryOperation)
                double = method_call(detached, "double")
                if value.left is site.node:
                    replacements[value] = value.with_changes(left=double)
                else:
                    replacements[value] = value.with_changes(right=double)
        for load in total.loads:
            replacements[load] = method_call(cst.Name(total.name), "value")
        unknown = [ctx.code(site.value) for site in sites if not site.certain]
        if unknown:
            reason = f"`{unknown[0]}` is not known to be a tensor (a numpy value has no `.detach()`)"
            fix = Fix(replacements, Safety.UNSAFE, reason, imports=ctx.runtime_imports())
        else:
            fix = Fix(replacements, Safety.SAFE, "", imports=ctx.runtime_imports())
        return Report(first, message, fix=fix, sites=sites)
