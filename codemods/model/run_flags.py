"""Facts about the run being analysed that one file's text cannot show: another file of
the run sets them (the default device, a tee of ``sys.stdout``). The driver works
them out from all the run's files and sets each around every file's analysis."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager


class RunFlag:
    """One such fact: False until the driver says otherwise for the file analysed."""

    def __init__(self) -> None:
        self.value = False

    @contextmanager
    def set(self, value: bool) -> Iterator[None]:
        """Analyse the files of the block with the fact ``value`` (put back after)."""
        before, self.value = self.value, value
        try:
            yield
        finally:
            self.value = before
