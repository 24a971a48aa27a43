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
