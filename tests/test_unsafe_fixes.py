"""Unsafe fixes never crash, never add syncs, and say what they change: a
rewritten value is followed wherever it flows, a fix that keeps the read it
claims is no fix, and notes are facts about the code they describe."""

from __future__ import annotations

from pathlib import Path

import torch
from conftest import load_module
from fixitem.codemods.driver.engine import process
from fixitem.codemods.driver.registry import all_rules
from fixitem.verify import count_host_syncs

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "unsafe_fixes"


def _apply(path: Path, unsafe: bool = True):
    return process(path, path.read_text(), all_rules(), fix=True, unsafe=unsafe)


def _run_main(path: Path):
    module = load_module(path)
    with count_host_syncs() as syncs:
        results = module.main()
    return results, syncs.total


def test_a_bound_that_flows_into_a_python_number_is_not_rewritten(tmp_path):
    source = FIXTURES / "python_only_flow.py"
    result = _apply(source)
    assert not [f for f in result.applied if f.rule == "FX103"]
    notes = [f.note for f in result.findings if f.rule == "FX103"]
    assert len(notes) == 5 and all(n.startswith("no fix:") for n in notes)
    assert any("is passed to `take`, where `n` is passed to `range`" in n for n in notes)
    assert any("`window(scores, 3, pos)` returns it" in n for n in notes)
    assert any("self.keep` is then used as an index" in n for n in notes)
    # Whatever else was rewritten: the same Python types, and no more syncs.
    after = tmp_path / "after.py"
    after.write_text(result.new_text or source.read_text())
    before_results, before_syncs = _run_main(source)
    after_results, after_syncs = _run_main(after)
    assert repr(after_results) == repr(before_results)
    assert after_syncs <= before_syncs


def test_a_returned_bound_that_stays_unsafe_names_the_type_change():
    code = (
        "import torch\n\n"
        "def lr_for(loss: torch.Tensor):\n"
        "    lr = min(loss.item(), 0.1)\n"
        "    return lr\n"
    )
    result = process(Path("lr.py"), code, all_rules(), fix=True, unsafe=True)
    (applied,) = [f for f in result.applied if f.rule == "FX103"]
    assert applied.fix == "unsafe" and "0-dim tensor where it got a Python number" in applied.note


def test_a_fix_that_would_keep_the_read_it_claims_is_no_fix():
    source = FIXTURES / "kept_read.py"
    result = _apply(source)
    text = result.new_text or ""
    # `torch.tensor(y.item()) > 0` in a `torch.where` still reads `y.item()`: nothing removed.
    assert "torch.where(torch.tensor(y.item())" not in text
    (remade,) = [f for f in result.findings if f.rule == "FX102"]
    assert remade.fix == "none" and "would still read `y.item()`" in remade.note
    # `probs[idx.item()] > 0.5` tested as a truth value: the fix removes that sync and
    # claims it alone; `idx.item()` is kept as written and reported on its own.
    assert "torch.where((probs[idx.item()] > 0.5).reshape(()), 0.5, 1.0)" in text
    assert [f.rule for f in result.applied] == ["FX102"]
    assert any("`idx.item()`" in f.message for f in result.findings if f.rule != "FX102")


def test_a_branch_that_reads_a_value_itself_is_not_selected(tmp_path):
    # ``m.mean().item() if m.any() else 0.0``: ``torch.where`` would evaluate the branch on
    # every call, keep its read, and turn the Python number into a tensor.
    source = FIXTURES / "branch_reads.py"
    result = _apply(source)
    assert result.new_text is None and not result.applied
    selections = [f for f in result.findings if f.rule in ("FX101", "FX102")]
    assert [(f.rule, f.line, f.fix) for f in selections] == [("FX102", 6, "none"), ("FX101", 11, "none")]
    assert all("a branch reads `mask.float().mean().item()` itself" in f.note for f in selections)


def _findings_by_function(path: Path):
    import ast

    result = process(path, path.read_text(), all_rules())
    module = ast.parse(path.read_text())
    lines = {}
    # Outer functions last: a line of a nested function counts as its outer function's.
    functions = [n for n in ast.walk(module) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    for node in reversed(functions):
        for line in range(node.lineno, node.end_lineno + 1):
            lines[line] = node.name
    found: dict[str, list] = {}
    for finding in result.findings:
        found.setdefault(lines.get(finding.line, "<module>"), []).append(finding)
    return found


def test_notes_about_gradients_do_not_appear_where_no_gradient_is_computed():
    found = _findings_by_function(FIXTURES / "notes.py")
    for name in ("ema_local", "evaluate", "shrink"):
        (where,) = [f for f in found[name] if f.rule in ("FX101", "FX102")]
        assert where.fix == "safe" and "gradient" not in where.note, (name, where.note)
    # What no-grad does not cover: the original returns the input `x` itself, which may
    # require grad, where `torch.where` gives a new tensor that does not.
    (passed,) = [f for f in found["ema_scale"] if f.rule == "FX101"]
    assert passed.fix == "unsafe" and "NaN" not in passed.note and "passed `x` on as it is" in passed.note


def test_a_divisor_kept_away_from_zero_is_not_said_to_be_maybe_zero():
    found = _findings_by_function(FIXTURES / "notes.py")
    (eps,) = [f for f in found["normalize"] if f.rule == "FX101"]
    assert "zero" not in eps.note and eps.note.startswith("`x` is returned")  # its one reason: the caller's `x`
    (tiny,) = [f for f in found["normalize_tiny_eps"] if f.rule == "FX101"]
    assert "may be zero" not in tiny.note and "float16" in tiny.note


def test_a_comparison_of_two_tensor_values_is_not_said_to_round_a_python_number():
    found = _findings_by_function(FIXTURES / "notes.py")
    (cmp,) = [f for f in found["below_best"] if f.rule == "FX101"]
    assert "float16/bfloat16" not in cmp.note and "holds the value of `y.min()`" in cmp.note
    # `limit` may be a tensor as well as a Python number: the note says which case it is about.
    (unknown,) = [f for f in found["over_limit"] if f.rule == "FX101"]
    assert "; if `limit` is a Python number, it may not be exact" in unknown.note


def test_a_module_used_in_both_branches_is_not_said_to_take_part_in_one():
    found = _findings_by_function(FIXTURES / "notes.py")
    (where,) = [f for f in found["<module>"] if f.rule == "FX101"]
    assert "takes part in only one branch" not in where.note


def test_gradient_free_rewrites_keep_the_results():
    import torch

    source = FIXTURES / "notes.py"
    result = _apply(source, unsafe=False)
    namespace: dict = {}
    exec(compile(result.new_text, "after", "exec"), namespace)
    before = load_module(source)
    sections = {part.split("(", 1)[0]: part for part in result.new_text.split("\ndef ")[1:]}
    assert all("torch.where(" in sections[name] for name in ("ema_local", "shrink", "evaluate"))
    for x, y in ((torch.ones(3), torch.zeros(3)), (-torch.ones(3), torch.ones(3))):
        for name in ("ema_local", "shrink"):
            after, original = namespace[name](x, y), getattr(before, name)(x, y)
            assert torch.equal(after, original) and after.requires_grad == original.requires_grad
        assert torch.equal(namespace["evaluate"](x), before.evaluate(x))


def test_an_unsafe_selection_passed_on_names_the_type_change():
    result = _apply(FIXTURES / "passed_on.py")
    (applied,) = [f for f in result.applied if f.rule == "FX101"]
    assert applied.fix == "unsafe"
    assert "`lr` becomes a 0-dim tensor where it was a Python number" in applied.note
    assert "reads the tensor back" in applied.note


def test_a_value_no_gradient_flows_through_takes_no_part_in_a_branch():
    """`torch.zeros_like(out)` reads `out` but passes no gradient to `model`: selecting it
    with `torch.where` gives `model` zero gradients where the original gave `None`."""
    found = _findings_by_function(FIXTURES / "notes.py")
    (where,) = [f for f in found["reset"] if f.rule == "FX101"]
    assert where.fix == "unsafe" and "`model` takes part in only one branch" in where.note


def test_a_guard_against_overflow_is_unsafe_to_select_with_where():
    """``exp`` past its range is inf, and so is its gradient: selected away by
    ``torch.where``, 0 * inf still sends NaN into the gradient."""
    source = FIXTURES / "overflow_guard.py"
    found = process(source, source.read_text(), all_rules()).findings
    tags = [(f.rule, f.fix, f.note) for f in found if f.rule in ("FX101", "FX102")]
    assert len(tags) == 2 and all(fix == "unsafe" and "infinite gradient" in note for _, fix, note in tags), tags
    after: dict = {}
    exec(compile(_apply(source).new_text, "after", "exec"), after)
    before = load_module(source)
    for name in ("temperature", "growth"):
        grads = []
        for module in (before.__dict__, after):
            x = torch.tensor([1000.0], requires_grad=True)
            module[name](x).sum().backward()
            grads.append(x.grad)
        assert torch.equal(grads[0], torch.ones(1)) and grads[1].isnan().all(), (name, grads)


def test_a_fix_of_a_later_pass_is_said_on_the_line_of_the_file_as_it_is(tmp_path):
    """The running sum's fix keeps the second read, which ``apply --unsafe`` fixes in a
    second pass: that fix was said on line 7, the line it had after the import was added
    (``return total`` in the file as it is), by ``scan`` and by ``apply --unsafe --diff``."""
    import fixitem

    path = tmp_path / "squares.py"
    path.write_text(
        "import torch\n"
        "def e(dev):\n"
        "    total = 0.0\n"
        "    for v in [0.1, 0.7]:\n"
        "        x = torch.full((), v, device=dev)\n"
        "        total += x.item() * x.item()\n"
        "    return total\n"
    )
    scanned = {f.rule: f for f in fixitem.scan([path], cache=False).findings}
    applied = {f.rule: f for f in fixitem.apply([path], unsafe=True, write=False, cache=False).applied}
    assert scanned["FX301"].line == applied["FX301"].line == 6 and scanned["FX301"].fix == "unsafe"
    assert scanned["FX202"].line == applied["FX202"].line == 6


def test_a_read_that_divides_or_raises_to_a_power_is_an_unsafe_operand():
    # Measured on CPU: `v.item() / x` is computed as `x.reciprocal() * v`, `v.detach() / x` divides;
    # `x ** 2.0` squares where `x ** tensor(2.0)` takes pow. (On CUDA, `x / v.item()` multiplies
    # by the reciprocal too.) `+`, `-` and `*` give the same values.
    code = (
        "import torch\n\n"
        "def f(x: torch.Tensor):\n"
        "    a = x.mean().item() / x\n"
        "    b = x ** x.mean().item()\n"
        "    c = x / x.mean().item()\n"
        "    d = x - x.mean().item()\n"
        "    return a, b, c, d\n"
    )
    result = process(Path("ops.py"), code, all_rules(), fix=True, unsafe=False)
    assert [(f.rule, f.line) for f in result.applied] == [("FX301", 7)]
    assert [(f.line, f.fix) for f in result.findings] == [(4, "unsafe"), (5, "unsafe"), (6, "unsafe")]
    x = torch.rand(1000) * 10 + 0.1
    x[0] = 2.0
    v = x.mean()
    assert not torch.equal(v.item() / x, v.detach() / x)
    assert not torch.equal(x ** x[0].item(), x ** x[0].detach())
