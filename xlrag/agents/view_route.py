"""The agent's route to the perspectives view: a caller asks for perspectives (``view:
"perspectives"``), and the question is contested (an agent rule or a disputed territory names
its entity, or the caller named the relevant languages). Otherwise the agent answers as
always, and its trace says why no perspectives were made.

The agent's output on this route keeps its shape (``answer``, ``trace``) and adds
``perspectives``. Its ``answer`` is never a blend: the consensus answer as one perspective
gave it, when every perspective agrees, else an empty answer flagged with the status.

The route is the agent's (it was ``xlrag.perspectives.route``): the view stands below the agent
and takes the agent's graph as the Runnable that answers each language."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from xlrag.borderlines import Territory
from xlrag.config import AgentRule
from xlrag.formats import AnswerFormat
from xlrag.perspectives.langs import contested
from xlrag.perspectives.models import Perspectives
from xlrag.schema import GroundedAnswer
from xlrag.trace import Timing, Trace

__all__ = ["NODE", "PERSPECTIVES", "View", "agent_result", "view_input", "why_contested"]

View = Literal["answer", "perspectives"]
PERSPECTIVES = "perspectives"  # the view's value and the trace's mode
NODE = "compare_perspectives"  # the agent's node (not "perspectives": that is a key of its state)


def why_contested(question: str, relevant_langs: Sequence[str] | None, rules: Sequence[AgentRule],
                  territories: Sequence[Territory]) -> str | None:
    """Why the question has perspectives to compare, or None when nothing names it contested."""
    if relevant_langs:
        return f"the caller named the relevant languages {list(relevant_langs)}"
    found = contested(question, rules, territories)
    return found[2] if found is not None else None


def view_input(question: str, lang: str | None, relevant_langs: Sequence[str] | None) -> dict[str, Any]:
    """The view's input: the caller's relevant languages after the question's own, when given
    (else the view finds the rule's or territory's languages itself)."""
    if not relevant_langs:
        return {"question": question, "lang": lang}
    return {"question": question, "lang": lang,
            "relevant_langs": list(dict.fromkeys([x for x in (lang, *relevant_langs) if x]))}


def agent_result(view: Perspectives, model: str, reason: str, seconds: float) -> dict[str, Any]:
    """The agent's output for a question answered by the perspectives view."""
    if view.status == "consensus":
        chosen = view.perspective(view.consensus[0].chosen.lang).answer
        assert chosen is not None  # noqa: S101  (a consensus is of answered perspectives)
        answer = chosen.model_copy(update={"flags": [*chosen.flags, "perspectives_consensus"]})
    else:
        answer = GroundedAnswer(question=view.question, lang=view.lang, format=AnswerFormat.CITATION,
                                mode=PERSPECTIVES, model=model, answer=None,
                                explanation=view.note, flags=[f"perspectives_{view.status}"])
    retrieved = {p.lang: len(p.answer.passages) for p in view.perspectives if p.answer is not None}
    trace = Trace(question=view.question, lang=view.lang, mode=PERSPECTIVES,
                  mode_reason=f"perspectives asked for, and {reason}: {len(view.perspectives)} languages "
                              f"({view.choice.reason}) answered and compared, {view.status}",
                  retrieved_langs=retrieved, checks=[], repairs=[],
                  timings=[Timing(step=PERSPECTIVES, seconds=seconds)])
    return {"answer": answer, "trace": trace, "perspectives": view}
