"""Which assignment a read of a name certainly sees, in straight-line code.

Provenance gives a name one kind for its whole scope (what all its bindings
agree on). That is wrong where code rebinds a name to something else:

    loss, seen = loss.item(), step * 4   # from here on `loss` is a float
    print(f"loss: {loss:>7f}")
    t = torch.tensor([count, total], device="cuda")
    t = t.tolist()                       # the `t` read here is the tensor

:func:`reaching_value` answers, for one read, the value of the assignment that
every path to it runs last: an earlier statement of the same block (or of a
block around it, through ``if`` and ``with``), with no other binding of the
name in between; or, before any, the function's parameter. Loops (a later statement may run before the read, on the next
pass) and ``try`` (the binding may not have run) that rebind the name, and
anything that binds it in another way (``+=``, ``for``, ``with ... as``,
unpacking a call, a nested function), give no answer: the scope-wide kind
stands.
"""

from __future__ import annotations

import bisect

import libcst as cst

from .tree import nodes_within, number_of, subtree_stop, walk

# Blocks a read is followed out of whatever they bind: their header runs once, before their body.
_STRAIGHT = (cst.If, cst.With)
_BODIES = (cst.Module, cst.IndentedBlock, cst.SimpleStatementLine, cst.SimpleStatementSuite)


def reaching_value(
    read: cst.Name, scope_node: cst.CSTNode, parents: dict[cst.CSTNode, cst.CSTNode],
    bindings: Bindings,
) -> cst.BaseExpression | cst.Param | None:
    """The value ``read`` certainly sees (see the module docstring): an assigned value,
    or the function's parameter when no assignment comes before; or None.

    ``scope_node``: the function (or module) whose local ``read`` is; ``bindings``: the
    module's :class:`Bindings`."""
    name = read.value
    child: cst.CSTNode = read
    node = parents.get(read)
    while node is not None:
        if isinstance(node, _BODIES):
            found = bindings.last_binding_before(node, child, name)
            if found is None:
                return None
            earlier = found[0]
            if earlier is not None:
                return _assigned_value(earlier, name, bindings)
        if node is scope_node:
            return _parameter(node, name)
        if isinstance(node, cst.BaseCompoundStatement) and not isinstance(node, _STRAIGHT):
            # A loop that rebinds the name (a later statement may run before the read, on the
            # next pass), a try whose body may or may not have, a match's capture, a nested
            # def's parameter: no single answer. A for's iterable is read before its target is bound.
            if not (isinstance(node, cst.For) and child is node.iter) and bindings.binds(node, name):
                return None
        child = node
        node = parents.get(node)
    return None


def _parameter(scope_node: cst.CSTNode, name: str) -> cst.Param | None:
    """The parameter ``name`` of the function ``scope_node``: what a read sees before any
    assignment."""
    if not isinstance(scope_node, cst.FunctionDef):
        return None
    params = scope_node.params
    for param in (*params.posonly_params, *params.params, *params.kwonly_params):
        if param.name.value == name:
            return param
    return None


def _assigned_value(statement: cst.CSTNode, name: str, bindings: Bindings) -> cst.BaseExpression | None:
    """The value ``statement`` (which binds ``name``) leaves in it, when it is a plain
    assignment that certainly does."""
    if isinstance(statement, cst.SimpleStatementLine):
        small = [s for s in statement.body if bindings.binds(s, name)]
        statement = small[-1]
    if isinstance(statement, cst.AnnAssign):
        if isinstance(statement.target, cst.Name) and statement.value is not None and not _walrus_in(statement.value):
            return statement.value
        return None
    if not isinstance(statement, cst.Assign) or _walrus_in(statement.value):
        return None
    found = None
    for target in statement.targets:
        value = _element_value(target.target, statement.value, name)
        if value is not None:
            found = value
        elif name in _target_names(target.target):
            return None  # bound by unpacking something fixitem cannot split
    return found


def _element_value(target: cst.BaseExpression, value: cst.BaseExpression, name: str) -> cst.BaseExpression | None:
    if isinstance(target, cst.Name):
        return value if target.value == name else None
    if (
        isinstance(target, (cst.Tuple, cst.List)) and isinstance(value, (cst.Tuple, cst.List))
        and len(target.elements) == len(value.elements)
        and not any(isinstance(e, cst.StarredElement) for e in (*target.elements, *value.elements))
    ):
        pairs = [(t, v) for t, v in zip(target.elements, value.elements) if name in _target_names(t.value)]
        if len(pairs) == 1:
            (element, element_value), = pairs
            return _element_value(element.value, element_value.value, name)
    return None


def _walrus_in(value: cst.BaseExpression) -> bool:
    return any(isinstance(n, cst.NamedExpr) for n in walk(value))


def _target_names(target: cst.CSTNode) -> set[str]:
    if isinstance(target, cst.Name):
        return {target.value}
    if isinstance(target, (cst.Tuple, cst.List)):
        return {n for e in target.elements for n in _target_names(e.value)}
    if isinstance(target, cst.StarredElement):
        return _target_names(target.value)
    return set()  # an attribute or an item: binds no name


class Bindings:
    """Where each name is bound in a module: the source-order numbers of the nodes that bind
    it (targets, parameters, imports, defs, ...), so that "does this statement bind ``x``?"
    is a search in a sorted list, not a walk of the statement."""

    # The node types that bind a name, and the names each binds.
    TYPES = (cst.AssignTarget, cst.AugAssign, cst.AnnAssign, cst.For, cst.CompFor, cst.AsName, cst.NamedExpr,
             cst.Del, cst.Global, cst.Nonlocal, cst.ImportAlias, cst.FunctionDef, cst.ClassDef, cst.Param,
             cst.MatchAs, cst.MatchStar, cst.MatchMapping)

    def __init__(self, module: cst.Module) -> None:
        self._at: dict[str, list[int]] = {}
        self._starts: dict[int, list[int]] = {}  # a block's number -> its statements' numbers
        for node in nodes_within(module, *self.TYPES):
            number = number_of(node)
            if number is None:
                continue
            for name in _names_bound_by(node):
                self._at.setdefault(name, []).append(number)
        for numbers in self._at.values():
            numbers.sort()

    def last_binding_before(self, block: cst.CSTNode, child: cst.CSTNode, name: str) -> tuple[cst.CSTNode | None] | None:
        """The last statement of ``block.body`` before ``child`` that binds ``name``, as a
        1-tuple (``(None,)`` when none does), or None when ``child`` is not in ``block.body``.

        The statements of a block are runs of source-order numbers, in order: the binding
        of ``name`` numbered last before ``child`` lies in the statement sought. (A walk back
        over the statements costs as many steps as there are between, which for a read at
        the bottom of a long module is most of them.)"""
        body = block.body  # type: ignore[attr-defined]
        number, top = number_of(child), number_of(block)
        if number is None or top is None:
            index = next((i for i, item in enumerate(body) if item is child), None)
            if index is None:
                return None
            return (next((e for e in reversed(body[:index]) if self.binds(e, name)), None),)
        starts = self._starts.get(top)
        if starts is None:
            starts = self._starts[top] = [number_of(item) for item in body]  # type: ignore[misc]
        index = bisect.bisect_left(starts, number)
        if index == len(starts) or starts[index] != number or body[index] is not child:
            return None
        numbers = self._at.get(name, ())
        last = bisect.bisect_left(numbers, number) - 1
        if index == 0 or last < 0 or numbers[last] < starts[0]:
            return (None,)
        return (body[bisect.bisect_right(starts, numbers[last]) - 1],)

    def binds(self, node: cst.CSTNode, name: str) -> bool:
        """Whether ``name`` may be bound anywhere within ``node`` (nested functions included)."""
        numbers = self._at.get(name)
        number = number_of(node)
        if not numbers or number is None:
            return bool(numbers)  # a node built after indexing: assume it may
        i = bisect.bisect_left(numbers, number)
        return i < len(numbers) and numbers[i] < subtree_stop(number)


def _names_bound_by(node: cst.CSTNode) -> set[str]:
    if isinstance(node, cst.AssignTarget):
        return _target_names(node.target)
    if isinstance(node, (cst.AugAssign, cst.AnnAssign, cst.For, cst.CompFor)):
        return _target_names(node.target)
    if isinstance(node, cst.AsName):
        return _target_names(node.name)
    if isinstance(node, cst.NamedExpr):
        return _target_names(node.target)
    if isinstance(node, cst.Del):
        return {n.value for n in walk(node.target) if isinstance(n, cst.Name)}
    if isinstance(node, (cst.Global, cst.Nonlocal)):
        return {item.name.value for item in node.names}
    if isinstance(node, cst.ImportAlias):
        local = node.asname.name if node.asname is not None else node.name
        return {n.value for n in walk(local) if isinstance(n, cst.Name)}
    if isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.Param)):
        return {node.name.value}
    return {n.value for n in walk(node) if isinstance(n, cst.Name)}  # match patterns
