"""Multi-turn chat over the corpus, in the user's language, kept by a LangGraph checkpointer.

    condense (follow-ups only) → agent (the verify-and-repair graph) → remember

A follow-up ("¿y cuántos puntos permitió?") is rewritten into a standalone question by
xlrag's localized ``condense`` prompt, *in the user's language*: LangChain's
history-aware retriever and LlamaIndex's condense-question engine rewrite it into English,
and the bot then drifts into English. The rewrite's language is checked with lingua
before retrieval; a rewrite in another language (or an empty one) is replaced by the
previous question and the follow-up together, which stay in the user's language.

Each session (LangGraph ``thread_id``) keeps its last ``agent.chat.retention_turns`` turns,
each with its own sources. :func:`open_checkpointer` opens the SQLite store for
``xlrag chat --session``: deserialisation is restricted to xlrag's own types, and
:func:`prune` keeps one checkpoint per session and at most ``retention_sessions`` sessions.
"""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Required, TypedDict

from langchain_core.runnables import RunnableConfig, RunnableLambda
from pydantic import BaseModel, ConfigDict, Field

from xlrag.agents.graph import AgentOutput
from xlrag.chains.state import AnswerToken
from xlrag.config import ChatConfig
from xlrag.detect import question_language
from xlrag.formats import AnswerFormat
from xlrag.languages import native_name
from xlrag.modes import IRMode
from xlrag.schema import Citation, GroundedAnswer, Hit, Passage, Query
from xlrag.steps import Call, Steps, arun, run
from xlrag.text import first_line
from xlrag.trace import Trace

__all__ = ["ChatInput", "ChatOutput", "Condensed", "Source", "Turn", "aagent_run", "achat_turn",
           "agent_run", "chat_graph", "chat_turn", "open_checkpointer", "prune", "strict_serde"]


class Source(BaseModel):
    """A passage an answer cites, as the turn keeps it."""

    model_config = ConfigDict(frozen=True)

    marker: int
    passage_id: str | None
    doc_id: str | None
    lang: str | None
    source: str = Field(description="model or post_hoc")
    title: str | None = None
    text: str = ""


class Turn(BaseModel):
    model_config = ConfigDict(frozen=True)

    question: str
    standalone: str = Field(description="what was retrieved with: the question, or its condensed form")
    lang: str
    answer: str
    mode: str
    sources: list[Source]


class Condensed(BaseModel):
    model_config = ConfigDict(frozen=True)

    question: str
    rewritten: bool
    detail: str


class ChatInput(TypedDict, total=False):
    question: Required[str]
    lang: str | None
    mode: str | None
    # given: the question already made into a Query (the server's admitted one); it goes on to
    # the agent with its id, holding the condensed question when a follow-up was rewritten
    query: Query


class ChatOutput(AgentOutput):
    turns: list[Turn]


class ChatState(ChatInput, total=False):
    turns: list[Turn]
    condensed: Condensed
    result: AgentOutput


def sources_of(answer: GroundedAnswer) -> list[Source]:
    shown = {h.id: h for h in answer.passages}
    out, seen = [], set()
    for c in answer.citations:
        if not c.valid or c.passage_id is None or c.passage_id in seen:
            continue
        seen.add(c.passage_id)
        hit = shown.get(c.passage_id)
        out.append(Source(marker=c.marker, passage_id=c.passage_id, doc_id=c.doc_id, lang=c.lang, source=c.source,
                          title=hit.passage.title if hit else None, text=hit.passage.text if hit else ""))
    return out


class _Chat:
    def __init__(self, agent: Any, llm: Any, prompts: Any, config: ChatConfig):
        from langgraph.constants import TAG_NOSTREAM

        self.agent = agent
        self.llm = llm.with_config(tags=[TAG_NOSTREAM])  # the rewrite is not the answer
        self.prompts = prompts
        self.config = config

    def _lang(self, s: ChatState) -> str:
        return s.get("lang") or question_language(s["question"])

    def _prompt(self, s: ChatState, lang: str) -> str | None:
        turns = (s.get("turns") or [])[-self.config.history_turns:] if self.config.history_turns else []
        if not turns:
            return None
        q, a = self.prompts.render("question_label", lang), self.prompts.render("answer_label", lang)
        history = "\n".join(f"{q}: {t.question}\n{a}: {t.answer}" for t in turns)
        return self.prompts.render("condense", lang, language=native_name(lang), history=history,
                                   question=s["question"])

    def _check(self, s: ChatState, lang: str, reply: Any) -> Condensed:
        from xlrag.checks.language import judge_language

        text = first_line(reply if isinstance(reply, str) else str(getattr(reply, "content", reply)),
                          strip='"“”«»')
        verdict = judge_language(text, lang)
        if text and any(ch.isalnum() for ch in text) and verdict.status != "wrong":
            return Condensed(question=text, rewritten=True, detail=f"condensed; language {verdict.status}")
        previous = s["turns"][-1].standalone
        why = f"the rewrite was in {verdict.detected}" if verdict.status == "wrong" else "the rewrite was empty"
        return Condensed(question=f"{previous} {s['question']}", rewritten=False,
                         detail=f"{why}, not {lang}: searched with the previous question and the follow-up")

    def condense(self, s: ChatState, config: RunnableConfig) -> dict:
        return run(self._condense(s, config))

    async def acondense(self, s: ChatState, config: RunnableConfig) -> dict:
        return await arun(self._condense(s, config))

    def _condense(self, s: ChatState, config: RunnableConfig) -> Steps[dict]:
        lang = yield Call(self._lang, (s,))
        prompt = self._prompt(s, lang)
        if prompt is None:
            return {"lang": lang, "condensed": Condensed(question=s["question"], rewritten=False, detail="first turn")}
        reply = yield Call(self.llm.invoke, ([("user", prompt)], config), self.llm.ainvoke)
        return {"lang": lang, "condensed": (yield Call(self._check, (s, lang, reply)))}

    def _agent_input(self, s: ChatState) -> dict[str, Any]:
        c = s["condensed"]
        out: dict[str, Any] = {"question": c.question, "lang": s["lang"], "mode": s.get("mode"),
               "original_question": s["question"] if c.question != s["question"] else None}
        if (admitted := s.get("query")) is not None:
            # what is searched is the condensed question, in the language the turn settled on
            # (the admitted one's when the request named one: the same, written as make_query writes it)
            out["query"] = admitted.model_copy(update={"question": c.question, "lang": admitted.lang or s["lang"]})
        return out

    def answer(self, s: ChatState, config: RunnableConfig) -> dict:
        return {"result": self.agent.invoke(self._agent_input(s), config)}

    async def aanswer(self, s: ChatState, config: RunnableConfig) -> dict:
        return {"result": await self.agent.ainvoke(self._agent_input(s), config)}

    def remember(self, s: ChatState) -> dict:
        # the agent's trace already holds the follow-up as typed (AgentInput.original_question)
        answer, trace = s["result"]["answer"], s["result"]["trace"]
        turn = Turn(question=s["question"], standalone=s["condensed"].question, lang=s["lang"],
                    answer=answer.answer or answer.raw_output, mode=trace.mode, sources=sources_of(answer))
        turns = [*(s.get("turns") or []), turn][-self.config.retention_turns:]
        return {"turns": turns, "answer": answer, "trace": trace}


def chat_graph(agent: Any, llm: Any, prompts: Any, config: ChatConfig, checkpointer: Any = None) -> Any:
    """The chat graph around a compiled agent; :func:`xlrag.agents.build.build_chat` builds both."""
    from langgraph.graph import END, START, StateGraph

    chat = _Chat(agent, llm, prompts, config)

    class _State(ChatState, total=False):
        answer: GroundedAnswer
        trace: Trace

    g = StateGraph(_State, input_schema=ChatInput, output_schema=ChatOutput)
    g.add_node("condense", RunnableLambda(chat.condense, afunc=chat.acondense, name="condense"))
    g.add_node("agent", RunnableLambda(chat.answer, afunc=chat.aanswer, name="agent"))
    g.add_node("remember", RunnableLambda(chat.remember, name="remember"))
    g.add_edge(START, "condense")
    g.add_edge("condense", "agent")
    g.add_edge("agent", "remember")
    g.add_edge("remember", END)
    return g.compile(checkpointer=checkpointer, name="xlrag_chat")


# -- the session store ------------------------------------------------------------------------

# what a chat checkpoint may hold besides plain data: anything else is not rebuilt on load
ALLOWED_TYPES: tuple[tuple[str, str], ...] = tuple(
    (cls.__module__, cls.__name__) for cls in (Turn, Source, Condensed, Trace, GroundedAnswer))


# a run's output: the last root state holding all of these (the chat's after ``remember``, the
# agent's after ``finish``), as invoke returns it
CHAT_FINAL = tuple(k for k in ChatOutput.__annotations__ if k in ChatOutput.__required_keys__)  # answer, trace, turns
AGENT_FINAL = tuple(k for k in AgentOutput.__annotations__ if k in AgentOutput.__required_keys__)  # answer, trace
# keys of the agent's output that only some runs have (perspectives): kept when there
AGENT_OPTIONAL = tuple(AgentOutput.__optional_keys__)


@dataclass
class _Decoder:
    """LangGraph's stream of a chat turn or an agent run, read once for every front door: the
    answering model runs inside the agent, a subgraph of the chat, so its tokens come only
    with ``subgraphs=True``; the output is the last root state holding the ``final`` keys."""

    final_keys: tuple[str, ...]
    calls: list[str] = field(default_factory=list)
    final: dict[str, Any] | None = None

    def read(self, namespace: tuple, mode: str, data: Any) -> AnswerToken | None:
        from xlrag.agents.graph import ANSWER_TAG

        if mode == "messages":
            chunk, meta = data
            text = chunk.content if isinstance(chunk.content, str) else ""
            if not text or ANSWER_TAG not in (meta.get("tags") or []):
                return None
            if not self.calls or self.calls[-1] != chunk.id:
                self.calls.append(chunk.id)  # a new model call: the first answer, or a repair's
            return AnswerToken(text=text, attempt=len(self.calls) - 1)
        if not namespace and all(k in data for k in self.final_keys):
            self.final = {k: data[k] for k in (*self.final_keys, *AGENT_OPTIONAL) if k in data}
        return None


_STREAM = {"stream_mode": ["messages", "values"], "subgraphs": True}


def _run(graph: Any, inputs: dict[str, Any], config: RunnableConfig | None, final: tuple[str, ...]
         ) -> Iterator[AnswerToken | dict[str, Any]]:
    decoder = _Decoder(final)
    for namespace, mode, data in graph.stream(inputs, config, **_STREAM):
        if (token := decoder.read(namespace, mode, data)) is not None:
            yield token
    if decoder.final is not None:
        yield decoder.final


async def _arun(graph: Any, inputs: dict[str, Any], config: RunnableConfig | None, final: tuple[str, ...]
                ) -> AsyncIterator[AnswerToken | dict[str, Any]]:
    decoder = _Decoder(final)
    async for namespace, mode, data in graph.astream(inputs, config, **_STREAM):
        if (token := decoder.read(namespace, mode, data)) is not None:
            yield token
    if decoder.final is not None:
        yield decoder.final


def chat_turn(graph: Any, inputs: dict[str, Any], config: RunnableConfig) -> Iterator[AnswerToken | dict[str, Any]]:
    """One chat turn: the answering model's tokens as they come, then the turn's output
    (``{"answer", "trace", "turns"}``) last, unless the graph ended without one."""
    return _run(graph, inputs, config, CHAT_FINAL)


def achat_turn(graph: Any, inputs: dict[str, Any], config: RunnableConfig
               ) -> AsyncIterator[AnswerToken | dict[str, Any]]:
    """:func:`chat_turn`, awaiting the graph."""
    return _arun(graph, inputs, config, CHAT_FINAL)


def agent_run(graph: Any, inputs: dict[str, Any], config: RunnableConfig | None = None
              ) -> Iterator[AnswerToken | dict[str, Any]]:
    """One run of the agent graph (:func:`~xlrag.agents.build.build_agent`): the answering
    model's tokens as they come, then its output (``{"answer", "trace"}``) last."""
    return _run(graph, inputs, config, AGENT_FINAL)


def aagent_run(graph: Any, inputs: dict[str, Any], config: RunnableConfig | None = None
               ) -> AsyncIterator[AnswerToken | dict[str, Any]]:
    """:func:`agent_run`, awaiting the graph."""
    return _arun(graph, inputs, config, AGENT_FINAL)


def _allowed() -> list[tuple[str, str]]:
    from xlrag.trace import CheckResult, Repair, RepairStep, Timing

    # IRMode: a mode from the config is kept as the enum (a str) in the turn's state
    extra = (CheckResult, RepairStep, Timing, Repair, AnswerFormat, IRMode, Citation, Hit, Passage, Query)
    return [*ALLOWED_TYPES, *((c.__module__, c.__name__) for c in extra)]


def strict_serde() -> Any:
    """LangGraph's serializer, rebuilding xlrag's own types and nothing else (no pickle)."""
    from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

    return JsonPlusSerializer(pickle_fallback=False, allowed_msgpack_modules=_allowed())


def open_checkpointer(path: str | Path) -> Any:
    """A SQLite checkpointer for chat sessions at ``path`` (created if missing)."""
    from langgraph.checkpoint.sqlite import SqliteSaver

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    # check_same_thread=False: the saver serialises access with its own lock, and the async
    # graph runs its sync checkpoint calls on worker threads
    conn = sqlite3.connect(str(path), check_same_thread=False)
    saver = SqliteSaver(conn, serde=strict_serde())
    saver.setup()
    return saver


def prune(saver: Any, thread_id: str, keep_sessions: int) -> dict[str, int]:
    """Keep ``thread_id``'s newest checkpoint only, and the ``keep_sessions`` most recently
    used sessions. Returns how many checkpoints and sessions were removed."""
    with saver.lock, saver.conn:
        cur = saver.conn.cursor()
        cur.execute("SELECT checkpoint_id FROM checkpoints WHERE thread_id = ? ORDER BY checkpoint_id DESC LIMIT 1",
                    (thread_id,))
        row = cur.fetchone()
        removed = 0
        if row is not None:
            removed = cur.execute("DELETE FROM checkpoints WHERE thread_id = ? AND checkpoint_id != ?",
                                  (thread_id, row[0])).rowcount
            cur.execute("DELETE FROM writes WHERE thread_id = ? AND checkpoint_id != ?", (thread_id, row[0]))
        # checkpoint ids are time-ordered UUIDv6: the newest per thread says when it was used
        stale = [r[0] for r in cur.execute(
            "SELECT thread_id FROM checkpoints GROUP BY thread_id ORDER BY MAX(checkpoint_id) DESC LIMIT -1 OFFSET ?",
            (keep_sessions,)).fetchall()]
        for t in stale:
            cur.execute("DELETE FROM checkpoints WHERE thread_id = ?", (t,))
            cur.execute("DELETE FROM writes WHERE thread_id = ?", (t,))
    return {"checkpoints": removed, "sessions": len(stale)}
