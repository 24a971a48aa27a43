"""Which files a run looks at.

Files named on the command line are always taken (whatever their suffix);
folders are walked for ``*.py`` files and ``*.ipynb`` notebooks, skipping
hidden folders, virtual environments, caches and build output, and what the
folder's ``.gitignore`` files ignore (simple patterns: names, globs, ``dir/``, ``/anchored``; negations
are not supported and are ignored).
"""

from __future__ import annotations

import errno
import fnmatch
import os
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from .. import real_paths

SKIPPED_DIRS = frozenset(
    {
        "__pycache__", "node_modules", "site-packages", "build", "dist",
        "venv", "env", ".venv", ".env", ".tox", ".nox", ".eggs",
    }
)


# Python files and Jupyter notebooks (whose code cells are read as one module).
NOTEBOOK_SUFFIX = ".ipynb"
SUFFIXES = (".py", NOTEBOOK_SUFFIX)


def is_notebook(path: Path) -> bool:
    """Is ``path`` a Jupyter notebook (read by :mod:`.notebooks`, which is imported only for one)?"""
    return path.suffix.lower() == NOTEBOOK_SUFFIX


class PathNotFound(Exception):
    """A path named by the user cannot be read: it does not exist, or is a symbolic link
    that leads nowhere or to itself. The message says which."""


def missing(raw: Path | str) -> str | None:
    """Why the path named ``raw`` cannot be read, or None when it exists."""
    try:
        os.stat(raw)
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return f"symbolic link loop: {raw}"
    except ValueError:  # an embedded NUL byte
        pass
    if os.path.islink(raw):
        return f"broken symbolic link: {raw} -> {os.readlink(raw)}"
    return f"path does not exist: {raw}"


def _is_virtualenv(folder: Path) -> bool:
    return (folder / "pyvenv.cfg").is_file()


class _GitIgnore:
    """The simple subset of .gitignore rules, relative to the folder holding the file."""

    def __init__(self, base: Path, lines: Iterable[str]) -> None:
        self.base = base
        self.rules: list[tuple[str, bool, bool]] = []  # (pattern, dir_only, anchored)
        for raw in lines:
            line = raw.strip()
            if not line or line.startswith("#") or line.startswith("!"):
                continue
            dir_only = line.endswith("/")
            line = line.rstrip("/")
            anchored = "/" in line
            self.rules.append((line.lstrip("/"), dir_only, anchored))

    def ignores(self, path: Path, is_dir: bool) -> bool:
        try:
            rel = path.relative_to(self.base).as_posix()
        except ValueError:
            return False
        for pattern, dir_only, anchored in self.rules:
            if dir_only and not is_dir:
                continue
            target = rel if anchored else path.name
            if fnmatch.fnmatchcase(target, pattern):
                return True
        return False


def _load_gitignore(folder: Path) -> _GitIgnore | None:
    file = folder / ".gitignore"
    if not file.is_file():
        return None
    try:
        return _GitIgnore(folder, file.read_text(encoding="utf-8", errors="replace").splitlines())
    except OSError:
        return None


def _walk(root: Path, exclude: Callable[[Path], bool]) -> Iterator[Path]:
    ignores: list[_GitIgnore] = []
    top = _load_gitignore(root)
    if top:
        ignores.append(top)

    def excluded(path: Path, is_dir: bool) -> bool:
        return exclude(path) or any(ig.ignores(path, is_dir) for ig in ignores)

    for dirpath, dirnames, filenames in os.walk(root):
        here = Path(dirpath)
        if here != root:
            local = _load_gitignore(here)
            if local:
                ignores.append(local)
        keep = []
        for name in sorted(dirnames):
            sub = here / name
            if name.startswith(".") or name in SKIPPED_DIRS or name.endswith(".egg-info"):
                continue
            if _is_virtualenv(sub) or excluded(sub, True):
                continue
            keep.append(name)
        dirnames[:] = keep
        for name in sorted(filenames):
            if name.endswith(SUFFIXES) and not excluded(here / name, False):
                yield here / name


def discover(
    paths: Iterable[Path | str],
    exclude: Callable[[Path], bool] = lambda _path: False,
    *,
    exclude_named: bool = False,
) -> list[Path]:
    """The Python files below ``paths``, sorted, each once.

    ``exclude(path)`` says whether a file or folder found below a folder is
    skipped (a folder with everything inside it); with ``exclude_named``, a
    file named in ``paths`` too. A file reached twice, by its name and by a
    symbolic link to it (or by two links), is taken once: by its own name when
    that is found, else by the first link found (as ruff does, links are
    followed to the file they name). Raises
    :class:`PathNotFound` for a path that cannot be read.
    """
    real_paths.forget()  # a new run: links may have changed since the last one
    found: dict[str, tuple[Path, bool]] = {}  # real path -> the path taken, and whether it is a link
    real_folders: dict[str, str] = {}
    for raw in paths:
        problem = missing(raw)
        if problem is not None:
            raise PathNotFound(problem)
        path = Path(raw)
        if path.is_dir():
            files: Iterable[Path] = _walk(path, exclude)
        elif exclude_named and exclude(path):
            continue
        else:
            files = (path,)
        for file in files:
            link = os.path.islink(file)
            real = os.path.realpath(file) if link else _in_real_folder(file, real_folders)
            real_paths.remember(file, real)
            first = found.setdefault(real, (file, link))
            if first[1] and not link:  # the file itself over a link to it
                found[real] = (file, link)
    return [file for file, _ in found.values()]


def _in_real_folder(file: Path, real_folders: dict[str, str]) -> str:
    """The real path of ``file``, which is no link: its folder's real path (worked out once
    per folder, not once per file: one ``lstat`` per folder above it), joined with its name."""
    folder, name = os.path.split(file)
    real = real_folders.get(folder)
    if real is None:
        real = real_folders[folder] = os.path.realpath(folder or os.curdir)
    return os.path.join(real, name)
