"""Provenance facts: what is a tensor, how sure fixitem is, and what is not one.

Each test asserts the kind or the certainty of an expression (and, where it
matters to users, the findings that follow), so that it fails if the fact is
lost.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from fixitem.codemods.driver.engine import process
from fixitem.codemods.driver.registry import all_rules
from fixitem.codemods.model.context import FileContext
from fixitem.codemods.model.provenance import Certainty, Kind
from fixitem.codemods.model.tree import children_of, walk


def context(code: str) -> FileContext:
    return FileContext.build(Path("facts.py"), code)


def spelled(ctx: FileContext) -> list[tuple[ast.AST | None, str]]:
    """The expressions of the file with their text, in source order (a node before the nodes
    inside it), counted as libcst counted them: a parameter's name is an expression (its
    ``ast.arg`` stands for it), and so are the names of attributes, keywords, functions,
    classes and imports (``None`` stands for them: nothing to ask about)."""
    found: list[tuple[ast.AST | None, str]] = []

    def dotted(name: str) -> None:  # ``a.b.c``: the attribute chain, outermost first, then each name
        parts = name.split(".")
        for i in range(len(parts), 1, -1):
            found.append((None, ".".join(parts[:i])))
        found.extend((None, part) for part in parts)

    def visit(node: ast.AST, parent: ast.AST | None) -> None:
        t = type(node)
        if t is ast.arg:
            found.append((node, node.arg))
        elif t is ast.keyword and node.arg is not None:
            found.append((None, node.arg))
        elif t is ast.alias:
            dotted(node.name)
            if node.asname is not None:
                found.append((None, node.asname))
        elif t in (ast.Global, ast.Nonlocal):
            found.extend((None, name) for name in node.names)
        elif t is ast.ImportFrom and node.module is not None:
            dotted(node.module)
        elif isinstance(node, ast.expr) and not (
            t in (ast.Slice, ast.FormattedValue)  # not expressions to libcst
            or (t is ast.Starred and type(parent) is ast.Call)  # ``*x`` of a call: a libcst ``Arg``
            or type(parent) in (ast.JoinedStr, ast.FormattedValue) and t in (ast.Constant, ast.JoinedStr)
        ):
            found.append((node, ctx.code(node).strip()))
        kids = children_of(node)
        if t in (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef):
            decorators = len(node.decorator_list)
            for kid in kids[:decorators]:
                visit(kid, node)
            found.append((None, node.name))
            kids = kids[decorators:]
        for kid in kids:
            visit(kid, node)
            if t is ast.ExceptHandler and kid is node.type and node.name is not None:
                found.append((None, node.name))
        if t is ast.Attribute:
            found.append((None, node.attr))

    visit(ctx.module, None)
    return found


def expression(ctx: FileContext, text: str, nth: int = 0) -> ast.AST:
    """The ``nth`` expression of the file whose source is ``text`` (a parameter's name is
    its ``ast.arg``)."""
    found = [n for n, code in spelled(ctx) if code == text]
    assert len(found) > nth, f"{text!r} not in the code"
    assert found[nth] is not None, f"{text!r} #{nth} is no expression of ast"
    return found[nth]  # type: ignore[return-value]


def certainty(code: str, text: str, nth: int = 0) -> Certainty:
    ctx = context(code)
    return ctx.certainty(expression(ctx, text, nth))


def kind(code: str, text: str, nth: int = 0) -> Kind:
    ctx = context(code)
    return ctx.kind(expression(ctx, text, nth))


def scan(code: str):
    return process(Path("facts.py"), code, all_rules()).findings


def apply(code: str, unsafe: bool = True):
    return process(Path("facts.py"), code, all_rules(), fix=True, unsafe=unsafe)


AUTOGRAD = (
    "import torch\n\n"
    "class ScaleBias(torch.autograd.Function):\n"
    "    @staticmethod\n"
    "    def forward(ctx, bias, tp_degree, dtype):\n"
    "        ctx.save_for_backward(bias)\n"
    "        if tp_degree > 1:\n"
    "            bias = bias / tp_degree\n"
    "        return bias.to(dtype)\n\n"
    "    @staticmethod\n"
    "    def backward(ctx, grad, flag):\n"
    "        if flag:\n"
    "            grad = grad * 2\n"
    "        return grad.sum(0), None, None\n"
)


def test_autograd_function_parameters_are_tensors_only_where_used_as_tensors():
    assert certainty(AUTOGRAD, "ctx") is Certainty.NOT_TENSOR
    assert certainty(AUTOGRAD, "bias", 1) is Certainty.TENSOR  # saved for backward
    assert certainty(AUTOGRAD, "tp_degree", 1) is Certainty.POSSIBLY
    assert kind(AUTOGRAD, "tp_degree", 1) is not Kind.TENSOR
    assert certainty(AUTOGRAD, "dtype", 1) is Certainty.POSSIBLY
    assert certainty(AUTOGRAD, "grad", 1) is Certainty.TENSOR  # ``grad.sum(0)``
    assert certainty(AUTOGRAD, "flag", 1) is Certainty.POSSIBLY
    # ``if tp_degree > 1:`` is Python control flow on an int: nothing to report, nothing rewritten.
    assert scan(AUTOGRAD) == []
    assert apply(AUTOGRAD).new_text is None


@pytest.mark.parametrize(
    "call",
    [
        "torch.load('ckpt.pt')",
        "torch.load('ckpt.pt', map_location='cpu')",
        "torch.jit.load('model.pt')",
        "torch.hub.load('repo', 'model')",
        "torch.compile(step)",
        "torch.jit.script(step)",
        "torch.jit.trace(step, (x,))",
        "model.state_dict()",
    ],
)
def test_loaded_compiled_and_scripted_objects_are_not_tensors(call):
    code = (
        "import torch\n\n"
        "def step(x: torch.Tensor):\n    return x\n\n"
        f"def main(model, x: torch.Tensor):\n    value = {call}\n    return value\n"
    )
    assert certainty(code, "value", 1) is Certainty.NOT_TENSOR


def test_a_loaded_checkpoint_is_not_selected_with_where():
    code = (
        "import torch\n\n"
        "def resume(path, lr: torch.Tensor):\n"
        "    ckpt = torch.load(path)\n"
        "    if ckpt['step'] > 100:\n"
        "        lr = lr * 0.1\n"
        "    return lr\n"
    )
    assert kind(code, "ckpt", 1) is Kind.OTHER
    assert scan(code) == []


def test_compiled_modules_stay_modules_and_their_outputs_tensors():
    code = (
        "import torch\nfrom torch import nn\n\n"
        "def main(x: torch.Tensor):\n"
        "    model = torch.compile(nn.Linear(2, 2))\n"
        "    y = model(x)\n"
        "    return y\n"
    )
    assert kind(code, "model", 1) is Kind.MODULE
    assert certainty(code, "y", 1) is Certainty.TENSOR


@pytest.mark.parametrize(
    "value",
    ["np.finfo(np.float32).eps", "np.float32(1)", "arr.mean()", "np.finfo(np.float32).tiny * 2", "arr.T[0]"],
)
def test_numpy_scalars_of_any_origin_are_not_tensors(value):
    code = (
        "import numpy as np\nimport torch\n\n"
        "def f(x: torch.Tensor):\n"
        "    arr = np.ones(3)\n"
        f"    v = ({value}).item()\n"
        "    return x * v\n"
    )
    ctx = context(code)
    assert ctx.kind(expression(ctx, f"({value})")) is Kind.NUMPY
    assert ctx.certainty(expression(ctx, f"({value})")) is Certainty.NOT_TENSOR
    assert scan(code) == []


@pytest.mark.parametrize(
    "source",
    [
        # ``.numpy()`` of a value of unknown kind (an ONNX IR constant): a NumPy array.
        "def f(value):\n    axes = value.const_value.numpy()\n",
        # A function annotated to return an array, with ``| None`` and ``Optional``.
        "def g(value) -> np.ndarray | None:\n    return None if value is None else value.data\n\n"
        "def f(value):\n    axes = g(value)\n",
        "def g(value) -> Optional[np.ndarray]:\n    return value.data\n\ndef f(value):\n    axes = g(value)\n",
        "def f(axes: npt.NDArray[np.int64]):\n    pass\n",
    ],
)
def test_numpy_arrays_by_conversion_or_annotation_are_not_tensors(source):
    code = (
        "from typing import Optional\n\nimport numpy as np\nimport numpy.typing as npt\nimport torch\n\n"
        + source + "    if axes is None or axes.tolist() != [1]:\n        return None\n"
    )
    ctx = context(code)
    assert ctx.kind(expression(ctx, "axes.tolist()").func.value) is Kind.NUMPY
    assert scan(code) == []


@pytest.mark.parametrize(
    ("query", "expected"),
    [("ids.size(1) // 30", Kind.NUMBER), ("ids.numel()", Kind.NUMBER), ("ids.dim()", Kind.NUMBER),
     ("ids.size()", Kind.OTHER), ("ids.stride(0)", Kind.NUMBER)],
)
def test_size_queries_of_a_value_of_unknown_kind_are_sizes(query, expected):
    """``num_batches = ids.size(1) // seq_length`` with ``ids`` from another module: a number,
    so a print that formats it with a loss is deferred as safe (it was "may be a tensor")."""
    code = (
        "import torch\nfrom data_utils import Corpus\n\n"
        "ids = Corpus().get_data('train.txt')\n"
        f"size = {query}\n"
        "def step(loss: torch.Tensor):\n"
        "    print('Step[{}], Loss: {:.4f}'.format(size, loss.item()))\n"
    )
    ctx = context(code)
    assert ctx.kind(expression(ctx, query)) is expected
    (finding,) = scan(code)
    # (A ``torch.Size`` is a tuple, which a deferral may not hold: another value of kind OTHER
    # may be a list changed before the replay.)
    assert finding.rule == "FX201" and finding.fix == ("safe" if expected is Kind.NUMBER else "unsafe"), finding


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("x.is_complex()", Kind.NUMBER),
        ("x.dim()", Kind.NUMBER),
        ("x.ndim", Kind.NUMBER),
        ("x.numel()", Kind.NUMBER),
        ("x.size(0)", Kind.NUMBER),
        ("x.dtype == torch.float16", Kind.NUMBER),
        ("x.shape == y.shape", Kind.NUMBER),
        ("x.shape", Kind.OTHER),
        ("x.device", Kind.OTHER),
        ("x.is_sparse", Kind.NUMBER),
    ],
)
def test_metadata_queries_are_not_tensors_and_read_no_value(query, expected):
    code = (
        "import torch\nfrom torch import nn\n\n"
        "class M(nn.Module):\n"
        "    def forward(self, x, y):\n"
        f"        if {query}:\n"
        "            x = x.float()\n"
        "        return x + y\n"
    )
    assert kind(code, query) is expected
    assert certainty(code, query) is Certainty.NOT_TENSOR
    assert scan(code) == []  # a header query is no sync and no graph break


SIZES = (
    "import torch\nfrom torch import nn\n\n"
    "class Window(nn.Module):\n"
    "    def forward(self, x, H, W, mask):\n"
    "        B, L, C = x.shape\n"
    "        assert L == H * W, 'wrong size'\n"
    "        pad = (7 - W % 7) % 7\n"
    "        if pad > 0:\n"
    "            x = x + 1\n"
    "        x = x.view(B, H, W, C)\n"
    "        if mask.sum().item() > 0:\n"
    "            x = x * 2\n"
    "        return x\n"
)


def test_forward_parameters_used_as_sizes_are_not_tensors():
    assert kind(SIZES, "H", 1) is Kind.UNKNOWN and certainty(SIZES, "H", 1) is Certainty.POSSIBLY
    assert kind(SIZES, "pad") is not Kind.TENSOR
    assert certainty(SIZES, "x", 1) is Certainty.TENSOR  # ``x.view(...)``: used as a tensor
    # Only the mask test reads a tensor; ``if pad > 0`` is arithmetic on sizes.
    assert [(f.line, f.rule) for f in scan(SIZES)] == [(12, "FX101")]


def test_a_bare_forward_parameter_is_only_possibly_a_tensor_until_used_as_one():
    code = (
        "import torch\nfrom torch import nn\n\n"
        "class M(nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.fc = nn.Linear(2, 2)\n"
        "    def forward(self, x, scale, flag):\n"
        "        y = scale * 2\n"
        "        if flag:\n"
        "            return self.fc(x)\n"
        "        return y\n"
    )
    # ``ctx.kind`` keeps its meaning (the forward heuristic); certainty says how sure it is.
    assert kind(code, "scale", 1) is Kind.TENSOR
    assert certainty(code, "scale", 1) is Certainty.POSSIBLY
    assert certainty(code, "y", 1) is Certainty.POSSIBLY  # derived from a possible tensor
    assert certainty(code, "flag", 1) is Certainty.POSSIBLY
    assert certainty(code, "x", 1) is Certainty.TENSOR  # passed to a module
    annotated = code.replace("def forward(self, x, scale, flag)", "def forward(self, x, scale: torch.Tensor, flag)")
    assert certainty(annotated, "scale", 1) is Certainty.TENSOR


def test_an_element_of_a_possible_tensor_is_only_possibly_a_tensor():
    """``for i, j in interactions`` over a forward parameter that may be a tensor (or a
    tuple of pairs, as in vit-pytorch): ``i`` is no more certain than what it comes from."""
    code = (
        "from torch import nn\n\n"
        "class M(nn.Module):\n"
        "    def forward(self, feats, interactions):\n"
        "        for i, j in interactions:\n"
        "            if i == 0:\n"
        "                return feats[j]\n"
    )
    assert certainty(code, "interactions", 0) is Certainty.POSSIBLY
    assert certainty(code, "i", 1) is Certainty.POSSIBLY


def test_an_uncertain_read_says_so_in_its_report():
    code = "import torch\n\ndef f(x):\n    return x.item()\n"
    [finding] = scan(code)
    assert finding.rule == "FX001" and finding.note.startswith("(if `x` is a tensor)")


@pytest.mark.parametrize(
    "source",
    [
        "torch.from_file(path, False, 256, dtype=torch.int32)",
        "torch.from_numpy(np.zeros(256, dtype=np.int32))",
        "torch.tensor([0, 0, 0])",
        "torch.tensor(np.zeros(3))",
        "torch.zeros(3, device='cpu')",
        "torch.tensor([0.0, 0.0, 0.0]).uniform_(path, path)",  # in place: where the tensor lives, whatever the bounds
        # Factories without ``device=`` build on the default device: the CPU, as nothing here sets another.
        "torch.zeros(3)", "torch.randint(0, 10, (4,))", "torch.randperm(8)", "torch.empty(4)", "torch.ones(4)",
        "torch.full((4,), 2)", "torch.arange(4)", "torch.multinomial(torch.ones(5), 3)",
        # A legacy tensor type of the CPU's: a copy in host memory, wherever ``data`` was.
        "data.type(torch.LongTensor)", "data.type('torch.FloatTensor').view(-1, 1)",
    ],
)
def test_host_tensors_cost_a_graph_break_in_traced_code_but_no_sync(source):
    code = (
        "import numpy as np\nimport torch\nfrom torch import nn\n\n"
        "def load(path, data: torch.Tensor):\n"
        f"    header = {source}\n"
        "    return int(header[2])\n\n"
        "class M(nn.Module):\n"
        "    def forward(self, x, path):\n"
        f"        data = x\n"
        f"        header = {source}\n"
        "        return x * int(header[2])\n"
    )
    ctx = context(code)
    assert ctx.on_cpu(expression(ctx, "header[2]", 0))
    findings = scan(code)
    # Outside traced code the read costs nothing; in ``forward`` it breaks the graph, no sync.
    assert [(f.line, f.costs) for f in findings] == [(13, ("graph-break",))]
    assert "host memory" in findings[0].note


def test_a_device_tensor_type_keeps_the_read_a_sync():
    code = "import torch\n\ndef f(y: torch.Tensor):\n    z = y.type(torch.cuda.LongTensor)\n    return int(z.max())\n"
    assert [(f.rule, f.line, f.costs) for f in scan(code)] == [("FX001", 5, ("host-sync",))]


def test_the_copy_to_the_host_syncs_but_reading_the_copy_does_not():
    code = "import torch\n\ndef f(x: torch.Tensor):\n    host = x.cpu()\n    return int(host[0]), host.tolist()\n"
    assert [(f.rule, f.line) for f in scan(code)] == [("FX003", 4)]


@pytest.mark.parametrize(
    "source",
    [
        "torch.tensor([0, 0, 0], device='cuda')", "torch.tensor(x)", "torch.zeros(3, device=x.device)",
        "x.cuda()", "x.float()", "torch.multinomial(x, 3)", "torch.randint(0, 10, (4,), device=x.device)",
        "torch.tensor([0, 0, 0]).add(x)", "torch.tensor([0, 0, 0]).copy_(x)",
        "torch.tensor([1, 2]).to(x.device)", "torch.stack([torch.tensor([1.0]), unknown])",
        "torch.add(torch.tensor([1.0]), self_weights)",
    ],
)
def test_tensors_that_may_live_on_a_device_still_sync(source):
    code = f"import torch\n\ndef f(x: torch.Tensor, unknown, self_weights):\n    header = {source}\n    return int(header[2])\n"
    ctx = context(code)
    assert not ctx.on_cpu(expression(ctx, "header[2]"))
    assert [f.costs for f in scan(code)] == [("host-sync",)]


@pytest.mark.parametrize(
    "source", ["torch.tensor([1, 2, 3])", "torch.tensor([1, 2, 3]).mul_(2)", "torch.zeros(3)", "torch.randperm(3)"]
)
def test_a_changed_default_device_means_no_host_tensor(source):
    code = (
        "import torch\n\ntorch.set_default_device('cuda')\n\n"
        f"def f():\n    header = {source}\n    return int(header[2])\n"
    )
    ctx = context(code)
    assert not ctx.on_cpu(expression(ctx, "header[2]"))
    assert len(scan(code)) == 1


def test_string_formatting_gives_a_string():
    code = "import torch\n\ndef f(loss: torch.Tensor):\n    s = '%.3f' % loss\n    t = '{}'.format(loss)\n    return s, t\n"
    assert kind(code, "s", 1) is Kind.OTHER
    assert kind(code, "t", 1) is Kind.OTHER


def test_a_forward_parameter_compared_with_a_shape_is_a_size():
    code = (
        "import torch\nfrom torch import nn\n\n"
        "class Merge(nn.Module):\n"
        "    def forward(self, x, H, W):\n"
        "        B, L, C = x.shape\n"
        "        assert L == H * W, 'wrong size'\n"
        "        if H % 2 == 1:\n"
        "            x = x + 1\n"
        "        return x\n"
    )
    assert kind(code, "H", 1) is Kind.UNKNOWN
    assert scan(code) == []


# -- what a read sees in straight-line code ---------------------------------------------------


def test_a_name_rebound_to_a_number_by_a_tuple_assignment_is_a_number_after_it():
    """The tutorial's `loss, current = loss.item(), batch * len(X)`: `loss` is then a float."""
    code = (
        "import torch\n\n"
        "def train(model, batches):\n"
        "    for batch, (X, y) in enumerate(batches):\n"
        "        loss = model(X).sum()\n"
        "        loss.backward()\n"
        "        if batch % 100 == 0:\n"
        "            loss, current = loss.item(), batch * len(X)\n"
        "            print(f'loss: {loss:>7f}  [{current:>5d}]')\n"
    )
    assert kind(code, "loss", 4) is Kind.NUMBER  # in the f-string
    assert kind(code, "loss", 3) is Kind.TENSOR  # read by `.item()`, before the rebinding
    assert [f.rule for f in scan(code)] == ["FX001"]  # the read; no "tensor formatted into text"


def test_a_name_rebound_from_its_own_read_is_the_tensor_on_the_right():
    """`t = t.tolist()` after `t = torch.tensor(..., device=...)`: the read is reported."""
    code = (
        "import torch\n\n"
        "def synchronize(count, total):\n"
        "    t = torch.tensor([count, total], device='cuda')\n"
        "    t = t.tolist()\n"
        "    return t\n\n"
        "def report(loss: torch.Tensor):\n"
        "    loss = loss.item()\n"
        "    print(f'loss: {loss:>7f}')\n"
    )
    assert certainty(code, "t", 2) is Certainty.TENSOR
    assert certainty(code, "loss", 2) is Certainty.TENSOR  # the annotated parameter, before the rebinding
    findings = scan(code)
    assert [(f.rule, f.line) for f in findings] == [("FX002", 5), ("FX001", 9)]
    assert not findings[1].note.startswith("(if")


@pytest.mark.parametrize(
    "body",
    [
        # A later statement of the loop runs before the read on the next pass.
        "    for _ in range(3):\n        print(f'{loss}')\n        loss = loss.item()\n",
        # The try may have stopped before the assignment.
        "    try:\n        loss = loss.item()\n    except ValueError:\n        print(f'{loss}')\n",
        # Bound in another way.
        "    loss += 1\n    print(f'{loss}')\n",
        "    loss, = loss.tolist()\n    print(f'{loss}')\n",
    ],
)
def test_a_read_that_may_see_several_bindings_keeps_the_scope_wide_kind(body):
    code = "import torch\n\ndef f(x: torch.Tensor):\n    loss = x.sum()\n" + body
    ctx = context(code)
    read = [n for n in walk(ctx.module) if isinstance(n, ast.Name) and n.id == "loss"][-1]
    assert ctx.provenance.reaching(read) is None


def test_a_module_name_some_function_declares_global_keeps_the_scope_wide_kind():
    code = (
        "import torch\n\nx = torch.ones(2)\nloss = x.sum()\n\n"
        "def reset():\n    global loss\n    loss = x.sum()\n\n"
        "loss = loss.item()\nreset()\nprint(f'{loss}')\n"
    )
    ctx = context(code)
    read = [n for n in walk(ctx.module) if isinstance(n, ast.Name) and n.id == "loss"][-1]
    assert ctx.provenance.reaching(read) is None
    assert ctx.kind(read) is not Kind.NUMBER


def test_the_values_and_indices_of_a_tensor_pair_are_tensors():
    """`_, predicted = outputs.max(1)`: the classic accuracy loop keeps a safe fix."""
    code = (
        "import torch\nfrom torch import nn\n\n"
        "def evaluate(loader):\n"
        "    net = nn.Linear(4, 3)\n"
        "    correct = 0\n"
        "    for x, y in loader:\n"
        "        outputs = net(x)\n"
        "        _, predicted = outputs.max(1)\n"
        "        top = outputs.topk(2).indices\n"
        "        correct += predicted.eq(y).sum().item()\n"
        "    return correct\n"
    )
    assert certainty(code, "predicted", 1) is Certainty.TENSOR
    assert kind(code, "outputs.topk(2).indices") is Kind.TENSOR
    assert kind(code, "outputs.max(1)") is Kind.OTHER  # the pair itself
    [finding] = [f for f in scan(code) if f.rule == "FX202"]
    assert finding.fix == "safe"


@pytest.mark.parametrize("method", ["to(device)", "cuda()", "eval()", "train()", "half()"])
def test_a_module_moved_or_switched_is_still_the_module(method):
    code = (
        "import torch\nfrom torch import nn\n\n"
        "def run(x, device):\n"
        f"    D = nn.Linear(4, 1).{method}\n"
        "    D = D.to(device)\n"
        "    score = D(x)\n"
        "    print(f'score {score.mean().item():.3f}')\n"
    )
    assert kind(code, "D", 2) is Kind.MODULE
    [finding] = scan(code)
    assert (finding.rule, finding.fix) == ("FX201", "safe")


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        ("from tqdm import tqdm\n", Kind.NUMBER),  # for i in tqdm(range(3), ...)
        ("from tqdm import trange as tqdm\n", Kind.NUMBER),  # trange(n) yields ints too
        ("from mybars import tqdm\n", Kind.UNKNOWN),  # not the progress bar fixitem knows
    ],
)
def test_a_progress_bar_yields_the_items_of_what_it_wraps(header, expected):
    code = header + "import torch\n\nfor i in tqdm(range(3), mininterval=10.0):\n    print(i)\n"
    assert kind(code, "i", 1) is expected


def test_jax_arrays_are_not_tensors():
    """A script that logs JAX values with a torch SummaryWriter (cleanrl's *_jax.py)."""
    code = (
        "import jax\nimport jax.numpy as jnp\nimport torch\n\n"
        "def log(writer, step):\n"
        "    loss = jnp.mean(jnp.ones(3))\n"
        "    key = jax.random.PRNGKey(0)\n"
        "    writer.add_scalar('loss', loss.item(), step)\n"
    )
    assert certainty(code, "loss", 1) is Certainty.NOT_TENSOR
    assert certainty(code, "key", 0) is Certainty.NOT_TENSOR
    assert scan(code) == []


def test_a_long_chain_of_rebindings_is_followed_without_recursing_too_deep():
    """`x = x + 1` four hundred times: each read follows the one before only so far, then
    takes the name's scope-wide kind; no RecursionError."""
    code = "import torch\n\ndef f(t: torch.Tensor):\n    x = t.sum()\n" + "    x = x + 1\n" * 400
    code += "    print(f'{x}')\n    return x.item()\n"
    result = process(Path("facts.py"), code, all_rules())
    assert result.error is None
    assert [(f.rule, f.line) for f in result.findings] == [("FX005", 405), ("FX001", 406)]


@pytest.mark.parametrize("setting", ["torch.set_default_device('cuda')", "with torch.device('cuda'):\n    pass"])
def test_a_default_device_set_in_another_file_of_the_run_means_no_host_tensor(tmp_path, setting):
    from fixitem.api import scan as scan_files

    (tmp_path / "sample.py").write_text(
        "import torch\n\ndef f():\n    idx = torch.randint(0, 10, (4,))\n    return int(idx[0])\n"
    )
    alone = scan_files([tmp_path / "sample.py"], cache=False, jobs=1)
    assert [f.rule for r in alone.files for f in r.findings] == []  # a CPU tensor: no sync
    (tmp_path / "main.py").write_text(f"import torch\n\n{setting}\n")
    together = scan_files([tmp_path], cache=False, jobs=1)
    assert [(r.path.name, f.costs) for r in together.files for f in r.findings] == [("sample.py", ("host-sync",))]


def test_a_model_built_on_the_meta_device_elsewhere_leaves_host_tensors_on_the_host(tmp_path):
    # ``with torch.device("meta"):`` (how large models are built without memory) makes no
    # factory's tensor one that a read waits for: the file's CPU tensor is still no sync.
    from fixitem.api import scan as scan_files

    (tmp_path / "sample.py").write_text(
        "import torch\n\ndef f():\n    idx = torch.randint(0, 10, (4,))\n    return int(idx[0])\n"
    )
    (tmp_path / "build.py").write_text(
        "import torch\n\ndef empty(cls):\n    with torch.device('meta'):\n        return cls()\n"
    )
    together = scan_files([tmp_path], cache=False, jobs=1)
    assert [f.rule for r in together.files for f in r.findings] == []


def test_numpy_of_a_tensor_is_no_host_sync_and_no_graph_break():
    # ``.numpy()`` raises for a device tensor: a tensor it reads is in host memory already.
    # In traced code Dynamo traces it as a NumPy array (torch 2.13: ``forward`` returning
    # ``x.numpy()`` compiles with ``fullgraph=True``), so it costs nothing there either.
    code = (
        "import torch\nfrom torch import nn\n\n"
        "def f(x: torch.Tensor):\n    return x.detach().numpy(), x.cpu().numpy()\n\n"
        "class M(nn.Module):\n    def forward(self, x):\n        return x.numpy()\n"
    )
    assert [(f.line, f.costs) for f in scan(code)] == [(5, ("host-sync",))]


def test_a_copy_to_host_memory_costs_no_graph_break():
    # Dynamo traces ``.cpu()`` into the graph: a device tensor's copy is a host sync only,
    # and a copy of a tensor in host memory costs nothing, in traced code or not.
    code = (
        "import numpy as np\nimport torch\nfrom torch import nn\n\n"
        "class M(nn.Module):\n    def forward(self, x):\n"
        "        arr = np.ones((2, 2), dtype=np.float32)\n"
        "        y = torch.from_numpy(arr.copy()).float().cpu()\n"
        "        return x.cpu() + y\n"
    )
    assert [(f.rule, f.line, f.costs) for f in scan(code)] == [("FX003", 9, ("host-sync",))]


def test_a_value_compared_with_a_string_is_a_python_bool():
    # ``mode == "edit"`` reads nothing whatever ``mode`` is (a tensor compared with a string is
    # ``False``), so ``forward``'s presumed-tensor parameters are not tested there.
    code = (
        "import torch\n\nclass M(torch.nn.Module):\n    def forward(self, x, mode, texts):\n"
        "        if mode == \"edit\":\n            x = x + 1\n"
        "        if len(texts) == 1 and texts[0] != \" \":\n            x = x * 2\n"
        "        if x.sum() == 0:\n            x = x * 3\n"
        "        return x\n"
    )
    assert [(f.rule, f.line) for f in scan(code)] == [("FX101", 9)]  # a tensor compared with a number


@pytest.mark.parametrize(
    "text, sets",
    [
        ("torch.set_default_device('cuda')", True), ("from torch import set_default_device", True),
        ("torch.set_default_tensor_type(torch.cuda.FloatTensor)", True), ("with torch.device('cuda'):", True),
        ("with torch.device(value.device):", True), ("torch.set_default_tensor_type(ttype)", True),
        # A device written out that no read waits for: the CPU, or ``meta`` (no data at all).
        ("with device('meta'):", False), ('with torch.device("meta"):', False), ("torch.set_default_device('cpu')", False),
        ("torch.set_default_tensor_type(torch.DoubleTensor)", False), ("with torch.device('meta', 0):", True),
        ("with torch.cuda.device(0):", False),  # the current CUDA device, not the default device
        ("x = torch.zeros(3, device='cuda')", False),
        ("#     torch.set_default_tensor_type(ttype)", False),  # commented out
    ],
)
def test_what_sets_a_default_device(text, sets):
    from fixitem.codemods.model.devices import may_set_default_device, sets_default_device

    source = f"import torch\n{text}\n"
    assert sets_default_device(source) is sets
    # The run's files are read as bytes, and decoded only where they may set it.
    assert may_set_default_device(source.encode()) or not sets


def test_only_the_files_that_may_set_a_default_device_or_replace_a_stream_are_decoded():
    from fixitem.codemods.model.devices import may_set_default_device, sets_default_device
    from fixitem.codemods.model.streams import may_replace_streams, replaces_streams

    # A space of Unicode's between ``with`` and ``torch``, in a string: ``\s`` matches it.
    spaced = "import torch\nCODE = 'with\u00a0torch.device(\"cuda\"):'\n"
    assert sets_default_device(spaced) and may_set_default_device(spaced.encode())
    plain = "import torch\nx = torch.zeros(3, device='cuda')\nprint(x.device)\n"
    assert not may_set_default_device(plain.encode()) and not may_replace_streams(plain.encode())
    tee = "import sys\nsys.stdout = Logger('log.txt')\n"
    assert replaces_streams(tee) and may_replace_streams(tee.encode())


@pytest.mark.parametrize(("init", "on_host"), [
    ("self.ixes = torch.randperm(100)", True),  # minGPT's dataset: a host tensor of the object
    ("self.ixes = torch.randperm(100)\n        self.ixes = torch.arange(5)", True),
    ("self.ixes = torch.randperm(100, device='cuda')", False),
    ("self.ixes = torch.randperm(100)\n        self.ixes = self.ixes.cuda()", False),
    ("self.register_buffer('ixes', torch.randperm(100))", False),  # a buffer moves with the module
])
def test_an_attribute_the_class_makes_on_the_host_is_read_without_a_sync(init, on_host):
    code = (
        "import torch\n\n"
        "class DS(torch.nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        f"        {init}\n"
        "    def get(self, i):\n"
        "        return self.ixes[i].item()\n"
    )
    ctx = context(code)
    assert ctx.on_cpu(expression(ctx, "self.ixes[i]")) is on_host
    assert len(scan(code)) == (0 if on_host else 1)


@pytest.mark.parametrize(("body", "on_host"), [
    ("losses = torch.zeros(n)\n    return losses.mean()", True),
    ("if n:\n        return torch.zeros(n).mean()\n    return torch.ones(1).sum()", True),
    ("return torch.zeros(n, device='cuda').mean()", False),
    ("return x.mean()", False),  # what it is given may be anywhere
    ("if n:\n        return torch.zeros(n).mean()", True),  # or ``None``: nothing to wait for either way
    ("return summary(n - 1) * 2", False),  # asks for itself
])
def test_what_a_function_of_the_file_returns_is_in_host_memory_when_every_return_is(body, on_host):
    code = f"import torch\n\n\ndef summary(n: int, x: torch.Tensor):\n    {body}\n\n\nprint(summary(3, y))\n"
    ctx = context(code)
    assert ctx.on_cpu(expression(ctx, "summary(3, y)")) is on_host


def test_the_binding_a_read_sees_decides_where_its_tensor_lives():
    # detr's segmentation: ``m_id`` is rebound to ``torch.from_numpy(...)`` before it is read.
    code = (
        "import torch\n\n"
        "def f(masks, arr):\n"
        "    x = torch.randn(3).cuda()\n    x = x.float()\n    print(x.sum().item())\n"
        "    m_id = masks.argmax(-1)\n    m_id = torch.from_numpy(arr)\n    print(m_id.eq(1).sum().item())\n"
        "    y = torch.from_numpy(arr)\n    y = y.float()\n    print(y.sum().item())\n"
    )
    assert [f.line for f in scan(code)] == [6]


NET = (
    "import torch\nfrom torch import nn\n\n"
    "class Net(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
    "        self.fc = nn.Linear(4, 2)\n\n    def forward(self, x):\n        return self.fc(x)\n\n"
    "def test():\n    net = Net()\n    net.eval()\n    y = net(torch.randn(1, 4))\n    print(y)\n\n"
    "def builtin():\n    net = nn.Linear(4, 2)\n    print(net(torch.randn(1, 4)))\n"
)


def test_a_module_built_and_never_moved_gives_host_tensors_of_host_tensors():
    # pytorch-cifar's ``test()`` beside each model: nothing there waits for a device.
    assert scan(NET) == []
    moved = NET + "\ndef moved():\n    net = nn.Linear(4, 2)\n    net.cuda()\n    print(net(torch.randn(1, 4)))\n"
    # A file that moves a module somewhere: its own classes' outputs may be on a device (line
    # 16); ``nn.Linear`` built and never moved in its function is still on the host (line 20).
    assert [f.line for f in scan(moved)] == [16, 25]
    others = NET + (
        "\ndef given(x):\n    net = nn.Linear(4, 2)\n    print(net(x))\n"
        "\ndef passed(prepare):\n    net = nn.Linear(4, 2)\n    prepare(net)\n    print(net(torch.randn(1, 4)))\n"
        "\ndef placed():\n    net = nn.Linear(4, 2, device='cuda')\n    print(net(torch.randn(1, 4)))\n"
    )
    assert [f.line for f in scan(others)] == [16, 24, 29, 33]  # (``device=`` in the file: line 16 too)


def test_a_copy_to_host_that_is_read_shows_its_receiver_is_a_tensor():
    # guided-diffusion's ``ts.cpu().numpy()`` and detr's ``tup.cpu().tolist()`` on parameters:
    # a module's ``cpu()`` gives the module, which has no ``numpy()``; an array has no ``cpu()``.
    code = (
        "import torch\n\n"
        "def log_loss_dict(ts, values):\n"
        "    for t, loss in zip(ts.cpu().numpy(), values.detach().cpu().numpy()):\n        print(t, loss)\n\n"
        "def to_tuple(tup):\n    return tuple(tup.cpu().tolist())\n\n"
        "def moved(model):\n    model.cpu()\n    return model\n"
    )
    assert [(f.rule, f.line, f.col) for f in scan(code)] == [("FX003", 4, 24), ("FX003", 4, 42), ("FX003", 8, 18)]
    # sam3_video's processor: under ``isinstance(sizes, torch.Tensor)`` the copy says nothing
    # of ``sizes`` elsewhere (a list there: ``int(sizes[0])`` reads no tensor); the copy itself
    # is a tensor's (narrowed by the test).
    guarded = (
        "import torch\n\n"
        "def dims(sizes):\n"
        "    if isinstance(sizes, torch.Tensor):\n        sizes = sizes.cpu().tolist()\n"
        "    return int(sizes[0]), int(sizes[1])\n"
    )
    assert [(f.rule, f.line) for f in scan(guarded)] == [("FX003", 5)]


def test_a_parameter_annotated_with_a_torch_nn_module_class_is_a_module():
    code = (
        "import torch\nfrom torch import nn\n\n"
        "def evaluate(model: nn.Linear, x: torch.Tensor):\n"
        "    with torch.no_grad():\n        loss = model(x).sum()\n"
        "    print(float(loss))\n"
    )
    assert [(f.rule, f.line) for f in scan(code)] == [("FX201", 7)]


@pytest.mark.parametrize("source", ["y.max(1)[0]", "y.max(dim=1)[1]", "y.sort(-1)[0]", "y.max(1).values"])
def test_an_element_of_a_values_and_indices_pair_is_a_certain_tensor(source):
    # Rainbow's ``q.max(1)[0]``: as certain as ``q.max(1).values``.
    code = f"import torch\n\n\ndef f(y: torch.Tensor):\n    return {source}\n"
    ctx = context(code)
    assert ctx.certainty(expression(ctx, source)) is Certainty.TENSOR


def test_a_truth_test_of_none_or_a_tensor_is_reported():
    """``class_acc = None`` on one path and a tensor on another (ConvNeXt's engine), then
    ``if class_acc:``: where it holds the tensor, the test reads it on the host."""
    code = (
        "import torch\n\n"
        "def evaluate(model: torch.nn.Module, loader, mixup):\n"
        "    for samples, targets in loader:\n"
        "        output = model(samples)\n"
        "        if mixup is None:\n"
        "            class_acc = (output.max(-1)[-1] == targets).float().mean()\n"
        "        else:\n"
        "            class_acc = None\n"
        "        if class_acc:\n"
        "            print('acc', class_acc)\n"
    )
    ctx = context(code)
    assert ctx.provenance.kind_unless_none(expression(ctx, "class_acc", 2)) is Kind.TENSOR
    # ``if class_acc:`` true proves it is not None: the print's is the tensor.
    assert ctx.kind(expression(ctx, "class_acc", 3)) is Kind.TENSOR
    assert [(f.rule, f.line, f.fix) for f in scan(code)] == [("FX101", 10, "none"), ("FX005", 11, "none")]
    # A name that is None or a number is no read.
    assert scan(code.replace("(output.max(-1)[-1] == targets).float().mean()", "0.5")) == []
