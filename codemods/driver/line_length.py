"""The line length a project formats its code to, so that rewritten lines fit it.

Read as ruff and black read it, from the configuration file nearest to the file
(its folder, then upwards, stopping at a folder that holds ``.git``):
``ruff.toml`` / ``.ruff.toml`` (``line-length``), else ``pyproject.toml``
(``[tool.ruff] line-length``, else ``[tool.black] line-length``; either table
without it means 88). A ``pyproject.toml`` with neither table does not stop
the search, as it does not for ruff. Without one: 88, black's and ruff's
default. A file that cannot be read or parsed counts as none.
"""

from __future__ import annotations

import functools
from pathlib import Path

from ..real_paths import real_path

try:
    import tomllib
except ImportError:  # pragma: no cover - Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

DEFAULT = 88
# Lengths outside this range are taken for a mistake (or for "no limit", 0), not followed.
_SANE = range(40, 401)


def line_length(file: Path) -> int:
    """The line length for ``file`` (see the module's documentation)."""
    try:
        folder = real_path(file).parent
    except (OSError, RuntimeError):
        return DEFAULT
    return _for_folder(folder)


@functools.lru_cache(maxsize=4096)
def _for_folder(folder: Path) -> int:
    found = _configured(folder)
    if found is not None:
        return found
    if (folder / ".git").exists() or folder.parent == folder:
        return DEFAULT
    return _for_folder(folder.parent)


def _configured(folder: Path) -> int | None:
    for name in ("ruff.toml", ".ruff.toml"):
        table = _read(folder / name)
        if table is not None:
            return _length(table.get("line-length"))
    data = _read(folder / "pyproject.toml")
    if data is None:
        return None
    tool = data.get("tool")
    if not isinstance(tool, dict):
        return None
    sections = [tool.get(name) for name in ("ruff", "black") if isinstance(tool.get(name), dict)]
    for section in sections:
        if "line-length" in section:
            return _length(section["line-length"])
    return DEFAULT if sections else None


def _length(value: object) -> int:
    if isinstance(value, int) and not isinstance(value, bool) and value in _SANE:
        return value
    return DEFAULT


def _read(path: Path) -> dict | None:
    try:
        with open(path, "rb") as handle:
            return tomllib.load(handle)
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError):
        return None


def forget() -> None:
    """Read the configuration files again (they may have changed since)."""
    _for_folder.cache_clear()
