"""Flow facts of the analysis layer: containers of tensors and iteration over them,
``isinstance`` / ``is None`` narrowing, a name whose kind changes through ``+=``,
``%`` formatting and starred unpacking of tensors, aliased sync functions, and the
kinds same-file functions and methods return; and the fixes that rest on them."""

from __future__ import annotations

from pathlib import Path

import libcst as cst

from fixitem.codemods.context import FileContext
from fixitem.codemods.engine import process
from fixitem.codemods.provenance import Certainty, Kind
from fixitem.codemods.registry import all_rules


def _findings(code: str, rule: str | None = None):
    found = process(Path("example.py"), code, all_rules()).findings
    return [f for f in found if rule is None or f.rule == rule]


def _lines(code: str) -> list[int]:
    return sorted({f.line for f in _findings(code)})


def _kind_of(code: str, text: str, nth: int = -1) -> Kind:
    """The kind of the ``nth`` expression of the file written as ``text``."""
    ctx = FileContext.build(Path("example.py"), code)
    matches = [n for n in ctx.nodes(cst.Name, cst.Attribute, cst.Call, cst.Subscript) if ctx.code(n) == text]
    return ctx.kind(matches[nth])


def _certainty_of(code: str, text: str, nth: int = -1) -> Certainty:
    ctx = FileContext.build(Path("example.py"), code)
    matches = [n for n in ctx.nodes(cst.Name, cst.Attribute, cst.Call, cst.Subscript) if ctx.code(n) == text]
    return ctx.certainty(matches[nth])


# -- a print of a value not known to be a one-element tensor is never deferred as safe ------------

BLOCKS = (
    "import torch\nfrom torch import nn\n\n"
    "def helper(x):\n    return x * 2\n\n"
    "class Stack(nn.Module):\n"
    "    def __init__(self):\n        super().__init__()\n"
    "        self.blocks = nn.ModuleList([nn.Linear(4, 4) for _ in range(2)])\n\n"
    "    def forward(self, x):\n"
    "        for blk in self.blocks:\n            x = blk(x)\n"
    "        print(x.mean())\n"
    "        y = helper(x)\n"
    "        print(y.mean())\n"
    "        print(f'{y.mean():.4f}')\n"
    "        return x\n"
)


def test_a_print_of_a_whole_value_that_may_be_a_tensor_is_not_a_safe_fix():
    # Replayed, the runtime writes a one-element tensor as its number: ``0.1083`` where
    # the original wrote ``tensor(0.1083, grad_fn=<MeanBackward0>)``.
    fixes = {f.line: (f.fix, f.note) for f in _findings(BLOCKS, "FX201")}
    assert fixes[15][0] != "safe", fixes[15]
    assert fixes[17][0] != "safe", fixes[17]
    # Formatted as a number, a one-element tensor writes the same text.
    assert fixes[18][0] == "safe"
