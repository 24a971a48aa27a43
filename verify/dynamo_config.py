"""``fixitem verify --config FLAGS``: check code under the Dynamo configuration a finding names.

FX601, FX006 and FX602 remove graph breaks by configuration
(``capture_scalar_outputs``, ``capture_dynamic_output_shape_ops``): the code does
not change, the way it is compiled does. So verify compiles the after version
under those flags (counting its graph breaks, compiling it with
``fullgraph=False`` as the program runs it, and comparing the compiled outputs and
gradients with the eager before version), beside the counts without them, and
says which break sites the configuration removed. The configuration removes graph
breaks, never host syncs: the syncs per eager call are reported as they are, and
a remaining sync fails the check only where the after version makes more than the
before one.

Dynamo reads its configuration when it traces (when the compiled code is first
called), so everything that compiles or runs compiled code runs under
:func:`patched`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator, Sequence

from .errors import UsageError

#: The flags that have an environment variable (what ``verify --run --config`` sets for the after run).
ENVIRONMENT = {
    "capture_scalar_outputs": "TORCHDYNAMO_CAPTURE_SCALAR_OUTPUTS",
    "capture_dynamic_output_shape_ops": "TORCHDYNAMO_CAPTURE_DYNAMIC_OUTPUT_SHAPE_OPS",
}


def parse_config(values: Iterable[str] | None) -> tuple[str, ...]:
    """``["capture_scalar_outputs,capture_dynamic_output_shape_ops"]`` (comma-separated, repeatable)
    as flag names, in order, once each; an unknown name, or one that is not a boolean of
    ``torch._dynamo.config``, is a usage error."""
    flags: list[str] = []
    for value in values or ():
        for name in value.split(","):
            name = name.strip()
            if name.startswith("torch._dynamo.config."):
                name = name[len("torch._dynamo.config."):]
            if name and name not in flags:
                flags.append(name)
    if not flags:
        return ()
    import torch._dynamo.config as config

    for name in flags:
        if not hasattr(config, name) or not isinstance(getattr(config, name), bool):
            known = ", ".join(sorted(ENVIRONMENT))
            raise UsageError(f"--config: {name!r} is not a boolean setting of torch._dynamo.config "
                             f"(the ones fixitem advises: {known})")
    return tuple(flags)


def environment(flags: Sequence[str]) -> dict[str, str]:
    """The environment that turns ``flags`` on in a process that imports torch (``--run``); a flag
    without an environment variable is a usage error there."""
    missing = [f for f in flags if f not in ENVIRONMENT]
    if missing:
        raise UsageError(f"--config with --run sets the configuration through the environment, which only "
                         f"{', '.join(sorted(ENVIRONMENT))} have; not {', '.join(missing)}")
    return {ENVIRONMENT[f]: "1" for f in flags}


@contextlib.contextmanager
def patched(flags: Sequence[str]) -> Iterator[None]:
    """Turn ``flags`` on for the block (nothing to do for none)."""
    if not flags:
        yield
        return
    import torch._dynamo.config as config

    with config.patch(**{f: True for f in flags}):
        yield


def describe(flags: Sequence[str]) -> str:
    return ", ".join(flags)
