"""One carrier per hop: the pipeline hands its :class:`~xlrag.schema.Query` whole to one LangChain
retriever, made with the pipeline, and the Retrieval comes back with that Query, its id kept."""

from __future__ import annotations

import asyncio
import copy

import pytest
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel

from xlrag.chains.pipeline import Pipeline
from xlrag.chains.state import ChainInput
from xlrag.errors import InvalidArgumentError
from xlrag.indexes.langchain import XlragLangChainRetriever
from xlrag.schema import make_query

QUESTION = "Wie viele Punkte hat die Verteidigung der Panthers zugelassen?"


def _pipeline(retriever) -> Pipeline:
    return Pipeline.create(retriever, GenericFakeChatModel(messages=iter([])), k=3)


def test_the_retrieval_carries_the_query_it_was_given(retriever):
    p = _pipeline(retriever)
    q = p.query_for(ChainInput(question=QUESTION, id="q-17", lang="de", relevant_langs=["en", "ru"]))
    for got in (p.retrieve(q, "rel_langs"), asyncio.run(p.aretrieve(q, "rel_langs"))):
        assert got.query.id == "q-17" and got.query == q
        assert (got.query.lang, got.query.relevant_langs, got.query.target_lang) == ("de", ["en", "ru"], None)
        assert got.hits and {h.store for h in got.hits} <= {"de", "en", "ru"}
    swap = p.query_for(ChainInput(question=QUESTION, id="q-18", target_lang="zh"))
    got = p.retrieve(swap, "swap_docs")
    assert got.query.id == "q-18" and got.query.target_lang == "zh" and {h.lang for h in got.hits} == {"zh"}


def test_a_code_naming_no_language_keeps_its_note(retriever):
    p = _pipeline(retriever)
    q = p.query_for(ChainInput(question=QUESTION, lang="xx", id="q-19"))
    got = p.retrieve(q, "qlang")
    assert got.query.id == "q-19" and got.query.unknown_lang == "xx" and got.query.lang == "de"
    assert "'xx' names no language" in got.notes[0]


def test_one_langchain_retriever_per_pipeline(retriever, monkeypatch):
    p = _pipeline(retriever)
    used: list[int] = []
    invoke = XlragLangChainRetriever.invoke

    def counted(self, *args, **kwargs):
        used.append(id(self))
        return invoke(self, *args, **kwargs)

    monkeypatch.setattr(XlragLangChainRetriever, "invoke", counted)
    for question in (QUESTION, "How many points did the Panthers defense give up?"):
        p.retrieve(p.query_for(ChainInput(question=question)), "qlang")
    assert used == [id(p.searcher)] * 2
    # a copy with another retriever searches that one, not the first's
    other = p.model_copy(update={"retriever": copy.copy(retriever)})
    assert other.searcher is not p.searcher and other.searcher.retriever is other.retriever
    assert p.searcher.retriever is retriever


def test_the_langchain_retriever_takes_a_query_whole(retriever):
    lc = XlragLangChainRetriever(retriever=retriever, mode="qlang", k=2)
    q = make_query(QUESTION, lang="de", id="q-20")
    docs = lc.invoke(QUESTION, query=q)
    assert docs.retrieval.query.id == "q-20" and [d.metadata["lang"] for d in docs] == ["de", "de"]
    assert asyncio.run(lc.ainvoke(QUESTION, query=q)).retrieval.query.id == "q-20"
    with pytest.raises(InvalidArgumentError, match="Query carries its own"):
        lc.invoke(QUESTION, query=q, lang="en")
    with pytest.raises(InvalidArgumentError, match="the query's question"):
        lc.invoke("another question", query=q)


def test_a_query_given_to_the_chain_input_is_searched_as_it_is(retriever):
    p = _pipeline(retriever)
    q = make_query(QUESTION, lang="xx", relevant_langs=["en"], id="q-21")
    inp = ChainInput.coerce(q)
    assert inp.query is q and p.query_for(inp).unknown_lang == "xx"  # not made again from the fields
    got = p.retrieve(p.query_for(inp), "rel_langs")
    assert got.query.id == "q-21" and got.query.relevant_langs == ["en"] and "'xx'" in got.notes[0]
    with pytest.raises(ValueError, match="is not the query's"):
        ChainInput(question="another question", query=q)


def test_fields_beside_a_query_must_say_what_it_says():
    """A Query and a lang beside it are two answers to "which language?": one that agrees once
    written as make_query writes it ("EN" is "en") passes, one that differs is an error naming it."""
    from xlrag.perspectives.models import PerspectivesInput

    q = make_query(QUESTION, lang="de", relevant_langs=["en", "ru"], id="q-22")
    agreeing = ChainInput(question=QUESTION, lang="DE", relevant_langs=["EN", "ru"], id="q-22", query=q)
    assert agreeing.query is q
    for field, value in (("lang", "en"), ("relevant_langs", ["en"]), ("target_lang", "zh"), ("id", "q-23")):
        with pytest.raises(ValueError, match=rf"{field} .* is not the query's"):
            ChainInput(question=QUESTION, query=q, **{field: value})
    assert PerspectivesInput(question=QUESTION, lang="De", query=q).query is q
    with pytest.raises(ValueError, match="lang 'ru' is not the query's"):
        PerspectivesInput(question=QUESTION, lang="ru", query=q)
    with pytest.raises(ValueError, match="is not the query's"):
        PerspectivesInput(question="another question", query=q)
