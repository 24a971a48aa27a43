"""What another version of fixitem finds and rewrites on the same code, beside this one.

    python bench/compare_versions.py --before /path/to/other/venv/bin/fixitem TREE [TREE ...]
        [--unsafe] [--show N] [--json out.json] [--keep DIR]

Each TREE (a folder, or a wheel that is unpacked into a temporary folder) is
scanned by both versions (``scan --format json --no-cache --isolated``) and
rewritten in memory (``apply --diff --format json``, and with ``--unsafe``).
The script prints, per tree, how many findings each version reports, the
findings only one of them reports or that they tag differently (fix safety,
message, note), and the files whose rewrite differs, with the first ``--show``
of each kind in full. ``--keep DIR`` keeps the other version's results there
and reuses them on the next run (the other version does not change). It is how a change to the analysis lists what it changed
on real code: "the same" is the same findings, tags and diffs, byte for byte.

Exit status: 0 when both versions give the same results, 1 otherwise.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent


def this_version() -> list[str]:
    found = shutil.which("fixitem", path=str(Path(sys.executable).parent))
    return [found] if found else [sys.executable, "-m", "fixitem"]


def run(command: list[str], cwd: Path) -> tuple[str, str]:
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True, check=False)
    if done.returncode >= 2 and not done.stdout.strip():
        raise SystemExit(f"{' '.join(command)} failed ({done.returncode}):\n{done.stderr[-2000:]}")
    return done.stdout, done.stderr


KEEP: Path | None = None


def kept(fixitem: list[str], tree: Path, what: str, compute):
    """``compute()``, kept under ``KEEP`` for the other version (``--keep``)."""
    if KEEP is None or fixitem == this_version():
        return compute()
    name = hashlib.sha1(repr((fixitem, str(tree), what)).encode()).hexdigest()[:16] + ".json"
    path = KEEP / name
    if path.is_file():
        return json.loads(path.read_text())
    found = compute()
    KEEP.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(found))
    return found


def findings(fixitem: list[str], tree: Path) -> list[dict]:
    return kept(fixitem, tree, "scan", lambda: _findings(fixitem, tree))


def _findings(fixitem: list[str], tree: Path) -> list[dict]:
    out, _ = run([*fixitem, "scan", "--format", "json", "--no-cache", "--isolated", "."], tree)
    return json.loads(out or "[]")


def diffs(fixitem: list[str], tree: Path, unsafe: bool) -> dict[str, str]:
    """Path -> the unified diff ``apply --diff`` prints for it."""
    return kept(fixitem, tree, f"diff unsafe={unsafe}", lambda: _diffs(fixitem, tree, unsafe))


def _diffs(fixitem: list[str], tree: Path, unsafe: bool) -> dict[str, str]:
    command = [*fixitem, "apply", "--diff", "--no-cache", "--isolated", *(["--unsafe"] if unsafe else []), "."]
    out, _ = run(command, tree)
    found: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in out.splitlines(keepends=True):
        if line.startswith("--- a/"):
            current = found.setdefault(line[6:].strip(), [])
        if current is not None:
            current.append(line)
    return {path: "".join(lines) for path, lines in found.items()}


def key(finding: dict) -> tuple:
    return (finding["path"], finding["line"], finding["col"], finding["rule"])


def compare(before: list[str], after: list[str], tree: Path, unsafe: bool, show: int) -> dict:
    old, new = findings(before, tree), findings(after, tree)
    old_by, new_by = {key(f): f for f in old}, {key(f): f for f in new}
    gone = [old_by[k] for k in old_by if k not in new_by]
    added = [new_by[k] for k in new_by if k not in old_by]
    retagged = [(old_by[k], new_by[k]) for k in old_by if k in new_by and any(
        old_by[k][field] != new_by[k][field] for field in ("fix", "message", "note", "costs"))]
    old_diffs, new_diffs = diffs(before, tree, unsafe), diffs(after, tree, unsafe)
    rewrites = sorted(p for p in set(old_diffs) | set(new_diffs) if old_diffs.get(p) != new_diffs.get(p))
    report = {
        "tree": str(tree), "findings_before": len(old), "findings_after": len(new),
        "fixes_before": Counter(f["fix"] for f in old), "fixes_after": Counter(f["fix"] for f in new),
        "gone": gone, "added": added, "retagged": retagged, "rewrites_differ": rewrites,
        "files_rewritten_before": len(old_diffs), "files_rewritten_after": len(new_diffs),
    }
    print(f"== {tree} ({'--unsafe' if unsafe else 'safe fixes'})")
    print(f"findings: {len(old)} -> {len(new)}; fix tags {dict(report['fixes_before'])} -> {dict(report['fixes_after'])}")
    print(f"only before: {len(gone)}, only after: {len(added)}, tagged differently: {len(retagged)}; "
          f"files rewritten {len(old_diffs)} -> {len(new_diffs)}, rewrites that differ: {len(rewrites)}")
    for title, items in (("only before", gone), ("only after", added)):
        for f in items[:show]:
            print(f"  {title}: {f['path']}:{f['line']}:{f['col']} {f['rule']} [{f['fix']}] {f['message']}")
    for a, b in retagged[:show]:
        print(f"  retagged: {a['path']}:{a['line']}:{a['col']} {a['rule']}")
        for field in ("fix", "message", "note", "costs"):
            if a[field] != b[field]:
                print(f"    {field}: {a[field]!r}\n      -> {b[field]!r}")
    for path in rewrites[:show]:
        print(f"  rewrite differs: {path}")
        print("    before:\n" + "".join(f"      {line}" for line in old_diffs.get(path, "(none)\n").splitlines(True)))
        print("    after:\n" + "".join(f"      {line}" for line in new_diffs.get(path, "(none)\n").splitlines(True)))
    return report


def unpacked(path: Path, scratch: Path) -> Path:
    if path.is_dir():
        return path
    target = scratch / path.stem
    if target.is_dir():
        return target
    with zipfile.ZipFile(path) as wheel:
        wheel.extractall(target)
    return target


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trees", nargs="+", type=Path)
    parser.add_argument("--before", required=True, help="the fixitem executable of the other version")
    parser.add_argument("--unsafe", action="store_true")
    parser.add_argument("--show", type=int, default=5)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--keep", type=Path, help="keep (and reuse) the other version's results in this folder")
    parser.add_argument("--only-before", action="store_true", help="with --keep: only compute the other version's results")
    args = parser.parse_args()
    global KEEP
    KEEP = args.keep
    reports = []
    scratch = Path(tempfile.mkdtemp(prefix="fixitem-compare-"))
    try:
        for tree in args.trees:
            # A wheel is unpacked under a name of its own, the same on every run (kept results name it).
            where = unpacked(tree.resolve(), scratch) if args.keep is None else unpacked(tree.resolve(), args.keep / "trees")
            if args.only_before:
                findings([args.before], where)
                diffs([args.before], where, args.unsafe)
                continue
            reports.append(compare([args.before], this_version(), where, args.unsafe, args.show))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    if args.json:
        args.json.write_text(json.dumps(reports, indent=1, default=str))
    same = all(not (r["gone"] or r["added"] or r["retagged"] or r["rewrites_differ"]) for r in reports)
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
