"""Moved to :mod:`xlrag.trace` (the record stands below the agent that writes it, so the
perspectives view and the server read it without the agent). The names resolve here, with a
warning naming the new place, for one release."""

from __future__ import annotations

from xlrag._lazy import moved

__getattr__ = moved(__name__, dict.fromkeys(
    ["CHECKS", "CheckResult", "Repair", "RepairStep", "Spent", "Timing", "ToolStep", "Trace"], "xlrag.trace"))
