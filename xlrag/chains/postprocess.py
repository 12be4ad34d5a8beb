"""Answer postprocessors: steps after the parse, in a list, as LlamaIndex's node
postprocessors follow a retriever. Each takes a GroundedAnswer and returns one.

- :class:`PostHocCitations`: when the model cited nothing, the shown passages closest to
  the answer by embedding similarity, marked ``post_hoc`` (never passed off as the model's);
  in the agent, the last repair rather than a postprocessor;
- :class:`~xlrag.chains.attribution_rerank.AttributionReranker` (XOR-AttriQA): the passage
  an LLM finds supports the answer is cited first.

A new postprocessor is a class with ``name``, ``process`` and ``aprocess``; add it in
:meth:`xlrag.chains.pipeline.Pipeline.create` (or pass ``postprocessors=``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

from xlrag.chains.grounding import PostHocCiter
from xlrag.chains.parsing import strip_markers
from xlrag.errors import ConfigError
from xlrag.formats import AnswerFormat
from xlrag.indexes.postprocess import PassagePostprocessor
from xlrag.schema import Citation, GroundedAnswer

__all__ = ["ATTRIBUTION_RERANK", "POST_HOC", "AnswerPostprocessor", "PostHocCitations", "Postprocessor",
           "checked_postprocessors"]

POST_HOC = "post_hoc_citations"
ATTRIBUTION_RERANK = "attribution_rerank"


@runtime_checkable
class AnswerPostprocessor(Protocol):
    """One step after the parse; ``aprocess`` awaits what is worth awaiting (an LLM call)."""

    name: str

    def process(self, answer: GroundedAnswer) -> GroundedAnswer: ...

    async def aprocess(self, answer: GroundedAnswer) -> GroundedAnswer: ...


class PostHocCitations:
    """Citations by embedding similarity for an answer whose model cited no shown passage."""

    name = POST_HOC

    def __init__(self, citer: PostHocCiter):
        self.citer = citer

    def cite(self, answer: GroundedAnswer, keep: list[Citation]) -> GroundedAnswer:
        """``answer`` with ``keep`` and the post-hoc citations of what it says."""
        claim = " ".join(x for x in (answer.answer, strip_markers(answer.explanation or "")) if x)
        post = self.citer.cite(claim, answer.passages) if claim else []
        flags = [*answer.flags, POST_HOC] if post else list(answer.flags)
        return answer.model_copy(update={"citations": [*keep, *post], "flags": flags})

    def process(self, answer: GroundedAnswer) -> GroundedAnswer:
        if not answer.passages or answer.format is AnswerFormat.MC or any(c.valid for c in answer.citations):
            return answer
        return self.cite(answer, list(answer.citations))

    async def aprocess(self, answer: GroundedAnswer) -> GroundedAnswer:
        # it embeds sentences: off the event loop
        return await asyncio.to_thread(self.process, answer)


# what a pipeline's one list of postprocessors holds: each kind runs at its stage
Postprocessor = PassagePostprocessor | AnswerPostprocessor


def checked_postprocessors(steps: Sequence[Any]) -> list[Postprocessor]:
    """``steps`` if each is one of the two kinds, else the one that is not, named."""
    for i, step in enumerate(steps):
        if not isinstance(step, (PassagePostprocessor, AnswerPostprocessor)):
            raise ConfigError(f"postprocessors[{i}] is a {type(step).__name__}: give passage postprocessors "
                              f"(name, chooses, postprocess(hits, query, k)) or answer postprocessors "
                              f"(name, process(answer), aprocess(answer))")
    return list(steps)
