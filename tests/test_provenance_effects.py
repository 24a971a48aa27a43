"""One definition of side effects, pure builtins and reductions (codemods/effects.py)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from fixitem.codemods.model import effects, reductions
from fixitem.codemods.model.context import FileContext
from fixitem.codemods.model.effects import Effect, call_effect
from fixitem.codemods.model.tree import walk

MODEL = (
    "import logging\nimport warnings\n\nimport torch\nimport torch.nn.functional as F\nfrom torch import nn\n\n"
    "logger = logging.getLogger(__name__)\n\n"
    "def helper(t):\n    return t\n\n"
    "class M(nn.Module):\n"
    "    def __init__(self):\n"
    "        super().__init__()\n"
    "        self.fc = nn.Linear(2, 2)\n"
    "        self.bn = nn.BatchNorm1d(2)\n"
    "        self.drop = nn.Dropout(0.1)\n"
    "    def forward(self, x: torch.Tensor, items: list):\n"
    "        return [{call}]\n"
)


@pytest.mark.parametrize(
    ("call", "effect"),
    [
        ("abs(x)", Effect.NONE),
        ("len(items)", Effect.NONE),
        ("torch.relu(x)", Effect.NONE),
        ("x.sum()", Effect.NONE),
        ("self.fc(x)", Effect.NONE),
        ("items.count(1)", Effect.NONE),
        ("print(x)", Effect.OUTPUT),
        ("logger.info(x)", Effect.OUTPUT),
        ("logging.warning(x)", Effect.OUTPUT),
        ("warnings.warn('slow')", Effect.OUTPUT),
        ("torch.randn(3)", Effect.RANDOM),
        ("x.bernoulli()", Effect.RANDOM),
        ("self.drop(x)", Effect.RANDOM),
        ("self.bn(x)", Effect.STATE),
        ("x.add_(1)", Effect.WRITES),
        ("torch.add(x, 1, out=x)", Effect.WRITES),
        ("F.relu(x, inplace=True)", Effect.WRITES),
        ("x.backward()", Effect.WRITES),
        ("items.append(x)", Effect.WRITES),
        ("helper(x)", Effect.UNKNOWN),
    ],
)
def test_call_effects(call, effect):
    ctx = FileContext.build(Path("effects.py"), MODEL.format(call=call))
    [node] = [n for n in walk(ctx.module) if isinstance(n, ast.Call) and ctx.code(n) == call]
    found = call_effect(ctx, node)
    assert found.effect is effect
    assert found.pure is (effect is Effect.NONE)
    assert bool(found.reason) is (effect is not Effect.NONE)


def test_relu_without_inplace_is_pure():
    ctx = FileContext.build(Path("effects.py"), MODEL.format(call="F.relu(x, inplace=False)"))
    [node] = [n for n in walk(ctx.module) if isinstance(n, ast.Call) and ctx.code(n) == "F.relu(x, inplace=False)"]
    assert call_effect(ctx, node).pure


def test_a_shadowed_builtin_is_not_the_builtin():
    code = "import torch\n\ndef print(*a):\n    return a\n\ndef f(x: torch.Tensor):\n    return print(x)\n"
    ctx = FileContext.build(Path("effects.py"), code)
    [node] = [n for n in walk(ctx.module) if isinstance(n, ast.Call) and ctx.code(n) == "print(x)"]
    assert call_effect(ctx, node).effect is Effect.UNKNOWN


def test_builtin_sets_follow_from_the_one_table():
    assert effects.PURE_BUILTINS == {n for n, e in effects.BUILTIN_EFFECTS.items() if e is Effect.NONE}
    assert "print" in effects.TENSOR_SAFE_BUILTINS and "print" not in effects.PURE_BUILTINS
    assert effects.PURE_BUILTINS < effects.TENSOR_SAFE_BUILTINS
    assert "setattr" not in effects.TENSOR_SAFE_BUILTINS


def test_rules_ask_effects_instead_of_keeping_copies():
    from fixitem.codemods.fixes import tensor_code
    from fixitem.codemods.model import provenance, scalar_shapes
    from fixitem.codemods.rules import deferred_logging, one_tolist

    for module in (tensor_code, scalar_shapes, provenance):
        assert module.REDUCTIONS is reductions.REDUCTIONS
    assert deferred_logging.PURE_BUILTINS is effects.PURE_BUILTINS
    for module, name in [(tensor_code, "PURE_BUILTINS"), (tensor_code, "RANDOM_FUNCTIONS"),
                         (tensor_code, "RANDOM_MODULES"), (tensor_code, "STATEFUL_MODULES"),
                         (one_tolist, "PURE_BUILTINS"), (one_tolist, "CONTAINER_METHODS"),
                         (one_tolist, "WRITING_TENSOR_METHODS"), (scalar_shapes, "FULL_REDUCTIONS")]:
        assert not hasattr(module, name), f"{module.__name__}.{name} is a copy of an effects.py definition"


def test_an_in_place_keyword_in_a_branch_is_not_a_safe_select(tmp_path):
    import fixitem

    model = tmp_path / "m.py"
    model.write_text(
        "import torch\n"
        "import torch.nn.functional as F\n"
        "from torch import nn\n\n\n"
        "class M(nn.Module):\n"
        "    def forward(self, x, h):\n"
        "        h = h * 2\n"
        "        if x.sum().item() > 0:\n"
        "            h = F.relu(h, inplace=True)\n"
        "        return h\n"
    )
    found = [f for f in fixitem.scan([model], isolated=True, cache=False).findings if f.rule == "FX101"]
    assert found and all(f.fix != "safe" for f in found)
    assert any("writes into a tensor" in f.note for f in found), [f.note for f in found]


def test_reductions_give_zero_dim_results():
    import torch

    x = torch.arange(6.0).reshape(2, 3)
    for name in reductions.REDUCTIONS:
        if name in ("dot", "vdot"):
            result = getattr(torch, name)(x[0], x[1])
        elif name == "trace":
            result = torch.trace(x)
        elif name in ("all", "any"):
            result = getattr(x.bool(), name)()
        else:
            result = getattr(x, name)()
        assert result.dim() == 0, name
