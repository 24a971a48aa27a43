"""Where a value goes: the names it is stored in, what reads them, and what a
consumer needs from it (a Python number for ``range``, a size, ``int()``, JSON, a
``-> float`` return, Python control flow; or a tensor will do).

Asked by the rules that replace a read by a 0-dim tensor: a rewrite must hold
wherever the value flows (:func:`value_flow`, :func:`name_uses`, :func:`binding_of`),
and a report says why a value may not be a tensor (:func:`uncertain_tensor`).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from .context import COMPOUND, FUNCTIONS, FileContext
from .name_reads import reads_of
from .provenance import Kind, Scope
from .scalar_shapes import (
    arg_keyword,
    arg_star,
    arg_value,
    call_arguments,
    subscript_elements,
)
from .tree import walk

# Functions whose gradient is infinite or NaN somewhere in their domain: in the
# branch that was not taken, 0 * inf = NaN reaches the gradient.


UNKNOWN_VALUE_NOTE = (
    "no fix: fixitem cannot tell that the value read is a tensor (it could be a numpy value). "
    "Annotate where it comes from (`x: torch.Tensor`, `model: nn.Module`) to let fixitem rewrite it"
)


# -- following a value through the names it is stored in ------------------------------------

_LOOPS = (ast.For, ast.AsyncFor, ast.While)


def binding_of(ctx: FileContext, top: ast.expr) -> ast.Name | None:
    """The name ``top`` is assigned to, in a function, when every later read of
    the name reads this value: its only binding, or the last one of a name
    rebound from its own value (``num_boxes = torch.clamp(num_boxes, min=1).item()``)
    outside any loop, all other bindings coming before it."""
    assign = ctx.parents.get(top)
    if type(assign) is not ast.Assign or assign.value is not top or len(assign.targets) != 1:  # type: ignore[union-attr]
        return None
    target = assign.targets[0]  # type: ignore[union-attr]
    if type(target) is not ast.Name:
        return None
    scope = ctx.provenance.scope_of(target)
    if not isinstance(scope.node, FUNCTIONS):
        return None
    bindings = scope.bindings.get(target.id, [])
    if not any(how == "value" and node is top for how, node in bindings):
        return None
    if len(bindings) == 1:
        return target
    for ancestor in ctx.ancestors(assign):  # type: ignore[arg-type]
        if ancestor is scope.node:
            break
        if isinstance(ancestor, _LOOPS):
            return None  # a later iteration would see the value before this line
    start = ctx.positions[assign].start  # type: ignore[index]
    for how, node in bindings:
        if node is top or how == "param":
            continue
        if node is None:
            return None
        end = ctx.positions[node].end
        if (end.line, end.column) > (start.line, start.column):
            return None
    return target


def _in_block_of(ctx: FileContext, statement: ast.AST, node: ast.AST) -> bool:
    """Does ``node`` lie in the statements of the block that holds ``statement`` (libcst:
    below the ``IndentedBlock``)?"""
    from .tree import number_of, subtree_stop

    parent = ctx.parents.get(statement)
    field_name = ctx.field_of(statement)
    block = getattr(parent, field_name, None) if parent is not None and field_name else None
    number = number_of(node)
    if not isinstance(block, list) or not block or number is None:
        return False
    first, last = number_of(block[0]), number_of(block[-1])
    if first is None or last is None:
        return False
    return first <= number < subtree_stop(last)


def name_uses(ctx: FileContext, target: ast.Name) -> list[ast.Name] | None:
    """Every read of the value bound at ``target``, or None when one may escape analysis."""
    name = target.id
    scope = ctx.provenance.scope_of(target)
    function = scope.node
    assert isinstance(function, FUNCTIONS)
    assign = ctx.parents[target]
    rebound = len(scope.bindings[name]) > 1
    assign_end = ctx.positions[assign].end
    for node in ctx.nodes(ast.Global, ast.Nonlocal):
        if name in node.names:  # type: ignore[attr-defined]
            return None
    uses: list[ast.Name] = []
    for node in walk(function):  # a read of a local of ``function``, or a call of locals() in it, lies in it
        if type(node) is not ast.Name:
            continue
        if node is target:
            continue
        parent = ctx.parents.get(node)
        if node.id in ("locals", "vars", "eval", "exec") and type(parent) is ast.Call and parent.func is node:  # type: ignore[attr-defined,union-attr]
            if ctx.enclosing_function(node) is function:
                return None  # the name may be read by string
            continue
        if node.id != name:  # type: ignore[attr-defined]
            continue
        owner = ctx.provenance.scope_of(node).lookup(name)
        if owner is not scope:
            continue  # another variable of the same name
        if ctx.provenance.scope_of(node) is not scope:
            return None  # read from a nested function, lambda or comprehension
        if rebound:
            position = ctx.positions[node].start
            if (position.line, position.column) < (assign_end.line, assign_end.column):
                continue  # reads an earlier value of the name
            if not _in_block_of(ctx, assign, node):
                return None  # after the block: may read an earlier value
        uses.append(node)  # type: ignore[arg-type]
    return uses


@dataclass
class Flow:
    """Where a value that becomes a 0-dim tensor (it was a Python number) goes.

    ``blocking``: a use that needs a Python number (a size, an index, ``range``,
    a ``-> float`` return, Python control flow): no fix. ``unsafe``: a use whose
    effect fixitem cannot see (returned, stored, passed to a function). Neither:
    every use is tensor arithmetic, where a 0-dim tensor acts as the number did.
    """

    blocking: str = ""
    unsafe: str = ""
    roles: list[str] = field(default_factory=list)


# Calls that need a Python number (or format the value as text).
PYTHON_ONLY_CALLS = frozenset(
    {
        "range", "int", "round", "len", "isinstance", "str", "repr", "format", "bool", "list", "tuple",
        "enumerate", "slice", "print", "hex", "bin", "chr", "divmod", "sorted", "hash", "id",
    }
)


PYTHON_ONLY_MODULES = ("math.", "json.", "numpy.", "np.", "random.", "time.", "os.", "logging.")


# torch functions and tensor methods whose arguments after the first tensor are sizes.
SIZE_TAKING = frozenset(
    {
        "arange", "full", "zeros", "ones", "empty", "rand", "randn", "randint", "randperm", "linspace",
        "logspace", "eye", "tensor", "as_tensor", "view", "reshape", "expand", "repeat", "narrow", "topk",
        "split", "chunk", "new_zeros", "new_ones", "new_full", "new_empty", "full_like", "zeros_like",
        "ones_like", "empty_like", "unflatten", "tile", "roll", "kthvalue", "select", "multinomial",
        "pad", "interpolate", "flatten", "squeeze", "unsqueeze", "transpose", "permute", "movedim",
        "index_select", "diagonal", "triu", "tril", "histc", "bincount", "one_hot",
    }
)


_RETURN_NUMBER = ("int", "float", "bool", "complex", "str")


def value_flow(ctx: FileContext, expr: ast.expr, depth: int = 0) -> Flow:
    """Follow ``expr`` (about to become a 0-dim tensor) through arithmetic and
    the names it is stored in, to every use."""
    flow = Flow()
    _climb(ctx, expr, flow, depth)
    return flow


_DECIDING = (ast.Compare, ast.BoolOp, ast.If, ast.While, ast.Assert, ast.IfExp)


def _subscript_elements_tuple(ctx: FileContext, parent: ast.AST) -> bool:
    """Is ``parent`` the tuple of ``x[a, b]`` (libcst: no tuple, the subscript's elements)?"""
    if type(parent) is not ast.Tuple:
        return False
    holder = ctx.parents.get(parent)
    return (type(holder) is ast.Subscript and holder.slice is parent  # type: ignore[union-attr]
            and subscript_elements(ctx, holder)[0] is not parent)  # type: ignore[arg-type]


def _returns_number(returns: ast.expr | None) -> bool:
    """``-> float``, ``-> float | None``, ``-> Optional[int]``."""
    return returns is not None and any(type(n) is ast.Name and n.id in _RETURN_NUMBER for n in walk(returns))  # type: ignore[attr-defined]


def _climb(ctx: FileContext, node: ast.expr, flow: Flow, depth: int) -> None:
    if flow.blocking:
        return
    parent = ctx.parents.get(node)
    code = ctx.code(node)
    t = type(parent)
    if t is ast.BinOp:
        other = parent.right if parent.left is node else parent.left  # type: ignore[union-attr]
        if ctx.kind(other) is Kind.TENSOR and type(parent.op) not in (ast.MatMult, ast.Pow):  # type: ignore[union-attr]
            flow.roles.append("tensor arithmetic")
            return  # the result was a tensor already
        _climb(ctx, parent, flow, depth)  # type: ignore[arg-type]  # Python arithmetic: its result becomes a tensor too
        return
    if t is ast.UnaryOp:
        if type(parent.op) is ast.Not:  # type: ignore[union-attr]
            flow.blocking = f"`{ctx.code(parent)}` is Python control flow"  # type: ignore[arg-type]
            return
        _climb(ctx, parent, flow, depth)  # type: ignore[arg-type]
        return
    if t in _DECIDING:
        if t is ast.IfExp and parent.test is not node:  # type: ignore[union-attr]
            _climb(ctx, parent, flow, depth)  # type: ignore[arg-type]
            return
        flow.blocking = f"`{code}` then decides Python control flow (a comparison or truth test)"
        return
    if t is ast.Subscript or t is ast.Slice or _subscript_elements_tuple(ctx, parent):  # type: ignore[arg-type]
        flow.blocking = f"`{code}` is then used as an index or slice bound"
        return
    if t is ast.FormattedValue:
        flow.blocking = f"`{code}` is then formatted into text"
        return
    # An argument of a call (libcst's ``Arg``: the value itself, ``*value``'s ``Starred``, a ``keyword``).
    if t is ast.Call and node is not parent.func:  # type: ignore[union-attr]
        _call_flow(ctx, parent, node, code, flow, depth)  # type: ignore[arg-type]
        return
    if t is ast.Starred and type(ctx.parents.get(parent)) is ast.Call:  # type: ignore[arg-type]
        _call_flow(ctx, ctx.parents.get(parent), parent, code, flow, depth)  # type: ignore[arg-type]
        return
    if t is ast.keyword or (t is ast.ClassDef and node in parent.bases):  # type: ignore[union-attr]
        call = ctx.parents.get(parent) if t is ast.keyword else parent  # type: ignore[arg-type]
        if type(call) is ast.Call:
            _call_flow(ctx, call, parent, code, flow, depth)  # type: ignore[arg-type]
        else:
            flow.unsafe = flow.unsafe or f"`{code}` is passed on"
        return
    if t is ast.Return:
        function = ctx.enclosing_function(parent)  # type: ignore[arg-type]
        returns = function.returns if function is not None else None
        if returns is not None:
            annotation = ctx.code(returns)
            if _returns_number(returns):
                # ``-> float``, ``-> float | None``, ``-> Optional[int]``
                flow.blocking = f"the function returns `{code}` as `-> {annotation}`: it would return a 0-dim tensor"
                return
        flow.unsafe = flow.unsafe or f"`{code}` is returned: the caller gets a 0-dim tensor where it got a Python number"
        _caller_flow(ctx, function, flow, depth)
        return
    if (t is ast.Assign or t is ast.AnnAssign) and parent.value is node:  # type: ignore[union-attr]
        targets = parent.targets if t is ast.Assign else [parent.target]  # type: ignore[union-attr]
        if len(targets) == 1 and _self_attribute(targets[0]):
            _attribute_flow(ctx, targets[0], flow, depth)  # type: ignore[arg-type]
            return
        if len(targets) != 1 or type(targets[0]) is not ast.Name:
            flow.unsafe = flow.unsafe or f"`{code}` is stored where fixitem cannot follow it"
            return
        _name_flow(ctx, targets[0], node, flow, depth)
        return
    if t is ast.AugAssign and parent.value is node:  # type: ignore[union-attr]
        if type(parent.target) is ast.Name and ctx.kind(parent.target) is Kind.TENSOR:  # type: ignore[union-attr]
            flow.roles.append("tensor arithmetic")
            return
        flow.unsafe = flow.unsafe or f"`{ctx.code(parent.target)}` accumulates `{code}`: it becomes a tensor"  # type: ignore[union-attr]
        return
    if t in (ast.List, ast.Tuple, ast.Set, ast.Dict):
        container = parent
        unpacked = _unpacked_into(ctx, node, container)
        if unpacked is not None:  # ``k, m = min(...), 2``
            if _self_attribute(unpacked):
                _attribute_flow(ctx, unpacked, flow, depth)  # type: ignore[arg-type]
            elif type(unpacked) is ast.Name:
                _name_flow(ctx, unpacked, node, flow, depth)  # type: ignore[arg-type]
            else:
                flow.unsafe = flow.unsafe or f"`{code}` is stored where fixitem cannot follow it"
            return
        # (libcst held a dict's keys and values in a ``DictElement``: never returned as such.)
        returned = ctx.parents.get(container) if t is not ast.Dict else None  # type: ignore[arg-type]
        if type(returned) is ast.Return:
            function = ctx.enclosing_function(returned)  # type: ignore[arg-type]
            returns = function.returns if function is not None else None
            if returns is not None and _returns_number(returns):
                flow.blocking = f"the function returns `{code}` in `-> {ctx.code(returns)}`: it would return a 0-dim tensor"
                return
        flow.unsafe = flow.unsafe or f"`{code}` is stored in a container"
        return
    if t is ast.Expr:
        return  # the value is discarded
    used = _code_of_holder(ctx, parent, node) if parent is not None else code
    flow.unsafe = flow.unsafe or f"`{code}` is used as `{used}`"


def _code_of_holder(ctx: FileContext, parent: ast.AST, node: ast.AST) -> str:
    """The text libcst gave the node holding ``node``: a comprehension's ``if`` test
    (``CompIf``: `` if k``, with the space before it), a compound statement with the
    blank and comment lines above it and its lines unindented, else the node's own text."""
    if type(parent) is ast.comprehension:
        tests = parent.ifs  # type: ignore[attr-defined]
        for i, test in enumerate(tests):
            if test is node:
                before = tests[i - 1] if i else parent.iter  # type: ignore[attr-defined]
                return ctx.source[ctx.span(before)[1]:ctx.span(node)[1]]
    if not isinstance(parent, COMPOUND):
        return ctx.code(parent)
    from .tree import children_of

    indent = ctx.indent(parent)
    start, end = ctx.positions[parent].start, ctx.positions[parent].end
    lines = [ctx.line(start.line)[start.column:]]
    lines += [ctx.line(n).removeprefix(indent) for n in range(start.line + 1, end.line + 1)]
    # The blank and comment lines after the last statement, up to the last comment indented
    # as that statement's block, were the block's (its ``footer``).
    last: ast.AST = parent
    while not (isinstance(last, ast.stmt) and last is not parent):
        kids = children_of(last)
        if not kids:
            break
        last = kids[-1]
    block_indent = ctx.indent(last) if isinstance(last, ast.stmt) else indent + " "
    total = len(ctx.tree_index.text.line_starts) if ctx.tree_index is not None else end.line
    footer: list[str] = []
    kept = 0
    for number in range(end.line + 1, total + 1):
        text = ctx.line(number)
        if text.strip() and not text.lstrip().startswith("#"):
            break
        footer.append(text)
        if text.lstrip().startswith("#") and text.startswith(block_indent):
            kept = len(footer)
    lines += [text.removeprefix(indent) for text in footer[:kept]]
    leading = [ctx.line(n).removeprefix(indent) for n in ctx.leading_lines(parent)]
    return "".join(f"{text}\n" for text in (*leading, *lines))


def _caller_flow(ctx: FileContext, function: ast.AST | None, flow: Flow, depth: int) -> None:
    """What the calls of ``function`` in this file do with what it returns (callers
    elsewhere are not seen: the return stays unsafe)."""
    if function is None or depth > 4:
        return
    name = function.name  # type: ignore[attr-defined]
    cls = ctx.parents.get(function)  # ``class C:`` holds the ``def``
    method = type(cls) is ast.ClassDef
    for call in ctx.nodes(ast.Call):
        func = call.func  # type: ignore[attr-defined]
        if method:
            if not (_self_attribute(func) and func.attr == name and ctx.provenance.enclosing_class(call) is cls):
                continue
        elif not (type(func) is ast.Name and func.id == name
                  and ctx.provenance.scope_of(call).lookup(name) is ctx.provenance.scope_of(function)):
            continue
        _climb(ctx, call, flow, depth + 1)  # type: ignore[arg-type]
        if flow.blocking:
            flow.blocking = f"`{ctx.code(call)}` returns it: {flow.blocking}"
            return


def _unpacked_into(ctx: FileContext, element: ast.AST, container: ast.AST | None) -> ast.expr | None:
    """The target ``element`` of a tuple or list is assigned to in ``a, b = x, y``."""
    assign = ctx.parents.get(container) if container is not None else None
    if not (type(container) in (ast.Tuple, ast.List) and type(assign) is ast.Assign
            and assign.value is container and len(assign.targets) == 1):  # type: ignore[union-attr]
        return None
    target = assign.targets[0]  # type: ignore[union-attr]
    if type(target) not in (ast.Tuple, ast.List) or len(target.elts) != len(container.elts):  # type: ignore[union-attr,attr-defined]
        return None
    if any(type(e) is ast.Starred for e in (*target.elts, *container.elts)):  # type: ignore[union-attr,attr-defined]
        return None
    index = next(i for i, e in enumerate(container.elts) if e is element)  # type: ignore[union-attr]
    return target.elts[index]  # type: ignore[attr-defined]


def _self_attribute(target: object) -> bool:
    return type(target) is ast.Attribute and type(target.value) is ast.Name and target.value.id == "self"  # type: ignore[attr-defined]


def _attribute_flow(ctx: FileContext, target: ast.Attribute, flow: Flow, depth: int) -> None:
    """``self.k = value``: the reads of ``self.k`` in the methods of the class; other
    code may read the attribute too."""
    cls = ctx.provenance.enclosing_class(target)
    code = ctx.code(target)
    flow.unsafe = flow.unsafe or f"`{code}` is stored on the object: other code may read it"
    if cls is None or depth > 4:
        return
    for node in ctx.nodes(ast.Attribute):
        if node is target or not _self_attribute(node) or node.attr != target.attr:  # type: ignore[attr-defined]
            continue
        parent = ctx.parents.get(node)
        if type(parent) is ast.Assign and any(t is node for t in parent.targets):  # type: ignore[union-attr]
            continue
        if type(parent) is ast.AugAssign and parent.target is node:  # type: ignore[union-attr]
            continue
        if ctx.provenance.enclosing_class(node) is not cls:
            continue
        _climb(ctx, node, flow, depth + 1)  # type: ignore[arg-type]
        if flow.blocking:
            return


def _call_flow(ctx: FileContext, call: ast.Call, arg: ast.AST, code: str, flow: Flow, depth: int = 0) -> None:
    """(``arg``: the argument as :func:`~codemods.scalar_shapes.call_arguments` lists it.)"""
    func = call.func
    qualified = ctx.provenance.imports.qualify(func) or ""
    name = func.id if type(func) is ast.Name else ""
    if name in PYTHON_ONLY_CALLS or qualified.startswith(PYTHON_ONLY_MODULES) or name == "float":
        flow.blocking = f"`{code}` is passed to `{ctx.code(func)}`, which needs a Python number"
        return
    short = ""
    receiver_tensor = False
    if qualified.startswith("torch."):
        short = qualified.rsplit(".", 1)[-1]
    elif type(func) is ast.Attribute:
        short = func.attr
        receiver_tensor = ctx.kind(func.value) is Kind.TENSOR
    if short in SIZE_TAKING and (qualified.startswith("torch.") or receiver_tensor):
        flow.blocking = f"`{code}` is passed to `{ctx.code(func)}` as a size or count, which needs a Python number"
        return
    if qualified == "torch.where" or (qualified in ("torch.clamp", "torch.clip") and arg is not call_arguments(call)[0]):
        flow.roles.append(f"an operand of `{qualified}`")
        return
    if receiver_tensor and short in ("masked_fill", "masked_fill_", "fill_", "clamp", "clamp_", "clamp_min", "clamp_max", "where"):
        flow.roles.append(f"an operand of `.{short}`")
        return
    inner = _parameter_flow(ctx, call, arg, depth)
    if inner.blocking:
        flow.blocking = f"`{code}` is passed to `{ctx.code(func)}`, where {inner.blocking}"
        return
    if inner.roles and not inner.unsafe:
        flow.unsafe = flow.unsafe or (f"`{code}` is passed to `{ctx.code(func)}`, which uses it in tensor arithmetic: "
                                      "a 0-dim tensor there may promote differently than the Python number did")
        return
    flow.unsafe = flow.unsafe or (f"`{code}` is passed to `{ctx.code(func)}`, which may need a Python number "
                                  "(where it does, it reads the tensor back, or raises)")


def _parameters(arguments: ast.arguments) -> list[ast.arg]:
    """Every parameter: positional-only, positional, keyword-only, ``*args``, ``**kwargs``."""
    found = [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs]
    if arguments.vararg is not None:
        found.append(arguments.vararg)
    if arguments.kwarg is not None:
        found.append(arguments.kwarg)
    return found


def _parameter_flow(ctx: FileContext, call: ast.Call, arg: ast.AST, depth: int) -> Flow:
    """Where a function of this file (``helper(n)``, ``self.helper(n)``) takes the
    argument ``arg``: the reads of its parameter."""
    flow = Flow()
    if depth > 4 or arg_star(arg):
        return flow
    func = call.func
    method = _self_attribute(func)
    if method:
        cls = ctx.provenance.enclosing_class(call)
        name = func.attr  # type: ignore[attr-defined]
    elif type(func) is ast.Name:
        cls, name = None, func.id
    else:
        return flow
    owner = ctx.provenance.scope_of(call).lookup(name) if not method else None
    for function in ctx.nodes(ast.FunctionDef, ast.AsyncFunctionDef):
        if function.name != name:  # type: ignore[attr-defined]
            continue
        parent = ctx.parents.get(function)
        if method and parent is not cls:
            continue
        if not method and (ctx.provenance.scope_of(function) is not owner or type(parent) is ast.ClassDef):
            continue
        arguments: ast.arguments = function.args  # type: ignore[attr-defined]
        params = [*arguments.posonlyargs, *arguments.args]
        if method:
            params = params[1:]
        keyword = arg_keyword(arg)
        if keyword is not None:
            chosen = next((p for p in _parameters(arguments) if p.arg == keyword), None)
        else:
            index = [a for a in call_arguments(call) if arg_keyword(a) is None].index(arg)
            chosen = params[index] if index < len(params) else None
        scope = ctx.provenance.scopes.get(function)
        if chosen is None or scope is None:
            return flow
        for read in reads_of(ctx, scope, chosen.arg, nested=True):
            if read is not None:
                _climb(ctx, read, flow, depth + 1)
                if flow.blocking:
                    return flow
        return flow
    return flow


def _name_flow(ctx: FileContext, target: ast.Name, value: ast.expr, flow: Flow, depth: int) -> None:
    """The reads of ``target`` that may see ``value``."""
    if depth > 4:
        flow.unsafe = flow.unsafe or f"`{target.id}` is passed through too many names to follow"
        return
    scope = ctx.provenance.scope_of(target)
    if not isinstance(scope.node, FUNCTIONS):
        flow.unsafe = flow.unsafe or f"`{target.id}` is a module-level name: other code may read it"
        return
    for read in reads_of(ctx, scope, target.id, nested=True):
        if read is None:
            flow.unsafe = flow.unsafe or f"`{target.id}` is read where fixitem cannot follow it"
            continue
        if ctx.positions[read].start.line < ctx.positions[target].start.line and not _in_loop_with(ctx, read, target):
            continue  # an earlier value of the name
        _nested_read(ctx, scope, read, target.id, flow)
        _climb(ctx, read, flow, depth + 1)
        if flow.blocking:
            return


def _in_loop_with(ctx: FileContext, a: ast.AST, b: ast.AST) -> bool:
    loops = {id(n) for n in ctx.ancestors(b) if isinstance(n, _LOOPS)}
    return any(id(n) in loops for n in ctx.ancestors(a) if isinstance(n, _LOOPS))


_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)


def _nested_read(ctx: FileContext, scope, read: ast.Name, name: str, flow: Flow) -> None:
    """A read from a nested function or lambda runs when that is called, with
    whatever the name holds then (a comprehension's runs in place: it is followed
    like any other read)."""
    inner = ctx.provenance.scope_of(read)
    while inner is not scope and inner is not None and isinstance(inner.node, _COMPREHENSIONS):
        inner = inner.parent
    if inner is not scope:
        flow.unsafe = flow.unsafe or f"`{name}` is read in a nested function: it then reads a 0-dim tensor"


# -- is the value certainly a tensor? -------------------------------------------------------------

# Calls whose result is a container, a module or a function, never a tensor itself
# (``torch.load`` gives what was saved: usually a dict).
NOT_TENSOR_RESULTS = frozenset(
    {"torch.load", "torch.jit.load", "torch.jit.script", "torch.jit.trace", "torch.compile", "torch.hub.load"}
)


NOT_TENSOR_METHODS = frozenset({"state_dict", "load_state_dict", "named_parameters", "parameters", "items"})


def uncertain_tensor(ctx: FileContext, expr: ast.expr) -> str:
    """Why the tensor read in ``expr`` is not certainly a tensor ("" when it is).

    A ``forward`` parameter taken for a tensor only because it is one
    (``forward(ctx, bias, tp_degree)`` of an ``autograd.Function`` passes
    Python numbers too) is certain only when ``.item()`` is called on it; a value
    derived from ``torch.load``, ``torch.jit`` or ``state_dict()`` is a
    container, not a tensor.
    """
    return _uncertain(ctx, expr, set())


PYTHON_NUMBER_METHODS = frozenset({"conjugate", "is_integer", "hex", "as_integer_ratio", "bit_length", "to_bytes", "bit_count"})


def _uncertain(ctx: FileContext, expr: ast.expr, seen: set[tuple[int, str]], proven: bool = False) -> str:
    """Follows what makes ``expr`` a tensor: a call to a torch function or a module
    gives a tensor whatever its arguments, a tensor method called on a value proves
    it is not a Python number (``proven``: only a container origin is left to
    find), arithmetic is a tensor when one tensor operand is."""
    t = type(expr)
    if t is ast.Call:
        func = expr.func  # type: ignore[attr-defined]
        qualified = ctx.provenance.imports.qualify(func) or ""
        if qualified in NOT_TENSOR_RESULTS or qualified.startswith("torch.jit."):
            return f"`{ctx.code(expr)}` returns what was saved or compiled, not a tensor"
        if type(func) is ast.Attribute:
            if func.attr in NOT_TENSOR_METHODS:
                return f"`{ctx.code(expr)}` is a container of tensors, not a tensor"
            method_proves = func.attr not in PYTHON_NUMBER_METHODS
            return _uncertain(ctx, func.value, seen, proven or method_proves)
        if type(func) is ast.Name and func.id in ("float", "int", "bool") and (expr.args or expr.keywords):  # type: ignore[attr-defined]
            return _uncertain(ctx, arg_value(call_arguments(expr)[0]), seen, proven)  # type: ignore[arg-type]
        return ""
    if t is ast.BinOp or t is ast.Compare:
        operands = [expr.left, expr.right] if t is ast.BinOp else [expr.left, *expr.comparators]  # type: ignore[attr-defined]
        reasons = [_uncertain(ctx, o, seen, proven) for o in operands if ctx.kind(o) is Kind.TENSOR]
        if reasons and all(reasons):
            return reasons[0]
        return ""
    if t is ast.UnaryOp:
        return _uncertain(ctx, expr.operand, seen, proven)  # type: ignore[attr-defined]
    if t is ast.Subscript:
        return _uncertain(ctx, expr.value, seen, proven)  # type: ignore[attr-defined]
    if t is ast.Attribute:
        if type(expr.value) is ast.Name and expr.value.id == "self":  # type: ignore[attr-defined]
            return ""
        return _uncertain(ctx, expr.value, seen, proven)  # type: ignore[attr-defined]
    if t is ast.Name:
        name = expr.id  # type: ignore[attr-defined]
        if not proven and ctx.provenance.presumed_tensor(expr):
            return (f"`{name}` is a tensor only if the caller passes one (a parameter of "
                    f"`{_function_name(ctx, expr)}` never used as a tensor)")
        scope = ctx.provenance.scope_of(expr).lookup(name)
        if scope is None or (id(scope), name) in seen:
            return ""
        return _bindings_uncertain(ctx, scope, name, seen, proven)
    return ""


# The answers of :func:`_bindings_uncertain` with nothing seen before, and the ones being made.
_FRESH = "uncertain-bindings"
_MAKING = object()


def _bindings_uncertain(ctx: FileContext, scope: Scope, name: str, seen: set[tuple[int, str]], proven: bool) -> str:
    """Why a value bound to ``name`` in ``scope`` may not be a tensor: the first reason a
    binding gives, following the names it reads except those in ``seen``.

    A name seen before answers "" (certain), so a larger ``seen`` only turns reasons into
    "", never the reverse (a `BinOp` needs a reason for each tensor operand; a name, one
    binding with a reason). The answer with nothing seen is kept per name: when it is "",
    every answer is. Without it, each read of a name rebound in every ``if`` of a long
    function followed all its bindings again, and the time grew with the square."""
    key = (_FRESH, id(scope), name, proven)
    fresh = ctx.kept(key)
    if seen:
        if fresh is None:
            fresh = _bindings_uncertain(ctx, scope, name, set(), proven)
        if fresh == "":
            return ""
    elif fresh is not None and fresh is not _MAKING:
        return fresh  # type: ignore[return-value]
    else:
        ctx.keep(key, _MAKING)
    reason = ""
    for how, value in scope.bindings.get(name, []):
        if how == "value" and isinstance(value, ast.expr) and ctx.kind(value) is not Kind.NUMBER:
            reason = _uncertain(ctx, value, seen | {(id(scope), name)}, proven)
            if reason:
                break
    if not seen:
        ctx.keep(key, reason)
    return reason


def _function_name(ctx: FileContext, node: ast.AST) -> str:
    function = ctx.enclosing_function(node)
    if function is None:
        return "the function"
    cls = ctx.provenance.enclosing_class(function)
    return f"{cls.name}.{function.name}" if cls is not None else function.name


def name_flow_after(ctx: FileContext, anchor: ast.AST, name: str) -> Flow:
    """Where the value ``anchor`` (an ``if`` that assigns ``name``) leaves in ``name`` goes:
    every later read, and every read in a loop around ``anchor``."""
    flow = Flow()
    scope = ctx.provenance.scope_of(anchor)
    if scope.lookup(name) is not scope or not isinstance(scope.node, (*FUNCTIONS, ast.Module)):
        flow.unsafe = f"`{name}` is not a local of the function: other code may read it"
        return flow
    if type(scope.node) is ast.Module:
        # A script's top level: its own later reads are followed (one may need a
        # number), but other modules may import the name.
        flow.unsafe = f"`{name}` is a module-level name: other modules may import it"
    end = ctx.positions[anchor].end.line
    for read in reads_of(ctx, scope, name, nested=True):
        if read is None:
            flow.unsafe = flow.unsafe or f"`{name}` is read where fixitem cannot follow it"
            continue
        if ctx.below(read, anchor):
            continue
        if ctx.positions[read].start.line <= end and not _in_loop_with(ctx, read, anchor):
            continue
        _nested_read(ctx, scope, read, name, flow)
        _climb(ctx, read, flow, 1)
        if flow.blocking:
            break
    return flow
