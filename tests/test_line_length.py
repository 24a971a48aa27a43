"""Rewritten lines fit the project's line length, read from its ruff or black configuration."""

from __future__ import annotations

from pathlib import Path

import pytest
from fixitem.codemods.driver.line_length import DEFAULT, forget, line_length

import fixitem

TRAIN = (
    "import torch\n\n\n"
    "def train(model, x):\n"
    "    for step in range(2):\n"
    "        loss = model(x).sum()\n"
    '        print(f"step {step} loss {loss.item():.4f}")\n'
    "\n\n"
    'if __name__ == "__main__":\n'
    "    train(torch.nn.Linear(2, 1), torch.ones(3, 2))\n"
)
ONE_LINE = '        deferred.record(lambda step, loss: print(f"step {step} loss {loss:.4f}"), step, loss)\n'
WRAPPED = '        deferred.record(\n            lambda step, loss: print(f"step {step} loss {loss:.4f}"),\n'


@pytest.fixture(autouse=True)
def _fresh():
    forget()
    yield
    forget()


def _added(result: fixitem.RunResult) -> str:
    """The lines the diff of the run's one file adds, as text."""
    (changed,) = result.files
    return "".join(line[1:] + "\n" for line in changed.diff.splitlines() if line.startswith("+ "))


def _file(folder: Path, name: str = "train.py") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(TRAIN)
    return path


@pytest.mark.parametrize(
    ("name", "text", "expected"),
    [
        ("ruff.toml", "line-length = 120\n", 120),
        (".ruff.toml", "line-length = 100\n", 100),
        ("pyproject.toml", "[tool.ruff]\nline-length = 119\n", 119),
        ("pyproject.toml", "[tool.black]\nline-length = 110\n", 110),
        ("pyproject.toml", "[tool.ruff]\nline-length = 119\n[tool.black]\nline-length = 110\n", 119),
        ("pyproject.toml", "[tool.ruff.lint]\nselect = ['E']\n", DEFAULT),  # ruff's table, its default
        ("ruff.toml", "line-length = 0\n", DEFAULT),  # not a length to wrap at
        ("ruff.toml", "line-length = 'long'\n", DEFAULT),
        ("pyproject.toml", "[tool.ruff\n", DEFAULT),  # not TOML: as if absent
    ],
)
def test_the_nearest_configuration_says_the_length(tmp_path, name, text, expected):
    (tmp_path / ".git").mkdir()
    (tmp_path / name).write_text(text)
    assert line_length(_file(tmp_path / "src" / "pkg")) == expected


def test_a_pyproject_without_ruff_or_black_does_not_stop_the_search(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[tool.ruff]\nline-length = 120\n")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "pyproject.toml").write_text("[project]\nname = 'sub'\n")
    assert line_length(_file(tmp_path / "sub")) == 120
    # A repository's root ends the search: a configuration above it is another project's.
    (tmp_path / "sub" / ".git").mkdir()
    forget()
    assert line_length(_file(tmp_path / "sub")) == DEFAULT


def test_a_rewrite_fits_the_projects_line_length(tmp_path):
    (tmp_path / ".git").mkdir()
    path = _file(tmp_path)
    wrapped = fixitem.apply([path], write=False, cache=False)
    assert WRAPPED in _added(wrapped)  # 93 columns: over black's 88
    (tmp_path / "pyproject.toml").write_text("[tool.ruff]\nline-length = 120\n")
    fitted = fixitem.apply([path], write=False, cache=False)
    assert ONE_LINE in _added(fitted)
    # --isolated reads no configuration, this one neither.
    isolated = fixitem.apply([path], write=False, cache=False, isolated=True)
    assert WRAPPED in _added(isolated)


def test_a_kept_result_is_not_reused_for_another_line_length(tmp_path):
    (tmp_path / ".git").mkdir()
    path = _file(tmp_path)
    cache = tmp_path / "cache"
    assert WRAPPED in _added(fixitem.apply([path], write=False, cache=cache))
    (tmp_path / "ruff.toml").write_text("line-length = 120\n")
    assert ONE_LINE in _added(fixitem.apply([path], write=False, cache=cache))


def test_a_call_in_the_middle_of_a_line_is_not_wrapped_there(tmp_path):
    # Wrapped at 88 columns, ``torch.where(`` would open in the middle of the dict and close
    # before its next entry; the long line is left to the project's formatter. A call that ends
    # its line is wrapped as black wraps it.
    path = tmp_path / "step.py"
    path.write_text(
        "import torch\n\n\n"
        "def step(x: torch.Tensor, y: torch.Tensor):\n"
        "    logs = {}\n"
        '    logs.update({"ratio_with_a_long_name": x * 0.5 if y.sum() > 0 else x * 0.25, "other": x.sum()})\n'
        "    ratio_with_a_long_name_that_is_long = x * 0.5 if y.sum() > 0 else x * 0.2500000000000000\n"
        "    return logs, ratio_with_a_long_name_that_is_long\n"
    )
    added = _added(fixitem.apply([path], write=False, cache=False, isolated=True))
    assert '    logs.update({"ratio_with_a_long_name": torch.where(y.sum() > 0, x * 0.5, x * 0.25), "other": x.sum()})\n' in added
    assert "    ratio_with_a_long_name_that_is_long = torch.where(\n        y.sum() > 0,\n" in added


LONG = (
    "import torch\n\n\n"
    "def train(writer, values: torch.Tensor, step: int):\n"
    "    if step % 100 == 0:\n"
    "        if step > 0:\n"
    '            writer.add_scalar("losses/qf1_values", values.mean().item(), step)\n'
    '            print(f"step {step:>8d} qf1 {values.mean().item():.6f} qf2 {values.max().item():.6f} '
    'min {values.min().item():.6f}")\n'
)


def test_a_lambda_whose_line_is_too_long_has_its_call_wrapped(tmp_path):
    """cleanrl's lambdas ran to 126 columns: the call in the lambda is wrapped as black
    wraps it, its arguments on one line below when they fit, else one per line."""
    path = _file(tmp_path)
    path.write_text(LONG)
    fixitem.apply([path], isolated=True, cache=False)
    text = path.read_text()
    assert (
        "                lambda values_mean, step: writer.add_scalar(\n"
        '                    "losses/qf1_values", values_mean, step\n'
        "                ),\n"
    ) in text
    # One argument, too long itself (a string is not split): on its own line, as black leaves it.
    assert ("                lambda step, values_mean, values_max, values_min: print(\n"
            '                    f"step {step:>8d} qf1 {values_mean:.6f} qf2 {values_max:.6f} min {values_min:.6f}"\n'
            "                ),\n") in text
    assert [line for line in text.splitlines() if len(line) > DEFAULT] == [
        '                    f"step {step:>8d} qf1 {values_mean:.6f} qf2 {values_max:.6f} min {values_min:.6f}"']
    compile(text, str(path), "exec")
