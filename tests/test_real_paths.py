"""A file's real path is worked out once per run (codemods/real_paths.py), and never
answered from another folder's view or from before the run."""

from __future__ import annotations

import os
from pathlib import Path

from fixitem.codemods import real_paths
from fixitem.codemods.driver.discovery import discover
from fixitem.codemods.real_paths import real_path


def test_a_relative_path_is_resolved_from_the_current_folder(tmp_path, monkeypatch):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    real_paths.forget()
    monkeypatch.chdir(tmp_path / "a")
    assert real_path("x.py") == (tmp_path / "a" / "x.py").resolve()
    monkeypatch.chdir(tmp_path / "b")  # the same text names another file now
    assert real_path("x.py") == (tmp_path / "b" / "x.py").resolve()


def test_links_are_followed_and_a_new_run_asks_again(tmp_path):
    (tmp_path / "one.py").write_text("x = 1\n")
    (tmp_path / "two.py").write_text("x = 2\n")
    link = tmp_path / "link.py"
    link.symlink_to(tmp_path / "one.py")
    discover([link])
    assert real_path(link) == (tmp_path / "one.py").resolve()
    link.unlink()
    link.symlink_to(tmp_path / "two.py")
    assert real_path(link) == (tmp_path / "one.py").resolve()  # kept within the run
    discover([link])  # the next run's discovery
    assert real_path(link) == (tmp_path / "two.py").resolve()
    real_paths.forget()
    assert real_path(os.fspath(link)) == (tmp_path / "two.py").resolve()


def test_discovery_keeps_each_file_s_real_path_through_linked_folders_and_files(tmp_path):
    (tmp_path / "src" / "pkg").mkdir(parents=True)
    (tmp_path / "src" / "pkg" / "a.py").write_text("x = 1\n")
    (tmp_path / "src" / "b.py").write_text("x = 2\n")
    (tmp_path / "tree").mkdir()
    (tmp_path / "tree" / "linked").symlink_to(tmp_path / "src" / "pkg", target_is_directory=True)
    (tmp_path / "tree" / "c.py").symlink_to(tmp_path / "src" / "b.py")
    (tmp_path / "tree" / "d.py").write_text("x = 3\n")
    # (A linked folder is not walked; a file named through it is taken.)
    found = discover([tmp_path / "tree", tmp_path / "tree" / "linked" / "a.py"])
    assert sorted(p.name for p in found) == ["a.py", "c.py", "d.py"]
    for path in found:  # (a folder's real path is worked out once for its files)
        assert real_path(path) == Path(os.path.realpath(path))
    assert real_path(tmp_path / "tree" / "linked" / "a.py") == (tmp_path / "src" / "pkg" / "a.py").resolve()
