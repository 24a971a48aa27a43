"""Inline suppression comments.

``# fixitem: ignore`` on a line silences every finding that starts on that
line; ``# fixitem: ignore[FX101, FX001]`` silences only the named rules.
"""

from __future__ import annotations

import re

_PATTERN = re.compile(r"#\s*fixitem:\s*ignore(?:\[(?P<codes>[A-Za-z0-9_,\s]*)\])?")


class Suppressions:
    def __init__(self, source: str) -> None:
        # line -> None (all rules) or the set of rule codes
        self.lines: dict[int, set[str] | None] = {}
        if "fixitem:" not in source:
            return
        for number, line in enumerate(source.splitlines(), start=1):
            if "#" not in line:
                continue
            match = _PATTERN.search(line)
            if match is None:
                continue
            codes = match.group("codes")
            if codes is None:
                self.lines[number] = None
            else:
                self.lines[number] = {c.strip().upper() for c in codes.split(",") if c.strip()}

    def suppressed(self, line: int, code: str) -> bool:
        if line not in self.lines:
            return False
        codes = self.lines[line]
        return codes is None or code in codes
