"""A file's real path (links and ``..`` resolved), worked out once per run.

A run asks for the real path of each of its files several times (to show it,
to find its configuration, to know it as a module of the project), and each
``Path.resolve()`` makes a system call per folder of the path: on a deep tree
that was 2-3% of a scan. A relative path is keyed with the current folder, so
a change of folder never gives an old answer; a new run (``forget``) asks the
file system again.
"""

from __future__ import annotations

import os
from pathlib import Path

_REAL: dict[str, Path] = {}


def _key(path: str | os.PathLike[str]) -> str:
    key = os.fspath(path)
    return key if os.path.isabs(key) else os.path.join(os.getcwd(), key)


def real_path(path: str | os.PathLike[str]) -> Path:
    """``Path(path).resolve()``, kept. Raises as ``resolve`` does (``RuntimeError`` for a
    loop of links); a failure is not kept."""
    key = _key(path)
    found = _REAL.get(key)
    if found is None:
        found = _REAL[key] = Path(key).resolve()
    return found


def remember(path: str | os.PathLike[str], real: str | os.PathLike[str]) -> None:
    """Keep ``real`` as the real path of ``path`` (worked out by the caller already)."""
    _REAL[_key(path)] = Path(real)


def forget() -> None:
    """Ask the file system again from now on (a new run: files may have moved)."""
    _REAL.clear()
