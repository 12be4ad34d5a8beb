"""Chat: follow-ups condensed in the user's language, sessions kept and bounded on disk."""

from __future__ import annotations

import pytest
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage

from xlrag.agents.build import build_chat
from xlrag.agents.chat import Turn, open_checkpointer, prune
from xlrag.config import LLMConfig, XlragConfig

FIRST = "¿Qué equipo lideró la NFL en intercepciones, con 24?"
FOLLOW_UP = "¿y cuántos puntos permitió?"
ANSWER = ("Cited Documents: <doc0>\nAnswer: Los Panthers.\n"
          "Explanation: Según <doc0>, los Panthers lideraron la NFL con 24 intercepciones.")


def _session(thread: str) -> dict:
    return {"configurable": {"thread_id": thread}}


@pytest.mark.slow
def test_spanish_follow_up_is_condensed_in_spanish_and_retrieves_the_passage(retriever):
    from xlrag.chains.llms import build_llm
    from xlrag.detect import LinguaDetector

    llm = build_llm(LLMConfig(model="qwen2.5-coder-1.5b-instruct", max_tokens=96, n_threads=1))
    chat = build_chat(XlragConfig(agent={"mode": "qlang", "max_repairs": 1}, retrieval={"k": 2}),
                      llm=llm, retriever=retriever)
    chat.invoke({"question": FIRST}, _session("es"))
    out = chat.invoke({"question": FOLLOW_UP}, _session("es"))
    trace, answer = out["trace"], out["answer"]
    standalone = trace.question
    assert trace.original_question == FOLLOW_UP and standalone != FOLLOW_UP
    assert LinguaDetector().detect(standalone) == "es", standalone  # not rewritten into English
    # standalone: it names what "permitió" refers to (the team, by name or by description)
    assert "puntos" in standalone.lower() and len(standalone.split()) > len(FOLLOW_UP.split()) + 2, standalone
    assert answer.passages[0].doc_id == "xquad-00-es"
    assert [t.question for t in out["turns"]] == [FIRST, FOLLOW_UP]
    assert all(t.lang == "es" for t in out["turns"])


def test_a_rewrite_in_another_language_is_not_used(retriever):
    # the condense call answers in English: the chat searches with the previous
    # question and the follow-up instead, both Spanish
    llm = GenericFakeChatModel(messages=iter([
        AIMessage(ANSWER), AIMessage("How many points did the Panthers allow?"), AIMessage(ANSWER)]))
    chat = build_chat(XlragConfig(agent={"mode": "qlang"}, retrieval={"k": 2}), llm=llm, retriever=retriever)
    chat.invoke({"question": FIRST}, _session("t"))
    out = chat.invoke({"question": FOLLOW_UP}, _session("t"))
    assert out["trace"].question == f"{FIRST} {FOLLOW_UP}"
    assert out["trace"].original_question == FOLLOW_UP


def test_sessions_are_kept_on_disk_bounded_and_restricted_to_xlrag_types(tmp_path, retriever):
    db = tmp_path / "chat.sqlite"
    cfg = XlragConfig(agent={"mode": "qlang", "chat": {"retention_turns": 2, "retention_sessions": 2,
                                                       "history_turns": 1}}, retrieval={"k": 2})
    replies = iter([AIMessage(ANSWER) if i % 2 == 0 else AIMessage("¿Cuántos puntos permitieron los Panthers?")
                    for i in range(40)])

    def turn(thread: str, question: str) -> dict:
        saver = open_checkpointer(db)  # a new process each time, as `xlrag chat --session` is
        chat = build_chat(cfg, llm=GenericFakeChatModel(messages=replies), retriever=retriever, checkpointer=saver)
        out = chat.invoke({"question": question}, _session(thread))
        prune(saver, thread, cfg.agent.chat.retention_sessions)
        saver.conn.close()
        return out

    turn("a", FIRST)
    out = turn("a", FOLLOW_UP)
    assert [t.question for t in out["turns"]] == [FIRST, FOLLOW_UP]
    assert isinstance(out["turns"][0], Turn) and out["turns"][0].sources[0].doc_id.startswith("xquad-")
    out = turn("a", "¿Y cuántas capturas?")
    assert len(out["turns"]) == 2  # retention_turns
    turn("b", FIRST)
    turn("c", FIRST)

    import sqlite3

    conn = sqlite3.connect(db)
    per_thread = dict(conn.execute("SELECT thread_id, COUNT(*) FROM checkpoints GROUP BY thread_id").fetchall())
    assert per_thread == {"b": 1, "c": 1}  # one checkpoint each; the oldest session is gone
    conn.close()


def test_foreign_types_in_a_checkpoint_are_not_rebuilt(tmp_path):
    from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

    from xlrag.agents.chat import strict_serde

    class Intruder(Turn):
        pass

    permissive = JsonPlusSerializer(allowed_msgpack_modules=True)
    blob = permissive.dumps_typed(Intruder(question="q", standalone="q", lang="es", answer="a", mode="qlang",
                                           sources=[]))
    strict = strict_serde()
    assert not isinstance(strict.loads_typed(blob), Intruder)
    own = permissive.dumps_typed(Turn(question="q", standalone="q", lang="es", answer="a", mode="qlang", sources=[]))
    assert isinstance(strict.loads_typed(own), Turn)
