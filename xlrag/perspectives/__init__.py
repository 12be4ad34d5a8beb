"""The perspectives view: a question answered once per language of sources, side by side,
with the disagreements flagged (never one blended answer). See
:func:`xlrag.build_perspectives` (built on the agent's floor: the view answers each language
with the agent's graph, handed to it as a Runnable)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from xlrag._lazy import lazy_exports

__all__ = ["Perspective", "Perspectives", "PerspectivesInput", "to_html", "to_markdown"]

_LAZY = {
    "Perspective": "xlrag.perspectives.models",
    "Perspectives": "xlrag.perspectives.models",
    "PerspectivesInput": "xlrag.perspectives.models",
    "to_html": "xlrag.perspectives.render",
    "to_markdown": "xlrag.perspectives.render",
}

if TYPE_CHECKING:
    from xlrag.perspectives.models import Perspective, Perspectives, PerspectivesInput
    from xlrag.perspectives.render import to_html, to_markdown

__getattr__, __dir__ = lazy_exports(__name__, _LAZY, __all__)
