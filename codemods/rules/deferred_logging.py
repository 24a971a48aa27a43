"""FX201: output calls that read tensor values, deferred with ``fixitem.runtime``."""

from __future__ import annotations

import ast
import builtins
import io
import keyword
import re
import string
import tokenize
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from .. import gen
from ..fixes.branches import visibly_without_gradient
from ..fixes.tensor_code import sites_within
from ..model.aliasing import changed_in_place
from ..model.context import FileContext
from ..model.dtypes import certainly_integer
from ..model.effects import PURE_BUILTINS, Effect, call_effect
from ..model.exceptions import catching_handler, read_exceptions
from ..model.grad_mode import gradients_off
from ..model.optimizers import setting_is_number
from ..model.output_calls import (
    OutputCall,
    OutputKind,
    flushes_now,
    live_context,
    logger_origin,
    output_call,
    output_wrappers,
    own_file,
    writer_ended_by,
    stable_receiver,
)
from ..model.provenance import CONTAINER_ADDS, Certainty, Kind, dotted_name, is_text, made_from_text
from ..model.reaching import statements_holding
from ..model.signs import zero_divisor
from ..model.streams import (
    imports_replacing_streams,
    program_replaces_streams,
    redirects_streams,
    replaces_streams,
    writes_streams_directly,
)
from ..model.syncs import SyncSite
from ..model.tree import children_of, nodes_within, walk
from ..rule import Fix, Invalid, Report, Rule, Safety, Valid, dedent

READ_KINDS = ("item", "float", "int", "complex")
BUILTINS = frozenset(dir(builtins))
# Literals: numbers, strings, bytes and f-strings (``True``, ``False``, ``None`` and ``...``
# are ``Constant`` too, but are not literals here: see :func:`_is_literal`).
LITERALS = (ast.Constant, ast.JoinedStr)
_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)
_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)
# What a lambda cannot hold.
_NOT_IN_LAMBDA = (ast.Await, ast.Yield, ast.YieldFrom, ast.NamedExpr)


def _is_literal(node: ast.AST | None) -> bool:
    """A number, a string, bytes or an f-string written out (not ``True``/``False``/``None``,
    which are names of constants, nor ``...``)."""
    if type(node) is ast.JoinedStr:
        return True
    if type(node) is not ast.Constant:
        return False
    value = node.value  # type: ignore[attr-defined]
    return not isinstance(value, bool) and isinstance(value, (str, bytes, int, float, complex))


def _is_string(node: ast.AST | None) -> bool:
    """A string or bytes literal (one, or several written next to each other), not an f-string."""
    return type(node) is ast.Constant and isinstance(node.value, (str, bytes))  # type: ignore[attr-defined]


def _string_tokens(ctx: FileContext, node: ast.AST) -> int:
    """How many string literals ``node``'s text is made of (``"a" "b"``: 2); 0 when unknown."""
    start, end = ctx.positions.span(node)
    count = depth = 0
    try:
        for token in tokenize.generate_tokens(io.StringIO(f"({ctx.source[start:end]})").readline):
            name = tokenize.tok_name[token.type]
            if name == "FSTRING_START":
                count += depth == 0
                depth += 1
            elif name == "FSTRING_END":
                depth -= 1
            elif token.type == tokenize.STRING and depth == 0:
                count += 1
    except (tokenize.TokenError, SyntaxError):
        return 0
    return count


def _simple_string(ctx: FileContext, node: ast.AST | None) -> bool:
    """One string (or bytes) literal, not several written next to each other."""
    return _is_string(node) and _string_tokens(ctx, node) == 1  # type: ignore[arg-type]


def _concatenated_string(ctx: FileContext, node: ast.AST | None) -> bool:
    """A string literal, or several (f-strings among them) written next to each other."""
    if _is_string(node):
        return True
    return type(node) is ast.JoinedStr and _string_tokens(ctx, node) > 1  # type: ignore[arg-type]


def _single_index(ctx: FileContext, node: ast.Subscript) -> ast.expr | None:
    """The index of ``x[i]`` (one index, not a slice); None for ``x[a:b]``, ``x[a, b]``."""
    index = node.slice
    if type(index) is ast.Slice:
        return None
    if type(index) is ast.Tuple and not _parenthesized_tuple(ctx, index):
        return None
    return index


def _parenthesized_tuple(ctx: FileContext, node: ast.Tuple) -> bool:
    """``(a, b)`` rather than ``a, b`` (``ast`` puts a tuple's own parentheses in its span)."""
    if ctx.parenthesized(node):
        return True
    start, end = ctx.positions.span(node)
    if ctx.source[start:start + 1] != "(":
        return False
    depth = 0
    try:
        for token in tokenize.generate_tokens(io.StringIO(ctx.source[start:end]).readline):
            if token.type == tokenize.OP and token.string in "([{":
                depth += 1
            elif token.type == tokenize.OP and token.string in ")]}":
                depth -= 1
                if depth == 0:  # the first parenthesis closes: at the end of the tuple?
                    return token.end == _end_of(ctx.source[start:end])
    except (tokenize.TokenError, SyntaxError):
        return False
    return False


def _end_of(text: str) -> tuple[int, int]:
    """(1-based line, column) just after the last character of ``text``."""
    lines = text.split("\n")
    return len(lines), len(lines[-1])


def _arguments(call: ast.Call) -> list[tuple[ast.expr, str | None, str]]:
    """The arguments of ``call`` in the order they are written: (value, keyword, star), with
    star ``"*"`` for ``*value`` and ``"**"`` for ``**value``."""
    if not call.keywords:
        return [(a.value, None, "*") if type(a) is ast.Starred else (a, None, "") for a in call.args]  # type: ignore[attr-defined]
    found: list[tuple[ast.expr, str | None, str]] = []
    for node in children_of(call)[1:]:
        if type(node) is ast.keyword:
            found.append((node.value, node.arg, "" if node.arg is not None else "**"))  # type: ignore[attr-defined]
        elif type(node) is ast.Starred:
            found.append((node.value, None, "*"))  # type: ignore[attr-defined]
        else:
            found.append((node, None, ""))  # type: ignore[arg-type]
    return found


def _debug_field(ctx: FileContext, node: ast.FormattedValue) -> bool:
    """``f"{x=}"``: the field prints the source text of its expression."""
    end = ctx.span(node.value)[1]
    stop = ctx.positions.span(node)[1]
    return ctx.source[end:stop].lstrip().startswith("=")


def _prefix(ctx: FileContext, node: ast.BoolOp, count: int) -> ast.expr:
    """The first ``count`` operands of ``a and b and c`` as one operation (``a and b``):
    ``ast`` keeps one node for the chain, where the analysis looks at it as
    ``(a and b) and c``. A node of no tree, kept for the file (its position is asked later)."""
    if count == 1:
        return node.values[0]

    def build() -> ast.BoolOp:
        first, last = node.values[0], node.values[count - 1]
        return ast.BoolOp(op=node.op, values=node.values[:count], lineno=first.lineno, col_offset=first.col_offset,
                          end_lineno=last.end_lineno, end_col_offset=last.end_col_offset)

    return ctx.memo(("deferred-logging operands", id(node), count), build)


def _is_deferred_record(ctx: FileContext, call: ast.Call) -> bool:
    return ctx.provenance.imports.qualify(call.func) == "fixitem.runtime.record"


@dataclass
class _Plan:
    stmt: ast.Expr
    call: ast.Call
    found: OutputCall
    reads: list[SyncSite] = field(default_factory=list)
    blocker: str = ""  # why the call cannot be deferred
    unsafe: list[str] = field(default_factory=list)
    new: gen.Node | None = None


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

    def __init__(self, ctx: FileContext, reads: dict[ast.AST, SyncSite], other_sites: set[ast.AST]) -> None:
        self.ctx = ctx
        self.reads = reads
        self.other_sites = other_sites
        self.aliases = ctx.provenance.imports.aliases
        self.names: dict[str, list[tuple[ast.Name, str]]] = {}  # name -> (node, use)
        self.order: list[tuple[str, object]] = []  # ("name", str), ("read", node) or ("expr", node)
        self.problem = ""
        self.replayed: list[ast.Call] = []  # calls left in the lambda that are not known to be pure

    def _use(self, name: ast.Name, use: str) -> None:
        if name.id not in self.names:
            self.order.append(("name", name.id))
        self.names.setdefault(name.id, []).append((name, use))

    def _fail(self, why: str) -> None:
        self.problem = self.problem or why

    def walk(self, node: ast.AST, bound: frozenset[str] = frozenset(), nested: bool = False,
             lazy: bool = False) -> None:
        """``nested``: inside a lambda or comprehension of the call; ``lazy``: evaluated only sometimes."""
        t = type(node)
        if t in _NOT_IN_LAMBDA:
            self._fail("it contains `await`, `yield` or `:=`, which a lambda cannot hold")
            return
        if node in self.reads:
            value = self.reads[node].value
            if nested:
                self._fail("a tensor value is read inside a lambda or comprehension")
                return
            if lazy and type(value) is not ast.Name:
                self._fail("a tensor value is read in a part of the call that is evaluated only sometimes")
                return
            self.order.append(("read", node))
            if any(n in self.reads or n in self.other_sites for n in walk(value)):
                self._fail("a tensor value is read inside another read")
            if type(value) is ast.Name and value.id not in bound:  # type: ignore[attr-defined]
                self._use(value, "read")  # type: ignore[arg-type]
            return
        if t is ast.FormattedValue:  # the ``{...}`` of an f-string: never passed whole
            if _debug_field(self.ctx, node) and type(node.value) is not ast.Name:  # type: ignore[arg-type,attr-defined]
                # f"{loss.item()=}" prints the expression's source: it must stay as written.
                self._fail("an f-string `=` prints the source text of its expression")
                return
            self.walk(node.value, bound, nested, lazy)  # type: ignore[attr-defined]
            if node.format_spec is not None:  # type: ignore[attr-defined]
                for part in node.format_spec.values:  # type: ignore[attr-defined]
                    self.walk(part, bound, nested, lazy)
            return
        if isinstance(node, ast.expr) and not nested and not lazy and self.capturable(node):
            self.order.append(("expr", node))
            return
        if t is ast.Name:
            name = node.id  # type: ignore[attr-defined]
            if name in bound or name in BUILTINS or name in self.aliases or self._module_function(node):  # type: ignore[arg-type]
                return
            self._use(node, "other")  # type: ignore[arg-type]
            return
        if t is ast.Attribute:
            self.walk(node.value, bound, nested, lazy)  # type: ignore[attr-defined]
            return
        if t is ast.Call:
            func = node.func  # type: ignore[attr-defined]
            if not self._pure_call(node):  # type: ignore[arg-type]
                self.replayed.append(node)  # type: ignore[arg-type]
            self.walk(func.value if type(func) is ast.Attribute else func, bound, nested, lazy)
            for value, _, star in _arguments(node):  # type: ignore[arg-type]
                self.walk_argument(value, star, bound, nested, lazy)
            return
        if t is ast.IfExp:
            self.walk(node.test, bound, nested, lazy)  # type: ignore[attr-defined]
            self.walk(node.body, bound, nested, True)  # type: ignore[attr-defined]
            self.walk(node.orelse, bound, nested, True)  # type: ignore[attr-defined]
            return
        if t is ast.BoolOp:
            # ``a and b and c`` is looked at as ``(a and b) and c``: the left operand is
            # evaluated whenever the operation is, the right one only sometimes.
            values = node.values  # type: ignore[attr-defined]
            if len(values) > 2:
                self.walk(_prefix(self.ctx, node, len(values) - 1), bound, nested, lazy)  # type: ignore[arg-type]
            else:
                self.walk(values[0], bound, nested, lazy)
            self.walk(values[-1], bound, nested, True)
            return
        if t is ast.Lambda:
            args = node.args  # type: ignore[attr-defined]
            params = frozenset(p.arg for p in _lambda_params(args))
            for default in (*args.defaults, *args.kw_defaults):
                if default is not None:
                    self.walk(default, bound, nested, lazy)
            self.walk(node.body, bound | params, True, lazy)  # type: ignore[attr-defined]
            return
        if t in _COMPREHENSIONS:
            targets: set[str] = set()
            for comp in node.generators:  # type: ignore[attr-defined]
                targets |= {n.id for n in walk(comp.target) if type(n) is ast.Name}  # type: ignore[attr-defined]
            for child in children_of(node):
                self.walk(child, bound | targets, True, lazy)
            return
        for child in children_of(node):
            self.walk(child, bound, nested, lazy)

    def walk_argument(self, value: ast.expr, star: str, bound: frozenset[str] = frozenset(), nested: bool = False,
                      lazy: bool = False) -> None:
        """One argument of a call (``value``, ``k=value``, ``*value``, ``**value``)."""
        if star and (any(n in self.reads or n in self.other_sites for n in walk(value))
                     or self.ctx.kind(value) is Kind.TENSOR):
            self._fail("a starred argument reads a tensor")
            return
        self.walk(value, bound, nested, lazy)

    def _pure_call(self, call: ast.Call) -> bool:
        """A call that gives the same result at replay: a builtin that builds a value
        (``round``, ``str``, ``min``), ``math`` / ``numpy``, ``"...".format`` and ``" ".join``."""
        func = call.func
        if type(func) is ast.Name:
            return func.id in PURE_BUILTINS and self.ctx.provenance.scope_of(call).lookup(func.id) is None
        if type(func) is ast.Attribute and func.attr in ("format", "join") and (
                _concatenated_string(self.ctx, func.value) or (
                    type(func.value) is ast.Name and _is_plain(self.ctx, func.value) and self.ctx.kind(func.value) is Kind.OTHER)):
            return True  # ``"{:.3f}".format``, ``log_template.format`` of ``log_template = ' '.join(...)``
        local = (dotted_name(func) or "").split(".")[0]
        qualified = self.ctx.provenance.imports.qualify(func) or ""
        return local in self.aliases and qualified.split(".")[0] in ("math", "numpy")

    def _module_function(self, name: ast.Name) -> bool:
        """A function or class defined once at the module level: the same object at replay."""
        provenance = self.ctx.provenance
        module_scope = provenance.scopes[self.ctx.module]
        if provenance.scope_of(name).lookup(name.id) is not module_scope:
            return False
        if module_scope.bindings.get(name.id) != [("opaque", None)]:
            return False
        return any(isinstance(s, (*_FUNCTIONS, ast.ClassDef)) and s.name == name.id for s in self.ctx.module.body)

    def capturable(self, node: ast.expr) -> bool:
        """A value the call computes without tensor reads: evaluate it at record time.

        Plain names, literals, lambdas and containers written out (whose parts are
        looked at one by one) are not; neither is an attribute of an imported
        module (``sys.stderr``, ``logging.INFO``: looked up at replay) nor what
        holds a tensor read.
        """
        if isinstance(node, (ast.Name, *LITERALS, ast.Dict, ast.List, ast.Tuple, ast.Set, ast.Lambda,
                             ast.Starred, ast.Slice, ast.FormattedValue)):
            return False
        if _constant_expression(node):
            return False  # ``' ' * 8`` stays as written: the same value at replay
        if type(node) is ast.Attribute:
            root = dotted_name(node)
            if root is not None and root.split(".")[0] in self.aliases:
                return False
        for sub in walk(node):
            if sub in self.reads or sub in self.other_sites:
                return False
            if type(sub) in _NOT_IN_LAMBDA:
                return False
            if type(sub) is ast.FormattedValue and _debug_field(self.ctx, sub):  # type: ignore[arg-type]
                return False
        return True


# Calls that end the program (``exit`` and ``quit`` as the builtins).
_PROGRAM_ENDS = frozenset({"sys.exit", "os._exit", "exit", "quit", "os.abort"})


def _program_ends_after(ctx: FileContext, stmt: ast.stmt) -> ast.AST | None:
    """A statement after ``stmt`` in its own block that stops the program: ``sys.exit(1)``,
    ``os._exit(...)`` (dino's ``print("Loss is nan")`` before ``sys.exit(1)``); None otherwise."""
    block = statements_holding(ctx.parents.get(stmt), stmt)
    if block is None:
        return None
    index = next(i for i, s in enumerate(block) if s is stmt)
    for later in block[index + 1:]:
        if type(later) is ast.Expr and type(later.value) is ast.Call and (  # type: ignore[attr-defined]
                (ctx.provenance.imports.qualify(later.value.func) or "") in _PROGRAM_ENDS):  # type: ignore[attr-defined]
            return later
    return None


def _lambda_params(args: ast.arguments) -> list[ast.arg]:
    """The parameters of a lambda, in order (``*args`` and ``**kwargs`` last)."""
    found = [*args.posonlyargs, *args.args, *args.kwonlyargs]
    if args.vararg is not None:
        found.append(args.vararg)
    if args.kwarg is not None:
        found.append(args.kwarg)
    return found


def _prints_as_number(ctx: FileContext, expr: ast.expr, formats: dict[ast.AST, tuple[str, str]],
                      text: bool = True) -> bool:
    """Would ``expr``, passed to ``record``, be written differently at replay?

    The runtime replays every one-element tensor it is given as a Python number:
    ``print(x.mean())`` would write ``0.1083`` where it wrote ``tensor(0.1083,
    grad_fn=...)``. Only a value known not to be a tensor, or one formatted with a
    numeric type code (``:.4f``, ``%d``: a one-element tensor formats as its number
    there), is written the same."""
    if ctx.certainty(expr) is Certainty.NOT_TENSOR:
        return False
    if type(expr) is ast.Attribute and type(expr.value) is ast.Attribute and \
            ctx.kind(expr.value) not in (Kind.TENSOR, Kind.MODULE):
        return False  # ``self.config.hidden_size``: a setting of an object that is not a module
    if _hyperparameter(ctx, expr) and (not text or setting_is_number(ctx, expr)):
        # A learning rate given as a number; a metric writer (``text`` False) logs a tensor one as
        # its number too, where text would show the tensor.
        return False
    style_code = formats.get(expr)
    return style_code is None or style_code[1] not in (_NUMERIC_FORMAT if style_code[0] == "format" else _NUMERIC_PERCENT)


def _is_plain(ctx: FileContext, name: ast.Name) -> bool:
    """A number or a string: formatting it later gives the same text."""
    kind = ctx.kind(name)
    if kind is Kind.NUMBER or ctx.provenance.declared_text(name):
        return True
    scope = ctx.provenance.scope_of(name).lookup(name.id)
    if scope is None:
        return False
    bindings = scope.bindings.get(name.id, [])
    return (bool(bindings) and all(_fresh_binding(ctx, how, value) for how, value in bindings)
            and changed_in_place(ctx, scope, name.id) is None)  # ``window[i] = v`` shows at replay


def _fresh_binding(ctx: FileContext, how: str, value: ast.AST | None) -> bool:
    """Bound to a string, or to a fresh result nothing else holds (``a, b = f()``)?

    A function's result or arithmetic is a new object: nothing else can mutate it
    before the replay. Parameters, loop variables, aliases of other names and
    container literals (which the code may go on to fill) may change.
    """
    if how not in ("value", "unpack"):
        return False
    if type(value) is ast.IfExp:  # ``"cuda" if ok else "cpu"``: one of two fresh values
        return _fresh_binding(ctx, how, value.body) and _fresh_binding(ctx, how, value.orelse)  # type: ignore[attr-defined]
    if type(value) is ast.JoinedStr or (
            type(value) is ast.Constant and not isinstance(value.value, bool)  # type: ignore[attr-defined]
            and isinstance(value.value, (str, bytes, int, float))):  # type: ignore[attr-defined]
        return True
    if isinstance(value, ast.expr) and _made_string(value):
        return True  # ``log_template = ' '.join(...)``: a string
    if ctx.provenance.made_by_the_standard_library(value, immutable=True):
        return True  # ``datetime.timedelta(...)``, ``time.strftime(...)``
    if isinstance(value, (ast.Call, ast.BinOp, ast.UnaryOp, ast.Compare)):
        # Not an array: the code may change it in place, or pass it to a function that does.
        return (ctx.kind(value) not in (Kind.TENSOR, Kind.MODULE, Kind.OTHER, Kind.NUMPY) or _is_text(value)
                or how == "unpack")
    return False


def _made_string(expr: ast.expr) -> bool:
    """Made from a string literal (:func:`~fixitem.codemods.model.provenance.made_from_text`), and a string or a number, not a
    list the code could change (``"a,b".split(",")``)."""
    return made_from_text(expr) and not (type(expr) is ast.Call and expr.func.attr in ("split", "rsplit", "splitlines"))  # type: ignore[attr-defined]


def _constant_expression(expr: ast.expr) -> bool:
    """``' ' * 8``, ``-1``: literals, ``+``, ``-`` and ``*`` only, the same value whenever it is
    evaluated (no division, which may raise)."""
    return all(isinstance(n, (ast.Constant, ast.BinOp, ast.UnaryOp, ast.Add, ast.Sub, ast.Mult, ast.USub, ast.UAdd))
               for n in ast.walk(expr))


def _may_hold_tensors(ctx: FileContext, expr: ast.expr, formats: dict[ast.AST, tuple[str, str]]) -> bool:
    """May the value passed for ``expr`` be a tensor, or a container of them?

    The runtime replays a recorded tensor as the number ``.item()`` gives (and
    rejects one of more elements): such a value is passed with
    ``deferred.by_reference(...)`` instead, so that ``fn`` gets the object itself
    and prints what the original printed. Not for a number, a string, a module,
    a name bound only to literals, nor a value formatted as a number (``:.3f``,
    ``%d``: a tensor formatted so prints its number).
    """
    kind = ctx.kind(expr)
    if kind in (Kind.NUMBER, Kind.MODULE, Kind.NUMPY) or _is_text(expr) or _is_literal(expr):
        return False
    if made_from_text(expr):
        return False  # ``"it %d" % (n,)``, ``' ' * 8``, ``' '.join(parts)``: a string (or strings)
    if ctx.provenance.made_by_the_standard_library(expr):
        return False
    if isinstance(expr, (ast.Attribute, ast.Subscript, ast.Call)) and _immutable(ctx, expr, formats):
        return False  # ``x.shape``, ``tuple(x.shape)``, ``opt.param_groups[0]["lr"]``, a value formatted as a number
    style_code = formats.get(expr)
    if style_code is not None and style_code[1] in (_NUMERIC_FORMAT if style_code[0] == "format" else _NUMERIC_PERCENT):
        return False
    if type(expr) is ast.Attribute and not _of_a_module(ctx, expr):
        # ``trainer.iter_num``, ``self.config.block_size``: passed as a value (and, unless known
        # not to change, the fix says it is read at replay).
        return False
    if isinstance(expr, (ast.List, ast.Tuple, ast.Set)):
        return any(type(e) is ast.Starred or _may_hold_tensors(ctx, e, {}) for e in expr.elts)
    if isinstance(expr, (ast.ListComp, ast.SetComp, ast.GeneratorExp)):
        return _may_hold_tensors(ctx, expr.elt, {})
    if type(expr) is ast.DictComp:
        return _may_hold_tensors(ctx, expr.value, {})
    if type(expr) is ast.Name:
        scope = ctx.provenance.scope_of(expr).lookup(expr.id)
        bindings = scope.bindings.get(expr.id, []) if scope is not None else []
        if bindings and all(how == "value" and (_literal_value(v) or made_from_text(v)
                                                or ctx.provenance.made_by_the_standard_library(v))
                            for how, v in bindings):
            return False  # ``time_left = datetime.timedelta(...)``
        if ctx.provenance.declared_text(expr):
            return False  # ``name`` of ``names: Sequence[str]``
    return kind in (Kind.UNKNOWN, Kind.OTHER)


_LOOP_TYPES = (ast.For, ast.AsyncFor, ast.While)


def _output_every_iteration(ctx: FileContext, stmt: ast.stmt, sites: list[SyncSite]) -> ast.Call | None:
    """An output call that runs whenever ``stmt`` runs, in the same iteration of the
    innermost loop around it (a statement of a block on the way from ``stmt`` up to the
    loop's body, or of a ``with`` block there), and reads no tensor value: it is not
    deferred, so the runtime replays what is pending before its output each time
    (cleanrl's ``print("SPS:", ...)`` beside the deferred ``writer.add_scalar(...,
    loss.item(), ...)`` lines, every step or every 100). None when there is none."""
    blocks: list[list[ast.stmt]] = []
    child: ast.AST = stmt
    for ancestor in ctx.ancestors(stmt):
        if isinstance(ancestor, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef, ast.Module)):
            return None
        field = ctx.field_of(child)
        block = getattr(ancestor, field, None) if field else None
        if type(block) is list and child in block:
            blocks.append(block)
        if isinstance(ancestor, _LOOP_TYPES) and field == "body":
            break
        child = ancestor
    else:
        return None
    for block in blocks:
        statements = list(block)
        for statement in statements:
            if isinstance(statement, (ast.With, ast.AsyncWith)):
                statements.extend(statement.body)
                continue
            if statement is stmt or type(statement) is not ast.Expr or type(statement.value) is not ast.Call:  # type: ignore[attr-defined]
                continue
            call = statement.value  # type: ignore[attr-defined]
            found = output_call(ctx, call)
            if found is None or live_context(found, call) or _is_deferred_record(ctx, call):
                continue
            if not any(ctx.below(site.node, call) for site in sites):
                return call
    return None


def _literal_value(value: object) -> bool:
    """A literal, text made by ``str(...)``, or a choice between them (``"cuda" if ok else "cpu"``)."""
    if type(value) is ast.IfExp:
        return _literal_value(value.body) and _literal_value(value.orelse)  # type: ignore[attr-defined]
    return isinstance(value, ast.AST) and (_is_literal(value) or _is_text(value))


def _of_a_module(ctx: FileContext, expr: ast.expr) -> bool:
    """An attribute of an ``nn.Module`` itself (``self.scale`` in a module class,
    ``self.fc.weight``): modules hold tensors, so one fixitem cannot place may be
    a tensor. (``self.config.hidden_size`` is an attribute of the config.)"""
    if type(expr) is not ast.Attribute:
        return False
    base = expr.value
    if ctx.kind(base) is Kind.MODULE:
        return True
    cls = ctx.provenance.enclosing_class(expr)
    return (type(base) is ast.Name and base.id == "self" and cls is not None
            and cls.name in ctx.provenance.module_classes)


def _is_text(expr: ast.AST | None) -> bool:
    return type(expr) is ast.Call and dotted_name(expr.func) in ("str", "repr", "format")  # type: ignore[attr-defined]


# What a receiver taken at record time is called in the lambda when its own spelling says nothing.
_KIND_RECEIVERS = {OutputKind.METRICS: "writer", OutputKind.LOGGER: "logger", OutputKind.LOGGING: "logger",
                   OutputKind.PRINT: "stream", OutputKind.PROGRESS: "bar"}


# Methods that give the same value (another dtype, device or copy): not part of a name.
_SAME_VALUE_METHODS = frozenset({
    "detach", "float", "double", "half", "bfloat16", "cpu", "cuda", "to", "clone", "contiguous", "squeeze",
})


# Builtins whose result a person names after their argument: ``len(data)`` -> ``data_len``.
_NAMING_BUILTINS = frozenset({"len", "abs", "sum", "max", "min"})


def _computed_hint(ctx: FileContext, call: ast.Call) -> str:
    """What a person would call the value a call computes from a name: ``out.norm()`` ->
    ``out_norm``, ``loss.detach().mean()`` -> ``loss_mean``, ``torch.sum(hits)`` -> ``hits_sum``,
    ``self.loss.float()`` -> ``loss``; "" for anything else (``(a - b).abs().max()``)."""
    operation = ""
    node: ast.expr = call
    qualify = ctx.provenance.imports.qualify
    while type(node) is ast.Call and type(node.func) is ast.Attribute and not (  # type: ignore[attr-defined]
            qualify(node.func) or "").startswith("torch."):  # type: ignore[attr-defined]
        method = node.func.attr  # type: ignore[attr-defined]
        if method not in _SAME_VALUE_METHODS:
            if operation or node.args or node.keywords:  # type: ignore[attr-defined]
                return ""  # one operation without arguments, as ``x.sum()``, names well; more does not
            operation = method
        node = node.func.value  # type: ignore[attr-defined]
    if type(node) is ast.Call and not operation and type(node.func) is ast.Name and \
            node.func.id in _NAMING_BUILTINS and len(node.args) == 1 and not node.keywords:  # type: ignore[attr-defined]
        operation, node = node.func.id, node.args[0]  # type: ignore[attr-defined]  # ``len(data)`` -> ``data_len``
    elif type(node) is ast.Call:
        function = qualify(node.func) or ""  # type: ignore[attr-defined]
        if operation or not function.startswith("torch.") or len(node.args) != 1 or node.keywords:  # type: ignore[attr-defined]
            return ""
        operation, node = function.rsplit(".", 1)[1], node.args[0]  # type: ignore[attr-defined]
    root = node.id if type(node) is ast.Name else node.attr if type(node) is ast.Attribute else ""  # type: ignore[attr-defined]
    root = root.strip("_")
    if not root or not operation.isidentifier():
        return root if root and not operation else ""
    return f"{root}_{operation.strip('_')}"


def _receiver_hint(expr: ast.expr) -> str:
    """What a person would call the object a method is called on: ``self.writer``
    -> ``writer``, ``writers[i]`` -> ``writer``, ``get_writer(i)`` -> ``writer``,
    ``logging.getLogger(name)`` -> ``logger``."""
    if type(expr) is ast.Name:
        return expr.id.strip("_")
    if type(expr) is ast.Attribute:
        return expr.attr.strip("_")
    if type(expr) is ast.Subscript:
        base = _receiver_hint(expr.value)
        if len(base) > 2 and base.endswith("s") and not base.endswith(("ss", "us", "is")):
            return base[:-1]
        return ""
    if type(expr) is ast.Call:
        name = _receiver_hint(expr.func)
        for prefix in ("get_", "get", "make_", "create_"):
            if name.startswith(prefix) and len(name) > len(prefix):
                rest = name[len(prefix):]
                return rest[0].lower() + rest[1:]
        return ""
    return ""


def _unknown_loggers(ctx: FileContext, call: ast.Call, found: OutputCall) -> list[str]:
    """Why the logger the call writes to (itself, or through a wrapper of the file) is
    not known to be a ``logging`` one."""
    if found.kind is OutputKind.LOGGER:
        why = logger_origin(ctx, call)
        return [why] if why else []
    if found.kind is not OutputKind.WRAPPER or found.wrapper is None:
        return []
    problems: list[str] = []
    seen: set[ast.AST] = set()
    todo: list[tuple[FileContext, ast.FunctionDef]] = [(found.context or ctx, found.wrapper)]  # type: ignore[list-item]
    while todo:
        where, wrapper = todo.pop()
        if wrapper in seen:
            continue
        seen.add(wrapper)
        with where.asked():  # a wrapper of another module of the project is asked about there
            for statement in wrapper.body:
                for inner in nodes_within(statement, ast.Call):
                    inner_found = output_call(where, inner)  # type: ignore[arg-type]
                    if inner_found is None:
                        continue
                    if inner_found.kind is OutputKind.LOGGER:
                        why = logger_origin(where, inner)  # type: ignore[arg-type]
                        if why:
                            problems.append(why)
                    elif inner_found.kind is OutputKind.WRAPPER and inner_found.wrapper is not None:
                        todo.append((inner_found.context or where, inner_found.wrapper))  # type: ignore[arg-type]
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


def _literal_text(node: ast.AST) -> str | None:
    if type(node) is ast.Constant and isinstance(node.value, str):  # type: ignore[attr-defined]
        return node.value  # type: ignore[attr-defined]
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


def _formats(ctx: FileContext, call: ast.Call, found: OutputCall) -> dict[ast.AST, tuple[str, str]]:
    """The values of the call that are formatted with a type code, and how:
    ``{node: ("format", "d")}`` for ``f"{x:d}"`` and ``"{:d}".format(x)``,
    ``("percent", "x")`` for ``"%x" % x``, ``("log", "f")`` for the arguments of
    ``logger.info("%.3f", x)`` (``logging`` reports a formatting error itself)."""
    formats: dict[ast.AST, tuple[str, str]] = {}
    for node in walk(call):
        t = type(node)
        if t is ast.FormattedValue:
            spec = node.format_spec  # type: ignore[attr-defined]
            if node.conversion != -1 or spec is None or not spec.values or \
                    not all(type(p) is ast.Constant for p in spec.values):  # type: ignore[attr-defined]
                continue
            match = _FORMAT_SPEC.match("".join(p.value for p in spec.values))
            if match and match["type"]:
                formats[node.value] = ("format", match["type"])  # type: ignore[attr-defined]
        elif t is ast.Call and type(node.func) is ast.Attribute and node.func.attr == "format":  # type: ignore[attr-defined]
            text = _literal_text(node.func.value)  # type: ignore[attr-defined]
            fields = _format_fields(text) if text is not None else None
            arguments = _arguments(node)  # type: ignore[arg-type]
            if not fields or any(star for _, _, star in arguments):
                continue
            positional = [value for value, name, _ in arguments if name is None]
            keywords = {name: value for value, name, _ in arguments if name is not None}
            for name, spec in fields:
                match = _FORMAT_SPEC.match(spec) if spec else None
                if not match or not match["type"]:
                    continue
                value = positional[int(name)] if name.isdigit() and int(name) < len(positional) else keywords.get(name)
                if value is not None:
                    formats[value] = ("format", match["type"])
        elif t is ast.BinOp and type(node.op) is ast.Mod:  # type: ignore[attr-defined]
            text = _literal_text(node.left)  # type: ignore[attr-defined]
            if text is not None:
                right = node.right  # type: ignore[attr-defined]
                values = ([e.value if type(e) is ast.Starred else e for e in right.elts] if type(right) is ast.Tuple
                          else [right])
                formats.update(_percent_formats(text, values, "percent"))
    arguments = _arguments(call)
    if found.kind.logs and arguments and arguments[0][1] is None:
        text = _literal_text(arguments[0][0])
        rest = [a for a in arguments[1:] if a[1] is None]
        if text is not None and not any(star for _, _, star in rest):
            formats.update(_percent_formats(text, [value for value, _, _ in rest], "log"))
    return formats


def _percent_formats(text: str, values: list[ast.expr], style: str) -> dict[ast.AST, tuple[str, str]]:
    conversions = [m for m in _PERCENT.finditer(text) if m["type"] != "%"]
    if any(m["key"] or m["width"] == "*" or m["precision"] == "*" for m in conversions) or len(conversions) != len(values):
        return {}  # a mapping, a ``*`` width, or a count fixitem does not see
    return {value: (style, m["type"]) for value, m in zip(values, conversions)}


def _immutable(ctx: FileContext, expr: ast.expr, formats: dict[ast.AST, tuple[str, str]]) -> bool:
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
    if type(expr) is ast.Attribute:
        attr = expr.attr
        if attr in _NAME_ATTRIBUTES:
            return True  # ``self.__class__.__name__``: a string
        base = ctx.kind(expr.value)
        return (base is Kind.TENSOR and attr in _TENSOR_METADATA) or (base is Kind.NUMPY and attr in _NUMPY_METADATA)
    if type(expr) is ast.Subscript and type(expr.value) is ast.Attribute:
        return expr.value.attr == "shape" and _immutable(ctx, expr.value, {})
    if type(expr) is ast.Call:
        func = expr.func
        if type(func) is ast.Attribute and func.attr in _TENSOR_METADATA_CALLS and not expr.keywords and (
                ctx.kind(func.value) is Kind.TENSOR):
            return True  # ``x.size()``, ``x.dim()``: a ``torch.Size`` or an int
        if type(func) is ast.Name and func.id in ("tuple", "list", "len") and len(expr.args) == 1 and \
                not expr.keywords and type(expr.args[0]) is not ast.Starred and \
                ctx.provenance.scope_of(func).lookup(func.id) is None:
            return _immutable(ctx, expr.args[0], {})  # ``tuple(x.shape)``: a new container of ints
    return _hyperparameter(ctx, expr)


def _hyperparameter(ctx: FileContext, expr: ast.expr) -> bool:
    """``opt.param_groups[0]["lr"]``, ``sched.get_last_lr()[0]``: a hyper-parameter of
    a torch optimizer, a number (or a tuple of them, or a one-element tensor,
    which the runtime copies); the optimizer puts a new value in its place, it
    does not change the old one."""
    if type(expr) is not ast.Subscript:
        return False
    key = _single_index(ctx, expr)
    if key is None:
        return False
    base = expr.value
    if type(base) is ast.Call and type(base.func) is ast.Attribute:
        return base.func.attr == "get_last_lr" and not base.args and not base.keywords
    return (_simple_string(ctx, key) and type(base) is ast.Subscript
            and type(base.value) is ast.Attribute and base.value.attr == "param_groups")


# Attributes that describe a tensor or an array rather than hold its data (``shape`` is a tuple).
_TENSOR_METADATA = frozenset({"shape", "dtype", "device", "ndim", "requires_grad", "is_cuda", "is_leaf", "layout",
                              "names", "nbytes", "itemsize"})
_NUMPY_METADATA = frozenset({"shape", "dtype", "ndim", "size", "nbytes", "itemsize"})
# Tensor methods that give its metadata: a ``torch.Size`` or an int, which nothing changes later.
_TENSOR_METADATA_CALLS = frozenset({"size", "stride", "dim", "ndimension", "numel", "nelement", "element_size",
                                    "get_device"})
# Attributes that name things: strings.
_NAME_ATTRIBUTES = frozenset({"__name__", "__qualname__", "__module__"})


_CONTAINERS = (ast.List, ast.Dict, ast.Set, ast.ListComp, ast.DictComp, ast.SetComp)


def _container(ctx: FileContext, name: ast.AST) -> bool:
    """Is ``name`` bound only to lists, dicts or sets written out (``hist = []``, ``{}``)?"""
    values = ctx.provenance.assigned_values(name)
    return bool(values) and all(type(v) in _CONTAINERS or (
        type(v) is ast.Call and type(v.func) is ast.Name and v.func.id in ("list", "dict", "set")) for v in values)


def _writing_call(ctx: FileContext, values: list) -> str | None:
    """Why a call among the values passed to ``record`` writes a tensor in place (``x.add_(1)``):
    one passed before it would be copied with the change (``print(x.item(), x.add_(1).item())``)."""
    for value in values:
        if isinstance(value, ast.AST):
            for node in walk(value):
                if type(node) is ast.Call:
                    effect = call_effect(ctx, node)  # type: ignore[arg-type]
                    if effect.effect is Effect.WRITES:
                        return effect.reason
    return None


def _float_read(ctx: FileContext, node: ast.AST, reads: dict[ast.AST, SyncSite]) -> SyncSite | None:
    """A read in ``node`` whose Python value may be a float (``loss.item()``, ``float(t)``)."""
    return _read_in(node, reads, lambda site: site.kind in ("float", "complex") or (
        site.kind == "item" and not certainly_integer(ctx, site.value)))


def _number_read(node: ast.AST, reads: dict[ast.AST, SyncSite]) -> SyncSite | None:
    """A read that gives a Python number (``loss.item()``, ``float(t)``), or arithmetic on one."""
    return _read_in(node, reads, lambda site: site.kind in READ_KINDS)


def _read_in(node: ast.AST, reads: dict[ast.AST, SyncSite], wanted: Callable[[SyncSite], bool]) -> SyncSite | None:
    """The read ``node`` is, or the first one in arithmetic on reads, if ``wanted`` takes it."""
    site = reads.get(node)
    if site is not None:
        return site if wanted(site) else None
    if type(node) is ast.BinOp or type(node) is ast.UnaryOp:
        for child in children_of(node):
            found = _read_in(child, reads, wanted)
            if found is not None:
                return found
    return None


def _raising_formats(ctx: FileContext, formats: dict[ast.AST, tuple[str, str]],
                     reads: dict[ast.AST, SyncSite]) -> list[str]:
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


def _raising_concatenations(ctx: FileContext, call: ast.Call, reads: dict[ast.AST, SyncSite]) -> list[str]:
    """``print("loss: " + loss.item())``: text plus a number read always raises ``TypeError``;
    the original raises where it runs, replayed the error comes later (or in another place
    than the ``except TypeError`` around the line)."""
    problems = []
    for node in walk(call):
        if type(node) is not ast.BinOp or type(node.op) is not ast.Add:  # type: ignore[attr-defined]
            continue
        for text, other in ((node.left, node.right), (node.right, node.left)):  # type: ignore[attr-defined]
            site = _number_read(other, reads)
            if site is not None and (is_text(text) or _is_text(text)):
                problems.append(f"`{ctx.code(node)}` adds the number `{ctx.code(site.node)}` to text, which "
                                "raises `TypeError`: at replay, later than the original")
                break
    return problems


def _raising_divisions(ctx: FileContext, call: ast.Call, reads: dict[ast.AST, SyncSite]) -> list[str]:
    """``loss.item() / n``: arithmetic on a number read runs at replay; a divisor that may be
    zero raises ``ZeroDivisionError`` there, later than the original (outside the ``except``
    around the line, or past the point where it stopped the program)."""
    problems = []
    for node in walk(call):
        if type(node) is not ast.BinOp or type(node.op) not in (ast.Div, ast.FloorDiv, ast.Mod):  # type: ignore[attr-defined]
            continue
        left, right = node.left, node.right  # type: ignore[attr-defined]
        if type(node.op) is ast.Mod and (is_text(left) or _is_text(left)):  # type: ignore[attr-defined]
            continue  # ``"%.3f" % value`` formats
        if _number_read(left, reads) is None and _number_read(right, reads) is None:
            continue  # computed now, as the original computes it
        why = zero_divisor(ctx, right)
        if why:
            problems.append(f"`{ctx.code(node)}` raises `ZeroDivisionError` where `{ctx.code(right)}` is 0, "
                            "computed at replay: later than the original")
    return problems


def _once_guard(ctx: FileContext, stmt: ast.stmt) -> str:
    """``if msg not in _logged: logger.warning(msg); _logged.add(msg)`` in traced code: the
    call's graph break kept the check and its update in Python. Deferred, torch.compile
    traces them with the call, and Dynamo's handling of a container the code updates (its
    guards on a string built from dynamic shapes) may run the call again."""
    for up in ctx.ancestors(stmt):
        if isinstance(up, (*_FUNCTIONS, ast.ClassDef, ast.Lambda)):
            return ""
        if type(up) is not ast.If:
            continue
        for test in walk(up.test):
            if type(test) is not ast.Compare or not any(type(op) in (ast.In, ast.NotIn) for op in test.ops):
                continue
            for held in test.comparators:
                code = ctx.code(held)
                if any(type(n) is ast.Call and type(n.func) is ast.Attribute and n.func.attr in CONTAINER_ADDS
                       and ctx.code(n.func.value) == code for n in walk(up)) or any(
                        type(n) in (ast.Assign, ast.AugAssign) and any(
                            type(t) is ast.Subscript and ctx.code(t.value) == code
                            for t in (n.targets if type(n) is ast.Assign else [n.target]))
                        for n in walk(up)):
                    return (f"the `if` around it tests `{ctx.code(test)}` and updates `{code}`: deferred, the call "
                            "no longer breaks the graph, so torch.compile traces the check and the update with it, "
                            "and may run the call again where the original ran it once")
    return ""


REDIRECTS = frozenset({"contextlib.redirect_stdout", "contextlib.redirect_stderr"})


def _redirect(ctx: FileContext, block: ast.With | ast.AsyncWith) -> str:
    """The ``redirect_stdout`` / ``redirect_stderr`` that ``block`` enters, as written, or ""."""
    for item in block.items:
        expr = item.context_expr
        if type(expr) is ast.Call and ctx.provenance.imports.qualify(expr.func) in REDIRECTS:
            return ctx.code(expr.func)
    return ""


def _redirected(ctx: FileContext, stmt: ast.AST) -> str:
    """The ``with redirect_stdout(...)`` around ``stmt`` in its function, if any."""
    for parent in ctx.ancestors(stmt):
        if isinstance(parent, (*_FUNCTIONS, ast.ClassDef, ast.Lambda)):
            return ""
        if isinstance(parent, (ast.With, ast.AsyncWith)):
            redirect = _redirect(ctx, parent)
            if redirect:
                return redirect
    return ""


def _redirected_elsewhere(ctx: FileContext, stmt: ast.AST) -> bool:
    """Does a ``with redirect_stdout(...)`` of the file stand outside ``stmt``'s function
    (``with redirect_stdout(buf): train()``, the line in ``train``)? One in the same function
    and not around the line is over before the line runs."""
    if not ctx.memo("redirects streams", lambda: redirects_streams(ctx.source)):
        return False
    here = ctx.enclosing_function(stmt)
    return any(_redirect(ctx, block) and ctx.enclosing_function(block) is not here  # type: ignore[arg-type]
               for block in ctx.nodes(ast.With, ast.AsyncWith))


_LINE_START = re.compile(r"[ \t\f]*")


class _WrappedCall(gen.Node):
    """A one-line call of the file (with ``replacements`` inside it) as the body of a lambda
    that stands at ``line`` indentation, its arguments on the lines below, as black wraps
    a call: all on one line one level in when they fit, else one per line."""

    kind = "Call"

    def __init__(self, call: ast.Call, replacements: dict[ast.AST, gen.Expr_], line: str) -> None:
        self.call = call
        self.replacements = replacements
        self.line = line

    def _spliced(self, ctx: FileContext, node: ast.AST) -> str:
        inside = {k: v for k, v in self.replacements.items() if ctx.below(k, node)}
        return gen.Splice(node, inside).render(ctx, self.line)

    def render(self, ctx: FileContext, indent: str = "") -> str:
        func = self._spliced(ctx, self.call.func)
        args = []
        for arg in self.call.args:
            args.append(self._spliced(ctx, arg))
        for keyword in self.call.keywords:
            value = self._spliced(ctx, keyword.value)
            args.append(f"**{value}" if keyword.arg is None else f"{keyword.arg}={value}")
        inner = self.line + gen.INDENT
        hugged = f"{inner}{', '.join(args)}"
        if len(hugged) <= ctx.line_length or len(args) == 1:  # (one argument: nothing to split at)
            return f"{func}(\n{hugged}\n{self.line})"
        return f"{func}(" + "".join(f"\n{inner}{a}," for a in args) + f"\n{self.line})"

    def children(self) -> list[gen.Expr_]:
        return list(self.replacements.values())

    def rebuilt(self, kids: list[gen.Expr_]) -> gen.Node:
        return _WrappedCall(self.call, dict(zip(self.replacements, kids)), self.line)


class _Moved(gen.Node):
    """Code of the file moved into ``deferred.record(...)`` (the call as the lambda's body, a
    value passed): its lines that start inside its brackets keep their place relative to the
    block (one written left of the block's indentation gets it in front), and lines of code
    among them move ``extra`` further in, with the call, one level in as the lambda argument
    of ``deferred.record(``. Lines in a string and after a ``\\`` stay as written."""

    def __init__(self, value: gen.Expr_, block: str, extra: str = "") -> None:
        self.value = gen.expr(value)
        self.block = block
        self.extra = extra

    @property
    def kind(self) -> str:  # type: ignore[override]
        return self.value.kind

    def render(self, ctx: FileContext, indent: str = "") -> str:
        # The file's text as it stands in its block: the move is this node's own.
        text = self.value.render(ctx, self.block)
        if "\n" not in text:
            return text
        return _moved_lines(text, self.block, self.extra)

    def children(self) -> list[gen.Expr_]:
        return [self.value]

    def rebuilt(self, kids: list[gen.Expr_]) -> gen.Node:
        return _Moved(kids[0], self.block, self.extra)


def _moved_lines(text: str, block: str, extra: str) -> str:
    lines = text.split("\n")
    after_break: set[int] = set()  # 0-based numbers of the lines that follow a line break in brackets
    try:
        for token in tokenize.generate_tokens(io.StringIO(f"({text})").readline):
            if token.type in (tokenize.NL, tokenize.NEWLINE) and token.start[0] < len(lines):
                after_break.add(token.start[0])
    except (tokenize.TokenError, SyntaxError):
        return text
    for number in sorted(after_break):
        line = lines[number]
        space = _LINE_START.match(line).group()  # type: ignore[union-attr]
        rest = line[len(space):]
        if not space.startswith(block):
            space = block + space
        if rest and not rest.startswith("#"):
            space += extra
        lines[number] = space + rest
    return "\n".join(lines)


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
        lambda iter_num, batch_len, loss: print(
            f"iter {iter_num:d} seen {batch_len} loss {loss:.4f}"
        ),
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
    A hyper-parameter printed as it is (not formatted as a number) is safe only
    when the optimizer is made in the file with a number for it: torch's
    optimizers accept a tensor learning rate, which prints as a tensor, and
    the replay would print its number (unsafe, with that reason).
    Loggers are those the code
    shows are `logging` loggers (`logging.getLogger(...)`, a library's
    `logging.get_logger(...)`, a `logging.Logger` annotation, `self.logger`
    assigned one of these).
    A replayed logging record keeps the `funcName` of the function that made
    the call, the time it was made (`created`, what `%(asctime)s` shows) and,
    as its `lineno`, the line where the rewritten call starts. Line numbers
    are the one printed difference: the import fixitem adds, and a call
    rewritten over more lines than it took, move every later line of the
    file down (`%(lineno)d` of later log calls, the lines warnings and
    tracebacks name).
    The logger checks its level when the call is replayed: a call whose level
    is disabled printed nothing before and prints nothing after; a change of
    level, handler or format replays the pending calls first, so each is
    handled under the configuration it was made under.
    `warning_once` keeps its once-per-message behaviour (it is called once
    per replayed record, as before).
    **Unsafe** when `float(t)` may be of a tensor that requires grad (a
    loss, a parameter of the function): torch warns on stderr for such a
    conversion and the replayed number does not (safe under `torch.no_grad()`
    and for values that visibly take no gradient, such as `(pred == y).sum()`);
    when a name passed may be a mutable object (a dict, a list,
    `self`, a parameter of unknown type), or an attribute or item passed may
    be one (`stats["r"]`, `run.returns`: a numpy array reset in place after
    the call), or a numpy array the code changes in place (`window[i] = v`):
    it is passed by reference and formatted at replay, not now, so a later
    mutation shows; when a file of the run puts its own object in place of
    `sys.stdout` / `sys.stderr` (`sys.stdout = Tee(path)`: the tee writes
    the program's later lines to its file before the replayed one), or when
    the file redirects them for a block (`with redirect_stdout(buf):
    train()`: a line of `train` would be replayed after the block, to the
    stream put back), or writes to their file descriptors itself
    (`os.write(1, ...)`, `sys.stdout.buffer.write`: not kept in order with
    replayed lines); when arithmetic on a read may divide by zero
    (`loss.item() / n`: it runs at replay, so the `ZeroDivisionError` would
    come later; a nonzero constant, or `len(data)` of a batch a loop takes,
    cannot be zero); when a value passed is written in place by another
    (`print(c.item(), c.add_(1).item())`: the values are copied when all are
    evaluated); when the logger is not known to be a
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
    source line, and escapes a `warnings.catch_warnings()` or `pytest.warns`
    around the call); for a metric writer the file flushes or closes, other
    than TensorBoard's `SummaryWriter` and wandb, whose calls the runtime
    sees (`writer.add_scalar(...)` with `writer.close()`: a value replayed
    after it misses what it writes, or reaches a closed writer); for loguru loggers (their default format shows the
    function, `<lambda>` at replay); for a module formatted at replay; for
    `print(..., flush=True)`, which asks for the text now (deferred, it is
    written within 2 s, and a `kill -9` meanwhile loses it); and in traced
    code under a "once" check (`if msg not in _logged: ...; _logged.add(msg)`):
    the call's graph break kept the check in Python, and traced with it by
    torch.compile it may log again.
    **No fix** inside `with redirect_stdout(...)` / `redirect_stderr(...)`
    (replayed after the block, the text would go to the stream put back);
    for `print(..., file=f)` to a file of the program rather than
    `sys.stdout` / `sys.stderr` (the program may close it, `with open(...) as
    f:`, or read it back before the replay, and its own writes to it are not
    kept in order); when a read may raise and a handler around it in the function catches
    what it raises (`t.item()` raises `RuntimeError` and `float(t)` / `int(t)`
    raise `ValueError` unless `t` holds one element, as a full reduction
    does; `int(t)` of NaN raises `ValueError`; `{:d}` of a float too; a
    division by zero raises `ZeroDivisionError`) inside
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
    **No fix** either, outside traced code, where other output that reads no
    tensor runs whenever the call does, in the same iteration of the loop
    around it (cleanrl's `print("SPS:", ...)` beside its
    `writer.add_scalar(..., loss.item(), ...)` lines): that output is not
    deferred, the runtime replays what is pending before it, and the read
    would still happen each time. Nor, outside traced code, where the
    program stops after the call in the same block (`sys.exit(1)`,
    `os._exit(...)`): it runs once, so no read would be saved, and the
    message would wait for the flush at exit.
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
                        lambda iter_num, batch_len, loss: print(
                            "it %d n %d loss %.3f" % (iter_num, batch_len, loss)
                        ),
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
                                lambda: logger.warning_once(
                                    "`use_cache=True` is incompatible with training."
                                ),
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
        for stmt in ctx.nodes(ast.Expr):
            assert isinstance(stmt, ast.Expr)
            call = stmt.value
            if type(call) is not ast.Call or _is_deferred_record(ctx, call):
                continue
            traced = ctx.in_traced_code(stmt)
            inner = [s for s in sites_within(ctx, sites, call) if s not in claimed]
            if not traced and not any(s.kind in READ_KINDS for s in inner):
                continue  # reads no tensor and breaks no graph: left as it is, whatever it calls
            found = output_call(ctx, call)
            if found is None or live_context(found, call):
                continue
            if ctx.enclosing_function(stmt) in wrappers:
                continue  # a wrapper's own output is deferred where the wrapper is called
            plan = self._plan(ctx, stmt, call, found, inner)
            if not plan.reads and plan.new is None:
                continue  # e.g. `print(x)` in forward: reported as a formatted tensor
            if plan.new is not None and not traced:
                ending = _program_ends_after(ctx, stmt)
                if ending is not None:
                    plan.new = None
                    plan.blocker = (f"`{ctx.code(ending)}` (line {ctx.position(ending)[0]}) follows it in its block: "
                                    "the call runs once, as the program stops, so no read would be saved, and "
                                    "the message would wait for the runtime's flush at exit")
            if plan.new is not None and not traced:
                every_step = _output_every_iteration(ctx, stmt, sites)
                if every_step is not None:
                    plan.new = None
                    plan.blocker = (f"`{ctx.code(every_step.func)}(...)` (line {ctx.position(every_step)[0]}) "
                                    "writes output whenever this call runs and reads no tensor: the runtime "
                                    "replays what is pending before that output, so the read would still "
                                    "happen each time; write that less often, or with the values of this call")
            message = f"`{ctx.code(call.func)}(...)` " + (
                "reads tensor values on the host" if plan.reads else "breaks the graph in traced code"
            )
            if plan.new is None:
                yield Report(stmt, message, sites=plan.reads, note=f"no fix: {plan.blocker}")
                continue
            if traced:
                once = _once_guard(ctx, stmt)
                if once:
                    plan.unsafe.append(once)
            safety = Safety.UNSAFE if plan.unsafe else Safety.SAFE
            fix = Fix({stmt: gen.ExprStatement(plan.new)}, safety,
                      "; ".join(plan.unsafe), imports=ctx.runtime_imports())
            yield Report(stmt, message, fix=fix, sites=plan.reads)

    def _plan(self, ctx: FileContext, stmt: ast.Expr, call: ast.Call, found: OutputCall,
              inner: list[SyncSite]) -> _Plan:
        """How to defer ``call``, given the unclaimed sync sites within it."""
        reads = {s.node: s for s in inner if s.kind in READ_KINDS and type(s.node) is ast.Call}
        others = {s.node for s in inner if s.node not in reads}
        plan = _Plan(stmt, call, found, reads=[s for s in inner if s.node in reads])
        if any(ctx.below(s.node, call.func) for s in inner):
            plan.blocker = "the callee itself reads a tensor value"
            return plan
        redirect = _redirected(ctx, stmt)
        if redirect and found.kind is not OutputKind.METRICS:
            plan.blocker = (f"it is inside `with {redirect}(...)`: replayed after the block, the text would go to "
                            "the stream put back, not the one it redirects to")
            return plan
        if found.kind is not OutputKind.METRICS and not redirect and (
                program_replaces_streams() or ctx.memo("replaces streams", lambda: replaces_streams(ctx.source))
                or ctx.memo("imports a module replacing streams", lambda: imports_replacing_streams(ctx))):
            plan.unsafe.append("the program puts its own object in place of `sys.stdout` or `sys.stderr` (a tee "
                               "to a log file): replayed later, the text reaches it after the program's later "
                               "output")
        if found.kind is not OutputKind.METRICS and ctx.memo(
                "writes streams directly", lambda: writes_streams_directly(ctx.source)):
            plan.unsafe.append("the file writes to the output's file descriptor itself (`os.write(1, ...)`, "
                               "`sys.stdout.buffer.write`): the replayed line is not kept in order with those writes")
        if found.kind is not OutputKind.METRICS and not redirect and _redirected_elsewhere(ctx, stmt):
            plan.unsafe.append("the file redirects `sys.stdout` or `sys.stderr` for a block (`redirect_stdout`): "
                               "called there, the line would be replayed after the block, to the stream put back")
        file = own_file(ctx, call, found)
        if file:
            plan.blocker = (f"it writes to `{file}`, a file of the program: replayed later, the text could go to a "
                            "file closed by then, or out of order with the program's own writes to it")
            return plan
        collector = _Collector(ctx, reads, others)
        for value, _, star in _arguments(call):
            collector.walk_argument(value, star)
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
        ended = writer_ended_by(ctx, call, found)
        if ended:
            plan.unsafe.append(f"`{ended}` in this file writes out or closes the writer: a value replayed after it "
                               "misses what it writes, or reaches a closed writer")
        if found.kind is OutputKind.WARNING:
            plan.unsafe.append("the warning is issued at replay: it shows the `deferred.record(...)` line as its "
                               "source, and escapes a `warnings.catch_warnings()` or `pytest.warns(...)` around the "
                               "call")
        if found.kind is OutputKind.LOGGER and (ctx.provenance.imports.qualify(call.func) or "").startswith("loguru."):
            plan.unsafe.append("loguru's default format shows the calling function, `<lambda>` at replay")
        plan.unsafe.extend(_unknown_loggers(ctx, call, found))
        formats = _formats(ctx, call, found)
        # What raises on every call, and what it raises: replayed, later than the original.
        for raising, errors in ((lambda: _raising_formats(ctx, formats, reads), (ValueError,)),
                                (lambda: _raising_concatenations(ctx, call, reads), (TypeError,)),
                                (lambda: _raising_divisions(ctx, call, reads), (ZeroDivisionError,))):
            problems = raising()
            handler = catching_handler(ctx, stmt, errors) if problems else ""
            if handler:
                plan.blocker = f"{problems[0]}, not where the `{handler}` around it handles the error"
                return plan
            plan.unsafe.extend(problems)
        # The object whose method is called is taken now, as the original takes it:
        # ``writer`` rebound for the next run, ``writers[i]`` of a loop, ``get_writer(i)``.
        receiver = call.func.value if type(call.func) is ast.Attribute else None
        if receiver is not None and stable_receiver(ctx, receiver):
            receiver = None
        if receiver is not None and any(type(n) in _NOT_IN_LAMBDA for n in walk(receiver)):
            plan.blocker = "the object called contains `await`, `yield` or `:=`, which a lambda cannot hold"
            return plan

        # Parameters, in order of first appearance. (Attribute names are no names here;
        # keyword arguments and the parameters of lambdas are.)
        taken: set[str] = set()
        for n in nodes_within(call, ast.Name, ast.keyword, ast.arg):
            t = type(n)
            if t is ast.Name:
                taken.add(n.id)  # type: ignore[attr-defined]
            elif n.arg is not None:  # type: ignore[attr-defined]  # a parameter, a keyword (not ``**``)
                taken.add(n.arg)  # type: ignore[attr-defined]
        # Nor the names of the file's imports: ``m.np`` is not passed as ``np`` where ``np`` is numpy.
        taken.update(ctx.provenance.imports.origins)
        params: list[str] = []
        values: list[gen.Expr_] = []
        body_replacements: dict[ast.AST, gen.Expr_] = {}
        counter = 0

        def fresh(hint: ast.AST | str | None = None) -> str:
            nonlocal counter
            # ``trainer.iter_num`` is passed as ``iter_num``: read as the original.
            # ``opt.param_groups[0]["lr"]`` as ``lr``.
            name = hint if isinstance(hint, str) else ""
            if type(hint) is ast.Attribute:
                name = hint.attr
            elif type(hint) is ast.Subscript:
                key = _single_index(ctx, hint)
                if key is not None and _simple_string(ctx, key) and isinstance(key.value, str):  # type: ignore[attr-defined]
                    name = key.value  # type: ignore[attr-defined]
            elif type(hint) is ast.Call:
                name = _computed_hint(ctx, hint)  # ``out.norm()`` as ``out_norm``
            if name.isidentifier() and not keyword.iskeyword(name) and name not in BUILTINS:
                if name not in taken and name not in params:
                    return name
                for number in range(2, 10) if type(hint) in (ast.Attribute, ast.Subscript) else ():
                    # ``lr`` of ``args.lr``, then ``lr_2`` of the optimizer's ``["lr"]``: another
                    # object's value of the same name (``loss.float()`` beside ``loss`` is not).
                    if f"{name}_{number}" not in taken and f"{name}_{number}" not in params:
                        return f"{name}_{number}"
            while True:
                name = "value" if counter == 0 else f"value_{counter}"
                counter += 1
                if name not in taken and name not in params:
                    return name

        if receiver is not None:
            if type(receiver) is ast.Name:
                param = receiver.id  # ``lambda writer, loss: writer.add_scalar(...)``
            else:
                param = fresh(_receiver_hint(receiver))
                if param.startswith("value"):
                    param = fresh(_KIND_RECEIVERS.get(found.kind, "target"))
                body_replacements[receiver] = gen.Name(param)
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
                    values.append(gen.Name(name))
                if all(use == "read" for _, use in uses):
                    continue
                node = uses[0][0]
                if ctx.kind(node) is Kind.TENSOR:
                    plan.blocker = f"`{name}` is a tensor used other than through `.item()`"
                    return plan
                if _may_hold_tensors(ctx, node, formats):
                    # Passed as itself, so that it prints as the original printed it.
                    by_reference.add(params.index(name))
                    what = "may hold tensors" if _container(ctx, node) else "may be a tensor"  # ``hist = []``
                    plan.unsafe.append(f"`{name}` {what}: it is passed by reference and read at replay, not now")
                elif any(_prints_as_number(ctx, use_node, formats, found.kind.formats_text)
                         for use_node, use in uses if use != "read"):
                    plan.unsafe.append(f"`{name}` may be a tensor: replayed, it would print as a number")
                elif not _is_plain(ctx, node) and not all(
                        _immutable(ctx, use_node, formats) for use_node, use in uses if use != "read"):
                    plan.unsafe.append(f"`{name}` is passed by reference and read at replay, not now")
            elif what == "expr":
                expr = item
                assert isinstance(expr, ast.expr)
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
                elif _prints_as_number(ctx, expr, formats, found.kind.formats_text):
                    plan.unsafe.append(f"`{ctx.code(expr)}` may be a tensor: replayed, it would print as a number")
                if isinstance(expr, (ast.Attribute, ast.Subscript)) and not _immutable(ctx, expr, formats):
                    plan.unsafe.append(
                        f"`{ctx.code(expr)}` may be a mutable object (an array): it is passed by reference and read "
                        "at replay, not now"
                    )
                param = fresh(expr)
                if may_hold:
                    by_reference.add(len(params))
                params.append(param)
                values.append(expr)
                body_replacements[expr] = gen.Name(param)
            else:
                site = reads[item]  # type: ignore[index]
                value = site.value
                if not site.certain:
                    plan.unsafe.append(f"`{ctx.code(value)}` is not known to be a tensor")
                if type(value) is ast.Name and all(use == "read" for _, use in collector.names.get(value.id, [])):
                    param = value.id  # passed once, as the name
                else:
                    param = fresh(value)  # ``trainer.loss.item()`` as ``loss``
                    params.append(param)
                    values.append(value)
                new_expr: gen.Node = gen.Name(param)
                if site.kind in ("float", "int", "complex"):  # the conversion as written: the same type
                    new_expr = gen.Call(gen.Name(site.kind), [gen.Name(param)])
                if site.kind == "float" and not gradients_off(ctx, site.node) and not visibly_without_gradient(
                        ctx, value):
                    plan.unsafe.append(
                        f"`{ctx.code(site.node)}` may be of a tensor that requires grad: such a `float()` warns on "
                        "stderr (a `UserWarning`), the replayed number does not")
                body_replacements[item] = new_expr  # type: ignore[index]
        writer = _writing_call(ctx, values) if len(values) > 1 else None
        if writer is not None:
            plan.unsafe.append(f"{writer}: the values are copied when all of them are evaluated, not read in turn")
        block = ctx.indent(stmt)  # the block's (also for ``if x: print(...)``, ``a = 1; print(...)``)
        # Multi-line, the call moves one level in, as the lambda argument of ``deferred.record(``.
        body = _Moved(gen.Splice(call, body_replacements), block, gen.INDENT)
        arguments: list[gen.Expr_] = [gen.Lambda(params, body)]
        for i, value in enumerate(values):
            moved = _Moved(value, block)
            arguments.append(gen.Call(gen.Attribute(gen.Name(alias), "by_reference"), [moved]) if i in by_reference
                             else moved)
        record = gen.Call(gen.Attribute(gen.Name(alias), "record"), arguments)
        text = record.render(ctx, block)
        if "\n" in text or ctx.positions[stmt].start.column + len(text) > ctx.line_length:
            record = record.with_one_per_line()
            lambda_line = f"{block}{gen.INDENT}{gen.Lambda(params, body).render(ctx, block)},"
            if "\n" not in lambda_line and len(lambda_line) > ctx.line_length and (call.args or call.keywords):
                # The lambda's line is still too long: its call's arguments go on lines of their own.
                arguments[0] = gen.Lambda(params, _WrappedCall(call, body_replacements, block + gen.INDENT))
                record = gen.Call(record.func, arguments, one_per_line=True)
        if found.kind.logs and "\n" in record.render(ctx, block) and \
                (ctx.provenance.imports.qualify(call.func) or "").startswith("absl."):
            plan.unsafe.append("absl's log format shows the calling line, which moves into `deferred.record(`")
        plan.new = record
        plan.unsafe = list(dict.fromkeys(plan.unsafe))
        return plan
