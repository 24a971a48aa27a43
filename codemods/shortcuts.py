"""Work that fixitem skips because it provably changes nothing, and the switch that
turns the skipping off, so that tests can check that it changes nothing.

Each shortcut gives the findings and rewrites that the longer way gives:

- a file's analyses are kept for the in-memory rewrites that ``scan`` makes
  (an analysis depends only on the text: :class:`codemods.engine.Analyses`);
- the rewrite transform visits only the way to the replaced nodes;
- parsing does not validate each node the parser builds;
- code generation uses plain context managers instead of generator-based ones;
- provenance's fixed-point iteration skips names whose inputs did not change;
- adding imports reuses the imports the analysis found.

``ENABLED`` is true unless ``FIXITEM_NO_SHORTCUTS=1`` is set in the environment
(worker processes inherit it); :func:`disabled` turns the shortcuts off for a block.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

ENABLED = os.environ.get("FIXITEM_NO_SHORTCUTS") != "1"


@contextmanager
def disabled() -> Iterator[None]:
    """Run the block the long way (in this process: use ``jobs=1``)."""
    global ENABLED
    before = ENABLED
    ENABLED = False
    try:
        yield
    finally:
        ENABLED = before
