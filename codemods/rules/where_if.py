"""FX101: an ``if`` statement decided by a tensor's value."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator

from .. import gen
from ..advice import ADVICE, checks_finite
from ..fixes.branches import (
    Assignment,
    BranchError,
    branch_assignments,
    branch_local,
    branch_only_parameters,
    branch_read_problem,
    defined_before,
    in_one_line_suite,
    kept_value_problem,
    new_tensor_problems,
    not_selectable,
    unaliased_fresh_local,
)
from ..fixes.tensor_code import (
    Converted,
    NotConvertible,
    _operand,
    convert_condition,
    exact_in_every_float_dtype,
    fit_statement,
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
from ..model.scalar_shapes import detached_scalar
from ..model.syncs import SyncSite
from ..model.tree import walk
from ..model.value_flow import (
    UNKNOWN_VALUE_NOTE,
    binding_of,
    name_flow_after,
    name_uses,
    uncertain_tensor,
    value_flow,
)
from ..rule import Fix, Invalid, Report, Rule, Safety, Valid, dedent


class WhereIf(Rule):
    """## What it does
    Finds `if` statements whose condition reads a tensor's value
    (`t.item() > c`, `float(t) < c`, `if mask.any():`, `and` / `or` / `not`
    of such tests) and, when both branches only assign tensor values to
    names, rewrites them into `torch.where` selections.

    ## Why is this bad?
    To decide which branch to run, Python needs the value on the host: the
    host waits until the device has computed it (a **host sync**), and inside
    `torch.compile`d code the condition is also a **graph break** (with
    `fullgraph=True` it is an error). `torch.where` computes both candidates
    on the device and selects between them without ever leaving it.

    ## Example
    ```python
    if x.norm().item() > 1.0:
        x = x / 2
    ```

    ## Use instead
    ```python
    x = torch.where(x.norm() > 1.0, x / 2, x)
    ```
    `if`/`else` that assign the same names in the same order become one
    `torch.where` per name; with more than one statement the condition is
    computed once first. Augmented assignments (`y += z`) become
    `y = torch.where(c, y + z, y)`. Python tests in front of the tensor test
    (`if mask is not None and mask.sum().item() > 0:`, no `else`) stay an
    `if` around the selection. A temporary of the branch (a name assigned
    there and read only after an assignment in the same block, like
    `clamp_value` in transformers' fp16 clamps) is computed unconditionally
    when its value is pure.

    ## Fix safety
    The fix is **safe** when it gives the same program, training included:
    every branch value is a tensor computed by pure tensor arithmetic,
    `torch` functions and modules known to be pure (`nn.Linear`,
    convolutions, activations, ...); both branches depend on the same
    modules and parameters; and every number the condition compares a tensor
    value with is exact in float16 and bfloat16 (`4.0`, `0.5`, `-1`), so
    comparing in the tensor's dtype decides as Python's float64 did. Both
    branches are then computed (extra work) and the results, gradients and
    optimizer steps are equal. A condition on a tensor reduced along a
    dimension (`h.norm(dim=-1, keepdim=True) > 1`) gets `.reshape(())`: the
    original raised unless it held one element, and so does the fix, where
    `torch.where` alone would select element by element. Also safe: selecting Python number literals
    of one type, exact in every floating dtype, when every later use of the
    name is tensor arithmetic (`scale = 2.0` / `scale = 1.0`, then `y *
    scale`); an augmented assignment of such a number to a fresh local
    tensor nothing else refers to (`h = self.fc(x)`, then `h += 1.0`); a value
    read into a name (`energy = float(t)`) whose every use is a tensor
    condition or tensor arithmetic: the read becomes `t.detach()`.

    The fix is **unsafe** (applied with `--unsafe`) when a branch:
    calls a module or uses a parameter that the other branch does not (its
    parameters get zero gradients instead of `None` when the other branch is
    selected, and AdamW's weight decay and moments or SGD momentum then
    update them where the original left them alone); draws random numbers
    (dropout); updates state (BatchNorm in training, in-place operations, an
    augmented assignment of a tensor that may be shared); calls a function
    fixitem cannot see into; divides by or takes `log`/`sqrt`/... of a value
    that may be zero, or takes `exp`/`expm1`/`cosh`/... of one that may
    overflow (the branch that was not taken then sends NaN into the
    gradient); assigns a Python number whose later uses fixitem cannot
    follow (returned, passed to a function); when the name is written in
    place afterwards (`y[0] = 0.0`, `y.add_(1)`, through a view or a second
    name) and a value it may hold is a tensor other code holds too (an input,
    `x.float()`, which is `x` itself for a float32 `x`): the write reached
    that tensor, and after the fix reaches only the new one `torch.where`
    made (a tensor made in the function that nothing else refers to is no
    reason); when the name is returned (or read as an object: `x.grad`,
    `x is p`) and may hold a tensor the caller or the module holds (the
    function's own input `x`, `w = self.weight`: the original hands back that
    very tensor where the condition is false); when it is printed whole afterwards (`print(loss)`
    shows `grad_fn=<WhereBackward0>`); or when the condition compares
    with a number that float16/bfloat16 do not hold exactly (`0.1`, `1e-6`, a
    Python variable): Python compared in float64, the tensor compares with the
    number rounded to its dtype, so a value equal to that rounding decides
    the other way (for float32, exactly one value per threshold); or when
    fixitem cannot show that the two values have one dtype: `torch.where`
    promotes them to a common dtype, so an integer `x` scaled by `0.5` on one
    path becomes float on both, and `x.float()` selected against `x` makes the
    kept `x` float too. Values that come from the same tensors, changed the
    same way (`x + 1` / `x - 1`) or changed only as a floating tensor is not
    (`h * 0.5` / `h` for a module's output `h`, a tensor under `if
    h.dtype == torch.float16`, one whose `.norm()` / `.mean()` the condition
    computes, which fails for an integer tensor), have one dtype. Under
    `torch.no_grad()` / `torch.inference_mode()` no gradient is computed:
    the gradient reasons do not apply there, except for a value the original
    passes on as it is (an input that may require grad; `torch.where` gives a
    new tensor that does not). A divisor the code keeps away
    from zero (`x.norm() + 1e-6`, `y.clamp(min=1e-6)`) is no reason either.

    There is **no fix** when the condition's value is not certainly a tensor
    (a parameter of `autograd.Function.forward` never used as one, a value
    from `torch.load`); when a branch may change the shape (indexing,
    slicing, `torch.cat`, `reshape`, a reduction as the whole value):
    `torch.where` needs both branches to have the same shape, and would
    silently broadcast or fail; when a branch returns, raises, breaks,
    continues, calls a function for its effect, assigns to attributes or
    items, or assigns a name that is not defined on the other path; when a
    branch selects something that is not a tensor or a number (`None`, a
    flag, a string, an `Enum` member); or when a selected Python number is
    later needed as one (`range`, a size, an index, a `-> float` return,
    Python control flow). `scan` says which. Use `torch.cond` when both
    branches are functions of tensors with the same output shapes, or move
    the decision out of the compiled region.
    """

    code = "FX101"
    name = "where-if"
    summary = "`if` on a tensor value: select with `torch.where` instead"
    graph_breaks = ("GB0124", "GB0170")
    examples = [
        Invalid(
            dedent(
                """
                import torch
                @torch.no_grad()
                def f(x: torch.Tensor):
                    h = x * 2.0
                    if h.sum().item() > 0:
                        h = h / h.norm()
                    return h
                """
            ),
            fixed=dedent(
                """
                import torch
                @torch.no_grad()
                def f(x: torch.Tensor):
                    h = x * 2.0
                    h = torch.where(h.sum() > 0, h / h.norm(), h)
                    return h
                """
            ),  # no gradient: a zero `h.norm()` in the untaken branch changes nothing
        ),
        Invalid(
            dedent(
                """
                import torch
                @torch.no_grad()
                def f(x: torch.Tensor, y: torch.Tensor):
                    if x.sum().item() > 0:
                        x = x / y.sum()
                    return x
                """
            ),
            fixed=dedent(
                """
                import torch
                @torch.no_grad()
                def f(x: torch.Tensor, y: torch.Tensor):
                    x = torch.where(x.sum() > 0, x / y.sum(), x)
                    return x
                """
            ),
            unsafe=True,  # the original returns the input `x` itself, which may require grad
        ),
        Invalid(
            dedent(
                """
                import torch
                from torch import nn
                def f(layer: nn.Module, x: torch.Tensor):
                    y = layer(x)
                    if y.abs().max().item() > 1.0:
                        y = y * 0.5
                    return y
                """
            ),
            fixed=dedent(
                """
                import torch
                from torch import nn
                def f(layer: nn.Module, x: torch.Tensor):
                    y = layer(x)
                    y = torch.where(y.abs().max() > 1.0, y * 0.5, y)
                    return y
                """
            ),
        ),
        Invalid(
            dedent(
                """
                import torch
                def f(x: torch.Tensor):
                    if x.abs().max().item() > 1.0:
                        x = x * 0.5
                    return x
                """
            ),
            fixed=dedent(
                """
                import torch
                def f(x: torch.Tensor):
                    x = torch.where(x.abs().max() > 1.0, x * 0.5, x)
                    return x
                """
            ),
            unsafe=True,  # `torch.where` makes an integer `x` float on both paths, not only where it is scaled
        ),
        Invalid(
            dedent(
                """
                import torch
                from torch import nn
                class Block(nn.Module):
                    def __init__(self):
                        super().__init__()
                        self.lin = nn.Linear(4, 4)
                    def forward(self, x):
                        h = self.lin(x)
                        if h.norm(dim=-1, keepdim=True) > 1.0:
                            h = h * 0.5
                        return h
                """
            ),
            fixed=dedent(
                """
                import torch
                from torch import nn
                class Block(nn.Module):
                    def __init__(self):
                        super().__init__()
                        self.lin = nn.Linear(4, 4)
                    def forward(self, x):
                        h = self.lin(x)
                        h = torch.where(h.norm(dim=-1, keepdim=True).reshape(()) > 1.0, h * 0.5, h)
                        return h
                """
            ),
            # ``bool()`` raised for a batch of more than one row; ``.reshape(())`` still does,
            # where ``torch.where`` alone would select row by row.
        ),
        Invalid(
            dedent(
                """
                import torch
                def f(x: torch.Tensor):
                    y = x.float()
                    if y.norm().item() > 1.0:
                        y = y * 0.5
                    y[0] = 0.0
                    return y
                """
            ),
            fixed=dedent(
                """
                import torch
                def f(x: torch.Tensor):
                    y = x.float()
                    y = torch.where(y.norm() > 1.0, y * 0.5, y)
                    y[0] = 0.0
                    return y
                """
            ),
            unsafe=True,  # for a float32 `x`, `x.float()` is `x`: the original's `y[0] = 0.0` wrote the caller's tensor
        ),
        Invalid(
            dedent(
                """
                import torch
                from torch import nn
                class Gate(nn.Module):
                    def __init__(self):
                        super().__init__()
                        self.fc = nn.Linear(4, 4)
                    def forward(self, x, t):
                        if t.item() > 0 and not float(x.mean()) < -1:  # keep this note
                            y = self.fc(x)
                        else:
                            y = x.relu()
                        return y
                """
            ),
            fixed=dedent(
                """
                import torch
                from torch import nn
                class Gate(nn.Module):
                    def __init__(self):
                        super().__init__()
                        self.fc = nn.Linear(4, 4)
                    def forward(self, x, t):
                        # keep this note
                        y = torch.where((t > 0) & ~(x.mean() < -1), self.fc(x), x.relu())
                        return y
                """
            ),
            unsafe=True,  # self.fc takes part in one branch only
        ),
        Invalid(
            dedent(
                """
                import torch
                from torch import nn
                def f(layer: nn.Module, x: torch.Tensor):
                    y = layer(x)
                    energy = float(y.pow(2).mean())
                    if energy > 4.0:
                        y = y * 0.5
                    scale = 2.0 if y.max().item() < 0.5 else 1.0
                    return y * scale
                """
            ),
            fixed=dedent(
                """
                import torch
                from torch import nn
                def f(layer: nn.Module, x: torch.Tensor):
                    y = layer(x)
                    energy = y.pow(2).mean().detach()
                    y = torch.where(energy > 4.0, y * 0.5, y)
                    scale = 2.0 if y.max().item() < 0.5 else 1.0
                    return y * scale
                """
            ),
        ),
        Invalid(
            dedent(
                """
                import torch
                from torch import nn
                class Block(nn.Module):
                    def __init__(self):
                        super().__init__()
                        self.fc = nn.Linear(4, 4)
                    def forward(self, x):
                        h = self.fc(x)
                        if h.mean().item() < 0:
                            h += 1.0
                        return h
                """
            ),
            fixed=dedent(
                """
                import torch
                from torch import nn
                class Block(nn.Module):
                    def __init__(self):
                        super().__init__()
                        self.fc = nn.Linear(4, 4)
                    def forward(self, x):
                        h = self.fc(x)
                        h = torch.where(h.mean() < 0, h + 1.0, h)
                        return h
                """
            ),
        ),
        Invalid(
            dedent(
                """
                import torch
                def pad(x: torch.Tensor):
                    if x.abs().max().item() > 1.0:
                        n = 4
                    else:
                        n = 8
                    return x.new_zeros(n)
                """
            )
        ),
        # A parameter of autograd.Function.forward that is never used as a tensor is a Python value.
        Valid(
            dedent(
                """
                import torch
                class Scale(torch.autograd.Function):
                    @staticmethod
                    def forward(ctx, bias, tp_degree):
                        if tp_degree > 1:
                            bias = bias * 0.5
                        return bias
                """
            )
        ),
        Invalid(
            dedent(
                """
                import torch
                def f(x: torch.Tensor, y: torch.Tensor):
                    if x.sum().item() > y.sum().item():
                        x = x - 1
                        y = x * 2
                    else:
                        x = x + 1
                        y = x * 3
                    return x, y
                """
            ),
            fixed=dedent(
                """
                import torch
                def f(x: torch.Tensor, y: torch.Tensor):
                    cond = x.sum() > y.sum()
                    x = torch.where(cond, x - 1, x + 1)
                    y = torch.where(cond, x * 2, x * 3)
                    return x, y
                """
            ),
        ),
        Invalid(
            dedent(
                """
                import torch
                def f(x: torch.Tensor, scale: torch.Tensor):
                    if scale.item() < 0:
                        x += torch.randn_like(x)
                    return x
                """
            ),
            fixed=dedent(
                """
                import torch
                def f(x: torch.Tensor, scale: torch.Tensor):
                    x = torch.where(scale < 0, x + torch.randn_like(x), x)
                    return x
                """
            ),
            unsafe=True,
        ),
        Invalid(
            dedent(
                """
                import torch
                def f(x: torch.Tensor, mask: torch.Tensor | None = None):
                    if mask is not None and mask.sum().item() > 0:
                        x = x.masked_fill(mask, 0.0)
                    return x.softmax(dim=-1)
                """
            ),
            fixed=dedent(
                """
                import torch
                def f(x: torch.Tensor, mask: torch.Tensor | None = None):
                    if mask is not None:
                        x = torch.where(mask.sum() > 0, x.masked_fill(mask, 0.0), x)
                    return x.softmax(dim=-1)
                """
            ),
        ),
        Invalid(
            dedent(
                """
                import torch
                from torch import nn
                def block(hidden_states: torch.Tensor, layer: nn.Module):
                    hidden_states = layer(hidden_states)
                    if hidden_states.dtype == torch.float16 and torch.isinf(hidden_states).any():
                        clamp_value = torch.finfo(hidden_states.dtype).max - 1000
                        hidden_states = torch.clamp(hidden_states, min=-clamp_value, max=clamp_value)
                    return hidden_states
                """
            ),
            fixed=dedent(
                """
                import torch
                from torch import nn
                def block(hidden_states: torch.Tensor, layer: nn.Module):
                    hidden_states = layer(hidden_states)
                    if hidden_states.dtype == torch.float16:
                        clamp_value = torch.finfo(hidden_states.dtype).max - 1000
                        hidden_states = torch.where(
                            torch.isinf(hidden_states).any(),
                            torch.clamp(hidden_states, min=-clamp_value, max=clamp_value),
                            hidden_states,
                        )
                    return hidden_states
                """
            ),
        ),
        Invalid(
            dedent(
                """
                import torch
                def f(x: torch.Tensor):
                    if x.max().item() > 10:
                        return x / 10
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
                    if v.item() > 0.5:
                        a = a * 2
                    return a
                """
            )
        ),
        Valid(
            dedent(
                """
                import torch
                def f(x: torch.Tensor, n: int):
                    if n > 3:
                        x = x * 2
                    return x
                """
            )
        ),
    ]

    def check(self, ctx: FileContext, sites: list[SyncSite], claimed: set[SyncSite]) -> Iterator[Report]:
        for node in ctx.nodes(ast.If):
            assert isinstance(node, ast.If)
            parent = ctx.parents.get(node)
            if _is_elif(ctx, parent, node):
                continue  # an ``elif``: part of its parent's report
            test_sites = [s for s in tensor_sites_within(ctx, sites, node.test) if s not in claimed]
            stored: dict[ast.AST, gen.Expr_] = {}
            if not test_sites:
                # ``energy = float(t)`` ... ``if energy > 4.0:``: the read is kept as a
                # 0-dim tensor when every use of the name works with one.
                found = stored_reads(ctx, sites, claimed, node.test)
                if found is None:
                    continue
                test_sites, stored = found
            report = self._report(ctx, node, test_sites, sites, stored)
            if report.fix is None and checks_finite(ctx, node.test) and NAN_ADVICE not in report.note:
                report.note = f"{report.note.rstrip('.')}. {NAN_ADVICE}"  # NaN-skip logic: the device can decide
            yield report

    def _report(self, ctx: FileContext, node: ast.If, test_sites: list[SyncSite], sites: list[SyncSite],
                stored: dict[ast.AST, gen.Expr_] | None = None) -> Report:
        message = f"`if {ctx.code(node.test)}:` reads a tensor value on the host"
        if stored:
            names = ", ".join(f"`{ctx.code(ctx.parents[s.node].targets[0])}`" for s in test_sites)
            message = f"`if {ctx.code(node.test)}:` tests a tensor value read on the host into {names}"
        guard: gen.Expr_ | None = None  # Python-only leading ``and`` operands
        uncertain = [r for r in (uncertain_tensor(ctx, s.node) for s in test_sites) if r]
        if uncertain:
            return Report(node, message, sites=test_sites, note=f"no fix: {uncertain[0]}")
        try:
            condition = Converted(node.test, [node.test]) if stored else convert_condition(ctx, node.test)
        except NotConvertible as exc:
            split = self._split_guard(ctx, node, test_sites)
            if split is None:
                return Report(node, message, sites=test_sites, note=f"no fix: {exc}")
            guard, condition = split
        if condition is None:
            return Report(node, message, sites=test_sites, note=UNKNOWN_VALUE_NOTE)
        if node.orelse and _is_elif(ctx, node, node.orelse[0]):
            return Report(node, message, sites=test_sites, note="no fix: `elif` chains are not rewritten; nest `torch.where` by hand")
        try:
            body = branch_assignments(ctx, node.body)
            orelse = branch_assignments(ctx, node.orelse) if node.orelse else None
        except BranchError as exc:
            hand = "" if checks_finite(ctx, node.test) else f" {HAND_ADVICE}"
            return Report(node, message, sites=test_sites, note=f"no fix: {exc}.{hand}")
        if orelse is not None and [a.name for a in body] != [a.name for a in orelse]:
            return Report(
                node, message, sites=test_sites,
                note="no fix: the branches do not assign the same names in the same order",
            )
        for index, assignment in enumerate(body):
            other = orelse[index] if orelse is not None else None
            problem = not_selectable(ctx, node, assignment, assignment.name) or not_selectable(
                ctx, node, other, assignment.name
            )
            if problem:
                return Report(node, message, sites=test_sites, note=f"no fix: {problem}")
        temporaries: set[int] = set()  # indexes of branch-local names, computed unconditionally
        if orelse is None:
            for index, assignment in enumerate(body):
                if defined_before(ctx, node, assignment.name):
                    continue
                if (
                    assignment.augmented is None
                    and branch_local(ctx, node, assignment.name)
                    and purity(ctx, assignment.value).safe
                ):
                    temporaries.add(index)
                    continue
                return Report(
                    node, message, sites=test_sites,
                    note=f"no fix: `{assignment.name}` has no value when the condition is false",
                )
        for assignment in [*body, *(orelse or [])]:
            verdict = purity(ctx, assignment.value)
            if verdict.blocking:
                return Report(node, message, sites=test_sites, note=f"no fix: {verdict.reason}")
        kept = branch_read_problem(ctx, sites, [a.value for a in [*body, *(orelse or [])]])
        if kept:
            return Report(node, message, sites=test_sites, note=f"no fix: {kept}")
        flows: dict[str, str] = {}  # a Python number selected: where the name's value goes
        for index, assignment in enumerate(body):
            if index in temporaries:
                continue
            other = orelse[index] if orelse is not None else None
            values = [a.value for a in (assignment, other) if a is not None and a.augmented is None]
            before = ctx.provenance.name_kind_at(assignment.name, node)
            if any(ctx.kind(v) is Kind.NUMBER for v in values) or (before is Kind.NUMBER and other is None):
                flow = name_flow_after(ctx, node, assignment.name)
                if flow.blocking:
                    return Report(node, message, sites=test_sites, note=(
                        f"no fix: `{assignment.name}` would hold a 0-dim tensor where a Python number is "
                        f"needed: {flow.blocking}. Keep the `if` (the number must reach the host), or decide "
                        "it from Python values, such as the data pipeline's, to avoid the read"))
                unsafe = (f"`{assignment.name}` becomes a 0-dim tensor where it was a Python number: {flow.unsafe}"
                          if flow.unsafe else "")
                flows[assignment.name] = (unsafe or _number_pair_problem(ctx, node, assignment, other)
                                          or _selected_dtype_problem(ctx, values))
        selected = [a.value for i, a in enumerate(body) if a.augmented is None and i not in temporaries]
        selected += [a.value for a in orelse or [] if a.augmented is None]
        test = condition.expr if stored else zero_dim_condition(ctx, condition.expr, test_sites, selected)
        fix = self._fix(ctx, node, test, body, orelse, temporaries, flows)
        rounding = threshold_rounding(ctx, node.test)
        if rounding:
            fix.safety = Safety.UNSAFE
            fix.reason = "; ".join(r for r in (fix.reason, rounding) if r)
        for site in test_sites if stored else ():
            fix.replacements[site.node] = stored[site.node]
        if guard is not None:
            # ``if mask is not None and mask.sum().item() > 0:`` keeps its Python
            # test; only the tensor part becomes a selection inside it.
            (statements,) = fix.replacements.values()
            assert isinstance(statements, gen.Statements)
            first, *rest = statements.statements
            # The ``if`` keeps its own comments (those above it stay where they are, its
            # header's stays on it); the branch's go with its statements.
            outer = len(_header_comments(ctx, node))
            inner = [first.with_comments(first.comments[outer:]), *rest]
            fix.replacements = {node: _GuardedIf(guard, inner, _header_text(ctx, node))}
        return Report(node, message, fix=fix, sites=test_sites)

    def _split_guard(self, ctx: FileContext, node: ast.If, test_sites: list[SyncSite]):
        """``py1 and py2 and tensor_test`` without ``else``: (``py1 and py2``, converted test)."""
        if node.orelse or in_one_line_suite(ctx, node.body):
            return None
        test = node.test
        if type(test) is ast.BoolOp and type(test.op) is ast.And and not ctx.parenthesized(test):
            operands: list[ast.expr] = list(test.values)
        else:
            operands = [test]
        site_nodes = {s.node for s in test_sites}
        reads = [any(n in site_nodes for n in walk(op)) for op in operands]
        if not any(reads) or reads[0]:
            return None
        first_read = reads.index(True)
        if not all(reads[first_read:]):
            return None  # Python operands after tensor ones: keep the evaluation order as is
        python_part, tensor_part = operands[:first_read], operands[first_read:]
        try:
            converted = [convert_condition(ctx, op) for op in tensor_part]
        except NotConvertible:
            return None
        if any(c is None for c in converted):
            return None
        guard: gen.Expr_ = python_part[0]
        for op in python_part[1:]:
            guard = gen.BooleanOperation(guard, "and", op)
        condition = converted[0]
        for extra in converted[1:]:
            condition = type(condition)(
                gen.BinaryOperation(_operand(condition.expr), "&", _operand(extra.expr)),
                condition.reads + extra.reads,
            )
        return guard, condition

    def _fix(self, ctx: FileContext, node: ast.If, condition: gen.Expr_,
             body: list[Assignment], orelse: list[Assignment] | None, temporaries: set[int],
             flows: dict[str, str]) -> Fix:
        reasons: list[str] = []
        selected = [i for i in range(len(body)) if i not in temporaries]
        read_by_condition = _spelled_names(condition)
        assigned_first = {body[i].name for i in range(selected[0])} if selected else set()
        hoist = len(selected) > 1 or bool(read_by_condition & assigned_first)
        cond_expr: gen.Expr_ = condition
        statements: list[gen.Statement] = []
        # The comments above the ``if`` stay where they are; those of its header and of its
        # ``else:`` go with the statements that replace it.
        comments = _header_comments(ctx, node)
        if hoist:
            cond_name = _fresh_name(ctx, node, "cond")
            statements.append(_assign(cond_name, condition))
            cond_expr = gen.Name(cond_name)
        for index, taken in enumerate(body):
            if index in temporaries:
                # A temporary of the branch: computing it anyway changes nothing else.
                statements.append(_assign(taken.name, taken.value))
                comments.extend(taken.comments)
                continue
            other = orelse[index] if orelse is not None else None
            true_value = taken.value_expr()
            false_value = other.value_expr() if other is not None else gen.Name(taken.name)
            for value in (true_value, false_value):
                verdict = purity(ctx, value)
                if not verdict.safe:
                    reasons.append(verdict.reason)
            for assignment in (taken, other):
                if assignment is not None and assignment.augmented and not (
                    exact_in_every_float_dtype(assignment.value) and unaliased_fresh_local(ctx, node, assignment.name)
                ):
                    updated = ("the tensor in place" if ctx.provenance.name_kind_at(assignment.name, node) is Kind.TENSOR
                               else "the value")
                    reasons.append(f"`{assignment.name} {assignment.op_text}= ...` updated {updated}; the fix makes a new tensor")
            if taken.name in flows:
                if flows[taken.name]:
                    reasons.append(flows[taken.name])
            else:
                for assignment in (taken, other if orelse is not None else None):
                    problem = kept_value_problem(ctx, node, assignment, taken.name)
                    if problem:
                        reasons.append(problem)
                if not reasons and taken.augmented is None and (other is None or other.augmented is None):
                    problem = selected_dtype_problem(ctx, node, taken.value,
                                                     other.value if other is not None else None, taken.name)
                    if problem:
                        reasons.append(problem)
            params = branch_only_parameters(ctx, node, true_value, false_value)
            if params:
                reasons.append(params)
            passed_on = passed_on_problem(ctx, node, [true_value, false_value])
            if passed_on:
                reasons.append(passed_on)
            reasons.extend(new_tensor_problems(ctx, node, taken.name, [
                a.value if a is not None and a.augmented is None else None for a in (taken, other)]))
            where = torch_call(ctx, "where", cond_expr, true_value, false_value)
            statements.append(_assign(taken.name, where))
            comments.extend(taken.comments)
            if other is not None:
                comments.extend(other.comments)
        indent = ctx.position(node)[1] - 1
        statements = [fit_statement(ctx, indent, statement) for statement in statements]
        statements[0] = statements[0].with_comments(comments)
        safety = Safety.UNSAFE if reasons else Safety.SAFE
        reason = "; ".join(dict.fromkeys(reasons))
        replacement = gen.Statements(statements)
        return Fix({node: replacement}, safety, reason)


def _is_elif(ctx: FileContext, parent: ast.AST | None, node: ast.AST) -> bool:
    """Is ``node`` the ``elif`` of the ``if`` ``parent`` (not an ``if`` alone in an ``else:``)?"""
    return (type(parent) is ast.If and len(parent.orelse) == 1 and parent.orelse[0] is node  # type: ignore[attr-defined]
            and type(node) is ast.If and ctx.else_line(parent) is None)


class _GuardedIf(gen.If):
    """``if guard:`` around the selections, keeping the text after the ``:`` of the
    ``if`` it replaces (``  # note``)."""

    def __init__(self, test: gen.Expr_, body: list[gen.Statement], header: str) -> None:
        super().__init__(test, body)
        self.header = header

    def body(self, ctx: FileContext, indent: str) -> str:
        first, newline, rest = super().body(ctx, indent).partition("\n")
        return f"{first}{self.header}{newline}{rest}"


def _header_text(ctx: FileContext, node: ast.AST) -> str:
    """What follows the ``:`` of ``node``'s header on its line when it is a comment
    (``"  # note"``), else ""."""
    if ctx.header_comment(node) is None:
        return ""
    line, column = ctx.header_end(node)  # type: ignore[misc]
    return ctx.line(line)[column:].rstrip()


_NUMBER_TYPES = (int, float)


def _number_literal(expr: ast.AST) -> bool:
    """An int or float literal (``True`` / ``False`` and complex numbers are not)."""
    return type(expr) is ast.Constant and type(expr.value) in _NUMBER_TYPES  # type: ignore[attr-defined]


def _selected_dtype_problem(ctx: FileContext, values: list[ast.expr]) -> str:
    """Why the 0-dim tensor ``torch.where`` makes of selected Python numbers may give what
    it meets another dtype than the number did ("" when it cannot): ``torch.where(c, 2.0,
    1.0)`` is float32, and against a 0-dim float16 ``s`` promotes ``s * scale`` to float32."""
    for value in values:
        if ctx.kind(value) is not Kind.NUMBER:
            continue
        kind = None
        if _number_literal(value):
            kind = "integer" if type(value.value) is int else "default_float"  # type: ignore[attr-defined]
        for tensor in tensors_met(ctx, value):
            problem = zero_dim_dtype_problem(ctx, ctx.code(value), tensor, kind=kind)
            if problem:
                return problem
    return ""


def _number_pair_problem(ctx: FileContext, node: ast.If, taken: Assignment, other: Assignment | None) -> str:
    """Why selecting these Python numbers as a 0-dim tensor may not act as the number
    did in tensor arithmetic ("" when it does: literals of one type, exact in
    every floating dtype, so the tensor they meet computes with the same value)."""
    values = [a.value if a.augmented is None else None for a in (taken, other) if a is not None]
    if other is None:
        before = ctx.provenance.name_kind_at(taken.name, node)
        if before is not Kind.NUMBER:
            return f"`{taken.name}` is a tensor on one path and a Python number on the other"
        kept = _literal_before(ctx, node, taken.name)
        if kept is None:
            return f"`{taken.name}` keeps a Python number fixitem cannot see on the other path"
        values.append(kept)
    if any(v is None or not exact_in_every_float_dtype(v) for v in values):
        text = ", ".join(f"`{ctx.code(v)}`" for v in values if v is not None)
        return f"{text or 'the values'} become a 0-dim tensor: fixitem cannot show that they meet a tensor exactly as the number did"
    if len({_literal_type(_literal(v)) for v in values if v is not None}) != 1:
        return "an int and a float are selected: the 0-dim tensor is a float where the int stayed an int"
    return ""


def _literal_type(expr: ast.expr) -> type:
    """What kind of literal ``expr`` is: an int, a float (another node: its class)."""
    return type(expr.value) if type(expr) is ast.Constant else type(expr)  # type: ignore[attr-defined]


def _literal_before(ctx: FileContext, node: ast.If, name: str) -> ast.expr | None:
    """The number literal ``name`` certainly holds when ``node`` runs (``scale = 1.0``
    earlier in the same block, its only other binding), or None."""
    scope = ctx.provenance.scope_of(node)
    values = [v for how, v in scope.bindings.get(name, []) if not any(a is node for a in ctx.ancestors(v) if v is not None)]
    if len(values) != 1 or not (_number_literal(values[0]) or type(values[0]) is ast.UnaryOp):
        return None
    assign = ctx.parents.get(values[0])
    # The assignment stands in the block (statement list) that holds ``node``.
    if (type(assign) is not ast.Assign or ctx.parents.get(assign) is not ctx.parents.get(node)
            or ctx.field_of(assign) != ctx.field_of(node) or _in_loop(ctx, node)):
        return None
    if ctx.positions[assign].start.line >= ctx.positions[node].start.line:
        return None
    return values[0]


def _in_loop(ctx: FileContext, node: ast.AST) -> bool:
    function = ctx.enclosing_function(node)
    for ancestor in ctx.ancestors(node):
        if ancestor is function:
            return False
        if isinstance(ancestor, (ast.For, ast.AsyncFor, ast.While)):
            return True
    return False


def _literal(expr: ast.expr) -> ast.expr:
    while type(expr) is ast.UnaryOp:
        expr = expr.operand  # type: ignore[attr-defined]
    return expr


def stored_reads(ctx: FileContext, sites: list[SyncSite], claimed: set[SyncSite], test: ast.expr):
    """``energy = float(t)`` (or ``t.item()``) read later by ``if energy > 4.0:``: the
    read sites and the 0-dim tensors that replace them, when every use of each
    name works the same with a tensor (tensor conditions of ``if`` / conditional
    expressions against exact numbers, tensor arithmetic). None otherwise."""
    if type(test) is not ast.Compare or len(test.ops) != 1:
        return None
    by_node = {s.node: s for s in sites if s.kind in ("item", "float") and s.certain and s not in claimed}
    found: list[SyncSite] = []
    replacements: dict[ast.AST, gen.Expr_] = {}
    for operand in (test.left, test.comparators[0]):
        if type(operand) is not ast.Name:
            if exact_in_every_float_dtype(operand):
                continue
            return None
        scope = ctx.provenance.scope_of(operand).lookup(operand.id)
        bindings = scope.bindings.get(operand.id, []) if scope is not None else []
        if len(bindings) != 1 or bindings[0][0] != "value" or bindings[0][1] not in by_node:
            return None
        site = by_node[bindings[0][1]]
        target = binding_of(ctx, site.node)
        uses = name_uses(ctx, target) if target is not None else None
        if not uses or not all(_tensor_use(ctx, use) for use in uses):
            return None
        found.append(site)
        replacement = detached_scalar(ctx, site.value)
        replacements[site.node] = replacement
    if not found:
        return None
    return found, replacements


def _tensor_use(ctx: FileContext, use: ast.Name) -> bool:
    """Does this read of a stored scalar work the same when it is a 0-dim tensor?"""
    comparison = ctx.parents.get(use)
    if type(comparison) is ast.Compare:
        holder = ctx.parents.get(comparison)
        operands = [comparison.left, *comparison.comparators]  # type: ignore[attr-defined]
        return (
            type(holder) in (ast.If, ast.IfExp) and holder.test is comparison and len(operands) == 2  # type: ignore[union-attr]
            and all(o is use or exact_in_every_float_dtype(o) for o in operands)
        )
    flow = value_flow(ctx, use)
    return not flow.blocking and not flow.unsafe


NAN_ADVICE = ADVICE["nan_skip"][0].upper() + ADVICE["nan_skip"][1:]
HAND_ADVICE = (
    "Use `torch.cond(pred, true_fn, false_fn, operands)` when both branches are tensor functions "
    "with the same output shapes, or move the decision out of the compiled code"
)

_COMMENT = re.compile(r"^[ \t\f]*(#.*)$")


def _header_comments(ctx: FileContext, node: ast.If) -> list[str]:
    """Comments at the end of the ``if ...:`` and ``else:`` lines, then those of the lines
    just above the ``else:``."""
    found = []
    comment = ctx.header_comment(node)
    if comment is not None:
        found.append(comment)
    above_else = ctx.else_comments(node)
    line = ctx.else_line(node)
    if line is not None and above_else:
        text = ctx.line(line)
        match = _COMMENT.match(text[text.index(":") + 1:]) if ":" in text else None
        if match:  # the ``else:`` line's own comment comes last in ``else_comments``
            found.append(above_else.pop())
    found.extend(above_else)
    return found


def _spelled_names(value: gen.Expr_) -> set[str]:
    """Every name ``value`` spells: its variables, attributes, keywords and parameters
    (what the condition may read of a name a branch assigns first)."""
    found: set[str] = set()
    stack: list[object] = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            item = gen.Raw(item)
        if isinstance(item, gen.Raw):
            try:
                item = ast.parse(item.text.strip(), mode="eval").body
            except SyntaxError:
                continue
            found.update(_names_below(item, ()))
        elif isinstance(item, ast.AST):
            found.update(_names_below(item, ()))
        elif isinstance(item, (gen.Source, gen.Splice)):
            replaced = tuple(item.replacements) if isinstance(item, gen.Splice) else ()
            found.update(_names_below(item.node, replaced))
            if isinstance(item, gen.Splice):
                stack.extend(item.replacements.values())
        elif isinstance(item, gen.Node):
            if isinstance(item, gen.Attribute):
                found.add(item.attr)
            elif isinstance(item, gen.Call):
                found.update(a.keyword for a in item.args if a.keyword)
            elif isinstance(item, gen.Lambda):
                found.update(item.params)
            stack.extend(item.children())
    return found


def _names_below(root: ast.AST, replaced: tuple[ast.AST, ...]) -> Iterator[str]:
    skip: set[int] = set()
    for r in replaced:
        skip.update(id(n) for n in walk(r))
    for node in walk(root):
        if id(node) in skip:
            continue
        t = type(node)
        if t is ast.Name:
            yield node.id  # type: ignore[attr-defined]
        elif t is ast.Attribute:
            yield node.attr  # type: ignore[attr-defined]
        elif (t is ast.keyword or t is ast.arg) and node.arg:  # type: ignore[attr-defined]
            yield node.arg  # type: ignore[attr-defined]


def _assign(name: str, value: gen.Expr_) -> gen.Assign:
    return gen.Assign(gen.Name(name), value)


def _fresh_name(ctx: FileContext, node: ast.AST, base: str) -> str:
    scope = ctx.provenance.scope_of(node)
    taken = set()
    s = scope
    while s is not None:
        taken.update(s.bindings)
        s = s.parent
    name, counter = base, 1
    while name in taken:
        name = f"{base}_{counter}"
        counter += 1
    return name
