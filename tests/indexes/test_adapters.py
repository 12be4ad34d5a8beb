"""The retriever as a LlamaIndex retriever and as a LangChain retriever (Runnable)."""

import asyncio

from llama_index.core.schema import NodeWithScore

from xlrag.indexes.langchain import XlragLangChainRetriever
from xlrag.indexes.llamaindex import XlragLlamaRetriever


def _q(xquad_queries, lang):
    return next(q for q in xquad_queries if q["lang"] == lang)


def test_llamaindex_retriever(retriever, xquad_queries):
    q = _q(xquad_queries, "zh")
    li = XlragLlamaRetriever(retriever, mode="qlang_en", k=4)
    nodes = li.retrieve(q["question"])
    assert nodes and all(isinstance(n, NodeWithScore) for n in nodes)
    assert {n.node.metadata["lang"] for n in nodes} <= {"zh", "en"}
    assert all(n.node.metadata["policy"] == "qlang_en" for n in nodes)
    assert [n.node.node_id for n in nodes] == [h.id for h in retriever.retrieve(q["question"], mode="qlang_en", k=4)]
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
    assert all(d.metadata["policy"] == "swap_docs" and d.metadata["doc_id"] for d in docs)
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
