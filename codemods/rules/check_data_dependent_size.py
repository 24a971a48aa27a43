"""FX603: a traced data-dependent size that Dynamo needs a ``torch._check`` to reason about."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from .. import gen
from ..fixes.dynamo_config import check_statement
from ..model.context import FileContext
from ..model.data_dependent import Guard, guard_needed, scalar_read
from ..model.provenance import Kind
from ..model.syncs import SyncSite
from ..rule import Fix, Invalid, Report, Rule, Safety, Valid, dedent, unclaimed


class CheckDataDependentSize(Rule):
    """## What it does
    Finds a value read in traced code (FX601) that then reaches an operation
    where Dynamo needs a fact about it that it cannot decide from the code,
    and that eager PyTorch requires there anyway, and adds the
    `torch._check(...)` that states it (option (c) of the family
    FX601-FX603). Today: `x.unflatten(dim, (n, -1))`, which can infer the
    `-1` only when `n != 0`: `torch._check(n > 0)` before the statement.

    ## Why is this bad?
    With `capture_scalar_outputs` (FX601), `n` is a symbol whose value
    Dynamo does not know. Where an operation must branch on it, torch 2.13
    stops with "Could not guard on data-dependent expression Ne(u0, 0)"
    ("Consider annotating your code using torch._check*()"): the compile
    fails where, without the setting, the graph broke at the read.
    `torch._check` tells Dynamo the fact and checks it at run time.
    `torch._check_is_size(n)` is deprecated in recent torch (2.13 warns "Use
    _check(i >= 0) instead"), so fixitem writes `torch._check`.

    Like FX601, this removes a **graph break** (or a compile error), not the
    **host sync** of the read.

    ## Example
    ```python
    def forward(self, x, heads):
        n = heads.max().item()
        return x.unflatten(1, (n, -1))
    ```

    ## Use instead
    ```python
    def forward(self, x, heads):
        n = heads.max().item()
        torch._check(n > 0)
        return x.unflatten(1, (n, -1))
    ```

    ## Fix safety
    **Safe** when the check stands right before a statement that computes
    nothing else with effects: eager PyTorch raises a `RuntimeError` for
    `n <= 0` in `unflatten(dim, (n, -1))` already, so every run that
    worked still works and computes the same; a run that failed now fails
    one statement earlier, with `torch._check`'s message
    ("Expected cond to be True") instead of `unflatten`'s. **Unsafe** when
    the statement also calls something fixitem cannot see into before the
    `unflatten` (a module, a function of the program): on a failing run,
    that call no longer runs before the error. A `torch._check` never adds
    a host sync of its own in eager code (it tests a Python number) and is
    kept as a runtime assertion in the compiled graph.
    """

    code = "FX603"
    name = "check-data-dependent-size"
    summary = "traced data-dependent size Dynamo cannot reason about: add the `torch._check` the program requires"
    graph_breaks = ("GB0124",)
    examples = [
        Invalid(
            dedent(
                """
                import torch
                from torch import nn

                class Heads(nn.Module):
                    def forward(self, x, heads):
                        n = heads.max().item()
                        return x.unflatten(1, (n, -1))
                """
            ),
            fixed=dedent(
                """
                import torch
                from torch import nn

                class Heads(nn.Module):
                    def forward(self, x, heads):
                        n = heads.max().item()
                        torch._check(n > 0)
                        return x.unflatten(1, (n, -1))
                """
            ),
        ),
        Invalid(
            dedent(
                """
                import torch
                from torch import nn

                class Heads(nn.Module):
                    def forward(self, x, heads):
                        n = heads.max().item()
                        return self.proj(x).unflatten(1, (n // 2, -1))
                """
            ),
            fixed=dedent(
                """
                import torch
                from torch import nn

                class Heads(nn.Module):
                    def forward(self, x, heads):
                        n = heads.max().item()
                        torch._check((n // 2) > 0)
                        return self.proj(x).unflatten(1, (n // 2, -1))
                """
            ),
            unsafe=True,
        ),
        # Checked already.
        Valid(
            dedent(
                """
                import torch
                from torch import nn

                class Heads(nn.Module):
                    def forward(self, x, heads):
                        n = heads.max().item()
                        torch._check(n > 0)
                        return x.unflatten(1, (n, -1))
                """
            )
        ),
        # A size without `-1`: nothing to infer, nothing to check.
        Valid(
            dedent(
                """
                import torch
                from torch import nn

                class Heads(nn.Module):
                    def forward(self, x, heads):
                        n = heads.max().item()
                        return x.unflatten(1, (n, 4))
                """
            )
        ),
    ]

    def check(self, ctx: FileContext, sites: list[SyncSite], claimed: set[SyncSite]) -> Iterator[Report]:
        done: set[int] = set()
        for site in unclaimed(sites, claimed, "item", "int", "float", "tolist"):
            if not ctx.in_traced_code(site.node):
                continue
            read = scalar_read(ctx, site.node, site.value, site.kind)
            checked = [ctx.code(u.node) for u in read.uses if u.kind == "check"]
            for use in read.uses:
                guard = guard_needed(ctx, use)
                if guard is None or id(use.node) in done:
                    continue
                if any(guard.condition in text or ctx.code(guard.operand) in text for text in checked):
                    continue
                done.add(id(use.node))
                yield self._report(ctx, site, guard)

    def _report(self, ctx: FileContext, site: SyncSite, guard: Guard) -> Report:
        call = guard.use.node
        message = (f"`{_first_line(ctx.code(call))}` needs `{guard.condition}` to compile once `{ctx.code(site.node)}` "
                   "is traced (FX601): add `torch._check`")
        statement = ctx.enclosing_statement(call)
        if statement is None or isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            return Report(call, message, note=f"no fix: {guard.why}; state it with `torch._check({guard.condition})`")
        replacement = gen.Statements([check_statement(ctx, guard.condition), gen.SourceStatement(statement)])
        unseen = _unseen_calls(ctx, statement, call)
        if unseen:
            fix = Fix({statement: replacement}, Safety.UNSAFE,
                      f"{guard.why}; eager raises there for a value that is not > 0 already, but the check runs before "
                      f"`{unseen}` in the same statement, which a failing run then no longer calls", imports=("torch",))
        else:
            fix = Fix({statement: replacement}, Safety.SAFE, "", imports=("torch",))
        return Report(call, message, fix=fix, sites=[_no_cost(site)],
                      note=(f"{guard.why}: eager raises there for a value that is not > 0, so the check states "
                            "what the program requires. It removes no host sync" if not unseen else ""))


def _no_cost(site: SyncSite) -> SyncSite:
    """A stand-in site for the report: the read is FX601's (its sync and break are counted there);
    this finding costs nothing of its own."""
    return SyncSite(site.node, "check", site.value, site.certain, site.certainty, on_host=True, captured="FX601")


def _first_line(code: str) -> str:
    return code.splitlines()[0] + (" ..." if "\n" in code else "")


def _unseen_calls(ctx: FileContext, statement: ast.AST, call: ast.AST) -> str:
    """A call of ``statement`` other than torch functions and tensor methods (``self.proj(x)``):
    what a failing run would no longer call before the error. "" when there is none."""
    for node in ast.walk(statement):
        if type(node) is not ast.Call or node is call:
            continue
        func = node.func  # type: ignore[attr-defined]
        qualified = ctx.provenance.imports.qualify(func) or ""
        if qualified.startswith("torch.") and not qualified.startswith("torch.nn.Module"):
            continue
        if type(func) is ast.Attribute and ctx.kind(func.value) is Kind.TENSOR and ctx.kind(node) is not Kind.MODULE:
            if not (type(func.value) is ast.Name and func.value.id == "self"):
                continue
        return ctx.code(func)
    return ""
