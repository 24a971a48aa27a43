"""How fast fixitem scans and rewrites large code bases, beside ruff.

    python bench/throughput.py [--tree PATH | --wheel PATH] [--copies 1,2,4] [--jobs N]
                               [--repeat N] [--fixitem-python PATH]

By default two pinned reference wheels are measured in one run,
``transformers==5.24.0`` and ``timm==1.0.31``: each is taken from
``~/.cache/fixitem-bench`` (or ``~/.cache/fixitem-tests``), or else fetched
once with ``pip download --no-deps`` into ``~/.cache/fixitem-bench``, and
unpacked into a temporary folder. ``--wheel PATH`` measures another wheel
instead, ``--tree PATH`` a local folder (nothing is downloaded; the folder is
copied, never modified).

For each tree, the commands run as subprocesses in turn, ``--repeat`` rounds of them (3
by default: on a shared machine one run is often slower by a tenth than the next), each
timed by wall clock from its start until it is reaped; the run of median time is shown,
and a ratio (to ruff's time, or to a bare interpreter's start) is the median over the
rounds of the ratio within a round, where both ran a few seconds apart
(with fixitem's default ``--jobs`` unless given): ``ruff check`` when ``ruff``
is on PATH; ``fixitem scan`` with an empty result cache (cold) and the same
again (warm: unchanged files are read from the cache); ``fixitem apply --diff``
with ``--no-cache`` (cold) and after the scan (warm: only files with something
to fix are analysed); ``fixitem scan`` of one file, cold, with the
interpreter's start included (the file of median size among those that mention
torch, and the largest), as a pre-commit hook runs it, beside the start of a
bare interpreter (``python -c pass``); and, for scale, the parsers alone:
Python's ``ast.parse`` (and libcst's parser, where libcst is installed) over
the files that fixitem parses (those its prefilter lets through), in as many
worker processes as fixitem uses, with nothing else done (no fixitem run can
be faster than the parser it uses). "x ruff" divides by
ruff's time on the same tree in the same run. Peak RSS is the ``ru_maxrss``
of the command's process tree as ``wait4`` reports it (the largest single
process, not the sum over worker processes). ``--copies 1,2,4`` also times
``fixitem scan --no-cache`` on 1x, 2x and 4x copies of the first tree, to show
how the time grows with the size of the code base. ``--one-file-lines`` (by
default 5000,10000,20000,40000; empty to skip) times ``fixitem scan --no-cache``
of one generated file of each size (``import torch``, then ``def f{i}(x, y):``
with ``if y.sum().item() > 0:`` repeated) and prints the time per line and the
peak RSS of each, beside a scan of one such function (the interpreter's start),
and ``fixitem apply --diff --no-cache`` of the same file with its parameters
annotated ``torch.Tensor`` (so that every function is rewritten): the time per
line should not grow with the file.

``--fixitem-python PATH`` runs ``PATH -m fixitem`` for fixitem's commands (another
version installed in another environment; the rest, ruff and the parsers, as before),
so that two versions are compared on the same machine and trees.

A fixitem command that crashes (a traceback, or an exit status of 2 or more)
or times out makes the script exit with status 1.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path

REFERENCES = (("transformers", "5.24.0"), ("timm", "1.0.31"))
CACHE = Path.home() / ".cache" / "fixitem-bench"
TEST_CACHE = Path.home() / ".cache" / "fixitem-tests"
FINDING = re.compile(r"^.+:\d+:\d+: FX\d+ ", re.M)
# Goals: a cold scan within 10x ruff's check (8x beyond that), a cold apply within 12x, and a
# one-file scan within 10x the start of a bare interpreter (``python -c pass``).
GOALS = {"fixitem scan (cold)": 10.0, "fixitem apply --diff (cold)": 12.0}
ONE_FILE_GOAL_X = 10.0


def reference_wheel(name: str, version: str) -> Path:
    filename = f"{name}-{version}-py3-none-any.whl"
    for folder in (CACHE, TEST_CACHE):
        if (folder / filename).is_file():
            return folder / filename
    CACHE.mkdir(parents=True, exist_ok=True)
    print(f"downloading {name}=={version} into {CACHE} ...", file=sys.stderr, flush=True)
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
         f"{name}=={version}", "-d", str(CACHE)],
        check=True,
    )
    found = sorted(CACHE.glob(f"{name}-{version}-*.whl"))
    if not found:
        raise SystemExit(f"pip download did not produce a wheel for {name}=={version} in {CACHE}")
    return found[0]


def python_files(tree: Path) -> list[Path]:
    return sorted(p for p in tree.rglob("*.py") if p.is_file())


def count_lines(files: list[Path]) -> int:
    total = 0
    for p in files:
        with open(p, "rb") as fh:
            total += sum(1 for _ in fh)
    return total


@dataclass
class Run:
    label: str
    command: list[str]
    tree: str = ""
    rc: int | None = None
    wall_s: float | None = None
    maxrss_mib: float | None = None
    cpu_s: float | None = None  # user + system time of the process and the children it waited for
    output_bytes: int = 0
    findings: int | None = None
    changed_files: int | None = None
    timed_out: bool = False
    crashed: bool = False
    x_ruff: float | None = None  # the median over rounds of the time divided by ruff's in the same round
    x_bare: float | None = None  # the same, divided by a bare interpreter's start (one-file scans)

    @property
    def failed(self) -> bool:
        return self.timed_out or self.crashed or (self.rc is not None and self.rc >= 2)


def median_run(tries: list[Run]) -> Run:
    """The try of median wall time (a failed try, if any: a crash is never hidden)."""
    failed = [r for r in tries if r.failed]
    if failed:
        return failed[0]
    ranked = sorted(tries, key=lambda r: r.wall_s or 0.0)
    return ranked[(len(ranked) - 1) // 2]


def timed_median(repeat: int, label: str, command: list[str], cwd: Path, timeout: float | None,
                 env: dict[str, str] | None = None) -> Run:
    return median_run([run_timed(label, command, cwd, timeout, env) for _ in range(repeat)])


def _kill(proc: subprocess.Popen, run: Run) -> None:
    run.timed_out = True
    proc.kill()


def run_timed(label: str, command: list[str], cwd: Path, timeout: float | None,
              env: dict[str, str] | None = None) -> Run:
    """Run ``command`` with stdout to a file; wall clock and peak RSS (``wait4``)."""
    run = Run(label, command)
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        proc = subprocess.Popen(command, cwd=cwd, stdout=out, stderr=err, env=env)
        # Waited for at once (not polled: a poll's interval would be part of the time, a
        # sizeable part of a bare interpreter's start), killed by a timer at the deadline.
        killer = None
        if timeout is not None:
            killer = threading.Timer(timeout, _kill, (proc, run))
            killer.start()
        try:
            _, status, usage = os.wait4(proc.pid, 0)
        finally:
            if killer is not None:
                killer.cancel()
        run.wall_s = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)  # already reaped: keep Popen from waiting
        run.rc = proc.returncode
        run.maxrss_mib = usage.ru_maxrss / 1024  # KiB on Linux
        run.cpu_s = usage.ru_utime + usage.ru_stime
        out.seek(0)
        text = out.read().decode("utf-8", "replace")
        err.seek(0)
        errors = err.read().decode("utf-8", "replace")
        run.crashed = "Traceback (most recent call last)" in errors
        if run.rc is None or run.failed:
            print(f"{label}: exit status {run.rc}{' (timed out)' if run.timed_out else ''}\n{errors[-2000:]}",
                  file=sys.stderr)
    run.output_bytes = len(text.encode())
    if label.startswith("fixitem scan"):
        run.findings = len(FINDING.findall(text))
    elif label.startswith("fixitem apply"):
        run.changed_files = text.count("\n+++ ") + text.startswith("+++ ")
    return run


# The parser fixitem uses, and libcst's for scale where it is installed (fixitem does not need it).
PARSERS = {"ast.parse": "ast", **({"libcst parse": "libcst"} if importlib.util.find_spec("libcst") else {})}


def _parse_one(job: tuple[str, str]) -> int:
    """Parse one file with ``ast`` or ``libcst`` if fixitem would parse it; 1 if parsed."""
    parser, path = job
    from fixitem.codemods.driver.engine import (
        worth_parsing,  # already loaded: workers are forked from the parent
    )

    text = Path(path).read_text("utf-8", "replace")
    if not worth_parsing(text):
        return 0
    try:
        if parser == "ast":
            import ast

            ast.parse(text)
        else:
            import libcst

            libcst.parse_module(text)
    except Exception:  # noqa: BLE001 - a file that does not parse: fixitem reports it as an error
        pass
    return 1


def parse_only(parser: str, folder: Path, workers: int) -> int:
    """Parse every file of ``folder`` that fixitem parses, in ``workers`` processes; prints the count."""
    from concurrent.futures import ProcessPoolExecutor

    import fixitem.codemods.driver.engine  # noqa: F401 - fixitem's prefilter, imported once before the workers fork
    if parser == "libcst":
        import libcst  # noqa: F401

    jobs = [(parser, str(p)) for p in python_files(folder)]
    if workers <= 1:
        parsed = sum(map(_parse_one, jobs))
    else:
        with ProcessPoolExecutor(max_workers=workers) as pool:
            parsed = sum(pool.map(_parse_one, jobs, chunksize=8))
    print(f"parsed {parsed} of {len(jobs)} files with {parser}")
    return 0


def parser_command(parser: str, folder: str, jobs: list[str]) -> list[str]:
    workers = jobs[1] if jobs else str(os.cpu_count() or 1)
    return [sys.executable, str(Path(__file__).resolve()), "_parse", parser, folder, workers]


FIXITEM_PYTHON = [sys.executable]  # the interpreter whose fixitem is measured (``--fixitem-python``)


def fixitem_command(*args: str) -> list[str]:
    return [FIXITEM_PYTHON[0], "-m", "fixitem", *args]


def warm_up(tmp: Path) -> None:
    """One small scan before anything is timed: Python writes fixitem's bytecode cache (as
    after any first run on a user's machine), and the stubs table is cached."""
    sample = tmp / "warm-up.py"
    sample.write_text("import torch\n\n\ndef f(x):\n    return x.sum().item()\n")
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    subprocess.run(fixitem_command("scan", "--quiet", "--no-cache", "--isolated", str(sample)), env=env,
                   capture_output=True, check=False)
    sample.unlink()


def make_copies(tree: Path, n: int, dest: Path) -> Path:
    """``dest`` holding ``n`` copies of ``tree`` (as copy0, copy1, ...)."""
    dest.mkdir(parents=True, exist_ok=True)
    for k in range(n):
        target = dest / f"copy{k}"
        if not target.exists():
            shutil.copytree(tree, target, symlinks=True)
    return dest


ONE_FILE_FUNCTION = "def f{i}(x, y):\n    if y.sum().item() > 0:\n        y = y * 2\n    return x + y\n"


def generated_file(lines: int, dest: Path, annotated: bool = False) -> Path:
    """``dest``: ``import torch`` and a 4-line function repeated ``lines // 4`` times;
    ``annotated``: its parameters annotated ``torch.Tensor``, so that ``apply`` rewrites
    every function."""
    functions = max(1, lines // 4)
    function = ONE_FILE_FUNCTION
    if annotated:
        function = function.replace("(x, y)", "(x: torch.Tensor, y: torch.Tensor)")
    dest.write_text("import torch\n" + "".join(function.format(i=i) for i in range(functions)))
    return dest


def fmt(x, spec=".2f") -> str:
    return "-" if x is None else format(x, spec)


def print_table(header: list[str], rows: list[list[str]], left: int = 1) -> None:
    """Columns aligned, the first ``left`` of them to the left."""
    widths = [max(len(h), *(len(r[k]) for r in rows)) if rows else len(h) for k, h in enumerate(header)]
    line = lambda cells: "  ".join(c.ljust(w) if k < left else c.rjust(w) for k, (c, w) in enumerate(zip(cells, widths)))
    print(line(header))
    print(line(["-" * w for w in widths]))
    for r in rows:
        print(line(r))


def fixitem_version() -> str:
    try:
        import fixitem

        return fixitem.__version__
    except Exception:  # pragma: no cover
        return "?"


def one_file_samples(tree: Path) -> list[tuple[str, Path]]:
    """The files a one-file scan is timed on: of those that mention torch, the one of
    median size and the largest."""
    sized = []
    for p in python_files(tree):
        text = p.read_text("utf-8", "replace")
        if "torch" in text:
            sized.append((text.count("\n"), str(p)))
    if not sized:
        return []
    sized.sort()
    median = sized[len(sized) // 2]
    picks = [("median", median)]
    if sized[-1] != median:
        picks.append(("largest", sized[-1]))
    return [(f"{kind}, {lines} lines", Path(path)) for kind, (lines, path) in picks]


def find_ruff() -> str | None:
    """The ``ruff`` of this environment (the dev extras install it beside this Python,
    which need not be on PATH when the venv is not activated), else the one on PATH."""
    try:
        from ruff.__main__ import find_ruff_bin
        return str(find_ruff_bin())
    except (ImportError, FileNotFoundError):
        return shutil.which("ruff")


def measure(name: str, tree: Path, tmp: Path, jobs: list[str], timeout: float | None,
            apply: bool, ruff: str | None, repeat: int = 1) -> list[Run]:
    """Every command of the table on ``tree`` (a folder below ``tmp``), each ``repeat``
    times (the run of median time stands for it; libcst's parser, for scale only, once)."""
    cache = tmp / f"cache-{name}"
    env = dict(os.environ, FIXITEM_CACHE_DIR=str(cache))
    env.pop("FIXITEM_NO_CACHE", None)
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # Python's usual bytecode cache, as users have it
    rel = tree.relative_to(tmp)
    commands: list[tuple[str, list[str]]] = []
    if ruff:
        commands.append(("ruff check", [ruff, "check", "--no-cache", "--exit-zero", "--quiet", str(rel)]))
    # A first scan fills an empty cache (cold); the same command again reads it (warm).
    commands += [
        ("fixitem scan (cold)", fixitem_command("scan", "--quiet", "--isolated", *jobs, str(rel))),
        ("fixitem scan (warm)", fixitem_command("scan", "--quiet", "--isolated", *jobs, str(rel))),
    ]
    if apply:
        commands.append(("fixitem apply --diff (warm)",
                         fixitem_command("apply", "--diff", "--quiet", "--isolated", *jobs, str(rel))))
        commands.append(("fixitem apply --diff (cold)",
                         fixitem_command("apply", "--diff", "--quiet", "--isolated", "--no-cache", *jobs, str(rel))))
    for label, parser in PARSERS.items():
        commands.append((f"{label} alone", parser_command(parser, str(rel), jobs)))
    commands.append(("python -c pass", [sys.executable, "-c", "pass"]))  # a bare interpreter's start
    for kind, path in one_file_samples(tree):
        commands.append((f"fixitem scan 1 file ({kind})",
                         fixitem_command("scan", "--quiet", "--isolated", "--no-cache", str(path.relative_to(tmp)))))
    # The commands run in turn, ``repeat`` rounds of them: each try of a command is then timed
    # beside a try of ruff made a few seconds before, on a machine in the same state, and its
    # ratio to ruff is the median of those of its rounds.
    tries: dict[str, list[Run]] = {label: [] for label, _ in commands}
    for round_ in range(repeat):
        for label, command in commands:
            if label == "libcst parse alone" and round_:
                continue  # for scale only: once
            print(f"{name}: running {label} ({round_ + 1}/{repeat}) ...", file=sys.stderr, flush=True)
            if label == "fixitem scan (cold)":
                shutil.rmtree(cache, ignore_errors=True)  # each try starts from an empty cache
            tries[label].append(run_timed(label, command, tmp, timeout, env))
    runs = []
    for label, _ in commands:
        run = median_run(tries[label])
        run.tree = name
        if ruff and label != "ruff check":
            ratios = [r.wall_s / base.wall_s for r, base in zip(tries[label], tries["ruff check"])
                      if r.wall_s and base.wall_s]
            run.x_ruff = statistics.median(ratios) if ratios else None
        if label.startswith("fixitem scan 1 file"):
            ratios = [r.wall_s / bare.wall_s for r, bare in zip(tries[label], tries["python -c pass"])
                      if r.wall_s and bare.wall_s]
            run.x_bare = statistics.median(ratios) if ratios else None
        runs.append(run)
    return runs


def unpack(wheel: Path, dest: Path) -> Path:
    with zipfile.ZipFile(wheel) as zf:
        zf.extractall(dest)
    return dest


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["_parse"]:  # a parser-floor measurement, run as its own subprocess
        _, parser_name, folder, workers = argv
        return parse_only(parser_name, Path(folder), int(workers))
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--tree", type=Path, help="a local folder to process (no download)")
    source.add_argument("--wheel", type=Path, help="a wheel to unpack and process")
    parser.add_argument("--copies", default="", help="comma-separated copy counts for the growth table, e.g. 1,2,4")
    parser.add_argument("--one-file-lines", default="5000,10000,20000,40000",
                        help="comma-separated line counts of the generated files of the one-file growth table "
                             "(empty: none)")
    parser.add_argument("--jobs", type=int, default=None, help="passed as --jobs to fixitem (default: fixitem's)")
    parser.add_argument("--timeout", type=float, default=None, help="seconds per command (killed after)")
    parser.add_argument("--no-apply", action="store_true", help="skip fixitem apply --diff")
    parser.add_argument("--fixitem-python", type=Path, default=None,
                        help="the Python of another environment whose fixitem is measured instead")
    parser.add_argument("--repeat", type=int, default=3,
                        help="runs of each timed command; the one of median time is shown (default 3)")
    args = parser.parse_args(argv)
    try:
        copies = sorted({int(c) for c in args.copies.split(",") if c.strip()})
    except ValueError:
        parser.error(f"--copies: expected comma-separated integers, got {args.copies!r}")
    if copies and min(copies) < 1:
        parser.error("--copies: counts must be >= 1")
    try:
        one_file = sorted({int(c) for c in args.one_file_lines.split(",") if c.strip()})
    except ValueError:
        parser.error(f"--one-file-lines: expected comma-separated integers, got {args.one_file_lines!r}")
    if one_file and min(one_file) < 5:
        parser.error("--one-file-lines: counts must be >= 5")

    if args.repeat < 1:
        parser.error("--repeat: at least 1")
    if args.fixitem_python is not None:
        FIXITEM_PYTHON[0] = str(args.fixitem_python)
    jobs = [] if args.jobs is None else ["--jobs", str(args.jobs)]
    ruff = find_ruff()
    runs: list[Run] = []
    sizes: dict[str, tuple[int, int]] = {}
    growth: list[tuple[int, int, int, Run]] = []
    one_growth: list[tuple[int, Run]] = []  # (lines, run); lines 5 is the start-up
    one_apply: dict[int, Run] = {}  # lines -> ``apply --diff`` of the annotated file (every function rewritten)
    with tempfile.TemporaryDirectory(prefix="fixitem-throughput-") as tmp_name:
        tmp = Path(tmp_name)
        trees: list[tuple[str, Path]] = []
        if args.tree is not None:
            if not args.tree.is_dir():
                parser.error(f"--tree: not a folder: {args.tree}")
            trees.append((args.tree.name or str(args.tree), tmp / "tree"))
            shutil.copytree(args.tree, tmp / "tree", symlinks=True)
        elif args.wheel is not None:
            if not args.wheel.is_file():
                parser.error(f"--wheel: not a file: {args.wheel}")
            trees.append((args.wheel.name, unpack(args.wheel, tmp / "tree")))
        else:
            for name, version in REFERENCES:
                trees.append((f"{name} {version}", unpack(reference_wheel(name, version), tmp / name)))
        warm_up(tmp)
        for name, tree in trees:
            files = python_files(tree)
            sizes[name] = (len(files), count_lines(files))
            print(f"tree: {name}: {len(files)} .py files, {sizes[name][1]} lines", file=sys.stderr, flush=True)
            runs += measure(name, tree, tmp, jobs, args.timeout, not args.no_apply, ruff, args.repeat)
        first_name, first_tree = trees[0]
        for n in copies:
            dest = make_copies(first_tree, n, tmp / f"x{n}")
            print(f"running fixitem scan on {n} copies ...", file=sys.stderr, flush=True)
            run = timed_median(args.repeat, f"fixitem scan x{n}",
                            fixitem_command("scan", "--quiet", "--isolated", "--no-cache", *jobs, dest.name),
                            tmp, args.timeout)
            nfiles, nlines = sizes[first_name]
            growth.append((n, nfiles * n, nlines * n, run))
        for n in [5, *one_file] if one_file else []:
            path = generated_file(n, tmp / f"one_file_{n}.py")
            n = len(path.read_text().splitlines())
            print(f"running fixitem scan on one generated file of {n} lines ...", file=sys.stderr, flush=True)
            run = timed_median(args.repeat, f"fixitem scan 1 generated file, {n} lines",
                            fixitem_command("scan", "--quiet", "--isolated", "--no-cache", path.name),
                            tmp, args.timeout)
            one_growth.append((n, run))
            if n > 5:
                path = generated_file(n, tmp / f"one_file_{n}_annotated.py", annotated=True)
                print(f"running fixitem apply --diff on one generated file of {n} lines, every function "
                      "rewritten ...", file=sys.stderr, flush=True)
                one_apply[n] = timed_median(args.repeat, f"fixitem apply --diff 1 generated file, {n} lines",
                                         fixitem_command("apply", "--diff", "--quiet", "--isolated", "--no-cache",
                                                         path.name), tmp, args.timeout)

    load = ""
    try:
        load = f", load average {os.getloadavg()[0]:.2f}"
    except OSError:
        pass
    print(f"fixitem throughput: {os.cpu_count()} CPUs{load}; python {platform.python_version()}, "
          f"fixitem {fixitem_version() if args.fixitem_python is None else 'of ' + str(args.fixitem_python)}, ruff {ruff_version(ruff)}, jobs {args.jobs if args.jobs is not None else 'default'}; "
          f"each time the median of {args.repeat} run{'s' if args.repeat > 1 else ''}")
    print()
    rows = []
    for r in runs:
        nfiles, nlines = sizes[r.tree]
        if r.label.startswith("fixitem scan 1 file"):
            nfiles, nlines = 1, int(re.search(r"(\d+) lines", r.label).group(1))
        elif r.label == "python -c pass":
            nfiles, nlines = 0, 0
        ruff_run = next((x for x in runs if x.tree == r.tree and x.label == "ruff check"), None)
        ratio = (r.x_ruff if r.x_ruff is not None else r.wall_s / ruff_run.wall_s) \
            if ruff_run and ruff_run.wall_s and r.wall_s and nfiles > 1 else None
        rows.append([
            r.tree, r.label, str(nfiles), str(nlines),
            "-" if r.findings is None else str(r.findings),
            "-" if r.changed_files is None else str(r.changed_files),
            fmt(r.wall_s) + (" (timeout)" if r.timed_out else ""),
            fmt(nlines / r.wall_s / 1000, ".1f") if r.wall_s and nlines else "-",
            fmt(r.maxrss_mib, ".0f"), str(r.rc) + (" crashed" if r.crashed else ""), fmt(ratio, ".1f"),
        ])
    if not ruff:
        rows.append(["-", "ruff check", "-", "-", "-", "-", "(ruff not on PATH)", "-", "-", "-", "-"])
    print_table(["tree", "command", "files", "lines", "findings", "changed", "wall s", "klines/s",
                 "peak RSS MiB", "rc", "x ruff"], rows, left=2)
    print()
    for name in sizes:
        ruff_run = next((x for x in runs if x.tree == name and x.label == "ruff check"), None)
        for label, goal in GOALS.items():
            r = next((x for x in runs if x.tree == name and x.label == label), None)
            if r and r.wall_s and ruff_run and ruff_run.wall_s:
                ratio = r.x_ruff if r.x_ruff is not None else r.wall_s / ruff_run.wall_s
                print(f"{name}: {label} = {ratio:.1f}x ruff (goal {goal:g}x: {'met' if ratio <= goal else 'not met'})")
        floors = [(label, next((x for x in runs if x.tree == name and x.label == f"{label} alone"), None))
                  for label in PARSERS]
        if ruff_run and ruff_run.wall_s and all(r and r.wall_s for _, r in floors):
            print(f"{name}: the parsers alone (the files fixitem parses, nothing else done): "
                  + ", ".join(f"{label} = {r.x_ruff or r.wall_s / ruff_run.wall_s:.1f}x ruff" for label, r in floors))
        bare = next((x for x in runs if x.tree == name and x.label == "python -c pass"), None)
        for r in runs:
            if r.tree == name and r.label.startswith("fixitem scan 1 file") and r.wall_s and bare and bare.wall_s:
                ratio = r.x_bare if r.x_bare is not None else r.wall_s / bare.wall_s
                met = "met" if ratio <= ONE_FILE_GOAL_X else "not met"
                print(f"{name}: {r.label} = {r.wall_s:.2f} s = {ratio:.1f}x a bare interpreter's start "
                      f"({bare.wall_s:.3f} s; goal {ONE_FILE_GOAL_X:g}x: {met})")
    if growth:
        print()
        print(f"Growth (fixitem scan on copies of {first_name})")
        base = growth[0][3]
        grows = []
        for n, nfiles, nlines, r in growth:
            grows.append([f"{n}x", str(nfiles), str(nlines), fmt(r.wall_s) + (" (timeout)" if r.timed_out else ""),
                          fmt(r.wall_s / base.wall_s) if base.wall_s else "-",
                          fmt(r.wall_s / base.wall_s / (n / growth[0][0])) if base.wall_s else "-",
                          fmt(r.maxrss_mib, ".0f"), "-" if r.findings is None else str(r.findings)])
        print_table(["copies", "files", "lines", "wall s", "x 1st", "x per size", "peak RSS MiB", "findings"], grows)
    if one_growth:
        print()
        print("One-file growth (fixitem scan --no-cache of one generated file: `import torch`, then "
              "`def f{i}(x, y): if y.sum().item() > 0: y = y * 2; return x + y` repeated)")
        (_, start), sized = one_growth[0], one_growth[1:]
        base_lines, base = sized[0]
        rows = []

        def per_k(lines: int, r: Run, less: float = 0.0) -> float | None:
            return (r.wall_s - less) / lines * 1000 if r.wall_s is not None else None

        def cpu_per_k(lines: int, r: Run) -> float | None:
            if r.cpu_s is None or start.cpu_s is None:
                return None
            return (r.cpu_s - start.cpu_s) / lines * 1000

        for lines, r in one_growth:
            label = "start-up" if r is start else "generated"
            less = start.wall_s if start.wall_s is not None and r is not start else None
            rows.append([
                label, str(lines), fmt(r.wall_s) + (" (timeout)" if r.timed_out else ""),
                "-" if r is start else fmt(per_k(lines, r)),
                "-" if r is start or less is None else fmt(per_k(lines, r, less), ".3f"),
                "-" if r is start or not (r.wall_s and base.wall_s) else
                fmt(per_k(lines, r) / per_k(base_lines, base)),
                "-" if r is start or less is None or not per_k(base_lines, base, less) else
                fmt(per_k(lines, r, less) / per_k(base_lines, base, less)),
                fmt(r.cpu_s), "-" if r is start else fmt(cpu_per_k(lines, r), ".3f"),
                "-" if r is start or not (cpu_per_k(lines, r) and cpu_per_k(base_lines, base)) else
                fmt(cpu_per_k(lines, r) / cpu_per_k(base_lines, base)),  # type: ignore[operator]
                fmt(r.maxrss_mib, ".0f"), "-" if r.findings is None else str(r.findings),
                *_apply_cells(one_apply, lines, base_lines),
            ])
        print_table(["file", "lines", "wall s", "s per 1k lines", "less start-up", "x per line",
                     "x less start-up", "CPU s", "CPU s per 1k less start-up", "x CPU per line",
                     "peak RSS MiB", "findings", "apply --diff s (all rewritten)", "x apply per line"], rows)
    print()
    print("wall s: wall clock of the subprocess, interpreter start included; peak RSS: largest process of the "
          "command (wait4 ru_maxrss); x ruff: wall time divided by ruff check's on the same tree in the same round "
          "of this run (the median over the rounds); "
          "x per size: growth divided by size growth (1.00 = linear); x per line: time per line divided by the "
          "smallest generated file's (1.00 = linear; less start-up: without the start-up row's time); CPU s: "
          "user + system time (wait4), which other work on the machine changes less than the wall clock")
    failed = [r for r in runs + [g[3] for g in growth] + [g[1] for g in one_growth] + list(one_apply.values())
              if r.failed]
    return 1 if failed else 0


def _apply_cells(one_apply: dict[int, Run], lines: int, base_lines: int) -> list[str]:
    """The one-file growth table's ``apply --diff`` columns for the file of ``lines`` lines:
    its wall clock, and its time per line over the smallest generated file's."""
    run, base = one_apply.get(lines), one_apply.get(base_lines)
    if run is None or run.wall_s is None:
        return ["-", "-"]
    ratio = "-"
    if base is not None and base.wall_s:
        ratio = fmt((run.wall_s / lines) / (base.wall_s / base_lines))
    return [fmt(run.wall_s) + (" (timeout)" if run.timed_out else ""), ratio]


def ruff_version(ruff: str | None) -> str:
    if not ruff:
        return "-"
    try:
        return subprocess.run([ruff, "--version"], capture_output=True, text=True, timeout=30).stdout.split()[-1]
    except (OSError, subprocess.SubprocessError, IndexError):
        return "?"


if __name__ == "__main__":
    sys.exit(main())
