"""Where rewritten code runs: the files that now import ``fixitem.runtime``, and how to declare it.

Deferred logging and on-device sums write ``from fixitem import runtime as
deferred`` into the files they fix. fixitem is a development tool; the
environment where the code runs (a cluster, a container, a library's users)
needs the runtime too: the ``fixitem-runtime`` distribution, whose only
dependency is torch. After ``apply``, :func:`runtime_need` says which files
now import it and where the project declares its dependencies
(``[project] dependencies`` of ``pyproject.toml``, Poetry's
``[tool.poetry.dependencies]``, ``requirements*.txt``), found from the files
upwards to the top of the project (the folder holding ``.git``).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

try:
    import tomllib
except ImportError:  # pragma: no cover - Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

from fixitem import __version__

DISTRIBUTION = "fixitem-runtime"
REQUIREMENT = f"{DISTRIBUTION}>={__version__}"
# Distributions that provide ``fixitem.runtime``: a project that lists one of them has it.
PROVIDERS = (DISTRIBUTION, "fixitem")
# Files named in the text at most; the others are counted.
SHOWN_FILES = 10

_IMPORT = re.compile(
    r"^[ \t]*(?:from[ \t]+fixitem[ \t]+import[ \t(]+runtime\b|import[ \t]+fixitem\.runtime\b"
    r"|from[ \t]+fixitem\.runtime[ \t]+import\b)"
)
_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")
_NOT_FOR_RUNNING = ("dev", "test", "doc", "lint", "type", "ci")


def newly_imports_runtime(diff: str) -> bool:
    """Whether the change of a unified ``diff`` makes its file import ``fixitem.runtime``
    (an added import line; a file that imported it already is no news)."""
    added = removed = False
    for line in diff.splitlines():
        if line.startswith(("+++", "---")):
            continue
        if line[:1] == "+" and _IMPORT.match(line[1:]):
            added = True
        elif line[:1] == "-" and _IMPORT.match(line[1:]):
            removed = True
    return added and not removed


def imports_runtime(text: str, notebook: bool = False) -> bool:
    """Whether a file's text (a notebook's JSON when ``notebook``) imports ``fixitem.runtime``."""
    if notebook:
        try:
            cells = json.loads(text).get("cells", [])
            text = "\n".join("".join(c.get("source", "")) for c in cells if c.get("cell_type") == "code")
        except (ValueError, AttributeError, TypeError):
            return False
    return any(_IMPORT.match(line) for line in text.splitlines())


@dataclass(frozen=True)
class Manifest:
    """A file where the project declares what it needs to run."""

    path: Path
    kind: str  # "pyproject" ([project] dependencies), "poetry" or "requirements"
    listed: bool  # it already lists fixitem-runtime (or fixitem)

    @property
    def where(self) -> str:
        if self.kind == "pyproject":
            return f"[project] dependencies in {_shown(self.path)}"
        if self.kind == "poetry":
            return f"[tool.poetry.dependencies] in {_shown(self.path)}"
        return _shown(self.path)

    @property
    def line(self) -> str:
        """What to write there."""
        if self.kind == "pyproject":
            return f'"{REQUIREMENT}"'
        if self.kind == "poetry":
            return f'{DISTRIBUTION} = ">={__version__}"'
        return REQUIREMENT

    def to_dict(self) -> dict[str, Any]:
        return {"path": str(self.path), "kind": self.kind, "listed": self.listed, "line": self.line}


@dataclass
class RuntimeNeed:
    """The files that an apply made import ``fixitem.runtime``, and where to declare it."""

    files: list[Path]
    manifests: list[Manifest] = field(default_factory=list)
    requirement: str = REQUIREMENT

    def text(self, written: bool = True) -> str:
        """What ``fixitem apply`` prints, once, after its summary."""
        n = len(self.files)
        shown = ", ".join(_shown(f) for f in self.files[:SHOWN_FILES])
        if n > SHOWN_FILES:
            shown += f" and {n - SHOWN_FILES} more"
        verb = ("now imports" if n == 1 else "now import") if written else "would import"
        lines = [(f"{n} file{'s' if n != 1 else ''} {verb} fixitem.runtime: {shown}. Install {DISTRIBUTION} "
                  f"(its only dependency is torch) wherever {'it runs' if n == 1 else 'they run'}:")]
        for manifest in self.manifests:
            if manifest.listed:
                lines.append(f"  {_shown(manifest.path)} already lists it.")
            else:
                lines.append(f"  Add {manifest.line} to {manifest.where}.")
        if not self.manifests:
            lines.append(f'  No pyproject.toml or requirements*.txt found: pip install "{self.requirement}" there.')
        lines.append("  To keep these rewrites out of some files, list them in `no-runtime` under [tool.fixitem].")
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return {"files": [str(f) for f in self.files], "requirement": self.requirement,
                "manifests": [m.to_dict() for m in self.manifests]}


def runtime_need(files: Sequence[Path]) -> RuntimeNeed | None:
    """The :class:`RuntimeNeed` of ``files`` (those an apply made import the runtime); None for none."""
    if not files:
        return None
    manifests: dict[Path, Manifest] = {}
    for folder in dict.fromkeys(_project_folder(Path(f)) for f in files):
        if folder is not None:
            for manifest in _manifests(folder):
                manifests.setdefault(manifest.path, manifest)
    return RuntimeNeed(list(files), list(manifests.values()))


def _project_folder(file: Path) -> Path | None:
    """The nearest folder from ``file`` upwards that declares dependencies (not above the one holding ``.git``)."""
    start = file.resolve().parent
    for here in (start, *start.parents):
        if _manifests(here):
            return here
        if (here / ".git").exists():
            return None
    return None


def _manifests(folder: Path) -> list[Manifest]:
    found: list[Manifest] = []
    pyproject = folder / "pyproject.toml"
    if pyproject.is_file():
        data = _toml(pyproject)
        project = data.get("project")
        poetry = data.get("tool", {}).get("poetry") if isinstance(data.get("tool"), dict) else None
        if isinstance(project, dict):
            deps = project.get("dependencies")
            names = _names(deps if isinstance(deps, list) else [])
            found.append(Manifest(pyproject, "pyproject", _lists_runtime(names)))
        elif isinstance(poetry, dict) and isinstance(poetry.get("dependencies"), dict):
            found.append(Manifest(pyproject, "poetry", _lists_runtime(_names(poetry["dependencies"]))))
    try:
        requirements = sorted(p for p in folder.glob("requirements*.txt") if p.is_file())
    except OSError:
        requirements = []
    if len(requirements) > 1:  # the file of what runs, not of the development tools
        plain = [p for p in requirements if p.name == "requirements.txt"]
        running = [p for p in requirements if not any(word in p.stem.lower() for word in _NOT_FOR_RUNNING)]
        requirements = plain or running or requirements
    for path in requirements:
        found.append(Manifest(path, "requirements", _lists_runtime(_requirement_lines(path))))
    return found


def _toml(path: Path) -> dict[str, Any]:
    try:
        with open(path, "rb") as handle:
            return tomllib.load(handle)
    except (OSError, tomllib.TOMLDecodeError):
        return {}


def _requirement_lines(path: Path) -> list[str]:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return []
    return _names(line.split("#", 1)[0] for line in text.splitlines() if not line.lstrip().startswith("-"))


def _names(requirements: Iterable[Any]) -> list[str]:
    names = []
    for requirement in requirements:
        match = _NAME.match(str(requirement))
        if match:
            names.append(re.sub(r"[-_.]+", "-", match.group(1)).lower())
    return names


def _lists_runtime(names: Iterable[str]) -> bool:
    return any(name in PROVIDERS for name in names)


def _shown(path: Path) -> str:
    """``path`` relative to the current folder when it is below it."""
    try:
        return Path(path).resolve().relative_to(Path.cwd().resolve()).as_posix()
    except ValueError:
        return os.fspath(path)
