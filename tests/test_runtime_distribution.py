"""fixitem-runtime: the runtime alone, torch its only dependency, built from fixitem/runtime.py."""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import fixitem
from fixitem.deploy import DISTRIBUTION

try:
    import tomllib
except ImportError:  # pragma: no cover - Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

ROOT = Path(__file__).resolve().parent.parent
TRAIN = ROOT / "fixtures" / "run" / "train.py"
RUNTIME_IMPORT = "from fixitem import runtime as deferred"
# What only fixitem itself needs: none of it may come with the runtime.
TOOLING = ("libcst", "typer", "rich", "pygls", "fixitem.api", "fixitem.codemods")


def _project(path: Path) -> dict:
    with open(path, "rb") as handle:
        return tomllib.load(handle)["project"]


def test_the_runtime_distribution_has_fixitems_version_and_torch_range():
    runtime, main = _project(ROOT / "runtime" / "pyproject.toml"), _project(ROOT / "pyproject.toml")
    assert runtime["name"] == DISTRIBUTION
    # Both install fixitem/runtime.py: the same file when the versions match.
    assert runtime["version"] == main["version"] == fixitem.__version__
    assert runtime["dependencies"] == [d for d in main["dependencies"] if d.startswith("torch")]


def test_the_runtime_imports_only_torch_and_the_standard_library():
    tree = ast.parse((ROOT / "fixitem" / "runtime.py").read_text(encoding="utf-8"))
    modules = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            modules.add(node.module.split(".")[0])
    assert {m for m in modules if m not in sys.stdlib_module_names} == {"torch"}


def _run(args: list[str], cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME") and not k.startswith("FIXITEM_")}
    return subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)


def _torch_alone(folder: Path) -> Path:
    """A folder holding links to this environment's torch and what it requires, nothing else.

    A ``.pth`` file naming it gives a fresh venv the installed torch (pip sees it as
    installed) without copying 700 MB again: the venv still holds none of fixitem's tooling.
    """
    from importlib import metadata

    from packaging.requirements import Requirement

    folder.mkdir()
    todo, seen = ["torch"], set()
    while todo:
        name = todo.pop()
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue  # a requirement of another platform
        key = dist.metadata["Name"].lower().replace("_", "-")
        if key in seen:
            continue
        seen.add(key)
        for line in dist.requires or []:
            req = Requirement(line)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                todo.append(req.name)
        base = Path(dist.locate_file(""))
        for top in {Path(str(f)).parts[0] for f in dist.files or [] if not str(f).startswith("..")}:
            if (base / top).exists() and not (folder / top).exists() and top != "__pycache__":
                (folder / top).symlink_to(base / top)
    assert "torch" in seen and not {"libcst", "typer", "rich"} & seen
    return folder


@pytest.mark.slow
def test_the_runtime_alone_in_a_fresh_venv_runs_rewritten_code(tmp_path):
    # The repository's layout, as the runtime's build reads it: runtime/ beside fixitem/.
    source = tmp_path / "source"
    shutil.copytree(ROOT / "runtime", source / "runtime", ignore=shutil.ignore_patterns("build", "*.egg-info"))
    (source / "fixitem").mkdir()
    for name in ("__init__.py", "runtime.py"):
        shutil.copy(ROOT / "fixitem" / name, source / "fixitem" / name)
    app = tmp_path / "app"
    app.mkdir()
    shutil.copy(TRAIN, app / "original.py")
    shutil.copy(TRAIN, app / "train.py")
    fixitem.apply([app / "train.py"], isolated=True, cache=False)
    assert RUNTIME_IMPORT in (app / "train.py").read_text()

    venv = tmp_path / "venv"
    made = _run([sys.executable, "-m", "venv", str(venv)], tmp_path)
    assert made.returncode == 0, made.stderr
    python = str(venv / "bin" / "python")
    site = _run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], tmp_path)
    (Path(site.stdout.strip()) / "torch_alone.pth").write_text(f"{_torch_alone(tmp_path / 'torch_alone')}\n")
    # The runtime's requirement (torch) is met by the linked torch: pip installs the runtime alone.
    installed = _run([python, "-m", "pip", "install", "-q", "--disable-pip-version-check", "torch==2.13.0",
                      str(source / "runtime")], tmp_path, timeout=1500)
    assert installed.returncode == 0, installed.stderr[-3000:]

    probe = ("import importlib.util, fixitem, fixitem.runtime\n"
             f"print([m for m in {TOOLING!r} if importlib.util.find_spec(m)])\n"
             "print(getattr(fixitem, '__file__', None))\n")
    found = _run([python, "-c", probe], app)
    assert found.returncode == 0, found.stderr
    # No tooling came with it, and fixitem is a namespace holding runtime.py alone.
    assert found.stdout.splitlines() == ["[]", "None"]

    before = _run([python, "original.py"], app)
    after = _run([python, "train.py"], app)
    assert before.returncode == 0, before.stderr
    assert "step 5 loss" in before.stdout and "mean loss" in before.stdout
    assert (after.returncode, after.stdout, after.stderr) == (before.returncode, before.stdout, before.stderr)
