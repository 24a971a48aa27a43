"""Text reports of ``fixitem verify --run``: before | after, and the one-run sync profile."""

from __future__ import annotations

import os
from collections.abc import Sequence

from rich.console import Console
from rich.table import Table
from rich.text import Text

from fixitem.console import console as new_console

from .run import CommandRun, RunComparison, RunProfile, SyncLine

TOP_LINES = 10


def _short(path: str, roots: Sequence[str]) -> str:
    for root in roots:
        if root and path.startswith(root.rstrip(os.sep) + os.sep):
            return os.path.relpath(path, root)
    return path


def _syncs_cell(run: CommandRun) -> str:
    if not run.probed:
        return "n/a (torch never imported)"
    kinds = ", ".join(f"{kind} {n}" for kind, n in run.syncs_by_kind().items())
    return f"{run.sync_count}" + (f"  ({kinds})" if kinds else "")


def _breaks_cell(run: CommandRun, roots: Sequence[str]) -> str:
    if not run.breaks:
        return "0"
    lines = [str(len(run.breaks))]
    for gb in run.breaks[:5]:
        where = f"{_short(gb.file, roots)}:{gb.line}" if gb.file else "unknown location"
        lines.append(f"{where}: {gb.reason}")
    if len(run.breaks) > 5:
        lines.append(f"... {len(run.breaks) - 5} more")
    return "\n".join(lines)


def _status(run: CommandRun) -> str:
    return "timed out" if run.timed_out else str(run.returncode)


def _sync_table(title: str, lines: Sequence[SyncLine], roots: Sequence[str], fixable: bool) -> Table:
    table = Table(title=title)
    table.add_column("syncs", justify="right")
    table.add_column("where")
    table.add_column("kind")
    table.add_column("code", overflow="fold")
    if fixable:
        table.add_column("fix")
    for s in lines[:TOP_LINES]:
        row = [str(s.count), f"{_short(s.file, roots)}:{s.line}", s.kind, s.code]
        if fixable:
            row.append(s.fixable or "-")
        table.add_row(*row)
    if len(lines) > TOP_LINES:
        rest = sum(s.count for s in lines[TOP_LINES:])
        table.add_row(str(rest), f"{len(lines) - TOP_LINES} more lines", "", "", *([""] if fixable else []))
    return table


def _stderr_tail(run: CommandRun, console: Console) -> None:
    """What a failed run wrote last on stderr: why it failed, most of the time."""
    tail = run.stderr_tail()
    if not tail:
        return
    console.print(Text(f"{run.who}'s stderr ends with:", style="bold"))
    for line in tail:
        console.print(f"    {line}", markup=False, highlight=False)


def render_comparison(result: RunComparison, console: Console | None = None) -> None:
    console = console or new_console()
    b, a = result.before, result.after
    roots_b, roots_a = [b.cwd], [a.cwd]
    table = Table(title=f"fixitem verify --run  {result.command}")
    table.add_column("check")
    table.add_column("before", overflow="fold")
    table.add_column("after", overflow="fold")
    table.add_row("exit status", _status(b), _status(a))
    table.add_row("output lines (stdout / stderr)", f"{len(b.stdout.splitlines())} / {len(b.stderr.splitlines())}",
                  f"{len(a.stdout.splitlines())} / {len(a.stderr.splitlines())}")
    same = not any(f.startswith(("stdout", "stderr")) for f in result.failures)
    table.add_row("same output (masked)", "", Text("yes" if same else "no", style="green" if same else "red"))
    table.add_row("host syncs", _syncs_cell(b), _syncs_cell(a))
    after_breaks = _breaks_cell(a, roots_a)
    if result.config:
        after_breaks = f"{after_breaks}\n(under {', '.join(result.config)})"
    table.add_row("graph breaks", _breaks_cell(b, roots_b), after_breaks)
    table.add_row("wall time", f"{b.wall_s:.2f} s", f"{a.wall_s:.2f} s")
    console.print(table)
    if result.config:
        flags = ", ".join(result.config)
        console.print(f"the after run ran under {flags}: {len(result.proved)} graph-break site(s) of the before run "
                      f"are gone", highlight=False)
        for gb in result.proved[:10]:
            where = f"{_short(gb.file, roots_b)}:{gb.line}" if gb.file else "unknown location"
            console.print(f"  gone: {where}: {gb.reason}", highlight=False, markup=False)
    console.print(Text(f"before ran in {b.cwd}; after in {a.cwd}", style="dim"))
    for run, roots in ((b, roots_b), (a, roots_a)):
        if run.syncs:
            console.print(_sync_table(f"host syncs of the {run.label} run, by line", run.syncs, roots, False))
    for stream, diff in result.differences:
        console.print(Text(f"first differences in {stream} (masked):", style="bold"))
        console.print(diff, markup=False, highlight=False)
    if not any(stream == "stderr" for stream, _ in result.differences):  # else the diff shows it
        for run in (b, a):
            if run.failed and not (run is a and b.failed and a.stderr_tail() == b.stderr_tail()):
                _stderr_tail(run, console)
    for note in result.notes:
        console.print(Text("note: " + note, style="dim"))
    if result.passed and result.config:
        flags = ", ".join(result.config)
        console.print(f"[bold green]PASSED[/]: same exit status and output under {flags}; host syncs "
                      f"{b.sync_count} before, {a.sync_count} after: the configuration removes graph breaks, not "
                      f"host syncs.")
    elif result.passed:
        console.print("[bold green]PASSED[/]: same exit status and output, no more host syncs than before.")
    else:
        console.print(f"[bold red]FAILED[/] ({len(result.failures)}):")
        for f in result.failures:
            console.print(f"  - {f}", highlight=False, markup=False)


def render_profile(profile: RunProfile, console: Console | None = None) -> None:
    console = console or new_console()
    run = profile.run
    console.print(f"fixitem verify --run: exit status {_status(run)}, {run.wall_s:.2f} s, "
                  f"host syncs {_syncs_cell(run)}, graph breaks {len(run.breaks)}", highlight=False)
    _profile_lines(profile, console)
    if run.failed:  # what it measured is what ran before it failed
        _stderr_tail(run, console)
        console.print(Text.assemble(("FAILED", "bold red"), f": {profile.failures[0]}"))


def _profile_lines(profile: RunProfile, console: Console) -> None:
    run = profile.run
    roots = [run.cwd]
    if not profile.user_lines:
        where = "" if run.probed else " (the command never imported torch)"
        console.print(f"No host syncs in the files under {run.cwd}{where}.", highlight=False)
        return
    console.print(_sync_table("Lines that read tensor values, most frequent first", profile.user_lines,
                              roots, True))
    fixable = [s for s in profile.user_lines if s.fixable]
    total = sum(s.count for s in profile.user_lines)
    console.print(f"{len(profile.user_lines)} line(s) read tensor values {total} time(s); "
                  f"{len(fixable)} of them ({sum(s.count for s in fixable)} reads) have a fix: "
                  f"`fixitem apply` (the 'fix' column says which rule and how safe).", highlight=False)
    for gb in run.breaks[:5]:
        where = f"{_short(gb.file, roots)}:{gb.line}" if gb.file else "unknown location"
        console.print(f"graph break: {where}: {gb.reason}", highlight=False, markup=False)
