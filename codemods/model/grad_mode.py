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

import ast

from .. import gen
from .context import FUNCTIONS, FileContext

_OFF = frozenset({"torch.no_grad", "torch.inference_mode", "torch.autograd.no_grad", "torch.autograd.inference_mode",
                  "torch.autograd.grad_mode.no_grad", "torch.autograd.grad_mode.inference_mode"})
_ON = frozenset({"torch.enable_grad", "torch.autograd.enable_grad", "torch.autograd.grad_mode.enable_grad"})
_SET = frozenset({"torch.set_grad_enabled", "torch.autograd.set_grad_enabled"})


def gradients_off(ctx: FileContext, node: ast.AST) -> bool:
    """Does ``node`` certainly run with autograd off?"""
    for ancestor in ctx.ancestors(node):
        t = type(ancestor)
        if t is ast.With or t is ast.AsyncWith:
            for item in ancestor.items:  # type: ignore[attr-defined]
                mode = _mode(ctx, item.context_expr)
                if mode is not None:
                    return mode == "off"
        elif t is ast.FunctionDef or t is ast.AsyncFunctionDef or t is ast.Lambda:
            if t is not ast.Lambda:
                for decorator in ancestor.decorator_list:  # type: ignore[attr-defined]
                    mode = _mode(ctx, decorator)
                    if mode is not None:
                        return mode == "off"
            return False  # a function runs in the grad mode of its caller
    return False


def _first_argument(call: ast.Call) -> ast.expr | None:
    """The value of the call's first argument, positional or keyword."""
    if call.args and call.keywords:
        first = min([*call.args, *call.keywords], key=lambda n: (n.lineno, n.col_offset))
    else:
        first = call.args[0] if call.args else call.keywords[0] if call.keywords else None
    if first is None:
        return None
    return first.value if type(first) in (ast.keyword, ast.Starred) else first  # type: ignore[union-attr]


def _mode(ctx: FileContext, expr: ast.expr) -> str | None:
    """"on", "off", "unknown" (``set_grad_enabled(flag)``), or None: not a grad-mode context."""
    call = expr if type(expr) is ast.Call else None
    qualified = ctx.provenance.imports.qualify(call.func if call is not None else expr) or ""  # type: ignore[attr-defined]
    if qualified in _OFF:
        if call is not None and qualified.endswith("inference_mode") and (call.args or call.keywords):
            # ``inference_mode(False)`` turns nothing off; a variable may be either.
            return "off" if _flag(_first_argument(call)) is True else "unknown"
        return "off"
    if qualified in _ON:
        return "on"
    if qualified in _SET and call is not None:
        flag = _flag(_first_argument(call)) if call.args or call.keywords else None
        return "unknown" if flag is None else ("on" if flag else "off")
    return None


def _flag(expr: ast.expr | None) -> bool | None:
    if type(expr) is ast.Constant and type(expr.value) is bool:  # type: ignore[union-attr]
        return expr.value  # type: ignore[union-attr]
    return None


def _file_node(value):
    """``value`` (a node of the file, or new code built around one) as the node the
    analysis looks at: parentheses are part of the node, as libcst had them."""
    while isinstance(value, gen.Paren):
        value = value.value
    if isinstance(value, (gen.Source, gen.Splice)):
        return value.node
    return value


def _new_name(value) -> str | None:
    """The name new code spells (``gen.Name("x")``), or None."""
    if isinstance(value, gen.Raw) and value.text.isidentifier():
        return value.text
    return None


def passed_on_problem(ctx: FileContext, anchor: ast.AST, values: list) -> str:
    """Why selecting ``values`` with ``torch.where`` under no-grad changes gradients after
    all: the original passes a value on as it is (the same tensor object), which keeps
    ``requires_grad`` when it is an input or a parameter; ``torch.where`` there gives a new
    tensor that requires none. "" where gradients are on (the other notes tell), or when
    every value is computed in the no-grad code (its result requires no gradient either).
    (``values``: nodes of the file, or new code built around them, :mod:`codemods.gen`.)"""
    if not gradients_off(ctx, anchor):
        return ""
    for value in values:
        if _may_be_passed_on(ctx, anchor, value):
            return (f"under no-grad, `torch.where` gives a new tensor that requires no gradient, where the "
                    f"original passed `{gen.show(ctx, value)}` on as it is (an input or parameter that requires "
                    "grad keeps its gradient there)")
    return ""


def _may_be_passed_on(ctx: FileContext, anchor: ast.AST, value, depth: int = 0) -> bool:
    """May ``value`` be a tensor object made outside the no-grad code (so it may require grad)?"""
    if depth > 4:
        return True
    value = _file_node(value)
    t = type(value)
    if t is ast.Attribute or t is ast.Subscript:
        return not (t is ast.Subscript and ctx.kind(value.value).name == "TENSOR" and value.value in ctx.parents)
    name = value.id if t is ast.Name else _new_name(value)
    if name is None:
        return False  # computed here: under no-grad its result requires no gradient
    scope = ctx.provenance.scope_of(value if t is ast.Name and value in ctx.parents else anchor)
    owner = scope.lookup(name)
    if owner is None or not isinstance(owner.node, FUNCTIONS):
        return True
    for how, binding in owner.bindings.get(name, []):
        if how == "aug":
            continue  # updates the object the other bindings made
        if how != "value" or not isinstance(binding, ast.expr) or not gradients_off(ctx, binding):
            return True
        if _may_be_passed_on(ctx, anchor, binding, depth + 1):
            return True
    return False
