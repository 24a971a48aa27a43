"""Adding the imports that rewritten code needs, the way a person would.

An import is given as the statement text (``"import torch"``,
``"from fixitem import runtime as deferred"``); the bare word ``"torch"``
means ``import torch`` unless the file already binds the torch module under
any name. New imports go after the file's leading block of imports (after
the docstring and ``from __future__`` imports when there are no others), as
lines of text: nothing else in the file is touched.
"""

from __future__ import annotations

import ast
from collections.abc import Sequence

from ..model.tree import Text


def _statement(spec: str) -> str:
    return "import torch" if spec == "torch" else spec


def add_imports(source: str, module: ast.Module, specs: Sequence[str], torch_bound: bool) -> str:
    """``source`` (parsed as ``module``) with the imports of ``specs`` it lacks.
    ``torch_bound``: the file binds the torch module already (``import torch as th``)."""
    found = import_insertion(source, module, specs, torch_bound)
    if found is None:
        return source
    at, text = found
    return source[:at] + text + source[at:]


def import_insertion(source: str, module: ast.Module, specs: Sequence[str],
                     torch_bound: bool) -> tuple[int, str] | None:
    """Where the imports of ``specs`` that ``source`` lacks go, and their text (None when it
    has them all): an edit of ``source`` like any other."""
    if not specs:
        return None
    text = Text(source)

    def code(stmt: ast.stmt) -> str:
        start = text.offset(stmt.lineno, stmt.col_offset)
        end = text.offset(stmt.end_lineno, stmt.end_col_offset)  # type: ignore[arg-type]
        return source[start:end].strip()

    body = module.body
    # Statements that can be one of ``specs``: imports and ``deferred.configure(...)``.
    existing = {code(stmt) for stmt in body if isinstance(stmt, (ast.Import, ast.ImportFrom, ast.Expr))}
    wanted: list[str] = []
    for spec in specs:
        if spec == "torch" and torch_bound:
            continue
        statement = _statement(spec)
        if statement in existing:
            continue
        existing.add(statement)
        wanted.append(statement)
    if not wanted:
        return None

    insert_at = 0
    for index, stmt in enumerate(body):
        is_docstring = index == 0 and isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) and isinstance(
            stmt.value.value, str)
        if is_docstring or isinstance(stmt, (ast.Import, ast.ImportFrom)):
            insert_at = index + 1
            continue
        break
    newline = "\r\n" if "\r\n" in source else "\n"
    lines = "".join(f"{w}{newline}" for w in wanted)
    if insert_at == 0:
        if not body:
            return len(source), ("" if not source or source.endswith("\n") else newline) + lines
        # Above the first statement (below the comments at the top of the file), with a
        # blank line between the imports and the code.
        return text.line_starts[body[0].lineno - 1], lines + newline
    last = body[insert_at - 1]
    line = last.end_lineno or last.lineno
    at = text.line_starts[line] if line < len(text.line_starts) else len(source)
    prefix = "" if source[:at].endswith("\n") else newline
    only_docstring_above = insert_at == 1 and not isinstance(body[0], (ast.Import, ast.ImportFrom))
    if only_docstring_above:
        lines = newline + lines
    return at, prefix + lines
