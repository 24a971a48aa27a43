"""Which tensor operations reduce: a fact of torch's API that the analysis of
values (provenance) and of effects both need, so it lives below both."""

from __future__ import annotations

# Called without a ``dim`` (``x.sum()``, ``torch.mean(x)``) these reduce every
# element to one 0-dim tensor; with a ``dim`` they shrink the shape. ``dot``,
# ``vdot`` and ``trace`` always give a 0-dim tensor.
REDUCTIONS = frozenset(
    {
        "sum", "mean", "max", "min", "amax", "amin", "prod", "norm", "std", "var", "all", "any",
        "count_nonzero", "nansum", "nanmean", "median", "nanmedian", "trace", "dot", "vdot",
        "argmax", "argmin",
    }
)
