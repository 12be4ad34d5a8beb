"""The retriever as a LlamaIndex retriever and as a LangChain retriever (Runnable)."""

import asyncio

import pytest
from llama_index.core.schema import NodeWithScore

from xlrag.indexes.langchain import XlragLangChainRetriever
from xlrag.indexes.llamaindex import XlragLlamaRetriever
from xlrag.schema import make_query


def _q(xquad_queries, lang):
    return next(q for q in xquad_queries if q["lang"] == lang)


def test_llamaindex_retriever(retriever, xquad_queries):
    q = _q(xquad_queries, "zh")
    li = XlragLlamaRetriever(retriever, mode="qlang_en", k=4)
    nodes = li.retrieve(q["question"])
    assert nodes and all(isinstance(n, NodeWithScore) for n in nodes)
    assert {n.node.metadata["lang"] for n in nodes} <= {"zh", "en"}
    assert all(n.node.metadata["mode"] == "qlang_en" for n in nodes)
    direct = retriever.retrieve(q["question"], mode="qlang_en", k=4)
    assert [n.node.node_id for n in nodes] == [h.id for h in direct.hits]
    anodes = asyncio.run(li.aretrieve(q["question"]))
    assert [n.node.node_id for n in anodes] == [n.node.node_id for n in nodes]


def test_llamaindex_query_fields(retriever, xquad_queries):
    q = _q(xquad_queries, "de")
    li = XlragLlamaRetriever(retriever, mode="rel_langs", k=6, relevant_langs=["ar"])
    assert {n.node.metadata["lang"] for n in li.retrieve(q["question"])} <= {"de", "en", "ar"}


def test_langchain_retriever_is_a_runnable(retriever, xquad_queries):
    q = _q(xquad_queries, "ar")
    lc = XlragLangChainRetriever(retriever=retriever, mode="swap_docs", k=5)
    docs = lc.invoke(q["question"])
    assert len(docs) == 5 and "ar" not in {d.metadata["lang"] for d in docs}
    assert all(d.metadata["mode"] == "swap_docs" and d.metadata["doc_id"] for d in docs)
    adocs = asyncio.run(lc.ainvoke(q["question"]))
    assert [d.id for d in adocs] == [d.id for d in docs]
    batch = lc.batch([q["question"], _q(xquad_queries, "en")["question"]])
    assert len(batch) == 2 and all(len(b) == 5 for b in batch)


def test_langchain_composes_in_lcel(retriever, xquad_queries):
    from langchain_core.runnables import RunnableLambda

    chain = XlragLangChainRetriever(retriever=retriever, mode="en_only", k=3) | RunnableLambda(
        lambda docs: [d.metadata["lang"] for d in docs]
    )
    assert chain.invoke(_q(xquad_queries, "es")["question"]) == ["en", "en", "en"]


# -- per-call arguments of the LangChain retriever: invoke/ainvoke/batch/bind keywords -------

DE = "Wie viele Punkte gab die Verteidigung der Panthers ab?"


def _langs(docs):
    return {d.metadata["lang"] for d in docs}


@pytest.mark.parametrize("how", ["invoke", "ainvoke"])
def test_langchain_per_call_arguments_override_the_fields(retriever, how):
    lc = XlragLangChainRetriever(retriever=retriever, mode="qlang_en", k=4)

    def call(**kw):
        return lc.invoke(DE, **kw) if how == "invoke" else asyncio.run(lc.ainvoke(DE, **kw))

    assert [len(call(k=n)) for n in (1, 3, 6)] == [1, 3, 6]
    docs = call(mode="en_only", k=2)
    assert len(docs) == 2 and _langs(docs) == {"en"} and {d.metadata["mode"] for d in docs} == {"en_only"}
    assert _langs(call(mode="qlang", lang="ru")) == {"ru"}  # lang replaces detection (de)
    assert _langs(call(mode="swap_docs", target_lang="zh")) == {"zh"}
    rel = call(mode="rel_langs", relevant_langs=["zh"], k=6)
    assert [d.id for d in rel] == [h.id for h in retriever.retrieve(make_query(DE, relevant_langs=["zh"]),
                                                                    mode="rel_langs", k=6).hits]
    assert "zh" in _langs(rel) and _langs(rel) <= {"de", "en", "zh"}
    # nothing sticks: the next plain call has the fields' values again
    docs = call()
    assert len(docs) == 4 and _langs(docs) <= {"de", "en"} and docs[0].metadata["mode"] == "qlang_en"


def test_langchain_field_defaults_apply_unless_the_call_overrides_them(retriever):
    lc = XlragLangChainRetriever(retriever=retriever, mode="rel_langs", relevant_langs=["ar"], k=6)
    assert "ar" in _langs(lc.invoke(DE))
    swapped = lc.invoke(DE, relevant_langs=["zh"])
    assert "zh" in _langs(swapped) and "ar" not in _langs(swapped)


def test_langchain_per_call_arguments_through_batch_and_bind(retriever, xquad_queries):
    from langchain_core.runnables import RunnableLambda

    lc = XlragLangChainRetriever(retriever=retriever, mode="qlang_en", k=4)
    assert [len(docs) for docs in lc.batch([DE, _q(xquad_queries, "es")["question"]], k=2)] == [2, 2]
    chain = lc.bind(mode="en_only", k=1) | RunnableLambda(lambda docs: [d.metadata["lang"] for d in docs])
    assert chain.invoke(DE) == ["en"]
    assert asyncio.run(chain.ainvoke(DE)) == ["en"]


def test_langchain_unknown_argument_is_one_line_xlrag_error(retriever):
    from xlrag.errors import InvalidArgumentError, UnknownArgumentError, XlragError

    lc = XlragLangChainRetriever(retriever=retriever, k=4)
    with pytest.raises(UnknownArgumentError) as e:
        lc.invoke(DE, relevant_lang=["zh"])
    msg = str(e.value)
    assert isinstance(e.value, XlragError) and isinstance(e.value, TypeError) and "\n" not in msg
    assert msg.startswith("XlragLangChainRetriever.invoke() got an unexpected keyword argument 'relevant_lang' "
                          "(did you mean 'relevant_langs'?)")
    assert msg.endswith("valid: k, mode, lang, relevant_langs, target_lang, channels, query")
    with pytest.raises(UnknownArgumentError, match=r"ainvoke\(\) .* 'mdoe' \(did you mean 'mode'\?\)"):
        asyncio.run(lc.ainvoke(DE, mdoe="en_only"))
    with pytest.raises(UnknownArgumentError, match=r"XlragLangChainRetriever\(\) got an unexpected keyword "
                                                   r"argument 'target_lan' \(did you mean 'target_lang'\?\)"):
        XlragLangChainRetriever(retriever=retriever, target_lan="es")
    with pytest.raises(InvalidArgumentError, match="k must be a whole number >= 1"):
        lc.invoke(DE, k=0)
