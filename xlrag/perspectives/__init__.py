"""The perspectives view: a question answered once per language of sources, side by side,
with the disagreements flagged (never one blended answer). See
:func:`~xlrag.perspectives.view.build_perspectives`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from xlrag._lazy import lazy_exports

__all__ = ["Perspective", "Perspectives", "PerspectivesInput", "build_perspectives", "to_html", "to_markdown"]

_LAZY = {
    "Perspective": "xlrag.perspectives.models",
    "Perspectives": "xlrag.perspectives.models",
    "PerspectivesInput": "xlrag.perspectives.models",
    "build_perspectives": "xlrag.perspectives.view",
    "to_html": "xlrag.perspectives.render",
    "to_markdown": "xlrag.perspectives.render",
}

if TYPE_CHECKING:
    from xlrag.perspectives.models import Perspective, Perspectives, PerspectivesInput
    from xlrag.perspectives.render import to_html, to_markdown
    from xlrag.perspectives.view import build_perspectives

__getattr__, __dir__ = lazy_exports(__name__, _LAZY, __all__)
