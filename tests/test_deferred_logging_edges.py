"""FX201 where deferring changes what happens at the edges: reads whose exception a
handler catches, `flush=True`, writes to a file of the program, values that may be
whole tensors."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from fixitem.codemods.driver.engine import process
from fixitem.codemods.driver.registry import all_rules

import fixitem


def _fixed(code: str, unsafe: bool = False) -> str | None:
    return process(Path("example.py"), code, all_rules(), fix=True, unsafe=unsafe).new_text


def _fx201(code: str, unsafe: bool = False):
    return [f for f in process(Path("example.py"), code, all_rules(), unsafe=unsafe).findings if f.rule == "FX201"]


def _run(path: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "FIXITEM_FLUSH_EVERY"}
    return subprocess.run([sys.executable, str(path)], check=False, capture_output=True, text=True, timeout=300,
                          cwd=path.parent, env=env)


# -- a read that may raise, inside a handler that catches it ---------------------------------------


def test_reads_whose_error_a_handler_catches_are_not_deferred(copy_fixture):
    path = copy_fixture("logging/reads_in_handlers.py")
    before = _run(path)
    result = fixitem.apply([path], unsafe=True)
    text = path.read_text()
    after = _run(path)
    assert before.returncode == 0 and after.returncode == 0, after.stderr
    assert after.stdout == before.stdout and "acc n/a" in after.stdout
    # The full reduction holds one element whatever the shape: its read is deferred.
    assert [f.line for f in result.applied if f.rule == "FX201"] == [21]
    assert "lambda scores_sum: print(f\"total {scores_sum:.3f}\")" in text
    for read in ("per_class.item()", "float(per_class)", "int(scores.max())"):
        assert read in text


@pytest.mark.parametrize(("handler", "caught"), [
    ("except RuntimeError:", True),
    ("except Exception:", True),
    ("except BaseException:", True),
    ("except:", True),
    ("except (KeyError, RuntimeError):", True),
    ("except ERRORS:", True),  # a tuple bound in the file
    ("except imported_errors:", True),  # an imported name: may be an alias of one
    ("except KeyError:", False),
    ("except ValueError:", False),  # `.item()` raises RuntimeError
    ("except torch.cuda.OutOfMemoryError:", False),  # a subclass is no base
    ("except MyError:", False),
])
def test_which_handlers_catch_the_error_of_an_item_read(handler, caught):
    code = (
        "import torch\n"
        "from errors import imported_errors\n"
        "ERRORS = (KeyError, RuntimeError)\n"
        "class MyError(Exception):\n"
        "    pass\n"
        "def report(acc: torch.Tensor):\n"
        "    try:\n"
        "        print(f'acc {acc.item():.3f}')\n"
        f"    {handler}\n"
        "        print('acc n/a')\n"
    )
    [finding] = _fx201(code, unsafe=True)
    if caught:
        assert finding.fix == "none" and "raises `RuntimeError` unless `acc` holds exactly one element" in finding.note
        assert f"`{handler.rstrip(':')}` around it" in finding.note
    else:
        assert finding.fix == "safe"


def test_a_handler_after_the_read_or_in_another_function_does_not_count():
    code = (
        "import torch\n"
        "def report(acc: torch.Tensor):\n"
        "    try:\n"
        "        pass\n"
        "    except RuntimeError:\n"
        "        print(f'acc {acc.item():.3f}')\n"
        "    try:\n"
        "        def later():\n"
        "            print(f'acc {acc.item():.3f}')\n"
        "    except RuntimeError:\n"
        "        pass\n"
    )
    assert [f.fix for f in _fx201(code)] == ["safe", "safe"]


def test_int_of_a_float_inside_a_value_error_handler_is_not_deferred():
    """`int(t)` of NaN raises ValueError: replayed, the lambda's `int(...)` would raise later."""
    code = (
        "import torch\n"
        "def report(x: torch.Tensor, n: torch.Tensor):\n"
        "    try:\n"
        "        print(f'mean {int(x.mean())}')\n"
        "        print(f'count {int(n.sum().long())}')\n"
        "        print(f'loss {x.sum().item():d}')\n"
        "    except ValueError:\n"
        "        print('n/a')\n"
    )
    first, second, third = _fx201(code, unsafe=True)
    assert first.fix == "none" and "NaN or infinite" in first.note
    assert second.fix == "safe"  # an integer tensor's one element: nothing to raise
    assert third.fix == "none" and "`:d` rejects a float" in third.note


# -- `print(..., flush=True)`: the text now -----------------------------------------------------


def test_a_print_with_flush_true_is_an_unsafe_fix_and_survives_a_hard_kill(copy_fixture):
    path = copy_fixture("logging/flush_now.py")
    before = _run(path)
    assert before.returncode == -9 and len(before.stdout.splitlines()) == 3
    result = fixitem.apply([path])  # safe fixes only: the line stays as written
    assert not [f for f in result.applied if f.rule == "FX201"]
    after = _run(path)
    assert after.returncode == -9 and after.stdout == before.stdout
    [finding] = _fx201(path.read_text(), unsafe=True)
    assert finding.fix == "unsafe" and "`flush=True` asks for the text now" in finding.note
    assert "`kill -9`" in finding.note


def test_flush_false_stays_safe():
    code = "import torch\ndef f(loss: torch.Tensor):\n    print(f'{loss.item():.3f}', flush=False)\n"
    assert [f.fix for f in _fx201(code)] == ["safe"]


# -- writes to a file of the program ----------------------------------------------------------


def test_a_print_to_a_file_of_the_program_is_not_deferred(copy_fixture):
    path = copy_fixture("logging/file_writes.py")
    before = _run(path)
    result = fixitem.apply([path], unsafe=True)
    after = _run(path)
    assert before.returncode == 0 and after.returncode == 0, after.stderr
    assert after.stdout == before.stdout and "'mean', '0.583'" in after.stdout
    assert not [f for f in result.applied if f.rule == "FX201"]
    notes = [f.note for f in _fx201(path.read_text(), unsafe=True)]
    assert len(notes) == 2 and all("it writes to `f`, a file of the program" in n for n in notes)


@pytest.mark.parametrize("stream", ["sys.stderr", "sys.stdout", "None"])
def test_a_print_to_the_standard_streams_is_deferred(stream):
    code = f"import sys\nimport torch\ndef f(loss: torch.Tensor):\n    print(f'{{loss.item():.3f}}', file={stream})\n"
    assert [f.fix for f in _fx201(code)] == ["safe"]


# -- values that may be whole tensors ------------------------------------------------------------


def test_values_that_may_be_tensors_are_passed_by_reference_and_print_the_same(copy_fixture):
    """A helper's result and a list of tensors, printed next to a read: recorded as values,
    the runtime would reject a tensor of several elements (TypeError) and print a one-element
    one as a number. Passed by reference, they print the same. A layer's output printed whole
    in `forward` is a tensor of unknown size: reported with no fix."""
    path = copy_fixture("logging/whole_tensors.py")
    before = _run(path)
    result = fixitem.apply([path], unsafe=True)
    text = path.read_text()
    after = _run(path)
    assert before.returncode == 0 and after.returncode == 0, after.stderr
    assert "grad_fn=<ReluBackward0>" in before.stdout and "[tensor(2.7310)]" in before.stdout
    assert after.stdout == before.stdout
    assert len([f for f in result.applied if f.rule == "FX201"]) == 2
    for value in ("deferred.by_reference(accuracy(model.fc(x)))", "deferred.by_reference(list(history))"):
        assert value in text
    # `h` is known to be a tensor (what `self.hidden` returns) of unknown size: reported, left as written.
    assert "        print(h)\n" in text
    assert [f.rule for f in result.findings] == ["FX005"]


@pytest.mark.parametrize(("call", "passed"), [
    ("print(f'{loss.item():.3f}', n)", "n"),  # a number: as a value
    ("print(f'{loss.item():.3f}', name)", "name"),  # bound to a string
    ("print(f'{loss.item():.3f} {count():d}')", "count()"),  # formatted as a number
    ("print(f'{loss.item():.3f} {str(model)}')", "str(model)"),  # text
])
def test_values_known_not_to_be_tensors_are_passed_as_values(call, passed):
    code = (
        "import torch\n"
        "def f(loss: torch.Tensor, n: int, count, model):\n"
        "    name = 'run'\n"
        f"    {call}\n"
    )
    fixed = _fixed(code, unsafe=True)
    assert fixed is not None and "by_reference" not in fixed and f"{passed}" in fixed.split("deferred.record(")[1]


@pytest.mark.parametrize(("handled", "fix"), [(False, "unsafe"), (True, "none")])
def test_text_plus_a_number_read_raises_where_the_original_did_not_defer_it(handled, fix):
    """``print("loss: " + loss.item())`` raises ``TypeError`` on every call: replayed, the
    error comes later, and outside the ``except TypeError`` that handled it."""
    line = 'print("loss: " + loss.item())'
    body = f"    try:\n        {line}\n    except TypeError:\n        pass\n" if handled else f"    {line}\n"
    code = "import torch\n\ndef report(x: torch.Tensor):\n    loss = x.sum()\n" + body
    (finding,) = _fx201(code)
    assert finding.fix == fix and "raises `TypeError`" in finding.note, finding.note
    fine = "import torch\n\ndef report(x: torch.Tensor):\n    loss = x.sum()\n    print(\"loss: \" + str(loss.item()))\n"
    assert [f.fix for f in _fx201(fine)] == ["safe"]


@pytest.mark.parametrize(("guard", "fix"), [
    ("if msg not in _logged:\n        logger.warning(msg)\n        _logged.add(msg)\n", "unsafe"),
    ("if msg not in _logged:\n        _logged[msg] = True\n        logger.warning(msg)\n", "unsafe"),
    ("if msg.startswith('shape'):\n        _logged.add(len(msg))\n        logger.warning(msg)\n", "safe"),
])
def test_a_warn_once_check_in_traced_code_keeps_its_graph_break(guard, fix):
    """torchtitan's ``warn_once``: the logging call's graph break kept ``msg not in _logged``
    and ``_logged.add(msg)`` in Python; deferred, torch.compile traces them too, and with
    dynamic shapes logged the warning again."""
    code = (
        "import logging\nimport torch\nfrom torch import nn\n\nlogger = logging.getLogger(__name__)\n"
        "_logged = {} if False else set()\nverbose = True\n\n\n"
        f"def warn_once(msg: str):\n    {guard}\n\n"
        "class M(nn.Module):\n    def forward(self, x):\n        warn_once(f'shape {tuple(x.shape)}')\n"
        "        return x * 2\n"
    )
    (finding,) = _fx201(code)
    assert finding.fix == fix, finding.note
    assert ("may run the call again" in finding.note) == (fix == "unsafe")


def test_shapes_and_sizes_made_into_containers_are_passed_as_values(tmp_path):
    """``tuple(x.shape)``, ``x.size()``, ``list(x.size())``, ``x.dim()``: metadata, which
    nothing changes before the replay (not "may be a tensor")."""
    code = (
        "import torch\n\n\ndef f(x: torch.Tensor):\n    loss = x.sum()\n"
        "    print(f\"shape {tuple(x.shape)} size {x.size()} n {list(x.size())} loss {loss.item():.3f}\")\n"
        "    print('dims', x.dim(), x.numel(), 'loss', loss.item())\n\n\nf(torch.arange(6.0).reshape(2, 3))\n"
    )
    assert [f.fix for f in _fx201(code)] == ["safe", "safe"]
    original, rewritten = tmp_path / "shapes.py", tmp_path / "shapes_deferred.py"
    original.write_text(code)
    rewritten.write_text(_fixed(code))
    before, after = _run(original), _run(rewritten)
    assert before.returncode == after.returncode == 0, after.stderr
    assert after.stdout == before.stdout == "shape (2, 3) size torch.Size([2, 3]) n [2, 3] loss 15.000\ndims 2 6 loss 15.0\n"


# -- complex(t) --------------------------------------------------------------------------------------


def test_complex_of_a_tensor_stays_complex_when_deferred_and_is_not_summed_on_the_device(tmp_path):
    """``complex(t)`` is a read of its own: deferred as ``complex(value)`` (it had become
    ``float(value)``: ``2.5`` for ``(2.5+0j)``), and a running sum of it gets no device
    sum (``total += t.detach().double()`` had made the complex total a float)."""
    path = tmp_path / "complex_reads.py"
    path.write_text(
        "import torch\n"
        "def main(dev):\n"
        "    f = torch.full((), 2.5, device=dev)\n"
        "    print(complex(f))\n"
        "    total = 0\n"
        "    for v in [3.0, 5.0]:\n"
        "        total += complex(torch.full((), v, device=dev))\n"
        "    print(repr(total))\n"
        "main('cpu')\n"
    )
    before = _run(path)
    findings = {f.rule: f for f in fixitem.scan([path], cache=False).findings}
    assert findings["FX201"].fix == "safe" and findings["FX001"].fix == "none", findings
    fixitem.apply([path], cache=False)
    text = path.read_text()
    assert "lambda f: print(complex(f))" in text and "total += complex(" in text, text
    after = _run(path)
    assert before.returncode == after.returncode == 0, after.stderr
    assert after.stdout == before.stdout == "(2.5+0j)\n(8+0j)\n"


# -- a value written in place by a later argument ---------------------------------------------------


def test_a_value_written_in_place_by_a_later_argument_is_unsafe_to_defer(tmp_path):
    """The runtime copies the values when ``record`` is called, after all of them are
    evaluated: ``counter.add_(1)`` would show in the copy of ``counter`` read before it
    (``count 1.0 -> 1.0`` where the original printed ``count 0.0 -> 1.0``)."""
    code = (
        "import torch\n"
        "def main(dev):\n"
        "    counter = torch.zeros((), device=dev)\n"
        "    print('count', counter.item(), '->', counter.add_(1).item())\n"
        "    print('alone', counter.add_(1).item())\n"
        "main('cpu')\n"
    )
    first, alone = _fx201(code)
    assert first.fix == "unsafe" and "`counter.add_(1)` modifies a tensor in place" in first.note, first
    assert alone.fix == "safe", alone  # one value: copied after its own write, as the original read it
    path = tmp_path / "in_order.py"
    path.write_text(code)
    before = _run(path)
    fixitem.apply([path], cache=False)
    after = _run(path)
    assert after.stdout == before.stdout == "count 0.0 -> 1.0\nalone 2.0\n", after.stderr


# -- arithmetic that may divide by zero at replay ---------------------------------------------------


@pytest.mark.parametrize(("line", "fix"), [
    ("print(f'avg {t.item() / n}')", "unsafe"),  # ``n`` may be 0: ZeroDivisionError at replay
    ("print(f'inv {1 / t.item()}')", "unsafe"),
    ("print(f'mod {t.item() % n}')", "unsafe"),
    ("print(f'avg {t.item() // n}')", "unsafe"),
    ("print(f'avg {t.item() / 4}')", "safe"),
    ("print(f'avg {t.item() / (n + 1e-6)}')", "unsafe"),  # ``n`` may be negative
    ("print(f'avg {t.item() / len(data)}')", "safe"),  # a batch a loop takes holds a sample
    ("print(f'avg {t.item() / len(items)}')", "unsafe"),  # a list may be empty
    ("print('avg %.3f' % t.item())", "safe"),  # formatting, not a division
    ("print(f'avg {t.item():.3f} of {k / n}')", "safe"),  # no read in it: computed now
])
def test_a_division_on_a_read_number_that_may_raise_is_unsafe_to_defer(line, fix):
    code = (
        "import torch\n"
        "def main(batches: list[torch.Tensor], items: list, n: int, k: int):\n"
        "    for data in batches:\n"
        "        t = (data * 2).sum()\n"
        f"        {line}\n"
    )
    (found,) = _fx201(code)
    assert found.fix == fix, found
    if fix == "unsafe":
        assert "raises `ZeroDivisionError`" in found.note, found.note


def test_a_division_by_zero_the_original_stops_at_is_not_deferred_past_it(tmp_path):
    """Uncaught, the original stops with the error (exit 1) before the next step's side
    effect; replayed, the runtime reported it and the program went on (exit 0). Under an
    ``except ZeroDivisionError``, the handler no longer saw it."""
    path = tmp_path / "zero.py"
    path.write_text(
        "import torch\n"
        "def main(n):\n"
        "    t = torch.ones(()) * 3\n"
        "    try:\n"
        "        print(f'avg {t.item() / n}')\n"
        "    except ZeroDivisionError:\n"
        "        print('n was zero, skipped')\n"
        "    print(f'avg {t.item() / n}')\n"
        "    print('reached end')\n"
        "main(0)\n"
    )
    before = _run(path)
    fixitem.apply([path], cache=False)
    after = _run(path)
    assert "deferred" not in path.read_text()
    assert before.returncode == after.returncode == 1 and after.stdout == before.stdout == "n was zero, skipped\n"


# -- a caller that redirects the output -------------------------------------------------------------


def test_a_print_in_a_function_a_redirect_of_the_same_file_calls_is_unsafe_to_defer(tmp_path):
    """``with redirect_stdout(buf): train(...)``: replayed after the block, the lines of
    ``train`` went to the stream put back (``captured 0 lines``, then the lines) where the
    original captured them."""
    path = tmp_path / "captured.py"
    path.write_text(
        "import contextlib, io\n"
        "import torch\n"
        "def train(data):\n"
        "    for i, x in enumerate(data):\n"
        "        loss = (x * 2).pow(2).mean()\n"
        "        print(f'step {i} loss {loss.item():.4f}')\n"
        "buf = io.StringIO()\n"
        "with contextlib.redirect_stdout(buf):\n"
        "    train([torch.ones(4, 2) * k for k in range(3)])\n"
        "print('captured %d lines' % len(buf.getvalue().splitlines()))\n"
    )
    (found,) = _fx201(path.read_text())
    assert found.fix == "unsafe" and "redirects `sys.stdout`" in found.note, found
    before = _run(path)
    fixitem.apply([path], cache=False)
    assert _run(path).stdout == before.stdout == "captured 3 lines\n"


@pytest.mark.parametrize(("write", "fix"), [
    ("os.write(1, b'checkpoint uploaded\\n')", "unsafe"),
    ("os.write(sys.stderr.fileno(), b'checkpoint uploaded\\n')", "unsafe"),
    ("sys.stdout.buffer.write(b'checkpoint uploaded\\n')", "unsafe"),
    ("os.write(fd, b'checkpoint uploaded\\n')", "safe"),  # a file of its own
])
def test_a_file_that_writes_the_output_file_descriptor_itself_is_unsafe_to_defer(write, fix):
    """The runtime keeps replayed lines in order with ``sys.stdout`` / ``sys.stderr``, not with
    writes past them: under a terminal, or ``python -u``, ``checkpoint uploaded`` came first."""
    code = (
        "import os, sys\nimport torch\n"
        "def train(xs: list[torch.Tensor], fd: int):\n"
        "    for i, x in enumerate(xs):\n"
        "        loss = x.pow(2).mean()\n"
        "        print(f'step {i} loss {loss.item():.4f}')\n"
        f"    {write}\n"
    )
    (found,) = _fx201(code)
    assert found.fix == fix, found


def test_a_list_passed_by_reference_is_said_to_hold_tensors_not_to_be_one():
    code = (
        "import torch\n"
        "def main(xs: list[torch.Tensor]):\n"
        "    hist = []\n"
        "    for step, x in enumerate(xs):\n"
        "        hist.append(step)\n"
        "        print(f'loss {x.sum().item():.2f} hist {hist}')\n"
    )
    (found,) = _fx201(code)
    assert found.fix == "unsafe" and "`hist` may hold tensors: it is passed by reference" in found.note, found.note


def test_a_read_of_an_attribute_is_passed_under_the_attributes_name():
    """``t.loss.item()`` is passed as ``loss`` (it was ``value_1``, which hid which was the loss)."""
    code = (
        "import torch\n"
        "class T:\n"
        "    pass\n"
        "def main(xs: list[torch.Tensor]):\n"
        "    t = T()\n"
        "    for i, x in enumerate(xs):\n"
        "        t.loss = x.sum()\n"
        "        print(f'iter {i}: train loss {t.loss.item():.5f}')\n"
    )
    fixed = _fixed(code)
    assert "lambda i, loss: print(f'iter {i}: train loss {loss:.5f}')," in fixed and "    t.loss,\n" in fixed, fixed


FLOAT_OF_A_LOSS = """import torch


def main():
    torch.manual_seed(0)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    w = torch.randn(3, requires_grad=True).to(device)
    opt = torch.optim.SGD([w], lr=0.1)
    for step in range(2):
        loss = (w ** 2).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
        acc = (w > 0).float().mean()
        print("loss {:.4f}".format(float(loss)))
        print("acc {:.4f}".format(float(acc)))
        with torch.no_grad():
            print("norm {:.4f}".format(float(w.norm())))


main()
"""


def test_float_of_a_tensor_that_may_require_grad_is_deferred_only_unsafely(tmp_path):
    # torch 2.13 warns on stderr for float() of a tensor that requires grad; a replayed number
    # does not. A value that visibly takes no gradient, or read under no_grad, warns neither way.
    path = tmp_path / "train.py"
    path.write_text(FLOAT_OF_A_LOSS)
    found = {f.line: (f.fix, f.note) for f in process(path, FLOAT_OF_A_LOSS, all_rules()).findings if f.rule == "FX201"}
    assert found[15][0] == "unsafe" and "`float(loss)` may be of a tensor that requires grad" in found[15][1]
    assert found[16][0] == "safe" and found[18][0] == "safe"
    before = _run(path)
    assert "UserWarning: Converting a tensor with requires_grad=True" in before.stderr
    fixitem.apply([path], cache=False)
    after = _run(path)
    line = re.compile(r"\.py:\d+:")  # (the added import moves the warning's line down)
    assert after.stdout == before.stdout and line.sub(".py:N:", after.stderr) == line.sub(".py:N:", before.stderr)


def test_a_name_bound_to_a_choice_of_strings_is_plain_text():
    # nanochat-style ``dev = "cuda" if ok else "cpu"`` printed beside a read: a string, passed as
    # it is (the note had said it "may be a tensor").
    code = (
        "import torch\n\n"
        "def report(x: torch.Tensor):\n"
        "    dev = 'cuda' if torch.cuda.is_available() else 'cpu'\n"
        "    print('device', dev, 'sum', x.sum().item())\n"
    )
    (found,) = _fx201(code)
    assert found.fix == "safe", found.note


# -- a metric writer the program closes ----------------------------------------------------------


def test_a_metric_writer_the_file_closes_is_not_deferred_as_safe(copy_fixture):
    path = copy_fixture("logging/writer_closed.py")
    before = _run(path)
    assert "events written before close: 3" in before.stdout
    [finding] = fixitem.scan([path], cache=False, isolated=True).findings
    assert (finding.rule, finding.fix) == ("FX201", "unsafe")
    assert "`writer.close()` in this file" in finding.note
    assert not fixitem.apply([path], cache=False, isolated=True).files[0].diff
    # Deferred anyway, the values reach the writer after it was closed.
    fixitem.apply([path], unsafe=True, cache=False, isolated=True)
    after = _run(path)
    assert "events written before close: 0" in after.stdout and "closed writer" in after.stderr


def test_a_metric_writer_the_file_never_closes_is_deferred():
    code = ("import torch\n\n\ndef log(writer, loss: torch.Tensor, step: int):\n"
            "    writer.add_scalar('loss', loss.item(), step)\n")
    [finding] = _fx201(code)
    assert finding.fix == "safe"
    [finding] = _fx201(code + "\n\ndef end(writer):\n    writer.flush()\n")
    assert finding.fix == "unsafe" and "`writer.flush()`" in finding.note


def test_a_closed_writer_the_runtime_hooks_is_deferred():
    # The runtime replays what is pending before TensorBoard's and wandb's own calls,
    # flushes and closes.
    code = ("import torch\nimport wandb\nfrom torch.utils.tensorboard import SummaryWriter\n\n"
            "writer = SummaryWriter('runs')\nrun = wandb.init()\n\n\n"
            "def log(loss: torch.Tensor, step: int):\n"
            "    writer.add_scalar('loss', loss.item(), step)\n"
            "    wandb.log({'loss': loss.item()})\n"
            "    run.log({'loss': loss.item()})\n\n\n"
            "def end():\n    writer.close()\n    run.finish()\n    wandb.finish()\n")
    assert [f.fix for f in _fx201(code)] == ["safe", "safe", "safe"]


# -- values the standard library makes -------------------------------------------------------------

ETA = (
    "import datetime\nimport json\nimport sys\nimport time\nimport torch\n\n\n"
    "def train(losses: list[torch.Tensor], start: float, config: str):\n"
    "    for i, loss in enumerate(losses):\n"
    "        time_left = datetime.timedelta(seconds=(3 - i) * (time.time() - start))\n"
    "        settings = json.loads(config)\n"
    "        sys.stdout.write('[%d] [loss: %f] ETA: %s\\n' % (i, loss.item(), time_left))\n"
    "        print(loss.item(), settings)\n"
)


def test_an_immutable_value_of_the_standard_library_is_passed_as_it_is():
    # PyTorch-GAN's ``time_left = datetime.timedelta(...)``: no tensor, and it cannot change
    # before the replay. ``json.loads`` makes no tensor either, but a dict the code may change.
    eta, printed = _fx201(ETA)
    assert eta.fix == "safe"
    assert printed.fix == "unsafe" and "`settings` is passed by reference" in printed.note
    assert "may be a tensor" not in printed.note


def test_a_deferred_warning_says_it_escapes_the_filters_around_the_call():
    # stable-baselines3's own test of the warning fails after --unsafe: pytest.warns sees none.
    code = ("import warnings\nimport torch\n\n\ndef check(x: torch.Tensor):\n"
            "    warnings.warn(f'large input {x.abs().max().item():.1f}')\n")
    [finding] = _fx201(code)
    assert finding.fix == "unsafe" and "escapes a `warnings.catch_warnings()` or `pytest.warns(...)`" in finding.note


# -- output every iteration that is not deferred ----------------------------------------------------

LOOP = (
    "import time\nimport torch\n\n\n"
    "def train(model: torch.nn.Module, writer, xs, device, start: float):\n"
    "    for step, x in enumerate(xs):\n"
    "        loss = model(x.to(device)).sum()\n"
    "        writer.add_scalar('losses/loss', loss.item(), step)\n"
    "{after}"
)


@pytest.mark.parametrize(("after", "fix"), [
    # cleanrl: each step's print makes the runtime replay the deferred call at once.
    ("        print('SPS:', int(step / (time.time() - start)))\n", "none"),
    ("        with torch.no_grad():\n            writer.add_scalar('charts/step', step, step)\n", "none"),
    ("        if step % 100 == 0:\n            print('step', step)\n", "safe"),  # every 100 steps
    ("        print('loss', loss.item())\n", "safe"),  # deferred too
    ("", "safe"),
])
def test_a_deferral_that_output_every_iteration_replays_at_once_is_no_fix(after, fix):
    findings = _fx201(LOOP.format(after=after))
    assert findings[0].fix == fix
    if fix == "none":
        assert "writes output whenever this call runs and reads no tensor" in findings[0].note


def test_output_beside_the_call_in_its_block_replays_it_each_time():
    # cleanrl's c51: the deferred calls and the SPS print share ``if global_step % 100 == 0:``.
    code = LOOP.format(after="        print('SPS:', step)\n").replace(
        "        writer.add_scalar('losses/loss', loss.item(), step)\n        print('SPS:', step)\n",
        "        if step % 100 == 0:\n            writer.add_scalar('losses/loss', loss.item(), step)\n"
        "            print('SPS:', step)\n")
    [finding] = _fx201(code)
    assert finding.fix == "none" and "`print(...)` (line 10)" in finding.note
    # Output in another branch does not run with the call.
    other = code.replace("            print('SPS:', step)\n", "        else:\n            print('SPS:', step)\n")
    assert [f.fix for f in _fx201(other)] == ["safe"]


def test_output_before_the_call_in_the_loop_replays_it_at_the_next_iteration():
    code = LOOP.format(after="").replace("        loss = ", "        print('step', step)\n        loss = ")
    [finding] = _fx201(code)
    assert finding.fix == "none" and "`print(...)` (line 7)" in finding.note
