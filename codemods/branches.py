"""Reading the branches of an ``if`` as lists of plain assignments."""

from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst

from .context import FileContext
from .provenance import Kind
from .tree import walk


class BranchError(Exception):
    """The branch does something other than assign values to names."""


@dataclass
class Assignment:
    name: str
    value: cst.BaseExpression
    augmented: cst.BaseAugOp | None = None
    comments: list[cst.EmptyLine] = field(default_factory=list)

    @property
    def op_text(self) -> str:
        assert self.augmented is not None
        return self.augmented.__class__.__name__ and _AUG_TEXT[type(self.augmented)]

    def value_expr(self) -> cst.BaseExpression:
        """The value the name holds after this statement."""
        if self.augmented is None:
            return self.value
        binary = _AUG_TO_BINARY[type(self.augmented)]()
        right = self.value
        if isinstance(right, (cst.BinaryOperation, cst.BooleanOperation, cst.Comparison, cst.IfExp)) and not right.lpar:
            right = right.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
        return cst.BinaryOperation(left=cst.Name(self.name), operator=binary, right=right)


_AUG_TO_BINARY = {
    cst.AddAssign: cst.Add, cst.SubtractAssign: cst.Subtract, cst.MultiplyAssign: cst.Multiply,
    cst.DivideAssign: cst.Divide, cst.FloorDivideAssign: cst.FloorDivide, cst.ModuloAssign: cst.Modulo,
    cst.PowerAssign: cst.Power, cst.MatrixMultiplyAssign: cst.MatrixMultiply,
    cst.BitAndAssign: cst.BitAnd, cst.BitOrAssign: cst.BitOr, cst.BitXorAssign: cst.BitXor,
    cst.LeftShiftAssign: cst.LeftShift, cst.RightShiftAssign: cst.RightShift,
}
_AUG_TEXT = {
    cst.AddAssign: "+", cst.SubtractAssign: "-", cst.MultiplyAssign: "*", cst.DivideAssign: "/",
    cst.FloorDivideAssign: "//", cst.ModuloAssign: "%", cst.PowerAssign: "**",
    cst.MatrixMultiplyAssign: "@", cst.BitAndAssign: "&", cst.BitOrAssign: "|", cst.BitXorAssign: "^",
    cst.LeftShiftAssign: "<<", cst.RightShiftAssign: ">>",
}


def _describe(statement: cst.CSTNode) -> str:
    names = {
        cst.Return: "returns", cst.Raise: "raises", cst.Break: "breaks out of the loop",
        cst.Continue: "continues the loop", cst.Expr: "calls a function for its effect",
        cst.Assert: "asserts", cst.Del: "deletes a name", cst.Global: "declares a global",
        cst.Nonlocal: "declares a nonlocal", cst.Import: "imports", cst.ImportFrom: "imports",
    }
    for kind, text in names.items():
        if isinstance(statement, kind):
            return f"a branch {text}"
    if isinstance(statement, (cst.If, cst.For, cst.While, cst.With, cst.Try)):
        return "a branch holds a nested block"
    if isinstance(statement, (cst.FunctionDef, cst.ClassDef)):
        return "a branch defines a function or class"
    return f"a branch holds `{type(statement).__name__}`"


def branch_assignments(ctx: FileContext, block: cst.BaseSuite) -> list[Assignment]:
    """The branch as plain ``name = value`` / ``name op= value`` statements."""
    statements: list[cst.CSTNode] = []
    comments: list[list[cst.EmptyLine]] = []
    if isinstance(block, cst.SimpleStatementSuite):
        statements.extend(block.body)
        comments.extend([] for _ in block.body)
    else:
        for line in block.body:  # type: ignore[union-attr]
            if not isinstance(line, cst.SimpleStatementLine):
                raise BranchError(_describe(line))
            for i, small in enumerate(line.body):
                statements.append(small)
                comments.append([l for l in line.leading_lines if l.comment is not None] if i == 0 else [])
            if line.trailing_whitespace.comment is not None:
                comments[-1] = comments[-1] + [cst.EmptyLine(comment=line.trailing_whitespace.comment)]
    found: list[Assignment] = []
    for statement, notes in zip(statements, comments):
        if isinstance(statement, cst.Pass):
            continue
        if isinstance(statement, cst.Assign):
            if len(statement.targets) != 1 or not isinstance(statement.targets[0].target, cst.Name):
                raise BranchError("a branch assigns to something other than a single name")
            found.append(Assignment(statement.targets[0].target.value, statement.value, None, notes))
        elif isinstance(statement, cst.AnnAssign) and statement.value is not None and isinstance(statement.target, cst.Name):
            found.append(Assignment(statement.target.value, statement.value, None, notes))
        elif isinstance(statement, cst.AugAssign):
            if not isinstance(statement.target, cst.Name):
                raise BranchError("a branch updates an attribute or item")
            found.append(Assignment(statement.target.value, statement.value, statement.operator, notes))
        else:
            raise BranchError(_describe(statement))
    if not found:
        raise BranchError("a branch assigns nothing")
    return found


def defined_before(ctx: FileContext, node: cst.CSTNode, name: str) -> bool:
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
        statement = next((a for a in [binding, *ctx.ancestors(binding)] if isinstance(a, cst.BaseStatement)), None)
        if statement is None:
            continue
        if statement in ancestors:  # a loop whose body holds ``node``
            return True
        if ctx.parents.get(statement) in ancestors and ctx.position(statement)[0] < line:
            return True
    return False


def branch_local(ctx: FileContext, node: cst.If, name: str) -> bool:
    """Is ``name`` a temporary: every read of it follows an assignment in the same block?

    Then its value never outlives the block that computed it (``clamp_value``
    in transformers' fp16 clamp blocks), and computing it when the branch is
    not taken changes nothing that is read later.
    """
    scope = ctx.provenance.scope_of(node)
    if scope.lookup(name) is not scope:
        return False
    for other in ctx.nodes(cst.Name):
        if other.value != name or ctx.provenance.scope_of(other) is not scope:
            continue
        parent = ctx.parents.get(other)
        if isinstance(parent, cst.AssignTarget) or (isinstance(parent, cst.Attribute) and parent.attr is other):
            continue
        if isinstance(parent, cst.Arg) and parent.keyword is other:
            continue
        if not _assigned_earlier_in_block(ctx, other, name):
            return False
    return True


def _assigned_earlier_in_block(ctx: FileContext, use: cst.CSTNode, name: str) -> bool:
    statement = next((a for a in ctx.ancestors(use) if isinstance(a, cst.SimpleStatementLine)), None)
    block = ctx.parents.get(statement) if statement is not None else None
    if not isinstance(block, cst.IndentedBlock):
        return False
    for sibling in block.body:
        if sibling is statement:
            return False
        if isinstance(sibling, cst.SimpleStatementLine):
            for small in sibling.body:
                if isinstance(small, cst.Assign) and any(
                    isinstance(t.target, cst.Name) and t.target.value == name for t in small.targets
                ):
                    return True
    return False


def value_kind(ctx: FileContext, anchor: cst.CSTNode, assignment: Assignment | None, name: str) -> Kind:
    """The kind of what ``name`` holds after ``assignment`` (or before ``anchor``, when None)."""
    before = ctx.provenance.name_kind_at(name, anchor)
    if assignment is None:
        return before
    value = ctx.kind(assignment.value)
    if assignment.augmented is not None:
        return Kind.TENSOR if Kind.TENSOR in (before, value) else value
    return value


def not_selectable(ctx: FileContext, anchor: cst.CSTNode, assignment: Assignment | None, name: str) -> str:
    """Why ``torch.where`` cannot select this value at all (``None``, a tuple, a string)."""
    if assignment is not None and isinstance(assignment.value, cst.Name) and assignment.value.value in ("True", "False"):
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
    return ""


def _is_none(node: cst.CSTNode | None) -> bool:
    return isinstance(node, cst.Name) and node.value == "None"


def _none_before(ctx: FileContext, anchor: cst.CSTNode, name: str) -> str:
    """Why ``name`` may still hold ``None`` when ``anchor`` runs (the value an
    ``if`` without ``else`` keeps): the last assignment before it is ``None``, or
    an earlier ``None`` (a parameter's default too) is overwritten only in a
    block that may not run."""
    scope = ctx.provenance.scope_of(anchor)
    if scope.lookup(name) is not scope:
        return ""
    start = ctx.positions.offset(anchor)
    ancestors = set(ctx.ancestors(anchor))
    earlier: list[tuple[int, bool, bool]] = []  # (offset, is None, dominates anchor)
    for how, binding in scope.bindings.get(name, []):
        if how == "param" and isinstance(binding, cst.Param):
            earlier.append((-1, _is_none(binding.default), True))
            continue
        if binding is None or binding not in ctx.positions or ctx.positions.offset(binding) >= start:
            continue
        statement = next((a for a in [binding, *ctx.ancestors(binding)] if isinstance(a, cst.BaseStatement)), None)
        dominates = statement is not None and ctx.parents.get(statement) in ancestors
        earlier.append((ctx.positions.offset(binding), how == "value" and _is_none(binding), dominates))
    earlier.sort()
    # Walk back from the anchor: a None reached before a dominating assignment may be what is kept.
    for _, is_none, dominates in reversed(earlier):
        if is_none:
            return f"`{name}` may still be `None` here, and `torch.where` cannot select `None`"
        if dominates:
            return ""
    return ""


def kept_value_problem(ctx: FileContext, anchor: cst.CSTNode, assignment: Assignment | None, name: str) -> str:
    """Why a selected value might not be a tensor (then it becomes one)."""
    kind = value_kind(ctx, anchor, assignment, name)
    if kind is Kind.TENSOR:
        return ""
    text = ctx.code(assignment.value) if assignment is not None and assignment.augmented is None else name
    if kind is Kind.NUMBER:
        return f"`{text}` is a Python number: it becomes a 0-dim tensor (float32 by default)"
    return f"`{text}` is not known to be a tensor: if it is a Python number it becomes a 0-dim tensor"
