"""Data-dependent sizes and indices in traced code, and what lets Dynamo trace them.

A value read from a tensor (``n = lengths.max().item()``, ``sizes = t.tolist()``)
and an operator whose output size depends on the data (``nonzero``,
``masked_select``, ``x[mask]``) break the graph in code ``torch.compile``
traces. PyTorch can trace them when told how (measured on torch 2.13, CPU,
``backend="eager"``, graph breaks counted from Dynamo's graph-break log):

* (a) ``torch._dynamo.config.capture_scalar_outputs = True``: ``.item()``,
  ``int(t)``, ``float(t)`` and ``.tolist()`` of an integer tensor become
  symbols in the graph; slicing (``x[:, :n]``), factories (``torch.zeros(n)``,
  ``x.new_zeros(n // 2, 3)``, ``torch.arange(n)``), ``view``/``reshape``,
  ``narrow``, ``expand``, ``torch.split(x, t.tolist())``, indexing a tensor or
  an ``nn.ModuleList`` with the value, and arithmetic on it all trace. Not
  traced: a Python ``if``/``while`` on the value (GB0170), ``range(n)`` loops,
  ``.tolist()`` of a floating tensor (GB0109), text formatting.
* (b) ``capture_dynamic_output_shape_ops = True`` (with (a): the sizes they
  give are usually read next): ``nonzero``, ``argwhere``, one-argument
  ``torch.where``, ``masked_select``, ``unique``, ``bincount``,
  ``repeat_interleave`` with a tensor of repeats, boolean-mask indexing.
* (c) ``torch._check(...)`` at the read: a fact Dynamo cannot decide from the
  code alone (``x.unflatten(1, (n, -1))`` needs ``n != 0``; torch 2.13 raises
  "Could not guard on data-dependent expression" without it).
  ``torch._check_is_size`` is deprecated in recent torch (2.13 gives a FutureWarning:
  "Use _check(i >= 0) instead"), so fixitem writes ``torch._check``.

``torch.compile(..., fullgraph=True)`` turns (a) and (b) on for the code it
compiles. The config must be set when the compiled code is *called* (traced),
not when ``torch.compile`` is: ``with config.patch(...): model =
torch.compile(model)`` changes nothing.

None of them removes the **host sync**: the graph still reads the value from
the device. A site that the file's config lets Dynamo trace is still a sync.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from .context import FUNCTIONS, FileContext
from .dtypes import certainly_floating, certainly_integer, certainly_integer_or_bool
from .output_calls import output_call
from .provenance import Kind
from .tree import callee_name
from .value_flow import SIZE_TAKING, name_uses

SCALARS = "capture_scalar_outputs"
SHAPES = "capture_dynamic_output_shape_ops"
# What each configuration flag is called in the environment (``TORCHDYNAMO_...=1``).
ENVIRONMENT = {SCALARS: "TORCHDYNAMO_CAPTURE_SCALAR_OUTPUTS", SHAPES: "TORCHDYNAMO_CAPTURE_DYNAMIC_OUTPUT_SHAPE_OPS"}

# Tensor methods / torch functions whose output size depends on the values of their input
# (Dynamo's "Dynamic shape operator", GB0036).
DYNAMIC_SHAPE_OPS = frozenset({"nonzero", "argwhere", "masked_select", "unique", "unique_consecutive", "bincount"})
# ``repeat_interleave(x, repeats)`` with a tensor of repeats and no ``output_size=``.
REPEATS = "repeat_interleave"

# Python functions of numbers that keep a symbolic size symbolic (``min(n, x.size(1))``).
NUMERIC_BUILTINS = frozenset({"int", "float", "min", "max", "abs"})
# Python functions that need the number itself (Dynamo specialises or breaks on them).
PYTHON_ONLY = frozenset({"len", "isinstance", "str", "repr", "format", "hash", "id", "sorted", "bool", "round",
                         "divmod", "chr", "hex", "bin"})
# Uses that Dynamo traces once it has the value as a symbol.
TRACEABLE = frozenset({"size", "slice", "index", "arithmetic", "tensor_op", "assert", "check", "passed",
                       "returned", "stored"})
# Why a use still breaks the graph under ``capture_scalar_outputs``.
UNTRACEABLE = {
    "branch": "Python control flow on the value (GB0170 \"Data-dependent branching\")",
    "loop": "a loop whose length is the value (`range(n)`): Dynamo cannot unroll it",
    "output": "formatting or printing the value",
    "python": "a Python function that needs the number itself",
    "specialize": "an argument whose value decides how many results there are (`split(n)`, `chunk(n)`, "
                  "`linspace(..., n)`, `one_hot(..., n)`): Dynamo needs the number itself",
}
# Size arguments whose value decides the number of outputs: Dynamo must specialise on them
# (torch 2.13: "Could not extract specialized integer from data-dependent expression").
SPECIALIZING = frozenset({"chunk", "linspace", "logspace", "one_hot", "tensor_split"})


@dataclass(frozen=True)
class Use:
    """Where a value read from a tensor is used: ``node`` holds it (a slice, a call, an ``if``),
    ``kind`` says how (a key of :data:`TRACEABLE` or :data:`UNTRACEABLE`)."""

    node: ast.AST
    kind: str
    # The expression the consumer received (``n`` of ``x.unflatten(1, (n, -1))``), when known.
    value: ast.AST | None = field(default=None, compare=False)

    @property
    def traceable(self) -> bool:
        return self.kind in TRACEABLE


@dataclass
class ScalarRead:
    """A read of a tensor value in traced code, with where the value goes."""

    node: ast.AST  # the read (``t.item()``, ``int(t)``, ``t.tolist()``)
    tensor: ast.expr
    how: str  # "item", "int", "float", "tolist"
    uses: list[Use] = field(default_factory=list)
    # ``.tolist()`` only: "integer" (traced under (a)), "floating" (never: GB0109), "" unknown.
    elements: str = ""

    @property
    def traceable(self) -> bool:
        """Does (a) trace the read itself?"""
        return self.how != "tolist" or self.elements != "floating"

    @property
    def traced_uses(self) -> list[Use]:
        return [u for u in self.uses if u.traceable]

    @property
    def breaking_uses(self) -> list[Use]:
        return [u for u in self.uses if not u.traceable]


def scalar_read(ctx: FileContext, node: ast.AST, tensor: ast.expr, how: str) -> ScalarRead:
    """What the value read at ``node`` (``how``: item / int / float / tolist) is used for."""
    read = ScalarRead(node, tensor, how)
    if how == "tolist":
        read.elements = ("integer" if certainly_integer_or_bool(ctx, tensor) else
                         "floating" if certainly_floating(ctx, tensor) else "")
    read.uses = uses_of(ctx, node, sequence=how == "tolist")  # type: ignore[arg-type]
    return read


def uses_of(ctx: FileContext, value: ast.expr, sequence: bool = False) -> list[Use]:
    """Every use of ``value``, followed through Python arithmetic on it and the local names it
    is stored in (``n = t.item()``, then ``x[:, :n]``). ``sequence``: the value is a list
    (``t.tolist()``), not a number."""
    found: list[Use] = []
    _climb(ctx, value, found, 0, set(), sequence)
    return found


def _climb(ctx: FileContext, node: ast.AST, found: list[Use], depth: int, seen: set[int],
           sequence: bool = False, origin: ast.AST | None = None) -> None:
    """``origin``: the read or the name the climb started from (what a use's ``value`` is)."""
    if depth > 6 or id(node) in seen:
        return
    seen.add(id(node))
    origin = origin if origin is not None else node
    parent = ctx.parents.get(node)
    t = type(parent)
    if parent is None:
        return
    if t is ast.BinOp:
        other = parent.right if parent.left is node else parent.left  # type: ignore[attr-defined]
        if ctx.kind(other) is Kind.TENSOR:
            found.append(Use(parent, "arithmetic"))
        else:
            _climb(ctx, parent, found, depth, seen, False, origin)  # ``n // 2``: still a number
        return
    if t is ast.UnaryOp:
        if type(parent.op) is ast.Not:  # type: ignore[attr-defined]
            found.append(Use(parent, "branch"))
        else:
            _climb(ctx, parent, found, depth, seen, False, origin)
        return
    if t is ast.Compare:
        _climb(ctx, parent, found, depth, seen, False, origin)  # what the comparison decides
        return
    if t is ast.BoolOp:
        found.append(Use(parent, "branch"))
        return
    if t in (ast.If, ast.While):
        found.append(Use(parent, "branch" if parent.test is node else "stored"))  # type: ignore[attr-defined]
        return
    if t is ast.IfExp:
        if parent.test is node:  # type: ignore[attr-defined]
            found.append(Use(parent, "branch"))
        else:
            _climb(ctx, parent, found, depth, seen, False, origin)
        return
    if t is ast.Assert:
        found.append(Use(parent, "assert" if parent.test is node else "output"))  # type: ignore[attr-defined]
        return
    if t is ast.Slice:
        found.append(Use(parent, "slice"))
        return
    if t is ast.Subscript:
        if parent.slice is node:  # type: ignore[attr-defined]
            found.append(Use(parent, "index"))
        else:
            _climb(ctx, parent, found, depth, seen, False, origin)  # ``t.tolist()[0]``: an element (a number)
        return
    if t is ast.Tuple and type(ctx.parents.get(parent)) is ast.Subscript and ctx.parents[parent].slice is parent:  # type: ignore[attr-defined]
        found.append(Use(ctx.parents[parent], "index"))
        return
    if t is ast.Starred:
        _climb(ctx, parent, found, depth, seen, sequence, origin)
        return
    if t is ast.keyword:
        call = ctx.parents.get(parent)
        if type(call) is ast.Call:
            found.append(_call_use(ctx, call, origin, parent, sequence, node))  # type: ignore[arg-type]
        return
    if t is ast.Call:
        if parent.func is node:  # type: ignore[attr-defined]
            return
        name = callee_name(parent.func)  # type: ignore[arg-type]
        if type(parent.func) is ast.Name and name in NUMERIC_BUILTINS:  # type: ignore[attr-defined]
            _climb(ctx, parent, found, depth, seen, False, origin)
            return
        found.append(_call_use(ctx, parent, origin, node, sequence, node))  # type: ignore[arg-type]
        return
    if t in (ast.List, ast.Tuple):
        target = _unpacked_into(ctx, node, parent)  # type: ignore[arg-type]
        if target is not None:
            _stored(ctx, target, found, depth, seen, False)
            return
        _climb(ctx, parent, found, depth, seen, True, origin)  # ``torch.split(x, [a, b])``, ``x.view(n, -1)``
        return
    if t is ast.FormattedValue or t is ast.JoinedStr:
        found.append(Use(parent, "output"))
        return
    if t is ast.comprehension or t is ast.For or t is ast.AsyncFor:
        if getattr(parent, "iter", None) is not node:
            found.append(Use(parent, "stored"))
        elif sequence:
            _stored(ctx, parent.target, found, depth, seen)  # ``for n in t.tolist():``: each element  # type: ignore[attr-defined]
        else:
            found.append(Use(parent, "loop"))
        return
    if t is ast.Return:
        found.append(Use(parent, "returned"))
        return
    if t in (ast.Assign, ast.AnnAssign) and parent.value is node:  # type: ignore[attr-defined]
        targets = parent.targets if t is ast.Assign else [parent.target]  # type: ignore[attr-defined]
        for target in targets:
            _stored(ctx, target, found, depth, seen, sequence)
        return
    if t is ast.AugAssign:
        found.append(Use(parent, "arithmetic"))
        return
    if t is ast.Expr:
        return
    found.append(Use(parent, "stored"))


def _stored(ctx: FileContext, target: ast.AST, found: list[Use], depth: int, seen: set[int],
            sequence: bool = False) -> None:
    """The value is stored in ``target``: follow a local name to its reads; a tuple target
    (``t, h, w = grid.tolist()``) to each of its names."""
    if type(target) is ast.Name:
        scope = ctx.provenance.scope_of(target)
        if not isinstance(scope.node, FUNCTIONS):
            found.append(Use(target, "stored"))
            return
        reads = name_uses(ctx, target)  # type: ignore[arg-type]
        if reads is None:
            found.append(Use(target, "stored"))
            return
        for read in reads:
            _climb(ctx, read, found, depth + 1, seen, sequence)
        return
    if type(target) in (ast.Tuple, ast.List):
        for element in target.elts:  # type: ignore[attr-defined]
            starred = type(element) is ast.Starred
            _stored(ctx, element.value if starred else element, found, depth, seen, starred)
        return
    found.append(Use(target, "stored"))


def _unpacked_into(ctx: FileContext, element: ast.AST, container: ast.AST) -> ast.AST | None:
    """``a, b = x // 2, y // 2``: the target ``element`` of the displayed tuple is stored in."""
    assign = ctx.parents.get(container)
    if type(assign) is not ast.Assign or assign.value is not container or len(assign.targets) != 1:  # type: ignore[attr-defined]
        return None
    target = assign.targets[0]  # type: ignore[attr-defined]
    elements = container.elts  # type: ignore[attr-defined]
    if type(target) not in (ast.Tuple, ast.List) or len(target.elts) != len(elements):  # type: ignore[attr-defined]
        return None
    for k, e in enumerate(elements):
        if e is element:
            return target.elts[k]  # type: ignore[attr-defined]
    return None


def _call_use(ctx: FileContext, call: ast.Call, value: ast.AST, argument: ast.AST, sequence: bool,
              given: ast.AST) -> Use:
    """How a call uses ``value`` (a list when ``sequence``), which reaches it as ``given``, its
    ``argument`` (the argument itself, or a ``keyword``)."""
    return Use(call, _call_kind(ctx, call, given, argument, sequence), value)


def _call_kind(ctx: FileContext, call: ast.Call, value: ast.AST, argument: ast.AST, sequence: bool) -> str:
    name = callee_name(call.func)
    qualified = ctx.provenance.imports.qualify(call.func) or ""
    if qualified in ("torch._check", "torch._check_is_size", "torch._check_with") or name.startswith("_check"):
        return "check"
    if output_call(ctx, call) is not None or name in ("print", "format", "warn"):
        return "output"
    if type(call.func) is ast.Name and name == "range":
        return "loop"
    if type(call.func) is ast.Name and name in PYTHON_ONLY and ctx.provenance.scope_of(call).lookup(name) is None:
        return "python"
    direct = argument is value or (type(argument) is ast.keyword and argument.value is value)  # type: ignore[attr-defined]
    if not sequence and (name in SPECIALIZING or (name == "split" and direct and _second_argument(call, argument))):
        return "specialize"  # ``x.split(n)`` (a chunk size); ``torch.split(x, [a, b])`` is sizes
    if name in SIZE_TAKING:
        return "size"
    func = call.func
    if qualified.startswith("torch.") or (type(func) is ast.Attribute and ctx.kind(func.value) is Kind.TENSOR):
        return "tensor_op"
    return "passed"


def _second_argument(call: ast.Call, argument: ast.AST) -> bool:
    """Is ``argument`` the split size of ``x.split(size)`` / ``torch.split(x, size)``, not a
    ``dim``?"""
    if type(argument) is ast.keyword:
        return argument.arg in ("split_size_or_sections", "split_size")  # type: ignore[attr-defined]
    func = call.func
    method = type(func) is ast.Attribute and not (type(func.value) is ast.Name and func.value.id == "torch")
    position = next((k for k, a in enumerate(call.args) if a is argument), -1)
    return position == (0 if method else 1)


# -- operators whose output size depends on the data ------------------------------------------


@dataclass(frozen=True)
class ShapeOp:
    """An operator of traced code whose output size depends on the values of ``tensor``."""

    node: ast.AST  # the call, or the subscript ``x[mask]``
    op: str  # "nonzero", "torch.where", "boolean mask", ...
    tensor: ast.expr  # the tensor whose values decide the size


def dynamic_shape_ops(ctx: FileContext) -> list[ShapeOp]:
    """The data-dependent-output-size operators of the file's traced code, in source order."""
    return ctx.memo("dynamic shape ops", lambda: _dynamic_shape_ops(ctx))


def _dynamic_shape_ops(ctx: FileContext) -> list[ShapeOp]:
    found: list[ShapeOp] = []
    for call in ctx.nodes(ast.Call):
        assert type(call) is ast.Call
        name = callee_name(call.func)
        if name not in DYNAMIC_SHAPE_OPS and name not in (REPEATS, "where"):
            continue
        if not ctx.in_traced_code(call):
            continue
        func = call.func
        qualified = ctx.provenance.imports.qualify(func) or ""
        method = type(func) is ast.Attribute and not qualified.startswith("torch.")
        receiver = func.value if method else None  # type: ignore[attr-defined]
        positional = [a for a in call.args if type(a) is not ast.Starred]
        if method and not ctx.is_tensor(receiver):  # type: ignore[arg-type]
            continue
        if not method and not (qualified.startswith("torch.") and qualified.count(".") == 1):
            continue
        tensor = receiver if method else (positional[0] if positional else None)
        if tensor is None:
            continue
        if name == "where":
            # ``torch.where(cond)``: the indices where ``cond`` holds (``nonzero(as_tuple=True)``).
            if method or len(call.args) != 1 or call.keywords:
                continue
            found.append(ShapeOp(call, "torch.where", tensor))
            continue
        if name == REPEATS:
            repeats = (call.args[0] if method and call.args else call.args[1] if len(call.args) > 1 else None)
            repeats = repeats or next((k.value for k in call.keywords if k.arg == "repeats"), None)
            if any(k.arg == "output_size" for k in call.keywords):
                continue
            if repeats is None and not method and len(call.args) == 1:
                found.append(ShapeOp(call, REPEATS, tensor))  # ``torch.repeat_interleave(repeats)``
            elif repeats is not None and ctx.kind(repeats) is Kind.TENSOR:
                found.append(ShapeOp(call, REPEATS, repeats))
            continue
        if not ctx.is_tensor(tensor):
            continue
        found.append(ShapeOp(call, name, tensor))
    for subscript in ctx.nodes(ast.Subscript):
        assert type(subscript) is ast.Subscript
        if type(subscript.ctx) is not ast.Load:
            continue
        index = subscript.slice
        # A slice or a number (``x[:, :n]``, ``x[0]``, ``x[..., -1]``, ``x[..., None]``) is never a
        # mask: those subscripts need no question about where they stand or what they index.
        masks = [m for m in (index.elts if type(index) is ast.Tuple else [index])  # type: ignore[attr-defined]
                 if not _never_a_mask(m)]
        if not masks or not ctx.in_traced_code(subscript) or not ctx.is_tensor(subscript.value):
            continue
        mask = next((m for m in masks if is_bool_tensor(ctx, m)), None)
        if mask is not None:
            found.append(ShapeOp(subscript, "boolean mask", mask))
    found.sort(key=lambda op: ctx.positions.offset(op.node))
    return found


def _never_a_mask(index: ast.expr) -> bool:
    """A slice, a constant or a signed number: an index that is no tensor, whatever the code around."""
    t = type(index)
    if t is ast.UnaryOp and type(index.op) in (ast.USub, ast.UAdd):  # type: ignore[attr-defined]
        index, t = index.operand, type(index.operand)  # type: ignore[attr-defined]
    return t is ast.Constant or t is ast.Slice


_BOOL_FUNCTIONS = frozenset({"isnan", "isinf", "isfinite", "isposinf", "isneginf", "logical_and", "logical_or",
                             "logical_not", "logical_xor", "eq", "ne", "gt", "ge", "lt", "le", "isin", "bool"})


def is_bool_tensor(ctx: FileContext, expr: ast.AST, depth: int = 0) -> bool:
    """A ``bool`` tensor: a comparison of tensors, ``~m``, ``m & n``, ``.bool()``, ``torch.isnan(x)``,
    ``dtype=torch.bool``, or a name bound only to one of those."""
    if depth > 6 or not isinstance(expr, ast.expr):
        return False
    t = type(expr)
    if t is ast.UnaryOp and type(expr.op) is ast.Invert:  # type: ignore[attr-defined]
        return is_bool_tensor(ctx, expr.operand, depth + 1)  # type: ignore[attr-defined]
    if t is ast.BinOp and type(expr.op) in (ast.BitAnd, ast.BitOr, ast.BitXor):  # type: ignore[attr-defined]
        return is_bool_tensor(ctx, expr.left, depth + 1) and is_bool_tensor(ctx, expr.right, depth + 1)  # type: ignore[attr-defined]
    if t is ast.Call and callee_name(expr.func) in _BOOL_FUNCTIONS and ctx.kind(expr) is Kind.TENSOR:  # type: ignore[arg-type]
        return True
    if t is ast.Name:
        values = ctx.provenance.assigned_values(expr)
        if values and all(is_bool_tensor(ctx, v, depth + 1) for v in values):
            return True
    return ctx.kind(expr) is Kind.TENSOR and certainly_integer_or_bool(ctx, expr) and not certainly_integer(ctx, expr)


# -- where the file compiles, and the configuration it sets ----------------------------------


@dataclass(frozen=True)
class CompileCall:
    """A ``torch.compile`` of the file: a call, or a decorator."""

    node: ast.expr  # ``torch.compile(...)`` (a call), or the decorator expression
    statement: ast.stmt  # the statement holding the call; the decorated ``def`` for a decorator
    decorated: ast.AST | None  # the function a decorator compiles
    target: ast.expr | None  # what a call compiles (its first argument; the receiver of ``m.compile()``)
    fullgraph: bool  # ``fullgraph=True``: Dynamo captures scalars and dynamic shapes anyway
    # In code that runs the program (a script's main code, or a function it calls), where a
    # global setting is the program's own.
    application: bool

    @property
    def compiles_function(self) -> bool:
        """A function (a decorator, or a call given a function of the file): a scoped
        ``config.patch`` around it keeps the callable a function."""
        return self.decorated is not None


def compile_calls(ctx: FileContext) -> list[CompileCall]:
    return ctx.memo("compile calls", lambda: _compile_calls(ctx))


_COMPILE = ("torch.compile", "torch.compiler.compile")


def _is_compile(ctx: FileContext, node: ast.expr) -> bool:
    if type(node) is ast.Call:
        node = node.func  # type: ignore[attr-defined]
    return ctx.provenance.imports.qualify(node) in _COMPILE


def _fullgraph(call: ast.expr) -> bool:
    return type(call) is ast.Call and any(
        k.arg == "fullgraph" and type(k.value) is ast.Constant and k.value.value is True for k in call.keywords)  # type: ignore[attr-defined]


def _compile_calls(ctx: FileContext) -> list[CompileCall]:
    found: list[CompileCall] = []
    script = is_script(ctx)
    started = _run_at_start(ctx) if script else set()
    functions = {f.name: f for f in ctx.nodes(*FUNCTIONS) if type(ctx.parents.get(f)) is not ast.ClassDef}  # type: ignore[attr-defined]
    for func in ctx.nodes(*FUNCTIONS):
        for decorator in func.decorator_list:  # type: ignore[attr-defined]
            if _is_compile(ctx, decorator):
                found.append(CompileCall(decorator, func, func, None, _fullgraph(decorator),  # type: ignore[arg-type]
                                         script and _in_program(ctx, func, started)))
    for call in ctx.nodes(ast.Call):
        assert type(call) is ast.Call
        func = call.func
        target: ast.expr | None = None
        if _is_compile(ctx, call) and (call.args or call.keywords):
            if any(call is d for f in ctx.nodes(*FUNCTIONS) for d in f.decorator_list):  # type: ignore[attr-defined]
                continue
            target = call.args[0] if call.args else next((k.value for k in call.keywords if k.arg == "model"), None)
            if target is None:
                continue
        elif type(func) is ast.Attribute and func.attr == "compile" and ctx.kind(func.value) is Kind.MODULE:
            target = func.value  # ``model.compile()`` (nn.Module.compile)
        else:
            continue
        statement = ctx.enclosing_statement(call)
        if statement is None:
            continue
        decorated = functions.get(target.id) if type(target) is ast.Name else None  # type: ignore[attr-defined]
        found.append(CompileCall(call, statement, decorated, target, _fullgraph(call),
                                 script and _in_program(ctx, statement, started)))
    found.sort(key=lambda c: ctx.positions.offset(c.node))
    return found


def _in_program(ctx: FileContext, node: ast.AST, started: set[str]) -> bool:
    """In a script, does ``node`` run as the program's own code: at module level, or in a
    function that the module-level code (its ``__main__`` block) calls, directly or through
    one more function of the file (``started``)? A function nothing here calls may be a
    library's."""
    function = ctx.enclosing_function(node) if not isinstance(node, FUNCTIONS) else ctx.enclosing_function(
        ctx.parents.get(node, node))
    if function is None:
        return True
    while function is not None:
        if function.name in started and type(ctx.parents.get(function)) is not ast.ClassDef:
            return True
        function = ctx.enclosing_function(ctx.parents.get(function, function))
    return False


def _run_at_start(ctx: FileContext) -> set[str]:
    """The functions of the file that its module-level code calls by name (``main()`` under
    ``if __name__ == "__main__":``), and the ones those call."""
    functions = {f.name: f for f in ctx.module.body if isinstance(f, FUNCTIONS)}  # type: ignore[attr-defined]

    def called(nodes) -> set[str]:
        return {n.func.id for root in nodes for n in ast.walk(root)  # type: ignore[attr-defined]
                if type(n) is ast.Call and type(n.func) is ast.Name and n.func.id in functions}  # type: ignore[attr-defined]

    top = [statement for statement in ctx.module.body if not isinstance(statement, (*FUNCTIONS, ast.ClassDef))]
    first = called(top)
    return first | called([functions[name] for name in first])


def is_script(ctx: FileContext) -> bool:
    """Is the file a program rather than a module of a library: it has an
    ``if __name__ == "__main__":`` block, or runs a loop at module level."""
    def find() -> bool:
        for statement in ctx.module.body:
            test = ctx.code(statement.test) if type(statement) is ast.If else ""
            if "__main__" in test and "__name__" in test:
                return True
            if type(statement) in (ast.For, ast.While):
                return True
        return False

    return ctx.memo("is script", find)


def compiled_roots(ctx: FileContext, call: CompileCall) -> set[ast.AST]:
    """The functions of the file that ``call`` traces: the compiled function and what it calls
    (by name, or as ``self.method``), transitively. Empty for a module compile (the
    module's class is not known here)."""
    if call.decorated is None:
        return set()
    key = ("compiled roots", id(call.decorated))
    return ctx.memo(key, lambda: _reach(ctx, call.decorated))  # type: ignore[arg-type]


def _reach(ctx: FileContext, root: ast.AST) -> set[ast.AST]:
    by_name: dict[str, list[ast.AST]] = {}
    methods: dict[tuple[int, str], ast.AST] = {}
    for func in ctx.nodes(*FUNCTIONS):
        owner = ctx.parents.get(func)
        if type(owner) is ast.ClassDef:
            methods[(id(owner), func.name)] = func  # type: ignore[attr-defined]
        else:
            by_name.setdefault(func.name, []).append(func)  # type: ignore[attr-defined]
    reached = {root}
    work = [root]
    while work:
        func = work.pop()
        owner = ctx.parents.get(func)
        for node in ast.walk(func):
            if type(node) is not ast.Call:
                continue
            f = node.func  # type: ignore[attr-defined]
            callees: list[ast.AST] = []
            if type(f) is ast.Name:
                callees = by_name.get(f.id, [])
            elif (type(f) is ast.Attribute and type(f.value) is ast.Name and f.value.id == "self"
                  and type(owner) is ast.ClassDef):
                found = methods.get((id(owner), f.attr))
                callees = [found] if found else []
            for callee in callees:
                if callee not in reached:
                    reached.add(callee)
                    work.append(callee)
    return reached


def compile_for(ctx: FileContext, node: ast.AST) -> CompileCall | None:
    """The ``torch.compile`` of the file that traces ``node``: a compiled function that reaches
    it, else a module compiled in the program's own code (which compiles the file's modules,
    as far as one file shows)."""
    function = ctx.enclosing_function(node)
    calls = compile_calls(ctx)
    for call in calls:
        if function is not None and function in compiled_roots(ctx, call):
            return call
    return next((c for c in calls if c.decorated is None and c.application), None)


@dataclass(frozen=True)
class Setting:
    """Where the file turns a flag on: ``node`` is the assignment, the ``patch`` call, or the
    environment assignment."""

    flag: str
    node: ast.AST


def config_settings(ctx: FileContext) -> dict[str, Setting]:
    """The flags of ``torch._dynamo.config`` the file turns on (``= True``, ``config.patch(flag=True)``
    as a decorator, a ``with`` or a call, ``os.environ["TORCHDYNAMO_...] = "1"``), each with the
    first place that does."""
    return ctx.memo("config settings", lambda: _config_settings(ctx))


def _config_settings(ctx: FileContext) -> dict[str, Setting]:
    found: dict[str, Setting] = {}
    flags = (SCALARS, SHAPES)
    for node in ctx.nodes(ast.Assign):
        assert type(node) is ast.Assign
        for target in node.targets:
            if type(target) is ast.Attribute and target.attr in flags and _is_true(node.value) and \
                    (ctx.provenance.imports.qualify(target.value) or "").endswith("_dynamo.config"):
                found.setdefault(target.attr, Setting(target.attr, node))
            if type(target) is ast.Subscript and "environ" in ctx.code(target.value) and \
                    type(target.slice) is ast.Constant and type(node.value) is ast.Constant and node.value.value == "1":
                for flag, variable in ENVIRONMENT.items():
                    if target.slice.value == variable:
                        found.setdefault(flag, Setting(flag, node))
    for call in ctx.nodes(ast.Call):
        assert type(call) is ast.Call
        if type(call.func) is ast.Attribute and call.func.attr == "patch" and \
                (ctx.provenance.imports.qualify(call.func.value) or "").endswith("_dynamo.config"):
            for keyword in call.keywords:
                if keyword.arg in flags and _is_true(keyword.value):
                    found.setdefault(keyword.arg, Setting(keyword.arg, call))
            if len(call.args) == 2 and type(call.args[0]) is ast.Constant and call.args[0].value in flags and \
                    _is_true(call.args[1]):
                found.setdefault(call.args[0].value, Setting(call.args[0].value, call))
            if len(call.args) == 1 and type(call.args[0]) is ast.Dict:
                for key, value in zip(call.args[0].keys, call.args[0].values):
                    if type(key) is ast.Constant and key.value in flags and _is_true(value):
                        found.setdefault(key.value, Setting(key.value, call))
    return found


def _is_true(node: ast.AST) -> bool:
    return type(node) is ast.Constant and node.value is True  # type: ignore[attr-defined]


def captured(ctx: FileContext, node: ast.AST, flag: str) -> str:
    """Why Dynamo already traces the data-dependent code at ``node`` without a break: the file
    sets ``flag`` ("`capture_scalar_outputs` is set at line 12"), or the compile that traces it
    passes ``fullgraph=True``; "" when it breaks the graph."""
    setting = config_settings(ctx).get(flag)
    if setting is not None:
        return f"`{flag}` is set at line {ctx.position(setting.node)[0]}"
    call = compile_for(ctx, node)
    if call is not None and call.fullgraph:
        return f"`torch.compile(..., fullgraph=True)` at line {ctx.position(call.node)[0]} captures it"
    return ""


# -- facts Dynamo cannot decide about a traced value ------------------------------------------

# Pure Python arithmetic on names and numbers: safe to evaluate again in a ``torch._check``.
_ARITHMETIC = (ast.Name, ast.Constant, ast.BinOp, ast.UnaryOp, ast.operator, ast.unaryop, ast.Load)


@dataclass(frozen=True)
class Guard:
    """A fact about a traced value that Dynamo needs at ``use`` and cannot decide from the code,
    while eager PyTorch requires it there anyway (it raises when it is false): ``condition``
    (``"n > 0"``) written about ``operand``, the size expression as the code gives it."""

    use: Use
    operand: ast.AST
    condition: str
    why: str


def guard_needed(ctx: FileContext, use: Use) -> Guard | None:
    """The ``torch._check`` that ``use`` of a traced value needs (torch 2.13): ``x.unflatten(dim,
    (n, -1))`` must know ``n != 0`` to infer the ``-1`` ("Could not guard on data-dependent
    expression Ne(u0, 0)"); eager raises for ``n <= 0`` there (a zero or negative size next to
    ``-1`` is an error), so ``n > 0`` is what the program requires already."""
    call = use.node
    if use.kind != "size" or type(call) is not ast.Call or callee_name(call.func) != "unflatten":
        return None
    sizes = call.args[1] if len(call.args) > 1 else next((k.value for k in call.keywords if k.arg == "sizes"), None)  # type: ignore[attr-defined]
    if type(sizes) not in (ast.Tuple, ast.List):
        return None
    elements = sizes.elts  # type: ignore[attr-defined]
    if not any(_minus_one(e) for e in elements):
        return None
    for element in elements:
        pure = all(isinstance(n, _ARITHMETIC) for n in ast.walk(element))
        if use.value is not None and _contains(element, use.value) and pure:
            code = ctx.code(element)
            operand = code if type(element) in (ast.Name, ast.Constant) else f"({code})"
            return Guard(use, element, f"{operand} > 0",
                         f"`{ctx.code(call)}` infers the `-1` only when `{code}` is not 0")
    return None


def _minus_one(node: ast.AST) -> bool:
    return (type(node) is ast.UnaryOp and type(node.op) is ast.USub and type(node.operand) is ast.Constant  # type: ignore[attr-defined]
            and node.operand.value == 1) or (type(node) is ast.Constant and node.value == -1)  # type: ignore[attr-defined]


def _contains(root: ast.AST, node: ast.AST) -> bool:
    return any(n is node for n in ast.walk(root))
