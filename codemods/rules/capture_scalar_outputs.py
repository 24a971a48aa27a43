"""FX601: a value read in traced code that ``capture_scalar_outputs`` lets Dynamo trace."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from ..advice import ADVICE, if_tensor, size_advice, usage
from ..fixes.dynamo_config import config_form, config_replacements, missing_flags
from ..model.context import FileContext
from ..model.data_dependent import (
    SCALARS,
    UNTRACEABLE,
    ScalarRead,
    captured,
    compile_for,
    scalar_read,
)
from ..model.syncs import SyncSite
from ..rule import Fix, Invalid, Report, Rule, Safety, Valid, dedent, unclaimed

# What every fix of the family says about its safety.
CONFIG_UNSAFE = (
    "Dynamo now traces the value instead of breaking the graph; where the backend cannot compile what "
    "follows (a guard on the value it cannot decide, an in-place write at an index read from a tensor), "
    "compilation fails where it used to fall back to Python: check with `fixitem verify --config {flags}` "
    "or the program's tests. The host sync stays"
)
GLOBAL_NOTE = "; the setting holds for everything this process compiles"


def flags_text(flags: tuple[str, ...]) -> str:
    return ",".join(flags)


class ConfigFixes:
    """The configuration fixes of one file: one fix per ``torch.compile`` (and set of flags) that
    traces the findings, carried by the first finding it serves, whichever rule reports it; the
    others say that fix removes their break too (one edit, applied once)."""

    def __init__(self, ctx: FileContext, code: str, flags: tuple[str, ...]) -> None:
        self.ctx, self.code, self.flags = ctx, code, flags
        # (id of the compile call, flags) -> the finding that carries its fix
        self.carriers: dict[tuple[int, tuple[str, ...]], ast.AST] = ctx.memo("config fix carriers", dict)

    def fix(self, node: ast.AST) -> tuple[Fix | None, str]:
        """The fix that turns the flags on where the file compiles the code at ``node``, with
        what it does in words; or no fix and the advice that names the configuration (a library
        module, or a file that does not compile the code)."""
        ctx, flags = self.ctx, self.flags
        call = compile_for(ctx, node)
        needed = missing_flags(ctx, flags)
        if call is None or not needed or (call.decorated is None and not call.application):
            return None, config_advice(ctx, flags)
        key = (id(call.node), flags)
        carrier = self.carriers.get(key)
        if carrier is not None and carrier is not node:
            line = ctx.position(carrier)[0]
            return None, (f"`fixitem apply --unsafe` removes this break too: the fix of line {line} "
                          f"{config_form(ctx, call, needed)}")
        if ctx.suppressions.suppressed(ctx.position(node)[0], self.code):
            return None, config_advice(ctx, flags)
        self.carriers[key] = node
        reason = CONFIG_UNSAFE.format(flags=flags_text(flags)) + ("" if call.decorated is not None else GLOBAL_NOTE)
        fix = Fix(config_replacements(ctx, call, needed), Safety.UNSAFE, reason, imports=())
        return fix, f"the fix {config_form(ctx, call, needed)}"


def config_advice(ctx: FileContext, flags: tuple[str, ...]) -> str:
    settings = " and ".join(f"`torch._dynamo.config.{f} = True`" for f in flags)
    keywords = ", ".join(f"{f}=True" for f in flags)
    return (
        f"no `torch.compile` of this code in a program of this file: where the program compiles it, set {settings} "
        f"before the compiled code first runs, or run it under `torch._dynamo.config.patch({keywords})` (a "
        f"library should document the setting, not set it for the whole process); "
        f"`fixitem verify --config {flags_text(flags)}` shows the breaks it removes"
    )


def still_breaking(ctx: FileContext, uses) -> str:
    """Where the value still breaks the graph under the configuration, in words ("" for none)."""
    parts = []
    for use in uses:
        line = ctx.position(use.node)[0]
        parts.append(f"line {line} (`{_short(ctx.code(use.node))}`): {UNTRACEABLE[use.kind]}")
    if not parts:
        return ""
    return "; the value still breaks the graph at " + "; ".join(dict.fromkeys(parts))


def _short(code: str) -> str:
    first = code.splitlines()[0] if code else ""
    return first if len(first) <= 60 else first[:57] + "..."


def _uses_words(read: ScalarRead) -> str:
    kinds = {u.kind for u in read.traced_uses}
    if kinds & {"size", "slice", "index"}:
        return "a data-dependent size or index"
    return "a value read from a tensor"


class CaptureScalarOutputs(Rule):
    """## What it does
    Reports a tensor value read in traced code (`.item()`, `int(t)`,
    `float(t)`, `.tolist()` of an integer tensor) that Dynamo can trace once
    `torch._dynamo.config.capture_scalar_outputs = True` (option (a) of the
    family FX601-FX603; FX602 is (b), FX603 is (c)): values then used as
    sizes and slice bounds (`n = lengths.max().item()`, then `x[:, :n]`),
    factory sizes (`x.new_zeros(rows, 3)`, `torch.arange(n)`), split sizes
    (`torch.split(x, lengths.tolist(), dim=1)`), indices (`self.experts[i]`),
    arithmetic. (A read used as a size in place, `x[: n.item()]`, is FX006,
    which says and fixes the same in traced code.) Measured on torch 2.13: a
    function with `n = lengths.max().item(); x[:, :n]`, `torch.split(x,
    lengths.tolist(), dim=1)` and `x.new_zeros(grid[0].item() // 2, 3)` goes
    from 3 graph breaks to 0, with equal results under `fullgraph=True`.

    ## Why is this bad?
    By default Dynamo does not trace `Tensor.item()` (GB0124) or
    `.tolist()` (GB0033): the graph breaks at the read, and the shapes that
    follow are recompiled per value. Traced, the value becomes a symbol
    (an "unbacked" size) and the graph stays whole.

    What the setting does **not** remove is the **host sync**: the compiled
    graph still reads the value from the device to know the size, so the
    finding stays a host sync after the fix, and `scan` keeps saying so. To
    remove the sync too, compute the size on the host (in the data pipeline)
    or keep the computation in fixed-size tensor ops (masks).

    A value that then decides Python control flow (`if n > 0:`), the length of
    a `range` loop, or text, still breaks the graph there: the finding says
    where. A `.tolist()` of a floating tensor is never traced (GB0109, FX002).

    ## Example
    ```python
    class Pad(nn.Module):
        def forward(self, x, lengths):
            n = lengths.max().item()
            return x[:, :n]

    model = torch.compile(Pad())
    ```

    ## Use instead
    ```python
    torch._dynamo.config.capture_scalar_outputs = True
    model = torch.compile(Pad())
    ```
    For a function compiled with `@torch.compile`, the scoped form:
    `@torch._dynamo.config.patch(capture_scalar_outputs=True)` above it.
    The configuration must hold when the compiled code runs (Dynamo traces
    at the first call), not only around `torch.compile(...)`.

    ## Fix safety
    Always **unsafe**. The fix sets the configuration where the file
    compiles the code: a `config.patch` decorator (or call) around a compiled
    function, or, in a program (a file with an `if __name__ == "__main__":`
    block or a loop at module level), `torch._dynamo.config.capture_scalar_outputs
    = True` on the line before `torch.compile(model)`, which holds for
    everything the process compiles. It never sets it in a library module:
    there the finding names the setting instead. Eager results do not change;
    compiled ones are those of the same operations traced. But where the backend
    cannot compile what follows the traced value (a guard on it that Dynamo
    cannot decide, such as `x.unflatten(1, (n, -1))`, which FX603 bounds, or
    `y[:, n] = 0`), compilation fails where it used to fall back to Python:
    verify with `fixitem verify --config capture_scalar_outputs`. Under
    `torch.compile(..., fullgraph=True)` the read is captured already and
    there is nothing to fix.
    """

    code = "FX601"
    name = "capture-scalar-outputs"
    summary = "value read in traced code that `capture_scalar_outputs` lets torch.compile trace (the sync stays)"
    graph_breaks = ("GB0124", "GB0033")
    examples = [
        Invalid(
            dedent(
                """
                import torch
                from torch import nn

                class Pad(nn.Module):
                    def forward(self, x, lengths):
                        n = lengths.max().item()
                        return x[:, :n]

                if __name__ == "__main__":
                    model = torch.compile(Pad())
                """
            ),
            fixed=dedent(
                """
                import torch
                from torch import nn

                class Pad(nn.Module):
                    def forward(self, x, lengths):
                        n = lengths.max().item()
                        return x[:, :n]

                if __name__ == "__main__":
                    torch._dynamo.config.capture_scalar_outputs = True
                    model = torch.compile(Pad())
                """
            ),
            unsafe=True,
        ),
        Invalid(
            dedent(
                """
                import torch

                @torch.compile
                def first(x: torch.Tensor, grid: torch.Tensor):
                    rows = grid[0].item() // 2
                    return x.new_zeros(rows, 3)
                """
            ),
            fixed=dedent(
                """
                import torch

                @torch._dynamo.config.patch(capture_scalar_outputs=True)
                @torch.compile
                def first(x: torch.Tensor, grid: torch.Tensor):
                    rows = grid[0].item() // 2
                    return x.new_zeros(rows, 3)
                """
            ),
            unsafe=True,
        ),
        # A library module: no fix, the finding names the setting.
        Invalid(
            dedent(
                """
                import torch
                from torch import nn

                class Split(nn.Module):
                    def forward(self, x, lengths):
                        return torch.split(x, lengths.long().tolist(), dim=1)
                """
            )
        ),
        # Set already: still a host sync, no graph break, nothing to fix.
        Invalid(
            dedent(
                """
                import torch
                from torch import nn

                class Pad(nn.Module):
                    def forward(self, x, lengths):
                        n = lengths.max().item()
                        return x[:, :n]

                if __name__ == "__main__":
                    torch._dynamo.config.capture_scalar_outputs = True
                    model = torch.compile(Pad())
                """
            )
        ),
        # Outside traced code the read is a host sync only: FX006.
        Valid(
            dedent(
                """
                import torch

                def pad(x: torch.Tensor, lengths: torch.Tensor):
                    return x[:, : lengths.max().item()]
                """
            )
        ),
        # Only Python control flow uses the value: the setting removes no break (FX001).
        Valid(
            dedent(
                """
                import torch
                from torch import nn

                class Gate(nn.Module):
                    def forward(self, x):
                        if x.sum().item() > 0:
                            return x
                        return -x
                """
            )
        ),
    ]

    def check(self, ctx: FileContext, sites: list[SyncSite], claimed: set[SyncSite]) -> Iterator[Report]:
        fixes = ConfigFixes(ctx, self.code, (SCALARS,))
        for site in unclaimed(sites, claimed, "item", "int", "float", "tolist"):
            if not ctx.in_traced_code(site.node) or (site.kind in ("item", "int") and usage(ctx, site.node) == "size"):
                continue  # a size read in place is FX006's (ignored with it, it stays FX001's as before)
            read = scalar_read(ctx, site.node, site.value, site.kind)
            if not read.traceable or not read.traced_uses:
                continue
            report = traced_read_report(ctx, site, read, fixes)
            if report is None:
                claimed.add(site)  # traced already, and it reads host memory: nothing left to report
            else:
                yield report


def traced_read_report(ctx: FileContext, site: SyncSite, read: ScalarRead, fixes: ConfigFixes) -> Report | None:
    """The report of a read in traced code that (a) lets Dynamo trace (FX601, and FX006 for a size
    or index read in place): the configuration fix or advice, where the value still breaks the
    graph, and what removes the host sync too. None when nothing is left to report (traced
    already, and a read of host memory, which waits for nothing)."""
    code = ctx.code(site.node)
    what = _uses_words(read)
    later = still_breaking(ctx, read.breaking_uses)
    elements = ""
    if read.how == "tolist" and read.elements != "integer":
        elements = (f" (if `{ctx.code(read.tensor)}` holds integers: the `.tolist()` of a floating tensor breaks "
                    "the graph under any setting)")
    sync = by_hand(ctx, read, site)
    # ``size.tolist()`` of a value not known to be a tensor: the note says so first, as FX002's.
    hedge = if_tensor(ctx, site)
    why = captured(ctx, site.node, SCALARS)
    if why:
        site.captured = why
        if site.on_host:
            return None
        return Report(
            site.node,
            f"`{code}` is {what} read in traced code; Dynamo traces it ({why}), so no graph break, "
            f"but it still waits for the device",
            sites=[site],
            note=f"{hedge}the setting removes the graph break, not the host sync{later}{elements}. {sync}",
        )
    fix, how = fixes.fix(site.node)
    stays = "the tensor lives in host memory, so there is no host sync" if site.on_host else "the host sync stays"
    message = (f"`{code}` is {what} read in traced code: `capture_scalar_outputs` lets torch.compile trace it "
               f"(the graph break goes, {stays})")
    if fix is not None:
        fix.reason = f"{hedge}{how}. {fix.reason}{later}{elements}. {sync}"
        return Report(site.node, message, fix=fix, sites=[site])
    return Report(site.node, message, sites=[site], note=f"{hedge}{how}{later}{elements}. {sync}")


def by_hand(ctx: FileContext, read: ScalarRead, site: SyncSite) -> str:
    """What removes the host sync too, by hand, for what the value is used as."""
    if site.on_host:
        return f"No host sync either way: {ADVICE['on_host']}"
    for use in read.traced_uses:
        if use.kind in ("size", "slice", "index"):
            text = size_advice(ctx, use.value if use.value is not None else read.node)
            return f"To remove the host sync as well: {text}"
    return f"To remove the host sync as well: {ADVICE['stored']}"
