"""The cross-lingual retriever as a LlamaIndex ``BaseRetriever``.

Drop it into any LlamaIndex query engine (``RetrieverQueryEngine``) or compose it
with postprocessors; every node carries the hit's language, store, policy and rank.
A :class:`XlragQueryBundle` carries an xlrag :class:`~xlrag.schema.Query` whole through
LlamaIndex's calls, which take nothing but a ``QueryBundle``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from llama_index.core.retrievers import BaseRetriever
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode

from xlrag.errors import InvalidArgumentError
from xlrag.indexes.retriever import CrossLingualRetriever
from xlrag.schema import Channel, Hit, Query, make_query
from xlrag.validate import check_k

__all__ = ["XlragLlamaRetriever", "XlragQueryBundle", "hit_to_node"]


@dataclass
class XlragQueryBundle(QueryBundle):
    """A LlamaIndex ``QueryBundle`` that carries the xlrag :class:`~xlrag.schema.Query` whole
    (its languages and id, which a plain bundle has no field for): ``XlragQueryBundle.of(query)``."""

    query: Query | None = None

    def __post_init__(self) -> None:
        # one question: the text LlamaIndex shows is the Query's
        if self.query is not None and self.query_str.strip() != self.query.question:
            raise InvalidArgumentError("query_str", f"the query's question ({self.query.question[:60]!r})",
                                       self.query_str)

    @classmethod
    def of(cls, query: Query) -> XlragQueryBundle:
        return cls(query_str=query.question, query=query)


def carried(bundle: QueryBundle | str) -> Query | str:
    """The Query a bundle carries whole, else its text."""
    if isinstance(bundle, str):
        return bundle
    return bundle.query if isinstance(bundle, XlragQueryBundle) and bundle.query is not None else bundle.query_str


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

    def _query(self, query_bundle: QueryBundle) -> Query:
        # a Query carried whole is searched as it is; a bare text takes the retriever's fields
        q = carried(query_bundle)
        return q if isinstance(q, Query) else make_query(q, **self._fields)

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return [hit_to_node(h) for h in self._xl.retrieve(self._query(query_bundle), **self._args).hits]

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return [hit_to_node(h) for h in (await self._xl.aretrieve(self._query(query_bundle), **self._args)).hits]
