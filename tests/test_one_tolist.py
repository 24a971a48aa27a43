"""FX303 one-tolist: per-element `.item()` reads become one `.tolist()`.

The before and after code is run on real tensors of several shapes and
dtypes: the results must be identical in value *and* Python type (an `int`
stays an `int`, a `bool` a `bool`), errors must stay errors, and the host
syncs (counted with a TorchFunctionMode) must drop from one per element to one.
"""

from __future__ import annotations

import contextlib
import io

import math
import shutil
from pathlib import Path

import pytest
import torch
from conftest import FIXTURES, load_module
from fixitem.codemods.driver.engine import process
from fixitem.codemods.driver.registry import all_rules
from fixitem.verify.syncs import count_host_syncs

import fixitem

HEADER = "import torch\n\n"

# Each pattern defines ``f(t)``; all are fixed safely.
SAFE_PATTERNS = {
    "list": "def f(t: torch.Tensor):\n    return [x.item() for x in t]\n",
    "round": "def f(t: torch.Tensor):\n    return [round(v.item(), 2) for v in t]\n",
    "sum-generator": "def f(t: torch.Tensor):\n    return sum(x.item() for x in t)\n",
    "sorted-generator": "def f(t: torch.Tensor):\n    return sorted((v.item() for v in t), reverse=True)\n",
    "set": "def f(t: torch.Tensor):\n    return {v.item() for v in t}\n",
    "dict-enumerate": "def f(t: torch.Tensor):\n    return {i: v.item() for i, v in enumerate(t)}\n",
    "filter": "def f(t: torch.Tensor):\n    return [x.item() for x in t if x.item() > 0]\n",
    "float": "def f(t: torch.Tensor):\n    return [float(v) for v in t]\n",
    "int": "def f(t: torch.Tensor):\n    return [int(v) for v in t]\n",
    "loop-append": "def f(t: torch.Tensor):\n    out = []\n    for v in t:\n        out.append(v.item())\n    return out\n",
    "loop-sum": "def f(t: torch.Tensor):\n    total = 0.0\n    for v in t:\n        total += v.item()\n    return total\n",
    "loop-format": (
        "def f(t: torch.Tensor):\n    lines = []\n    for i, v in enumerate(t):\n"
        "        lines.append(f'{i}: {v.item():.3f}')\n    return '\\n'.join(lines)\n"
    ),
    "indexed-len": "def f(t: torch.Tensor):\n    return [t[i].item() for i in range(len(t))]\n",
    "indexed-shape": "def f(t: torch.Tensor):\n    return [t[i].item() for i in range(t.shape[0])]\n",
    "indexed-numel": "def f(t: torch.Tensor):\n    return [t[i].item() for i in range(t.numel())]\n",
}


def _tensors() -> dict[str, torch.Tensor]:
    torch.manual_seed(0)
    special = torch.tensor([0.1, -2.5, float("nan"), float("inf"), -0.0, 3.0])
    return {
        "float32-n": special,
        "float32-n1": special.reshape(-1, 1),
        "float64-n": torch.randn(5, dtype=torch.float64),
        "float16-n": torch.randn(4).half(),
        "bfloat16-n1": torch.randn(4, 1).bfloat16(),
        "int64-n": torch.tensor([3, -7, 2**53 + 1, 0, 2**62 + 1]),
        "int64-n1": torch.tensor([[3], [-7], [2**53 + 1]]),
        "int32-n": torch.tensor([1, 2, -3], dtype=torch.int32),
        "uint8-n": torch.tensor([0, 200, 255], dtype=torch.uint8),
        "bool-n": torch.tensor([True, False, True]),
        "n11": torch.arange(3.0).reshape(3, 1, 1),
        "one": torch.tensor([4.5]),
        "one1": torch.tensor([[7]]),
        "empty": torch.zeros(0),
        "empty-int": torch.zeros(0, dtype=torch.long),
        "empty-0x1": torch.zeros(0, 1),
        "non-contiguous": torch.arange(12.0).reshape(3, 4)[:, 1],
        "requires-grad": torch.tensor([1.0, 2.0], requires_grad=True) * 3,
    }


# Shapes on which iterating with `.item()` raises: the fix must raise too.
BAD_SHAPES = {"rows-of-two": torch.ones(3, 2), "zero-dim": torch.tensor(5.0), "1x3": torch.ones(1, 3)}


def same(a, b) -> bool:
    """Equal in value and Python type, recursively; NaN equals NaN."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return (math.isnan(a) and math.isnan(b)) or (a == b and math.copysign(1, a) == math.copysign(1, b))
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (set, frozenset)):
        return sorted(map(repr, a)) == sorted(map(repr, b))
    return a == b


def rewrite(code: str, unsafe: bool = False):
    outcome = process(Path("pattern.py"), code, all_rules(), fix=True, unsafe=unsafe)
    assert outcome.error is None
    return outcome


def define(code: str):
    namespace: dict = {}
    exec(compile(code, "<pattern>", "exec"), namespace)
    return namespace["f"]


def run(fn, t):
    with count_host_syncs() as syncs:
        try:
            result = ("ok", fn(t))
        except Exception as exc:  # noqa: BLE001 - the exception type is the result
            result = ("raised", type(exc))
    return result, syncs.total


@pytest.fixture(scope="module")
def rewritten():
    pairs = {}
    for name, body in SAFE_PATTERNS.items():
        before = HEADER + body
        outcome = rewrite(before)
        assert outcome.new_text is not None, name
        assert [f.rule for f in outcome.applied] == ["FX303"], name
        assert all(f.fix == "safe" for f in outcome.applied)
        pairs[name] = (before, outcome.new_text)
    return pairs


# `float(t)` of a tensor that requires grad warns (torch 2.13); `.tolist()` does not.
@pytest.mark.filterwarnings("ignore:Converting a tensor with requires_grad=True:UserWarning")
@pytest.mark.parametrize("pattern", sorted(SAFE_PATTERNS))
def test_same_results_and_types_with_one_sync(rewritten, pattern):
    before_code, after_code = rewritten[pattern]
    before, after = define(before_code), define(after_code)
    for name, t in _tensors().items():
        (kind_b, value_b), syncs_b = run(before, t)
        (kind_a, value_a), syncs_a = run(after, t)
        assert kind_b == kind_a, (pattern, name, value_b, value_a)
        if kind_b == "raised":  # int(nan), int(inf): the same exception
            assert value_b is value_a, (pattern, name)
        else:
            assert same(value_b, value_a), (pattern, name, value_b, value_a)
        assert syncs_a == 1, (pattern, name, syncs_a)  # one .tolist(), whatever the size
        if len(t) >= 2 and kind_b == "ok":
            assert syncs_b >= len(t), (pattern, name, syncs_b)


@pytest.mark.parametrize("pattern", sorted(SAFE_PATTERNS))
def test_shapes_the_original_rejects_still_raise(rewritten, pattern):
    before_code, after_code = rewritten[pattern]
    before, after = define(before_code), define(after_code)
    for name, t in BAD_SHAPES.items():
        (kind_b, error_b), _ = run(before, t)
        (kind_a, error_a), _ = run(after, t)
        assert kind_b == kind_a == "raised", (pattern, name)
        if pattern in ("list", "round", "sum-generator", "set", "loop-append", "loop-sum", "dict-enumerate"):
            # `.item()` over rows of several elements: RuntimeError both ways;
            # iterating a 0-dim tensor and `len()` of one: TypeError both ways.
            assert error_b is error_a, (pattern, name, error_b, error_a)


# Passes that may read no row: over rows of several elements the original then ran on, and
# ``reshape(len(t))`` before the loop raises. Each fix is unsafe, and says why.
NO_ROW_READ = {
    "break-first": ("    out = []\n    for v in t:\n        break\n        out.append(v.item())\n    return out\n",
                    "is not the first thing each pass does"),
    "under-if": ("    out = []\n    for v in t:\n        if out:\n            out.append(v.item())\n    return out\n",
                 "is not the first thing each pass does"),
    "conditional-expression": ("    out = []\n    for v in t:\n        out.append(v.item() if names else 0)\n"
                               "    return out[:0]\n", "is not the first thing each pass does"),
    "zip": ("    return {k: v.item() for k, v in zip(names, t)}\n", "stops at its shortest argument"),
    "second-filter": ("    return [v.item() for v in t if names if v.item() > 0]\n", "may reject every row"),
}


def _unsafe_fix(code: str, *said: str):
    """The one FX303 finding of ``code`` is an unsafe fix whose note says each of ``said``;
    the original function and the one ``--unsafe`` writes."""
    (finding,) = [f for f in rewrite(code).findings if f.rule == "FX303"]
    assert finding.fix == "unsafe" and all(part in finding.note for part in said), finding.note
    return define(code), define(rewrite(code, unsafe=True).new_text)


@pytest.mark.parametrize("pattern", sorted(NO_ROW_READ))
def test_a_pass_that_may_read_no_row_is_an_unsafe_fix(pattern):
    body, why = NO_ROW_READ[pattern]
    code = HEADER + "def f(t: torch.Tensor, names=()):\n" + body
    original, after = _unsafe_fix(code, why, "raises before the loop")
    rows = torch.ones(3, 2)
    assert original(rows) in ([], {})  # no row read: the original runs
    with pytest.raises(RuntimeError):
        after(rows)  # what the fix may do, and why it is unsafe


def test_an_effect_before_the_read_in_a_pass_makes_the_fix_unsafe():
    # Over rows of several elements the original printed "got one" and then raised; the fix
    # would raise before the loop, printing nothing.
    code = HEADER + (
        "def f(t: torch.Tensor):\n    out = []\n    for v in t:\n        print('got one')\n"
        "        out.append(v.item())\n    return out\n"
    )
    original, fixed = _unsafe_fix(code, "is not the first thing each pass does")
    before, after = io.StringIO(), io.StringIO()
    for fn, out in ((original, before), (fixed, after)):
        with contextlib.redirect_stdout(out), pytest.raises(RuntimeError):
            fn(torch.ones(2, 2))
    assert before.getvalue() == "got one\n" and after.getvalue() == ""


def test_a_try_around_the_loop_makes_the_fix_unsafe():
    # ``float()`` of a row of several elements raised ValueError, which the handler caught;
    # ``reshape`` raises RuntimeError.
    code = HEADER + (
        "def f(t: torch.Tensor):\n    probs = torch.softmax(t, -1)\n    try:\n"
        "        return [float(p) for p in probs]\n    except ValueError:\n        return 'fallback'\n"
    )
    original, fixed = _unsafe_fix(code, "the `try` around it (line 5) handles exceptions")
    assert original(torch.randn(3, 2)) == "fallback"
    with pytest.raises(RuntimeError):
        fixed(torch.randn(3, 2))


def test_a_read_in_the_first_filter_or_the_test_of_the_body_is_read_in_every_pass():
    code = HEADER + (
        "def f(t: torch.Tensor, names: list):\n"
        "    kept = [v.item() for v in t if v.item() > 0]\n"
        "    for k, label in enumerate(t):\n"
        "        if not names[label.item()]:\n"
        "            names.append(k)\n"
        "    return kept, names\n"
    )
    outcome = rewrite(code)
    assert [(f.rule, f.fix) for f in outcome.applied] == [("FX303", "safe")] * 2


def test_the_measured_reason_for_reshape():
    """Plain `.tolist()` nests a (n, 1) tensor and flattens nothing; `.flatten()`
    hides the error of rows with several elements. `reshape(len(t))` does neither."""
    t = torch.tensor([[1.0], [2.0]])
    assert [x.item() for x in t] == [1.0, 2.0]
    assert t.tolist() == [[1.0], [2.0]]
    assert t.reshape(len(t)).tolist() == [1.0, 2.0]
    wide = torch.ones(2, 2)
    with pytest.raises(RuntimeError):
        [x.item() for x in wide]
    assert wide.flatten().tolist() == [1.0] * 4  # silently different
    with pytest.raises(RuntimeError):
        wide.reshape(len(wide))


def test_expression_iterable_is_an_unsafe_flatten():
    code = HEADER + "def f(t: torch.Tensor):\n    return [x.item() for x in t * 2]\n"
    assert rewrite(code, unsafe=False).new_text is None
    findings = process(Path("p.py"), code, all_rules()).findings
    assert [(f.rule, f.fix) for f in findings] == [("FX303", "unsafe")]
    assert "flatten" in findings[0].note
    fixed = rewrite(code, unsafe=True).new_text
    assert "(t * 2).flatten().tolist()" in fixed
    before, after = define(code), define(fixed)
    for t in (torch.arange(4.0), torch.arange(4).reshape(4, 1), torch.zeros(0)):
        assert same(before(t), after(t))
        with count_host_syncs() as syncs:
            after(t)
        assert syncs.total == 1
    # The documented reason it is unsafe: the original raised, the fix does not.
    with pytest.raises(RuntimeError):
        before(torch.ones(2, 2))
    assert after(torch.ones(2, 2)) == [2.0] * 4


# --- What is left alone, or only reported -------------------------------------------------


def test_numpy_arrays_and_lists_are_left_alone():
    code = (
        "import numpy as np\nimport torch\n\n"
        "def f(values):\n"
        "    arr = np.asarray(values)\n"
        "    out = [v.item() for v in arr]\n"
        "    total = sum(v.item() for v in np.arange(3.0))\n"
        "    for v in arr:\n"
        "        out.append(v.item())\n"
        "    return out, total\n"
    )
    assert rewrite(code, unsafe=True).new_text is None
    assert process(Path("p.py"), code, all_rules()).findings == []
    listed = HEADER + "def f(xs: list):\n    return [x.item() for x in xs]\n"
    assert rewrite(listed, unsafe=True).new_text is None
    assert "FX303" not in [f.rule for f in process(Path("p.py"), listed, all_rules()).findings]


@pytest.mark.parametrize(
    "body",
    [
        "    return [v.item() for v in t if v > 0]\n",  # compared as a tensor
        "    return [(v * 2).item() for v in t]\n",
        "    return [v.item() + v.sum().item() for v in t]\n",
        "    out = []\n    for v in t:\n        out.append(v.item())\n        out.append(v)\n    return out\n",
        "    out = []\n    for v in t:\n        v = v.item()\n        out.append(v)\n    return out\n",
    ],
)
def test_element_used_as_a_tensor_is_not_fixed(body):
    code = HEADER + "def f(t: torch.Tensor):\n" + body
    outcome = rewrite(code, unsafe=True)
    assert all(f.rule != "FX303" for f in outcome.applied)
    assert "FX303" not in [f.rule for f in process(Path("p.py"), code, all_rules()).findings]


def test_a_comprehension_nested_in_another_reads_its_own_row_once():
    # The outer comprehension uses each row as a tensor (it iterates it); the inner one only
    # reads the row's elements, one sync each: it reads the row once instead.
    code = HEADER + "def f(t: torch.Tensor):\n    return [[x.item() for x in row] for row in t.unbind(0)]\n"
    outcome = rewrite(code, unsafe=False)
    assert [f.rule for f in outcome.applied] == ["FX303"]
    assert "    return [row.reshape(len(row)).tolist() for row in t.unbind(0)]\n" in outcome.new_text
    t = torch.arange(6.0).reshape(2, 3)
    assert define(outcome.new_text)(t) == [[x.item() for x in row] for row in t.unbind(0)]


@pytest.mark.parametrize(
    ("body", "why"),
    [
        ("    out = []\n    for v in t:\n        out.append(v.item())\n        step()\n    return out\n", "step()"),
        ("    out = []\n    for v in t:\n        out.append(v.item())\n        t.mul_(2)\n    return out\n", "in place"),
        ("    out = []\n    for v in t:\n        out.append(v.item())\n        t[0] = 5\n    return out\n", "writes to a tensor"),
        ("    gen = (v.item() for v in t)\n    step()\n    return list(gen)\n", "not consumed on the spot"),
        ("    out = []\n    for v in t:\n        out.append(v.item())\n    return out, v\n", "read outside the loop"),
        ("    return [(i, t[i].item()) for i in range(len(t))]\n", "values[i]"),
    ],
)
def test_report_only_with_what_to_do_by_hand(body, why):
    code = HEADER + "def f(t: torch.Tensor, step=lambda: None):\n" + body
    findings = [f for f in process(Path("p.py"), code, all_rules()).findings if f.rule == "FX303"]
    assert len(findings) == 1
    assert findings[0].fix == "none"
    assert why in findings[0].note and ".tolist()" in findings[0].note
    assert rewrite(code, unsafe=True).new_text is None or "FX303" not in [f.rule for f in rewrite(code, unsafe=True).applied]


def test_body_that_mutates_the_tensor_is_why_it_is_report_only():
    """What the interleaving check protects: reading once changes the values."""
    code = HEADER + "def f(t: torch.Tensor):\n    out = []\n    for v in t:\n        out.append(v.item())\n        t.mul_(2)\n    return out\n"
    before = define(code)
    hoisted = define(code.replace("for v in t:", "for v in t.reshape(len(t)).tolist():").replace("v.item()", "v"))
    assert before(torch.ones(3)) == [1.0, 2.0, 4.0]
    assert hoisted(torch.ones(3)) == [1.0, 1.0, 1.0]


def test_running_sum_with_an_unknown_call_is_left_to_device_accumulation():
    code = HEADER + (
        "def f(t: torch.Tensor, step):\n    total = 0.0\n    for v in t:\n"
        "        total += v.item()\n        step()\n    return total\n"
    )
    outcome = rewrite(code)
    assert [f.rule for f in outcome.applied] == ["FX202"]


def test_running_sum_over_a_tensor_is_one_tolist_not_an_accumulator():
    code = HEADER + "def f(t: torch.Tensor):\n    total = 0.0\n    for v in t:\n        total += v.item()\n    return total\n"
    outcome = rewrite(code)
    assert [f.rule for f in outcome.applied] == ["FX303"]
    assert "deferred" not in outcome.new_text  # plain Python sums, no runtime import


def test_arithmetic_with_a_tensor_is_left_to_detach():
    code = HEADER + "def f(t: torch.Tensor, x: torch.Tensor):\n    return [x - v.item() for v in t]\n"
    outcome = rewrite(code, unsafe=True)  # unsafe: `x` may be 0-dim, and `v`'s dtype would then win
    assert [f.rule for f in outcome.applied] == ["FX301"]


def test_comments_inside_a_comprehension_are_kept():
    code = HEADER + "def f(t: torch.Tensor):\n    return [\n        v.item()  # one per sample\n        for v in t\n    ]\n"
    fixed = rewrite(code).new_text
    assert "# one per sample" in fixed
    assert same(define(code)(torch.arange(3.0)), define(fixed)(torch.arange(3.0)))


def test_suppression_comment():
    code = HEADER + "def f(t: torch.Tensor):\n    return [x.item() for x in t]  # fixitem: ignore[FX303]\n"
    assert rewrite(code).new_text is None


# --- The fixture, through the Python API --------------------------------------------------

FIXTURE = FIXTURES / "logging" / "per_element.py"


@pytest.fixture(scope="module")
def fixture_pair(tmp_path_factory):
    target = tmp_path_factory.mktemp("per_element") / "per_element.py"
    shutil.copyfile(FIXTURE, target)
    result = fixitem.apply([target], isolated=True)
    (file,) = result.files
    assert file.error is None and file.written
    assert {f.rule for f in file.applied} == {"FX303"}
    assert all(f.fix == "safe" for f in file.applied)
    remaining = [f for f in file.findings if f.rule == "FX303"]
    # ``zip(names, scores)`` may read no row (``names`` empty); ``track``: ``step()`` may write.
    assert [(f.line, f.fix) for f in remaining] == [(11, "unsafe"), (42, "none")]
    return load_module(FIXTURE), load_module(target), target


@pytest.mark.parametrize(
    "scores",
    [
        torch.tensor([0.25, 0.75, 0.5, 0.125]),
        torch.tensor([[0.25], [0.75], [0.5], [0.125]]),
        torch.tensor([3, 1, 2, 5]),
        torch.tensor([[3], [1], [2], [5]]),
        torch.zeros(0),
    ],
    ids=["float-n", "float-n1", "int-n", "int-n1", "empty"],
)
def test_fixture_summarize(fixture_pair, scores):
    before, after, _ = fixture_pair
    labels = (torch.arange(len(scores)) % 2).reshape(scores.shape).long()
    names = [f"s{i}" for i in range(len(scores))]
    with count_host_syncs() as syncs_before:
        expected = before.summarize(scores, labels, names)
    with count_host_syncs() as syncs_after:
        got = after.summarize(scores, labels, names)
    assert same(expected, got), (expected, got)
    # One `.tolist()` per rewritten loop, whatever the batch size; the `zip` (an unsafe fix) reads each.
    assert syncs_after.total == 6 + len(scores)
    if len(scores):
        assert syncs_before.total == 7 * len(scores)


def test_fixture_evaluate(fixture_pair):
    before, after, _ = fixture_pair
    torch.manual_seed(0)
    model = torch.nn.Linear(6, 1)
    inputs, targets = torch.randn(10, 6), (torch.rand(10) > 0.5).float()
    with count_host_syncs() as syncs_before:
        expected = before.evaluate(model, inputs, targets)
    with count_host_syncs() as syncs_after:
        got = after.evaluate(model, inputs, targets)
    assert same(expected, got)
    assert syncs_before.total == 2 * 10  # two reads per sample
    assert syncs_after.total == 2 * 3  # two per batch of 4 (10 samples: 3 batches)


def test_fixture_second_apply_changes_nothing(fixture_pair):
    _, _, target = fixture_pair
    text = target.read_text()
    assert process(target, text, all_rules(), fix=True).new_text is None


# --- int(v) / float(v) where the dtype is known ---------------------------------------------

# pattern -> (code, whether the int()/float() around the element goes)
DTYPE_PATTERNS = {
    "int-of-argsort": ("def f(t: torch.Tensor):\n    idx = torch.argsort(t.float(), dim=0)\n    return [int(i) for i in idx]\n", True),
    "float-of-softmax-loop": (
        "def f(t: torch.Tensor):\n    p = t.double().softmax(0)\n    out = []\n    for v in p:\n        out.append(float(v))\n    return out\n",
        True,
    ),
    "int-of-long-sum": ("def f(t: torch.Tensor):\n    n = t.long()\n    return sum(int(v) for v in n)\n", True),
    "int-of-float-truncates": ("def f(t: torch.Tensor):\n    p = t.float() * 2.5\n    return [int(v) for v in p]\n", False),
    "float-of-argmax-rows": ("def f(t: torch.Tensor):\n    best = t.float().argsort(0)\n    return [float(b) for b in best]\n", False),
    "int-of-unknown": ("def f(t: torch.Tensor):\n    return [int(v) for v in t]\n", False),
}


@pytest.mark.filterwarnings("ignore:Converting a tensor with requires_grad=True:UserWarning")
@pytest.mark.parametrize("pattern", sorted(DTYPE_PATTERNS))
def test_int_and_float_of_elements_go_only_where_the_dtype_gives_that_type(pattern):
    body, dropped = DTYPE_PATTERNS[pattern]
    before_code = HEADER + body
    outcome = rewrite(before_code)
    assert [(f.rule, f.fix) for f in outcome.applied] == [("FX303", "safe")], pattern
    after_code = outcome.new_text
    call = "int(" if "int(" in body else "float("
    assert (call not in after_code) is dropped, after_code
    before, after = define(before_code), define(after_code)
    for name, t in {**_tensors(), "wide-int": torch.tensor([[5], [-3], [0]])}.items():
        if t.dtype is torch.bool and "argsort" in body:
            continue
        (kind_b, value_b), syncs_b = run(before, t)
        (kind_a, value_a), syncs_a = run(after, t)
        assert kind_b == kind_a, (pattern, name, value_b, value_a)
        if kind_b == "ok":
            assert same(value_b, value_a), (pattern, name, value_b, value_a)
            assert syncs_a == 1 and (len(t) < 2 or syncs_b >= len(t)), (pattern, name, syncs_b, syncs_a)
        else:
            assert value_b is value_a, (pattern, name)
