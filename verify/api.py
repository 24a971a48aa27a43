"""``run_verify``: load before and after, run every check, return a report."""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import io
import shutil
import sys
import tempfile
import time
from pathlib import Path

import torch
import torch._dynamo

from . import numerics
from .breaks import count_graph_breaks
from .conditions import ConditionRecorder
from .device import cuda_sync_warnings, move_inputs, move_model, resolve_device
from .dynamo_config import patched
from .git import materialise_ref, read_at_ref, repo_relative
from .loading import (
    MODULE_PREFIX,
    FactorySpec,
    LoadedVersion,
    UsageError,
    display,
    load_project_version,
    load_version,
    parse_factory,
    write_temp_source,
)
from .report import InputResult, VerifyReport, VersionReport
from .syncs import InspectingBackend, count_host_syncs
from .timing import median_step_time

BACKENDS = ("inductor", "aot_eager", "eager")


def _first_line(exc: BaseException) -> str:
    return numerics.summarise_error(exc)


def _check_backend(backend: str) -> None:
    try:
        torch._dynamo.lookup_backend(backend)
    except Exception as exc:  # noqa: BLE001
        raise UsageError(f"unknown --backend {backend!r}; use one of {', '.join(BACKENDS)}") from exc


def _align_state(before: LoadedVersion, after: LoadedVersion, notes: list[str]) -> None:
    """Give both models the same weights (the factories are seeded alike)."""
    mb, ma = before.model, after.model
    if not (isinstance(mb, torch.nn.Module) and isinstance(ma, torch.nn.Module)):
        return
    sb, sa = mb.state_dict(), ma.state_dict()
    if sb.keys() != sa.keys() or any(sb[k].shape != sa[k].shape for k in sb):
        notes.append("the before and after models have different state_dict keys or shapes; "
                     "compared as each factory built them")
        return
    if any(not torch.equal(sb[k], sa[k]) for k in sb):
        ma.load_state_dict(sb)
        notes.append("the factories built different weights; copied the before model's state_dict into the after model")


def _same_inputs(a: list[tuple], b: list[tuple]) -> bool:
    return not numerics.compare(a, b, "eager", "inputs")


def _syncs_per_call(model, inputs: list[tuple]) -> tuple[int, dict[str, int], str | None]:
    worst, kinds, error = 0, {}, None
    for args in inputs:
        call_args = numerics.fresh_copy(args)
        torch.manual_seed(0)
        with count_host_syncs() as counter:
            try:
                model(*call_args)
            except Exception as exc:  # noqa: BLE001
                error = _first_line(exc)
        if counter.total >= worst:
            worst, kinds = counter.total, dict(counter.by_kind)
    return worst, kinds, error


def _compile_fullgraph(model, inputs: list[tuple], backend: str, version: VersionReport, *, backward: bool):
    """Compile with fullgraph=True through an inspecting backend; run every input.

    Returns the compiled callable and the results on the inputs (None when it failed).
    """
    inspector = InspectingBackend(backend)
    compiled = torch.compile(model, backend=inspector, fullgraph=True)
    version.fullgraph_backend = backend
    results = []
    for i, args in enumerate(inputs):
        res = numerics.run_once(compiled, args, params_of=model, backward=backward)
        if res.error:
            version.fullgraph_ok = False
            version.fullgraph_error = f"input {i}: {res.error.strip().splitlines()[0]}"
            break
        results.append(res)
    else:
        version.fullgraph_ok = True
    if version.fullgraph_ok:
        version.scalar_reads = inspector.scalar_reads
        version.compiled_scalar_reads = len(inspector.scalar_reads)
        version.data_dependent_ops = inspector.data_dependent
        return compiled, results
    return None, None


def _compare_on_inputs(
    before: LoadedVersion,
    after: LoadedVersion,
    compiled_after,
    compiled_results: list,
    inputs: list[tuple],
    report: VerifyReport,
    watched: Path,
) -> list:
    recorder = ConditionRecorder(Path(watched).resolve())
    results: list[InputResult] = []
    for item in numerics.derive_inputs(inputs):
        index = int(item.name.split()[1])
        b1 = numerics.run_once(before.model, item.args)
        if b1.error:
            if item.derived:
                results.append(InputResult(item.name, "skipped", [f"before raised {b1.error.splitlines()[0]}"]))
            else:
                results.append(InputResult(item.name, "error", [f"before raised {b1.error.splitlines()[0]}"]))
                report.failures.append(f"numerics: the before version raised on {item.name}: {b1.error.splitlines()[0]}")
            continue
        b2 = numerics.run_once(before.model, item.args)
        if not numerics.deterministic(b1, b2):
            results.append(InputResult(item.name, "skipped", ["before is not deterministic on this input "
                                                              "(two runs seeded alike differ)"]))
            if not item.derived:
                report.warnings.append(f"{item.name}: the before version is not deterministic; not compared")
            continue
        with recorder:
            a = numerics.run_once(after.model, item.args)
        row = InputResult(item.name, "equal")
        if a.error:
            row.status = "error"
            row.details.append(f"eager after raised {a.error.splitlines()[0]} (before did not)")
        else:
            diffs = numerics.compare(b1.outputs, a.outputs, "eager")
            if b1.backward or a.backward:
                row.compared_grads = True
                # A version whose outputs need no gradient has None for every
                # gradient: equal to the other's only where that one is all zero
                # (a parameter used only in the branch not taken).
                diffs += numerics.compare_grads(b1.grads, a.grads, "eager")
            row.details += [f"eager after: {d}" for d in diffs]
        if compiled_after is not None:
            row.compared_compiled = True
            c = compiled_results[index] if not item.derived else numerics.run_once(
                compiled_after, item.args, params_of=after.model)
            if c.error:
                row.status = "error"
                row.details.append(f"compiled after raised {c.error.strip().splitlines()[0]}")
            else:
                diffs = numerics.compare(b1.outputs, c.outputs, "compiled")
                if b1.backward or c.backward:
                    diffs += numerics.compare_grads(b1.grads, c.grads, "compiled")
                row.details += [f"compiled after: {d}" for d in diffs]
        if row.details and row.status == "equal":
            row.status = "different"
        results.append(row)
    report.inputs = results
    report.conditions = recorder.results()
    return results


def run_verify(
    after: Path | str,
    before: Path | str | None = None,
    before_source: str | None = None,
    factory: str = "make",
    device: str = "auto",
    backend: str = "inductor",
    timeit: bool = False,
    before_ref: str | None = None,
    capture_user_output: bool = True,
    config: tuple[str, ...] | list[str] = (),
) -> VerifyReport:
    """Verify that ``after`` is a faithful, sync-free rewrite of the before version.

    The before version is the file ``before``, or the text ``before_source``
    (loaded from a temp file named like ``after``, with ``after``'s folder on
    ``sys.path`` for sibling imports), or ``after`` as committed at git
    revision ``before_ref``. ``factory`` names a function of both modules
    returning ``(model, inputs)``. Raises :class:`UsageError` for problems with
    the arguments or the user's code (missing file or factory, import error);
    checks that fail are listed in ``report.failures``.

    ``config``: flags of ``torch._dynamo.config`` (``"capture_scalar_outputs"``) to compile the after
    version under, as a finding of FX601 / FX602 / FX006 names them (:mod:`.dynamo_config`): the
    breaks are then counted both ways, the after version compiled under them is compared with the
    eager before version, and remaining host syncs fail the check only where there are more than
    before (the configuration removes graph breaks, not syncs).
    """
    start = time.perf_counter()
    after = Path(after)
    given = sum(x is not None for x in (before, before_source, before_ref))
    if given != 1:
        raise UsageError("give exactly one of --before FILE or --before-ref REF (or before_source)")
    if not after.is_file():
        raise UsageError(f"after file not found: {after}")
    if before is not None and not Path(before).exists():
        raise UsageError(f"before file not found: {before}")
    project = parse_factory(factory)
    if project is not None:
        if before_source is not None:
            raise UsageError("a FILE.py:FUNCTION or MODULE:FUNCTION factory needs --before-ref REV or --before DIR")
        if before is not None and not Path(before).is_dir():
            raise UsageError(f"with a FILE.py:FUNCTION or MODULE:FUNCTION factory, --before is the folder of the "
                             f"before tree that corresponds to the current one; not a folder: {before}")
    dev = resolve_device(device)
    _check_backend(backend)

    before_display = display(Path(before)) if before is not None else None
    if before_ref is not None and project is None:
        before_source = read_at_ref(after, before_ref)
        before_display = f"{before_ref}:{repo_relative(after)}"

    user_out = io.StringIO()
    redirect = contextlib.redirect_stdout(user_out) if capture_user_output else contextlib.nullcontext()
    loaded_before = {name for name in sys.modules if name.startswith(MODULE_PREFIX)}
    try:
        with redirect:
            try:
                if project is not None:
                    versions = _load_project_versions(project, before, before_ref)
                else:
                    versions = _load_file_versions(after, before, before_source, before_display, factory)
                runtime = sys.modules.get("fixitem.runtime")  # imported by rewritten code
                with runtime.by_count_only() if runtime is not None else contextlib.nullcontext():
                    report = _run_checks(after, *versions, factory, dev, backend, timeit, tuple(config))
            finally:
                deferred_error = _replay_deferred_output()
    finally:
        # The user's two versions were imported under unique names; drop them.
        for name in [n for n in sys.modules if n.startswith(MODULE_PREFIX) and n not in loaded_before]:
            del sys.modules[name]
        torch._dynamo.reset()
    if deferred_error:
        report.notes.append(f"a deferred output call of the user's code raised when replayed: {deferred_error}")
    printed = user_out.getvalue()
    if printed:
        report.notes.append(f"the user's code printed {len(printed.splitlines())} line(s) while verify ran "
                            f"(not shown)")
    report.elapsed_s = time.perf_counter() - start
    return report


def _replay_deferred_output() -> str:
    """Replay the output the user's code deferred with ``fixitem.runtime`` now, while it is captured.

    Left pending, it would be printed at interpreter exit, after verify's own
    report (and into the middle of ``--format json``). Returns the first line of
    the error a replayed call raised, or "".
    """
    runtime = sys.modules.get("fixitem.runtime")
    if runtime is None:
        return ""
    try:
        runtime.flush()
    except Exception as exc:  # noqa: BLE001 - the user's replayed call failed; verify goes on
        return _first_line(exc)
    return ""


def _load_file_versions(after, before, before_source, before_display, factory):
    """Both versions of the rewritten file, each calling its own factory."""
    if before is not None:
        before_v = load_version(Path(before), "before", factory)
    else:
        temp = write_temp_source(before_source, after.name, "before")
        before_v = load_version(temp, "before", factory, search_paths=[after.resolve().parent],
                                display_path=before_display or "before (source)")
    return before_v, load_version(after, "after", factory)


def _load_project_versions(project: FactorySpec, before, before_ref):
    """Both versions of the project: the factory of each tree, importing that tree's modules.

    The after tree is the current folder; the before tree is ``before`` (a
    folder) or the git repository as committed at ``before_ref``.
    """
    here = Path.cwd().resolve()
    if before_ref is not None:
        into = Path(tempfile.mkdtemp(prefix="fixitem-verify-before-"))
        atexit.register(shutil.rmtree, into, ignore_errors=True)
        before_root = materialise_ref(here, before_ref, into)
        before_display = f"{before_ref}:{project}"
    else:
        before_root = Path(before).resolve()
        before_display = f"{display(before_root)}:{project}"
    before_v = load_project_version(project, before_root, "before", before_display, hide=[here])
    after_v = load_project_version(project, here, "after", str(project), hide=[before_root])
    return before_v, after_v


def _run_checks(after, before_v, after_v, factory, dev, backend, timeit, config=()) -> VerifyReport:

    b_rep = VersionReport("before", before_v.display_path)
    a_rep = VersionReport("after", after_v.display_path)
    report = VerifyReport(before=b_rep, after=a_rep, device=str(dev), backend=backend, factory=factory,
                          config=list(config))
    if not _same_inputs(before_v.inputs, after_v.inputs):
        report.notes.append("the two factories returned different inputs; both versions run on the after's inputs")
    _align_state(before_v, after_v, report.notes)
    model = after_v.model
    if backend == "inductor" and isinstance(model, torch.nn.Module) and any(
        isinstance(m, torch.nn.modules.dropout._DropoutNd) and m.p > 0 and m.training for m in model.modules()
    ):
        report.warnings.append("the after model is in training mode with dropout: inductor draws different random "
                               "numbers than eager, so compiled outputs will differ; call model.eval() in the factory")
    before_v.model = move_model(before_v.model, dev)
    after_v.model = move_model(after_v.model, dev)
    inputs = move_inputs(after_v.inputs, dev)

    # 1. graph breaks (fullgraph=False, backend eager: fast, same breaks).
    for v, rep in ((before_v, b_rep), (after_v, a_rep)):
        br = count_graph_breaks(v.model, inputs, backend="eager")
        rep.graph_breaks, rep.breaks, rep.break_error = br.count, br.breaks, br.error
        if not br.located:
            report.warnings.append("Dynamo's graph-break logger was not found: breaks are counted without locations")

    # 1b. graph breaks under the configuration a finding names (--config).
    if config:
        for v, rep in ((before_v, b_rep), (after_v, a_rep)):
            with patched(config):
                br = count_graph_breaks(v.model, inputs, backend="eager")
            rep.config_graph_breaks, rep.config_breaks, rep.config_break_error = br.count, br.breaks, br.error
        # A site is proved gone when no break at all is left on its line under the configuration.
        left = {(x.file, x.line) for x in a_rep.config_breaks}
        report.proved = [x for x in a_rep.breaks if x.file is not None and (x.file, x.line) not in left]

    # 3b. host syncs per eager call.
    for v, rep in ((before_v, b_rep), (after_v, a_rep)):
        rep.syncs_per_call, rep.sync_kinds, err = _syncs_per_call(v.model, inputs)
        if err and rep is a_rep:
            report.notes.append(f"the after version raised while counting syncs: {err}")

    # 2 + 3a. fullgraph compile; scalar reads captured in the graph.
    torch._dynamo.reset()
    _compile_fullgraph(before_v.model, inputs, "eager", b_rep, backward=False)
    with patched(config):
        compiled_after, compiled_results = _compile_fullgraph(after_v.model, inputs, backend, a_rep, backward=True)

        # 4. numerics on the inputs and derived inputs; conditions seen.
        results = _compare_on_inputs(before_v, after_v, compiled_after, compiled_results, inputs, report,
                                     watched=after)
        # 4b. the after version as the program runs it under the configuration: fullgraph=False.
        if config:
            report.config_inputs = _compare_compiled_under_config(before_v, after_v, inputs, backend)
    compared = [r for r in results if r.status != "skipped"]
    report.equivalent = bool(compared) and all(r.status == "equal" for r in compared)

    # 6. CUDA's own view of syncs.
    if dev.type == "cuda":
        try:
            b_rep.cuda_sync_warnings = cuda_sync_warnings(before_v.model, inputs, dev)
            a_rep.cuda_sync_warnings = cuda_sync_warnings(after_v.model, inputs, dev)
            if compiled_after is not None:
                a_rep.cuda_sync_warnings_compiled = cuda_sync_warnings(compiled_after, inputs, dev)
        except Exception as exc:  # noqa: BLE001
            report.warnings.append(f"CUDA sync debug mode could not be used: {_first_line(exc)}")

    # 5. timing.
    if timeit:
        _time_both(before_v, after_v, inputs[0], backend, dev, report)

    _show_paths(report, {str(before_v.path): before_v.display_path, str(after_v.path): after_v.display_path})
    report.notes.append(f"inputs: the factory's {len(inputs)} input(s), plus each with its floating tensors "
                        f"scaled by {', '.join(f'{s:g}' for s in numerics.DEFAULT_SCALES)}")
    _judge(report, results)
    return report


def _compare_compiled_under_config(before, after, inputs: list[tuple], backend: str) -> list[InputResult]:
    """The after version compiled with ``fullgraph=False`` (as a program runs it; the caller holds
    the configuration) against the eager before version, on the inputs and the derived ones:
    outputs and gradients."""
    torch._dynamo.reset()
    compiled = torch.compile(after.model, backend=backend)
    rows: list[InputResult] = []
    for item in numerics.derive_inputs(inputs):
        b = numerics.run_once(before.model, item.args)
        if b.error:
            rows.append(InputResult(item.name, "skipped", [f"before raised {b.error.splitlines()[0]}"]))
            continue
        c = numerics.run_once(compiled, item.args, params_of=after.model)
        row = InputResult(item.name, "equal", compared_compiled=True)
        if c.error:
            row.status = "error"
            row.details.append(f"compiled after raised {c.error.strip().splitlines()[0]}")
        else:
            diffs = numerics.compare(b.outputs, c.outputs, "compiled")
            if b.backward or c.backward:
                row.compared_grads = True
                diffs += numerics.compare_grads(b.grads, c.grads, "compiled")
            row.details += [f"compiled after: {d}" for d in diffs]
            if diffs:
                row.status = "different"
        rows.append(row)
    torch._dynamo.reset()
    return rows


def _show_paths(report: VerifyReport, known: dict[str, str]) -> None:
    """Show file names as the user gave them (a git ref's temp file as REF:path)."""
    def show(file: str | None) -> str | None:
        if file is None:
            return None
        if file in known:
            return known[file]
        return display(Path(file)) if Path(file).is_absolute() else file
    for rep in (report.before, report.after):
        for b in [*rep.breaks, *rep.config_breaks]:
            b.file = show(b.file)
        rep.scalar_reads = [dataclasses.replace(s, file=show(s.file)) for s in rep.scalar_reads]
        rep.data_dependent_ops = [dataclasses.replace(s, file=show(s.file)) for s in rep.data_dependent_ops]
    for c in report.conditions:
        c.file = show(c.file)


def _time_both(before_v, after_v, args, backend, dev, report) -> None:
    torch._dynamo.reset()
    try:
        t = median_step_time(torch.compile(before_v.model, backend=backend), args, dev)
        report.before.median_ms = t.median_s * 1e3
    except Exception as exc:  # noqa: BLE001
        report.warnings.append(f"timing the compiled before version failed: {_first_line(exc)}")
    if report.after.fullgraph_ok:
        try:
            t = median_step_time(torch.compile(after_v.model, backend=backend, fullgraph=True), args, dev)
            report.after.median_ms = t.median_s * 1e3
        except Exception as exc:  # noqa: BLE001
            report.warnings.append(f"timing the compiled after version failed: {_first_line(exc)}")
    report.notes.append(f"timing: median of 20 warm forward steps (3 warm-up) on input 0, backend {backend}; "
                        f"before compiled with fullgraph=False, after with fullgraph=True")


def _judge(report: VerifyReport, results: list[InputResult]) -> None:
    if report.config:
        _judge_config(report, results)
        return
    a = report.after
    if a.graph_breaks:
        where = "; ".join(f"{b.location} ({b.reason[:120]})" for b in a.breaks[:3])
        report.failures.append(f"graph breaks: the after version has {a.graph_breaks} graph break(s): {where}")
    if a.break_error:
        report.failures.append(f"graph breaks: the after version raised under torch.compile: {a.break_error}")
    if not a.fullgraph_ok:
        report.failures.append(f"fullgraph: torch.compile(fullgraph=True, backend={a.fullgraph_backend!r}) of the "
                               f"after version failed: {a.fullgraph_error}")
    if a.compiled_scalar_reads:
        where = "; ".join(f"{s.location} ({s.op}: {s.code})" for s in a.scalar_reads[:3])
        report.failures.append(f"syncs: the compiled after graph still reads {a.compiled_scalar_reads} scalar(s) "
                               f"back to the host (fullgraph=True captures .item() instead of breaking): {where}")
    if a.syncs_per_call:
        kinds = ", ".join(f"{k} {n}" for k, n in sorted(a.sync_kinds.items()))
        report.failures.append(f"syncs: the after version performs {a.syncs_per_call} host sync(s) per eager "
                               f"call ({kinds})")
    # (A before version that raised on one of the factory's own inputs is its own failure, listed already.)
    bad = [r for r in results if r.status in ("different", "error")
           and not (r.details and r.details[0].startswith("before raised"))]
    if bad:
        first = bad[0]
        detail = first.details[0] if first.details else first.status
        names = ", ".join(r.name for r in bad[:6]) + (" ..." if len(bad) > 6 else "")
        report.failures.append(f"numerics: the after version differs from the before version on {len(bad)} of "
                               f"{len(results)} inputs ({names}); first, on {first.name}: {detail}")
    if not any(r.status != "skipped" for r in results):
        report.failures.append("numerics: no input could be compared")

    if a.data_dependent_ops:
        where = "; ".join(f"{s.location} ({s.op})" for s in a.data_dependent_ops[:3])
        report.warnings.append(f"the compiled after graph has {len(a.data_dependent_ops)} op(s) whose output size "
                               f"depends on the data; on CUDA each waits for the device: {where}")
    if a.cuda_sync_warnings:
        report.warnings.append(f"CUDA sync debug mode warned {a.cuda_sync_warnings} time(s) on the eager after version")
    if a.cuda_sync_warnings_compiled:
        report.warnings.append(f"CUDA sync debug mode warned {a.cuda_sync_warnings_compiled} time(s) on the "
                               f"compiled after version")
    not_both = [c for c in report.conditions if not c.both_seen]
    for c in not_both:
        report.warnings.append(f"condition at line {c.line} ({c.op}: {c.code}) was {c.seen} on every compared "
                               f"input: equivalence of the other side is not shown; add inputs that flip it")
    if not report.conditions:
        report.notes.append("no torch.where / clamp / maximum / minimum call was seen in the after file")
    skipped = [r.name for r in results if r.status == "skipped"]
    if skipped:
        report.notes.append(f"{len(skipped)} derived input(s) skipped (before raised or is not deterministic): "
                            + ", ".join(skipped[:6]) + (" ..." if len(skipped) > 6 else ""))


def _judge_config(report: VerifyReport, results: list[InputResult]) -> None:
    """The verdict under ``--config``: no graph break under the configuration, outputs and gradients
    equal eagerly, compiled with ``fullgraph=True`` and compiled as the program runs it; host syncs
    no more than before. A sync that remains is reported, never counted as removed: the
    configuration removes graph breaks, not syncs."""
    a, b = report.after, report.before
    flags = ", ".join(report.config)
    if a.config_graph_breaks:
        where = "; ".join(f"{x.location} ({x.reason[:120]})" for x in a.config_breaks[:3])
        report.failures.append(f"graph breaks: under {flags} the after version has {a.config_graph_breaks} graph "
                               f"break(s): {where}")
    if a.config_break_error:
        report.failures.append(f"graph breaks: under {flags} the after version raised under torch.compile: "
                               f"{a.config_break_error}")
    if not a.fullgraph_ok:
        report.failures.append(f"fullgraph: torch.compile(fullgraph=True, backend={a.fullgraph_backend!r}) of the "
                               f"after version under {flags} failed: {a.fullgraph_error}")
    if a.syncs_per_call > b.syncs_per_call:
        report.failures.append(f"syncs: the after version performs {a.syncs_per_call} host sync(s) per eager call, "
                               f"more than the {b.syncs_per_call} before")
    elif a.syncs_per_call:
        kinds = ", ".join(f"{k} {n}" for k, n in sorted(a.sync_kinds.items()))
        report.notes.append(f"host syncs remain: {a.syncs_per_call} per eager call ({kinds}), {b.syncs_per_call} "
                            f"before; {flags} removes graph breaks, not syncs")
    if a.compiled_scalar_reads:
        report.notes.append(f"the compiled after graph reads {a.compiled_scalar_reads} scalar(s) from the device "
                            "(the traced values): each still waits for the device")
    bad = [r for r in results if r.status in ("different", "error")
           and not (r.details and r.details[0].startswith("before raised"))]
    bad += [r for r in report.config_inputs if r.status in ("different", "error")]
    if bad:
        first = bad[0]
        detail = first.details[0] if first.details else first.status
        report.failures.append(f"numerics: the after version differs from the before version on {len(bad)} input "
                               f"run(s); first, on {first.name}: {detail}")
    if not any(r.status != "skipped" for r in results):
        report.failures.append("numerics: no input could be compared")
    if report.proved:
        report.notes.append(f"{flags} removed {len(report.proved)} graph-break site(s) of the after version: "
                            + "; ".join(x.location for x in report.proved[:6]))
