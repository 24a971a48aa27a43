"""FX201: deferred logging keeps the output and removes the per-step host syncs."""

from __future__ import annotations

import contextlib
import io
import subprocess
import sys
from pathlib import Path

from conftest import load_module
from fixitem.codemods.driver.engine import process
from fixitem.codemods.driver.registry import all_rules
from fixitem.verify.syncs import count_host_syncs

import fixitem
from fixitem import runtime


def _run(path: Path) -> str:
    done = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=300, cwd=path.parent)
    assert done.returncode == 0, done.stderr
    return done.stdout


def _count(path: Path):
    module = load_module(path)
    out = io.StringIO()
    # Read through a capture, deferred as where the streams are the process's own (under a
    # capture the runtime runs each call at once).
    runtime.run_now_while_replaced = False
    try:
        with contextlib.redirect_stdout(out), count_host_syncs() as syncs:
            module.main()
            runtime.flush()
    finally:
        runtime.run_now_while_replaced = True
    return syncs, out.getvalue()




def _rewrite_train_loop(copy_fixture):
    original = copy_fixture("logging/train_loop.py")
    rewritten = original.with_name("train_loop_deferred.py")
    rewritten.write_text(original.read_text())
    result = fixitem.apply([rewritten])
    return original, rewritten, result


def test_training_script_defers_the_step_lines_only_with_fewer_syncs(copy_fixture):
    original, rewritten, result = _rewrite_train_loop(copy_fixture)
    text = rewritten.read_text()
    assert text != original.read_text(), result
    assert "from fixitem import runtime as deferred" in text
    assert ".item()" not in text
    # "epoch done" reads no tensor: it stays an ordinary print.
    assert '    print("epoch done")\n' in text
    assert text.count("deferred.record(") == 2

    before, before_out = _count(original)
    after, after_out = _count(rewritten)
    assert before.total >= 60
    assert before.total >= 4 * after.total, (before.by_kind, after.by_kind)
    assert sorted(after_out.splitlines()) == sorted(before_out.splitlines())


def test_training_script_prints_the_same_in_the_same_order(copy_fixture):
    original, rewritten, _ = _rewrite_train_loop(copy_fixture)
    before_out = _run(original)
    after_out = _run(rewritten)
    assert before_out.count("\n") == 30 * 2 + 2
    assert "epoch done\neval loss " in before_out
    assert before_out.rstrip().endswith("(int)")
    assert after_out == before_out


def test_second_apply_changes_nothing(copy_fixture):
    path = copy_fixture("logging/train_loop.py")
    fixitem.apply([path])
    once = path.read_text()
    fixitem.apply([path])
    assert path.read_text() == once


def _fixed(code: str, unsafe: bool = False) -> str | None:
    return process(Path("example.py"), code, all_rules(), fix=True, unsafe=unsafe).new_text


def test_an_expression_read_gets_a_generated_parameter_and_float_is_kept():
    code = (
        "import torch\n"
        "@torch.no_grad()\n"
        "def f(out: torch.Tensor, n: torch.Tensor):\n"
        "    print(out.sum().item(), float(n), int(n))\n"
    )
    fixed = _fixed(code)
    assert fixed is not None
    assert "deferred.record(lambda out_sum, n: print(out_sum, float(n), int(n)), out.sum(), n)" in fixed


def test_a_computed_value_is_named_after_what_computes_it():
    # A name a person would give: one operation on a name, through copies and casts; a value
    # computed any other way is ``value``; a name the call reads (``loss``) is not taken again.
    code = (
        "import torch\n"
        "def f(out: torch.Tensor, loss: torch.Tensor, a: torch.Tensor, b: torch.Tensor):\n"
        "    print(out.norm().item(), loss.detach().mean().item(), torch.sum(a).item())\n"
        "    print((a - b).abs().max().item(), a.sum(0).max().item(), loss.float().item(), loss.item())\n"
    )
    fixed = _fixed(code)
    assert fixed is not None
    assert "lambda out_norm, loss_mean, a_sum: print(out_norm, loss_mean, a_sum)" in fixed
    assert "lambda value, value_1, value_2, loss: print(value, value_1, value_2, loss)" in fixed


def test_a_tensor_read_and_its_shape_pass_the_tensor_and_the_shape():
    code = (
        "import torch\n"
        "def f(loss: torch.Tensor):\n"
        "    print(loss.item(), loss.shape)\n"
    )
    fixed = _fixed(code)
    assert fixed is not None
    assert "deferred.record(lambda loss, shape: print(loss, shape), loss, loss.shape)" in fixed


def test_a_tensor_used_whole_beside_its_read_is_not_deferred():
    code = (
        "import torch\n"
        "def f(loss: torch.Tensor):\n"
        "    print(loss.item(), loss)\n"
    )
    assert _fixed(code, unsafe=True) is None


def test_a_comprehension_without_reads_is_evaluated_at_record_time():
    code = (
        "import torch\n"
        "def f(loss: torch.Tensor, names: list):\n"
        "    print(loss.item(), [len(n) for n in names])\n"
    )
    fixed = _fixed(code)
    assert fixed is not None
    assert "lambda loss, value: print(loss, value)," in fixed
    assert "        [len(n) for n in names],\n" in fixed


def test_lambda_and_comprehension_names_are_not_captured_where_they_run_only_sometimes():
    code = (
        "import torch\n"
        "def f(loss: torch.Tensor, names: list):\n"
        "    print(loss.item() if names else [len(n) for n in names])\n"
    )
    fixed = _fixed(code, unsafe=True)
    assert fixed is not None
    assert "lambda names, loss: print(loss if names else [len(n) for n in names])," in fixed
    assert _fixed(code) is None  # `names` is a list read at replay: unsafe


def test_await_is_not_deferred():
    code = (
        "import torch\n"
        "async def f(loss: torch.Tensor, get):\n"
        "    print(loss.item(), await get())\n"
    )
    result = process(Path("example.py"), code, all_rules())
    fx201 = [f for f in result.findings if f.rule == "FX201"]
    assert fx201 and fx201[0].fix == "none"
    assert _fixed(code, unsafe=True) is None


def test_logger_exception_and_unknown_callees_are_left_alone():
    code = (
        "import torch\n"
        "def f(loss: torch.Tensor, logger, out):\n"
        "    logger.exception('x %s', loss.item())\n"
        "    out.write(str(loss.item()))\n"
    )
    result = process(Path("example.py"), code, all_rules())
    assert all(f.rule != "FX201" for f in result.findings)


def test_a_call_that_cannot_be_deferred_leaves_the_others_safe():
    code = (
        "import torch\n"
        "def f(loss: torch.Tensor, x: torch.Tensor):\n"
        "    print(loss.item())\n"
        "    print(x)\n"
    )
    result = process(Path("example.py"), code, all_rules())
    fx201 = [f for f in result.findings if f.rule == "FX201"]
    assert [f.fix for f in fx201] == ["safe"]
    assert [f.line for f in result.findings if f.rule == "FX005"] == [4]


CALLER_SCRIPT = '''\
import torch


def train(model: torch.nn.Module, data):
    for step, x in enumerate(data):
        loss = model(x).sum()
        print(f"step {step} loss {loss.item():.3f}")


def main():
    torch.manual_seed(0)
    model = torch.nn.Linear(2, 1)
    train(model, [torch.randn(2) for _ in range(3)])
    print("done")


if __name__ == "__main__":
    main()
    print("bye")
'''


def _rewrite_caller_script(tmp_path):
    original = tmp_path / "script.py"
    original.write_text(CALLER_SCRIPT)
    rewritten = tmp_path / "script_deferred.py"
    rewritten.write_text(CALLER_SCRIPT)
    fixitem.apply([rewritten])
    return original, rewritten


def test_callers_output_is_left_alone(tmp_path):
    _, rewritten = _rewrite_caller_script(tmp_path)
    text = rewritten.read_text()
    assert text.count("deferred.record(") == 1
    assert '    print("done")\n' in text
    assert '    print("bye")\n' in text


def test_callers_output_keeps_its_place_after_the_deferred_lines(tmp_path):
    original, rewritten = _rewrite_caller_script(tmp_path)
    before, after = _run(original), _run(rewritten)
    assert before.splitlines()[-2:] == ["done", "bye"]
    assert after == before


def test_flush_every_is_configured_once_after_the_import(tmp_path):
    from fixitem.codemods.driver.engine import process
    from fixitem.codemods.driver.registry import all_rules

    code = "import torch\n\n\ndef f(loss: torch.Tensor):\n    print(loss.item())\n"
    new = process(tmp_path / "f.py", code, all_rules(), fix=True, flush_every=10).new_text
    assert new is not None
    assert new.splitlines()[:3] == [
        "import torch",
        "from fixitem import runtime as deferred",
        "deferred.configure(flush_every=10)",
    ]
    again = process(tmp_path / "f.py", new, all_rules(), fix=True, flush_every=10)
    assert again.new_text is None


def test_a_call_spanning_lines_is_laid_out_one_argument_per_line(tmp_path):
    from fixitem.codemods.driver.engine import process
    from fixitem.codemods.driver.registry import all_rules

    code = (
        "import logging\nimport torch\n\nlogger = logging.getLogger(__name__)\n\n\n"
        "class Attn(torch.nn.Module):\n"
        "    def forward(self, x):\n"
        "        logger.warning(\n"
        '            "too long: "\n'
        '            f"{self.config.block_size}."\n'
        "        )\n"
        "        return x\n"
    )
    # ``self.config.block_size`` may be any object, read at replay: unsafe.
    assert process(tmp_path / "m.py", code, all_rules(), fix=True).new_text is None
    new = process(tmp_path / "m.py", code, all_rules(), fix=True, unsafe=True).new_text
    assert new is not None
    assert (
        "        deferred.record(\n"
        "            lambda block_size: logger.warning(\n"
        '                "too long: "\n'
        '                f"{block_size}."\n'
        "            ),\n"
        "            self.config.block_size,\n"
        "        )\n"
    ) in new
