"""Report-only findings say what to do by hand, specific to the pattern."""

from __future__ import annotations

from pathlib import Path

from fixitem import scan

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "advice" / "report_only.py"


def _notes() -> dict[int, str]:
    result = scan([FIXTURE], isolated=True, cache=False)
    assert not result.errors
    return {f.line: f"{f.rule} {f.note}" for f in result.findings}


def _line(marker: str) -> int:
    return next(n for n, text in enumerate(FIXTURE.read_text().splitlines(), 1) if marker in text)


def test_each_pattern_gets_its_own_advice():
    notes = _notes()
    expert = notes[_line("# an expert index")]
    assert expert.startswith("FX006") and "grouped GEMM" in expert and "masked inputs" in expert
    size = notes[_line("int(router_logits.gt(0).sum())")]
    assert "Python size or index" in size and "torch._check" in size
    nan = notes[_line("# NaN-skip logic")]
    assert nan.startswith("FX101") and "GradScaler" in nan and "found_inf" in nan
    leaves = notes[_line("# a value that leaves the program")]
    assert leaves.startswith("FX001") and "leaves the program" in leaves
    loop = notes[_line("# an early exit on a tensor")]
    assert "torch.cond" in loop or "out of the compiled code" in loop
    # detr's COCO file names: formatted into text that is kept, not printed or logged.
    text = notes[_line("# a value formatted into a name")]
    assert "formatted into text" in text and "printing or logging" not in text


def test_a_comprehension_filter_on_the_elements_of_a_tensor_reads_one_per_element():
    """vit-pytorch's layer dropout: `[layer for (layer, drop) in zip(layers, to_drop) if not drop]`
    reads every element; what the list is then used for (returned) does not matter."""
    code = (
        "import torch\n\n"
        "def dropout_layers(layers, dropout):\n"
        "    to_drop = torch.zeros(len(layers), device='cuda').uniform_(0.0, 1.0) < dropout\n"
        "    kept = [layer for (layer, drop) in zip(layers, to_drop) if not drop]\n"
        "    return kept\n\n"
        "def evens(xs, keep: torch.Tensor):\n"
        "    return [x for x in xs if keep.any()]\n"
    )
    from pathlib import Path

    from fixitem.codemods.driver.engine import process
    from fixitem.codemods.driver.registry import all_rules

    per_element, condition = process(Path("a.py"), code, all_rules()).findings
    assert "one element of a tensor per iteration" in per_element.note and "to_drop.tolist()" in per_element.note
    assert condition.note.startswith("Python control flow needs the value")


def test_adding_a_read_into_a_tensor_total_says_the_total_is_on_the_device():
    code = (
        "import torch\n\n"
        "def train(model, batches, w: torch.Tensor):\n"
        "    totals = torch.zeros(2)\n"
        "    for x in batches:\n"
        "        loss = model(x).pow(2).mean()\n"
        "        totals[0] += loss.item()\n"
        "    total = 0.0\n"
        "    for x in batches:\n"
        "        total += float((w * 2).sum())\n"
        "    return totals, total\n"
    )
    from pathlib import Path

    from fixitem.codemods.driver.engine import process
    from fixitem.codemods.driver.registry import all_rules

    notes = [f.note for f in process(Path("a.py"), code, all_rules()).findings]
    assert "the total is a tensor already" in notes[0]
    assert "the total is a tensor already" not in notes[1]


def test_an_indexed_loop_over_a_tensor_reads_one_element_per_iteration():
    """minGPT's adder: `for i in range(idx.size(0)): ... int(idx[i])`."""
    code = (
        "import torch\n\n"
        "def decode(device, itos):\n"
        "    idx = torch.randint(0, 5, (6,), device=device)\n"
        "    out = []\n"
        "    for i in range(idx.size(0)):\n"
        "        out.append(itos[int(idx[i])])\n"
        "    for j in range(3):\n"
        "        out.append(itos[int(idx[j])])\n"
        "    return out\n"
    )
    from pathlib import Path

    from fixitem.codemods.driver.engine import process
    from fixitem.codemods.driver.registry import all_rules

    indexed, fixed_count = process(Path("a.py"), code, all_rules()).findings
    assert "Read the tensor once (`values = idx.tolist()`" in indexed.note
    assert "idx.tolist()" not in fixed_count.note  # a loop of its own length: no such advice


def test_a_read_passed_to_a_function_of_another_module_says_so(tmp_path):
    """`print0(f"... {loss.item():.4f}")` passes the read into the call. With the module that
    defines `print0` beside the script, fixitem reads it, sees a wrapper of print and defers
    the call; without it (the script alone), the note says `print0` is defined in another
    module, which fixitem cannot read."""
    path = FIXTURE.parent / "elsewhere" / "train.py"
    lines = path.read_text().splitlines()

    def notes(where):
        result = scan([where], isolated=True, cache=False)
        return {lines[f.line - 1].split("#")[-1].strip(): f for f in result.findings}

    found = notes(path)
    assert (found["a print wrapper of another module"].rule, found["a print wrapper of another module"].fix) == (
        "FX201", "safe")
    other = found["a function of another module"]
    assert "`record` is defined in another module (`dist_utils`)" in other.note and "loss.detach()" in other.note
    assert found["deferred: print is known"].rule == "FX201"
    alone = tmp_path / "train.py"
    alone.write_text(path.read_text())
    wrapper = notes(alone)["a print wrapper of another module"]
    assert wrapper.fix == "none"
    assert "`print0` is defined in another module (`dist_utils`)" in wrapper.note
    assert "straight into the call" not in wrapper.note and "define `print0` in this file" in wrapper.note
