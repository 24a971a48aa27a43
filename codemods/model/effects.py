"""What a call does besides computing its value: one definition for every rule.

Three notions that several rules need, each defined once here:

* **effects**: :class:`Effect` says what evaluating a call can do to the rest
  of the program. A rewrite that evaluates a call where the original did not
  (both branches of ``torch.where``) or at another time (one ``.tolist()``
  before a loop instead of one read per element) needs to know it.
  :func:`call_effect` answers it for one call, with the reason in words.
* **pure builtins**: :data:`BUILTIN_EFFECTS` gives the effect of each Python
  builtin that fixitem knows; :data:`PURE_BUILTINS` are the ones with no
  effect at all, :data:`TENSOR_SAFE_BUILTINS` the ones that may write text
  but never run user code on their arguments nor write to a tensor.

Which tensor operations reduce (``REDUCTIONS``) is a fact of torch's API, kept in
:mod:`fixitem.codemods.model.reductions` below this module and provenance.
"""

from __future__ import annotations

import ast
import enum
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING

from .provenance import Kind, dotted_name, is_module_class, module_class_of
from .writes import (
    CONTAINER_READS,
    CONTAINER_WRITES,
    WRITING_KEYWORDS,
    WRITING_TENSOR_METHODS,
    writes_in_place,
)

if TYPE_CHECKING:
    from .context import FileContext


class Effect(enum.Enum):
    """What evaluating a call can do besides computing its value (mildest first)."""

    NONE = "none"  # nothing: evaluating it twice, once or never cannot be observed
    OUTPUT = "output"  # writes text (print, logging); touches no value the program reads
    RANDOM = "random"  # draws from a random stream: a second evaluation changes later draws
    STATE = "state"  # updates hidden state (BatchNorm running statistics, an RNN's flattened weights)
    WRITES = "writes"  # writes to a tensor or a container it is given (in-place op, ``out=``, ``list.append``)
    UNKNOWN = "unknown"  # runs code fixitem cannot see (a local function, a module of this file)

    @property
    def pure(self) -> bool:
        return self is Effect.NONE

    @property
    def writes_no_tensor(self) -> bool:
        """Can a tensor read before and after the call differ? Not for these effects."""
        return self in (Effect.NONE, Effect.OUTPUT, Effect.RANDOM)


# -- pure builtins -----------------------------------------------------------------------------

_BUILTINS: dict[str, Effect] = {
    name: Effect.NONE
    for name in (
        "abs", "round", "min", "max", "sum", "len", "float", "int", "bool", "str", "repr", "format",
        "list", "tuple", "dict", "set", "frozenset", "sorted", "reversed", "enumerate", "zip", "range",
        "isinstance", "issubclass", "divmod", "pow", "any", "all", "chr", "ord", "hex", "oct", "bin",
        "hash", "id", "type", "complex", "slice", "callable", "hasattr", "ascii",
    )
}
_BUILTINS.update({"print": Effect.OUTPUT, "input": Effect.UNKNOWN, "open": Effect.UNKNOWN,
                  "exec": Effect.UNKNOWN, "eval": Effect.UNKNOWN, "setattr": Effect.WRITES,
                  "delattr": Effect.WRITES, "next": Effect.WRITES, "iter": Effect.NONE,
                  "getattr": Effect.UNKNOWN, "vars": Effect.NONE, "globals": Effect.NONE})
# The effect of each builtin fixitem knows (by its unshadowed name). ``str``,
# ``format`` and ``sorted`` call ``__str__`` / ``__lt__`` of their arguments:
# for numbers, strings, tensors and containers of them that is pure.
BUILTIN_EFFECTS: Mapping[str, Effect] = MappingProxyType(_BUILTINS)
# Builtins with no effect at all: safe to evaluate where the original did not.
PURE_BUILTINS = frozenset(name for name, effect in _BUILTINS.items() if effect is Effect.NONE)
# Builtins that write no tensor and run no user code (``print`` included):
# safe between two reads of the same tensor.
TENSOR_SAFE_BUILTINS = frozenset(name for name, effect in _BUILTINS.items() if effect.writes_no_tensor)

# -- reductions --------------------------------------------------------------------------------

# -- randomness and state ----------------------------------------------------------------------

RANDOM_FUNCTIONS = frozenset(
    {
        "rand", "randn", "randint", "randperm", "rand_like", "randn_like", "randint_like",
        "bernoulli", "multinomial", "normal", "poisson", "dropout", "dropout1d", "dropout2d",
        "dropout3d", "alpha_dropout", "feature_alpha_dropout", "rrelu", "gumbel_softmax",
        "native_dropout", "uniform", "exponential", "geometric", "cauchy", "log_normal",
    }
)
RANDOM_MODULES = frozenset({"Dropout", "Dropout1d", "Dropout2d", "Dropout3d", "AlphaDropout", "FeatureAlphaDropout", "RReLU"})
STATEFUL_MODULES = frozenset(
    {
        "BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "SyncBatchNorm", "LazyBatchNorm1d",
        "LazyBatchNorm2d", "LazyBatchNorm3d", "InstanceNorm1d", "InstanceNorm2d", "InstanceNorm3d",
        "LSTM", "GRU", "RNN",  # flatten_parameters and hidden state handling
    }
)

# Which calls write their receiver or an argument: :mod:`.writes`.


@dataclass(frozen=True)
class CallEffect:
    effect: Effect
    reason: str = ""  # in words, for a finding's note; empty when the effect is NONE

    @property
    def pure(self) -> bool:
        return self.effect is Effect.NONE


def call_effect(ctx: FileContext, call: ast.Call) -> CallEffect:
    """What evaluating ``call`` can do besides computing its value, and why."""

    code = ctx.code(call)
    func = call.func
    if any(k.arg is not None and k.arg in WRITING_KEYWORDS and not _false(k.value) for k in call.keywords):
        return CallEffect(Effect.WRITES, f"`{code}` writes into a tensor it is given")
    if type(func) is ast.Name and func.id in BUILTIN_EFFECTS and not _shadowed(ctx, func):
        effect = BUILTIN_EFFECTS[func.id]
        return CallEffect(effect, "" if effect.pure else _describe(effect, code))
    qualified = ctx.provenance.imports.qualify(func) or ""
    if qualified.startswith("math."):
        return CallEffect(Effect.NONE)
    if _writes_output(ctx, call):
        return CallEffect(Effect.OUTPUT, f"`{code}` writes output")
    name = qualified.rsplit(".", 1)[-1]
    if qualified.startswith("torch.") and is_module_class(qualified, set()):
        return CallEffect(Effect.NONE)  # building a module: a new object, nothing else
    if qualified.startswith("torch."):
        if name in RANDOM_FUNCTIONS:
            return CallEffect(Effect.RANDOM, f"`{code}` draws random numbers")
        if writes_in_place(name):
            return CallEffect(Effect.WRITES, f"`{code}` modifies a tensor in place")
        return CallEffect(Effect.NONE)
    if type(func) is ast.Attribute:
        method = func.attr
        receiver = ctx.kind(func.value)
        if receiver is Kind.TENSOR:
            if writes_in_place(method) or method in WRITING_TENSOR_METHODS:
                return CallEffect(Effect.WRITES, f"`{code}` modifies a tensor in place")
            if method in RANDOM_FUNCTIONS:
                return CallEffect(Effect.RANDOM, f"`{code}` draws random numbers")
            return CallEffect(Effect.NONE)
        if receiver is Kind.MODULE:
            return _module_effect(ctx, call)
        if receiver in (Kind.OTHER, Kind.NUMBER, Kind.UNKNOWN) and method in CONTAINER_READS:
            return CallEffect(Effect.NONE)
        if receiver is Kind.OTHER and method in CONTAINER_WRITES:
            return CallEffect(Effect.WRITES, f"`{code}` changes `{ctx.code(func.value)}`")
    if ctx.kind(func) is Kind.MODULE:
        return _module_effect(ctx, call)
    target = dotted_name(func) or code
    return CallEffect(Effect.UNKNOWN, f"`{code}` calls `{target}`, which fixitem cannot prove free of side effects")


def _module_effect(ctx: FileContext, call: ast.Call) -> CallEffect:

    code = ctx.code(call)
    func = call.func.value if type(call.func) is ast.Attribute and call.func.attr in ("forward", "__call__") else call.func
    module_class = module_class_of(ctx.provenance, func)
    short = (module_class or ctx.code(func)).split(".")[-1]
    if short in RANDOM_MODULES:
        return CallEffect(Effect.RANDOM, f"`{code}` applies dropout: random in training")
    if short in STATEFUL_MODULES:
        return CallEffect(Effect.STATE, f"`{code}` updates running statistics in training")
    if module_class is not None and module_class.startswith("torch.nn."):
        return CallEffect(Effect.NONE)
    return CallEffect(Effect.UNKNOWN, f"`{code}` calls module `{short}`, whose forward fixitem has not checked for side effects")


def _writes_output(ctx: FileContext, call: ast.Call) -> bool:
    """``print``, ``logging.info(...)``, ``logger.warning(...)``, ``warnings.warn(...)``: the one definition."""
    from .output_calls import output_call  # noqa: PLC0415

    return output_call(ctx, call) is not None


def _describe(effect: Effect, code: str) -> str:
    return {
        Effect.OUTPUT: f"`{code}` writes output",
        Effect.RANDOM: f"`{code}` draws random numbers",
        Effect.STATE: f"`{code}` updates hidden state",
        Effect.WRITES: f"`{code}` changes an object it is given",
        Effect.UNKNOWN: f"`{code}` runs code fixitem cannot see",
    }.get(effect, "")


def _false(value: ast.expr) -> bool:
    return type(value) is ast.Constant and (value.value is False or value.value is None)  # type: ignore[attr-defined]


def _shadowed(ctx: FileContext, name: ast.Name) -> bool:
    """Is the builtin's name rebound in the file (``def print(...)``, ``sum = 0``)?"""
    return ctx.provenance.scope_of(name).lookup(name.id) is not None
