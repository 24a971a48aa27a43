"""The ``fixitem`` command: a thin layer over :mod:`fixitem.api`.

Exit status, like other Python linters: ``scan`` 0 when nothing is found,
1 when something is; ``apply`` 0 when it ran, 1 with ``--diff`` when it
would change files; 2 on usage or input errors (a missing path, an unknown
rule, a file that could not be read, parsed or written).
"""

from __future__ import annotations

import enum
import shutil
import sys
import tempfile
from pathlib import Path
from typing import List, Optional

import typer
from rich.console import Console

from fixitem import api, output
from fixitem.codemods.registry import RULE_CLASSES, UnknownRule, rule_class

app = typer.Typer(
    name="fixitem",
    help="Find and rewrite the PyTorch code that makes torch.compile slow: host syncs and graph breaks.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
err = Console(stderr=True, highlight=False, soft_wrap=True)


class Format(str, enum.Enum):
    text = "text"
    json = "json"


PathsArg = typer.Argument(..., help="Files or folders to process (folders are searched for *.py).", show_default=False)
SelectOpt = typer.Option(None, "--select", help="Only these rule codes or prefixes (repeatable, or comma-separated).")
IgnoreOpt = typer.Option(None, "--ignore", help="Skip these rule codes or prefixes (repeatable, or comma-separated).")
ExcludeOpt = typer.Option(None, "--exclude", help="Glob of files or folders to skip (repeatable).")


def _split(values: Optional[List[str]]) -> list[str]:
    return [v.strip() for value in values or [] for v in value.split(",") if v.strip()]


def _usage_error(message: str) -> typer.Exit:
    err.print(f"[bold red]error:[/] {message}")
    return typer.Exit(2)


def _progress():
    """A progress hook that shows a status line while files are read, on a terminal only."""
    if not sys.stderr.isatty():
        return None, None
    status = err.status("fixitem: reading files...")
    status.start()
    count = [0]

    def hook(path: Path) -> None:
        count[0] += 1
        status.update(f"fixitem: {count[0]} files ({path.name})")

    return hook, status


def _report_errors(result: api.RunResult) -> None:
    for message in result.errors:
        err.print(f"[bold red]error:[/] {message}")


@app.command()
def scan(
    paths: List[Path] = PathsArg,
    select: Optional[List[str]] = SelectOpt,
    ignore: Optional[List[str]] = IgnoreOpt,
    exclude: Optional[List[str]] = ExcludeOpt,
    format: Format = typer.Option(Format.text, "--format", help="Output format."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="Only the findings, no notes or summary."),
) -> None:
    """List every place that reads a tensor's value back to the host."""
    hook, status = _progress()
    try:
        result = api.scan(paths, select=_split(select), ignore=_split(ignore), exclude=exclude or (), progress=hook)
    except api.UsageError as exc:
        raise _usage_error(str(exc))
    finally:
        if status is not None:
            status.stop()
    if format is Format.json:
        typer.echo(output.findings_json(result))
    else:
        for finding in result.findings:
            typer.echo(output.finding_text(finding, verbose_notes=not quiet))
        if not quiet:
            typer.echo(output.scan_summary(result))
    _report_errors(result)
    if result.errors:
        raise typer.Exit(2)
    raise typer.Exit(1 if result.findings else 0)


@app.command()
def apply(
    paths: List[Path] = PathsArg,
    diff: bool = typer.Option(False, "--diff", help="Write nothing; print a unified diff of the changes."),
    unsafe: bool = typer.Option(False, "--unsafe", help="Also apply unsafe fixes (each says why it is unsafe)."),
    select: Optional[List[str]] = SelectOpt,
    ignore: Optional[List[str]] = IgnoreOpt,
    exclude: Optional[List[str]] = ExcludeOpt,
    format: Format = typer.Option(Format.text, "--format", help="Output format of the report."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="Print only errors (and the diff with --diff)."),
) -> None:
    """Rewrite files in place (or, with --diff, show what would change)."""
    hook, status = _progress()
    try:
        result = api.apply(
            paths, write=not diff, unsafe=unsafe, select=_split(select), ignore=_split(ignore),
            exclude=exclude or (), progress=hook,
        )
    except api.UsageError as exc:
        raise _usage_error(str(exc))
    finally:
        if status is not None:
            status.stop()
    if diff:
        sys.stdout.write(result.diff)
    if format is Format.json:
        typer.echo(output.apply_json(result))
    elif not quiet:
        report = err if diff else Console(highlight=False, soft_wrap=True)
        for finding in result.applied:
            report.print(f"fixed: {output.finding_line(finding)}", markup=False)
        for finding in result.findings:
            report.print(f"left:  {output.finding_text(finding)}", markup=False)
        report.print(output.apply_summary(result, written=not diff), markup=False)
    _report_errors(result)
    if result.errors:
        raise typer.Exit(2)
    raise typer.Exit(1 if diff and result.changed else 0)


@app.command()
def rule(
    code: Optional[str] = typer.Argument(None, help="A rule code (FX101) or name (where-if)."),
    all_rules: bool = typer.Option(False, "--all", help="List every rule."),
) -> None:
    """Print a rule's documentation (or, with --all, list the rules)."""
    if all_rules or code is None:
        for cls in sorted(RULE_CLASSES, key=lambda c: c.code):
            fixable = "fix" if any(getattr(e, "fixed", None) for e in cls.examples) else "report"
            typer.echo(f"{cls.code}  {cls.name:<22} {fixable:<7} {cls.summary}")
        return
    try:
        cls = rule_class(code)
    except UnknownRule as exc:
        raise _usage_error(str(exc))
    typer.echo(cls.documentation())


@app.command()
def demo() -> None:
    """Run fixitem on a bundled example model: scan, diff, apply."""
    from fixitem.examples import gated_mlp

    with tempfile.TemporaryDirectory(prefix="fixitem-demo-") as tmp:
        model = Path(tmp) / "gated_mlp.py"
        shutil.copyfile(gated_mlp.__file__, model)
        console = Console(highlight=False, soft_wrap=True)
        console.rule("fixitem scan gated_mlp.py")
        found = api.scan([model])
        for finding in found.findings:
            console.print(output.finding_text(finding), markup=False)
        console.rule("fixitem apply --diff gated_mlp.py")
        planned = api.apply([model], write=False)
        console.print(planned.diff, markup=False, end="")
        console.rule("fixitem apply gated_mlp.py")
        applied = api.apply([model])
        console.print(output.apply_summary(applied, written=True), markup=False)
        left = api.scan([model])
        console.print(f"Host-sync sites before: {len(found.findings)}, after: {len(left.findings)}.", markup=False)
        if left.findings or found.errors or applied.errors:
            raise typer.Exit(1)


def _register_verify() -> None:
    try:
        from fixitem.verify.command import verify_command
    except ImportError:  # pragma: no cover - the verify stage ships with fixitem
        return
    app.command("verify")(verify_command)


_register_verify()


def main() -> None:
    app()


if __name__ == "__main__":
    main()
