"""Attribution reranking (XOR-AttriQA §5.3): the passage that supports the answer is cited first.

After the answer is written, an AIS check (:class:`~xlrag.checks.attribution.AttributionChecker`)
asks of every shown passage whether it supports the answer. The first supporting passage,
taking the model's own citations first and then the retrieval order, becomes the top-cited
one: moved to the front when the model cited it, otherwise added first as an
``attribution`` citation (never passed off as the model's). When no passage supports the
answer the citations stay as they were, and a flag says so.
"""

from __future__ import annotations

from typing import Any

from xlrag.chains.postprocess import ATTRIBUTION_RERANK
from xlrag.schema import Citation, GroundedAnswer
from xlrag.steps import Call, Steps, arun, run

__all__ = ["AttributionReranker", "rerank_citations", "top_cited"]

RERANKED, KEPT, NONE = "attribution_reranked", "attribution_top_kept", "attribution_none"


def _cited(answer: GroundedAnswer) -> list[Citation]:
    return [c for c in answer.citations if c.valid and c.passage_id]


def top_cited(answer: GroundedAnswer) -> Citation | None:
    """The citation a reader sees first: the first valid one, whoever made it (the model,
    the vendor, the post-hoc aligner or the reranker)."""
    return next(iter(_cited(answer)), None)


def rerank_citations(answer: GroundedAnswer, supporting: set[str]) -> GroundedAnswer:
    """``answer`` with the first passage of ``supporting`` (ids) as its top citation, and a flag."""
    cited = _cited(answer)
    order = [c.passage_id for c in cited] + [h.id for h in answer.passages]
    top = next((pid for pid in order if pid in supporting), None)
    if top is None:
        return answer.model_copy(update={"flags": [*answer.flags, NONE]})
    if cited and cited[0].passage_id == top:
        return answer.model_copy(update={"flags": [*answer.flags, KEPT]})
    first = next((c for c in cited if c.passage_id == top), None)
    if first is None:
        marker, hit = next((i, h) for i, h in enumerate(answer.passages) if h.id == top)
        first = Citation(marker=marker, passage_id=hit.id, doc_id=hit.doc_id, lang=hit.lang, valid=True,
                         source="attribution")
    rest = [c for c in answer.citations if c is not first]
    return answer.model_copy(update={"citations": [first, *rest], "flags": [*answer.flags, RERANKED]})


class AttributionReranker:
    """An answer postprocessor (:class:`~xlrag.chains.postprocess.AnswerPostprocessor`), on with
    ``answer.attribution_rerank`` in the config. ``setting`` is the checker's (``in_language``
    or ``in_english``)."""

    name = ATTRIBUTION_RERANK

    def __init__(self, checker: Any, setting: str = "in_language"):
        self.checker, self.setting = checker, setting

    def _text(self, answer: GroundedAnswer) -> str:
        return answer.answer or answer.explanation or ""

    def rerank(self, answer: GroundedAnswer) -> GroundedAnswer:
        return run(self._rerank(answer))

    def _rerank(self, answer: GroundedAnswer) -> Steps[GroundedAnswer]:
        if not answer.passages or not self._text(answer):
            return answer
        args = (answer.question, self._text(answer), answer.passages, answer.lang or "en", self.setting)
        result = yield Call(self.checker.check, args, self.checker.acheck)
        return rerank_citations(answer, set(result.supporting))

    def process(self, answer: GroundedAnswer) -> GroundedAnswer:
        return self.rerank(answer)

    async def aprocess(self, answer: GroundedAnswer) -> GroundedAnswer:
        return await self.arerank(answer)

    async def arerank(self, answer: GroundedAnswer) -> GroundedAnswer:
        return await arun(self._rerank(answer))
