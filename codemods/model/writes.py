"""Which calls write their receiver or an argument in place: facts about names, asked by
the effects of calls and by where a tensor is written (:mod:`.aliasing`)."""

from __future__ import annotations

# Tensor methods that write to a tensor without a trailing underscore.
WRITING_TENSOR_METHODS = frozenset({"backward", "record_stream", "share_memory_", "copy_", "set_"})
# Keyword arguments through which a torch function writes into a given tensor.
WRITING_KEYWORDS = frozenset({"out", "inplace"})
# Methods of Python containers and strings that change their receiver.
CONTAINER_WRITES = frozenset(
    {"append", "extend", "add", "update", "insert", "setdefault", "pop", "popleft", "appendleft",
     "remove", "discard", "clear", "sort", "reverse"}
)
# Methods of Python containers and strings that only read.
CONTAINER_READS = frozenset(
    {"get", "count", "index", "items", "keys", "values", "copy", "format", "join", "lower", "upper",
     "strip", "rstrip", "lstrip", "split", "startswith", "endswith", "replace", "is_integer", "conjugate"}
)


def writes_in_place(name: str) -> bool:
    """``add_``, ``clamp_``: torch's convention for operations that write their input."""
    return name.endswith("_") and not name.endswith("__")
