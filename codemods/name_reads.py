"""Where a local name is read: a question about names and scopes alone, asked by the
analysis of values (tensor_values), of dtypes and of branches."""

from __future__ import annotations

import libcst as cst

from .context import FileContext


def reads_of(ctx: FileContext, scope, name: str, nested: bool = False) -> list[cst.Name | None]:
    """Every read of the local ``name`` of ``scope`` (None for a read from a nested
    function, lambda or comprehension, or by ``locals()``; with ``nested``, such a
    read itself)."""
    found: list[cst.Name | None] = []
    # A read of a local of ``scope`` lies below its node; a target of ``name += ...`` counts
    # wherever it is.
    nodes = ctx.names(name, scope.node)
    elsewhere = [n for n in ctx.augmented_names(name) if not ctx.below(n, scope.node)]
    if elsewhere:
        nodes = sorted([*nodes, *elsewhere], key=ctx.positions.offset)
    for node in nodes:
        assert isinstance(node, cst.Name)
        if node.value != name:
            continue
        parent = ctx.parents.get(node)
        if isinstance(parent, cst.AssignTarget) or (isinstance(parent, cst.Attribute) and parent.attr is node):
            continue
        if isinstance(parent, cst.AugAssign) and parent.target is node:
            found.append(node)
            continue
        if isinstance(parent, cst.Arg) and parent.keyword is node:
            continue
        if isinstance(parent, (cst.Param, cst.FunctionDef, cst.ClassDef, cst.ImportAlias)):
            continue
        if isinstance(parent, (cst.AnnAssign, cst.For)) and getattr(parent, "target", None) is node:
            continue
        inner = ctx.provenance.scope_of(node)
        if inner.lookup(name) is not scope:
            continue
        found.append(node if inner is scope or nested else None)
    return found

