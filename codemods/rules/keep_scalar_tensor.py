"""FX302: a value read with ``.item()`` / ``float()`` whose every use works with a 0-dim tensor."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass, field

from .. import gen
from ..model.context import FileContext
from ..model.dtypes import scalar_operand_rounding, zero_dim_dtype_problem
from ..model.provenance import Kind
from ..model.scalar_shapes import detached_scalar, is_none_argument, split_arguments
from ..model.syncs import SyncSite
from ..model.value_flow import binding_of as _binding_of
from ..model.value_flow import name_uses as _name_uses
from ..model.value_flow import uncertain_tensor
from ..rule import Fix, Invalid, Report, Rule, Safety, Valid, dedent


@dataclass(frozen=True)
class Consumer:
    """One way of using the value that works the same with a 0-dim tensor."""

    forms: str  # how the code uses the value (``v``)
    keeps_dtype: bool  # the result has the tensor's dtype whatever the value's dtype
    checked: str  # how it was measured


# Where a 0-dim tensor may stand in for the Python number. Measured on torch
# 2.13 CPU (dtype and values against the Python number for float32 / float64 /
# bfloat16 / float16 / int64 / int32 / uint8 / bool tensors and values; no
# graph break and no `item` / `_local_scalar_dense` node in the Dynamo and AOT
# graphs under `torch._dynamo.explain` and `torch.compile(fullgraph=True)`)
# and on CUDA (torch 2.11, H200: fixtures/runtime/scalar_consumers_cuda.py,
# no synchronising call under `torch.cuda.set_sync_debug_mode("error")`).
CONSUMERS: dict[str, Consumer] = {
    "arithmetic": Consumer(
        "`x + v`, `v + x`, `x - v`, `v - x`, `x * v`, `v * x`, `x / v`, `x // v`, `x % v`",
        keeps_dtype=False,
        checked="CPU: same dtype and values for every floating tensor with every value dtype "
        "(value on the right; `v * x` rounds a wider value to a bfloat16/float16 tensor's dtype "
        "first); integer/bool tensors take the value's dtype (float64/bfloat16/float16) where the "
        "Python float gave float32. CUDA: no sync; float32 +, -, * equal; `x / v` differs in the "
        "last bit (a Python divisor is multiplied as a reciprocal); bfloat16/float16 tensors round "
        "the value to their dtype before the operation. No graph break.",
    ),
    "augmented": Consumer(
        "`x += v`, `x -= v`, `x *= v`, `x /= v` on a tensor `x` (in place)",
        keeps_dtype=True,
        checked="CPU: same dtype and values (or the same error) for every tensor/value dtype pair; "
        "CUDA: no sync, rounding as for arithmetic.",
    ),
    "masked_fill": Consumer(
        "`x.masked_fill(mask, v)`, `x.masked_fill_(mask, v)`",
        keeps_dtype=True,
        checked="CPU: same dtype and values for every tensor/value dtype pair; no graph break, "
        "no `item` node. CUDA: same values; eager masked_fill reads the 0-dim value back itself "
        "(one sync, as before the fix), compiled code (inductor) does not sync.",
    ),
    "fill": Consumer(
        "`x.fill_(v)`",
        keeps_dtype=True,
        checked="CPU: same dtype and values for every pair; CUDA: no sync, same values.",
    ),
    "where": Consumer(
        "`torch.where(cond, v, x)`, `torch.where(cond, x, v)`, `x.where(cond, v)`",
        keeps_dtype=False,
        checked="CPU: same dtype and values for floating `x`; integer/bool `x` takes the value's "
        "dtype. CUDA: no sync, same values for float32/bfloat16/float16 `x`.",
    ),
    "clamp": Consumer(
        "`torch.clamp(x, min=v)` / `max=v`, `torch.clip`, `x.clamp(v)`, `x.clamp_(...)`, "
        "`x.clamp_min(v)`, `x.clamp_max(v)`, `torch.clamp_min(x, v)` (the other bound absent)",
        keeps_dtype=False,  # the in-place forms do keep it
        checked="CPU: same dtype and values for floating `x`; integer/bool `x` takes the value's "
        "dtype. CUDA: no sync, same values. A tensor bound with a *number* for the other bound "
        "(`torch.clamp(x, min=v, max=5.0)`) syncs on CUDA: not a consumer.",
    ),
}
# Not consumers (measured): `v / x` (rounding differs: Python computes `c / x` as
# `x.reciprocal() * c`), `x ** v` (pow with a tensor exponent rounds differently),
# `torch.full` / `full_like` / `new_full` / `add(..., alpha=v)` / `F.threshold` /
# `nan_to_num` (they take a Python scalar: graph break, and on CUDA a sync).

ARITHMETIC_EITHER_SIDE = (ast.Add, ast.Sub, ast.Mult)

ARITHMETIC_VALUE_RIGHT = (ast.Div, ast.FloorDiv, ast.Mod)
# The operators of ``x += v``, ``x -= v``, ``x *= v``, ``x /= v`` (``ast`` gives an ``AugAssign``
# the binary operator).
AUGMENTED = (ast.Add, ast.Sub, ast.Mult, ast.Div)
# Python arithmetic on the number before it reaches a consumer: kept as tensor
# arithmetic, which rounds in the value's dtype instead of float64.
NUMBER_ARITHMETIC = (ast.Add, ast.Sub, ast.Mult, ast.Div)

# Tensor methods: name -> (consumer, positional index of the value, its keyword, in place)
METHODS: dict[str, tuple[str, int, str, bool]] = {
    "masked_fill": ("masked_fill", 1, "value", False),
    "masked_fill_": ("masked_fill", 1, "value", True),
    "fill_": ("fill", 0, "value", True),
    "where": ("where", 1, "other", False),
}
CLAMP_METHODS = frozenset({"clamp", "clip", "clamp_", "clip_"})
CLAMP_ONE_BOUND = {"clamp_min": "min", "clamp_max": "max", "clamp_min_": "min", "clamp_max_": "max"}

ROUNDING_REASON = (
    "`{code}` was computed in float64 by Python; as a tensor it is computed in the value's dtype "
    "(measured: last-bit differences for float32 values, e.g. `v * 3.3`, and larger ones for "
    "bfloat16/float16 values)"
)


@dataclass
class Use:
    consumer: str  # a key of CONSUMERS
    role: str  # e.g. "a divisor", "the value of `masked_fill`"
    problems: list[str] = field(default_factory=list)  # why the fix is unsafe
    meets: list[ast.expr] = field(default_factory=list)  # tensors that decide the result's dtype with it


class KeepScalarTensor(Rule):
    """## What it does
    Finds a tensor value read with `t.item()` or `float(t)` (usually bound to
    a name) whose every use works the same with a 0-dim tensor: an operand
    of arithmetic with a tensor (`loss_sum / num_boxes`), the value of
    `masked_fill` / `masked_fill_` / `fill_`, a branch of `torch.where`, or a
    bound of `torch.clamp` / `clamp_min` / `clamp_max`. The read becomes
    `t.detach()`, so the name holds a 0-dim tensor on the device.

    The name must be a function's local, assigned once, or last assigned
    from its own value outside any loop
    (`num_boxes = torch.clamp(num_boxes, min=1).item()`). The read is left
    alone (FX001 reports it) when the name is assigned again, declared
    `global` / `nonlocal`, read in a nested function, lambda or
    comprehension, or used in any other way: returned, stored, printed or
    formatted, compared, tested by `if`, passed to a function (`range(n)`,
    `torch.zeros(n)`), used as a size or an index. A read that is directly an
    operand of tensor arithmetic is FX301's.

    ## Why is this bad?
    The read makes the host wait for the device (a **host sync**; a **graph
    break** in compiled code) only for the number to be handed back to a
    tensor operation, which accepts a 0-dim tensor as well.

    ## Example
    ```python
    num_boxes = torch.clamp(num_boxes, min=1).item()
    loss = loss_bbox.sum() / num_boxes
    ```

    ## Use instead
    ```python
    num_boxes = torch.clamp(num_boxes, min=1).detach().reshape(())
    loss = loss_bbox.sum() / num_boxes
    ```
    `.item()` accepts any one-element tensor and gives a number without
    gradient: `.detach()` keeps the gradient cut, and `.reshape(())` (added
    unless the tensor is plainly 0-dim, like `x.sum()`) keeps a `[1]`-shaped
    tensor from turning a scalar loss into a `[1]` one; like `.item()` it
    fails on a tensor with more than one element.

    ## Fix safety
    **Safe** when the value is used as read and every tensor it meets keeps
    its dtype: `masked_fill` / `fill_` / in-place updates always do; for
    arithmetic, `torch.where` and `torch.clamp` the tensor must have the
    value's own dtype (`torch.clamp(h, min=h.mean().item())`), or the value
    must be an integer (`mask.count_nonzero()`) and the tensor floating point,
    or the tensor must be floating point (a module's output, a loss,
    `.float()`, a `torch.FloatTensor` annotation, a true division...) and
    certainly have a dimension (a layer's output, `x.flatten()`,
    `torch.arange(n)`): two 0-dim tensors promote (a 0-dim float32 loss
    divided by a float64 value gives float64). Then dtypes are the
    same and values equal up to rounding: on CPU exactly, except `v * x` with a
    bfloat16/float16 `x`, which rounds a wider value to `x`'s dtype first; on
    CUDA, float32 `+`, `-`, `*` are exact, and bfloat16/float16 tensors round
    the value to their dtype before the operation. In eager
    CUDA code `masked_fill` still reads a 0-dim value back itself (one sync,
    as before); compiled code does not.

    **Unsafe** (needs `--unsafe`) when the value is a divisor (`x / v`,
    `x // v`, `x % v`, `x /= v`): on CUDA, ATen multiplies by the reciprocal
    of a Python number and divides by a 0-dim tensor, so float results may
    differ in the last bit; when Python arithmetic is done on the number
    first (`logits.min().item() - 1.0`): it now runs in the value's dtype
    rather than in float64; when fixitem cannot tell that a tensor the
    value meets is floating point: an integer or bool tensor combined with a
    float64/bfloat16/float16 0-dim value takes the value's dtype, where the
    Python float gave float32; or when that tensor may be 0-dim and of
    another dtype (`loss_bbox.sum() / num_boxes`: a float16 loss with a
    float32 `num_boxes` becomes float32).

    Either way the value must live on the device of the tensors it meets: a
    CUDA value combined with a CPU tensor, or a CPU value as a `clamp` bound of
    a CUDA tensor, raises, where the Python number worked anywhere (and a CPU
    value as a `torch.where` branch of CUDA tensors syncs). The
    consumers and how each was measured are the `CONSUMERS` table of this
    rule; `fixtures/runtime/scalar_consumers_cuda.py` repeats the checks on a
    GPU.
    """

    code = "FX302"
    name = "keep-scalar-tensor"
    summary = "value read with `.item()` only to feed tensor operations: keep it as a 0-dim tensor"
    fix_makes_tensors = True
    graph_breaks = ("GB0124",)
    examples = [
        Invalid(
            dedent(
                """
                import torch
                import torch.nn.functional as F
                def box_loss(pred: torch.Tensor, target: torch.Tensor, valid: torch.Tensor):
                    loss_sum = F.l1_loss(pred, target, reduction="sum")
                    num_boxes = torch.clamp(valid.count_nonzero(), min=1).item()
                    return loss_sum / num_boxes
                """
            ),
            fixed=dedent(
                """
                import torch
                import torch.nn.functional as F
                def box_loss(pred: torch.Tensor, target: torch.Tensor, valid: torch.Tensor):
                    loss_sum = F.l1_loss(pred, target, reduction="sum")
                    num_boxes = torch.clamp(valid.count_nonzero(), min=1).detach()
                    return loss_sum / num_boxes
                """
            ),
            unsafe=True,  # a divisor: on CUDA it may round differently in the last bit
        ),
        Invalid(
            dedent(
                """
                import torch
                def mask_logits(logits: torch.Tensor, mask: torch.Tensor):
                    floor = logits.min().item()
                    logits = logits.masked_fill(~mask, floor)
                    return logits.masked_fill_(mask.all(), floor)
                """
            ),
            fixed=dedent(
                """
                import torch
                def mask_logits(logits: torch.Tensor, mask: torch.Tensor):
                    floor = logits.min().detach()
                    logits = logits.masked_fill(~mask, floor)
                    return logits.masked_fill_(mask.all(), floor)
                """
            ),
        ),
        Invalid(
            dedent(
                """
                import torch
                def select(scores: torch.FloatTensor, keep: torch.Tensor, fallback: torch.Tensor):
                    value = float(fallback)
                    return torch.where(keep, scores, value)
                """
            ),
            fixed=dedent(
                """
                import torch
                def select(scores: torch.FloatTensor, keep: torch.Tensor, fallback: torch.Tensor):
                    value = fallback.detach().reshape(())
                    return torch.where(keep, scores, value)
                """
            ),
            unsafe=True,  # a 0-dim `scores` with a float64 `fallback` would become float64
        ),
        Invalid(
            dedent(
                """
                import torch
                def floor_at_mean(x: torch.Tensor):
                    h = x.float()
                    low = h.mean().item()
                    return torch.clamp(h, min=low) + h.clamp_max(low)
                """
            ),
            fixed=dedent(
                """
                import torch
                def floor_at_mean(x: torch.Tensor):
                    h = x.float()
                    low = h.mean().detach()
                    return torch.clamp(h, min=low) + h.clamp_max(low)
                """
            ),
        ),
        Invalid(
            dedent(
                """
                import torch
                def mask_logits(logits: torch.Tensor, mask: torch.Tensor):
                    return logits.masked_fill(~mask, logits.min().item())
                """
            ),
            fixed=dedent(
                """
                import torch
                def mask_logits(logits: torch.Tensor, mask: torch.Tensor):
                    return logits.masked_fill(~mask, logits.min().detach())
                """
            ),
        ),
        Invalid(
            dedent(
                """
                import torch
                def mask_logits(logits: torch.Tensor, mask: torch.Tensor):
                    mask_value = logits.min().item() - 1.0
                    return logits.masked_fill(~mask, mask_value)
                """
            ),
            fixed=dedent(
                """
                import torch
                def mask_logits(logits: torch.Tensor, mask: torch.Tensor):
                    mask_value = logits.min().detach() - 1.0
                    return logits.masked_fill(~mask, mask_value)
                """
            ),
            unsafe=True,
        ),
        Invalid(
            dedent(
                """
                import torch
                def rescale(x: torch.Tensor, scale: torch.Tensor):
                    s = scale.item()
                    return x * s
                """
            ),
            fixed=dedent(
                """
                import torch
                def rescale(x: torch.Tensor, scale: torch.Tensor):
                    s = scale.detach().reshape(())
                    return x * s
                """
            ),
            unsafe=True,
        ),
        Valid(
            dedent(
                """
                import torch
                def f(x: torch.Tensor):
                    n = x.sum().item()
                    print(n)
                    return x.float() / n
                """
            )
        ),
        Valid(
            dedent(
                """
                import torch
                def f(x: torch.Tensor):
                    n = x.sum().item()
                    return x.float() / n, n
                """
            )
        ),
        Valid(
            dedent(
                """
                import torch
                def f(x: torch.Tensor):
                    top = x.max().item()
                    if top > 1.0:
                        x = x.float() / top
                    return x
                """
            )
        ),
        Valid(
            dedent(
                """
                import torch
                def f(x: torch.Tensor, lengths: torch.Tensor):
                    n = lengths.max().item()
                    return x.float() / n, torch.zeros(n)
                """
            )
        ),
        Valid(
            dedent(
                """
                import torch
                def f(x: torch.Tensor, lengths: torch.Tensor):
                    n = lengths.max().item()
                    for _ in range(n):
                        x = x.float() / n
                    return x
                """
            )
        ),
        Valid(
            dedent(
                """
                import numpy as np
                import torch
                def f(x: torch.Tensor):
                    noise = np.random.rand(1).item()
                    return x.float() * noise
                """
            )
        ),
        Valid(
            dedent(
                """
                import torch
                def f(x: torch.Tensor):
                    scale = x.std().item()
                    scale = scale * 2
                    return x.float() / scale
                """
            )
        ),
    ]

    def check(self, ctx: FileContext, sites: list[SyncSite], claimed: set[SyncSite]) -> Iterator[Report]:
        for site in sites:
            if site in claimed or site.kind not in ("item", "float") or not site.certain:
                continue
            report = self._check_site(ctx, site)
            if report is not None:
                yield report

    def _check_site(self, ctx: FileContext, site: SyncSite) -> Report | None:
        parent = ctx.parents.get(site.node)
        if type(parent) is ast.BinOp and ctx.kind(_other_operand(parent, site.node)) is Kind.TENSOR:
            return None  # directly an operand of tensor arithmetic: FX301's
        top, arithmetic = _number_arithmetic_top(ctx, site.node)
        uses: list[Use] = []
        binding = _binding_of(ctx, top)
        if binding is not None:
            name_uses = _name_uses(ctx, binding)
            if not name_uses:
                return None
            for node in name_uses:
                use = _consumer_use(ctx, node)
                if use is None:
                    return None
                uses.append(use)
        else:
            use = _consumer_use(ctx, top, walked=arithmetic)
            if use is None:
                return None
            uses.append(use)
        problems: list[str] = []
        if arithmetic:
            problems.append(ROUNDING_REASON.format(code=ctx.code(top)))
        for use in uses:
            problems.extend(p for p in use.problems if p not in problems)
        met = [tensor for use in uses for tensor in use.meets]
        dtype_problems = [zero_dim_dtype_problem(ctx, ctx.code(site.node), t, sources=[site.value]) for t in met]
        problems.extend([p for p in dtype_problems if p][:1])  # the first says enough
        replacement = detached_scalar(ctx, site.value)
        if type(site.node) is ast.Call and ctx.parenthesized(site.node):
            replacement = gen.Paren(replacement)  # the read's own parentheses stay
        safety = Safety.UNSAFE if problems else Safety.SAFE
        roles = " and ".join(dict.fromkeys(u.role for u in uses))
        if binding is not None:
            message = (
                f"`{ctx.code(site.node)}` is read on the host only to feed tensor operations "
                f"(`{binding.id}` is used only as {roles}): keep it a 0-dim tensor"
            )
        else:
            message = f"`{ctx.code(site.node)}` is read on the host only to be used as {roles}: keep it a 0-dim tensor"
        fix = Fix({site.node: replacement}, safety, "; ".join(problems), imports=())
        return Report(site.node, message, fix=fix, sites=[site])


# -- the value's way up to its uses ---------------------------------------------------------------


def _other_operand(op: ast.BinOp, node: ast.AST) -> ast.expr:
    return op.right if op.left is node else op.left


def _number_arithmetic_top(ctx: FileContext, node: ast.expr) -> tuple[ast.expr, bool]:
    """Walk up through Python arithmetic with plain numbers (``v - 1.0``, ``-v``):
    the outermost such expression, and whether there was any arithmetic."""
    current = node
    arithmetic = False
    while True:
        parent = ctx.parents.get(current)
        if type(parent) is ast.BinOp and isinstance(parent.op, NUMBER_ARITHMETIC):
            other = _other_operand(parent, current)
            if type(parent.op) is ast.Div and parent.left is not current:
                break  # ``c / v``: rounds differently, and 0 gives inf instead of ZeroDivisionError
            if ctx.kind(other) is not Kind.NUMBER:
                break
            arithmetic = True
            current = parent
            continue
        if type(parent) is ast.UnaryOp and type(parent.op) is ast.USub:
            current = parent  # negation is exact in every dtype
            continue
        break
    return current, arithmetic


def _consumer_use(ctx: FileContext, node: ast.expr, walked: bool = False) -> Use | None:
    """How ``node`` (the value, or a read of its name) is used, if by a consumer."""
    problems: list[str] = []
    if not walked:
        top, arithmetic = _number_arithmetic_top(ctx, node)
        if arithmetic:
            problems.append(ROUNDING_REASON.format(code=ctx.code(top)))
        node = top
    parent = ctx.parents.get(node)
    if type(parent) is ast.BinOp:
        other = _other_operand(parent, node)
        if ctx.kind(other) is not Kind.TENSOR or uncertain_tensor(ctx, other):
            return None
        on_right = parent.right is node
        if not (isinstance(parent.op, ARITHMETIC_EITHER_SIDE) or (on_right and isinstance(parent.op, ARITHMETIC_VALUE_RIGHT))):
            return None
        operator = _OPERATOR_TEXT[type(parent.op)]
        role = "a divisor" if operator == "/" else f"an operand of `{operator}`"
        rounding = scalar_operand_rounding(parent.op, value_on_left=not on_right)
        if rounding:
            problems.append(rounding)
        return _meets(ctx, "arithmetic", role, other, problems)
    if type(parent) is ast.AugAssign and parent.value is node:
        if not isinstance(parent.op, AUGMENTED) or type(parent.target) is not ast.Name:
            return None
        if not _always_tensor(ctx, parent.target):
            return None
        rounding = scalar_operand_rounding(parent.op, value_on_left=False, augmented=True)
        if rounding:
            problems.append(rounding)
        return Use("augmented", f"the operand of an in-place `{_OPERATOR_TEXT[type(parent.op)]}=`", problems)
    # An argument, not starred: positional (``Call.args``) or by keyword (``**kwargs`` has no name).
    if type(parent) is ast.Call and any(a is node for a in parent.args):
        return _call_use(ctx, parent, node, problems)
    if type(parent) is ast.keyword and parent.arg is not None:
        call = ctx.parents.get(parent)
        if type(call) is ast.Call:
            return _call_use(ctx, call, node, problems)
    return None


_OPERATOR_TEXT = {
    ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//", ast.Mod: "%",
}


def _always_tensor(ctx: FileContext, name: ast.Name) -> bool:
    """Does ``name`` hold a tensor wherever it is bound (not ``total = 0`` first)?
    ``total += v`` on a Python number would turn it into a tensor."""
    if ctx.kind(name) is not Kind.TENSOR:
        return False
    scope = ctx.provenance.scope_of(name).lookup(name.id)
    if scope is None:
        return False
    for how, node in scope.bindings[name.id]:
        if how == "value" and not (isinstance(node, ast.expr) and ctx.kind(node) is Kind.TENSOR):
            return False
        if how not in ("value", "aug", "param"):
            return False
    return True


def _meets(
    ctx: FileContext, consumer: str, role: str, tensor: ast.expr, problems: list[str], in_place: bool = False
) -> Use:
    """The value meets ``tensor`` in ``consumer``: unless the result keeps the tensor's
    dtype whatever the value's, ``tensor`` is one the dtype check is made against."""
    if CONSUMERS[consumer].keeps_dtype or in_place:
        return Use(consumer, role, problems)
    return Use(consumer, role, problems, meets=[tensor])


def _call_use(ctx: FileContext, call: ast.Call, arg: ast.expr, problems: list[str]) -> Use | None:
    """``arg``: the value given to ``call`` (an argument's expression, positional or by keyword)."""
    parsed = split_arguments(call)
    if parsed is None:
        return None
    positional, keywords = parsed
    func = call.func
    qualified = ctx.provenance.imports.qualify(func) or ""
    if qualified == "torch.where":
        slots = _slots(positional, keywords, ("condition", "input", "other"))
        if slots is None or any(s is None for s in slots) or not _among(arg, slots[1:]):
            return None
        other = slots[2] if arg is slots[1] else slots[1]
        assert other is not None
        if ctx.kind(other) is not Kind.TENSOR:
            return None
        return _meets(ctx, "where", "a branch of `torch.where`", other, problems)
    if qualified in ("torch.clamp", "torch.clip"):
        slots = _slots(positional, keywords, ("input", "min", "max"))
        if slots is None or slots[0] is None or arg is slots[0]:
            return None
        bound_other = slots[2] if arg is slots[1] else slots[1]
        if not _among(arg, slots[1:]) or not is_none_argument(bound_other):
            return None
        if ctx.kind(slots[0]) is not Kind.TENSOR:
            return None
        return _meets(ctx, "clamp", f"a bound of `{qualified}`", slots[0], problems)
    if qualified in ("torch.clamp_min", "torch.clamp_max"):
        slots = _slots(positional, keywords, ("input", qualified.rsplit("_", 1)[-1]))
        if slots is None or slots[0] is None or arg is not slots[1]:
            return None
        if ctx.kind(slots[0]) is not Kind.TENSOR:
            return None
        return _meets(ctx, "clamp", f"the bound of `{qualified}`", slots[0], problems)
    if type(func) is not ast.Attribute or ctx.kind(func.value) is not Kind.TENSOR:
        return None
    method = func.attr
    receiver = func.value
    if method in METHODS:
        consumer, index, keyword, in_place = METHODS[method]
        value = positional[index] if len(positional) > index else keywords.get(keyword)
        if value is not arg:
            return None
        role = "the other branch of `.where`" if consumer == "where" else f"the value of `{method}`"
        return _meets(ctx, consumer, role, receiver, problems, in_place)
    if method in CLAMP_METHODS:
        slots = _slots(positional, keywords, ("min", "max"))
        if slots is None or not _among(arg, slots):
            return None
        if not is_none_argument(slots[1] if arg is slots[0] else slots[0]):
            return None
        return _meets(ctx, "clamp", f"a bound of `{method}`", receiver, problems, in_place=method.endswith("_"))
    if method in CLAMP_ONE_BOUND:
        slots = _slots(positional, keywords, (CLAMP_ONE_BOUND[method],))
        if slots is None or arg is not slots[0]:
            return None
        return _meets(ctx, "clamp", f"the bound of `{method}`", receiver, problems, in_place=method.endswith("_"))
    return None


def _among(node: ast.AST, candidates: list[ast.expr | None]) -> bool:
    return any(node is c for c in candidates)


def _slots(positional: list[ast.expr], keywords: dict[str, ast.expr], names: tuple[str, ...]) -> list[ast.expr | None] | None:
    """Arguments by parameter name; None for an unexpected argument."""
    if len(positional) > len(names) or set(keywords) - set(names):
        return None
    slots: list[ast.expr | None] = [None] * len(names)
    for i, arg in enumerate(positional):
        slots[i] = arg
    for i, name in enumerate(names):
        if name in keywords:
            if slots[i] is not None:
                return None
            slots[i] = keywords[name]
    return slots
