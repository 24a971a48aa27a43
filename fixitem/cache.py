"""Per-file results kept between runs, so that unchanged files are not parsed again.

Analysing a file means parsing it and following tensor values
through it: tens of milliseconds per file, minutes on a large tree. The
answer depends only on the file's text, name and place, the rules that run
on it, the ``flush-every`` setting and fixitem's own code, so it is kept under
a key made of all of these (its place: a result names the files it depends on
by path, so a tree copied or moved elsewhere with its cache is analysed
again). A later ``scan`` of an unchanged file reads the answer
back; ``apply`` skips a file whose kept answer has nothing to fix. For a
file whose fixes interact, ``scan`` rewrites it in memory with safe and with
unsafe fixes to tag its findings; those rewrites are kept too, so that an
``apply`` after a ``scan`` of an unchanged file writes the kept rewrite
instead of analysing the file again.

The folder is ``.fixitem_cache`` beside the configuration file (or in the
current folder), or ``FIXITEM_CACHE_DIR``; ``FIXITEM_NO_CACHE=1`` or
``--no-cache`` turns it off. It ignores itself in git (a ``.gitignore``
holding ``*``) and may be deleted at any time. An entry that cannot be read
or written is treated as missing: the cache never changes a result.

The entries are rows of one SQLite database in that folder (Python's own
``sqlite3``), in write-ahead-log mode: the processes of a run, and runs side by
side, write it at once, and a reader never sees half an entry. One file per
entry cost a file created and renamed per analysed file (a fifth of a
millisecond each on an ext4 disk, more with two processes at it); a row costs
a twentieth of that. Entries not written for 30 days are dropped at the start
of a run (a file unchanged that long is analysed once more), and the first run
of this format removes the folders of the earlier ones (``v1/``, ``v2/``).
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fixitem.codemods.driver.engine import FileResult, Finding

DIR_NAME = ".fixitem_cache"
FORMAT = "3"  # bump when the stored shape changes
KEEP_DAYS = 30  # entries not written for this long are dropped
# How long a process waits for another one's write (each takes microseconds); past that, the
# process runs on without the cache rather than wait at every file.
LOCK_WAIT_S = 5.0
# This process's connection to each cache (None: it cannot be opened), by folder: a
# connection is not shared across ``fork``, so each process opens its own.
_DATABASES: dict[tuple[int, str], sqlite3.Connection | None] = {}
# Its tables, each of (key, data, written): the results of files, and the summaries of modules.
_TABLES = ("entries", "summaries")

_fingerprint: str | None = None


def code_fingerprint() -> str:
    """fixitem's version and the code that computes findings: its folder, and each file's
    name, size and modification time, as Python's bytecode cache tells a changed module
    (reading and hashing the code's 2 MB took 3 ms of every run)."""
    global _fingerprint
    if _fingerprint is None:
        import fixitem
        import fixitem.codemods
        from fixitem.codemods.model import torch_stubs

        # Findings also depend on what the installed torch's stubs say its APIs return.
        _fingerprint = code_folder_fingerprint(
            Path(fixitem.codemods.__file__).parent, f"{fixitem.__version__}\0{FORMAT}\0{torch_stubs.fingerprint()}")
    return _fingerprint


def code_folder_fingerprint(folder: Path, salt: str) -> str:
    """A digest of ``salt``, ``folder`` and the name, size and modification time of each
    Python file below it."""
    digest = hashlib.sha256(f"{salt}\0{folder}".encode())
    for path in sorted(folder.rglob("*.py")):
        stat = path.stat()
        digest.update(f"{path.relative_to(folder).as_posix()}\0{stat.st_size}\0{stat.st_mtime_ns}\0".encode())
    return digest.hexdigest()


def _summary_key(digest: str) -> str:
    """A module's summary is a function of its text and of fixitem's code alone."""
    return f"{code_fingerprint()}:{digest}"


def disabled_by_environment() -> bool:
    return os.environ.get("FIXITEM_NO_CACHE", "").strip().lower() not in ("", "0", "false", "no")


def default_dir(config_path: Path | None) -> Path:
    configured = os.environ.get("FIXITEM_CACHE_DIR", "").strip()
    if configured:
        return Path(configured)
    base = config_path.parent if config_path is not None else Path.cwd()
    return base / DIR_NAME


class ResultCache:
    """Findings per (file text, name, rules, settings) under one folder."""

    def __init__(self, folder: Path | str) -> None:
        self.folder = Path(folder)

    def key(self, display_path: str, text: str, codes: tuple[str, ...], flush_every: int | None,
            default_device: bool = False, runtime: bool = True, traced_roots: tuple[str, ...] = (),
            replaced_streams: bool = False, line_length: int = 88, place: str = "") -> str:
        """``place``: where the file is (its real path): a result names the files it depends
        on, and the functions of other files its traced code calls, by their paths, so a tree
        copied or moved elsewhere with its cache is analysed again, as itself.
        ``default_device``: another file of the run sets torch's default device (then
        no tensor made without ``device=`` is taken for a CPU tensor). ``runtime=False``:
        fixes that import ``fixitem.runtime`` are report-only (``no-runtime``).
        ``traced_roots``: the file's functions that traced code of other modules calls.
        ``replaced_streams``: a file of the run assigns ``sys.stdout`` or ``sys.stderr``.
        ``line_length``: the project's, that rewritten lines fit."""
        digest = hashlib.sha256(code_fingerprint().encode())
        for part in (display_path, place, ",".join(codes), str(flush_every),
                     *(("default-device",) if default_device else ()), *(() if runtime else ("no-runtime",)),
                     *(("replaced-streams",) if replaced_streams else ()),
                     *((f"line-length:{line_length}",) if line_length != 88 else ()),
                     *(("traced:" + ",".join(traced_roots),) if traced_roots else ())):
            digest.update(b"\0" + part.encode("utf-8", "surrogatepass"))
        digest.update(b"\0" + text.encode("utf-8", "surrogatepass"))
        return digest.hexdigest()

    @property
    def database(self) -> Path:
        return self.folder / f"results-v{FORMAT}.sqlite"

    def _connection(self) -> sqlite3.Connection | None:
        """This process's connection (made on first use, with the folder), or None when the
        folder or its database cannot be opened (a read-only disk, a file in the way)."""
        where = (os.getpid(), str(self.folder))
        if where in _DATABASES:
            return _DATABASES[where]
        found = None
        for _ in range(2):
            try:
                self._create()
                if not self.database.exists():
                    self._drop_old_formats()
                found = sqlite3.connect(self.database, timeout=LOCK_WAIT_S, isolation_level=None,
                                        check_same_thread=False)
                try:
                    found.execute("PRAGMA journal_mode=WAL")  # (not on every file system: then as it is)
                except sqlite3.Error:
                    pass
                found.execute("PRAGMA synchronous=NORMAL")
                for table in _TABLES:
                    found.execute(f"CREATE TABLE IF NOT EXISTS {table} (key TEXT PRIMARY KEY, data TEXT NOT NULL, "
                                  "written REAL NOT NULL)")
                break
            except sqlite3.DatabaseError as exc:
                _close(found)
                found = None
                if isinstance(exc, sqlite3.OperationalError):
                    break  # locked, or not to be opened: no cache this run
                try:  # not a database (a broken file): start it again
                    for suffix in ("", "-wal", "-shm"):
                        Path(f"{self.database}{suffix}").unlink(missing_ok=True)
                except OSError:
                    break
            except (OSError, sqlite3.Error):
                _close(found)
                found = None
                break
        _DATABASES[where] = found
        return found

    def prune(self) -> None:
        """Drop the entries not written for :data:`KEEP_DAYS` days (done once per run)."""
        if not self.database.exists():
            return
        connection = self._connection()
        try:
            if connection is not None:
                for table in _TABLES:
                    connection.execute(f"DELETE FROM {table} WHERE written < ?", (time.time() - KEEP_DAYS * 86400,))
        except sqlite3.Error:
            pass

    def get(self, key: str) -> Kept | None:
        """The kept answer for ``key``, read once; None when there is none (or it is unreadable)."""
        row = self._read("entries", key)
        if row is None:
            return None
        try:
            data: dict[str, Any] = json.loads(row)
            depends = {str(k): str(v) for k, v in data.get("depends", {}).items()}
            if any(file_digest(path) != digest for path, digest in depends.items()):
                return None  # a module of the project the answer used has changed since
            found = data.get("traced_elsewhere", [])
            marks = None if found is None else [(str(path), str(name)) for path, name in found]
            here = frozenset(str(name) for name in data.get("traced_here", []))
            return Kept(_findings(data["findings"]), data["error"], dict(data["rewrites"]), depends, marks, here)
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return None

    def put(self, key: str, findings: list[Finding], error: str | None,
            rewrites: dict[bool, FileResult] | None = None, depends: dict[str, str] | None = None,
            traced_elsewhere: Sequence[tuple[str, str]] | None = (), traced_here: frozenset[str] = frozenset()) -> None:
        """Keep a file's findings (and, from ``scan``, its in-memory rewrites by mode:
        ``False`` for safe fixes, ``True`` for unsafe ones too), with the other modules of
        the project the analysis read (``depends``: path -> sha1 of the text), the
        functions of other modules its traced code calls (None: not looked for) and its own
        functions traced already."""
        kept_rewrites = {
            "unsafe" if unsafe else "safe": {
                "text": run.new_text, "applied": [f.to_dict() for f in run.applied],
                "findings": [f.to_dict() for f in run.findings],
            }
            for unsafe, run in (rewrites or {}).items() if run.error is None
        }
        data = json.dumps({"findings": [f.to_dict() for f in findings], "error": error, "rewrites": kept_rewrites,
                           "depends": depends or {}, "traced_elsewhere": None if traced_elsewhere is None else list(traced_elsewhere),
                           "traced_here": sorted(traced_here)})
        self._write("entries", key, data)

    def summary(self, digest: str) -> dict | None:
        """The kept summary (``Summary.to_data``) of a module of the project whose text has
        this digest, made by this version of fixitem; None when there is none."""
        row = self._read("summaries", _summary_key(digest))
        if row is None:
            return None
        try:
            found = json.loads(row)
        except ValueError:
            return None
        return found if isinstance(found, dict) else None

    def keep_summary(self, digest: str, data: dict) -> None:
        """Keep the summary of a module (a file asked about it): a later run that asks about
        the module again, its text unchanged, reads it back instead of parsing the module."""
        self._write("summaries", _summary_key(digest), json.dumps(data))

    def _read(self, table: str, key: str) -> str | None:
        """The data of ``key`` in ``table`` (one of ``_TABLES``); None when there is
        none or it cannot be read."""
        where = (os.getpid(), str(self.folder))
        if where not in _DATABASES and not self.database.exists():
            return None  # (nothing made on a read: a first run makes the folder when it writes)
        connection = self._connection()
        if connection is None:
            return None
        try:
            row = connection.execute(f"SELECT data FROM {table} WHERE key = ?", (key,)).fetchone()
        except sqlite3.Error:
            self._give_up()
            return None
        return None if row is None else row[0]

    def _write(self, table: str, key: str, data: str) -> None:
        connection = self._connection()
        if connection is None:
            return  # a read-only or full disk: run without keeping anything
        try:
            connection.execute(f"INSERT OR REPLACE INTO {table} VALUES (?, ?, ?)", (key, data, time.time()))
        except sqlite3.Error:
            self._give_up()

    def _give_up(self) -> None:
        """A read or write failed (the disk is full, another process holds the database too
        long): this process goes on without the cache until the run ends."""
        where = (os.getpid(), str(self.folder))
        _close(_DATABASES.get(where))
        _DATABASES[where] = None

    def _drop_old_formats(self) -> None:
        """The entries of earlier versions of fixitem (``v1/``, ``v2/``: a file per entry),
        which no version reads once this one has written here."""
        import shutil

        for old in range(1, int(FORMAT)):
            folder = self.folder / f"v{old}"
            if folder.is_dir() and not folder.is_symlink():
                shutil.rmtree(folder, ignore_errors=True)

    def _create(self) -> None:
        if (self.folder / ".gitignore").exists():
            return
        self.folder.mkdir(parents=True, exist_ok=True)
        (self.folder / ".gitignore").write_text("# Created by fixitem.\n*\n", encoding="utf-8")
        (self.folder / "CACHEDIR.TAG").write_text(
            "Signature: 8a477f597d28d172789f06886806bc55\n# This folder is a cache created by fixitem.\n",
            encoding="utf-8",
        )


@dataclass
class Kept:
    """A kept answer: the file's findings and error, and scan's in-memory rewrites."""

    findings: list[Finding]
    error: str | None
    rewrites: dict[str, Any] = field(default_factory=dict)
    depends: dict[str, str] = field(default_factory=dict)
    traced_elsewhere: list[tuple[str, str]] | None = field(default_factory=list)  # None: not looked for
    traced_here: frozenset[str] = frozenset()

    def rewrite(self, path: Path, unsafe: bool) -> FileResult | None:
        """What ``apply`` (``unsafe``: ``apply --unsafe``) gives for the file, as kept by
        ``scan``: its findings left, the fixes applied and the new text, or None."""
        try:
            kept = self.rewrites.get("unsafe" if unsafe else "safe")
            if kept is None:
                return None
            return FileResult(path, _findings(kept["findings"]), _findings(kept["applied"]), new_text=kept["text"])
        except (ValueError, KeyError, TypeError, AttributeError):
            return None


_DIGESTS: dict[str, tuple[int, int, str]] = {}  # path -> (mtime, size, sha1), per process


def close_all() -> None:
    """Close this process's connections (a run ends: the next one opens the caches anew, as
    they are then)."""
    for where, connection in _DATABASES.items():
        if where[0] == os.getpid():
            _close(connection)
    _DATABASES.clear()


def _close(connection: sqlite3.Connection | None) -> None:
    """Close ``connection`` (if any), whatever state it is in."""
    if connection is not None:
        try:
            connection.close()
        except sqlite3.Error:
            pass


def file_digest(path: str) -> str:
    """The sha1 of the file's bytes ("" when it cannot be read), kept while its time and
    size are unchanged."""
    try:
        stat = os.stat(path)
    except OSError:
        return ""
    kept = _DIGESTS.get(path)
    if kept is not None and kept[:2] == (stat.st_mtime_ns, stat.st_size):
        return kept[2]
    try:
        with open(path, "rb") as stream:
            digest = hashlib.sha1(stream.read()).hexdigest()
    except OSError:
        return ""
    _DIGESTS[path] = (stat.st_mtime_ns, stat.st_size, digest)
    return digest


def _findings(items: list[dict[str, Any]]) -> list[Finding]:
    return [_finding(item) for item in items]


def _finding(item: dict[str, Any]) -> Finding:
    return Finding(
        str(item["path"]), int(item["line"]), int(item["col"]), str(item["rule"]), str(item["name"]),
        str(item["message"]), str(item["fix"]), tuple(item["costs"]), str(item["note"]), bool(item["applied"]),
    )
