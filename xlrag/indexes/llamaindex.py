"""The cross-lingual retriever as a LlamaIndex ``BaseRetriever``.

Drop it into any LlamaIndex query engine (``RetrieverQueryEngine``) or compose it
with postprocessors; every node carries the hit's language, store, policy and rank.
"""

from __future__ import annotations

from typing import Any

from llama_index.core.retrievers import BaseRetriever
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode

from xlrag.indexes.retriever import CrossLingualRetriever
from xlrag.schema import Channel, Hit, make_query
from xlrag.validate import check_k

__all__ = ["XlragLlamaRetriever", "hit_to_node"]


def hit_to_node(hit: Hit) -> NodeWithScore:
    meta: dict[str, Any] = {
        "doc_id": hit.doc_id,
        "lang": hit.lang,
        "store": hit.store,
        "mode": hit.mode,
        "rank": hit.rank,
        "raw_score": hit.raw_score,
        "channels": ",".join(hit.channels),
        "position": hit.passage.position,
    }
    for name in ("dense_score", "lexical_score", "rerank_score"):
        if (value := getattr(hit, name)) is not None:
            meta[name] = value
    if hit.passage.title:
        meta["title"] = hit.passage.title
    node = TextNode(id_=hit.id, text=hit.passage.text, metadata=meta,
                    excluded_embed_metadata_keys=list(meta), excluded_llm_metadata_keys=list(meta))
    return NodeWithScore(node=node, score=hit.score)


class XlragLlamaRetriever(BaseRetriever):
    """``retriever.retrieve("question")`` → ``list[NodeWithScore]``.

    ``mode``, ``k``, ``channels`` and the query fields (``lang``, ``relevant_langs``,
    ``target_lang``) apply to every call.
    """

    def __init__(self, retriever: CrossLingualRetriever, mode: str | None = None, k: int | None = None, *,
                 lang: str | None = None, relevant_langs: list[str] | None = None,
                 target_lang: str | None = None, channels: list[Channel] | str | None = None):
        super().__init__()
        self._xl = retriever
        self._fields: dict[str, Any] = {"lang": lang, "relevant_langs": relevant_langs, "target_lang": target_lang}
        make_query("?", **self._fields)  # a bad field fails here, not at the first question
        self._args: dict[str, Any] = {"mode": mode, "k": check_k(k), "channels": channels}

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        q = make_query(query_bundle.query_str, **self._fields)
        return [hit_to_node(h) for h in self._xl.retrieve(q, **self._args).hits]

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        q = make_query(query_bundle.query_str, **self._fields)
        return [hit_to_node(h) for h in (await self._xl.aretrieve(q, **self._args)).hits]
