"""Rendering results for people (text) and machines (JSON)."""

from __future__ import annotations

import json
from collections import Counter

from fixitem.api import RunResult
from fixitem.codemods.engine import Finding

COSTS = {"graph-break": "graph break", "host-sync": "host sync"}


def finding_line(finding: Finding) -> str:
    costs = ", ".join(COSTS[c] for c in finding.costs)
    return f"{finding.path}:{finding.line}:{finding.col}: {finding.rule} {finding.message} ({costs}) [fix: {finding.fix}]"


def finding_text(finding: Finding, verbose_notes: bool = True) -> str:
    text = finding_line(finding)
    if finding.note and verbose_notes:
        text += f"\n    note: {finding.note}"
    return text


def scan_summary(result: RunResult) -> str:
    findings = result.findings
    files = len({f.path for f in findings})
    if not findings:
        return f"No host syncs found in {len(result.files)} file{'s' if len(result.files) != 1 else ''}."
    fixes = Counter(f.fix for f in findings)
    parts = [f"Found {len(findings)} host-sync site{'s' if len(findings) != 1 else ''} in {files} file{'s' if files != 1 else ''}"]
    breaks = sum("graph-break" in f.costs for f in findings)
    if breaks:
        parts.append(f"{breaks} also graph break{'s' if breaks != 1 else ''}")
    line = ", ".join(parts) + "."
    if fixes["safe"]:
        line += f"\n{fixes['safe']} fixable with `fixitem apply`."
    if fixes["unsafe"]:
        line += f"\n{fixes['unsafe']} more with `fixitem apply --unsafe` (review: each says why it is unsafe)."
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
        },
        indent=2,
    )
