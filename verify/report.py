"""What verify found, and how it is shown: a side-by-side table or JSON."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console
from rich.table import Table
from rich.text import Text

from fixitem.console import console as new_console

from .breaks import GraphBreak
from .conditions import ConditionSite
from .numerics import tolerance_table
from .syncs import GraphSync


@dataclass
class VersionReport:
    """The measurements of one version (before or after)."""

    label: str
    path: str
    #: Distinct graph-break sites under ``torch.compile(fullgraph=False, backend="eager")``.
    graph_breaks: int = 0
    breaks: list[GraphBreak] = field(default_factory=list)
    break_error: str | None = None
    #: ``torch.compile(fullgraph=True)`` compiled and ran on every input.
    fullgraph_ok: bool | None = None
    fullgraph_backend: str = ""
    fullgraph_error: str | None = None
    #: Scalar reads (``item``) captured in the fullgraph-compiled graphs; None when it did not compile.
    compiled_scalar_reads: int | None = None
    scalar_reads: list[GraphSync] = field(default_factory=list)
    #: Ops with data-dependent output size (``nonzero``, mask indexing): they wait for the device on CUDA.
    data_dependent_ops: list[GraphSync] = field(default_factory=list)
    #: Host syncs per eager forward call (the largest over the inputs).
    syncs_per_call: int = 0
    sync_kinds: dict[str, int] = field(default_factory=dict)
    #: Warnings from ``torch.cuda.set_sync_debug_mode("warn")`` (eager, and compiled for after); CUDA only.
    cuda_sync_warnings: int | None = None
    cuda_sync_warnings_compiled: int | None = None
    #: ``--timeit``: median step time in milliseconds.
    median_ms: float | None = None
    #: ``--config``: the graph-break sites under the configuration (None when not asked).
    config_graph_breaks: int | None = None
    config_breaks: list[GraphBreak] = field(default_factory=list)
    config_break_error: str | None = None

    def to_json(self) -> dict:
        return {
            "path": self.path,
            "graph_breaks": self.graph_breaks,
            "breaks": [b.to_json() for b in self.breaks],
            "break_error": self.break_error,
            "fullgraph_ok": self.fullgraph_ok,
            "fullgraph_backend": self.fullgraph_backend,
            "fullgraph_error": self.fullgraph_error,
            "compiled_scalar_reads": self.compiled_scalar_reads,
            "scalar_reads": [s.to_json() for s in self.scalar_reads],
            "data_dependent_ops": [s.to_json() for s in self.data_dependent_ops],
            "syncs_per_call": self.syncs_per_call,
            "sync_kinds": dict(self.sync_kinds),
            "cuda_sync_warnings": self.cuda_sync_warnings,
            "cuda_sync_warnings_compiled": self.cuda_sync_warnings_compiled,
            "median_ms": self.median_ms,
            "config_graph_breaks": self.config_graph_breaks,
            "config_breaks": [b.to_json() for b in self.config_breaks],
            "config_break_error": self.config_break_error,
        }


@dataclass
class InputResult:
    """The numerical comparison on one (possibly derived) input."""

    name: str
    #: "equal", "different", "skipped" or "error"
    status: str
    details: list[str] = field(default_factory=list)
    compared_compiled: bool = False
    compared_grads: bool = False

    def to_json(self) -> dict:
        return {
            "input": self.name,
            "status": self.status,
            "details": list(self.details),
            "compared_compiled": self.compared_compiled,
            "compared_grads": self.compared_grads,
        }


@dataclass
class VerifyReport:
    before: VersionReport
    after: VersionReport
    device: str
    backend: str
    factory: str
    inputs: list[InputResult] = field(default_factory=list)
    conditions: list[ConditionSite] = field(default_factory=list)
    equivalent: bool = False
    #: Each failed check, starting with its name ("graph breaks: ...", "numerics: ...").
    failures: list[str] = field(default_factory=list)
    #: Things that do not fail the check but limit what it proves.
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    elapsed_s: float = 0.0
    #: ``--config``: the Dynamo flags the after version was compiled under.
    config: list[str] = field(default_factory=list)
    #: ``--config``: the after version compiled (``fullgraph=False``) under the configuration, against eager before.
    config_inputs: list[InputResult] = field(default_factory=list)
    #: ``--config``: the after version's break sites that the configuration removed.
    proved: list[GraphBreak] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return not self.failures

    def to_dict(self) -> dict:
        return {
            "passed": self.passed,
            "failures": list(self.failures),
            "warnings": list(self.warnings),
            "notes": list(self.notes),
            "device": self.device,
            "backend": self.backend,
            "factory": self.factory,
            "before": self.before.to_json(),
            "after": self.after.to_json(),
            "equivalent": self.equivalent,
            "inputs": [r.to_json() for r in self.inputs],
            "conditions": [c.to_json() for c in self.conditions],
            "tolerances": tolerance_table(),
            "elapsed_s": round(self.elapsed_s, 3),
            "config": list(self.config),
            "config_inputs": [r.to_json() for r in self.config_inputs],
            "proved": [b.to_json() for b in self.proved],
        }

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent, default=str)


# --- text rendering ----------------------------------------------------------------


def _short(item) -> str:
    """``name.py:LINE`` for a located item (break, scalar read): the table stays narrow; full paths are
    printed once under it."""
    if getattr(item, "file", None) is None:
        return "unknown location"
    return f"{Path(item.file).name}:{item.line}"


def _breaks_cell(v: VersionReport) -> Text:
    text = Text(str(v.graph_breaks), style="green" if v.graph_breaks == 0 else "red")
    for b in v.breaks[:5]:
        text.append(f"\n{_short(b)}: {b.reason[:120]}", style="dim")
    if len(v.breaks) > 5:
        text.append(f"\n... {len(v.breaks) - 5} more", style="dim")
    if v.break_error:
        text.append(f"\nerror: {v.break_error[:90]}", style="yellow")
    return text


def _config_breaks_cell(v: VersionReport) -> Text:
    if v.config_graph_breaks is None:
        return Text("not run", style="dim")
    text = Text(str(v.config_graph_breaks), style="green" if v.config_graph_breaks == 0 else "red")
    for b in v.config_breaks[:5]:
        text.append(f"\n{_short(b)}: {b.reason[:120]}", style="dim")
    if len(v.config_breaks) > 5:
        text.append(f"\n... {len(v.config_breaks) - 5} more", style="dim")
    if v.config_break_error:
        text.append(f"\nerror: {v.config_break_error[:90]}", style="yellow")
    return text


def _render_config(report: VerifyReport, console: Console) -> None:
    """The break sites the configuration removed, and the compiled numerics under it."""
    flags = ", ".join(report.config)
    if report.proved:
        pt = Table(title=f"Graph-break sites of the after version that {flags} removed (proved: gone, outputs equal)")
        pt.add_column("location")
        pt.add_column("reason without the configuration", overflow="fold")
        for gb in report.proved:
            pt.add_row(_short(gb), gb.reason[:120])
        console.print(pt)
    else:
        console.print(Text(f"{flags} removed no graph-break site of the after version", style="dim"))
    counts: dict[str, int] = {}
    for r in report.config_inputs:
        counts[r.status] = counts.get(r.status, 0) + 1
    summary = ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))
    console.print(f"Numerics under {flags} (after compiled with fullgraph=False, against eager before): "
                  f"{len(report.config_inputs)} inputs ({summary})", highlight=False)
    for r in report.config_inputs:
        if r.status != "equal":
            console.print(f"  {r.name}: {r.status}", highlight=False, markup=False)
            for d in r.details[:4]:
                console.print(f"    {d}", highlight=False, markup=False)


def _fullgraph_cell(v: VersionReport) -> Text:
    if v.fullgraph_ok is None:
        return Text("not run", style="dim")
    if v.fullgraph_ok:
        return Text(f"yes ({v.fullgraph_backend})", style="green")
    text = Text(f"no ({v.fullgraph_backend})", style="red")
    if v.fullgraph_error:
        text.append(f"\n{v.fullgraph_error[:120]}", style="dim")
    return text


def _scalar_reads_cell(v: VersionReport) -> Text:
    if v.compiled_scalar_reads is None:
        return Text("n/a (did not compile)", style="dim")
    text = Text(str(v.compiled_scalar_reads), style="green" if v.compiled_scalar_reads == 0 else "red")
    for s in v.scalar_reads[:5]:
        text.append(f"\n{_short(s)}: {s.op}  {s.code[:60]}", style="dim")
    return text


def _syncs_cell(v: VersionReport) -> Text:
    text = Text(str(v.syncs_per_call), style="green" if v.syncs_per_call == 0 else "red")
    if v.sync_kinds:
        text.append("  (" + ", ".join(f"{k} {n}" for k, n in sorted(v.sync_kinds.items())) + ")", style="dim")
    return text


def _data_dependent_cell(v: VersionReport) -> Text:
    if v.compiled_scalar_reads is None:
        return Text("n/a", style="dim")
    text = Text(str(len(v.data_dependent_ops)), style="green" if not v.data_dependent_ops else "yellow")
    for s in v.data_dependent_ops[:3]:
        text.append(f"\n{_short(s)}: {s.op}", style="dim")
    return text


def _short_path(path: str) -> str:
    """The file name of a version (``HEAD:pkg/model.py`` keeps its revision: ``HEAD:model.py``)."""
    ref, sep, rest = path.rpartition(":")
    if sep and ref and not Path(path).exists() and "/" not in ref:
        return f"{ref}:{Path(rest).name}"
    return Path(path).name


def render_text(report: VerifyReport, console: Console | None = None) -> None:
    """Print the report: a before | after table, the inputs, conditions and verdict."""
    console = console or new_console()
    b, a = report.before, report.after
    table = Table(title=f"fixitem verify  (device {report.device}, backend {report.backend}, factory {report.factory})")
    table.add_column("check")
    table.add_column(f"before\n{_short_path(b.path)}", overflow="fold")
    table.add_column(f"after\n{_short_path(a.path)}", overflow="fold")
    table.add_row("graph breaks", _breaks_cell(b), _breaks_cell(a))
    if report.config:
        table.add_row(f"graph breaks with\n{', '.join(report.config)}", _config_breaks_cell(b), _config_breaks_cell(a))
    table.add_row("fullgraph=True compiles", _fullgraph_cell(b), _fullgraph_cell(a))
    table.add_row("scalar reads in compiled graph", _scalar_reads_cell(b), _scalar_reads_cell(a))
    table.add_row("data-dependent ops in compiled graph", _data_dependent_cell(b), _data_dependent_cell(a))
    table.add_row("host syncs per eager call", _syncs_cell(b), _syncs_cell(a))
    if b.cuda_sync_warnings is not None or a.cuda_sync_warnings is not None:
        after_cell = f"{a.cuda_sync_warnings}"
        if a.cuda_sync_warnings_compiled is not None:
            after_cell += f" (compiled {a.cuda_sync_warnings_compiled})"
        table.add_row("CUDA sync-debug warnings", str(b.cuda_sync_warnings), after_cell)
    if b.median_ms is not None or a.median_ms is not None:
        def ms(x):
            return "n/a" if x is None else f"{x:.3f} ms"
        speed = ""
        if b.median_ms and a.median_ms:
            speed = f"  ({b.median_ms / a.median_ms:.2f}x)"
        table.add_row("median step (compiled, warm)", ms(b.median_ms), ms(a.median_ms) + speed)
    console.print(table)
    if _short_path(b.path) != b.path or _short_path(a.path) != a.path:
        console.print(Text(f"before: {b.path}\nafter:  {a.path}", style="dim"), highlight=False)

    counts: dict[str, int] = {}
    for r in report.inputs:
        counts[r.status] = counts.get(r.status, 0) + 1
    summary = ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))
    console.print(f"Numerics: {len(report.inputs)} inputs ({summary}); equivalent: "
                  f"{'[green]yes[/]' if report.equivalent else '[red]no[/]'}")
    tol = "; ".join(
        f"{t['dtype']} {t['eager_rtol']:g}/{t['eager_atol']:g}"
        + ("" if t["dtype"] == "int/bool" else f" (compiled {t['compiled_rtol']:g}/{t['compiled_atol']:g})")
        for t in tolerance_table()
    )
    console.print(Text(f"  tolerances rtol/atol: {tol}; gradients of a fixed random projection of the outputs, "
                       f"a None gradient equals an all-zero one", style="dim"))
    for r in report.inputs:
        if r.status != "equal":
            console.print(f"  {r.name}: {r.status}", highlight=False, markup=False)
            for d in r.details[:4]:
                console.print(f"    {d}", highlight=False, markup=False)

    if report.config:
        _render_config(report, console)

    if report.conditions:
        ct = Table(title="Rewritten conditions in the after file (eager runs)")
        ct.add_column("location")
        ct.add_column("op")
        ct.add_column("code", overflow="fold")
        ct.add_column("seen")
        for c in report.conditions:
            ct.add_row(f"line {c.line}", c.op, c.code, Text(c.seen, style="green" if c.both_seen else "yellow"))
        console.print(ct)

    for n in report.notes:
        console.print(Text("note: " + n, style="dim"))
    for w in report.warnings:
        console.print(Text.assemble(("warning: ", "yellow"), w))
    if report.passed and report.config:
        console.print(f"[bold green]PASSED[/] under {', '.join(report.config)}: no graph breaks "
                      f"({len(report.proved)} site(s) proved gone), numerically equivalent compiled and eager; host "
                      f"syncs per eager call {b.syncs_per_call} before, {a.syncs_per_call} after (the configuration "
                      f"removes graph breaks, not host syncs).")
    elif report.passed:
        console.print("[bold green]PASSED[/]: no graph breaks, compiles with fullgraph=True, no host syncs, "
                      "numerically equivalent.")
    else:
        console.print(f"[bold red]FAILED[/] ({len(report.failures)}):")
        for f in report.failures:
            console.print(f"  - {f}", highlight=False, markup=False)
