"""xlrag's chat as a LlamaIndex chat engine: ``build_chat_engine(config).chat("...")``.

Each message goes through xlrag's chat graph (:func:`~xlrag.agents.build.build_chat`): a
follow-up is condensed into a standalone question *in the user's language*, then the agent
retrieves, answers with ``<docN>`` citations, verifies and repairs. LlamaIndex's own
``CondenseQuestionChatEngine`` condenses with an English prompt, and its answers drift
into English.

* ``chat``/``achat`` return an ``AgentChatResponse``: ``response`` is the checked answer,
  ``source_nodes`` the passages it validly cites (as the query engine's, one node per
  citation), ``metadata`` the :class:`~xlrag.schema.GroundedAnswer` (``grounded_answer``)
  and the agent's :class:`~xlrag.trace.Trace` (``trace``, which holds the condensed
  question).
* ``stream_chat``/``astream_chat`` return a :class:`XlragStreamingChatResponse`: its
  ``response_gen`` (``async_response_gen()``) yields the answering model's tokens as they
  are generated; the turn runs while it is read, and once it has been read ``response``,
  ``source_nodes`` and ``metadata`` are the checked answer's, as ``chat`` returns them.
* ``chat_history`` is the conversation the engine keeps (the last
  ``agent.chat.retention_turns`` turns); ``reset()`` starts a new one. A ``chat_history``
  given to a call replaces it: the conversation goes on from those messages.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Generator, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from llama_index.core.base.llms.types import ChatMessage, ChatResponse, MessageRole
from llama_index.core.chat_engine.types import (
    AgentChatResponse,
    BaseChatEngine,
    StreamingAgentChatResponse,
)

from xlrag.agents.chat import Turn, achat_turn, chat_turn
from xlrag.chains.query_engine import citation_nodes
from xlrag.chains.state import GIVEN, AnswerToken
from xlrag.config import XlragConfig
from xlrag.detect import LinguaDetector
from xlrag.errors import ConfigError
from xlrag.steps import Call, Steps, arun, run
from xlrag.validate import strict_kwargs

if TYPE_CHECKING:
    from langchain_core.runnables import Runnable, RunnableConfig

    from xlrag.chains.pipeline import Pipeline
    from xlrag.indexes.retriever import CrossLingualRetriever

__all__ = ["XlragChatEngine", "XlragStreamingChatResponse", "build_chat_engine"]


def _text(out: dict[str, Any]) -> str:
    answer = out["answer"]
    return answer.answer or answer.raw_output  # what the chat keeps as the turn's answer


def _metadata(out: dict[str, Any]) -> dict[str, Any]:
    return {"grounded_answer": out["answer"], "trace": out["trace"]}


def _response(out: dict[str, Any]) -> AgentChatResponse:
    return AgentChatResponse(response=_text(out), source_nodes=citation_nodes(out["answer"]),
                             metadata=_metadata(out))


def _turns(history: Sequence[ChatMessage]) -> list[Turn]:
    """Earlier messages as the chat's turns: each user message answered by the next assistant
    message (system messages are skipped). Turns given this way carry no sources."""
    turns, asked = [], None
    for i, m in enumerate(history):
        if m.role == MessageRole.SYSTEM:
            continue
        if m.role == MessageRole.USER and asked is None:
            asked = m.content or ""
        elif m.role == MessageRole.ASSISTANT and asked is not None:
            lang = LinguaDetector().detect(asked) or ""
            turns.append(Turn(question=asked, standalone=asked, lang=lang, answer=m.content or "", mode=GIVEN,
                              sources=[]))
            asked = None
        else:
            raise ConfigError(f"chat_history must alternate user and assistant messages; message {i} is "
                              f"{'another' if m.role == MessageRole.USER else 'a'} {m.role.value} message")
    if asked is not None:
        raise ConfigError("chat_history ends with an unanswered user message; give the question as the message")
    return turns


@dataclass
class XlragStreamingChatResponse(StreamingAgentChatResponse):
    """LlamaIndex's streaming chat response, settled when its stream has been read:
    ``response`` becomes the checked answer (the tokens are the model's raw reply, and a
    repair may change it), ``source_nodes`` its valid citations, ``metadata`` as ``chat``'s."""

    metadata: dict[str, Any] | None = None
    checked: str | None = field(default=None, repr=False)  # the answer, once the stream has ended

    def _settle(self, out: dict[str, Any]) -> None:
        self.source_nodes[:] = citation_nodes(out["answer"])
        self.metadata = _metadata(out)
        self.checked = _text(out)

    def _deltas(self, items: Iterator[Any]) -> Generator[ChatResponse, None, None]:
        said = ""
        for item in items:
            if isinstance(item, AnswerToken):
                said += item.text
                yield ChatResponse(message=ChatMessage(role=MessageRole.ASSISTANT, content=said), delta=item.text)
            else:
                self._settle(item)

    async def _adeltas(self, items: AsyncIterator[Any]) -> AsyncGenerator[ChatResponse, None]:
        said = ""
        async for item in items:
            if isinstance(item, AnswerToken):
                said += item.text
                yield ChatResponse(message=ChatMessage(role=MessageRole.ASSISTANT, content=said), delta=item.text)
            else:
                self._settle(item)

    @property
    def response_gen(self) -> Generator[str, None, None]:
        yield from super().response_gen
        # LlamaIndex set response to the tokens joined; the answer is what the checks passed
        self.response = self.checked if self.checked is not None else self.response

    async def async_response_gen(self) -> AsyncGenerator[str, None]:
        async for token in super().async_response_gen():
            yield token
        self.response = self.checked if self.checked is not None else self.response


class XlragChatEngine(BaseChatEngine):
    """A LlamaIndex chat engine over xlrag's chat graph (condense in the user's language, then
    the agent). Build one with :func:`build_chat_engine`."""

    def __init__(self, graph: Any, checkpointer: Any, pipeline: Pipeline | None = None):
        self.graph = graph
        self.checkpointer = checkpointer
        self.pipeline = pipeline
        self._thread = uuid.uuid4().hex

    @property
    def _config(self) -> RunnableConfig:
        return {"configurable": {"thread_id": self._thread}}

    # -- the conversation -------------------------------------------------------------------
    @property
    def chat_history(self) -> list[ChatMessage]:
        turns: list[Turn] = self.graph.get_state(self._config).values.get("turns") or []
        return [m for t in turns for m in (ChatMessage(role=MessageRole.USER, content=t.question),
                                           ChatMessage(role=MessageRole.ASSISTANT, content=t.answer))]

    def reset(self) -> None:
        self.checkpointer.delete_thread(self._thread)
        self._thread = uuid.uuid4().hex

    def _restart(self, history: Sequence[ChatMessage] | None) -> None:
        run(self._restarted(history))

    async def _arestart(self, history: Sequence[ChatMessage] | None) -> None:
        await arun(self._restarted(history))

    def _restarted(self, history: Sequence[ChatMessage] | None) -> Steps[None]:
        if history is None:
            return
        turns = _turns(history)
        self.reset()
        if turns:
            # as if "remember" had just kept them: the next message starts a turn after them
            yield Call(self.graph.update_state, (self._config, {"turns": turns}, "remember"), self.graph.aupdate_state)

    # -- chat ---------------------------------------------------------------------------------
    def chat(self, message: str, chat_history: list[ChatMessage] | None = None) -> AgentChatResponse:
        self._restart(chat_history)
        return _response(self.graph.invoke({"question": message}, self._config))

    async def achat(self, message: str, chat_history: list[ChatMessage] | None = None) -> AgentChatResponse:
        await self._arestart(chat_history)
        return _response(await self.graph.ainvoke({"question": message}, self._config))

    def stream_chat(self, message: str, chat_history: list[ChatMessage] | None = None
                    ) -> XlragStreamingChatResponse:
        self._restart(chat_history)
        response = XlragStreamingChatResponse(is_writing_to_memory=False)
        response.chat_stream = response._deltas(chat_turn(self.graph, {"question": message}, self._config))
        return response

    async def astream_chat(self, message: str, chat_history: list[ChatMessage] | None = None
                           ) -> XlragStreamingChatResponse:
        await self._arestart(chat_history)
        response = XlragStreamingChatResponse(is_writing_to_memory=False)
        response.achat_stream = response._adeltas(achat_turn(self.graph, {"question": message}, self._config))
        return response

    def close(self) -> None:
        """Stop the search threads of the retriever the engine opened (unusable afterwards)."""
        if self.pipeline is not None:
            self.pipeline.close()


@strict_kwargs
def build_chat_engine(config: XlragConfig | str | Path | None = None, *, llm: Runnable | None = None,
                      retriever: CrossLingualRetriever | None = None) -> XlragChatEngine:
    """A LlamaIndex chat engine that chats as ``xlrag chat`` does: follow-ups condensed in the
    user's language, answers checked and repaired by the agent, the cited passages as
    ``source_nodes``.

    ``config`` is an :class:`~xlrag.config.XlragConfig`, a path to a YAML config file, or
    None (``./xlrag.yaml`` if present, ``XLRAG_*`` variables, defaults); ``llm`` and
    ``retriever`` replace the ones it would build. The conversation is kept in memory.
    """
    from langgraph.checkpoint.memory import InMemorySaver

    from xlrag.agents.build import Stack
    from xlrag.agents.chat import strict_serde

    stack = Stack.build(config, llm=llm, retriever=retriever)
    saver = InMemorySaver(serde=strict_serde())
    return XlragChatEngine(stack.chat(saver), saver, stack.pipeline)
