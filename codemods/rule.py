"""The rule interface.

A rule is one class in one module of ``codemods/rules``. It carries

* ``code`` (stable, e.g. ``FX101``), ``name`` (kebab-case) and ``summary``
  (one line);
* its documentation as the class docstring, with the sections *What it
  does*, *Why is this bad?*, *Example*, *Use instead* and *Fix safety*;
  ``fixitem rule CODE`` prints it;
* ``graph_breaks``: the codes PyTorch's graph-break registry gives the breaks
  it finds (``GB0124``), see :mod:`~fixitem.codemods.graph_break_codes`;
* ``examples``: :class:`Valid` code it must leave alone and :class:`Invalid`
  code it must report (and, with ``fixed=``, rewrite to exactly that text).
  The test suite runs every example of every rule;
* ``check(ctx, claimed)``: yields :class:`Report` objects for one file.
"""

from __future__ import annotations

import ast
import enum
import inspect
import textwrap
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import ClassVar

from .gen import Replacement
from .graph_break_codes import describe
from .model.context import FileContext
from .model.syncs import SyncSite


class Safety(str, enum.Enum):
    SAFE = "safe"
    UNSAFE = "unsafe"
    NONE = "none"


@dataclass
class Fix:
    """Replace nodes of the file (an expression with the parentheses that belong to it; a
    statement by statements, :class:`~codemods.gen.Statements`, or nothing,
    :data:`~codemods.gen.REMOVE`); ``imports`` are the modules the new code needs."""

    replacements: dict[ast.AST, Replacement]
    safety: Safety = Safety.SAFE
    reason: str = ""  # why the fix is unsafe
    imports: tuple[str, ...] = ("torch",)


@dataclass
class Report:
    node: ast.AST
    message: str
    fix: Fix | None = None
    sites: list[SyncSite] = field(default_factory=list)
    note: str = ""  # why there is no fix, or what to do by hand


@dataclass(frozen=True)
class Valid:
    code: str


@dataclass(frozen=True)
class Invalid:
    code: str
    fixed: str | None = None  # None: report only, nothing rewritten
    unsafe: bool = False  # the fix needs --unsafe


class Rule:
    code: ClassVar[str]
    name: ClassVar[str]
    summary: ClassVar[str]
    graph_breaks: ClassVar[tuple[str, ...]] = ()
    examples: ClassVar[list[Valid | Invalid]] = []
    # Its fix can turn a Python value into a tensor (``total += loss.item()`` becoming a sum on
    # the device): what other code of the file reads may then be a tensor, and another pass of
    # ``apply`` may find other things to fix.
    fix_makes_tensors: ClassVar[bool] = False

    def check(self, ctx: FileContext, sites: list[SyncSite], claimed: set[SyncSite]) -> Iterator[Report]:
        raise NotImplementedError

    @classmethod
    def documentation(cls) -> str:
        doc = inspect.getdoc(cls) or ""
        breaks = f"\n\n{describe(cls.graph_breaks)}" if cls.graph_breaks else ""
        return f"# {cls.code} {cls.name}\n\n{cls.summary}\n\n{doc}{breaks}\n"


def unclaimed(sites: Iterable[SyncSite], claimed: set[SyncSite], *kinds: str) -> Iterator[SyncSite]:
    for site in sites:
        if site not in claimed and (not kinds or site.kind in kinds):
            yield site


def dedent(code: str) -> str:
    return textwrap.dedent(code).lstrip("\n")
