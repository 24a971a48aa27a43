"""The one error fixitem raises for bad input (imports nothing heavy: the CLI loads it at start-up)."""

from __future__ import annotations


class UsageError(Exception):
    """A problem with what the user asked for or gave us (exit status 2): a missing path, an unknown
    rule code, bad configuration, a missing factory, an import error in the user's module."""

    def __init__(self, message: str, details: str = "") -> None:
        super().__init__(message)
        self.message = message
        #: Extra text shown below the message, e.g. the user's traceback.
        self.details = details

    def __str__(self) -> str:
        return self.message if not self.details else f"{self.message}\n{self.details}"
