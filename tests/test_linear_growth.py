"""The work of scanning and rewriting one file grows in proportion to the file.

Work is counted, not timed, so that the speed of the machine cannot matter: the
function calls (Python and built-in) that ``scan`` and ``apply`` make, as cProfile
counts them, on a file of N copies of fixtures/growth/unit.py and on one of 4N copies.
Linear work gives 4x; a lookup that walks the whole file for each site (each test
looking through every site of the file, each read walking back over every statement
before it) gives far more, growing with N.

``apply``'s diff is left out of the count: it is difflib's own matching, which the
diffs printed must keep, and it grows with the lines that repeat in the file.
"""

from __future__ import annotations

import cProfile
import pstats
from pathlib import Path

import pytest

from fixitem import api

ROOT = Path(__file__).resolve().parent.parent
UNIT = ROOT / "fixtures" / "growth" / "unit.py"
SMALL = 5  # copies; the large file has 4 times as many
LIMIT = 4.5  # linear is 4.0 (a little less: some work is done once per file)
LEFT_OUT = ("difflib.py",)


def calls(run) -> int:
    """The calls ``run()`` makes, but those made by or inside difflib."""
    profile = cProfile.Profile()
    profile.enable()
    try:
        run()
    finally:
        profile.disable()
    total = 0
    for function, (_, _, _, _, callers) in pstats.Stats(profile).stats.items():
        if function[0].endswith(LEFT_OUT):
            continue
        for caller, counts in callers.items():
            if not caller[0].endswith(LEFT_OUT):
                total += counts[0] if isinstance(counts, tuple) else counts
    return total


def work(tmp_path: Path, copies: int, command: str) -> int:
    path = tmp_path / f"unit_x{copies}.py"
    path.write_text(UNIT.read_text() * copies)
    options = {"isolated": True, "jobs": 1, "cache": False}
    if command == "scan":
        return calls(lambda: api.scan([path], **options))
    return calls(lambda: api.apply([path], write=False, unsafe=True, **options))


@pytest.fixture(scope="module", autouse=True)
def warm():
    """Imports and one-time set-up are not part of the work on a file."""
    api.scan([UNIT], isolated=True, jobs=1, cache=False)


@pytest.mark.parametrize("command", ["scan", "apply"])
def test_work_grows_linearly_with_one_files_size(tmp_path, command):
    small = work(tmp_path, SMALL, command)
    large = work(tmp_path, 4 * SMALL, command)
    assert small > 100_000  # the unit exercises the analysis, not only the start-up
    assert large / small <= LIMIT, f"{command}: {small} calls on {SMALL} copies, {large} on {4 * SMALL}"


def test_the_unit_exercises_the_lookups_per_site():
    """What the unit holds: findings of several rules, and fixes for apply to make."""
    result = api.scan([UNIT], isolated=True, jobs=1, cache=False)
    rules = {f.rule for f in result.files[0].findings}
    assert {"FX101", "FX201", "FX202", "FX303", "FX007"} <= rules
    assert sum(f.fix == "safe" for f in result.files[0].findings) >= 5


# -- the indexes answer what the walks they replace answered ------------------------------------

FIXTURE_FILES = sorted(p for p in (ROOT / "fixtures").rglob("*.py") if "bad" not in p.parts)


def contexts():
    from fixitem.codemods.model.context import FileContext

    for path in FIXTURE_FILES:
        yield FileContext.build(path, path.read_text())


def test_sites_below_a_node_are_those_whose_walk_up_meets_it():
    import ast

    from fixitem.codemods.model.syncs import find_sync_sites

    checked = 0
    for ctx in contexts():
        sites = find_sync_sites(ctx)
        for root in ctx.nodes(ast.If, ast.Call, ast.Expr, ast.FunctionDef, ast.Compare, ast.Module):
            walked = [s for s in sites if s.node is root or any(p is root for p in ctx.ancestors(s.node))]
            assert ctx.sites_below(sites, root) == walked
            checked += bool(walked)
        reordered = sites[::-1]  # the order of the list given is kept
        assert ctx.sites_below(reordered, ctx.module) == reordered
    assert checked > 100


def test_names_within_a_node_are_those_of_its_walk():
    import ast

    from fixitem.codemods.model.tree import walk

    checked = 0
    for ctx in contexts():
        spellings = {n.id for n in ctx.nodes(ast.Name)}
        for root in [ctx.module, *ctx.nodes(ast.FunctionDef, ast.ClassDef, ast.For)]:
            for value in spellings:
                walked = [n for n in walk(root) if isinstance(n, ast.Name) and n.id == value]
                assert ctx.names(value, root) == walked
                checked += bool(walked)
            assert all(ctx.below(n, root) for n in walk(root))
        for value in spellings:
            assert ctx.names(value) == [n for n in ctx.nodes(ast.Name) if n.id == value]
    assert checked > 1000


def test_the_binding_before_a_read_is_the_one_a_walk_back_finds():
    import ast

    from fixitem.codemods.model.reaching import _BODIES, Bindings

    checked = 0
    for ctx in contexts():
        bindings = Bindings(ctx.module)
        for read in ctx.nodes(ast.Name):
            child, node = read, ctx.parents.get(read)
            while node is not None:
                if isinstance(node, _BODIES) and isinstance(child, ast.stmt):
                    block = getattr(node, ctx.field_of(child))
                    index = next(i for i, item in enumerate(block) if item is child)
                    walked = next((e for e in reversed(block[:index]) if bindings.binds(e, read.id)), None)
                    assert bindings.last_binding_before(node, child, read.id) == (walked,)
                    checked += walked is not None
                child, node = node, ctx.parents.get(node)
            assert bindings.last_binding_before(ctx.module, read, read.id) is None  # not a statement there
    assert checked > 100


def test_findings_moved_to_the_original_text_land_where_a_scan_of_the_blocks_puts_them():
    import random

    from fixitem.codemods.driver.engine import Finding, in_original
    from fixitem.codemods.driver.line_blocks import line_blocks

    def scanned(finding, before, after):  # every block in order, the first that holds the row
        blocks = line_blocks(before.splitlines(), after.splitlines())
        row = finding.line - 1
        for _, i1, i2, j1, j2 in blocks:
            if j1 <= row < j2 or (j1 == j2 == row):
                return i1 + min(row - j1, max(i2 - i1 - 1, 0)) + 1
        return finding.line

    rng = random.Random(0)
    for _ in range(300):
        before = "".join(rng.choice("abc") + "\n" for _ in range(rng.randrange(0, 12)))
        lines = before.splitlines()
        for _ in range(rng.randrange(1, 4)):  # a few edits: lines replaced, dropped, added
            at = rng.randrange(0, len(lines) + 1)
            lines[at:at + rng.randrange(0, 3)] = [rng.choice("abxy") for _ in range(rng.randrange(0, 3))]
        after = "".join(line + "\n" for line in lines)
        findings = [Finding("f.py", line, 1, "FX101", "n", "m", "none", ()) for line in range(len(lines) + 3)]
        moved = in_original(findings, before, after)
        assert [f.line for f in moved] == [scanned(f, before, after) for f in findings]


def _check_tiling(blocks, a, b):
    """``blocks`` tile both line lists in order, and an equal block holds equal lines."""
    i = j = 0
    for tag, i1, i2, j1, j2 in blocks:
        assert (i1, j1) == (i, j) and i1 <= i2 and j1 <= j2 and (i1 < i2 or j1 < j2)
        if tag == "equal":
            assert a[i1:i2] == b[j1:j2]
        else:
            assert tag == ("replace" if i1 < i2 and j1 < j2 else "delete" if i1 < i2 else "insert")
        i, j = i2, j2
    assert (i, j) == (len(a), len(b))


def test_line_blocks_tile_both_texts_and_keep_every_line_a_rewrite_leaves():
    import random

    from fixitem.codemods.driver.line_blocks import line_blocks

    rng = random.Random(1)
    for _ in range(500):
        # Lines that repeat (blank lines, ``return x``) among lines of their own (``def f3``).
        a = [rng.choice(["", "return x", "pass"]) if rng.random() < 0.4 else f"line {k}"
             for k in range(rng.randrange(0, 40))]
        b = list(a)
        for _ in range(rng.randrange(0, 4)):  # a few rewrites: lines replaced, dropped, added
            at = rng.randrange(0, len(b) + 1)
            gone = rng.randrange(0, 3)
            b[at:at + gone] = [f"new {rng.random()}" for _ in range(rng.randrange(0, 3))]
        blocks = line_blocks(a, b)
        _check_tiling(blocks, a, b)
        unique_kept = [line for line in a if line.startswith("line ") and line in b]
        matched = {line for tag, i1, i2, _, _ in blocks if tag == "equal" for line in a[i1:i2]}
        assert set(unique_kept) <= matched  # every own line the rewrite left is found again


def _matched_sizes(monkeypatch) -> list[int]:
    """The sizes (lines of both sides) of the sequences difflib's matcher is given from now on."""
    import difflib

    seen: list[int] = []
    matcher = difflib.SequenceMatcher

    def recording(junk, a, b, autojunk=True):
        seen.append(len(a) + len(b))
        return matcher(junk, a, b, autojunk=autojunk)

    monkeypatch.setattr(difflib, "SequenceMatcher", recording)
    return seen


def test_findings_of_a_big_file_of_alike_functions_are_moved_back_in_linear_time(monkeypatch):
    # 1,000 alike functions, each rewritten: difflib alone matched the two texts in time that
    # grows with the square of the file (82 s at 5,000 lines); here it only ever sees a few
    # lines at a time, and each line lands on its own function's line.
    from fixitem.codemods.driver.engine import Finding, in_original

    seen = _matched_sizes(monkeypatch)
    before = "import torch\n\n" + "".join(
        f"def f{i}(x, y):\n    if y.sum().item() > 0:\n        y = y * 2\n    return x + y\n\n" for i in range(1000))
    after = "import torch\n\n" + "".join(
        f"def f{i}(x, y):\n    y = torch.where(y.sum() > 0, y * 2, y)\n    return x + y\n\n" for i in range(1000))
    findings = [Finding("f.py", 3 + 4 * i + row, 1, "FX101", "n", "m", "none", ()) for i in range(1000) for row in range(3)]
    moved = [f.line for f in in_original(findings, before, after)]
    # ``def`` to ``def``, the new line to the ``if`` it replaced, ``return`` to ``return``
    assert moved == [3 + 5 * i + row for i in range(1000) for row in (0, 1, 3)]
    assert max(seen, default=0) <= 10


def test_taken_spans_answer_as_comparing_with_every_one():
    import random

    from fixitem.codemods.driver.engine import _Taken

    def brute(spans, taken):
        return any(a0 < b1 and b0 < a1 or (a0 == a1 == b0 == b1) for a0, a1 in spans for b0, b1 in taken)

    rng = random.Random(2)
    for _ in range(300):
        taken, chosen = _Taken(), []
        for _ in range(rng.randrange(1, 30)):
            spans = []
            for _ in range(rng.randrange(1, 3)):  # a fix edits one place or a few
                start = rng.randrange(0, 200)
                spans.append((start, start + rng.choice([0, 0, 1, 3, 10, 60])))
            assert taken.overlaps(spans) == brute(spans, chosen)
            if not brute(spans, chosen):
                taken.add(spans)
                chosen.extend(spans)


def test_unified_diff_is_difflibs_on_a_rewrite_and_linear_on_alike_lines(monkeypatch):
    import difflib

    from fixitem.codemods.driver.line_blocks import unified_diff

    a = [f"line {i}\n" if i % 3 else "\n" for i in range(60)]
    b = list(a)
    b[10:12] = ["new\n"]
    b[40:40] = ["added\n", "\n"]
    del b[55]
    assert unified_diff(a, b, "a/f.py", "b/f.py") == list(difflib.unified_diff(a, b, "a/f.py", "b/f.py"))
    assert unified_diff(a, a, "a/f.py", "b/f.py") == [] == list(difflib.unified_diff(a, a, "a", "b"))
    assert unified_diff([], ["x\n"], "a", "b") == list(difflib.unified_diff([], ["x\n"], "a", "b"))
    # Many alike functions, each rewritten: difflib's matcher is given only short stretches.
    seen = _matched_sizes(monkeypatch)
    before = [line for i in range(2000) for line in (f"def f{i}(x):\n", "    if x.item():\n", "        x = x * 2\n",
                                                     "    return x\n", "\n")]
    after = [line for i in range(2000) for line in (f"def f{i}(x):\n", "    x = torch.where(x, x * 2, x)\n",
                                                    "    return x\n", "\n")]
    diff = unified_diff(before, after, "a/f.py", "b/f.py")
    assert diff.count("+    x = torch.where(x, x * 2, x)\n") == 2000
    assert max(seen) <= 10


def _long_function(ifs: int) -> str:
    body = "".join(f"    y{i} = x.sum()\n    if y{i}.item() > {i}:\n        x = x * 2\n" for i in range(ifs))
    return "import torch\n\n\ndef train(model, x: torch.Tensor):\n" + body


@pytest.mark.parametrize("fix", [False, True])
def test_work_on_one_long_function_grows_linearly_with_its_length(fix):
    # ``x`` is rebound in every ``if`` of one long function. Each fix asked where ``x`` takes a
    # gradient from, whether it may still be ``None``, whether it is certainly a tensor and
    # why not, each by following all of its bindings again: 4 times the function made 11.8
    # times the calls (a 4,800-line function took 120 s). Each is now answered once per name.
    from fixitem.codemods.driver import engine

    rules = api.rules_for(api._codes(None, None))
    engine.process(Path("long.py"), _long_function(5), rules)  # one-time set-up
    found = engine.process(Path("long.py"), _long_function(100), rules).findings
    assert [f.fix for f in found].count("safe") >= 50  # the ifs are fixed, not only reported
    small, large = (calls(lambda: engine.process(Path("long.py"), _long_function(ifs), rules, fix=fix, unsafe=True))
                    for ifs in (100, 400))
    assert large / small <= LIMIT, f"{small} calls for 100 ifs, {large} for 400"
