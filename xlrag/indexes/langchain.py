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
    """``invoke("question")`` → ``list[Document]``; works in any LCEL chain."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    retriever: Any = Field(description="an xlrag CrossLingualRetriever")
    mode: str | None = None
    k: int | None = None
    query_fields: dict[str, Any] = Field(default_factory=dict)

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[LCDocument]:
        hits = self.retriever.retrieve(query, mode=self.mode, k=self.k, **self.query_fields)
        return [hit_to_document(h) for h in hits]

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun
    ) -> list[LCDocument]:
        hits = await self.retriever.aretrieve(query, mode=self.mode, k=self.k, **self.query_fields)
        return [hit_to_document(h) for h in hits]
