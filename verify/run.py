"""``fixitem verify --run CMD``: run a command on the before and after trees and compare.

The command (a training or evaluation script with tiny settings, typically)
runs twice in a shell: in the before tree (``--before-ref REV``: the git
repository as committed at REV, materialised in a temporary folder, so that
every module, import and data path resolves to the before code; or
``--before DIR``) and in the after tree (the working tree, ``--cwd``). Each
run is measured from the inside by :mod:`fixitem.verify.child_probe` (host
syncs per source line, graph breaks) without changing the command, and from
the outside (exit status, stdout, stderr, wall time).

The runs agree when the exit status is the same, stdout and stderr are the
same text after masking what legitimately differs between two runs
(:data:`fixitem.verify.masks.DEFAULT_MASKS`, unless ``default_masks=False``
/ ``--no-default-masks``, plus ``--mask``), the after run makes no more host
syncs than the before run, and the command succeeded: a run that exits with a
non-zero status (a command not found, a crash) fails the check, whatever the
other run did. Without a before version, :func:`profile_command`
runs the command once and lists the lines that read tensor values, most
frequent first.
"""

from __future__ import annotations

import collections
import difflib
import json
import linecache
import os
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .errors import UsageError
from .git import materialise_ref, repo_root
from .masks import DEFAULT_MASKS

PROBE_ENV = "FIXITEM_PROBE_OUT"
DIFF_LINES = 40
#: The last lines of a failed run's stderr that reports show.
STDERR_TAIL = 15


@dataclass
class SyncLine:
    """Host syncs seen at one source line of one run."""

    file: str
    line: int
    kind: str
    count: int
    on_device: int = 0
    #: ``"FX201 safe"`` when ``fixitem scan`` has a fix for this line (profile only).
    fixable: str = ""
    #: The source line, read while the run's tree still exists.
    code: str = ""

    def to_json(self) -> dict:
        return {"file": self.file, "line": self.line, "kind": self.kind, "count": self.count,
                "on_device": self.on_device, "code": self.code, "fixable": self.fixable}


@dataclass
class CommandRun:
    """One run of the command: what it printed, how it ended, what the probe saw."""

    label: str
    cwd: str
    returncode: int | None
    stdout: str
    stderr: str
    wall_s: float
    timed_out: bool = False
    probed: bool = False  #: whether any Python process of the command imported torch
    syncs: list[SyncLine] = field(default_factory=list)
    breaks: list = field(default_factory=list)  #: GraphBreak, when the probe saw Dynamo

    @property
    def sync_count(self) -> int:
        return sum(s.count for s in self.syncs)

    @property
    def failed(self) -> bool:
        """The command did not succeed: a non-zero exit status, a signal, or a timeout."""
        return self.timed_out or self.returncode != 0

    def failure(self) -> str:
        """How the run failed, in one line ending with the last line of its stderr ("" when it did not)."""
        if not self.failed:
            return ""
        if self.timed_out:
            how = "did not finish (timeout)"
        elif self.returncode is not None and self.returncode < 0:
            how = f"was killed by signal {-self.returncode}"
        else:
            how = f"failed (exit status {self.returncode})"
        tail = self.stderr_tail(1)
        return f"{self.who} {how}" + (f": {tail[0]}" if tail else ", with nothing on stderr")

    @property
    def who(self) -> str:
        """``the before run``, ``the after run``; ``the command`` for a profile's one run."""
        return "the command" if self.label == "run" else f"the {self.label} run"

    def stderr_tail(self, lines: int = STDERR_TAIL) -> list[str]:
        """The last ``lines`` non-empty lines of stderr."""
        return [line for line in self.stderr.splitlines() if line.strip()][-lines:]

    def syncs_by_kind(self) -> dict[str, int]:
        out: collections.Counter[str] = collections.Counter()
        for s in self.syncs:
            out[s.kind] += s.count
        return dict(out.most_common())

    def to_json(self) -> dict:
        return {
            "label": self.label, "cwd": self.cwd, "returncode": self.returncode, "timed_out": self.timed_out,
            "wall_s": round(self.wall_s, 3), "stdout_lines": len(self.stdout.splitlines()),
            "stderr_lines": len(self.stderr.splitlines()), "probed": self.probed,
            "failed": self.failed, "stderr_tail": self.stderr_tail() if self.failed else [],
            "host_syncs": self.sync_count, "host_syncs_by_kind": self.syncs_by_kind(),
            "sync_lines": [s.to_json() for s in self.syncs],
            "graph_breaks": len(self.breaks), "breaks": [b.to_json() for b in self.breaks],
        }


@dataclass
class RunComparison:
    """Before and after runs of one command, and the verdict."""

    command: str
    before: CommandRun
    after: CommandRun
    masks: list[str]
    failures: list[str] = field(default_factory=list)
    #: ``(stream, unified diff of the first differing lines)``
    differences: list[tuple[str, str]] = field(default_factory=list)
    #: ``--config``: the Dynamo flags the after run ran under, and the before run's break sites gone after.
    config: list[str] = field(default_factory=list)
    proved: list = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return not self.failures

    def to_dict(self) -> dict:
        return {
            "command": self.command, "passed": self.passed, "failures": self.failures,
            "differences": [{"stream": s, "diff": d} for s, d in self.differences],
            "masks": self.masks, "before": self.before.to_json(), "after": self.after.to_json(),
            "config": list(self.config), "proved": [b.to_json() for b in self.proved], "notes": list(self.notes),
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)


# --------------------------------------------------------------------------
# Running one command


def parse_env(pairs: Iterable[str]) -> dict[str, str]:
    """``["KEY=VALUE", ...]`` as a dict; a pair without ``=`` is a usage error."""
    env: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise UsageError(f"--env takes KEY=VALUE; got {pair!r}")
        env[key] = value
    return env


def _probe_folder(tmp: Path) -> Path:
    folder = tmp / "probe"
    folder.mkdir()
    shutil.copyfile(Path(__file__).with_name("child_probe.py"), folder / "sitecustomize.py")
    return folder


def run_command(command: str, cwd: Path, label: str, env: Mapping[str, str] | None = None,
                timeout: float | None = None) -> CommandRun:
    """Run ``command`` in a shell in ``cwd`` with the probe loaded by every Python process it starts."""
    if not cwd.is_dir():
        raise UsageError(f"folder not found: {cwd}")
    with tempfile.TemporaryDirectory(prefix="fixitem-run-") as tmp_name:
        tmp = Path(tmp_name)
        probe = _probe_folder(tmp)
        out_prefix = tmp / "probe-out" / "result"
        out_prefix.parent.mkdir()
        child_env = dict(os.environ)
        child_env.update(env or {})
        child_env["PYTHONPATH"] = os.pathsep.join(p for p in (str(probe), child_env.get("PYTHONPATH", "")) if p)
        child_env[PROBE_ENV] = str(out_prefix)
        # The files change between runs, within a second and sometimes to the same size (a
        # fix, reverted, another fix): a ``.pyc`` written by one run would pass Python's
        # check (source mtime in seconds, and size) in the next and run the old code.
        child_env["PYTHONDONTWRITEBYTECODE"] = "1"
        start = time.perf_counter()
        timed_out = False
        try:
            proc = subprocess.run(command, shell=True, cwd=cwd, env=child_env, capture_output=True,
                                  timeout=timeout, stdin=subprocess.DEVNULL)
            returncode, out, err = proc.returncode, proc.stdout, proc.stderr
        except subprocess.TimeoutExpired as exc:
            timed_out = True
            returncode, out, err = None, exc.stdout or b"", exc.stderr or b""
        wall = time.perf_counter() - start
        run = CommandRun(label, str(cwd), returncode, out.decode("utf-8", "replace"),
                         err.decode("utf-8", "replace"), wall, timed_out)
        _read_probe(run, sorted(out_prefix.parent.glob("result.*")))
    return run


def _read_probe(run: CommandRun, files: Sequence[Path]) -> None:
    from .breaks import GraphBreak, _merge, _parse, summarise_reason

    lines: dict[tuple[str, int, str], SyncLine] = {}
    found = []
    for path in files:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        run.probed = run.probed or bool(data.get("torch"))
        for file, line, kind, count, on_device in data.get("syncs", []):
            key = (file, line, kind)
            if key in lines:
                lines[key].count += count
                lines[key].on_device += on_device
            else:
                linecache.checkcache(file)  # the same path may hold another version than in the last run
                lines[key] = SyncLine(file, line, kind, count, on_device,
                                      code=linecache.getline(file, line).strip() if line else "")
        messages = data.get("break_messages", [])
        found.extend(_parse(m) for m in messages)
        for reason, n in data.get("break_counter", {}).items():
            first = reason.strip().splitlines()[0] if reason.strip() else reason
            logged = sum(1 for m in messages if first in m)
            found.extend(GraphBreak(reason=summarise_reason(reason)) for _ in range(max(0, n - logged)))
    run.syncs = sorted(lines.values(), key=lambda s: (-s.count, s.file, s.line))
    run.breaks = _merge(found)


# --------------------------------------------------------------------------
# Comparing


Masks = list[tuple[str, re.Pattern[str], str]]


def compile_masks(extra: Iterable[str], default_masks: bool = True) -> Masks:
    """``(name, pattern, replacement)``: the default masks (unless ``default_masks`` is false), then
    ``extra`` (``--mask``), each match of those written ``<maskN>``."""
    masks = [(m.name, re.compile(m.pattern), m.substitute) for m in DEFAULT_MASKS] if default_masks else []
    for i, pattern in enumerate(extra, 1):
        try:
            masks.append((f"mask{i}", re.compile(pattern), f"<mask{i}>"))
        except re.error as exc:
            raise UsageError(f"--mask {pattern!r} is not a regular expression: {exc}") from None
    return masks


def masked(text: str, masks: Masks, roots: Sequence[str] = ()) -> str:
    """``text`` with the run's own folders written ``<root>`` and every mask match replaced (``<name>``)."""
    for root in sorted(roots, key=len, reverse=True):
        if root:
            text = text.replace(root, "<root>")
    for _name, pattern, replacement in masks:
        text = pattern.sub(replacement, text)
    return text


def first_difference(before: str, after: str, name: str) -> str:
    """A unified diff of ``before`` and ``after`` limited to the first differing lines."""
    diff = list(difflib.unified_diff(before.splitlines(), after.splitlines(), f"before/{name}",
                                     f"after/{name}", n=2, lineterm=""))
    if len(diff) > DIFF_LINES:
        diff = [*diff[:DIFF_LINES], f"... ({len(diff) - DIFF_LINES} more diff lines)"]
    return "\n".join(diff)


def compare_runs(command: str, before: CommandRun, after: CommandRun, extra_masks: Sequence[str] = (),
                 before_root: str = "", after_root: str = "", default_masks: bool = True,
                 config: Sequence[str] = ()) -> RunComparison:
    """``config``: the after run ran under these Dynamo flags (``--config``): Dynamo's own messages
    on stderr (its graph-break warnings, which the flags silence) are not the program's output, and
    reads made inside compiled graphs are told apart (:func:`_with_config`)."""
    masks = compile_masks(extra_masks, default_masks)
    result = RunComparison(command, before, after, [p.pattern for _, p, _ in masks])
    for run in (before, after):
        if run.timed_out:
            result.failures.append(f"timeout: the {run.label} run did not finish")
        elif run.failed:  # a command that fails proves nothing, even when it fails the same way twice
            result.failures.append(run.failure())
    if before.returncode != after.returncode and not (before.timed_out or after.timed_out):
        result.failures.append(f"exit status: {before.returncode} before, {after.returncode} after")
    roots_before = [before_root, before.cwd]
    roots_after = [after_root, after.cwd]
    for stream in ("stdout", "stderr"):
        b = masked(getattr(before, stream), masks, roots_before)
        a = masked(getattr(after, stream), masks, roots_after)
        if config and stream == "stderr":
            b, a = without_dynamo_messages(b), without_dynamo_messages(a)
        if a != b:
            diff = first_difference(b, a, stream)
            line = _first_differing_line(b, a)
            result.failures.append(f"{stream} differs (first at line {line})")
            result.differences.append((stream, diff))
    if after.sync_count > before.sync_count:
        result.failures.append(f"host syncs: {after.sync_count} after, more than {before.sync_count} before")
    return result


_DYNAMO_LOG = re.compile(r"^[IWE]\d{4} .*torch/_(dynamo|inductor)/")


def without_dynamo_messages(text: str) -> str:
    """``text`` without what Dynamo itself writes to stderr: its log records (``W1202 12:00:00 ...
    torch/_dynamo/...``, graph-break warnings among them) and the ``UserWarning``s it raises from
    ``torch/_dynamo`` with their source lines. They are not the program's output, and
    ``capture_scalar_outputs`` silences some of them."""
    kept: list[str] = []
    skipping = False
    for line in text.splitlines(keepends=True):
        if _DYNAMO_LOG.match(line):
            skipping = False
            continue
        if "torch/_dynamo/" in line and "Warning" in line:
            skipping = True
            continue
        if skipping:
            if line.startswith(("  ", "If ", "\t")) or not line.strip():
                continue
            skipping = False
        kept.append(line)
    return "".join(kept)


def _first_differing_line(a: str, b: str) -> int:
    la, lb = a.splitlines(), b.splitlines()
    for i, (x, y) in enumerate(zip(la, lb), 1):
        if x != y:
            return i
    return min(len(la), len(lb)) + 1


def verify_command_run(command: str, cwd: Path | str = ".", before_ref: str | None = None,
                       before_dir: Path | str | None = None, env: Mapping[str, str] | None = None,
                       timeout: float | None = None, masks: Sequence[str] = (),
                       default_masks: bool = True, config: Sequence[str] = ()) -> RunComparison:
    """Run ``command`` on the before and after trees and compare (see the module docstring).

    ``config``: Dynamo flags (``capture_scalar_outputs``, ...) turned on for the after run through
    the environment (:mod:`.dynamo_config`). With ``config`` and no before tree, the before run is
    the same tree without them: what the configuration alone changes."""
    from .dynamo_config import environment

    flags = environment(config) if config else {}
    if config and before_ref is None and before_dir is None:
        cwd = Path(cwd).resolve()
        if not cwd.is_dir():
            raise UsageError(f"--cwd folder not found: {cwd}")
        compile_masks(masks)
        before = run_command(command, cwd, "before", env, timeout)
        after = run_command(command, cwd, "after", {**(env or {}), **flags}, timeout)
        return _with_config(compare_runs(command, before, after, masks, str(cwd), str(cwd), default_masks, config),
                            config)
    if (before_ref is None) == (before_dir is None):
        raise UsageError("give exactly one of --before DIR or --before-ref REV with --run")
    cwd = Path(cwd).resolve()
    if not cwd.is_dir():
        raise UsageError(f"--cwd folder not found: {cwd}")
    compile_masks(masks)  # bad patterns are usage errors before anything runs
    with tempfile.TemporaryDirectory(prefix="fixitem-before-") as tmp:
        if before_ref is not None:
            before_cwd = materialise_ref(cwd, before_ref, Path(tmp))
            before_root = str(Path(tmp) / "tree")
            after_root = str(repo_root(cwd))
        else:
            before_cwd = Path(before_dir).resolve()  # type: ignore[arg-type]
            if not before_cwd.is_dir():
                raise UsageError(f"--before folder not found: {before_cwd}")
            before_root, after_root = str(before_cwd), str(cwd)
        before = run_command(command, before_cwd, "before", env, timeout)
        after = run_command(command, cwd, "after", {**(env or {}), **flags}, timeout)
        result = compare_runs(command, before, after, masks, before_root, after_root, default_masks, config)
        return _with_config(result, config, before_root, after_root) if config else result


def _with_config(result: RunComparison, config: Sequence[str], before_root: str = "",
                 after_root: str = "") -> RunComparison:
    """Say which break sites of the before run are gone from the after run, which ran under
    ``config``. A site is matched by its file (relative to its run's tree) and reason: a fix that
    sets the configuration moves the lines below it. Host syncs are compared as always: the
    configuration removes graph breaks, not syncs."""
    result.config = list(config)
    # Reads the compiled graph makes (``<eval_with_key>``) are counted; in the before run the same reads
    # sat at graph breaks, where the probe steps aside while Dynamo traces and so counts none of
    # them. More syncs after than before is then no regression as long as the reads outside
    # compiled graphs are no more than before: said, not hidden.
    in_graphs = sum(s.count for s in result.after.syncs if "<eval_with_key>" in s.file)
    extra = [f for f in result.failures if f.startswith("host syncs:")]
    if extra and result.after.sync_count - in_graphs <= result.before.sync_count:
        result.failures = [f for f in result.failures if f not in extra]
        result.notes.append(
            f"host syncs: {result.after.sync_count} after ({in_graphs} made inside compiled graphs), "
            f"{result.before.sync_count} before; the before run's reads at its graph breaks are not counted "
            f"(the probe cannot see them while Dynamo traces), so the configuration removed no sync: it removes "
            f"graph breaks, not host syncs")

    def key(gb, root: str) -> tuple:
        file = gb.file or ""
        if root and file.startswith(root):
            file = file[len(root):].lstrip("/")
        return (file, gb.reason)

    left = collections.Counter(key(gb, after_root or result.after.cwd) for gb in result.after.breaks)
    for gb in result.before.breaks:
        if (gb.file or "").endswith(os.path.join("probe", "sitecustomize.py")):
            continue  # the probe's own frame, where Dynamo stopped at a read it wraps
        k = key(gb, before_root or result.before.cwd)
        if left[k]:
            left[k] -= 1
        else:
            result.proved.append(gb)
    return result


# --------------------------------------------------------------------------
# Profile: one run, the lines that read tensor values


@dataclass
class RunProfile:
    run: CommandRun
    #: Sync lines in the user's files (under the folder the command ran in).
    user_lines: list[SyncLine]

    @property
    def failures(self) -> list[str]:
        """The command failed: nothing else the profile says can be trusted."""
        return [self.run.failure()] if self.run.failed else []

    @property
    def passed(self) -> bool:
        return not self.failures

    def to_dict(self) -> dict:
        return {"passed": self.passed, "failures": self.failures,
                "command_run": self.run.to_json(), "user_lines": [s.to_json() for s in self.user_lines],
                "fixable_syncs": sum(s.count for s in self.user_lines if s.fixable)}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)


def profile_command(command: str, cwd: Path | str = ".", env: Mapping[str, str] | None = None,
                    timeout: float | None = None) -> RunProfile:
    """Run ``command`` once; list its host-sync lines in the user's files, marking what ``scan`` can fix."""
    cwd = Path(cwd).resolve()
    run = run_command(command, cwd, "run", env, timeout)
    user = [s for s in run.syncs if _inside(s.file, cwd)]
    if user:
        from fixitem.api import scan

        files = sorted({s.file for s in user})
        fixes: dict[tuple[str, int], str] = {}
        for finding in scan(files, isolated=True, jobs=1, cache=False).findings:
            if finding.fix != "none":
                key = (str(Path(finding.path).resolve()), finding.line)
                fixes.setdefault(key, f"{finding.rule} {finding.fix}")
        for s in user:
            s.fixable = fixes.get((str(Path(s.file).resolve()), s.line), "")
    return RunProfile(run, user)


def _inside(file: str, folder: Path) -> bool:
    try:
        Path(file).resolve().relative_to(folder)
    except ValueError:
        return False
    return True
