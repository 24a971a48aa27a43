"""Work that fixitem skips because it provably changes nothing, and the switch that
turns the skipping off, so that tests can check that it changes nothing.

Each shortcut gives the findings and rewrites that the longer way gives:

- a file's analyses are kept for the in-memory rewrites that ``scan`` makes
  (an analysis depends only on the text: :class:`codemods.engine.Analyses`);
- provenance's fixed-point iteration skips names whose inputs did not change;
- Python's cyclic garbage collector is paused while a file is processed, and in
  a run of many files what outlives a file is kept out of its later passes
  (:func:`collection_paused`, :func:`thawed_after`).

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
def collection_paused(freeze_survivors: bool = False) -> Iterator[None]:
    """No cyclic garbage collection inside the block (the collector's state is put back after).

    Processing a file allocates millions of objects and no reference cycles
    (``tests/test_no_cycles.py`` checks it on every fixture), so the collector's
    passes over the live syntax trees find nothing. Between files it runs as
    usual. Nested uses, and a collector the caller already paused, are left as
    they are.

    ``freeze_survivors``: what outlives the block (the modules of the project
    read so far, kept for the next files) is moved out of the collector's sight
    (``gc.freeze``) before it runs again. Its later passes would walk those
    caches again and again and find nothing in them: on transformers that was
    a sixteenth of a cold scan. Freeing still works as usual (by reference
    counts); only a reference cycle among them would never be collected, and
    the block makes none. A run gives them back with :func:`thawed_after`.
    """
    if not ENABLED or not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        if freeze_survivors:
            gc.freeze()
        gc.enable()


@contextmanager
def thawed_after() -> Iterator[None]:
    """Give what ``collection_paused(freeze_survivors=True)`` froze in the block back to
    the collector at its end, unless objects were frozen before it (by the program that
    calls fixitem, whose choice is kept).

    Nothing is counted at the end: ``gc.get_freeze_count`` walks every frozen object (3 ms
    after a one-file scan of a 5,500-line module), while ``gc.unfreeze`` only joins two lists."""
    frozen_before = gc.get_freeze_count()
    try:
        yield
    finally:
        if frozen_before == 0:
            gc.unfreeze()
