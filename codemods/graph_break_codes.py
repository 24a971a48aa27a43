"""PyTorch's own names for the graph breaks that fixitem's rules find (Dynamo's graph-break registry).

Dynamo names every kind of graph break with a code (``GB0124`` for
``Tensor.item()`` with ``capture_scalar_outputs=False``) and prints a link to
its page in the break message (``TORCH_LOGS=graph_breaks``). Each rule lists
the codes of the breaks it finds in ``graph_breaks``; the rule documentation,
``scan --format json`` and SARIF carry them, so a user who sees a break in
torch's log finds the fixitem rule, and the other way round.

The titles are those of torch 2.13's registry
(``torch/_dynamo/graph_break_registry.json``); a test checks them against the
installed torch. Each code was seen in the break Dynamo reports for the
pattern the rule names (``backend="eager"``, torch 2.13).
"""

from __future__ import annotations

SITE = "https://meta-pytorch.github.io/compile-graph-break-site/gb/{}.html"

TITLES = {
    "GB0007": "Attempted to call function marked as skipped",
    "GB0033": "Data dependent operator",
    "GB0036": "Dynamic shape operator",
    "GB0059": "Failed to trace builtin operator",
    "GB0109": "Tensor.tolist() with non-integer tensor",
    "GB0124": "Unsupported Tensor.item() call with capture_scalar_outputs=False",
    "GB0170": "Data-dependent branching",
    "GB0291": "logging.Logger method not supported for non-export cases",
}


def url(code: str) -> str:
    """The page of ``code`` on PyTorch's graph-break site (the link Dynamo prints)."""
    return SITE.format(code.lower())


def describe(codes: tuple[str, ...]) -> str:
    """A documentation section naming each code, its title and its page."""
    lines = ["## Graph breaks (PyTorch's codes)"]
    for code in codes:
        lines.append(f"- {code} \"{TITLES[code]}\": {url(code)}")
    return "\n".join(lines)
