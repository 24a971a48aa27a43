"""What legitimately differs between two runs of one program, masked before their text is compared.

``fixitem verify --run``, ``fixitem apply --verify-run`` and the real-scripts
bench compare what two runs printed after these masks: clock times and dates,
elapsed times, durations and rates (also a bare number labelled as a time, such
as ``Iteration dur (s): 5.2e-05`` or ``'time_per_epoch': [2.8, 3.1]``), memory
addresses, trailing spaces, and the line numbers that warnings and tracebacks
show (a rewritten file has an added import line). The numbers a program
computes are left as they are. ``verify --run --no-default-masks`` turns
them off.

Order matters: dates before clock times before durations.
"""

from __future__ import annotations

from typing import NamedTuple

NUMBER = r"\d+(?:\.\d+)?(?:[eE][-+]?\d+)?"
_TIME_UNIT = r"(?:ms|us|µs|ns|s|sec|secs|seconds|min|mins|minutes)"
_RATE_UNIT = r"(?:it/s|s/it|samples/s|tokens/s|tok/s|img/s|steps/s)"
# A word that says its number is a time: ``time``, ``step_time``, ``Elapsed``, ``dur``, ``duration``, ``latency``.
_TIME_LABEL = r"(?:\w*(?:time|elapsed)\w*|\bdur(?:ation)?s?\b|\blatenc(?:y|ies)\b)"


class Mask(NamedTuple):
    name: str
    pattern: str
    #: What a match becomes (``re.sub`` syntax); None: ``<name>``.
    replacement: str | None = None

    @property
    def substitute(self) -> str:
        return f"<{self.name}>" if self.replacement is None else self.replacement


DEFAULT_MASKS: tuple[Mask, ...] = (
    Mask("timestamp", r"\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?"),
    Mask("date", r"\b\d\d/\d\d/\d{4}\b"),  # logging's %x dates
    Mask("elapsed", r"\[\d+:\d\d(?::\d\d)?<[\d:?]+"),  # tqdm's [00:01<00:02
    Mask("clock", r"\b\d+:\d\d(?::\d\d)?(?:[.,]\d+)?\b"),  # H:MM:SS, tqdm's elapsed alone
    # Progress rates; tqdm pads a rate to the width of the previous one.
    Mask("rate", rf"[ \t]+(?:{NUMBER}|\?)\s?{_RATE_UNIT}", " <rate>"),
    Mask("rate", rf"(?:\b{NUMBER}|\?)\s?{_RATE_UNIT}"),
    Mask("duration", rf"\b{NUMBER}\s?{_TIME_UNIT}\b(?:/step|/it|/batch)?"),
    # A number labelled as a time: "Elapsed Time: 1.2", "Iteration dur (s): 5.2e-05", "'time_per_epoch': [2.8, 3.1]".
    Mask("duration",
         rf"(?i)({_TIME_LABEL}(?:[ \t]+[a-z_/]+){{0,3}}?(?:[ \t]*[(\[]{_TIME_UNIT}[)\]])?['\"]?[ \t]*[:=][ \t]*)"
         rf"(\[[\d.,eE+\- \t]*\]|{NUMBER})",
         r"\1<duration>"),
    Mask("address", r"\b0x[0-9a-fA-F]{4,}\b"),  # object reprs
    Mask("trailing-space", r"[ \t]+(?=\r|\n|$)", ""),  # a progress bar pads to the previous line's width
    # Line numbers in warnings and tracebacks: a rewrite adds lines (the import, a call over more lines).
    Mask("line", r"(\.py):\d+:", r"\1:<line>:"),
    Mask("line", r'(File "[^"]*", line )\d+', r"\1<line>"),
)

#: The names of the default masks, for help texts.
MASK_HELP = ", ".join(dict.fromkeys(mask.name for mask in DEFAULT_MASKS))
