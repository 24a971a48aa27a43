"""fixitem.testing: the assertions users put in their own test suites."""

from __future__ import annotations

import re

import pytest
import torch
from torch import nn

from fixitem.testing import assert_no_graph_breaks, assert_no_host_syncs

HERE = __file__


def _line_of(fn, text: str) -> int:
    """The line of this file, inside ``fn``, that contains ``text``."""
    import inspect

    lines, start = inspect.getsourcelines(fn)
    for offset, line in enumerate(lines):
        if text in line:
            return start + offset
    raise LookupError(text)


class Clean(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        y = self.fc(x)
        return torch.where(y.sum() > 0, y, -y) / torch.clamp(y.norm().detach(), min=1.0)


def uses_item(x):
    return x * x.sum().item()


def uses_print(x):
    y = x + 1
    print(y)
    return y


def uses_if(t):
    if t.sum() > 0:
        return t * 2
    return t


def test_clean_code_passes_both():
    model, x = Clean(), torch.randn(2, 4)
    report = assert_no_graph_breaks(model, x)
    assert report.count == 0
    out = assert_no_host_syncs(model, x)
    assert torch.equal(out, model(x))  # the function's result is returned


def test_clean_function_with_kwargs():
    def fn(x, *, scale):
        return x * scale

    assert torch.equal(assert_no_host_syncs(fn, torch.ones(2), scale=3.0), torch.full((2,), 3.0))


def test_item_is_a_graph_break_with_location():
    with pytest.raises(AssertionError) as info:
        assert_no_graph_breaks(uses_item, torch.ones(3))
    message = str(info.value)
    assert message.startswith("1 graph break in uses_item:")
    assert "item()" in message
    assert f"{HERE}:{_line_of(uses_item, '.item()')}" in message


def test_item_is_a_host_sync_with_location():
    with pytest.raises(AssertionError) as info:
        assert_no_host_syncs(uses_item, torch.ones(3))
    message = str(info.value)
    assert message.startswith("1 host sync in uses_item (1 item):")
    assert f"{HERE}:{_line_of(uses_item, '.item()')}: item" in message
    assert "`return x * x.sum().item()`" in message


def test_print_is_a_graph_break_and_a_sync():
    with pytest.raises(AssertionError) as info:
        assert_no_graph_breaks(uses_print, torch.ones(3))
    message = str(info.value)
    assert "1 graph break in uses_print" in message
    assert "print" in message
    assert f"{HERE}:{_line_of(uses_print, 'print(y)')}" in message

    with pytest.raises(AssertionError) as info:
        assert_no_host_syncs(uses_print, torch.ones(3))
    message = str(info.value)
    assert "1 host sync in uses_print (1 __repr__)" in message
    assert f"{HERE}:{_line_of(uses_print, 'print(y)')}: __repr__" in message


def test_if_on_a_tensor_is_a_graph_break_and_a_sync():
    with pytest.raises(AssertionError) as info:
        assert_no_graph_breaks(uses_if, torch.ones(3))
    message = str(info.value)
    assert "1 graph break in uses_if" in message
    assert re.search(r"data-dependent", message, re.IGNORECASE)
    assert f"{HERE}:{_line_of(uses_if, 'if t.sum()')}" in message

    with pytest.raises(AssertionError) as info:
        assert_no_host_syncs(uses_if, torch.ones(3))
    assert "1 host sync in uses_if (1 __bool__)" in str(info.value)
    assert f"{HERE}:{_line_of(uses_if, 'if t.sum()')}: __bool__" in str(info.value)


def test_several_syncs_are_counted_by_kind_and_line():
    def many(x):
        total = 0.0
        for _ in range(3):
            total += x.sum().item()
        return total + float(x.max()) + len(f"{x.min():.2f}")

    with pytest.raises(AssertionError) as info:
        assert_no_host_syncs(many, torch.ones(3))
    message = str(info.value)
    assert message.startswith("5 host syncs in ")
    assert "(3 item, 1 __float__, 1 __format__)" in message
    assert f"{HERE}:{_line_of(many, 'total +=')}: item (x3)" in message
    assert f"{HERE}:{_line_of(many, 'float(x.max())')}: __float__" in message


def test_several_breaks_are_all_listed():
    def two(x):
        a = x.sum().item()
        print(x)
        return x * a

    with pytest.raises(AssertionError, match=r"^2 graph breaks in "):
        assert_no_graph_breaks(two, torch.ones(3))


def test_an_exception_from_the_function_propagates():
    def broken(x):
        raise ValueError("boom")

    with pytest.raises(ValueError, match="boom"):
        assert_no_host_syncs(broken, torch.ones(1))
    with pytest.raises(AssertionError, match="raised ValueError: boom"):
        assert_no_graph_breaks(broken, torch.ones(1))


def test_syncs_in_torch_internals_are_not_double_counted():
    # ``f"{t}"`` calls ``item`` inside torch: one sync, at the user's line.
    def fmt(t):
        return f"{t.sum():.1f}"

    with pytest.raises(AssertionError) as info:
        assert_no_host_syncs(fmt, torch.ones(2))
    assert str(info.value).startswith("1 host sync in ")
    assert "torch" + "/_tensor.py" not in str(info.value)
