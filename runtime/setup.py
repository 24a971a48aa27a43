"""Build fixitem-runtime from ``../fixitem/runtime.py``, without ``fixitem/__init__.py``.

setuptools adds a package's ``__init__.py`` to the modules named in
``py-modules``; leaving it out keeps the one file that both distributions
install, ``fixitem/runtime.py``, the only file they share.
"""

from setuptools import setup
from setuptools.command.build_py import build_py


class RuntimeOnly(build_py):
    def find_modules(self):
        return [(package, module, path) for package, module, path in super().find_modules()
                if module != "__init__"]


setup(cmdclass={"build_py": RuntimeOnly})
