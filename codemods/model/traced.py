"""Which functions ``torch.compile`` traces, as far as one file shows.

A sync inside traced code is also a graph break. Traced code is:

* ``forward`` of a class (an ``nn.Module`` subclass, or any class defining
  ``forward``: that is how modules are recognised when the base class comes
  from elsewhere);
* functions decorated with ``@torch.compile`` (with or without arguments) or
  passed by name to ``torch.compile(...)``;
* functions of the same file that traced code calls, by name or as
  ``self.method(...)``, transitively;
* functions that traced code of another module of the project calls (the
  driver finds them with :func:`codemods.model.project.calls_elsewhere` and
  analyses their module again with them as roots).
"""

from __future__ import annotations

import ast
from collections.abc import Mapping

from .provenance import Imports
from .tree import nodes_in_body, nodes_within

_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)


_COMPILERS = ("torch.compile", "torch.jit.script", "torch.compiler.compile")


def _is_compile(node: ast.expr, imports: Imports) -> bool:
    if type(node) is ast.Call:
        node = node.func
    if type(node) is ast.Attribute and node.attr not in ("compile", "script"):
        return False  # ``x.to(...)``: an import names only the first part, not the last
    return imports.qualify(node) in _COMPILERS


def _first_argument(call: ast.Call) -> ast.expr | None:
    """The value of the first argument of ``call`` as written (positional or keyword)."""
    first: ast.AST | None = None
    for candidate in (call.args[0] if call.args else None, call.keywords[0] if call.keywords else None):
        if candidate is not None and (first is None or (candidate.lineno, candidate.col_offset) < (first.lineno, first.col_offset)):  # type: ignore[attr-defined]
            first = candidate
    if first is None:
        return None
    return first.value if type(first) in (ast.keyword, ast.Starred) else first  # type: ignore[attr-defined,return-value]


def traced_functions(
    module: ast.Module, imports: Imports, parents: Mapping[ast.AST, ast.AST], roots: tuple[str, ...] = ()
) -> set[ast.FunctionDef]:
    """The functions of ``module`` that traced code runs; ``roots``: the functions (``"f"``,
    ``"Class.method"``) that traced code of other modules calls."""
    functions = nodes_within(module, *_FUNCTIONS)
    by_name: dict[str, list[ast.FunctionDef]] = {}
    methods: dict[tuple[ast.ClassDef, str], ast.FunctionDef] = {}
    for func in functions:
        parent = parents.get(func)  # a method's parent is its ClassDef
        if type(parent) is ast.ClassDef:
            methods[(parent, func.name)] = func  # type: ignore[attr-defined,index]
        else:
            by_name.setdefault(func.name, []).append(func)  # type: ignore[attr-defined,arg-type]

    traced: set[ast.FunctionDef] = set()
    compiled_names: set[str] = set()
    for node in nodes_within(module, ast.Call):
        if _is_compile(node.func, imports) and (node.args or node.keywords):  # type: ignore[attr-defined]
            target = _first_argument(node)  # type: ignore[arg-type]
            if type(target) is ast.Name:
                compiled_names.add(target.id)  # type: ignore[union-attr]
    for func in functions:
        cls = parents.get(func)
        if func.name == "forward" and type(cls) is ast.ClassDef:  # type: ignore[attr-defined]
            traced.add(func)  # type: ignore[arg-type]
        elif any(_is_compile(d, imports) for d in func.decorator_list):  # type: ignore[attr-defined]
            traced.add(func)  # type: ignore[arg-type]
        elif func.name in compiled_names and type(cls) is not ast.ClassDef:  # type: ignore[attr-defined]
            traced.add(func)  # type: ignore[arg-type]
        elif roots and root_name(func, cls) in roots:
            traced.add(func)  # type: ignore[arg-type]

    work = list(traced)
    while work:
        func = work.pop()
        cls = parents.get(func)
        for node in nodes_in_body(func.body, ast.Call):  # type: ignore[attr-defined]
            callees: list[ast.FunctionDef] = []
            f = node.func  # type: ignore[attr-defined]
            if type(f) is ast.Name:
                callees = by_name.get(f.id, [])
            elif (
                type(f) is ast.Attribute
                and type(f.value) is ast.Name
                and f.value.id == "self"
                and type(cls) is ast.ClassDef
            ):
                found = methods.get((cls, f.attr))  # type: ignore[arg-type]
                callees = [found] if found else []
            for callee in callees:
                if callee not in traced:
                    traced.add(callee)
                    work.append(callee)
    return traced


def root_name(func: ast.AST, parent: ast.AST | None) -> str:
    """The name a root of another module gives ``func``: ``"f"``, or ``"Class.method"``
    for a method (``parent`` is its class)."""
    return f"{parent.name}.{func.name}" if type(parent) is ast.ClassDef else func.name  # type: ignore[attr-defined]


def traced_root_names(module: ast.Module, parents: Mapping[ast.AST, ast.AST], traced: set) -> frozenset[str]:
    """The root names (as :func:`root_name` gives them) whose functions are all traced
    already: given as roots, they would change nothing, so the driver need not analyse
    the file again for them."""
    every: dict[str, bool] = {}
    for func in nodes_within(module, *_FUNCTIONS):
        name = root_name(func, parents.get(func))
        every[name] = every.get(name, True) and func in traced
    return frozenset(name for name, all_traced in every.items() if all_traced)
