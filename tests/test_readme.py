"""The README's rule table is generated from the rules: keep them in step."""

from conftest import ROOT
from fixitem.codemods.driver.registry import RULE_CLASSES


def test_readme_lists_every_rule_with_its_summary():
    readme = (ROOT / "README.md").read_text()
    for cls in RULE_CLASSES:
        assert f"| {cls.code} | {cls.name} |" in readme, cls.code
        assert cls.summary in readme, cls.code


def test_readme_states_the_ci_test_command():
    readme = (ROOT / "README.md").read_text()
    ci = (ROOT / ".ci" / "run").read_text()
    assert "python -m pytest -q" in readme and "python -m pytest -q" in ci
