"""What a torch optimizer's settings hold: ``opt.param_groups[0]["lr"]``.

A learning rate (and the other settings an optimizer keeps per group) is a
Python number unless the program gave the optimizer a tensor: torch's
optimizers accept ``lr=torch.tensor(0.01)`` (``capturable`` / ``fused``
training), and their schedulers then update that tensor in place. A setting
printed as it is writes ``0.01`` for the number and ``tensor(0.0100)`` for the
tensor, so a rewrite that replays it as a number needs to know which.
"""

from __future__ import annotations

import ast

from .context import FileContext
from .provenance import Kind


def setting_is_number(ctx: FileContext, expr: ast.expr) -> bool:
    """Is ``expr`` (``opt.param_groups[i]["lr"]``) certainly a Python number: ``opt`` is
    bound only to ``torch.optim`` optimizers made in this file whose argument for the
    setting is left out (its default is a number) or is a Python number?"""
    if type(expr) is not ast.Subscript or type(expr.slice) is not ast.Constant:
        return False
    key = expr.slice.value
    groups = expr.value
    if not (type(key) is str and type(groups) is ast.Subscript and type(groups.value) is ast.Attribute
            and groups.value.attr == "param_groups" and type(groups.value.value) is ast.Name):
        return False
    optimizer = groups.value.value
    scope = ctx.provenance.scope_of(optimizer).lookup(optimizer.id)
    bindings = scope.bindings.get(optimizer.id, []) if scope is not None else []
    return bool(bindings) and all(
        how == "value" and type(value) is ast.Call and _number_setting(ctx, value, key) for how, value in bindings
    )


def _number_setting(ctx: FileContext, call: ast.Call, key: str) -> bool:
    """Does the optimizer ``call`` makes get a Python number (or its default) for ``key``?"""
    qualified = ctx.provenance.imports.qualify(call.func) or ""
    if not qualified.startswith("torch.optim.") or qualified.startswith("torch.optim.lr_scheduler."):
        return False
    if any(type(a) is ast.Starred for a in call.args) or any(k.arg is None for k in call.keywords):
        return False  # ``**config``: any setting may be in it
    given = [k.value for k in call.keywords if k.arg == key]
    if key == "lr" and len(call.args) > 1:
        given.append(call.args[1])  # ``SGD(params, 0.1)``
    return all(ctx.kind(value) is Kind.NUMBER for value in given)
