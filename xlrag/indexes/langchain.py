"""The cross-lingual retriever as a LangChain ``BaseRetriever`` (a Runnable).

Per-call arguments reach it only because ``_get_relevant_documents`` declares them:
LangChain's ``BaseRetriever.__init_subclass__`` reads that method's signature, and
when it takes nothing beyond ``query`` and ``run_manager`` ``invoke()`` silently drops
every keyword (``invoke(q, k=1)`` returned the default k). The parameters below are
therefore explicit, and ``tests/indexes/test_langchain_standard.py`` runs LangChain's
own ``RetrieversIntegrationTests`` to keep it so.

A caller that already holds the :class:`~xlrag.schema.Query` (the pipeline) passes it whole as
``query=``: it is searched as is, so its id and every field survive to the
:class:`~xlrag.schema.Retrieval`; the string input stays the run's input a tracer shows.

The documents come back as :class:`RetrievedDocuments`, a list that also keeps the
:class:`~xlrag.schema.Retrieval` they came from (``.retrieval``): the pipeline retrieves through this class, so a
LangChain tracer sees a retriever run with the documents, and the pipeline still gets
its hits, whether the index is complete, and the notes on stores not searched.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any, TypeVar

from langchain_core.callbacks import (
    AsyncCallbackManagerForRetrieverRun,
    CallbackManagerForRetrieverRun,
)
from langchain_core.documents import Document as LCDocument
from langchain_core.retrievers import BaseRetriever
from pydantic import ConfigDict, Field

from xlrag.errors import InvalidArgumentError
from xlrag.schema import Channel, Hit, Query, QueryFields, Retrieval, make_query
from xlrag.validate import check_k, check_kwargs, k_field

__all__ = ["RetrievedDocuments", "XlragLangChainRetriever", "hit_to_document"]

# What ``invoke``/``ainvoke``/``batch``/``bind`` may set for one call; each defaults to the field.
_CALL_ARGS = ("k", "mode", "lang", "relevant_langs", "target_lang", "channels", "query")

F = TypeVar("F", bound=Callable[..., Any])


def hit_to_document(hit: Hit) -> LCDocument:
    return LCDocument(
        id=hit.id,
        page_content=hit.passage.text,
        metadata={
            "id": hit.id,
            "doc_id": hit.doc_id,
            "lang": hit.lang,
            "store": hit.store,
            "mode": hit.mode,
            "rank": hit.rank,
            "score": hit.score,
            "raw_score": hit.raw_score,
            "channels": hit.channels,
            "dense_score": hit.dense_score,
            "lexical_score": hit.lexical_score,
            "fused_score": hit.fused_score,
            "rerank_score": hit.rerank_score,
            "title": hit.passage.title,
        },
    )


class RetrievedDocuments(list[LCDocument]):
    """The documents of one retrieval, best first; ``retrieval`` is the
    :class:`~xlrag.schema.Retrieval` they were made from."""

    def __init__(self, retrieval: Retrieval):
        super().__init__(hit_to_document(h) for h in retrieval.hits)
        self.retrieval = retrieval


def _per_call(fn: F) -> F:
    """Reject an unknown ``invoke`` keyword as ``invoke()``'s, not as the private hook's.

    ``functools.wraps`` keeps the explicit signature visible to LangChain (it follows
    ``__wrapped__``), which is what makes it pass the keywords on at all.
    """

    if inspect.iscoroutinefunction(fn):

        @functools.wraps(fn)
        async def awrapper(self: XlragLangChainRetriever, question: str, *, run_manager: Any, **call: Any) -> Any:
            check_kwargs(f"{type(self).__name__}.ainvoke", call, _CALL_ARGS)
            return await fn(self, question, run_manager=run_manager, **call)

        return awrapper  # type: ignore[return-value]

    @functools.wraps(fn)
    def wrapper(self: XlragLangChainRetriever, question: str, *, run_manager: Any, **call: Any) -> Any:
        check_kwargs(f"{type(self).__name__}.invoke", call, _CALL_ARGS)
        return fn(self, question, run_manager=run_manager, **call)

    return wrapper  # type: ignore[return-value]


class XlragLangChainRetriever(BaseRetriever, QueryFields):
    """``invoke("question")`` → ``list[Document]``; works in any LCEL chain.

    The fields set defaults; each call may override them, sync or async:
    ``invoke("question", k=1, mode="rel_langs", relevant_langs=["es"])``,
    ``ainvoke(...)``, ``batch([...], k=2)``, ``bind(k=2)``. ``invoke(q.question, query=q)`` searches
    the :class:`~xlrag.schema.Query` ``q`` as it is (its id kept); its fields are then the query's own.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True, extra="forbid")

    retriever: Any = Field(description="an xlrag CrossLingualRetriever")
    mode: str | None = None
    k: int | None = k_field(None, "passages per call (a call may override it); default: the retriever's k")
    channels: list[Channel] | None = Field(None, description="how each store is searched; default: the retriever's")

    def __init__(self, **data: Any):
        # Checked before pydantic, so a misspelt field or a bad k is xlrag's one-line error
        # naming the right one, not a validation dump.
        check_kwargs(type(self).__name__, data, type(self).model_fields)
        check_k(data.get("k"))
        super().__init__(**data)

    def _call(self, question: str, k: int | None, mode: str | None, lang: str | None,
              relevant_langs: list[str] | None, target_lang: str | None, channels: list[Channel] | None,
              query: Query | None) -> tuple[Query, dict[str, Any]]:
        """The call's :class:`Query` and the retriever's arguments, each from the call or else the field.
        A ``query`` given is the call's as it is: rebuilt from the text it would lose its id."""
        if query is not None:
            if lang is not None or relevant_langs is not None or target_lang is not None:
                # two answers to one question: which the caller meant is not for the retriever to guess
                raise InvalidArgumentError("lang/relevant_langs/target_lang", "None when query= is given: the "
                                           "Query carries its own", [lang, relevant_langs, target_lang])
            if question.strip() != query.question:
                raise InvalidArgumentError("input", f"the query's question ({query.question[:60]!r})", question)
            q = query
        else:
            q = make_query(question, lang=self.lang if lang is None else lang,
                           relevant_langs=self.relevant_langs if relevant_langs is None else relevant_langs,
                           target_lang=self.target_lang if target_lang is None else target_lang)
        given = {"k": check_k(k), "mode": mode, "channels": channels}
        return q, {name: getattr(self, name) if value is None else value for name, value in given.items()}

    # LangChain passes the input positionally; its name is question here so that query= is free
    # for the Query itself (hence the override's ignore: only the parameter's name differs)
    @_per_call
    def _get_relevant_documents(self, question: str, *,  # type: ignore[override]
                                run_manager: CallbackManagerForRetrieverRun,
                                k: int | None = None, mode: str | None = None, lang: str | None = None,
                                relevant_langs: list[str] | None = None, target_lang: str | None = None,
                                channels: list[Channel] | None = None, query: Query | None = None
                                ) -> RetrievedDocuments:
        q, args = self._call(question, k, mode, lang, relevant_langs, target_lang, channels, query)
        return RetrievedDocuments(self.retriever.retrieve(q, **args))

    @_per_call
    async def _aget_relevant_documents(self, question: str, *,  # type: ignore[override]
                                       run_manager: AsyncCallbackManagerForRetrieverRun,
                                       k: int | None = None, mode: str | None = None, lang: str | None = None,
                                       relevant_langs: list[str] | None = None, target_lang: str | None = None,
                                       channels: list[Channel] | None = None, query: Query | None = None
                                       ) -> RetrievedDocuments:
        q, args = self._call(question, k, mode, lang, relevant_langs, target_lang, channels, query)
        return RetrievedDocuments(await self.retriever.aretrieve(q, **args))
