"""Prove that a rewrite removed graph breaks and host syncs and kept the numbers.

Python API::

    from fixitem.verify import run_verify
    report = run_verify("model.py", before="model_orig.py", factory="make", backend="eager")
    report.passed, report.failures, report.to_json()

The command-line layer is :func:`fixitem.verify.command.verify_command`.
"""

import importlib

if __name__ != "fixitem.verify":  # imported by its folder name from the repository root
    from fixitem._one_copy import alias_package

    alias_package(__name__, "fixitem.verify")

# Names are imported on first use: ``fixitem --help`` and ``fixitem scan``
# must not pay for importing torch.
_WHERE = {
    "BACKENDS": "api", "run_verify": "api",
    "BreakReport": "breaks", "GraphBreak": "breaks", "count_graph_breaks": "breaks",
    "ConditionRecorder": "conditions", "ConditionSite": "conditions",
    "GitError": "git", "read_at_ref": "git",
    "UsageError": "errors",
    "InputResult": "report", "VerifyReport": "report", "VersionReport": "report", "render_text": "report",
    "GraphSync": "syncs", "InspectingBackend": "syncs", "SyncCounter": "syncs",
    "count_host_syncs": "syncs", "find_graph_syncs": "syncs",
}


def __getattr__(name: str):
    if name in _WHERE:
        return getattr(importlib.import_module(f".{_WHERE[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "BACKENDS",
    "BreakReport",
    "ConditionRecorder",
    "ConditionSite",
    "GitError",
    "GraphBreak",
    "GraphSync",
    "InputResult",
    "InspectingBackend",
    "SyncCounter",
    "UsageError",
    "VerifyReport",
    "VersionReport",
    "count_graph_breaks",
    "count_host_syncs",
    "find_graph_syncs",
    "read_at_ref",
    "render_text",
    "run_verify",
]
