"""fixitem on a real code base: the timm wheel, downloaded and pinned.

Opt-in: runs only with ``FIXITEM_NETWORK_TESTS=1`` (it downloads a wheel and
takes minutes), and is skipped when ``pip download`` fails (offline)::

    FIXITEM_NETWORK_TESTS=1 python -m pytest -s -m network tests/test_real_code.py

The wheel is cached in ``~/.cache/fixitem-tests``. ``-s`` shows the figures.
"""

from __future__ import annotations

import ast
import collections
import os
import shutil
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest

import fixitem

pytestmark = [
    pytest.mark.network,
    pytest.mark.slow,
    pytest.mark.skipif(os.environ.get("FIXITEM_NETWORK_TESTS") != "1",
                       reason="downloads a wheel: set FIXITEM_NETWORK_TESTS=1 to run"),
]

CACHE = Path(os.environ.get("FIXITEM_TEST_CACHE", Path.home() / ".cache" / "fixitem-tests"))
PACKAGES = ["timm==1.0.31"]


def download(requirement: str) -> Path:
    name, version = requirement.split("==")
    CACHE.mkdir(parents=True, exist_ok=True)
    found = sorted(CACHE.glob(f"{name}-{version}-*.whl"))
    if found:
        return found[0]
    run = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", requirement,
                          "-d", str(CACHE)], capture_output=True, text=True, timeout=600)
    found = sorted(CACHE.glob(f"{name}-{version}-*.whl"))
    if run.returncode != 0 or not found:
        pytest.skip(f"pip download {requirement} failed (offline?): {run.stderr.strip()[-300:]}")
    return found[0]


@pytest.mark.parametrize("requirement", PACKAGES)
def test_scan_and_apply_on_a_real_package(requirement, tmp_path):
    wheel = download(requirement)
    original = tmp_path / "original"
    with zipfile.ZipFile(wheel) as z:
        z.extractall(original)
    work = tmp_path / "work"
    shutil.copytree(original, work)

    start = time.perf_counter()
    scanned = fixitem.scan([work])
    scan_s = time.perf_counter() - start
    # Errors are allowed only for files Python itself cannot parse.
    for result in scanned.files:
        if result.error:
            with pytest.raises(SyntaxError):
                ast.parse(result.path.read_bytes())

    start = time.perf_counter()
    applied = fixitem.apply([work], unsafe=True)
    apply_s = time.perf_counter() - start
    assert [r.error for r in applied.files if r.error] == [r.error for r in scanned.files if r.error]
    rewritten = {r.path.resolve() for r in applied.changed}
    for result in applied.changed:
        assert result.written
        ast.parse(result.path.read_bytes(), str(result.path))  # every rewritten file parses

    second = fixitem.apply([work], unsafe=True, write=False)
    assert second.diff == "", "a second apply changes files:\n" + second.diff[:3000]

    for path in original.rglob("*"):
        if path.is_file():
            copy = work / path.relative_to(original)
            if copy.resolve() not in rewritten:
                assert copy.read_bytes() == path.read_bytes(), f"{copy} changed without a fix"

    by_rule = collections.Counter(f.rule for f in scanned.findings)
    applied_by_rule = collections.Counter(f.rule for f in applied.applied)
    print(f"\n{requirement}: {len(scanned.files)} files, {len(scanned.findings)} findings "
          f"{dict(sorted(by_rule.items()))}; apply --unsafe: {len(applied.applied)} fixes "
          f"{dict(sorted(applied_by_rule.items()))} in {len(rewritten)} files; "
          f"{len(scanned.errors)} syntax errors; scan {scan_s:.1f} s, apply {apply_s:.1f} s")
