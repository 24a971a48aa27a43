"""The project a file belongs to: names of its other modules are known (a wrapper of
print, a helper's return, a base class that is an nn.Module), and traced code that
calls into another module makes the code it calls traced too."""

from __future__ import annotations

import ast
import shutil
from pathlib import Path

import pytest
from conftest import parsed_fixture_modules, run_side_by_side
from fixitem.codemods.model import project
from fixitem.codemods.model.context import FileContext
from fixitem.codemods.model.provenance import Certainty, Kind

from fixitem import api

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = ROOT / "fixtures" / "project"


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    target = tmp_path / "project"
    shutil.copytree(FIXTURE, target)
    project.forget()
    return target


@pytest.fixture
def parsed(monkeypatch) -> list[str]:
    """The last line of each text ``ast.parse`` is given from here on."""
    texts: list[str] = []
    parse = ast.parse

    def counting(source, *args, **options):
        texts.append(source.splitlines()[-1].strip())
        return parse(source, *args, **options)

    monkeypatch.setattr(ast, "parse", counting)
    return texts


def findings(paths, **options):
    return [(Path(f.path).name, f.line, f.rule, f.fix, f.costs)
            for f in api.scan(paths, cache=False, isolated=True, jobs=1, **options).findings]


def test_a_wrapper_of_print_from_another_module_is_deferred_like_print(tree):
    found = findings([tree / "train.py"])
    assert ("train.py", 26, "FX201", "safe", ("host-sync",)) in found
    # Without the project (the file alone, elsewhere), the wrapper is unknown: only the read is reported.
    alone = tree.parent / "alone"
    alone.mkdir()
    shutil.copy(tree / "train.py", alone / "train.py")
    assert [f[2:4] for f in findings([alone / "train.py"])] == [("FX001", "none")]


def test_traced_code_that_calls_a_base_class_of_another_module_makes_it_traced(tree):
    found = findings([tree])
    assert ("base.py", 19, "FX201", "safe", ("graph-break",)) in found
    # The caller is not in the run: nothing says the base class's method is traced.
    assert findings([tree / "model" / "base.py"]) == []


def test_kinds_come_from_the_module_that_defines_the_name(tree):
    path = tree / "train.py"
    ctx = FileContext.build(path, path.read_text(), external=project.current().for_file(path))
    calls = {ctx.code(n): n for n in ctx.nodes(ast.Call)}
    loss = calls["smoothed_loss(net(x), y)"]
    assert ctx.kind(loss) is Kind.TENSOR  # ``-> torch.Tensor`` in losses.py
    assert ctx.certainty(loss) is Certainty.TENSOR
    assert ctx.kind(calls["Net()"]) is Kind.MODULE  # model/__init__.py re-exports net.Net, a Base, an nn.Module
    assert ctx.kind(calls["net(x)"]) is Kind.TENSOR
    # Without the project, the same calls are unknown.
    plain = FileContext.build(path, path.read_text())
    calls = {plain.code(n): n for n in plain.nodes(ast.Call)}
    assert plain.kind(calls["smoothed_loss(net(x), y)"]) is Kind.UNKNOWN
    assert plain.kind(calls["Net()"]) is not Kind.MODULE


def test_the_rewritten_project_prints_the_same(tree):
    before = tree.parent / "before"
    shutil.copytree(tree, before)
    result = api.apply([tree], cache=False, isolated=True, jobs=1)
    assert {Path(f.path).name for f in result.applied} == {"train.py", "base.py"}
    original, rewritten = run_side_by_side(before / "train.py", tree / "train.py")
    assert "step 2: loss" in original and "rescaling by 0.5" in original
    assert rewritten == original


def test_a_kept_result_is_not_used_once_a_module_it_read_changes(tree, tmp_path, monkeypatch):
    monkeypatch.setenv("FIXITEM_CACHE_DIR", str(tmp_path / "cache"))
    options = {"isolated": True, "jobs": 1}

    def scan():
        return [(f.rule, f.fix) for f in api.scan([tree / "train.py"], **options).findings]

    assert scan() == [("FX201", "safe")]
    assert scan() == [("FX201", "safe")]  # kept
    # ``print0`` no longer only prints: it is not deferred any more.
    helper = tree / "distributed.py"
    helper.write_text(helper.read_text().replace("        print(*args, **kwargs)",
                                                 "        print(*args, **kwargs)\n    return open('log.txt', 'a')"))
    assert scan() == [("FX001", "none")]


def test_modules_that_import_each_other_are_read_once_each(tmp_path):
    (tmp_path / "a.py").write_text("import torch\nfrom b import g\n\n\ndef f(x: torch.Tensor) -> torch.Tensor:\n"
                                   "    return g(x)\n")
    (tmp_path / "b.py").write_text("import torch\nfrom a import f\n\n\ndef g(x):\n    return f(x)\n\n\n"
                                   "def h(x: torch.Tensor):\n    y = f(x)\n    if y.sum().item() > 0:\n        y = y * 2\n"
                                   "    return y\n")
    project.forget()
    found = findings([tmp_path / "b.py"])
    assert [(f[2], f[3]) for f in found] == [("FX101", "safe")]  # ``f`` returns a tensor, read from a.py


def test_a_module_read_after_its_summary_is_parsed_whole_once(tmp_path, parsed):
    # Finding ``g`` reads b.py's summary, made from its outline (``g`` parsed alone when asked
    # about); what ``g`` returns then needs b.py's analysis, which parses it whole, once.
    (tmp_path / "b.py").write_text("import torch\n\n\ndef g(x: torch.Tensor):\n    return x * 2\n")
    (tmp_path / "a.py").write_text("import torch\nfrom b import g\n\n\ndef f(x: torch.Tensor):\n"
                                   "    y = g(x)\n    if y.sum().item() > 0:\n        y = y * 2\n    return y\n")
    project.forget()
    found = findings([tmp_path / "a.py"])
    assert [(f[2], f[3]) for f in found] == [("FX101", "safe")]  # ``g`` returns a tensor, read from b.py
    assert parsed.count("return x * 2") == 2  # ``g`` alone, then the whole module


def test_a_file_of_the_run_asked_about_before_its_turn_is_parsed_once(tmp_path, parsed):
    # a.py comes first and asks what b.py's ``h`` is (its summary: ``-> torch.Tensor``); b.py's
    # own analysis, next, takes the tree its summary was read from. (b.py is parsed whole for
    # its summary: its outline, cut at a line of ``h``'s docstring written at column 0, does
    # not parse. Its text goes to the parser twice, not three times.)
    (tmp_path / "a.py").write_text("import torch\nfrom b import h\n\n\ndef f(x):\n    y = h(x)\n"
                                   "    if y.sum().item() > 0:\n        y = y * 2\n    return y\n")
    (tmp_path / "b.py").write_text("import torch\n\n\ndef h(x: torch.Tensor) -> torch.Tensor:\n    \"\"\"Scale.\nTwice.\"\"\"\n"
                                   "    if x.sum().item() > 0:\n        x = x * 2\n    return x * 3\n")
    project.forget()
    found = findings([tmp_path])
    assert [(f[0], f[2], f[3]) for f in found] == [("a.py", "FX101", "safe"), ("b.py", "FX101", "safe")]
    assert parsed.count("return x * 3") == 2


def test_a_tree_parsed_already_is_given_only_for_its_text(tmp_path):
    path = tmp_path / "m.py"
    # (Parsed whole for its summary: a line of the docstring at column 0 stops its outline.)
    text = "import torch\n\n\ndef h(x) -> torch.Tensor:\n    \"\"\"Same.\nUnscaled.\"\"\"\n    return x\n"
    path.write_text(text)
    project.forget()
    kept = project.current()
    assert kept.summary(path) is not None
    assert kept.parsed(path, text.replace("x\n", "x + 1\n")) is None  # another text: parsed anew
    assert isinstance(kept.parsed(path, text), ast.Module)
    assert kept.parsed(path, text) is None
    # An analysis of the module kept here (what ``h`` returns) shares its tree, as often as asked.
    read = kept.read(path)
    assert kept.parsed(path, text) is read.context.module and kept.parsed(path, text) is read.context.module
    assert kept.parsed(path, text + "\n") is None


def test_what_an_annotated_function_of_another_module_returns_needs_no_analysis_of_it(tmp_path, monkeypatch):
    # transformers' ``@lru_cache @_make_compile_constant def is_torch_available() -> bool``,
    # where ``_make_compile_constant`` sets an attribute and returns the function: the
    # annotation says it, as the module's analysis would. A decorator that wraps the function
    # makes what it returns unknown, which the summary says too; ``-> None`` is no tensor.
    (tmp_path / "b.py").write_text(
        "import functools\nimport torch\n\n\ndef mark(fn):\n    fn.constant = True\n    return fn\n\n\n"
        "@functools.lru_cache\n@mark\ndef ready() -> bool:\n    return True\n\n\n"
        "def scale(x) -> torch.Tensor:\n    return x * 2\n\n\n"
        "def twice(f):\n    def run(x):\n        return f(f(x))\n\n    return run\n\n\n"
        "@twice\ndef odd(x) -> torch.Tensor:\n    return x\n\n\n"
        "def setup(level) -> None:\n    torch.manual_seed(level)\n")
    (tmp_path / "a.py").write_text(
        "import torch\nfrom b import odd, ready, scale, setup\n\n\ndef f(x: torch.Tensor, y):\n"
        "    if ready():\n        x = x + 1\n    y = scale(y)\n    if y.sum().item() > 0:\n        x = x * 2\n"
        "    if odd(y).sum().item() > 0:\n        x = x * 3\n    if setup(1):\n        x = x * 4\n    return x\n")
    asked: list[str] = []  # the functions of b.py whose module's analysis was looked into
    look = project.External._analysis

    def looking(self, found):
        asked.append(found.qualname)
        return look(self, found)

    monkeypatch.setattr(project.External, "_analysis", looking)
    project.forget()
    found = findings([tmp_path / "a.py"])
    # ``ready()`` and ``setup(1)`` are no tensors (no finding); ``scale`` returns a tensor (a
    # fix); ``odd``'s decorator may return anything (possibly a tensor: no fix by default).
    assert [(f[1], f[2], f[3]) for f in found] == [(9, "FX101", "unsafe"), (11, "FX101", "none")]
    assert asked == ["scale"]  # only whether every ``return`` gives a certain tensor
    # Without the summary's facts, the analysis of b.py says the same.
    monkeypatch.setattr(project.Project, "defined", lambda self, found: None)
    project.forget()
    assert findings([tmp_path / "a.py"]) == found
    assert sorted(set(asked)) == ["odd", "ready", "scale", "setup"]


def test_a_function_of_another_module_that_gives_back_its_argument_returns_a_tensor_given_one(tmp_path):
    # stylegan2: ``buf = reduce_sum(buf)`` (in distributed.py: ``tensor`` itself, or its
    # clone summed over processes), then ``buf.tolist()`` reads the device buffer. (``float()``
    # of a value is reported only where it is known to be a tensor.)
    (tmp_path / "distributed.py").write_text(
        "import torch.distributed as dist\n\n\ndef reduce_sum(tensor):\n"
        "    if not dist.is_available() or not dist.is_initialized():\n        return tensor\n"
        "    tensor = tensor.clone()\n    dist.all_reduce(tensor, op=dist.ReduceOp.SUM)\n    return tensor\n\n\n"
        "def rank_of(group):\n    group = len(group)\n    return group\n")
    (tmp_path / "train.py").write_text(
        "import torch\nfrom distributed import rank_of, reduce_sum\n\n\ndef tune(real_pred, count):\n"
        "    buf = torch.tensor([0.0, 0.0], device=\"cuda\")\n    buf += torch.sign(real_pred).sum()\n"
        "    buf = reduce_sum(buf)\n    n = reduce_sum(count)\n    r = rank_of(buf)\n"
        "    total = float(buf.sum())\n    return total, float(n.sum()), float(r)\n")
    project.forget()
    # Given a tensor, a tensor; given a value of unknown kind, nothing known. ``rank_of``
    # gives back a name rebound to something else.
    assert [(f[1], f[2]) for f in findings([tmp_path / "train.py"])] == [(11, "FX001")]


def test_a_module_whose_called_function_is_traced_already_is_not_analysed_again(tmp_path, monkeypatch):
    # ``helper`` is traced in its own module (its ``forward`` calls it): the mark from
    # model.py changes nothing there, so layers.py is analysed once. ``other`` is not
    # traced in layers.py: a mark for it is a second analysis.
    (tmp_path / "layers.py").write_text(
        "import torch\n\n\ndef helper(x):\n    print(x)\n    return x\n\n\ndef other(x):\n    print(x)\n    return x\n\n\n"
        "class Layer(torch.nn.Module):\n    def forward(self, x):\n        return helper(x)\n")
    (tmp_path / "model.py").write_text(
        "import torch\nfrom layers import helper\n\n\nclass Net(torch.nn.Module):\n"
        "    def forward(self, x):\n        return helper(x)\n")
    analysed: list[tuple[str, tuple[str, ...]]] = []
    run_job = api._run_job

    def counting(job, **options):
        analysed.append((job.path.name, job.traced_roots))
        return run_job(job, **options)

    monkeypatch.setattr(api, "_run_job", counting)
    project.forget()
    found = findings([tmp_path])
    assert sorted(analysed) == [("layers.py", ()), ("model.py", ())]
    assert [(f[0], f[1], "graph-break" in f[4]) for f in found] == [("layers.py", 5, True)]
    # ``other`` (line 10) is called by no traced code: its print is no graph break, and
    # (a tensor of unknown kind) not reported at all.
    # Now model.py calls ``other`` too: layers.py is analysed again, with ``other`` traced.
    (tmp_path / "model.py").write_text(
        "import torch\nfrom layers import helper, other\n\n\nclass Net(torch.nn.Module):\n"
        "    def forward(self, x):\n        return other(helper(x))\n")
    analysed.clear()
    project.forget()
    found = findings([tmp_path])
    assert ("layers.py", ("helper", "other")) in analysed
    assert [(f[0], f[1], "graph-break" in f[4]) for f in found] == [("layers.py", 5, True), ("layers.py", 10, True)]


def test_traced_root_names_count_a_name_only_when_every_function_of_it_is_traced():
    from fixitem.codemods.model.traced import traced_root_names

    source = ("import torch\n\n\ndef f(x):\n    return g(x)\n\n\nif torch.cuda.is_available():\n"
              "    def g(x):\n        return x\nelse:\n    def g(x):\n        return x + 1\n\n\n"
              "def unused(x):\n    return x\n\n\nclass M(torch.nn.Module):\n    def forward(self, x):\n"
              "        return f(x)\n")
    ctx = FileContext.build(None, source)
    assert traced_root_names(ctx.module, ctx.parents, ctx.traced) == {"f", "g", "M.forward"}
    # One ``g`` of two traced: a root ``g`` would trace the other one too.
    ctx = FileContext.build(None, source.replace("    return g(x)", "    return x"))
    assert "g" not in traced_root_names(ctx.module, ctx.parents, ctx.traced)


def test_possible_wrappers_are_read_from_the_text_of_short_functions():
    text = (
        "import logging\n\n\n"
        "def log0(*args):\n    _emit(*args)\n\n\n"  # a wrapper of a wrapper
        "def _emit(*args):\n    print(*args)\n\n\n"
        "\f\n"  # a form feed: a line break for ``str.splitlines``, not for Python's line numbers
        "def warn(msg):\n    logging.getLogger(__name__).warning(msg)\n\n\n"
        "def add(a, b):\n    return a + b  # print(a) in a comment only costs an analysis\n\n\n"
        "def compute(x):\n    return x.exp()\n\n\n"
        "def spaced(x): print (x)\n\n\n"  # one line, a space before the parenthesis
        "def method(x):\n    return x.write\t(x)\n\n\n"
        "def named_alike(x):\n    return reprint(x) + print_(x) + x.printed(x) + x2print(x) + x.info\n\n\n"
        "def calls_named_alike(x):\n    return named_alike(x) + x.spaced(x) + spaced_(x)\n\n\n"
        "def long(x):\n" + "    x = x + 1\n" * 21 + "    print(x)\n"
    )
    module = ast.parse(text)
    functions = {f.name: f for f in module.body if type(f) is ast.FunctionDef}
    writes = project._writing_functions(functions, text)
    assert writes == {"log0": True, "_emit": True, "warn": True, "add": True, "compute": False, "spaced": True,
                      "method": True, "named_alike": False, "calls_named_alike": False, "long": False}


def test_a_function_of_another_module_that_does_more_than_write_is_known_no_wrapper_unread(tmp_path, monkeypatch):
    (tmp_path / "helpers.py").write_text(
        "import logging\n\nlogger = logging.getLogger(__name__)\n\n\n"
        "def setup(value):\n    shown = value + 1\n    logger.info('setup %s', shown)\n\n\n"
        "@staticmethod\ndef decorated(value):\n    print(value)\n\n\n"
        "def log0(value):\n    print(value)\n"
    )
    (tmp_path / "train.py").write_text(
        "import torch\nfrom helpers import decorated, log0, setup\n\n\ndef step(x):\n    loss = x.sum()\n"
        "    setup(loss.item())\n    decorated(loss.item())\n"
    )
    read: list[str] = []
    real = project.Project.read

    def reading(self, path, *args, **options):
        read.append(path.name)
        return real(self, path, *args, **options)

    monkeypatch.setattr(project.Project, "read", reading)
    project.forget()
    assert [f[1:3] for f in findings([tmp_path / "train.py"])] == [(7, "FX001"), (8, "FX001")]  # reads, no wrappers
    assert read == []  # neither could be a wrapper: its module was not analysed to know
    # A function that only writes is still asked about, and found a wrapper.
    (tmp_path / "train.py").write_text(
        "import torch\nfrom helpers import log0\n\n\ndef step(x):\n    loss = x.sum()\n    log0(loss.item())\n")
    project.forget()
    assert [f[1:3] for f in findings([tmp_path / "train.py"])] == [(7, "FX201")]
    assert set(read) == {"helpers.py"}


def test_only_a_call_made_for_its_effect_is_asked_whether_it_is_another_modules_wrapper(tree):
    from fixitem.codemods.model.output_calls import output_call

    path = tree / "train.py"
    text = path.read_text().replace('        print0(f"step', '        shown = print0(loss)\n        print0(f"step')
    ctx = FileContext.build(path, text, external=project.current().for_file(path))
    calls = {ctx.code(n): n for n in ctx.nodes(ast.Call)}
    assert output_call(ctx, calls['print0(f"step {step}: loss {loss.item():.4f}")']) is not None
    assert output_call(ctx, calls["print0(loss)"]) is None  # its value is used: not a wrapper's call


def test_a_run_of_one_file_does_not_follow_its_traced_calls_and_its_kept_result_says_so(tmp_path):
    (tmp_path / "layers.py").write_text("import torch\n\n\ndef other(x):\n    print(x)\n    return x\n")
    (tmp_path / "model.py").write_text(
        "import torch\nfrom layers import other\n\n\nclass Net(torch.nn.Module):\n"
        "    def forward(self, x):\n        return other(x)\n")
    cache = tmp_path / "cache"
    project.forget()
    alone = api.scan([tmp_path / "model.py"], isolated=True, jobs=1, cache=cache)
    assert alone.files[0].traced_elsewhere is None  # not looked for: no other file of the run to mark
    # A run of both files must not take that kept result as "calls nothing elsewhere":
    # layers.py is analysed again with ``other`` traced, and its print is a graph break.
    both = api.scan([tmp_path], isolated=True, jobs=1, cache=cache)
    assert [(Path(f.path).name, f.line, "graph-break" in f.costs) for f in both.findings] == [("layers.py", 5, True)]
    assert [r.traced_elsewhere for r in both.files if r.path.name == "model.py"] == [
        [(str((tmp_path / "layers.py").resolve()), "other")]]


def test_a_class_built_on_another_modules_class_is_looked_up_only_when_asked_about(tmp_path, monkeypatch):
    (tmp_path / "configs.py").write_text("class BaseConfig:\n    size = 4\n")
    (tmp_path / "layers.py").write_text("import torch\n\n\nclass Base(torch.nn.Module):\n    pass\n")
    (tmp_path / "model.py").write_text(
        "import torch\nfrom configs import BaseConfig\nfrom layers import Base\n\n\n"
        "class Config(BaseConfig):\n    pass\n\n\nclass Net(Base):\n    pass\n\n\nclass Big(Net):\n    pass\n\n\n"
        "net = Big()\n")
    read: list[str] = []
    summary = project.Project.summary

    def counting(self, path):
        if path not in self._summaries:
            read.append(path.name)
        return summary(self, path)

    monkeypatch.setattr(project.Project, "summary", counting)
    project.forget()
    path = tmp_path / "model.py"
    ctx = FileContext.build(path, path.read_text(), external=project.current().for_file(path))
    assert read == []  # nothing asked yet
    big = next(n for n in ctx.nodes(ast.Call) if ctx.code(n) == "Big()")
    assert ctx.kind(big) is Kind.MODULE  # Big -> Net (this file) -> Base, an nn.Module of layers.py
    assert read == ["layers.py"]  # configs.py is never read: nobody asked about Config
    assert "Config" not in ctx.provenance.module_classes
    assert read == ["layers.py", "configs.py"]


def test_a_summary_one_process_made_is_read_not_parsed_by_another(tmp_path, monkeypatch, parsed):
    # The workers of a run share the summaries of the modules they read through a folder:
    # the second process (here a fresh project) reads b.py's from it, without parsing b.py.
    shared = tmp_path / "shared"
    shared.mkdir()
    (tmp_path / "b.py").write_text("import torch\n\n\ndef g(x: torch.Tensor) -> torch.Tensor:\n    return x * 2\n")
    monkeypatch.setattr(project, "_SHARED_SUMMARIES", None)
    project.share_summaries(str(shared))
    first = project.Project().summary(tmp_path / "b.py")
    assert first is not None and len(list(shared.iterdir())) == 1
    parsed.clear()
    second = project.Project().summary(tmp_path / "b.py")
    assert parsed == []
    assert second is not None and second.digest == first.digest
    assert second.definition("g").returns is Kind.TENSOR and second.names == first.names
    assert parsed == ["return x * 2"]  # (``g`` alone, from the text, when first asked about)
    # A summary of another text is not taken for this one, nor a file that is not a summary.
    (tmp_path / "b.py").write_text("def g(x):\n    return 1\n")
    next(shared.iterdir()).write_bytes(b"not a pickle")
    parsed.clear()
    third = project.Project().summary(tmp_path / "b.py")
    assert third is not None and third.definition("g").returns is Kind.UNKNOWN and len(parsed) == 2  # (outline, g)
    project.share_summaries(None)


def test_a_summary_is_handed_on_once_when_asked_about_not_for_each_file_analysed(tmp_path, monkeypatch):
    shared = tmp_path / "shared"
    shared.mkdir()
    path = tmp_path / "b.py"
    text = "import torch\n\n\ndef g(x: torch.Tensor) -> torch.Tensor:\n    return x * 2\n"
    path.write_text(text)
    monkeypatch.setattr(project, "_SHARED_SUMMARIES", None)
    project.share_summaries(str(shared))
    kept = project.Project()
    kept.remember(path, ast.parse(text), text)  # a file of the run analysed here
    assert list(shared.iterdir()) == []
    assert kept.summary(path) is not None  # then asked about
    (written,) = shared.iterdir()
    written.unlink()
    assert kept.summary(path) is not None and list(shared.iterdir()) == []  # handed on once
    project.share_summaries(None)


def test_a_parallel_run_shares_summaries_and_leaves_no_folder_behind(tree, tmp_path, monkeypatch):
    import tempfile

    temporary = tmp_path / "tmp"
    temporary.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temporary))
    monkeypatch.setattr(api, "PARALLEL_MIN_FILES", 1)  # workers even for a small project
    made: list[str] = []
    mkdtemp = tempfile.mkdtemp
    monkeypatch.setattr(tempfile, "mkdtemp", lambda **options: made.append(mkdtemp(**options)) or made[-1])
    shared: list[str] = []
    rmtree = shutil.rmtree

    def removing(folder, **options):
        shared.extend(p.name for p in Path(folder).iterdir())
        rmtree(folder, **options)

    monkeypatch.setattr(shutil, "rmtree", removing)
    project.forget()
    parallel = [(f.rule, f.line, f.fix) for f in api.scan([tree], jobs=2, cache=False).findings]
    project.forget()
    alone = [(f.rule, f.line, f.fix) for f in api.scan([tree], jobs=1, cache=False).findings]
    assert parallel == alone and parallel
    assert len(made) == 1 and list(temporary.iterdir()) == []
    assert shared and all(name.endswith(".summary") for name in shared)  # what the workers handed on


def test_a_decorator_of_the_module_is_read_once_for_all_the_functions_it_decorates(monkeypatch):
    from fixitem.codemods.model import provenance

    decorators = (
        "import torch\n\n\ndef mark(fn):\n    fn.marked = True\n    return fn\n\n\n"
        "def wrap(fn):\n    return lambda *args: fn(*args)\n\n\n"
    )
    read: list[str] = []
    real = provenance.returns_its_argument

    def counting(func):
        read.append(func.name)
        return real(func)

    monkeypatch.setattr(provenance, "returns_its_argument", counting)
    # A module asked about: what its functions return, from their annotations.
    source = decorators + "".join(f"@mark\ndef f{i}(x) -> torch.Tensor:\n    return x\n\n\n" for i in range(3)) + \
        "@wrap\ndef g(x) -> torch.Tensor:\n    return x\n"
    summary = project.Summary(ast.parse(source), "digest", source)
    assert [summary.definition(f"f{i}").returns for i in range(3)] == [Kind.TENSOR] * 3
    assert summary.definition("g").returns is Kind.UNKNOWN  # ``wrap`` gives back another function
    assert sorted(read) == ["mark", "wrap"]
    # The same from the module's outline: each decorator parsed when first needed, and read once.
    read.clear()
    summary, _ = project.Summary.of_text(source, "digest")
    assert [summary.definition(f"f{i}").returns for i in range(3)] == [Kind.TENSOR] * 3
    assert summary.definition("g").returns is Kind.UNKNOWN
    assert sorted(read) == ["mark", "wrap"]
    # A file's own analysis: what its functions return, from their bodies.
    read.clear()
    source = decorators + "".join(f"@mark\ndef f{i}(x):\n    return torch.zeros(3)\n\n\n" for i in range(3)) + \
        "@wrap\ndef g(x):\n    return torch.zeros(3)\n\n\ndef use(x):\n    return f0(x), f1(x), f2(x), g(x)\n"
    ctx = FileContext.build(None, source)
    calls = [n for n in ctx.nodes(ast.Call) if type(n.func) is ast.Name and n.func.id in ("f0", "f1", "f2", "g")]
    assert [ctx.kind(c) for c in calls] == [Kind.TENSOR] * 3 + [Kind.UNKNOWN]
    assert sorted(read) == ["mark", "wrap"]


def test_every_fixture_module_s_summary_reads_back_from_its_json_as_it_was():
    import json

    checked = 0
    for path, text, module in parsed_fixture_modules():
        summary = project.Summary(module, "digest", text)
        back = project.Summary.from_data(json.loads(json.dumps(summary.to_data())))
        assert back.to_data() == summary.to_data(), path
        assert (back.names, back.origins, back.imports.aliases) == (summary.names, summary.origins, summary.imports.aliases)
        for name, defined in summary.definitions().items():
            again = back.definition(name)
            assert [ast.dump(b) for b in again.bases] == [ast.dump(b) for b in defined.bases], (path, name)
            assert (again.kind, again.methods, again.may_write, again.returns, again.opaque, again.passes) == (
                defined.kind, defined.methods, defined.may_write, defined.returns, defined.opaque, defined.passes)
        checked += 1
    assert checked > 90


def test_a_name_its_module_lacks_still_makes_the_file_depend_on_that_module(tmp_path):
    (tmp_path / "m.py").write_text("import torch\n")
    (tmp_path / "train.py").write_text("import torch\nfrom m import f\n\n\ndef step(x):\n    return f(x)\n")
    project.forget()
    external = project.current().for_file(tmp_path / "train.py")
    ctx = FileContext.build(tmp_path / "train.py", (tmp_path / "train.py").read_text(), external=external)
    (call,) = [n for n in ctx.nodes(ast.Call) if type(n.func) is ast.Name and n.func.id == "f"]
    assert external.definition(ctx.provenance, call.func) is None
    assert [Path(p).name for p in external.consulted] == ["m.py"]  # ``f`` may come to be defined there
    fresh = project.current().for_file(tmp_path / "train.py")  # another file's questions, answers kept
    assert fresh.definition(ctx.provenance, call.func) is None and [Path(p).name for p in fresh.consulted] == ["m.py"]
