"""``fixitem apply --verify-run CMD``: keep only the fixes under which the command behaves the same.

1. Compute every fix (nothing written), then run the command on the tree as
   it is: the reference run.
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

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from fixitem import api
from fixitem.codemods.engine import Finding
from fixitem.codemods.source import write_atomically
from fixitem.verify.run import CommandRun, RunComparison, compare_runs, compile_masks, run_command

MAX_ROUNDS = 3

#: A fix, named so that it survives other fixes of the same file: (rule, message, occurrence).
FixKey = tuple[str, str, int]


@dataclass
class RevertedFix:
    path: Path
    finding: Finding
    #: What the command did differently with this fix (the comparison's failures and first diff).
    failures: list[str]
    diff: str = ""


@dataclass
class VerifiedResult:
    command: str
    reference: CommandRun | None = None
    final: RunComparison | None = None
    kept: list[tuple[Path, Finding]] = field(default_factory=list)
    reverted: list[RevertedFix] = field(default_factory=list)
    runs: int = 0
    #: Set when the fixes could not be verified at all (every fix reverted).
    gave_up: str = ""
    errors: list[str] = field(default_factory=list)

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
    log: Callable[[str], None] | None = None,
    **apply_options,
) -> VerifiedResult:
    """Apply the fixes below ``paths`` that keep ``command``'s behaviour; revert the others.

    ``apply_options`` are those of :func:`fixitem.api.apply` (``unsafe``,
    ``select``, ``config``...). ``log`` is called with one line per step.
    """
    say = log or (lambda _line: None)
    compile_masks(masks)  # a bad pattern is a usage error before anything runs
    options = {k: v for k, v in apply_options.items() if k not in ("write", "confirm", "jobs")}
    options.setdefault("cache", False)
    cwd = Path(cwd).resolve()
    result = VerifiedResult(command)
    plan = api.apply(paths, write=False, **options)
    result.errors = plan.errors
    changed = [r.path for r in plan.changed]
    if not changed:
        return result
    fixes = {path: _fixes_of(path, options) for path in changed}
    originals = {path: path.read_bytes() for path in changed}
    say(f"{sum(len(v) for v in fixes.values())} fixes in {len(changed)} files; running the command as it is")
    result.reference = reference = run_command(command, cwd, "before", env, timeout)
    result.runs += 1
    try:
        def run_with(selection: Mapping[Path, set[FixKey]]) -> RunComparison:
            for path in changed:
                _write_selection(path, originals[path], selection.get(path, set()), options)
            after = run_command(command, cwd, "after", env, timeout)
            result.runs += 1
            return compare_runs(command, reference, after, masks)

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
                result.gave_up = "the command still behaves differently with the remaining fixes"
                say(f"{result.gave_up}: every fix reverted")
        else:
            result.kept = [(path, f) for path in changed for key, f in fixes[path] if key in universe[path]]
    except BaseException:
        for path in changed:  # never leave a half-applied tree behind
            write_atomically(path, originals[path])
        raise
    return result


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


def _culprits(items: list, differs_with: Callable[[Iterable], RunComparison], known_bad: RunComparison | None = None):
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
