"""The tool-calling agent: chosen for models that take tools, its calls traced, its markers valid."""

from __future__ import annotations

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage
from pydantic import Field

from tests.agents.test_agent import QUESTION
from xlrag.agents.build import build_agent
from xlrag.chains.profiles import profile_for
from xlrag.config import XlragConfig


class ScriptedToolModel(GenericFakeChatModel):
    """Replays replies, tool calls included; ``bind_tools`` records the tools it was given."""

    bound: list[str] = Field(default_factory=list)

    def bind_tools(self, tools, **kwargs):
        self.bound.extend(t["function"]["name"] for t in tools)
        return self


def test_a_model_with_tools_searches_translates_and_cites_what_it_found(retriever):
    replies = iter([
        AIMessage("", tool_calls=[{"name": "search", "args": {"query": "Panthers defensa puntos 308",
                                                                "languages": ["en"]}, "id": "c1"}]),
        AIMessage("", tool_calls=[{"name": "translate", "args": {"text": "points allowed", "language": "es"},
                                   "id": "c2"}, {"name": "Nope", "args": {}, "id": "c3"}]),
        AIMessage("puntos permitidos"),  # the translator's own call
        AIMessage("Cited Documents: <doc3>\nAnswer: Los Panthers permitieron 308 puntos.\n"
                  "Explanation: Según <doc3>, la defensa solo permitió 308 puntos."),
        # the Spanish answer's words are not in the English <doc3>: verify translates it, and
        # its question, to look beyond the question's words
        AIMessage("The Panthers allowed 308 points."),
        AIMessage("How many points did the Panthers let slip on defense?"),
    ])
    llm = ScriptedToolModel(messages=replies)
    assert profile_for(llm).supports_tools(llm)
    agent = build_agent(XlragConfig(agent={"mode": "qlang"}, retrieval={"k": 3}), llm=llm, retriever=retriever)
    out = agent.invoke({"question": QUESTION})
    answer, trace = out["answer"], out["trace"]
    assert llm.bound == ["search", "translate"]
    assert [t.name for t in trace.tool_calls] == ["search", "translate", "Nope"]
    assert trace.tool_calls[1].result == "puntos permitidos"
    assert "unknown tool" in trace.tool_calls[2].result
    # three passages from the qlang retrieval, then the English search's: <doc3> is the first of those
    assert len(answer.passages) > 3 and answer.passages[3].lang == "en"
    assert [(c.marker, c.valid, c.source) for c in answer.citations] == [(3, True, "model")]
    assert trace.unrepaired == [] and trace.repairs == []


def test_tools_off_or_a_model_without_them_runs_the_fixed_graph(retriever):
    from tests.agents.test_agent import SPANISH

    llm = ScriptedToolModel(messages=iter([AIMessage(SPANISH)]))
    agent = build_agent(XlragConfig(agent={"mode": "qlang", "tools": "off"}, retrieval={"k": 3}), llm=llm,
                        retriever=retriever)
    assert "plan" not in agent.get_graph().nodes and "generate" in agent.get_graph().nodes
    plain = GenericFakeChatModel(messages=iter([]))
    assert not profile_for(plain).supports_tools(plain)


def test_tools_on_with_a_model_without_them_is_a_one_line_error(retriever):
    import pytest

    from xlrag.errors import ConfigError

    with pytest.raises(ConfigError, match="has no tool calling"):
        build_agent(XlragConfig(agent={"tools": "on"}), llm=GenericFakeChatModel(messages=iter([])),
                    retriever=retriever)


def test_a_translate_tool_call_cut_off_at_max_tokens_tells_the_model_why(retriever):
    replies = iter([
        AIMessage("", tool_calls=[{"name": "translate", "args": {"text": "points allowed by the defense",
                                                                   "language": "es"}, "id": "c1"}]),
        AIMessage("puntos permitidos por", response_metadata={"finish_reason": "length"}),  # the translator's
        AIMessage("Cited Documents: <doc0>\nAnswer: Los Panthers permitieron 308 puntos.\n"
                  "Explanation: Según <doc0>, la defensa solo permitió 308 puntos."),
    ])
    llm = ScriptedToolModel(messages=replies)
    agent = build_agent(XlragConfig(agent={"mode": "qlang"}, retrieval={"k": 3}), llm=llm, retriever=retriever)
    out = agent.invoke({"question": QUESTION})
    (call,) = out["trace"].tool_calls
    # the fragment is not handed back as a translation: the model reads why, and the question is answered
    assert call.result.startswith("translation failed: the es translation") and "puntos permitidos" not in call.result
    assert out["answer"].answer == "Los Panthers permitieron 308 puntos."
