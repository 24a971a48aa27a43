"""Benchmark fixitem's rewrites on small models: graph breaks, host syncs, step time.

    python bench/models.py [--device cpu|cuda|auto] [--steps N] [--quick] [--only NAME,...]

For each model ``bench/models/<name>.py`` the script copies the file into a
temporary folder, rewrites the copy with ``fixitem.apply([copy], unsafe=False)``
and loads three versions: *before* (the original), *after* (fixitem's rewrite)
and *ideal* (``bench/models/<name>_ideal.py``: the offending lines deleted or
replaced by hand). It then measures

- graphs and graph breaks (``torch._dynamo.explain`` and
  ``torch._dynamo.utils.counters["graph_break"]``, backend ``eager``),
- host syncs per step (``fixitem.verify.syncs.count_host_syncs``, eager),
- the median warm step time of compiled-before (``torch.compile``,
  ``fullgraph=False``), compiled-after and compiled-ideal (``fullgraph=True``),

and prints after/ideal (target <= 1.05) and before/after (speed-up).

A model file defines ``make(device) -> (model, inputs)``; the step is
``model(*inputs)`` under ``torch.no_grad()`` (inference), unless the file
defines ``make_step(model, device) -> step`` (a training step, run with grad;
``STEPS_PER_CALL`` optimizer steps per call, times and syncs are divided by it).
``--quick`` compiles with ``aot_eager`` and times few steps (for the tests).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import io
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch
import torch._dynamo as dynamo
from fixitem.verify.syncs import count_host_syncs
from torch._dynamo.utils import counters

import fixitem
from fixitem import runtime as deferred

HERE = Path(__file__).resolve().parent
MODELS = HERE / "models"


def model_names() -> list[str]:
    return sorted(p.stem for p in MODELS.glob("*.py") if not p.stem.endswith("_ideal") and p.stem != "__init__")


_loaded = 0


def load(path: Path):
    """Import ``path`` as a fresh module (a unique name, so versions do not collide)."""
    global _loaded
    _loaded += 1
    name = f"_fixitem_bench_{path.stem}_{_loaded}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@dataclass
class Version:
    label: str
    path: Path
    graphs: int | None = None
    breaks: int | None = None  # explain
    break_counter: int | None = None  # counters["graph_break"]
    syncs: float | None = None
    step_ms: float | None = None
    fullgraph: bool | None = None
    notes: list[str] = field(default_factory=list)


@dataclass
class ModelResult:
    name: str
    fixes: list[str]
    remaining: list[str]
    versions: dict[str, Version]


def seed() -> None:
    torch.manual_seed(0)


def build(module, device: torch.device, compiled=None):
    """(model, inputs, step, steps_per_call, training) for ``module``; ``compiled`` wraps the model."""
    seed()
    model, inputs = module.make(str(device))
    if not isinstance(inputs, tuple):
        inputs = (inputs,)
    target = compiled(model) if compiled else model
    if hasattr(module, "make_step"):
        return model, inputs, module.make_step(target, str(device)), getattr(module, "STEPS_PER_CALL", 1), True
    return model, inputs, target, 1, False


def quiet():
    """Silence stdout (models that print), keeping stderr."""
    return contextlib.redirect_stdout(io.StringIO())


def measure_breaks(module, device: torch.device, v: Version) -> None:
    model, inputs, *_ = build(module, device)
    dynamo.reset()
    with quiet():
        explanation = dynamo.explain(model)(*inputs)
    v.graphs = explanation.graph_count
    v.breaks = explanation.graph_break_count
    dynamo.reset()
    counters.clear()
    model, inputs, *_ = build(module, device)
    with quiet():
        torch.compile(model, backend="eager")(*inputs)
    v.break_counter = sum(counters["graph_break"].values())
    dynamo.reset()


def measure_syncs(module, device: torch.device, v: Version) -> None:
    _model, inputs, step, per_call, training = build(module, device)
    with quiet(), (contextlib.nullcontext() if training else torch.no_grad()):
        step(*inputs)  # warm (lazy initialisation)
        with count_host_syncs() as syncs:
            step(*inputs)
        deferred.flush()
    # On an accelerator only reads of its tensors wait (the runtime's flush
    # reads pinned host copies); on CPU every read is counted, as a proxy.
    v.syncs = (syncs.on_device if device.type != "cpu" else syncs.total) / per_call


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def prepare_timed(module, device: torch.device, v: Version, *, fullgraph: bool, backend: str, warmup: int):
    """Compile ``module``'s step and warm it; returns ``(step, inputs, per_call, training)``.

    A version that fails with ``fullgraph=True`` is noted and compiled with ``fullgraph=False``.
    """

    def wrap(model):
        return torch.compile(model, backend=backend, fullgraph=fullgraph)

    _model, inputs, step, per_call, training = build(module, device, wrap)
    try:
        with quiet(), (contextlib.nullcontext() if training else torch.no_grad()):
            for _ in range(warmup):
                step(*inputs)
            deferred.flush()
    except Exception as exc:
        if not fullgraph:
            raise
        v.notes.append(f"fullgraph=True failed ({type(exc).__name__}); timed with fullgraph=False")
        return prepare_timed(module, device, v, fullgraph=False, backend=backend, warmup=warmup)
    v.fullgraph = fullgraph
    return step, inputs, per_call, training


def measure_times(prepared: dict[str, tuple], device: torch.device, versions: dict[str, Version], steps: int) -> None:
    """Median step time of each prepared version, timed in interleaved rounds.

    Each round times one step of every version, in a rotating order, so that a
    change of machine load during the run affects all versions alike. The
    device is synchronised around each timed step only.
    """
    labels = list(prepared)
    times: dict[str, list[float]] = {label: [] for label in labels}
    with quiet():
        for k in range(steps):
            for label in labels[k % len(labels):] + labels[: k % len(labels)]:
                step, inputs, _per_call, training = prepared[label]
                with contextlib.nullcontext() if training else torch.no_grad():
                    sync(device)
                    start = time.perf_counter()
                    step(*inputs)
                    sync(device)
                    times[label].append(time.perf_counter() - start)
        deferred.flush()
    for label in labels:
        versions[label].step_ms = statistics.median(times[label]) / prepared[label][2] * 1e3


def run_model(name: str, device: torch.device, *, backend: str, steps: int, warmup: int,
              workdir: Path, log=print) -> ModelResult:
    copy = workdir / f"{name}.py"
    shutil.copyfile(MODELS / f"{name}.py", copy)
    result = fixitem.apply([copy], unsafe=False, isolated=True, jobs=1, cache=False)
    if result.errors:
        raise RuntimeError(f"fixitem apply failed on {name}: {result.errors}")
    fixes = [f"{f.rule}:{f.line}" for f in result.applied]
    remaining = [f"{f.rule}:{f.line}" for f in result.findings]
    versions = {
        "before": Version("before", MODELS / f"{name}.py"),
        "after": Version("after", copy),
        "ideal": Version("ideal", MODELS / f"{name}_ideal.py"),
    }
    modules = {}
    for v in versions.values():
        log(f"  {name}: {v.label}: breaks, syncs ...")
        modules[v.label] = module = load(v.path)
        measure_breaks(module, device, v)
        measure_syncs(module, device, v)
    dynamo.reset()
    prepared = {}
    for v in versions.values():
        log(f"  {name}: {v.label}: compile ({backend}) ...")
        prepared[v.label] = prepare_timed(modules[v.label], device, v, fullgraph=v.label != "before",
                                          backend=backend, warmup=warmup)
    log(f"  {name}: timing {steps} rounds ...")
    measure_times(prepared, device, versions, steps)
    dynamo.reset()
    return ModelResult(name, fixes, remaining, versions)


def _fmt(x, spec=".3f") -> str:
    return "-" if x is None else format(x, spec)


def _num(x: float) -> str:
    return f"{x:g}" if x == int(x) else f"{x:.3f}"


def table(results: list[ModelResult]) -> str:
    header = ["model", "fixes", "graphs b/a/i", "breaks b->a (ideal)", "counter b->a",
              "syncs/step b->a (ideal)", "ms before", "ms after", "ms ideal", "after/ideal", "before/after"]
    rows = []
    for r in results:
        b, a, i = r.versions["before"], r.versions["after"], r.versions["ideal"]
        rows.append([
            r.name,
            str(len(r.fixes)) + (f" (+{len(r.remaining)} left)" if r.remaining else ""),
            f"{b.graphs}/{a.graphs}/{i.graphs}",
            f"{b.breaks} -> {a.breaks} ({i.breaks})",
            f"{b.break_counter} -> {a.break_counter}",
            f"{_num(b.syncs)} -> {_num(a.syncs)} ({_num(i.syncs)})",
            _fmt(b.step_ms), _fmt(a.step_ms) + ("" if a.fullgraph else "*"), _fmt(i.step_ms),
            _fmt(a.step_ms / i.step_ms, ".2f") if a.step_ms and i.step_ms else "-",
            _fmt(b.step_ms / a.step_ms, ".2f") + "x" if a.step_ms and b.step_ms else "-",
        ])
    widths = [max(len(h), *(len(row[k]) for row in rows)) for k, h in enumerate(header)]
    line = lambda cells: "  ".join(c.ljust(w) if k == 0 else c.rjust(w) for k, (c, w) in enumerate(zip(cells, widths)))
    out = [line(header), line(["-" * w for w in widths])] + [line(row) for row in rows]
    return "\n".join(out)


def environment(device: torch.device, backend: str, steps: int, warmup: int) -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for text in Path("/proc/cpuinfo").read_text().splitlines():
            if text.startswith("model name"):
                cpu = text.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    dev = torch.cuda.get_device_name(device) if device.type == "cuda" else cpu
    try:
        load1 = f", load average {os.getloadavg()[0]:.2f}"
    except OSError:
        load1 = ""
    return (f"device {device} ({dev}), {os.cpu_count()} CPUs{load1}, torch {torch.__version__}, "
            f"python {platform.python_version()}, fixitem {fixitem.__version__}; backend {backend}, "
            f"median of {steps} warm steps (versions interleaved) after {warmup} warm-up, threads {torch.get_num_threads()}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda", "auto"])
    parser.add_argument("--steps", type=int, default=None,
                        help="timed steps per version, interleaved (default 50; 5 with --quick)")
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="backend aot_eager, few steps")
    parser.add_argument("--backend", default=None, help="compile backend for the timings (default inductor)")
    parser.add_argument("--only", default=None, help="comma-separated model names")
    parser.add_argument("--threads", type=int, default=1,
                        help="torch.set_num_threads (default 1: stable numbers on a shared machine; 0: torch's default)")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)

    if args.device == "auto":
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    else:
        device = torch.device(args.device)
        if device.type == "cuda" and not torch.cuda.is_available():
            parser.error("--device cuda: CUDA is not available")
    backend = args.backend or ("aot_eager" if args.quick else "inductor")
    steps = args.steps or (5 if args.quick else 50)
    names = model_names()
    if args.only:
        wanted = [n.strip() for n in args.only.split(",") if n.strip()]
        unknown = sorted(set(wanted) - set(names))
        if unknown:
            parser.error(f"unknown model(s): {', '.join(unknown)} (known: {', '.join(names)})")
        names = wanted

    deferred.configure(flush_every=10_000)  # flush explicitly, inside the stdout redirect
    results = []
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="fixitem-bench-") as tmp:
        for name in names:
            print(f"{name} ...", file=sys.stderr, flush=True)
            results.append(run_model(name, device, backend=backend, steps=steps, warmup=args.warmup,
                                     workdir=Path(tmp), log=lambda m: print(m, file=sys.stderr, flush=True)))
    print(f"fixitem model benchmark: {environment(device, backend, steps, args.warmup)}")
    print()
    print(table(results))
    print()
    print("b/a/i = before/after/ideal; breaks: torch._dynamo.explain (backend eager); counter: "
          'counters["graph_break"]; syncs per step eager; ms: median step time, compiled '
          "(before fullgraph=False, after/ideal fullgraph=True; * = after did not compile with fullgraph=True)")
    print("forward-only models time an inference step (no_grad); training models time one optimizer step")
    for r in results:
        notes = [f"{v.label}: {n}" for v in r.versions.values() for n in v.notes]
        extra = f"; left: {', '.join(r.remaining)}" if r.remaining else ""
        print(f"  {r.name}: fixed {', '.join(r.fixes) or 'nothing'} (unsafe=False){extra}"
              + (f"; {'; '.join(notes)}" if notes else ""))
    print(f"total wall time {time.perf_counter() - started:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
