"""What an ask may spend on checking and repairing its answer, and what it has spent.

The first answer is the ask's own cost; what comes after it (the support check's translations,
the attribution check, every repair) is the agent's, and shares one budget:
``agent.budget_seconds`` (wall clock: what a user waits) and ``agent.budget_tokens`` (what the
LLM reads and writes, as it reports it: the same bound on any machine, where seconds depend on
its load; on a loaded 2-core machine one English XQuAD question was still repairing after 17
minutes of CPU). Both are checked before each model call the agent would make; a call already
running finishes (``llm.max_tokens`` bounds it). Once either is spent, no model is called again:
the best answer so far is shown, flagged ``over_budget``, and the trace says what was stopped.

Tokens are counted by a LangChain callback handler that every LLM call made while it is set
reports to (``register_configure_hook``, the mechanism of LangChain's own
``get_usage_metadata_callback``), so the translator's and the attribution checker's calls count
too, though they are not handed the node's config.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.tracers.context import register_configure_hook

from xlrag.config import AgentConfig
from xlrag.trace import Timing

__all__ = ["OVER_BUDGET", "Tally", "over_budget", "spent", "tallying"]

OVER_BUDGET = "over_budget"  # the answer's flag when the budget stopped a check or a repair


class Tally(BaseCallbackHandler):
    """The tokens of every LLM call that ends while it is set (:func:`tallying`)."""

    def __init__(self) -> None:
        super().__init__()
        self._lock = threading.Lock()
        self.tokens = 0

    def on_llm_end(self, response: Any, **kwargs: Any) -> None:
        used = 0
        for generations in response.generations:
            for g in generations:
                usage = getattr(getattr(g, "message", None), "usage_metadata", None) or {}
                used += int(usage.get("input_tokens") or 0) + int(usage.get("output_tokens") or 0)
        if not used:  # a completion model reports in llm_output, as OpenAI's API does
            usage = (response.llm_output or {}).get("token_usage") or {}
            used = int(usage.get("prompt_tokens") or 0) + int(usage.get("completion_tokens") or 0)
        with self._lock:
            self.tokens += used


_TALLY: ContextVar[Tally | None] = ContextVar("xlrag_agent_tally", default=None)
register_configure_hook(_TALLY, inheritable=True)


@contextmanager
def tallying() -> Iterator[Tally]:
    """A :class:`Tally` every LLM call made in this context (threads started from it included)
    reports to."""
    tally = Tally()
    token = _TALLY.set(tally)
    try:
        yield tally
    finally:
        _TALLY.reset(token)


def spent(timings: Iterable[Timing]) -> tuple[float, int]:
    """Seconds and tokens the steps after the first answer took."""
    covered = [t for t in timings if t.step == "verify" or t.step.startswith("repair:")]
    return sum(t.seconds for t in covered), sum(t.tokens or 0 for t in covered)


def over_budget(config: AgentConfig, seconds: float, tokens: int) -> str | None:
    """Why no model may be called again (a sentence), or None while the budget lasts."""
    if config.budget_seconds is not None and seconds >= config.budget_seconds:
        return f"{seconds:.1f} s of agent.budget_seconds={config.budget_seconds:g} spent"
    if config.budget_tokens is not None and tokens >= config.budget_tokens:
        return f"{tokens} tokens of agent.budget_tokens={config.budget_tokens} spent"
    return None
