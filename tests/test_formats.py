"""scan --format sarif / github: structure, paths, escaping."""

from __future__ import annotations

import json

import pytest
from fixitem.codemods.driver.engine import Finding
from typer.testing import CliRunner

from fixitem import formats
from fixitem.cli import app

runner = CliRunner()

# A hand-written subset of the SARIF 2.1.0 schema: what code-scanning tools read.
SARIF_SUBSET = {
    "type": "object",
    "required": ["version", "$schema", "runs"],
    "properties": {
        "version": {"const": "2.1.0"},
        "runs": {
            "type": "array",
            "minItems": 1,
            "items": {
                "type": "object",
                "required": ["tool", "results"],
                "properties": {
                    "tool": {
                        "type": "object",
                        "required": ["driver"],
                        "properties": {
                            "driver": {
                                "type": "object",
                                "required": ["name", "rules"],
                                "properties": {
                                    "name": {"type": "string"},
                                    "version": {"type": "string"},
                                    "informationUri": {"type": "string", "format": "uri"},
                                    "rules": {
                                        "type": "array",
                                        "items": {
                                            "type": "object",
                                            "required": ["id", "shortDescription"],
                                            "properties": {
                                                "id": {"type": "string"},
                                                "name": {"type": "string"},
                                                "shortDescription": {"$ref": "#/$defs/message"},
                                                "fullDescription": {"$ref": "#/$defs/message"},
                                                "help": {"$ref": "#/$defs/message"},
                                            },
                                        },
                                    },
                                },
                            }
                        },
                    },
                    "results": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "required": ["ruleId", "message", "locations"],
                            "properties": {
                                "ruleId": {"type": "string"},
                                "ruleIndex": {"type": "integer", "minimum": 0},
                                "level": {"enum": ["none", "note", "warning", "error"]},
                                "message": {"$ref": "#/$defs/message"},
                                "locations": {
                                    "type": "array",
                                    "items": {
                                        "type": "object",
                                        "required": ["physicalLocation"],
                                        "properties": {
                                            "physicalLocation": {
                                                "type": "object",
                                                "required": ["artifactLocation", "region"],
                                                "properties": {
                                                    "artifactLocation": {
                                                        "type": "object",
                                                        "required": ["uri"],
                                                        "properties": {"uri": {"type": "string"}},
                                                    },
                                                    "region": {
                                                        "type": "object",
                                                        "required": ["startLine"],
                                                        "properties": {
                                                            "startLine": {"type": "integer", "minimum": 1},
                                                            "startColumn": {"type": "integer", "minimum": 1},
                                                        },
                                                    },
                                                },
                                            }
                                        },
                                    },
                                },
                            },
                        },
                    },
                },
            },
        },
    },
    "$defs": {
        "message": {"type": "object", "required": ["text"], "properties": {"text": {"type": "string"}}}
    },
}


def scan(*args: str):
    return runner.invoke(app, ["scan", *args])


def test_sarif_structure(copy_fixture, monkeypatch):
    folder = copy_fixture("threshold")
    monkeypatch.chdir(folder.parent)
    result = scan("--format", "sarif", "--isolated", "threshold")
    assert result.exit_code == 1
    log = json.loads(result.stdout)
    assert log["version"] == "2.1.0"
    assert log["$schema"] == "https://json.schemastore.org/sarif-2.1.0.json"
    (run,) = log["runs"]
    driver = run["tool"]["driver"]
    assert driver["name"] == "fixitem" and driver["version"] and driver["informationUri"].startswith("https://")
    ids = [r["id"] for r in driver["rules"]]
    assert len(ids) == len(set(ids)) and "FX101" in ids
    for rule in driver["rules"]:
        assert rule["name"] and rule["shortDescription"]["text"] and rule["fullDescription"]["text"]
        assert f"fixitem rule {rule['id']}" in rule["help"]["text"]
    assert run["results"]
    for res in run["results"]:
        assert res["level"] == "warning"
        assert ids[res["ruleIndex"]] == res["ruleId"]
        loc = res["locations"][0]["physicalLocation"]
        uri = loc["artifactLocation"]["uri"]
        assert uri.startswith("threshold/") and "\\" not in uri
        assert loc["region"]["startLine"] >= 1 and loc["region"]["startColumn"] >= 1
    first = next(r for r in run["results"] if r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == "threshold/scale_if.py")
    assert first["ruleId"] == "FX101"
    assert first["locations"][0]["physicalLocation"]["region"] == {"startLine": 14, "startColumn": 9}
    assert run["invocations"][0]["executionSuccessful"] is True


def test_sarif_validates_against_subset_schema(copy_fixture):
    jsonschema = pytest.importorskip("jsonschema")
    target = copy_fixture("threshold/report_only.py")
    log = json.loads(scan("--format", "sarif", "--isolated", str(target)).stdout)
    jsonschema.validate(log, SARIF_SUBSET)
    empty = json.loads(scan("--format", "sarif", "--isolated", "--select", "FX103", str(target)).stdout)
    jsonschema.validate(empty, SARIF_SUBSET)
    assert empty["runs"][0]["results"] == []


def test_sarif_outside_the_current_folder_uses_a_file_uri(copy_fixture, monkeypatch, tmp_path):
    target = copy_fixture("threshold/scale_if.py")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    log = json.loads(scan("--format", "sarif", "--isolated", str(target)).stdout)
    uri = log["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
    assert uri == target.resolve().as_uri()


def test_github_annotations(copy_fixture, monkeypatch):
    folder = copy_fixture("threshold")
    monkeypatch.chdir(folder.parent)
    result = scan("--format", "github", "--isolated", "threshold/scale_if.py")
    assert result.exit_code == 1
    lines = result.stdout.splitlines()
    assert lines and all(line.startswith("::warning file=threshold/scale_if.py,line=") for line in lines)
    assert lines[0].startswith("::warning file=threshold/scale_if.py,line=14,col=9,title=FX101::")
    assert "%0Anote%3A" not in lines[0]  # the message part escapes only %, CR, LF
    clean = runner.invoke(app, ["scan", "--format", "github", "--isolated", "--select", "FX103", "threshold/scale_if.py"])
    assert clean.exit_code == 0 and clean.stdout == ""


def test_github_escaping():
    finding = Finding("dir,a/b:c.py", 3, 5, "FX001", "item-read", "100% of\r\nit", "none", ("host-sync",), "a\nb")
    line = formats.github_line(finding)
    assert line.startswith("::warning file=dir%2Ca/b%3Ac.py,line=3,col=5,title=FX001::")
    message = line.split("::", 2)[2]
    assert message == "100%25 of%0D%0Ait (host sync) [fix: none]%0Anote: a%0Ab"
    assert "\n" not in line and "\r" not in line
    assert formats.escape_data("%0A") == "%250A"
