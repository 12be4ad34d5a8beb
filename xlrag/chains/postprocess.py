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
from typing import Protocol, runtime_checkable

from xlrag.chains.grounding import PostHocCiter
from xlrag.chains.parsing import strip_markers
from xlrag.formats import AnswerFormat
from xlrag.schema import Citation, GroundedAnswer

__all__ = ["ATTRIBUTION_RERANK", "POST_HOC", "AnswerPostprocessor", "PostHocCitations"]

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
