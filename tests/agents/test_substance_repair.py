"""The agent's substance checks on the real XQuAD index: a scripted model, then the local one.

An answer that echoes the question, refuses while the top passage holds the answer, or says
what no cited passage holds is asked again with the extractive instruction; one still
failing is flagged ``not_an_answer`` / ``unsupported`` and never presented as verified.
"""

from __future__ import annotations

import asyncio

import pytest
from langchain_core.messages import AIMessage

from tests.agents.test_agent import SPANISH, FirstReplyScripted, agent, scripted
from xlrag.checks.substance import FLAGS, non_answer
from xlrag.server.models import AnswerOut
from xlrag.trace import Repair

QUESTION = "¿Cuántos puntos dejaron escapar en defensa los Panthers?"
ECHO = f"Cited Documents: <doc0>, <doc1>\nAnswer: {QUESTION}\nExplanation: <doc0> <doc1>"
REFUSAL = ("Cited Documents: <doc0>\nAnswer: Los documentos no contienen esa información.\n"
           "Explanation: No se menciona en <doc0>.")


def _checks(trace, attempt):
    return {c.check: c.passed for c in trace.checks if c.attempt == attempt}


def test_an_echoed_question_is_asked_again_extractively_and_then_passes(retriever):
    out = agent(retriever, scripted(ECHO, SPANISH)).invoke({"question": QUESTION})
    answer, trace = out["answer"], out["trace"]
    assert _checks(trace, 0)["non_answer"] is False
    assert "repeats the question" in next(c.detail for c in trace.checks if c.check == "non_answer")
    assert [r.repair for r in trace.repairs] == [Repair.EXTRACT]
    assert answer.answer == "La defensa de los Panthers permitió 308 puntos."
    assert _checks(trace, 1)["non_answer"] is True and trace.unrepaired == []
    assert not set(FLAGS.values()) & set(answer.flags) and AnswerOut.of(answer).verified


def test_an_echo_that_survives_the_repair_is_flagged_never_verified(retriever):
    out = asyncio.run(agent(retriever, scripted(ECHO, ECHO)).ainvoke({"question": QUESTION}))
    answer, trace = out["answer"], out["trace"]
    assert [r.repair for r in trace.repairs] == [Repair.EXTRACT]
    assert "non_answer" in trace.unrepaired
    assert answer.flags[0] == "not_an_answer" and "unrepaired_non_answer" in answer.flags
    assert AnswerOut.of(answer).verified is False


def test_a_refusal_while_the_top_passage_holds_the_answer_is_asked_again(retriever):
    out = agent(retriever, scripted(REFUSAL, SPANISH)).invoke({"question": QUESTION})
    answer, trace = out["answer"], out["trace"]
    assert _checks(trace, 0)["refusal"] is False
    assert [r.repair for r in trace.repairs] == [Repair.EXTRACT]
    assert answer.answer.endswith("308 puntos.") and trace.unrepaired == []


def test_an_answer_no_cited_passage_holds_is_asked_again(retriever):
    invented = ("Cited Documents: <doc0>\nAnswer: Los Broncos ganaron el campeonato mundial de béisbol.\n"
                "Explanation: Lo dice <doc0>.")
    out = agent(retriever, scripted(invented, SPANISH)).invoke({"question": QUESTION})
    trace = out["trace"]
    first = next(c for c in trace.checks if c.check == "unsupported")
    assert not first.passed
    assert "occur in the sentences of its best cited passage that are about the question" in first.detail
    assert [r.repair for r in trace.repairs] == [Repair.EXTRACT] and trace.unrepaired == []


def test_the_cli_shows_a_flagged_answer_as_not_verified(retriever):
    from rich.console import Console

    from xlrag.cli import answering

    out = agent(retriever, scripted(ECHO, ECHO)).invoke({"question": QUESTION})
    console = Console(record=True, width=200)
    saved, answering.out = answering.out, console
    try:
        answering.print_answer(out["answer"])
    finally:
        answering.out = saved
    assert "not verified (not_an_answer)" in console.export_text()


def test_every_substance_flag_has_words_for_the_reader():
    from xlrag.checks.substance import UNVERIFIED_REASONS
    from xlrag.cli.answering import _UNVERIFIED

    assert set(_UNVERIFIED) == set(UNVERIFIED_REASONS) >= set(FLAGS.values())


HINDI = "इस्लाम के प्रगतिशील नरमपंथी क्या अलग करना चाहते हैं?"  # echoed back as its answer before


@pytest.fixture(scope="module")
def islamism_retriever(tmp_path_factory, embedder, splitter_config):
    """The Islamism paragraph the Hindi question is about, in all six languages, with two others."""
    from tests.conftest import DATA, XQUAD_LANGS, read_jsonl
    from xlrag.detect import LinguaDetector
    from xlrag.indexes.indexer import index_documents
    from xlrag.indexes.retriever import CrossLingualRetriever
    from xlrag.indexes.store import LanguageStores
    from xlrag.schema import Document

    keep = {"xquad-43", "xquad-44", "xquad-00"}
    docs = [Document(**r) for r in read_jsonl(DATA / "xquad" / "corpus.jsonl")
            if r["metadata"]["parallel_id"] in keep]
    path = tmp_path_factory.mktemp("islamism") / "index"
    index_documents(docs, path, embedder, splitter_config)
    r = CrossLingualRetriever(LanguageStores.open(path, embedder.name, embedder.dim), embedder, "all", k=6,
                              detector=LinguaDetector((*XQUAD_LANGS, "hi")))
    yield r
    r.close()


@pytest.mark.slow
def test_the_real_local_model_answers_or_is_flagged_on_a_question_it_echoed_before(islamism_retriever):
    from xlrag.agents import build_agent
    from xlrag.chains.llms import build_llm
    from xlrag.config import LLMConfig, XlragConfig

    real = build_llm(LLMConfig(model="qwen2.5-coder-1.5b-instruct", max_tokens=128))
    # the first reply is the echo seen before; the extract repair goes to the real model
    llm = FirstReplyScripted(messages=iter([AIMessage(f"Cited Documents: <doc0>\nAnswer: {HINDI}")]),
                             real=real, metadata=real.metadata)
    cfg = XlragConfig(agent={"mode": "all"}, retrieval={"k": 3})
    out = build_agent(cfg, llm=llm, retriever=islamism_retriever).invoke({"question": HINDI, "lang": "hi"})
    answer, trace = out["answer"], out["trace"]
    assert trace.repairs[0].repair is Repair.EXTRACT
    said = answer.answer or ""
    # the invariant: an answer that still says nothing carries the flag, whatever the model did
    assert non_answer(said, HINDI, "hi").passed or "not_an_answer" in answer.flags, said
    assert said.strip() != HINDI.strip() or not AnswerOut.of(answer).verified
    # and the whole real run, with no scripted reply, keeps the same invariant
    plain = build_agent(cfg, llm=real, retriever=islamism_retriever).invoke({"question": HINDI, "lang": "hi"})
    said = plain["answer"].answer or ""
    assert non_answer(said, HINDI, "hi").passed or not AnswerOut.of(plain["answer"]).verified, said
