"""The cross-lingual retriever as a LangChain ``BaseRetriever`` (a Runnable)."""

from __future__ import annotations

from typing import Any

from langchain_core.callbacks import (
    AsyncCallbackManagerForRetrieverRun,
    CallbackManagerForRetrieverRun,
)
from langchain_core.documents import Document as LCDocument
from langchain_core.retrievers import BaseRetriever
from pydantic import ConfigDict, Field

from xlrag.schema import Hit
from xlrag.validate import check_k, strict_kwargs

__all__ = ["XlragLangChainRetriever", "hit_to_document"]


def hit_to_document(hit: Hit) -> LCDocument:
    return LCDocument(
        id=hit.id,
        page_content=hit.passage.text,
        metadata={
            "id": hit.id,
            "doc_id": hit.doc_id,
            "lang": hit.lang,
            "store": hit.store,
            "policy": hit.policy,
            "rank": hit.rank,
            "score": hit.score,
            "raw_score": hit.raw_score,
            "title": hit.passage.title,
        },
    )


class XlragLangChainRetriever(BaseRetriever):
    """``invoke("question")`` → ``list[Document]``; works in any LCEL chain.

    The fields set defaults; each call may override them:
    ``invoke("question", k=1, mode="balanced", relevant_langs=["es"])``.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True, extra="forbid")

    retriever: Any = Field(description="an xlrag CrossLingualRetriever")
    mode: str | None = None
    k: int | None = None
    lang: str | None = None
    relevant_langs: list[str] | None = None
    target_lang: str | None = None

    def __init__(self, **data: Any):
        # Checked before pydantic, so a bad k is xlrag's one-line error, not a validation dump.
        check_k(data.get("k"))
        super().__init__(**data)

    def _args(self, k: int | None, mode: str | None, lang: str | None, relevant_langs: list[str] | None,
              target_lang: str | None) -> dict[str, Any]:
        return {"k": check_k(k) or self.k, "mode": mode or self.mode, "lang": lang or self.lang,
                "relevant_langs": relevant_langs or self.relevant_langs,
                "target_lang": target_lang or self.target_lang}

    @strict_kwargs
    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun,
                                k: int | None = None, mode: str | None = None, lang: str | None = None,
                                relevant_langs: list[str] | None = None,
                                target_lang: str | None = None) -> list[LCDocument]:
        hits = self.retriever.retrieve(query, **self._args(k, mode, lang, relevant_langs, target_lang))
        return [hit_to_document(h) for h in hits]

    @strict_kwargs
    async def _aget_relevant_documents(self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun,
                                       k: int | None = None, mode: str | None = None, lang: str | None = None,
                                       relevant_langs: list[str] | None = None,
                                       target_lang: str | None = None) -> list[LCDocument]:
        hits = await self.retriever.aretrieve(query, **self._args(k, mode, lang, relevant_langs, target_lang))
        return [hit_to_document(h) for h in hits]
