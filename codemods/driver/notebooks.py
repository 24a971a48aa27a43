"""Jupyter notebooks (``.ipynb``, nbformat 4): their code cells as one module.

A notebook's code cells run in one namespace, so they are analysed as ONE
module in the order they appear: a tensor bound in cell 2 is known as a
tensor in cell 5. Cells are numbered by their position in the notebook,
counting every cell (markdown and raw cells too) from 1, as a reader counts
them from the top; execution counts play no part.

IPython syntax is never parsed as Python. At the start of a statement, a
line magic (``%time x = f()``, ``%matplotlib inline``), a shell escape
(``!pip install x``), a help line (``obj?``, ``??obj``) or a captured
command (``files = !ls``, ``t = %timeit -o f()``) is replaced by a ``pass``
statement at the same indentation, so that line numbers stay as they are,
and put back byte for byte when the notebook is written. A cell that starts
with a cell magic (``%%capture``, ``%%time``, ``%%bash``) is left out as a
whole. A cell that still does not parse is left out with a note; the rest of
the notebook is analysed.

:func:`analyse_cells` is that analysis, cells in and one result per cell
out; ``scan``/``apply`` on a notebook file (:func:`process_notebook`) and the
language server's notebook documents both use it.

Writing a notebook back replaces, in the file's own text, only the JSON
value of each changed cell's ``"source"``, laid out as it was (a list of
lines or one string, the same indentation and escaping); outputs, metadata,
execution counts and cell ids are the very bytes they were. A notebook whose
``"source"`` values fixitem cannot lay out exactly as they are is not
written (the message says so) rather than reformatted.
"""

from __future__ import annotations

import ast
import difflib
import functools
import json
import re
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ..rule import Rule
from .discovery import NOTEBOOK_SUFFIX
from .engine import FileResult, Finding, in_original, process
from .line_length import DEFAULT as DEFAULT_LINE_LENGTH
from .one_fix import fix_one

SUFFIX = NOTEBOOK_SUFFIX

# A line of IPython syntax becomes one of these statements; the number names the line. At the top
# level it is import-shaped, so that imports a fix adds still go after a cell's leading imports
# (``%matplotlib inline`` / ``import torch`` / ...); in a block it is ``pass``.
_PLACEHOLDER = "import fixitem_ipython_{}"
_NESTED_PLACEHOLDER = "pass  # fixitem-ipython {}"
_PLACEHOLDER_LINE = re.compile(r"^(?:import fixitem_ipython_(\d+)|[ \t]+pass  # fixitem-ipython (\d+))[ \t]*$")
# Between two cells in the module text: a statement of its own (a comment would join the next
# statement's leading lines, and be rewritten with it). It also ends the module's leading imports,
# so that imports a fix adds go into the first cell.
_MARKER = "fixitem_cell_{} = None"
_LEADING_MARKER = "import fixitem_cell_{}"
_MARKER_LINE = re.compile(r"^(?:fixitem_cell_(\d+) = None|import fixitem_cell_(\d+))[ \t]*$")
# ``name = !cmd``, ``a, b = %magic ...``
_CAPTURE = re.compile(r"^[ \t]*[A-Za-z_][\w.]*(?:[ \t]*,[ \t]*[A-Za-z_][\w.]*)*[ \t]*=[ \t]*[!%]")


def _lines(text: str) -> list[str]:
    """Lines as Jupyter and Python count them: split at "\n" only, each keeping it."""
    parts = text.split("\n")
    lines = [part + "\n" for part in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])
    return lines


class NotebookError(Exception):
    """A file that is not a notebook fixitem can read or write."""


# --------------------------------------------------------------------------- reading


@dataclass
class Cell:
    number: int  # 1-based position in the notebook, over all cells
    cell_type: str
    source: str | list[str]  # as in the JSON
    text: str  # the source as one string

    @property
    def as_list(self) -> bool:
        return isinstance(self.source, list)


@dataclass
class Notebook:
    path: Path
    raw: str  # the file's text (without a UTF-8 BOM)
    bom: bool
    data: dict[str, Any]
    cells: list[Cell]

    @property
    def is_python(self) -> bool:
        meta = self.data.get("metadata") or {}
        if not isinstance(meta, dict):
            return True
        for holder, key in (("language_info", "name"), ("kernelspec", "language")):
            value = meta.get(holder)
            if isinstance(value, dict) and isinstance(value.get(key), str):
                return value[key].lower() in ("python", "python3", "ipython", "ipython3")
        return True


def parse_notebook(path: Path, data: bytes, display: str | None = None) -> Notebook:
    name = display or str(path)
    bom = data.startswith(b"\xef\xbb\xbf")
    try:
        raw = data[3:].decode("utf-8") if bom else data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise NotebookError(f"{name}: not a valid notebook: not UTF-8 ({exc.reason} at byte {exc.start})") from None
    try:
        content = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise NotebookError(
            f"{name}: not a valid notebook: invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}"
        ) from None
    version = content.get("nbformat") if isinstance(content, dict) else None
    if version != 4:
        raise NotebookError(f"{name}: not a notebook in nbformat 4 (nbformat is {version!r}); only nbformat 4 is read")
    if not isinstance(content.get("cells"), list):
        raise NotebookError(f"{name}: not a valid notebook: no list of cells")
    cells = []
    for number, item in enumerate(content["cells"], start=1):
        if not isinstance(item, dict):
            raise NotebookError(f"{name}: not a valid notebook: cell {number} is not a JSON object")
        source = item.get("source", "")
        if isinstance(source, list) and all(isinstance(s, str) for s in source):
            text = "".join(source)
        elif isinstance(source, str):
            text = source
        else:
            raise NotebookError(f"{name}: not a valid notebook: the source of cell {number} is not text")
        cells.append(Cell(number, str(item.get("cell_type", "")), source, text))
    return Notebook(path, raw, bom, content, cells)


def read_notebook(path: Path, display: str | None = None) -> Notebook:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise NotebookError(f"{display or path}: cannot read: {exc.strerror or exc}") from None
    return parse_notebook(path, data, display)


# --------------------------------------------------------------------------- IPython lines


def _is_ipython(line: str) -> bool:
    """``line`` (at the start of a statement) is IPython syntax rather than Python."""
    stripped = line.strip()
    if not stripped or stripped.startswith("#"):
        return False
    if stripped[0] in "%!?":
        return True
    if _CAPTURE.match(line):
        return True
    return stripped.endswith("?") and "#" not in stripped  # obj? / obj??


class _Scanner:
    """Whether each line starts a statement: brackets, strings and backslashes carried over lines."""

    def __init__(self) -> None:
        self.depth = 0
        self.quote: str | None = None  # the open triple quote
        self.continued = False

    @property
    def at_statement(self) -> bool:
        return self.depth == 0 and self.quote is None and not self.continued

    def feed(self, line: str) -> None:
        i, n = 0, len(line)
        comment = False
        while i < n:
            c = line[i]
            if self.quote is not None:
                if c == "\\":
                    i += 2
                    continue
                if line.startswith(self.quote, i):
                    i += 3
                    self.quote = None
                    continue
                i += 1
                continue
            if c == "#":
                comment = True
                break
            if c in "'\"":
                if line.startswith(c * 3, i):
                    self.quote = c * 3
                    i += 3
                    continue
                i += 1
                while i < n and line[i] != c:
                    i += 2 if line[i] == "\\" else 1
                i += 1
                continue
            if c in "([{":
                self.depth += 1
            elif c in ")]}":
                self.depth = max(0, self.depth - 1)
            i += 1
        self.continued = not comment and self.quote is None and line.rstrip("\r\n").endswith("\\")


@dataclass
class _Prepared:
    text: str  # the cell's text as Python, ending in a newline
    ipython: dict[int, str]  # placeholder number -> the original line (without its newline)


def _prepare(text: str, counter: list[int]) -> _Prepared | None:
    """The cell as Python (IPython lines replaced); None for a cell magic's cell."""
    lines = _lines(text)
    if lines and lines[0].lstrip().startswith("%%"):
        return None
    out: list[str] = []
    ipython: dict[int, str] = {}
    scanner = _Scanner()
    magic_indent: str | None = None  # inside a backslash-continued IPython line
    for line in lines:
        body = line.rstrip("\r\n")
        ending = line[len(body):] or "\n"
        if magic_indent is not None or (scanner.at_statement and _is_ipython(body)):
            indent = magic_indent if magic_indent is not None else body[: len(body) - len(body.lstrip())]
            counter[0] += 1
            ipython[counter[0]] = body
            placeholder = _NESTED_PLACEHOLDER if indent else _PLACEHOLDER
            out.append(indent + placeholder.format(counter[0]) + ending)
            magic_indent = indent if body.endswith("\\") else None
            continue
        scanner.feed(line)
        out.append(body + ending)
    prepared = "".join(out)
    if prepared and not prepared.endswith("\n"):
        prepared += "\n"
    return _Prepared(prepared, ipython)


def as_python(text: str) -> str | None:
    """A code cell's text as it is analysed, line for line: IPython lines replaced by placeholder
    statements. None for a cell that starts with a cell magic (it is not analysed)."""
    prepared = _prepare(text, [0])
    return None if prepared is None else prepared.text


# --------------------------------------------------------------------------- one module


@dataclass
class _Part:
    cell: Cell
    prepared: _Prepared
    first_line: int  # of the cell's text in the module, 1-based
    lines: int


@dataclass
class _Module:
    text: str
    parts: list[_Part]
    notes: dict[int, str]  # cell number -> why it was left out

    def locate(self, line: int) -> tuple[int, int]:
        """Module line -> (cell number, line in the cell)."""
        chosen = self.parts[0]
        for part in self.parts:
            if part.first_line <= line:
                chosen = part
            else:
                break
        return chosen.cell.number, max(1, line - chosen.first_line + 1)

    def rewritten(self, new_text: str) -> _Module:
        """The layout of ``new_text``, this module rewritten (its cells keep their markers):
        where each cell's text now starts and how many lines it has."""
        starts = [1] + [number + 1 for number, line in enumerate(_lines(new_text), start=1) if _MARKER_LINE.match(line)]
        ends = [start - 1 for start in starts[1:]] + [new_text.count("\n") + 1]
        parts = [replace(part, first_line=start, lines=end - start) for part, start, end in zip(self.parts, starts, ends)]
        return _Module(new_text, parts, self.notes)

    def line_of(self, cell: int, line: int) -> int | None:
        """(cell number, line in the cell) -> module line; None for a cell left out."""
        for part in self.parts:
            if part.cell.number == cell:
                return part.first_line + line - 1 if 0 < line <= max(part.lines, 1) else None
        return None


def _parses(text: str) -> tuple[ast.Module | None, str | None]:
    """The cell's tree when ``text`` parses as Python; else why not."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tree = ast.parse(text)
    except SyntaxError as exc:
        return None, f"line {exc.lineno}: {exc.msg}"
    except (ValueError, RecursionError, MemoryError) as exc:
        return None, str(exc) or "too deeply nested"
    return tree, None


def _imports(tree: ast.Module) -> tuple[bool, bool]:
    """(only imports, IPython lines and a docstring; has an import of its own) for a cell."""
    only, own = True, False
    for index, stmt in enumerate(tree.body):
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            names = [a.name for a in stmt.names] if isinstance(stmt, ast.Import) else []
            own = own or not (len(names) == 1 and names[0].startswith("fixitem_ipython_"))
        elif not (index == 0 and isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant)
                  and isinstance(stmt.value.value, str)):
            only = False
    return only, own


def _module(cells: Sequence[Cell], display: str) -> _Module:
    counter = [0]
    chunks: list[str] = []
    parts: list[_Part] = []
    notes: dict[int, str] = {}
    line = 1
    leading = True  # every cell so far holds only IPython lines or a docstring: no import of its own
    for cell in cells:
        if cell.cell_type != "code":
            continue
        prepared = _prepare(cell.text, counter)
        if prepared is None:
            continue
        tree, why = _parses(prepared.text)
        if why is not None:
            notes[cell.number] = f"{display}:cell {cell.number}: not analysed: it does not parse as Python ({why})"
            continue
        if parts:
            # Until a cell with imports, the marker is import-shaped: the module's leading imports
            # run on into the next cell, and imports a fix adds go into the first cell that has some.
            chunks.append((_LEADING_MARKER if leading else _MARKER).format(cell.number) + "\n")
            line += 1
        only, own = _imports(tree) if tree is not None else (True, False)
        leading = leading and only and not own
        count = prepared.text.count("\n")
        parts.append(_Part(cell, prepared, line, count))
        chunks.append(prepared.text)
        line += count
    return _Module("".join(chunks), parts, notes)


def _split(module: _Module, new_text: str) -> dict[int, str] | None:
    """The rewritten module cut back into cells (IPython lines restored); None when it cannot be."""
    expected = [part.cell.number for part in module.parts[1:]]
    seen: list[int] = []
    pieces: list[list[str]] = [[]]
    for line in _lines(new_text):
        match = _MARKER_LINE.match(line)
        if match:
            seen.append(int(match.group(1) or match.group(2)))
            pieces.append([])
        else:
            pieces[-1].append(line)
    if seen != expected:
        return None
    texts: dict[int, str] = {}
    alias = _runtime_alias(new_text)
    for part, lines in zip(module.parts, pieces):
        restored: list[str] = []
        used: set[int] = set()
        for line in lines:
            match = _PLACEHOLDER_LINE.match(line.rstrip("\r\n"))
            if match:
                number = int(match.group(1) or match.group(2))
                if number not in part.prepared.ipython or number in used:
                    return None
                used.add(number)
                restored.append(part.prepared.ipython[number] + line[len(line.rstrip("\r\n")):])
            else:
                restored.append(line)
        if used != set(part.prepared.ipython):
            return None
        text = "".join(restored)
        python = "".join(lines)
        if python != part.prepared.text:
            text = _flushed(text, python, alias)
        original = part.cell.text
        if not original.endswith("\n") and text.endswith("\n"):
            text = text[:-1]
        texts[part.cell.number] = text
    return texts


_RUNTIME_ALIAS = re.compile(r"^from fixitem import runtime as (\w+)[ \t]*$|^import fixitem\.runtime as (\w+)[ \t]*$", re.M)


def _runtime_alias(text: str) -> str | None:
    match = _RUNTIME_ALIAS.search(text)
    return (match.group(1) or match.group(2)) if match else None


def _calls(node: ast.AST, alias: str, method: str) -> bool:
    """``node`` calls ``alias.method(...)`` outside the functions and classes it defines."""
    stack = [node]
    while stack:
        current = stack.pop()
        if isinstance(current, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        if (
            isinstance(current, ast.Call) and isinstance(current.func, ast.Attribute)
            and current.func.attr == method and isinstance(current.func.value, ast.Name)
            and current.func.value.id == alias
        ):
            return True
        stack.extend(ast.iter_child_nodes(current))
    return False


def _flushed(text: str, python: str, alias: str | None) -> str:
    """A cell whose own code now defers output ends by emitting it: output stays under its cell.

    The kernel outlives the cell, so records would otherwise show up cells later
    (or at exit). ``flush()`` goes last, or before a last expression, whose value
    the notebook displays after the cell's printed output.
    """
    if alias is None:
        return text
    try:
        body = ast.parse(python).body
    except SyntaxError:
        return text
    recording = [i for i, stmt in enumerate(body) if _calls(stmt, alias, "record")]
    if not recording:
        return text
    if any(_calls(stmt, alias, "flush") for stmt in body[recording[-1]:]):
        return text
    lines = _lines(text)
    at = len(lines)
    last = body[-1]
    shown = isinstance(last, ast.Expr) and last is not body[recording[-1]]  # the value the cell displays
    if shown or _PLACEHOLDER_LINE.match(_lines(python)[last.lineno - 1].rstrip("\r\n")):
        at = last.lineno - 1
    call = f"{alias}.flush()\n"
    if at == len(lines):
        if lines and not lines[-1].endswith("\n"):
            lines[-1] += "\n"
        lines.append(call)
    else:
        lines.insert(at, call)
    return "".join(lines)


# --------------------------------------------------------------------------- writing


_WHITESPACE = re.compile(r"[ \t\n\r]*")
_DECODER = json.JSONDecoder()


def _skip(raw: str, i: int) -> int:
    return _WHITESPACE.match(raw, i).end()  # type: ignore[union-attr]


def _members(raw: str, i: int):
    """(key, value start, value end) of the object starting at ``raw[i]`` (a ``{``)."""
    assert raw[i] == "{"
    i = _skip(raw, i + 1)
    if raw[i] == "}":
        return
    while True:
        key, i = json.decoder.scanstring(raw, i + 1)  # type: ignore[attr-defined]
        i = _skip(raw, i)
        i = _skip(raw, i + 1)  # the colon
        _, end = _DECODER.raw_decode(raw, i)
        yield key, i, end
        i = _skip(raw, end)
        if raw[i] == "}":
            return
        i = _skip(raw, i + 1)  # the comma


def source_spans(raw: str) -> list[tuple[int, int] | None]:
    """Where each cell's ``"source"`` value lies in the notebook's text (None: it has none)."""
    spans: list[tuple[int, int] | None] = []
    for key, start, end in _members(raw, _skip(raw, 0)):
        if key != "cells":
            continue
        spans = []
        i = _skip(raw, start + 1)
        while raw[i] != "]":
            found = None
            for ckey, cstart, cend in _members(raw, i):
                if ckey == "source":
                    found = (cstart, cend)
            spans.append(found)
            _, i = _DECODER.raw_decode(raw, i)
            i = _skip(raw, i)
            if raw[i] == ",":
                i = _skip(raw, i + 1)
    return spans


_INDENTS: tuple[int | str | None, ...] = (1, 2, 4, 3, "\t", 0, None)


def _render(value: str | list[str], style: tuple[int | str | None, bool], base: str, newline: str) -> str:
    indent, ascii_only = style
    text = json.dumps(value, indent=indent, ensure_ascii=ascii_only)
    if isinstance(value, str) or indent is None:
        return text
    return text.replace("\n", newline + base)


def _base(raw: str, start: int) -> str:
    line_start = raw.rfind("\n", 0, start) + 1
    prefix = raw[line_start:start]
    return prefix[: len(prefix) - len(prefix.lstrip(" \t"))]


def _style(raw: str, span: tuple[int, int], value: str | list[str], newline: str) -> tuple[Any, bool] | None:
    """The dumps settings that reproduce ``raw[span]`` from ``value`` exactly."""
    original = raw[span[0]:span[1]]
    base = _base(raw, span[0])
    for ascii_only in (False, True):
        for indent in _INDENTS:
            if _render(value, (indent, ascii_only), base, newline) == original:
                return indent, ascii_only
    return None


def _as_source(old: str | list[str], text: str) -> str | list[str]:
    return _lines(text) if isinstance(old, list) else text


def rewrite(notebook: Notebook, new_texts: dict[int, str]) -> bytes:
    """The notebook's bytes with the sources of the cells in ``new_texts`` replaced (nothing else)."""
    raw = notebook.raw
    name = str(notebook.path)
    try:
        spans = source_spans(raw)
    except (ValueError, IndexError, AssertionError):
        spans = []
    if len(spans) != len(notebook.cells):
        raise NotebookError(f"{name}: cannot locate the cells in the file's text; notebook left unchanged")
    newline = "\r\n" if "\r\n" in raw else "\n"
    default: tuple[Any, bool] | None = None
    for cell, span in zip(notebook.cells, spans):  # the notebook's own layout, for cells that show none
        if span is not None and isinstance(cell.source, list) and len(cell.source) > 0:
            default = _style(raw, span, cell.source, newline)
            if default is not None:
                break
    edits: list[tuple[int, int, str]] = []
    for cell, span in zip(notebook.cells, spans):
        if cell.number not in new_texts or new_texts[cell.number] == cell.text:
            continue
        if span is None:
            raise NotebookError(f"{name}: cell {cell.number} has no source in the file; notebook left unchanged")
        empty = isinstance(cell.source, list) and not cell.source and raw[span[0]:span[1]] == "[]"
        style = (default or (1, False)) if empty else _style(raw, span, cell.source, newline)
        if style is None:
            raise NotebookError(
                f"{name}: cell {cell.number}: its source is laid out in a way fixitem cannot reproduce; "
                "notebook left unchanged (saving it from Jupyter lays it out as usual)"
            )
        value = _as_source(cell.source, new_texts[cell.number])
        edits.append((span[0], span[1], _render(value, style, _base(raw, span[0]), newline)))
    out = raw
    for start, end, text in sorted(edits, reverse=True):
        out = out[:start] + text + out[end:]
    # What was written must be the notebook with those sources changed and nothing else.
    expected = json.loads(raw)
    for cell in notebook.cells:
        if cell.number in new_texts:
            expected["cells"][cell.number - 1]["source"] = _as_source(cell.source, new_texts[cell.number])
    if json.loads(out) != expected:
        raise NotebookError(f"{name}: internal error: the rewritten notebook would differ; notebook left unchanged")
    data = out.encode("utf-8")
    return b"\xef\xbb\xbf" + data if notebook.bom else data


def cell_diff(display: str, number: int, before: str, after: str) -> str:
    """A unified diff of one cell, named ``a/NAME:cell N`` / ``b/NAME:cell N``."""
    name = f"{display}:cell {number}"
    old, new = (name, name) if display.startswith("/") else (f"a/{name}", f"b/{name}")
    if not before.endswith("\n"):
        before += "\n"
    if not after.endswith("\n"):
        after += "\n"
    return "".join(difflib.unified_diff(_lines(before), _lines(after), old, new))


# --------------------------------------------------------------------------- one run


@dataclass
class CellResult:
    """One cell's share of the analysis of a notebook's code cells (see :func:`analyse_cells`)."""

    # ``line``/``col`` in the cell (in ``new_text`` when the fixes changed it), ``cell`` its number
    findings: list[Finding] = field(default_factory=list)
    applied: list[Finding] = field(default_factory=list)  # what the fixes changed in this cell
    new_text: str | None = None  # the cell's text after the fixes, when they changed it
    note: str | None = None  # why the cell was left out of the analysis (it does not parse)


def _in_cells(module: _Module, findings: Sequence[Finding]) -> list[Finding]:
    out = []
    for finding in findings:
        cell, line = module.locate(finding.line)
        end_line = 0
        if finding.end_line:
            end_cell, end_line = module.locate(finding.end_line)
            end_line = end_line if end_cell == cell else 0
        out.append(replace(finding, line=line, cell=cell, end_line=end_line,
                           end_col=finding.end_col if end_line else 0))
    return out


def analyse_cells(
    cells: Sequence[str | None],
    rules: Sequence[Rule],
    *,
    name: str = "notebook",
    fix: bool = False,
    unsafe: bool = False,
    flush_every: int | None = None,
    only: Finding | None = None,
    line_length: int = DEFAULT_LINE_LENGTH,
) -> list[CellResult]:
    """A notebook's cells analysed (with ``fix``, rewritten) as one module, in order.

    ``cells``: each cell's text, or None for a cell that is not Python code (a
    markdown or raw cell); cell ``N`` is ``cells[N - 1]``. ``name`` is the
    notebook as findings and messages name it. One :class:`CellResult` comes back
    for each cell. ``only``: a finding of an earlier call (in its cell's
    coordinates), whose fix alone is applied. Nothing is read or written here;
    ``fixitem scan``/``apply`` on an ``.ipynb`` file and the language server's
    notebook documents both go through this function.

    Raises :class:`NotebookError` when the cells cannot be analysed as one module,
    or the fixes cannot be placed back into them.
    """
    parsed = [Cell(n, "code" if t is not None else "", t or "", t or "") for n, t in enumerate(cells, start=1)]
    module = _module(parsed, name)
    results = [CellResult(note=module.notes.get(cell.number)) for cell in parsed]
    if not module.parts:
        return results
    path = Path(name)
    if only is not None:
        line = module.line_of(only.cell or 0, only.line)
        if line is None:
            return results
        target = replace(only, line=line, cell=None)
        outcome = fix_one(path, module.text, rules, target, unsafe=unsafe, flush_every=flush_every,
                          line_length=line_length)
    else:
        outcome = process(path, module.text, rules, fix=fix, unsafe=unsafe, flush_every=flush_every,
                          line_length=line_length)
    if outcome.error is not None:
        raise NotebookError(outcome.error)
    texts = None
    if outcome.new_text is not None:
        texts = _split(module, outcome.new_text)
        if texts is None:
            raise NotebookError(f"{name}: the fixes could not be placed back into the notebook's cells; "
                                "notebook left unchanged")
    # What is left stands in the rewritten cells; what was fixed, in the cells as they were.
    layout = module if outcome.new_text is None else module.rewritten(outcome.new_text)
    for finding in _in_cells(layout, outcome.findings):
        results[finding.cell - 1].findings.append(finding)  # type: ignore[operator]
    for finding in _in_cells(module, outcome.applied):
        results[finding.cell - 1].applied.append(finding)  # type: ignore[operator]
    if texts is None:
        return results
    for number, text in texts.items():
        if text != cells[number - 1]:
            results[number - 1].new_text = text
    return results


def process_notebook(
    path: Path,
    display: str,
    rules: Sequence[Rule],
    *,
    fix: bool = False,
    unsafe: bool = False,
    flush_every: int | None = None,
    data: bytes | None = None,
    as_it_was: bool = False,
    line_length: int = DEFAULT_LINE_LENGTH,
) -> FileResult:
    """Scan (or, with ``fix``, rewrite) one notebook; never raises for a problem in the user's file.

    ``data``: the notebook's bytes (an editor's unsaved buffer); by default the file is read.
    The findings name their cell. When fixes changed the notebook, ``new_text`` is the
    notebook's new text (its bytes once encoded as UTF-8) and ``diff`` the changed cells'
    diffs; nothing is written here. What is left stands where it is in the rewritten
    cells, or with ``as_it_was`` (the rewrite will not be written), in the cells as they were.
    """
    result = FileResult(path)
    try:
        notebook = read_notebook(path, display) if data is None else parse_notebook(path, data, display)
    except NotebookError as exc:
        result.error = str(exc)
        return result
    if not notebook.is_python:
        return result
    sources = [cell.text if cell.cell_type == "code" else None for cell in notebook.cells]
    try:
        cells = analyse_cells(sources, rules, name=display, fix=fix, unsafe=unsafe, flush_every=flush_every,
                              line_length=line_length)
    except NotebookError as exc:
        result.error = str(exc)
        return result
    result.notes = [cell.note for cell in cells if cell.note]
    result.findings = [finding for cell in cells for finding in cell.findings]
    result.applied = [finding for cell in cells for finding in cell.applied]
    texts = {number: cell.new_text for number, cell in enumerate(cells, start=1) if cell.new_text is not None}
    if not texts:
        return result
    try:
        result.new_text = rewrite(notebook, texts).decode("utf-8")
    except NotebookError as exc:
        result.error = str(exc).replace(str(path), display, 1)
        result.applied = []
        return result
    by_number = {cell.number: cell for cell in notebook.cells}
    if as_it_was:
        result.findings = []
        for number, cell in enumerate(cells, start=1):
            left = cell.findings
            if cell.new_text is not None:
                left = in_original(left, by_number[number].text, cell.new_text)
            result.findings.extend(left)
    result.diff = "".join(
        cell_diff(display, number, by_number[number].text, text) for number, text in sorted(texts.items())
    )
    return result


@functools.lru_cache(maxsize=32)
def _layout(path: str, _stamp: tuple[int, int]) -> tuple[str, list[Cell], list[tuple[int, int] | None]]:
    notebook = read_notebook(Path(path))
    return notebook.raw, notebook.cells, source_spans(notebook.raw)


def notebook_line(path: Path, cell: int, line: int) -> int | None:
    """The line of the notebook file that holds ``line`` of ``cell`` (for tools that show the file)."""
    try:
        stat = path.stat()
        raw, cells, spans = _layout(str(path), (stat.st_mtime_ns, stat.st_size))
    except (OSError, NotebookError, ValueError, IndexError, AssertionError):
        return None
    if not 0 < cell <= len(spans) or spans[cell - 1] is None:
        return None
    start, end = spans[cell - 1]  # type: ignore[misc]
    first = raw.count("\n", 0, start) + 1
    source = cells[cell - 1].source
    # A list laid out one element a line: element k on line first + k (after the bracket's line).
    if isinstance(source, list) and raw.count("\n", start, end) >= len(source):
        return first + min(line, len(source))
    return first
