"""Reading and writing Python source files without losing anything.

A file is read as bytes and decoded the way Python itself would (PEP 263
coding declaration, UTF-8 BOM); its line endings are remembered. Writing
encodes back to the same encoding, BOM and line endings, into a temporary
file in the same folder that replaces the original atomically, keeping its
permission bits. A crash mid-write therefore never leaves a half-written file.
"""

from __future__ import annotations

import codecs
import io
import os
import stat
import tokenize
from dataclasses import dataclass
from pathlib import Path


class SourceError(Exception):
    """A file that could not be read, decoded or written."""


@dataclass(frozen=True)
class SourceFile:
    path: Path
    text: str  # with "\n" line endings
    encoding: str
    bom: bool
    newline: str  # "\n", "\r\n" or "\r"

    def encode(self, text: str) -> bytes:
        """``text`` (with "\\n" endings) as bytes laid out like this file."""
        if self.newline != "\n":
            text = text.replace("\n", self.newline)
        data = text.encode(self.encoding)
        if self.bom:
            data = codecs.BOM_UTF8 + data
        return data


def _detect_newline(data: bytes) -> str:
    if b"\r" not in data:  # nearly every file: one pass over the bytes, not three
        return "\n"
    crlf = data.count(b"\r\n")
    lf = data.count(b"\n") - crlf
    cr = data.count(b"\r") - crlf
    if crlf > lf and crlf >= cr:
        return "\r\n"
    if cr > lf:
        return "\r"
    return "\n"


def decode_source(path: Path, data: bytes) -> SourceFile:
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except SyntaxError as exc:
        raise SourceError(f"{path}: {exc}") from None
    bom = encoding == "utf-8-sig"
    if bom:
        encoding = "utf-8"
        data = data[len(codecs.BOM_UTF8):]
    try:
        text = data.decode(encoding)
    except (UnicodeDecodeError, LookupError) as exc:
        raise SourceError(f"{path}: cannot decode as {encoding}: {exc}") from None
    newline = _detect_newline(data)
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    return SourceFile(path, text, encoding, bom, newline)


def read_source(path: Path) -> SourceFile:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise SourceError(f"{path}: cannot read: {exc.strerror or exc}") from None
    return decode_source(path, data)


def is_writable(path: Path) -> bool:
    """Writable by this user (replacing the file would otherwise bypass its mode)."""
    return os.access(path, os.W_OK)


def write_atomically(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` in one step, keeping its permissions.

    A symbolic link stays a link: the file it leads to is the one replaced.
    """
    path = Path(path)
    target = Path(os.path.realpath(path))
    try:
        mode = stat.S_IMODE(target.stat().st_mode)
    except OSError as exc:
        raise SourceError(f"{path}: cannot stat: {exc.strerror or exc}") from None
    if not is_writable(target):
        raise SourceError(f"{path}: file is not writable")
    folder = target.parent
    try:
        import tempfile  # (only when a file is written: not for a scan)

        fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".fixitem", dir=folder)
    except OSError as exc:
        raise SourceError(f"{path}: cannot write in {folder}: {exc.strerror or exc}") from None
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp_name, mode)
        os.replace(tmp_name, target)
    except BaseException as exc:
        try:
            os.unlink(tmp_name)
        except OSError:
            pass
        if isinstance(exc, OSError):
            raise SourceError(f"{path}: cannot write: {exc.strerror or exc}") from None
        raise
