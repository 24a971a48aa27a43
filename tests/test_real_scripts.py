"""Real training scripts print the same text after ``apply`` and after ``apply --unsafe``.

Runs ``bench/real_scripts.py`` on three of its scripts (the PyTorch MNIST
example's train/test loops as schedulefree and pytorch-warmup ship them, and
opacus' MNIST example without differential privacy). Opt-in: it downloads pinned
sdists and installs their imports into ``~/.cache/fixitem-bench/real-scripts``
(once) and takes a few minutes::

    FIXITEM_NETWORK_TESTS=1 python -m pytest -s -m network tests/test_real_scripts.py

It is skipped when the download or installation fails (offline). Two fast
tests of the harness itself (masks, runner) run always.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench" / "real_scripts.py"
SCRIPTS = ["schedulefree/mnist", "pytorch-warmup/emnist", "opacus/mnist-nodp"]


def load_bench():
    spec = importlib.util.spec_from_file_location("real_scripts", BENCH)
    module = importlib.util.module_from_spec(spec)
    sys.modules["real_scripts"] = module
    spec.loader.exec_module(module)
    return module


def test_masks_hide_only_what_differs_between_two_runs(tmp_path):
    bench = load_bench()
    one = (f"{tmp_path}/run/x.py:12: UserWarning: w\n 50%|#####     | 2/4 [00:01<00:01,  1.52it/s]\n"
           "2026-12-01 09:00:01,123 INFO Epoch 1 took 1.25 s, loss 0.5 <object at 0x7f3a2b1c>\n")
    two = (f"{tmp_path}/run/x.py:13: UserWarning: w\n 50%|#####     | 2/4 [00:02<00:02, 12.50it/s]\n"
           "2026-12-01 09:00:07,456 INFO Epoch 1 took 3 s, loss 0.5 <object at 0x7f00aa11>\n")
    assert bench.mask(one, tmp_path / "run") == bench.mask(two, tmp_path / "run")
    # Values are not masked: a loss that changes is a difference.
    assert bench.mask(one, tmp_path) != bench.mask(one.replace("loss 0.5", "loss 0.6"), tmp_path)
    assert bench.mask("Accuracy: 9/64 (14.06%)", tmp_path) == "Accuracy: 9/64 (14.06%)"
    # tqdm pads a redrawn line to the width of the previous one.
    assert bench.mask(" 2/4 [00:01, 12.50it/s] \r", tmp_path) == bench.mask(" 2/4 [00:01,  9.80it/s]\r", tmp_path)
    assert bench.first_differences("a\nb\nc", "a\nB\nc") == ["-2: b", "+2: B"]


@pytest.mark.slow
def test_the_runner_compares_printed_text_and_tensorboard_calls(tmp_path):
    bench = load_bench()
    folder = tmp_path / "copy"
    folder.mkdir()
    (folder / "train.py").write_text(
        "import sys, torch\n"
        "from torch.utils.tensorboard import SummaryWriter\n"
        "w = SummaryWriter('runs')\n"
        "x = torch.randn(3)\n"
        "w.add_scalar('loss', x.sum(), 1)\n"
        "print('args', sys.argv[1:], open('out.txt', 'w').write('written'))\n"
    )
    script = bench.Script("own/train", "none", "train.py", ("--steps", "2"), stubs=("tensorboard",), timeout=120)
    first = bench.run_copy(script, folder, tmp_path / "no-site")
    (folder / "out.txt").unlink()
    second = bench.run_copy(script, folder, tmp_path / "no-site")
    assert first.returncode == 0 and not first.timed_out, first.text
    # Seeded by the runner: the same value both times; the file written is part of the text.
    assert first.text == second.text
    assert "[SummaryWriter.add_scalar] loss " in first.text and "args ['--steps', '2'] 7" in first.text
    assert "=== written: copy/out.txt\nwritten" in first.text


@pytest.mark.network
@pytest.mark.slow
@pytest.mark.skipif(os.environ.get("FIXITEM_NETWORK_TESTS") != "1",
                    reason="downloads sdists: set FIXITEM_NETWORK_TESTS=1 to run")
def test_real_scripts_print_the_same_text_in_both_modes(tmp_path):
    out = tmp_path / "result.json"
    run = subprocess.run([sys.executable, str(BENCH), "--scripts", ",".join(SCRIPTS), "--json", str(out)],
                         capture_output=True, text=True, timeout=1800)
    print(run.stdout)
    if run.returncode == 2:
        pytest.skip(f"setup failed (offline?): {run.stderr.strip()[-500:]}")
    rows = {row["script"]: row for row in json.loads(out.read_text())["scripts"]}
    assert sorted(rows) == sorted(SCRIPTS)
    for name, row in rows.items():
        assert "error" not in row, (name, row.get("error"))
        # The harness runs the original to its end, with output to compare.
        assert row["ran"] and row["lines"] > 3, (name, row["tail_before"])
        assert row["fixes_unsafe"], f"{name}: fixitem no longer fixes anything here; the check would be empty"
        for mode in ("safe", "unsafe"):
            assert not row["crash"][mode], (name, mode, row.get(f"tail_{mode}"))
            assert row[f"identical_{mode}"], (name, mode, row[f"differences_{mode}"])
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
