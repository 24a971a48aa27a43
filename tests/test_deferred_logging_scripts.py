"""FX201 on small training scripts of fixtures/logging, run before and after `apply`.

Each script runs as a real process with unbuffered output and stderr merged
into stdout, so that the text is compared exactly, in the order the process
wrote it.
"""

from __future__ import annotations

import contextlib
import io
import shutil
from pathlib import Path

import pytest
import torch
from conftest import load_module, run_side_by_side

import fixitem
from fixitem import runtime


def _rewrite(copy_fixture, name: str, unsafe: bool = False):
    original = copy_fixture(f"logging/{name}.py")
    rewritten = original.with_name(f"{name}_deferred.py")
    rewritten.write_text(original.read_text())
    result = fixitem.apply([rewritten], unsafe=unsafe)
    assert not result.errors, result.errors
    deferred = [f for f in result.applied if f.rule == "FX201"]
    return original, rewritten, deferred


# -- start-up output and a sibling function ----------------------------------------------------


def test_startup_and_evaluation_output_is_not_deferred(copy_fixture):
    original, rewritten, deferred = _rewrite(copy_fixture, "startup_and_sibling", unsafe=True)
    text = rewritten.read_text()
    assert [f.line for f in deferred] == [20]  # the loss line of train(), nothing else
    assert text.count("deferred.record(") == 1
    for line in ('    print(f"Using device: {device}")\n', '    logger.warning("Nothing is fused.")\n',
                 '    print(f"Test set: epoch {epoch}, {len(inputs)} samples")\n', '    print("done")\n'):
        assert line in text
    # The batch size is read when the line is recorded, not passed as the tensor.
    assert "        len(inputs),\n" in text


def test_startup_and_sibling_output_keeps_its_order(copy_fixture):
    original, rewritten, _ = _rewrite(copy_fixture, "startup_and_sibling", unsafe=True)
    before, after = run_side_by_side(original, rewritten)
    assert before.splitlines()[:2] == ["Using device: cpu", "WARNING Nothing is fused."]
    assert before.splitlines()[6] == "Test set: epoch 1, 64 samples"
    assert after == before


# -- state that changes after the line is written ----------------------------------------------


def test_trainer_state_is_printed_as_it_was_when_the_line_was_written(copy_fixture):
    _, _, safe = _rewrite(copy_fixture, "trainer_state")
    # ``self.iter_num`` is an int of the class: safe. ``trainer.iter_num`` and
    # ``trainer.history[-1:]`` of an untyped ``trainer`` may be arrays changed in
    # place before the replay: unsafe (the learning rate, formatted `:.4f`, is a number).
    assert [f.line for f in safe] == [24]
    original, rewritten, deferred = _rewrite(copy_fixture, "trainer_state", unsafe=True)
    assert [f.fix for f in deferred] == ["safe", "unsafe"]
    assert "`trainer.iter_num` may be a mutable object" in deferred[1].note
    assert "`trainer.history[-1:]` may be a mutable object" in deferred[1].note
    assert "param_groups" not in deferred[1].note
    text = rewritten.read_text()
    assert "        self.iter_num,\n" in text
    assert "        trainer.iter_num,\n" in text and "        len(batch),\n" in text
    assert "trainer.optimizer.param_groups[0]['lr'],\n" in text
    assert "lambda trainer" not in text and "lambda self" not in text
    before, after = run_side_by_side(original, rewritten)
    lines = before.splitlines()
    assert [line.split()[1] for line in lines if line.startswith("iter ")] == ["0", "1", "2", "3"]
    assert "lr 0.0125" in lines[-1] and "seen 8 rows (32 so far)" in lines[-1]
    assert after == before


# -- wrappers, % and str.format, a disabled level -----------------------------------------------


def test_wrappers_and_formats_print_the_same(copy_fixture):
    original, rewritten, deferred = _rewrite(copy_fixture, "wrappers_and_formats")
    assert [f.message.split("(")[0] for f in deferred] == ["`print0", "`log", "`print", "`print", "`logger.debug"]
    assert all(f.fix == "safe" for f in deferred)
    text = rewritten.read_text()
    assert '    print0("starting")\n' in text
    assert "    if master_process:\n        print(s)\n" in text  # the wrapper itself is left as written
    assert ".item()" not in text
    before, after = run_side_by_side(original, rewritten)
    assert before.startswith("starting\nstep 0 loss ")
    assert "INFO correct " in before and "step 5: " in before
    assert "debug loss" not in before
    assert after == before


# -- warning_once in a compiled forward ----------------------------------------------------------


def _breaks(path: Path) -> int:
    module = load_module(path)
    model, x = module.make()
    torch._dynamo.reset()
    out = io.StringIO()
    with contextlib.redirect_stderr(out), contextlib.redirect_stdout(out):
        explanation = torch._dynamo.explain(model)(x)
        runtime.flush()
    torch._dynamo.reset()
    return explanation.graph_break_count


def test_warning_once_in_forward_no_longer_breaks_the_graph(copy_fixture):
    original, rewritten, deferred = _rewrite(copy_fixture, "warning_once_forward", unsafe=True)
    messages = {f.line: f.message for f in deferred}
    assert "breaks the graph in traced code" in messages[32]
    assert _breaks(original) >= 1
    assert _breaks(rewritten) == 0
    before, after = run_side_by_side(original, rewritten)
    assert before.count("use_cache=True") == 1
    assert before.index("use_cache=True") < before.index("step 0 out")
    assert after == before


# -- a learning rate given as a tensor ---------------------------------------------------------


def test_a_tensor_learning_rate_is_not_replayed_as_a_number(copy_fixture):
    """An optimizer given ``lr=torch.tensor(0.1)`` keeps that tensor in ``param_groups``:
    printed as it is, replayed as a number it would print ``0.10000000149011612``."""
    original, rewritten, deferred = _rewrite(copy_fixture, "tensor_lr")
    assert [f.line for f in deferred] == [18, 19]  # the number's line, and the formatted one
    before, after = run_side_by_side(original, rewritten)
    assert before == after and "lr tensor(0.1000) loss" in before
    scanned = fixitem.scan([original], cache=False)
    (tensor_line,) = [f for f in scanned.findings if f.line == 17]
    assert tensor_line.fix == "unsafe" and "may be a tensor" in tensor_line.note


def test_an_array_changed_in_place_is_not_replayed_as_it_is_later(copy_fixture):
    """``window[i] = step`` changes the array each step: deferred, it would be passed by
    reference and every line would print the last window."""
    original, rewritten, deferred = _rewrite(copy_fixture, "array_window")
    assert [f.line for f in deferred] == [20]  # the array's own line is left as it is
    before, after = run_side_by_side(original, rewritten)
    assert before == after and "window [0. 1.]" in before
    scanned = fixitem.scan([original], cache=False)
    (window_line,) = [f for f in scanned.findings if f.line == 19]
    assert window_line.fix == "unsafe" and "`window` is passed by reference" in window_line.note
    unsafe_original, unsafe_rewritten, _ = _rewrite(copy_fixture, "array_window", unsafe=True)
    before, after = run_side_by_side(unsafe_original, unsafe_rewritten)
    assert before != after  # what the note says: the later window is printed


def test_a_print_is_not_deferred_where_the_program_tees_stdout(copy_fixture):
    """``sys.stdout = Tee(path)`` in the entry script: the tee writes the program's other
    prints to its file at once, so a replayed line would land after them in the file."""
    folder = copy_fixture("logging/tee")
    scanned = fixitem.scan([folder], cache=False)
    (line,) = [f for f in scanned.findings if f.rule == "FX201"]
    assert line.fix == "unsafe" and "in place of `sys.stdout`" in line.note
    alone = fixitem.scan([folder / "train.py"], cache=False)  # the run no longer holds the tee
    assert [f.fix for f in alone.findings if f.rule == "FX201"] == ["safe"]
    sibling = folder.with_name("other_example")  # a folder beside it: another program
    sibling.mkdir()
    shutil.copyfile(folder / "train.py", sibling / "train.py")
    both = fixitem.scan([folder.parent], cache=False).findings
    assert sorted((Path(f.path).parent.name, f.fix) for f in both if f.rule == "FX201") == [
        ("other_example", "safe"), ("tee", "unsafe")]
    assert not fixitem.apply([folder], write=False).applied
    # Deferred anyway (--unsafe): the tee is put in place after the runtime's import, so the
    # runtime runs each call at once and the log gets the lines in order (the tag stays: the
    # text still goes where the program sends it only because the runtime checks the streams).
    deferred = folder.with_name("tee_deferred")
    shutil.copytree(folder, deferred)
    assert fixitem.apply([deferred / "train.py"], unsafe=True).applied
    before, after = run_side_by_side(folder / "main.py", deferred / "main.py")
    assert before == after and "log: ['step 0 loss" in before
    # A package beside the tee's folder that it imports (``tools/train.py`` and ``mmdet/``).
    package = folder.with_name("trainer")
    package.mkdir()
    (package / "__init__.py").write_text("")
    shutil.copyfile(folder / "train.py", package / "loop.py")
    main = folder / "main.py"
    main.write_text(main.read_text().replace("from train import train", "from trainer.loop import train"))
    tagged = fixitem.scan([folder.parent], cache=False).findings
    assert sorted((Path(f.path).parent.name, f.fix) for f in tagged if f.rule == "FX201") == [
        ("other_example", "safe"), ("tee", "unsafe"), ("trainer", "unsafe")]
    # The same package in a ``src/`` layout.
    source = folder.with_name("src")
    source.mkdir()
    shutil.move(str(package), str(source / "trainer"))
    tagged = fixitem.scan([folder.parent], cache=False).findings
    assert sorted((Path(f.path).parent.name, f.fix) for f in tagged if f.rule == "FX201") == [
        ("other_example", "safe"), ("tee", "unsafe"), ("trainer", "unsafe")]


def test_a_file_run_alone_sees_a_tee_set_up_by_a_module_it_imports(tmp_path):
    """``utils.setup_logger()`` setting ``sys.stdout = Logger(path)``, imported (inside a
    function, or two imports deep) by the script run alone: its prints are not deferred as
    safe; the result kept in the cache goes when the module stops replacing the stream."""
    tee = "import sys\n\n\nclass Tee:\n    def write(self, s):\n        pass\n\n\ndef setup():\n    sys.stdout = Tee()\n"
    (tmp_path / "tee_logger.py").write_text(tee)
    (tmp_path / "helpers.py").write_text("from tee_logger import setup\n")
    loop = ("import torch\n\n\ndef train(xs: list[torch.Tensor]):\n    for i, x in enumerate(xs):\n        loss = x.sum()\n"
            "        print(f'step {i} loss {loss.item():.4f}')\n")
    direct = tmp_path / "direct.py"
    direct.write_text(loop + "\n\ndef main():\n    import tee_logger\n    tee_logger.setup()\n")
    deep = tmp_path / "deep.py"
    deep.write_text("import helpers\n" + loop)
    plain = tmp_path / "plain.py"
    plain.write_text(loop)
    for script, fix in ((direct, "unsafe"), (deep, "unsafe"), (plain, "safe")):
        found = [f for f in fixitem.scan([script], cache=False).findings if f.rule == "FX201"]
        assert [f.fix for f in found] == [fix], script.name
        if fix == "unsafe":
            assert "in place of `sys.stdout`" in found[0].note
    cache = tmp_path / "cache"
    assert [f.fix for f in fixitem.scan([direct], cache=cache).findings] == ["unsafe"]
    (tmp_path / "tee_logger.py").write_text(tee.replace("sys.stdout = Tee()", "pass"))
    assert [f.fix for f in fixitem.scan([direct], cache=cache).findings] == ["safe"]


def test_a_wrapper_that_reads_changing_module_state_is_not_deferred(copy_fixture):
    """``print0`` prefixes each line with ``STEP["n"]``, which the loop increments: called
    at replay, it would print the last value on every line."""
    original, rewritten, deferred = _rewrite(copy_fixture, "wrapper_state")
    assert deferred == []
    before, after = run_side_by_side(original, rewritten)
    assert before == after and "[1] step 1" in before


@pytest.mark.parametrize(("line", "replaces"), [
    ("sys.stdout = Logger(path)", True),
    ("    sys.stderr = utils.Tee(path)", True),
    ("sys.stdout = self.old_stdout", False),  # put back after a capture
    ('sys.stderr = open(os.devnull, "w")', False),  # where there is none (pyinstaller)
    ('sys.stdout = open("log.txt", "w")', True),  # a log file: a line replayed later misses it
    ("sys.stdout = open(args.log, 'a', buffering=1)", True),
    ("sys.stdout = io.StringIO()", False),  # a capture
    ("if sys.stdout == old:", False),
])
def test_only_an_object_put_in_place_of_a_stream_counts_as_a_tee(line, replaces):
    from fixitem.codemods.model.streams import replaces_streams

    assert replaces_streams(f"import sys\n{line}\n") is replaces


@pytest.mark.parametrize(("text", "replaces"), [
    ("redirect_logger = StreamToLoguru(level)\nsys.stderr = redirect_logger\n", True),  # YOLOX
    ("stream = Stream()\nsys.stdout = stream  # a tee\n", True),
    ("old = sys.stdout\nsys.stdout = old\n", False),  # put back
    ("buf = io.StringIO()\nsys.stdout = buf\n", False),  # a capture
])
def test_an_object_put_in_place_of_a_stream_through_a_name_counts_as_a_tee(text, replaces):
    from fixitem.codemods.model.streams import replaces_streams

    assert replaces_streams(f"import sys\n{text}") is replaces
