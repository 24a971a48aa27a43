"""Read a file as it is committed in git (``git show REF:path``)."""

from __future__ import annotations

import subprocess
import sys
import tarfile
from pathlib import Path

from .errors import UsageError


class GitError(UsageError):
    """git is missing, the folder is not a repository, or the path is not in REF."""


def _git(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(
            ["git", *args], cwd=cwd, capture_output=True, text=True, encoding="utf-8", check=False
        )
    except FileNotFoundError as exc:
        raise GitError("git is not installed (needed for --before-ref)") from exc


def _check_revision(root: Path, ref: str) -> None:
    proc = _git(["rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}"], root)
    if proc.returncode != 0:
        raise GitError(f"unknown git revision {ref!r} in {root}")


def repo_root(path: Path) -> Path:
    """The top folder of the git repository holding ``path``."""
    folder = Path(path).resolve()
    folder = folder if folder.is_dir() else folder.parent
    if not folder.is_dir():
        raise GitError(f"folder not found: {folder}")
    proc = _git(["rev-parse", "--show-toplevel"], folder)
    if proc.returncode != 0:
        raise GitError(f"{path} is not inside a git repository: {proc.stderr.strip()}")
    return Path(proc.stdout.strip()).resolve()


def repo_relative(path: Path) -> str:
    """``path`` relative to its repository's root, with forward slashes."""
    path = Path(path).resolve()
    root = repo_root(path.parent)
    try:
        return path.relative_to(root).as_posix()
    except ValueError as exc:
        raise GitError(f"{path} is outside the git repository at {root}") from exc


def read_at_ref(path: Path, ref: str) -> str:
    """The content of ``path`` at git revision ``ref`` (a commit, branch or tag).

    ``path`` is a file of the working tree (it need not exist any more); the
    command runs from the repository root found with ``git rev-parse``.
    """
    path = Path(path).resolve()
    root = repo_root(path.parent)
    rel = repo_relative(path)
    _check_revision(root, ref)
    proc = _git(["show", f"{ref}:{rel}"], root)
    if proc.returncode != 0:
        raise GitError(f"{rel} is not in {ref}: {proc.stderr.strip()}")
    return proc.stdout


def materialise_ref(cwd: Path, ref: str, into: Path) -> Path:
    """Write the git repository holding ``cwd`` as committed at ``ref`` into ``into``.

    Returns the folder of ``into`` that corresponds to ``cwd``.
    """
    top = repo_root(cwd)
    _check_revision(top, ref)
    archive = into / "tree.tar"
    with open(archive, "wb") as fh:
        result = subprocess.run(["git", "archive", "--format=tar", ref], cwd=top, stdout=fh,
                                stderr=subprocess.PIPE, check=False)
    if result.returncode != 0:
        raise GitError(f"git archive {ref} failed: {result.stderr.decode(errors='replace').strip()}")
    tree = into / "tree"
    tree.mkdir()
    with tarfile.open(archive) as tar:
        if sys.version_info >= (3, 12):
            tar.extractall(tree, filter="data")
        else:
            tar.extractall(tree)
    archive.unlink()
    return tree / Path(cwd).resolve().relative_to(top)
