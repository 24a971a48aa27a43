"""FX401: an ``assert`` / ``if ...: raise`` check decided by a tensor's value."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from .. import gen
from ..fixes.tensor_code import (
    Converted,
    NotConvertible,
    _paren,
    _strip_parens,
    convert_condition,
    fit_line,
    is_boolean,
    tensor_sites_within,
    torch_call,
)
from ..model.context import FUNCTIONS, FileContext
from ..model.provenance import Kind
from ..model.syncs import SyncSite, is_item_call
from ..model.tree import walk
from ..model.value_flow import UNKNOWN_VALUE_NOTE, uncertain_tensor
from ..rule import Fix, Invalid, Report, Rule, Safety, Valid, dedent

# Tensor attributes and methods that give metadata (sizes, dtype, device), not values:
# a message may format them without reading the device.
METADATA = frozenset(
    {
        "shape", "dtype", "device", "ndim", "layout", "names", "requires_grad", "is_cuda", "is_leaf",
        "size", "dim", "ndimension", "numel", "nelement", "element_size", "stride", "get_device",
        "is_contiguous", "is_floating_point",
    }
)
# Methods that read a tensor's values back to the host.
VALUE_READS = frozenset({"item", "tolist", "numpy", "cpu", "__format__", "__repr__", "__str__"})
COMPARISON_FLIP = {"==": "!=", "!=": "=="}
COMPARISON_OPERATORS = {ast.Eq: "==", ast.NotEq: "!="}
TRY = (ast.Try,) + ((ast.TryStar,) if hasattr(ast, "TryStar") else ())

HAND_ADVICE = (
    "By hand: move the check out of the compiled code (validate inputs once before the model runs, "
    "or check every N steps), or write `torch._assert_async(<bool tensor>, \"message\")` with a "
    "tensor condition; for a value that is also used as a size, `torch._check(n <= limit)` after the "
    "read tells the compiler the bound"
)


class AssertAsync(Rule):
    """## What it does
    Finds checks decided by a tensor's value: `assert` statements
    (`assert t.item() <= c, "msg"`, `assert (x > 0).all()`,
    `assert bool(t < 3)`, `assert not torch.isnan(loss).any()`) and
    `if <tensor test>: raise SomeError("msg")` (the body only raises, no
    `else`), and rewrites them into `torch._assert_async(<bool tensor>, "msg")`,
    which checks on the device.

    ## Why is this bad?
    Python needs the test's value on the host, so the host waits for the
    device (a **host sync**) on every call, even though the check almost never
    fails; in `torch.compile`d code, `.item()`, `bool()`, `not` and
    `if ...: raise` are also **graph breaks** (errors with `fullgraph=True`).
    `torch._assert_async` takes a one-element tensor and raises only when it
    is zero, without the host waiting. Measured on torch 2.13: it compiles
    with `fullgraph=True` and no graph break, and on the CPU a failing check
    still raises (a `RuntimeError` carrying the message). Dynamo already turns
    a plain `assert <bool tensor>` into the same call inside compiled code;
    the eager code still syncs there.

    ## Example
    ```python
    assert h.abs().max().item() < 1e4, "activations exploded"
    if torch.isnan(loss).any():
        raise FloatingPointError("NaN loss")
    ```

    ## Use instead
    ```python
    torch._assert_async(h.abs().max() < 1e4, "activations exploded")
    torch._assert_async(~torch.isnan(loss).any(), "NaN loss")
    ```
    The `if` form's test is negated with `~` (or by flipping `==` / `!=`), not
    by flipping `<` into `>=`: `~(x > c)` is true for NaN exactly as
    `not x > c` was. The message is kept when it is a string literal or an
    f-string that reads no tensor (`f"at step {step}"` stays an f-string, so
    the text is filled in as before; it is now formatted on every call, not
    only when the check fails, and a formatted size that is dynamic under
    `torch.compile` is read on the host). Any other message (a variable, a
    call) is left out.

    ## Fix safety
    **Unsafe** (`--unsafe`): the check keeps its meaning, but how it fails
    changes. On CUDA a failed device-side assertion is reported
    asynchronously, at some later CUDA call, and leaves the CUDA context
    unusable: the process must restart, so code that catches the error and
    carries on no longer can. The exception type changes from
    `AssertionError` (or the `if` form's `ValueError`, ...) to
    `RuntimeError`. `python -O` no longer strips the check. A message computed
    from tensor values cannot be kept. As with FX101, a value read with
    `.item()` / `float()` was compared in float64 and is now compared in the
    tensor's dtype.

    There is **no fix** (report only, with what to do by hand) when the test
    mixes Python logic fixitem cannot turn into tensor operations, when the
    message formats tensor values, when the check sits inside a `try` (the
    caught exception type would change), in test functions (`test_*`, where a
    read is fine), and under `torch.compiler.is_compiling()` and similar
    guards. Checks of sizes and shapes (`assert x.shape[0] == n`) are Python
    ints, not syncs, and are not reported; `if`s with `else` / `elif` or with
    more than a `raise` are left to FX101.
    """

    code = "FX401"
    name = "assert-async"
    summary = "`assert` / `if ...: raise` on a tensor value: check on the device with `torch._assert_async`"
    graph_breaks = ("GB0124", "GB0170")
    examples = [
        Invalid(
            dedent(
                """
                import torch
                def f(h: torch.Tensor):
                    assert h.abs().max().item() < 1e4, "activations exploded"
                    return h * 2
                """
            ),
            fixed=dedent(
                """
                import torch
                def f(h: torch.Tensor):
                    torch._assert_async(h.abs().max() < 1e4, "activations exploded")
                    return h * 2
                """
            ),
            unsafe=True,
        ),
        Invalid(
            dedent(
                """
                import torch
                def f(x: torch.Tensor, t: torch.Tensor):
                    assert (x > 0).all()
                    assert bool(t < 3)  # small enough
                    assert not torch.isnan(x).any(), "NaN input"
                    assert float(t) != 0
                    return x.log()
                """
            ),
            fixed=dedent(
                """
                import torch
                def f(x: torch.Tensor, t: torch.Tensor):
                    torch._assert_async((x > 0).all())
                    torch._assert_async(t < 3)  # small enough
                    torch._assert_async(~torch.isnan(x).any(), "NaN input")
                    torch._assert_async(t != 0)
                    return x.log()
                """
            ),
            unsafe=True,
        ),
        Invalid(
            dedent(
                """
                import torch
                def check(loss: torch.Tensor, step: int):
                    if not torch.isfinite(loss).all():  # fp16 overflow
                        raise FloatingPointError(f"non-finite loss at step {step}")
                    if loss.item() > 1e6:
                        raise ValueError("loss diverged")
                    if loss.item() == 0: raise ValueError
                    return loss
                """
            ),
            fixed=dedent(
                """
                import torch
                def check(loss: torch.Tensor, step: int):
                    # fp16 overflow
                    torch._assert_async(torch.isfinite(loss).all(), f"non-finite loss at step {step}")
                    torch._assert_async(~(loss > 1e6), "loss diverged")
                    torch._assert_async(loss != 0)
                    return loss
                """
            ),
            unsafe=True,
        ),
        Invalid(
            dedent(
                """
                import torch
                def f(x: torch.Tensor):
                    assert x.min().item() >= 0, f"negative input: {x.min()}"
                    return x.sqrt()
                """
            )
        ),
        Invalid(
            dedent(
                """
                import torch
                def f(x: torch.Tensor):
                    try:
                        if torch.isnan(x).any():
                            raise ValueError("NaN")
                    except ValueError:
                        x = torch.nan_to_num(x)
                    return x
                """
            )
        ),
        Valid(
            dedent(
                """
                import torch
                def f(x: torch.Tensor, n: int):
                    assert x.shape[0] == n, "batch size"
                    assert x.dim() == 2 and x.size(1) > 0
                    if x.numel() == 0:
                        raise ValueError("empty")
                    return x
                """
            )
        ),
        Valid(
            dedent(
                """
                import numpy as np
                def f(a):
                    v = np.random.rand(1)
                    assert v.item() < 1.0
                    return a * v
                """
            )
        ),
        Valid(
            dedent(
                """
                import torch
                def f(x: torch.Tensor, lr: float):
                    assert lr > 0, "learning rate"
                    if lr > 1:
                        raise ValueError(f"lr too large: {lr}")
                    return x * lr
                """
            )
        ),
        Valid(
            dedent(
                """
                import torch
                def f(x: torch.Tensor):
                    if not torch.compiler.is_compiling():
                        assert (x >= 0).all()
                    return x
                """
            )
        ),
    ]

    def check(self, ctx: FileContext, sites: list[SyncSite], claimed: set[SyncSite]) -> Iterator[Report]:
        for node in ctx.nodes(ast.Assert, ast.If):
            if type(node) is ast.Assert:
                test, message, raised = node.test, node.msg, "AssertionError"
            else:
                assert type(node) is ast.If
                parent = ctx.parents.get(node)
                if type(parent) is ast.If and ctx.field_of(node) == "orelse" and ctx.else_line(parent) is None:
                    continue  # an ``elif``: FX101 reports the chain
                raise_stmt = _only_raise(node)
                if raise_stmt is None:
                    continue  # not a check: FX101 reports it
                test, message, raised = node.test, _raise_message(raise_stmt), _exception_name(ctx, raise_stmt)
            test_sites = [s for s in tensor_sites_within(ctx, sites, test) if s not in claimed]
            if not test_sites:
                continue  # sizes, shapes, Python values: no sync
            if ctx.compile_guard(node) is not None:
                continue  # code written for (or kept out of) compiled regions: leave it as it is
            yield self._report(ctx, node, test, message, raised, test_sites)

    def _report(self, ctx: FileContext, node: ast.Assert | ast.If, test: ast.expr,
                message: ast.expr | None, raised: str, test_sites: list[SyncSite]) -> Report:
        what = f"assert {ctx.code(test)}" if type(node) is ast.Assert else f"if {ctx.code(test)}: raise"
        text = f"`{what}` reads a tensor value on the host to check it"

        def no_fix(note: str) -> Report:
            return Report(node, text, sites=test_sites, note=note)

        if all(not s.certain for s in test_sites):
            return no_fix(UNKNOWN_VALUE_NOTE)
        uncertain = [r for r in (uncertain_tensor(ctx, s.node) for s in test_sites) if r]
        if uncertain:
            return no_fix(f"no fix: {uncertain[0]}")
        function = ctx.enclosing_function(node)
        if ctx.path.name.startswith("test_") or (function is not None and function.name.startswith("test")):
            return no_fix(
                "no fix: an assertion in a test, where waiting for the value costs little and a Python "
                "`AssertionError` is what the test runner expects; ignore FX401 for test files "
                "(`per-file-ignores` in `[tool.fixitem]`)"
            )
        if _enclosing_try(ctx, node) is not None:
            return no_fix(
                f"no fix: inside `try`, the `{raised}` may be caught, and `torch._assert_async` raises "
                "`RuntimeError` instead (on CUDA asynchronously, leaving the CUDA context unusable). "
                + HAND_ADVICE
            )
        try:
            condition = _device_condition(ctx, test)
            if condition is None:
                raise NotConvertible(f"`{ctx.code(test)}` reads the value in a way fixitem cannot keep on the device")
            if type(node) is ast.If:
                condition = Converted(_negate(ctx, condition.expr), condition.reads)
            _check_boolean_operands(ctx, test, condition.expr)
            _check_covers(ctx, test_sites, condition)
        except NotConvertible as exc:
            return no_fix(f"no fix: {exc}. {HAND_ADVICE}")
        if message is not None and _reads_tensor(ctx, message):
            return no_fix(
                f"no fix: the message `{ctx.code(message)}` formats tensor values, which "
                "`torch._assert_async` cannot carry (it takes a constant string). Use a constant message "
                "and apply with `--unsafe`, or keep the read and move the check out of the compiled code "
                "(or run it every N steps)"
            )
        reasons = [
            "on CUDA a failed `torch._assert_async` is reported asynchronously, later, and leaves the "
            "CUDA context unusable (the process must restart)",
        ]
        if raised != "RuntimeError":
            reasons.append(f"it raises `RuntimeError` instead of `{raised}`")
        if type(node) is ast.Assert:
            reasons.append("`python -O` no longer removes the check")
        arguments: list[gen.Expr_] = [condition.expr]
        if message is not None:
            constant = _constant_message(message)
            if constant is None:
                reasons.append(f"the message `{ctx.code(message)}` is left out (it must be a constant string)")
            else:
                if constant is not message:
                    reasons.append(
                        "the f-string message is now formatted on every call, not only when the check fails"
                    )
                arguments.append(constant)
        call = fit_line(ctx, node, torch_call(ctx, "_assert_async", *arguments))
        if type(node) is ast.Assert:
            # The statement's text is replaced: a ``;`` or comment after it stays where it is.
            replacement: gen.Statement = gen.ExprStatement(call)
        else:
            replacement = _statement_for_if(ctx, node, call)
        return Report(
            node, text, fix=Fix({node: replacement}, Safety.UNSAFE, "; ".join(reasons)), sites=test_sites
        )


def _only_raise(node: ast.If) -> ast.Raise | None:
    """The ``raise`` that is the whole body of an ``if`` without ``else`` (not an ``elif``)."""
    if node.orelse:
        return None
    if len(node.body) != 1 or type(node.body[0]) is not ast.Raise or node.body[0].exc is None:
        return None
    return node.body[0]


def _raise_message(raise_stmt: ast.Raise) -> ast.expr | None:
    exc = raise_stmt.exc
    # A positional argument stands before every keyword: the first one is the call's first.
    if type(exc) is ast.Call and exc.args and type(exc.args[0]) is not ast.Starred:
        return exc.args[0]
    return None


def _exception_name(ctx: FileContext, raise_stmt: ast.Raise) -> str:
    exc = raise_stmt.exc
    assert exc is not None
    return ctx.code(exc.func if type(exc) is ast.Call else exc)


def _enclosing_try(ctx: FileContext, node: ast.AST) -> ast.AST | None:
    """The ``try`` whose body holds ``node`` (within the same function)."""
    child = node
    for parent in ctx.ancestors(node):
        if isinstance(parent, (*FUNCTIONS, ast.ClassDef, ast.Lambda)):
            return None
        if isinstance(parent, TRY) and any(s is child for s in parent.body):  # type: ignore[attr-defined]
            return parent
        child = parent
    return None


def _bool_call(ctx: FileContext, expr: ast.expr) -> ast.expr | None:
    """``bool(t)`` of a tensor ``t``: ``t``."""
    if (
        type(expr) is ast.Call
        and type(expr.func) is ast.Name
        and expr.func.id == "bool"
        and len(expr.args) == 1
        and not expr.keywords
        and type(expr.args[0]) is not ast.Starred
        and ctx.is_tensor(expr.args[0])
    ):
        return expr.args[0]
    return None


def _device_condition(ctx: FileContext, test: ast.expr) -> Converted | None:
    """The test as a tensor that is non-zero exactly when the test is true."""
    inner = _bool_call(ctx, test)
    if inner is not None:
        return Converted(_strip_parens(inner), [test])
    if type(test) is ast.UnaryOp and type(test.op) is ast.Not:
        operand = _device_condition(ctx, test.operand)
        if operand is None:
            return None
        return Converted(_negate(ctx, operand.expr), operand.reads)
    return convert_condition(ctx, test)


# -- looking into new code ----------------------------------------------------------------------
# A converted condition is new code (:mod:`..gen`) whose leaves are nodes of the file; a node of
# the file may also stand in it with nodes inside it replaced (``gen.Splice``). These helpers see
# through both, so that the shape of the code (a ``~``, a comparison) is what is tested, whether it
# is new code or the file's own.


def _unwrap(value: gen.Expr_) -> tuple[gen.Expr_, dict | None]:
    """``value`` without the parentheses new code put around it: a node of the file with the
    replacements made inside it (``{}`` for none), or new code with None."""
    while isinstance(value, gen.Paren):
        value = value.value
    if isinstance(value, ast.AST):
        return value, {}
    if isinstance(value, gen.Source):
        return value.node, {}
    if isinstance(value, gen.Splice):
        return value.node, value.replacements
    return value, None


def _part(ctx: FileContext, child: ast.AST, replacements: dict) -> gen.Node:
    """A child of a node of the file, as new code, with the replacements inside it made."""
    return gen.substitute(child, replacements, ctx)


def _negate(ctx: FileContext, expr: gen.Expr_) -> gen.Expr_:
    """``not expr`` for a tensor: undo a ``~``, flip ``==`` / ``!=``, else ``~`` or ``logical_not``.

    ``<`` is never flipped into ``>=``: for NaN both are false, while
    ``not x < c`` is true.
    """
    node, replacements = _unwrap(expr)
    if replacements is None:
        if type(node) is gen.UnaryOperation and node.op == "~" and is_boolean(ctx, node.operand):
            return _strip_parens(node.operand)
        if type(node) is gen.Comparison and len(node.comparisons) == 1:
            ((op, right),) = node.comparisons
            if op in COMPARISON_FLIP:
                return gen.Comparison(node.left, [(COMPARISON_FLIP[op], right)])
    else:
        if type(node) is ast.UnaryOp and type(node.op) is ast.Invert:
            operand = _part(ctx, node.operand, replacements)
            if is_boolean(ctx, operand):
                return _strip_parens(operand)
        if type(node) is ast.Compare and len(node.ops) == 1 and type(node.ops[0]) in COMPARISON_OPERATORS:
            flipped = COMPARISON_FLIP[COMPARISON_OPERATORS[type(node.ops[0])]]
            return gen.Comparison(_part(ctx, node.left, replacements),
                                  [(flipped, _part(ctx, node.comparators[0], replacements))])
    if is_boolean(ctx, expr):
        return gen.UnaryOperation("~", _paren(expr))
    return torch_call(ctx, "logical_not", expr)


def _check_boolean_operands(ctx: FileContext, test: ast.expr, condition: gen.Expr_) -> None:
    """``~`` / ``&`` / ``|`` that the conversion introduced must act on boolean tensors:
    on an integer tensor they are bitwise, on a float tensor an error."""
    # The test's own nodes are left out; what counts as introduced is what the conversion
    # built or rebuilt: new code, a node of the file with changes inside it, and a node of
    # the file given parentheses it did not have, or stripped of its own (the conversion
    # made a changed copy of such a node; its children are still the test's own).
    stack: list[tuple[gen.Expr_, bool]] = [(condition, False)]  # (code, in new parentheses)
    while stack:
        item, in_parentheses = stack.pop()
        operands: list[gen.Expr_] = []
        children: list[gen.Expr_] = []
        if isinstance(item, (ast.AST, gen.Source)):
            node = item if isinstance(item, ast.AST) else item.node
            own = isinstance(item, ast.AST) or item.parentheses
            if in_parentheses:
                rebuilt = not own or not ctx.parenthesized(node)
            else:
                rebuilt = not own and ctx.parenthesized(node)
            if not rebuilt:
                continue
            operands = _bitwise_operands(ctx, node, {})
        elif isinstance(item, gen.Paren):
            stack.append((item.value, True))
            continue
        elif isinstance(item, gen.Splice):
            operands = _bitwise_operands(ctx, item.node, item.replacements)
            children = [v for _, v in sorted(item.replacements.items(), key=lambda kv: ctx.span(kv[0])[0])]
        elif isinstance(item, gen.Node):
            if type(item) is gen.UnaryOperation and item.op == "~":
                operands = [item.operand]
            elif type(item) is gen.BinaryOperation and item.op in ("&", "|"):
                operands = [item.left, item.right]
            children = item.children()
        for operand in operands:
            if not is_boolean(ctx, operand):
                raise NotConvertible(
                    f"`{gen.show(ctx, operand)}` may not be a boolean tensor: `not` / `and` / `or` of it has no "
                    "exact tensor form here"
                )
        stack.extend((child, False) for child in reversed(children))


def _bitwise_operands(ctx: FileContext, node: ast.AST, replacements: dict) -> list[gen.Expr_]:
    """The operands of ``~`` / ``&`` / ``|`` node of the file (with ``replacements`` made in them)."""
    if type(node) is ast.UnaryOp and type(node.op) is ast.Invert:
        return [_part(ctx, node.operand, replacements)]
    if type(node) is ast.BinOp and type(node.op) in (ast.BitAnd, ast.BitOr):
        return [_part(ctx, node.left, replacements), _part(ctx, node.right, replacements)]
    return []


def _check_covers(ctx: FileContext, test_sites: list[SyncSite], condition: Converted) -> None:
    """Every read of the test must be gone from the converted condition."""
    removed = set(condition.reads)
    for site in test_sites:
        if site.node in removed or any(a in removed for a in ctx.ancestors(site.node)):
            continue
        raise NotConvertible(f"`{ctx.code(site.node)}` would still be read on the host")


def _reads_tensor(ctx: FileContext, expr: ast.expr) -> bool:
    """Does building ``expr`` read a tensor's value? (Its sizes, dtype and device are fine.)"""
    for node in walk(expr):
        if not isinstance(node, ast.expr):
            continue  # ``keyword``, ``comprehension``...: their expressions come next
        if type(node) is ast.Call and type(node.func) is ast.Attribute and node.func.attr in VALUE_READS:
            if is_item_call(node) or ctx.kind(node.func.value) in (Kind.TENSOR, Kind.UNKNOWN):
                return True
        if ctx.kind(node) is Kind.TENSOR:
            parent = ctx.parents.get(node)
            if type(parent) is ast.Attribute and parent.value is node and parent.attr in METADATA:
                continue
            return True
    return False


def _constant_message(message: ast.expr) -> gen.Expr_ | None:
    """``message`` as ``torch._assert_async`` can take it: string literals as they are,
    and f-strings kept intact (their fields read no tensor: the caller checked); None
    for anything else. (Implicitly concatenated literals are one node in ``ast``: an
    f-string among them makes the whole an f-string.)"""
    if type(message) is ast.Constant and isinstance(message.value, (str, bytes)):
        return message
    if type(message) is ast.JoinedStr:
        if not any(type(p) is ast.FormattedValue for p in message.values):
            return message
        # The same f-string, so that ``{shape}`` is still filled in; it is given as new code
        # (not ``message`` itself) so that the fix names the cost of formatting it on every call.
        return gen.Source(message)
    return None


def _statement_for_if(ctx: FileContext, node: ast.If, call: gen.Expr_) -> gen.Statement:
    """The ``torch._assert_async(...)`` line that replaces ``if ...: raise``, with its comments.

    The comment lines above the ``if`` stay where they are (the replaced text starts at the
    ``if``); the comments inside it (on its header, above the ``raise``, after it) go with the
    new line."""
    comments: list[str] = []
    header = ctx.header_comment(node)
    if header is not None:
        comments.append(header)
    line = node.body[0]
    header_end = ctx.header_end(node)
    if header_end is not None and ctx.positions[line].start.line > header_end[0]:  # the ``raise`` on a line of its own
        comments.extend(ctx.leading_comments(line))
    trailing = ""
    if ctx.trailing_comment(line) is not None:
        end = ctx.positions[line].end
        trailing = ctx.line(end.line)[end.column:].rstrip()
    return gen.ExprStatement(call, comments=comments, trailing=trailing)
