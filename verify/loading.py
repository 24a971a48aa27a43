"""Load the before and after versions of a user's module side by side.

Both versions usually share a file name (``model.py``) and may import sibling
modules of their folder (``from helpers import scale``). Each version is
loaded under a unique module name, with its folder first on ``sys.path`` for
the duration of the import only; sibling modules that the import brings into
``sys.modules`` are taken out again afterwards, and any that were there before
are set aside during the import and put back, so the second version imports
its own siblings rather than reusing the first version's.

Limitation: an ``import`` executed later, inside a function at call time, runs
without the folder on ``sys.path`` and resolves against whatever is importable
then.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib.util
import itertools
import os
import shutil
import sys
import tempfile
import traceback
import types
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from .errors import UsageError  # noqa: F401  (re-exported)

_counter = itertools.count()

#: Prefix of the unique names the user's versions are imported under.
MODULE_PREFIX = "_fixitem_verify_"




@dataclass
class LoadedVersion:
    """One version of the user's module, with what its factory returned."""

    label: str  # "before" or "after"
    path: Path  # the file the code was loaded from (a temp file for git refs)
    display_path: str  # what to show the user
    module: types.ModuleType
    model: object
    inputs: list[tuple]


def _is_under(file: str | None, folders: Sequence[Path]) -> bool:
    if not file:
        return False
    try:
        resolved = Path(file).resolve()
    except OSError:
        return False
    return any(resolved.is_relative_to(folder) for folder in folders)


@contextlib.contextmanager
def _isolated_imports(folders: Sequence[Path], hide: Sequence[Path] = ()) -> Iterator[None]:
    """Put ``folders`` first on sys.path and keep their modules private.

    Modules loaded from ``hide`` (the other version's tree) are set aside too,
    so that ``import pkg`` finds this version's ``pkg``.
    """
    folders = [f.resolve() for f in folders]
    hidden = [*folders, *(f.resolve() for f in hide)]
    # Modules already loaded from these folders (a previous version, or the
    # user's own session) are set aside so this import gets fresh copies.
    set_aside = {
        name: mod
        for name, mod in list(sys.modules.items())
        if not name.startswith(MODULE_PREFIX) and _is_under(getattr(mod, "__file__", None), hidden)
    }
    for name in set_aside:
        del sys.modules[name]
    before = set(sys.modules)
    saved_path = list(sys.path)
    sys.path[:0] = [str(f) for f in folders]
    importlib.invalidate_caches()
    # The files change between loads, within a second and sometimes to the same size (a fix,
    # reverted, another fix): bytecode written by one load would pass Python's check (source
    # mtime in seconds, and size) in the next and run the old code.
    saved_dont_write = sys.dont_write_bytecode
    sys.dont_write_bytecode = True
    try:
        yield
    finally:
        sys.dont_write_bytecode = saved_dont_write
        sys.path[:] = saved_path
        for name in set(sys.modules) - before:
            mod = sys.modules.get(name)
            if not name.startswith(MODULE_PREFIX) and _is_under(getattr(mod, "__file__", None), folders):
                del sys.modules[name]
        sys.modules.update(set_aside)
        importlib.invalidate_caches()


def _user_traceback(exc: BaseException, user_files: Sequence[Path]) -> str:
    """The traceback of ``exc`` starting at the first frame of user code."""
    tb = exc.__traceback__
    wanted = {str(p.resolve()) for p in user_files}
    folders = [p.resolve().parent for p in user_files]
    start = tb
    while start is not None:
        fname = start.tb_frame.f_code.co_filename
        if fname in wanted or _is_under(fname, folders):
            break
        start = start.tb_next
    lines = traceback.format_exception(type(exc), exc, start or tb)
    return "".join(lines).rstrip()


def _exec_module(path: Path, label: str) -> types.ModuleType:
    if not path.is_file():
        raise UsageError(f"{label} file not found: {path}")
    path = path.resolve()
    safe_stem = "".join(c if c.isalnum() else "_" for c in path.stem)
    name = f"{MODULE_PREFIX}{label}_{safe_stem}_{next(_counter)}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise UsageError(f"cannot import {label} file {path}: not a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses and pickling look themselves up here
    try:
        # Compiled from the source, never from ``__pycache__`` (see ``_isolated_imports``).
        exec(compile(path.read_bytes(), str(path), "exec"), module.__dict__)  # noqa: S102
    except BaseException as exc:  # noqa: BLE001 - user code may raise anything
        sys.modules.pop(name, None)
        if isinstance(exc, KeyboardInterrupt):
            raise
        raise UsageError(
            f"importing the {label} version ({path}) raised {type(exc).__name__}: {exc}",
            _user_traceback(exc, [path]),
        ) from exc
    return module


def load_version(
    path: Path,
    label: str,
    factory: str,
    search_paths: Sequence[Path] = (),
    display_path: str | None = None,
) -> LoadedVersion:
    """Import the file at ``path`` under a unique module name and call its factory.

    The file's folder, then ``search_paths``, are first on ``sys.path`` while
    the module is imported and the factory runs. Raises :class:`UsageError`
    (with the user's traceback) when the file is missing, the import or the
    factory fails, or the factory is missing or returns something unusable.
    """
    path = Path(path)
    folders = [path.resolve().parent, *[Path(p) for p in search_paths]]
    with _isolated_imports(folders):
        module = _exec_module(path, label)
        model, inputs = call_factory(module, factory, label, path.resolve())
    return LoadedVersion(
        label=label,
        path=path.resolve(),
        display_path=display_path or display(path),
        module=module,
        model=model,
        inputs=inputs,
    )


@dataclass(frozen=True)
class FactorySpec:
    """A factory outside the rewritten file: ``path/to/file.py:function`` or ``package.module:function``."""

    target: str
    function: str

    @property
    def is_file(self) -> bool:
        return self.target.endswith(".py") or "/" in self.target or os.sep in self.target

    def __str__(self) -> str:
        return f"{self.target}:{self.function}"


def parse_factory(spec: str) -> FactorySpec | None:
    """None for a function of the rewritten file (``make``); else where the factory lives."""
    if ":" not in spec:
        if not spec.isidentifier():
            raise UsageError(f"--factory must be a function name, FILE.py:FUNCTION or MODULE:FUNCTION; got {spec!r}")
        return None
    target, _, function = spec.rpartition(":")
    parsed = FactorySpec(target, function)
    if not function.isidentifier() or not target or (
        not parsed.is_file and not all(part.isidentifier() for part in target.split("."))
    ):
        raise UsageError(f"--factory must be a function name, FILE.py:FUNCTION or MODULE:FUNCTION; got {spec!r}")
    return parsed


def load_project_version(spec: FactorySpec, root: Path, label: str, display_path: str,
                         hide: Sequence[Path] = ()) -> LoadedVersion:
    """Import the factory of the project tree at ``root`` (this version's copy of it) and call it.

    ``root`` is first on ``sys.path`` (and a factory file's own folder before
    it) while the factory is imported and runs; modules of ``hide`` (the other
    version's tree) are set aside, so every module of the project resolves to
    this version.
    """
    root = Path(root).resolve()
    if spec.is_file:
        path = (root / spec.target).resolve()
        if not path.is_file():
            raise UsageError(f"factory file of the {label} version not found: {path}")
        folders = [path.parent, root]
    else:
        folders = [root]
    with _isolated_imports(folders, hide):
        if spec.is_file:
            module = _exec_module(path, label)
        else:
            try:
                module = importlib.import_module(spec.target)
            except BaseException as exc:  # noqa: BLE001 - user code may raise anything
                if isinstance(exc, KeyboardInterrupt):
                    raise
                raise UsageError(f"importing {spec.target} for the {label} version raised "
                                 f"{type(exc).__name__}: {exc}", _user_traceback(exc, [root / "-"])) from exc
            path = Path(getattr(module, "__file__", None) or root)
            if not _is_under(str(path), [root]):
                raise UsageError(f"{spec.target} of the {label} version was imported from {path}, outside its "
                                 f"tree {root} (run verify from the project's folder)")
        model, inputs = call_factory(module, spec.function, label, path.resolve())
    return LoadedVersion(label=label, path=path.resolve(), display_path=display_path, module=module,
                         model=model, inputs=inputs)


def write_temp_source(source: str, file_name: str, label: str) -> Path:
    """Write ``source`` into a fresh temp folder as ``file_name``.

    Used for the before version read from git; the file is kept until the
    process exits so that tracebacks and Dynamo can still read its source.
    """
    folder = Path(tempfile.mkdtemp(prefix=f"fixitem-verify-{label}-"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    path = folder / file_name
    path.write_text(source, encoding="utf-8")
    return path


def _normalise_inputs(raw: object, factory: str) -> list[tuple]:
    if isinstance(raw, tuple):
        return [raw]
    if isinstance(raw, list) and raw and all(isinstance(item, tuple) for item in raw):
        return list(raw)
    raise UsageError(
        f"factory {factory}() must return (model, inputs) where inputs is a tuple of "
        f"positional arguments or a non-empty list of such tuples; got inputs of type "
        f"{type(raw).__name__}"
    )


def call_factory(module: types.ModuleType, factory: str, label: str, path: Path) -> tuple[object, list[tuple]]:
    """Call ``module.<factory>()`` with the RNG seeded; check what it returns."""
    fn = getattr(module, factory, None)
    if fn is None:
        available = sorted(
            n for n, v in vars(module).items()
            if callable(v) and not n.startswith("_") and getattr(v, "__module__", None) == module.__name__
        )
        raise UsageError(
            f"factory {factory!r} not found in the {label} version ({path}); "
            f"functions defined there: {', '.join(available) or 'none'}"
        )
    if not callable(fn):
        raise UsageError(f"{factory!r} in the {label} version ({path}) is not callable")
    torch.manual_seed(0)
    try:
        result = fn()
    except BaseException as exc:  # noqa: BLE001
        if isinstance(exc, KeyboardInterrupt):
            raise
        raise UsageError(
            f"factory {factory}() of the {label} version raised {type(exc).__name__}: {exc}",
            _user_traceback(exc, [path]),
        ) from exc
    if not (isinstance(result, tuple) and len(result) == 2):
        raise UsageError(f"factory {factory}() must return a pair (model, inputs); got {type(result).__name__}")
    model, raw_inputs = result
    if not callable(model):
        raise UsageError(f"factory {factory}() returned a model that is not callable: {type(model).__name__}")
    return model, _normalise_inputs(raw_inputs, factory)


def display(path: Path) -> str:
    try:
        return os.path.relpath(path)
    except ValueError:
        return str(path)
