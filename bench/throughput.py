"""How fast fixitem scans and rewrites a large code base.

    python bench/throughput.py [--tree PATH | --wheel PATH] [--copies 1,2,4] [--jobs N]

By default the pinned reference wheel ``transformers==5.24.0`` is used: it is
taken from ``~/.cache/fixitem-bench`` (or ``~/.cache/fixitem-tests``), or else
fetched once with ``pip download --no-deps`` into ``~/.cache/fixitem-bench``,
and unpacked into a temporary folder. ``--wheel PATH`` uses another wheel,
``--tree PATH`` a local folder (nothing is downloaded; the folder is copied,
never modified).

Each command runs as a subprocess and is timed by wall clock (with
fixitem's default ``--jobs`` unless given): ``fixitem scan`` with an empty
result cache (cold), the same again (warm: unchanged files are read from the
cache), ``fixitem apply --diff`` after it (warm: only files with something to
fix are analysed) and with ``--no-cache`` (cold), and ``ruff check`` when
``ruff`` is on PATH. Peak RSS
is the ``ru_maxrss`` of the command's process tree as ``wait4`` reports it
(the same figure as ``resource.getrusage(RUSAGE_CHILDREN)``, taken per
command: the largest single process, not the sum over worker processes).
``--copies 1,2,4`` also times ``fixitem scan --no-cache`` on 1x, 2x and 4x
copies of the tree, to show how the time grows with the size of the code base.
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path

REFERENCE = ("transformers", "5.24.0")
CACHE = Path.home() / ".cache" / "fixitem-bench"
TEST_CACHE = Path.home() / ".cache" / "fixitem-tests"
FINDING = re.compile(r"^.+:\d+:\d+: FX\d+ ", re.M)


def reference_wheel() -> Path:
    name, version = REFERENCE
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
    rc: int | None = None
    wall_s: float | None = None
    maxrss_mib: float | None = None
    output_bytes: int = 0
    findings: int | None = None
    changed_files: int | None = None
    timed_out: bool = False


def run_timed(label: str, command: list[str], cwd: Path, timeout: float | None) -> Run:
    """Run ``command`` with stdout to a file; wall clock and peak RSS (``wait4``)."""
    run = Run(label, command)
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        proc = subprocess.Popen(command, cwd=cwd, stdout=out, stderr=err)
        deadline = None if timeout is None else start + timeout
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if deadline is not None and time.perf_counter() > deadline:
                proc.kill()
                pid, status, usage = os.wait4(proc.pid, 0)
                run.timed_out = True
                break
            time.sleep(0.02)
        run.wall_s = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)  # already reaped: keep Popen from waiting
        run.rc = proc.returncode
        run.maxrss_mib = usage.ru_maxrss / 1024  # KiB on Linux
        out.seek(0)
        text = out.read().decode("utf-8", "replace")
        if run.rc is None or run.rc >= 2 or run.timed_out:
            err.seek(0)
            tail = err.read().decode("utf-8", "replace")[-2000:]
            print(f"{label}: exit status {run.rc}{' (timed out)' if run.timed_out else ''}\n{tail}",
                  file=sys.stderr)
    run.output_bytes = len(text.encode())
    if label.startswith("fixitem scan"):
        run.findings = len(FINDING.findall(text))
    elif label.startswith("fixitem apply"):
        run.changed_files = text.count("\n+++ ") + text.startswith("+++ ")
    return run


def fixitem_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "fixitem", *args]


def make_copies(tree: Path, n: int, dest: Path) -> Path:
    """``dest`` holding ``n`` copies of ``tree`` (as copy0, copy1, ...)."""
    dest.mkdir(parents=True, exist_ok=True)
    for k in range(n):
        target = dest / f"copy{k}"
        if not target.exists():
            shutil.copytree(tree, target, symlinks=True)
    return dest


def fmt(x, spec=".2f") -> str:
    return "-" if x is None else format(x, spec)


def print_table(header: list[str], rows: list[list[str]]) -> None:
    widths = [max(len(h), *(len(r[k]) for r in rows)) if rows else len(h) for k, h in enumerate(header)]
    line = lambda cells: "  ".join(c.ljust(w) if k == 0 else c.rjust(w) for k, (c, w) in enumerate(zip(cells, widths)))
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--tree", type=Path, help="a local folder to process (no download)")
    source.add_argument("--wheel", type=Path, help="a wheel to unpack and process")
    parser.add_argument("--copies", default="1", help="comma-separated copy counts for the growth table (default 1)")
    parser.add_argument("--jobs", type=int, default=None, help="passed as --jobs to fixitem (default: fixitem's)")
    parser.add_argument("--timeout", type=float, default=None, help="seconds per command (killed after)")
    parser.add_argument("--no-apply", action="store_true", help="skip fixitem apply --diff")
    args = parser.parse_args(argv)
    try:
        copies = sorted({int(c) for c in args.copies.split(",") if c.strip()})
    except ValueError:
        parser.error(f"--copies: expected comma-separated integers, got {args.copies!r}")
    if not copies or min(copies) < 1:
        parser.error("--copies: counts must be >= 1")

    jobs = [] if args.jobs is None else ["--jobs", str(args.jobs)]
    with tempfile.TemporaryDirectory(prefix="fixitem-throughput-") as tmp:
        tmp = Path(tmp)
        if args.tree is not None:
            if not args.tree.is_dir():
                parser.error(f"--tree: not a folder: {args.tree}")
            what = str(args.tree)
            tree = tmp / "tree"
            shutil.copytree(args.tree, tree, symlinks=True)
        else:
            wheel = args.wheel if args.wheel is not None else reference_wheel()
            if not wheel.is_file():
                parser.error(f"--wheel: not a file: {wheel}")
            what = wheel.name
            tree = tmp / "tree"
            with zipfile.ZipFile(wheel) as zf:
                zf.extractall(tree)
        files = python_files(tree)
        lines = count_lines(files)
        print(f"tree: {what}: {len(files)} .py files, {lines} lines", file=sys.stderr, flush=True)

        runs: list[Run] = []
        # A first run fills an empty cache (cold); the same command again reads it (warm).
        os.environ["FIXITEM_CACHE_DIR"] = str(tmp / "cache")
        os.environ.pop("FIXITEM_NO_CACHE", None)
        commands = [
            ("fixitem scan", fixitem_command("scan", "--quiet", "--isolated", *jobs, "tree")),
            ("fixitem scan (warm)", fixitem_command("scan", "--quiet", "--isolated", *jobs, "tree")),
        ]
        if not args.no_apply:
            commands.append(("fixitem apply --diff (warm)",
                             fixitem_command("apply", "--diff", "--quiet", "--isolated", *jobs, "tree")))
            commands.append(("fixitem apply --diff (cold)",
                             fixitem_command("apply", "--diff", "--quiet", "--isolated", "--no-cache", *jobs, "tree")))
        ruff = shutil.which("ruff")
        if ruff:
            commands.append(("ruff check", [ruff, "check", "--no-cache", "--exit-zero", "--quiet", "tree"]))
        for label, command in commands:
            print(f"running {label} ...", file=sys.stderr, flush=True)
            runs.append(run_timed(label, command, tmp, args.timeout))

        growth: list[tuple[int, int, int, Run]] = []
        for n in copies:
            dest = make_copies(tree, n, tmp / f"x{n}")
            print(f"running fixitem scan on {n} copies ...", file=sys.stderr, flush=True)
            run = run_timed(f"fixitem scan x{n}",
                            fixitem_command("scan", "--quiet", "--isolated", "--no-cache", *jobs, dest.name),
                            tmp, args.timeout)
            growth.append((n, len(files) * n, lines * n, run))

    load = ""
    try:
        load = f", load average {os.getloadavg()[0]:.2f}"
    except OSError:
        pass
    print(f"fixitem throughput: {what}: {len(files)} files, {lines} lines; "
          f"{os.cpu_count()} CPUs{load}; python {platform.python_version()}, fixitem {fixitem_version()}, "
          f"jobs {args.jobs if args.jobs is not None else 'default'}")
    print()
    scan = next((r for r in runs if r.label == "fixitem scan"), None)
    rows = []
    for r in runs:
        ratio = r.wall_s / scan.wall_s if scan and scan.wall_s else None
        rows.append([
            r.label, str(len(files)), str(lines),
            "-" if r.findings is None else str(r.findings),
            "-" if r.changed_files is None else str(r.changed_files),
            fmt(r.wall_s) + (" (timeout)" if r.timed_out else ""),
            fmt(len(files) / r.wall_s, ".1f") if r.wall_s else "-",
            fmt(lines / r.wall_s / 1000, ".1f") if r.wall_s else "-",
            fmt(r.maxrss_mib, ".0f"), str(r.rc), fmt(ratio),
        ])
    if not ruff:
        rows.append(["ruff check", "-", "-", "-", "-", "(ruff not on PATH)", "-", "-", "-", "-", "-"])
    print_table(["command", "files", "lines", "findings", "changed", "wall s", "files/s", "klines/s",
                 "peak RSS MiB", "rc", "x scan"], rows)
    print()
    print("Growth (fixitem scan on copies of the tree)")
    base = growth[0][3] if growth and growth[0][3] else None
    grows = []
    for n, nfiles, nlines, r in growth:
        if r is None:
            continue
        grows.append([f"{n}x", str(nfiles), str(nlines), fmt(r.wall_s) + (" (timeout)" if r.timed_out else ""),
                      fmt(r.wall_s / base.wall_s) if base and base.wall_s else "-",
                      fmt(r.wall_s / base.wall_s / (n / growth[0][0])) if base and base.wall_s else "-",
                      fmt(r.maxrss_mib, ".0f"), "-" if r.findings is None else str(r.findings)])
    print_table(["copies", "files", "lines", "wall s", "x 1st", "x per size", "peak RSS MiB", "findings"], grows)
    print()
    print("wall s: wall clock of the subprocess; peak RSS: largest process of the command (wait4 ru_maxrss); "
          "x scan: wall time relative to fixitem scan in this run; x per size: growth divided by size growth "
          "(1.00 = linear)")
    failed = [r for r in runs + [g[3] for g in growth if g[3]] if r.timed_out or (r.rc is not None and r.rc >= 2)]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
