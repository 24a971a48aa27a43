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
