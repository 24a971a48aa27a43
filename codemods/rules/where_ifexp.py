"""FX102: a conditional expression decided by a tensor's value."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from ..fixes.branches import (
    branch_only_parameters,
    branch_read_problem,
    new_tensor_problems,
)
from ..fixes.tensor_code import (
    NotConvertible,
    convert_condition,
    exact_in_every_float_dtype,
    fit_line,
    purity,
    tensor_sites_within,
    threshold_rounding,
    torch_call,
    zero_dim_condition,
)
from ..model.context import FileContext
from ..model.dtypes import selected_dtype_problem, tensors_met, zero_dim_dtype_problem
from ..model.grad_mode import passed_on_problem
from ..model.provenance import Kind
from ..model.syncs import SyncSite
from ..model.value_flow import UNKNOWN_VALUE_NOTE, uncertain_tensor, value_flow
from ..rule import Fix, Invalid, Report, Rule, Safety, Valid, dedent


class WhereIfExp(Rule):
    """## What it does
    Finds conditional expressions (`a if cond else b`) whose condition reads
    a tensor's value and rewrites them into `torch.where(cond, a, b)`.

    ## Why is this bad?
    Choosing between `a` and `b` in Python needs the condition's value on
    the host: a **host sync**, and a **graph break** in compiled code.
    `torch.where` selects on the device.

    ## Example
    ```python
    scale = x * 0.5 if x.norm().item() > 10 else x
    ```

    ## Use instead
    ```python
    scale = torch.where(x.norm() > 10, x * 0.5, x)
    ```

    ## Fix safety
    **Safe** when both values are tensors computed without side effects and
    from the same modules and parameters, or both are number literals of one
    type that every floating dtype holds exactly (`2.0` / `1.0`) and the
    result is used only in tensor arithmetic with tensors that certainly
    have a dimension (`y * scale` with `y` a layer's output: the selection
    is a 0-dim float32 tensor, which would turn a 0-dim float16 `y` into
    float32; ints are selected as int64), and the condition
    compares with numbers exact in float16/bfloat16 (see FX101). **Unsafe**
    when a value may have side effects, random numbers or NaN gradients
    (both values are now computed), when only one value uses a module or
    parameter (zero gradients instead of `None`: AdamW and momentum then
    move it), when the result is returned or passed on where a Python number
    was, when the threshold is not exact in the tensor's dtype, or when
    fixitem cannot show that the two tensors have one dtype (`torch.where`
    promotes them: `x.float() if c else x`, `x / 2 if c else x // 2`; see
    FX101), or when the name assigned is written in place afterwards
    (`y[0] = 0.0`) and a value may be a tensor other code holds too (see
    FX101). **No fix**
    when a value is `None`, a flag, a string, a tuple or an `Enum` member,
    when the condition is not certainly a tensor, or when the result is
    later needed as a Python number (a size, `range`, an index, a `-> float`
    return, Python control flow), or when the rewrite would keep the read
    (`torch.tensor(y.item()) > 0` still reads `y.item()`: such a fix would
    remove no sync), or when a branch reads a value itself (`m.mean().item()
    if m.any() else 0.0`: `torch.where` evaluates both branches, so the read
    would stay, and run where the original skipped it).
    """

    code = "FX102"
    name = "where-ifexp"
    summary = "conditional expression on a tensor value: select with `torch.where` instead"
    graph_breaks = ("GB0124", "GB0170")
    examples = [
        Invalid(
            dedent(
                """
                import torch
                def f(x: torch.Tensor, t: torch.Tensor):
                    return x / 2 if t.item() > 0 else x // 2
                """
            ),
            fixed=dedent(
                """
                import torch
                def f(x: torch.Tensor, t: torch.Tensor):
                    return torch.where(t > 0, x / 2, x // 2)
                """
            ),
            unsafe=True,  # an integer `x // 2` becomes float: `torch.where` promotes it to `x / 2`'s dtype
        ),
        Invalid(
            dedent(
                """
                import torch
                def f(x: torch.Tensor):
                    return x * 0.5 if x.norm().item() > 10 else x
                """
            ),
            fixed=dedent(
                """
                import torch
                def f(x: torch.Tensor):
                    return torch.where(x.norm() > 10, x * 0.5, x)
                """
            ),
        ),
        Invalid(
            dedent(
                """
                import torch
                def f(x: torch.Tensor):
                    scale = 0.5 if float(x.max()) > 1 else 1.0
                    return x * scale
                """
            ),
            fixed=dedent(
                """
                import torch
                def f(x: torch.Tensor):
                    scale = torch.where(x.max() > 1, 0.5, 1.0)
                    return x * scale
                """
            ),
            unsafe=True,  # `x` may be 0-dim: a float16 one times the float32 0-dim `scale` is float32
        ),
        Invalid(
            dedent(
                """
                import torch
                from torch import nn
                class Damp(nn.Module):
                    def __init__(self):
                        super().__init__()
                        self.fc = nn.Linear(4, 4)
                    def forward(self, x):
                        y = self.fc(x)
                        scale = 0.5 if float(y.max()) > 1 else 1.0
                        return y * scale
                """
            ),
            fixed=dedent(
                """
                import torch
                from torch import nn
                class Damp(nn.Module):
                    def __init__(self):
                        super().__init__()
                        self.fc = nn.Linear(4, 4)
                    def forward(self, x):
                        y = self.fc(x)
                        scale = torch.where(y.max() > 1, 0.5, 1.0)
                        return y * scale
                """
            ),
        ),
        Invalid(
            dedent(
                """
                import torch
                def f(loss: torch.Tensor):
                    lr = 0.5 if loss.item() > 1 else 0.25
                    return lr
                """
            ),
            fixed=dedent(
                """
                import torch
                def f(loss: torch.Tensor):
                    lr = torch.where(loss.reshape(()) > 1, 0.5, 0.25)
                    return lr
                """
            ),
            unsafe=True,  # the caller gets a 0-dim tensor
        ),
        Invalid(
            dedent(
                """
                import enum
                import torch
                class Mode(enum.Enum):
                    TRAIN = 1
                    EVAL = 2
                def f(x: torch.Tensor, k: int):
                    mode = Mode.TRAIN if x.sum().item() > 0 else Mode.EVAL
                    n = k if x.sum().item() > 0 else 2 * k
                    return mode, torch.arange(n)
                """
            )
        ),
        Invalid(
            dedent(
                """
                import torch
                def f(x: torch.Tensor, y: torch.Tensor):
                    return x * 0.5 if torch.tensor(y.item()) > 0 else x
                """
            ),
            unsafe=True,  # `torch.where(torch.tensor(y.item()) > 0, ...)` would still read `y.item()`
        ),
        Valid(
            dedent(
                """
                import torch
                def f(x: torch.Tensor, training: bool):
                    return x * 0.5 if training else x
                """
            )
        ),
    ]

    def check(self, ctx: FileContext, sites: list[SyncSite], claimed: set[SyncSite]) -> Iterator[Report]:
        for node in ctx.nodes(ast.IfExp):
            assert isinstance(node, ast.IfExp)
            test_sites = [s for s in tensor_sites_within(ctx, sites, node.test) if s not in claimed]
            if not test_sites:
                continue
            message = f"`... if {ctx.code(node.test)} else ...` reads a tensor value on the host"
            try:
                condition = convert_condition(ctx, node.test)
            except NotConvertible as exc:
                yield Report(node, message, sites=test_sites, note=f"no fix: {exc}")
                continue
            uncertain = [r for r in (uncertain_tensor(ctx, site.node) for site in test_sites) if r]
            if uncertain:  # says where the value comes from: more use to the reader than "not known"
                yield Report(node, message, sites=test_sites, note=f"no fix: {uncertain[0]}")
                continue
            if condition is None:
                yield Report(node, message, sites=test_sites, note=UNKNOWN_VALUE_NOTE)
                continue
            kept = branch_read_problem(ctx, sites, (node.body, node.orelse))
            if kept:
                yield Report(node, message, sites=test_sites, note=f"no fix: {kept}")
                continue
            refused = [_not_selectable(ctx, v) for v in (node.body, node.orelse)]
            if any(refused):
                yield Report(node, message, sites=test_sites, note=f"no fix: {next(r for r in refused if r)}")
                continue
            blocking = [v for v in (purity(ctx, node.body), purity(ctx, node.orelse)) if v.blocking]
            if blocking:
                yield Report(node, message, sites=test_sites, note=f"no fix: {blocking[0].reason}")
                continue
            reasons = []
            numbers = [v for v in (node.body, node.orelse) if ctx.kind(v) is not Kind.TENSOR]
            if numbers:
                flow = value_flow(ctx, node)
                if flow.blocking:
                    note = (f"no fix: the result would be a 0-dim tensor where a Python number is needed: "
                            f"{flow.blocking}")
                    yield Report(node, message, sites=test_sites, note=note)
                    continue
                if flow.unsafe:
                    reasons.append(f"the result becomes a 0-dim tensor where the original gave a Python number: {flow.unsafe}")
                reasons.extend(_number_problems(ctx, node, numbers))
                reasons.extend(_dtype_problems(ctx, node, numbers))
                unknown = [v for v in numbers if ctx.kind(v) is not Kind.NUMBER]
                if unknown:
                    reasons.append(f"`{ctx.code(unknown[0])}` is not known to be a tensor: the result becomes one")
            else:
                problem = selected_dtype_problem(ctx, node, node.body, node.orelse)
                if problem:
                    reasons.append(problem)
            for value in (node.body, node.orelse):
                verdict = purity(ctx, value)
                if not verdict.safe:
                    reasons.append(verdict.reason)
            params = branch_only_parameters(ctx, node, node.body, node.orelse)
            if params:
                reasons.append(params)
            passed_on = passed_on_problem(ctx, node, [node.body, node.orelse])
            if passed_on:
                reasons.append(passed_on)
            statement = ctx.parents.get(node)
            if type(statement) is ast.Assign and statement.value is node and len(statement.targets) == 1 and type(
                    statement.targets[0]) is ast.Name:  # ``y = a if ... else b``, then ``y`` written in place
                reasons.extend(new_tensor_problems(ctx, statement, statement.targets[0].id, [node.body, node.orelse]))
            rounding = threshold_rounding(ctx, node.test)
            if rounding:
                reasons.append(rounding)
            test = zero_dim_condition(ctx, condition.expr, test_sites, [node.body, node.orelse])
            new = torch_call(ctx, "where", test, node.body, node.orelse)
            new = fit_line(ctx, node, new)
            safety = Safety.UNSAFE if reasons else Safety.SAFE
            yield Report(node, message, fix=Fix({node: new}, safety, "; ".join(dict.fromkeys(reasons))), sites=test_sites)


def _literal(expr: ast.expr) -> ast.expr:
    while type(expr) is ast.UnaryOp and type(expr.op) in (ast.USub, ast.UAdd):  # type: ignore[attr-defined]
        expr = expr.operand  # type: ignore[attr-defined]
    return expr


def _number_literal(expr: ast.expr) -> bool:
    """An int or float literal (``True`` / ``False`` and complex numbers are not)."""
    return type(expr) is ast.Constant and type(expr.value) in (int, float)  # type: ignore[attr-defined]


def _not_selectable(ctx: FileContext, value: ast.expr) -> str:
    """Why ``torch.where`` must not select ``value``: only tensors and numbers can be
    selected, and a flag, ``None``, a string, a tuple or an ``Enum`` member would be
    turned into a tensor or fail."""
    if type(value) is ast.Constant and isinstance(value.value, bool):  # type: ignore[attr-defined]
        return f"`{value.value}` is a Python flag: as a tensor it would be read back wherever it is tested"
    kind = ctx.kind(value)
    if kind in (Kind.OTHER, Kind.MODULE, Kind.NUMPY):
        return f"`{ctx.code(value)}` is neither a tensor nor a number"
    if kind is Kind.UNKNOWN and (type(value) in (ast.Name, ast.Attribute)
                                 or (type(value) is ast.Constant and value.value is None)):  # type: ignore[attr-defined]
        return (f"`{ctx.code(value)}` is not known to be a tensor or a number (an `Enum` member, a string "
                "and a flag cannot be selected by `torch.where`)")
    return ""


def _dtype_problems(ctx: FileContext, node: ast.IfExp, numbers: list[ast.expr]) -> list[str]:
    """Why the selected numbers, as a 0-dim tensor (the default float32 for float literals,
    int64 for int ones), may promote differently than the Python number did against the tensors
    they meet."""
    literals = [_literal(v) for v in numbers]
    if len(numbers) != 2 or not all(_number_literal(v) for v in literals):
        return []  # _number_problems already refuses
    kind = "default_float" if type(literals[0].value) is float else "integer"  # type: ignore[attr-defined]
    code = ctx.code(node)
    problems = [zero_dim_dtype_problem(ctx, code, tensor, kind=kind) for tensor in tensors_met(ctx, node)]
    return [p for p in problems if p][:1]  # the first says enough


def _number_problems(ctx: FileContext, node: ast.IfExp, numbers: list[ast.expr]) -> list[str]:
    """Why the Python numbers selected may not act in tensor arithmetic as they did."""
    if len(numbers) == 1:
        return [f"`{ctx.code(numbers[0])}` is a Python number and the other value a tensor: the result "
                "takes the tensor's dtype where the number met the other operand's"]
    literals = [_literal(v) for v in numbers]
    if not all(_number_literal(v) for v in literals):
        return ["a Python number fixitem cannot see becomes a 0-dim tensor (a float, float32, torch's default "
                "dtype: the digits a Python float has beyond float32's are lost)"]
    if not all(exact_in_every_float_dtype(v) for v in numbers):
        text = ", ".join(f"`{ctx.code(v)}`" for v in numbers if not exact_in_every_float_dtype(v))
        return [f"{text} is not exact in float32/float16/bfloat16: as a 0-dim float32 tensor it is rounded, "
                "where Python passed the exact number to the operation"]
    if len({type(v.value) for v in literals}) != 1:  # type: ignore[attr-defined]
        return ["an int and a float are selected: the 0-dim tensor is a float where the int stayed an int"]
    return []
