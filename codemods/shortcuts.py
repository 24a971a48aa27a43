"""Work that fixitem skips because it provably changes nothing, and the switch that
turns the skipping off, so that tests can check that it changes nothing.

Each shortcut gives the findings and rewrites that the longer way gives:

- a file's analyses are kept for the in-memory rewrites that ``scan`` makes
  (an analysis depends only on the text: :class:`codemods.engine.Analyses`);
- provenance's fixed-point iteration skips names whose inputs did not change;
- Python's cyclic garbage collector is paused while a file is processed
  (:func:`collection_paused`).

``ENABLED`` is true unless ``FIXITEM_NO_SHORTCUTS=1`` is set in the environment
(worker processes inherit it); :func:`disabled` turns the shortcuts off for a block.
"""

from __future__ import annotations

import gc
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


@contextmanager
def collection_paused() -> Iterator[None]:
    """No cyclic garbage collection inside the block (the collector's state is put back after).

    Processing a file allocates millions of objects and almost no reference
    cycles (about 500 cyclic objects over 80 transformers files), so the
    collector's repeated passes over the live syntax trees find nothing and
    cost about a fifth of the time. Between files it runs as usual. Nested
    uses, and a collector the caller already paused, are left as they are.
    """
    if not ENABLED or not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
