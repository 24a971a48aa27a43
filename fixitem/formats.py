"""Findings for CI: SARIF 2.1.0 (code scanning) and GitHub Actions workflow commands."""

from __future__ import annotations

import inspect
import json
import re
from pathlib import Path, PurePath

from fixitem import __version__
from fixitem.api import RunResult
from fixitem.codemods import graph_break_codes
from fixitem.codemods.driver.engine import Finding
from fixitem.codemods.driver.registry import rule_class
from fixitem.output import COSTS

SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
SARIF_VERSION = "2.1.0"
INFORMATION_URI = "https://pypi.org/project/fixitem/"



def _message(finding: Finding) -> str:
    costs = f" ({', '.join(COSTS.get(c, c) for c in finding.costs)})" if finding.costs else ""
    return f"{finding.message}{costs} [fix: {finding.fix}]"


def _section(doc: str, title: str) -> str:
    """The text of a ``## title`` section of a rule's documentation."""
    match = re.search(rf"^## {re.escape(title)}\s*\n(.*?)(?=^## |\Z)", doc, re.S | re.M)
    return match.group(1).strip() if match else ""


def _uri(path: str) -> tuple[str, bool]:
    """A forward-slash URI for a finding's path; True when it is relative to the current folder."""
    pure = PurePath(path)
    if not pure.is_absolute():
        return pure.as_posix(), True
    try:
        return Path(path).resolve().relative_to(Path.cwd().resolve()).as_posix(), True
    except ValueError:
        return Path(path).as_uri(), False


def _file_line(finding: Finding) -> int:
    """The line in the file: in a notebook, the line of its JSON that holds the cell's line."""
    if finding.cell is None:
        return finding.line
    from fixitem.codemods.driver.notebooks import notebook_line  # (not imported for a run of Python files)

    return notebook_line(Path(finding.path), finding.cell, finding.line) or 1


def _region(finding: Finding) -> dict[str, int]:
    if finding.cell is not None:  # the column is the cell's, not the JSON line's: the line alone
        return {"startLine": _file_line(finding)}
    return {"startLine": finding.line, "startColumn": finding.col}


def _rule_descriptor(code: str) -> dict[str, object]:
    cls = rule_class(code)
    doc = inspect.getdoc(cls) or ""
    use_instead = _section(doc, "Use instead")
    help_text = f"Run `fixitem rule {cls.code}` for the full documentation."
    if use_instead:
        help_text = f"Use instead:\n{use_instead}\n\n{help_text}"
    descriptor: dict[str, object] = {
        "id": cls.code,
        "name": cls.name,
        "shortDescription": {"text": cls.summary},
        "fullDescription": {"text": doc or cls.summary},
        "help": {"text": help_text, "markdown": cls.documentation()},
        "defaultConfiguration": {"level": "warning"},
    }
    if cls.graph_breaks:
        # PyTorch's page of the break the rule removes; its codes, as TORCH_LOGS=graph_breaks names them.
        descriptor["helpUri"] = graph_break_codes.url(cls.graph_breaks[0])
        descriptor["properties"] = {"graphBreaks": list(cls.graph_breaks)}
    return descriptor


def sarif(result: RunResult) -> dict[str, object]:
    """The run as a SARIF 2.1.0 log (a dict; :func:`sarif_json` for the text)."""
    codes = list(result.rules)
    for finding in result.findings:
        if finding.rule not in codes:
            codes.append(finding.rule)
    index = {code: i for i, code in enumerate(codes)}
    results = []
    for finding in result.findings:
        uri, relative = _uri(finding.path)
        location: dict[str, object] = {"uri": uri}
        if relative:
            location["uriBaseId"] = "%SRCROOT%"
        text = _message(finding)
        if finding.note:
            text += f"\nnote: {finding.note}"
        properties: dict[str, object] = {"fix": finding.fix, "costs": list(finding.costs),
                                         "graphBreaks": list(finding.graph_breaks)}
        if finding.cell is not None:  # a notebook: where in the cell, as Jupyter shows it
            text = f"cell {finding.cell}, line {finding.line}: {text}"
            properties.update(cell=finding.cell, cellLine=finding.line, cellColumn=finding.col)
        results.append(
            {
                "ruleId": finding.rule,
                "ruleIndex": index[finding.rule],
                "level": "warning",
                "message": {"text": text},
                "locations": [
                    {
                        "physicalLocation": {
                            "artifactLocation": location,
                            "region": _region(finding),
                        }
                    }
                ],
                "properties": properties,
            }
        )
    notifications = [{"level": "error", "message": {"text": message}} for message in result.errors]
    run: dict[str, object] = {
        "tool": {
            "driver": {
                "name": "fixitem",
                "informationUri": INFORMATION_URI,
                "version": __version__,
                "rules": [_rule_descriptor(code) for code in codes],
            }
        },
        "originalUriBaseIds": {"%SRCROOT%": {"uri": Path.cwd().resolve().as_uri() + "/"}},
        "invocations": [
            {"executionSuccessful": not result.errors, "toolExecutionNotifications": notifications}
        ],
        "results": results,
    }
    return {"version": SARIF_VERSION, "$schema": SARIF_SCHEMA, "runs": [run]}


def sarif_json(result: RunResult) -> str:
    return json.dumps(sarif(result), indent=2)


def escape_data(text: str) -> str:
    """A workflow command's message (GitHub's rules: ``%``, CR and LF)."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    """A workflow command's property value: also ``:`` and ``,``, which delimit properties."""
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def github_line(finding: Finding) -> str:
    path = PurePath(finding.path).as_posix()
    message = _message(finding)
    if finding.note:
        message += f"\nnote: {finding.note}"
    if finding.cell is not None:
        message = f"cell {finding.cell}, line {finding.line}: {message}"
    column = f",col={finding.col}" if finding.cell is None else ""  # a notebook: the JSON line alone
    return (
        f"::warning file={escape_property(path)},line={_file_line(finding)}{column},"
        f"title={escape_property(finding.rule)}::{escape_data(message)}"
    )


def github(result: RunResult) -> str:
    """One ``::warning`` workflow command per finding (and ``::error`` per file that failed)."""
    lines = [github_line(f) for f in result.findings]
    lines += [f"::error title=fixitem::{escape_data(message)}" for message in result.errors]
    return "\n".join(lines)
