"""All rules, in the order they run (specific rewrites before generic reports)."""

from __future__ import annotations

from collections.abc import Iterable

from ..rule import Rule
from ..rules.assert_async import AssertAsync
from ..rules.capture_dynamic_output_shape_ops import CaptureDynamicOutputShapeOps
from ..rules.capture_scalar_outputs import CaptureScalarOutputs
from ..rules.check_data_dependent_size import CheckDataDependentSize
from ..rules.clamp_min_max import ClampMinMax
from ..rules.data_dependent_size import DataDependentSize
from ..rules.deferred_logging import DeferredLogging
from ..rules.detach_not_item import DetachNotItem
from ..rules.device_accumulation import DeviceAccumulation
from ..rules.device_to_host import DeviceToHost
from ..rules.explicit_sync import ExplicitSync
from ..rules.item_read import ItemRead
from ..rules.keep_scalar_tensor import KeepScalarTensor
from ..rules.one_tolist import OneToList
from ..rules.tensor_format import TensorFormat
from ..rules.tensor_truth import TensorTruth
from ..rules.tolist import ToList
from ..rules.where_if import WhereIf
from ..rules.where_ifexp import WhereIfExp

RULE_CLASSES: list[type[Rule]] = [
    AssertAsync,
    WhereIf,
    WhereIfExp,
    ClampMinMax,
    DeferredLogging,
    OneToList,
    DeviceAccumulation,
    DetachNotItem,
    KeepScalarTensor,
    CheckDataDependentSize,
    DataDependentSize,
    CaptureScalarOutputs,
    CaptureDynamicOutputShapeOps,
    TensorTruth,
    TensorFormat,
    ItemRead,
    ToList,
    DeviceToHost,
    ExplicitSync,
]


class UnknownRule(ValueError):
    pass


def all_rules() -> list[Rule]:
    return [cls() for cls in RULE_CLASSES]


def rule_class(code: str) -> type[Rule]:
    for cls in RULE_CLASSES:
        if cls.code == code.upper() or cls.name == code.lower():
            return cls
    raise UnknownRule(f"unknown rule {code!r}; `fixitem rule --all` lists the rules")


def _matches(cls: type[Rule], patterns: Iterable[str]) -> bool:
    return any(cls.code.startswith(p.upper()) or cls.name == p.lower() for p in patterns)


def select_rules(select: Iterable[str] | None = None, ignore: Iterable[str] | None = None) -> list[Rule]:
    """Rules whose code starts with a ``select`` prefix and with no ``ignore`` prefix.

    Raises :class:`UnknownRule` for a prefix that matches no rule.
    """
    select = [s for s in (select or []) if s]
    ignore = [s for s in (ignore or []) if s]
    for pattern in [*select, *ignore]:
        if pattern.upper() != "ALL" and not any(_matches(cls, [pattern]) for cls in RULE_CLASSES):
            raise UnknownRule(f"unknown rule or prefix {pattern!r}; `fixitem rule --all` lists the rules")
    chosen = []
    for cls in RULE_CLASSES:
        if select and "ALL" not in [s.upper() for s in select] and not _matches(cls, select):
            continue
        if _matches(cls, ignore):
            continue
        chosen.append(cls())
    return chosen
