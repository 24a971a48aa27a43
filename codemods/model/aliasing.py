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
import bisect
from collections.abc import Callable

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
_LOOPS = (ast.For, ast.AsyncFor, ast.While)


def written_in_place_after(ctx: FileContext, anchor: ast.AST, name: str) -> ast.AST | None:
    """The first place after ``anchor`` (or in a loop around it) that writes in place the
    tensor the local ``name`` holds when ``anchor`` ends, or None. A read that certainly
    sees a later binding of ``name`` holds another object and is skipped."""
    return first_after(ctx, anchor, name, "in-place writes", lambda read: _write_through(ctx, read, follow=True))


def returned_after(ctx: FileContext, anchor: ast.AST, name: str) -> ast.AST | None:
    """A ``return name`` (or ``yield name``) after ``anchor`` that hands out the object the
    local ``name`` holds when ``anchor`` ends (not one bound later), or None."""
    def returned(read: ast.Name) -> ast.AST | None:
        parent = ctx.parents.get(read)
        return parent if type(parent) in (ast.Return, ast.Yield) else None

    return first_after(ctx, anchor, name, "returns", returned)


# What shows which object a name holds, beyond its values: a leaf's gradient, leaf-ness,
# the storage and its version counter.
IDENTITY_ATTRIBUTES = frozenset({"grad", "is_leaf", "retain_grad", "data_ptr", "_version", "untyped_storage"})


def identity_read_after(ctx: FileContext, anchor: ast.AST, name: str) -> ast.AST | None:
    """A read after ``anchor`` that tells which object the local ``name`` holds, not only
    its values (``name.grad``, ``name.is_leaf``, ``name is p``, ``id(name)``,
    ``type(name)``, ``isinstance(name, nn.Parameter)``), or None."""
    def identity(read: ast.Name) -> ast.AST | None:
        parent = ctx.parents.get(read)
        t = type(parent)
        if t is ast.Attribute and parent.attr in IDENTITY_ATTRIBUTES:  # type: ignore[union-attr]
            return parent
        if t is ast.Compare and any(type(op) in (ast.Is, ast.IsNot) for op in parent.ops):  # type: ignore[union-attr]
            return parent
        if t is ast.Call and parent.args and parent.args[0] is read and type(parent.func) is ast.Name and \
                parent.func.id in ("id", "type", "isinstance"):  # type: ignore[union-attr]
            return parent
        return None

    return first_after(ctx, anchor, name, "identity reads", identity)


def first_after(ctx: FileContext, anchor: ast.AST, name: str, what: str,
                find: Callable[[ast.Name], ast.AST | None]) -> ast.AST | None:
    """The first place ``find`` gives for a read of ``name`` (what the read does: a write, a
    ``return``; None where it does none) that comes after ``anchor`` or lies in a loop
    around it. ``what`` names the question: each name's places are found once, so a
    function of a thousand ``if`` statements is not walked for each."""
    scope = ctx.provenance.scope_of(anchor)
    if scope.lookup(name) is not scope or not isinstance(scope.node, FUNCTIONS):
        return None  # a module-level name: other modules' writes are not followed
    offsets, found = _places(ctx, scope, name, what, find)
    if not found:
        return None
    start, end = ctx.positions.span(anchor)
    loop = None
    for up in ctx.ancestors(anchor):
        if up is scope.node:
            break
        if isinstance(up, _LOOPS):
            loop = up  # the outermost loop around ``anchor`` in its function
    first = ctx.positions.span(loop)[0] if loop is not None else end
    for k in range(bisect.bisect_left(offsets, first), len(offsets)):
        read, place = found[k]
        if start <= offsets[k] < end:
            continue  # inside ``anchor`` itself
        seen = ctx.provenance.reaching(read)
        if seen is not None and not ctx.below(seen, anchor) and ctx.positions.offset(seen) >= end:
            continue  # rebound after ``anchor``: another object
        return place
    return None


def _places(ctx: FileContext, scope, name: str, what: str,
            find: Callable[[ast.Name], ast.AST | None]) -> tuple[list[int], list[tuple[ast.Name, ast.AST]]]:
    """The reads of ``name`` for which ``find`` gives a place, sorted by where they stand,
    with it; made once per name and question."""
    key = (what, id(scope), name)
    kept = ctx.kept(key)
    if kept is not None:
        return kept  # type: ignore[return-value]
    ctx.keep(key, ([], []))  # ``z = y`` ... ``y = z``: asked again while being made
    found = []
    for read in reads_of(ctx, scope, name):
        if read is not None:
            place = find(read)
            if place is not None:
                found.append((ctx.positions.offset(read), read, place))
    found.sort(key=lambda f: f[0])
    answer = ([f[0] for f in found], [(f[1], f[2]) for f in found])
    ctx.keep(key, answer)
    return answer


def changed_in_place(ctx: FileContext, scope, name: str, besides: frozenset[str] = frozenset()) -> ast.AST | None:
    """A place that changes the object the name ``name`` of ``scope`` holds in place, or
    None: a tensor's or an array's write (``a[i] = v``, ``a += v``, ``a.add_(v)``,
    ``a.fill(0)``), a container's (``a.append(v)``, ``d["n"] += 1``) or an object's
    (``args.step = i``), at any read of the name, nested functions included (a loop may
    run it after any other statement). Calls of the methods ``besides`` do not count."""
    for read in reads_of(ctx, scope, name, nested=True):
        if read is None:
            continue
        found = _write_through(ctx, read, follow=False)
        if found is not None:
            return found
        parent = ctx.parents.get(read)
        if type(parent) is ast.Attribute and parent.attr in (*CONTAINER_WRITES, "fill", "resize") and \
                parent.attr not in besides:  # type: ignore[attr-defined]
            call = ctx.parents.get(parent)
            if type(call) is ast.Call and call.func is parent:  # type: ignore[attr-defined]
                return call
    return None


def _write_through(ctx: FileContext, read: ast.Name, follow: bool) -> ast.AST | None:
    """The write of the tensor ``read`` reads, made at this read (through views of it), or
    (``follow``) through a name this read binds it to (``z = y``, then ``z.mul_(2)``)."""
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
                if writes_in_place(attr):
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
    if t is ast.Assign and parent.value is node and follow:  # type: ignore[attr-defined]
        for target in parent.targets:  # type: ignore[attr-defined]
            if type(target) is ast.Name:
                found = written_in_place_after(ctx, parent, target.id)
                if found is not None:
                    return found
    return None
