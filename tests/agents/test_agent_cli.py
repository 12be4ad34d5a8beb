"""`xlrag ask --agent` and `xlrag chat`, in-process, over the demo index and a real local model."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from tests.clitools import error_line, run
from xlrag.cli import app

GEMMA = "local:gemma-3-270m"


@pytest.mark.slow
def test_ask_agent_json_carries_the_trace(demo_index, monkeypatch):
    monkeypatch.setenv("XLRAG_LLM__MAX_TOKENS", "48")
    monkeypatch.setenv("XLRAG_LLM__N_THREADS", "1")
    result = run("ask", "¿Cuántos puntos permitió la defensa de los Panthers?", "--index-dir", demo_index,
                 "--agent", "--json", "--llm", GEMMA, "--mode", "qlang_en")
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    trace = data["trace"]
    assert data["lang"] == "es" and trace["mode"] == "qlang_en" and trace["mode_reason"]
    assert {c["check"] for c in trace["checks"]} >= {"language", "citations"}
    assert set(trace["retrieved_langs"]) <= {"es", "en"}
    # whatever the small model did, the answer has valid citations or says it has none
    assert all(c["valid"] for c in data["citations"])
    assert data["citations"] or "unrepaired_citations" in data["flags"]
    # what is left unrepaired had its repair tried: post-hoc citations, a translation the
    # 48-token budget cut off (the untranslated answer kept, and the trace says why), or, for
    # an answer without substance, the extractive re-ask; and the reader is shown the flag
    from xlrag.checks.substance import FLAGS

    tried = [r["repair"] for r in trace["repairs"]]
    last = tried[-1] if tried else None
    left = [c for c in trace["unrepaired"] if c not in FLAGS]
    assert all("extract" in tried and FLAGS[c] in data["flags"] for c in trace["unrepaired"] if c in FLAGS)
    assert left == [] or last == "post_hoc" or (
        last == "translate" and "not translated" in trace["repairs"][-1]["detail"] and left == ["language"])


@pytest.mark.slow
def test_chat_repl_answers_and_takes_its_commands(demo_index, monkeypatch):
    monkeypatch.setenv("XLRAG_LLM__MAX_TOKENS", "48")
    monkeypatch.setenv("XLRAG_LLM__N_THREADS", "1")
    lines = ["/help", "/mode qlnag", "/mode qlang_en", "¿Cuántos puntos permitió la defensa de los Panthers?",
             "/sources", "/trace", "/reset", "/sources", "/bogus", "/quit"]
    result = CliRunner().invoke(app, ["chat", "--index-dir", str(demo_index), "--llm", GEMMA],
                                input="\n".join(lines) + "\n")
    assert result.exit_code == 0, result.output
    text = result.output
    assert "/sources" in text and "did you mean 'qlang'" in text and "mode: qlang_en" in text
    assert "answer" in text and "<doc" in text  # the answer, then its sources
    assert "mode qlang_en: requested for this question" in text  # the trace
    assert "session cleared" in text and "no answer yet" in text
    assert "unknown command /bogus" in text


def test_agent_rejects_other_formats_in_one_line(demo_index):
    line = error_line(run("ask", "¿Qué?", "--index-dir", demo_index, "--agent", "--format", "mc",
                          "--option", "a", "--option", "b"))
    assert "--agent answers in the citation format" in line


def test_chat_rejects_an_unknown_mode_in_one_line(demo_index):
    assert "did you mean 'balanced'" in error_line(run("chat", "--index-dir", demo_index, "--mode", "balnced"))


def test_the_repl_streams_the_answering_model_only(retriever, capsys):
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage

    from tests.agents.test_agent import ENGLISH, QUESTION, SPANISH
    from xlrag.agents.build import build_chat
    from xlrag.cli.chatting import _Repl
    from xlrag.config import XlragConfig

    # English first (streamed), then the repair's Spanish (streamed too); no helper call streams
    llm = GenericFakeChatModel(messages=iter([AIMessage(ENGLISH), AIMessage(SPANISH)]))
    graph = build_chat(XlragConfig(agent={"mode": "qlang_en", "quote": False}, retrieval={"k": 3}), llm=llm,
                       retriever=retriever)
    repl = _Repl(graph, "t", None, 5, None, None)
    assert repl.ask(QUESTION) == ENGLISH + SPANISH
    printed = capsys.readouterr().out
    assert "after regenerate_language" in printed and "sources <doc0>" in printed
