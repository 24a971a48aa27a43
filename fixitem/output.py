"""Rendering results for people (text) and machines (JSON)."""

from __future__ import annotations

import json
from collections import Counter

from fixitem.api import RunResult
from fixitem.codemods.driver.engine import Finding

COSTS = {"graph-break": "graph break", "host-sync": "host sync"}


def location(finding: Finding) -> str:
    """``path:line:col``; in a notebook ``path:cell N:line:col`` (the line within the cell)."""
    cell = f"cell {finding.cell}:" if finding.cell is not None else ""
    return f"{finding.path}:{cell}{finding.line}:{finding.col}"


def finding_line(finding: Finding) -> str:
    costs = f" ({', '.join(COSTS[c] for c in finding.costs)})" if finding.costs else ""
    return f"{location(finding)}: {finding.rule} {finding.message}{costs} [fix: {finding.fix}]"


def finding_text(finding: Finding, verbose_notes: bool = True) -> str:
    text = finding_line(finding)
    if finding.note and verbose_notes:
        text += f"\n    note: {finding.note}"
    return text


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def scan_summary(result: RunResult) -> str:
    findings = result.findings
    if not findings:  # a file that could not be analysed is an error (listed apart), not a clean file
        analysed = sum(r.error is None for r in result.files)
        return f"No host syncs found in {_plural(analysed, 'file')}."
    files = len({f.path for f in findings})
    syncs = sum("host-sync" in f.costs for f in findings)
    breaks = sum("graph-break" in f.costs for f in findings)
    line = f"Found {_plural(len(findings), 'finding')} in {_plural(files, 'file')}: "
    line += f"{_plural(syncs, 'host sync')}, {_plural(breaks, 'graph break')}."
    fixes = Counter(f.fix for f in findings)
    if fixes["safe"]:
        line += f"\n{fixes['safe']} fixable with `fixitem apply`."
    if fixes["unsafe"]:
        line += (
            f"\n{fixes['safe'] + fixes['unsafe']} fixable with `fixitem apply --unsafe` "
            f"({fixes['unsafe']} unsafe: review, each says why)."
        )
    return line


def apply_summary(result: RunResult, written: bool) -> str:
    applied = result.applied
    changed = len(result.changed)
    verb = "Fixed" if written else "Would fix"
    files = "file" if changed == 1 else "files"
    line = f"{verb} {len(applied)} site{'s' if len(applied) != 1 else ''} in {changed} {files}"
    remaining = result.findings
    if remaining:
        unsafe = sum(f.fix == "unsafe" for f in remaining)
        line += f"; {len(remaining)} left to review"
        if unsafe:
            line += f" ({unsafe} fixable with --unsafe)"
    return line + "."


def findings_json(result: RunResult) -> str:
    return json.dumps([f.to_dict() for f in result.findings], indent=2)


def apply_json(result: RunResult) -> str:
    return json.dumps(
        {
            "applied": [f.to_dict() for f in result.applied],
            "remaining": [f.to_dict() for f in result.findings],
            "changed_files": [str(r.path) for r in result.changed],
            "errors": result.errors,
            # The files that now import fixitem.runtime and where to declare it; null for none.
            "runtime": result.runtime.to_dict() if result.runtime is not None else None,
        },
        indent=2,
    )
