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
_CLASS_LINE = re.compile(r"^class[ \t]", re.MULTILINE)
# How many lines a class's header may take (its bases one per line) before its whole text is parsed.
_HEADER_LINES = 40
# The first line of a class's body that is not blank or a comment, and its indentation.
_BODY_LINE = re.compile(r"^([ \t]+)[^\s#]", re.MULTILINE)
_INDENTED: dict[str, re.Pattern[str]] = {}  # a body's statement lines, by its indentation


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
    cut = _cut(text, [m.start() for m in _STATEMENT_LINE.finditer(text)], 0, len(text), "", 1)
    if cut is None:
        return None
    parts, rest = cut
    module = parse_module(rest)
    return None if _spans_a_part(module.body, parts, text) else Outline(module, parts)


def _cut(text: str, starts: list[int], begin: int, end: int, indent: str, line: int) -> tuple[list[Part], str] | None:
    """``text[begin:end]`` cut at the definitions among its statement lines ``starts`` (each
    with ``indent`` before it; ``line``: the line ``begin`` is on): the parts, and the text
    with each part blanked out, its lines kept. None: decorators of something else."""
    parts: list[Part] = []
    pieces: list[str] = []
    kept = counted = begin  # the text before ``kept`` is in ``pieces``; ``line`` is that of ``counted``
    width = len(indent)
    k, n = 0, len(starts)
    while k < n:
        at = starts[k]
        j = k
        while j < n and text[starts[j] + width] == "@":
            j += 1  # the decorators, then the definition they decorate
        found = _DEFINITION.match(text, starts[j] + width) if j < n else None
        if found is None:
            if j > k:
                return None  # decorators of something else (or cut by a line that looks like a statement)
            k += 1
            continue
        stop = starts[j + 1] if j + 1 < n else end
        line += text.count("\n", counted, at)
        counted = at
        parts.append(Part("class" if found.group(1) == "class" else "function", found.group(2), at, stop, line))
        pieces.append(text[kept:at])
        pieces.append("\n" * text.count("\n", at, stop))
        kept = stop
        k = j + 1
    pieces.append(text[kept:end])
    return parts, "".join(pieces)


def _spans_a_part(statements: list[ast.stmt], parts: list[Part], text: str) -> bool:
    """Does one of ``statements`` (parsed with the parts blanked out) span a part? That part
    was inside it (a string that holds what looked like a definition)."""
    if not parts:
        return False
    firsts = [part.line for part in parts]
    lasts = [part.line + text.count("\n", part.start, part.end - 1) for part in parts]
    for statement in statements:
        i = bisect_right(firsts, statement.end_lineno or statement.lineno) - 1
        if i >= 0 and lasts[i] >= statement.lineno:
            return True
    return False


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


def parse_header(text: str, part: Part) -> ast.ClassDef | None:
    """The class ``part`` of ``text`` with its decorators and header (its bases) parsed, and
    an empty body (``pass``): what says whether it is an ``nn.Module``, without its methods
    (transformers' ``GenerationMixin`` is 216 KB of them). None where the header is not found
    by its colon at the end of a line within its first lines (``class A: pass``).

    A line of the header ends with ``:`` outside any bracket or string where the header, up
    to it, parses: a colon in brackets or in a string leaves them open, and does not parse."""
    found = _header(text, part)
    return found[0] if found is not None else None


def _header(text: str, part: Part) -> tuple[ast.ClassDef, int] | None:
    """:func:`parse_header`, and the offset of the class's body (the line after its header)."""
    found = _CLASS_LINE.search(text, part.start, part.end)
    if found is None:
        return None
    at = found.start()
    for _ in range(_HEADER_LINES):
        end = text.find("\n", at, part.end)
        line = text[at:end if end >= 0 else part.end]
        if line.split("#", 1)[0].rstrip().endswith(":"):
            try:
                module = parse_module(text[part.start:at + len(line)] + "\n pass\n")
            except (SyntaxError, ValueError, RecursionError, MemoryError):
                module = None
            if module is not None:
                node = module.body[0] if len(module.body) == 1 else None
                if type(node) is not ast.ClassDef or node.name != part.name or \
                        [type(s) for s in node.body] != [ast.Pass]:  # type: ignore[union-attr]
                    return None  # (what it took for the header held more: the class is parsed whole)
                return node, (end + 1 if end >= 0 else part.end)  # type: ignore[return-value]
        if end < 0:
            return None
        at = end + 1
    return None


def method_names(text: str, part: Part) -> frozenset[str] | None:
    """The methods of the class ``part`` (the functions of its body), found as a module's
    parts are: its body cut at the definitions written at its indentation, the rest parsed
    with them blanked out and checked. None where that cannot be done (a wrong cut): the
    class is then parsed whole."""
    found = _header(text, part)
    if found is None:
        return None
    body = found[1]
    first = _BODY_LINE.search(text, body, part.end)
    if first is None:
        return None
    indent = first.group(1)
    lines = _INDENTED.get(indent)
    if lines is None:
        lines = _INDENTED[indent] = re.compile("^" + re.escape(indent) + r"[^\s#)\]}]", re.MULTILINE)
    head = text[part.start:body]
    cut = _cut(text, [m.start() for m in lines.finditer(text, body, part.end)], body, part.end, indent,
               head.count("\n") + 1)
    if cut is None:
        return None
    members, rest = cut
    try:
        module = parse_module(head + rest + indent + "pass\n")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    node = module.body[0] if len(module.body) == 1 else None
    if type(node) is not ast.ClassDef or node.name != part.name:  # type: ignore[union-attr]
        return None
    # (The members' lines count from the class's first, as the parsed text's do.)
    if _spans_a_part(node.body, [m._replace(start=m.start - part.start, end=m.end - part.start) for m in members],  # type: ignore[union-attr]
                     text[part.start:part.end]):
        return None
    return frozenset(m.name for m in members if m.kind == "function")
