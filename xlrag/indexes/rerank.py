"""The rerank stage: ``retrieval.retrieve_k`` candidates in, ``retrieval.k`` out, a
:class:`~xlrag.indexes.postprocess.PassagePostprocessor` (``rerank`` in ``postprocess:``).

``none`` keeps the fused order; ``cohere`` calls Cohere's multilingual reranker
through LlamaIndex's ``CohereRerank`` postprocessor; ``llm`` is
:class:`~xlrag.chains.reranker.LLMReranker`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from xlrag.config import RerankConfig
from xlrag.errors import ProviderError
from xlrag.indexes.postprocess import PassagePostprocessor
from xlrag.registry import api_key, create, register, require
from xlrag.schema import Hit, Query

if TYPE_CHECKING:
    from xlrag.config import XlragConfig
    from xlrag.indexes.embedders import Embedder

__all__ = ["CohereReranker", "NoRerank", "build_reranker"]


def _reranked(hits: Sequence[Hit], scores: Sequence[float] | None = None) -> list[Hit]:
    return [
        h.model_copy(update={"rank": i, **({"score": float(scores[i - 1])} if scores is not None else {})})
        for i, h in enumerate(hits, 1)
    ]


class NoRerank:
    """The fused order, cut to ``k``."""

    name = "none"
    chooses = False

    def postprocess(self, hits: list[Hit], query: Query, k: int) -> list[Hit]:
        return _reranked(hits[:k])


class CohereReranker:
    """Cohere ``rerank-multilingual-v3.0`` via ``llama_index.postprocessor.cohere_rerank``."""

    name = "cohere"
    chooses = True

    def __init__(self, model: str = "rerank-multilingual-v3.0", api_key: str | None = None,
                 base_url: str | None = None):
        self.model = model
        self._api_key = api_key
        self._base_url = base_url

    def _postprocessor(self, k: int) -> Any:
        # One postprocessor per call: top_n is per-request state, and a shared instance
        # mutated by concurrent calls would cut one caller's list to another caller's k.
        from llama_index.postprocessor.cohere_rerank import CohereRerank

        return CohereRerank(model=self.model, api_key=self._api_key, top_n=k, base_url=self._base_url)

    def postprocess(self, hits: list[Hit], query: Query, k: int) -> list[Hit]:
        if not hits:
            return []
        from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode

        nodes = [NodeWithScore(node=TextNode(id_=h.id, text=h.passage.text), score=h.score) for h in hits]
        try:
            out = self._postprocessor(k).postprocess_nodes(nodes, query_bundle=QueryBundle(query.question))
        except Exception as e:  # the Cohere SDK raises its own error tree
            raise ProviderError(f"cohere rerank failed: {e}") from e
        by_id = {h.id: h for h in hits}
        ordered = [by_id[n.node.node_id] for n in out]
        return _reranked(ordered, [n.score or 0.0 for n in out])


@register("reranker", "none")
def _none(cfg: RerankConfig) -> PassagePostprocessor:
    return NoRerank()


@register("reranker", "cohere")
def _cohere(cfg: RerankConfig) -> PassagePostprocessor:
    require("llama_index.postprocessor.cohere_rerank", "cohere", "the cohere reranker")
    key = api_key("cohere reranker", "COHERE_API_KEY", "CO_API_KEY")
    return CohereReranker(cfg.model or "rerank-multilingual-v3.0", key, cfg.base_url)


def build_reranker(cfg: RerankConfig | None = None) -> PassagePostprocessor:
    """The reranker ``rerank:`` names (``rerank.name``)."""
    cfg = cfg or RerankConfig()
    return create("reranker", cfg.name, cfg)


@register("postprocessor", "rerank")
def _rerank_step(config: XlragConfig, embedder: Embedder | None) -> PassagePostprocessor:
    return build_reranker(config.rerank)
