"""<docN> document markers: the grammar and every reading of it are owned by
:mod:`xlrag.formats`; this module keeps the public names importable where they were."""

from __future__ import annotations

from xlrag.formats import MARKER_RE as _MARKER_RE  # noqa: F401  (tests: the parser reads formats' grammar)
from xlrag.formats import find_markers, normalize_markers, strip_markers

__all__ = ["find_markers", "normalize_markers", "strip_markers"]
