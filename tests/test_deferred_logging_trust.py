"""FX201 on shapes of real code where a deferred call could differ from the original:
the object called, values changed in place, loggers of other kinds, redirected
streams, a file's own ``deferred``, formats that raise."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from fixitem.codemods.driver.engine import process
from fixitem.codemods.driver.registry import all_rules

import fixitem

# Scripts that run here make their tensors on the device there is: a tensor made without
# ``device=`` is a CPU tensor, whose reads sync nothing (and are not deferred).
DEVICE = "device = 'cuda' if torch.cuda.is_available() else 'cpu'\n"


def _fixed(code: str, unsafe: bool = False) -> str | None:
    return process(Path("example.py"), code, all_rules(), fix=True, unsafe=unsafe).new_text


def _fx201(code: str):
    return [f for f in process(Path("example.py"), code, all_rules()).findings if f.rule == "FX201"]


def _run(path: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "FIXITEM_FLUSH_EVERY"}
    return subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=300,
                          cwd=path.parent, env=env)


# -- the object whose method is called is taken when the call is recorded ------------------------


def test_writers_chosen_per_run_and_per_split_get_their_own_records(copy_fixture):
    original = copy_fixture("logging/writer_per_run.py")
    rewritten = original.with_name("writer_per_run_deferred.py")
    rewritten.write_text(original.read_text())
    result = fixitem.apply([rewritten])
    assert [f.fix for f in result.applied if f.rule == "FX201"] == ["safe"] * 4
    text = rewritten.read_text()
    assert ".item()" not in text
    assert "lambda writer, loss, step: writer.add_scalar(\"loss\", loss, step)," in text
    for value in ("self.writers[split],", "writers[i],", "writer_of(phase),", "writer,"):
        assert f"        {value}\n" in text
    before, after = _run(original), _run(rewritten)
    assert before.returncode == 0 and after.returncode == 0, after.stderr
    lines = before.stdout.splitlines()
    # Each writer got its own records (what a replay into the last writer would break).
    assert lines[0].startswith("lr=0.1 [('loss'") and lines[1].startswith("lr=0.01 [('loss'")
    assert lines[-1] == "looked up: ['warmup', 'main']"
    assert after.stdout == before.stdout


@pytest.mark.parametrize(("code", "lambda_", "receiver"), [
    ("for run in runs:\n        writer = make(run)\n        writer.add_scalar('loss', loss.item(), 0)",
     "lambda writer, loss: writer.add_scalar('loss', loss, 0)", "writer"),
    ("for i in range(2):\n        writers[i].add_scalar('loss', loss.item(), i)",
     "lambda writer, loss, i: writer.add_scalar('loss', loss, i)", "writers[i]"),
    ("for phase in runs:\n        self.loggers[phase].add_scalar('loss', loss.item(), 0)",
     "lambda logger, loss: logger.add_scalar('loss', loss, 0)", "self.loggers[phase]"),
    ("trainer.logger.info('loss %.3f', loss.item())",
     "lambda logger, loss: logger.info('loss %.3f', loss)", "trainer.logger"),
    ("get_writer(0).add_scalar('loss', loss.item(), 0)",
     "lambda writer, loss: writer.add_scalar('loss', loss, 0)", "get_writer(0)"),
    ("self.writer.add_scalar('loss', loss.item(), 0)",
     "lambda writer, loss: writer.add_scalar('loss', loss, 0)", "self.writer"),
])
def test_a_receiver_that_may_change_is_passed(code, lambda_, receiver):
    source = (
        "import torch\n"
        "def train(self, trainer, runs, make, writers, get_writer, loss: torch.Tensor):\n"
        f"    {code}\n"
    )
    fixed = _fixed(source, unsafe=True)
    assert fixed is not None
    assert lambda_ in fixed
    assert f"{receiver}," in fixed.split(lambda_)[1]


def test_a_receiver_bound_once_stays_in_the_lambda():
    code = (
        "import logging\nimport torch\nimport wandb\n"
        "logger = logging.getLogger(__name__)\n"
        "def train(writer, loss: torch.Tensor, step: int):\n"
        "    board = make_board()\n"
        "    writer.add_scalar('loss', loss.item(), step)\n"
        "    board.add_scalar('loss', loss.item(), step)\n"
        "    logger.info('loss %.3f', loss.item())\n"
        "    wandb.log({'loss': loss.item()})\n"
    )
    fixed = _fixed(code)
    assert fixed is not None
    assert "lambda loss, step: writer.add_scalar('loss', loss, step)," in fixed
    assert "deferred.record(lambda loss, step: board.add_scalar('loss', loss, step), loss, step)" in fixed
    assert "deferred.record(lambda loss: logger.info('loss %.3f', loss), loss)" in fixed
    assert "deferred.record(lambda loss: wandb.log({'loss': loss}), loss)" in fixed


def test_a_module_level_writer_rebound_in_a_function_is_passed():
    code = (
        "import torch\n"
        "writer = None\n"
        "def start(run):\n    global writer\n    writer = make(run)\n"
        "def log(loss: torch.Tensor):\n    writer.add_scalar('loss', loss.item(), 0)\n"
    )
    assert "lambda writer, loss: writer.add_scalar('loss', loss, 0)," in _fixed(code)


# -- values changed in place after the call ---------------------------------------------------------


def test_an_array_held_by_a_subscript_or_an_attribute_is_unsafe():
    code = (
        "import numpy as np\nimport torch\n"
        "def f(stats, run, loss: torch.Tensor):\n"
        "    print(f\"returns={stats['r']} loss={loss.item():.3f}\")\n"
        "    print(f'returns={run.ret} loss={loss.item():.3f}')\n"
    )
    first, second = _fx201(code)
    assert first.fix == "unsafe" and "`stats['r']` may be a mutable object" in first.note
    assert "passed by reference and read at replay" in first.note
    assert second.fix == "unsafe" and "`run.ret` may be a mutable object" in second.note


def test_a_reset_in_place_would_change_the_text(tmp_path):
    # Why: the array is passed as it is; replayed after the reset, it prints zeros.
    path = tmp_path / "returns.py"
    path.write_text(
        "import numpy as np\nimport torch\n"
        f"{DEVICE}"
        "stats = {'r': np.zeros(2)}\n"
        "for step in range(3):\n"
        "    loss = torch.ones(2, device=device).sum() * step\n"
        "    stats['r'] += 1.0\n"
        "    print(f\"returns={stats['r']} loss={loss.item():.3f}\")\n"
        "    stats['r'][:] = 0\n"
    )
    before = _run(path).stdout
    assert fixitem.apply([path]).applied == []  # not without --unsafe
    fixitem.apply([path], unsafe=True)
    after = _run(path).stdout
    assert before.count("returns=[1. 1.]") == 3
    assert after != before  # what --unsafe risks, and the note says


def test_values_known_not_to_change_stay_safe():
    code = (
        "import torch\n"
        "def f(trainer, opt, loss: torch.Tensor, x: torch.Tensor):\n"
        "    print(f\"lr {opt.param_groups[0]['lr']:.6f} it {trainer.iter_num:d} loss {loss.item():.3f}\")\n"
        "    print('it %d shape %s' % (trainer.iter_num, x.shape), x.shape[0], x.dtype, loss.item())\n"
    )
    assert [f.fix for f in _fx201(code)] == ["safe", "safe"]


def test_an_optimizers_learning_rate_is_a_number():
    code = (
        "import torch\nimport wandb\n"
        "def f(opt, sched, loss: torch.Tensor):\n"
        "    wandb.log({'loss': loss.item(), 'lr': opt.param_groups[0]['lr'], 'last': sched.get_last_lr()[0]})\n"
        "    wandb.log({'loss': loss.item(), 'groups': opt.param_groups[0]})\n"
    )
    first, second = _fx201(code)
    assert first.fix == "safe"
    assert second.fix == "unsafe" and "`opt.param_groups[0]` may be a mutable object" in second.note


# -- what a logger is ---------------------------------------------------------------------------------


@pytest.mark.parametrize("binding", [
    "import logging\nlogger = logging.getLogger(__name__)\n",
    "from logging import getLogger\nlogger = getLogger(__name__)\n",
    "from transformers.utils import logging\nlogger = logging.get_logger(__name__)\n",
    "from accelerate.logging import get_logger\nlogger = get_logger(__name__)\n",
    "from ...utils import logging\nlogger = logging.get_logger(__name__)\n",  # a model file of a library
    "from .logging import get_logger\nlogger = get_logger(__name__)\n",
    "import logging\nlogger: logging.Logger = make_logger()\n",
    "import logging\nlogger = logging.getLogger('a').getChild('b')\n",
])
def test_loggers_the_code_shows_are_logging_loggers_are_safe(binding):
    code = binding + "import torch\ndef f(loss: torch.Tensor):\n    logger.info('loss %.3f', loss.item())\n"
    assert [f.fix for f in _fx201(code)] == ["safe"]


def test_a_logger_parameter_or_attribute_with_a_known_origin_is_safe():
    code = (
        "import logging\nimport torch\n"
        "def f(log: logging.Logger, loss: torch.Tensor):\n    log.info('loss %.3f', loss.item())\n"
        "class Trainer:\n"
        "    def __init__(self):\n        self.logger = logging.getLogger(type(self).__name__)\n"
        "    def step(self, loss: torch.Tensor):\n        self.logger.info('loss %.3f', loss.item())\n"
    )
    assert [f.fix for f in _fx201(code)] == ["safe", "safe"]
    assert "lambda logger, loss: logger.info('loss %.3f', loss)," in _fixed(code)


@pytest.mark.parametrize(("binding", "why"), [
    ("import mylogs as logger\n", "imported from `mylogs`"),
    ("from . import logger\n", "imported from a module of the project"),
    ("from .utils import logger\n", "imported from a module of the project"),
    ("logger = MyLogger('run.txt')\n", "not known to be a `logging` logger"),
])
def test_objects_only_named_logger_are_unsafe(binding, why):
    code = binding + "import torch\ndef f(loss: torch.Tensor):\n    logger.info(f'loss {loss.item():.4f}')\n"
    (finding,) = _fx201(code)
    assert finding.fix == "unsafe" and why in finding.note
    assert "buffers or writes to its own files" in finding.note or "write to its own files" in finding.note


def test_an_untyped_logger_parameter_and_a_wrapper_of_a_project_logger_are_unsafe():
    code = (
        "import torch\nfrom . import logger\n"
        "def say(msg):\n    logger.log(msg)\n"
        "def f(log, loss: torch.Tensor):\n"
        "    log.info('loss %.3f', loss.item())\n"
        "    say(f'loss {loss.item():.3f}')\n"
    )
    first, second = _fx201(code)
    assert first.fix == "unsafe" and "`log` is not known to be a `logging` logger" in first.note
    assert second.fix == "unsafe" and "`logger` is imported from a module of the project" in second.note


def test_project_logger_module_keeps_its_lines_without_unsafe(tmp_path):
    (tmp_path / "mylogs.py").write_text(
        "lines = []\n"
        "def info(msg):\n    lines.append(msg)\n"
        "def dump():\n    print(' | '.join(lines))\n    lines.clear()\n"
    )
    script = tmp_path / "train.py"
    script.write_text(
        "import torch\nimport mylogs as logger\n"
        "for step in range(3):\n"
        "    loss = torch.ones(2).sum() * step\n"
        "    logger.info(f'step {step} loss {loss.item():.4f}')\n"
        "    logger.dump()\n"
    )
    before = _run(script).stdout
    fixitem.apply([script])
    assert _run(script).stdout == before
    assert before.splitlines()[-1] == "step 2 loss 4.0000"


# -- redirected streams -----------------------------------------------------------------------------


def test_output_inside_redirect_stdout_is_not_deferred():
    code = (
        "import contextlib\nimport io\nfrom contextlib import redirect_stderr\nimport torch\n"
        "def f(loss: torch.Tensor, writer):\n"
        "    buf = io.StringIO()\n"
        "    with contextlib.redirect_stdout(buf):\n"
        "        print(f'loss {loss.item():.4f}')\n"
        "        writer.add_scalar('loss', loss.item(), 0)\n"
        "    with redirect_stderr(buf):\n"
        "        print(loss.item())\n"
        "    print(loss.item())\n"
    )
    findings = _fx201(code)
    assert [(f.line, f.fix) for f in findings] == [(8, "none"), (9, "safe"), (11, "none"), (12, "safe")]
    assert "inside `with contextlib.redirect_stdout(...)`" in findings[0].note
    assert "inside `with redirect_stderr(...)`" in findings[2].note


# -- the name of the runtime in the file ------------------------------------------------------------


@pytest.mark.parametrize(("header", "call"), [
    ("def train(deferred):\n", "train([])"),  # a parameter
    ("deferred = []\ndef train():\n", "train()"),  # a module-level list
])
def test_a_file_with_its_own_deferred_gets_another_alias(tmp_path, header, call):
    path = tmp_path / "own_deferred.py"
    path.write_text(
        "import torch\n"
        + DEVICE
        + header
        + "    for step in range(2):\n"
        "        loss = torch.ones(2, device=device).sum() / (step + 1)\n"
        "        print(f'step {step} loss {loss.item():.4f}')\n"
        "        deferred.append(step)\n"
        "    return deferred\n"
        f"print({call})\n"
    )
    before = _run(path)
    assert before.returncode == 0, before.stderr
    fixitem.apply([path])
    text = path.read_text()
    assert "from fixitem import runtime as fixitem_deferred\n" in text
    assert "fixitem_deferred.record(" in text and "        deferred.append(step)\n" in text
    after = _run(path)
    assert after.returncode == 0, after.stderr
    assert after.stdout == before.stdout
    assert fixitem.apply([path]).applied == []  # a second apply changes nothing


# -- formats that raise -----------------------------------------------------------------------------


@pytest.mark.parametrize(("call", "spec"), [
    ("print('step {} loss {:d}'.format(step, loss.item()))", "`:d`"),
    ("print(f'loss {loss.item():x}')", "`:x`"),
    ("print('loss {0:b} {step}'.format(loss.item(), step=step))", "`:b`"),
    ("print('loss %x' % loss.item())", "`%x`"),
    ("print(f'loss {loss.item() * 100:d}')", "`:d`"),
])
def test_a_format_that_rejects_a_float_is_unsafe(call, spec):
    code = f"import torch\ndef f(loss: torch.Tensor, step: int):\n    {call}\n"
    (finding,) = _fx201(code)
    assert finding.fix == "unsafe"
    assert f"{spec} rejects a float" in finding.note and "may raise at replay, later than the original" in finding.note


@pytest.mark.parametrize("call", [
    "print('step %d loss %d' % (step, loss.item()))",  # %d takes a float
    "print(f'correct {correct.item():d} of {int(loss):d}')",  # an integer tensor, an int
    "logger.info('loss %x', loss.item())",  # logging reports a formatting error itself, then as now
])
def test_formats_that_take_the_value_stay_safe(call):
    code = (
        "import logging\nimport torch\nlogger = logging.getLogger()\n"
        "def f(loss: torch.Tensor, logits: torch.Tensor, step: int):\n"
        "    correct = logits.argmax()\n"
        f"    {call}\n"
    )
    assert [f.fix for f in _fx201(code)] == ["safe"]


def test_a_class_name_passed_to_a_deferred_call_is_a_string():
    """Hugging Face's `logger.warning_once(... self.__class__.__name__ ...)` in `forward`
    stays a safe fix: a name cannot change before the replay."""
    from pathlib import Path

    from fixitem.codemods.driver.engine import process
    from fixitem.codemods.driver.registry import all_rules

    code = (
        "import torch\nfrom torch import nn\nimport logging\n\nlogger = logging.getLogger(__name__)\n\n"
        "class Block(nn.Module):\n"
        "    def forward(self, x: torch.Tensor):\n"
        "        logger.info('%s: %.3f', self.__class__.__name__, x.mean().item())\n"
        "        return x\n"
    )
    [finding] = [f for f in process(Path("a.py"), code, all_rules()).findings if f.rule == "FX201"]
    assert finding.fix == "safe", finding.note


def test_accelerate_print_is_an_output_call_and_another_print_method_is_not():
    from pathlib import Path

    from fixitem.codemods.driver.engine import process
    from fixitem.codemods.driver.registry import all_rules

    code = (
        "import torch\nfrom accelerate import Accelerator\n\n"
        "accelerator = Accelerator()\n"
        "w = torch.ones(3, requires_grad=True, device='cuda')\n"
        "for step in range(3):\n"
        "    loss = (w * step).sum()\n"
        "    accelerator.print(f'step {step} loss {loss.item():.3f}')\n"
    )
    result = process(Path("a.py"), code, all_rules(), fix=True)
    assert [(f.rule, f.fix) for f in result.applied] == [("FX201", "safe")]
    assert "accelerator.print(f'step {step} loss {loss:.3f}')" in result.new_text
    other = code.replace("from accelerate import Accelerator", "from mytools import Accelerator")
    assert [f.rule for f in process(Path("a.py"), other, all_rules()).findings] == ["FX001"]
