"""BorderLines territories and query sets: owned by :mod:`xlrag.borderlines` (data, which the
perspectives view reads too); the names stay importable here for the studies and notebooks."""

from __future__ import annotations

from xlrag.borderlines import (  # noqa: F401  (EXCERPT: read by tests and benchmarks from here)
    EXCERPT,
    PASSAGES,
    UNKNOWN,
    MCQuery,
    Territory,
    load_territories,
    read_upstream,
)

__all__ = ["PASSAGES", "UNKNOWN", "MCQuery", "Territory", "load_territories", "read_upstream"]
