"""Run rules over one file: findings, and the rewritten text.

``process(path, text, rules, fix=...)`` never raises for a problem in the
user's file: a file that does not parse comes back with ``error`` set, and a
rewrite whose result would not parse is dropped (``error`` says so) while the
original text is kept. Fixes are applied until a fixed point: overlapping
fixes are applied one per pass, and a second run changes nothing.
"""

from __future__ import annotations

import ast
import bisect
import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from .. import gen, shortcuts
from ..fixes.imports import add_imports, import_insertion
from ..model import project, tree
from ..model.context import COMPOUND, FileContext
from ..model.project import External
from ..model.syncs import SyncSite, find_sync_sites, kept_reads
from ..model.traced import traced_root_names
from ..model.tree import parse_module
from ..rule import Fix, Report, Rule, Safety
from .line_blocks import line_blocks
from .line_length import DEFAULT as DEFAULT_LINE_LENGTH

MAX_PASSES = 8
_BARE_NEWLINE = re.compile(r"(?<!\r)\n")

# Substrings without which a file has nothing to report: checked before parsing.
PREFILTER = ("torch", ".item(", ".tolist(")


@dataclass(frozen=True)
class Finding:
    path: str
    line: int
    col: int
    rule: str
    name: str
    message: str
    fix: str  # "safe", "unsafe" or "none"
    costs: tuple[str, ...]  # "graph-break" and/or "host-sync"
    note: str = ""  # why unsafe / why no fix / what to do by hand
    applied: bool = False
    cell: int | None = None  # in a notebook: the cell (1-based position); ``line`` is then the cell's line
    # Where the reported code ends: 1-based line, and the column after its last character
    # (as SARIF's endColumn); 0 when not known (results kept by the cache do not keep it).
    end_line: int = field(default=0, compare=False)
    end_col: int = field(default=0, compare=False)

    @property
    def graph_breaks(self) -> tuple[str, ...]:
        """PyTorch's codes for the graph break this finding costs (none when it costs no break)."""
        if "graph-break" not in self.costs:
            return ()
        from .registry import rule_class

        return rule_class(self.rule).graph_breaks

    def to_dict(self) -> dict[str, object]:
        return {
            "path": self.path, "line": self.line, "col": self.col, "rule": self.rule,
            "name": self.name, "message": self.message, "fix": self.fix,
            "costs": list(self.costs), "graph_breaks": list(self.graph_breaks), "note": self.note,
            "applied": self.applied,
            **({"cell": self.cell} if self.cell is not None else {}),
        }


@dataclass
class FileResult:
    """What processing one file gave. :func:`process` fills ``findings``,
    ``applied``, ``new_text`` and ``error``; :mod:`fixitem.api` adds the diff,
    whether it wrote the file, and notes."""

    path: Path
    findings: list[Finding] = field(default_factory=list)  # what remains after apply (or, for scan, all)
    applied: list[Finding] = field(default_factory=list)  # what was fixed
    diff: str = ""  # unified diff of the change (apply only)
    error: str | None = None  # the file could not be processed
    written: bool = False  # apply wrote the file
    notes: list[str] = field(default_factory=list)  # what was left out of the analysis, and why (not errors)
    new_text: str | None = None  # set when fixes changed the text
    # The other modules of the project the analysis read (path -> sha1 of the text read): a
    # kept result holds while they are unchanged.
    depends: dict[str, str] = field(default_factory=dict, compare=False)
    # The functions of other modules this file's traced code calls (path, qualified name):
    # they are traced too (the driver analyses their module again with them as roots).
    # None: not looked for (``process(follow_calls=False)``).
    traced_elsewhere: list[tuple[str, str]] | None = field(default_factory=list, compare=False)
    # The functions of this file traced already (as roots name them): marks of other files
    # for these change nothing, and need no second analysis.
    traced_here: frozenset[str] = field(default=frozenset(), compare=False)
    # apply: a pass offered an unsafe fix (without one, ``--unsafe`` would have made the same choices)
    offered_unsafe: bool = field(default=False, compare=False)
    found_digest: str = field(default="", compare=False)  # scan: a digest of the findings as the analysis gave them, before tagging
    # scan: ``apply`` may fix other findings than those that have a fix here (see
    # :func:`_fixes_interact`); False when it fixes exactly those.
    fixes_interact: bool = field(default=True, compare=False)


def in_original(findings: Sequence[Finding], before: str, after: str) -> list[Finding]:
    """Findings placed in the rewritten text ``after`` moved to the same code in ``before``
    (within a rewritten block, to the line at the same offset, or its last line): where
    what is left stands in a file that is not written."""
    if not findings:
        return []
    blocks = line_blocks(before.splitlines(), after.splitlines())
    starts = [j1 for _, _, _, j1, _ in blocks]  # the blocks tile ``after`` in order
    moved = []
    for finding in findings:
        row = finding.line - 1
        # The first block that holds the row, or is empty at it: the first starting at the
        # row (holding it or empty there), else the last one starting before it.
        k = bisect.bisect_left(starts, row)
        if not (k < len(blocks) and starts[k] == row):
            k -= 1
        if k >= 0 and (blocks[k][3] <= row < blocks[k][4] or blocks[k][3] == blocks[k][4] == row):
            _, i1, i2, j1, _ = blocks[k]
            line = i1 + min(row - j1, max(i2 - i1 - 1, 0)) + 1
            end_line = finding.end_line + line - finding.line if finding.end_line else 0
            moved.append(replace(finding, line=line, end_line=max(end_line, line) if end_line else 0))
        else:
            moved.append(finding)
    return moved


def worth_parsing(text: str) -> bool:
    return any(token in text for token in PREFILTER)


def _syntax_error(path: Path, exc: SyntaxError) -> str:
    return f"{path}:{exc.lineno or 1}:{exc.offset or 1}: syntax error: {exc.msg}"


def _analyse(ctx: FileContext, rules: Sequence[Rule]) -> list[tuple[Rule, Report]]:
    sites = find_sync_sites(ctx)
    claimed: set[SyncSite] = set()
    reports: list[tuple[Rule, Report]] = []
    for rule in rules:
        for report in rule.check(ctx, sites, claimed):
            _drop_kept_reads(ctx, report)
            claimed.update(report.sites)
            line, _ = ctx.position(report.node)
            if ctx.suppressions.suppressed(line, rule.code) or ctx.in_display_method(report.node):
                continue
            guard = ctx.compile_guard(report.node)
            if guard is not None and report.fix is not None:
                report.fix = None
                report.note = (
                    f"no fix: the code is guarded by `if {ctx.code(guard.test)}:` and is left as written"
                )
            reports.append((rule, report))
    reports.sort(key=lambda pair: ctx.position(pair[1].node))
    return reports


def _drop_kept_reads(ctx: FileContext, report: Report) -> None:
    """A fix claims only the reads it removes. A read its rewrite keeps (``torch.tensor(y.item())``
    left inside the new condition) is no longer the fix's: another rule reports it. A fix that
    removes no read at all is no fix."""
    fix = report.fix
    if fix is None or not report.sites:
        return
    kept = kept_reads(ctx, report.sites, list(fix.replacements.values()))
    if not kept:
        return
    removed = [s for s in report.sites if s not in kept]
    if removed:
        report.sites = removed
        return
    report.fix = None
    report.note = (f"no fix: the rewrite would still read `{ctx.code(kept[0].node)}`, so it would remove no sync. "
                   f"Keep the value on the device: use `{ctx.code(kept[0].value)}` itself where the number is not needed")


def _finding(ctx: FileContext, rule: Rule, report: Report, path: Path, applied: bool = False) -> Finding:
    line, col = ctx.position(report.node)
    # A graph break where torch.compile traces the code; a host sync where a
    # tensor value is read. (An output call deferred only to keep its order
    # among deferred ones outside traced code costs neither.)
    # A read of a tensor in host memory is no sync; an explicit synchronize is traced into the graph.
    breaks = ctx.in_traced_code(report.node) and (not report.sites or any(s.graph_break for s in report.sites))
    costs = (("graph-break",) if breaks else ()) + (("host-sync",) if any(s.host_sync for s in report.sites) else ())
    fix = report.fix
    safety = fix.safety.value if fix is not None else Safety.NONE.value
    note = report.note or (fix.reason if fix is not None else "")
    end = ctx.positions[report.node].end
    return Finding(
        str(path), line, col, rule.code, rule.name, report.message, safety, costs, note, applied,
        end_line=end.line, end_col=end.column + 1,
    )


def _span(ctx: FileContext, fix: Fix) -> list[tuple[int, int]]:
    return [_edit(ctx, node, replacement)[:2] for node, replacement in fix.replacements.items()]


class _Taken:
    """The spans (character offsets) the fixes chosen in a pass edit, sorted: whether a
    span overlaps one of them is found among the few that start near it, not by comparing
    with every one (a file with thousands of fixes took time growing with their square)."""

    def __init__(self) -> None:
        self._spans: list[tuple[int, int]] = []
        self._longest = 0

    def overlaps(self, spans: list[tuple[int, int]]) -> bool:
        """Does a span of ``spans`` overlap one taken (two empty insertions at the same
        place overlap too)?"""
        taken = self._spans
        for a0, a1 in spans:
            # A span that overlaps starts at most ``_longest`` before ``a0``, and not after ``a1``.
            low = bisect.bisect_left(taken, (a0 - self._longest, a0 - self._longest))
            high = bisect.bisect_right(taken, (a1, a1 + self._longest))
            if any(a0 < b1 and b0 < a1 or (a0 == a1 == b0 == b1) for b0, b1 in taken[low:high]):
                return True
        return False

    def add(self, spans: list[tuple[int, int]]) -> None:
        for span in spans:
            bisect.insort(self._spans, span)
            self._longest = max(self._longest, span[1] - span[0])


def _fixes_interact(ctx: FileContext, reports: list[tuple[Rule, Report]]) -> bool:
    """Could ``apply`` fix other findings than those that have a fix in this analysis (safe
    or unsafe)? It can when the edits of two fixes overlap (one waits for a later pass, and
    may not be made at all), when a fix edits code inside another finding (which may have
    a fix once that is made: ``if a.item() > 0:`` around a fixed ``if b.item() > 0:``), and
    when a fix can turn a Python value into a tensor (``Rule.fix_makes_tensors``). Otherwise
    each pass of ``apply`` makes the fixes of this one and the next finds nothing to fix."""
    taken = _Taken()
    edits: list[tuple[int, int, int]] = []  # start, end, number of the report
    for number, (rule, report) in enumerate(reports):
        if report.fix is None:
            continue
        if rule.fix_makes_tensors:
            return True
        spans = _span(ctx, report.fix)
        if taken.overlaps(spans):
            return True
        taken.add(spans)
        edits.extend((start, end, number) for start, end in spans)
    if not edits:
        return False
    # The edits do not overlap: in the order of their starts, their ends are in order too.
    edits.sort()
    ends = [end for _, end, _ in edits]
    for number, (_, report) in enumerate(reports):
        start, end = ctx.positions.span(report.node)
        for edit_start, edit_end, owner in edits[bisect.bisect_right(ends, start):]:
            if edit_start >= end:
                break
            if owner != number and (edit_start < edit_end or start < edit_start):
                return True
    return False


def _edit(ctx: FileContext, node: ast.AST, replacement: gen.Replacement) -> tuple[int, int, str]:
    """The text edit (start, end, new text) that puts ``replacement`` in place of ``node``."""
    source = ctx.source
    if not isinstance(node, ast.stmt):
        start, end = ctx.span(node)
        statement = ctx.enclosing_statement(node)
        indent = ctx.indent(statement) if statement is not None else ""
        return start, end, gen.show(ctx, replacement, indent)  # type: ignore[arg-type]
    start, end = ctx.positions.span(node)
    indent = ctx.indent(node)
    if replacement is gen.REMOVE:
        line_start = source.rfind("\n", 0, start) + 1
        rest = source[end:]
        after = len(rest) - len(rest.lstrip(" \t"))
        if source[line_start:start].strip() == "" and (end + after == len(source) or source[end + after] in "\r\n#"):
            newline = source.find("\n", end)
            return line_start, len(source) if newline < 0 else newline + 1, ""
        if source[end + after:end + after + 1] == ";":  # ``a; b``: ``a`` and its semicolon
            following = end + after + 1
            following += len(source[following:]) - len(source[following:].lstrip(" \t"))
            return start, following, ""
        before = source[:start].rstrip(" \t")
        return len(before) - 1 if before.endswith(";") else start, end, ""
    if isinstance(node, COMPOUND):
        # A statement with a body ends with its last line, whose comment goes with it.
        newline = source.find("\n", end)
        last = source[end:len(source) if newline < 0 else newline]
        if last.strip().startswith("#") or not last.strip():
            end += len(last.rstrip("\r"))
        end = _block_footer_end(source, end, len(indent))
    if isinstance(replacement, gen.Statements):
        text = gen.render_statements(ctx, replacement.statements, indent)
    elif isinstance(replacement, gen.Statement):
        text = replacement.render(ctx, indent)
    else:
        text = gen.show(ctx, replacement, indent)  # type: ignore[arg-type]
    return start, end, text


def _block_footer_end(source: str, end: int, column: int) -> int:
    """Past the comment lines after a block that are indented deeper than its statement (at
    ``column``): they belong to the block (libcst's footer), and go with it."""
    at = end
    while True:
        newline = source.find("\n", at)
        if newline < 0:
            return end
        following = source.find("\n", newline + 1)
        line = source[newline + 1:len(source) if following < 0 else following]
        stripped = line.lstrip(" \t")
        if not stripped.strip():
            at = newline + 1 + len(line)  # a blank line: the block's only if a comment of it follows
            if following < 0:
                return end
            continue
        if stripped.startswith("#") and len(line) - len(stripped) > column:
            end = at = newline + 1 + len(line.rstrip("\r"))
            continue
        return end


def _outermost(edits: list[tuple[int, int, str]]) -> list[tuple[int, int, str]]:
    """The edits of one fix that no other of its edits contains: a node replaced as a whole
    takes what was inside it with it (its replacement says what it keeps)."""
    return [e for e in edits if not any(o is not e and o[0] <= e[0] and e[1] <= o[1] and (o[0], o[1]) != (e[0], e[1])
                                        for o in edits)]


def _apply_edits(source: str, edits: list[tuple[int, int, str]]) -> str:
    if "\r\n" in source:  # new lines end as the file's lines do
        edits = [(start, end, _BARE_NEWLINE.sub("\r\n", text)) for start, end, text in edits]
    pieces = []
    at = 0
    for start, end, text in sorted(edits, key=lambda e: (e[0], e[1])):
        pieces.append(source[at:start])
        pieces.append(text)
        at = end
    pieces.append(source[at:])
    return "".join(pieces)


class Analyses:
    """The analyses of one file's texts, kept for further :func:`process` calls on
    the same file with the same rules and options.

    An analysis depends only on the text: ``scan`` analyses a file, then
    rewrites it in memory with safe fixes and with unsafe ones, and all three
    start from the same text (and the two rewrites often reach the same
    second text), so each text is parsed and analysed once.
    """

    def __init__(self) -> None:
        self._kept: dict[str, tuple[FileContext, list[tuple[Rule, Report]]]] = {}
        self.external: External | None = None  # what the file asked of its project, for all its analyses
        self.external_made = False

    def get(self, text: str) -> tuple[FileContext, list[tuple[Rule, Report]]] | None:
        found = self._kept.get(text)
        if found is not None:
            found[0].activate()
        return found

    def put(self, text: str, ctx: FileContext, reports: list[tuple[Rule, Report]]) -> None:
        self._kept[text] = (ctx, reports)


def _analysis(
    outcome: FileResult, current: str, text: str, rules: Sequence[Rule], flush_every: int | None,
    analyses: Analyses | None, tree: ast.Module | None = None, external: External | None = None,
    traced_roots: tuple[str, ...] = (), line_length: int = DEFAULT_LINE_LENGTH,
) -> tuple[FileContext, list[tuple[Rule, Report]]] | None:
    """The analysis of ``current`` (the file's ``text`` or a rewrite of it), or None with
    ``outcome.error`` set (and the rewrite dropped) when it cannot be analysed."""
    kept = analyses.get(current) if analyses is not None else None
    if kept is not None:
        return kept
    path = outcome.path
    try:
        ctx = FileContext.build(path, current, flush_every, tree, external, traced_roots)
        ctx.line_length = line_length
    except (SyntaxError, ValueError) as exc:
        if current is text:
            outcome.error = (_syntax_error(path, exc) if isinstance(exc, SyntaxError)
                             else f"{path}:1:1: syntax error: {exc}")
        else:  # our own rewrite broke the file: keep the original
            outcome.error = f"{path}: internal error: the rewrite would not parse; file left unchanged"
            outcome.new_text = None
        return None
    except (RecursionError, MemoryError):
        outcome.error = f"{path}: too deeply nested to analyse; file left unchanged"
        outcome.new_text = None
        return None
    try:
        reports = _analyse(ctx, rules)
    except Exception as exc:  # noqa: BLE001 - one file's problem must not stop the run
        outcome.error = (
            f"{path}: internal error in fixitem ({type(exc).__name__}: {exc}); "
            "file left unchanged, please report this"
        )
        outcome.new_text = None
        outcome.applied = []
        return None
    if analyses is not None:
        analyses.put(current, ctx, reports)
    return ctx, reports


def new_run() -> None:
    """A run starts: what was read of the project's files before may have changed."""
    project.forget()


def release() -> None:
    """Let go of what the last file's analysis left in this process (call when a file is
    done): its tree is then freed at once, not by a later pass of the cyclic collector."""
    tree.forget()


def process(
    path: Path,
    text: str,
    rules: Sequence[Rule],
    *,
    fix: bool = False,
    unsafe: bool = False,
    flush_every: int | None = None,
    analyses: Analyses | None = None,
    traced_roots: tuple[str, ...] = (),
    follow_calls: bool = True,
    line_length: int = DEFAULT_LINE_LENGTH,
) -> FileResult:
    """``analyses``: reuse (and keep) the analyses of earlier calls for this file with
    the same ``rules``, ``flush_every``, ``traced_roots`` and ``line_length``. ``line_length``:
    the project's, that rewritten lines fit (see :mod:`.line_length`). ``traced_roots``: functions
    of the file (``"f"``, ``"Class.method"``) that traced code of other modules calls.
    ``follow_calls``: find the functions of other modules that the file's traced code
    calls (``traced_elsewhere``); False leaves it None (a run of one file, where no
    other file of the run could be analysed again for them)."""
    with shortcuts.collection_paused():
        return _process(path, text, rules, fix=fix, unsafe=unsafe, flush_every=flush_every, analyses=analyses,
                        traced_roots=traced_roots, follow_calls=follow_calls, line_length=line_length)


def _external(path: Path, analyses: Analyses | None) -> External | None:
    """What the file may ask of its project (shared by every analysis kept for it)."""
    if analyses is not None and analyses.external_made:
        return analyses.external
    current = project.current()
    current.fresh()
    found = current.for_file(path)
    if analyses is not None:
        analyses.external, analyses.external_made = found, True
    return found


def _calls_elsewhere(ctx: FileContext) -> list[tuple[str, str]]:
    try:
        return project.calls_elsewhere(ctx)
    except (RecursionError, OSError):
        return []


def _process(
    path: Path,
    text: str,
    rules: Sequence[Rule],
    *,
    fix: bool,
    unsafe: bool,
    flush_every: int | None,
    analyses: Analyses | None,
    traced_roots: tuple[str, ...] = (),
    follow_calls: bool = True,
    line_length: int = DEFAULT_LINE_LENGTH,
) -> FileResult:
    outcome = FileResult(path)
    if not worth_parsing(text):
        return outcome
    external = _external(path, analyses)
    current = text
    # The parse of ``current``: of the text, when a file analysed before asked what this one
    # defines (its summary's parse is kept a while); of a rewrite, once one was made.
    tree = project.current().parsed(path, text) if external is not None else None
    first = True
    for _ in range(MAX_PASSES):
        analysed = _analysis(outcome, current, text, rules, flush_every, analyses, tree, external, traced_roots,
                             line_length)
        if external is not None:
            outcome.depends = dict(external.consulted)
        if analysed is None:  # ``outcome.error`` says why
            return outcome
        ctx, reports = analysed
        if first:  # the functions of other modules the file's own traced code calls
            outcome.traced_elsewhere = _calls_elsewhere(ctx) if follow_calls else None
            outcome.traced_here = traced_root_names(ctx.module, ctx.parents, ctx.traced)
            if external is not None and follow_calls:  # a module other files of the run may ask about
                project.current().remember(path, ctx.module, text, ctx.tree_index.text if ctx.tree_index else None)
            if external is not None:  # the modules the calls were followed into count too
                outcome.depends = dict(external.consulted)
            first = False
        chosen: list[tuple[Rule, Report]] = []
        taken = _Taken()
        if fix:
            if not outcome.offered_unsafe:
                outcome.offered_unsafe = any(r.fix is not None and r.fix.safety is Safety.UNSAFE for _, r in reports)
            for rule, report in reports:
                f = report.fix
                if f is None or (f.safety is Safety.UNSAFE and not unsafe):
                    continue
                span = _span(ctx, f)
                if taken.overlaps(span):
                    continue
                taken.add(span)
                chosen.append((rule, report))
        if not chosen:
            outcome.findings = [_finding(ctx, rule, report, path) for rule, report in reports]
            if not fix:
                outcome.fixes_interact = _fixes_interact(ctx, reports)
            break
        edits: list[tuple[int, int, str]] = []
        imports: list[str] = []
        made = []
        for rule, report in chosen:
            assert report.fix is not None
            edits.extend(_outermost([_edit(ctx, node, r) for node, r in report.fix.replacements.items()]))
            imports.extend(i for i in report.fix.imports if i not in imports)
            made.append(_finding(ctx, rule, report, path, applied=True))
        # A fix of a later pass is said where its code stands in the file as it is (the lines
        # the earlier fixes added or removed do not count), as what is left is.
        outcome.applied.extend(made if current is text else in_original(made, text, current))
        try:
            torch_bound = ctx.provenance.imports.torch_alias() is not None
            insertion = import_insertion(current, ctx.module, imports, torch_bound) if imports else None
            if insertion is not None and not any(start < insertion[0] < end for start, end, _ in edits):
                edits.append((insertion[0], insertion[0], insertion[1]))
                insertion = None
            new_text = _apply_edits(current, edits)
            if insertion is not None:  # an edit took the place the imports go: place them anew
                new_text = add_imports(new_text, parse_module(new_text), imports, torch_bound)
            parsed = parse_module(new_text)
        except (SyntaxError, ValueError):
            outcome.error = f"{path}: internal error: the rewrite would not parse; file left unchanged"
            outcome.new_text = None
            outcome.applied = []
            return outcome
        current = new_text
        tree = parsed
        outcome.new_text = current if current != text else None
    return outcome
