"""Which functions ``torch.compile`` traces, as far as one file shows.

A sync inside traced code is also a graph break. Traced code is:

* ``forward`` of a class (an ``nn.Module`` subclass, or any class defining
  ``forward``: that is how modules are recognised when the base class comes
  from elsewhere);
* functions decorated with ``@torch.compile`` (with or without arguments) or
  passed by name to ``torch.compile(...)``;
* functions of the same file that traced code calls, by name or as
  ``self.method(...)``, transitively.
"""

from __future__ import annotations

import libcst as cst

from .provenance import Imports
from .tree import nodes_within


def _is_compile(node: cst.BaseExpression, imports: Imports) -> bool:
    if isinstance(node, cst.Call):
        node = node.func
    return imports.qualify(node) in ("torch.compile", "torch.jit.script", "torch.compiler.compile")


def traced_functions(
    module: cst.Module, imports: Imports, parents: dict[cst.CSTNode, cst.CSTNode]
) -> set[cst.FunctionDef]:
    functions = nodes_within(module, cst.FunctionDef)
    by_name: dict[str, list[cst.FunctionDef]] = {}
    methods: dict[tuple[cst.ClassDef, str], cst.FunctionDef] = {}
    for func in functions:
        parent = parents.get(parents.get(func))  # FunctionDef -> IndentedBlock -> ClassDef
        if isinstance(parent, cst.ClassDef):
            methods[(parent, func.name.value)] = func
        else:
            by_name.setdefault(func.name.value, []).append(func)

    traced: set[cst.FunctionDef] = set()
    compiled_names: set[str] = set()
    for node in nodes_within(module, cst.Call):
        if _is_compile(node.func, imports) and node.args:
            target = node.args[0].value
            if isinstance(target, cst.Name):
                compiled_names.add(target.value)
    for func in functions:
        cls = parents.get(parents.get(func))
        if func.name.value == "forward" and isinstance(cls, cst.ClassDef):
            traced.add(func)
        elif any(_is_compile(d.decorator, imports) for d in func.decorators):
            traced.add(func)
        elif func.name.value in compiled_names and not isinstance(cls, cst.ClassDef):
            traced.add(func)

    work = list(traced)
    while work:
        func = work.pop()
        cls = parents.get(parents.get(func))
        for node in nodes_within(func.body, cst.Call):
            callees: list[cst.FunctionDef] = []
            if isinstance(node.func, cst.Name):
                callees = by_name.get(node.func.value, [])
            elif (
                isinstance(node.func, cst.Attribute)
                and isinstance(node.func.value, cst.Name)
                and node.func.value.value == "self"
                and isinstance(cls, cst.ClassDef)
            ):
                found = methods.get((cls, node.func.attr.value))
                callees = [found] if found else []
            for callee in callees:
                if callee not in traced:
                    traced.add(callee)
                    work.append(callee)
    return traced
