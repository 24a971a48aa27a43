"""Prove that a rewrite removed graph breaks and host syncs and kept the numbers.

Python API::

    from fixitem.verify import run_verify
    report = run_verify("model.py", before="model_orig.py", factory="make", backend="eager")
    report.passed, report.failures, report.to_json()

The command-line layer is :func:`fixitem.verify.command.verify_command`.
"""

from .api import BACKENDS, run_verify
from .breaks import BreakReport, GraphBreak, count_graph_breaks
from .conditions import ConditionRecorder, ConditionSite
from .git import GitError, read_at_ref
from .loading import UsageError
from .report import InputResult, VerifyReport, VersionReport, render_text
from .syncs import GraphSync, InspectingBackend, SyncCounter, count_host_syncs, find_graph_syncs

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
