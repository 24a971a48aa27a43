"""Which lines of a rewritten text stand where in the text it was made from.

:func:`line_blocks` gives opcodes as difflib's ``SequenceMatcher.get_opcodes()``
does (blocks that tile both line lists in order), found as patience diff finds
them: the lines the two texts share at their start and end are equal; in
between, the lines each text holds exactly once, in an order both agree on, are
anchors; the stretches between anchors are matched the same way in turn, and
difflib matches a stretch only once no anchor is left in it.

``SequenceMatcher`` alone (without its "popular line" heuristic, which would
misalign blank lines) takes time that grows with the square of the file where
many lines are alike: 82 s for a 5,000-line file of 1,000 alike functions, all
rewritten. A rewrite changes a few lines here and there and keeps the rest,
which hold anchors (a ``def`` line, a call with its own names), so the stretches
left to difflib are a few lines long. A long stretch with no anchor at all (more
than :data:`MAX_DIFFLIB_LINES` lines, every one of them repeated) is taken as
replaced as a whole: its lines then map by their place in it.
"""

from __future__ import annotations

import bisect
import difflib
from collections import Counter
from collections.abc import Sequence

Opcode = tuple[str, int, int, int, int]

# The longest stretch (lines of both texts together) left to difflib when no line of it
# is an anchor.
MAX_DIFFLIB_LINES = 2000


def line_blocks(a: Sequence[str], b: Sequence[str]) -> list[Opcode]:
    """Opcodes (tag, i1, i2, j1, j2) that turn lines ``a`` into lines ``b``, tiling both."""
    blocks: list[Opcode] = []
    # Stretches still to match, in reverse order of the text (the next one last); a tuple
    # of 5 is a block found already.
    todo: list[tuple] = [(0, len(a), 0, len(b))]
    while todo:
        item = todo.pop()
        if len(item) == 5:
            _add(blocks, item)
            continue
        alo, ahi, blo, bhi = item
        start_a, start_b = alo, blo
        while alo < ahi and blo < bhi and a[alo] == b[blo]:
            alo += 1
            blo += 1
        if alo > start_a:
            _add(blocks, ("equal", start_a, alo, start_b, blo))
        end_a, end_b = ahi, bhi
        while ahi > alo and bhi > blo and a[ahi - 1] == b[bhi - 1]:
            ahi -= 1
            bhi -= 1
        if ahi < end_a:
            todo.append(("equal", ahi, end_a, bhi, end_b))
        if alo == ahi and blo == bhi:
            continue
        anchors = _anchors(a, b, alo, ahi, blo, bhi)
        if anchors:
            pieces: list[tuple] = []
            i, j = alo, blo
            for ai, bj in anchors:
                pieces.append((i, ai, j, bj))
                pieces.append(("equal", ai, ai + 1, bj, bj + 1))
                i, j = ai + 1, bj + 1
            pieces.append((i, ahi, j, bhi))
            todo.extend(reversed(pieces))
        elif (ahi - alo) + (bhi - blo) <= MAX_DIFFLIB_LINES:
            matcher = difflib.SequenceMatcher(None, a[alo:ahi], b[blo:bhi], autojunk=False)
            for tag, i1, i2, j1, j2 in matcher.get_opcodes():
                _add(blocks, (tag, alo + i1, alo + i2, blo + j1, blo + j2))
        else:
            _add(blocks, (_tag(ahi - alo, bhi - blo), alo, ahi, blo, bhi))
    return blocks


def _tag(a_lines: int, b_lines: int) -> str:
    return "replace" if a_lines and b_lines else ("delete" if a_lines else "insert")


def _add(blocks: list[Opcode], block: Opcode) -> None:
    """Append ``block``, merged with the last one when both are equal, or both not."""
    tag, i1, i2, j1, j2 = block
    if i1 == i2 and j1 == j2:
        return
    if blocks:
        last = blocks[-1]
        if (last[0] == "equal") == (tag == "equal"):
            merged_tag = "equal" if tag == "equal" else _tag(i2 - last[1], j2 - last[3])
            blocks[-1] = (merged_tag, last[1], i2, last[3], j2)
            return
    blocks.append(block)


def _anchors(a: Sequence[str], b: Sequence[str], alo: int, ahi: int, blo: int, bhi: int) -> list[tuple[int, int]]:
    """Pairs (i, j) of lines ``a[i] == b[j]`` that occur once in each stretch, the longest
    chain of them in the same order in both."""
    in_a = Counter(a[alo:ahi])
    in_b = Counter(b[blo:bhi])
    where_a = {a[i]: i for i in range(alo, ahi) if in_a[a[i]] == 1}
    pairs = [(where_a[line], j) for j in range(blo, bhi)
             if in_b[(line := b[j])] == 1 and line in where_a]
    if not pairs:
        return []
    pairs.sort()
    return _longest_chain(pairs)


def _longest_chain(pairs: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The longest run of ``pairs`` (sorted by their first item, each first item once)
    whose second items increase too (patience sorting)."""
    tails: list[int] = []  # the smallest second item ending a chain of each length
    ends: list[int] = []  # the index in ``pairs`` of that chain's last pair
    before: list[int] = []  # for each pair, the index of the pair before it in its chain
    for index, (_, j) in enumerate(pairs):
        length = bisect.bisect_left(tails, j)
        if length == len(tails):
            tails.append(j)
            ends.append(index)
        else:
            tails[length] = j
            ends[length] = index
        before.append(ends[length - 1] if length else -1)
    chain = []
    index = ends[-1]
    while index >= 0:
        chain.append(pairs[index])
        index = before[index]
    chain.reverse()
    return chain


def unified_diff(a: Sequence[str], b: Sequence[str], fromfile: str, tofile: str, context: int = 3) -> list[str]:
    """The lines of a unified diff from lines ``a`` to lines ``b`` (each with its line
    ending), as ``difflib.unified_diff`` writes them, with the blocks of :func:`line_blocks`:
    its hunks then take time linear in the file, where difflib's matching grows with the
    square of a file of many alike lines (6 s for a 20,000-line file, 22 s for 40,000)."""
    out: list[str] = []
    for hunk in _hunks(line_blocks(a, b), context):
        if not out:
            out += [f"--- {fromfile}\n", f"+++ {tofile}\n"]
        first, last = hunk[0], hunk[-1]
        out.append(f"@@ -{_range(first[1], last[2])} +{_range(first[3], last[4])} @@\n")
        for tag, i1, i2, j1, j2 in hunk:
            if tag == "equal":
                out += [" " + line for line in a[i1:i2]]
                continue
            out += ["-" + line for line in a[i1:i2]]
            out += ["+" + line for line in b[j1:j2]]
    return out


def _hunks(blocks: list[Opcode], context: int) -> list[list[Opcode]]:
    """The blocks as hunks with ``context`` unchanged lines around each change (as
    ``SequenceMatcher.get_grouped_opcodes``)."""
    if all(tag == "equal" for tag, *_ in blocks):
        return []
    codes = list(blocks)
    tag, i1, i2, j1, j2 = codes[0]
    if tag == "equal":
        codes[0] = (tag, max(i1, i2 - context), i2, max(j1, j2 - context), j2)
    tag, i1, i2, j1, j2 = codes[-1]
    if tag == "equal":
        codes[-1] = (tag, i1, min(i2, i1 + context), j1, min(j2, j1 + context))
    hunks: list[list[Opcode]] = []
    hunk: list[Opcode] = []
    for tag, i1, i2, j1, j2 in codes:
        if tag == "equal" and i2 - i1 > 2 * context:  # a long unchanged stretch ends the hunk
            hunk.append((tag, i1, min(i2, i1 + context), j1, min(j2, j1 + context)))
            hunks.append(hunk)
            hunk = []
            i1, j1 = max(i1, i2 - context), max(j1, j2 - context)
        hunk.append((tag, i1, i2, j1, j2))
    if hunk and not (len(hunk) == 1 and hunk[0][0] == "equal"):
        hunks.append(hunk)
    return hunks


def _range(start: int, stop: int) -> str:
    """A hunk's line range as a unified diff writes it (``3``, ``3,4``, ``2,0``)."""
    length = stop - start
    if length == 1:
        return f"{start + 1}"
    return f"{start if not length else start + 1},{length}"
