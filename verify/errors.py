"""Errors of the verify stage: fixitem's one :class:`~fixitem.errors.UsageError` (re-exported)."""

from __future__ import annotations

from fixitem.errors import UsageError

__all__ = ["UsageError"]
