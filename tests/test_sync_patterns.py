"""Sync patterns of real code that are reported (not rewritten), with their costs and advice."""

from __future__ import annotations

from pathlib import Path

import pytest
from fixitem.codemods.driver.engine import process
from fixitem.codemods.driver.registry import all_rules


def scan(code: str):
    return process(Path("patterns.py"), code, all_rules()).findings


def only(code: str):
    findings = scan(code)
    assert len(findings) == 1, findings
    return findings[0]


def test_membership_in_a_tensor_is_a_sync():
    code = "import torch\n\ndef f(ids: torch.Tensor, pad: int):\n    found = pad in ids\n    return found\n"
    finding = only(code)
    assert (finding.rule, finding.costs) == ("FX004", ("host-sync",))
    assert "Tensor.__contains__" in finding.message
    assert "(ids == x).any()" in finding.note


def test_membership_in_traced_code_also_breaks_the_graph():
    code = (
        "import torch\nfrom torch import nn\n\n"
        "class M(nn.Module):\n"
        "    def forward(self, ids: torch.Tensor):\n"
        "        missing = 0 not in ids\n"
        "        return ids, missing\n"
    )
    assert only(code).costs == ("graph-break", "host-sync")


def test_membership_in_containers_is_not_reported():
    code = "import torch\n\ndef f(sd: dict, keys: list):\n    return 'w' in sd, 3 in keys, 'x' in torch.load('a')\n"
    assert scan(code) == []


def test_a_key_looked_up_in_a_forward_parameter_is_a_dict_lookup():
    # A loss module's ``forward(self, outputs, targets)`` gets a dict of outputs.
    code = (
        "import torch\nfrom torch import nn\n\n"
        "class Loss(nn.Module):\n"
        "    def forward(self, outputs, targets):\n"
        "        loss = outputs['logits'].sum()\n"
        "        if 'aux' in outputs:\n"
        "            loss = loss + outputs['aux'].sum()\n"
        "        if isinstance(outputs, dict) and 'loss' not in outputs:\n"
        "            raise ValueError('no loss')\n"
        "        return loss\n"
    )
    assert scan(code) == []


def test_explicit_synchronize_is_reported_as_what_it_is():
    code = (
        "import torch\n\n"
        "def train_step(model, x, opt):\n"
        "    model(x).sum().backward()\n"
        "    opt.step()\n"
        "    torch.cuda.synchronize()\n"
    )
    finding = only(code)
    assert finding.rule == "FX007" and finding.fix == "none"
    assert "explicit device sync" in finding.message
    assert finding.costs == ("host-sync",)
    assert finding.note.startswith("remove it unless it brackets a time measurement")


def test_synchronize_around_timing_is_advised_to_stay():
    code = (
        "import time\nimport torch\n\n"
        "def bench(fn):\n"
        "    torch.cuda.synchronize()\n"
        "    t0 = time.perf_counter()\n"
        "    fn()\n"
        "    torch.accelerator.synchronize()\n"
        "    return time.perf_counter() - t0\n"
    )
    findings = scan(code)
    assert [f.rule for f in findings] == ["FX007", "FX007"]
    assert all("brackets a time measurement" in f.note and f.note.startswith("it brackets") for f in findings)


def test_synchronize_in_traced_code_is_a_sync_not_a_graph_break():
    # torch traces ``torch.cuda.synchronize()`` into the graph.
    code = (
        "import torch\nfrom torch import nn\n\n"
        "class M(nn.Module):\n"
        "    def forward(self, x):\n"
        "        torch.cuda.current_stream().synchronize()\n"
        "        return x\n"
    )
    assert only(code).costs == ("host-sync",)


# (``model(x).numpy()`` alone is no copy from a device: ``.numpy()`` raises for a device tensor.)
@pytest.mark.parametrize("copy", ["model(x).cpu()", "model(x).detach().cpu().numpy()", "self.net(x).cpu()"])
def test_host_copies_of_a_module_output_are_reported_as_possible(copy):
    code = (
        "import torch\n\n"
        "class Evaluator:\n"
        "    def run(self, model, loader):\n"
        "        preds = []\n"
        "        for x in loader:\n"
        f"            preds.append({copy})\n"
        "        return preds\n"
    )
    finding = only(code)
    assert finding.rule == "FX003" and finding.costs == ("host-sync",)
    assert finding.note.startswith("(if `")
    assert "is a tensor) keep results on the device" in finding.note


def test_cpu_of_a_function_or_class_result_is_not_a_module_output():
    code = (
        "import torch\n\n"
        "def build(cfg):\n    return cfg\n\n"
        "def main(cfg):\n"
        "    model = build(cfg).cpu()\n"
        "    net = torch.nn.Linear(2, 2).cpu()\n"
        "    return model, net\n"
    )
    assert scan(code) == []


def test_per_element_reads_over_a_device_tensor_cost_one_sync_each():
    code = (
        "import torch\n\n"
        "def gather(idx: torch.Tensor, helper):\n"
        "    out = []\n"
        "    for i in idx:\n"
        "        out.append(int(i))\n"
        "        helper(i)\n"
        "    return out\n"
    )
    finding = only(code)
    assert finding.rule == "FX001" and finding.costs == ("host-sync",)
    assert "one host sync each" in finding.note and "`values = idx.tolist()`" in finding.note


def test_per_element_reads_in_a_comprehension_are_read_once():
    code = "import torch\n\ndef f(idx: torch.Tensor):\n    return [int(i) for i in idx]\n"
    finding = only(code)
    assert finding.rule == "FX303" and "one host sync per element" in finding.message


@pytest.mark.parametrize(
    "expression", ["'%.3f' % loss", "'step %d loss %.3f' % (step, loss)", "'{:.3f}'.format(loss)", "'{}'.format(x=loss)"]
)
def test_percent_and_str_format_of_tensors_are_tensor_format(expression):
    code = f"import torch\n\ndef f(loss: torch.Tensor, step: int):\n    text = {expression}\n    return text\n"
    finding = only(code)
    column = len("    text = ") + expression.rindex("loss") + 1  # the tensor formatted
    assert (finding.rule, finding.line, finding.col) == ("FX005", 4, column)
    assert finding.costs == ("host-sync",)
    assert "Log every N steps" in finding.note


def test_percent_formatting_of_numbers_is_not_reported():
    code = "import torch\n\ndef f(loss: torch.Tensor, step: int):\n    return '%d %.3f' % (step, loss.item() * 2), '{}'.format(step)\n"
    assert [f.rule for f in scan(code)] == ["FX001"]


def test_a_synchronize_helper_called_by_timing_code_is_advised_to_stay():
    code = (
        "import time\nimport torch\n\n"
        "def sync(device):\n    torch.cuda.synchronize(device)\n\n"
        "def timed(fn, device):\n    t0 = time.perf_counter()\n    fn()\n    sync(device)\n    return time.perf_counter() - t0\n"
    )
    assert only(code).note.startswith("it brackets a time measurement")


FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "advice" / "sync_patterns.py"


def test_the_evaluation_script_fixture():
    text = FIXTURE.read_text()
    lines = text.splitlines()
    findings = process(FIXTURE, text, all_rules()).findings

    def at(marker: str) -> list:
        line = next(n for n, code in enumerate(lines, 1) if marker in code)
        return [f for f in findings if f.line == line]

    for marker in ("# ints", "# a metadata query", "# a host tensor outside", "# numpy"):
        assert at(marker) == [], marker
    [host] = at("# a host tensor in traced code")
    assert host.costs == ("graph-break",) and "host memory" in host.note
    [copy] = at("# a module's output")
    assert copy.rule == "FX003" and copy.note.startswith("(if `model(x)` is a tensor)")
    [member] = at("# membership")
    assert member.rule in ("FX101", "FX004") and member.costs == ("host-sync",)
    assert [f.rule for f in at("# % formatting")] == ["FX005"]
    assert [f.rule for f in at("# str.format")] == ["FX005"]
    [per_element] = at("# one read per element")
    assert per_element.rule == "FX303" and "per element" in per_element.message
    [sync] = at("# an explicit sync, not timing")
    assert sync.rule == "FX007" and sync.note.startswith("remove it")
    timing = at("# an explicit sync around a timing")
    assert [f.rule for f in timing] == ["FX007"] and timing[0].note.startswith("it brackets a time measurement")
    assert len(findings) == 9


def test_all_and_any_of_a_tensor_read_its_elements_one_by_one():
    code = (
        "import torch\n\n"
        "def drop_layers(layers, dropout):\n"
        "    to_drop = torch.zeros(len(layers), device='cuda').uniform_(0.0, 1.0) < dropout\n"
        "    if all(to_drop):\n"
        "        to_drop[0] = False\n"
        "    return any(to_drop), all([True, False])\n"
    )
    from pathlib import Path

    from fixitem.codemods.driver.engine import process
    from fixitem.codemods.driver.registry import all_rules

    findings = process(Path("a.py"), code, all_rules(), fix=True, unsafe=True).findings
    assert [(f.rule, f.line, f.fix) for f in findings] == [("FX004", 5, "none"), ("FX004", 7, "none")]
    assert "`to_drop.all()` decides on the device" in findings[0].note
    assert "reads the elements of a tensor one by one" in findings[1].message


def test_a_tensor_given_to_a_metric_writer_is_read_by_it():
    """cleanrl's `writer.add_scalar("losses/td_loss", loss, global_step)`: TensorBoard copies the
    tensor to the host at once. Reported, not rewritten; with `.item()` the call is deferred."""
    from pathlib import Path

    from fixitem.codemods.driver.engine import process
    from fixitem.codemods.driver.registry import all_rules

    code = (
        "import torch\nfrom torch.utils.tensorboard import SummaryWriter\n\n"
        "def train(writer: SummaryWriter, w: torch.Tensor):\n"
        "    for step in range(3):\n"
        "        loss = (w ** 2).sum()\n"
        "        writer.add_scalar('loss', loss, step)\n"
        "        writer.add_scalar('loss/item', loss.item(), step)\n"
    )
    metric, deferred = process(Path("a.py"), code, all_rules()).findings
    assert (metric.rule, metric.line, metric.fix) == ("FX005", 7, "none") and "metric writer" in metric.message
    assert (deferred.rule, deferred.line, deferred.fix) == ("FX201", 8, "safe")
    assert [f.line for f in process(Path("a.py"), code, all_rules(), fix=True).applied] == [8]


def test_a_read_used_as_the_key_of_a_python_container_is_an_index_not_a_tensor_test():
    # detr's panoptic post-processing: the ``if`` tests what the dict holds, a Python value;
    # the read is the key (FX006), which no ``torch.where`` can keep on the device.
    code = (
        "import torch\n\n"
        "def stuff_ids(label: torch.Tensor, is_thing_map: dict, probs: torch.Tensor, y: torch.Tensor):\n"
        "    if not is_thing_map[label.item()]:\n        print(1)\n"
        "    z = 1.0 if is_thing_map[label.item()] else 0.0\n"
        "    assert is_thing_map[label.item()]\n"
        "    w = y * 0.5 if probs[label.item()] > 0.5 else y  # a tensor's element: tested on the device\n"
        "    return z, w\n"
    )
    found = [(f.rule, f.line, f.col) for f in scan(code)]
    assert found == [("FX006", 4, 25), ("FX006", 6, 29), ("FX006", 7, 25), ("FX102", 8, 9), ("FX006", 8, 26)]


def test_the_message_of_a_check_is_read_only_when_the_check_fails():
    # transformers' torch_compilable_check(cond, lambda: f"... {int(num_tokens)}"), as torch._check:
    # the lambda runs when the check fails. A lambda given otherwise (a callback) still counts.
    code = (
        "import torch\n\n"
        "def f(x: torch.Tensor, n: torch.Tensor, run):\n"
        "    torch._check(x.shape[0] == 3, lambda: f'bad {int(n)}')\n"
        "    torch_compilable_check(n.sum() == 3, msg=lambda: f'got {n.sum()}')\n"
        "    run(x, lambda: print(int(n)))\n"
        "    return x\n"
    )
    assert [(f.rule, f.line) for f in scan(code)] == [("FX001", 6)]


def test_a_copy_that_is_read_is_of_a_tensor_whatever_else_the_name_holds():
    # yunjey's tensorboard tutorial: ``images`` is rebound after the read (a loop over a dict of
    # arrays), so the name's bindings disagree; the copy read with ``.numpy()`` is a tensor's.
    code = (
        "import torch\n\n"
        "def log(loader, device):\n"
        "    for batch in loader:\n"
        "        images = batch.to(device)\n"
        "        info = {'images': images.cpu().numpy(), 'first': images[0].cpu().tolist()}\n"
        "        for tag, images in info.items():\n"
        "            print(tag)\n"
    )
    assert [(f.rule, f.line, f.col) for f in scan(code)] == [("FX003", 6, 27), ("FX003", 6, 58)]


def test_a_value_of_unknown_kind_in_a_file_that_uses_jax_is_not_reported():
    # cleanrl's ``*_jax.py``: ``loss.item()`` of what a jitted function returns is a JAX
    # array's read; torch is there only for TensorBoard. A certain tensor is still reported.
    code = (
        "import jax\nimport torch\n\n\n@jax.jit\ndef update(x):\n    return x.sum(), x * 2\n\n\n"
        "def train(writer, xs, t: torch.Tensor):\n"
        "    for step, x in enumerate(xs):\n"
        "        loss, y = update(x)\n"
        "        writer.add_scalar('loss', loss.item(), step)\n"
        "        writer.add_scalar('t', t.sum().item(), step)\n"
    )
    assert [f.line for f in process(Path("example.py"), code, all_rules()).findings] == [14]
    without = code.replace("import jax\n", "import functools as jax\n")
    assert [f.line for f in process(Path("example.py"), without, all_rules()).findings] == [13, 14]


def test_the_advice_for_a_host_copy_says_a_non_blocking_copy_is_read_after_the_device_is_done():
    # cleanrl's ``action.cpu().numpy()`` goes to ``env.step`` on the next line: a non_blocking
    # copy read there would race with the device.
    code = ("import torch\n\n\ndef act(agent: torch.nn.Module, env, obs: torch.Tensor):\n"
            "    action = agent(obs)\n    return env.step(action.cpu().numpy())\n")
    [finding] = [f for f in process(Path("example.py"), code, all_rules()).findings if f.rule == "FX003"]
    assert "non_blocking=True" in finding.note and "synchronize()" in finding.note


def test_a_tensor_built_from_a_list_of_tensors_reads_each_of_them():
    # ``torch.tensor(losses)`` and yolov5's ``torch.tensor(xyxy)`` of ``for *xyxy, conf, cls in det``:
    # each element's value is read to build a host tensor. ``torch.stack`` reads nothing.
    code = (
        "import torch\n\n\n"
        "def evaluate(model, loader):\n"
        "    losses = []\n"
        "    for x, y in loader:\n"
        "        losses.append(torch.nn.functional.mse_loss(model(x), y))\n"
        "    return torch.tensor(losses).mean(), torch.stack(losses).mean()\n\n\n"
        "def show(det: torch.Tensor):\n"
        "    for *xyxy, conf, cls in reversed(det):\n"
        "        print(torch.tensor(xyxy).tolist())\n\n\n"
        "def show_host(det: torch.Tensor, grid):\n"
        "    for *xyxy, conf, cls in det.cpu():\n"
        "        print(torch.tensor(xyxy).tolist(), torch.tensor([torch.zeros(2).sum(), 1.0]))\n"
    )
    found = [(f.rule, f.line, f.costs) for f in scan(code)]
    assert found == [("FX003", 8, ("host-sync",)), ("FX003", 13, ("host-sync",)), ("FX003", 17, ("host-sync",))]
    first = scan(code)[0]
    assert first.message == "`torch.tensor(losses)` reads each tensor of `losses` on the host"
    assert "`torch.stack(losses)`" in first.note


def test_the_rest_of_a_row_of_python_numbers_is_a_list_of_numbers():
    # yolov5's ``save_one_txt``: ``xyxy`` holds Python numbers, so ``torch.tensor(xyxy)`` is a host
    # tensor and its ``tolist()`` reads nothing from a device.
    code = (
        "import torch\n\n\n"
        "def write_txt(predn, im0):\n"
        "    gn = torch.tensor(im0.shape)[[1, 0, 1, 0]]\n"
        "    for *xyxy, conf, cls in predn.tolist():\n"
        "        xywh = (torch.tensor(xyxy).view(1, 4) / gn).view(-1).tolist()\n"
        "        print(cls, *xywh, conf)\n"
    )
    # Only the read of the detections handed in (if ``predn`` is a tensor).
    assert [(f.rule, f.line) for f in scan(code)] == [("FX002", 6)]


def test_a_list_filled_before_a_name_is_rebound_to_a_tensor_holds_what_the_name_was_then():
    # transformers' esmfold2: ``res_type`` is an int in the loop, and a tensor built from the
    # list only after it.
    code = (
        "import torch\n\n\n"
        "def build(sequence, table):\n"
        "    vals = []\n"
        "    for c in sequence:\n"
        "        res_type = table.get(c, 0)\n"
        "        vals.append(res_type)\n"
        "    res_type = torch.tensor(vals, dtype=torch.int64)\n"
        "    return res_type.unsqueeze(0)\n"
    )
    assert scan(code) == []


def test_a_name_each_branch_of_an_if_assigns_has_what_the_branches_leave():
    # timm's sampler: ``indices`` is a host tensor from either branch, then a list from line 9
    # on; ``moved`` may be on the device. Every binding of the name at once says neither.
    code = (
        "import torch\n\n\n"
        "def order(n, shuffle, g, device):\n"
        "    if shuffle:\n        indices = torch.randperm(n, generator=g)\n"
        "    else:\n        indices = torch.arange(start=0, end=n)\n"
        "    indices = indices.tolist()\n"
        "    if shuffle:\n        moved = torch.randperm(n, device=device)\n"
        "    elif n > 3:\n        moved = torch.arange(n)\n"
        "    else:\n        moved = torch.zeros(n)\n"
        "    moved = moved.tolist()\n"
        "    return indices, moved\n"
    )
    assert [(f.rule, f.line, f.message) for f in scan(code)] == [
        ("FX002", 16, "`moved.tolist()` reads a tensor value on the host")]


def test_what_unique_gives_with_its_counts_is_a_pair_of_tensors_where_its_input_lives():
    # timm's regnet: ``torch.unique(torch.tensor(widths, device='cpu'), return_counts=True)``.
    code = (
        "import torch\n\n\n"
        "def stages(widths, x: torch.Tensor):\n"
        "    stage_widths, stage_depths = torch.unique(torch.tensor(widths, device='cpu'), return_counts=True)\n"
        "    values, counts = x.cuda().unique(return_counts=True)\n"
        "    return stage_widths.tolist(), stage_depths.tolist(), counts.tolist()\n"
    )
    assert [(f.rule, f.line, f.message) for f in scan(code)] == [
        ("FX002", 7, "`counts.tolist()` reads a tensor value on the host")]


def test_a_name_unpacked_from_a_pair_of_tensors_then_rebound_is_a_tensor_where_read():
    # timm's regnet: the names are rebound to lists on the next line, by unpacking too.
    code = (
        "import torch\n\n\n"
        "def stages(widths, x: torch.Tensor):\n"
        "    stage_widths, stage_depths = torch.unique(torch.tensor(widths, device='cpu'), return_counts=True)\n"
        "    stage_widths, stage_depths = stage_widths.tolist(), stage_depths.tolist()\n"
        "    values, counts = x.cuda().max(1)\n"
        "    values, counts = values.tolist(), counts.tolist()\n"
        "    return stage_widths, stage_depths, values, counts\n"
    )
    found = scan(code)
    assert [(f.rule, f.line) for f in found] == [("FX002", 8), ("FX002", 8)]
    assert [f.message for f in found] == ["`values.tolist()` reads a tensor value on the host",
                                          "`counts.tolist()` reads a tensor value on the host"]


def test_a_message_of_a_raise_is_not_asked_about_and_not_reported(monkeypatch):
    # An f-string in ``raise`` runs only when the program fails anyway: its values are not
    # asked about (most f-strings of a library are such messages), nor reported.
    import ast

    from fixitem.codemods.model.context import FileContext

    asked: list[str] = []
    real = FileContext.is_tensor

    def recording(self, node):
        asked.append(ast.unparse(node))
        return real(self, node)

    monkeypatch.setattr(FileContext, "is_tensor", recording)
    code = (
        "import torch\n\n\ndef f(x):\n    loss = x.sum()\n    if x.dim() != 2:\n"
        "        raise ValueError(f'bad {loss_in_raise} {loss}')\n    print(f'loss {loss}')\n"
    )
    assert [f.line for f in scan(code)] == [8]  # the print only
    assert "loss_in_raise" not in asked and "loss" in asked


def test_tensors_in_a_printed_display_are_each_formatted():
    # ``print({"m": x.mean()})`` shows each element's repr: a read of each tensor the list,
    # tuple, set or dict written in the call holds (in nested displays too), and only those.
    code = (
        "import logging\nimport torch\nlogger = logging.getLogger(__name__)\n\n\n"
        "def f(x: torch.Tensor, step: int, extra: dict):\n"
        "    print({'m': x.mean(), 's': x.std()})\n"
        "    print('stats', (x.mean(), [x.std(), step]))\n"
        "    logger.info('%s', {x.max()})\n"
        "    print(f'{(x.min(), step)}')\n"
        "    print([step, 'a'], {**extra}, (x.mean().item(),))\n"
    )
    found = [(f.rule, f.line, f.col) for f in scan(code) if f.rule == "FX005"]
    assert found == [("FX005", 7, 17), ("FX005", 7, 32), ("FX005", 8, 21), ("FX005", 8, 32),
                     ("FX005", 9, 24), ("FX005", 10, 15)]


def test_a_print_of_a_display_with_a_tensor_is_not_deferred():
    code = "import torch\n\n\ndef f(x: torch.Tensor):\n    print([x.mean(), x.std().item()])\n"
    findings = scan(code)
    assert sorted(f.rule for f in findings) == ["FX005", "FX201"]
    assert all(f.fix == "none" for f in findings)


def test_a_printed_container_of_tensors_reads_each_of_them():
    # detr's ``print(loss_dict_reduced)``: a dict (or list) named in a print or f-string shows
    # the repr of each tensor it holds.
    code = (
        "import torch\n\n\ndef f(x: torch.Tensor, n: int):\n"
        "    losses = {'a': x.mean(), 'n': n}\n"
        "    print(losses)\n"
        "    parts = []\n"
        "    parts.append(x.sum())\n"
        "    print(f'parts {parts}')\n"
    )
    found = [(f.rule, f.line, f.message) for f in scan(code)]
    assert found == [("FX005", 6, "the tensors `losses` holds are formatted into text"),
                     ("FX005", 9, "the tensors `parts` holds are formatted into text")]


@pytest.mark.parametrize("change", [
    "stats['loss'] = stats['loss'].item()",
    "stats.clear()",
    "to_numbers(stats)",
    "stats = {k: v.item() for k, v in stats.items()}",
])
def test_a_printed_container_whose_tensors_may_be_gone_is_not_reported(change):
    code = (
        "import torch\n\n\ndef f(x: torch.Tensor, to_numbers):\n"
        "    stats = {'loss': x.mean()}\n"
        f"    {change}\n"
        "    print(stats)\n"
    )
    assert [f for f in scan(code) if f.rule == "FX005"] == []


def test_a_printed_generator_or_container_of_host_tensors_is_not_reported():
    code = (
        "import torch\n\n\ndef f(x: torch.Tensor):\n"
        "    lazy = (v for v in [x.mean()])\n"
        "    print(lazy)\n"
        "    here = [torch.zeros(3), torch.ones(2)]\n"
        "    print(here)\n"
    )
    assert scan(code) == []


def test_an_object_whose_str_reads_device_tensors_is_read_where_it_is_printed():
    # torchvision's segmentation reference: ``print(confmat)`` runs ``ConfusionMatrix.__str__``,
    # whose ``.item()`` (not reported in the method: it is there to show values) waits for the
    # device. A meter whose ``__str__`` reads a host tensor, and ``!r`` of an object without a
    # ``__repr__``, read nothing from a device.
    code = (
        "import torch\n\n\n"
        "class ConfusionMatrix:\n"
        "    def __init__(self, n, device):\n"
        "        self.mat = torch.zeros((n, n), device=device)\n\n"
        "    def __str__(self):\n"
        "        acc = torch.diag(self.mat).sum() / self.mat.sum()\n"
        "        return '{:.1f}'.format(acc.item() * 100)\n\n\n"
        "class Meter:\n"
        "    def __init__(self):\n"
        "        self.values = []\n\n"
        "    def __str__(self):\n"
        "        return '{:.3f}'.format(torch.tensor(self.values).mean().item())\n\n\n"
        "def evaluate(n, device):\n"
        "    confmat = ConfusionMatrix(n, device)\n"
        "    meter = Meter()\n"
        "    print(confmat, meter)\n"
        "    print(f'{confmat!r} {meter}')\n"
        "    print(f'{confmat}')\n"
    )
    found = [(f.rule, f.line, f.col, f.message) for f in scan(code)]
    message = "`confmat` is formatted into text: `ConfusionMatrix.__str__` (line 8) reads tensors"
    assert found == [("FX005", 24, 11, message), ("FX005", 26, 14, message)]


def test_a_sum_of_host_copies_started_from_a_number_is_a_host_tensor():
    # TCN's evaluation: ``correct = 0``, then ``correct += pred.eq(y).cpu().sum()``. The copy
    # is the read; formatting ``correct`` afterwards reads a host tensor, which costs nothing.
    code = (
        "import torch\n\n\ndef test(model: torch.nn.Module, loader, device):\n"
        "    correct = 0\n"
        "    for data, target in loader:\n"
        "        pred = model(data.to(device)).max(1, keepdim=True)[1]\n"
        "        correct += pred.eq(target.to(device).view_as(pred)).cpu().sum()\n"
        "    print('Accuracy: {:.0f}%'.format(100.0 * correct / len(loader.dataset)))\n"
        "    total = 0\n"
        "    for data, target in loader:\n"
        "        total += model(data.to(device)).sum()\n"
        "    print(f'loss {total:.3f}')\n"
    )
    assert [(f.rule, f.line) for f in scan(code)] == [("FX003", 8), ("FX005", 13)]


def test_a_tensor_made_on_a_device_a_name_holds_is_no_host_tensor():
    # ``dev = torch.device("cuda")`` is no number: a name's start counts as a sum's start only
    # where the name is a number summed into (above), not for the device a name holds.
    code = (
        "import torch\n\n\ndef f():\n    dev = torch.device('cuda')\n"
        "    vals = [torch.randn((), device=dev) for _ in range(3)]\n"
        "    return [v.item() for v in vals]\n"
    )
    assert [f.rule for f in scan(code)] == ["FX001"]  # a device tensor: reported
