from __future__ import annotations

import ast
import importlib.util
import itertools
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

# Results are not kept between runs in tests (tests/test_cache.py turns it on
# where it is the subject): a test must see the code it runs, every time.
os.environ["FIXITEM_NO_CACHE"] = "1"

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"
_counter = itertools.count()


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_auto_num_workers(config):
    """``-n auto``: one worker per core, at most 8 (each imports torch; more only adds memory)."""
    return max(1, min(len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1, 8))


def run_side_by_side(*paths: Path) -> list[str]:
    """The output of each script, run side by side (independent processes), stderr merged into stdout."""
    env = {k: v for k, v in os.environ.items() if k != "FIXITEM_FLUSH_EVERY"}
    env["PYTHONUNBUFFERED"] = "1"
    procs = [subprocess.Popen([sys.executable, str(path)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True, cwd=path.parent, env=env) for path in paths]
    outputs = []
    for proc in procs:
        out, _ = proc.communicate(timeout=300)
        assert proc.returncode == 0, out
        outputs.append(out)
    return outputs


def load_module(path: Path):
    """Import a file under a unique module name (before and after must not clash).

    The source is compiled here, never read from or written to ``__pycache__``: a
    rewrite made within the same second that keeps the file's size (``2.0 if
    y.max().item() < 0.5 else 1.0`` and ``torch.where(y.max() < 0.5, 2.0, 1.0)``
    are both 36 characters) would otherwise load the bytecode of the file as it was."""
    name = f"_fixitem_test_{path.stem}_{next(_counter)}"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    exec(compile(path.read_bytes(), str(path), "exec"), module.__dict__)  # noqa: S102
    return module


def parsed_fixture_modules():
    """Each fixture module that decodes and parses, read as a module of a project is:
    (its path, its text, its tree)."""
    from fixitem.codemods.model.project import _decoded

    for path in sorted(FIXTURES.rglob("*.py")):
        text = _decoded(path.read_bytes())
        try:
            module = ast.parse(text)
        except (SyntaxError, ValueError, TypeError):
            continue  # (fixtures of files that do not parse or decode)
        yield path, text, module


@pytest.fixture
def copy_fixture(tmp_path):
    """Copy a file or folder from fixtures/ into a temporary folder."""

    def copy(relative: str) -> Path:
        source = FIXTURES / relative
        target = tmp_path / source.name
        if source.is_dir():
            shutil.copytree(source, target)
        else:
            shutil.copyfile(source, target)
        return target

    return copy


def commit_tree(root: Path) -> Path:
    """Make ``root`` a git repository with everything in it committed (skips the test without git)."""
    if shutil.which("git") is None:
        pytest.skip("git not installed")
    for args in (["init", "-q"], ["add", "."],
                 ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "before"]):
        subprocess.run(["git", *args], cwd=root, check=True, capture_output=True)
    return root


@pytest.fixture
def clean_default_recorder():
    """Runtime tests: start and end with nothing pending and the default flush count."""
    from fixitem import runtime

    runtime.flush()
    saved = runtime._default.flush_every, runtime._default.flush_after, runtime._default.clock
    runtime._default.flush_after = 1e9  # time never flushes here, however slow the machine
    runtime._timer.enabled = False  # nor the timer thread (its tests drive it by hand)
    runtime.run_now_while_replaced = False  # deferred under the test's capture too, to be read through it
    yield
    runtime.run_now_while_replaced = True
    runtime._timer.enabled = True
    runtime.flush()
    runtime._default.set_flush_every(saved[0])
    runtime._default.flush_after = saved[1]
    runtime._default.clock = saved[2]
