"""The agent routes a contested question to the perspectives view when the caller asks for it."""

from __future__ import annotations

import asyncio

from tests.perspectives.conftest import QUESTION, ByPrompt
from tests.perspectives.test_view import AGREE, DISAGREE
from xlrag.agents import build_agent
from xlrag.config import XlragConfig

RULE = {"names": ["Panthers"], "relevant_langs": ["ru", "es"]}


def agent(retriever, answers, rules=(RULE,)):
    llm = ByPrompt(answers=answers)
    cfg = XlragConfig(agent={"mode": "auto", "rules": list(rules), "tools": "off"}, retrieval={"k": 3})
    return build_agent(cfg, llm=llm, retriever=retriever), llm


def test_a_contested_question_asked_for_perspectives_gets_them_and_no_blended_answer(retriever):
    graph, llm = agent(retriever, DISAGREE)
    out = graph.invoke({"question": QUESTION, "view": "perspectives"})
    view, answer, trace = out["perspectives"], out["answer"], out["trace"]
    assert view.choice.source == "rule" and [p.lang for p in view.perspectives] == ["en", "ru", "es"]
    assert view.status == "disagreement" and len(view.disagreements) == 2
    assert answer.answer is None and answer.flags == ["perspectives_disagreement"] and not answer.citations
    assert trace.mode == "perspectives" and "rule naming 'Panthers'" in trace.mode_reason
    # the Russian side's support check translates the question and its answer into Russian (#51)
    assert trace.retrieved_langs == {"en": 3, "ru": 3, "es": 3} and llm.calls == {"answer": 3, "other": 2}


def test_when_the_perspectives_agree_the_answer_is_the_consensus_as_one_perspective_gave_it(retriever):
    graph, _ = agent(retriever, AGREE)
    out = asyncio.run(graph.ainvoke({"question": QUESTION, "view": "perspectives"}))
    view, answer = out["perspectives"], out["answer"]
    assert view.status == "consensus" and view.consensus[0].chosen.lang == "en"
    assert answer.answer == "308 points." and "perspectives_consensus" in answer.flags
    assert {c.lang for c in answer.citations if c.valid} == {"en"}


def test_caller_named_languages_route_too(retriever):
    graph, _ = agent(retriever, DISAGREE, rules=())
    out = graph.invoke({"question": QUESTION, "view": "perspectives", "relevant_langs": ["ru"]})
    assert [p.lang for p in out["perspectives"].perspectives] == ["en", "ru"]
    assert "the caller named the relevant languages ['ru']" in out["trace"].mode_reason


def test_an_uncontested_question_gets_one_answer_and_the_trace_says_why(retriever):
    graph, llm = agent(retriever, {**AGREE, "de": ("308", "308 points.")}, rules=())
    out = graph.invoke({"question": QUESTION, "view": "perspectives"})
    assert "perspectives" not in out and out["answer"].answer == "308 points."
    assert "perspectives were asked for, but no agent rule or disputed territory names" in out["trace"].mode_reason
    assert llm.calls == {"answer": 1}


def test_without_asking_for_perspectives_a_rule_routes_to_rel_langs_as_before(retriever):
    graph, llm = agent(retriever, AGREE)
    out = graph.invoke({"question": QUESTION})
    assert "perspectives" not in out and out["trace"].mode == "rel_langs" and llm.calls == {"answer": 1}


def test_perspectives_is_the_result_and_the_runnable_that_makes_it_is_the_view(retriever):
    """``perspectives`` names the output (the result key, ``Perspectives``); what makes it is the
    perspectives view, ``perspectives_view`` on the stack and the agent alike (#35)."""
    import pytest

    from xlrag.agents.build import Stack
    from xlrag.agents.graph import XlragAgent
    from xlrag.perspectives.view import PerspectivesView

    cfg = XlragConfig(agent={"mode": "auto", "rules": [RULE], "tools": "off"}, retrieval={"k": 3})
    stack = Stack.build(cfg, llm=ByPrompt(answers=AGREE), retriever=retriever)
    agent_nodes = stack._agent(False)
    assert isinstance(stack.perspectives_view, PerspectivesView)
    assert agent_nodes.perspectives_view is stack.perspectives_view
    for one in (stack, agent_nodes):
        assert not hasattr(one, "perspectives")  # 0.1.0 never shipped the old name
    with pytest.raises(TypeError, match="perspectives"):
        XlragAgent(stack.pipeline, cfg.agent, perspectives=lambda: stack.perspectives_view)
