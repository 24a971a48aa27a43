"""FX202: running sums of tensor values read every step (``total += loss.item()``)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import libcst as cst

from ..context import FileContext
from ..dtypes import certainly_floating
from ..provenance import Kind, Scope
from ..rule import Fix, Invalid, Report, Rule, Safety, Valid, dedent
from ..syncs import SyncSite
from ..tensor_values import _plain_number, method_call
from ..tree import number_of, subtree_stop

# What a name may hold at a point of its function, as seen by :class:`_Flow`.
ACC = "the running total"  # bound by a start (``total = 0``) or a step (``total += x.item()``)
OTHER = "another value"  # bound any other way (``total /= n``, ``total = total / n``)
UNBOUND = "unbound"  # not bound yet: reading it fails the same way before and after

# ``total OP= rhs`` on a Python number is exactly ``total = total OP rhs``.
AUG_OPERATORS: dict[type, type] = {
    cst.AddAssign: cst.Add, cst.SubtractAssign: cst.Subtract, cst.MultiplyAssign: cst.Multiply,
    cst.DivideAssign: cst.Divide, cst.FloorDivideAssign: cst.FloorDivide, cst.ModuloAssign: cst.Modulo,
    cst.PowerAssign: cst.Power, cst.MatrixMultiplyAssign: cst.MatrixMultiply,
    cst.LeftShiftAssign: cst.LeftShift, cst.RightShiftAssign: cst.RightShift,
    cst.BitAndAssign: cst.BitAnd, cst.BitOrAssign: cst.BitOr, cst.BitXorAssign: cst.BitXor,
}
# Python ints however the tensor they ask about is stored: ``n`` in ``loss.item() * n``.
SIZE_METHODS = frozenset({"size", "numel", "nelement", "dim"})


@dataclass
class _Total:
    scope: Scope
    name: str
    inits: list[tuple[cst.Assign, cst.BaseExpression, cst.Name]] = field(default_factory=list)  # statement, start, target
    # statement (``total += v`` or ``total = total + v``), what it adds (``v``), the read in it
    steps: list[tuple[cst.AugAssign | cst.Assign, cst.BaseExpression, SyncSite]] = field(default_factory=list)
    loads: list[cst.Name] = field(default_factory=list)
    rebinds: list[cst.CSTNode] = field(default_factory=list)  # other Assign / AugAssign of the name
    problem: str = ""


def _number_literal(expr: cst.BaseExpression) -> str | None:
    """``"int"`` / ``"float"`` for a numeric literal (``0``, ``0.0``, ``-1.5``), else None."""
    if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, (cst.Minus, cst.Plus)):
        expr = expr.expression
    if isinstance(expr, cst.Integer):
        return "int"
    if isinstance(expr, cst.Float):
        return "float"
    return None


def _unpacked_start(
    ctx: FileContext, value: cst.BaseExpression, name: str
) -> tuple[cst.Assign, cst.BaseExpression, cst.Name] | None:
    """``total`` started by a literal in ``a, total = 0, 0.0``: (the statement, the literal, the target)."""
    element = ctx.parents.get(value)
    values = ctx.parents.get(element) if isinstance(element, cst.Element) else None
    statement = ctx.parents.get(values) if isinstance(values, (cst.Tuple, cst.List)) else None
    if not isinstance(statement, cst.Assign) or statement.value is not values or len(statement.targets) != 1:
        return None
    target = statement.targets[0].target
    if not isinstance(target, (cst.Tuple, cst.List)) or len(target.elements) != len(values.elements):  # type: ignore[union-attr]
        return None
    index = [e.value for e in values.elements].index(value)  # type: ignore[union-attr]
    named = target.elements[index].value
    if not _number_literal(value) or not isinstance(named, cst.Name) or named.value != name:
        return None
    return statement, value, named


def _atom(expr: cst.BaseExpression) -> cst.BaseExpression:
    """``expr`` as the right operand of a binary operator: parenthesised unless it is an atom."""
    if isinstance(expr, (cst.Name, cst.Attribute, cst.Call, cst.Subscript, cst.Integer, cst.Float,
                         cst.SimpleString)) or expr.lpar:
        return expr
    return expr.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])


class _Substitute(cst.CSTTransformer):
    def __init__(self, replacements: dict[cst.CSTNode, cst.CSTNode]) -> None:
        super().__init__()
        self.replacements = replacements

    def on_leave(self, original_node, updated_node):  # type: ignore[override]
        return self.replacements.get(original_node, updated_node)


class _Flow:
    """What the name of a total may hold at each of its reads, steps and rebindings.

    A forward walk over the statements of the total's function (or module),
    joining the branches of ``if`` / ``try`` and iterating loops to a fixed
    point. A state is a set of ``ACC`` / ``OTHER`` / ``UNBOUND``; more states
    than the program can reach only make the rule refuse more often.
    """

    def __init__(self, total: _Total, anchors: dict[cst.CSTNode, list[cst.Name]], kinds: dict[cst.CSTNode, str]) -> None:
        self.total = total
        self.anchors = anchors  # statement (or compound header) -> the loads of the name it evaluates
        self.kinds = kinds  # binding statement -> "init", "step" or "rebind"
        self.at: dict[cst.CSTNode, set[str]] = {}  # load / step / rebind -> states seen there
        self.loops: list[tuple[list[frozenset], list[frozenset]]] = []  # (breaks, continues)
        self.problem = ""

    def seen(self, node: cst.CSTNode, state: frozenset) -> None:
        self.at.setdefault(node, set()).update(state)

    def read(self, anchor: cst.CSTNode, state: frozenset) -> None:
        for load in self.anchors.get(anchor, ()):
            self.seen(load, state)

    def block(self, body: cst.BaseSuite | Sequence[cst.BaseStatement], state: frozenset) -> frozenset:
        if isinstance(body, cst.SimpleStatementSuite):
            return self.small_statements(body.body, state)
        statements = body.body if isinstance(body, cst.IndentedBlock) else body
        for statement in statements:
            state = self.statement(statement, state)
        return state

    def small_statements(self, body: Sequence[cst.BaseSmallStatement], state: frozenset) -> frozenset:
        for small in body:
            state = self.small(small, state)
        return state

    def small(self, node: cst.BaseSmallStatement, state: frozenset) -> frozenset:
        self.read(node, state)
        if isinstance(node, (cst.Return, cst.Raise)):
            return frozenset()
        if isinstance(node, (cst.Break, cst.Continue)):
            if self.loops:
                self.loops[-1][0 if isinstance(node, cst.Break) else 1].append(state)
            return frozenset()
        kind = self.kinds.get(node)
        if kind is None:
            return state
        self.seen(node, state)
        return frozenset({ACC}) if kind in ("init", "step") else frozenset({OTHER})

    def finish(self, node: cst.BaseCompoundStatement, state: frozenset) -> frozenset:
        """After a loop (or ``with``) marked ``"finish"``: ``total = total.value()`` reads it once."""
        if self.kinds.get(node) != "finish":
            return state
        self.seen(node, state)
        return frozenset({OTHER}) if state else state

    def orelse(self, node: cst.CSTNode | None, state: frozenset) -> frozenset:
        if node is None:
            return state
        if isinstance(node, cst.If):  # elif
            return self.statement(node, state)
        return self.block(node.body, state)  # type: ignore[attr-defined]

    def statement(self, node: cst.BaseStatement, state: frozenset) -> frozenset:
        if isinstance(node, cst.SimpleStatementLine):
            return self.small_statements(node.body, state)
        if isinstance(node, cst.If):
            self.read(node, state)
            return self.block(node.body, state) | self.orelse(node.orelse, state)
        if isinstance(node, (cst.For, cst.While)):
            if isinstance(node, cst.For):
                self.read(node, state)  # the iterable is evaluated once
            head = state
            while True:
                self.loops.append(([], []))
                if isinstance(node, cst.While):
                    self.read(node, head)
                out = self.block(node.body, head)
                breaks, continues = self.loops.pop()
                new_head = head | out | frozenset().union(*continues)
                if new_head == head:
                    break
                head = new_head
            return self.finish(node, self.orelse(node.orelse, head) | frozenset().union(*breaks))
        if isinstance(node, cst.With):
            self.read(node, state)
            return self.finish(node, self.block(node.body, state))
        if isinstance(node, (cst.Try, cst.TryStar)):
            bound = frozenset(
                ACC if self.kinds[n] in ("init", "step") else OTHER
                for n in self.kinds if _inside(n, node.body)
            )
            body = self.block(node.body, state)
            raised = state | bound | body  # where an exception may leave the try body
            out = self.orelse(node.orelse, body)
            for handler in node.handlers:
                out |= self.block(handler.body, raised)
            if node.finalbody is not None:
                out = self.block(node.finalbody.body, out | raised)
            return out
        if isinstance(node, (cst.FunctionDef, cst.ClassDef)):
            self.read(node, state)  # decorators, defaults and bases run here; the body does not
            return state
        # ``match`` and anything newer: not followed.
        if any(_inside(n, node) for n in [*self.anchors, *self.kinds]):
            self.problem = f"`{self.total.name}` is used inside a `{type(node).__name__.lower()}` statement"
        return state


def _inside(node: cst.CSTNode, root: cst.CSTNode) -> bool:
    """Is ``node`` within ``root``'s subtree?"""
    n, r = number_of(node), number_of(root)
    if n is None or r is None:
        return False
    return r <= n < subtree_stop(r)


def _conditional(parent: cst.CSTNode, child: cst.CSTNode, loops: bool = True) -> bool:
    """Can ``parent`` run without evaluating ``child`` (an ``if`` branch, a loop body, an
    ``except`` handler, a branch of ``x if c else y``, the right operand of ``and`` / ``or``)?
    Without ``loops``, a loop runs its body and its ``else`` (maybe many times, maybe never)."""
    if isinstance(parent, (cst.For, cst.While)) and not loops:
        return False
    if isinstance(parent, (cst.If, cst.While, cst.IfExp)):
        return child is not parent.test
    if isinstance(parent, cst.For):
        return child is not parent.iter
    if isinstance(parent, cst.BooleanOperation):
        return child is not parent.left
    return isinstance(parent, (cst.ExceptHandler, cst.ExceptStarHandler))


def _unconditional_child(ctx: FileContext, node: cst.CSTNode, stop: cst.CSTNode) -> cst.CSTNode | None:
    """The child of ``stop`` that holds ``node``, if evaluating that child evaluates ``node``
    (once, or as many times as a loop in between runs); None otherwise."""
    child = node
    for parent in ctx.ancestors(node):
        if parent is stop:
            return child
        if _conditional(parent, child, loops=False):
            return None
        child = parent
    return None


def _read_after(ctx: FileContext, node: cst.CSTNode, statement: cst.CSTNode) -> tuple[bool, bool]:
    """(Is ``node``, a read later than ``statement``, evaluated whenever the code after
    ``statement`` runs to the end of a block that holds ``statement``? Is it in a loop there,
    maybe evaluated many times?)"""
    blocks = {a for a in ctx.ancestors(statement) if isinstance(a, (cst.IndentedBlock, cst.Module))}
    child, always, looped = node, True, False
    for parent in ctx.ancestors(node):
        if parent in blocks:
            return always, looped
        if _conditional(parent, child):
            always = False
            looped = looped or isinstance(parent, (cst.For, cst.While))
        child = parent
    return False, looped


def _following(
    ctx: FileContext, loop: cst.For | cst.While, name: str
) -> tuple[cst.BaseStatement, cst.BaseStatement] | None:
    """(The statement that ends with ``loop``: the loop, or the ``with`` statements it ends;
    the statement to read ``name`` before: the next one, after other totals read there),
    or None if nothing follows in its block."""
    end: cst.BaseStatement = loop
    while True:
        block = ctx.parents.get(end)
        owner = ctx.parents.get(block) if block is not None else None
        if isinstance(block, cst.IndentedBlock) and isinstance(owner, cst.With) and block.body[-1] is end:
            end = owner
            continue
        break
    if not isinstance(block, (cst.IndentedBlock, cst.Module)):
        return None
    index = next(i for i, statement in enumerate(block.body) if statement is end) + 1
    while index < len(block.body) and _reads_accumulator(block.body[index], name):
        index += 1
    if index == len(block.body):
        return None
    return end, block.body[index]


def _reads_accumulator(statement: cst.BaseStatement, name: str) -> bool:
    """Is ``statement`` ``other = other.value()``, another total read after its loop?"""
    if not isinstance(statement, cst.SimpleStatementLine) or len(statement.body) != 1:
        return False
    assign = statement.body[0]
    if not isinstance(assign, cst.Assign) or len(assign.targets) != 1 or not isinstance(assign.targets[0].target, cst.Name):
        return False
    if assign.targets[0].target.value == name:
        return False
    call = assign.value
    return (isinstance(call, cst.Call) and not call.args and isinstance(call.func, cst.Attribute)
            and call.func.attr.value == "value" and isinstance(call.func.value, cst.Name)
            and call.func.value.value == assign.targets[0].target.value)


def _spelled_out_step(assign: cst.Assign) -> cst.BaseExpression | None:
    """What ``total = total + v`` (``total = v + total``, ``total = total - v``) adds: ``v``."""
    if len(assign.targets) != 1 or not isinstance(assign.targets[0].target, cst.Name):
        return None
    name, value = assign.targets[0].target.value, assign.value
    if not isinstance(value, cst.BinaryOperation) or not isinstance(value.operator, (cst.Add, cst.Subtract)) or value.lpar:
        return None
    if isinstance(value.left, cst.Name) and value.left.value == name and not value.left.lpar:
        return value.right
    if isinstance(value.operator, cst.Add) and isinstance(value.right, cst.Name) and value.right.value == name:
        return value.left
    return None


def _readers(total: _Total) -> list[cst.CSTNode]:
    """The reads of the name: its loads and the ``total /= n`` that rebind it from itself."""
    return [*total.loads, *(n for n in total.rebinds if isinstance(n, cst.AugAssign))]


def _int_size(ctx: FileContext, expr: cst.BaseExpression, depth: int = 0) -> bool:
    """Certainly a Python int: ``len(x)``, ``x.size(0)``, ``x.shape[0]``, ``x.numel()``, a name bound
    only to such values."""
    if isinstance(expr, cst.Integer):
        return True
    if isinstance(expr, cst.Call):
        func = expr.func
        if isinstance(func, cst.Name) and func.value == "len" and len(expr.args) == 1:
            return True
        if isinstance(func, cst.Attribute) and func.attr.value in SIZE_METHODS:
            return func.attr.value != "size" or bool(expr.args)
        return False
    if isinstance(expr, cst.Subscript) and len(expr.slice) == 1 and isinstance(expr.slice[0].slice, cst.Index):
        base = expr.value
        if isinstance(base, cst.Attribute) and base.attr.value == "shape":
            return True
        return isinstance(base, cst.Call) and isinstance(base.func, cst.Attribute) and base.func.attr.value == "size"
    if isinstance(expr, cst.Attribute):
        return expr.attr.value == "ndim"
    if isinstance(expr, cst.Name) and depth < 4:
        scope = ctx.provenance.scope_of(expr).lookup(expr.value)
        bindings = scope.bindings.get(expr.value, []) if scope is not None else []
        return bool(bindings) and all(
            how == "value" and isinstance(node, cst.BaseExpression) and _int_size(ctx, node, depth + 1)
            for how, node in bindings
        )
    return False


class DeviceAccumulation(Rule):
    """## What it does
    Finds running sums of tensor values read on the host every step,
    `total += loss.item()` (or `-=`, or spelled out as
    `total = total + loss.item()`, which becomes `total += loss.detach()`;
    also `float(loss)`, and
    `loss.item() * n` for a Python number `n` such as `data.size(0)`), where
    `total` starts from a number literal in the same function (or script),
    and turns `total` into an on-device accumulator from `fixitem.runtime`:
    the additions stay on the device and the number is read once, where the
    code uses `total`.
    A reset inside the loop (`running_loss = 0.0` after each print) starts a
    new accumulator; an average taken at the end (`test_loss /= len(dataset)`)
    becomes `test_loss = test_loss.value() / len(dataset)`, after which the
    name holds the Python number, as before. Where the loop is followed by
    more than one read (`history.append(total)`, `best = min(best, total)`),
    `total = total.value()` right after the loop reads the device once and
    the later reads stay as they were.

    ## Why is this bad?
    Every `.item()` makes the host wait for the device (a **host sync**), once
    per step, only to add a number that nobody looks at until the end of the
    epoch.

    ## Example
    ```python
    test_loss, correct = 0, 0
    with torch.no_grad():
        for data, target in test_loader:
            output = model(data)
            test_loss += F.nll_loss(output, target, reduction="sum").item()
            correct += (output.argmax(1) == target).sum().item()
    test_loss /= len(test_loader.dataset)
    print(f"loss {test_loss:.4f} accuracy {correct}/{len(test_loader.dataset)}")
    ```

    ## Use instead
    ```python
    test_loss, correct = deferred.Accumulator(0), deferred.Accumulator(0)
    ...
            test_loss += F.nll_loss(output, target, reduction="sum").detach()
            correct += (output.argmax(1) == target).sum().detach()
    test_loss = test_loss.value() / len(test_loader.dataset)
    print(f"loss {test_loss:.4f} accuracy {correct.value()}/{len(test_loader.dataset)}")
    ```

    ## Fix safety
    **Safe**: the accumulator adds in float64 (a float start, or once a
    floating value is added, as Python turns an `int` total into a `float`)
    or int64 (an int start and integer tensors) in the original order, so the
    result is bitwise the Python sum and an `int` stays an `int`. fixitem
    follows the name through the function: every read where it holds the
    running total becomes `total.value()`, a Python number, so what is
    printed, returned or stored is unchanged; reads after it was rebound
    (`test_loss /= n`, or `total = total.value()` after the loop, written
    only where no later step can add to that number) are left alone.
    `loss.item() * n` becomes `loss.detach().double() * n` (float64 on the
    device, like Python); with an int start it needs a tensor known to be
    floating (a loss, `.float()`, `softmax`), because the product's type
    decides the sum's. `float(t)` with an int start becomes
    `t.detach().double()`. Integer sums wrap at 2**63 where Python ints
    would not.

    **Unsafe** when fixitem cannot tell that the summed value is a tensor
    (`.item()` of a numpy value would fail on `.detach()`), or that `n` in
    `x.item() * n` is a Python number (a tensor `n` made the original total a
    tensor); annotate the parameter it comes from (`model: nn.Module`,
    `x: torch.Tensor`) to make the fix safe.

    There is **no fix** (report only) when the total is read on every
    iteration of the loop that adds to it (a progress line,
    `print(f"loss {total / (i + 1):.3f}")`, not under an `if`): reading an
    on-device total is a host sync too, so the rewrite would save none (and
    two reads a step would double them). There is no fix either when a
    read or a step may see either the running total or another value
    (`total = round(total, 2)` inside the loop), when the name is also bound
    another way (unpacking, a parameter, a loop variable), declared
    `global` / `nonlocal`, read from a nested function or comprehension,
    deleted, or shown by an `f"{total=}"` expression.
    """

    code = "FX202"
    name = "device-accumulation"
    summary = "running sum of `.item()` values: accumulate on the device, read once"
    graph_breaks = ("GB0124",)
    examples = [
        Invalid(
            dedent(
                """
                import torch

                def evaluate(model: torch.nn.Module, batches):
                    total = 0.0
                    correct = 0
                    for x, y in batches:
                        out = model(x)
                        total += torch.nn.functional.cross_entropy(out, y).item()
                        correct += (out.argmax(1) == y).sum().item()
                    return total / len(batches), correct
                """
            ),
            fixed=dedent(
                """
                import torch
                from fixitem import runtime as deferred

                def evaluate(model: torch.nn.Module, batches):
                    total = deferred.Accumulator(0.0)
                    correct = deferred.Accumulator(0)
                    for x, y in batches:
                        out = model(x)
                        total += torch.nn.functional.cross_entropy(out, y).detach()
                        correct += (out.argmax(1) == y).sum().detach()
                    return total.value() / len(batches), correct.value()
                """
            ),
        ),
        Invalid(
            dedent(
                """
                import torch
                import torch.nn.functional as F

                def test(model: torch.nn.Module, loader):
                    test_loss = 0
                    with torch.no_grad():
                        for data, target in loader:
                            test_loss += F.nll_loss(model(data), target, reduction="sum").item()
                    test_loss /= len(loader.dataset)
                    print(f"Average loss: {test_loss:.4f}")
                """
            ),
            fixed=dedent(
                """
                import torch
                import torch.nn.functional as F
                from fixitem import runtime as deferred

                def test(model: torch.nn.Module, loader):
                    test_loss = deferred.Accumulator(0)
                    with torch.no_grad():
                        for data, target in loader:
                            test_loss += F.nll_loss(model(data), target, reduction="sum").detach()
                    test_loss = test_loss.value() / len(loader.dataset)
                    print(f"Average loss: {test_loss:.4f}")
                """
            ),
        ),
        Invalid(
            dedent(
                """
                import torch

                def train(model: torch.nn.Module, loader, optimizer):
                    for epoch in range(2):
                        running_loss = 0.0
                        for i, (x, y) in enumerate(loader):
                            loss = torch.nn.functional.mse_loss(model(x), y)
                            running_loss += loss.item() * x.size(0)
                            if i % 100 == 99:
                                print(f"[{epoch + 1}, {i + 1:5d}] loss: {running_loss / 100:.3f}")
                                running_loss = 0.0
                """
            ),
            fixed=dedent(
                """
                import torch
                from fixitem import runtime as deferred

                def train(model: torch.nn.Module, loader, optimizer):
                    for epoch in range(2):
                        running_loss = deferred.Accumulator(0.0)
                        for i, (x, y) in enumerate(loader):
                            loss = torch.nn.functional.mse_loss(model(x), y)
                            running_loss += loss.detach().double() * x.size(0)
                            if i % 100 == 99:
                                print(f"[{epoch + 1}, {i + 1:5d}] loss: {running_loss.value() / 100:.3f}")
                                running_loss = deferred.Accumulator(0.0)
                """
            ),
        ),
        Invalid(
            dedent(
                """
                import torch

                def fit(model: torch.nn.Module, batches, epochs):
                    history = []
                    for epoch in range(epochs):
                        epoch_loss = 0.0
                        for x, y in batches:
                            epoch_loss += torch.nn.functional.mse_loss(model(x), y).item()
                        history.append(epoch_loss)
                        print(f"epoch {epoch}: {epoch_loss:.4f}")
                    return history
                """
            ),
            fixed=dedent(
                """
                import torch
                from fixitem import runtime as deferred

                def fit(model: torch.nn.Module, batches, epochs):
                    history = []
                    for epoch in range(epochs):
                        epoch_loss = deferred.Accumulator(0.0)
                        for x, y in batches:
                            epoch_loss += torch.nn.functional.mse_loss(model(x), y).detach()
                        epoch_loss = epoch_loss.value()
                        history.append(epoch_loss)
                        print(f"epoch {epoch}: {epoch_loss:.4f}")
                    return history
                """
            ),
        ),
        Invalid(
            dedent(
                """
                import torch

                def knn_accuracy(predictions: torch.Tensor, targets: torch.Tensor, chunk: int):
                    top1 = 0
                    for i in range(0, len(targets), chunk):
                        correct = predictions[i:i + chunk].eq(targets[i:i + chunk])
                        top1 = top1 + correct.sum().item()
                    return 100.0 * top1 / len(targets)
                """
            ),
            fixed=dedent(
                """
                import torch
                from fixitem import runtime as deferred

                def knn_accuracy(predictions: torch.Tensor, targets: torch.Tensor, chunk: int):
                    top1 = deferred.Accumulator(0)
                    for i in range(0, len(targets), chunk):
                        correct = predictions[i:i + chunk].eq(targets[i:i + chunk])
                        top1 += correct.sum().detach()
                    return 100.0 * top1.value() / len(targets)
                """
            ),
        ),
        Invalid(
            dedent(
                """
                import torch

                def f(xs: torch.Tensor, history: list):
                    total = 0.0
                    for i in range(len(xs)):
                        total += xs[i].item()
                        total = round(total, 2)
                    return total
                """
            )
        ),
        Invalid(
            dedent(
                """
                import torch

                def train(model: torch.nn.Module, loader):
                    train_loss = 0.0
                    for i, (x, y) in enumerate(loader):
                        train_loss += torch.nn.functional.mse_loss(model(x), y).item()
                        print(f"{i}: loss {train_loss / (i + 1):.3f}")
                """
            )
        ),
        Valid(
            dedent(
                """
                import numpy as np

                def f(values):
                    total = 0.0
                    for v in np.asarray(values):
                        total += v.item()
                    return total
                """
            )
        ),
    ]

    def check(self, ctx: FileContext, sites: list[SyncSite], claimed: set[SyncSite]) -> Iterator[Report]:
        reads = {s.node: s for s in sites if s.kind in ("item", "float") and s not in claimed}
        totals: dict[tuple[int, str], _Total] = {}
        for node in ctx.nodes(cst.AugAssign):
            assert isinstance(node, cst.AugAssign)
            if not isinstance(node.operator, (cst.AddAssign, cst.SubtractAssign)) or not isinstance(node.target, cst.Name):
                continue
            read = self._read(ctx, node.value, reads)
            if read is None:
                continue
            scope = ctx.provenance.scope_of(node).lookup(node.target.value)
            if scope is None:
                continue
            key = (id(scope), node.target.value)
            total = totals.setdefault(key, _Total(scope, node.target.value))
            total.steps.append((node, node.value, read))
        for node in ctx.nodes(cst.Assign):  # ``total = total + x.item()``, ``total = x.item() + total``
            assert isinstance(node, cst.Assign)
            added = _spelled_out_step(node)
            if added is None or (read := self._read(ctx, added, reads)) is None:
                continue
            name = node.targets[0].target.value  # type: ignore[attr-defined]
            scope = ctx.provenance.scope_of(node).lookup(name)
            if scope is None:
                continue
            total = totals.setdefault((id(scope), name), _Total(scope, name))
            total.steps.append((node, added, read))
        for total in totals.values():
            total.steps.sort(key=lambda step: ctx.positions.offset(step[0]))
            flow = self._check_bindings(ctx, total)
            inserts: dict[cst.CSTNode, cst.BaseStatement] = {}
            if flow is not None:
                flow, inserts = self._read_once(ctx, total, flow)
            yield self._report(ctx, total, flow, inserts)

    def _read(self, ctx: FileContext, value: cst.BaseExpression, reads: dict) -> SyncSite | None:
        if value in reads:
            return reads[value]
        if isinstance(value, cst.BinaryOperation) and isinstance(value.operator, cst.Multiply):
            for side, other in ((value.left, value.right), (value.right, value.left)):
                if side in reads and (_int_size(ctx, other) or (_plain_number(ctx, other) and ctx.kind(other) is not Kind.TENSOR)):
                    return reads[side]
        return None

    def _check_bindings(self, ctx: FileContext, total: _Total) -> _Flow | None:
        name = total.name
        steps = {aug for aug, _, _ in total.steps}
        kinds: dict[cst.CSTNode, str] = {}
        starts = set()
        for how, node in total.scope.bindings[name]:
            parent = ctx.parents.get(node) if node is not None else None
            if how == "value" and parent in steps:
                kinds[parent] = "step"
                continue
            if how == "aug" and isinstance(node, cst.AugAssign):
                kinds[node] = "step" if node in steps else "rebind"
                if node not in steps:
                    total.rebinds.append(node)
                continue
            if how == "value" and isinstance(parent, cst.Assign) and len(parent.targets) == 1 and isinstance(parent.targets[0].target, cst.Name):
                literal = _number_literal(parent.value)
                if literal:
                    total.inits.append((parent, parent.value, parent.targets[0].target))
                    starts.add(literal)
                    kinds[parent] = "init"
                else:
                    total.rebinds.append(parent)
                    kinds[parent] = "rebind"
                continue
            start = _unpacked_start(ctx, node, name) if how == "value" and isinstance(node, cst.BaseExpression) else None
            if start is not None:  # ``test_loss, correct = 0, 0``
                total.inits.append(start)
                starts.add(_number_literal(start[1]))
                kinds[start[0]] = "init"
                continue
            if isinstance(parent, cst.AnnAssign):
                total.problem = f"`{name}` is annotated (`{ctx.code(parent).strip()}`): an accumulator would not match it"
            else:
                total.problem = f"`{name}` is also assigned in another way"
            return None
        if not total.inits:
            total.problem = f"`{name}` does not start from a number literal in this function"
            return None
        if "int" in starts:
            for _, value, site in total.steps:
                if isinstance(value, cst.BinaryOperation) and not certainly_floating(ctx, site.value):
                    total.problem = (
                        f"`{name}` starts as an int and `{ctx.code(site.value)}` is not known to be a floating "
                        "tensor (the type of the product decides the type of the sum)"
                    )
                    return None
        # Every other use of the name: it must resolve to this scope, outside nested functions.
        targets: set[cst.CSTNode] = {target for _, _, target in total.inits}
        targets |= {n.targets[0].target if isinstance(n, cst.Assign) else n.target for n in total.rebinds}  # type: ignore[union-attr]
        for step in steps:  # the name bound by each step, and its own read in ``total = total + v``
            if isinstance(step, cst.AugAssign):
                targets.add(step.target)
            else:
                assert isinstance(step.value, cst.BinaryOperation)
                targets |= {step.targets[0].target, step.value.left, step.value.right}
        # The uses of the total lie below its scope's node; a ``global`` or ``nonlocal`` of the
        # name counts wherever it is.
        declared = [item.name for item in ctx.nodes(cst.NameItem) if item.name.value == name]  # type: ignore[attr-defined]
        uses = ctx.names(name, total.scope.node)
        if any(not ctx.below(n, total.scope.node) for n in declared):
            uses = sorted({id(n): n for n in [*uses, *declared]}.values(), key=ctx.positions.offset)
        for node in uses:
            assert isinstance(node, cst.Name)
            if node.value != name or node in targets:
                continue
            parent = ctx.parents.get(node)
            if isinstance(parent, cst.Attribute) and parent.attr is node:
                continue
            if isinstance(parent, (cst.Arg,)) and parent.keyword is node:
                continue
            if isinstance(parent, (cst.Global, cst.Nonlocal, cst.NameItem)):
                if ctx.provenance.scope_of(node).lookup(name) is total.scope or isinstance(parent, cst.NameItem):
                    total.problem = f"`{name}` is declared global or nonlocal"
                    return None
                continue
            scope = ctx.provenance.scope_of(node)
            owner = scope.lookup(name)
            if owner is not total.scope:
                continue
            if scope is not total.scope:
                total.problem = f"`{name}` is read from a nested function or comprehension"
                return None
            if isinstance(parent, cst.Del):
                total.problem = f"`{name}` is deleted"
                return None
            if isinstance(parent, cst.FormattedStringExpression) and parent.equal is not None:
                total.problem = f"`{name}` is shown by `{{{name}=}}`, which prints the expression's text"
                return None
            total.loads.append(node)
        return self._follow(ctx, total, kinds)

    def _follow(self, ctx: FileContext, total: _Total, kinds: dict[cst.CSTNode, str]) -> _Flow | None:
        anchors: dict[cst.CSTNode, list[cst.Name]] = {}
        for load in total.loads:
            anchor = next(
                (a for a in ctx.ancestors(load) if isinstance(a, (cst.BaseSmallStatement, cst.BaseCompoundStatement))),
                None,
            )
            if anchor is None:
                total.problem = f"fixitem cannot place a read of `{total.name}`"
                return None
            anchors.setdefault(anchor, []).append(load)
        flow = _Flow(total, anchors, kinds)
        owner = total.scope.node
        body = owner.body if isinstance(owner, (cst.Module, cst.FunctionDef, cst.ClassDef)) else None
        if body is None:
            total.problem = f"fixitem cannot follow `{total.name}` here"
            return None
        flow.block(body, frozenset({UNBOUND}))
        if flow.problem:
            total.problem = flow.problem
            return None

        total.problem = self._mixed(ctx, total, flow)
        if total.problem:
            return None
        read = self._read_every_step(ctx, total, flow)
        if read is not None:
            total.problem = (
                f"`{total.name}` is read every step (line {ctx.position(read)[0]}), and each read of an "
                "on-device total is a host sync, so none would be saved"
            )
            return None
        return flow

    @staticmethod
    def _mixed(ctx: FileContext, total: _Total, flow: _Flow) -> str:
        """Why a step or a read may see the running total or another value, or ``""``."""
        for aug, _, _ in total.steps:
            if OTHER in flow.at.get(aug, ()):
                return f"`{total.name}` may hold another value when line {ctx.position(aug)[0]} adds to it"
        for node in _readers(total):
            seen = flow.at.get(node, set())
            if ACC in seen and OTHER in seen:
                return f"`{total.name}` may be the running total or another value where line {ctx.position(node)[0]} reads it"
        return ""

    def _read_once(self, ctx: FileContext, total: _Total, flow: _Flow) -> tuple[_Flow, dict[cst.CSTNode, cst.BaseStatement]]:
        """Where a loop that adds is followed by more than one read, ``total = total.value()``
        right after the loop reads the device once and the later reads stay as they were.

        Returns the flow with those reads and {the statement after the loop: the loop (or the
        ``with`` it ends)}."""
        loops: list[cst.For | cst.While] = []
        for step, _, _ in total.steps:
            for a in ctx.ancestors(step):
                if a is total.scope.node:
                    break
                if isinstance(a, (cst.For, cst.While)) and a not in loops:
                    loops.append(a)
        loops.sort(key=lambda loop: -len(list(ctx.ancestors(loop))))  # the innermost first
        inserts: dict[cst.CSTNode, cst.BaseStatement] = {}
        owner = total.scope.node
        for loop in loops:
            place = _following(ctx, loop, total.name)
            if place is None:
                continue
            end, after = place
            trial = _Flow(total, flow.anchors, {**flow.kinds, end: "finish"})
            trial.block(owner.body, frozenset({UNBOUND}))  # type: ignore[attr-defined]
            if trial.problem or trial.at.get(end) != {ACC} or self._mixed(ctx, total, trial):
                continue
            weight, always = 0, False
            for node in _readers(total):
                if flow.at.get(node, set()) - {UNBOUND} == {ACC} and trial.at.get(node, set()) - {UNBOUND} == {OTHER}:
                    every, looped = _read_after(ctx, node, end)
                    weight += 2 if looped else 1
                    always = always or every or looped
            if weight >= 2 and always:
                flow, inserts[after] = trial, end
        return flow, inserts

    @staticmethod
    def _read_every_step(ctx: FileContext, total: _Total, flow: _Flow) -> cst.Name | None:
        """A read of the running total that every iteration of a loop that adds to it makes
        (``print(total / (i + 1))`` beside ``total += loss.item()``)."""
        loops: list[cst.For | cst.While] = []
        for step, _, _ in total.steps:
            loop = next((a for a in ctx.ancestors(step) if isinstance(a, (cst.For, cst.While, cst.FunctionDef,
                                                                           cst.ClassDef, cst.Lambda))), None)
            if isinstance(loop, (cst.For, cst.While)) and loop not in loops:
                loops.append(loop)
        for loop in loops:
            for load in total.loads:
                if ACC not in flow.at.get(load, ()) or not _inside(load, loop):
                    continue
                child = _unconditional_child(ctx, load, loop)
                if child is loop.body or (isinstance(loop, cst.While) and child is loop.test):
                    return load
        return None

    def _report(
        self, ctx: FileContext, total: _Total, flow: _Flow | None, inserts: dict[cst.CSTNode, cst.BaseStatement]
    ) -> Report:
        first = total.steps[0][0]
        message = f"`{ctx.code(first)}` reads a tensor value every step to sum it on the host"
        sites = [site for _, _, site in total.steps]
        if total.problem or flow is None:
            return Report(first, message, sites=sites, note=f"no fix: {total.problem}")
        int_start = any(_number_literal(start) == "int" for _, start, _ in total.inits)
        replacements: dict[cst.CSTNode, cst.CSTNode] = {}
        for _, start, _ in total.inits:
            replacements[start] = cst.parse_expression(f"{ctx.runtime_alias()}.Accumulator({ctx.code(start)})")
        unsafe = ""
        for statement, value, site in total.steps:
            detached = method_call(site.value, "detach")
            new: cst.BaseExpression
            if value is site.node:
                new = method_call(detached, "double") if site.kind == "float" and int_start else detached
            else:
                assert isinstance(value, cst.BinaryOperation)
                double = method_call(detached, "double")
                if value.left is site.node:
                    new = value.with_changes(left=double)
                    other = value.right
                else:
                    new = value.with_changes(right=double)
                    other = value.left
                if not unsafe and not _int_size(ctx, other) and ctx.kind(other) is not Kind.NUMBER:
                    unsafe = f"`{ctx.code(other)}` is not known to be a Python number (a tensor made the sum a tensor)"
            if isinstance(statement, cst.AugAssign):
                replacements[value] = new
            else:
                replacements[statement] = self._in_place(statement, new)
        values: dict[cst.CSTNode, cst.CSTNode] = {}
        for load in total.loads:
            if flow.at.get(load, set()) - {UNBOUND} == {ACC}:
                values[load] = method_call(cst.Name(total.name), "value")
        replacements.update(values)
        for node in total.rebinds:
            if isinstance(node, cst.AugAssign) and flow.at.get(node, set()) - {UNBOUND} == {ACC}:
                replacements[node] = self._finish(node, values)
        for after in inserts:  # ``total = total.value()`` before the statement that follows the loop
            inner = {node: replacements.pop(node) for node in list(replacements) if _inside(node, after)}
            read = cst.Assign(targets=[cst.AssignTarget(cst.Name(total.name))], value=method_call(cst.Name(total.name), "value"))
            replacements[after] = cst.FlattenSentinel([cst.SimpleStatementLine([read]), after.visit(_Substitute(inner))])
        unknown = [ctx.code(site.value) for site in sites if not site.certain]
        if unknown:
            unsafe = f"`{unknown[0]}` is not known to be a tensor (a numpy value has no `.detach()`)"
        if unsafe:
            fix = Fix(replacements, Safety.UNSAFE, unsafe, imports=ctx.runtime_imports())
        else:
            fix = Fix(replacements, Safety.SAFE, "", imports=ctx.runtime_imports())
        return Report(first, message, fix=fix, sites=sites)

    @staticmethod
    def _in_place(assign: cst.Assign, added: cst.BaseExpression) -> cst.AugAssign:
        """``total = total + v`` -> ``total += v`` (``total - v``: ``-=``): the accumulator adds
        in place, where ``total + v`` would read it. On Python numbers the two are the same,
        and ``v + total`` is ``total + v``."""
        target = assign.targets[0]
        assert isinstance(assign.value, cst.BinaryOperation)
        operator = cst.SubtractAssign if isinstance(assign.value.operator, cst.Subtract) else cst.AddAssign
        return cst.AugAssign(
            target=target.target,
            operator=operator(whitespace_before=target.whitespace_before_equal, whitespace_after=target.whitespace_after_equal),
            value=added,
            semicolon=assign.semicolon,
        )

    @staticmethod
    def _finish(aug: cst.AugAssign, values: dict[cst.CSTNode, cst.CSTNode]) -> cst.Assign:
        """``total /= n`` -> ``total = total.value() / n``: the same operation on the same number."""
        assert isinstance(aug.target, cst.Name)
        operator = AUG_OPERATORS[type(aug.operator)]()
        rhs = aug.value.visit(_Substitute(values))
        value = cst.BinaryOperation(left=method_call(cst.Name(aug.target.value), "value"), operator=operator, right=_atom(rhs))
        return cst.Assign(targets=[cst.AssignTarget(target=aug.target)], value=value, semicolon=aug.semicolon)
