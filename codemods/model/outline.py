"""A module's text cut at its top-level ``def`` and ``class`` statements, so that what
another file asks of it is parsed alone.

A file asks of each module it imports what a few names are (does ``is_torch_available``
return a bool, is ``PreTrainedModel`` an ``nn.Module``); parsing the whole module for
them cost more than the rest of a one-file analysis. The module's *outline* is its text
with every definition written at column 0 (its decorators, its header and its body)
blanked out, parsed once for the module's imports and other top-level names, and the
definitions, each parsed when asked about, alone.

The cuts are found in the text, without tokens: each line that starts at column 0 with
``def``, ``async def``, ``class`` or ``@`` starts a definition, which runs until the next
line that starts at column 0 with anything but a comment or a closing bracket. A line
like that inside a string or between brackets (code in a docstring, a template) would cut
wrongly; each wrong cut is caught, and the module is then parsed whole:

- the outline does not parse (a string or a bracket left open where a definition was
  blanked out), or one of its statements spans a blanked definition (a string that holds
  what looked like one, ``T = '''`` ... ``def f(): ...`` ... ``'''``);
- a definition, parsed alone, is not one statement of that kind and name.
"""

from __future__ import annotations

import ast
import re
from bisect import bisect_right
from typing import NamedTuple

from .tree import parse_module

# A line that starts at column 0 with something that may start a statement: not blank, not
# a comment, not a closing bracket (``):`` of a black-formatted signature).
_STATEMENT_LINE = re.compile(r"^[^\s#)\]}]", re.MULTILINE)
_DEFINITION = re.compile(r"(?:async[ \t]+)?(def|class)[ \t]+(\w+)")


class Part(NamedTuple):
    """One definition written at column 0: ``kind`` ("function" or "class"), ``name``, its
    text's start and end offsets (from its first decorator), and the line it starts on."""

    kind: str
    name: str
    start: int
    end: int
    line: int


class Outline(NamedTuple):
    module: ast.Module  # the text with each part blanked out (its lines kept, empty)
    parts: list[Part]  # in the order of the text


def outline(text: str) -> Outline | None:
    """The outline of ``text``; None where it cannot be made (the text is then parsed
    whole). Raises ``SyntaxError`` (``ValueError``...) as :func:`parse_module` does, for
    a text whose outline does not parse: the caller parses it whole to know whether the
    text itself does."""
    starts = [m.start() for m in _STATEMENT_LINE.finditer(text)]
    parts: list[Part] = []
    pieces: list[str] = []
    kept = 0  # the text before this offset is in ``pieces``
    line, counted = 1, 0  # the line of offset ``counted``
    k, n = 0, len(starts)
    while k < n:
        at = starts[k]
        j = k
        while j < n and text[starts[j]] == "@":
            j += 1  # the decorators, then the definition they decorate
        found = _DEFINITION.match(text, starts[j]) if j < n else None
        if found is None:
            if j > k:
                return None  # decorators of something else (or cut by a line that looks like a statement)
            k += 1
            continue
        end = starts[j + 1] if j + 1 < n else len(text)
        line += text.count("\n", counted, at)
        counted = at
        parts.append(Part("class" if found.group(1) == "class" else "function", found.group(2), at, end, line))
        pieces.append(text[kept:at])
        pieces.append("\n" * text.count("\n", at, end))
        kept = end
        k = j + 1
    if not parts:
        return Outline(parse_module(text), [])
    pieces.append(text[kept:])
    module = parse_module("".join(pieces))
    # No statement of the outline may span a blanked part: that part was inside it.
    firsts = [part.line for part in parts]
    lasts = [part.line + text.count("\n", part.start, part.end - 1) for part in parts]
    for statement in module.body:
        i = bisect_right(firsts, statement.end_lineno or statement.lineno) - 1
        if i >= 0 and lasts[i] >= statement.lineno:
            return None
    return Outline(module, parts)


def parse_part(text: str, part: Part) -> ast.stmt | None:
    """``part`` of ``text`` parsed alone, its lines counted from the part's first line (its
    line in the text is ``part.line``; the parser takes 100 us to count 3,000 lines before
    it); None where it is not one definition of its kind and name (a wrong cut)."""
    try:
        module = parse_module(text[part.start:part.end])
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    if len(module.body) != 1:
        return None
    node = module.body[0]
    kind = "class" if type(node) is ast.ClassDef else \
        "function" if type(node) in (ast.FunctionDef, ast.AsyncFunctionDef) else ""
    return node if kind == part.kind and node.name == part.name else None  # type: ignore[attr-defined]
