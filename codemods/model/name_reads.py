"""Where a local name is read: a question about names and scopes alone, asked by the
analysis of values (tensor_values), of dtypes and of branches."""

from __future__ import annotations

import ast

from .context import FileContext


def reads_of(ctx: FileContext, scope, name: str, nested: bool = False) -> list[ast.Name | None]:
    """Every read of the local ``name`` of ``scope`` (None for a read from a nested
    function, lambda or comprehension, or by ``locals()``; with ``nested``, such a
    read itself)."""
    found: list[ast.Name | None] = []
    # A read of a local of ``scope`` lies below its node; a target of ``name += ...`` counts
    # wherever it is.
    nodes = ctx.names(name, scope.node)
    elsewhere = [n for n in ctx.augmented_names(name) if not ctx.below(n, scope.node)]
    if elsewhere:
        nodes = sorted([*nodes, *elsewhere], key=ctx.positions.offset)
    for node in nodes:
        assert isinstance(node, ast.Name)
        if node.id != name:
            continue
        parent = ctx.parents.get(node)
        t = type(parent)
        if t is ast.Assign and parent.value is not node:  # type: ignore[union-attr]
            continue  # ``name = ...`` (a target of its own; ``a, name = ...`` counts, as it did)
        if t is ast.AugAssign and parent.target is node:  # type: ignore[union-attr]
            found.append(node)
            continue
        if t is ast.arguments:
            continue  # a parameter's default (libcst put it in the ``Param``, whose name was skipped)
        if t in (ast.AnnAssign, ast.For, ast.AsyncFor) and getattr(parent, "target", None) is node:
            continue
        inner = ctx.provenance.scope_of(node)
        if inner.lookup(name) is not scope:
            continue
        found.append(node if inner is scope or nested else None)
    return found
