"""Reading the branches of an ``if`` as lists of plain assignments."""

from __future__ import annotations

import ast
import bisect
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from .. import gen
from ..model.context import COMPOUND, FUNCTIONS, FileContext
from ..model.provenance import Kind, Scope
from ..model.syncs import SELF_READING_KINDS, SyncSite
from ..model.tree import nodes_within, walk


class BranchError(Exception):
    """The branch does something other than assign values to names."""


@dataclass
class Assignment:
    name: str
    value: ast.expr
    augmented: ast.operator | None = None  # ``y += v``: the binary operator (``ast.Add``)
    comments: list[str] = field(default_factory=list)  # comment lines that go with it (``"# note"``)
    # The value is written in parentheses of its own (``y += (a + b)``).
    parenthesized: bool = False

    @property
    def op_text(self) -> str:
        assert self.augmented is not None
        return _OP_TEXT[type(self.augmented)]

    def value_expr(self) -> gen.Expr_:
        """The value the name holds after this statement: the file's own expression, or for
        ``y op= v`` new code ``y op v``."""
        if self.augmented is None:
            return self.value
        right: gen.Expr_ = self.value
        if type(right) in (ast.BinOp, ast.BoolOp, ast.Compare, ast.IfExp) and not self.parenthesized:
            right = gen.Paren(right)
        return gen.BinaryOperation(gen.Name(self.name), self.op_text, right)


_OP_TEXT = {
    ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//", ast.Mod: "%",
    ast.Pow: "**", ast.MatMult: "@", ast.BitAnd: "&", ast.BitOr: "|", ast.BitXor: "^",
    ast.LShift: "<<", ast.RShift: ">>",
}


def _describe(statement: ast.AST) -> str:
    names = {
        ast.Return: "returns", ast.Raise: "raises", ast.Break: "breaks out of the loop",
        ast.Continue: "continues the loop", ast.Expr: "calls a function for its effect",
        ast.Assert: "asserts", ast.Delete: "deletes a name", ast.Global: "declares a global",
        ast.Nonlocal: "declares a nonlocal", ast.Import: "imports", ast.ImportFrom: "imports",
    }
    for kind, text in names.items():
        if isinstance(statement, kind):
            return f"a branch {text}"
    if isinstance(statement, (ast.If, ast.For, ast.AsyncFor, ast.While, ast.With, ast.AsyncWith, ast.Try)):
        return "a branch holds a nested block"
    if isinstance(statement, (*FUNCTIONS, ast.ClassDef)):
        return "a branch defines a function or class"
    return f"a branch holds `{type(statement).__name__}`"


def in_one_line_suite(ctx: FileContext, statements: Sequence[ast.stmt]) -> bool:
    """Do ``statements`` (a compound statement's block) stand on the line of its header
    (``if c: x = 1``)?"""
    if not statements:
        return False
    first = ctx.positions[statements[0]].start
    return ctx.line(first.line)[:first.column].rstrip().endswith(":")


def branch_assignments(ctx: FileContext, block: Sequence[ast.stmt]) -> list[Assignment]:
    """The branch (the statements of an ``if``'s body or ``else``) as plain ``name = value`` /
    ``name op= value`` statements."""
    statements: list[ast.stmt] = list(block)
    comments: list[list[str]] = []
    if in_one_line_suite(ctx, statements):
        comments.extend([] for _ in statements)
    else:
        for statement in statements:
            if isinstance(statement, COMPOUND):
                raise BranchError(_describe(statement))
        previous_end = 0
        for statement in statements:
            where = ctx.positions[statement]
            # The first statement of its line takes the comment lines above it; the last,
            # the comment at the end of the line.
            comments.append(ctx.leading_comments(statement) if where.start.line != previous_end else [])
            previous_end = where.end.line
            trailing = ctx.trailing_comment(statement)
            if trailing is not None:
                comments[-1] = comments[-1] + [trailing]
    found: list[Assignment] = []
    for statement, notes in zip(statements, comments):
        t = type(statement)
        if t is ast.Pass:
            continue
        if t is ast.Assign:
            if len(statement.targets) != 1 or type(statement.targets[0]) is not ast.Name:  # type: ignore[attr-defined]
                raise BranchError("a branch assigns to something other than a single name")
            value = statement.value  # type: ignore[attr-defined]
            found.append(Assignment(statement.targets[0].id, value, None, notes, ctx.parenthesized(value)))  # type: ignore[attr-defined]
        elif t is ast.AnnAssign and statement.value is not None and type(statement.target) is ast.Name:  # type: ignore[attr-defined]
            value = statement.value  # type: ignore[attr-defined]
            found.append(Assignment(statement.target.id, value, None, notes, ctx.parenthesized(value)))  # type: ignore[attr-defined]
        elif t is ast.AugAssign:
            if type(statement.target) is not ast.Name:  # type: ignore[attr-defined]
                raise BranchError("a branch updates an attribute or item")
            value = statement.value  # type: ignore[attr-defined]
            found.append(Assignment(statement.target.id, value, statement.op, notes,  # type: ignore[attr-defined]
                                    ctx.parenthesized(value)))
        else:
            raise BranchError(_describe(statement))
    if not found:
        raise BranchError("a branch assigns nothing")
    return found


def _statement_of(ctx: FileContext, node: ast.AST) -> ast.AST | None:
    """The statement ``node`` is part of, as a block holds it: a small statement written on
    its compound statement's header line (``if c: x = 1``) is part of that compound
    statement (the one-line block is no statement of its own). Kept per node: each fix
    asks it of the bindings of its names, the same ones for many fixes."""
    return ctx.memo(("statement of", id(node)), lambda: _find_statement_of(ctx, node))


def _find_statement_of(ctx: FileContext, node: ast.AST) -> ast.AST | None:
    statement = ctx.enclosing_statement(node)
    if statement is None or isinstance(statement, COMPOUND):
        return statement
    parent = ctx.parents.get(statement)
    if parent is None or type(parent) is ast.Module:
        return statement
    holder = getattr(parent, ctx.field_of(statement) or "body", None)
    if isinstance(holder, list) and in_one_line_suite(ctx, holder):
        return ctx.enclosing_statement(parent)  # an ``except`` / ``case`` clause: its ``try`` / ``match``
    return statement


def _block_holds(ctx: FileContext, statement: ast.AST, node: ast.AST) -> bool:
    """Does the block (statement list) holding ``statement`` hold ``node`` or one of its
    ancestors (is the block around ``node``)?"""
    parent = ctx.parents.get(statement)
    if parent is None or not ctx.below(node, parent) or node is parent:
        return False
    child = node
    for ancestor in ctx.ancestors(node):
        if ancestor is parent:
            return ctx.field_of(child) == ctx.field_of(statement)
        child = ancestor
    return False


def defined_before(ctx: FileContext, node: ast.AST, name: str) -> bool:
    """Does ``name`` certainly hold a value when ``node`` runs?

    True for parameters, names of an enclosing scope, and assignments that
    dominate ``node``: earlier statements of a block that contains it (not an
    assignment inside an earlier ``if``, which may not have run).
    """
    scope = ctx.provenance.scope_of(node)
    owner = scope.lookup(name)
    if owner is None:
        return False
    if owner is not scope:
        return True
    line = ctx.position(node)[0]
    ancestors = set(ctx.ancestors(node))
    for how, binding in owner.bindings[name]:
        if how == "param" or binding is None:
            return True
        statement = _statement_of(ctx, binding)
        if statement is None:
            continue
        if statement in ancestors:  # a loop whose body holds ``node``
            return True
        if _block_holds(ctx, statement, node) and ctx.position(statement)[0] < line:
            return True
    return False


def branch_local(ctx: FileContext, node: ast.If, name: str) -> bool:
    """Is ``name`` a temporary: every read of it follows an assignment in the same block?

    Then its value never outlives the block that computed it (``clamp_value``
    in transformers' fp16 clamp blocks), and computing it when the branch is
    not taken changes nothing that is read later.
    """
    scope = ctx.provenance.scope_of(node)
    if scope.lookup(name) is not scope:
        return False
    for other in ctx.names(name, scope.node):  # a name of ``scope`` lies below its node
        if ctx.provenance.scope_of(other) is not scope:
            continue
        parent = ctx.parents.get(other)
        if type(parent) is ast.Assign and any(t is other for t in parent.targets):  # type: ignore[attr-defined]
            continue
        if not _assigned_earlier_in_block(ctx, other, name):
            return False
    # Names ``ast`` keeps as strings: a function or class defined, a name imported, caught,
    # matched or declared global in this scope.
    for holder in nodes_within(scope.node, *_NAMING):
        if (name in _names_of(holder) and ctx.provenance.scope_of(holder) is scope
                and not _assigned_earlier_in_block(ctx, holder, name)):
            return False
    return True


_NAMING = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Import, ast.ImportFrom, ast.Global,
           ast.Nonlocal, ast.ExceptHandler, ast.MatchAs, ast.MatchStar, ast.MatchMapping)


def _names_of(node: ast.AST) -> set[str]:
    """The names a statement or clause spells as strings in ``ast``."""
    t = type(node)
    if t in (ast.Import, ast.ImportFrom):
        found = {part for alias in node.names for part in alias.name.split(".")}  # type: ignore[attr-defined]
        found.update(alias.asname for alias in node.names if alias.asname)  # type: ignore[attr-defined]
        if t is ast.ImportFrom and node.module:  # type: ignore[attr-defined]
            found.update(node.module.split("."))  # type: ignore[attr-defined]
        return found
    if t in (ast.Global, ast.Nonlocal):
        return set(node.names)  # type: ignore[attr-defined]
    if t is ast.MatchMapping:
        return {node.rest} if node.rest else set()  # type: ignore[attr-defined]
    value = getattr(node, "name", None)
    return {value} if isinstance(value, str) else set()


def _assigned_earlier_in_block(ctx: FileContext, use: ast.AST, name: str) -> bool:
    """Is ``name`` assigned (``name = ...``) by an earlier line of the indented block whose
    line holds ``use``?"""
    statement = ctx.enclosing_statement(use)
    if statement is None or isinstance(statement, COMPOUND):
        return False
    parent = ctx.parents.get(statement)
    if parent is None or type(parent) is ast.Module:
        return False
    block = getattr(parent, ctx.field_of(statement) or "body", None)
    if not isinstance(block, list) or in_one_line_suite(ctx, block):
        return False
    index = next(i for i, s in enumerate(block) if s is statement)
    # The earlier lines: not the statements before it on its own line (``x = 1; y = x``).
    while index > 0 and ctx.positions[block[index - 1]].end.line == ctx.positions[block[index]].start.line:
        index -= 1
    for sibling in block[:index]:
        if type(sibling) is ast.Assign and any(
            type(t) is ast.Name and t.id == name for t in sibling.targets  # type: ignore[attr-defined]
        ):
            return True
    return False


def value_kind(ctx: FileContext, anchor: ast.AST, assignment: Assignment | None, name: str) -> Kind:
    """The kind of what ``name`` holds after ``assignment`` (or before ``anchor``, when None)."""
    before = ctx.provenance.name_kind_at(name, anchor)
    if assignment is None:
        return before
    value = ctx.kind(assignment.value)
    if assignment.augmented is not None:
        return Kind.TENSOR if Kind.TENSOR in (before, value) else value
    return value


def not_selectable(ctx: FileContext, anchor: ast.AST, assignment: Assignment | None, name: str) -> str:
    """Why ``torch.where`` cannot select this value at all (``None``, a tuple, a string)."""
    if assignment is not None and type(assignment.value) is ast.Constant and isinstance(assignment.value.value, bool):
        # A flag (``to_drop = True``) feeds Python control flow later: a tensor
        # there would be read back all the same.
        return f"`{assignment.name} = {assignment.value.value}` sets a Python flag"
    if assignment is None:
        none = _none_before(ctx, anchor, name)
        if none:
            return none
    kind = value_kind(ctx, anchor, assignment, name)
    if kind in (Kind.OTHER, Kind.MODULE, Kind.NUMPY):
        text = ctx.code(assignment.value) if assignment is not None else name
        return f"`{text}` is neither a tensor nor a number"
    if (
        kind is Kind.UNKNOWN and assignment is not None and assignment.augmented is None
        and (type(assignment.value) in (ast.Name, ast.Attribute) or _is_none(assignment.value))
    ):
        # ``mode = Mode.TRAIN``: an ``Enum`` member, a constant of another module, a string...
        return (f"`{ctx.code(assignment.value)}` is not known to be a tensor or a number "
                "(`torch.where` cannot select an `Enum` member, a string or a flag)")
    return ""


def _is_none(node: ast.AST | None) -> bool:
    return type(node) is ast.Constant and node.value is None  # type: ignore[attr-defined]


def _binding_is_none(ctx: FileContext, how: str, binding: ast.AST) -> bool:
    """Is the value a binding gives ``None`` (a parameter's: its default)?"""
    if how == "param":
        return _is_none(_param_default(ctx, binding))  # type: ignore[arg-type]
    return how == "value" and _is_none(binding)


def _param_default(ctx: FileContext, param: ast.arg) -> ast.expr | None:
    """The default value of a parameter (``ast`` keeps defaults on the ``arguments``)."""
    arguments = ctx.parents.get(param)
    if type(arguments) is not ast.arguments:
        return None
    positional = [*arguments.posonlyargs, *arguments.args]
    for i, arg in enumerate(positional):
        if arg is param:
            k = i - (len(positional) - len(arguments.defaults))
            return arguments.defaults[k] if k >= 0 else None
    for arg, default in zip(arguments.kwonlyargs, arguments.kw_defaults):
        if arg is param:
            return default
    return None


def _none_before(ctx: FileContext, anchor: ast.AST, name: str) -> str:
    """Why ``name`` may still hold ``None`` when ``anchor`` runs (the value an
    ``if`` without ``else`` keeps): the last assignment before it is ``None``, or
    an earlier ``None`` (a parameter's default too) is overwritten only in a
    block that may not run."""
    scope = ctx.provenance.scope_of(anchor)
    if scope.lookup(name) is not scope:
        return ""
    start = ctx.positions.offset(anchor)
    # Walk back from the anchor through the bindings before it, by place (a parameter first);
    # whether each is ``None`` and dominates the anchor is worked out only for those it reaches.
    offsets, groups, some_none = ctx.memo(("bindings-by-place", id(scope), name),
                                          lambda: _bindings_by_place(ctx, scope, name))
    if not some_none:
        return ""
    for index in range(bisect.bisect_left(offsets, start) - 1, -1, -1):
        found: list[tuple[bool, bool]] = []  # (is None, dominates anchor)
        for how, binding in groups[index]:
            if how == "param":
                found.append((_binding_is_none(ctx, how, binding), True))
                continue
            statement = _statement_of(ctx, binding)
            found.append((_binding_is_none(ctx, how, binding),
                          statement is not None and _block_holds(ctx, statement, anchor)))
        for is_none, dominates in sorted(found, reverse=True):
            if is_none:
                return f"`{name}` may still be `None` here, and `torch.where` cannot select `None`"
            if dominates:
                return ""
    return ""


def _bindings_by_place(
    ctx: FileContext, scope: Scope, name: str,
) -> tuple[list[int], list[list[tuple[str, ast.AST]]], bool]:
    """The bindings of ``name`` in ``scope`` grouped by where they start (from
    :meth:`FileContext.bindings_by_place`), and whether one of them is ``None``: each
    ``if`` that keeps the name finds the ones before it by bisection, or none at all."""
    places, bindings, _ = ctx.bindings_by_place(scope, name)
    offsets: list[int] = []
    groups: list[list[tuple[str, ast.AST]]] = []
    for place, binding in zip(places, bindings):
        if not offsets or offsets[-1] != place:
            offsets.append(place)
            groups.append([])
        groups[-1].append(binding)  # type: ignore[arg-type]
    some_none = any(_binding_is_none(ctx, how, binding) for how, binding in bindings)  # type: ignore[arg-type]
    return offsets, groups, some_none


def kept_value_problem(ctx: FileContext, anchor: ast.AST, assignment: Assignment | None, name: str) -> str:
    """Why a selected value might not be a tensor (then it becomes one)."""
    kind = value_kind(ctx, anchor, assignment, name)
    if kind is Kind.TENSOR:
        return ""
    text = ctx.code(assignment.value) if assignment is not None and assignment.augmented is None else name
    if kind is Kind.NUMBER:
        return f"`{text}` is a Python number: it becomes a 0-dim tensor (float32 by default)"
    return f"`{text}` is not known to be a tensor: if it is a Python number it becomes a 0-dim tensor"


# -- parameters that take part in one branch only --------------------------------------------------

# torch.nn modules without parameters: calling them in one branch only changes no gradient.
PARAMETERLESS_MODULES = frozenset(
    {
        "ReLU", "ReLU6", "GELU", "SiLU", "Tanh", "Sigmoid", "Softmax", "LogSoftmax", "Softmin", "Identity",
        "Flatten", "Unflatten", "LeakyReLU", "ELU", "SELU", "CELU", "Mish", "Softplus", "Softsign",
        "Hardtanh", "Hardswish", "Hardsigmoid", "Hardshrink", "Softshrink", "Tanhshrink", "LogSigmoid", "GLU",
        "Threshold", "MaxPool1d", "MaxPool2d", "MaxPool3d", "AvgPool1d", "AvgPool2d", "AvgPool3d",
        "AdaptiveAvgPool1d", "AdaptiveAvgPool2d", "AdaptiveAvgPool3d", "AdaptiveMaxPool1d",
        "AdaptiveMaxPool2d", "AdaptiveMaxPool3d", "Upsample", "PixelShuffle", "PixelUnshuffle",
        "Dropout", "Dropout1d", "Dropout2d", "Dropout3d", "AlphaDropout",
    }
)


def branch_read_problem(ctx: FileContext, sites: Sequence[SyncSite], values: Sequence[gen.Expr_ | None]) -> str:
    """Why a selection of ``values`` (the branches' values) by ``torch.where`` keeps a read:
    a value that reads a tensor itself (``m.mean().item() if m.any() else 0.0``) is still
    read, and on every pass, where the original read it only when its branch ran."""
    for value in values:
        if not isinstance(value, ast.AST):
            continue
        for site in ctx.sites_below(sites, value):
            if site.kind in SELF_READING_KINDS:
                return (f"a branch reads `{ctx.code(site.node)}` itself; `torch.where` would still read it, "
                        "and on every pass where the original read it only when its branch was taken")
    return ""


def branch_only_parameters(ctx: FileContext, anchor: ast.AST, taken: gen.Expr_, other: gen.Expr_) -> str:
    """Why selecting between ``taken`` and ``other`` with ``torch.where`` changes training:
    a module or parameter that only one of them depends on (followed through the
    local names they read) gets a zero gradient instead of ``None`` when the other
    value is selected, and AdamW (weight decay, moments) or SGD with momentum then
    update it where the original left it alone. "" when both depend on the same ones.
    (``taken`` and ``other``: expressions of the file, or new code built from them.)
    """
    from ..model.grad_mode import gradients_off

    if gradients_off(ctx, anchor):
        return ""  # no gradient at all: none turns from `None` into zero
    first, second = _parameter_sources(ctx, anchor, taken), _parameter_sources(ctx, anchor, other)
    only = sorted(first ^ second)
    if not only:
        return ""
    names = ", ".join(f"`{name}`" for name in only[:3])
    return (
        f"{names} take{'s' if len(only) == 1 else ''} part in only one branch: when the other is selected "
        "its parameters get zero gradients instead of `None`, and AdamW (weight decay, moments) or SGD "
        "momentum then update them where the original left them alone"
    )


def _parameter_sources(ctx: FileContext, anchor: ast.AST, expr: gen.Expr_) -> set[str]:
    found: set[str] = set()
    _collect_sources(ctx, anchor, expr, found, set())
    return found


def _file_parts(expr: gen.Expr_) -> Iterator[ast.AST | str]:
    """What new code is made of, for the analysis: the file's nodes it prints, and the
    names it spells itself (the kept ``y`` of ``y + z``)."""
    stack: list[gen.Expr_] = [expr]
    while stack:
        item = stack.pop()
        if isinstance(item, ast.AST):
            yield item
        elif isinstance(item, (gen.Source, gen.Splice)):
            yield item.node
            if isinstance(item, gen.Splice):
                stack.extend(item.replacements.values())
        elif isinstance(item, gen.Raw):
            if item.text.isidentifier():
                yield item.text
        elif isinstance(item, str):
            if item.isidentifier():
                yield item
        elif isinstance(item, gen.Node):
            stack.extend(reversed(item.children()))


def _collect_sources(ctx: FileContext, anchor: ast.AST | None, expr: gen.Expr_, found: set[str],
                     seen: set[tuple[int, str]]) -> None:
    """(Names the fix writes, such as the kept ``x`` of ``torch.where(c, x * 2, x)``,
    are not in the file: they are looked up from ``anchor``.) What only gives a
    value no gradient flows through (``torch.zeros_like(out)``, ``out.detach()``,
    ``out.shape``, ``out > 0``) takes no part."""
    if not isinstance(expr, ast.AST):
        for part in _file_parts(expr):
            if isinstance(part, str):
                _collect_name(ctx, anchor, None, part, found, seen)
            else:
                _collect_sources(ctx, anchor, part, found, seen)
        return
    for node in _gradient_reads(ctx, expr):
        if type(node) is ast.Attribute:
            if _may_hold_parameters(ctx, node):
                found.add(f"self.{node.attr}")  # type: ignore[attr-defined]
        elif node.id != "self":  # type: ignore[attr-defined]
            _collect_name(ctx, anchor, node, node.id, found, seen)  # type: ignore[attr-defined]


def _gradient_reads(ctx: FileContext, expr: ast.AST) -> Iterator[ast.AST]:
    """The reads of ``expr`` a gradient may come through: the attributes of ``self`` it reads
    (``self.scale``, not its ``self`` again) and the other names, other than those below
    something that passes no gradient on (see :func:`_gradient_cut`)."""
    cut = _gradient_cut(ctx, expr)
    for node in walk(expr):
        if id(node) in cut:
            continue
        t = type(node)
        if t is ast.Attribute and type(node.value) is ast.Name and node.value.id == "self":  # type: ignore[attr-defined]
            cut.add(id(node.value))
            yield node
        elif t is ast.Name:
            yield node


def _collect_name(ctx: FileContext, anchor: ast.AST | None, node: ast.Name | None, name: str, found: set[str],
                  seen: set[tuple[int, str]]) -> None:
    """A read of ``name`` (``node``, or None for a name the fix writes)."""
    where = node if node is not None and node in ctx.parents else anchor
    kind = ctx.provenance.name_kind_at(name, where)
    if kind is Kind.MODULE:
        if node is None or _may_hold_parameters(ctx, node):
            found.add(name)
        return
    scope = ctx.provenance.scope_of(where).lookup(name)
    if scope is None or (id(scope), name) in seen or not isinstance(scope.node, (*FUNCTIONS, ast.Module)):
        return
    if anchor is not None and not _all_sources(ctx, scope, name):
        return  # no binding of it takes a gradient from anything: neither do those the anchor sees
    seen.add((id(scope), name))
    for how, value in _bindings_seen_by(ctx, anchor, node, scope.bindings.get(name, [])):
        if how in ("value", "unpack", "iter") and isinstance(value, ast.expr):
            _collect_sources(ctx, anchor, value, found, seen)
        elif how == "aug" and type(value) is ast.AugAssign:
            _collect_sources(ctx, anchor, value.value, found, seen)  # type: ignore[attr-defined]


def _all_sources(ctx: FileContext, scope, name: str) -> frozenset[str]:
    """What the values of every binding of ``name`` in ``scope`` take a gradient from, read
    from anywhere: a superset of what one read sees (it sees some of those bindings). Made
    once per name, so that the fixes of a function that rebinds ``x`` a thousand times do
    not each follow all of its bindings."""
    def build() -> frozenset[str]:
        found: set[str] = set()
        seen = {(id(scope), name)}
        for how, value in scope.bindings.get(name, []):
            if how in ("value", "unpack", "iter") and isinstance(value, ast.expr):
                _collect_sources(ctx, None, value, found, seen)
            elif how == "aug" and type(value) is ast.AugAssign:
                _collect_sources(ctx, None, value.value, found, seen)  # type: ignore[attr-defined]
        return frozenset(found)

    return ctx.memo(("gradient sources", id(scope), name), build)


# What gives a value that no gradient flows through, whatever its tensor inputs.
_NO_GRADIENT_FUNCTIONS = frozenset(
    {"zeros_like", "ones_like", "empty_like", "full_like", "rand_like", "randn_like", "randint_like"}
)
_NO_GRADIENT_METHODS = frozenset(
    {"detach", "new_zeros", "new_ones", "new_empty", "new_full", "new_tensor", "size", "dim", "numel",
     "argmax", "argmin", "argsort", "long", "int", "bool", "isnan", "isinf", "isfinite", "eq", "ne", "lt",
     "le", "gt", "ge"}
)
_NO_GRADIENT_ATTRIBUTES = frozenset({"shape", "dtype", "device", "ndim", "is_cuda", "requires_grad", "layout"})


def _gradient_cut(ctx: FileContext, expr: ast.AST) -> set[int]:
    """The nodes below ``expr`` whose values reach its result only through something
    that passes no gradient on."""
    cut: set[int] = set()
    for node in walk(expr):
        if id(node) in cut:
            continue
        hidden: list[ast.AST] = []
        t = type(node)
        if t is ast.Compare:
            hidden = [node]
        elif t is ast.Attribute and node.attr in _NO_GRADIENT_ATTRIBUTES:  # type: ignore[attr-defined]
            hidden = [node.value]  # type: ignore[attr-defined]
        elif t is ast.Call:
            func = node.func  # type: ignore[attr-defined]
            qualified = ctx.provenance.imports.qualify(func) or ""
            if qualified.startswith("torch.") and qualified.rsplit(".", 1)[-1] in _NO_GRADIENT_FUNCTIONS:
                hidden = [*node.args, *node.keywords]  # type: ignore[attr-defined]
            elif type(func) is ast.Attribute and func.attr in _NO_GRADIENT_METHODS:
                hidden = [func.value, *node.args, *node.keywords]  # type: ignore[attr-defined]
        for root in hidden:
            cut.update(id(n) for n in walk(root))
    return cut


def visibly_without_gradient(ctx: FileContext, expr: ast.expr, depth: int = 0) -> bool:
    """Can ``expr``'s value be seen to take no gradient: every tensor it reads passes through
    something that passes none on (``(pred == y).sum()``, ``x.detach()``, ``x.argmax()``), or
    is a name of its function whose every binding is such a value (followed a few levels)?
    False where anything else is read (a parameter, a module's output, a name bound elsewhere)."""
    for node in _gradient_reads(ctx, expr):
        if type(node) is ast.Attribute:
            return False  # ``self.scale``: a parameter, maybe
        if ctx.kind(node) in (Kind.NUMBER, Kind.OTHER, Kind.MODULE):  # type: ignore[arg-type]
            continue
        scope = ctx.provenance.scope_of(node).lookup(node.id)  # type: ignore[attr-defined]
        bindings = scope.bindings.get(node.id, []) if scope is not None else []  # type: ignore[attr-defined]
        if depth >= 3 or not bindings or scope is None or scope.node is ctx.module:
            return False
        for how, value in bindings:
            if how != "value" or not isinstance(value, ast.expr) or not visibly_without_gradient(ctx, value, depth + 1):
                return False
    return True


def _bindings_seen_by(ctx: FileContext, anchor: ast.AST | None, read: ast.AST | None, bindings):
    """The bindings a read may see: those outside ``anchor`` (the ``if`` being
    rewritten), and for a read inside one of its branches, the earlier ones of
    that branch (``y = y + x`` after ``x = x * self.scale``). (``read`` None: a name
    the fix writes, outside the file; ``anchor`` None: every binding, as read from
    anywhere.)"""
    if anchor is None:
        yield from bindings
        return

    def block_in_anchor(node: ast.AST | None) -> str | None:
        """The field of ``anchor`` (``"body"``, ``"orelse"``, ``"test"``) ``node`` lies below."""
        if node is None or node not in ctx.parents:
            return None
        for ancestor in ctx.ancestors(node):
            if ctx.parents.get(ancestor) is anchor:
                return ctx.field_of(ancestor)
        return None

    read_block = block_in_anchor(read)
    for how, value in bindings:
        block = block_in_anchor(value)
        if block is None:
            yield how, value
        elif block == read_block and ctx.positions[value].start.line < ctx.positions[read].start.line:  # type: ignore[index]
            yield how, value


def _may_hold_parameters(ctx: FileContext, func: ast.AST) -> bool:
    kind = ctx.kind(func) if func in ctx.parents else Kind.UNKNOWN
    if kind in (Kind.NUMBER, Kind.OTHER, Kind.NUMPY):
        return False
    if type(func) is ast.Attribute and type(func.value) is ast.Name and func.value.id == "self":  # type: ignore[attr-defined]
        values = ctx.provenance.assigned_values(func)
        if values and all(_is_buffer(v) for v in values):
            return False  # a buffer: no gradient
        classes = set()
        for value in values:
            if type(value) is not ast.Call:
                classes.add("")
                continue
            classes.add((ctx.provenance.imports.qualify(value.func) or "").rsplit(".", 1)[-1])  # type: ignore[attr-defined]
        if values and classes <= PARAMETERLESS_MODULES:
            return False
    return True


def _is_buffer(value: object) -> bool:
    """The mark :mod:`provenance` stores for ``self.register_buffer("name", ...)``."""
    if type(value) is ast.Name:
        return value.id == "__buffer__"  # type: ignore[attr-defined]
    return getattr(value, "text", None) == "__buffer__"


# -- augmented assignments that may become plain ones -----------------------------------------------

# Calls whose result is a new tensor, never a view of (or the same object as) an input.
FRESH_TORCH = frozenset(
    {
        "zeros", "ones", "full", "empty", "zeros_like", "ones_like", "full_like", "empty_like", "tensor",
        "arange", "linspace", "rand", "randn", "rand_like", "randn_like", "clone", "exp", "tanh", "sigmoid",
        "abs", "sqrt", "matmul", "mm", "bmm", "softmax", "log_softmax", "cat", "stack",
    }
)
# Tensor methods that return a new tensor (reading the tensor creates no alias).
FRESH_METHODS = frozenset(
    {
        "clone", "sum", "mean", "max", "min", "amax", "amin", "norm", "abs", "pow", "exp", "log", "sqrt",
        "tanh", "sigmoid", "relu", "item", "isnan", "isinf", "isfinite", "any", "all", "std", "var",
        "prod", "square", "neg", "softmax", "log_softmax", "matmul", "eq", "ne", "lt", "le", "gt", "ge",
    }
)
_FRESH_MODULES = ("torch.nn.Linear", "torch.nn.Conv1d", "torch.nn.Conv2d", "torch.nn.Conv3d", "torch.nn.Bilinear")
_NEW_TENSOR_OPERATORS = (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.MatMult, ast.Pow)
_LOOPS = (ast.For, ast.AsyncFor, ast.While)


def unaliased_fresh_local(ctx: FileContext, anchor: ast.AST, name: str) -> bool:
    """Is ``name`` a local tensor that only this function can see, so that updating
    it in place (``h += 1.0``) and rebinding it to a new tensor (``h = h + 1.0``)
    cannot differ? Every binding creates a new tensor (arithmetic, a factory,
    ``.clone()``, ``nn.Linear``/convolutions), and every read of it creates none
    that shares its memory (no ``view``, no ``g = h``, not passed to a function,
    stored or returned) before ``anchor`` runs."""
    scope = ctx.provenance.scope_of(anchor)
    if scope.lookup(name) is not scope or not isinstance(scope.node, FUNCTIONS):
        return False
    for how, value in scope.bindings.get(name, []):
        if how == "aug":
            continue
        if how != "value" or not isinstance(value, ast.expr) or not _creates_new_tensor(ctx, value):
            return False
    start = ctx.positions[anchor].start.line
    for read in _reads(ctx, scope, name):
        if read is None:
            return False
        if any(a is anchor for a in ctx.ancestors(read)):
            continue  # the update itself, and the condition
        later = ctx.positions[read].start.line > start
        if later and not _shares_loop(ctx, read, anchor):
            continue  # what reads it afterwards sees the final value either way
        if not _fresh_read(ctx, read):
            return False
    return True


def new_tensor_problems(ctx: FileContext, anchor: ast.AST, name: str, values: Sequence[ast.expr | None]) -> list[str]:
    """Why binding ``name`` to the new tensor ``torch.where`` makes, where the original kept
    a tensor it had, changes the program: a later write or ``return`` of it (see
    :func:`shared_tensor_problem`), or a later print of it whole (:func:`printed_problem`)."""
    return [p for p in (shared_tensor_problem(ctx, anchor, name, values), printed_problem(ctx, anchor, name)) if p]


def shared_tensor_problem(ctx: FileContext, anchor: ast.AST, name: str, values: Sequence[ast.expr | None]) -> str:
    """Why binding ``name`` to the new tensor ``torch.where`` makes changes a later write:
    ``name`` is written in place after ``anchor`` (``y[0] = 0``, ``y.add_(1)``), and a value
    the original bound it to may be a tensor other code holds too (the caller's input, a
    parameter, ``x.float()`` of a float32 ``x``, which is ``x``): the write reached that
    tensor, and now reaches only the new one. ``values``: what the original bound ``name``
    to on each path, None where it kept (or updated in place) the tensor it held."""
    from ..model.aliasing import identity_read_after, returned_after, written_in_place_after

    write = written_in_place_after(ctx, anchor, name)
    if write is None:
        returned = returned_after(ctx, anchor, name)
        identity = identity_read_after(ctx, anchor, name) if returned is None else None
        if returned is None and identity is None:
            return ""
        outside = next((v for v in values if _may_come_from_outside(ctx, anchor, name, v)), False)
        if outside is False:
            return ""
        held = f"the tensor `{name}` held before" if outside is None else f"`{ctx.code(outside)}`"
        if identity is not None:
            return (f"`{name}` is read as an object later (`{ctx.code(identity).splitlines()[0]}`): where the "
                    f"original kept {held}, which may be the caller's or the module's own tensor (a leaf with its "
                    "`.grad`), `torch.where` makes a new one")
        return (f"`{name}` is returned: where the original returned {held}, which may be the caller's or the "
                "module's own tensor (an input, a parameter: its `.grad`, its `requires_grad` under `no_grad`, "
                "the caller's in-place updates), `torch.where` returns a new one")
    for value in values:
        fresh = (unaliased_fresh_local(ctx, anchor, name) if value is None
                 else _creates_new_tensor(ctx, value))
        if not fresh:
            held = (f"the tensor `{name}` held before, which other code may hold too" if value is None
                    else f"`{ctx.code(value)}`, which may be a tensor other code holds too")
            return (f"`{name}` is written in place later (`{ctx.code(write).splitlines()[0]}`): where the "
                    f"original left it {held}, that write reached it; `torch.where` makes a new tensor")
    return ""


def printed_problem(ctx: FileContext, anchor: ast.AST, name: str) -> str:
    """Why the text the program prints changes: the selected tensor is printed whole (or
    its ``grad_fn`` read) afterwards, and where gradients are on it now shows
    ``grad_fn=<WhereBackward0>`` where the original showed the operation that made it."""
    from ..model.grad_mode import gradients_off
    from ..model.output_calls import printed_whole_after

    if gradients_off(ctx, anchor):
        return ""
    place = printed_whole_after(ctx, anchor, name)
    if place is None:
        return ""
    return (f"`{name}` is printed whole later (`{ctx.code(place).splitlines()[0]}`): a tensor that requires grad "
            "prints the operation that made it, `grad_fn=<WhereBackward0>` after the fix")


def _may_come_from_outside(ctx: FileContext, anchor: ast.AST, name: str, value: ast.expr | None,
                           depth: int = 0) -> bool:
    """May the object ``name`` holds on a path (``value``, or None: the one it kept) be a
    tensor the module, the program or the caller holds (``self.weight``, a global, the
    function's own parameter: the caller's input), or a view or the very object of one
    (``w = self.weight.float()``)?"""
    from ..model.reaching import parameter_may_reach

    scope = ctx.provenance.scope_of(anchor)
    if value is not None:
        return _held_outside(ctx, anchor, value, depth)
    if scope.lookup(name) is not scope:
        return scope.lookup(name) is not None  # a global or a closure's name (not a builtin)
    # The binding a read of the name in ``anchor`` certainly sees, where there is one
    # (``x = self.body(x)`` before ``if x.abs().max().item() > 0.5:``): only it can be kept.
    read = next((n for n in ast.walk(anchor) if type(n) is ast.Name and n.id == name  # type: ignore[attr-defined]
                 and type(n.ctx) is ast.Load), None)  # type: ignore[attr-defined]
    seen = ctx.provenance.reaching(read) if read is not None else None
    if seen is not None and not ctx.below(seen, anchor):
        return type(seen) is ast.arg or _held_outside(ctx, anchor, seen, depth)
    for how, binding in scope.bindings.get(name, []):
        if how == "aug" or (how == "value" and ctx.below(binding, anchor)):
            continue  # an update, or the value the branch itself selects
        if how == "param" and read is not None and not parameter_may_reach(read, scope.node, ctx.parents):
            continue  # rebound before ``anchor`` on every path (``x = self.norm(x)``)
        if how not in ("value", "unpack") or _held_outside(ctx, anchor, binding, depth):
            return True  # the caller's input, a loop's target (an element other code holds), an attribute, an alias
    return False


def _held_outside(ctx: FileContext, anchor: ast.AST, expr: ast.AST | None, depth: int) -> bool:
    """Is ``expr`` (what a name was bound to) an object held outside the function: an
    attribute, an element, a name that may come from outside, or a view of one of them?
    (A function of its own, not one nested in its caller: a nested function that calls
    itself is a reference cycle that keeps the file's whole analysis alive until the
    cyclic collector runs.)"""
    from ..model.aliasing import SHARING_METHODS

    t = type(expr)
    if t in (ast.Attribute, ast.Subscript, ast.Starred):
        return True
    if t in (ast.Tuple, ast.List):  # ``a, b = b, a``
        return any(_held_outside(ctx, anchor, e, depth) for e in expr.elts)  # type: ignore[union-attr]
    if t is ast.Name:
        return depth < 3 and _may_come_from_outside(ctx, anchor, expr.id, None, depth + 1)  # type: ignore[union-attr]
    if t is ast.Call and type(expr.func) is ast.Attribute and expr.func.attr in SHARING_METHODS:  # type: ignore[union-attr]
        return _held_outside(ctx, anchor, expr.func.value, depth)  # type: ignore[union-attr]
    return False


def _reads(ctx: FileContext, scope, name: str):
    from ..model.name_reads import reads_of

    return reads_of(ctx, scope, name)


def _shares_loop(ctx: FileContext, a: ast.AST, b: ast.AST) -> bool:
    loops = {id(n) for n in ctx.ancestors(b) if isinstance(n, _LOOPS)}
    return any(id(n) in loops for n in ctx.ancestors(a) if isinstance(n, _LOOPS))


def _creates_new_tensor(ctx: FileContext, value: ast.expr) -> bool:
    t = type(value)
    if t is ast.BinOp:
        return isinstance(value.op, _NEW_TENSOR_OPERATORS) and Kind.TENSOR in (  # type: ignore[attr-defined]
            ctx.kind(value.left), ctx.kind(value.right))  # type: ignore[attr-defined]
    if t is ast.UnaryOp and type(value.op) is ast.USub:  # type: ignore[attr-defined]
        return ctx.kind(value.operand) is Kind.TENSOR  # type: ignore[attr-defined]
    if t is ast.Call:
        func = value.func  # type: ignore[attr-defined]
        qualified = ctx.provenance.imports.qualify(func) or ""
        if qualified.startswith("torch.") and qualified.rsplit(".", 1)[-1] in FRESH_TORCH:
            return True
        if type(func) is ast.Attribute and func.attr in FRESH_METHODS and ctx.kind(func.value) is Kind.TENSOR:
            return func.attr not in ("item",)
        from ..model.provenance import module_class_of

        module = module_class_of(ctx.provenance, func)
        return module in _FRESH_MODULES
    return False


def _fresh_read(ctx: FileContext, read: ast.Name) -> bool:
    """Does this read of the tensor leave no second reference to its memory?"""
    parent = ctx.parents.get(read)
    t = type(parent)
    if t is ast.BinOp or t is ast.Compare:
        return True
    if t is ast.UnaryOp and type(parent.op) is ast.USub:  # type: ignore[union-attr]
        return True
    if t is ast.Attribute and parent.value is read:  # type: ignore[union-attr]
        call = ctx.parents.get(parent)
        return type(call) is ast.Call and call.func is parent and parent.attr in FRESH_METHODS  # type: ignore[union-attr]
    # An argument of a call (``f(x)``, ``f(*x)``, ``f(k=x)``, ``f(**x)``).
    call = None
    if t is ast.Call and read is not parent.func:  # type: ignore[union-attr]
        call = parent
    elif t is ast.keyword or t is ast.Starred:
        call = ctx.parents.get(parent)
    if type(call) is ast.Call:
        qualified = ctx.provenance.imports.qualify(call.func) or ""  # type: ignore[union-attr]
        return qualified.startswith("torch.") and qualified.rsplit(".", 1)[-1] in FRESH_TORCH
    return False
