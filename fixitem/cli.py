"""The ``fixitem`` command: a thin layer over :mod:`fixitem.api`.

Exit status, like other Python linters: ``scan`` 0 when nothing is found,
1 when something is; ``apply`` 0 when it ran, 1 with ``--diff`` when it
would change files; 2 on usage or input errors (a missing path, an unknown
rule, a file that could not be read, parsed or written). Paths that hold no
Python file or notebook give a warning and 0, as with ruff. Output cut short
by its reader (``fixitem rule | head``) is no error: the status is the one
the command had decided, else 0.
"""


import copy
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, List, Optional

import typer

if TYPE_CHECKING:
    import rich.console

from fixitem import api, formats, output
from fixitem.codemods.driver.registry import RULE_CLASSES, UnknownRule, rule_class
from fixitem.console import console as new_console


def _help_without_types(params):
    """Show what each parameter takes as ruff and black do, not as a Python type (``<bool>``,
    ``<list[Path]>``): nothing for a flag or an argument (its help says what it is), else its
    metavar (``CODES``, ``N``), else its long name in capitals (``--before BEFORE``); an
    argument's metavar (else its name in capitals) alone in the usage line (``PATH...``).
    Only typer 0.29 and later show an option's type by ``display_type_rich``."""
    for param in params:
        if callable(getattr(param, "display_type_rich", None)):
            param.display_type_rich = _shown_type(param)
        elif param.param_type_name == "option" and not getattr(param, "is_flag", False) and param.metavar is None:
            param.metavar = _shown_type(param)(None)  # typer before 0.29 shows the metavar
        if param.param_type_name == "argument":
            if param.metavar is None:  # as click names it: AFTER, [AFTER] when optional
                name = param.name.upper() + ("..." if param.nargs != 1 else "")
                param.metavar = name if param.required else f"[{name}]"
            param.get_usage_pieces = lambda ctx, metavar=param.metavar: [metavar]
            # Typer before 0.29 shows an argument's type as its type's metavar, else ``<path>``.
            param.type = copy.copy(param.type)
            param.type.get_metavar = lambda *args, **kwargs: ""
    return params


def _shown_type(param):
    def shown(ctx) -> Optional[str]:
        if param.param_type_name == "argument" or getattr(param, "is_flag", False):
            return None
        if param.metavar is not None:
            return param.metavar
        name = max(param.opts, key=len).lstrip("-")
        return name.upper().replace("-", "_")

    return shown


def _quiet_stdout() -> None:
    """The reader of stdout has gone (``| head``): what is left unwritten goes nowhere."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):  # no file descriptor (a test runner's stream)
        pass


_DECIDED: dict[str, int] = {}  # the status the running command has decided (see _decided)


def _decided(code: int) -> int:
    """Say the status the command ends with, before output that its reader may cut short."""
    _DECIDED["status"] = code
    return code


class _PipeClosedIsFine:
    """Output cut short by its reader (``| head``) ends the command quietly, with the status it
    had decided: its own exit, else what :func:`_decided` said, else 0."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind, error, trace) -> bool:
        # rich meets a closed pipe with SystemExit(1), raised while handling the BrokenPipeError.
        cut = isinstance(error, BrokenPipeError) or (
            isinstance(error, SystemExit) and isinstance(error.__context__, BrokenPipeError)
        )
        broken = cut
        try:
            sys.stdout.flush()
        except BrokenPipeError:
            broken = True
        except ValueError:  # closed already (the language server closes its stdout when done)
            pass
        if not broken:
            return False
        _quiet_stdout()
        if error is not None and not cut:
            return False  # the command's own exit stands
        raise typer.Exit(_DECIDED.get("status", 0)) from None


class _Command(typer.core.TyperCommand):
    """A fixitem command: help without Python types, and a closed pipe is no error."""

    def get_params(self, ctx):
        return _help_without_types(super().get_params(ctx))

    def make_context(self, *args, **kwargs):
        with _PipeClosedIsFine():  # --help
            return super().make_context(*args, **kwargs)

    def invoke(self, ctx):
        _DECIDED.clear()
        with _PipeClosedIsFine():
            return super().invoke(ctx)


class _Group(typer.core.TyperGroup):
    def get_params(self, ctx):
        return _help_without_types(super().get_params(ctx))

    def make_context(self, *args, **kwargs):
        with _PipeClosedIsFine():  # --help, --version
            return super().make_context(*args, **kwargs)


app = typer.Typer(
    name="fixitem",
    help="Find and rewrite the PyTorch code that makes torch.compile slow: host syncs and graph breaks.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    cls=_Group,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(value: bool) -> None:
    if value:
        from fixitem import __version__

        typer.echo(f"fixitem {__version__}")
        raise typer.Exit()


@app.callback()
def _main(
    version: bool = typer.Option(False, "--version", "-V", callback=_version, is_eager=True,
                                 help="Print fixitem's version and exit."),
) -> None:
    """Find and rewrite the PyTorch code that makes torch.compile slow: host syncs and graph breaks."""


def escape(text: str) -> str:
    from rich.markup import escape as rich_escape

    return rich_escape(text)


class _Stderr:
    """The console for notes, warnings and errors on stderr, made when first used."""

    def __init__(self) -> None:
        self._console = None

    @property
    def console(self):
        if self._console is None:
            self._console = new_console(stderr=True, highlight=False, soft_wrap=True)
        return self._console

    def print(self, *args, **kwargs) -> None:
        self.console.print(*args, **kwargs)


err = _Stderr()


APPLY_FORMATS = ("text", "json")
SCAN_FORMATS = ("text", "json", "sarif", "github")


def _format(value: str, choices: tuple[str, ...]) -> str:
    if value not in choices:
        raise _usage_error(f"--format must be one of {', '.join(choices)}; got {value!r}")
    return value


PathsArg = typer.Argument(
    ..., metavar="PATH...", show_default=False,
    help="Files or folders to process (folders are searched for *.py files and *.ipynb notebooks).",
)
SelectOpt = typer.Option(
    None, "--select", metavar="CODES",
    help="Only these rule codes or prefixes (repeatable, or comma-separated; ALL for every rule).",
)
IgnoreOpt = typer.Option(
    None, "--ignore", metavar="CODES",
    help="Skip these rule codes or prefixes (repeatable, or comma-separated).",
)
ExcludeOpt = typer.Option(None, "--exclude", metavar="GLOB", help="Glob of files or folders to skip (repeatable).")
ConfigOpt = typer.Option(
    None, "--config", help="Read settings from this file instead of the pyproject.toml found from the first path.",
    dir_okay=False, show_default=False, metavar="FILE",
)
IsolatedOpt = typer.Option(False, "--isolated", help="Ignore configuration files.")
NoCacheOpt = typer.Option(
    False, "--no-cache",
    help="Do not read or keep results in .fixitem_cache (also FIXITEM_NO_CACHE=1; FIXITEM_CACHE_DIR moves it).",
)
JobsOpt = typer.Option(
    None, "--jobs", "-j", min=0, show_default=False, metavar="N",
    help="Worker processes (default: one per CPU; 1: none). Small runs are processed in-process.",
)

# A progress bar for runs over more files than this (on a terminal only).
PROGRESS_MIN_FILES = 20


def _split(values: Optional[List[str]]) -> Optional[list[str]]:
    """Comma-separated or repeated values; None when the flag was not given (the configuration decides)."""
    if values is None:
        return None
    return [v.strip() for value in values for v in value.split(",") if v.strip()]


def _usage_error(message: str) -> typer.Exit:
    err.print(f"[bold red]error:[/] {escape(message)}", highlight=False)
    return typer.Exit(2)


class _Bar:
    """A rich progress bar on stderr; it appears only for runs over more than PROGRESS_MIN_FILES files."""

    def __init__(self) -> None:
        self.progress = None
        self.task = None

    def start(self, total: int) -> None:
        if total <= PROGRESS_MIN_FILES:
            return
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
        )

        self.progress = Progress(
            TextColumn("fixitem"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
            console=err.console, transient=True,
        )
        self.progress.start()
        self.task = self.progress.add_task("files", total=total)

    def __call__(self, path: Path) -> None:
        if self.progress is not None:
            self.progress.advance(self.task)

    def stop(self) -> None:
        if self.progress is not None:
            self.progress.stop()
            self.progress = None


def _progress(quiet: bool = False, interactive: bool = False) -> Optional[_Bar]:
    """A progress hook for a terminal (never with --quiet or --interactive, never when piped)."""
    if quiet or interactive or not sys.stderr.isatty():
        return None
    return _Bar()


def _report_errors(result: api.RunResult) -> None:
    for note in result.notes:
        err.print(f"[bold yellow]note:[/] {escape(note)}", highlight=False)
    for message in result.errors:
        err.print(f"[bold red]error:[/] {escape(message)}", highlight=False)


def _run(function, paths: List[Path], bar: Optional[_Bar], **kwargs) -> api.RunResult:
    try:
        return function(paths, progress=bar, **kwargs)
    except api.UsageError as exc:
        raise _usage_error(str(exc))
    finally:
        if bar is not None:
            bar.stop()


def _nothing_found(paths: List[Path], result: api.RunResult) -> None:
    """Paths that hold no file to analyse: a warning (as ruff gives), not an error."""
    if not result.files:
        named = ", ".join(str(p) for p in paths)
        err.print(f"[bold yellow]warning:[/] no Python files or notebooks found in {escape(named)}", highlight=False)


@app.command(cls=_Command)
def scan(
    paths: List[Path] = PathsArg,
    select: Optional[List[str]] = SelectOpt,
    ignore: Optional[List[str]] = IgnoreOpt,
    exclude: Optional[List[str]] = ExcludeOpt,
    format: str = typer.Option(
        "text", "--format", metavar="FORMAT",
        help="Output format: text, json, sarif (SARIF 2.1.0) or github (workflow commands).",
    ),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="Only the findings, no notes or summary."),
    config: Optional[Path] = ConfigOpt,
    isolated: bool = IsolatedOpt,
    jobs: Optional[int] = JobsOpt,
    no_cache: bool = NoCacheOpt,
) -> None:
    """List every place that reads a tensor's value back to the host."""
    format = _format(format, SCAN_FORMATS)
    result = _run(
        api.scan, paths, _progress(quiet), select=_split(select), ignore=_split(ignore), exclude=exclude,
        config=config, isolated=isolated, jobs=jobs, cache=False if no_cache else None,
    )
    _decided(2 if result.errors else 1 if result.findings else 0)
    if format == "json":
        typer.echo(output.findings_json(result))
    elif format == "sarif":
        typer.echo(formats.sarif_json(result))
    elif format == "github":
        text = formats.github(result)
        if text:
            typer.echo(text)
    else:
        for finding in result.findings:
            typer.echo(output.finding_text(finding, verbose_notes=not quiet))
        if not quiet and result.files:
            typer.echo(output.scan_summary(result))
    _nothing_found(paths, result)
    _report_errors(result)
    if result.errors:
        raise typer.Exit(2)
    raise typer.Exit(1 if result.findings else 0)


_ANSWERS = {"y": "yes", "yes": "yes", "n": "no", "no": "no", "a": "all", "all": "all", "q": "quit", "quit": "quit"}
PROMPT = "Apply this fix? [y]es / [n]o / [a]ll remaining / [q]uit "


def _ask(finding, diff: str) -> str:
    """The interactive dialogue, on stderr; answers are read from stdin (a terminal or not)."""
    err.print(output.finding_text(finding), markup=False, highlight=False)
    err.print(diff, markup=False, highlight=False, end="")
    while True:
        err.print(PROMPT, markup=False, highlight=False, end="")
        line = sys.stdin.readline()
        if not line:  # end of input: stop asking
            err.print()
            return "quit"
        if not sys.stdin.isatty():  # show the answer read, so that a log reads like the dialogue
            err.print(line.strip(), markup=False, highlight=False)
        answer = _ANSWERS.get(line.strip().lower())
        if answer:
            return answer
        err.print("Please answer y, n, a or q.", markup=False, highlight=False)


@app.command(cls=_Command)
def apply(
    paths: List[Path] = PathsArg,
    diff: bool = typer.Option(False, "--diff", help="Write nothing; print a unified diff of the changes."),
    unsafe: Optional[bool] = typer.Option(
        None, "--unsafe/--no-unsafe", show_default=False,
        help="Also apply unsafe fixes (each says why it is unsafe); --no-unsafe overrides the configuration.",
    ),
    interactive: bool = typer.Option(
        False, "--interactive", "-i", help="Show each fix as a diff and ask before applying it (answers from stdin)."
    ),
    select: Optional[List[str]] = SelectOpt,
    ignore: Optional[List[str]] = IgnoreOpt,
    exclude: Optional[List[str]] = ExcludeOpt,
    format: str = typer.Option(
        "text", "--format", metavar="FORMAT", help="Output format of the report: text or json."
    ),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="Print only errors (and the diff with --diff)."),
    config: Optional[Path] = ConfigOpt,
    isolated: bool = IsolatedOpt,
    jobs: Optional[int] = JobsOpt,
    flush_every: Optional[int] = typer.Option(
        None, "--flush-every", min=1, show_default=False, metavar="N",
        help="Deferred logging: replay the recorded values every N records (written into the rewritten file).",
    ),
    no_cache: bool = NoCacheOpt,
    verify_run: Optional[str] = typer.Option(
        None, "--verify-run", show_default=False, metavar="CMD",
        help="Run this shell command (twice) before and after the fixes; keep only the fixes under which it prints the "
             "same and syncs no more (the others are found by bisection and reverted).",
    ),
    verify_factory: Optional[str] = typer.Option(
        None, "--verify-factory", show_default=False, metavar="F",
        help="Keep only the fixes under which `fixitem verify --factory F` finds the same outputs, gradients, "
             "syncs and graph breaks: a function of each changed file (make), FILE.py:FUNCTION or MODULE:FUNCTION.",
    ),
    verify_cwd: Path = typer.Option(
        Path("."), "--verify-cwd", metavar="DIR", help="With --verify-run: the folder to run it in."
    ),
    verify_env: Optional[List[str]] = typer.Option(
        None, "--verify-env", show_default=False, metavar="KEY=VALUE",
        help="With --verify-run: KEY=VALUE for the command (repeatable).",
    ),
    verify_timeout: Optional[float] = typer.Option(
        None, "--verify-timeout", show_default=False, metavar="SECONDS",
        help="With --verify-run: seconds each run may take.",
    ),
    verify_mask: Optional[List[str]] = typer.Option(
        None, "--verify-mask", show_default=False, metavar="REGEX",
        help="With --verify-run: a regular expression for text that may differ between runs (repeatable).",
    ),
    verify_no_default_masks: bool = typer.Option(
        False, "--verify-no-default-masks",
        help="With --verify-run: compare the text as printed, masking only what --verify-mask names.",
    ),
) -> None:
    """Rewrite files in place (or, with --diff, show what would change)."""
    format = _format(format, APPLY_FORMATS)
    if verify_run is not None or verify_factory is not None:
        if diff or interactive:
            raise _usage_error("--verify-run / --verify-factory write the verified fixes: not with --diff or "
                               "--interactive")
        if verify_run is not None and verify_factory is not None:
            raise _usage_error("give either --verify-run or --verify-factory, not both")
        _apply_verified(
            paths, verify_run, verify_factory, verify_cwd, verify_env or [], verify_timeout, verify_mask or [], quiet,
            default_masks=not verify_no_default_masks, unsafe=unsafe, select=_split(select), ignore=_split(ignore), exclude=exclude, config=config,
            isolated=isolated, flush_every=flush_every,
        )
    result = _run(
        api.apply, paths, _progress(quiet, interactive), write=not diff, unsafe=unsafe,
        select=_split(select), ignore=_split(ignore), exclude=exclude, config=config, isolated=isolated,
        jobs=jobs, flush_every=flush_every, confirm=_ask if interactive else None,
        cache=False if no_cache else None,
    )
    _decided(2 if result.errors else 1 if diff and result.changed else 0)
    if diff:
        sys.stdout.write(result.diff)
    if format == "json":
        typer.echo(output.apply_json(result))
    elif not quiet and result.files:
        report = err if diff else new_console(highlight=False, soft_wrap=True)
        # With --diff nothing is written: the fixes are what would be made.
        done, left = ("would fix:", "left:     ") if diff else ("fixed:", "left: ")
        for finding in result.applied:
            report.print(f"{done} {output.finding_line(finding)}", markup=False)
        for finding in result.findings:
            report.print(f"{left} {output.finding_text(finding)}", markup=False)
        report.print(output.apply_summary(result, written=not diff), markup=False)
        if result.runtime is not None:  # once: the files that now need fixitem.runtime where they run
            report.print(result.runtime.text(written=not diff), markup=False)
    _nothing_found(paths, result)
    _report_errors(result)
    if result.errors:
        raise typer.Exit(2)
    raise typer.Exit(1 if diff and result.changed else 0)


def _apply_verified(paths, command, factory, cwd, env, timeout, masks, quiet, default_masks=True, **options) -> None:
    """``apply --verify-run`` / ``--verify-factory``: keep the fixes that verify; always exits."""
    from fixitem.verified import apply_verified, apply_verified_model
    from fixitem.verify.run import parse_env

    def log(line: str) -> None:
        if not quiet:
            err.print(line, markup=False, highlight=False)

    try:
        if factory is not None:
            result = apply_verified_model(paths, factory, cwd=cwd, log=log, **options)
        else:
            result = apply_verified(paths, command, cwd=cwd, env=parse_env(env), timeout=timeout, masks=masks,
                                    default_masks=default_masks, log=log, **options)
    except api.UsageError as exc:
        raise _usage_error(str(exc))
    out = new_console(highlight=False, soft_wrap=True)
    for path, finding in result.kept:
        out.print(f"fixed: {output.finding_line(finding)}", markup=False)
    for reverted in result.reverted:
        out.print(f"reverted: {output.finding_line(reverted.finding)}", markup=False)
        out.print(f"    {'; '.join(reverted.failures)}", markup=False)
        if reverted.diff and not quiet:
            out.print(reverted.diff, markup=False)
    if result.gave_up:
        out.print(f"no fix kept: {result.gave_up}", markup=False)
    if not quiet:
        out.print(f"{len(result.kept)} fix(es) kept, verified by `{result.command}`; {len(result.reverted)} "
                  f"reverted; {result.runs} run(s) of the check.", markup=False)
        if result.runtime is not None:  # once: the files that now need fixitem.runtime where they run
            out.print(result.runtime.text(), markup=False)
    for message in result.errors:
        err.print(f"[bold red]error:[/] {escape(message)}", highlight=False)
    raise typer.Exit(2 if result.errors else 0)


@app.command(cls=_Command)
def rule(
    code: Optional[str] = typer.Argument(None, metavar="[CODE]", help="A rule code (FX101) or name (where-if)."),
    all_rules: bool = typer.Option(False, "--all", help="List every rule (the default without a CODE)."),
) -> None:
    """Print a rule's documentation (or, with --all or no CODE, list the rules)."""
    if all_rules and code is not None:
        raise _usage_error(f"give a rule code or --all, not both (`fixitem rule {code}` documents it)")
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


@app.command(cls=_Command)
def demo(
    verify: bool = typer.Option(True, "--verify/--no-verify", help="Also prove the rewrite with `fixitem verify`."),
) -> None:
    """Run fixitem on a bundled example model: scan, diff, apply, verify."""
    import shutil
    import tempfile

    from fixitem.examples import gated_mlp

    with tempfile.TemporaryDirectory(prefix="fixitem-demo-") as tmp:
        shutil.copyfile(gated_mlp.__file__, Path(tmp) / "gated_mlp.py")
        shutil.copyfile(gated_mlp.__file__, Path(tmp) / "gated_mlp_orig.py")
        console = new_console(highlight=False, soft_wrap=True)
        console.print(f"Demo folder: {Path(tmp).resolve()} (a copy of fixitem/examples/gated_mlp.py, "
                      "removed at the end); paths below are relative to it.", markup=False)
        here = os.getcwd()
        os.chdir(tmp)  # paths are shown relative to the current folder: the demo's own
        try:
            _demo(console, Path("gated_mlp.py"), Path("gated_mlp_orig.py"), verify)
        finally:
            os.chdir(here)


def _demo(console: "rich.console.Console", model: Path, original: Path, verify: bool) -> None:
    console.rule(f"fixitem scan {model}")
    found = api.scan([model], isolated=True, cache=False)
    for finding in found.findings:
        console.print(output.finding_text(finding), markup=False)
    console.rule(f"fixitem apply --diff {model}")
    planned = api.apply([model], write=False, isolated=True, cache=False)
    console.print(planned.diff, markup=False, end="")
    console.rule(f"fixitem apply {model}")
    applied = api.apply([model], isolated=True, cache=False)
    console.print(output.apply_summary(applied, written=True), markup=False)
    left = api.scan([model], isolated=True, cache=False)
    console.print(f"Host-sync sites before: {len(found.findings)}, after: {len(left.findings)}.", markup=False)
    if left.findings or found.errors or applied.errors:
        raise typer.Exit(1)
    if verify:
        from fixitem.verify import render_text, run_verify

        console.rule(f"fixitem verify {model} --before {original} --backend aot_eager")
        report = run_verify(model, before=original, factory="make", backend="aot_eager")
        render_text(report, console)
        if not report.passed:
            raise typer.Exit(1)


@app.command(cls=_Command)
def lsp() -> None:
    """Run the language server for editors (LSP over stdin and stdout)."""
    from fixitem.lsp import serve

    raise typer.Exit(serve())


def _register_verify() -> None:
    from fixitem.verify.command import verify_command

    app.command("verify", cls=_Command)(verify_command)


_register_verify()


def main() -> None:
    app()


def entry() -> None:
    """The ``fixitem`` command: :func:`main`, then an exit that does not take the
    interpreter apart.

    A run keeps what it read of the project (module summaries, analyses, the
    stubs' table) until it ends. Freeing all of it object by object at exit, after
    a last pass of the cyclic collector over it, took a fifth of a one-file scan
    (50 ms of 280 on a 5,500-line module of transformers). So, as mypy does, the
    ``atexit`` handlers are run as at any exit, the output (theirs too) is flushed,
    and then the process ends at once. (Where a thread the program must wait for is still
    running, the exit is the usual one.)"""
    api.ends_after_run()
    try:
        main()
        status = 0
    except SystemExit as exc:
        status = _exit_status(exc.code)
    import atexit
    import threading

    if any(t.is_alive() and not t.daemon for t in threading.enumerate() if t is not threading.main_thread()):
        sys.exit(status)
    atexit._run_exitfuncs()  # first: what they write is flushed with the rest
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a pipe its reader closed, a stream closed already
            pass
    os._exit(status)


def _exit_status(code: object) -> int:
    """The status ``SystemExit(code)`` ends Python with (a message is printed, status 1)."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    try:
        print(code, file=sys.stderr)
    except (OSError, ValueError):
        pass
    return 1


if __name__ == "__main__":
    entry()
