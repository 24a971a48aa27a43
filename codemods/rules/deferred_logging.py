"""FX201: output calls that read tensor values, deferred with ``fixitem.runtime``."""

from __future__ import annotations

import builtins
import keyword
import re
import string
from collections.abc import Iterator
from dataclasses import dataclass, field

import libcst as cst

from ..context import FileContext
from ..effects import PURE_BUILTINS
from ..dtypes import certainly_integer
from ..exceptions import catching_handler, read_exceptions
from ..output_calls import (
    OutputCall,
    OutputKind,
    flushes_now,
    live_context,
    logger_origin,
    output_call,
    output_wrappers,
    own_file,
    stable_receiver,
)
from ..provenance import COMPREHENSIONS, Certainty, Kind, all_params, dotted_name, is_text
from ..rule import Fix, Invalid, Report, Rule, Safety, Valid, dedent
from ..syncs import SyncSite
from ..tensor_values import LINE_LENGTH, one_argument_per_line, sites_within
from ..tree import children_of, walk

READ_KINDS = ("item", "float", "int")
BUILTINS = frozenset(dir(builtins))
LITERALS = (cst.SimpleString, cst.Integer, cst.Float, cst.Imaginary, cst.ConcatenatedString, cst.FormattedString)


def _is_deferred_record(ctx: FileContext, call: cst.Call) -> bool:
    return ctx.provenance.imports.qualify(call.func) == "fixitem.runtime.record"


@dataclass
class _Plan:
    stmt: cst.Expr
    call: cst.Call
    found: OutputCall
    reads: list[SyncSite] = field(default_factory=list)
    blocker: str = ""  # why the call cannot be deferred
    unsafe: list[str] = field(default_factory=list)
    new: cst.Call | None = None


class _Collector:
    """Walks the arguments of an output call: what is passed to ``record``, reads, problems.

    Everything the original evaluates when it makes the call is evaluated at
    record time too and passed in as a value: a computed expression
    (``len(data)``, ``opt.param_groups[0]["lr"]``) or an attribute
    (``trainer.iter_num``) is passed whole, a tensor read (``loss.item()``)
    passes the tensor. Only plain names stay names; what is evaluated only
    sometimes (a branch of ``a if c else b``, the right of ``and`` / ``or``) and
    the bodies of lambdas and comprehensions are left as they are.
    """

    def __init__(self, ctx: FileContext, reads: dict[cst.CSTNode, SyncSite], other_sites: set[cst.CSTNode]) -> None:
        self.ctx = ctx
        self.reads = reads
        self.other_sites = other_sites
        self.aliases = ctx.provenance.imports.aliases
        self.names: dict[str, list[tuple[cst.Name, str]]] = {}  # name -> (node, use)
        self.order: list[tuple[str, object]] = []  # ("name", str), ("read", node) or ("expr", node)
        self.problem = ""
        self.replayed: list[cst.Call] = []  # calls left in the lambda that are not known to be pure

    def _use(self, name: cst.Name, use: str) -> None:
        if name.value not in self.names:
            self.order.append(("name", name.value))
        self.names.setdefault(name.value, []).append((name, use))

    def _fail(self, why: str) -> None:
        self.problem = self.problem or why

    def walk(self, node: cst.CSTNode, bound: frozenset[str] = frozenset(), nested: bool = False,
             lazy: bool = False) -> None:
        """``nested``: inside a lambda or comprehension of the call; ``lazy``: evaluated only sometimes."""
        if isinstance(node, (cst.Await, cst.Yield, cst.NamedExpr)):
            self._fail("it contains `await`, `yield` or `:=`, which a lambda cannot hold")
            return
        if node in self.reads:
            value = self.reads[node].value
            if nested:
                self._fail("a tensor value is read inside a lambda or comprehension")
                return
            if lazy and not isinstance(value, cst.Name):
                self._fail("a tensor value is read in a part of the call that is evaluated only sometimes")
                return
            self.order.append(("read", node))
            if any(n in self.reads or n in self.other_sites for n in walk(value)):
                self._fail("a tensor value is read inside another read")
            if isinstance(value, cst.Name) and value.value not in bound:
                self._use(value, "read")
            return
        if isinstance(node, cst.BaseExpression) and not nested and not lazy and self.capturable(node):
            self.order.append(("expr", node))
            return
        if isinstance(node, cst.Name):
            if node.value in bound or node.value in BUILTINS or node.value in self.aliases or self._module_function(node):
                return
            self._use(node, "other")
            return
        if isinstance(node, cst.Attribute):
            self.walk(node.value, bound, nested, lazy)
            return
        if isinstance(node, cst.Call):
            func = node.func
            if not self._pure_call(node):
                self.replayed.append(node)
            self.walk(func.value if isinstance(func, cst.Attribute) else func, bound, nested, lazy)
            for arg in node.args:
                self.walk(arg, bound, nested, lazy)
            return
        if isinstance(node, cst.Arg):
            if node.star and (any(n in self.reads or n in self.other_sites for n in walk(node.value))
                              or self.ctx.kind(node.value) is Kind.TENSOR):
                self._fail("a starred argument reads a tensor")
                return
            self.walk(node.value, bound, nested, lazy)
            return
        if isinstance(node, cst.FormattedStringExpression):
            if node.equal is not None and not isinstance(node.expression, cst.Name):
                # f"{loss.item()=}" prints the expression's source: it must stay as written.
                self._fail("an f-string `=` prints the source text of its expression")
                return
            self.walk(node.expression, bound, nested, lazy)
            for part in node.format_spec or ():
                self.walk(part, bound, nested, lazy)
            return
        if isinstance(node, cst.IfExp):
            self.walk(node.test, bound, nested, lazy)
            self.walk(node.body, bound, nested, True)
            self.walk(node.orelse, bound, nested, True)
            return
        if isinstance(node, cst.BooleanOperation):
            self.walk(node.left, bound, nested, lazy)
            self.walk(node.right, bound, nested, True)
            return
        if isinstance(node, cst.Lambda):
            params = frozenset(p.name.value for p in all_params(node.params))
            for p in all_params(node.params):
                if p.default is not None:
                    self.walk(p.default, bound, nested, lazy)
            self.walk(node.body, bound | params, True, lazy)
            return
        if isinstance(node, COMPREHENSIONS):
            targets: set[str] = set()
            comp = node.for_in
            while comp is not None:
                targets |= {n.value for n in walk(comp.target) if isinstance(n, cst.Name)}
                comp = comp.inner_for_in
            for child in children_of(node):
                self.walk(child, bound | targets, True, lazy)
            return
        for child in children_of(node):
            self.walk(child, bound, nested, lazy)

    def _pure_call(self, call: cst.Call) -> bool:
        """A call that gives the same result at replay: a builtin that builds a value
        (``round``, ``str``, ``min``), ``math`` / ``numpy``, ``"...".format`` and ``" ".join``."""
        func = call.func
        if isinstance(func, cst.Name):
            return func.value in PURE_BUILTINS and self.ctx.provenance.scope_of(call).lookup(func.value) is None
        if isinstance(func, cst.Attribute) and func.attr.value in ("format", "join") and \
                isinstance(func.value, (cst.SimpleString, cst.ConcatenatedString)):
            return True
        local = (dotted_name(func) or "").split(".")[0]
        qualified = self.ctx.provenance.imports.qualify(func) or ""
        return local in self.aliases and qualified.split(".")[0] in ("math", "numpy")

    def _module_function(self, name: cst.Name) -> bool:
        """A function or class defined once at the module level: the same object at replay."""
        provenance = self.ctx.provenance
        module_scope = provenance.scopes[self.ctx.module]
        if provenance.scope_of(name).lookup(name.value) is not module_scope:
            return False
        if module_scope.bindings.get(name.value) != [("opaque", None)]:
            return False
        return any(isinstance(s, (cst.FunctionDef, cst.ClassDef)) and s.name.value == name.value for s in self.ctx.module.body)

    def capturable(self, node: cst.BaseExpression) -> bool:
        """A value the call computes without tensor reads: evaluate it at record time.

        Plain names, literals, lambdas and containers written out (whose parts are
        looked at one by one) are not; neither is an attribute of an imported
        module (``sys.stderr``, ``logging.INFO``: looked up at replay) nor what
        holds a tensor read.
        """
        if isinstance(node, (cst.Name, *LITERALS, cst.Dict, cst.List, cst.Tuple, cst.Set, cst.Lambda,
                             cst.Ellipsis, cst.StarredElement)):
            return False
        if isinstance(node, cst.Attribute):
            root = dotted_name(node)
            if root is not None and root.split(".")[0] in self.aliases:
                return False
        for sub in walk(node):
            if sub in self.reads or sub in self.other_sites:
                return False
            if isinstance(sub, (cst.Await, cst.Yield, cst.NamedExpr)):
                return False
            if isinstance(sub, cst.FormattedStringExpression) and sub.equal is not None:
                return False
        return True


def _prints_as_number(ctx: FileContext, expr: cst.BaseExpression, formats: dict[cst.CSTNode, tuple[str, str]]) -> bool:
    """Would ``expr``, passed to ``record``, be written differently at replay?

    The runtime replays every one-element tensor it is given as a Python number:
    ``print(x.mean())`` would write ``0.1083`` where it wrote ``tensor(0.1083,
    grad_fn=...)``. Only a value known not to be a tensor, or one formatted with a
    numeric type code (``:.4f``, ``%d``: a one-element tensor formats as its number
    there), is written the same."""
    if ctx.certainty(expr) is Certainty.NOT_TENSOR:
        return False
    if isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Attribute) and \
            ctx.kind(expr.value) not in (Kind.TENSOR, Kind.MODULE):
        return False  # ``self.config.hidden_size``: a setting of an object that is not a module
    if _hyperparameter(expr):
        return False  # a learning rate: a number (as a one-element tensor, copied and replayed as one)
    style_code = formats.get(expr)
    return style_code is None or style_code[1] not in (_NUMERIC_FORMAT if style_code[0] == "format" else _NUMERIC_PERCENT)


def _is_plain(ctx: FileContext, name: cst.Name) -> bool:
    """A number or a string: formatting it later gives the same text."""
    kind = ctx.kind(name)
    if kind is Kind.NUMBER:
        return True
    scope = ctx.provenance.scope_of(name).lookup(name.value)
    if scope is None:
        return False
    bindings = scope.bindings.get(name.value, [])
    return bool(bindings) and all(_fresh_binding(ctx, how, value) for how, value in bindings)


def _fresh_binding(ctx: FileContext, how: str, value: cst.CSTNode | None) -> bool:
    """Bound to a string, or to a fresh result nothing else holds (``a, b = f()``)?

    A function's result or arithmetic is a new object: nothing else can mutate it
    before the replay. Parameters, loop variables, aliases of other names and
    container literals (which the code may go on to fill) may change.
    """
    if how not in ("value", "unpack"):
        return False
    if isinstance(value, (cst.SimpleString, cst.ConcatenatedString, cst.FormattedString, cst.Integer, cst.Float)):
        return True
    if isinstance(value, (cst.Call, cst.BinaryOperation, cst.UnaryOperation, cst.Comparison)):
        return ctx.kind(value) not in (Kind.TENSOR, Kind.MODULE, Kind.OTHER) or _is_text(value) or how == "unpack"
    return False


def _may_hold_tensors(ctx: FileContext, expr: cst.BaseExpression,
                      formats: dict[cst.CSTNode, tuple[str, str]]) -> bool:
    """May the value passed for ``expr`` be a tensor, or a container of them?

    The runtime replays a recorded tensor as the number ``.item()`` gives (and
    rejects one of more elements): such a value is passed with
    ``deferred.by_reference(...)`` instead, so that ``fn`` gets the object itself
    and prints what the original printed. Not for a number, a string, a module,
    a name bound only to literals, nor a value formatted as a number (``:.3f``,
    ``%d``: a tensor formatted so prints its number).
    """
    kind = ctx.kind(expr)
    if kind in (Kind.NUMBER, Kind.MODULE, Kind.NUMPY) or _is_text(expr) or isinstance(expr, LITERALS):
        return False
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Modulo) and is_text(expr.left):
        return False  # ``"it %d" % (n,)``: a string
    if isinstance(expr, (cst.Attribute, cst.Subscript)) and _immutable(ctx, expr, formats):
        return False  # ``x.shape``, ``opt.param_groups[0]["lr"]``, a value formatted as a number
    style_code = formats.get(expr)
    if style_code is not None and style_code[1] in (_NUMERIC_FORMAT if style_code[0] == "format" else _NUMERIC_PERCENT):
        return False
    if isinstance(expr, cst.Attribute) and not _of_a_module(ctx, expr):
        # ``trainer.iter_num``, ``self.config.block_size``: passed as a value (and, unless known
        # not to change, the fix says it is read at replay).
        return False
    if isinstance(expr, (cst.List, cst.Tuple, cst.Set)):
        return any(isinstance(e, cst.StarredElement) or _may_hold_tensors(ctx, e.value, {}) for e in expr.elements)
    if isinstance(expr, (cst.ListComp, cst.SetComp, cst.GeneratorExp)):
        return _may_hold_tensors(ctx, expr.elt, {})
    if isinstance(expr, cst.DictComp):
        return _may_hold_tensors(ctx, expr.value, {})
    if isinstance(expr, cst.Name):
        scope = ctx.provenance.scope_of(expr).lookup(expr.value)
        bindings = scope.bindings.get(expr.value, []) if scope is not None else []
        if bindings and all(how == "value" and (isinstance(v, LITERALS) or _is_text(v)) for how, v in bindings):
            return False
    return kind in (Kind.UNKNOWN, Kind.OTHER)


def _of_a_module(ctx: FileContext, expr: cst.BaseExpression) -> bool:
    """An attribute of an ``nn.Module`` itself (``self.scale`` in a module class,
    ``self.fc.weight``): modules hold tensors, so one fixitem cannot place may be
    a tensor. (``self.config.hidden_size`` is an attribute of the config.)"""
    if not isinstance(expr, cst.Attribute):
        return False
    base = expr.value
    if ctx.kind(base) is Kind.MODULE:
        return True
    cls = ctx.provenance.enclosing_class(expr)
    return (isinstance(base, cst.Name) and base.value == "self" and cls is not None
            and cls.name.value in ctx.provenance.module_classes)


def _is_text(expr: cst.CSTNode) -> bool:
    return isinstance(expr, cst.Call) and dotted_name(expr.func) in ("str", "repr", "format")


# What a receiver taken at record time is called in the lambda when its own spelling says nothing.
_KIND_RECEIVERS = {OutputKind.METRICS: "writer", OutputKind.LOGGER: "logger", OutputKind.LOGGING: "logger",
                   OutputKind.PRINT: "stream", OutputKind.PROGRESS: "bar"}


def _receiver_hint(expr: cst.BaseExpression) -> str:
    """What a person would call the object a method is called on: ``self.writer``
    -> ``writer``, ``writers[i]`` -> ``writer``, ``get_writer(i)`` -> ``writer``,
    ``logging.getLogger(name)`` -> ``logger``."""
    if isinstance(expr, cst.Name):
        return expr.value.strip("_")
    if isinstance(expr, cst.Attribute):
        return expr.attr.value.strip("_")
    if isinstance(expr, cst.Subscript):
        base = _receiver_hint(expr.value)
        if len(base) > 2 and base.endswith("s") and not base.endswith(("ss", "us", "is")):
            return base[:-1]
        return ""
    if isinstance(expr, cst.Call):
        name = _receiver_hint(expr.func)
        for prefix in ("get_", "get", "make_", "create_"):
            if name.startswith(prefix) and len(name) > len(prefix):
                rest = name[len(prefix):]
                return rest[0].lower() + rest[1:]
        return ""
    return ""


def _unknown_loggers(ctx: FileContext, call: cst.Call, found: OutputCall) -> list[str]:
    """Why the logger the call writes to (itself, or through a wrapper of the file) is
    not known to be a ``logging`` one."""
    if found.kind is OutputKind.LOGGER:
        why = logger_origin(ctx, call)
        return [why] if why else []
    if found.kind is not OutputKind.WRAPPER or found.wrapper is None:
        return []
    problems: list[str] = []
    seen: set[cst.FunctionDef] = set()
    todo = [found.wrapper]
    while todo:
        wrapper = todo.pop()
        if wrapper in seen:
            continue
        seen.add(wrapper)
        for inner in walk(wrapper.body):
            if isinstance(inner, cst.Call):
                inner_found = output_call(ctx, inner)
                if inner_found is None:
                    continue
                if inner_found.kind is OutputKind.LOGGER:
                    why = logger_origin(ctx, inner)
                    if why:
                        problems.append(why)
                elif inner_found.kind is OutputKind.WRAPPER and inner_found.wrapper is not None:
                    todo.append(inner_found.wrapper)
    return problems


# A ``str.format`` / f-string spec: [[fill]align][sign][z][#][0][width][grouping][.precision][type].
_FORMAT_SPEC = re.compile(r"(?:.?[<>=^])?[+\- ]?z?#?0?\d*[_,]?(?:\.\d+)?(?P<type>[bcdeEfFgGnosxX%])?\Z", re.S)
_PERCENT = re.compile(r"%(?P<key>\([^)]*\))?[#0\- +]*(?P<width>\*|\d+)?(?:\.(?P<precision>\*|\d+))?[hlL]?"
                      r"(?P<type>[diouxXeEfFgGcrsa%])")
# Type codes that only format numbers (a value they format without raising is a number).
_NUMERIC_FORMAT = frozenset("bcdeEfFgGnoxX%")
_NUMERIC_PERCENT = frozenset("diouxXeEfFgG")  # not `%c`: it takes a one-character string too
# Type codes that raise on a float: ``f"{1.5:d}"``, ``"%x" % 1.5``.
_INTEGER_FORMAT = frozenset("bcdoxX")
_INTEGER_PERCENT = frozenset("cxXo")


def _literal_text(node: cst.BaseExpression) -> str | None:
    if isinstance(node, (cst.SimpleString, cst.ConcatenatedString)):
        value = node.evaluated_value
        return value if isinstance(value, str) else None
    return None


def _format_fields(text: str) -> list[tuple[str, str]] | None:
    """``"{} {x:.3f}"`` -> ``[("0", ""), ("x", ".3f")]``: field and spec of each
    replacement field; None where fixitem cannot follow (nested fields, ``!r``)."""
    fields: list[tuple[str, str]] = []
    auto = 0
    try:
        parsed = list(string.Formatter().parse(text))
    except ValueError:
        return None
    for _, name, spec, conversion in parsed:
        if name is None:
            continue
        if conversion or "{" in (spec or ""):
            fields.append(("", ""))  # formatted as text, or a spec only known at run time
            continue
        if name == "":
            name = str(auto)
            auto += 1
        fields.append((name, spec or ""))
    return fields


def _formats(ctx: FileContext, call: cst.Call, found: OutputCall) -> dict[cst.CSTNode, tuple[str, str]]:
    """The values of the call that are formatted with a type code, and how:
    ``{node: ("format", "d")}`` for ``f"{x:d}"`` and ``"{:d}".format(x)``,
    ``("percent", "x")`` for ``"%x" % x``, ``("log", "f")`` for the arguments of
    ``logger.info("%.3f", x)`` (``logging`` reports a formatting error itself)."""
    formats: dict[cst.CSTNode, tuple[str, str]] = {}
    for node in walk(call):
        if isinstance(node, cst.FormattedStringExpression):
            spec = node.format_spec
            if node.conversion is not None or not spec or not all(isinstance(p, cst.FormattedStringText) for p in spec):
                continue
            match = _FORMAT_SPEC.match("".join(p.value for p in spec))  # type: ignore[union-attr]
            if match and match["type"]:
                formats[node.expression] = ("format", match["type"])
        elif isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value == "format":
            text = _literal_text(node.func.value)
            fields = _format_fields(text) if text is not None else None
            if not fields or any(a.star for a in node.args):
                continue
            positional = [a.value for a in node.args if a.keyword is None]
            keywords = {a.keyword.value: a.value for a in node.args if a.keyword is not None}
            for name, spec in fields:
                match = _FORMAT_SPEC.match(spec) if spec else None
                if not match or not match["type"]:
                    continue
                value = positional[int(name)] if name.isdigit() and int(name) < len(positional) else keywords.get(name)
                if value is not None:
                    formats[value] = ("format", match["type"])
        elif isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Modulo):
            text = _literal_text(node.left)
            if text is not None:
                right = node.right
                values = [e.value for e in right.elements] if isinstance(right, cst.Tuple) else [right]
                formats.update(_percent_formats(text, values, "percent"))
    if found.kind.logs and call.args and call.args[0].keyword is None:
        text = _literal_text(call.args[0].value)
        rest = [a for a in call.args[1:] if a.keyword is None]
        if text is not None and not any(a.star for a in rest):
            formats.update(_percent_formats(text, [a.value for a in rest], "log"))
    return formats


def _percent_formats(text: str, values: list[cst.BaseExpression], style: str) -> dict[cst.CSTNode, tuple[str, str]]:
    conversions = [m for m in _PERCENT.finditer(text) if m["type"] != "%"]
    if any(m["key"] or m["width"] == "*" or m["precision"] == "*" for m in conversions) or len(conversions) != len(values):
        return {}  # a mapping, a ``*`` width, or a count fixitem does not see
    return {value: (style, m["type"]) for value, m in zip(values, conversions)}


def _immutable(ctx: FileContext, expr: cst.BaseExpression, formats: dict[cst.CSTNode, tuple[str, str]]) -> bool:
    """Does ``expr`` give a value that cannot change before the replay?

    A number; a tensor's or an array's metadata (``x.shape``, ``x.dtype``, ``x.shape[0]``);
    a name (``self.__class__.__name__``);
    a value formatted as a number (``:.4f``, ``%d``): an array of more than one
    element cannot be, so it is a number (an array of one element formatted with
    ``%`` is the exception, which numpy deprecates).
    """
    if ctx.kind(expr) is Kind.NUMBER:
        return True
    style_code = formats.get(expr)
    if style_code is not None:
        style, code = style_code
        if code in (_NUMERIC_FORMAT if style == "format" else _NUMERIC_PERCENT):
            return True
    if isinstance(expr, cst.Attribute):
        attr = expr.attr.value
        if attr in _NAME_ATTRIBUTES:
            return True  # ``self.__class__.__name__``: a string
        base = ctx.kind(expr.value)
        return (base is Kind.TENSOR and attr in _TENSOR_METADATA) or (base is Kind.NUMPY and attr in _NUMPY_METADATA)
    if isinstance(expr, cst.Subscript) and isinstance(expr.value, cst.Attribute):
        return expr.value.attr.value == "shape" and _immutable(ctx, expr.value, {})
    return _hyperparameter(expr)


def _hyperparameter(expr: cst.BaseExpression) -> bool:
    """``opt.param_groups[0]["lr"]``, ``sched.get_last_lr()[0]``: a hyper-parameter of
    a torch optimizer, a number (or a tuple of them, or a one-element tensor,
    which the runtime copies); the optimizer puts a new value in its place, it
    does not change the old one."""
    if not (isinstance(expr, cst.Subscript) and len(expr.slice) == 1 and isinstance(expr.slice[0].slice, cst.Index)):
        return False
    base = expr.value
    if isinstance(base, cst.Call) and isinstance(base.func, cst.Attribute):
        return base.func.attr.value == "get_last_lr" and not base.args
    key = expr.slice[0].slice.value
    return (isinstance(key, cst.SimpleString) and isinstance(base, cst.Subscript)
            and isinstance(base.value, cst.Attribute) and base.value.attr.value == "param_groups")


# Attributes that describe a tensor or an array rather than hold its data (``shape`` is a tuple).
_TENSOR_METADATA = frozenset({"shape", "dtype", "device", "ndim", "requires_grad", "is_cuda", "is_leaf", "layout",
                              "names", "nbytes", "itemsize"})
_NUMPY_METADATA = frozenset({"shape", "dtype", "ndim", "size", "nbytes", "itemsize"})
# Attributes that name things: strings.
_NAME_ATTRIBUTES = frozenset({"__name__", "__qualname__", "__module__"})


def _float_read(ctx: FileContext, node: cst.CSTNode, reads: dict[cst.CSTNode, SyncSite]) -> SyncSite | None:
    """A read in ``node`` whose Python value may be a float (``loss.item()``, ``float(t)``)."""
    site = reads.get(node)
    if site is not None:
        if site.kind == "float" or (site.kind == "item" and not certainly_integer(ctx, site.value)):
            return site
        return None
    if isinstance(node, (cst.BinaryOperation, cst.UnaryOperation)):
        for child in children_of(node):
            found = _float_read(ctx, child, reads)
            if found is not None:
                return found
    return None


def _raising_formats(ctx: FileContext, formats: dict[cst.CSTNode, tuple[str, str]],
                     reads: dict[cst.CSTNode, SyncSite]) -> list[str]:
    """``f"{loss.item():d}"``: the original raises where it runs; replayed, the
    error comes later (another step has run, the checkpoint may be written)."""
    problems = []
    for node, (style, code) in formats.items():
        if code not in (_INTEGER_FORMAT if style == "format" else _INTEGER_PERCENT if style == "percent" else ()):
            continue
        site = _float_read(ctx, node, reads)
        if site is not None:
            spec = f"`:{code}`" if style == "format" else f"`%{code}`"
            problems.append(f"{spec} rejects a float: formatting `{ctx.code(site.node)}` may raise at replay, "
                            "later than the original")
    return problems


REDIRECTS = frozenset({"contextlib.redirect_stdout", "contextlib.redirect_stderr"})


def _redirected(ctx: FileContext, stmt: cst.CSTNode) -> str:
    """The ``with redirect_stdout(...)`` around ``stmt`` in its function, if any."""
    for parent in ctx.ancestors(stmt):
        if isinstance(parent, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            return ""
        if isinstance(parent, cst.With):
            for item in parent.items:
                if isinstance(item.item, cst.Call) and ctx.provenance.imports.qualify(item.item.func) in REDIRECTS:
                    return ctx.code(item.item.func)
    return ""


class _Indent(cst.CSTTransformer):
    """Indent the continuation lines of a call that spans several lines."""

    def __init__(self, extra: str) -> None:
        super().__init__()
        self.extra = extra

    def leave_ParenthesizedWhitespace(self, original_node, updated_node):  # noqa: N802 (libcst API)
        last = updated_node.last_line
        return updated_node.with_changes(last_line=last.with_changes(value=last.value + self.extra))


class _Rewrite(cst.CSTTransformer):
    def __init__(self, replacements: dict[cst.CSTNode, cst.BaseExpression]) -> None:
        super().__init__()
        self.replacements = replacements

    def on_leave(self, original_node, updated_node):  # type: ignore[override]
        return self.replacements.get(original_node, updated_node)


class DeferredLogging(Rule):
    """## What it does
    Finds output call statements whose arguments read tensor values with
    `.item()`, `float(t)` or `int(t)` (in f-strings, `%` formatting,
    `str.format` or as arguments) and rewrites them into
    `deferred.record(lambda ...: <call>, ...)` using `fixitem.runtime`: the
    tensors are recorded (copied on the device, not read) and the call is
    replayed later with the Python numbers, printing exactly the same text.
    Output calls are those of `fixitem.codemods.output_calls`: `print(...)`,
    `logger.info(...)` and the other levels, `logger.warning_once(...)` /
    `info_once(...)`, `logging.info(...)`, `writer.add_scalar(...)` /
    `add_scalars`, `wandb.log(...)`, `log_metrics(...)`, `warnings.warn(...)`, and
    functions of the same file that only write output
    (`def print0(s): if master_process: print(s)`).
    Inside traced code (`forward` and what `torch.compile` reaches) an output
    call is deferred even when it reads no tensor, because it breaks the
    graph there. Any other output call is left alone: a start-up
    `print(f"Using device: {device}")` stays as it is.

    ## Why is this bad?
    Each `.item()` in a log line is a **host sync** every step: the host
    waits for the device to finish before it can format the number. Inside
    compiled code `print`, logger calls and `warnings.warn` are also **graph
    breaks** (Dynamo does not trace `logging.Logger` methods; the
    `warning_once` calls in `forward` are the usual graph break of Hugging
    Face models). The runtime reads all pending values with one transfer per
    flush (every 100 records by default, on `flush()`, at exit and before a
    traceback), and replays what is pending before anything else the process
    writes, so the output keeps its order.

    ## Example
    ```python
    print(f"step {step} loss {loss.item():.4f}")
    logger.info("loss %.3f acc %d", loss.item(), correct.item())
    print(f"iter {trainer.iter_num:d} seen {len(batch)} loss {loss.item():.4f}")
    for run in runs:
        writer = SummaryWriter(run)
        ...
        writer.add_scalar("loss", loss.item(), step)
    ```

    ## Use instead
    ```python
    from fixitem import runtime as deferred
    deferred.record(lambda step, loss: print(f"step {step} loss {loss:.4f}"), step, loss)
    deferred.record(lambda loss, correct: logger.info("loss %.3f acc %d", loss, correct), loss, correct)
    deferred.record(
        lambda iter_num, value, loss: print(f"iter {iter_num:d} seen {value} loss {loss:.4f}"),
        trainer.iter_num,
        len(batch),
        loss,
    )
    for run in runs:
        writer = SummaryWriter(run)
        ...
        deferred.record(
            lambda writer, loss, step: writer.add_scalar("loss", loss, step),
            writer,
            loss,
            step,
        )
    ```
    What the original evaluates when it makes the call is evaluated when the
    call is recorded and passed in as a value: attributes
    (`trainer.iter_num` is passed as `iter_num`), items and computed
    expressions (`len(batch)`, `opt.param_groups[0]["lr"]`, passed as
    `value`, `value_1`, ...), and the tensor of each read (`out.loss.item()`
    passes `out.loss`). A tensor is passed only when it is read as a
    one-element value; plain names stay names; builtins (`print`), imported
    modules (`logging.info`, `wandb.log`) and functions of the file are
    looked up at replay. The object whose method is called is passed too,
    as the first value (`writer` above, `self.writers[split]`,
    `get_writer(i)`: the records go to the object of the moment), unless it
    is certainly the same object at replay: an imported module, a name bound
    once in its scope outside any loop (a module-level `logger =
    logging.getLogger(__name__)`, a parameter). `float(t)` and `int(t)` stay
    `float(...)` / `int(...)` in the lambda, so the type is the original's.
    A value passed that may be a tensor or hold some (a call's result, an
    untyped parameter, a list, an item, an attribute of a module) is passed
    as `deferred.by_reference(value)`:
    the call gets that object itself at replay, so a tensor prints as
    `print(x)` prints it, where a recorded tensor would be replayed as a
    number (or rejected, with more than one element).
    The runtime is imported as `deferred`, or as `fixitem_deferred` in a
    file that has its own `deferred`.

    ## Fix safety
    **Safe** when every name passed is a tensor read with `.item()` /
    `float()` / `int()`, a number, a string, or a fresh result (bound from a
    call or arithmetic, `mean, n = evaluate(...)`): the output is the same
    text, replayed later (every N records, at exit, before a traceback, and
    before any other output of the process). Attributes and computed values
    are read at record time, as the original read them; an attribute or an
    item passed is known not to change before the replay: a number, a
    tensor's metadata (`x.shape`), a torch optimizer's hyper-parameter
    (`opt.param_groups[0]["lr"]`, `sched.get_last_lr()[0]`), or formatted as
    a number (`:.4f`, `%d`; an array of more than one element cannot be).
    Loggers are those the code
    shows are `logging` loggers (`logging.getLogger(...)`, a library's
    `logging.get_logger(...)`, a `logging.Logger` annotation, `self.logger`
    assigned one of these).
    Logging records keep their `lineno` (the call stays on one line when it
    fits) but `funcName` becomes `<lambda>` and `created` is the replay time.
    The logger checks its level when the call is replayed: a call whose level
    is disabled printed nothing before and prints nothing after; a change of
    level, handler or format replays the pending calls first, so each is
    handled under the configuration it was made under.
    `warning_once` keeps its once-per-message behaviour (it is called once
    per replayed record, as before).
    **Unsafe** when a name passed may be a mutable object (a dict, a list,
    `self`, a parameter of unknown type), or an attribute or item passed may
    be one (`stats["r"]`, `run.returns`: a numpy array reset in place after
    the call): it is passed by reference and formatted at replay, not now,
    so a later mutation shows; when the logger is not known to be a
    `logging` one (an object only named `logger`: a module of the project,
    an untyped parameter; it may buffer lines or write to its own files,
    which are not kept in order); when a format rejects a float
    (`{:d}`, `:x`, `%x` of `loss.item()` that is not known to be an integer
    tensor: the error would be raised at replay, after the program has gone
    on, not where the original raised it); when a tensor
    read is not known to be a tensor (`x.item()` of an untyped `x`); when a
    function other than a builtin, `math` or `numpy` is called on a read
    (`fmt(loss.item())`: it runs at replay, not now); for
    `warnings.warn` (the warning shows the `deferred.record(...)` line as its
    source line); for loguru loggers (their default format shows the
    function, `<lambda>` at replay); for a module formatted at replay; and for
    `print(..., flush=True)`, which asks for the text now (deferred, it is
    written within 2 s, and a `kill -9` meanwhile loses it).
    **No fix** inside `with redirect_stdout(...)` / `redirect_stderr(...)`
    (replayed after the block, the text would go to the stream put back);
    for `print(..., file=f)` to a file of the program rather than
    `sys.stdout` / `sys.stderr` (the program may close it, `with open(...) as
    f:`, or read it back before the replay, and its own writes to it are not
    kept in order); when a read may raise and a handler around it in the function catches
    what it raises (`t.item()` raises `RuntimeError` and `float(t)` / `int(t)`
    raise `ValueError` unless `t` holds one element, as a full reduction
    does; `int(t)` of NaN raises `ValueError`; `{:d}` of a float too) inside
    `try: ... except RuntimeError:` or `with suppress(...)`: deferred, the
    error would be raised elsewhere and the handler would not run;
    when the call holds `await`, `yield` or `:=`, a tensor read
    inside a lambda or comprehension or in a branch evaluated only sometimes,
    a starred argument that reads a tensor, an f-string `=` around a read,
    or formats a tensor itself (`print(x)`: the runtime replays only
    one-element tensors as numbers, which would change the text); and for
    progress bars (`pbar.set_postfix(...)`, `set_description(...)`): the bar
    draws its description at its next update, so set later it would label
    steps it was not set for, and set after the bar closed it is never shown.
    `logger.exception` and calls with `exc_info=`, `stack_info=` or
    `stacklevel=` are left alone: they read the live exception or stack.
    """

    code = "FX201"
    name = "deferred-logging"
    summary = "output call reads tensor values: defer it with `fixitem.runtime.record`"
    graph_breaks = ("GB0059", "GB0291", "GB0007", "GB0124")
    examples = [
        Invalid(
            dedent(
                """
                import torch

                def train(data: torch.Tensor):
                    for step in range(10):
                        loss = (data * step).sum()
                        print(f"step {step} loss {loss.item():.4f}")
                """
            ),
            fixed=dedent(
                """
                import torch
                from fixitem import runtime as deferred

                def train(data: torch.Tensor):
                    for step in range(10):
                        loss = (data * step).sum()
                        deferred.record(
                            lambda step, loss: print(f"step {step} loss {loss:.4f}"),
                            step,
                            loss,
                        )
                """
            ),
        ),
        Invalid(
            dedent(
                """
                import logging
                import torch

                logger = logging.getLogger(__name__)

                def report(loss: torch.Tensor, correct: torch.Tensor):
                    logger.info("loss %.3f acc %d", loss.item(), correct.item())
                    logger.debug("done")
                """
            ),
            fixed=dedent(
                """
                import logging
                import torch
                from fixitem import runtime as deferred

                logger = logging.getLogger(__name__)

                def report(loss: torch.Tensor, correct: torch.Tensor):
                    deferred.record(
                        lambda loss, correct: logger.info("loss %.3f acc %d", loss, correct),
                        loss,
                        correct,
                    )
                    logger.debug("done")
                """
            ),
        ),
        Invalid(
            dedent(
                """
                import torch
                import wandb

                def log(out: torch.Tensor, step: int):
                    wandb.log({"loss": out[0].item(), "step": step})
                """
            ),
            fixed=dedent(
                """
                import torch
                import wandb
                from fixitem import runtime as deferred

                def log(out: torch.Tensor, step: int):
                    deferred.record(
                        lambda value, step: wandb.log({"loss": value, "step": step}),
                        out[0],
                        step,
                    )
                """
            ),
        ),
        Invalid(
            dedent(
                """
                import torch

                def train(data: torch.Tensor):
                    print(f"Using device: {data.device}")
                    for step in range(10):
                        loss = data.sum() * step
                        print(step, loss.item())
                    print("epoch done")
                """
            ),
            fixed=dedent(
                """
                import torch
                from fixitem import runtime as deferred

                def train(data: torch.Tensor):
                    print(f"Using device: {data.device}")
                    for step in range(10):
                        loss = data.sum() * step
                        deferred.record(lambda step, loss: print(step, loss), step, loss)
                    print("epoch done")
                """
            ),
        ),
        Invalid(
            dedent(
                """
                import torch

                def fit(trainer, model: torch.nn.Module, batch: torch.Tensor):
                    loss = model(batch).sum()
                    print("it %d n %d loss %.3f" % (trainer.iter_num, len(batch), loss.item()))
                """
            ),
            fixed=dedent(
                """
                import torch
                from fixitem import runtime as deferred

                def fit(trainer, model: torch.nn.Module, batch: torch.Tensor):
                    loss = model(batch).sum()
                    deferred.record(
                        lambda iter_num, value, loss: print("it %d n %d loss %.3f" % (iter_num, value, loss)),
                        trainer.iter_num,
                        len(batch),
                        loss,
                    )
                """
            ),
        ),
        Invalid(
            dedent(
                """
                import torch

                master_process = True

                def print0(s):
                    if master_process:
                        print(s)

                def train(loss: torch.Tensor):
                    print0("starting")
                    print0("loss {:.3f}".format(loss.item()))
                """
            ),
            fixed=dedent(
                """
                import torch
                from fixitem import runtime as deferred

                master_process = True

                def print0(s):
                    if master_process:
                        print(s)

                def train(loss: torch.Tensor):
                    print0("starting")
                    deferred.record(lambda loss: print0("loss {:.3f}".format(loss)), loss)
                """
            ),
        ),
        Invalid(
            dedent(
                """
                import torch
                from torch.utils.tensorboard import SummaryWriter

                def sweep(data: torch.Tensor, runs: list):
                    for run in runs:
                        writer = SummaryWriter(run)
                        for step in range(10):
                            loss = (data * step).sum()
                            writer.add_scalar("loss", loss.item(), step)
                """
            ),
            fixed=dedent(
                """
                import torch
                from torch.utils.tensorboard import SummaryWriter
                from fixitem import runtime as deferred

                def sweep(data: torch.Tensor, runs: list):
                    for run in runs:
                        writer = SummaryWriter(run)
                        for step in range(10):
                            loss = (data * step).sum()
                            deferred.record(
                                lambda writer, loss, step: writer.add_scalar("loss", loss, step),
                                writer,
                                loss,
                                step,
                            )
                """
            ),
        ),
        Invalid(
            dedent(
                """
                import numpy as np
                import torch

                def episode(stats: dict, loss: torch.Tensor):
                    stats["r"] += 1.0
                    print(f"returns={stats['r']} loss={loss.item():.3f}")
                    stats["r"][:] = 0
                """
            ),
            fixed=dedent(
                """
                import numpy as np
                import torch
                from fixitem import runtime as deferred

                def episode(stats: dict, loss: torch.Tensor):
                    stats["r"] += 1.0
                    deferred.record(
                        lambda r, loss: print(f"returns={r} loss={loss:.3f}"),
                        deferred.by_reference(stats['r']),
                        loss,
                    )
                    stats["r"][:] = 0
                """
            ),
            unsafe=True,
        ),
        Invalid(
            dedent(
                """
                import torch

                def train(data: torch.Tensor, history):
                    loss = data.sum()
                    print(loss.item(), history)
                """
            ),
            fixed=dedent(
                """
                import torch
                from fixitem import runtime as deferred

                def train(data: torch.Tensor, history):
                    loss = data.sum()
                    deferred.record(
                        lambda loss, history: print(loss, history),
                        loss,
                        deferred.by_reference(history),
                    )
                """
            ),
            unsafe=True,
        ),
        Invalid(
            dedent(
                """
                import torch
                from torch import nn
                from transformers.utils import logging

                logger = logging.get_logger(__name__)

                class Net(nn.Module):
                    def forward(self, x: torch.Tensor, use_cache: bool = False):
                        if use_cache and self.training:
                            logger.warning_once("`use_cache=True` is incompatible with training.")
                        return x * 2
                """
            ),
            fixed=dedent(
                """
                import torch
                from torch import nn
                from transformers.utils import logging
                from fixitem import runtime as deferred

                logger = logging.get_logger(__name__)

                class Net(nn.Module):
                    def forward(self, x: torch.Tensor, use_cache: bool = False):
                        if use_cache and self.training:
                            deferred.record(
                                lambda: logger.warning_once("`use_cache=True` is incompatible with training."),
                            )
                        return x * 2
                """
            ),
        ),
        Invalid(
            dedent(
                """
                import torch

                def f(losses: torch.Tensor):
                    print([l.item() for l in losses])
                """
            ),
        ),
        Invalid(
            dedent(
                """
                import torch

                def report(per_class: torch.Tensor):
                    try:
                        print(f"acc {per_class.item():.3f}")
                    except RuntimeError:
                        print("acc n/a")
                """
            ),
        ),
        Invalid(
            dedent(
                """
                import torch

                def train(data: torch.Tensor, bar):
                    for step in bar:
                        loss = (data * step).sum()
                        bar.set_postfix(loss=loss.item())
                """
            ),
        ),
        Valid(
            dedent(
                """
                import numpy as np

                def f():
                    a = np.ones(3)
                    print(f"{a.sum().item():.3f}")
                """
            )
        ),
        Valid(
            dedent(
                """
                import logging
                import torch

                logger = logging.getLogger(__name__)

                def main(device: torch.device, n: int):
                    print(f"Using device: {device}")
                    logger.warning("Nothing is fused.")
                    print("done", n)
                """
            )
        ),
    ]

    def check(self, ctx: FileContext, sites: list[SyncSite], claimed: set[SyncSite]) -> Iterator[Report]:
        wrappers = set(output_wrappers(ctx).values())
        for stmt in ctx.nodes(cst.Expr):
            assert isinstance(stmt, cst.Expr)
            call = stmt.value
            if not isinstance(call, cst.Call) or _is_deferred_record(ctx, call):
                continue
            found = output_call(ctx, call)
            if found is None or live_context(found, call):
                continue
            if ctx.enclosing_function(stmt) in wrappers:
                continue  # a wrapper's own output is deferred where the wrapper is called
            traced = ctx.in_traced_code(stmt)
            inner = [s for s in sites_within(ctx, sites, call) if s not in claimed]
            if not traced and not any(s.kind in READ_KINDS for s in inner):
                continue  # reads no tensor and breaks no graph: left as it is
            plan = self._plan(ctx, stmt, call, found, inner)
            if not plan.reads and plan.new is None:
                continue  # e.g. `print(x)` in forward: reported as a formatted tensor
            message = f"`{ctx.code(call.func)}(...)` " + (
                "reads tensor values on the host" if plan.reads else "breaks the graph in traced code"
            )
            if plan.new is None:
                yield Report(stmt, message, sites=plan.reads, note=f"no fix: {plan.blocker}")
                continue
            safety = Safety.UNSAFE if plan.unsafe else Safety.SAFE
            fix = Fix({stmt: cst.Expr(plan.new, semicolon=stmt.semicolon)}, safety,
                      "; ".join(plan.unsafe), imports=ctx.runtime_imports())
            yield Report(stmt, message, fix=fix, sites=plan.reads)

    def _plan(self, ctx: FileContext, stmt: cst.Expr, call: cst.Call, found: OutputCall,
              inner: list[SyncSite]) -> _Plan:
        """How to defer ``call``, given the unclaimed sync sites within it."""
        reads = {s.node: s for s in inner if s.kind in READ_KINDS and isinstance(s.node, cst.Call)}
        others = {s.node for s in inner if s.node not in reads}
        plan = _Plan(stmt, call, found, reads=[s for s in inner if s.node in reads])
        if any(s.node in walk(call.func) for s in inner):
            plan.blocker = "the callee itself reads a tensor value"
            return plan
        redirect = _redirected(ctx, stmt)
        if redirect and found.kind is not OutputKind.METRICS:
            plan.blocker = (f"it is inside `with {redirect}(...)`: replayed after the block, the text would go to "
                            "the stream put back, not the one it redirects to")
            return plan
        file = own_file(ctx, call, found)
        if file:
            plan.blocker = (f"it writes to `{file}`, a file of the program: replayed later, the text could go to a "
                            "file closed by then, or out of order with the program's own writes to it")
            return plan
        collector = _Collector(ctx, reads, others)
        for arg in call.args:
            collector.walk(arg)
        if collector.problem:
            plan.blocker = collector.problem
            return plan
        if others:
            plan.blocker = "it formats a tensor itself; only one-element values read with `.item()` can be deferred"
            return plan
        for site in plan.reads:
            raised, why = read_exceptions(ctx, site)
            handler = catching_handler(ctx, stmt, raised)
            if handler:
                plan.blocker = (f"`{ctx.code(site.node)}` raises {why}, which the `{handler}` around it handles; "
                                "deferred, the error would be raised elsewhere, outside that handler")
                return plan
        if found.kind is OutputKind.PROGRESS:
            plan.blocker = ("a progress bar draws its description at its next update: set at replay it would label "
                            "later steps, or never show once the bar is closed; set it every N steps instead")
            return plan
        for replayed in collector.replayed:
            plan.unsafe.append(f"`{ctx.code(replayed.func)}(...)` is called at replay, not now")
        if flushes_now(call):
            plan.unsafe.append("`flush=True` asks for the text now: deferred, it is written later (within 2 s), and a "
                               "process killed meanwhile (`kill -9`, the OOM killer) loses it")
        if found.kind is OutputKind.WARNING:
            plan.unsafe.append("the warning is issued at replay and shows the `deferred.record(...)` line as its source")
        if found.kind is OutputKind.LOGGER and (ctx.provenance.imports.qualify(call.func) or "").startswith("loguru."):
            plan.unsafe.append("loguru's default format shows the calling function, `<lambda>` at replay")
        plan.unsafe.extend(_unknown_loggers(ctx, call, found))
        formats = _formats(ctx, call, found)
        raising = _raising_formats(ctx, formats, reads)
        handler = catching_handler(ctx, stmt, (ValueError,)) if raising else ""
        if handler:
            plan.blocker = f"{raising[0]}, not where the `{handler}` around it handles the error"
            return plan
        plan.unsafe.extend(raising)
        # The object whose method is called is taken now, as the original takes it:
        # ``writer`` rebound for the next run, ``writers[i]`` of a loop, ``get_writer(i)``.
        receiver = call.func.value if isinstance(call.func, cst.Attribute) else None
        if receiver is not None and stable_receiver(ctx, receiver):
            receiver = None
        if receiver is not None and any(isinstance(n, (cst.Await, cst.Yield, cst.NamedExpr)) for n in walk(receiver)):
            plan.blocker = "the object called contains `await`, `yield` or `:=`, which a lambda cannot hold"
            return plan

        # Parameters, in order of first appearance.
        attributes = {n.attr for n in walk(call) if isinstance(n, cst.Attribute)}
        taken = {n.value for n in walk(call) if isinstance(n, cst.Name) and n not in attributes}
        params: list[str] = []
        values: list[cst.BaseExpression] = []
        body_replacements: dict[cst.CSTNode, cst.BaseExpression] = {}
        counter = 0

        def fresh(hint: cst.CSTNode | str | None = None) -> str:
            nonlocal counter
            # ``trainer.iter_num`` is passed as ``iter_num``: read as the original.
            # ``opt.param_groups[0]["lr"]`` as ``lr``.
            name = hint if isinstance(hint, str) else ""
            if isinstance(hint, cst.Attribute):
                name = hint.attr.value
            elif isinstance(hint, cst.Subscript) and len(hint.slice) == 1 and isinstance(hint.slice[0].slice, cst.Index):
                key = hint.slice[0].slice.value
                if isinstance(key, cst.SimpleString) and isinstance(key.evaluated_value, str):
                    name = key.evaluated_value
            if name.isidentifier() and not keyword.iskeyword(name) and name not in taken and name not in params \
                    and name not in BUILTINS:
                return name
            while True:
                name = "value" if counter == 0 else f"value_{counter}"
                counter += 1
                if name not in taken and name not in params:
                    return name

        if receiver is not None:
            if isinstance(receiver, cst.Name):
                param = receiver.value  # ``lambda writer, loss: writer.add_scalar(...)``
            else:
                param = fresh(_receiver_hint(receiver))
                if param.startswith("value"):
                    param = fresh(_KIND_RECEIVERS.get(found.kind, "target"))
                body_replacements[receiver] = cst.Name(param)
            params.append(param)
            values.append(receiver)
        alias = ctx.runtime_alias()
        by_reference: set[int] = set()  # values passed as themselves (``deferred.by_reference(...)``)
        for what, item in collector.order:
            if what == "name":
                name = str(item)
                uses = collector.names[name]
                if name not in params:
                    params.append(name)
                    values.append(cst.Name(name))
                if all(use == "read" for _, use in uses):
                    continue
                node = uses[0][0]
                if ctx.kind(node) is Kind.TENSOR:
                    plan.blocker = f"`{name}` is a tensor used other than through `.item()`"
                    return plan
                if _may_hold_tensors(ctx, node, formats):
                    # Passed as itself, so that it prints as the original printed it.
                    by_reference.add(params.index(name))
                    plan.unsafe.append(f"`{name}` may be a tensor: it is passed by reference and read at replay, "
                                       "not now")
                elif any(_prints_as_number(ctx, use_node, formats) for use_node, use in uses if use != "read"):
                    plan.unsafe.append(f"`{name}` may be a tensor: replayed, it would print as a number")
                elif not _is_plain(ctx, node):
                    plan.unsafe.append(f"`{name}` is passed by reference and read at replay, not now")
            elif what == "expr":
                expr = item
                assert isinstance(expr, cst.BaseExpression)
                kind = ctx.kind(expr)
                if kind is Kind.TENSOR:
                    plan.blocker = f"`{ctx.code(expr)}` is a tensor used other than through `.item()`"
                    return plan
                may_hold = _may_hold_tensors(ctx, expr, formats)
                if kind is Kind.MODULE:
                    plan.unsafe.append(f"`{ctx.code(expr)}` is a module, formatted at replay, not now")
                elif kind is Kind.UNKNOWN and _of_a_module(ctx, expr):
                    plan.unsafe.append(
                        f"`{ctx.code(expr)}` may be a tensor of the module: it is passed by reference "
                        "and read at replay, after the module may have changed it" if may_hold else
                        f"`{ctx.code(expr)}` may be a tensor of the module: it would print as a number"
                    )
                elif may_hold:
                    plan.unsafe.append(f"`{ctx.code(expr)}` may be a tensor: it is passed by reference and read at "
                                       "replay, not now")
                elif _prints_as_number(ctx, expr, formats):
                    plan.unsafe.append(f"`{ctx.code(expr)}` may be a tensor: replayed, it would print as a number")
                if isinstance(expr, (cst.Attribute, cst.Subscript)) and not _immutable(ctx, expr, formats):
                    plan.unsafe.append(
                        f"`{ctx.code(expr)}` may be a mutable object (an array): it is passed by reference and read "
                        "at replay, not now"
                    )
                param = fresh(expr)
                if may_hold:
                    by_reference.add(len(params))
                params.append(param)
                values.append(expr)
                body_replacements[expr] = cst.Name(param)
            else:
                site = reads[item]  # type: ignore[index]
                value = site.value
                if not site.certain:
                    plan.unsafe.append(f"`{ctx.code(value)}` is not known to be a tensor")
                if isinstance(value, cst.Name) and all(use == "read" for _, use in collector.names.get(value.value, [])):
                    param = value.value  # passed once, as the name
                else:
                    param = fresh()
                    params.append(param)
                    values.append(value)
                new_expr: cst.BaseExpression = cst.Name(param)
                if site.kind in ("float", "int"):
                    new_expr = cst.Call(cst.Name(site.kind), [cst.Arg(cst.Name(param))])
                body_replacements[item] = new_expr  # type: ignore[index]
        body = call.visit(_Rewrite(body_replacements))
        if "\n" in cst.Module(body=[]).code_for_node(body):
            # The call moves one level in, as the lambda argument of ``deferred.record(``.
            body = body.visit(_Indent("    "))
        empty = cst.Module(body=[])
        head = f"lambda {', '.join(params)}:" if params else "lambda:"
        texts = [empty.code_for_node(v) for v in values]
        for i in by_reference:
            texts[i] = f"{alias}.by_reference({texts[i]})"
        pieces = [f"{head} {empty.code_for_node(body)}", *texts]
        record = cst.ensure_type(cst.parse_expression(f"{alias}.record({', '.join(pieces)})"), cst.Call)
        indent = ctx.positions[stmt].start.column
        text = empty.code_for_node(record)
        if "\n" in text or indent + len(text) > LINE_LENGTH:
            record = one_argument_per_line(record)
        if found.kind.logs and "\n" in empty.code_for_node(record) and \
                (ctx.provenance.imports.qualify(call.func) or "").startswith("absl."):
            plan.unsafe.append("absl's log format shows the calling line, which moves into `deferred.record(`")
        plan.new = record
        plan.unsafe = list(dict.fromkeys(plan.unsafe))
        return plan
