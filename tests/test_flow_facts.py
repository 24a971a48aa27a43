"""Flow facts of the analysis layer: containers of tensors and iteration over them,
``isinstance`` / ``is None`` narrowing, a name whose kind changes through ``+=``,
``%`` formatting and starred unpacking of tensors, aliased sync functions, and the
kinds same-file functions and methods return; and the fixes that rest on them."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from conftest import run_side_by_side
from fixitem.codemods.driver.engine import process
from fixitem.codemods.driver.registry import all_rules
from fixitem.codemods.model.context import FileContext
from fixitem.codemods.model.provenance import Certainty, Kind

import fixitem


def _findings(code: str, rule: str | None = None):
    found = process(Path("example.py"), code, all_rules()).findings
    return [f for f in found if rule is None or f.rule == rule]


def _lines(code: str) -> list[int]:
    return sorted({f.line for f in _findings(code)})


def _matches(ctx: FileContext, text: str) -> list[ast.AST | None]:
    """The names, attributes, calls and subscripts written as ``text``, in the order of where
    they start, counted as libcst counted them: a parameter's name was a ``Name`` (its
    ``ast.arg`` stands for it), and so were the names of attributes, keywords, functions and
    classes (``None`` stands for them: nothing to ask about)."""
    found: list[tuple[int, int, ast.AST | None]] = []
    order = {ast.Name: 0, ast.arg: 0, ast.Attribute: 1, ast.Call: 2, ast.Subscript: 3}
    for node in ctx.nodes(ast.Name, ast.Attribute, ast.Call, ast.Subscript, ast.arg, ast.keyword,
                          ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef):
        t = type(node)
        if t in (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef):
            if node.name == text:
                found.append((ctx.source.index(text, ctx.positions.offset(node)), 0, None))
        elif t is ast.arg:
            if node.arg == text:
                found.append((ctx.positions.offset(node), 0, node))
        elif t is ast.keyword:
            if node.arg == text:
                found.append((ctx.positions.offset(node), 0, None))
        else:
            if ctx.code(node) == text:
                found.append((ctx.positions.offset(node), order[t], node))
            if t is ast.Attribute and node.attr == text:
                found.append((ctx.positions.span(node)[1] - len(text), 0, None))
    found.sort(key=lambda item: item[:2])
    return [node for _, _, node in found]


def _kind_of(code: str, text: str, nth: int = -1) -> Kind:
    """The kind of the ``nth`` expression of the file written as ``text``."""
    ctx = FileContext.build(Path("example.py"), code)
    matches = _matches(ctx, text)
    assert matches[nth] is not None
    return ctx.kind(matches[nth])


def _certainty_of(code: str, text: str, nth: int = -1) -> Certainty:
    ctx = FileContext.build(Path("example.py"), code)
    matches = _matches(ctx, text)
    assert matches[nth] is not None
    return ctx.certainty(matches[nth])


# -- a print of a value not known to be a one-element tensor is never deferred as safe ------------

BLOCKS = (
    "import torch\nfrom torch import nn\nfrom mylib import scale\n"
    "def helper(x):\n    return x * 2\n\n"
    "class Stack(nn.Module):\n"
    "    def __init__(self):\n        super().__init__()\n"
    "        self.blocks = nn.ModuleList([nn.Linear(4, 4) for _ in range(2)])\n\n"
    "    def forward(self, x):\n"
    "        for blk in self.blocks:\n            x = blk(x)\n"
    "        print(x.mean())\n"
    "        y = helper(x)\n"
    "        print(y.mean())\n"
    "        print(f'{scale(x).mean():.4f}')\n"
    "        z = scale(x)\n"
    "        print(z.mean())\n"
    "        return x\n"
)


def test_a_print_of_a_whole_value_that_may_be_a_tensor_is_not_a_safe_fix():
    # Replayed, the runtime writes a one-element tensor as its number: ``0.1083`` where
    # the original wrote ``tensor(0.1083, grad_fn=<MeanBackward0>)``.
    found = _findings(BLOCKS)
    assert {f.line for f in found} >= {15, 17, 18}
    assert not [f for f in found if f.line in (15, 17) and f.fix == "safe"]
    (imported,) = [f for f in found if f.line == 20]
    assert imported.fix != "safe" and "`z.mean()` may be a tensor: it is passed by reference and read at replay, not now" in imported.note
    # Formatted as a number, a one-element tensor writes the same text.
    assert [f.fix for f in found if f.line == 18] == ["safe"]


# -- misses: each line syncs on CUDA ------------------------------------------------------------------

MISSES = '''import math
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 3)

    def forward(self, x):
        return self.fc(x)


def train(model: Net, batches, cuda: bool):
    synchronize = torch.cuda.synchronize if cuda else (lambda: None)
    mloss = torch.zeros(3, device="cuda")
    for x in batches:
        loss = model(x).mean()
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        ok = math.isfinite(norm)
        scale = max(1e-3 * norm, 1e-6)
        mloss = mloss + loss.detach()
        print("%.4f %.4f" % tuple(mloss[:2]))
        print(("%g" * 3) % (*mloss,))
        synchronize()
    val_loss = 0.0
    for x in batches:
        val_loss += model(x).mean()
    print(f"{val_loss:.4f}")
    return ok, scale


class Evaluator:
    def stats(self, x: torch.Tensor):
        return torch.stack([x.mean(), x.std()])

    def run(self, x: torch.Tensor):
        s = self.stats(x)
        first = s.item()
        return first, s.tolist()
'''


def test_math_calls_and_max_of_a_tensor_are_reported():
    codes = {f.line: f.rule for f in _findings(MISSES)}
    assert codes.get(22) == "FX001"  # math.isfinite(norm): float() of the tensor
    assert codes.get(23) == "FX004"  # max(1e-3 * norm, 1e-6): a tensor comparison's truth value


def test_percent_formatting_of_an_unpacked_tensor_is_reported():
    found = {f.line: f.message for f in _findings(MISSES, "FX005")}
    assert "`mloss[:2]`" in found.get(25, "")  # "%.4f %.4f" % tuple(mloss[:2])
    assert "`mloss`" in found.get(26, "")  # ("%g" * 3) % (*mloss,)


def test_an_aliased_sync_function_is_reported():
    assert 27 in {f.line for f in _findings(MISSES, "FX007")}


def test_a_sum_that_becomes_a_tensor_through_augmented_assignment_is_reported_as_possibly_a_tensor():
    (finding,) = [f for f in _findings(MISSES, "FX005") if f.line == 31]
    assert "(if `val_loss` is a tensor)" in finding.note
    assert _kind_of(MISSES, "val_loss") is Kind.TENSOR
    assert _certainty_of(MISSES, "val_loss") is Certainty.POSSIBLY


def test_tolist_of_a_same_class_method_result_is_reported_like_item():
    lines = {f.line: f.rule for f in _findings(MISSES)}
    assert lines.get(41) == "FX001" and lines.get(42) == "FX002"
    assert _certainty_of(MISSES, "self.stats(x)") is Certainty.TENSOR


# -- false alarm: isinstance and ``is None`` narrowing ----------------------------------------------

NARROWING = '''import torch


def make_lr(lr):
    if isinstance(lr, torch.Tensor):
        if lr.numel() != 1:
            raise ValueError("lr")
        return lr
    else:
        return float(lr)


def make_lr2(lr):
    if isinstance(lr, torch.Tensor) and lr.numel() != 1:
        raise ValueError("lr")
    if not isinstance(lr, torch.Tensor):
        lr = float(lr)
    return lr


def log_norm(model, step):
    grad_norm = None
    if step % 2 == 0:
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    if grad_norm is not None:
        print(f"grad norm {grad_norm:.3f}")
'''


def test_float_of_a_value_an_isinstance_test_proved_not_a_tensor_is_not_reported():
    lines = _lines(NARROWING)
    assert 10 not in lines and 17 not in lines
    assert _kind_of(NARROWING, "lr", nth=3) is Kind.TENSOR  # ``lr.numel()`` in the tensor branch
    assert _certainty_of(NARROWING, "lr", nth=3) is Certainty.TENSOR


def test_a_value_tested_not_none_has_the_kind_of_its_other_bindings():
    assert 26 in {f.line for f in _findings(NARROWING, "FX005")}
    assert _kind_of(NARROWING, "grad_norm") is Kind.TENSOR


# -- containers of tensors, and iteration over them -------------------------------------------------

CONTAINERS = '''import torch
from torch import nn


class Stack(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList([nn.Linear(4, 4) for _ in range(2)])

    def forward(self, x: torch.Tensor):
        for blk in self.blocks:
            x = blk(x)
        return x


def losses_of(batches):
    pairs = [(torch.randn(8, 4), torch.randint(0, 3, (8,))) for _ in range(3)]
    losses = []
    for data, target in pairs:
        losses.append(torch.nn.functional.cross_entropy(data[:, :3], target))
    parts = {"loss": losses[-1], "n": 3}
    rows = [t * 2 for t in losses]
    a, b = rows[0], rows[1:]
    return losses, parts["loss"], rows, a
'''


def test_iteration_over_a_module_list_gives_modules_and_their_outputs_tensors():
    assert _kind_of(CONTAINERS, "blk") is Kind.MODULE
    assert _kind_of(CONTAINERS, "blk(x)") is Kind.TENSOR
    assert _certainty_of(CONTAINERS, "x") is Certainty.TENSOR


def test_elements_of_lists_dicts_and_comprehensions_of_tensors_are_tensors():
    assert _kind_of(CONTAINERS, "data") is Kind.TENSOR  # an item of each pair of the list
    assert _kind_of(CONTAINERS, "target") is Kind.TENSOR
    assert _kind_of(CONTAINERS, "losses[-1]") is Kind.TENSOR  # filled with ``append``
    assert _kind_of(CONTAINERS, 'parts["loss"]') is Kind.TENSOR
    assert _kind_of(CONTAINERS, "t") is Kind.TENSOR  # a comprehension over the list
    assert _kind_of(CONTAINERS, "a") is Kind.TENSOR
    assert _kind_of(CONTAINERS, "batches") is Kind.UNKNOWN  # a parameter: its elements are unknown


def test_a_container_filled_with_something_else_has_elements_of_unknown_kind():
    code = (
        "import torch\nimport numpy as np\n"
        "def f(n):\n"
        "    xs = [torch.zeros(1)]\n"
        "    xs.append(np.zeros(1))\n"
        "    ys = [torch.zeros(1)]\n"
        "    ys.extend(make(n))\n"
        "    return xs[0], ys[0]\n"
    )
    assert _kind_of(code, "xs[0]") is not Kind.TENSOR
    assert _kind_of(code, "ys[0]") is Kind.UNKNOWN


# -- the default mode rewrites these as the same program ---------------------------------------------




@pytest.mark.parametrize("name", ["object_attribute_loss", "textbook_format"])
def test_the_default_mode_defers_the_loss_print_as_the_same_program(copy_fixture, name):
    original = copy_fixture(f"flow/{name}.py")
    rewritten = original.with_name(f"{name}_deferred.py")
    rewritten.write_text(original.read_text())
    result = fixitem.apply([rewritten])
    assert not result.errors, result.errors
    assert [f.rule for f in result.applied] == ["FX201"]
    assert "deferred.record(" in rewritten.read_text()
    before, after = run_side_by_side(original, rewritten)
    assert before.count("\n") >= 4
    assert after == before


def test_parameters_annotated_as_containers_of_tensors_give_tensors(copy_fixture):
    """``losses: List[Tensor]``, ``parts: Dict[str, Tensor]``, ``pair: Tuple[Tensor, ...]``:
    their elements are tensors (a dict's keys, by ``Dict[str, ...]``, strings); the prints of
    them are deferred as the same program, and the truth test over ``scores or []`` is found."""
    original = copy_fixture("flow/annotated_containers.py")
    scanned = fixitem.scan([original], cache=False)
    assert [(f.line, f.rule, f.fix) for f in scanned.findings] == [
        (10, "FX201", "safe"), (11, "FX201", "safe"), (16, "FX201", "safe"),
        (17, "FX201", "unsafe"),  # ``float()`` of a tensor passed in, which may require grad, warns
        (23, "FX101", "none"),
    ]
    rewritten = original.with_name("annotated_containers_deferred.py")
    rewritten.write_text(original.read_text())
    result = fixitem.apply([rewritten])
    assert not result.errors, result.errors
    assert [f.line for f in result.applied] == [10, 11, 16]
    before, after = run_side_by_side(original, rewritten)
    assert before.count("\n") == 8 and after == before


@pytest.mark.parametrize("annotation, kind", [
    ("List[torch.Tensor]", Kind.TENSOR), ("list[torch.Tensor]", Kind.TENSOR), ("Sequence[torch.Tensor]", Kind.TENSOR),
    ("Optional[List[torch.Tensor]]", Kind.TENSOR), ("List[torch.Tensor] | None", Kind.TENSOR),
    ("Tuple[torch.Tensor, ...]", Kind.TENSOR), ("Tuple[torch.Tensor, int]", Kind.UNKNOWN),
    ("List[int]", Kind.NUMBER), ("List[str]", Kind.OTHER), ("List[List[torch.Tensor]]", Kind.UNKNOWN),
    ("list", Kind.UNKNOWN), ('list["torch.Tensor"]', Kind.TENSOR),
])
def test_the_elements_of_an_annotated_parameter_have_the_annotated_kind(annotation, kind):
    code = f"import torch\nfrom typing import List, Optional, Sequence, Tuple\n\ndef f(xs: {annotation}):\n    return xs[0]\n"
    assert _kind_of(code, "xs[0]") is kind


def test_the_elements_of_an_element_of_a_nested_annotation_have_its_kind():
    """``batch: List[List[Tensor]]``: ``for group in batch`` gives lists, and their elements
    (``for t in group``, ``group[0]``) are tensors."""
    code = (
        "import torch\nfrom typing import List\n\ndef collate(batch: List[List[torch.Tensor]]):\n"
        "    for group in batch:\n        for t in group:\n            print(t)\n        first = group[0]\n"
        "        return first\n"
    )
    assert _kind_of(code, "group", 0) is Kind.UNKNOWN  # a list
    assert _kind_of(code, "t") is Kind.TENSOR
    assert _kind_of(code, "group[0]") is Kind.TENSOR


def test_a_default_other_than_none_says_more_than_the_annotation():
    code = "import torch\nfrom typing import List\n\ndef f(xs: List[torch.Tensor] = [1, 2]):\n    return xs[0]\n"
    assert _kind_of(code, "xs[0]") is Kind.UNKNOWN


@pytest.mark.parametrize("call, kind", [
    ("sum(loss for loss in loss_dict.values())", Kind.TENSOR),  # torchvision's detection loop
    ("sum([x.mean(), x.max()])", Kind.TENSOR), ("sum(x)", Kind.TENSOR), ("sum([1, 2], x.sum())", Kind.TENSOR),
    ("sum([1, 2.5])", Kind.NUMBER), ("sum(len(s) for s in names)", Kind.NUMBER), ("sum(items)", Kind.UNKNOWN),
])
def test_the_builtin_sum_has_the_kind_of_what_it_adds(call, kind):
    code = ("import torch\n\ndef f(x: torch.Tensor, loss_dict: dict[str, torch.Tensor], names: list[str], items):\n"
            f"    total = {call}\n    return total\n")
    assert _kind_of(code, "total") is kind


def test_a_sum_of_a_compiled_models_outputs_is_a_tensor():
    """``model = torch.compile(model)`` reads ``model`` itself: while it is worked out, a
    ``val_loss += model(x).mean()`` waits for it rather than counting as a number
    (modded-nanogpt's validation loop, at module level)."""
    code = (
        "import torch\nfrom torch import nn\n\nclass GPT(nn.Module):\n    def forward(self, x):\n        return x * 2\n\n"
        "model: nn.Module = GPT()\nmodel = torch.compile(model)\nval_loss = 0\nfor _ in range(2):\n"
        "    val_loss += model(torch.ones(2)).mean()\nval_loss /= 2\nprint(f'val_loss:{val_loss:.4f}')\n"
    )
    assert _kind_of(code, "val_loss") is Kind.TENSOR
    assert [f.rule for f in _findings(code)] == ["FX005"]


def test_an_object_whose_backward_takes_the_loss_is_no_tensor():
    """``accelerator.backward(loss)`` (Accelerate, DeepSpeed) and ``accelerator.gather(t)``
    are not ``Tensor.backward`` / ``Tensor.gather``: ``accelerator.check_trigger()`` is no tensor.
    ``loss.backward()`` still says ``loss`` is one."""
    code = (
        "from accelerate import Accelerator\n\ndef train(model, batches):\n    accelerator = Accelerator()\n"
        "    for batch in batches:\n        loss = model(batch)\n        accelerator.backward(loss)\n"
        "        preds = accelerator.gather(loss)\n        if accelerator.check_trigger():\n            break\n"
        "\ndef plain(loss):\n    loss.backward()\n    return loss\n"
    )
    assert _kind_of(code, "accelerator.check_trigger()") is Kind.UNKNOWN
    assert _kind_of(code, "accelerator", 0) is not Kind.TENSOR
    assert _kind_of(code, "loss") is Kind.TENSOR  # the one `plain` returns


def test_elements_are_as_certain_as_what_was_put_in():
    code = (
        "import torch\nfrom torch import nn\n"
        "class Net(nn.Module):\n"
        "    def forward(self, x, y):\n"
        "        xs = [x * 2, torch.ones(1)]\n"
        "        for t in xs:\n"
        "            t.sum()\n"
        "        ys = [y.view(-1)]\n"
        "        return xs[0], ys[0]\n"
    )
    assert _certainty_of(code, "t") is Certainty.POSSIBLY  # ``x`` is a tensor only by the ``forward`` heuristic
    assert _certainty_of(code, "xs[0]") is Certainty.POSSIBLY
    assert _certainty_of(code, "ys[0]") is Certainty.TENSOR  # ``y.view(...)``: used as a tensor


# -- what the calls of a function of this file pass ---------------------------------------------------

TRAIN = '''import torch
import torch.nn.functional as F


def train(model, batches, optimizer, epoch):
    model.train()
    for batch_idx, (data, target) in enumerate(batches):
        loss = F.cross_entropy(model(data), target)
        print("Train Epoch: {} [{}]\\tLoss: {:.6f}".format(epoch, batch_idx * len(data), loss.item()))


def main(model, batches, optimizer):
    for epoch in range(1, 3):
        train(model, batches, optimizer, epoch)
'''


def test_a_parameter_every_call_of_the_file_passes_a_number_is_a_number():
    (finding,) = _findings(TRAIN, "FX201")
    assert finding.fix == "safe", finding.note
    assert _kind_of(TRAIN, "epoch", nth=1) is Kind.NUMBER


def test_a_function_used_other_than_by_calls_keeps_parameters_of_unknown_kind():
    for extra in ("\nhooks = [train]\n", "\n__all__ = ['train']\n", "\ndef again(*args):\n    train(*args)\n"):
        (finding,) = _findings(TRAIN + extra, "FX201")
        assert finding.fix != "safe" and "`epoch` may be a tensor" in finding.note, extra


def test_long_chains_of_helpers_and_containers_are_analysed_without_running_out_of_stack():
    lines = ["import torch", "", "def f0(x):", "    return torch.relu(x)", ""]
    for i in range(1, 400):
        lines += [f"def f{i}(x):", f"    return f{i - 1}(x) + 1", ""]
    lines += ["def main():", "    xs0 = [torch.ones(1)]"]
    lines += [f"    xs{i} = list(xs{i - 1})" for i in range(1, 400)]
    lines += ["    y = f399(torch.ones(1))", "    print(y.item(), xs399[0].item())", ""]
    result = process(Path("example.py"), "\n".join(lines), all_rules())
    assert result.error is None, result.error
    assert [f.rule for f in result.findings] == ["FX201"]


def test_an_attribute_built_from_itself_is_a_container_of_unknown_elements():
    code = (
        "import torch\n"
        "class Engine:\n"
        "    def __init__(self):\n        self.handlers = []\n"
        "    def add(self, h):\n        self.handlers = self.handlers[1:] + [h]\n"
        "        self.seen = list(self.seen)\n"
        "    def run(self):\n"
        "        for h in self.handlers:\n            h()\n"
        "        for s in self.seen:\n            s.item()\n"
    )
    result = process(Path("example.py"), code, all_rules())
    assert result.error is None, result.error
    assert _kind_of(code, "h", nth=-2) is Kind.UNKNOWN


def test_a_method_left_to_subclasses_returns_what_it_is_annotated_or_an_unknown_kind():
    code = (
        "import torch\n"
        "class Base:\n"
        "    def reduce(self, t: torch.Tensor) -> torch.Tensor:\n        pass\n"
        "    def collect(self, t):\n        raise NotImplementedError\n"
        "    def reset(self):\n        self.n = 0\n"
        "    def run(self, t: torch.Tensor):\n"
        "        a = self.reduce(t)\n        b = self.collect(t)\n        c = self.reset()\n"
        "        return a.item(), b.item(), c\n"
    )
    assert _kind_of(code, "self.reduce(t)") is Kind.TENSOR
    assert _kind_of(code, "self.collect(t)") is Kind.UNKNOWN
    assert _kind_of(code, "self.reset()") is Kind.OTHER  # None
    assert [f.line for f in _findings(code, "FX001")] == [13, 13]


def test_a_decorator_that_gives_back_its_function_keeps_what_the_function_returns():
    # transformers' ``_make_compile_constant``: sets an attribute, returns the function.
    # A decorator that wraps the function returns what its wrapper does: unknown.
    code = (
        "import torch\n"
        "def mark(fn):\n    fn.constant = True\n    return fn\n"
        "def wrapped(fn):\n    def run(x):\n        return fn(x)\n    return run\n"
        "def maybe(fn):\n    if fn.__doc__:\n        return fn\n    return print\n"
        "@mark\ndef ready() -> bool:\n    return True\n"
        "@mark\ndef scale(x: torch.Tensor):\n    return x * 2\n"
        "@wrapped\ndef odd(x: torch.Tensor):\n    return x * 2\n"
        "@maybe\ndef other(x: torch.Tensor):\n    return x * 2\n"
        "def quiet(level) -> None:\n    torch.manual_seed(level)\n"
        "def run(x: torch.Tensor):\n    return ready(), scale(x), odd(x), other(x), quiet(1)\n"
    )
    assert _kind_of(code, "ready()") is Kind.NUMBER
    assert _kind_of(code, "scale(x)") is Kind.TENSOR
    assert _kind_of(code, "odd(x)") is Kind.UNKNOWN
    assert _kind_of(code, "other(x)") is Kind.UNKNOWN
    assert _kind_of(code, "quiet(1)") is Kind.OTHER  # ``-> None``


def test_a_function_that_gives_back_its_argument_returns_a_tensor_given_one():
    code = (
        "import torch\n"
        "def reduce_sum(tensor, op=None):\n    if op is None:\n        return tensor\n"
        "    tensor = tensor.clone()\n    torch.distributed.all_reduce(tensor)\n    return tensor\n"
        "def same(x):\n    return x\n"
        "def other(x):\n    x = [x]\n    return x\n"
        "def run(t: torch.Tensor, n):\n"
        "    return reduce_sum(t), reduce_sum(tensor=t), reduce_sum(n), same(t), other(t)\n"
    )
    assert _kind_of(code, "reduce_sum(t)") is Kind.TENSOR
    assert _kind_of(code, "reduce_sum(tensor=t)") is Kind.TENSOR
    assert _kind_of(code, "reduce_sum(n)") is Kind.UNKNOWN
    assert _kind_of(code, "same(t)") is Kind.TENSOR
    assert _kind_of(code, "other(t)") is not Kind.TENSOR


def test_an_element_computed_from_its_own_container_is_analysed():
    code = (
        "import torch\n"
        "def f(alpha, batches):\n"
        "    running = [torch.zeros(())]\n"
        "    for b in batches:\n"
        "        running[0] = running[0] * alpha + (1.0 - alpha) * b\n"
        "    return running[0].item()\n"
    )
    result = process(Path("example.py"), code, all_rules())
    assert result.error is None, result.error
    assert [f.rule for f in result.findings] == ["FX001"]
    assert _kind_of(code, "running[0]") is Kind.TENSOR
    ctx = FileContext.build(Path("example.py"), code)
    inner = [n for n in ctx.nodes(ast.Subscript) if ctx.code(n) == "running[0]"]
    assert [ctx.kind(n) for n in inner] == [Kind.TENSOR] * 3


def test_percent_formatting_with_a_format_built_from_repeated_parts_is_reported():
    """yolov5's progress line: ``("%11s" * 2 + "%11.4g" * 5) % (epoch, mem, *mloss, n, size)``
    formats each element of ``mloss``, one read each, every step."""
    code = (
        "import torch\n"
        "def train(loader, device: torch.device):\n"
        "    mloss = torch.zeros(3, device=device)\n"
        "    for i, (imgs, targets) in enumerate(loader):\n"
        "        mloss = (mloss * i + imgs.mean()) / (i + 1)\n"
        "        s = ('%11s' * 2 + '%11.4g' * 5) % ('1/10', '0G', *mloss, targets.shape[0], imgs.shape[-1])\n"
    )
    found = {f.line: f.message for f in _findings(code, "FX005")}
    assert "`mloss`" in found.get(6, "")


def test_a_method_of_a_class_of_the_file_called_on_an_instance_returns_what_it_returns():
    """``model = VAE().to(device)``, then ``model.decode(z).cpu()`` (pytorch/examples' vae):
    ``decode`` returns a tensor, so the copy to the host is reported."""
    code = (
        "import torch\nfrom torch import nn\n"
        "class VAE(nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.fc = nn.Linear(2, 4)\n"
        "    def decode(self, z):\n"
        "        return torch.sigmoid(self.fc(z))\n"
        "device = torch.device('cuda')\n"
        "model = VAE().to(device)\n"
        "def sample():\n"
        "    z = torch.randn(4, 2).to(device)\n"
        "    return model.decode(z).cpu()\n"
        "class Stats:\n"
        "    def to(self, device):\n"
        "        return [device]\n"
        "    def mean(self, x):\n"
        "        return x.mean()\n"
        "def other(x: torch.Tensor):\n"
        "    s = Stats().to(device)\n"
        "    return s.mean(x).cpu()\n"
    )
    lines = {f.line for f in _findings(code, "FX003")}
    assert 13 in lines  # model.decode(z).cpu()
    assert 21 not in lines  # Stats.to returns a list: not the instance


def test_the_keys_of_a_modules_dict_of_outputs_are_no_tensors():
    """A module's output is taken for a tensor, but a tensor has no ``items()``: iterating
    ``out.items()`` gives keys fixitem cannot see (``k.endswith("_loss")`` had been a tensor
    truth test, ``f"dist_{k}"`` a formatted tensor), and values as before."""
    code = (
        "import torch\n"
        "class M(torch.nn.Module):\n"
        "    def forward(self, x):\n"
        "        return {'a_loss': x.sum(), 'b': x.mean()}\n"
        "out = M()(torch.ones(3))\n"
        "total = sum(v for k, v in out.items() if k.endswith('_loss'))\n"
        "names = [f'dist_{k}' for k, v in out.items()]\n"
        "print(total, names)\n"
    )
    assert _kind_of(code, "k", 1) is Kind.UNKNOWN and _kind_of(code, "k") is Kind.UNKNOWN
    assert _kind_of(code, "v", 1) is Kind.TENSOR
    assert [(f.rule, f.line) for f in _findings(code)] == [("FX005", 8)]  # ``total``, a tensor


def test_the_builtin_max_or_min_of_tensors_one_by_one_is_a_host_comparison():
    """``max(p.grad.abs().max() for p in params)`` (mae's gradient norm): each comparison of
    two elements is ``bool()`` of a tensor. A list of numbers, and ``x.shape``, are not."""
    code = (
        "import torch\n"
        "def f(ts: list[torch.Tensor], t: torch.Tensor, xs: list[int]):\n"
        "    a = max(ts)\n"
        "    b = min(t)\n"
        "    c = max(xs)\n"
        "    d = max(x.norm() for x in ts)\n"
        "    e = max(t.shape)\n"
        "    g = min([1, 2])\n"
        "    return a, b, c, d, e, g\n"
    )
    found = _findings(code)
    assert [(f.rule, f.line) for f in found] == [("FX004", 3), ("FX004", 4), ("FX004", 6)], found
    assert all("one host sync per element" in f.note for f in found)


def test_a_comprehension_in_a_comprehension_has_its_own_names():
    # whisper's decoding: ``[[t[1:] for t in s] for s in tokens]``, then each row's elements read.
    code = (
        "import torch\n\n"
        "def finalize(tokens: torch.Tensor):\n"
        "    rows = [[t[1:] for t in s] for s in tokens]\n"
        "    return [t[0].tolist() for t in rows]\n"
    )
    assert [(f.rule, f.line) for f in _findings(code, "FX002")] == [("FX002", 5)]


def test_the_first_iterable_of_a_comprehension_is_read_where_the_comprehension_stands():
    # It sees the function's bindings: ``x`` there is the host copy made the line before.
    code = (
        "import torch\n\n"
        "def f():\n"
        "    x = torch.zeros(3, device='cuda')\n    x = x.cpu()\n"
        "    return [v for v in x.tolist()]\n"
    )
    assert [(f.rule, f.line) for f in _findings(code)] == [("FX003", 5)]
