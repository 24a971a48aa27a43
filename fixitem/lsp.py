"""``fixitem lsp``: a language server (LSP over stdin/stdout) for any editor.

What an editor gets:

* **diagnostics** for each open Python document and notebook cell, on open,
  on save and a moment after the user stops typing (changes are debounced by
  :data:`DEBOUNCE_S`): the rule code, the message with its costs (graph break,
  host sync) and fix safety, a link to PyTorch's page of the graph break the
  rule finds, and in ``data`` what the code action needs. The text analysed is
  the editor's, never the file on disk;
* **code actions**: a quick fix for each finding with a safe fix, unsafe fixes
  too when the client setting ``fixitem.unsafe`` is true (or, without that
  setting, ``unsafe = true`` in the configuration), and the source action
  "fixitem: apply all safe fixes" (kind ``source.fixAll.fixitem``). Each
  edit replaces exactly the text that the fix changes. A client that
  resolves actions (``codeAction/resolve``) gets the list at once and the
  edit of the action the user picks; others get every edit with the list.
  Each finding also has "fixitem: ignore CODE on this line", which adds
  ``# fixitem: ignore[CODE]`` to its line.

Notebooks (LSP 3.17 notebook sync, for clients that announce it): the server
asks for Jupyter notebooks with Python cells (:data:`NOTEBOOK_SYNC`). Their
code cells are analysed as one module in cell order, by the analysis that
``fixitem scan x.ipynb`` runs (:func:`fixitem.codemods.driver.notebooks.analyse_cells`),
IPython lines kept and never parsed; diagnostics and code actions belong to
each cell's own document, and an edit changes the cells the fix changes.

Settings come from ``[tool.fixitem]`` found from the document's path, as for
the command line (``select``, ``ignore``, ``exclude``, ``per-file-ignores``,
``flush-every``, ``unsafe``), read again for each analysis so that an edit of
``pyproject.toml`` takes effect on the next change. The client setting
``fixitem.unsafe``: ``{"unsafe": true}`` (or ``{"fixitem": {"unsafe": true}}``)
in ``initializationOptions``, or the ``fixitem`` section of its settings
(``workspace/didChangeConfiguration``; a client that sends none there is
asked with ``workspace/configuration``), which wins when it has the key.

All analysis runs on one worker thread, off the thread that reads messages;
results for a text already analysed (with the same rules and settings) are
kept in memory.
"""

from __future__ import annotations

import ast
import asyncio
import bisect
import logging
from collections import OrderedDict
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from lsprotocol import types
from pygls.lsp.server import LanguageServer
from pygls.uris import to_fs_path
from pygls.workspace import TextDocument
from pygls.workspace.position_codec import PositionCodec, ServerTextPosition

from fixitem import __version__
from fixitem.api import fix_one, rules_for
from fixitem.codemods import graph_break_codes
from fixitem.codemods.driver.engine import Finding, process
from fixitem.codemods.driver.line_length import line_length
from fixitem.codemods.driver.notebooks import NotebookError, analyse_cells, as_python
from fixitem.codemods.driver.registry import UnknownRule, rule_class, select_rules
from fixitem.codemods.model.suppression import _PATTERN as IGNORE_COMMENT
from fixitem.codemods.model.suppression import Suppressions
from fixitem.config import Config, ConfigError, discover_config
from fixitem.output import COSTS

log = logging.getLogger(__name__)

#: Seconds without a change before a changed document is analysed again.
DEBOUNCE_S = 0.3
#: Analyses (and single fixes) kept in memory, most recently used first.
CACHE_SIZE = 128
SOURCE = "fixitem"
FIX_ALL = "source.fixAll.fixitem"
FIX_ALL_TITLE = "fixitem: apply all safe fixes"
# Suffixes of files analysed whatever language the client says they are in.
PYTHON = (".py", ".pyi")


# --------------------------------------------------------------------------- analysis (worker thread)


@dataclass(frozen=True)
class Settings:
    """What an analysis of one document depends on, besides its text."""

    path: Path
    codes: tuple[str, ...]  # the rules to run, in run order; () for an excluded file
    flush_every: int | None
    unsafe: bool  # whether unsafe fixes are offered
    runtime: bool = True  # False: ``no-runtime`` keeps fixes that import fixitem.runtime out of the file


@dataclass(frozen=True)
class Analysis:
    text: str  # "\n" line endings
    findings: tuple[Finding, ...]
    error: str | None


def normalise(text: str) -> str:
    """Line endings as the engine reads files (``"\\n"``); line and column numbers are unchanged."""
    return text.replace("\r\n", "\n").replace("\r", "\n")


def settings_for(path: Path, client_unsafe: bool | None) -> Settings:
    """The settings of ``[tool.fixitem]`` found from ``path`` (raises :class:`ConfigError`)."""
    cfg = discover_config([path]) if path.is_absolute() else Config()
    unsafe = bool(client_unsafe if client_unsafe is not None else cfg.unsafe)
    if cfg.excluded(path):
        return Settings(path, (), cfg.flush_every, unsafe)
    ignore = [*(cfg.ignore or []), *(cfg.ignored_for(path) if cfg.per_file_ignores else [])]
    try:
        codes = tuple(rule.code for rule in select_rules(cfg.select, ignore))
    except UnknownRule as exc:  # checked when the file was read; kept for a Config built in code
        raise ConfigError(f"{cfg.path}: {exc}") from None
    return Settings(path, codes, cfg.flush_every, unsafe, not cfg.runtime_kept_out(path))


class Analyser:
    """The engine behind the server, with the results it has computed (used from one thread)."""

    def __init__(self, size: int = CACHE_SIZE) -> None:
        self.size = size
        self._analyses: OrderedDict[tuple, Analysis] = OrderedDict()
        self._fixes: OrderedDict[tuple, str | None] = OrderedDict()
        self.runs = 0  # engine runs, for tests and measurements

    def _remember(self, table: OrderedDict, key: tuple, value: Any) -> Any:
        table[key] = value
        table.move_to_end(key)
        while len(table) > self.size:
            table.popitem(last=False)
        return value

    def analyse(self, settings: Settings, text: str) -> Analysis:
        text = normalise(text)
        key = (settings.path, settings.codes, settings.flush_every, settings.runtime, text)
        if key in self._analyses:
            self._analyses.move_to_end(key)
            return self._analyses[key]
        if not settings.codes:
            return self._remember(self._analyses, key, Analysis(text, (), None))
        self.runs += 1
        # (one file at a time: the functions of other modules its traced code calls are not looked for)
        outcome = process(settings.path, text, rules_for(settings.codes, settings.runtime), fix=False,
                          flush_every=settings.flush_every, follow_calls=False)
        return self._remember(self._analyses, key, Analysis(text, tuple(outcome.findings), outcome.error))

    def fixed(self, settings: Settings, text: str, finding: Finding | None) -> str | None:
        """The text after the fix of ``finding`` (None: after all safe fixes); None when nothing changes."""
        text = normalise(text)
        key = (settings.path, settings.codes, settings.flush_every, settings.runtime, text, finding)
        if key in self._fixes:
            self._fixes.move_to_end(key)
            return self._fixes[key]
        rules = rules_for(settings.codes, settings.runtime)
        self.runs += 1
        if finding is None:
            outcome = process(settings.path, text, rules, fix=True, unsafe=False, flush_every=settings.flush_every,
                              follow_calls=False, line_length=line_length(settings.path))
        else:
            unsafe = finding.fix == "unsafe"
            outcome = fix_one(settings.path, text, rules, finding, unsafe=unsafe, flush_every=settings.flush_every,
                              line_length=line_length(settings.path))
        new_text = outcome.new_text if outcome.error is None and outcome.new_text != text else None
        return self._remember(self._fixes, key, new_text)

    def analyse_notebook(self, settings: Settings, cells: Sequence[str | None]) -> tuple[Analysis, ...]:
        """One :class:`Analysis` for each cell (None: not a Python code cell), the cells read as one module."""
        cells = tuple(None if text is None else normalise(text) for text in cells)
        key = ("notebook", settings.path, settings.codes, settings.flush_every, settings.runtime, cells)
        if key in self._analyses:
            self._analyses.move_to_end(key)
            return self._analyses[key]
        findings: list[tuple[Finding, ...]] = [() for _ in cells]
        error = None
        if settings.codes and any(text is not None for text in cells):
            self.runs += 1
            try:
                results = analyse_cells(
                    cells, rules_for(settings.codes, settings.runtime), name=str(settings.path),
                    flush_every=settings.flush_every,
                )
                findings = [tuple(result.findings) for result in results]
            except NotebookError as exc:
                error = str(exc)
        analyses = tuple(Analysis(text or "", found, error) for text, found in zip(cells, findings))
        return self._remember(self._analyses, key, analyses)

    def fixed_cells(
        self, settings: Settings, cells: Sequence[str | None], finding: Finding | None
    ) -> tuple[str | None, ...] | None:
        """Each cell's text after the fix of ``finding`` (None: after all safe fixes), None for a cell the fix
        leaves as it is; None when nothing changes."""
        cells = tuple(None if text is None else normalise(text) for text in cells)
        key = ("notebook", settings.path, settings.codes, settings.flush_every, settings.runtime, cells, finding)
        if key in self._fixes:
            self._fixes.move_to_end(key)
            return self._fixes[key]
        self.runs += 1
        try:
            results = analyse_cells(
                cells, rules_for(settings.codes, settings.runtime), name=str(settings.path), fix=True,
                unsafe=finding is not None and finding.fix == "unsafe", flush_every=settings.flush_every,
                only=finding,
            )
            texts: tuple[str | None, ...] | None = tuple(result.new_text for result in results)
        except NotebookError:
            texts = None
        if texts is not None and all(text is None for text in texts):
            texts = None
        return self._remember(self._fixes, key, texts)


# --------------------------------------------------------------------------- positions and edits


class Lines:
    """Offsets in a ``"\\n"`` text as LSP positions in the client's units (UTF-16 unless agreed otherwise)."""

    def __init__(self, text: str, codec: PositionCodec) -> None:
        self.text = text
        self.lines = text.split("\n")
        self.starts = [0]
        for line in self.lines[:-1]:
            self.starts.append(self.starts[-1] + len(line) + 1)
        self.codec = codec

    def position(self, offset: int) -> types.Position:
        row = bisect.bisect_right(self.starts, offset) - 1
        return self.at(row, offset - self.starts[row])

    def at(self, row: int, column: int) -> types.Position:
        """``column``: code points from the start of line ``row`` (both 0-based)."""
        if row >= len(self.lines):
            row, column = len(self.lines) - 1, len(self.lines[-1])
        column = max(0, min(column, len(self.lines[row])))
        return self.codec.position_to_client_units(self.lines, ServerTextPosition(row, column))

    def finding_range(self, finding: Finding) -> types.Range:
        start = self.at(finding.line - 1, finding.col - 1)
        if finding.end_line:
            end = self.at(finding.end_line - 1, finding.end_col - 1)
        else:  # not known: to the end of the line
            end = self.at(finding.line - 1, len(self.lines[min(finding.line, len(self.lines)) - 1]))
        return types.Range(start, end)


def minimal_edit(before: str, after: str) -> tuple[int, int, str]:
    """``(start, end, new)``: ``after`` is ``before[:start] + new + before[end:]``, with the longest
    unchanged text kept at both ends."""
    limit = min(len(before), len(after))
    start = 0
    while start < limit and before[start] == after[start]:
        start += 1
    tail = 0
    while tail < limit - start and before[len(before) - 1 - tail] == after[len(after) - 1 - tail]:
        tail += 1
    return start, len(before) - tail, after[start:len(after) - tail]


def text_edit(before: str, after: str, codec: PositionCodec, newline: str = "\n") -> types.TextEdit:
    start, end, new = minimal_edit(before, after)
    lines = Lines(before, codec)
    return types.TextEdit(
        range=types.Range(lines.position(start), lines.position(end)),
        new_text=new.replace("\n", newline) if newline != "\n" else new,
    )


def ignore_comment(text: str, finding: Finding, python: str | None = None) -> str | None:
    """``text`` with ``# fixitem: ignore[CODE]`` for ``finding`` on its line; None where a comment cannot go there
    (the line ends inside a string, or continues with a backslash). ``python``: ``text`` as Python, line for
    line, where it is not (a notebook cell with IPython lines)."""
    lines = text.split("\n")
    if not 0 < finding.line <= len(lines):
        return None
    line = lines[finding.line - 1]
    existing = IGNORE_COMMENT.search(line)
    if existing is not None and existing.group("codes") is not None:  # add the code to the list
        codes = [c.strip() for c in existing.group("codes").split(",") if c.strip()]
        comment = f"# fixitem: ignore[{', '.join([*codes, finding.rule])}]"
        new_line = f"{line[:existing.start()]}{comment}{line[existing.end():]}"
    elif existing is None and not line.rstrip().endswith("\\"):
        new_line = f"{line.rstrip()}  # fixitem: ignore[{finding.rule}]"
    else:
        return None
    new_text = "\n".join([*lines[: finding.line - 1], new_line, *lines[finding.line:]])
    before = text if python is None else python
    rows = before.split("\n")
    if len(rows) < finding.line:
        return None
    after = "\n".join([*rows[: finding.line - 1], new_line, *rows[finding.line:]])
    try:  # the same program: the comment did not land inside a string
        if ast.dump(ast.parse(after)) != ast.dump(ast.parse(before)):
            return None
    except (SyntaxError, ValueError, RecursionError):
        return None
    return new_text if Suppressions(after).suppressed(finding.line, finding.rule) else None


def _newline(source: str) -> str:
    if "\r\n" in source:
        return "\r\n"
    if "\r" in source:
        return "\r"
    return "\n"


def _overlaps(a: types.Range, b: types.Range) -> bool:
    """Whether two ranges touch (an empty range at a diagnostic's edge counts: that is where the cursor is)."""
    def key(p: types.Position) -> tuple[int, int]:
        return (p.line, p.character)

    return key(a.start) <= key(b.end) and key(b.start) <= key(a.end)


def _kind_wanted(kind: str, only: Sequence[str] | None) -> bool:
    return not only or any(kind == k or kind.startswith(f"{k}.") for k in only)


# --------------------------------------------------------------------------- diagnostics


def _href(rule: str) -> str | None:
    try:
        codes = rule_class(rule).graph_breaks
    except UnknownRule:
        return None
    return graph_break_codes.url(codes[0]) if codes else None


def diagnostic_message(finding: Finding) -> str:
    costs = f" ({', '.join(COSTS[c] for c in finding.costs)})" if finding.costs else ""
    text = f"{finding.message}{costs} [fix: {finding.fix}]"
    if finding.note:
        text += f"\nnote: {finding.note}"
    return text


def diagnostic(finding: Finding, lines: Lines) -> types.Diagnostic:
    href = _href(finding.rule)
    return types.Diagnostic(
        range=lines.finding_range(finding),
        message=diagnostic_message(finding),
        severity=types.DiagnosticSeverity.Warning,
        code=finding.rule,
        code_description=types.CodeDescription(href=href) if href else None,
        source=SOURCE,
        data={"rule": finding.rule, "line": finding.line, "col": finding.col, "fix": finding.fix},
    )


# --------------------------------------------------------------------------- the server


def _client_unsafe(options: Any) -> bool | None:
    """``fixitem.unsafe`` from initializationOptions or didChangeConfiguration settings (None: not given)."""
    if not isinstance(options, dict):
        return None
    if isinstance(options.get("fixitem"), dict):
        options = options["fixitem"]
    value = options.get("unsafe")
    return value if isinstance(value, bool) else None


#: The notebooks the server reads: Jupyter notebooks with Python cells (LSP 3.17 notebook sync).
NOTEBOOK_SYNC = types.NotebookDocumentSyncOptions(
    notebook_selector=[types.NotebookDocumentFilterWithCells(
        notebook=types.NotebookDocumentFilterNotebookType(notebook_type="jupyter-notebook"),
        cells=[types.NotebookCellLanguage(language="python")],
    )],
    save=True,
)


@dataclass
class Current:
    """A document as last analysed: for a notebook cell, with the notebook's other cells."""

    document: TextDocument
    settings: Settings
    analysis: Analysis
    # A notebook cell: every cell's document (None: not a Python code cell) and the texts analysed.
    cells: tuple[TextDocument | None, ...] | None = None
    texts: tuple[str | None, ...] = ()

    @property
    def python(self) -> str | None:
        """The document's text as Python, line for line (a notebook cell: its IPython lines replaced)."""
        return as_python(self.analysis.text) if self.cells is not None else None


class FixitemServer(LanguageServer):
    def __init__(self) -> None:
        super().__init__(
            "fixitem", __version__, text_document_sync_kind=types.TextDocumentSyncKind.Incremental,
            notebook_document_sync=NOTEBOOK_SYNC,
        )
        self.analyser = Analyser()
        self.worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="fixitem-analysis")
        # fixitem.unsafe as the client set it: in its settings (workspace/didChangeConfiguration or
        # workspace/configuration), else in initializationOptions; None: as configured in [tool.fixitem].
        self.settings_unsafe: bool | None = None
        self.init_unsafe: bool | None = None
        self.debounce_s = DEBOUNCE_S
        self.shut_down = False
        self._pending: dict[str, asyncio.Task] = {}
        self._config_errors: set[str] = set()

    @property
    def client_unsafe(self) -> bool | None:
        return self.settings_unsafe if self.settings_unsafe is not None else self.init_unsafe

    # -- documents

    def open_document(self, uri: str) -> TextDocument | None:
        return self.workspace.text_documents.get(unquote(uri))

    def open_notebook(self, uri: str) -> types.NotebookDocument | None:
        return self.workspace.get_notebook_document(notebook_uri=uri)

    def notebook_of(self, cell_uri: str) -> types.NotebookDocument | None:
        """The open notebook that ``cell_uri`` is a cell of."""
        return self.workspace.get_notebook_document(cell_uri=cell_uri)

    def analysed_uris(self) -> list[str]:
        """What is analysed as a whole: each open notebook, and each open document that is not a notebook's cell."""
        notebooks = [notebook.uri for notebook in self.workspace.notebook_documents.values()]
        documents = [document.uri for document in self.workspace.text_documents.values()
                     if self.notebook_of(document.uri) is None]
        return notebooks + documents

    @staticmethod
    def document_path(document: TextDocument) -> Path:
        path = to_fs_path(document.uri)
        return Path(path) if path else Path(document.filename or "untitled.py")

    @staticmethod
    def notebook_path(notebook: types.NotebookDocument) -> Path:
        path = to_fs_path(notebook.uri)
        return Path(path) if path else Path(unquote(notebook.uri).rsplit("/", 1)[-1] or "untitled.ipynb")

    def cells(self, notebook: types.NotebookDocument) -> tuple[tuple[str, TextDocument | None], ...]:
        """Each cell's URI, with its document when it is Python code (markdown and other languages: None)."""
        out = []
        for cell in notebook.cells:
            document = self.open_document(cell.document)
            python = cell.kind == types.NotebookCellKind.Code and document is not None and (
                document.language_id in (None, "python")
            )
            out.append((cell.document, document if python else None))
        return tuple(out)

    def settings(self, document: TextDocument) -> Settings | None:
        """The settings for ``document``; None for a document fixitem does not read, or bad configuration."""
        if document.language_id not in (None, "python") and Path(document.filename or "").suffix not in PYTHON:
            return None
        return self.settings_at(self.document_path(document))

    def settings_at(self, path: Path) -> Settings | None:
        """The settings for the file at ``path``; None for bad configuration (said to the user once)."""
        try:
            return settings_for(path, self.client_unsafe)
        except ConfigError as exc:
            message = str(exc)
            if message not in self._config_errors:  # once per distinct problem, not per keystroke
                self._config_errors.add(message)
                self.window_show_message(types.ShowMessageParams(types.MessageType.Error, f"fixitem: {message}"))
            return None

    async def run(self, function, *args):
        return await asyncio.get_running_loop().run_in_executor(self.worker, function, *args)

    # -- diagnostics

    def schedule(self, uri: str, delay: float) -> None:
        """Analyse ``uri`` after ``delay`` seconds, replacing an analysis already scheduled for it.
        A notebook's cell is analysed with its notebook."""
        notebook = self.notebook_of(uri)
        if notebook is not None:
            uri = notebook.uri
        previous = self._pending.pop(uri, None)
        if previous is not None:
            previous.cancel()
        task = asyncio.ensure_future(self._lint(uri, delay))
        self._pending[uri] = task
        task.add_done_callback(lambda t: self._pending.pop(uri) if self._pending.get(uri) is t else None)

    async def _lint(self, uri: str, delay: float) -> None:
        if delay:
            await asyncio.sleep(delay)
        try:
            if self.open_notebook(uri) is not None:
                await self._publish_notebook(uri)
            else:
                await self._publish_analysis(uri)
        except Exception as exc:  # noqa: BLE001 - one document's problem must not stop the server
            log.exception("analysis of %s failed", uri)
            self.window_log_message(types.LogMessageParams(
                types.MessageType.Error, f"fixitem: internal error analysing {uri}: {type(exc).__name__}: {exc}"
            ))

    async def _publish_analysis(self, uri: str) -> None:
        document = self.open_document(uri)
        if document is None:
            return
        version, source = document.version, document.source
        settings = self.settings(document)
        if settings is None:
            self.publish(uri, version, [])
            return
        analysis: Analysis = await self.run(self.analyser.analyse, settings, source)
        document = self.open_document(uri)
        if document is None or document.version != version:
            return  # changed meanwhile: the analysis scheduled by that change publishes
        if analysis.error:
            self.window_log_message(types.LogMessageParams(types.MessageType.Log, f"fixitem: {analysis.error}"))
        lines = Lines(analysis.text, document.position_codec)
        self.publish(uri, version, [diagnostic(f, lines) for f in analysis.findings])

    async def _publish_notebook(self, uri: str) -> None:
        """Diagnostics for each cell of the notebook, its code cells analysed as one module."""
        notebook = self.open_notebook(uri)
        if notebook is None:
            return
        version = notebook.version
        cells = self.cells(notebook)
        settings = self.settings_at(self.notebook_path(notebook))
        if settings is None:
            for cell_uri, document in cells:
                self.publish(cell_uri, document.version if document else None, [])
            return
        texts = tuple(document.source if document else None for _, document in cells)
        analyses: tuple[Analysis, ...] = await self.run(self.analyser.analyse_notebook, settings, texts)
        notebook = self.open_notebook(uri)
        if notebook is None or notebook.version != version:
            return  # changed meanwhile: the analysis scheduled by that change publishes
        if analyses and analyses[0].error:
            self.window_log_message(types.LogMessageParams(types.MessageType.Log, f"fixitem: {analyses[0].error}"))
        for (cell_uri, document), analysis in zip(cells, analyses):
            if document is None:
                self.publish(cell_uri, None, [])
                continue
            lines = Lines(analysis.text, document.position_codec)
            self.publish(cell_uri, document.version, [diagnostic(f, lines) for f in analysis.findings])

    def publish(self, uri: str, version: int | None, diagnostics: list[types.Diagnostic]) -> None:
        self.text_document_publish_diagnostics(
            types.PublishDiagnosticsParams(uri=uri, diagnostics=diagnostics, version=version)
        )

    def forget(self, uri: str, cells: Sequence[str] | None = None) -> None:
        """A document (or a notebook, with the URIs of its cells) was closed: clear what was published."""
        task = self._pending.pop(uri, None)
        if task is not None:
            task.cancel()
        for closed in [uri] if cells is None else cells:
            self.publish(closed, None, [])

    # -- code actions

    def workspace_edit(self, edits: Sequence[tuple[TextDocument, types.TextEdit]]) -> types.WorkspaceEdit:
        capabilities = self.client_capabilities.workspace
        versioned = bool(
            capabilities and capabilities.workspace_edit and capabilities.workspace_edit.document_changes
        )
        if versioned:
            return types.WorkspaceEdit(document_changes=[
                types.TextDocumentEdit(types.OptionalVersionedTextDocumentIdentifier(d.uri, d.version), [edit])
                for d, edit in edits
            ])
        return types.WorkspaceEdit(changes={d.uri: [edit] for d, edit in edits})

    def resolves_edits(self) -> bool:
        """Whether the client asks for an action's edit when it is chosen (codeAction/resolve)."""
        text_document = self.client_capabilities.text_document
        code_action = text_document.code_action if text_document else None
        support = code_action.resolve_support if code_action else None
        return bool(support and "edit" in support.properties)

    async def _current(self, uri: str) -> Current | None:
        notebook = self.notebook_of(uri)
        if notebook is not None:
            return await self._current_cell(notebook, uri)
        document = self.open_document(uri)
        if document is None:
            return None
        settings = self.settings(document)
        if settings is None or not settings.codes:
            return None
        analysis: Analysis = await self.run(self.analyser.analyse, settings, document.source)
        if analysis.error:
            return None
        return Current(document, settings, analysis)

    async def _current_cell(self, notebook: types.NotebookDocument, uri: str) -> Current | None:
        cells = self.cells(notebook)
        index = next((i for i, (cell_uri, _) in enumerate(cells) if unquote(cell_uri) == unquote(uri)), None)
        if index is None or cells[index][1] is None:
            return None
        settings = self.settings_at(self.notebook_path(notebook))
        if settings is None or not settings.codes:
            return None
        texts = tuple(document.source if document else None for _, document in cells)
        analyses: tuple[Analysis, ...] = await self.run(self.analyser.analyse_notebook, settings, texts)
        analysis = analyses[index]
        if analysis.error:
            return None
        documents = tuple(document for _, document in cells)
        return Current(cells[index][1], settings, analysis, documents, texts)  # type: ignore[arg-type]

    async def _edit(self, current: Current, finding: Finding | None) -> types.WorkspaceEdit | None:
        """The edit of ``finding``'s fix (None: of all safe fixes); None when it changes nothing.
        In a notebook, a fix can change other cells too (the imports it needs)."""
        if current.cells is not None:
            new_texts = await self.run(self.analyser.fixed_cells, current.settings, current.texts, finding)
            if new_texts is None:
                return None
            edits = []
            for document, text, new_text in zip(current.cells, current.texts, new_texts):
                if document is not None and text is not None and new_text is not None:
                    edit = text_edit(normalise(text), new_text, document.position_codec, _newline(document.source))
                    edits.append((document, edit))
            return self.workspace_edit(edits)
        document = current.document
        source = document.source
        new_text = await self.run(self.analyser.fixed, current.settings, source, finding)
        if new_text is None:
            return None
        edit = text_edit(current.analysis.text, new_text, document.position_codec, _newline(source))
        return self.workspace_edit([(document, edit)])

    async def code_actions(self, params: types.CodeActionParams) -> list[types.CodeAction]:
        current = await self._current(params.text_document.uri)
        if current is None:
            return []
        document, settings, analysis = current.document, current.settings, current.analysis
        only = params.context.only
        lines = Lines(analysis.text, document.position_codec)
        # Each action with the finding it fixes (None: all safe fixes).
        offered: list[tuple[types.CodeAction, Finding | None]] = []
        ignores: list[types.CodeAction] = []
        if _kind_wanted(types.CodeActionKind.QuickFix, only):
            for finding in analysis.findings:
                diag = diagnostic(finding, lines)
                if not _overlaps(diag.range, params.range):
                    continue
                ignore = ignore_comment(analysis.text, finding, current.python)
                if ignore is not None:
                    edit = text_edit(analysis.text, ignore, document.position_codec, _newline(document.source))
                    ignores.append(types.CodeAction(
                        title=f"fixitem: ignore {finding.rule} on this line", kind=types.CodeActionKind.QuickFix,
                        diagnostics=[diag], edit=self.workspace_edit([(document, edit)]),
                    ))
                if finding.fix == "none" or (finding.fix == "unsafe" and not settings.unsafe):
                    continue
                title = f"fixitem: fix {finding.rule} ({finding.name})"
                if finding.fix == "unsafe":
                    title += " (unsafe: review it)"
                action = types.CodeAction(
                    title=title, kind=types.CodeActionKind.QuickFix, diagnostics=[diag],
                    is_preferred=finding.fix == "safe",
                )
                offered.append((action, finding))
        if _kind_wanted(FIX_ALL, only) and any(f.fix == "safe" for f in analysis.findings):
            offered.append((types.CodeAction(title=FIX_ALL_TITLE, kind=FIX_ALL), None))
        actions = []
        for action, finding in offered:
            if self.resolves_edits():  # the edit is computed when the user picks the action
                action.data = {"uri": document.uri, "version": document.version, **_key(finding)}
                actions.append(action)
                continue
            action.edit = await self._edit(current, finding)
            if action.edit is not None:
                actions.append(action)
        return actions + ignores  # the fixes first

    async def resolve(self, action: types.CodeAction) -> types.CodeAction:
        data = action.data if isinstance(action.data, dict) else {}
        current = await self._current(str(data.get("uri", "")))
        if current is None:
            return action
        if data.get("all"):
            action.edit = await self._edit(current, None)
            return action
        for finding in current.analysis.findings:
            if _key(finding) == {k: data.get(k) for k in ("rule", "line", "col")}:
                action.edit = await self._edit(current, finding)
                break
        return action


def _key(finding: Finding | None) -> dict[str, Any]:
    """What names a finding in a code action's ``data`` (positions of the text the action was made for)."""
    if finding is None:
        return {"all": True}
    return {"rule": finding.rule, "line": finding.line, "col": finding.col}


def create_server() -> FixitemServer:
    server = FixitemServer()

    @server.feature(types.INITIALIZE)
    def initialize(ls: FixitemServer, params: types.InitializeParams) -> None:
        ls.init_unsafe = _client_unsafe(params.initialization_options)

    @server.feature(types.TEXT_DOCUMENT_DID_OPEN)
    def did_open(ls: FixitemServer, params: types.DidOpenTextDocumentParams) -> None:
        ls.schedule(params.text_document.uri, 0)

    @server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(ls: FixitemServer, params: types.DidChangeTextDocumentParams) -> None:
        ls.schedule(params.text_document.uri, ls.debounce_s)

    @server.feature(types.TEXT_DOCUMENT_DID_SAVE, types.SaveOptions(include_text=False))
    def did_save(ls: FixitemServer, params: types.DidSaveTextDocumentParams) -> None:
        ls.schedule(params.text_document.uri, 0)

    @server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: FixitemServer, params: types.DidCloseTextDocumentParams) -> None:
        ls.forget(params.text_document.uri)

    # Notebooks (LSP 3.17): pygls keeps the notebook and its cells' documents; the cells are analysed together.
    @server.feature(types.NOTEBOOK_DOCUMENT_DID_OPEN)
    def notebook_did_open(ls: FixitemServer, params: types.DidOpenNotebookDocumentParams) -> None:
        ls.schedule(params.notebook_document.uri, 0)

    @server.feature(types.NOTEBOOK_DOCUMENT_DID_CHANGE)
    def notebook_did_change(ls: FixitemServer, params: types.DidChangeNotebookDocumentParams) -> None:
        structure = params.change.cells.structure if params.change.cells else None
        for closed in (structure.did_close or []) if structure else []:  # cells removed from the notebook
            ls.publish(closed.uri, None, [])
        ls.schedule(params.notebook_document.uri, ls.debounce_s)

    @server.feature(types.NOTEBOOK_DOCUMENT_DID_SAVE)
    def notebook_did_save(ls: FixitemServer, params: types.DidSaveNotebookDocumentParams) -> None:
        ls.schedule(params.notebook_document.uri, 0)

    @server.feature(types.NOTEBOOK_DOCUMENT_DID_CLOSE)
    def notebook_did_close(ls: FixitemServer, params: types.DidCloseNotebookDocumentParams) -> None:
        ls.forget(params.notebook_document.uri, [cell.uri for cell in params.cell_text_documents])

    @server.feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)
    async def did_change_configuration(ls: FixitemServer, params: types.DidChangeConfigurationParams) -> None:
        settings = params.settings
        if not (isinstance(settings, dict) and "fixitem" in settings):
            capabilities = ls.client_capabilities.workspace
            if capabilities and capabilities.configuration:  # a client that wants to be asked
                try:
                    answer = await ls.workspace_configuration_async(
                        types.ConfigurationParams(items=[types.ConfigurationItem(section="fixitem")])
                    )
                    settings = answer[0] if answer else None
                except Exception as exc:  # noqa: BLE001 - a client that cannot answer keeps the old settings
                    log.warning("workspace/configuration failed: %s", exc)
                    return
        ls.settings_unsafe = _client_unsafe(settings)
        ls._config_errors.clear()
        for uri in ls.analysed_uris():
            ls.schedule(uri, 0)

    @server.feature(
        types.TEXT_DOCUMENT_CODE_ACTION,
        types.CodeActionOptions(code_action_kinds=[types.CodeActionKind.QuickFix, FIX_ALL], resolve_provider=True),
    )
    async def code_action(ls: FixitemServer, params: types.CodeActionParams) -> list[types.CodeAction]:
        return await ls.code_actions(params)

    @server.feature(types.CODE_ACTION_RESOLVE)
    async def code_action_resolve(ls: FixitemServer, action: types.CodeAction) -> types.CodeAction:
        return await ls.resolve(action)

    @server.feature(types.SHUTDOWN)
    def shutdown(ls: FixitemServer, params: None) -> None:
        ls.shut_down = True
        for task in list(ls._pending.values()):
            task.cancel()

    return server


def serve(stdin=None, stdout=None, server: FixitemServer | None = None) -> int:
    """Run the server on stdin/stdout until the client says exit; 0 after a shutdown request, else 1."""
    server = server or create_server()
    server.start_io(stdin, stdout)
    server.worker.shutdown(wait=False, cancel_futures=True)
    return 0 if server.shut_down else 1
