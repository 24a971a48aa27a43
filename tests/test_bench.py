"""The benchmark scripts in bench/ run and print their tables."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_models_quick_one_model():
    proc = subprocess.run(
        [sys.executable, "bench/models.py", "--quick", "--only", "gated_mlp", "--steps", "3"],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    row = next(line for line in proc.stdout.splitlines() if line.startswith("gated_mlp"))
    before, after, ideal = map(int, re.search(r"(\d+) -> (\d+) \((\d+)\)", row).groups())
    assert before >= 1
    assert after == 0
    assert ideal == 0
    assert "after/ideal" in proc.stdout and "before/after" in proc.stdout


@pytest.mark.slow
def test_throughput_on_local_tree():
    proc = subprocess.run(
        [sys.executable, "bench/throughput.py", "--tree", "fixtures/threshold", "--copies", "1",
         "--one-file-lines", "40,80", "--repeat", "2"],
        cwd=ROOT, capture_output=True, text=True, timeout=180,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout
    assert "fixitem throughput" in out and "each time the median of 2 runs" in out
    files = len(list((ROOT / "fixtures" / "threshold").glob("*.py")))
    rows = {line.split("  ")[1].strip(): line.split() for line in out.splitlines() if line.startswith("threshold ")}
    for label in ("fixitem scan (cold)", "fixitem scan (warm)", "fixitem apply --diff (warm)",
                  "fixitem apply --diff (cold)"):
        assert label in rows, out
        assert str(files) in rows[label], rows[label]
    cold = rows["fixitem scan (cold)"]
    assert int(cold[cold.index(str(files)) + 2]) > 0  # findings were counted
    one_file = [label for label in rows if label.startswith("fixitem scan 1 file (median")]
    assert one_file, out
    assert "Growth" in out and re.search(rf"^1x\s+{files}\s", out, re.M)
    assert "One-file growth" in out
    for lines, findings in ((5, 1), (41, 10), (81, 20)):  # the start-up, then one finding per function
        # ... then apply --diff of the annotated file (every function rewritten): timed, beside the smallest
        row = re.search(rf"^(start-up|generated)\s+{lines}\s+[\d.]+\s.*\s{findings}\s+(\S+)\s+(\S+)$", out, re.M)
        assert row, out
        assert row.groups()[1:] == ("-", "-") if lines == 5 else re.fullmatch(r"[\d.]+", row.group(2)), out
    assert "downloading" not in proc.stderr
    assert "ast.parse alone" in rows and rows["ast.parse alone"][-1] != "-", out  # timed, with its x-ruff ratio
    assert "python -c pass" in rows and re.search(r"fixitem scan 1 file \(median.*x a bare interpreter's start", out), out


def _throughput():
    import importlib.util

    spec = importlib.util.spec_from_file_location("throughput_bench", ROOT / "bench" / "throughput.py")
    bench = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = bench  # its dataclasses look their module up
    try:
        spec.loader.exec_module(bench)
    finally:
        del sys.modules[spec.name]
    return bench


def test_throughput_fails_when_fixitem_crashes(tmp_path):
    """A fixitem that cannot even start is a failure, not a fast run with no findings."""
    bench = _throughput()
    run = bench.run_timed("fixitem scan (cold)", [sys.executable, "-c", "import no_such_module_here"],
                          tmp_path, 60)
    assert run.rc == 1 and run.crashed and run.failed


def test_a_time_is_the_median_of_its_tries_and_a_failed_try_is_never_hidden(tmp_path):
    bench = _throughput()
    tries = [bench.Run("x", [], rc=0, wall_s=w) for w in (3.0, 1.0, 2.0)]
    assert bench.median_run(tries).wall_s == 2.0
    assert bench.median_run(tries[:2]).wall_s == 1.0  # of two, the faster
    crashed = bench.Run("x", [], rc=1, wall_s=0.5, crashed=True)
    assert bench.median_run([*tries, crashed]) is crashed
    quick = bench.timed_median(3, "fixitem scan (cold)", [sys.executable, "-c", "pass"], tmp_path, 60)
    assert quick.rc == 0 and not quick.failed


def test_a_command_past_its_timeout_is_killed_and_said_so(tmp_path):
    bench = _throughput()
    run = bench.run_timed("fixitem scan (cold)", [sys.executable, "-c", "import time; time.sleep(60)"],
                          tmp_path, 0.5)
    assert run.timed_out and run.failed and run.rc != 0


def test_another_environments_fixitem_can_be_measured(tmp_path):
    """``--fixitem-python``: fixitem's commands run with another interpreter (another version)."""
    fake = tmp_path / "python"
    fake.write_text("#!/bin/sh\necho \"$@\" > \"$(dirname \"$0\")/called\"\n")
    fake.chmod(0o755)
    bench = _throughput()
    bench.FIXITEM_PYTHON[0] = str(fake)
    run = bench.run_timed("fixitem scan (cold)", bench.fixitem_command("scan", "x.py"), tmp_path, 60)
    assert run.rc == 0 and (tmp_path / "called").read_text().split() == ["-m", "fixitem", "scan", "x.py"]


@pytest.mark.parametrize("parser", ["ast", "libcst"])
def test_parser_floor_parses_what_fixitem_parses(tmp_path, parser, capsys, monkeypatch):
    if parser == "libcst":
        pytest.importorskip("libcst")  # measured for scale where it is installed; fixitem does not use it
    """The parsers-alone rows parse exactly the files fixitem's prefilter lets through,
    and a file that does not parse is counted, not a crash."""
    (tmp_path / "model.py").write_text("import torch\nx = torch.ones(2)\n")
    (tmp_path / "broken.py").write_text("import torch\ndef f(:\n")
    (tmp_path / "plain.py").write_text("x = 1\n")
    (tmp_path / "read.py").write_text("y = z.item()\n")
    bench = _throughput()
    monkeypatch.setitem(sys.modules, "throughput_bench", bench)  # workers unpickle its function by name
    for workers in (1, 2):
        assert bench.main(["_parse", parser, str(tmp_path), str(workers)]) == 0
        assert capsys.readouterr().out.strip() == f"parsed 3 of 4 files with {parser}"


def _hf_models():
    import importlib.util

    spec = importlib.util.spec_from_file_location("hf_models_bench", ROOT / "bench" / "hf_models.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_hf_models_pins_each_version_without_torch_or_numpy():
    hf = _hf_models()
    assert set(hf.PINS_BY_VERSION) >= {"5.24.0", "4.52.4"}
    for version, pins in hf.PINS_BY_VERSION.items():
        assert pins[0] == f"transformers=={version}"
        names = [p.split("==")[0].lower().replace("_", "-") for p in pins]
        assert all("==" in p for p in pins) and len(set(names)) == len(names)
        assert "torch" not in names and "numpy" not in names
    sites = {hf.site_dir(v) for v in hf.PINS_BY_VERSION}
    assert len(sites) == len(hf.PINS_BY_VERSION)  # one install folder per version


def test_hf_models_skips_specs_missing_in_a_version(tmp_path):
    hf = _hf_models()
    models = tmp_path / "transformers" / "models"
    (models / "bert").mkdir(parents=True)
    (models / "bert" / "modeling_bert.py").write_text("class BertForMaskedLM(Base):\n    pass\n")
    (models / "bert" / "configuration_bert.py").write_text("class BertConfig(Base):\n    pass\n")
    (models / "gpt2").mkdir()
    (models / "gpt2" / "configuration_gpt2.py").write_text("class GPT2Config(Base):\n    pass\n")
    assert hf.missing_in(tmp_path, "bert") is None
    assert "does not exist" in hf.missing_in(tmp_path, "llama")
    assert "GPT2ForSequenceClassification" in hf.missing_in(tmp_path, "gpt2_cls")


def test_hf_models_attributes_logging_breaks():
    hf = _hf_models()
    assert hf.is_logging_break("logging.Logger method not supported for non-export cases",
                               "transformers/models/gpt2/modeling_gpt2.py:928", "logger.warning_once(")
    assert hf.is_logging_break("Unsupported function call", "transformers/utils/logging.py:340", "self.warning(*args)")
    assert not hf.is_logging_break("Unsupported Tensor.item() call with capture_scalar_outputs=False",
                                   "transformers/models/longformer/modeling_longformer.py:1175",
                                   "is_global_attn = is_index_global_attn.flatten().any().item()")
    assert set(hf.GROUPS["warning_once"]) <= set(hf.ALL_MODELS)
    logging_break = {"reason": "logging.Logger method not supported for non-export cases",
                     "location": "transformers/modeling_utils.py:4778", "logging": True, "events": 1}
    other = dict(logging_break, reason="Encountered graph break that we cannot resume from")
    rows = [{"status": "ok", "before": {"explain": {"breaks": 1, "reasons": [logging_break, other]}},
             "after": {"explain": {"breaks": 0, "reasons": []}}}]
    t = hf.totals(rows)
    assert (t["logging_lines_before"], t["logging_lines_after"]) == (1, 0)  # one line, two reasons
    assert (t["logging_models_before"], t["logging_models_after"]) == (1, 0)


def test_hf_models_inputs_of_the_warning_once_models():
    hf = _hf_models()

    class Config:
        hidden_size = 32

    cls = hf._make_inputs("cls", Config)
    assert cls["labels"].shape == (hf.BATCH,) and "input_ids" in cls
    embeds = hf._make_inputs("cls_embeds", Config)
    assert "input_ids" not in embeds and embeds["inputs_embeds"].shape == (hf.BATCH, hf.SEQ, 32)
    text = hf._make_inputs("text", Config)
    assert set(text) == {"input_ids", "attention_mask"}


def test_one_file_growth_files_have_the_lines_asked(tmp_path):
    """The one-file growth table's files: ``import torch`` and the 4-line function repeated."""
    bench = _throughput()
    for lines in (5, 41, 5000):
        text = bench.generated_file(lines, tmp_path / f"g{lines}.py").read_text()
        assert len(text.splitlines()) == lines // 4 * 4 + 1
        assert text.startswith("import torch\ndef f0(x, y):\n    if y.sum().item() > 0:\n")
        assert text.count("def f") == lines // 4
        annotated = bench.generated_file(lines, tmp_path / f"a{lines}.py", annotated=True).read_text()
        assert annotated.count("def f") == lines // 4 and len(annotated.splitlines()) == len(text.splitlines())
        assert annotated.startswith("import torch\ndef f0(x: torch.Tensor, y: torch.Tensor):\n")
