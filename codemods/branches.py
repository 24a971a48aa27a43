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
    for other in ctx.names(name, scope.node):  # a name of ``scope`` lies below its node
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
    if (
        kind is Kind.UNKNOWN and assignment is not None and assignment.augmented is None
        and isinstance(assignment.value, (cst.Name, cst.Attribute))
    ):
        # ``mode = Mode.TRAIN``: an ``Enum`` member, a constant of another module, a string...
        return (f"`{ctx.code(assignment.value)}` is not known to be a tensor or a number "
                "(`torch.where` cannot select an `Enum` member, a string or a flag)")
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


def branch_only_parameters(ctx: FileContext, anchor: cst.CSTNode, taken: cst.BaseExpression, other: cst.BaseExpression) -> str:
    """Why selecting between ``taken`` and ``other`` with ``torch.where`` changes training:
    a module or parameter that only one of them depends on (followed through the
    local names they read) gets a zero gradient instead of ``None`` when the other
    value is selected, and AdamW (weight decay, moments) or SGD with momentum then
    update it where the original left it alone. "" when both depend on the same ones.
    """
    from .grad_mode import gradients_off

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


def _parameter_sources(ctx: FileContext, anchor: cst.CSTNode, expr: cst.BaseExpression) -> set[str]:
    found: set[str] = set()
    _collect_sources(ctx, anchor, expr, found, set())
    return found


def _collect_sources(ctx: FileContext, anchor: cst.CSTNode, expr: cst.BaseExpression, found: set[str],
                     seen: set[tuple[int, str]]) -> None:
    """(Nodes the fix builds, such as the kept ``x`` of ``torch.where(c, x * 2, x)``,
    are not in the file: they are looked up from ``anchor``.) What only gives a
    value no gradient flows through (``torch.zeros_like(out)``, ``out.detach()``,
    ``out.shape``, ``out > 0``) takes no part."""
    cut = _gradient_cut(ctx, expr)
    for node in walk(expr):
        if id(node) in cut:
            continue
        if isinstance(node, cst.Attribute) and isinstance(node.value, cst.Name) and node.value.value == "self":
            if _may_hold_parameters(ctx, node):
                found.add(f"self.{node.attr.value}")
            continue
        if not isinstance(node, cst.Name) or node.value in ("self", "True", "False", "None"):
            continue
        parent = ctx.parents.get(node)
        if isinstance(parent, cst.Attribute) and parent.attr is node:
            continue
        where = node if node in ctx.parents else anchor
        kind = ctx.provenance.name_kind_at(node.value, where)
        if kind is Kind.MODULE:
            if _may_hold_parameters(ctx, node):
                found.add(node.value)
            continue
        scope = ctx.provenance.scope_of(where).lookup(node.value)
        if scope is None or (id(scope), node.value) in seen or not isinstance(scope.node, (cst.FunctionDef, cst.Module)):
            continue
        seen.add((id(scope), node.value))
        for how, value in _bindings_seen_by(ctx, anchor, node, scope.bindings.get(node.value, [])):
            if how in ("value", "unpack", "iter") and isinstance(value, cst.BaseExpression):
                _collect_sources(ctx, anchor, value, found, seen)
            elif how == "aug" and isinstance(value, cst.AugAssign):
                _collect_sources(ctx, anchor, value.value, found, seen)


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


def _gradient_cut(ctx: FileContext, expr: cst.BaseExpression) -> set[int]:
    """The nodes below ``expr`` whose values reach its result only through something
    that passes no gradient on."""
    cut: set[int] = set()
    for node in walk(expr):
        if id(node) in cut:
            continue
        hidden: list[cst.CSTNode] = []
        if isinstance(node, cst.Comparison):
            hidden = [node]
        elif isinstance(node, cst.Attribute) and node.attr.value in _NO_GRADIENT_ATTRIBUTES:
            hidden = [node.value]
        elif isinstance(node, cst.Call):
            func = node.func
            qualified = ctx.provenance.imports.qualify(func) or ""
            if qualified.startswith("torch.") and qualified.rsplit(".", 1)[-1] in _NO_GRADIENT_FUNCTIONS:
                hidden = list(node.args)
            elif isinstance(func, cst.Attribute) and func.attr.value in _NO_GRADIENT_METHODS:
                hidden = [func.value, *node.args]
        for root in hidden:
            cut.update(id(n) for n in walk(root))
    return cut


def _bindings_seen_by(ctx: FileContext, anchor: cst.CSTNode, read: cst.CSTNode, bindings):
    """The bindings a read may see: those outside ``anchor`` (the ``if`` being
    rewritten), and for a read inside one of its branches, the earlier ones of
    that branch (``y = y + x`` after ``x = x * self.scale``)."""
    def block_in_anchor(node: cst.CSTNode | None):
        if node is None or node not in ctx.parents:
            return None
        for ancestor in ctx.ancestors(node):
            parent = ctx.parents.get(ancestor)
            if parent is anchor or (isinstance(parent, cst.Else) and ctx.parents.get(parent) is anchor):
                return ancestor
        return None

    read_block = block_in_anchor(read)
    for how, value in bindings:
        block = block_in_anchor(value)
        if block is None:
            yield how, value
        elif block is read_block and ctx.positions[value].start.line < ctx.positions[read].start.line:
            yield how, value


def _may_hold_parameters(ctx: FileContext, func: cst.BaseExpression) -> bool:
    kind = ctx.kind(func) if func in ctx.parents else Kind.UNKNOWN
    if kind in (Kind.NUMBER, Kind.OTHER, Kind.NUMPY):
        return False
    if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == "self":
        values = ctx.provenance.assigned_values(func)
        if values and all(isinstance(v, cst.Name) and v.value == "__buffer__" for v in values):
            return False  # a buffer: no gradient
        classes = set()
        for value in values:
            if not isinstance(value, cst.Call):
                classes.add("")
                continue
            classes.add((ctx.provenance.imports.qualify(value.func) or "").rsplit(".", 1)[-1])
        if values and classes <= PARAMETERLESS_MODULES:
            return False
    return True


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
_NEW_TENSOR_OPERATORS = (cst.Add, cst.Subtract, cst.Multiply, cst.Divide, cst.MatrixMultiply, cst.Power)


def unaliased_fresh_local(ctx: FileContext, anchor: cst.CSTNode, name: str) -> bool:
    """Is ``name`` a local tensor that only this function can see, so that updating
    it in place (``h += 1.0``) and rebinding it to a new tensor (``h = h + 1.0``)
    cannot differ? Every binding creates a new tensor (arithmetic, a factory,
    ``.clone()``, ``nn.Linear``/convolutions), and every read of it creates none
    that shares its memory (no ``view``, no ``g = h``, not passed to a function,
    stored or returned) before ``anchor`` runs."""
    scope = ctx.provenance.scope_of(anchor)
    if scope.lookup(name) is not scope or not isinstance(scope.node, cst.FunctionDef):
        return False
    for how, value in scope.bindings.get(name, []):
        if how == "aug":
            continue
        if how != "value" or not isinstance(value, cst.BaseExpression) or not _creates_new_tensor(ctx, value):
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


def _reads(ctx: FileContext, scope, name: str):
    from .name_reads import reads_of

    return reads_of(ctx, scope, name)


def _shares_loop(ctx: FileContext, a: cst.CSTNode, b: cst.CSTNode) -> bool:
    loops = {id(n) for n in ctx.ancestors(b) if isinstance(n, (cst.For, cst.While))}
    return any(id(n) in loops for n in ctx.ancestors(a) if isinstance(n, (cst.For, cst.While)))


def _creates_new_tensor(ctx: FileContext, value: cst.BaseExpression) -> bool:
    if isinstance(value, cst.BinaryOperation):
        return isinstance(value.operator, _NEW_TENSOR_OPERATORS) and Kind.TENSOR in (ctx.kind(value.left), ctx.kind(value.right))
    if isinstance(value, cst.UnaryOperation) and isinstance(value.operator, cst.Minus):
        return ctx.kind(value.expression) is Kind.TENSOR
    if isinstance(value, cst.Call):
        qualified = ctx.provenance.imports.qualify(value.func) or ""
        if qualified.startswith("torch.") and qualified.rsplit(".", 1)[-1] in FRESH_TORCH:
            return True
        if isinstance(value.func, cst.Attribute) and value.func.attr.value in FRESH_METHODS and ctx.kind(value.func.value) is Kind.TENSOR:
            return value.func.attr.value not in ("item",)
        from .provenance import module_class_of

        module = module_class_of(ctx.provenance, value.func)
        return module in _FRESH_MODULES
    return False


def _fresh_read(ctx: FileContext, read: cst.Name) -> bool:
    """Does this read of the tensor leave no second reference to its memory?"""
    parent = ctx.parents.get(read)
    if isinstance(parent, (cst.BinaryOperation, cst.Comparison, cst.ComparisonTarget)):
        return True
    if isinstance(parent, cst.UnaryOperation) and isinstance(parent.operator, cst.Minus):
        return True
    if isinstance(parent, cst.Attribute) and parent.value is read:
        call = ctx.parents.get(parent)
        return isinstance(call, cst.Call) and call.func is parent and parent.attr.value in FRESH_METHODS
    if isinstance(parent, cst.Arg):
        call = ctx.parents.get(parent)
        if isinstance(call, cst.Call):
            qualified = ctx.provenance.imports.qualify(call.func) or ""
            return qualified.startswith("torch.") and qualified.rsplit(".", 1)[-1] in FRESH_TORCH
    return False
