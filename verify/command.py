"""The ``fixitem verify`` command (registered by the CLI: ``app.command("verify")(verify_command)``).

Exit status: 0 when every check passed, 1 when a check failed (each named in
the output; with ``--run``, also when the command itself failed), 2 on usage or input errors (missing file or factory, the user's
module failed to import, unknown --device/--backend/--format, git problems).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from fixitem.console import console as new_console

from .errors import UsageError

FORMATS = ("text", "json")


def _console(**options: object):
    return new_console(highlight=False, **options)


def _usage_error(message: str, details: str = "") -> typer.Exit:
    from rich.text import Text

    err = _console(stderr=True, soft_wrap=True)
    err.print(Text.assemble(("error: ", "bold red"), message))
    if details:
        err.print(details, markup=False)
    return typer.Exit(code=2)


def verify_command(
    after: Annotated[
        Optional[Path],
        typer.Argument(help="The rewritten file (the after version); not with --run.", show_default=False),
    ] = None,
    before: Annotated[
        Optional[Path],
        typer.Option("--before", help="The original file (the before version); with --run, the folder to run "
                                      "the before version in.", show_default=False),
    ] = None,
    before_ref: Annotated[
        Optional[str],
        typer.Option("--before-ref", help="Take the before version from git: AFTER as committed at this "
                                          "revision (e.g. HEAD); with --run, the whole repository at it.",
                     show_default=False),
    ] = None,
    factory: Annotated[
        str, typer.Option("--factory", help="Function returning (model, inputs): a function of the rewritten "
                                            "file, or FILE.py:FUNCTION / MODULE:FUNCTION anywhere in the project "
                                            "(then the before version is the whole tree: --before-ref REV or "
                                            "--before DIR); inputs is one tuple of positional arguments or a list "
                                            "of them.")
    ] = "make",
    device: Annotated[str, typer.Option("--device", help="auto (cuda when available), cpu or cuda.")] = "auto",
    backend: Annotated[
        str, typer.Option("--backend", help="torch.compile backend for the fullgraph check: inductor, "
                                            "aot_eager or eager.")
    ] = "inductor",
    output_format: Annotated[str, typer.Option("--format", help="text or json.")] = "text",
    timeit: Annotated[
        bool, typer.Option("--timeit", help="Also time compiled-before against compiled-after (warm median).")
    ] = False,
    run: Annotated[
        Optional[str],
        typer.Option("--run", help="A shell command (a training or evaluation script) to run on the before and "
                                   "after trees and compare; alone, a profile of its host syncs by line.",
                     show_default=False),
    ] = None,
    cwd: Annotated[Path, typer.Option("--cwd", help="With --run: the folder the after command runs in.")] = Path("."),
    env: Annotated[
        Optional[list[str]], typer.Option("--env", help="With --run: KEY=VALUE set for the command (repeatable).",
                                          show_default=False)
    ] = None,
    timeout: Annotated[
        Optional[float], typer.Option("--timeout", help="With --run: seconds each run may take.", show_default=False)
    ] = None,
    mask: Annotated[
        Optional[list[str]],
        typer.Option("--mask", help="With --run: a regular expression for text that may differ between runs "
                                    "(repeatable), besides the defaults: timestamps, dates, clock times, "
                                    "elapsed times, rates, durations, addresses, trailing spaces, line numbers "
                                    "in warnings and tracebacks.", show_default=False),
    ] = None,
    config: Annotated[
        Optional[list[str]],
        typer.Option("--config", help="Dynamo settings to compile the after version under, as a finding names "
                                      "them: capture_scalar_outputs, capture_dynamic_output_shape_ops "
                                      "(comma-separated or repeated). Breaks are counted with and without them, "
                                      "and the sites they remove listed; remaining host syncs are reported, not "
                                      "removed. With --run: set for the after run (alone: the same tree run "
                                      "without, then with them).", show_default=False),
    ] = None,
    no_default_masks: Annotated[
        bool,
        typer.Option("--no-default-masks", help="With --run: compare the text as printed, masking only what --mask "
                                                "names."),
    ] = False,
) -> None:
    """Prove a rewrite: graph breaks, host syncs and numerics, before | after."""
    from .api import run_verify
    from .dynamo_config import parse_config
    from .report import render_text

    if output_format not in FORMATS:
        raise _usage_error(f"--format must be one of {', '.join(FORMATS)}; got {output_format!r}")
    try:
        flags = parse_config(config)
    except UsageError as exc:
        raise _usage_error(exc.message, exc.details) from None
    if run is not None:
        _verify_run(run, after, before, before_ref, cwd, env or [], timeout, mask or [], output_format,
                    not no_default_masks, flags)
    if after is None:
        raise _usage_error("missing the after file (or give --run CMD)")
    if before is not None and before_ref is not None:
        raise _usage_error("give either --before FILE or --before-ref REF, not both")
    if before is None and before_ref is None:
        raise _usage_error("missing the before version: give --before FILE or --before-ref REF")
    try:
        report = run_verify(
            after,
            before=before,
            before_ref=before_ref,
            factory=factory,
            device=device,
            backend=backend,
            timeit=timeit,
            config=flags,
        )
    except UsageError as exc:
        raise _usage_error(exc.message, exc.details) from None
    if output_format == "json":
        sys.stdout.write(report.to_json() + "\n")
        sys.stdout.flush()
    else:
        render_text(report, _console())
    raise typer.Exit(code=0 if report.passed else 1)


def _verify_run(command: str, after: Path | None, before: Path | None, before_ref: str | None, cwd: Path,
                env: list[str], timeout: float | None, masks: list[str], output_format: str,
                default_masks: bool = True, config: tuple[str, ...] = ()) -> None:
    """``verify --run``: compare the before and after runs, or profile one run; always exits."""
    from .run import parse_env, profile_command, verify_command_run
    from .run_report import render_comparison, render_profile

    if after is not None:
        raise _usage_error("--run compares whole trees: give --before DIR or --before-ref REV, not a file")
    if before is not None and before_ref is not None:
        raise _usage_error("give either --before DIR or --before-ref REF, not both")
    try:
        variables = parse_env(env)
        if config and before is None and before_ref is None:
            result = verify_command_run(command, cwd, env=variables, timeout=timeout, masks=masks,
                                        default_masks=default_masks, config=config)
        elif before is None and before_ref is None:
            profile = profile_command(command, cwd, variables, timeout)
            if output_format == "json":
                sys.stdout.write(profile.to_json() + "\n")
            else:
                render_profile(profile, _console())
            raise typer.Exit(code=0 if profile.passed else 1)
        else:
            result = verify_command_run(command, cwd, before_ref=before_ref, before_dir=before, env=variables,
                                        timeout=timeout, masks=masks, default_masks=default_masks, config=config)
    except UsageError as exc:
        raise _usage_error(exc.message, exc.details) from None
    if output_format == "json":
        sys.stdout.write(result.to_json() + "\n")
    else:
        render_comparison(result, _console())
    raise typer.Exit(code=0 if result.passed else 1)
