"""Per-file results kept between runs, so that unchanged files are not parsed again.

Analysing a file means parsing it and following tensor values
through it: tens of milliseconds per file, minutes on a large tree. The
answer depends only on the file's text and name, the rules that run on it,
the ``flush-every`` setting and fixitem's own code, so it is kept under a key
made of all of these. A later ``scan`` of an unchanged file reads the answer
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
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fixitem.codemods.driver.engine import FileResult, Finding

DIR_NAME = ".fixitem_cache"
FORMAT = "2"  # bump when the stored shape changes

_fingerprint: str | None = None


def code_fingerprint() -> str:
    """fixitem's version and the text of the code that computes findings."""
    global _fingerprint
    if _fingerprint is None:
        import fixitem
        import fixitem.codemods
        from fixitem.codemods.model import torch_stubs

        # Findings also depend on what the installed torch's stubs say its APIs return.
        digest = hashlib.sha256(f"{fixitem.__version__}\0{FORMAT}\0{torch_stubs.fingerprint()}".encode())
        folder = Path(fixitem.codemods.__file__).parent
        for path in sorted(folder.rglob("*.py")):
            digest.update(path.relative_to(folder).as_posix().encode() + b"\0" + path.read_bytes())
        _fingerprint = digest.hexdigest()
    return _fingerprint


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
            replaced_streams: bool = False, line_length: int = 88) -> str:
        """``default_device``: another file of the run sets torch's default device (then
        no tensor made without ``device=`` is taken for a CPU tensor). ``runtime=False``:
        fixes that import ``fixitem.runtime`` are report-only (``no-runtime``).
        ``traced_roots``: the file's functions that traced code of other modules calls.
        ``replaced_streams``: a file of the run assigns ``sys.stdout`` or ``sys.stderr``.
        ``line_length``: the project's, that rewritten lines fit."""
        digest = hashlib.sha256(code_fingerprint().encode())
        for part in (display_path, ",".join(codes), str(flush_every),
                     *(("default-device",) if default_device else ()), *(() if runtime else ("no-runtime",)),
                     *(("replaced-streams",) if replaced_streams else ()),
                     *((f"line-length:{line_length}",) if line_length != 88 else ()),
                     *(("traced:" + ",".join(traced_roots),) if traced_roots else ())):
            digest.update(b"\0" + part.encode("utf-8", "surrogatepass"))
        digest.update(b"\0" + text.encode("utf-8", "surrogatepass"))
        return digest.hexdigest()

    def _entry(self, key: str) -> Path:
        return self.folder / f"v{FORMAT}" / key[:2] / f"{key}.json"

    def get(self, key: str) -> Kept | None:
        """The kept answer for ``key``, read once; None when there is none (or it is unreadable)."""
        try:
            data: dict[str, Any] = json.loads(self._entry(key).read_text(encoding="utf-8"))
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
        entry = self._entry(key)
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
        try:
            self._create()
            entry.parent.mkdir(parents=True, exist_ok=True)
            handle, temporary = tempfile.mkstemp(dir=entry.parent, prefix=".tmp-", suffix=".json")
            try:
                with os.fdopen(handle, "w", encoding="utf-8") as stream:
                    stream.write(data)
                os.replace(temporary, entry)
            except BaseException:
                Path(temporary).unlink(missing_ok=True)
                raise
        except OSError:
            pass  # a read-only or full disk: run without keeping results

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
