"""How a value read from a tensor is used, and what to do about it by hand."""

from __future__ import annotations

import ast

from .model.context import FUNCTIONS, FileContext
from .model.output_calls import argument_values, output_call
from .model.provenance import Kind, dotted_name
from .model.syncs import SyncSite
from .model.tree import callee_name, walk

SIZE_FUNCTIONS = frozenset(
    {
        "range", "zeros", "ones", "empty", "full", "arange", "randn", "rand", "randint", "eye",
        "linspace", "view", "reshape", "expand", "repeat", "narrow", "new_zeros", "new_ones",
        "new_empty", "new_full", "split", "chunk", "tile", "unflatten", "topk", "roll",
    }
)


_CONDITIONS = (ast.If, ast.While, ast.Assert, ast.IfExp, ast.BoolOp)
_STORES = (ast.Assign, ast.AnnAssign, ast.Dict, ast.List, ast.Tuple)


def usage(ctx: FileContext, node: ast.AST) -> str:
    """``size``, ``output``, ``text`` (formatted, not printed), ``accumulate`` (``accumulate_tensor``
    into a tensor), ``condition``, ``returned``, ``stored`` or ``other``."""
    child = node
    for parent in ctx.ancestors(node):
        t = type(parent)
        if t is ast.Slice or _indexes(ctx, parent, child):
            return "size"
        if t is ast.Call:
            func = parent.func  # type: ignore[attr-defined]
            name = callee_name(func)
            if output_call(ctx, parent) is not None:  # type: ignore[arg-type]
                return "output"
            if name in SIZE_FUNCTIONS and child is not func:
                return "size"
        if t is ast.JoinedStr or t is ast.FormattedValue or (
                t is ast.BinOp and type(parent.op) is ast.Mod and _is_string(parent.left)):  # type: ignore[attr-defined]
            # ``f"{loss:.3f}"``, ``"%.3f" % loss``: printed or logged, or text kept (a file name)
            return "output" if _in_output_call(ctx, parent) else "text"
        if t is ast.AugAssign:
            # ``totals[0] += loss.item()``: the total is a tensor already.
            return "accumulate_tensor" if ctx.kind(parent.target) is Kind.TENSOR else "accumulate"  # type: ignore[attr-defined]
        if t is ast.comprehension and any(child is test for test in parent.ifs):  # type: ignore[attr-defined]
            return "condition"  # ``[x for x in xs if t]``: the filter decides, whatever the list is for
        if t in _CONDITIONS:
            return "condition"
        if t is ast.Return:
            return "returned"
        if t in _STORES:
            return "stored"
        if isinstance(parent, ast.stmt):
            break
        child = parent
    return "other"


def _in_output_call(ctx: FileContext, node: ast.AST) -> bool:
    """Is ``node`` part of an argument of a print or logging call of its statement (or of a
    function whose name says it writes output: ``print0``)?"""
    for parent in ctx.ancestors(node):
        if type(parent) is ast.Call and (output_call(ctx, parent) is not None or _output_name(parent.func)):  # type: ignore[arg-type,attr-defined]
            return True
        if isinstance(parent, ast.stmt):
            break
    return False


def _indexes(ctx: FileContext, parent: ast.AST, child: ast.AST) -> bool:
    """Is ``child`` an index of the subscript ``parent`` (``i`` of ``x[i]``), or ``parent`` the
    bare tuple of indices of one (``x[i, j]``; not ``x[(i, j)]``, a tuple used as the index)?"""
    t = type(parent)
    if t is ast.Subscript:
        return child is parent.slice  # type: ignore[attr-defined]
    if t is ast.Tuple:
        holder = ctx.parents.get(parent)
        return type(holder) is ast.Subscript and holder.slice is parent and _bare_tuple(ctx, parent)  # type: ignore[attr-defined]
    return False


def _bare_tuple(ctx: FileContext, node: ast.Tuple) -> bool:
    """A tuple written without parentheses of its own (``ast`` counts them in its span)."""
    return bool(node.elts) and ctx.positions.span(node)[0] == ctx.span(node.elts[0])[0]


def _is_string(node: ast.AST) -> bool:
    """A string literal or an f-string (libcst's ``SimpleString`` / ``ConcatenatedString`` /
    ``FormattedString``)."""
    t = type(node)
    return t is ast.JoinedStr or (t is ast.Constant and isinstance(node.value, (str, bytes)))  # type: ignore[attr-defined]


ADVICE = {
    "size": (
        "the value is used as a Python size or index, so it must reach the host. Compute it in the "
        "data pipeline or pass it in as a Python int; inside compiled code, `capture_scalar_outputs` (FX601) "
        "lets torch.compile trace it without a break (the sync stays) and `torch._check` (FX603) states what "
        "Dynamo cannot decide about it"
    ),
    "output": (
        "printing or logging every step waits for the device each time. Log every N steps, or pass the "
        "value read with `.item()` straight into the call: `fixitem apply` defers such calls into an "
        "on-device buffer"
    ),
    "text": (
        "the value is formatted into text (a name, a message kept for later), which needs it on the host. "
        "Keep the tensor, and make the text where it is used, once (after the loop, or every N steps)"
    ),
    "output_tensor": (
        "formatting a tensor reads it every time. Log every N steps, or format `t.item()` of a "
        "one-element tensor in the call: `fixitem apply` defers such calls into an on-device buffer"
    ),
    "accumulate": (
        "summing Python numbers reads every step. Accumulate on the device "
        "(`total += x.detach()`, float64 for exact sums) and read the total once"
    ),
    "accumulate_tensor": (
        "the total is a tensor already, so the read only takes the value to the host and back. Add the "
        "tensor itself (`+= x.detach()`): no read, and the same sum when both have the same dtype"
    ),
    "condition": (
        "Python control flow needs the value. Select with `torch.where` when both branches only compute "
        "tensors, use `torch.cond` when they are tensor functions of the same output shape, or move the "
        "check out of the compiled code"
    ),
    "returned": (
        "returning a Python number forces the read here. Return the tensor (`.detach()`) and convert "
        "where the number is needed, once"
    ),
    "stored": (
        "keep the value as a 0-dim tensor if what consumes it accepts one (tensor arithmetic, "
        "`masked_fill`, `torch.where`); read it once where a Python number is really needed"
    ),
    "other": (
        "keep the value as a 0-dim tensor if what consumes it accepts one; read it once where a Python "
        "number is really needed"
    ),
    # Finer cases of the above, recognised by what the code around the read does.
    "module_index": (
        "the value picks a module from a list (an expert, a layer), so every selection waits for the "
        "device. Compute every candidate on masked inputs and combine with the mask, or group the rows "
        "by index and run one batched matmul per group (sort by index, then `torch.bmm` on padded groups "
        "or a grouped GEMM), so that no index reaches the host"
    ),
    "nan_skip": (
        "skipping work when a value is NaN/inf reads it every step. Let the device decide: "
        "`torch.amp.GradScaler` finds non-finite gradients on the device (`found_inf`) and its "
        "`scaler.step(optimizer)` skips the update without a host check; `torch.where` / `nan_to_num` "
        "can neutralise a bad value; or check every N steps"
    ),
    "per_element": (
        "the loop reads one element of a tensor per iteration, one host sync each. Read the tensor once "
        "(`values = t.tolist()`, one sync) and loop over the Python values, or keep the work in tensor ops"
    ),
    "synchronize": (
        "remove it unless it brackets a time measurement: PyTorch already orders the work of a stream, and "
        "a value read waits where it is needed. To time, record `torch.cuda.Event(enable_timing=True)` "
        "events instead of waiting every step"
    ),
    "synchronize_timing": (
        "it brackets a time measurement (this function, or one of this file that calls it, reads a clock), "
        "where a wait is what makes the time "
        "right: keep it there, but only in the timed runs (or time with `torch.cuda.Event(enable_timing=True)`)"
    ),
    "on_host": (
        "the tensor lives in host memory, so the read waits for no device; inside compiled code it is "
        "still a graph break. Read it outside the traced function, or pass the value in as a Python number"
    ),
    "leaves": (
        "the value leaves the program as a Python number (JSON, a checkpoint, a type check), so one read "
        "is needed: do it once, where the value is written (after the loop or every N steps), and keep "
        "the tensor until then"
    ),
}

NAN_CHECKS = frozenset({"isnan", "isinf", "isfinite", "isposinf", "isneginf", "isreal", "nan_to_num"})
SERIALIZERS = frozenset({"dump", "dumps", "save", "safe_dump", "write_json", "to_json", "isinstance"})


CLOCKS = frozenset({"time.time", "time.perf_counter", "time.monotonic", "time.perf_counter_ns", "time.time_ns",
                    "time.monotonic_ns", "timeit.default_timer"})


def if_tensor(ctx: FileContext, site: SyncSite) -> str:
    """What a note on ``site`` starts with where its value is not known to be a tensor:
    "(if `x` is a tensor) "; "" where it is."""
    return "" if site.certain else f"(if `{ctx.code(site.value)}` is a tensor) "


def advice(ctx: FileContext, node: ast.AST) -> str:
    return unseen_callee_advice(ctx, node) or ADVICE[detailed_usage(ctx, node)]


# Parts of a function's name that say it writes output (``print0``, ``log_rank0``, ``master_print``).
_OUTPUT_WORDS = ("print", "log", "write", "echo", "report", "info", "warn", "debug")


def _output_name(func: ast.AST) -> bool:
    return any(word in callee_name(func).lower() for word in _OUTPUT_WORDS)


def unseen_callee_advice(ctx: FileContext, node: ast.AST) -> str:
    """Advice for a read passed (as it is, or formatted into text) to a function that is
    not defined in this file (``print0`` imported from the project's ``utils``): fixitem
    reads one file at a time, so it cannot tell what that function does with the value,
    and that, not the shape of the call, is why it is left as written. "" otherwise."""
    call = _receiving_call(ctx, node)
    if call is None or output_call(ctx, call) is not None:
        return ""
    where = _defined_elsewhere(ctx, call.func)
    if not where:
        return ""
    name = ctx.code(call.func)
    short = name.rsplit(".", 1)[-1].lower()
    if any(word in short for word in _OUTPUT_WORDS):
        return (
            f"`{name}` is defined {where}, which fixitem does not read: it cannot tell that the call only "
            "writes output, so it leaves it as written and the read waits for the device on every call. "
            f"Log every N steps; or define `{name.rsplit('.', 1)[-1]}` in this file, or call `print` / `logging` "
            "here (under the same rank test): `fixitem apply` defers such calls into an on-device buffer"
        )
    return (
        f"`{name}` is defined {where}, which fixitem does not read: it cannot tell whether `{name}` needs "
        f"a Python number. If it accepts a tensor, pass `{ctx.code(_read_tensor(node))}.detach()` and read it "
        "once where a number is really needed"
    )


_TEXT_OR_ARITHMETIC = (ast.JoinedStr, ast.FormattedValue, ast.BinOp, ast.UnaryOp)


def _receiving_call(ctx: FileContext, node: ast.AST) -> ast.Call | None:
    """The call that ``node`` is an argument of, directly or through the text or arithmetic
    built from it for that argument."""
    child = node
    for parent in ctx.ancestors(node):
        t = type(parent)
        if t is ast.Call:
            # An argument (not the function called).
            return parent if child is not parent.func else None  # type: ignore[attr-defined,return-value]
        if t is ast.keyword or t is ast.Starred:
            # ``f(k=x)``, ``f(**x)``, ``f(*x)``: an argument of a call (not of a class
            # statement's bases, nor ``*x`` of a display).
            call = ctx.parents.get(parent)
            return call if type(call) is ast.Call else None  # type: ignore[return-value]
        if t not in _TEXT_OR_ARITHMETIC:
            return None
        child = parent
    return None


def _defined_elsewhere(ctx: FileContext, func: ast.expr) -> str:
    """Where ``func`` comes from when it is a function of another module of the program
    (not the standard library, torch or numpy, whose functions fixitem knows or that need
    numbers): "in another module (`utils`)"; "" when it is defined in this file or not known."""
    import sys

    root = func
    while type(root) is ast.Attribute:
        root = root.value  # type: ignore[attr-defined]
    if type(root) is not ast.Name:
        return ""
    owner = ctx.provenance.scope_of(func).lookup(root.id)  # type: ignore[attr-defined]
    bindings = owner.bindings.get(root.id, []) if owner is not None else []  # type: ignore[attr-defined]
    if not bindings or any(how != "import" for how, _ in bindings):
        return ""  # defined here, a parameter, a builtin
    origin = _import_origin(ctx, root.id)  # type: ignore[attr-defined]
    top = origin.lstrip(".").split(".")[0]
    if not origin or top in sys.stdlib_module_names or top in ("torch", "numpy", "builtins"):
        return ""
    if type(func) is ast.Attribute:
        return f"in `{origin}`" if func.value is root else ""  # type: ignore[attr-defined]
    return f"in another module (`{origin}`)"


def _import_origin(ctx: FileContext, name: str) -> str:
    """The module ``name`` is imported from (``utils``, ``.utils``), or the module it is."""
    for node in ctx.nodes(ast.ImportFrom):
        assert type(node) is ast.ImportFrom
        if node.names[0].name == "*":
            continue
        for alias in node.names:
            if (alias.asname or alias.name) == name:
                return "." * node.level + (node.module or "")
    for node in ctx.nodes(ast.Import):
        assert type(node) is ast.Import
        for alias in node.names:
            full = alias.name
            local = alias.asname if alias.asname is not None else full.split(".")[0]
            if local == name:
                return full
    return ""


def _read_tensor(node: ast.AST) -> ast.AST:
    """``t`` of ``t.item()`` / ``float(t)``; the node itself otherwise."""
    if type(node) is ast.Call:
        func = node.func  # type: ignore[attr-defined]
        if type(func) is ast.Attribute and func.attr in ("item", "tolist"):
            return func.value
        if type(func) is ast.Name and func.id in ("float", "int", "bool") and (node.args or node.keywords):  # type: ignore[attr-defined]
            return argument_values(node)[0]  # type: ignore[arg-type]
    return node


def synchronize_advice(ctx: FileContext, node: ast.AST) -> str:
    """``torch.cuda.synchronize()``: keep it where the same function reads a clock, or,
    for a helper (``def sync(device): torch.cuda.synchronize(device)``), where a
    function of the file that calls the helper does."""
    callees, timed, clock_read = ctx.memo("timing", lambda: _timing(ctx))
    function = ctx.enclosing_function(node)
    if function is None:
        return ADVICE["synchronize_timing" if clock_read else "synchronize"]
    if id(function) in timed:
        return ADVICE["synchronize_timing"]
    for call in callees.get(function.name, ()):
        if any(id(caller) in timed for caller in ctx.ancestors(call)
               if isinstance(caller, FUNCTIONS) and caller is not function):
            return ADVICE["synchronize_timing"]
    return ADVICE["synchronize"]


def _timing(ctx: FileContext) -> tuple[dict[str, list[ast.Call]], set[int], bool]:
    """For :func:`synchronize_advice`, from one pass over the calls of the file: the calls by
    the last part of the name called (``self.sync(...)``: ``sync``), the ids of the functions
    that read a clock (at any depth), and whether the file reads one anywhere."""
    callees: dict[str, list[ast.Call]] = {}
    timed: set[int] = set()
    clock_read = False
    for call in ctx.nodes(ast.Call):
        assert type(call) is ast.Call
        if type(call.func) is ast.Name or type(call.func) is ast.Attribute:
            callees.setdefault((dotted_name(call.func) or "").split(".")[-1], []).append(call)
        q = ctx.provenance.imports.qualify(call.func) or ""
        if q in CLOCKS or q.endswith(".elapsed_time"):
            clock_read = True
            timed.update(id(f) for f in ctx.ancestors(call) if isinstance(f, FUNCTIONS))
    return callees, timed, clock_read


def per_element(ctx: FileContext, value: ast.AST) -> ast.expr | None:
    """The tensor a loop or comprehension iterates when ``value`` is its variable
    (``int(i) for i in idx`` gives ``idx``), or an element of it picked by the index of
    a loop over its length (``int(idx[i])`` in ``for i in range(idx.size(0))``), else None."""
    if type(value) is ast.Subscript:
        index = value.slice  # ``x[i, j]`` / ``x[a:b]``: a tuple / a slice, no name
        if type(index) is ast.Name and ctx.certainly_tensor(value.value) and _loops_over_length_of(
            ctx, index, value.value
        ):
            return value.value
        return None
    if type(value) is not ast.Name:
        return None
    scope = ctx.provenance.scope_of(value).lookup(value.id)  # type: ignore[attr-defined]
    if scope is None:
        return None
    bindings = scope.bindings.get(value.id, [])  # type: ignore[attr-defined]
    if len(bindings) != 1:
        return None
    how, node = bindings[0]
    if how == "iter" and isinstance(node, ast.expr) and ctx.kind(node) is Kind.TENSOR:
        return node
    return None


def _loops_over_length_of(ctx: FileContext, index: ast.Name, tensor: ast.expr) -> bool:
    """``index`` is bound only by ``for index in range(n)`` where ``n`` is ``len(tensor)``,
    ``tensor.size(0)`` or ``tensor.shape[0]``."""
    scope = ctx.provenance.scope_of(index).lookup(index.id)
    bindings = scope.bindings.get(index.id, []) if scope is not None else []
    if len(bindings) != 1 or bindings[0][0] != "iter":
        return False
    loop = bindings[0][1]
    if not (type(loop) is ast.Call and dotted_name(loop.func) == "range" and len(loop.args) + len(loop.keywords) == 1):
        return False
    n = argument_values(loop)[0]
    code = ctx.code(tensor)
    return ctx.code(n) in (f"len({code})", f"{code}.size(0)", f"{code}.shape[0]", f"{code}.numel()")


def per_element_advice(ctx: FileContext, iterable: ast.expr) -> str:
    code = ctx.code(iterable)
    if not isinstance(iterable, (ast.Name, ast.Attribute, ast.Call, ast.Subscript)):
        code = f"({code})"
    return ADVICE["per_element"].replace("`values = t.tolist()`", f"`values = {code}.tolist()`")


def size_advice(ctx: FileContext, node: ast.AST) -> str:
    """Advice for a value used as a size or an index."""
    return ADVICE["module_index" if _indexes_modules(ctx, node) else "size"]


def detailed_usage(ctx: FileContext, node: ast.AST) -> str:
    """:func:`usage`, with ``module_index``, ``nan_skip`` and ``leaves`` told apart."""
    use = usage(ctx, node)
    if use == "stored":
        use, node = _use_of_stored_name(ctx, node, use)
    if use == "size" and _indexes_modules(ctx, node):
        return "module_index"
    if use == "condition" and checks_finite(ctx, node):
        return "nan_skip"
    if use in ("stored", "returned", "other", "condition") and _leaves_program(ctx, node):
        return "leaves"
    return use


# What a read stored in a name is used for, most demanding first.
_STORED_USES = ("size", "condition", "output", "text", "accumulate", "accumulate_tensor", "returned")


def _use_of_stored_name(ctx: FileContext, node: ast.AST, use: str) -> tuple[str, ast.AST]:
    """``n = int(t.sum())`` then ``x[:n]``: the advice follows the name to its later reads
    in the same function (and to the read that decides it)."""
    statement = next((a for a in ctx.ancestors(node) if isinstance(a, ast.stmt)), None)
    if type(statement) is not ast.Assign or len(statement.targets) != 1:
        return use, node
    target = statement.targets[0]
    function = ctx.enclosing_function(statement)
    if type(target) is not ast.Name or function is None:
        return use, node
    after = ctx.positions.offset(statement)
    found: dict[str, ast.AST] = {}
    for name in ctx.names(target.id, function):
        if name is not target and ctx.positions.offset(name) > after:
            found.setdefault(usage(ctx, name), name)
    for candidate in _STORED_USES:
        if candidate in found:
            return candidate, found[candidate]
    return use, node


def _indexes_modules(ctx: FileContext, node: ast.AST) -> bool:
    """``self.experts[i]`` / ``layers[i]``: a subscript of a module container."""
    for parent in ctx.ancestors(node):
        if type(parent) is ast.Subscript:
            return ctx.kind(parent.value) is Kind.MODULE or _module_container_name(parent.value)  # type: ignore[attr-defined]
        if isinstance(parent, ast.stmt):
            break
    return False


def _module_container_name(expr: ast.expr) -> bool:
    name = expr.attr if type(expr) is ast.Attribute else expr.id if type(expr) is ast.Name else ""  # type: ignore[attr-defined]
    return name in ("experts", "layers", "blocks", "heads", "modules_list") or name.endswith("_experts")


def checks_finite(ctx: FileContext, node: ast.AST) -> bool:
    """Is the test around ``node`` a NaN/inf check (``torch.isnan(loss).any()``, ``loss != loss``)?"""
    test = node
    for parent in ctx.ancestors(node):
        if isinstance(parent, (ast.If, ast.While, ast.Assert, ast.IfExp)):
            test = parent.test
            break
        if isinstance(parent, ast.stmt):
            return False
    for sub in walk(test):
        t = type(sub)
        if t is ast.Call:
            name = callee_name(sub.func)  # type: ignore[attr-defined]
            if name in NAN_CHECKS:
                return True
        elif t is ast.Compare and len(sub.ops) == 1 and type(sub.ops[0]) is ast.NotEq and (  # type: ignore[attr-defined]
                ctx.code(sub.left) == ctx.code(sub.comparators[0])):  # type: ignore[attr-defined]
            return True
    return False


def _leaves_program(ctx: FileContext, node: ast.AST) -> bool:
    """Is the value written out (``json.dump``, ``torch.save``, ...) or type-checked
    (``isinstance``) in the statement that reads it?"""
    for parent in ctx.ancestors(node):
        if type(parent) is ast.Call and _serializer(parent):  # type: ignore[arg-type]
            return True
        if isinstance(parent, ast.stmt):
            break
    return False


def _serializer(call: ast.Call) -> bool:
    func = call.func
    if type(func) is ast.Name:
        return func.id == "isinstance"
    if type(func) is ast.Attribute and func.attr in SERIALIZERS:
        receiver = func.value
        return type(receiver) is ast.Name and receiver.id in ("json", "yaml", "torch", "pickle", "np", "numpy")
    return False
