"""PyTorch's graph-break codes: the titles fixitem quotes and the breaks Dynamo reports for each pattern."""

from __future__ import annotations

import json
import logging
import re
import warnings
from pathlib import Path

import pytest
import torch
from fixitem.codemods.graph_break_codes import TITLES, url
from fixitem.verify.breaks import _listen_for_breaks

REGISTRY = Path(torch.__file__).parent / "_dynamo" / "graph_break_registry.json"
logger = logging.getLogger("fixitem.tests.gb")


@pytest.mark.skipif(not REGISTRY.is_file(), reason="this torch has no graph-break registry")
def test_titles_are_those_of_the_installed_registry():
    registry = json.loads(REGISTRY.read_text())
    for code, title in TITLES.items():
        assert registry[code][0]["Gb_type"] == title, code


def _item(x):
    y = x * 2
    return y * y.sum().item()


def _if(x):
    y = x * 2
    if y.sum() > 0:
        return y
    return -y


def _print(x):
    y = x * 2
    print("step")
    return y * 2


def _logger(x):
    y = x * 2
    logger.warning("step")
    return y * 2


def _warn(x):
    y = x * 2
    warnings.warn("step")
    return y * 2


def _tolist(x):
    y = x * 2
    return y * len(y.tolist())


@pytest.mark.parametrize(("fn", "code"), [(_item, "GB0124"), (_if, "GB0170"), (_print, "GB0059"),
                                          (_logger, "GB0291"), (_warn, "GB0007"), (_tolist, "GB0109")])
def test_dynamo_names_the_break_with_the_code_we_quote(fn, code, capsys):
    torch._dynamo.reset()
    with warnings.catch_warnings(), _listen_for_breaks() as collector:
        warnings.simplefilter("ignore")
        torch.compile(fn, backend="eager")(torch.ones(3))
    assert collector is not None
    seen = {f"GB{c}" for c in re.findall(r"gb(\d{4})", " ".join(collector.messages).lower())}
    assert code in seen, collector.messages
    assert url(code) in " ".join(collector.messages)
    torch._dynamo.reset()


def test_every_rule_code_has_a_title_and_every_title_a_rule():
    from fixitem.codemods.driver.registry import RULE_CLASSES

    used = {code for cls in RULE_CLASSES for code in cls.graph_breaks}
    assert used == set(TITLES)


def test_json_and_sarif_carry_the_codes_of_a_graph_break(tmp_path):
    import fixitem
    from fixitem import formats

    model = tmp_path / "m.py"
    model.write_text(
        "import torch\nfrom torch import nn\n\n\n"
        "class Net(nn.Module):\n"
        "    def forward(self, x):\n"
        "        return x * x.sum().item()\n\n\n"
        "def evaluate(x: torch.Tensor):\n"
        "    return x.sum().item()\n"
    )
    result = fixitem.scan([model], isolated=True, cache=False)
    by_line = {f.line: f.to_dict() for f in result.findings}
    assert "GB0124" in by_line[7]["graph_breaks"]  # in forward: a graph break
    assert by_line[11]["graph_breaks"] == []  # outside traced code: a host sync only
    log = formats.sarif(result)
    rules = {r["id"]: r for r in log["runs"][0]["tool"]["driver"]["rules"]}
    rule = rules[by_line[7]["rule"]]
    assert rule["helpUri"] == url(rule["properties"]["graphBreaks"][0])
    props = [r["properties"]["graphBreaks"] for r in log["runs"][0]["results"]]
    assert any("GB0124" in p for p in props) and [] in props
