"""Which IR mode the agent uses for a question, and why: a pure plan, testable without vectors.

``agent.mode`` names a mode, or ``auto``. In ``auto``, the configured rules are read in
order: the first rule whose name appears in the question sends it to ``rel_langs`` over
that rule's languages (a question about Crimea is best answered from Ukrainian and
Russian sources as well as the user's own). No rule: ``agent.default_mode``. A caller who
passes ``relevant_langs`` has already made the choice. The reason is kept for the trace.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from xlrag.config import AgentConfig, AgentRule
from xlrag.modes import AUTO, IRMode, Mode

__all__ = ["ModeChoice", "choose_mode"]


class ModeChoice(BaseModel):
    model_config = ConfigDict(frozen=True)

    mode: Mode
    reason: str
    relevant_langs: list[str] | None = None


def choose_mode(question: str, config: AgentConfig, *, requested: str | None = None,
                relevant_langs: list[str] | None = None) -> ModeChoice:
    """The mode for ``question``; ``requested`` (a per-call mode) beats the configuration."""
    mode = requested or config.mode
    if mode != AUTO:
        why = "requested for this question" if requested else "configured (agent.mode)"
        return ModeChoice(mode=mode, reason=why, relevant_langs=relevant_langs)
    if relevant_langs:
        return ModeChoice(mode=IRMode.REL_LANGS, reason=f"the caller named the relevant languages {relevant_langs}",
                          relevant_langs=relevant_langs)
    found = AgentRule.first_named(question, config.rules)
    if found is not None:
        rule, hit = found
        return ModeChoice(mode=IRMode.REL_LANGS, reason=f"the question names {hit!r}, whose relevant languages are "
                          f"{', '.join(rule.relevant_langs)} (agent.rules)", relevant_langs=list(rule.relevant_langs))
    return ModeChoice(mode=config.default_mode,
                      reason=f"no agent rule matched the question; default mode {config.default_mode}")
