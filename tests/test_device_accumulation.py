"""FX202 on whole scripts: the textbook evaluation and training loops print the
same text after the rewrite, and their sums no longer read the device every step.

Each fixture under fixtures/accumulation/ runs in a subprocess before and after
``fixitem.apply``, under a sync counter that attributes every host sync to the
line of the script that caused it.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from fixitem.codemods.driver.engine import process
from fixitem.codemods.driver.registry import all_rules

import fixitem

# Runs a script as __main__ under fixitem's sync counter; writes {line: syncs} as JSON.
COUNTER = '''
import collections, json, os, runpy, sys
from fixitem.verify.syncs import SyncCounter

script, out = os.path.abspath(sys.argv[1]), sys.argv[2]
lines = collections.Counter()


class Located(SyncCounter):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        before = self.total
        try:
            return super().__torch_function__(func, types, args, kwargs)
        finally:
            if self.total != before:
                frame = sys._getframe(1)
                while frame is not None and os.path.abspath(frame.f_code.co_filename) != script:
                    frame = frame.f_back
                lines[frame.f_lineno if frame is not None else 0] += self.total - before


sys.argv = [script]
with Located():
    runpy.run_path(script, run_name="__main__")
with open(out, "w") as stream:
    json.dump(lines, stream)
'''

FIXTURES = ["mnist_eval.py", "cifar_running.py", "weighted_loss.py", "epoch_summary.py"]
STEP = re.compile(r"^\s*(\w+) \+= .*\.detach\(\)")


def _run(script: Path) -> tuple[str, dict[int, int]]:
    counter = script.parent / "_count_syncs.py"
    counter.write_text(COUNTER)
    out = script.with_suffix(".syncs.json")
    done = subprocess.run(
        [sys.executable, str(counter), str(script), str(out)],
        capture_output=True, text=True, timeout=300, cwd=script.parent,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout, {int(k): v for k, v in json.loads(out.read_text()).items()}


def _step_lines(text: str) -> dict[int, str]:
    """Line number -> total name, for every rewritten ``total += x.detach()...`` step."""
    return {i: m.group(1) for i, line in enumerate(text.splitlines(), 1) if (m := STEP.match(line))}


@pytest.mark.parametrize("name", FIXTURES)
def test_sums_move_to_the_device_with_the_same_output(name, copy_fixture):
    original = copy_fixture(f"accumulation/{name}")
    rewritten = original.with_name("rewritten_" + name)
    rewritten.write_text(original.read_text())
    result = fixitem.apply([rewritten], unsafe=True, isolated=True)
    assert not result.errors
    assert [f for f in result.findings if f.rule == "FX202"] == [], "every running sum gets a fix"
    text = rewritten.read_text()
    steps = _step_lines(text)
    assert steps, text

    before_out, before_syncs = _run(original)
    after_out, after_syncs = _run(rewritten)
    assert before_out.strip()
    assert after_out == before_out

    # Before, every step line synced once per iteration; after, none does.
    original_steps = [
        i for i, line in enumerate(original.read_text().splitlines(), 1)
        if re.match(r"^\s*\w+ \+= .*(\.item\(\)|float\()", line)
    ]
    assert len(original_steps) == len(steps)
    for before_line, after_line in zip(original_steps, steps):
        assert before_syncs.get(before_line, 0) >= 3, (before_line, before_syncs)
        assert after_syncs.get(after_line, 0) == 0, (after_line, after_syncs)
    assert sum(after_syncs.values()) < sum(before_syncs.values())


def test_mnist_evaluation_loop_rewrite():
    """The textbook loop: the average reads the total once, later reads stay Python."""
    source = (Path(__file__).parent.parent / "fixtures" / "accumulation" / "mnist_eval.py").read_text()
    safe = process(Path("mnist_eval.py"), source, all_rules(), fix=True).new_text
    assert safe is not None
    assert "test_loss = deferred.Accumulator(0)" in safe
    assert "test_loss = test_loss.value() / len(test_loader.dataset)" in safe
    assert "        test_loss, correct" in safe  # not yet a fix without --unsafe (`model` is unannotated)
    unsafe = process(Path("mnist_eval.py"), source, all_rules(), fix=True, unsafe=True).new_text
    assert unsafe is not None
    # `correct` is read three times after the loop: read once, right after it.
    assert "            correct += pred.eq(target.view_as(pred)).sum().detach()\n    correct = correct.value()\n\n" in unsafe
    assert "    test_loss = test_loss.value() / len(test_loader.dataset)\n" in unsafe
    assert "        test_loss, correct, len(test_loader.dataset)," in unsafe
    assert "return test_loss, correct\n" in unsafe
    assert unsafe.count(".value()") == 2


def _fix(code: str, unsafe: bool = False):
    outcome = process(Path("example.py"), code, all_rules(), fix=True, unsafe=unsafe)
    return outcome


HEAD = "import torch\n\ndef f(model: torch.nn.Module, xs, n):\n"


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        # A read that may see the running total or the average.
        (
            "    total = 0.0\n    for x in xs:\n        total += model(x).item()\n        if n:\n            total /= n\n"
            "        print(total)\n",
            "may hold another value",
        ),
        (
            "    total = 0.0\n    for x in xs:\n        total += model(x).item()\n    if n:\n        total /= n\n    print(total)\n",
            "may be the running total or another value",
        ),
        ("    total = 0.0\n    for x in xs:\n        total += model(x).item()\n    print(f'{total=}')\n", "{total=}"),
        ("    total = 0.0\n    for x in xs:\n        total += model(x).item()\n    total, m = total / n, 1\n", "another way"),
        ("    total = 0\n    for x in xs:\n        total += model(x).item() * n\n", "not known to be a floating"),
        ("    total: float = 0.0\n    for x in xs:\n        total += model(x).item()\n", "is annotated (`total: float = 0.0`)"),
    ],
)
def test_no_fix_when_a_read_may_not_get_the_original_value(body, reason):
    outcome = _fix(HEAD + body, unsafe=True)
    fx202 = [f for f in outcome.findings if f.rule == "FX202"]
    assert len(fx202) == 1 and fx202[0].fix == "none", outcome.findings
    assert reason in fx202[0].note


def test_reads_before_and_after_the_average_and_a_reset_each_epoch():
    code = HEAD + (
        "    for epoch in range(3):\n"
        "        if epoch:\n"
        "            print(total)\n"
        "        total = 0\n"
        "        for x in xs:\n"
        "            total += model(x).item()\n"
        "        print(total > 1, total)\n"
        "        total /= len(xs)\n"
        "        total = round(total, 3)\n"
        "    return total\n"
    )
    fixed = _fix(code).new_text
    assert fixed is not None
    assert "            print(total)\n" in fixed  # the previous epoch's average: a Python number
    # Three reads after the inner loop (two in the print, one in the average): read once.
    assert "            total += model(x).detach()\n        total = total.value()\n" in fixed
    assert "        print(total > 1, total)\n        total /= len(xs)\n" in fixed
    assert "        total = round(total, 3)\n    return total\n" in fixed
    namespace: dict = {}
    for text in (code, fixed):
        exec(compile(text, "example.py", "exec"), namespace)
        namespace.setdefault("results", []).append(namespace["f"](lambda x: x * 2, torch_values(), 2))
    before, after = namespace["results"]
    assert before == after and type(before) is type(after)


def torch_values():
    import torch

    return torch.tensor([0.1, 0.7, 2.5, -0.3])


def test_a_compound_right_side_is_parenthesised():
    code = HEAD + "    total = 0.0\n    for x in xs:\n        total += model(x).item()\n    total /= n + 1\n    return total\n"
    fixed = _fix(code).new_text
    assert fixed is not None and "    total = total.value() / (n + 1)\n" in fixed


def test_subtracted_terms_stay_on_the_device_too():
    code = HEAD + (
        "    balance = 0.0\n    for x in xs:\n        balance += model(x).item()\n        balance -= model(-x).item() * 0.5\n"
        "    return balance\n"
    )
    fixed = _fix(code).new_text
    assert fixed is not None
    assert "        balance -= model(-x).detach().double() * 0.5\n" in fixed
    results = []
    for text in (code, fixed):
        namespace: dict = {}
        exec(compile(text, "example.py", "exec"), namespace)
        results.append(namespace["f"](lambda x: x * 3, torch_values(), 1))
    assert results[0] == results[1] and type(results[0]) is float


def test_starts_unpacked_from_literals():
    code = HEAD + (
        "    total, correct, n = 0, 0, 0\n    for x in xs:\n        out = model(x)\n"
        "        total += out.sum().item()\n        correct += (out > 0).sum().item()\n        n += len(x)\n"
        "    total /= n\n    return total, correct\n"
    )
    fixed = _fix(code).new_text
    assert fixed is not None
    assert "    total, correct, n = deferred.Accumulator(0), deferred.Accumulator(0), 0\n" in fixed
    assert "    total = total.value() / n\n    return total, correct.value()\n" in fixed
    results = []
    for text in (code, fixed):
        namespace: dict = {}
        exec(compile(text, "example.py", "exec"), namespace)
        results.append(namespace["f"](lambda x: x - 1, [torch_values(), torch_values() * 2], 0))
    assert results[0] == results[1] and [type(v) for v in results[0]] == [float, int]


@pytest.mark.parametrize(
    ("loop", "line"),
    [
        # A progress line every step: each `.value()` would be a sync, as each `.item()` was.
        ("    for i, x in enumerate(xs):\n        total += model(x).item()\n        print(total / (i + 1))\n", 7),
        # Read twice a step: the rewrite would double the syncs.
        ("    for x in xs:\n        total += model(x).item()\n        print(100.0 * total / n, total)\n", 7),
        # Before the step, inside a `with` and a `try` body, in the test of an `if`: still every step.
        ("    for x in xs:\n        with torch.no_grad():\n            try:\n                if total > n:\n"
         "                    n += 1\n            finally:\n                pass\n        total += model(x).item()\n", 8),
        # In a loop inside the loop: maybe many reads a step.
        ("    for x in xs:\n        total += model(x).item()\n        for k in range(n):\n            print(k, total)\n", 8),
        # The condition of the loop itself.
        ("    while total < n:\n        total += model(xs).item()\n", 5),
    ],
)
def test_no_fix_when_the_total_is_read_every_step(loop, line):
    outcome = _fix(HEAD + "    total = 0.0\n" + loop, unsafe=True)
    fx202 = [f for f in outcome.findings if f.rule == "FX202"]
    assert len(fx202) == 1 and fx202[0].fix == "none", outcome.findings
    assert f"`total` is read every step (line {line})" in fx202[0].note
    assert outcome.new_text is None


@pytest.mark.parametrize(
    "loop",
    [
        "    for i, x in enumerate(xs):\n        total += model(x).item()\n        if i % 10 == 0:\n            print(total)\n",
        "    for x in xs:\n        total += model(x).item()\n        print(n and total)\n",
        "    for x in xs:\n        total += model(x).item()\n        print(total if n > 3 else 0)\n",
        "    for x in xs:\n        total += model(x).item()\n        try:\n            n += 1\n        except ValueError:\n"
        "            print(total)\n",
        # Read once per epoch, after the loop that adds.
        "    for epoch in range(n):\n        for x in xs:\n            total += model(x).item()\n        print(total)\n",
    ],
)
def test_reads_under_a_condition_or_after_the_loop_keep_the_fix(loop):
    code = HEAD + "    total = 0.0\n" + loop
    outcome = _fix(code)
    assert outcome.new_text is not None and "total += model(x).detach()" in outcome.new_text
    assert "total.value()" in outcome.new_text


def _results(code: str, fixed: str, *args):
    results = []
    for text in (code, fixed):
        namespace: dict = {}
        exec(compile(text, "example.py", "exec"), namespace)
        results.append(namespace["f"](*args))
    return results


@pytest.mark.parametrize("start", ["0", "0.0"])
def test_several_reads_after_the_loop_read_the_device_once(start):
    code = HEAD + (
        f"    total = {start}\n    for x in xs:\n        total += model(x).sum().item()\n"
        "    print(total)\n    total /= n\n    return isinstance(total, float), round(total, 3), total == total\n"
    )
    fixed = _fix(code).new_text
    assert fixed is not None
    assert "        total += model(x).sum().detach()\n    total = total.value()\n    print(total)\n    total /= n\n" in fixed
    assert fixed.count(".value()") == 1
    for values in (torch_values(), torch_values().long()):
        before, after = _results(code, fixed, lambda x: x * 3, values, 2)
        assert before == after and [type(v) for v in before] == [type(v) for v in after]


def test_a_read_in_a_later_loop_reads_the_device_once_before_it():
    code = HEAD + (
        "    total = 0\n    for x in xs:\n        total += (model(x) > 0).sum().item()\n"
        "    shown = []\n    for k in range(n):\n        shown.append(total + k)\n    return shown\n"
    )
    fixed = _fix(code).new_text
    assert fixed is not None and "    total = total.value()\n    shown = []\n" in fixed
    assert "shown.append(total + k)" in fixed
    before, after = _results(code, fixed, lambda x: x - 0.5, torch_values(), 3)
    assert before == after and [type(v) for v in after] == [int] * 3


@pytest.mark.parametrize(
    ("rest", "reads"),
    [
        # The next epoch adds to the same total: reading it into a number after the
        # inner loop would break the sum, so each read stays a read of the accumulator.
        ("    total = 0.0\n    for epoch in range(n):\n        for x in xs:\n            total += model(x).sum().item()\n"
         "        print(epoch, total)\n        print(total / (epoch + 1))\n", 2),
        # Only reads under conditions: reading once could read where nothing did.
        ("    total = 0.0\n    for x in xs:\n        total += model(x).sum().item()\n"
         "    if n > 1:\n        print(total)\n    if n > 2:\n        print(-total)\n", 2),
        # One read after the loop.
        ("    total = 0.0\n    for x in xs:\n        total += model(x).sum().item()\n    print(total)\n    return n\n", 1),
    ],
)
def test_reads_that_stay_reads_of_the_accumulator(rest, reads):
    fixed = _fix(HEAD + rest).new_text
    assert fixed is not None and "total += model(x).sum().detach()" in fixed
    assert "total = total.value()" not in fixed
    assert fixed.count("total.value()") == reads


def test_spelled_out_sums_add_in_place():
    code = HEAD + (
        "    top1, top5, balance = 0, 0, 0.0\n    for x in xs:\n        out = model(x)\n"
        "        top1 = top1 + (out > 0).sum().item()\n        top5 = (out > -1).sum().item() + top5\n"
        "        balance = balance - out.sum().item() * 0.5\n    return top1, top5, balance\n"
    )
    outcome = _fix(code)
    assert [(f.rule, f.fix) for f in outcome.applied] == [("FX202", "safe")] * 3
    fixed = outcome.new_text
    assert fixed is not None
    assert "        top1 += (out > 0).sum().detach()\n        top5 += (out > -1).sum().detach()\n" in fixed
    assert "        balance -= out.sum().detach().double() * 0.5\n    return top1.value(), top5.value(), balance.value()\n" in fixed
    before, after = _results(code, fixed, lambda x: x - 0.5, [torch_values(), -torch_values()], 0)
    assert before == after and [type(v) for v in after] == [int, int, float]


def test_two_totals_read_after_the_same_loop_are_read_in_order():
    code = HEAD + (
        "    a, b = 0.0, 0\n    for x in xs:\n        a += model(x).sum().item()\n        b += (model(x) > 0).sum().item()\n"
        "    print(a, b)\n    return a / b, b, a\n"
    )
    fixed = _fix(code).new_text
    assert fixed is not None
    assert "        b += (model(x) > 0).sum().detach()\n    a = a.value()\n    b = b.value()\n    print(a, b)\n" in fixed
    before, after = _results(code, fixed, lambda x: x * 2, [torch_values(), torch_values()[:2]], 0)
    assert before == after and [type(v) for v in after] == [float, int, float]


def test_the_accumulator_uses_the_runtime_alias_when_deferred_is_taken(tmp_path):
    """A file that has its own `deferred` gets the runtime under another name, in FX202 too."""
    from pathlib import Path

    from fixitem.codemods.driver.engine import process
    from fixitem.codemods.driver.registry import all_rules

    code = (
        "import torch\n\n"
        "def evaluate(model: torch.nn.Module, batches, deferred):\n"
        "    total = 0.0\n"
        "    for x in batches:\n"
        "        total += model(x).sum().item()\n"
        "    return total, deferred\n"
    )
    new = process(Path("a.py"), code, all_rules(), fix=True).new_text
    assert new is not None and "fixitem_deferred.Accumulator(0.0)" in new
    assert "from fixitem import runtime as fixitem_deferred" in new
