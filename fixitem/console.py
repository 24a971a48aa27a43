"""The rich console fixitem's commands print through (the CLI's and ``verify``'s).

rich is imported only when a console is made: a scan of one file that has nothing to
note, as a pre-commit hook runs it, starts without it. Emoji codes are off: in
``file.py:100:9`` rich would read ``:100:`` as one and print 💯.
"""

from __future__ import annotations

from typing import Any


def console(**options: Any) -> Any:
    """A ``rich.console.Console`` with ``options``, without emoji codes."""
    from rich.console import Console

    return Console(emoji=False, **options)
