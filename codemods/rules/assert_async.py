"""FX401: an ``assert`` / ``if ...: raise`` check decided by a tensor's value."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from ..context import FileContext
from ..provenance import Kind
from ..rule import Fix, Invalid, Report, Rule, Safety, Valid, dedent
from ..syncs import SyncSite, is_item_call
from ..tensor_values import (
    UNKNOWN_VALUE_NOTE,
    Converted,
    NotConvertible,
    _paren,
    _strip_parens,
    convert_condition,
    fit_line,
    is_boolean,
    sites_within,
    torch_call,
    uncertain_tensor,
)
from ..tree import walk

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
COMPARISON_FLIP = {cst.Equal: cst.NotEqual, cst.NotEqual: cst.Equal}

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
        for node in ctx.nodes(cst.Assert, cst.If):
            if isinstance(node, cst.Assert):
                test, message, raised = node.test, node.msg, "AssertionError"
            else:
                assert isinstance(node, cst.If)
                parent = ctx.parents.get(node)
                if isinstance(parent, cst.If) and parent.orelse is node:
                    continue  # an ``elif``: FX101 reports the chain
                raise_stmt = _only_raise(node)
                if raise_stmt is None:
                    continue  # not a check: FX101 reports it
                test, message, raised = node.test, _raise_message(raise_stmt), _exception_name(ctx, raise_stmt)
            test_sites = [s for s in sites_within(ctx, sites, test) if s not in claimed]
            if not test_sites:
                continue  # sizes, shapes, Python values: no sync
            if ctx.compile_guard(node) is not None:
                continue  # code written for (or kept out of) compiled regions: leave it as it is
            yield self._report(ctx, node, test, message, raised, test_sites)

    def _report(self, ctx: FileContext, node: cst.Assert | cst.If, test: cst.BaseExpression,
                message: cst.BaseExpression | None, raised: str, test_sites: list[SyncSite]) -> Report:
        what = f"assert {ctx.code(test)}" if isinstance(node, cst.Assert) else f"if {ctx.code(test)}: raise"
        text = f"`{what}` reads a tensor value on the host to check it"

        def no_fix(note: str) -> Report:
            return Report(node, text, sites=test_sites, note=note)

        if all(not s.certain for s in test_sites):
            return no_fix(UNKNOWN_VALUE_NOTE)
        uncertain = [r for r in (uncertain_tensor(ctx, s.node) for s in test_sites) if r]
        if uncertain:
            return no_fix(f"no fix: {uncertain[0]}")
        function = ctx.enclosing_function(node)
        if ctx.path.name.startswith("test_") or (function is not None and function.name.value.startswith("test")):
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
            if isinstance(node, cst.If):
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
        if isinstance(node, cst.Assert):
            reasons.append("`python -O` no longer removes the check")
        arguments: list[cst.BaseExpression] = [condition.expr]
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
        if isinstance(node, cst.Assert):
            replacement: cst.CSTNode = cst.Expr(call, semicolon=node.semicolon)
        else:
            replacement = _statement_for_if(ctx, node, call)
        return Report(
            node, text, fix=Fix({node: replacement}, Safety.UNSAFE, "; ".join(reasons)), sites=test_sites
        )


def _only_raise(node: cst.If) -> cst.Raise | None:
    """The ``raise`` that is the whole body of an ``if`` without ``else`` (not an ``elif``)."""
    if node.orelse is not None:
        return None
    body = node.body
    if isinstance(body, cst.SimpleStatementSuite):
        smalls = list(body.body)
    elif len(body.body) == 1 and isinstance(body.body[0], cst.SimpleStatementLine):
        smalls = list(body.body[0].body)
    else:
        return None
    if len(smalls) != 1 or not isinstance(smalls[0], cst.Raise) or smalls[0].exc is None:
        return None
    return smalls[0]


def _raise_message(raise_stmt: cst.Raise) -> cst.BaseExpression | None:
    exc = raise_stmt.exc
    if isinstance(exc, cst.Call) and exc.args and exc.args[0].keyword is None and not exc.args[0].star:
        return exc.args[0].value
    return None


def _exception_name(ctx: FileContext, raise_stmt: cst.Raise) -> str:
    exc = raise_stmt.exc
    assert exc is not None
    return ctx.code(exc.func if isinstance(exc, cst.Call) else exc)


def _enclosing_try(ctx: FileContext, node: cst.CSTNode) -> cst.CSTNode | None:
    """The ``try`` whose body holds ``node`` (within the same function)."""
    child = node
    for parent in ctx.ancestors(node):
        if isinstance(parent, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            return None
        if isinstance(parent, (cst.Try, cst.TryStar)) and child is parent.body:
            return parent
        child = parent
    return None


def _bool_call(ctx: FileContext, expr: cst.BaseExpression) -> cst.BaseExpression | None:
    """``bool(t)`` of a tensor ``t``: ``t``."""
    if (
        isinstance(expr, cst.Call)
        and isinstance(expr.func, cst.Name)
        and expr.func.value == "bool"
        and len(expr.args) == 1
        and expr.args[0].keyword is None
        and not expr.args[0].star
        and ctx.is_tensor(expr.args[0].value)
    ):
        return expr.args[0].value
    return None


def _device_condition(ctx: FileContext, test: cst.BaseExpression) -> Converted | None:
    """The test as a tensor that is non-zero exactly when the test is true."""
    inner = _bool_call(ctx, test)
    if inner is not None:
        return Converted(_strip_parens(inner), [test])
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        operand = _device_condition(ctx, test.expression)
        if operand is None:
            return None
        return Converted(_negate(ctx, operand.expr), operand.reads)
    return convert_condition(ctx, test)


def _negate(ctx: FileContext, expr: cst.BaseExpression) -> cst.BaseExpression:
    """``not expr`` for a tensor: undo a ``~``, flip ``==`` / ``!=``, else ``~`` or ``logical_not``.

    ``<`` is never flipped into ``>=``: for NaN both are false, while
    ``not x < c`` is true.
    """
    if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.BitInvert) and is_boolean(ctx, expr.expression):
        return _strip_parens(expr.expression)
    if isinstance(expr, cst.Comparison) and len(expr.comparisons) == 1:
        (target,) = expr.comparisons
        flipped = COMPARISON_FLIP.get(type(target.operator))
        if flipped is not None:
            operator = flipped(
                whitespace_before=target.operator.whitespace_before,
                whitespace_after=target.operator.whitespace_after,
            )
            return _strip_parens(expr).with_changes(comparisons=[target.with_changes(operator=operator)])
    if is_boolean(ctx, expr):
        return cst.UnaryOperation(operator=cst.BitInvert(), expression=_paren(expr))
    return torch_call(ctx, "logical_not", expr)


def _check_boolean_operands(ctx: FileContext, test: cst.BaseExpression, condition: cst.BaseExpression) -> None:
    """``~`` / ``&`` / ``|`` that the conversion introduced must act on boolean tensors:
    on an integer tensor they are bitwise, on a float tensor an error."""
    original = set(walk(test))
    for node in walk(condition):
        if node in original:
            continue
        operands: list[cst.BaseExpression] = []
        if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.BitInvert):
            operands = [node.expression]
        elif isinstance(node, cst.BinaryOperation) and isinstance(node.operator, (cst.BitAnd, cst.BitOr)):
            operands = [node.left, node.right]
        for operand in operands:
            if not is_boolean(ctx, operand):
                raise NotConvertible(
                    f"`{ctx.code(operand)}` may not be a boolean tensor: `not` / `and` / `or` of it has no "
                    "exact tensor form here"
                )


def _check_covers(ctx: FileContext, test_sites: list[SyncSite], condition: Converted) -> None:
    """Every read of the test must be gone from the converted condition."""
    removed = set(condition.reads)
    for site in test_sites:
        if site.node in removed or any(a in removed for a in ctx.ancestors(site.node)):
            continue
        raise NotConvertible(f"`{ctx.code(site.node)}` would still be read on the host")


def _reads_tensor(ctx: FileContext, expr: cst.BaseExpression) -> bool:
    """Does building ``expr`` read a tensor's value? (Its sizes, dtype and device are fine.)"""
    for node in walk(expr):
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value in VALUE_READS:
            if is_item_call(node) or ctx.kind(node.func.value) in (Kind.TENSOR, Kind.UNKNOWN):
                return True
        if ctx.kind(node) is Kind.TENSOR:
            parent = ctx.parents.get(node)
            if isinstance(parent, cst.Attribute) and parent.value is node and parent.attr.value in METADATA:
                continue
            return True
    return False


def _constant_message(message: cst.BaseExpression) -> cst.BaseExpression | None:
    """``message`` as ``torch._assert_async`` can take it: string literals as they are,
    and f-strings kept intact (their fields read no tensor: the caller checked); None
    for anything else."""
    if isinstance(message, cst.SimpleString):
        return message
    if isinstance(message, cst.FormattedString):
        if not any(isinstance(p, cst.FormattedStringExpression) for p in message.parts):
            return message
        # The same f-string, so that ``{shape}`` is still filled in; it is marked as a
        # changed node so that the fix names the cost of formatting it on every call.
        return message.deep_clone()
    if isinstance(message, cst.ConcatenatedString):
        left = _constant_message(message.left)
        right = _constant_message(message.right)
        if left is None or right is None:
            return None
        if left is message.left and right is message.right:
            return message
        return message.with_changes(left=left, right=right)
    return None


def _statement_for_if(ctx: FileContext, node: cst.If, call: cst.Call) -> cst.SimpleStatementLine:
    """The ``torch._assert_async(...)`` line that replaces ``if ...: raise``, with its comments."""
    comments = list(node.leading_lines)
    header = getattr(node.body, "header", None)
    if header is not None and header.comment is not None:
        comments.append(cst.EmptyLine(comment=header.comment))
    trailing = cst.TrailingWhitespace()
    body = node.body
    if isinstance(body, cst.IndentedBlock):
        line = body.body[0]
        assert isinstance(line, cst.SimpleStatementLine)
        comments.extend(l for l in line.leading_lines if l.comment is not None)
        trailing = line.trailing_whitespace
    elif isinstance(body, cst.SimpleStatementSuite):
        trailing = body.trailing_whitespace
    return cst.SimpleStatementLine([cst.Expr(call)], leading_lines=comments, trailing_whitespace=trailing)
