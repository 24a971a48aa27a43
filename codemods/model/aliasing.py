"""Where the tensor a name holds is written in place later: through the name itself
(``y += 1``, ``y.add_(1)``, ``y[0] = 0``), through a view of it (``y.view(-1).zero_()``,
``y[:, 0].fill_(0)``) or through a second name bound to it (``z = y``, then ``z.mul_(2)``).

A rewrite that binds a name to a new tensor where the original kept the object it
had (``torch.where`` in place of an ``if``) changes what such a write reaches: in the
original it updated a tensor other code may hold too (the caller's input, a module's
parameter, a tensor that ``.float()`` returned as it is), after the rewrite only the
new one. This module finds the writes; whether the object was shared is the rule's
question.
"""

from __future__ import annotations

import ast

from .context import FUNCTIONS, FileContext
from .name_reads import reads_of
from .writes import CONTAINER_WRITES, WRITING_KEYWORDS, writes_in_place

# Tensor methods whose result may share memory with the tensor (a view, or the tensor
# itself when no conversion is needed: ``x.float()`` of a float32 ``x`` is ``x``).
SHARING_METHODS = frozenset(
    {
        "view", "view_as", "reshape", "reshape_as", "flatten", "unflatten", "squeeze", "unsqueeze", "transpose",
        "permute", "t", "narrow", "select", "expand", "expand_as", "as_strided", "diagonal", "detach",
        "contiguous", "to", "type", "type_as", "float", "half", "double", "bfloat16", "long", "int", "short",
        "bool", "byte", "char", "cpu", "cuda", "movedim", "moveaxis", "swapaxes", "swapdims", "unfold",
        "view_as_real", "view_as_complex", "requires_grad_",
    }
)
# Attributes of a tensor that are the same memory.
SHARING_ATTRIBUTES = frozenset({"data", "T", "mT", "H", "mH", "real", "imag"})
# Tensor methods that write their receiver without a trailing underscore.
_WRITING_METHODS = frozenset({"copy_", "set_", "index_put_", "masked_fill_", "scatter_"})
_LOOPS = (ast.For, ast.AsyncFor, ast.While)
# How many names bound to the tensor (``z = y``, then ``w = z``) are followed.
MAX_ALIASES = 3


def written_in_place_after(ctx: FileContext, anchor: ast.AST, name: str) -> ast.AST | None:
    """The first place after ``anchor`` (or in a loop around it) that writes in place the
    tensor the local ``name`` holds when ``anchor`` ends, or None. A read that certainly
    sees a later binding of ``name`` holds another object and is skipped."""
    return _written_after(ctx, anchor, anchor, name, 0)


def changed_in_place(ctx: FileContext, scope, name: str) -> ast.AST | None:
    """A place that changes the object the name ``name`` of ``scope`` holds in place, or
    None: a tensor's or an array's write (``a[i] = v``, ``a += v``, ``a.add_(v)``,
    ``a.fill(0)``), a container's (``a.append(v)``, ``d["n"] += 1``) or an object's
    (``args.step = i``), at any read of the name, nested functions included (a loop may
    run it after any other statement)."""
    for read in reads_of(ctx, scope, name, nested=True):
        if read is None:
            continue
        found = _write_through(ctx, read, read, MAX_ALIASES)
        if found is not None:
            return found
        parent = ctx.parents.get(read)
        if type(parent) is ast.Attribute and parent.attr in (*CONTAINER_WRITES, "fill", "resize"):  # type: ignore[attr-defined]
            call = ctx.parents.get(parent)
            if type(call) is ast.Call and call.func is parent:  # type: ignore[attr-defined]
                return call
    return None


def _written_after(ctx: FileContext, anchor: ast.AST, after: ast.AST, name: str, depth: int) -> ast.AST | None:
    scope = ctx.provenance.scope_of(after)
    if scope.lookup(name) is not scope or not isinstance(scope.node, FUNCTIONS):
        return None  # a module-level name: other modules' writes are not followed
    end = ctx.positions[after].end
    loops = {id(n) for n in ctx.ancestors(anchor) if isinstance(n, _LOOPS)}
    for read in reads_of(ctx, scope, name):
        if read is None or ctx.below(read, after):
            continue
        start = ctx.positions[read].start
        if (start.line, start.column) <= (end.line, end.column) and not any(
            id(n) in loops for n in ctx.ancestors(read) if isinstance(n, _LOOPS)
        ):
            continue
        seen = ctx.provenance.reaching(read)
        if seen is not None and not ctx.below(seen, after) and ctx.positions[seen].start.line > end.line:
            continue  # rebound after ``after``: another tensor
        found = _write_through(ctx, anchor, read, depth)
        if found is not None:
            return found
    return None


def _write_through(ctx: FileContext, anchor: ast.AST, read: ast.Name, depth: int) -> ast.AST | None:
    """The write of the tensor ``read`` reads, made at this read (through views of it), or
    through a name this read binds it to."""
    node: ast.AST = read
    parent = ctx.parents.get(node)
    while parent is not None:
        t = type(parent)
        if t is ast.Subscript and parent.value is node:  # type: ignore[attr-defined]
            node, parent = parent, ctx.parents.get(parent)
            continue
        if t is ast.Attribute and parent.value is node:  # type: ignore[attr-defined]
            attr = parent.attr  # type: ignore[attr-defined]
            call = ctx.parents.get(parent)
            if type(call) is ast.Call and call.func is parent:  # type: ignore[attr-defined]
                if writes_in_place(attr) or attr in _WRITING_METHODS:
                    return call
                if attr in SHARING_METHODS:
                    node, parent = call, ctx.parents.get(call)
                    continue
                return None
            if attr in SHARING_ATTRIBUTES:
                node, parent = parent, ctx.parents.get(parent)
                continue
            if type(parent.ctx) is ast.Store:  # type: ignore[attr-defined]
                return parent  # ``y.requires_grad = ...``, ``y.grad = ...``
            return None
        break
    if parent is None:
        return None
    t = type(parent)
    if t is ast.AugAssign and parent.target is node:  # type: ignore[attr-defined]
        return parent  # ``y += 1``, ``y[0] += 1``: in place for a tensor
    if node is not read and type(getattr(node, "ctx", None)) is ast.Store:
        return parent  # ``y[0] = 0``, ``y.data[...] = ...``
    if t is ast.keyword and parent.arg in WRITING_KEYWORDS:  # type: ignore[attr-defined]
        return ctx.parents.get(parent)  # ``torch.add(a, b, out=y)``
    if t is ast.Call and parent.args and parent.args[0] is node:  # type: ignore[attr-defined]
        # A function (``nn.init.zeros_(y)``, ``torch.clamp_(y, 0)``), not a method of another
        # tensor (``p.copy_(y)`` writes ``p``).
        func = parent.func  # type: ignore[attr-defined]
        root = func
        while type(root) is ast.Attribute:
            root = root.value  # type: ignore[attr-defined]
        imported = type(root) is ast.Name and root.id in ctx.provenance.imports.aliases  # type: ignore[attr-defined]
        called = func.id if type(func) is ast.Name else func.attr if imported else ""
        if writes_in_place(called):
            return parent
    if t is ast.Assign and parent.value is node and depth < MAX_ALIASES:  # type: ignore[attr-defined]
        for target in parent.targets:  # type: ignore[attr-defined]
            if type(target) is ast.Name:
                found = _written_after(ctx, anchor, parent, target.id, depth + 1)
                if found is not None:
                    return found
    return None
