"""Configuration from ``pyproject.toml`` (``[tool.fixitem]``).

```toml
[tool.fixitem]
select = ["FX1", "FX001"]        # rule codes or prefixes
ignore = ["FX005"]
exclude = ["legacy/*", "*_pb2.py"]
unsafe = false
flush-every = 50
no-runtime = ["src/"]            # files that must not import fixitem.runtime

[tool.fixitem.per-file-ignores]
"tests/*" = ["FX001", "FX004"]
```

The file is found from the first path given, upwards: the first
``pyproject.toml`` with a ``[tool.fixitem]`` table wins; the search stops at a
folder holding ``.git``. ``exclude`` and ``per-file-ignores`` globs are matched
against paths relative to the folder of the configuration file (and against
the file name alone), and so are ``no-runtime`` globs: files there keep the
findings of deferred logging and on-device sums (the fixes that import
``fixitem.runtime``) as report-only, and get every other fix. A key that fixitem does not know, or a value of the
wrong type, is an error naming the key and the file (:class:`ConfigError`).

An explicit file (``--config PATH``) may be a ``pyproject.toml`` or any other
TOML file: its ``[tool.fixitem]`` table when it has one, else its top level
(so that a ``fixitem.toml`` can hold the keys directly).
"""

from __future__ import annotations

import difflib
import fnmatch
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

try:
    import tomllib
except ImportError:  # pragma: no cover - Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

from fixitem.codemods.driver.registry import UnknownRule, select_rules

KEYS = ("select", "ignore", "exclude", "per-file-ignores", "flush-every", "unsafe", "no-runtime")


class ConfigError(ValueError):
    """A configuration file that cannot be used: bad TOML, an unknown key, a wrong value."""


@dataclass
class Config:
    select: list[str] | None = None
    ignore: list[str] | None = None
    exclude: list[str] | None = None
    per_file_ignores: dict[str, list[str]] = field(default_factory=dict)
    flush_every: int | None = None
    unsafe: bool | None = None
    no_runtime: list[str] | None = None  # globs of files that must not import fixitem.runtime
    path: Path | None = None  # the file it was read from; None: built in code

    @property
    def root(self) -> Path:
        """The folder that relative globs are matched against."""
        return self.path.parent.resolve() if self.path is not None else Path.cwd().resolve()

    def excluded(self, file: Path) -> bool:
        return any(glob_matches(file, pattern, self.root) for pattern in self.exclude or ())

    def runtime_kept_out(self, file: Path) -> bool:
        """Whether ``no-runtime`` keeps fixes that import ``fixitem.runtime`` out of ``file``."""
        return any(glob_matches(file, pattern, self.root) for pattern in self.no_runtime or ())

    def ignored_for(self, file: Path) -> list[str]:
        """The codes that ``per-file-ignores`` turns off for ``file``."""
        codes: list[str] = []
        for pattern, patterns in self.per_file_ignores.items():
            if glob_matches(file, pattern, self.root):
                codes.extend(c for c in patterns if c not in codes)
        return codes


def glob_matches(file: Path, pattern: str, root: Path) -> bool:
    """Whether ``pattern`` matches ``file``, its name, or one of its folders (relative to ``root``)."""
    pattern = pattern.replace("\\", "/").removeprefix("./")
    resolved = Path(file).resolve()
    try:
        rel = PurePosixPath(resolved.relative_to(root).as_posix())
    except ValueError:
        rel = PurePosixPath(resolved.as_posix())
    if fnmatch.fnmatchcase(rel.as_posix(), pattern) or fnmatch.fnmatchcase(rel.name, pattern):
        return True
    # A pattern naming a folder (``legacy``, ``src/old``, ``tests/``) matches what is inside it.
    folder = pattern.rstrip("/")
    for parent in list(rel.parents)[:-1]:
        if fnmatch.fnmatchcase(parent.as_posix(), folder) or fnmatch.fnmatchcase(parent.name, folder):
            return True
    return False


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        with open(path, "rb") as handle:
            return tomllib.load(handle)
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read configuration: {exc.strerror or exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}") from None


def _fixitem_table(data: dict[str, Any]) -> dict[str, Any] | None:
    tool = data.get("tool")
    if isinstance(tool, dict) and "fixitem" in tool:
        return tool["fixitem"]
    return None


def find_config(start: Path | str) -> Path | None:
    """The first ``pyproject.toml`` with a ``[tool.fixitem]`` table from ``start`` upwards.

    The search stops after a folder that holds ``.git`` (the top of the project).
    """
    folder = Path(start).resolve()
    if not folder.is_dir():
        folder = folder.parent
    for here in (folder, *folder.parents):
        candidate = here / "pyproject.toml"
        if candidate.is_file():
            if _fixitem_table(_read_toml(candidate)) is not None:
                return candidate
        if (here / ".git").exists():
            return None
    return None


def _strings(path: Path, key: str, value: Any) -> list[str]:
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return list(value)
    raise ConfigError(f"{path}: [tool.fixitem] {key} must be a list of strings, not {value!r}")


def _check_codes(path: Path, key: str, codes: Iterable[str]) -> None:
    try:
        select_rules(None, list(codes))
    except UnknownRule as exc:
        raise ConfigError(f"{path}: [tool.fixitem] {key}: {exc}") from None


def parse(table: dict[str, Any], path: Path) -> Config:
    """Check the keys and values of a ``[tool.fixitem]`` table."""
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: [tool.fixitem] must be a table")
    config = Config(path=path)
    for key, value in table.items():
        if key not in KEYS:
            close = difflib.get_close_matches(key.replace("_", "-"), KEYS, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else f" (known keys: {', '.join(KEYS)})"
            raise ConfigError(f"{path}: unknown key {key!r} in [tool.fixitem]{hint}")
        if key in ("select", "ignore"):
            codes = _strings(path, key, value)
            _check_codes(path, key, codes)
            setattr(config, key, codes)
        elif key == "exclude":
            config.exclude = _strings(path, key, value)
        elif key == "no-runtime":
            config.no_runtime = _strings(path, key, value)
        elif key == "per-file-ignores":
            if not isinstance(value, dict):
                raise ConfigError(f"{path}: [tool.fixitem] per-file-ignores must be a table of glob = [codes]")
            for glob, codes in value.items():
                codes = _strings(path, f"per-file-ignores {glob!r}", codes)
                _check_codes(path, f"per-file-ignores {glob!r}", codes)
                config.per_file_ignores[glob] = codes
        elif key == "flush-every":
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"{path}: [tool.fixitem] flush-every must be a positive integer, not {value!r}")
            config.flush_every = value
        elif key == "unsafe":
            if not isinstance(value, bool):
                raise ConfigError(f"{path}: [tool.fixitem] unsafe must be true or false, not {value!r}")
            config.unsafe = value
    return config


def load_config(path: Path | str) -> Config:
    """Read a configuration file named by the user (``--config``).

    Its ``[tool.fixitem]`` table if it has one; a ``pyproject.toml`` without
    one is an error; any other file is read from its top level.
    """
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"configuration file does not exist: {path}")
    data = _read_toml(path)
    table = _fixitem_table(data)
    if table is None:
        if path.name == "pyproject.toml":
            raise ConfigError(f"{path}: no [tool.fixitem] table")
        table = data
    return parse(table, path)


def discover_config(paths: Iterable[Path | str]) -> Config:
    """The configuration for a run over ``paths``: found from the first path, or empty."""
    first = next(iter(paths), None)
    if first is None:
        return Config()
    found = find_config(first)
    return load_config(found) if found is not None else Config()
