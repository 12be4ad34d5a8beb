"""The agent (verify and repair) and chat over the corpus, as LangGraph graphs."""

from __future__ import annotations

from typing import TYPE_CHECKING

from xlrag._lazy import lazy_exports

__all__ = ["AgentInput", "AgentOutput", "Repair", "Trace", "build_agent", "choose_mode", "plan_repair"]

_LAZY = {
    "AgentInput": "xlrag.agents.graph",
    "AgentOutput": "xlrag.agents.graph",
    "Repair": "xlrag.trace",
    "Trace": "xlrag.trace",
    "build_agent": "xlrag.agents.build",
    "choose_mode": "xlrag.agents.routing",
    "plan_repair": "xlrag.agents.repair",
}

if TYPE_CHECKING:
    from xlrag.agents.build import build_agent
    from xlrag.agents.graph import AgentInput, AgentOutput
    from xlrag.agents.repair import plan_repair
    from xlrag.agents.routing import choose_mode
    from xlrag.trace import Repair, Trace

__getattr__, __dir__ = lazy_exports(__name__, _LAZY, __all__)
