"""``answer.explanation: false`` (#33): a citation reply stops at its explanation header. The
cited line and the answer come first, so they are what a whole reply has; the tokens after them
are not generated. Real llama.cpp, and the OpenAI SDK against a stand-in on 127.0.0.1."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage

from tests.chains.conftest import TEST_THREADS
from tests.replay import serve
from xlrag.chains.pipeline import Pipeline
from xlrag.chains.rag import GroundedChain
from xlrag.chains.state import ChainInput
from xlrag.config import AnswerConfig, LLMConfig, XlragConfig
from xlrag.formats import EXPLANATION_STOPS, Section
from xlrag.schema import make_query

QUESTION = "How many points did the Panthers defense surrender?"


def _fake(*replies: str) -> GenericFakeChatModel:
    return GenericFakeChatModel(messages=iter([AIMessage(r) for r in replies]))


def test_the_stop_strings_are_the_explanation_header_the_prompt_asks_for() -> None:
    # derived from the one owner of the header: a renamed header renames the stops
    assert all(s.startswith("\n") and s.rstrip().endswith(Section.EXPLANATION.value) for s in EXPLANATION_STOPS)
    assert len(EXPLANATION_STOPS) <= 4  # OpenAI takes at most four stop sequences


@pytest.mark.parametrize(("fmt", "explanation", "stopped"), [
    ("citation", False, True), ("citation", True, False),
    # the other formats have no explanation to skip
    ("answer", False, False), ("mc", False, False),
])
def test_only_a_citation_reply_without_its_explanation_gets_the_stops(retriever, fmt: str, explanation: bool,
                                                                     stopped: bool) -> None:
    pipeline = Pipeline.create(retriever, _fake("x"), answer=AnswerConfig(explanation=explanation, format=fmt), k=2)
    inp = ChainInput(question=QUESTION, lang="en", options=["308", "250"] if fmt == "mc" else None)
    query = make_query(QUESTION, lang="en")
    hits = retriever.retrieve(query, mode="qlang", k=2)
    stop = pipeline.request(inp, query, hits).request.kwargs.get("stop") or []
    assert all(s in stop for s in EXPLANATION_STOPS) is stopped
    assert not stopped or stop[-len(EXPLANATION_STOPS):] == list(EXPLANATION_STOPS)


def test_an_explanation_under_a_header_the_stops_miss_is_not_shown(retriever) -> None:
    # a model that translated the header wrote its explanation all the same: the answer has the
    # same parts whatever the provider stopped at, and its citations are the model's still
    reply = "Cited Documents: <doc1>\nAnswer: 308\nالشرح: سمح الدفاع بـ 308 نقاط <doc0>."
    whole = GroundedChain(pipeline=Pipeline.create(retriever, _fake(reply),
                                                   answer=AnswerConfig(post_hoc_citations=False),
                                                   k=2)).invoke({"question": QUESTION, "lang": "en"})
    brief = GroundedChain(pipeline=Pipeline.create(retriever, _fake(reply),
                                                   answer=AnswerConfig(post_hoc_citations=False, explanation=False),
                                                   k=2)).invoke(
        {"question": QUESTION, "lang": "en"})
    assert whole.explanation and brief.explanation is None
    assert brief.answer == whole.answer == "308"
    assert [c.marker for c in brief.citations] == [c.marker for c in whole.citations] == [1, 0]
    assert brief.flags == whole.flags


def test_a_stopped_reply_keeps_the_whole_replys_answer_and_citations(retriever) -> None:
    # real llama.cpp, greedy, the default model (the 0.5B one skips the headers here). Each
    # setting on a model of its own (another n_ctx), so neither reads the other's prompt state
    # and both decode the same prompt from scratch
    from xlrag.chains.llms import build_llm

    seen = {}
    for explanation, n_ctx in ((True, 2080), (False, 2096)):
        llm = build_llm(LLMConfig(model="qwen2.5-coder-1.5b-instruct", max_tokens=120, n_threads=TEST_THREADS,
                                  n_ctx=n_ctx))
        chain = GroundedChain(pipeline=Pipeline.create(retriever, llm,
                                                       answer=AnswerConfig(post_hoc_citations=False,
                                                                           explanation=explanation), mode="qlang_en",
                                                       k=2))
        seen[explanation] = chain.invoke({"question": QUESTION, "lang": "en"})
    whole, brief = seen[True], seen[False]
    assert whole.explanation, whole.raw_output  # the model does write one when asked
    assert brief.explanation is None and Section.EXPLANATION.value not in brief.raw_output
    cut = min(whole.raw_output.find(s) for s in EXPLANATION_STOPS if s in whole.raw_output)
    assert brief.raw_output.strip() == whole.raw_output[:cut].strip()
    assert brief.answer == whole.answer
    assert [c.marker for c in brief.citations] == [c.marker for c in whole.citations]
    assert brief.usage.completion_tokens < whole.usage.completion_tokens
    # the stop is how the reply ended, not the token budget
    assert "truncated" not in brief.flags


def _reply(body: Any) -> tuple[int, Any]:
    return 200, {"id": "chatcmpl-1", "object": "chat.completion", "created": 1750000000, "model": body["model"],
                 "choices": [{"index": 0, "finish_reason": "stop",
                              "message": {"role": "assistant", "content": "Cited Documents: <doc0>\nAnswer: 308"}}],
                 "usage": {"prompt_tokens": 300, "completion_tokens": 9, "total_tokens": 309}}


@pytest.mark.parametrize("explanation", [True, False])
def test_a_vendor_is_sent_the_stops_from_the_config(xquad_index, monkeypatch, explanation: bool) -> None:
    from xlrag.chains.rag import GroundedChain

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    with serve({"/v1/chat/completions": _reply}) as replay:
        cfg = XlragConfig(index_dir=xquad_index,
                          llm={"provider": "openai", "model": "gpt-4o-mini", "base_url": f"{replay.url}/v1"},
                          retrieval={"mode": "qlang", "k": 2}, answer={"explanation": explanation})
        chain = GroundedChain.from_config(cfg)
        answer = chain.invoke({"question": QUESTION, "lang": "en"})
        chain.pipeline.close()
    (req,) = replay.requests
    assert (req.body.get("stop") == list(EXPLANATION_STOPS)) is not explanation
    assert "stop" in req.body or explanation
    assert answer.answer == "308" and answer.explanation is None and "truncated" not in answer.flags
