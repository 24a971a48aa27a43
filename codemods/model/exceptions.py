"""Which exceptions a read may raise, and which handler around it would catch them.

A rewrite that moves a read elsewhere (deferred logging replays it later, an
on-device sum adds it without reading it) also moves the exception the read
may raise. Where nothing catches that exception the program stops either way;
where a handler around the read catches it (``try: ... except RuntimeError:``,
``with contextlib.suppress(ValueError):``), the original runs the handler and
goes on, and the rewrite does not. Two facts, one definition each:

* :func:`read_exceptions`: what a scalar read (``t.item()``, ``float(t)``,
  ``int(t)``) may raise. ``t.item()`` raises ``RuntimeError`` and ``float(t)``
  / ``int(t)`` raise ``ValueError`` unless ``t`` holds exactly one element,
  which is certain for a full reduction and what is computed elementwise from
  one (:func:`codemods.scalar_shapes.plainly_zero_dim`); ``int(t)`` of a
  floating tensor also raises ``ValueError`` for NaN and ``OverflowError`` for
  an infinity.
* :func:`catching_handler`: the clause around a node, in its own function,
  that may catch one of given exception classes. A bare ``except:``, a builtin
  base class (``Exception``, ``RuntimeError``), a tuple holding one, and a name
  fixitem cannot resolve (an imported alias may be ``RuntimeError`` or a tuple)
  may catch it; a class that is not a builtin cannot be a base of a builtin
  exception, so ``except torch.cuda.OutOfMemoryError:`` or a class of the file
  does not. A handler in a caller is not seen.
"""

from __future__ import annotations

import ast
import builtins
from typing import TYPE_CHECKING

from .dtypes import certainly_integer_or_bool
from .output_calls import call_arguments
from .provenance import dotted_name
from .scalar_shapes import plainly_zero_dim

if TYPE_CHECKING:
    from .context import FileContext
    from .syncs import SyncSite

# Managers that swallow the exceptions named in their arguments.
SUPPRESSORS = frozenset({"contextlib.suppress"})
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)
_TRIES = (ast.Try, ast.TryStar) if hasattr(ast, "TryStar") else (ast.Try,)
_WITHS = (ast.With, ast.AsyncWith)
_BUILTIN_EXCEPTIONS = {
    name: value for name, value in vars(builtins).items()
    if isinstance(value, type) and issubclass(value, BaseException)
}


def read_exceptions(ctx: FileContext, site: SyncSite) -> tuple[tuple[type[BaseException], ...], str]:
    """The exceptions the scalar read ``site`` may raise, and why in words; ``()`` when none."""
    if site.kind not in ("item", "float", "int", "complex"):
        return (), ""
    value = ctx.code(site.value)
    raised: list[type[BaseException]] = []
    why: list[str] = []
    if not plainly_zero_dim(ctx, site.value):
        raised.append(RuntimeError if site.kind == "item" else ValueError)
        why.append(f"`{raised[-1].__name__}` unless `{value}` holds exactly one element")
    if site.kind == "int" and not certainly_integer_or_bool(ctx, site.value):
        raised.extend([ValueError, OverflowError])
        why.append(f"`ValueError` / `OverflowError` if `{value}` is NaN or infinite")
    return tuple(dict.fromkeys(raised)), " and ".join(why)


def catching_handler(ctx: FileContext, node: ast.AST, raised: tuple[type[BaseException], ...]) -> str:
    """The ``except ...`` clause or ``with suppress(...)`` around ``node`` in its function
    that may catch an exception of one of the classes ``raised``, as written
    (``"except RuntimeError"``); "" when none may."""
    if not raised:
        return ""
    child = node
    for parent in ctx.ancestors(node):
        if isinstance(parent, _SCOPES):
            return ""
        if isinstance(parent, _TRIES) and _in_body(child, parent):
            for handler in parent.handlers:  # type: ignore[attr-defined]
                if handler.type is None or _may_catch(ctx, handler.type, raised, 0):
                    star = "*" if type(parent) is not ast.Try else ""
                    return f"except{star}" + (f" {ctx.code(handler.type)}" if handler.type is not None else "")
        if isinstance(parent, _WITHS) and _in_body(child, parent):
            for item in parent.items:  # type: ignore[attr-defined]
                call = item.context_expr
                if type(call) is ast.Call and ctx.provenance.imports.qualify(call.func) in SUPPRESSORS and \
                        any(star or _may_catch(ctx, value, raised, 0) for _, star, value in call_arguments(call)):
                    return f"with {ctx.code(call)}"
        child = parent
    return ""


def _in_body(child: ast.AST, parent: ast.AST) -> bool:
    """Is ``child`` a statement of ``parent.body`` (the ``try:`` block, not a handler, the
    ``else:`` or the ``finally:``; the block of a ``with``)?"""
    return any(statement is child for statement in parent.body)  # type: ignore[attr-defined]


def _may_catch(ctx: FileContext, expr: ast.expr, raised: tuple[type[BaseException], ...], depth: int) -> bool:
    """Can the handler type ``expr`` catch an exception of one of the classes ``raised``?"""
    if depth > 4:
        return True
    if type(expr) is ast.Tuple or type(expr) is ast.List:
        return any(type(e) is ast.Starred or _may_catch(ctx, e, raised, depth + 1)
                   for e in expr.elts)  # type: ignore[attr-defined]
    if type(expr) is ast.Name:
        name = expr.id  # type: ignore[attr-defined]
        scope = ctx.provenance.scope_of(expr).lookup(name)
        if scope is None:  # a builtin, or a name fixitem does not know
            known = _BUILTIN_EXCEPTIONS.get(name)
            return known is None or any(issubclass(r, known) for r in raised)
        bindings = scope.bindings.get(name, [])
        if all(how == "opaque" for how, _ in bindings) and _is_class_of_file(ctx, scope, name):
            return False  # a class of the file: not a base of a builtin exception
        if bindings and all(how == "value" and isinstance(v, ast.expr) for how, v in bindings):
            return any(_may_catch(ctx, v, raised, depth + 1) for _, v in bindings)  # type: ignore[arg-type]
    qualified = ctx.provenance.imports.qualify(expr) or dotted_name(expr) or ""
    module, _, last = qualified.rpartition(".")
    if last in _BUILTIN_EXCEPTIONS and module in ("", "builtins"):
        return any(issubclass(r, _BUILTIN_EXCEPTIONS[last]) for r in raised)
    # ``torch.cuda.OutOfMemoryError``: a class named as one, not a builtin, is no base of one.
    return not (qualified and last[:1].isupper() and last.endswith(("Error", "Exception", "Warning", "Exit"))
                and last not in _BUILTIN_EXCEPTIONS)


def _is_class_of_file(ctx: FileContext, scope, name: str) -> bool:
    return any(node.name == name and ctx.provenance.scope_of(node) is scope for node in ctx.nodes(ast.ClassDef))  # type: ignore[attr-defined]
