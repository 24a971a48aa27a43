"""Adding the imports that rewritten code needs, the way a person would.

An import is given as the statement text (``"import torch"``,
``"from fixitem import runtime as deferred"``); the bare word ``"torch"``
means ``import torch`` unless the file already binds the torch module under
any name. New imports go after the file's leading block of imports (after
the docstring and ``from __future__`` imports when there are no others).
"""

from __future__ import annotations

from collections.abc import Sequence

import libcst as cst

from .provenance import Imports


def _statement(spec: str) -> str:
    return "import torch" if spec == "torch" else spec


def add_imports(module: cst.Module, specs: Sequence[str], imports: Imports | None = None) -> cst.Module:
    """``imports``: the module's imports when the caller knows them (a rewrite
    changes no import); else they are read from ``module``."""
    if not specs:
        return module
    # Statements that can be one of ``specs``: imports and ``deferred.configure(...)``.
    existing = {
        module.code_for_node(stmt).strip() for stmt in module.body
        if isinstance(stmt, cst.SimpleStatementLine) and isinstance(stmt.body[0], (cst.Import, cst.ImportFrom, cst.Expr))
    }
    if imports is None:
        imports = Imports(module)
    wanted: list[cst.SimpleStatementLine] = []
    for spec in specs:
        if spec == "torch" and imports.torch_alias() is not None:
            continue
        text = _statement(spec)
        if text in existing:
            continue
        existing.add(text)
        wanted.append(cst.parse_statement(text + "\n"))  # type: ignore[arg-type]
    if not wanted:
        return module

    body = list(module.body)
    insert_at = 0
    for index, stmt in enumerate(body):
        if not isinstance(stmt, cst.SimpleStatementLine):
            break
        first = stmt.body[0] if stmt.body else None
        is_docstring = index == 0 and isinstance(first, cst.Expr) and isinstance(first.value, (cst.SimpleString, cst.ConcatenatedString))
        if is_docstring or isinstance(first, (cst.Import, cst.ImportFrom)):
            insert_at = index + 1
            continue
        break
    only_docstring_above = insert_at == 1 and not any(
        isinstance(s.body[0], (cst.Import, cst.ImportFrom)) for s in body[:1] if isinstance(s, cst.SimpleStatementLine)
    )
    if only_docstring_above:
        wanted[0] = wanted[0].with_changes(leading_lines=[cst.EmptyLine()])
    if insert_at == 0 and body:
        # The new imports take the first statement's comments (a licence, a
        # shebang-like header) above them, and a blank line before the code.
        first = body[0]
        wanted[0] = wanted[0].with_changes(leading_lines=first.leading_lines)
        body[0] = first.with_changes(leading_lines=[cst.EmptyLine()])
    return module.with_changes(body=body[:insert_at] + wanted + body[insert_at:])
