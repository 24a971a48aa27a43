"""fixitem: find and rewrite host syncs and graph breaks in PyTorch code.

The Python API: :func:`scan` lists findings, :func:`apply` rewrites files
(or computes the diff). The command line (``fixitem``) is a thin layer over
these two functions. Names are imported lazily so that rewritten code
importing :mod:`fixitem.runtime` loads only torch and the standard library.
"""

from __future__ import annotations

__version__ = "0.1.0"
__all__ = ["FileResult", "Finding", "RunResult", "UsageError", "apply", "scan"]


def __getattr__(name: str):
    if name in ("FileResult", "RunResult", "UsageError", "apply", "scan"):
        from fixitem import api

        return getattr(api, name)
    if name == "Finding":
        from fixitem.codemods.driver.engine import Finding

        return Finding
    raise AttributeError(f"module 'fixitem' has no attribute {name!r}")
