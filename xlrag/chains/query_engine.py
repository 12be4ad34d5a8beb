"""xlrag's grounded chain as a LlamaIndex query engine.

``build_query_engine(config).query("...")`` answers as ``xlrag ask`` does (IR mode →
localized prompt → LLM → ``<docN>`` citations) and returns a LlamaIndex ``Response``:

* ``response``: the answer text, in the question's language;
* ``source_nodes``: one ``NodeWithScore`` per *valid* citation, in citation order (the
  passage, its language/store/policy metadata, plus ``citation`` ``"<docN>"``,
  ``citation_source`` model/post_hoc/vendor and ``citation_valid``), so LlamaIndex
  code that shows ``response.source_nodes`` shows what the answer rests on, not merely
  what was retrieved;
* ``metadata["grounded_answer"]``: the full :class:`~xlrag.schema.GroundedAnswer`
  (flags, invalid citations, every passage shown).

A plain ``RetrieverQueryEngine`` over :class:`~xlrag.indexes.llamaindex.XlragLlamaRetriever`
would answer with LlamaIndex's English synthesis prompts and list every retrieved node as
a source; this engine keeps xlrag's localized prompts and citation checks.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from llama_index.core.base.base_query_engine import BaseQueryEngine
from llama_index.core.base.response.schema import Response
from llama_index.core.callbacks.base import CallbackManager
from llama_index.core.prompts.mixin import PromptMixinType
from llama_index.core.schema import NodeWithScore, QueryBundle

from xlrag.chains.state import ChainInput
from xlrag.config import XlragConfig, resolve_config
from xlrag.indexes.llamaindex import XlragQueryBundle, carried, hit_to_node
from xlrag.schema import GroundedAnswer, Query
from xlrag.validate import strict_kwargs

if TYPE_CHECKING:
    from langchain_core.runnables import Runnable

    from xlrag.chains.rag import GroundedChain
    from xlrag.indexes.retriever import CrossLingualRetriever

__all__ = ["XlragQueryEngine", "build_query_engine", "citation_nodes"]

# Added to each cited passage's node; kept out of the text an LLM or embedder would see.
_CITATION_KEYS = ("citation", "citation_marker", "citation_source", "citation_valid", "citation_text",
                  "citation_score")


def citation_nodes(answer: GroundedAnswer) -> list[NodeWithScore]:
    """The passages ``answer`` validly cites, one node per citation, in citation order.

    Invalid citations (a ``<docN>`` naming no shown passage) have no passage to show; they
    stay in the GroundedAnswer, flagged ``invalid_citation``.
    """
    nodes = []
    for c in answer.citations:
        if not c.valid:
            continue
        node = hit_to_node(answer.passages[c.marker])
        extra = {"citation": f"<doc{c.marker}>", "citation_marker": c.marker, "citation_source": c.source,
                 "citation_valid": c.valid, "citation_text": c.text, "citation_score": c.score}
        node.node.metadata.update(extra)
        node.node.excluded_llm_metadata_keys.extend(_CITATION_KEYS)
        node.node.excluded_embed_metadata_keys.extend(_CITATION_KEYS)
        nodes.append(node)
    return nodes


def _bundled(value: str | QueryBundle | Query) -> str | QueryBundle:
    """An xlrag Query in an XlragQueryBundle: LlamaIndex's events take only text or a bundle."""
    return XlragQueryBundle.of(value) if isinstance(value, Query) else value


def _response(answer: GroundedAnswer) -> Response:
    return Response(response=answer.answer, source_nodes=citation_nodes(answer),
                    metadata={"grounded_answer": answer})


class XlragQueryEngine(BaseQueryEngine):
    """A LlamaIndex query engine over an xlrag :class:`~xlrag.chains.rag.GroundedChain`.

    ``query``/``aquery`` return a ``Response`` carrying xlrag's answer and citations;
    ``retrieve`` returns the passages the model would be shown, as nodes.
    """

    def __init__(self, chain: GroundedChain, callback_manager: CallbackManager | None = None):
        super().__init__(callback_manager)
        self.chain = chain

    def _get_prompt_modules(self) -> PromptMixinType:
        # xlrag's prompts are per language (xlrag.prompts), not LlamaIndex PromptTemplates.
        return {}

    def query(self, str_or_query_bundle: str | QueryBundle | Query) -> Response:
        return super().query(_bundled(str_or_query_bundle))  # type: ignore[return-value]  # _query's Response

    async def aquery(self, str_or_query_bundle: str | QueryBundle | Query) -> Response:
        return await super().aquery(_bundled(str_or_query_bundle))  # type: ignore[return-value]  # _aquery's

    def _query(self, query_bundle: QueryBundle) -> Response:
        return _response(self.chain.invoke(carried(query_bundle)))

    async def _aquery(self, query_bundle: QueryBundle) -> Response:
        return _response(await self.chain.ainvoke(carried(query_bundle)))

    def retrieve(self, query_bundle: QueryBundle | Query | str) -> list[NodeWithScore]:
        inp = ChainInput.coerce(query_bundle if isinstance(query_bundle, Query) else carried(query_bundle))
        pipeline = self.chain.pipeline
        # the pipeline's own steps, without building the prompt
        return [hit_to_node(h) for h in pipeline.retrieve(pipeline.query_for(inp), pipeline.mode_for(inp)).hits]

    def close(self) -> None:
        """Stop the search threads of a retriever the engine's pipeline opened (the engine is
        unusable afterwards); a retriever the caller handed in is left open."""
        self.chain.pipeline.close()


@strict_kwargs
def build_query_engine(config: XlragConfig | str | Path | None = None, *, llm: Runnable | None = None,
                       retriever: CrossLingualRetriever | None = None) -> XlragQueryEngine:
    """A LlamaIndex query engine answering with citations as ``xlrag ask`` does.

    ``config`` is an :class:`~xlrag.config.XlragConfig`, a path to a YAML config file, or
    None (``./xlrag.yaml`` if present, ``XLRAG_*`` variables, defaults). It names the index
    (``index_dir``), the IR mode and k (``retrieval``) and the LLM (``llm``); mode
    ``no_ir`` answers closed-book, so there are no sources. ``llm`` and ``retriever``
    replace the ones the config would build.
    """
    from xlrag.chains.rag import GroundedChain

    return XlragQueryEngine(GroundedChain.from_config(resolve_config(config), llm=llm, retriever=retriever))
