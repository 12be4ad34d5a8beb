"""An ask's bounded cost: the checks and repairs after the first answer share
``agent.budget_seconds`` and ``agent.budget_tokens``; once spent, no model is called again and
the best answer so far is shown, flagged, never an exception (issue 51: one English XQuAD
question was still repairing after 17 minutes of CPU on a loaded 2-core machine)."""

from __future__ import annotations

import pytest
from langchain_core.messages import AIMessage

from tests.agents.test_agent import ENGLISH, QUESTION, SPANISH, FirstReplyScripted, agent, scripted
from xlrag.agents.budget import OVER_BUDGET, Tally, over_budget, spent, tallying
from xlrag.agents.repair import LLM_REPAIRS
from xlrag.config import AgentConfig, XlragConfig
from xlrag.trace import Repair, Timing


def test_the_budget_is_in_the_config_and_validated():
    cfg = AgentConfig()
    assert cfg.budget_seconds == 300 and cfg.budget_tokens == 8000
    assert AgentConfig(budget_seconds=None, budget_tokens=None).budget_tokens is None
    with pytest.raises(ValueError, match="budget_tokens"):
        XlragConfig(agent={"budget_tokens": 0})


def test_spent_counts_only_what_follows_the_first_answer():
    timings = [Timing(step="generate", seconds=5, tokens=900), Timing(step="verify", seconds=1, tokens=120),
               Timing(step="repair:extract", seconds=2, tokens=700), Timing(step="retrieve", seconds=1)]
    assert spent(timings) == (3, 820)
    cfg = AgentConfig(budget_seconds=10, budget_tokens=800)
    assert over_budget(cfg, 3, 820) == "820 tokens of agent.budget_tokens=800 spent"
    assert over_budget(cfg, 10.5, 0).startswith("10.5 s of agent.budget_seconds=10")
    assert over_budget(AgentConfig(budget_seconds=None, budget_tokens=None), 1e9, 10**9) is None


def test_a_tally_counts_what_a_model_reports_however_it_is_called():
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel

    class Reporting(GenericFakeChatModel):
        def _generate(self, messages, stop=None, run_manager=None, **kwargs):
            result = super()._generate(messages, stop=stop, run_manager=run_manager, **kwargs)
            result.generations[0].message.usage_metadata = {"input_tokens": 30, "output_tokens": 12,
                                                            "total_tokens": 42}
            return result

    llm = Reporting(messages=iter([AIMessage("a"), AIMessage("b"), AIMessage("c")]))
    with tallying() as tally:
        llm.invoke("x")  # no config handed down: the tally is found in the context
        llm.invoke("y", {"callbacks": []})
    llm.invoke("z")  # after the context: not counted
    assert isinstance(tally, Tally) and tally.tokens == 84


def test_a_spent_budget_stops_the_repairs_and_shows_the_answer_flagged(retriever):
    # no second reply is scripted: a model call after the budget ran out would fail the test
    out = agent(retriever, scripted(ENGLISH), budget_seconds=1e-9).invoke({"question": QUESTION})
    answer, trace = out["answer"], out["trace"]
    assert [r.repair for r in trace.repairs] == [Repair.POST_HOC]  # needs no model: still made
    assert OVER_BUDGET in answer.flags and "unrepaired_language" in answer.flags
    assert trace.spent is not None and trace.spent.budget_seconds == 1e-9
    assert trace.spent.exhausted.startswith("the regenerate_language repair was not made: ")
    assert "agent.budget_seconds" in trace.spent.exhausted
    assert answer.answer == "The Panthers defense allowed 308 points."


def test_an_ask_within_its_budget_reports_what_it_spent_and_is_not_flagged(retriever):
    out = agent(retriever, scripted(ENGLISH, SPANISH)).invoke({"question": QUESTION})
    answer, trace = out["answer"], out["trace"]
    assert OVER_BUDGET not in answer.flags and trace.spent.exhausted is None
    covered = [t for t in trace.timings if t.step == "verify" or t.step.startswith("repair:")]
    assert trace.spent.seconds == pytest.approx(sum(t.seconds for t in covered), abs=1e-3)
    assert (trace.spent.budget_seconds, trace.spent.budget_tokens) == (300, 8000)


@pytest.mark.slow
def test_the_real_local_models_tokens_spend_the_budget(retriever):
    """llama.cpp reports each call's tokens; the regenerated answer's alone exceed a 1-token
    budget, so no second LLM repair is made, whatever the first one left failing."""
    from xlrag.chains.llms import build_llm
    from xlrag.config import LLMConfig

    real = build_llm(LLMConfig(model="qwen2.5-coder-1.5b-instruct", max_tokens=96, n_threads=1))
    llm = FirstReplyScripted(messages=iter([AIMessage(ENGLISH)]), real=real, metadata=real.metadata)
    out = agent(retriever, llm, budget_tokens=1).invoke({"question": QUESTION})
    answer, trace = out["answer"], out["trace"]
    made = [r.repair for r in trace.repairs if r.repair in LLM_REPAIRS]
    assert made == [Repair.REGENERATE_LANGUAGE]  # the scripted English answer cost nothing to check
    repair = next(t for t in trace.timings if t.step == "repair:regenerate_language")
    assert repair.tokens > 100  # the prompt and the reply, as llama.cpp counted them
    assert trace.spent.tokens == sum(t.tokens or 0 for t in trace.timings
                                     if t.step == "verify" or t.step.startswith("repair:"))
    assert (OVER_BUDGET in answer.flags) is (trace.spent.exhausted is not None)
    if trace.unrepaired and set(trace.unrepaired) - {"citations"}:
        assert "agent.budget_tokens=1 spent" in trace.spent.exhausted
