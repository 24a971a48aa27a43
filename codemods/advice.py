"""How a value read from a tensor is used, and what to do about it by hand."""

from __future__ import annotations

import libcst as cst

from .context import FileContext
from .output_calls import output_call
from .provenance import Kind, dotted_name
from .tree import nodes_within, walk

SIZE_FUNCTIONS = frozenset(
    {
        "range", "zeros", "ones", "empty", "full", "arange", "randn", "rand", "randint", "eye",
        "linspace", "view", "reshape", "expand", "repeat", "narrow", "new_zeros", "new_ones",
        "new_empty", "new_full", "split", "chunk", "tile", "unflatten", "topk", "roll",
    }
)


def usage(ctx: FileContext, node: cst.CSTNode) -> str:
    """``size``, ``output``, ``accumulate`` (``accumulate_tensor`` into a tensor), ``condition``,
    ``returned``, ``stored`` or ``other``."""
    child = node
    for parent in ctx.ancestors(node):
        if isinstance(parent, cst.Slice) or isinstance(parent, cst.SubscriptElement):
            return "size"
        if isinstance(parent, cst.Call):
            func = parent.func
            name = func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else ""
            if output_call(ctx, parent) is not None:
                return "output"
            if name in SIZE_FUNCTIONS and child is not func:
                return "size"
        if isinstance(parent, (cst.FormattedString, cst.FormattedStringExpression)):
            return "output"
        if isinstance(parent, cst.BinaryOperation) and isinstance(parent.operator, cst.Modulo) and isinstance(
            parent.left, (cst.SimpleString, cst.ConcatenatedString, cst.FormattedString)
        ):
            return "output"  # ``"%.3f" % loss``
        if isinstance(parent, cst.AugAssign):
            # ``totals[0] += loss.item()``: the total is a tensor already.
            return "accumulate_tensor" if ctx.kind(parent.target) is Kind.TENSOR else "accumulate"
        if isinstance(parent, cst.CompIf):
            return "condition"  # ``[x for x in xs if t]``: the filter decides, whatever the list is for
        if isinstance(parent, (cst.If, cst.While, cst.Assert, cst.IfExp, cst.BooleanOperation)):
            return "condition"
        if isinstance(parent, cst.Return):
            return "returned"
        if isinstance(parent, (cst.Assign, cst.AnnAssign, cst.Dict, cst.List, cst.Tuple)):
            return "stored"
        if isinstance(parent, cst.BaseStatement):
            break
        child = parent
    return "other"


ADVICE = {
    "size": (
        "the value is used as a Python size or index, so it must reach the host. Compute it in the "
        "data pipeline or pass it in as a Python int; inside compiled code, `torch._check` bounds let an "
        "unbacked size compile without a break"
    ),
    "output": (
        "printing or logging every step waits for the device each time. Log every N steps, or pass the "
        "value read with `.item()` straight into the call: `fixitem apply` defers such calls into an "
        "on-device buffer"
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


def advice(ctx: FileContext, node: cst.CSTNode) -> str:
    return unseen_callee_advice(ctx, node) or ADVICE[detailed_usage(ctx, node)]


# Parts of a function's name that say it writes output (``print0``, ``log_rank0``, ``master_print``).
_OUTPUT_WORDS = ("print", "log", "write", "echo", "report", "info", "warn", "debug")


def unseen_callee_advice(ctx: FileContext, node: cst.CSTNode) -> str:
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


def _receiving_call(ctx: FileContext, node: cst.CSTNode) -> cst.Call | None:
    """The call that ``node`` is an argument of, directly or through the text or arithmetic
    built from it for that argument."""
    for parent in ctx.ancestors(node):
        if isinstance(parent, cst.Arg):
            call = ctx.parents.get(parent)
            return call if isinstance(call, cst.Call) and parent in call.args else None
        if not isinstance(parent, (cst.FormattedString, cst.FormattedStringExpression, cst.BinaryOperation,
                                   cst.UnaryOperation, cst.ConcatenatedString)):
            return None
    return None


def _defined_elsewhere(ctx: FileContext, func: cst.BaseExpression) -> str:
    """Where ``func`` comes from when it is a function of another module of the program
    (not the standard library, torch or numpy, whose functions fixitem knows or that need
    numbers): "in another module (`utils`)"; "" when it is defined in this file or not known."""
    import sys

    root = func
    while isinstance(root, cst.Attribute):
        root = root.value
    if not isinstance(root, cst.Name):
        return ""
    owner = ctx.provenance.scope_of(func).lookup(root.value)
    bindings = owner.bindings.get(root.value, []) if owner is not None else []
    if not bindings or any(how != "import" for how, _ in bindings):
        return ""  # defined here, a parameter, a builtin
    origin = _import_origin(ctx, root.value)
    top = origin.lstrip(".").split(".")[0]
    if not origin or top in sys.stdlib_module_names or top in ("torch", "numpy", "builtins"):
        return ""
    if isinstance(func, cst.Attribute):
        return f"in `{origin}`" if func.value is root else ""
    return f"in another module (`{origin}`)"


def _import_origin(ctx: FileContext, name: str) -> str:
    """The module ``name`` is imported from (``utils``, ``.utils``), or the module it is."""
    for node in ctx.nodes(cst.ImportFrom):
        assert isinstance(node, cst.ImportFrom)
        if isinstance(node.names, cst.ImportStar):
            continue
        for alias in node.names:
            local = alias.asname.name if alias.asname is not None else alias.name
            if isinstance(local, cst.Name) and local.value == name:
                return "." * len(node.relative) + (dotted_name(node.module) or "" if node.module else "")
    for node in ctx.nodes(cst.Import):
        assert isinstance(node, cst.Import)
        for alias in node.names:
            full = dotted_name(alias.name) or ""
            local = alias.asname.name.value if alias.asname is not None and isinstance(alias.asname.name, cst.Name) else full.split(".")[0]
            if local == name:
                return full
    return ""


def _read_tensor(node: cst.CSTNode) -> cst.CSTNode:
    """``t`` of ``t.item()`` / ``float(t)``; the node itself otherwise."""
    if isinstance(node, cst.Call):
        if isinstance(node.func, cst.Attribute) and node.func.attr.value in ("item", "tolist"):
            return node.func.value
        if isinstance(node.func, cst.Name) and node.func.value in ("float", "int", "bool") and node.args:
            return node.args[0].value
    return node


def synchronize_advice(ctx: FileContext, node: cst.CSTNode) -> str:
    """``torch.cuda.synchronize()``: keep it where the same function reads a clock, or,
    for a helper (``def sync(device): torch.cuda.synchronize(device)``), where a
    function of the file that calls the helper does."""
    callees, timed, clock_read = ctx.memo("timing", lambda: _timing(ctx))
    function = ctx.enclosing_function(node)
    if function is None:
        return ADVICE["synchronize_timing" if clock_read else "synchronize"]
    if id(function) in timed:
        return ADVICE["synchronize_timing"]
    for call in callees.get(function.name.value, ()):
        if any(id(caller) in timed for caller in ctx.ancestors(call)
               if isinstance(caller, cst.FunctionDef) and caller is not function):
            return ADVICE["synchronize_timing"]
    return ADVICE["synchronize"]


def _timing(ctx: FileContext) -> tuple[dict[str, list[cst.Call]], set[int], bool]:
    """For :func:`synchronize_advice`, from one pass over the calls of the file: the calls by
    the last part of the name called (``self.sync(...)``: ``sync``), the ids of the functions
    that read a clock (at any depth), and whether the file reads one anywhere."""
    callees: dict[str, list[cst.Call]] = {}
    timed: set[int] = set()
    clock_read = False
    for call in ctx.nodes(cst.Call):
        assert isinstance(call, cst.Call)
        if isinstance(call.func, (cst.Name, cst.Attribute)):
            callees.setdefault((dotted_name(call.func) or "").split(".")[-1], []).append(call)
        q = ctx.provenance.imports.qualify(call.func) or ""
        if q in CLOCKS or q.endswith(".elapsed_time"):
            clock_read = True
            timed.update(id(f) for f in ctx.ancestors(call) if isinstance(f, cst.FunctionDef))
    return callees, timed, clock_read


def per_element(ctx: FileContext, value: cst.CSTNode) -> cst.BaseExpression | None:
    """The tensor a loop or comprehension iterates when ``value`` is its variable
    (``int(i) for i in idx`` gives ``idx``), or an element of it picked by the index of
    a loop over its length (``int(idx[i])`` in ``for i in range(idx.size(0))``), else None."""
    if isinstance(value, cst.Subscript) and len(value.slice) == 1 and isinstance(value.slice[0].slice, cst.Index):
        index = value.slice[0].slice.value
        if isinstance(index, cst.Name) and ctx.certainly_tensor(value.value) and _loops_over_length_of(
            ctx, index, value.value
        ):
            return value.value
        return None
    if not isinstance(value, cst.Name):
        return None
    scope = ctx.provenance.scope_of(value).lookup(value.value)
    if scope is None:
        return None
    bindings = scope.bindings.get(value.value, [])
    if len(bindings) != 1:
        return None
    how, node = bindings[0]
    if how == "iter" and isinstance(node, cst.BaseExpression) and ctx.kind(node) is Kind.TENSOR:
        return node
    return None


def _loops_over_length_of(ctx: FileContext, index: cst.Name, tensor: cst.BaseExpression) -> bool:
    """``index`` is bound only by ``for index in range(n)`` where ``n`` is ``len(tensor)``,
    ``tensor.size(0)`` or ``tensor.shape[0]``."""
    scope = ctx.provenance.scope_of(index).lookup(index.value)
    bindings = scope.bindings.get(index.value, []) if scope is not None else []
    if len(bindings) != 1 or bindings[0][0] != "iter":
        return False
    loop = bindings[0][1]
    if not (isinstance(loop, cst.Call) and dotted_name(loop.func) == "range" and len(loop.args) == 1):
        return False
    n = loop.args[0].value
    code = ctx.code(tensor)
    return ctx.code(n) in (f"len({code})", f"{code}.size(0)", f"{code}.shape[0]", f"{code}.numel()")


def per_element_advice(ctx: FileContext, iterable: cst.BaseExpression) -> str:
    code = ctx.code(iterable)
    if not isinstance(iterable, (cst.Name, cst.Attribute, cst.Call, cst.Subscript)):
        code = f"({code})"
    return ADVICE["per_element"].replace("`values = t.tolist()`", f"`values = {code}.tolist()`")


def size_advice(ctx: FileContext, node: cst.CSTNode) -> str:
    """Advice for a value used as a size or an index."""
    return ADVICE["module_index" if _indexes_modules(ctx, node) else "size"]


def detailed_usage(ctx: FileContext, node: cst.CSTNode) -> str:
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
_STORED_USES = ("size", "condition", "output", "accumulate", "accumulate_tensor", "returned")


def _use_of_stored_name(ctx: FileContext, node: cst.CSTNode, use: str) -> tuple[str, cst.CSTNode]:
    """``n = int(t.sum())`` then ``x[:n]``: the advice follows the name to its later reads
    in the same function (and to the read that decides it)."""
    statement = next((a for a in ctx.ancestors(node) if isinstance(a, cst.BaseSmallStatement)), None)
    if not isinstance(statement, cst.Assign) or len(statement.targets) != 1:
        return use, node
    target = statement.targets[0].target
    function = ctx.enclosing_function(statement)
    if not isinstance(target, cst.Name) or function is None:
        return use, node
    after = ctx.positions.offset(statement)
    found: dict[str, cst.CSTNode] = {}
    for name in nodes_within(function, cst.Name):
        if name.value == target.value and name is not target and ctx.positions.offset(name) > after:
            found.setdefault(usage(ctx, name), name)
    for candidate in _STORED_USES:
        if candidate in found:
            return candidate, found[candidate]
    return use, node


def _indexes_modules(ctx: FileContext, node: cst.CSTNode) -> bool:
    """``self.experts[i]`` / ``layers[i]``: a subscript of a module container."""
    for parent in ctx.ancestors(node):
        if isinstance(parent, cst.Subscript):
            return ctx.kind(parent.value) is Kind.MODULE or _module_container_name(parent.value)
        if isinstance(parent, cst.BaseStatement):
            break
    return False


def _module_container_name(expr: cst.BaseExpression) -> bool:
    name = expr.attr.value if isinstance(expr, cst.Attribute) else expr.value if isinstance(expr, cst.Name) else ""
    return name in ("experts", "layers", "blocks", "heads", "modules_list") or name.endswith("_experts")


def checks_finite(ctx: FileContext, node: cst.CSTNode) -> bool:
    """Is the test around ``node`` a NaN/inf check (``torch.isnan(loss).any()``, ``loss != loss``)?"""
    test = node
    for parent in ctx.ancestors(node):
        if isinstance(parent, (cst.If, cst.While, cst.Assert, cst.IfExp)):
            test = parent.test
            break
        if isinstance(parent, cst.BaseStatement):
            return False
    for sub in walk(test):
        if isinstance(sub, cst.Call):
            func = sub.func
            name = func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else ""
            if name in NAN_CHECKS:
                return True
        if isinstance(sub, cst.Comparison) and len(sub.comparisons) == 1:
            target = sub.comparisons[0]
            if isinstance(target.operator, cst.NotEqual) and ctx.code(sub.left) == ctx.code(target.comparator):
                return True
    return False


def _leaves_program(ctx: FileContext, node: cst.CSTNode) -> bool:
    """Is the value written out (``json.dump``, ``torch.save``, ...) or type-checked
    (``isinstance``) in the statement that reads it?"""
    for parent in ctx.ancestors(node):
        if isinstance(parent, cst.Call) and _serializer(parent):
            return True
        if isinstance(parent, cst.BaseStatement):
            break
    return False


def _serializer(call: cst.Call) -> bool:
    func = call.func
    if isinstance(func, cst.Name):
        return func.value == "isinstance"
    if isinstance(func, cst.Attribute) and func.attr.value in SERIALIZERS:
        receiver = func.value
        return isinstance(receiver, cst.Name) and receiver.value in ("json", "yaml", "torch", "pickle", "np", "numpy")
    return False
