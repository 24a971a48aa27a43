"""The Python API behind the command line: ``scan`` and ``apply``.

>>> from fixitem import scan
>>> result = scan(["fixtures/threshold"])      # doctest: +SKIP
>>> [f.rule for f in result.findings]           # doctest: +SKIP

Neither function raises for a problem in one of the user's files: a file
that cannot be read or parsed is listed in ``result.errors`` and the others
are still processed. Missing paths (and links that lead nowhere or in a loop),
unknown rule codes, a ``select`` that names no rule and bad configuration
raise :class:`UsageError` before anything is read. A file that cannot be
written keeps its findings and has none ``applied``: only what was written
counts as fixed.

Settings come from the arguments, else from the ``[tool.fixitem]`` table of
the ``pyproject.toml`` found from the first path upwards (see
:mod:`fixitem.config`); ``config=`` names a file instead, ``isolated=True``
reads none. An argument left at ``None`` takes the configuration's value.

Files are processed in parallel worker processes (``jobs``; the default is
one per CPU) when there are enough of them to pay for starting the workers;
the result is the same, in the same order, as with ``jobs=1``. Workers end
when the process that started them does, even one killed with ``kill -9``
(see :mod:`fixitem.workers`).
"""

from __future__ import annotations

import hashlib
import os
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal, Union

from fixitem.cache import ResultCache, default_dir, disabled_by_environment
from fixitem.cache import close_all as close_caches
from fixitem.codemods import shortcuts
from fixitem.codemods.driver.discovery import (
    PathNotFound,
    discover,
    is_notebook,
    missing,
)
from fixitem.codemods.driver.engine import (
    Analyses,
    FileResult,
    Finding,
    in_original,
    new_run,
    process,
    release,
    worth_parsing,
)
from fixitem.codemods.driver.line_blocks import unified_diff as line_diff
from fixitem.codemods.driver.line_length import DEFAULT as DEFAULT_LINE_LENGTH
from fixitem.codemods.driver.line_length import forget as forget_line_lengths
from fixitem.codemods.driver.line_length import line_length
from fixitem.codemods.driver.one_fix import fix_one
from fixitem.codemods.driver.registry import UnknownRule, select_rules
from fixitem.codemods.driver.run_facts import RunFacts, run_facts
from fixitem.codemods.driver.source import (
    SourceError,
    SourceFile,
    read_source,
    write_atomically,
)
from fixitem.codemods.driver.without_runtime import WithoutRuntime
from fixitem.codemods.model import devices, streams
from fixitem.codemods.model.project import keep_learned_summaries, keep_summaries_in
from fixitem.codemods.real_paths import real_path
from fixitem.codemods.rule import Rule
from fixitem.config import (
    Config,
    ConfigError,
    discover_config,
    glob_matches,
    load_config,
)
from fixitem.deploy import RuntimeNeed, newly_imports_runtime, runtime_need
from fixitem.errors import UsageError

# Fewer candidate files than this are processed in-process: starting workers costs more.
PARALLEL_MIN_FILES = 8
# Files handed to a worker at a time.
CHUNK_SIZE = 4
# The most fixes offered one by one in one file (a guard; the engine reaches a fixed point).
MAX_INTERACTIVE_STEPS = 1000


@dataclass
class RunResult:
    files: list[FileResult]
    rules: list[str] = field(default_factory=list)  # codes of the rules that ran (before per-file-ignores)
    config: Path | None = None  # the configuration file used, if any
    stopped: bool = False  # interactive apply: the user quit (later fixes and files left as they were)
    #: apply: the files its fixes made import ``fixitem.runtime`` and where the project declares
    #: its dependencies (see :mod:`fixitem.deploy`); None when no file now needs the runtime.
    runtime: RuntimeNeed | None = None

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
    def notes(self) -> list[str]:
        return [note for r in self.files for note in r.notes]

    @property
    def changed(self) -> list[FileResult]:
        return [r for r in self.files if r.diff]

    @property
    def diff(self) -> str:
        return "".join(r.diff for r in self.files)


ProgressHook = Callable[[Path], None]
"""Called once per file as it is done. If it also has a ``start(total)`` method,
that is called first with the number of files."""

Answer = Literal["yes", "no", "all", "quit"]
ConfirmHook = Callable[[Finding, str], Answer | bool]
"""Interactive apply: given a fixable finding and the unified diff of its fix
alone, answer ``"yes"`` (apply it), ``"no"``, ``"all"`` (this and every
remaining fix, without asking again) or ``"quit"`` (apply no more; what was
accepted is kept). ``True``/``False`` mean yes/no."""


# --------------------------------------------------------------------------- settings


@dataclass(frozen=True)
class _Job:
    """What a worker needs to process one file: plain, picklable data."""

    path: Path
    codes: tuple[str, ...]  # the rules to run on this file, in run order
    fix: bool
    unsafe: bool
    write: bool
    flush_every: int | None = None  # for the deferred-logging rewrite
    cache_dir: str | None = None  # where results are kept between runs; None: not kept
    default_device: bool = False  # a file of the run sets torch's default device
    replaced_streams: bool = False  # a file of the run tees this file's sys.stdout / sys.stderr
    runtime: bool = True  # False: fixes that import fixitem.runtime are report-only (``no-runtime``)
    traced_roots: tuple[str, ...] = ()  # functions of the file that traced code of other modules calls
    # scan, analysing a file again with more traced roots: the first run's findings as found
    # (a digest) and as tagged; when the analysis finds the same, the tags stand.
    previous: tuple[str, tuple[Finding, ...]] | None = None
    # find the functions of other modules the file's traced code calls (not in a run of one
    # file: only other files of the run are analysed again for them)
    follow_calls: bool = True
    # which analysis of the run this is: 0 the first, then 1, 2... for the files analysed
    # again for what traced code elsewhere calls (see ``_run_project``)
    round: int = 0
    line_length: int = DEFAULT_LINE_LENGTH  # the project's, that rewritten lines fit


@dataclass
class _Plan:
    files: list[Path]
    codes: dict[Path, tuple[str, ...]]
    rules: list[str]
    unsafe: bool
    flush_every: int | None
    config: Config
    cache_dir: str | None = None
    facts: RunFacts = field(default_factory=RunFacts)  # what a file of the run changes for the others
    without_runtime: set[Path] = field(default_factory=set)  # files that ``no-runtime`` keeps the runtime out of
    project_style: bool = True  # rewritten lines fit the project's line length (False: ``isolated``, 88)

    def jobs(self, fix: bool, unsafe: bool, write: bool) -> list[_Job]:
        return [_Job(f, self.codes[f], fix, unsafe, write, self.flush_every, self.cache_dir,
                     default_device=self.facts.default_device, replaced_streams=self.facts.replaced_streams(f),
                     runtime=f not in self.without_runtime,
                     line_length=line_length(f) if self.project_style else DEFAULT_LINE_LENGTH)
                for f in self.files]


CacheOption = Union[bool, Path, str, None]
"""``cache=``: ``None`` (default: on unless ``FIXITEM_NO_CACHE`` is set), ``False``
(off), ``True`` (on), or a folder to keep results in."""


def _cache_dir(cache: CacheOption, config: Config) -> str | None:
    if cache is False or (cache is None and disabled_by_environment()):
        return None
    if isinstance(cache, (str, Path)):
        return str(Path(cache).resolve())
    return str(default_dir(config.path).resolve())


def _config(paths: Sequence[Path | str], config: Config | Path | str | None, isolated: bool) -> Config:
    if isolated:
        return Config()
    try:
        if isinstance(config, Config):
            return config
        if config is not None:
            return load_config(config)
        return discover_config(paths)
    except ConfigError as exc:
        raise UsageError(str(exc)) from None


def _codes(select: Iterable[str] | None, ignore: Iterable[str] | None) -> tuple[str, ...]:
    try:
        return tuple(rule.code for rule in select_rules(select, ignore))
    except UnknownRule as exc:
        raise UsageError(str(exc)) from None


def _files(paths: Sequence[Path | str], excluded: Callable[[Path], bool]) -> list[Path]:
    """The files below ``paths``; ``excluded`` files are skipped even when named (as pre-commit names them)."""
    if not paths:
        raise UsageError("no path given")
    try:
        return discover(paths, excluded, exclude_named=True)
    except PathNotFound as exc:
        raise UsageError(str(exc)) from None


def _plan(
    paths: Sequence[Path | str],
    *,
    select: Iterable[str] | None,
    ignore: Iterable[str] | None,
    exclude: Iterable[str] | None,
    unsafe: bool | None,
    flush_every: int | None,
    config: Config | Path | str | None,
    isolated: bool,
    cache: CacheOption = False,
    no_runtime: Iterable[str] | None = None,
) -> _Plan:
    if isinstance(paths, (str, Path)):
        paths = [paths]
    select = None if select is None else list(select)
    ignore = None if ignore is None else list(ignore)
    if select is not None and not any(code.strip() for code in select):
        raise UsageError(
            "select names no rule: give codes or prefixes (FX101, FX1, ALL), or leave it out for all rules"
        )
    _codes(select, ignore)  # unknown codes in the arguments: an error before anything is read
    if flush_every is not None and (isinstance(flush_every, bool) or not isinstance(flush_every, int) or flush_every < 1):
        raise UsageError(f"flush_every must be a positive integer, not {flush_every!r}")
    if isinstance(no_runtime, str):
        raise UsageError(f"no_runtime must be a list of globs, not {no_runtime!r}")
    if not paths:
        raise UsageError("no path given")
    for raw in paths:
        problem = missing(raw)
        if problem is not None:
            raise UsageError(problem)
    cfg = _config(paths, config, isolated)
    # An argument given replaces the configuration's value for that key.
    select = select if select is not None else cfg.select
    ignore = ignore if ignore is not None else (cfg.ignore or [])
    # --exclude globs are relative to the current folder, as configured ones are to their file's folder;
    # one matcher serves both.
    if exclude is not None:
        patterns, cwd = list(exclude), Path.cwd().resolve()
        files = _files(paths, lambda f: any(glob_matches(f, pattern, cwd) for pattern in patterns))
    else:
        files = _files(paths, cfg.excluded)
    rules = _codes(select, ignore)
    codes: dict[Path, tuple[str, ...]] = {}
    by_ignores: dict[tuple[str, ...], tuple[str, ...]] = {}
    for file in files:
        extra = tuple(cfg.ignored_for(file)) if cfg.per_file_ignores else ()
        if extra not in by_ignores:
            by_ignores[extra] = _codes(select, [*ignore, *extra]) if extra else rules
        codes[file] = by_ignores[extra]
    flush = flush_every if flush_every is not None else cfg.flush_every
    unsafe = bool(unsafe if unsafe is not None else cfg.unsafe)
    if no_runtime is not None:  # globs relative to the current folder, as --exclude's
        globs, cwd = list(no_runtime), Path.cwd().resolve()
        without = {f for f in files if any(glob_matches(f, pattern, cwd) for pattern in globs)}
    else:
        without = {f for f in files if cfg.runtime_kept_out(f)} if cfg.no_runtime else set()
    if not isolated:
        forget_line_lengths()  # read the project's configuration as it is now
    return _Plan(files, codes, list(rules), unsafe, flush, cfg, _cache_dir(cache, cfg),
                 run_facts(files), without, project_style=not isolated)


# --------------------------------------------------------------------------- one file

_RULES: dict[tuple[tuple[str, ...], bool], list[Rule]] = {}


def rules_for(codes: Sequence[str], runtime: bool = True) -> list[Rule]:
    """Rule instances for exact ``codes``, in run order (made once per process).

    ``runtime=False``: their fixes that import ``fixitem.runtime`` are report-only."""
    key = (tuple(codes), runtime)
    if key not in _RULES:
        rules = select_rules(list(key[0])) if key[0] else []
        _RULES[key] = rules if runtime else [WithoutRuntime(rule) for rule in rules]
    return _RULES[key]


def _engine_options(job: _Job) -> dict[str, Any]:
    options: dict[str, Any] = {}
    if job.flush_every is not None:
        options["flush_every"] = job.flush_every
    if job.traced_roots:
        options["traced_roots"] = job.traced_roots
    if not job.follow_calls:
        options["follow_calls"] = False
    if job.line_length != DEFAULT_LINE_LENGTH:
        options["line_length"] = job.line_length
    return options


def _display(path: Path) -> str:
    try:
        return real_path(path).relative_to(real_path(os.getcwd())).as_posix()
    except ValueError:
        return path.as_posix()


def unified_diff(path: Path, before: str, after: str) -> str:
    name = _display(path)
    old, new = (name, name) if name.startswith("/") else (f"a/{name}", f"b/{name}")
    lines = line_diff(before.splitlines(keepends=True), after.splitlines(keepends=True), old, new)
    out = []
    for line in lines:
        out.append(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n")
    return "".join(out)


def _read(path: Path) -> tuple[SourceFile | None, str | None]:
    try:
        return read_source(path), None
    except SourceError as exc:
        return None, str(exc)


def _write(result: FileResult, source: SourceFile, text: str, as_it_is: Callable[[], list[Finding]]) -> None:
    """Write the rewrite; if that fails, the file is as it was: nothing was fixed in it,
    and what it holds, ``as_it_is()`` (the fixes not written too), is what is left."""
    try:
        write_atomically(result.path, source.encode(text))
        result.written = True
    except (SourceError, UnicodeEncodeError) as exc:
        result.error = str(exc)
        result.applied = []
        result.diff = ""
        result.findings = as_it_is()


def _run_notebook(job: _Job) -> FileResult:
    """A Jupyter notebook: its code cells as one module (see :mod:`fixitem.codemods.driver.notebooks`)."""
    from fixitem.codemods.driver.notebooks import (
        process_notebook,  # (not imported for a run of Python files)
    )

    def run(fix: bool) -> FileResult:
        return process_notebook(
            job.path, _display(job.path), rules_for(job.codes, job.runtime), fix=fix, unsafe=job.unsafe,
            as_it_was=fix and not job.write, flush_every=job.flush_every, line_length=job.line_length,
        )

    result = run(job.fix)
    if result.new_text is not None and job.write:
        try:
            write_atomically(job.path, result.new_text.encode("utf-8"))
            result.written = True
        except SourceError as exc:  # the notebook is as it was: nothing fixed, all it holds is left
            result = replace(run(False), error=str(exc))
    return result


@contextmanager
def _facts_of(job: _Job) -> Iterator[None]:
    """Analyse ``job``'s file with what the other files of its run change for it."""
    with devices.project(job.default_device), streams.program(job.replaced_streams):
        yield


# The round of the last job this process ran (see ``_Job.round``).
_last_round = [0]
# True when the process ends as soon as the run does (the ``fixitem`` command): see
# :func:`ends_after_run`.
_ENDS_AFTER_RUN = [False]


def ends_after_run() -> None:
    """The process ends at once after the run, without freeing what it made (as the
    ``fixitem`` command does): the last file's tree and tables are then left to the exit
    (freed object by object they were 2% of a one-file scan of a 5,500-line module)."""
    _ENDS_AFTER_RUN[0] = True


def _run_job(job: _Job, last: bool = False) -> FileResult:
    """Process one file (in a worker or in-process); never raises for the user's file.
    ``last``: no other file follows it in this process's run."""
    if job.round != _last_round[0]:
        _last_round[0] = job.round
        if job.write:  # files of the run were written since this process read them
            new_run()
    # What outlives the file (the modules of the project it read, kept for the next
    # files) is frozen: the collector's passes would walk those caches after every file.
    with shortcuts.collection_paused(freeze_survivors=True), _facts_of(job):
        try:
            return _run_file_job(job)
        finally:
            if not (last and _ENDS_AFTER_RUN[0]):
                release()


def _run_file_job(job: _Job) -> FileResult:
    if is_notebook(job.path):
        return _run_notebook(job)
    source, error = _read(job.path)
    if source is None:
        return FileResult(job.path, error=error)
    if not worth_parsing(source.text):
        # Nothing to find (the engine would not parse it), and nothing kept: an entry would
        # cost more to write and to read back than the text check it stands for.
        return FileResult(job.path)
    display = _display(job.path)
    kept = ResultCache(job.cache_dir) if job.cache_dir else None
    keep_summaries_in(kept)  # the modules of the project it asks about, for later runs
    key = kept.key(display, source.text, job.codes, job.flush_every, job.default_device, job.runtime,
                   job.traced_roots, job.replaced_streams, job.line_length, _place(job.path)) if kept else ""
    outcome: FileResult | None = None
    analyses: Analyses | None = None
    marks: list[tuple[str, str]] = []
    here: frozenset[str] = frozenset()
    found = ""
    if kept:
        hit = kept.get(key)
        if hit is not None and hit.traced_elsewhere is None and job.follow_calls:
            hit = None  # kept by a run of one file, which did not look for them: look now
        # A kept answer with nothing to fix is the whole answer, for apply too.
        if hit is not None and not (job.fix and any(_fixable(f, job.unsafe) for f in hit.findings)):
            return FileResult(job.path, hit.findings, [], "", hit.error, traced_elsewhere=hit.traced_elsewhere,
                              traced_here=hit.traced_here)
        if hit is not None and job.fix:  # scan's in-memory rewrite of this very text
            outcome = hit.rewrite(Path(display), job.unsafe)
            marks, here = hit.traced_elsewhere, hit.traced_here
    if outcome is None:
        rules = rules_for(job.codes, job.runtime)
        analyses = Analyses() if shortcuts.ENABLED else None
        outcome = process(
            Path(display), source.text, rules, fix=job.fix, unsafe=job.unsafe, analyses=analyses,
            **_engine_options(job),
        )
        marks, here = outcome.traced_elsewhere, outcome.traced_here
        found = _digest(outcome.findings)
        rewrites: dict[bool, FileResult] = {}
        if job.previous is not None and job.previous[0] == found:
            outcome.findings = list(job.previous[1])  # the same findings: their tags stand
        elif not job.fix and outcome.error is None and outcome.fixes_interact and \
                any(_fixable(f, True) for f in outcome.findings):
            # Fixes that interact: what ``apply`` makes of them is found by making them.
            outcome.findings, rewrites = _as_applied(
                Path(display), source.text, rules, job, outcome.findings, analyses,
            )
        if kept and (not job.fix or (outcome.new_text is None and not outcome.applied and outcome.error is None)):
            kept.put(key, outcome.findings, outcome.error, rewrites, outcome.depends, outcome.traced_elsewhere,
                     outcome.traced_here)
        if kept:
            keep_learned_summaries()
    result = FileResult(job.path, outcome.findings, outcome.applied if job.fix else [], "", outcome.error,
                        traced_elsewhere=marks, traced_here=here, found_digest=found)
    if job.fix and outcome.new_text is not None:
        result.diff = unified_diff(job.path, source.text, outcome.new_text)
        if job.write:
            _write(result, source, outcome.new_text, lambda: process(
                Path(display), source.text, rules_for(job.codes), analyses=analyses, **_engine_options(job),
            ).findings)
        else:  # nothing is written: say where what is left stands in the file as it is
            result.findings = in_original(result.findings, source.text, outcome.new_text)
    return result


def _as_applied(
    path: Path, text: str, rules: list[Rule], job: _Job, findings: list[Finding], analyses: Analyses | None,
) -> tuple[list[Finding], dict[bool, FileResult]]:
    """Scan's findings, their fix tags saying what ``apply`` and ``apply --unsafe`` do.

    One analysis cannot know it: ``apply`` rewrites until nothing is left to
    fix, so a fix that overlaps another is applied in a later pass, or not at
    all when the other one rewrote its code, and a site with no fix of its own
    can become fixable once a fix inside it is made (``if a.item() > 0:``
    around a fixed ``if b.item() > 0:``). So the file is rewritten in memory
    both ways, and each finding is tagged ``safe`` if ``apply`` fixes it,
    ``unsafe`` if only ``apply --unsafe`` does, else ``none``: the summary's
    counts are then what the two commands fix. (Called only where fixes interact: see
    :func:`codemods.driver.engine._fixes_interact`.)

    Also returns the rewrites by mode (``False``: safe fixes, ``True``: unsafe ones
    too): what ``apply`` would give, kept for an ``apply`` after this scan.
    """
    applied: dict[bool, list[Finding]] = {False: [], True: []}
    runs: dict[bool, FileResult] = {}
    # Without a safe fix to start from, ``apply`` changes nothing: no need to try it.
    for unsafe in (False, True) if any(f.fix == "safe" for f in findings) else (True,):
        if unsafe and False in runs and not runs[False].offered_unsafe:
            # No pass of ``apply`` was offered an unsafe fix: ``apply --unsafe`` makes the same
            # choices on the same texts, so it gives the same run.
            runs[True], applied[True] = runs[False], list(runs[False].applied)
            continue
        run = process(path, text, rules, fix=True, unsafe=unsafe, analyses=analyses, **_engine_options(job))
        if run.error is not None:
            return findings, {}
        runs[unsafe] = run
        applied[unsafe] = list(run.applied)

    def same(a: Finding, how: int) -> tuple:
        """Two findings are the same fix when these agree."""
        if how == 0:  # a fix of the first pass: where scan saw it
            return (a.rule, a.line, a.col, a.message)
        if how == 1:  # a later pass: the lines above it may have changed, its text has not
            return (a.rule, a.message)
        return (a.rule,)  # the code it quotes was rewritten first

    matched: dict[int, list[Finding | None]] = {}
    for how in (0, 1, 2):
        # Each finding takes the first fix left in the pool that is the same (by ``same``).
        left: list[dict[tuple, deque[Finding]]] = [{}, {}]
        for mode in (0, 1):
            for other in applied[bool(mode)]:
                left[mode].setdefault(same(other, how), deque()).append(other)
        for index, finding in enumerate(findings):
            pair = matched.setdefault(index, [None, None])
            if how == 2 and (finding.fix != "none" or pair != [None, None]):
                continue
            for mode in (0, 1):
                if pair[mode] is None:
                    hits = left[mode].get(same(finding, how))
                    if hits:
                        pair[mode] = hits.popleft()
        for mode in (0, 1):
            taken = {id(f) for pair in matched.values() if (f := pair[mode]) is not None}
            applied[bool(mode)] = [f for f in applied[bool(mode)] if id(f) not in taken]
    tagged = [_retag(finding, *matched[index]) for index, finding in enumerate(findings)]
    extra = {id(f): f for f in applied[True]}  # only made after other fixes: listed as apply reports them
    extra.update({id(f): f for f in applied[False]})
    tagged.extend(replace(f, applied=False) for f in extra.values())
    return tagged, runs


def _retag(finding: Finding, safe: Finding | None, unsafe: Finding | None) -> Finding:
    if safe is not None:
        fix, source = "safe", safe
    elif unsafe is not None:
        fix, source = "unsafe", unsafe
    else:
        fix, source = "none", None
    if fix == finding.fix:
        return finding
    if source is not None:
        note = source.note or (finding.note if fix == "unsafe" else "")
        if fix == "unsafe" and not note:
            note = "fixed only with --unsafe: an unsafe fix of the same code is made first"
    else:
        note = "no fix of its own: another fix rewrites this code first"
    return replace(finding, fix=fix, note=note)


# How many times files are analysed again because traced code elsewhere calls their
# functions (each round can reach one module further).
TRACED_ROUNDS = 3


def _run_project(jobs: list[_Job], workers: int | None, progress: ProgressHook | None) -> list[FileResult]:
    """Every job, then again each file of the run whose functions traced code of another
    file calls (``forward`` calling a helper of another module, or a property of a base
    class defined elsewhere): those functions are traced too, and their file is analysed
    again with them as traced roots. A file ``apply`` wrote already is analysed as written."""
    new_run()
    _last_round[0] = 0
    if len(jobs) == 1:  # no other file of the run to analyse again for what its traced code calls
        jobs = [replace(jobs[0], follow_calls=False)]
    for folder in sorted({job.cache_dir for job in jobs if job.cache_dir}):
        ResultCache(folder).prune()
    close_caches()  # (before the workers start: each opens its own)
    try:
        with _Workers(workers) as pool, shortcuts.thawed_after():
            return _run_rounds(jobs, pool, progress)
    finally:
        keep_summaries_in(None)  # (each job says where, for itself)
        close_caches()


def _run_rounds(jobs: list[_Job], pool: _Workers, progress: ProgressHook | None) -> list[FileResult]:
    results = _run_all(jobs, pool, progress)
    place = {}
    for index, job in enumerate(jobs):
        try:
            place[str(real_path(job.path))] = index
        except (OSError, RuntimeError):
            continue
    for later in range(1, TRACED_ROUNDS + 1):
        wanted: dict[int, set[str]] = {}
        for result in results:
            for path, name in result.traced_elsewhere or ():
                index = place.get(path)
                if index is not None:
                    wanted.setdefault(index, set()).add(name)
        # A file whose wanted functions are traced already (its own ``forward`` calls them)
        # would give the same analysis: it is not analysed again.
        again = [i for i, names in sorted(wanted.items())
                 if not names <= set(jobs[i].traced_roots) | results[i].traced_here]
        if not again:
            break
        redo = [replace(jobs[i], traced_roots=tuple(sorted(set(jobs[i].traced_roots) | wanted[i])),
                        previous=(results[i].found_digest, tuple(results[i].findings))
                        if not jobs[i].fix and results[i].found_digest else None, round=later) for i in again]
        for i, job, result in zip(again, redo, _run_all(redo, pool, None)):
            jobs[i] = job
            results[i] = _after(results[i], result) if job.write else result
    return results


def _digest(findings: list[Finding]) -> str:
    """What an analysis found, as a digest (to tell whether a second one found the same)."""
    return hashlib.sha1(repr([f.to_dict() for f in findings]).encode()).hexdigest()


def _after(first: FileResult, second: FileResult) -> FileResult:
    """A written file analysed again: what both runs fixed, what the second left."""
    return replace(second, applied=[*first.applied, *second.applied], written=first.written or second.written,
                   diff=first.diff + second.diff, notes=[*first.notes, *second.notes])


class _Workers:
    """The worker processes of a run, started when a round of it first needs them and
    kept for its later rounds: a worker keeps what it read of the project (the modules
    that files import), which the files analysed again ask about too."""

    def __init__(self, workers: int | None) -> None:
        if workers is None or workers == 0:
            workers = os.cpu_count() or 1
        if workers < 0:
            raise UsageError(f"jobs must be 0 (one per CPU) or more, not {workers}")
        self.count = workers
        self.pool: Any = None
        self.broken = False  # a worker died: the rest of the run is done in-process
        self.summaries: str | None = None  # the folder the workers share modules' summaries through

    def start(self, files: int) -> Any:
        """The pool, started for a first round of ``files`` files if it is not yet."""
        if self.pool is None:
            # Imported here: a run of a few files (a pre-commit hook's) starts without them.
            import tempfile
            from concurrent.futures import ProcessPoolExecutor

            from fixitem.workers import pool_options as worker_options

            try:
                self.summaries = tempfile.mkdtemp(prefix="fixitem-summaries-")
            except OSError:  # no temporary folder: each worker reads the modules itself
                self.summaries = None
            self.pool = ProcessPoolExecutor(max_workers=min(self.count, files), **worker_options(self.summaries))
        return self.pool

    def __enter__(self) -> _Workers:
        return self

    def __exit__(self, kind: type[BaseException] | None, *rest: object) -> None:
        if self.pool is not None:
            self.pool.shutdown(cancel_futures=kind is not None)  # interrupted: no file more
            self.pool = None
        if self.summaries is not None:
            import shutil

            shutil.rmtree(self.summaries, ignore_errors=True)
            self.summaries = None


def _run_all(jobs: list[_Job], pool: _Workers, progress: ProgressHook | None) -> list[FileResult]:
    start = getattr(progress, "start", None)
    # A few files are processed in-process (starting workers costs more), unless the run's
    # workers are started already: they have read the modules those files ask about.
    if pool.count <= 1 or pool.broken or (pool.pool is None and len(jobs) < PARALLEL_MIN_FILES):
        return _run_here(jobs, progress, start)
    from concurrent.futures.process import BrokenProcessPool

    # The largest files first: the workers then end together, not one of them on a big file
    # left for last. Results come back in the order of ``jobs``, as in-process.
    first = sorted(range(len(jobs)), key=lambda i: -_size(jobs[i].path))
    results: list[FileResult | None] = [None] * len(jobs)
    done = 0
    try:
        # Submitting first starts the workers before a progress display starts its thread.
        ordered = pool.start(len(jobs)).map(_run_job, [jobs[i] for i in first], chunksize=CHUNK_SIZE)
        if start:
            start(len(jobs))
        for result in ordered:
            results[first[done]] = result
            done += 1
            if progress:
                progress(result.path)
    except BrokenProcessPool:  # a worker died (killed, out of memory): do the rest here
        pool.broken = True
        left = sorted(first[done:])
        for i, result in zip(left, _run_here([jobs[i] for i in left], progress, None)):
            results[i] = result
    return results  # type: ignore[return-value]


def _place(path: Path) -> str:
    """The real path of the file at ``path`` (``path`` itself where it cannot be resolved)."""
    try:
        return str(real_path(path))
    except (OSError, RuntimeError):
        return str(path)


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _run_here(jobs: list[_Job], progress: ProgressHook | None, start: Callable[[int], None] | None) -> list[FileResult]:
    if start:
        start(len(jobs))
    results = []
    for i, job in enumerate(jobs):
        results.append(_run_job(job, last=i == len(jobs) - 1))
        if progress:
            progress(job.path)
    return results


# --------------------------------------------------------------------------- interactive


def _fixable(finding: Finding, unsafe: bool) -> bool:
    return finding.fix == "safe" or (unsafe and finding.fix == "unsafe")


def _keys(findings: list[Finding], text: str) -> list[tuple[str, str, str, int]]:
    """Names for findings that survive fixes elsewhere in the file (line numbers do not)."""
    lines = text.splitlines()
    seen: dict[tuple[str, str, str], int] = {}
    keys = []
    for f in findings:
        line = lines[f.line - 1].strip() if 0 < f.line <= len(lines) else ""
        base = (f.rule, f.message, line)
        seen[base] = seen.get(base, 0) + 1
        keys.append((*base, seen[base]))
    return keys


def _answer(value: Answer | bool) -> str:
    if value is True:
        return "yes"
    if value is False:
        return "no"
    return str(value)


def _interactive_file(job: _Job, confirm: ConfirmHook, state: dict[str, bool]) -> FileResult:
    if is_notebook(job.path):
        message = f"{_display(job.path)}: fixes in notebooks are not offered one by one; notebook left unchanged"
        return FileResult(job.path, _run_notebook(replace(job, fix=False, write=False)).findings, error=message)
    source, error = _read(job.path)
    if source is None:
        return FileResult(job.path, error=error)
    rules = rules_for(job.codes, job.runtime)
    display = Path(_display(job.path))
    if state["all"]:
        return _run_job(job)
    text = source.text
    applied: list[Finding] = []
    declined: set[tuple[str, str, str, int]] = set()
    result = FileResult(job.path)
    for _ in range(MAX_INTERACTIVE_STEPS):
        found = process(display, text, rules, fix=False, **_engine_options(job))
        if found.error:
            result.error = found.error
            break
        candidates = [f for f in found.findings if _fixable(f, job.unsafe)]
        pick = next(((f, k) for f, k in zip(candidates, _keys(candidates, text)) if k not in declined), None)
        if pick is None:
            break
        finding, key = pick
        one = fix_one(display, text, rules, finding, unsafe=job.unsafe, flush_every=job.flush_every,
                      line_length=job.line_length)
        if one.error or one.new_text is None or one.new_text == text:
            declined.add(key)  # nothing to show: leave it for the report
            continue
        answer = "yes" if state["all"] else _answer(confirm(finding, unified_diff(job.path, text, one.new_text)))
        if answer == "quit":
            state["quit"] = True
            break
        if answer == "all":
            state["all"] = True
            answer = "yes"
        if answer == "yes":
            text = one.new_text
            applied.extend(one.applied)
        else:
            declined.add(key)
    final = process(display, text, rules, fix=False, **_engine_options(job))
    result.findings = final.findings
    result.applied = applied
    if text != source.text:
        result.diff = unified_diff(job.path, source.text, text)
        if job.write:
            _write(result, source, text, lambda: process(display, source.text, rules, **_engine_options(job)).findings)
    return result


# --------------------------------------------------------------------------- API


def scan(
    paths: Sequence[Path | str],
    *,
    select: Iterable[str] | None = None,
    ignore: Iterable[str] | None = None,
    exclude: Iterable[str] | None = None,
    config: Config | Path | str | None = None,
    isolated: bool = False,
    flush_every: int | None = None,
    jobs: int | None = None,
    progress: ProgressHook | None = None,
    cache: CacheOption = None,
    no_runtime: Iterable[str] | None = None,
) -> RunResult:
    """Find every host-sync site below ``paths``.

    Each finding's ``fix`` says what :func:`apply` does with it: ``"safe"``
    when ``apply`` fixes it, ``"unsafe"`` when only ``apply(unsafe=True)``
    does, so counting them gives what each would fix (files whose fixes
    interact are rewritten in memory to find out).

    ``select``/``ignore``: rule codes or prefixes; ``exclude``: globs of files
    or folders to skip; each replaces the configuration's value when given.
    ``config``: a configuration file (or :class:`fixitem.config.Config`) to
    use instead of the one found from ``paths[0]``; ``isolated``: use none.
    ``jobs``: worker processes (``None`` or 0: one per CPU; 1: in-process).
    ``cache``: keep per-file results between runs (see :mod:`fixitem.cache`):
    ``None`` on unless ``FIXITEM_NO_CACHE`` is set, ``False`` off, or a folder.
    ``no_runtime``: globs of files that must not import ``fixitem.runtime``
    (there deferred logging and on-device sums are report-only); replaces
    the configured ``no-runtime``.
    """
    plan = _plan(
        paths, select=select, ignore=ignore, exclude=exclude, unsafe=False,
        flush_every=flush_every, config=config, isolated=isolated, cache=cache, no_runtime=no_runtime,
    )
    work = plan.jobs(fix=False, unsafe=False, write=False)
    return RunResult(_run_project(work, jobs, progress), plan.rules, plan.config.path)


def apply(
    paths: Sequence[Path | str],
    *,
    write: bool = True,
    unsafe: bool | None = None,
    select: Iterable[str] | None = None,
    ignore: Iterable[str] | None = None,
    exclude: Iterable[str] | None = None,
    config: Config | Path | str | None = None,
    isolated: bool = False,
    flush_every: int | None = None,
    jobs: int | None = None,
    progress: ProgressHook | None = None,
    cache: CacheOption = None,
    confirm: ConfirmHook | None = None,
    no_runtime: Iterable[str] | None = None,
) -> RunResult:
    """Rewrite the files below ``paths`` (or, with ``write=False``, only compute the diff).

    ``unsafe``: also apply unsafe fixes (``None``: as configured, else no).
    ``confirm``: ask before each fix (see :data:`ConfirmHook`); files are then
    processed one at a time, in order, in-process. Other arguments as for
    :func:`scan`. The result's ``runtime`` names the files whose fixes made
    them import ``fixitem.runtime`` (written, or with ``write=False`` to be
    written) and where the project declares its dependencies.
    """
    plan = _plan(
        paths, select=select, ignore=ignore, exclude=exclude, unsafe=unsafe,
        flush_every=flush_every, config=config, isolated=isolated, cache=cache, no_runtime=no_runtime,
    )
    work = plan.jobs(fix=True, unsafe=plan.unsafe, write=write)
    if confirm is None:
        return _with_runtime_need(RunResult(_run_project(work, jobs, progress), plan.rules, plan.config.path), write)
    state = {"all": False, "quit": False}
    results = []
    with shortcuts.thawed_after():  # (a file none of whose fixes is offered runs as a job: see _run_job)
        for job in work:
            with _facts_of(job):
                results.append(_interactive_file(job, confirm, state))
            if progress:
                progress(job.path)
            if state["quit"]:
                break
    return _with_runtime_need(RunResult(results, plan.rules, plan.config.path, stopped=state["quit"]), write)


def _with_runtime_need(result: RunResult, write: bool) -> RunResult:
    """Fill ``result.runtime``: the files apply made import ``fixitem.runtime`` (written ones, when it writes)."""
    files = [r.path for r in result.files
             if r.diff and (r.written or not write) and newly_imports_runtime(r.diff)]
    result.runtime = runtime_need(files)
    return result
