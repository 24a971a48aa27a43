"""Where autograd records nothing: code that computes no gradient.

Inside ``with torch.no_grad():`` / ``torch.inference_mode()`` /
``torch.set_grad_enabled(False)``, and in a function decorated with
``@torch.no_grad()`` or ``@torch.inference_mode()``, no gradient flows. Notes
about gradients (NaN from the untaken branch of a ``torch.where``, zero
gradients instead of ``None``) are no facts there. The innermost grad-mode
context decides: ``with torch.enable_grad():`` inside a no-grad function turns
gradients back on.
"""

from __future__ import annotations

import libcst as cst

from .context import FileContext

_OFF = frozenset({"torch.no_grad", "torch.inference_mode", "torch.autograd.no_grad", "torch.autograd.inference_mode",
                  "torch.autograd.grad_mode.no_grad", "torch.autograd.grad_mode.inference_mode"})
_ON = frozenset({"torch.enable_grad", "torch.autograd.enable_grad", "torch.autograd.grad_mode.enable_grad"})
_SET = frozenset({"torch.set_grad_enabled", "torch.autograd.set_grad_enabled"})


def gradients_off(ctx: FileContext, node: cst.CSTNode) -> bool:
    """Does ``node`` certainly run with autograd off?"""
    for ancestor in ctx.ancestors(node):
        if isinstance(ancestor, cst.With):
            for item in ancestor.items:
                mode = _mode(ctx, item.item)
                if mode is not None:
                    return mode == "off"
        elif isinstance(ancestor, (cst.FunctionDef, cst.Lambda)):
            if isinstance(ancestor, cst.FunctionDef):
                for decorator in ancestor.decorators:
                    mode = _mode(ctx, decorator.decorator)
                    if mode is not None:
                        return mode == "off"
            return False  # a function runs in the grad mode of its caller
    return False


def _mode(ctx: FileContext, expr: cst.BaseExpression) -> str | None:
    """"on", "off", "unknown" (``set_grad_enabled(flag)``), or None: not a grad-mode context."""
    call = expr if isinstance(expr, cst.Call) else None
    qualified = ctx.provenance.imports.qualify(call.func if call is not None else expr) or ""
    if qualified in _OFF:
        if call is not None and qualified.endswith("inference_mode") and call.args:
            # ``inference_mode(False)`` turns nothing off; a variable may be either.
            return "off" if _flag(call.args[0].value) is True else "unknown"
        return "off"
    if qualified in _ON:
        return "on"
    if qualified in _SET and call is not None:
        flag = _flag(call.args[0].value) if call.args else None
        return "unknown" if flag is None else ("on" if flag else "off")
    return None


def _flag(expr: cst.BaseExpression) -> bool | None:
    if isinstance(expr, cst.Name) and expr.value in ("True", "False"):
        return expr.value == "True"
    return None


def passed_on_problem(ctx: FileContext, anchor: cst.CSTNode, values: list[cst.BaseExpression]) -> str:
    """Why selecting ``values`` with ``torch.where`` under no-grad changes gradients after
    all: the original passes a value on as it is (the same tensor object), which keeps
    ``requires_grad`` when it is an input or a parameter; ``torch.where`` there gives a new
    tensor that requires none. "" where gradients are on (the other notes tell), or when
    every value is computed in the no-grad code (its result requires no gradient either)."""
    if not gradients_off(ctx, anchor):
        return ""
    for value in values:
        if _may_be_passed_on(ctx, anchor, value):
            return (f"under no-grad, `torch.where` gives a new tensor that requires no gradient, where the "
                    f"original passed `{ctx.code(value)}` on as it is (an input or parameter that requires "
                    "grad keeps its gradient there)")
    return ""


def _may_be_passed_on(ctx: FileContext, anchor: cst.CSTNode, value: cst.BaseExpression, depth: int = 0) -> bool:
    """May ``value`` be a tensor object made outside the no-grad code (so it may require grad)?"""
    if depth > 4:
        return True
    if isinstance(value, (cst.Attribute, cst.Subscript)):
        return not (isinstance(value, cst.Subscript) and ctx.kind(value.value).name == "TENSOR" and value.value in ctx.parents)
    if not isinstance(value, cst.Name):
        return False  # computed here: under no-grad its result requires no gradient
    scope = ctx.provenance.scope_of(value if value in ctx.parents else anchor)
    owner = scope.lookup(value.value)
    if owner is None or not isinstance(owner.node, cst.FunctionDef):
        return True
    for how, binding in owner.bindings.get(value.value, []):
        if how == "aug":
            continue  # updates the object the other bindings made
        if how != "value" or not isinstance(binding, cst.BaseExpression) or not gradients_off(ctx, binding):
            return True
        if _may_be_passed_on(ctx, anchor, binding, depth + 1):
            return True
    return False
