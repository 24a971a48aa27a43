"""Real training and evaluation scripts, run before and after ``fixitem.apply``.

    python bench/real_scripts.py [--scripts NAME,...] [--json out.json] [--jobs N]
                                 [--keep DIR] [--list]

The corpus is a table of scripts that PyPI distributions ship (sdists or wheels,
pinned by exact version), downloaded at run time and cached in
``~/.cache/fixitem-bench/real-scripts/`` (``FIXITEM_BENCH_CACHE`` moves it);
their code is never part of this repository. For each script:

1. **Download** the pinned distribution (``pip download --no-deps``) and
   extract it; **install** the third-party packages the scripts import, pinned,
   with ``pip install --no-deps --target`` into the cache (once; never into the
   running environment; torch, numpy, scipy and sympy are the environment's own).
2. **Copy** the script's folder three times and rewrite the script (and the
   local modules it imports) in two copies in place: ``fixitem.apply(files,
   isolated=True)`` (safe fixes, the default mode) and ``fixitem.apply(files,
   unsafe=True, isolated=True)``.
3. **Run** the original and both rewritten copies (a copy that ``apply`` left
   unchanged is not run again unless ``--run-unchanged``), each in its own
   subprocess with a timeout, through this file's ``_run`` runner: tiny
   settings (the arguments and environment of the table below), fake data,
   one torch thread, fixed seeds (``random``, ``numpy`` and ``torch`` seeded
   with 0 before the script starts; scripts seed themselves too),
   ``PYTHONUNBUFFERED=1`` (stdout and stderr go to one pipe in the order they are
   written), ``TQDM_MININTERVAL=0`` (a progress bar redraws at every step, not
   when enough time has passed) and ``FIXITEM_FLUSH_EVERY`` unset (the
   runtime's default flushing).
4. **Compare** exit status and the text of stdout+stderr (followed by the text
   files the run wrote: ``.txt``, ``.csv``, ``.log``, ``.json``, ...), exactly, after the
   masks that ``fixitem verify --run`` applies by default
   (:data:`fixitem.verify.masks.DEFAULT_MASKS`), which hide only what differs
   between two runs of one program: elapsed times and rates, clock times and
   dates, memory addresses, trailing spaces, and the line numbers that warnings
   and tracebacks show (a rewritten file has an added import line); and the folder
   a copy runs in.

The runner gives scripts fake data, never anything else: ``torchvision``'s
compiled operators do not load beside the environment's torch, so the runner
marks ``torchvision._meta_registrations`` (the only module that needs them at
import) as loaded, and replaces the downloading datasets (``MNIST``,
``FashionMNIST``, ``CIFAR10``, ``CIFAR100``) with deterministic random images of
the same shape and type; ``torch.utils.tensorboard.SummaryWriter`` becomes a
writer that prints each call (tag, step, the value as a float or the tensor's
shape), so that logged values are compared too; ``torch_cluster.radius_graph``
and ``torch_scatter.scatter`` (compiled packages built for other torch versions)
become plain-torch versions.

Output: a table (script, fixes applied by rule in each mode, identical before vs
safe and before vs unsafe, crash, seconds) and, for each difference, the first
differing lines; the diffs are kept under the cache (``--keep DIR`` keeps the
whole work folder). ``--json`` writes the same data. Exit status: 0 when every
rewritten run prints the same text and ends the same way, 1 when a script
differs or crashes after but not before, 2 on usage, download or installation
errors. On 2 cores the corpus runs in about 3 minutes (5 when the cores are
shared; ``--run-unchanged`` adds little: those runs overlap); the first run
also downloads about 10 MB of sources and installs about 55 MB of packages
(a minute or two).
"""

from __future__ import annotations

import argparse
import collections
import concurrent.futures
import difflib
import hashlib
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import zipfile
from pathlib import Path
from typing import Any, NamedTuple

HERE = Path(__file__).resolve()
CACHE = Path(os.environ.get("FIXITEM_BENCH_CACHE", Path.home() / ".cache" / "fixitem-bench")) / "real-scripts"


class Dist(NamedTuple):
    requirement: str  # NAME==VERSION, exact
    kind: str  # "sdist" or "wheel"


# The distributions the scripts come from.
DISTS = {
    "opacus": Dist("opacus==1.6.0", "sdist"),
    "torch-optimizer": Dist("torch-optimizer==0.3.0", "sdist"),
    "schedulefree": Dist("schedulefree==1.4.1", "sdist"),
    "e3nn": Dist("e3nn==0.6.0", "sdist"),
    "pytorch-ignite": Dist("pytorch-ignite==0.5.5", "sdist"),
    "pytorch-warmup": Dist("pytorch-warmup==0.2.0", "sdist"),
}

# What the scripts import besides torch, numpy and scipy (the environment's own), with
# their dependencies, pinned. Installed with --no-deps into one folder of the cache.
SITE_PINS = [
    "torchvision==0.29.1", "pillow==13.0.0", "tqdm==4.70.1",
    "opacus==1.6.0", "opt_einsum==3.4.0",
    "e3nn==0.6.0", "opt_einsum_fx==0.1.4",
    "torch-optimizer==0.3.0", "pytorch_ranger==0.1.1",
    "schedulefree==1.4.1",
    "pytorch-ignite==0.5.5", "pytorch-warmup==0.2.0",
    "torch_geometric==2.8.1", "xxhash==4.1.0", "psutil==7.2.2",
    # imported at start-up by opacus (scipy) and torch_geometric (requests):
    # pinned here so that the harness does not depend on what the interpreter holds
    "scipy==1.17.1", "requests==2.34.2", "urllib3==2.7.0", "idna==3.13",
    "charset-normalizer==3.4.7", "certifi==2026.5.20",
]


class Script(NamedTuple):
    name: str
    dist: str  # key of DISTS
    path: str  # the script, relative to the distribution's root
    args: tuple[str, ...] = ()
    env: dict[str, str] = {}  # FIXITEM_BENCH_FAKE_TRAIN / _TEST: sizes of the fake data sets
    stubs: tuple[str, ...] = ("torchvision",)
    timeout: float = 300.0
    modules: tuple[str, ...] = ()  # modules of the script's folder that it imports: rewritten too


# The harness configuration: how each script is run small. The folder of the script is
# copied; the script and the local modules it imports (``modules``) are rewritten.
SCRIPTS = [
    Script("opacus/mnist", "opacus", "examples/mnist.py",
           ("--device", "cpu", "-n", "2", "--batch-size", "32", "--test-batch-size", "64",
            "--n-runs", "1", "--data-root", "data"),
           {"FIXITEM_BENCH_FAKE_TRAIN": "128", "FIXITEM_BENCH_FAKE_TEST": "64"}),
    Script("opacus/mnist-nodp", "opacus", "examples/mnist.py",
           ("--device", "cpu", "-n", "2", "--batch-size", "32", "--test-batch-size", "64",
            "--n-runs", "1", "--disable-dp", "--data-root", "data"),
           {"FIXITEM_BENCH_FAKE_TRAIN": "128", "FIXITEM_BENCH_FAKE_TEST": "64"}),
    Script("opacus/dcgan", "opacus", "examples/dcgan.py",
           ("--data-root", "data", "--device", "cpu", "--epochs", "1",
            "--batch-size", "8", "--imageSize", "64", "--nz", "8", "--ngf", "8", "--ndf", "8",
            "--manualSeed", "1", "--outf", "out", "--workers", "0", "--disable-dp"),
           {"FIXITEM_BENCH_FAKE_TRAIN": "240", "FIXITEM_BENCH_FAKE_TEST": "16"}),
    Script("opacus/cifar10", "opacus", "examples/cifar10.py",
           ("--device", "cpu", "--epochs", "1", "--batch-size", "32", "--batch-size-test", "64",
            "--print-freq", "1", "--workers", "0", "--seed", "0", "--data-root", "data",
            "--log-dir", "logs", "--checkpoint-file", "checkpoint", "--lr-schedule", "constant"),
           {"FIXITEM_BENCH_FAKE_TRAIN": "96", "FIXITEM_BENCH_FAKE_TEST": "64"}),
    Script("torch-optimizer/mnist", "torch-optimizer", "examples/mnist.py", (),
           {"FIXITEM_BENCH_FAKE_TRAIN": "128", "FIXITEM_BENCH_FAKE_TEST": "100"},
           ("torchvision", "tensorboard")),
    Script("schedulefree/mnist", "schedulefree", "examples/mnist/main.py",
           ("--epochs", "2", "--batch-size", "32", "--test-batch-size", "64", "--no-cuda",
            "--log-interval", "2"),
           {"FIXITEM_BENCH_FAKE_TRAIN": "192", "FIXITEM_BENCH_FAKE_TEST": "64"}),
    Script("e3nn/tetris_gate", "e3nn", "examples/tetris_gate.py", stubs=("torch_cluster",)),
    Script("e3nn/tetris_polynomial", "e3nn", "examples/tetris_polynomial.py", stubs=("torch_cluster",)),
    Script("pytorch-warmup/emnist", "pytorch-warmup", "examples/emnist/main.py",
           ("--batch-size", "32", "--test-batch-size", "64", "--epochs", "2", "--log-interval", "2",
            "--no-gpu"),
           {"FIXITEM_BENCH_FAKE_TRAIN": "128", "FIXITEM_BENCH_FAKE_TEST": "64"}),
    Script("ignite/mnist", "pytorch-ignite", "examples/mnist/mnist.py",
           ("--batch_size", "32", "--val_batch_size", "64", "--epochs", "2", "--log_interval", "2"),
           {"FIXITEM_BENCH_FAKE_TRAIN": "128", "FIXITEM_BENCH_FAKE_TEST": "64"}),
    Script("ignite/mnist_with_tqdm_logger", "pytorch-ignite", "examples/mnist/mnist_with_tqdm_logger.py",
           ("--batch_size", "32", "--val_batch_size", "64", "--epochs", "2"),
           {"FIXITEM_BENCH_FAKE_TRAIN": "128", "FIXITEM_BENCH_FAKE_TEST": "64"}),
]

def mask(text: str, folder: Path) -> str:
    """The text with ``fixitem verify --run``'s default masks applied and the run's folder replaced by ``<dir>``."""
    # Imported here: the runner below imports nothing of fixitem.
    from fixitem.verify.masks import DEFAULT_MASKS

    text = text.replace(str(folder), "<dir>")
    for one in DEFAULT_MASKS:
        text = re.sub(one.pattern, one.substitute, text)
    return text


# ---------------------------------------------------------------------------------------
# The runner: executed as `python real_scripts.py _run STUBS SCRIPT ARGS...` in the folder
# of one copy. It imports nothing of fixitem (the rewritten scripts import the runtime).

def _fake_datasets() -> None:
    import types

    import numpy as np
    import torch

    sys.modules.setdefault("torchvision._meta_registrations", types.ModuleType("torchvision._meta_registrations"))
    import torchvision.datasets as tv_datasets
    from PIL import Image

    sizes = {True: int(os.environ.get("FIXITEM_BENCH_FAKE_TRAIN", "256")),
             False: int(os.environ.get("FIXITEM_BENCH_FAKE_TEST", "128"))}

    def fake(name: str, shape: tuple[int, ...], mode: str, num_classes: int):
        class Fake(torch.utils.data.Dataset):
            def __init__(self, root=None, train=True, transform=None, target_transform=None,
                         download=False, **kwargs):
                self.root, self.train = root, train
                self.transform, self.target_transform = transform, target_transform
                rng = np.random.default_rng(1 if train else 2)
                n = sizes[bool(train)]
                self.data = rng.integers(0, 256, size=(n, *shape), dtype=np.uint8)
                self.targets = [int(t) for t in rng.integers(0, num_classes, size=n)]
                self.classes = [str(i) for i in range(num_classes)]
                if shape == (28, 28):  # MNIST keeps tensors
                    self.data = torch.from_numpy(self.data)
                    self.targets = torch.tensor(self.targets)

            def __len__(self):
                return len(self.data)

            def __getitem__(self, index):
                data = self.data[index]
                image = Image.fromarray(np.asarray(data), mode=mode)
                target = int(self.targets[index])
                if self.transform is not None:
                    image = self.transform(image)
                if self.target_transform is not None:
                    target = self.target_transform(target)
                return image, target

        Fake.__name__ = Fake.__qualname__ = name
        return Fake

    tv_datasets.MNIST = fake("MNIST", (28, 28), "L", 10)
    emnist = fake("EMNIST", (28, 28), "L", 47)
    tv_datasets.EMNIST = lambda root, split, **kwargs: emnist(root, **kwargs)
    tv_datasets.FashionMNIST = fake("FashionMNIST", (28, 28), "L", 10)
    tv_datasets.CIFAR10 = fake("CIFAR10", (32, 32, 3), "RGB", 10)
    tv_datasets.CIFAR100 = fake("CIFAR100", (32, 32, 3), "RGB", 100)


def _printing_summary_writer() -> None:
    import types

    import torch

    def shown(value):
        if isinstance(value, torch.Tensor):
            return f"{float(value):.6g}" if value.numel() == 1 else f"tensor{tuple(value.shape)}"
        if isinstance(value, (int, float)):
            return f"{float(value):.6g}"
        return type(value).__name__

    class SummaryWriter:
        def __init__(self, log_dir=None, *args, **kwargs):
            pass

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.close()

        def close(self):
            pass

        def flush(self):
            pass

        def __getattr__(self, name):
            if not name.startswith("add_"):
                raise AttributeError(name)

            def add(tag, value=None, global_step=None, *args, **kwargs):
                print(f"[SummaryWriter.{name}] {tag} {shown(value)} step={global_step}")

            return add

    module = types.ModuleType("torch.utils.tensorboard")
    module.SummaryWriter = SummaryWriter
    sys.modules["torch.utils.tensorboard"] = module


def _pure_torch_cluster() -> None:
    """``torch_cluster.radius_graph`` and ``torch_scatter.scatter`` in plain torch (their
    compiled wheels are built for other torch versions)."""
    import types

    import torch

    def radius_graph(x, r, batch=None, loop=False, max_num_neighbors=32, flow="source_to_target", **kwargs):
        batch = torch.zeros(x.size(0), dtype=torch.long, device=x.device) if batch is None else batch
        close = (torch.cdist(x, x) <= r) & (batch[:, None] == batch[None, :])
        if not loop:
            close.fill_diagonal_(False)
        target, source = close.nonzero(as_tuple=True)  # row-major: grouped by target, sources ascending
        keep = torch.cat([torch.arange(n, device=x.device) for n in torch.bincount(target, minlength=x.size(0))])
        target, source = target[keep < max_num_neighbors], source[keep < max_num_neighbors]
        return torch.stack([source, target] if flow == "source_to_target" else [target, source])

    def scatter(src, index, dim=-1, out=None, dim_size=None, reduce="sum"):
        dim = dim % src.dim()
        size = list(src.shape)
        size[dim] = int(index.max()) + 1 if dim_size is None else dim_size
        shape = [1] * src.dim()
        shape[dim] = -1
        index = index.view(shape).expand_as(src)
        reduce = {"add": "sum", "sum": "sum", "mean": "mean", "max": "amax", "min": "amin", "mul": "prod"}[reduce]
        base = torch.zeros(size, dtype=src.dtype, device=src.device) if out is None else out
        return base.scatter_reduce(dim, index, src, reduce, include_self=out is not None)

    import importlib.machinery

    cluster = types.ModuleType("torch_cluster")
    cluster.__spec__ = importlib.machinery.ModuleSpec("torch_cluster", None)
    cluster.radius_graph = radius_graph
    scatter_module = types.ModuleType("torch_scatter")
    scatter_module.__spec__ = importlib.machinery.ModuleSpec("torch_scatter", None)
    scatter_module.scatter = scatter
    sys.modules["torch_cluster"] = cluster
    sys.modules["torch_scatter"] = scatter_module


STUBS = {"torchvision": _fake_datasets, "tensorboard": _printing_summary_writer,
         "torch_cluster": _pure_torch_cluster}


def _run(stubs: str, script: str, args: list[str]) -> None:
    import random
    import runpy

    import numpy as np
    import torch

    torch.set_num_threads(1)
    for stub in filter(None, stubs.split(",")):
        STUBS[stub]()
    random.seed(0)
    np.random.seed(0)
    torch.manual_seed(0)
    path = os.path.abspath(script)
    sys.argv = [path, *args]
    sys.path[0] = os.path.dirname(path)
    runpy.run_path(path, run_name="__main__")


# ---------------------------------------------------------------------------------------
# Downloads and installation.

class SetupError(Exception):
    pass


def _pip(*args: str, timeout: float = 900) -> None:
    run = subprocess.run([sys.executable, "-m", "pip", *args, "--quiet", "--disable-pip-version-check"],
                         capture_output=True, text=True, timeout=timeout)
    if run.returncode != 0:
        raise SetupError(f"pip {' '.join(args)} failed: {run.stderr.strip()[-800:]}")


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name).lower()


def fetch_dist(key: str) -> Path:
    """The extracted root of the pinned distribution ``key`` (downloaded once)."""
    dist = DISTS[key]
    name, version = dist.requirement.split("==")
    root = CACHE / "dists" / f"{_normal(name)}-{version}-{dist.kind}"
    if (root / ".complete").exists():
        return root
    download = CACHE / "downloads"
    download.mkdir(parents=True, exist_ok=True)

    def found() -> list[Path]:
        suffixes = (".tar.gz", ".zip") if dist.kind == "sdist" else (".whl",)
        return [p for p in download.iterdir()
                if _normal(p.name).startswith(f"{_normal(name)}_{_normal(version)}") and p.name.endswith(suffixes)]

    if not found():
        only = ["--no-binary", ":all:"] if dist.kind == "sdist" else ["--only-binary", ":all:"]
        _pip("download", "--no-deps", *only, dist.requirement, "-d", str(download))
    if not found():
        raise SetupError(f"pip download {dist.requirement} gave no {dist.kind}")
    archive = found()[0]
    shutil.rmtree(root, ignore_errors=True)
    (CACHE / "dists").mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(dir=CACHE / "dists"))
    if archive.name.endswith(".whl") or archive.name.endswith(".zip"):
        with zipfile.ZipFile(archive) as z:
            z.extractall(scratch)
    else:
        with tarfile.open(archive) as t:
            t.extractall(scratch, filter="data")
    entries = list(scratch.iterdir())
    top = entries[0] if dist.kind == "sdist" and len(entries) == 1 and entries[0].is_dir() else scratch
    top.rename(root)
    shutil.rmtree(scratch, ignore_errors=True)
    (root / ".complete").write_text(archive.name + "\n")
    return root


def install_site() -> Path:
    """The folder with :data:`SITE_PINS` installed (once per set of pins)."""
    key = hashlib.sha256("\n".join(sorted(SITE_PINS)).encode()).hexdigest()[:12]
    site = CACHE / f"site-{key}"
    if (site / ".complete").exists():
        return site
    CACHE.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix="site-", dir=CACHE))
    _pip("install", "--no-deps", "--no-compile", "--target", str(scratch), *SITE_PINS)
    shutil.rmtree(site, ignore_errors=True)
    scratch.rename(site)
    (site / ".complete").write_text("\n".join(SITE_PINS) + "\n")
    return site


# ---------------------------------------------------------------------------------------
# One script.

class RunOutcome(NamedTuple):
    returncode: int
    text: str  # masked stdout+stderr
    seconds: float
    timed_out: bool


# Text files that a script writes (in its folder or next to it) are compared too.
TEXT_OUTPUTS = {".txt", ".csv", ".log", ".json", ".jsonl", ".tsv"}


def run_copy(script: Script, folder: Path, site: Path) -> RunOutcome:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FIXITEM_")}
    env.update(script.env)
    env.update({"PYTHONUNBUFFERED": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
                "PYTHONHASHSEED": "0", "TQDM_MININTERVAL": "0", "PYTHONDONTWRITEBYTECODE": "1"})
    import fixitem  # the rewritten copies import the runtime of the fixitem that rewrote them

    env["PYTHONPATH"] = os.pathsep.join([str(site), str(Path(fixitem.__file__).resolve().parent.parent)])
    script_path = Path(script.path).name
    command = [sys.executable, str(HERE), "_run", ",".join(script.stubs), script_path, *script.args]
    existing = {p for p in folder.parent.rglob("*") if p.is_file()}
    start = time.perf_counter()
    try:
        done = subprocess.run(command, cwd=folder, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              timeout=script.timeout)
        out, code, timed_out = done.stdout, done.returncode, False
    except subprocess.TimeoutExpired as e:
        out, code, timed_out = e.stdout or b"", -9, True
    seconds = time.perf_counter() - start
    text = out.decode("utf-8", "replace")
    for path in sorted(p for p in folder.parent.rglob("*") if p.is_file() and p not in existing):
        if path.suffix in TEXT_OUTPUTS and path.stat().st_size < 1_000_000:
            text += f"\n=== written: {path.relative_to(folder.parent)}\n" + path.read_text("utf-8", "replace")
    return RunOutcome(code, mask(text, folder), seconds, timed_out)


def first_differences(before: str, after: str, limit: int = 6) -> list[str]:
    lines = []
    a, b = before.splitlines(), after.splitlines()
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag == "equal":
            continue
        lines += [f"-{i + 1}: {a[i]}" for i in range(i1, min(i2, i1 + limit))]
        lines += [f"+{j + 1}: {b[j]}" for j in range(j1, min(j2, j1 + limit))]
        if len(lines) >= limit:
            break
    return lines[: 2 * limit]


def crashed(outcome: RunOutcome) -> bool:
    return outcome.returncode != 0 or outcome.timed_out


def prepare(script: Script, work: Path) -> tuple[dict[str, Any], dict[str, Path]]:
    """Copy the script's folder three times and rewrite two of the copies."""
    import fixitem

    root = fetch_dist(script.dist)
    source = root / Path(script.path).parent
    base = work / re.sub(r"[^A-Za-z0-9_.-]+", "_", script.name)
    copies = {}
    row: dict[str, Any] = {"script": script.name, "dist": DISTS[script.dist].requirement, "path": script.path,
                           "args": list(script.args)}
    for mode in ("before", "safe", "unsafe"):
        copies[mode] = base / mode / source.name
        shutil.copytree(source, copies[mode], ignore=shutil.ignore_patterns("__pycache__"))
    for mode, unsafe in (("safe", False), ("unsafe", True)):
        started = time.perf_counter()
        targets = [copies[mode] / Path(script.path).name] + [copies[mode] / m for m in script.modules]
        result = fixitem.apply(targets, unsafe=unsafe, isolated=True, jobs=1)
        row[f"apply_seconds_{mode}"] = round(time.perf_counter() - started, 2)
        row[f"fixes_{mode}"] = dict(sorted(collections.Counter(f.rule for f in result.applied).items()))
        row[f"apply_errors_{mode}"] = result.errors
        row[f"changed_{mode}"] = bool(result.diff)
        (base / f"{mode}.diff").write_text(result.diff.replace(str(copies[mode].parent), ""))
    row["diffs"] = {mode: str(base / f"{mode}.diff") for mode in ("safe", "unsafe")}
    return row, copies


def compare(row: dict[str, Any], outcomes: dict[str, RunOutcome]) -> dict[str, Any]:
    base = Path(row["diffs"]["safe"]).parent
    for mode, outcome in outcomes.items():
        (base / f"{mode}.out").write_text(outcome.text)
    before = outcomes["before"]
    row["seconds"] = {mode: round(o.seconds, 2) for mode, o in outcomes.items()}
    row["returncode"] = {mode: o.returncode for mode, o in outcomes.items()}
    row["crash"] = {mode: crashed(o) for mode, o in outcomes.items()}
    row["ran"] = not crashed(before)
    for mode in ("safe", "unsafe"):
        after = outcomes[mode]
        same = after.text == before.text and after.returncode == before.returncode
        row[f"identical_{mode}"] = same
        row[f"differences_{mode}"] = [] if same else (
            first_differences(before.text, after.text)
            or [f"exit status {before.returncode} -> {after.returncode}"])
    row["lines"] = len(before.text.splitlines())  # a progress bar redrawn with \r counts each time
    row["tail_before"] = before.text[-1500:] if crashed(before) else ""
    for mode in ("safe", "unsafe"):
        if crashed(outcomes[mode]) and not crashed(before):
            row[f"tail_{mode}"] = outcomes[mode].text[-1500:]
    return row


def failed(row: dict[str, Any]) -> bool:
    if "error" in row:
        return False
    return any(not row[f"identical_{m}"] or (row["crash"][m] and not row["crash"]["before"]) for m in ("safe", "unsafe"))


# ---------------------------------------------------------------------------------------
# Report.

def fixes_text(fixes: dict[str, int]) -> str:
    return ", ".join(f"{rule}×{n}" if n > 1 else rule for rule, n in fixes.items()) or "-"


def table(rows: list[dict[str, Any]]) -> str:
    header = ("| script | fixes (safe) | fixes (unsafe) | lines | same text, safe | same text, unsafe "
              "| crash before / safe / unsafe | s before / safe / unsafe |")
    out = [header, "|---" * (header.count("|") - 1) + "|"]
    for row in rows:
        if "error" in row:
            out.append(f"| {row['script']} | error: {row['error'][:80]} | | | | | | |")
            continue
        crash = " / ".join("yes" if row["crash"][m] else "no" for m in ("before", "safe", "unsafe"))
        secs = " / ".join(f"{row['seconds'][m]:.1f}" if row["seconds"][m] or m == "before" else "-"
                          for m in ("before", "safe", "unsafe"))
        same = {m: ("yes" if row[f"identical_{m}"] else "**no**") for m in ("safe", "unsafe")}
        out.append(f"| {row['script']} | {fixes_text(row['fixes_safe'])} | {fixes_text(row['fixes_unsafe'])} "
                   f"| {row['lines']} | {same['safe']} | {same['unsafe']} | {crash} | {secs} |")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "_run":
        _run(argv[1], argv[2], argv[3:])
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scripts", help="comma-separated names (default: all); --list shows them")
    parser.add_argument("--json", type=Path, help="write the results as JSON")
    parser.add_argument("--jobs", type=int, default=2, help="subprocesses at a time (default 2)")
    parser.add_argument("--keep", type=Path, help="keep the copies and their diffs in DIR")
    parser.add_argument("--list", action="store_true", help="list the scripts and exit")
    parser.add_argument("--run-unchanged", action="store_true",
                        help="also run a copy that apply left unchanged (checks that the masks hide all noise)")
    opts = parser.parse_args(argv)
    if opts.list:
        for s in SCRIPTS:
            print(f"{s.name:28} {DISTS[s.dist].requirement:24} {s.path} {' '.join(s.args)}")
        return 0
    chosen = SCRIPTS
    if opts.scripts:
        names = [n.strip() for n in opts.scripts.split(",") if n.strip()]
        unknown = [n for n in names if n not in {s.name for s in SCRIPTS}]
        if unknown:
            print(f"unknown scripts: {', '.join(unknown)} (see --list)", file=sys.stderr)
            return 2
        chosen = [s for s in SCRIPTS if s.name in names]
    started = time.perf_counter()
    try:
        site = install_site()
        for key in sorted({s.dist for s in chosen}):
            fetch_dist(key)
    except (SetupError, subprocess.TimeoutExpired) as e:
        print(f"setup failed: {e}", file=sys.stderr)
        return 2
    setup_seconds = time.perf_counter() - started
    if opts.keep:
        opts.keep.mkdir(parents=True, exist_ok=True)
        work = Path(tempfile.mkdtemp(prefix="real-scripts-", dir=opts.keep))
    else:
        work = Path(tempfile.mkdtemp(prefix="fixitem-real-scripts-"))
    rows: list[dict[str, Any]] = []
    try:
        prepared = []
        for script in chosen:
            try:
                prepared.append((script, *prepare(script, work)))
            except Exception as e:  # a harness failure for this script, not a crash of it
                rows.append({"script": script.name, "error": f"{type(e).__name__}: {e}"})
        with concurrent.futures.ThreadPoolExecutor(max(1, opts.jobs)) as pool:
            futures = [(script, row, {mode: pool.submit(run_copy, script, folder, site)
                                      for mode, folder in copies.items()
                                      if mode == "before" or row[f"changed_{mode}"] or opts.run_unchanged})
                       for script, row, copies in prepared]
            for script, row, runs in futures:
                outcomes = {mode: f.result() for mode, f in runs.items()}
                for mode in ("safe", "unsafe"):  # not rewritten: the original's run stands for it
                    outcomes.setdefault(mode, outcomes["before"]._replace(seconds=0.0))
                compare(row, outcomes)
                rows.append(row)
                status = "DIFFERS" if failed(row) else "ok" if row["ran"] else "original fails"
                print(f"{script.name}: {status} ({sum(row['seconds'].values()):.0f} s)", file=sys.stderr, flush=True)
        order = {s.name: i for i, s in enumerate(chosen)}
        rows.sort(key=lambda r: order[r["script"]])
        if not opts.keep:
            diffs = CACHE / "last-diffs"
            shutil.rmtree(diffs, ignore_errors=True)
            for row in rows:
                for mode, path in row.get("diffs", {}).items():
                    target = diffs / Path(path).parent.name / Path(path).name
                    target.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copy(path, target)
                    row["diffs"][mode] = str(target)
                    for out in ("before", mode):
                        if (Path(path).parent / f"{out}.out").exists():
                            shutil.copy(Path(path).parent / f"{out}.out", target.parent / f"{out}.out")
    finally:
        if not opts.keep:
            shutil.rmtree(work, ignore_errors=True)
    total = time.perf_counter() - started
    import torch
    from fixitem.verify.masks import DEFAULT_MASKS

    import fixitem

    print(table(rows))
    for row in rows:
        if "error" in row:
            continue
        if not row["ran"]:
            print(f"\n{row['script']}: the original run fails (a harness setting to fix):\n{row['tail_before']}")
        for mode in ("safe", "unsafe"):
            if not row[f"identical_{mode}"]:
                print(f"\n{row['script']} ({mode}) first differences (- before, + after; diff in {row['diffs'][mode]}):")
                print("\n".join("    " + line for line in row[f"differences_{mode}"]))
    differing = [r["script"] for r in rows if failed(r)]
    broken = [r["script"] for r in rows if "error" in r or not r.get("ran")]
    ran = len(rows) - len(broken)
    print(f"\n{ran} scripts ran, {len(differing)} differ or crash after apply: {', '.join(differing) or 'none'}"
          + (f"; not run: {', '.join(broken)}" if broken else ""))
    print(f"fixitem {fixitem.__version__}, torch {torch.__version__}, Python {platform.python_version()}, "
          f"{os.cpu_count()} CPUs; setup {setup_seconds:.0f} s, total {total:.0f} s")
    if opts.json:
        opts.json.write_text(json.dumps({
            "fixitem": fixitem.__version__, "torch": torch.__version__, "python": platform.python_version(),
            "cpus": os.cpu_count(), "seconds": round(total, 1),
            "masks": [[one.pattern, one.substitute] for one in DEFAULT_MASKS], "scripts": rows,
        }, indent=2) + "\n")
    if any("error" in r for r in rows):
        return 2
    return 1 if differing else 0


if __name__ == "__main__":
    sys.exit(main())
