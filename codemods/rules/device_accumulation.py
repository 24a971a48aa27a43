"""FX202: running sums of tensor values read every step (``total += loss.item()``)."""

from __future__ import annotations

import ast
import io
import tokenize
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from .. import gen
from ..fixes.tensor_code import _plain_number
from ..gen import method_call
from ..model.context import COMPOUND, FileContext
from ..model.dtypes import certainly_floating
from ..model.provenance import Kind, Scope
from ..model.syncs import SyncSite
from ..model.tree import number_of, subtree_stop
from ..rule import Fix, Invalid, Report, Rule, Safety, Valid, dedent

# What a name may hold at a point of its function, as seen by :class:`_Flow`.
ACC = "the running total"  # bound by a start (``total = 0``) or a step (``total += x.item()``)
OTHER = "another value"  # bound any other way (``total /= n``, ``total = total / n``)
UNBOUND = "unbound"  # not bound yet: reading it fails the same way before and after

# ``total OP= rhs`` on a Python number is exactly ``total = total OP rhs``: the ``ast``
# operator of an augmented assignment (``ast.Div`` for ``/=``) -> the binary operator's text.
AUG_OPERATORS: dict[type, str] = {
    ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//", ast.Mod: "%",
    ast.Pow: "**", ast.MatMult: "@", ast.LShift: "<<", ast.RShift: ">>",
    ast.BitAnd: "&", ast.BitOr: "|", ast.BitXor: "^",
}
# Python ints however the tensor they ask about is stored: ``n`` in ``loss.item() * n``.
SIZE_METHODS = frozenset({"size", "numel", "nelement", "dim"})

_LOOPS = (ast.For, ast.AsyncFor, ast.While)
_FORS = (ast.For, ast.AsyncFor)
_WITHS = (ast.With, ast.AsyncWith)
_TRIES = (ast.Try, ast.TryStar) if hasattr(ast, "TryStar") else (ast.Try,)
_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)


@dataclass
class _Total:
    scope: Scope
    name: str
    inits: list[tuple[ast.Assign, ast.expr, ast.Name]] = field(default_factory=list)  # statement, start, target
    # statement (``total += v`` or ``total = total + v``), what it adds (``v``), the read in it
    steps: list[tuple[ast.AugAssign | ast.Assign, ast.expr, SyncSite]] = field(default_factory=list)
    loads: list[ast.Name] = field(default_factory=list)
    rebinds: list[ast.AST] = field(default_factory=list)  # other Assign / AugAssign of the name
    problem: str = ""


def _number_literal(expr: ast.AST) -> str | None:
    """``"int"`` / ``"float"`` for a numeric literal (``0``, ``0.0``, ``-1.5``), else None."""
    if type(expr) is ast.UnaryOp and type(expr.op) in (ast.USub, ast.UAdd):
        expr = expr.operand
    if type(expr) is ast.Constant:
        value = expr.value
        if type(value) is int:  # not a bool
            return "int"
        if type(value) is float:
            return "float"
    return None


def _unpacked_start(ctx: FileContext, value: ast.expr, name: str) -> tuple[ast.Assign, ast.expr, ast.Name] | None:
    """``total`` started by a literal in ``a, total = 0, 0.0``: (the statement, the literal, the target)."""
    values = ctx.parents.get(value)
    statement = ctx.parents.get(values) if type(values) in (ast.Tuple, ast.List) else None
    if type(statement) is not ast.Assign or statement.value is not values or len(statement.targets) != 1:
        return None
    target = statement.targets[0]
    if type(target) not in (ast.Tuple, ast.List) or len(target.elts) != len(values.elts):  # type: ignore[union-attr,attr-defined]
        return None
    index = next(i for i, element in enumerate(values.elts) if element is value)  # type: ignore[union-attr]
    named = target.elts[index]  # type: ignore[attr-defined]
    if not _number_literal(value) or type(named) is not ast.Name or named.id != name:
        return None
    return statement, value, named


def _atom(ctx: FileContext, expr: gen.Node) -> gen.Node:
    """``expr`` as the right operand of a binary operator: parenthesised unless it is an atom."""
    if expr.kind in ("Name", "Attribute", "Call", "Subscript"):
        return expr
    if isinstance(expr, (gen.Source, gen.Splice)):
        node = expr.node
        if ctx.parenthesized(node):
            return expr
        # Numbers, strings (not ``"a" "b"``) and ``True`` / ``False`` / ``None``: atoms too.
        if (type(node) is ast.Constant and node.value is not ... and type(node.value) is not complex  # type: ignore[attr-defined]
                and not _concatenated(ctx, node)):
            return expr
    return gen.Paren(expr)


def _concatenated(ctx: FileContext, node: ast.Constant) -> bool:
    """Is the string ``node`` written as several literals (``"a" "b"``)?"""
    if type(node.value) not in (str, bytes):
        return False
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(ctx.code(node)).readline))
    except (tokenize.TokenError, SyntaxError):
        return False
    return sum(t.type == tokenize.STRING for t in tokens) > 1


class _StatementCode(gen.Node):
    """A statement of the file replaced by new statements, inside another statement kept as
    text (:class:`gen.SourceStatement`): printed at the replaced statement's own indentation."""

    def __init__(self, node: ast.AST, value: gen.Statement | gen.Statements) -> None:
        self.node = node
        self.value = value

    def render(self, ctx: FileContext, indent: str = "") -> str:
        own = ctx.indent(self.node)
        if isinstance(self.value, gen.Statements):
            return gen.render_statements(ctx, self.value.statements, own)
        return self.value.render(ctx, own)

    def children(self) -> list:
        return [self.value]  # walked as statements by :func:`gen.original_nodes`


def _kept(ctx: FileContext, statement: ast.stmt, inner: dict[ast.AST, gen.Replacement], trailing: str = "") -> gen.SourceStatement:
    """``statement`` kept as its own text, with the replacements of ``inner`` (those inside it)
    made in it: libcst's ``statement.visit(replacer)``."""
    outermost = {
        node: new for node, new in inner.items()
        if not any(other is not node and _inside(node, other) for other in inner)
    }
    wrapped = {
        node: _StatementCode(node, new) if isinstance(new, (gen.Statement, gen.Statements)) else new
        for node, new in outermost.items()
    }
    return gen.SourceStatement(statement, wrapped, trailing=trailing)  # type: ignore[arg-type]


class _Flow:
    """What the name of a total may hold at each of its reads, steps and rebindings.

    A forward walk over the statements of the total's function (or module),
    joining the branches of ``if`` / ``try`` and iterating loops to a fixed
    point. A state is a set of ``ACC`` / ``OTHER`` / ``UNBOUND``; more states
    than the program can reach only make the rule refuse more often.
    """

    def __init__(self, total: _Total, anchors: dict[ast.AST, list[ast.Name]], kinds: dict[ast.AST, str]) -> None:
        self.total = total
        self.anchors = anchors  # statement (or compound header) -> the loads of the name it evaluates
        self.kinds = kinds  # binding statement -> "init", "step" or "rebind"
        self.at: dict[ast.AST, set[str]] = {}  # load / step / rebind -> states seen there
        self.loops: list[tuple[list[frozenset], list[frozenset]]] = []  # (breaks, continues)
        self.problem = ""

    def seen(self, node: ast.AST, state: frozenset) -> None:
        self.at.setdefault(node, set()).update(state)

    def read(self, anchor: ast.AST, state: frozenset) -> None:
        for load in self.anchors.get(anchor, ()):
            self.seen(load, state)

    def block(self, body: Sequence[ast.stmt], state: frozenset) -> frozenset:
        for statement in body:
            state = self.statement(statement, state)
        return state

    def small(self, node: ast.stmt, state: frozenset) -> frozenset:
        self.read(node, state)
        if type(node) is ast.Return or type(node) is ast.Raise:
            return frozenset()
        if type(node) is ast.Break or type(node) is ast.Continue:
            if self.loops:
                self.loops[-1][0 if type(node) is ast.Break else 1].append(state)
            return frozenset()
        kind = self.kinds.get(node)
        if kind is None:
            return state
        self.seen(node, state)
        return frozenset({ACC}) if kind in ("init", "step") else frozenset({OTHER})

    def finish(self, node: ast.stmt, state: frozenset) -> frozenset:
        """After a loop (or ``with``) marked ``"finish"``: ``total = total.value()`` reads it once."""
        if self.kinds.get(node) != "finish":
            return state
        self.seen(node, state)
        return frozenset({OTHER}) if state else state

    def orelse(self, body: Sequence[ast.stmt], state: frozenset) -> frozenset:
        """The ``else:`` (or ``elif``: an ``If`` alone in it) of a statement; none: ``state``."""
        return self.block(body, state)

    def statement(self, node: ast.stmt, state: frozenset) -> frozenset:
        t = type(node)
        if t is ast.If:
            self.read(node, state)
            return self.block(node.body, state) | self.orelse(node.orelse, state)  # type: ignore[attr-defined]
        if t in _LOOPS:
            if t is not ast.While:
                self.read(node, state)  # the iterable is evaluated once
            head = state
            while True:
                self.loops.append(([], []))
                if t is ast.While:
                    self.read(node, head)
                out = self.block(node.body, head)  # type: ignore[attr-defined]
                breaks, continues = self.loops.pop()
                new_head = head | out | frozenset().union(*continues)
                if new_head == head:
                    break
                head = new_head
            return self.finish(node, self.orelse(node.orelse, head) | frozenset().union(*breaks))  # type: ignore[attr-defined]
        if t in _WITHS:
            self.read(node, state)
            return self.finish(node, self.block(node.body, state))  # type: ignore[attr-defined]
        if t in _TRIES:
            bound = frozenset(
                ACC if self.kinds[n] in ("init", "step") else OTHER
                for n in self.kinds if any(_inside(n, s) for s in node.body)  # type: ignore[attr-defined]
            )
            body = self.block(node.body, state)  # type: ignore[attr-defined]
            raised = state | bound | body  # where an exception may leave the try body
            out = self.orelse(node.orelse, body)  # type: ignore[attr-defined]
            for handler in node.handlers:  # type: ignore[attr-defined]
                out |= self.block(handler.body, raised)
            if node.finalbody:  # type: ignore[attr-defined]
                out = self.block(node.finalbody, out | raised)  # type: ignore[attr-defined]
            return out
        if t in _FUNCTIONS or t is ast.ClassDef:
            self.read(node, state)  # decorators, defaults and bases run here; the body does not
            return state
        if not isinstance(node, COMPOUND):
            return self.small(node, state)
        # ``match`` and anything newer: not followed.
        if any(_inside(n, node) for n in [*self.anchors, *self.kinds]):
            self.problem = f"`{self.total.name}` is used inside a `{t.__name__.lower()}` statement"
        return state


def _inside(node: ast.AST, root: ast.AST) -> bool:
    """Is ``node`` within ``root``'s subtree?"""
    n, r = number_of(node), number_of(root)
    if n is None or r is None:
        return False
    return r <= n < subtree_stop(r)


def _conditional(parent: ast.AST, child: ast.AST, loops: bool = True) -> bool:
    """Can ``parent`` run without evaluating ``child`` (an ``if`` branch, a loop body, an
    ``except`` handler, a branch of ``x if c else y``, the right operand of ``and`` / ``or``)?
    Without ``loops``, a loop runs its body and its ``else`` (maybe many times, maybe never)."""
    t = type(parent)
    if t in _LOOPS and not loops:
        return False
    if t is ast.If or t is ast.While or t is ast.IfExp:
        return child is not parent.test  # type: ignore[attr-defined]
    if t in _FORS:
        return child is not parent.iter  # type: ignore[attr-defined]
    if t is ast.BoolOp:
        return child is not parent.values[0]  # type: ignore[attr-defined]
    return t is ast.ExceptHandler


def _unconditional_child(ctx: FileContext, node: ast.AST, stop: ast.AST) -> ast.AST | None:
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


def _is_elif(ctx: FileContext, parent: ast.AST, child: ast.AST) -> bool:
    """Is ``child`` the ``elif`` of the ``if`` ``parent`` (no block between them in libcst's tree)?"""
    return (type(parent) is ast.If and type(child) is ast.If and len(parent.orelse) == 1  # type: ignore[attr-defined]
            and parent.orelse[0] is child and ctx.else_line(parent) is None)  # type: ignore[attr-defined]


def _block(ctx: FileContext, parent: ast.AST, child: ast.stmt) -> tuple[int, str] | None:
    """The block of ``parent`` that holds the statement ``child`` (an indented block of libcst's
    tree, or the module): (the parent's id, its field), None for an ``elif``."""
    if _is_elif(ctx, parent, child):
        return None
    return id(parent), ctx.field_of(child) or ""


def _read_after(ctx: FileContext, node: ast.AST, statement: ast.AST) -> tuple[bool, bool]:
    """(Is ``node``, a read later than ``statement``, evaluated whenever the code after
    ``statement`` runs to the end of a block that holds ``statement``? Is it in a loop there,
    maybe evaluated many times?)"""
    blocks: set[tuple[int, str]] = set()
    child: ast.AST = statement
    for parent in ctx.ancestors(statement):
        if isinstance(child, ast.stmt) and (block := _block(ctx, parent, child)) is not None:
            blocks.add(block)
        child = parent
    child, always, looped = node, True, False
    for parent in ctx.ancestors(node):
        if isinstance(child, ast.stmt) and _block(ctx, parent, child) in blocks:
            return always, looped
        if _conditional(parent, child):
            always = False
            looped = looped or type(parent) in _LOOPS
        child = parent
    return False, looped


def _depth(ctx: FileContext, node: ast.AST) -> int:
    """How deep ``node`` stands, counted as in libcst's tree (where each indented block, and
    each ``else:`` / ``finally:`` clause, is a node of its own): loops are tried innermost first."""
    depth, child = 0, node
    for parent in ctx.ancestors(node):
        depth += 1
        if isinstance(child, ast.stmt) and type(parent) is not ast.Module and not _is_elif(ctx, parent, child):
            depth += 2 if ctx.field_of(child) in ("orelse", "finalbody") else 1
        child = parent
    return depth


def _statements_around(ctx: FileContext, statement: ast.stmt) -> tuple[list[ast.stmt], int] | None:
    """The statements of the block holding ``statement``, and its place among them."""
    parent = ctx.parents.get(statement)
    name = ctx.field_of(statement) if parent is not None else None
    block = getattr(parent, name, None) if name else None
    if type(block) is not list:
        return None
    return block, next(i for i, s in enumerate(block) if s is statement)


def _following(ctx: FileContext, loop: ast.stmt, name: str) -> tuple[ast.stmt, ast.stmt] | None:
    """(The statement that ends with ``loop``: the loop, or the ``with`` statements it ends;
    the statement to read ``name`` before: the next one, after other totals read there),
    or None if nothing follows in its block."""
    end: ast.stmt = loop
    while True:
        owner = ctx.parents.get(end)
        if type(owner) in _WITHS and owner.body[-1] is end:  # type: ignore[union-attr]
            end = owner  # type: ignore[assignment]
            continue
        break
    around = _statements_around(ctx, end)
    if around is None:
        return None
    block, index = around
    index += 1
    while index < len(block) and _reads_accumulator(ctx, block, index, name):
        index += 1
    if index == len(block):
        return None
    return end, block[index]


def _reads_accumulator(ctx: FileContext, block: list[ast.stmt], index: int, name: str) -> bool:
    """Is ``block[index]`` ``other = other.value()`` (alone on its line), another total read after
    its loop?"""
    assign = block[index]
    if type(assign) is not ast.Assign or len(assign.targets) != 1 or type(assign.targets[0]) is not ast.Name:
        return False
    target = assign.targets[0]
    if target.id == name:  # type: ignore[attr-defined]
        return False
    if index + 1 < len(block) and ctx.positions[block[index + 1]].start.line == ctx.positions[assign].end.line:
        return False  # ``a = a.value(); x = 1``
    call = assign.value
    return (type(call) is ast.Call and not call.args and not call.keywords and type(call.func) is ast.Attribute
            and call.func.attr == "value" and type(call.func.value) is ast.Name
            and call.func.value.id == target.id)  # type: ignore[attr-defined]


def _spelled_out_step(ctx: FileContext, assign: ast.Assign) -> ast.expr | None:
    """What ``total = total + v`` (``total = v + total``, ``total = total - v``) adds: ``v``."""
    if len(assign.targets) != 1 or type(assign.targets[0]) is not ast.Name:
        return None
    name, value = assign.targets[0].id, assign.value  # type: ignore[attr-defined]
    if type(value) is not ast.BinOp or type(value.op) not in (ast.Add, ast.Sub) or ctx.parenthesized(value):
        return None
    if type(value.left) is ast.Name and value.left.id == name and not ctx.parenthesized(value.left):
        return value.right
    if type(value.op) is ast.Add and type(value.right) is ast.Name and value.right.id == name:
        return value.left
    return None


def _statement_code(ctx: FileContext, statement: ast.stmt) -> str:
    """The text of a statement as messages quote it (libcst's ``code_for_node``): a statement
    followed by ``;`` on its line with the ``;`` and the spaces around it (``x += 1; ``)."""
    text = ctx.code(statement)
    if isinstance(statement, COMPOUND):
        return text
    source = ctx.source
    end = i = ctx.positions.span(statement)[1]
    while i < len(source) and source[i] in " \t":
        i += 1
    if source[i:i + 1] != ";":
        return text
    i += 1
    while i < len(source) and source[i] in " \t":
        i += 1
    return text + source[end:i]


def _readers(total: _Total) -> list[ast.AST]:
    """The reads of the name: its loads and the ``total /= n`` that rebind it from itself."""
    return [*total.loads, *(n for n in total.rebinds if type(n) is ast.AugAssign)]


def _int_size(ctx: FileContext, expr: ast.AST, depth: int = 0) -> bool:
    """Certainly a Python int: ``len(x)``, ``x.size(0)``, ``x.shape[0]``, ``x.numel()``, a name bound
    only to such values."""
    t = type(expr)
    if t is ast.Constant:
        return type(expr.value) is int  # type: ignore[attr-defined]
    if t is ast.Call:
        func = expr.func  # type: ignore[attr-defined]
        if type(func) is ast.Name and func.id == "len" and len(expr.args) + len(expr.keywords) == 1:  # type: ignore[attr-defined]
            return True
        if type(func) is ast.Attribute and func.attr in SIZE_METHODS:
            return func.attr != "size" or bool(expr.args or expr.keywords)  # type: ignore[attr-defined]
        return False
    if t is ast.Subscript and type(expr.slice) not in (ast.Tuple, ast.Slice):  # type: ignore[attr-defined]
        base = expr.value  # type: ignore[attr-defined]
        if type(base) is ast.Attribute and base.attr == "shape":
            return True
        return type(base) is ast.Call and type(base.func) is ast.Attribute and base.func.attr == "size"
    if t is ast.Attribute:
        return expr.attr == "ndim"  # type: ignore[attr-defined]
    if t is ast.Name and depth < 4:
        scope = ctx.provenance.scope_of(expr).lookup(expr.id)  # type: ignore[attr-defined]
        bindings = scope.bindings.get(expr.id, []) if scope is not None else []  # type: ignore[attr-defined]
        return bool(bindings) and all(
            how == "value" and isinstance(node, ast.expr) and _int_size(ctx, node, depth + 1)
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
    fix_makes_tensors = True
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
        for node in ctx.nodes(ast.AugAssign):
            assert isinstance(node, ast.AugAssign)
            if type(node.op) not in (ast.Add, ast.Sub) or type(node.target) is not ast.Name:
                continue
            read = self._read(ctx, node.value, reads)
            if read is None:
                continue
            scope = ctx.provenance.scope_of(node).lookup(node.target.id)
            if scope is None:
                continue
            key = (id(scope), node.target.id)
            total = totals.setdefault(key, _Total(scope, node.target.id))
            total.steps.append((node, node.value, read))
        for node in ctx.nodes(ast.Assign):  # ``total = total + x.item()``, ``total = x.item() + total``
            assert isinstance(node, ast.Assign)
            added = _spelled_out_step(ctx, node)
            if added is None or (read := self._read(ctx, added, reads)) is None:
                continue
            name = node.targets[0].id  # type: ignore[attr-defined]
            scope = ctx.provenance.scope_of(node).lookup(name)
            if scope is None:
                continue
            total = totals.setdefault((id(scope), name), _Total(scope, name))
            total.steps.append((node, added, read))
        for total in totals.values():
            total.steps.sort(key=lambda step: ctx.positions.offset(step[0]))
            flow = self._check_bindings(ctx, total)
            inserts: dict[ast.stmt, ast.stmt] = {}
            if flow is not None:
                flow, inserts = self._read_once(ctx, total, flow)
            yield self._report(ctx, total, flow, inserts)

    def _read(self, ctx: FileContext, value: ast.expr, reads: dict) -> SyncSite | None:
        if value in reads:
            return reads[value]
        if type(value) is ast.BinOp and type(value.op) is ast.Mult:
            for side, other in ((value.left, value.right), (value.right, value.left)):
                if side in reads and (_int_size(ctx, other) or (_plain_number(ctx, other) and ctx.kind(other) is not Kind.TENSOR)):
                    return reads[side]
        return None

    def _check_bindings(self, ctx: FileContext, total: _Total) -> _Flow | None:
        name = total.name
        steps = {aug for aug, _, _ in total.steps}
        kinds: dict[ast.AST, str] = {}
        starts = set()
        for how, node in total.scope.bindings[name]:
            parent = ctx.parents.get(node) if node is not None else None
            if how == "value" and parent in steps:
                kinds[parent] = "step"
                continue
            if how == "aug" and type(node) is ast.AugAssign:
                kinds[node] = "step" if node in steps else "rebind"
                if node not in steps:
                    total.rebinds.append(node)
                continue
            if how == "value" and type(parent) is ast.Assign and len(parent.targets) == 1 and type(parent.targets[0]) is ast.Name:
                literal = _number_literal(parent.value)
                if literal:
                    total.inits.append((parent, parent.value, parent.targets[0]))
                    starts.add(literal)
                    kinds[parent] = "init"
                else:
                    total.rebinds.append(parent)
                    kinds[parent] = "rebind"
                continue
            start = _unpacked_start(ctx, node, name) if how == "value" and isinstance(node, ast.expr) else None
            if start is not None:  # ``test_loss, correct = 0, 0``
                total.inits.append(start)
                starts.add(_number_literal(start[1]))
                kinds[start[0]] = "init"
                continue
            if type(parent) is ast.AnnAssign:
                total.problem = (f"`{name}` is annotated (`{_statement_code(ctx, parent).strip()}`): "
                                 "an accumulator would not match it")
            else:
                total.problem = f"`{name}` is also assigned in another way"
            return None
        if not total.inits:
            total.problem = f"`{name}` does not start from a number literal in this function"
            return None
        if "int" in starts:
            for _, value, site in total.steps:
                if type(value) is ast.BinOp and not certainly_floating(ctx, site.value):
                    total.problem = (
                        f"`{name}` starts as an int and `{ctx.code(site.value)}` is not known to be a floating "
                        "tensor (the type of the product decides the type of the sum)"
                    )
                    return None
        # Every other use of the name: it must resolve to this scope, outside nested functions.
        targets: set[ast.AST] = {target for _, _, target in total.inits}
        targets |= {n.targets[0] if type(n) is ast.Assign else n.target for n in total.rebinds}  # type: ignore[attr-defined]
        for step in steps:  # the name bound by each step, and its own read in ``total = total + v``
            if type(step) is ast.AugAssign:
                targets.add(step.target)
            else:
                assert type(step.value) is ast.BinOp
                targets |= {step.targets[0], step.value.left, step.value.right}  # type: ignore[union-attr]
        # The uses of the total lie below its scope's node; a ``global`` or ``nonlocal`` of the
        # name counts wherever it is (``ast`` keeps the names it declares as strings, not ``Name`` nodes).
        declared = [d for d in ctx.nodes(ast.Global, ast.Nonlocal) if name in d.names]  # type: ignore[attr-defined]
        uses: list[ast.AST] = list(ctx.names(name, total.scope.node))
        if declared:
            uses = sorted({id(n): n for n in [*uses, *declared]}.values(), key=ctx.positions.offset)
        for node in uses:
            if type(node) is ast.Global or type(node) is ast.Nonlocal:
                total.problem = f"`{name}` is declared global or nonlocal"
                return None
            assert type(node) is ast.Name
            if node.id != name or node in targets:
                continue
            parent = ctx.parents.get(node)
            scope = ctx.provenance.scope_of(node)
            owner = scope.lookup(name)
            if owner is not total.scope:
                continue
            if scope is not total.scope:
                total.problem = f"`{name}` is read from a nested function or comprehension"
                return None
            if type(parent) is ast.Delete and len(parent.targets) == 1:  # (``del total, n``: read, as libcst had it)
                total.problem = f"`{name}` is deleted"
                return None
            if type(parent) is ast.FormattedValue and self._shown_with_text(ctx, node):
                total.problem = f"`{name}` is shown by `{{{name}=}}`, which prints the expression's text"
                return None
            total.loads.append(node)
        return self._follow(ctx, total, kinds)

    @staticmethod
    def _shown_with_text(ctx: FileContext, node: ast.expr) -> bool:
        """Is ``node`` the expression of an f-string's ``{node=}`` (``ast`` keeps no mark of the ``=``)?"""
        source = ctx.source
        i = ctx.span(node)[1]
        while i < len(source) and source[i] in " \t\r\n":
            i += 1
        return source[i:i + 1] == "=" and source[i + 1:i + 2] != "="

    def _follow(self, ctx: FileContext, total: _Total, kinds: dict[ast.AST, str]) -> _Flow | None:
        anchors: dict[ast.AST, list[ast.Name]] = {}
        for load in total.loads:
            anchor = next((a for a in ctx.ancestors(load) if isinstance(a, ast.stmt)), None)
            if anchor is None:
                total.problem = f"fixitem cannot place a read of `{total.name}`"
                return None
            anchors.setdefault(anchor, []).append(load)
        flow = _Flow(total, anchors, kinds)
        owner = total.scope.node
        body = owner.body if isinstance(owner, (ast.Module, *_FUNCTIONS, ast.ClassDef)) else None  # type: ignore[attr-defined]
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

    def _read_once(self, ctx: FileContext, total: _Total, flow: _Flow) -> tuple[_Flow, dict[ast.stmt, ast.stmt]]:
        """Where a loop that adds is followed by more than one read, ``total = total.value()``
        right after the loop reads the device once and the later reads stay as they were.

        Returns the flow with those reads and {the statement after the loop: the loop (or the
        ``with`` it ends)}."""
        loops: list[ast.stmt] = []
        for step, _, _ in total.steps:
            for a in ctx.ancestors(step):
                if a is total.scope.node:
                    break
                if type(a) in _LOOPS and a not in loops:
                    loops.append(a)  # type: ignore[arg-type]
        loops.sort(key=lambda loop: -_depth(ctx, loop))  # the innermost first
        inserts: dict[ast.stmt, ast.stmt] = {}
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
    def _read_every_step(ctx: FileContext, total: _Total, flow: _Flow) -> ast.Name | None:
        """A read of the running total that every iteration of a loop that adds to it makes
        (``print(total / (i + 1))`` beside ``total += loss.item()``)."""
        loops: list[ast.stmt] = []
        for step, _, _ in total.steps:
            loop = next((a for a in ctx.ancestors(step) if isinstance(a, (*_LOOPS, *_FUNCTIONS, ast.ClassDef,
                                                                           ast.Lambda))), None)
            if type(loop) in _LOOPS and loop not in loops:
                loops.append(loop)  # type: ignore[arg-type]
        for loop in loops:
            for load in total.loads:
                if ACC not in flow.at.get(load, ()) or not _inside(load, loop):
                    continue
                child = _unconditional_child(ctx, load, loop)
                if any(child is s for s in loop.body) or (type(loop) is ast.While and child is loop.test):  # type: ignore[attr-defined]
                    return load
        return None

    def _report(self, ctx: FileContext, total: _Total, flow: _Flow | None, inserts: dict[ast.stmt, ast.stmt]) -> Report:
        first = total.steps[0][0]
        message = f"`{_statement_code(ctx, first)}` reads a tensor value every step to sum it on the host"
        sites = [site for _, _, site in total.steps]
        if total.problem or flow is None:
            return Report(first, message, sites=sites, note=f"no fix: {total.problem}")
        int_start = any(_number_literal(start) == "int" for _, start, _ in total.inits)
        replacements: dict[ast.AST, gen.Replacement] = {}
        for _, start, _ in total.inits:
            replacements[start] = gen.Raw(f"{ctx.runtime_alias()}.Accumulator({ctx.code(start)})")
        unsafe = ""
        for statement, value, site in total.steps:
            detached = method_call(ctx, site.value, "detach")
            new: gen.Node
            if value is site.node:
                new = method_call(ctx, detached, "double") if site.kind == "float" and int_start else detached
            else:
                assert type(value) is ast.BinOp
                double = method_call(ctx, detached, "double")
                new = gen.Splice(value, {site.node: double})
                other = value.right if value.left is site.node else value.left
                if not unsafe and not _int_size(ctx, other) and ctx.kind(other) is not Kind.NUMBER:
                    unsafe = f"`{ctx.code(other)}` is not known to be a Python number (a tensor made the sum a tensor)"
            if type(statement) is ast.AugAssign:
                replacements[value] = new
            else:
                replacements[statement] = self._in_place(ctx, statement, new)  # type: ignore[arg-type]
        values: dict[ast.AST, gen.Expr_] = {}
        for load in total.loads:
            if flow.at.get(load, set()) - {UNBOUND} == {ACC}:
                values[load] = method_call(ctx, gen.Name(total.name), "value")
        replacements.update(values)  # type: ignore[arg-type]
        for node in total.rebinds:
            if type(node) is ast.AugAssign and flow.at.get(node, set()) - {UNBOUND} == {ACC}:
                replacements[node] = self._finish(ctx, node, values)
        for after in inserts:  # ``total = total.value()`` before the statement that follows the loop
            read = gen.Assign(gen.Name(total.name), method_call(ctx, gen.Name(total.name), "value"))
            before = self._before(ctx, after, replacements)
            if before is None:
                inner = {node: replacements.pop(node) for node in list(replacements) if _inside(node, after)}
                replacements[after] = gen.Statements([read, _kept(ctx, after, inner)])
            else:
                statement, trailing = before
                inner = {node: replacements.pop(node) for node in list(replacements) if _inside(node, statement)}
                replacements[statement] = gen.Statements([_kept(ctx, statement, inner, trailing), read])
        unknown = [ctx.code(site.value) for site in sites if not site.certain]
        if unknown:
            unsafe = f"`{unknown[0]}` is not known to be a tensor (a numpy value has no `.detach()`)"
        if unsafe:
            fix = Fix(replacements, Safety.UNSAFE, unsafe, imports=ctx.runtime_imports())
        else:
            fix = Fix(replacements, Safety.SAFE, "", imports=ctx.runtime_imports())
        return Report(first, message, fix=fix, sites=sites)

    @staticmethod
    def _before(ctx: FileContext, after: ast.stmt, replacements: dict[ast.AST, gen.Replacement]) -> tuple[ast.stmt, str] | None:
        """Where the read of the total goes when lines stand between ``after`` and the statement
        before it: libcst put the new statement before ``after``'s leading blank and comment
        lines (``after`` owned them), so it follows the statement before (the loop, or another
        total's read) and what that statement owns. Returns that statement and the text after
        it on its last line (its comment, which a statement with a body is replaced with), or
        None to put the read just before ``after``: nothing stands between them, or no node
        ends where libcst put it (comments of the loop's block followed by more lines)."""
        around = _statements_around(ctx, after)
        if around is None or around[1] == 0:
            return None
        block, index = around
        previous = block[index - 1]
        last_line = ctx.positions[previous].end.line
        first_line = ctx.positions[after].start.line
        if first_line <= last_line + 1 or previous in replacements:
            return None
        if any(_inside(node, previous) and isinstance(new, gen.Statements) for node, new in replacements.items()):
            return None
        if not isinstance(previous, COMPOUND):
            return None if ctx.trailing_comment(previous) is not None else (previous, "")
        # The comment lines below the loop indented as its block or deeper belong to the block
        # (libcst's footer); the read would follow them.
        indent = _block_indent(ctx, previous)
        if indent is not None and any(
            ctx.line(n).startswith(indent) and ctx.line(n).strip().startswith("#") for n in range(last_line + 1, first_line)
        ):
            return None
        end = ctx.positions.span(previous)[1]
        source = ctx.source
        newline = source.find("\n", end)
        rest = source[end:len(source) if newline < 0 else newline]
        trailing = rest.rstrip("\r") if rest.strip().startswith("#") or not rest.strip() else ""
        return previous, trailing

    @staticmethod
    def _in_place(ctx: FileContext, assign: ast.Assign, added: gen.Node) -> gen.Statement:
        """``total = total + v`` -> ``total += v`` (``total - v``: ``-=``): the accumulator adds
        in place, where ``total + v`` would read it. On Python numbers the two are the same,
        and ``v + total`` is ``total + v``."""
        target = assign.targets[0]
        assert type(assign.value) is ast.BinOp
        operator = "-=" if type(assign.value.op) is ast.Sub else "+="
        # The spacing around ``=`` stays as it was (``total=total+v`` -> ``total+=v``).
        between = ctx.source[ctx.span(target)[1]:ctx.span(assign.value)[0]]
        before, _, after = between.partition("=")
        return _InPlace(target, f"{before}{operator}{after}", added)

    @staticmethod
    def _finish(ctx: FileContext, aug: ast.AugAssign, values: dict[ast.AST, gen.Expr_]) -> gen.Assign:
        """``total /= n`` -> ``total = total.value() / n``: the same operation on the same number."""
        assert type(aug.target) is ast.Name
        operator = AUG_OPERATORS[type(aug.op)]
        rhs = gen.substitute(aug.value, values, ctx)
        value = gen.BinaryOperation(method_call(ctx, gen.Name(aug.target.id), "value"), operator, _atom(ctx, rhs))
        return gen.Assign(aug.target, value)


def _block_indent(ctx: FileContext, statement: ast.stmt) -> str | None:
    """The indentation of the last block of the compound ``statement`` (its ``else:``,
    ``finally:``, last handler or body, through an ``elif`` chain), or None when that block
    is on the header's line (``for x in xs: total += x.item()``): it owns no lines below."""
    node: ast.AST = statement
    while True:
        handlers = getattr(node, "handlers", None) or getattr(node, "cases", None)
        blocks = [block for block in (getattr(node, "body", None), handlers[-1].body if handlers else None,
                                      getattr(node, "orelse", None), getattr(node, "finalbody", None)) if block]
        if not blocks:
            return None
        last = blocks[-1]
        if len(last) == 1 and _is_elif(ctx, node, last[0]):
            node = last[0]
            continue
        start = ctx.positions[last[0]].start
        before = ctx.line(start.line)[:start.column]
        return before if not before.strip() else None


class _InPlace(gen.Statement):
    """``target op= value``, with the spacing of the ``=`` it replaces (``op``: ``" += "``)."""

    def __init__(self, target: ast.AST, op: str, value: gen.Expr_) -> None:
        super().__init__()
        self.target = gen.expr(target)
        self.op = op
        self.value = gen.expr(value)

    def body(self, ctx: FileContext, indent: str) -> str:
        return f"{self.target.render(ctx, indent)}{self.op}{self.value.render(ctx, indent)}"

    def expressions(self) -> list[gen.Expr_]:
        return [self.target, self.value]
