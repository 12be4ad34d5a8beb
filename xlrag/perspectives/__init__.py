"""The perspectives view: a question answered once per language of sources, side by side,
with the disagreements flagged (never one blended answer). See
:func:`xlrag.build_perspectives` (built on the agent's floor: the view answers each language
with the agent's graph, handed to it as a Runnable)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from xlrag._lazy import lazy_exports, moved

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

_lazy, __dir__ = lazy_exports(__name__, _LAZY, __all__)
# build_perspectives moved up to the agent's floor (it builds the graph the view answers with)
_moved = moved(__name__, {"build_perspectives": "xlrag.agents.build"})


def __getattr__(name: str) -> Any:
    return _moved(name) if name == "build_perspectives" else _lazy(name)
