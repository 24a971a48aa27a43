"""The Python API behind the command line: ``scan`` and ``apply``.

>>> from fixitem import scan
>>> result = scan(["fixtures/threshold"])      # doctest: +SKIP
>>> [f.rule for f in result.findings]           # doctest: +SKIP

Neither function raises for a problem in one of the user's files: a file
that cannot be read or parsed is listed in ``result.errors`` and the others
are still processed. Missing paths and unknown rule codes raise
:class:`UsageError` before anything is read.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from fixitem.codemods.discovery import PathNotFound, discover
from fixitem.codemods.engine import FileOutcome, Finding, process
from fixitem.codemods.registry import UnknownRule, select_rules
from fixitem.codemods.rule import Rule
from fixitem.codemods.source import SourceError, SourceFile, read_source, write_atomically


class UsageError(Exception):
    """Bad input from the user: a missing path, an unknown rule code."""


@dataclass
class FileResult:
    path: Path
    findings: list[Finding] = field(default_factory=list)  # remaining after apply; all for scan
    applied: list[Finding] = field(default_factory=list)
    diff: str = ""  # unified diff of the change (apply only)
    error: str | None = None
    written: bool = False


@dataclass
class RunResult:
    files: list[FileResult]

    @property
    def findings(self) -> list[Finding]:
        return [f for r in self.files for f in r.findings]

    @property
    def applied(self) -> list[Finding]:
        return [f for r in self.files for f in r.applied]

    @property
    def errors(self) -> list[str]:
        return [r.error for r in self.files if r.error]

    @property
    def changed(self) -> list[FileResult]:
        return [r for r in self.files if r.diff]

    @property
    def diff(self) -> str:
        return "".join(r.diff for r in self.files)


ProgressHook = Callable[[Path], None]


def _rules(select: Iterable[str] | None, ignore: Iterable[str] | None) -> list[Rule]:
    try:
        return select_rules(select, ignore)
    except UnknownRule as exc:
        raise UsageError(str(exc)) from None


def _files(paths: Sequence[Path | str], exclude: Iterable[str]) -> list[Path]:
    if not paths:
        raise UsageError("no path given")
    try:
        return discover(paths, exclude)
    except PathNotFound as exc:
        raise UsageError(f"path does not exist: {exc}") from None


def _display(path: Path) -> str:
    try:
        return path.resolve().relative_to(Path.cwd().resolve()).as_posix()
    except ValueError:
        return path.as_posix()


def unified_diff(path: Path, before: str, after: str) -> str:
    name = _display(path)
    old, new = (name, name) if name.startswith("/") else (f"a/{name}", f"b/{name}")
    lines = difflib.unified_diff(before.splitlines(keepends=True), after.splitlines(keepends=True), old, new)
    out = []
    for line in lines:
        out.append(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n")
    return "".join(out)


def _process_file(path: Path, rules: list[Rule], fix: bool, unsafe: bool) -> tuple[FileOutcome, SourceFile | None]:
    try:
        source = read_source(path)
    except SourceError as exc:
        return FileOutcome(path, error=str(exc)), None
    display = Path(_display(path))
    outcome = process(display, source.text, rules, fix=fix, unsafe=unsafe)
    outcome.path = path
    return outcome, source


def scan(
    paths: Sequence[Path | str],
    *,
    select: Iterable[str] | None = None,
    ignore: Iterable[str] | None = None,
    exclude: Iterable[str] = (),
    progress: ProgressHook | None = None,
) -> RunResult:
    """Find every host-sync site below ``paths``."""
    rules = _rules(select, ignore)
    results = []
    for path in _files(paths, exclude):
        outcome, _ = _process_file(path, rules, fix=False, unsafe=False)
        results.append(FileResult(path, outcome.findings, [], "", outcome.error))
        if progress:
            progress(path)
    return RunResult(results)


def apply(
    paths: Sequence[Path | str],
    *,
    write: bool = True,
    unsafe: bool = False,
    select: Iterable[str] | None = None,
    ignore: Iterable[str] | None = None,
    exclude: Iterable[str] = (),
    progress: ProgressHook | None = None,
) -> RunResult:
    """Rewrite the files below ``paths`` (or, with ``write=False``, only compute the diff)."""
    rules = _rules(select, ignore)
    results = []
    for path in _files(paths, exclude):
        outcome, source = _process_file(path, rules, fix=True, unsafe=unsafe)
        result = FileResult(path, outcome.findings, outcome.applied, "", outcome.error)
        if outcome.new_text is not None and source is not None:
            result.diff = unified_diff(path, source.text, outcome.new_text)
            if write:
                try:
                    write_atomically(path, source.encode(outcome.new_text))
                    result.written = True
                except (SourceError, UnicodeEncodeError) as exc:
                    result.error = str(exc)
        results.append(result)
        if progress:
            progress(path)
    return RunResult(results)
