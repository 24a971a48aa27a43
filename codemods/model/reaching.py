"""Which assignment a read of a name certainly sees, in straight-line code.

Provenance gives a name one kind for its whole scope (what all its bindings
agree on). That is wrong where code rebinds a name to something else:

    loss, seen = loss.item(), step * 4   # from here on `loss` is a float
    print(f"loss: {loss:>7f}")
    t = torch.tensor([count, total], device="cuda")
    t = t.tolist()                       # the `t` read here is the tensor

:func:`reaching_binding` answers, for one read, the assignment that
every path to it runs last: an earlier statement of the same block (or of a
block around it, through ``if`` and ``with``), with no other binding of the
name in between; or, before any, the function's parameter. Loops (a later statement may run before the read, on the next
pass) and ``try`` (the binding may not have run) that rebind the name give no answer.
What that statement leaves in the name is read three ways: a plain assignment's value
(:func:`assigned_value`), the values the branches of an ``if`` assign
(:func:`branch_values`), and the value a tuple of names unpacks (:func:`unpacked_value`).
Anything else that binds it (``+=``, ``for``, ``with ... as``, a nested function) gives
no answer: the scope-wide kind stands.
"""

from __future__ import annotations

import ast
import bisect
from collections.abc import Mapping

from .tree import number_of, numbered_within, subtree_stop, walk

# Blocks a read is followed out of whatever they bind: their header runs once, before their body.
_STRAIGHT = (ast.If, ast.With, ast.AsyncWith)
# The nodes that hold lists of statements (``ast`` has no block node: a statement's parent is
# the module or compound statement whose ``body`` / ``orelse`` / ``finalbody`` list holds it).
_BODIES = (
    ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.If, ast.For, ast.AsyncFor, ast.While,
    ast.With, ast.AsyncWith, ast.Try, ast.ExceptHandler, ast.match_case,
) + ((ast.TryStar,) if hasattr(ast, "TryStar") else ())
# The fields of those nodes that hold statements, in source order.
_STATEMENT_FIELDS = ("body", "orelse", "finalbody")
# Statements with a body (libcst's ``BaseCompoundStatement``).
_COMPOUND = (
    ast.If, ast.For, ast.AsyncFor, ast.While, ast.With, ast.AsyncWith, ast.Try, ast.FunctionDef,
    ast.AsyncFunctionDef, ast.ClassDef, ast.Match,
) + ((ast.TryStar,) if hasattr(ast, "TryStar") else ())
_FOR = (ast.For, ast.AsyncFor)
_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)


def statements_holding(block: ast.AST, child: ast.AST) -> list[ast.stmt] | None:
    """The statement list of ``block`` (its ``body``, ``orelse`` or ``finalbody``) that holds
    ``child``, or None when ``child`` is not one of its statements."""
    if not isinstance(child, ast.stmt):
        return None
    number = number_of(child)
    for field in _STATEMENT_FIELDS:
        body = getattr(block, field, None)
        if not body or type(body) is not list:
            continue
        if number is not None:
            first, last = number_of(body[0]), number_of(body[-1])
            if first is not None and last is not None and first <= number <= last:
                return body
            if first is not None and last is not None:
                continue
        if any(item is child for item in body):
            return body
    return None


def reaching_binding(
    read: ast.Name | ast.arg, scope_node: ast.AST, parents: Mapping[ast.AST, ast.AST],
    bindings: Bindings,
) -> ast.stmt | ast.arg | None:
    """The statement that binds ``read``'s name last on every path to it (see the module
    docstring), or the function's parameter (its ``ast.arg``) when no statement does; None
    where there is no such one. What it leaves there is read by :func:`assigned_value`,
    :func:`branch_values` and :func:`unpacked_value`.

    ``scope_node``: the function (or module) whose local ``read`` is; ``bindings``: the
    module's :class:`Bindings`. (A parameter, its ``ast.arg``, sees itself.)"""
    name = read.id if type(read) is ast.Name else read.arg
    child: ast.AST = read
    node = parents.get(read)
    while node is not None:
        if isinstance(child, ast.stmt):  # ``node`` holds the block of statements ``child`` is in
            found = bindings.last_binding_before(node, child, name)
            if found is None:
                return None
            if found[0] is not None:
                return found[0]
        if node is scope_node:
            return _parameter(node, name)
        if isinstance(node, _COMPOUND) and not isinstance(node, _STRAIGHT):
            # A loop that rebinds the name (a later statement may run before the read, on the
            # next pass), a try whose body may or may not have, a match's capture, a nested
            # def's parameter: no single answer. A for's iterable is read before its target is bound.
            if not (isinstance(node, _FOR) and child is node.iter) and bindings.binds(node, name):
                return None
        child = node
        node = parents.get(node)
    return None


def branch_values(statement: ast.stmt | ast.arg | None, name: str, bindings: Bindings) -> list[ast.expr] | None:
    """Where ``statement`` (a read's :func:`reaching_binding`) is an ``if`` each branch of which
    assigns ``name`` (``if shuffle: idx = randperm(n)`` / ``else: idx = arange(n)``, and
    ``elif`` chains): the value each branch leaves; None otherwise."""
    return _branch_values(statement, name, bindings, 0) if type(statement) is ast.If else None


def unpacked_value(statement: ast.stmt | ast.arg | None, name: str) -> ast.expr | None:
    """Where ``statement`` (a read's :func:`reaching_binding`) unpacks one value into a tuple
    of names, ``name`` among them (``widths, depths = torch.unique(t, return_counts=True)``):
    that value; None otherwise."""
    if not (type(statement) is ast.Assign and len(statement.targets) == 1):
        return None
    target, value = statement.targets[0], statement.value
    if type(target) not in (ast.Tuple, ast.List) or type(value) in (ast.Tuple, ast.List) or _walrus_in(value):
        return None
    elements = target.elts  # type: ignore[attr-defined]
    if any(type(e) is ast.Starred for e in elements) or not any(type(e) is ast.Name and e.id == name for e in elements):
        return None
    return value


def _branch_values(statement: ast.stmt, name: str, bindings: Bindings, depth: int) -> list[ast.expr] | None:
    """The values the branches of the ``if`` ``statement`` leave in ``name``, each by its last
    statement that binds it: a plain assignment, or another such ``if``."""
    if type(statement) is not ast.If or not statement.orelse or depth > 4:
        return None
    values: list[ast.expr] = []
    for branch in (statement.body, statement.orelse):
        last = next((s for s in reversed(branch) if bindings.binds(s, name)), None)
        if last is None:
            return None
        value = assigned_value(last, name, bindings)
        inner = [value] if value is not None else _branch_values(last, name, bindings, depth + 1)
        if inner is None:
            return None
        values += inner
    return values


def parameter_may_reach(read: ast.Name, scope_node: ast.AST, parents: Mapping[ast.AST, ast.AST]) -> bool:
    """May ``read`` see the object the caller passed for the parameter of its name? Not when
    a plain assignment of the name (``x = layer(x)``, ``x, y = ...``, ``with ... as x``)
    runs before it on every path: an earlier statement of its block or of a block around
    it, up to the function. (``x += y`` keeps the object a tensor had: it does not count.)"""
    name = read.id
    child: ast.AST = read
    node = parents.get(read)
    while node is not None:
        if isinstance(child, ast.stmt):
            body = statements_holding(node, child)
            if body is not None:
                index = next((i for i, item in enumerate(body) if item is child), 0)
                if any(_rebinds(statement, name) for statement in body[:index]):
                    return False
        if node is scope_node:
            return _parameter(node, name) is not None
        child = node
        node = parents.get(node)
    return True


def _rebinds(statement: ast.stmt, name: str) -> bool:
    """Does ``statement`` itself bind ``name`` to a new object whenever it runs?"""
    t = type(statement)
    if t is ast.Assign:
        return any(name in _target_names(target) for target in statement.targets)  # type: ignore[attr-defined]
    if t is ast.AnnAssign:
        return statement.value is not None and name in _target_names(statement.target)  # type: ignore[attr-defined]
    if t is ast.With or t is ast.AsyncWith:
        return any(item.optional_vars is not None and name in _target_names(item.optional_vars)  # type: ignore[attr-defined]
                   for item in statement.items)  # type: ignore[attr-defined]
    return False


def _parameter(scope_node: ast.AST, name: str) -> ast.arg | None:
    """The parameter ``name`` of the function ``scope_node``: what a read sees before any
    assignment."""
    if not isinstance(scope_node, _FUNCTIONS):
        return None
    params = scope_node.args
    for param in (*params.posonlyargs, *params.args, *params.kwonlyargs):
        if param.arg == name:
            return param
    return None


def assigned_value(statement: ast.AST, name: str, bindings: Bindings) -> ast.expr | None:
    """The value ``statement`` (which binds ``name``) leaves in it, when it is a plain
    assignment that certainly does."""
    if type(statement) is ast.AnnAssign:
        if type(statement.target) is ast.Name and statement.value is not None and not _walrus_in(statement.value):
            return statement.value
        return None
    if type(statement) is not ast.Assign or _walrus_in(statement.value):
        return None
    found = None
    for target in statement.targets:
        value = _element_value(target, statement.value, name)
        if value is not None:
            found = value
        elif name in _target_names(target):
            return None  # bound by unpacking something fixitem cannot split
    return found


def _unstarred(element: ast.expr) -> ast.expr:
    """The expression of an element (libcst's ``Element.value`` / ``StarredElement.value``)."""
    return element.value if type(element) is ast.Starred else element  # type: ignore[attr-defined]


def _element_value(target: ast.expr, value: ast.expr, name: str) -> ast.expr | None:
    if type(target) is ast.Name:
        return value if target.id == name else None
    if (
        type(target) in (ast.Tuple, ast.List) and type(value) in (ast.Tuple, ast.List)
        and len(target.elts) == len(value.elts)  # type: ignore[attr-defined]
        and not any(type(e) is ast.Starred for e in (*target.elts, *value.elts))  # type: ignore[attr-defined]
    ):
        pairs = [(t, v) for t, v in zip(target.elts, value.elts) if name in _target_names(t)]  # type: ignore[attr-defined]
        if len(pairs) == 1:
            (element, element_value), = pairs
            return _element_value(element, element_value, name)
    return None


def _walrus_in(value: ast.AST) -> bool:
    return any(type(n) is ast.NamedExpr for n in walk(value))


def _target_names(target: ast.AST) -> set[str]:
    if type(target) is ast.Name:
        return {target.id}  # type: ignore[attr-defined]
    if type(target) in (ast.Tuple, ast.List):
        return {n for e in target.elts for n in _target_names(_unstarred(e))}  # type: ignore[attr-defined]
    if type(target) is ast.Starred:
        return _target_names(target.value)  # type: ignore[attr-defined]
    return set()  # an attribute or an item: binds no name


class Bindings:
    """Where each name is bound in a module: the source-order numbers of the nodes that bind
    it (assignments, parameters, imports, defs, ...), so that "does this statement bind ``x``?"
    is a search in a sorted list, not a walk of the statement."""

    # The node types that bind a name, and the names each binds.
    TYPES = (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.For, ast.AsyncFor, ast.comprehension, ast.withitem,
             ast.ExceptHandler, ast.alias, ast.NamedExpr, ast.Delete, ast.Global, ast.Nonlocal, ast.FunctionDef,
             ast.AsyncFunctionDef, ast.ClassDef, ast.arg, ast.MatchAs, ast.MatchStar, ast.MatchMapping)

    def __init__(self, module: ast.Module) -> None:
        self._at: dict[str, list[int]] = {}
        self._starts: dict[int, list[int]] = {}  # a block's first statement's number -> its statements' numbers
        at = self._at
        for t in self.TYPES:  # (a type at a time: the numbers are sorted once, per name)
            for number, node in numbered_within(module, t):
                for name in (node.arg,) if t is ast.arg else _names_bound_by(node):  # type: ignore[attr-defined]
                    numbers = at.get(name)
                    if numbers is None:
                        at[name] = [number]
                    else:
                        numbers.append(number)
        for numbers in at.values():
            numbers.sort()

    def last_binding_before(self, block: ast.AST, child: ast.AST, name: str) -> tuple[ast.stmt | None] | None:
        """The last statement of the statement list of ``block`` holding ``child`` (its
        ``body``, ``orelse``, ...) before ``child`` that binds ``name``, as a 1-tuple
        (``(None,)`` when none does), or None when ``child`` is not one of ``block``'s statements.

        The statements of a block are runs of source-order numbers, in order: the binding
        of ``name`` numbered last before ``child`` lies in the statement sought. (A walk back
        over the statements costs as many steps as there are between, which for a read at
        the bottom of a long module is most of them.)"""
        body = statements_holding(block, child)
        if body is None:
            return None
        number, top = number_of(child), number_of(body[0])
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

    def binds(self, node: ast.AST, name: str) -> bool:
        """Whether ``name`` may be bound anywhere within ``node`` (nested functions included)."""
        numbers = self._at.get(name)
        number = number_of(node)
        if not numbers or number is None:
            return bool(numbers)  # a node built after indexing: assume it may
        i = bisect.bisect_left(numbers, number)
        return i < len(numbers) and numbers[i] < subtree_stop(number)


def _names_bound_by(node: ast.AST) -> set[str]:
    t = type(node)
    if t is ast.Assign:
        return {n for target in node.targets for n in _target_names(target)}  # type: ignore[attr-defined]
    if t in (ast.AugAssign, ast.AnnAssign, ast.For, ast.AsyncFor, ast.comprehension):
        return _target_names(node.target)  # type: ignore[attr-defined]
    if t is ast.withitem:
        return _target_names(node.optional_vars) if node.optional_vars is not None else set()  # type: ignore[attr-defined]
    if t is ast.ExceptHandler:
        return {node.name} if node.name is not None else set()  # type: ignore[attr-defined]
    if t is ast.NamedExpr:
        return _target_names(node.target)  # type: ignore[attr-defined]
    if t is ast.Delete:
        # Every name spelled in the targets (libcst's walk: ``del self.x`` gives ``self`` and ``x``).
        return {n for target in node.targets for n in _spelled_names(target)}  # type: ignore[attr-defined]
    if t in (ast.Global, ast.Nonlocal):
        return set(node.names)  # type: ignore[attr-defined]
    if t is ast.alias:
        if node.name == "*":  # type: ignore[attr-defined]
            return set()
        if node.asname is not None:  # type: ignore[attr-defined]
            return {node.asname}  # type: ignore[attr-defined]
        return set(node.name.split("."))  # type: ignore[attr-defined]  # as libcst's walk of ``a.b.c``
    if t in (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef):
        return {node.name}  # type: ignore[attr-defined]
    if t is ast.arg:
        return {node.arg}  # type: ignore[attr-defined]
    return _spelled_names(node)  # match patterns


def _spelled_names(root: ast.AST) -> set[str]:
    """Every name spelled in ``root``'s subtree: what a walk of libcst's ``Name`` nodes found
    (names, attribute names, keyword names, match captures)."""
    found: set[str] = set()
    for n in walk(root):
        t = type(n)
        if t is ast.Name:
            found.add(n.id)  # type: ignore[attr-defined]
        elif t is ast.Attribute:
            found.add(n.attr)  # type: ignore[attr-defined]
        elif t is ast.keyword and n.arg is not None:  # type: ignore[attr-defined]
            found.add(n.arg)  # type: ignore[attr-defined]
        elif t in (ast.MatchAs, ast.MatchStar) and n.name is not None:  # type: ignore[attr-defined]
            found.add(n.name)  # type: ignore[attr-defined]
        elif t is ast.MatchMapping and n.rest is not None:  # type: ignore[attr-defined]
            found.add(n.rest)  # type: ignore[attr-defined]
        elif t is ast.MatchClass:
            found.update(n.kwd_attrs)  # type: ignore[attr-defined]
    return found
