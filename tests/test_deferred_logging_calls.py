"""What an output call is (codemods/output_calls.py), and how FX201 captures values."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from fixitem.codemods import advice
from fixitem.codemods.driver.engine import process
from fixitem.codemods.driver.registry import all_rules
from fixitem.codemods.model.context import FileContext
from fixitem.codemods.model.output_calls import OutputKind, output_call, output_wrappers
from fixitem.codemods.model.syncs import find_sync_sites

HEADER = (
    "import logging\nimport warnings\nimport sys\nimport torch\nimport wandb\nfrom tqdm import tqdm\n"
    "from loguru import logger as loguru_logger\nfrom absl import logging as absl_logging\n"
    "logger = logging.getLogger(__name__)\n"
)


def _kinds(body: str) -> dict[str, OutputKind | None]:
    ctx = FileContext.build(Path("example.py"), HEADER + body)
    kinds = {}
    for call in ctx.nodes(ast.Call):
        found = output_call(ctx, call)
        kinds[ctx.code(call.func)] = found.kind if found else None
    return kinds


@pytest.mark.parametrize(("code", "kind"), [
    ("print(1)", OutputKind.PRINT),
    ("tqdm.write('x')", OutputKind.PRINT),
    ("sys.stderr.write('x')", OutputKind.PRINT),
    ("logging.info('x')", OutputKind.LOGGING),
    ("absl_logging.info('x')", OutputKind.LOGGING),
    ("logger.info('x')", OutputKind.LOGGER),
    ("logger.warning_once('x')", OutputKind.LOGGER),
    ("logger.info_once('x')", OutputKind.LOGGER),
    ("self.log.warning('x')", OutputKind.LOGGER),
    ("self.logger_.warning('x')", OutputKind.LOGGER),
    ("_LOGGER.debug('x')", OutputKind.LOGGER),
    ("logging.getLogger(__name__).error('x')", OutputKind.LOGGER),
    ("loguru_logger.info('x')", OutputKind.LOGGER),
    ("writer.add_scalar('loss', 1.0, 0)", OutputKind.METRICS),
    ("writer.add_scalars('loss', {}, 0)", OutputKind.METRICS),
    ("wandb.log({'a': 1})", OutputKind.METRICS),
    ("wandb.run.log({'a': 1})", OutputKind.METRICS),
    ("run = wandb.init()\nrun.log({'a': 1})", OutputKind.METRICS),  # a wandb run's ``log``
    ("run = make_run()\nrun.log({'a': 1})", None),
    ("trainer.log_metrics({'a': 1})", OutputKind.METRICS),
    ("pbar.set_postfix(loss=1.0)", OutputKind.PROGRESS),
    ("pbar.set_description('x')", OutputKind.PROGRESS),
    ("warnings.warn('x')", OutputKind.WARNING),
    ("self.log('loss', 1.0)", None),  # Lightning's LightningModule.log takes tensors as they are
    ("model.info('x')", None),
    ("out.write('x')", None),
])
def test_output_call_kinds(code, kind):
    code = code.split("\n")
    func = code[-1].split("(")[0] if not code[-1].startswith("logging.getLogger") else "logging.getLogger(__name__).error"
    assert _kinds("\n".join(code) + "\n")[func] is kind


def test_a_local_print_shadows_the_builtin():
    assert _kinds("def f(print):\n    print(1)\n")["print"] is None


WRAPPERS = '''\
import os
import time
import torch
import torch.distributed as dist

master_process = int(os.environ.get("RANK", "0")) == 0
verbose = True

def print0(s, *args, **kwargs):
    """Print on rank 0."""
    if master_process:
        print(s, *args, **kwargs)

def print_rank_0(msg):
    if not dist.is_initialized() or dist.get_rank() == 0:
        print(msg, flush=True)

def log(msg):
    logger.info(msg)

def log_twice(msg):
    log(msg)
    print0(msg)

def stamped(msg):
    print(f"{time.time():.0f} {msg}")

def counting(msg):
    global verbose
    verbose = False
    print(msg)

def computes(msg):
    text = msg.upper()
    print(text)

def rebinding(msg):
    if verbose:
        print(msg)

def set_verbose(v):
    global verbose
    verbose = v
'''


def test_wrappers_are_functions_that_only_write_output():
    ctx = FileContext.build(Path("example.py"), "import logging\nlogger = logging.getLogger()\n" + WRAPPERS)
    found = sorted(output_wrappers(ctx))
    # time.time() changes before the replay, a function with other statements does
    # more than write, and `verbose` is rebound by `set_verbose`.
    assert found == ["log", "log_twice", "print0", "print_rank_0"]


def _fixed(code: str, unsafe: bool = False) -> str | None:
    return process(Path("example.py"), code, all_rules(), fix=True, unsafe=unsafe).new_text


def _fx201(code: str):
    return [f for f in process(Path("example.py"), code, all_rules()).findings if f.rule == "FX201"]


def test_the_rules_agree_on_what_an_output_call_is():
    code = (
        "import torch\n"
        "master = True\n"
        "def print0(s):\n    if master:\n        print(s)\n"
        "def f(x: torch.Tensor, pbar, loss: torch.Tensor):\n"
        "    print0(x)\n"
        "    pbar.set_postfix(loss=x)\n"
        "    print0(loss.item())\n"
    )
    ctx = FileContext.build(Path("example.py"), code)
    formats = [ctx.position(s.node)[0] for s in find_sync_sites(ctx) if s.kind == "format"]
    assert formats == [7, 8]  # a tensor formatted by a wrapper or a progress bar is a sync
    reads = [s for s in find_sync_sites(ctx) if s.kind == "item"]
    assert advice.usage(ctx, reads[0].node) == "output"
    assert [f.line for f in _fx201(code)] == [9]


def test_attributes_and_computed_values_are_passed_not_the_object():
    code = (
        "import torch\n"
        "def f(args, trainer, opt, data, loss: torch.Tensor):\n"
        "    print(f\"{trainer.iter_num} {args.lr} {opt.param_groups[0]['lr']} {len(data)} {loss.item()}\")\n"
    )
    fixed = _fixed(code, unsafe=True)
    assert fixed is not None
    record = fixed[fixed.index("deferred.record("):]
    # Named as a person would (``lr_2`` beside ``lr``, ``data_len``); the lambda's line too long,
    # its call is wrapped as black wraps it.
    assert ('lambda iter_num, lr, lr_2, data_len, loss: print(\n'
            '            f"{iter_num} {lr} {lr_2} {data_len} {loss}"\n'
            '        ),') in record
    arguments = [line.strip() for line in record.splitlines()[4:-1]]
    assert arguments == ["trainer.iter_num,", "args.lr,", "opt.param_groups[0]['lr'],", "len(data),", "loss,"]


def test_a_value_is_not_named_after_a_module_the_file_imports():
    # yolov5's ``m.np`` (a layer's parameter count) beside ``import numpy as np``.
    code = (
        "import numpy as np\nimport torch\n"
        "def f(m, loss: torch.Tensor):\n    print(f\"{m.np} {m.ratio} {loss.item()}\")\n"
    )
    assert "lambda np_2, ratio, loss: print(f\"{np_2} {ratio} {loss}\")" in _fixed(code, unsafe=True)


def test_imported_module_attributes_stay_in_the_lambda():
    code = "import sys\nimport torch\ndef f(loss: torch.Tensor):\n    print(loss.item(), file=sys.stderr)\n"
    assert "deferred.record(lambda loss: print(loss, file=sys.stderr), loss)" in _fixed(code)


def test_a_startup_print_and_a_one_shot_warning_are_left_alone():
    code = (
        "import logging\nimport torch\nlogger = logging.getLogger()\n"
        "def main(device, loss: torch.Tensor):\n"
        "    print(f'Using device: {device}')\n"
        "    logger.warning('Nothing is fused.')\n"
        "    print(loss.item())\n"
    )
    assert [f.line for f in _fx201(code)] == [7]


def test_a_message_printed_as_the_program_stops_is_left_as_it_is():
    # dino: ``print("Loss is {}, stopping training".format(loss.item()))`` then ``sys.exit(1)``.
    code = (
        "import math\nimport sys\nimport torch\n"
        "def step(loss: torch.Tensor):\n"
        "    if not math.isfinite(loss.item()):\n"
        "        print('Loss is {}, stopping training'.format(loss.item()))\n"
        "        sys.exit(1)\n"
        "    print(loss.item())\n"
    )
    first, second = _fx201(code)
    assert first.fix == "none" and "`sys.exit(1)` (line 7) follows it" in first.note
    assert second.fix == "safe"


@pytest.mark.parametrize(("call", "why"), [
    ("print(f'{loss.item()=}')", "`=`"),
    ("print(out.sum().item() if verbose else 0)", "evaluated only sometimes"),
])
def test_calls_that_cannot_be_deferred(call, why):
    code = f"import torch\ndef f(loss: torch.Tensor, out: torch.Tensor, verbose: bool):\n    {call}\n"
    (finding,) = _fx201(code)
    assert finding.fix == "none" and why in finding.note


def test_a_name_read_in_a_branch_is_deferred():
    code = "import torch\ndef f(loss: torch.Tensor, verbose: bool):\n    print(loss.item() if verbose else 0)\n"
    assert "deferred.record(lambda verbose, loss: print(loss if verbose else 0), verbose, loss)" in _fixed(code)


def test_calls_that_read_the_live_exception_or_stack_are_left_alone():
    code = (
        "import logging\nimport torch\nlogger = logging.getLogger()\n"
        "def f(loss: torch.Tensor):\n"
        "    logger.error('loss %s', loss.item(), exc_info=True)\n"
        "    logger.warning('loss %s', loss.item(), stacklevel=2)\n"
    )
    assert _fx201(code) == []


@pytest.mark.parametrize(("call", "why"), [
    ("warnings.warn(f'loss {loss.item()}')", "source"),
    ("loguru_logger.info('loss {}', loss.item())", "loguru"),
    ("absl_logging.info('%d) loss = %0.3f', step, loss.item(), extra_argument_to_make_the_line_long)", "absl"),
])
def test_unsafe_output_calls(call, why):
    code = HEADER + f"def f(loss: torch.Tensor, step: int, extra_argument_to_make_the_line_long: int):\n    {call}\n"
    (finding,) = _fx201(code)
    assert finding.fix == "unsafe" and why in finding.note


def test_a_wrapper_called_in_forward_is_deferred_where_it_is_called():
    code = (
        "import torch\nfrom torch import nn\n"
        "master = True\n"
        "def print0(s):\n    if master:\n        print(s)\n"
        "class Net(nn.Module):\n"
        "    def forward(self, x):\n"
        "        print0('forward')\n"
        "        return x * 2\n"
    )
    fixed = _fixed(code)
    assert fixed is not None
    assert "        deferred.record(lambda: print0('forward'))\n" in fixed
    assert "    if master:\n        print(s)\n" in fixed  # the wrapper's body is not deferred twice


def test_a_wrapper_with_a_clock_is_not_deferred():
    code = (
        "import time\nimport torch\n"
        "def log(msg):\n    print(f'{time.time():.0f} {msg}')\n"
        "def f(loss: torch.Tensor):\n    log(f'loss {loss.item()}')\n"
    )
    assert _fx201(code) == []


def test_a_function_called_on_a_read_runs_at_replay_and_is_unsafe():
    code = (
        "import numpy as np\nimport torch\n"
        "def fmt(x):\n    return f'{x:.3f}'\n"
        "def f(loss: torch.Tensor):\n"
        "    print(round(loss.item(), 3), np.round(loss.item(), 2))\n"
        "    print(fmt(loss.item()))\n"
    )
    first, second = _fx201(code)
    assert first.fix == "safe"
    assert second.fix == "unsafe" and "`fmt(...)` is called at replay" in second.note


def test_an_attribute_of_a_module_that_fixitem_cannot_place_is_unsafe():
    code = (
        "import torch\nfrom torch import nn\n"
        "class Net(nn.Module):\n"
        "    def __init__(self):\n        super().__init__()\n        self.n = 3\n"
        "    def forward(self, x):\n"
        "        print(f'{self.n} {self.inherited} {self.config.hidden_size}')\n"
        "        return x\n"
    )
    (finding,) = _fx201(code)
    assert finding.fix == "unsafe"
    assert "`self.inherited` may be a tensor" in finding.note
    assert "self.n" not in finding.note and "`self.config.hidden_size` may be a tensor" not in finding.note


def test_strings_made_from_literals_are_no_tensors_and_stay_as_written():
    # legacy snli: ``log_template = ' '.join(...)`` and ``' ' * 8`` are strings, not values
    # that "may be a tensor" passed by reference.
    code = (
        "import torch\n"
        "log_template = ' '.join('{:>6.0f},{:>8.6f},{},{:12.4f}'.split(','))\n"
        "def step(model, x, n_correct: int, n_total: int):\n"
        "    loss = model(x).sum()\n"
        "    print(log_template.format(1.0, loss.item(), ' '*8, n_correct/n_total*100))\n"
    )
    [finding] = _fx201(code)
    assert finding.note == "`loss` is not known to be a tensor"
    fixed = _fixed(code, unsafe=True)
    assert ("lambda log_template, loss, value: print(\n"
            "            log_template.format(1.0, loss, ' '*8, value)\n        ),\n"
            "        log_template,\n        loss,\n        n_correct/n_total*100,\n") in fixed
