"""Passage postprocessors: the one hook between retrieval and the prompt.

Everything that reorders or trims the retrieved passages before the model reads them is a
:class:`PassagePostprocessor`, as every such step in LlamaIndex is a node postprocessor
(``postprocess_nodes(nodes, query_bundle)``): a reranker (``rerank:``; the Cross-Lingual Cost
setting's "retrieve 20, rerank, keep 5"), context selection (``context:``), or a plugin's step.
The config's ``postprocess:`` list names them in the order they run (default
``[rerank, context]``); each name is a ``postprocessor`` in the registry, so a plugin's step is
named there like a built-in one.

The retriever returns its fused ranking; the pipeline runs the steps (on passages a caller
gives as well as retrieved ones), and so do the retrieve doors (``xlrag retrieve``,
``/v1/retrieve``), which show the passages as a prompt would get them. When a step *chooses*
(a reranker: ``chooses = True``), retrieval fetches ``retrieval.retrieve_k`` candidates, and the
steps keep ``k``.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from xlrag.registry import create
from xlrag.schema import Hit, Query, Retrieval

if TYPE_CHECKING:
    from xlrag.config import XlragConfig
    from xlrag.indexes.embedders import Embedder
    from xlrag.indexes.retriever import CrossLingualRetriever

__all__ = ["PassagePostprocessor", "build_postprocessors", "fetch_k", "postprocessed", "retrieve_through",
           "run_postprocessors"]


@runtime_checkable
class PassagePostprocessor(Protocol):
    """One step between retrieval and the prompt: ``hits`` (best first) in, at most ``k`` out."""

    name: str
    chooses: bool  # it picks k of more candidates (a reranker): retrieval fetches retrieve_k for it

    def postprocess(self, hits: list[Hit], query: Query, k: int) -> list[Hit]: ...


def build_postprocessors(config: XlragConfig, embedder: Embedder | None) -> list[PassagePostprocessor]:
    """The steps ``config.postprocess`` names, in its order, each built from its section
    (``rerank:``, ``context:``, a plugin's own) over ``embedder`` (the retriever's)."""
    return [create("postprocessor", name, config, embedder) for name in config.postprocess]


def fetch_k(steps: Sequence[PassagePostprocessor], k: int, retrieve_k: int) -> int:
    """How many passages retrieval fetches for ``steps`` to keep ``k``: ``retrieve_k`` when a
    step chooses among candidates, else ``k`` (fetching more only to cut it off is wasted work)."""
    return max(retrieve_k, k) if any(step.chooses for step in steps) else k


def run_postprocessors(steps: Sequence[PassagePostprocessor], hits: Sequence[Hit], query: Query, k: int,
                       seconds: dict[str, float] | None = None) -> list[Hit]:
    """``hits`` through ``steps`` in order, then cut to ``k``; each step's time goes into
    ``seconds`` under its name (the ones that take time: a reranker's model calls)."""
    out = list(hits)
    for step in steps:
        t0 = time.perf_counter()
        out = step.postprocess(out, query, k)
        if seconds is not None:
            seconds[step.name] = round(seconds.get(step.name, 0.0) + time.perf_counter() - t0, 4)
    return out[:k]


def postprocessed(retrieval: Retrieval, steps: Sequence[PassagePostprocessor], k: int) -> Retrieval:
    """``retrieval`` with its hits through ``steps``, ``k`` kept; each step's seconds beside the
    retriever's."""
    if not steps:
        return retrieval
    seconds = dict(retrieval.seconds)
    hits = run_postprocessors(steps, retrieval.hits, retrieval.query, k, seconds)
    return retrieval.model_copy(update={"hits": hits, "seconds": seconds})


def retrieve_through(retriever: CrossLingualRetriever, steps: Sequence[PassagePostprocessor], query: Query,
                     k: int) -> Retrieval:
    """The retrieval a prompt would get for ``query``: the candidates ``steps`` need, through
    them, ``k`` kept (``xlrag retrieve`` and the retrieval evaluations; the pipeline and the
    server retrieve through LangChain and on the event loop)."""
    return postprocessed(retriever.retrieve(query, k=fetch_k(steps, k, retriever.retrieve_k)), steps, k)
