"""``fixitem apply --verify-run CMD`` / ``--verify-factory F``: keep only the fixes that verify.

With a command, "the same behaviour" is what ``fixitem verify --run``
compares; with a model factory, what ``fixitem verify --factory`` compares
(outputs and gradients equal, no more host syncs per call, no more graph
breaks). The steps, for a command:

1. Compute every fix (nothing written), then run the command on the tree as
   it is, twice: the reference run, and a check that the command behaves the
   same on the same code (output that differs between two runs of the
   unchanged program, such as an unseeded loss, cannot judge a fix: then no
   fix is written, and the result says why).
2. Write all the fixes and run the command again. The same exit status, the
   same output (masked as ``fixitem verify --run`` masks it) and no more host
   syncs: done, every fix is verified.
3. Otherwise find the fixes responsible: bisect over the changed files, then
   over the fixes within each file found guilty, each step one run of the
   command with a subset of the fixes written. The guilty fixes are reverted,
   the rest is written and run once more; if that still differs (fixes that
   only misbehave together), the search repeats on what is left, and after
   :data:`MAX_ROUNDS` rounds every fix is reverted.

Every file is restored to its original bytes whatever happens (an error, a
crash of the command, Ctrl-C) unless the run ends with a verified set of
fixes; what is left in the files is exactly that set.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Union

from fixitem import api
from fixitem.codemods.driver.engine import Finding
from fixitem.codemods.driver.discovery import is_notebook
from fixitem.codemods.driver.source import write_atomically
from fixitem.deploy import RuntimeNeed, imports_runtime, runtime_need
from fixitem.verify.run import (
    CommandRun,
    RunComparison,
    compare_runs,
    compile_masks,
    run_command,
)

MAX_ROUNDS = 3

#: A fix, named so that it survives other fixes of the same file: (rule, message, occurrence).
FixKey = tuple[str, str, int]


@dataclass
class RevertedFix:
    path: Path
    finding: Finding
    #: What the program did differently with this fix (the failures, and the first diff of a command's text).
    failures: list[str]
    diff: str = ""


@dataclass
class VerifiedResult:
    command: str
    reference: CommandRun | None = None
    final: RunComparison | ModelOutcome | None = None
    kept: list[tuple[Path, Finding]] = field(default_factory=list)
    reverted: list[RevertedFix] = field(default_factory=list)
    runs: int = 0
    #: Set when the fixes could not be verified at all (every fix reverted).
    gave_up: str = ""
    errors: list[str] = field(default_factory=list)
    #: The changed files and their original bytes, for the model check.
    model_state: dict = field(default_factory=dict, repr=False)
    #: The files that the kept fixes made import ``fixitem.runtime``, and where to declare it.
    runtime: RuntimeNeed | None = None

    @property
    def changed(self) -> bool:
        return bool(self.kept)


def _fixes_of(path: Path, options: Mapping) -> list[tuple[FixKey, Finding]]:
    """Every fix ``apply`` would offer in ``path``, in order, each with its key (nothing written)."""
    offered: list[tuple[FixKey, Finding]] = []
    seen: dict[tuple[str, str], int] = {}

    def decline(finding: Finding, _diff: str) -> bool:
        base = (finding.rule, finding.message)
        seen[base] = seen.get(base, 0) + 1
        offered.append(((*base, seen[base]), finding))
        return False

    api.apply([path], write=False, confirm=decline, **options)
    return offered


def _write_selection(path: Path, original: bytes, keys: set[FixKey], options: Mapping) -> list[Finding]:
    """Restore ``path`` and write the fixes named by ``keys`` into it; return the fixes written."""
    write_atomically(path, original)
    if not keys:
        return []
    seen: dict[tuple[str, str], int] = {}

    def choose(finding: Finding, _diff: str) -> bool:
        base = (finding.rule, finding.message)
        seen[base] = seen.get(base, 0) + 1
        return (*base, seen[base]) in keys

    return api.apply([path], write=True, confirm=choose, **options).applied


def apply_verified(
    paths: Sequence[Path | str],
    command: str,
    *,
    cwd: Path | str = ".",
    env: Mapping[str, str] | None = None,
    timeout: float | None = None,
    masks: Sequence[str] = (),
    default_masks: bool = True,
    log: Callable[[str], None] | None = None,
    **apply_options,
) -> VerifiedResult:
    """Apply the fixes below ``paths`` that keep ``command``'s behaviour; revert the others.

    ``apply_options`` are those of :func:`fixitem.api.apply` (``unsafe``,
    ``select``, ``config``...). ``log`` is called with one line per step.
    ``default_masks=False``: compare the text as printed, masking only ``masks``.
    A command that fails on the unchanged code judges no fix.
    """
    compile_masks(masks)  # a bad pattern is a usage error before anything runs
    cwd = Path(cwd).resolve()
    result = VerifiedResult(command)

    def start(say) -> Callable[[], Outcome] | None:
        say("running the command as it is, twice")
        result.reference = reference = run_command(command, cwd, "before", env, timeout)
        again = run_command(command, cwd, "before", env, timeout)
        result.runs += 2
        if reference.failed:
            result.gave_up = f"the command fails on the unchanged code, so it cannot judge a fix ({reference.failure()})"
            if len(reference.stderr_tail()) > 1:
                result.gave_up += "; its stderr ends with:\n" + "\n".join(f"    {line}" for line in reference.stderr_tail())
            say(result.gave_up)
            return None
        stable = compare_runs(command, reference, again, masks, default_masks=default_masks)
        if not stable.passed:
            result.gave_up = (
                "the command does not behave the same in two runs of the unchanged code ("
                + "; ".join(stable.failures) + "), so it cannot judge a fix: seed it, or give "
                "--verify-mask for the text that varies"
            )
            say(result.gave_up)
            return None

        def check() -> Outcome:
            after = run_command(command, cwd, "after", env, timeout)
            result.runs += 1
            return compare_runs(command, reference, after, masks, default_masks=default_masks)

        return check

    return _keep_verified(paths, result, start, log, apply_options)


def apply_verified_model(
    paths: Sequence[Path | str],
    factory: str,
    *,
    cwd: Path | str = ".",
    log: Callable[[str], None] | None = None,
    **apply_options,
) -> VerifiedResult:
    """Apply the fixes below ``paths`` under which the model keeps its outputs, gradients,
    syncs and graph breaks (``fixitem verify`` with ``factory``); revert the others.

    ``factory`` is a function name of each changed file (``make``), or
    ``FILE.py:FUNCTION`` / ``MODULE:FUNCTION`` of the project in ``cwd`` (its
    before version is then a copy of the tree as it was before any fix).
    """
    from fixitem.verify.loading import parse_factory

    project = parse_factory(factory)
    cwd = Path(cwd).resolve()
    result = VerifiedResult(f"verify --factory {factory}")

    def start(say) -> Callable[[], Outcome]:
        return _model_check(result, project, factory, cwd, say)

    return _keep_verified(paths, result, start, log, apply_options)


@dataclass
class ModelOutcome:
    """What ``fixitem verify`` found for one set of fixes, as the bisection reads it."""

    failures: list[str]
    differences: list[tuple[str, str]] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return not self.failures


Outcome = Union[RunComparison, ModelOutcome]


def _same_model(report) -> list[str]:
    """The ways the after model behaves differently from the before one (not: still has breaks)."""
    failures = []
    if not report.equivalent:
        bad = [r for r in report.inputs if r.status != "equal"]
        where = f" on {bad[0].name}: {'; '.join(bad[0].details[:2])}" if bad else ""
        failures.append(f"outputs or gradients differ{where}")
    b, a = report.before, report.after
    if a.syncs_per_call > b.syncs_per_call:
        failures.append(f"host syncs per call: {a.syncs_per_call} after, more than {b.syncs_per_call} before")
    if a.graph_breaks > b.graph_breaks:
        failures.append(f"graph breaks: {a.graph_breaks} after, more than {b.graph_breaks} before")
    return failures


def _model_check(result: VerifiedResult, project, factory: str, cwd: Path, say) -> Callable[[], Outcome]:
    from fixitem.verify import run_verify
    from fixitem.verify.errors import UsageError

    state = result.model_state
    if project is not None:
        # The before version of a project factory: the tree as it is now, before any fix is written.
        before = Path(tempfile.mkdtemp(prefix="fixitem-verified-before-"))
        shutil.copytree(cwd, before / "tree", symlinks=True, ignore=shutil.ignore_patterns(
            ".git", "__pycache__", ".venv", "venv", "*.egg-info", ".fixitem_cache"))
        state["cleanup"] = before

    def check() -> Outcome:
        failures: list[str] = []
        result.runs += 1
        files = state["files"]
        try:
            if project is not None:
                with _chdir(cwd):
                    report = run_verify(files[0], before=state["cleanup"] / "tree", factory=factory, backend="eager")
                failures = _same_model(report)
            else:
                for path in files:
                    report = run_verify(path, before_source=state["originals"][path].decode("utf-8"),
                                        factory=factory, backend="eager")
                    failures += [f"{path.name}: {f}" for f in _same_model(report)]
        except UsageError as exc:
            failures.append(f"verify could not run: {exc.message}")
        return ModelOutcome(failures)

    say(f"verifying models with {factory}")
    return check


@contextlib.contextmanager
def _chdir(folder: Path):
    saved = Path.cwd()
    os.chdir(folder)
    try:
        yield
    finally:
        os.chdir(saved)


def _keep_verified(paths, result: VerifiedResult, start, log, apply_options) -> VerifiedResult:
    """Write every fix, check, bisect and revert the guilty ones (see the module docstring)."""
    say = log or (lambda _line: None)
    options = {k: v for k, v in apply_options.items() if k not in ("write", "confirm", "jobs")}
    options.setdefault("cache", False)
    plan = api.apply(paths, write=False, **options)
    result.errors = plan.errors
    changed = [r.path for r in plan.changed]
    if not changed:
        return result
    fixes = {path: _fixes_of(path, options) for path in changed}
    originals = {path: path.read_bytes() for path in changed}
    result.model_state.update(files=changed, originals=originals)
    say(f"{sum(len(v) for v in fixes.values())} fixes in {len(changed)} files")
    try:
        check = start(say)
        if check is None:  # the check cannot judge: nothing is written
            return result

        def run_with(selection: Mapping[Path, set[FixKey]]) -> Outcome:
            for path in changed:
                _write_selection(path, originals[path], selection.get(path, set()), options)
            return check()

        universe = {path: {key for key, _ in fixes[path]} for path in changed}
        for round_number in range(1, MAX_ROUNDS + 1):
            if not any(universe.values()):
                break
            comparison = run_with(universe)
            say(f"round {round_number}: {sum(map(len, universe.values()))} fixes written: "
                + ("same behaviour" if comparison.passed else "; ".join(comparison.failures)))
            if comparison.passed:
                result.final = comparison
                break
            guilty = _bisect_files(universe, comparison, run_with, say)
            if not guilty:
                break  # no fix is to blame alone: they misbehave together
            for path, key, blame in guilty:
                universe[path].discard(key)
                finding = next(f for k, f in fixes[path] if k == key)
                diff = blame.differences[0][1] if blame.differences else ""
                result.reverted.append(RevertedFix(path, finding, blame.failures, diff))
                say(f"reverted {finding.rule} at {finding.path}:{finding.line}: {'; '.join(blame.failures)}")
        if result.final is None:
            for path in changed:
                write_atomically(path, originals[path])
            if any(universe.values()):
                result.gave_up = "the program still behaves differently with the remaining fixes"
                say(f"{result.gave_up}: every fix reverted")
        else:
            result.kept = [(path, f) for path in changed for key, f in fixes[path] if key in universe[path]]
            result.runtime = runtime_need([path for path in changed if _newly_imports_runtime(path, originals[path])])
    except BaseException:
        for path in changed:  # never leave a half-applied tree behind
            write_atomically(path, originals[path])
        raise
    finally:
        folder = result.model_state.pop("cleanup", None)
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)
    return result


def _newly_imports_runtime(path: Path, original: bytes) -> bool:
    notebook = is_notebook(path)
    before = original.decode("utf-8", "replace")
    after = path.read_bytes().decode("utf-8", "replace")
    return imports_runtime(after, notebook) and not imports_runtime(before, notebook)


def _bisect_files(universe: dict[Path, set[FixKey]], failed: RunComparison, run_with,
                  say) -> list[tuple[Path, FixKey, RunComparison]]:
    """The fixes that make the command differ: the guilty files first, then the fixes within each."""
    files = [p for p, keys in universe.items() if keys]
    guilty_files = _culprits(files, lambda subset: run_with({p: universe[p] for p in subset}), failed)
    found: list[tuple[Path, FixKey, RunComparison]] = []
    for path, file_comparison in guilty_files:
        keys = sorted(universe[path])
        say(f"{path}: looking for the fix responsible among {len(keys)}")
        for key, comparison in _culprits(keys, lambda subset, p=path: run_with({p: set(subset)}), file_comparison):
            found.append((path, key, comparison))
    return found


def _culprits(items: list, differs_with: Callable[[Iterable], Outcome], known_bad: Outcome | None = None):
    """Items that make the command differ, each with the comparison that showed it (bisection).

    ``differs_with(subset)`` runs the command with only ``subset`` applied.
    Items that misbehave only together with another half are not found here;
    the caller's next round sees them.
    """
    if not items:
        return []
    comparison = known_bad if known_bad is not None else differs_with(items)
    if comparison.passed:
        return []
    if len(items) == 1:
        return [(items[0], comparison)]
    half = len(items) // 2
    return _culprits(items[:half], differs_with) + _culprits(items[half:], differs_with)
