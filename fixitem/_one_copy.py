"""Keep one copy of each module when ``codemods`` / ``verify`` are imported by their folder names.

The repository keeps the engine in ``codemods/`` and the verify stage in
``verify/``, installed as ``fixitem.codemods`` and ``fixitem.verify``. Run from
the repository root, ``import codemods.rule`` would otherwise load a second
copy of ``fixitem.codemods.rule`` (and ``Rule is Rule`` would be False). When a
package is imported under its folder name, :func:`alias_package` makes that
name, and every submodule below it, the very module of the installed name.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys


class _AliasLoader(importlib.abc.Loader):
    def __init__(self, real_name: str) -> None:
        self.real_name = real_name

    def create_module(self, spec):
        return importlib.import_module(self.real_name)

    def exec_module(self, module) -> None:  # already executed under its real name
        pass


class _AliasFinder(importlib.abc.MetaPathFinder):
    def __init__(self, alias: str, real: str) -> None:
        self.prefix = alias + "."
        self.real = real

    def find_spec(self, name, path=None, target=None):
        if not name.startswith(self.prefix):
            return None
        real_name = self.real + name[len(self.prefix) - 1:]
        return importlib.machinery.ModuleSpec(name, _AliasLoader(real_name))


def alias_package(alias: str, real: str) -> None:
    """Make ``alias`` and ``alias.*`` the modules ``real`` and ``real.*``."""
    sys.modules[alias] = importlib.import_module(real)
    if not any(isinstance(f, _AliasFinder) and f.prefix == alias + "." for f in sys.meta_path):
        sys.meta_path.insert(0, _AliasFinder(alias, real))
