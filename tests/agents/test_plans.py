"""The agent's pure plans: which mode, which repair. No model, no vectors."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from xlrag.agents.repair import LLM_REPAIRS, plan_repair
from xlrag.agents.routing import choose_mode
from xlrag.config import AgentConfig, AgentRule
from xlrag.errors import ConfigError
from xlrag.trace import CHECKS, Repair

RULES = AgentConfig(rules=[AgentRule(names=["Crimea", "Крым", "القرم"], relevant_langs=["uk", "ru"]),
                           AgentRule(names=["Ceuta", "سبتة"], relevant_langs=["es", "ar"])])


@pytest.mark.parametrize(("question", "mode", "langs"), [
    ("Is CRIMEA part of Ukraine?", "rel_langs", ["uk", "ru"]),
    ("Чей Крым?", "rel_langs", ["uk", "ru"]),
    ("هل سبتة أرض مغربية؟", "rel_langs", ["es", "ar"]),
    ("¿Cuántos puntos permitió la defensa?", "balanced", None),
])
def test_auto_mode_follows_the_first_matching_rule(question, mode, langs):
    choice = choose_mode(question, RULES)
    assert (choice.mode, choice.relevant_langs) == (mode, langs)
    assert choice.reason  # the trace says why


def test_requested_and_configured_modes_beat_the_rules():
    assert choose_mode("Crimea?", RULES, requested="qlang").mode == "qlang"
    assert choose_mode("Crimea?", RULES.model_copy(update={"mode": "en_only"})).reason == "configured (agent.mode)"
    given_langs = choose_mode("anything", RULES, relevant_langs=["fr"])
    assert (given_langs.mode, given_langs.relevant_langs) == ("rel_langs", ["fr"])


@pytest.mark.parametrize(("agent", "message"), [
    ({"mode": "balnced"}, "did you mean 'balanced'"),
    ({"default_mode": "auto"}, "unknown IR mode 'auto'"),
    ({"max_repairs": -1}, "greater than or equal"),
    ({"rules": [{"names": ["x"], "relevant_langs": []}]}, "at least 1"),
])
def test_bad_agent_settings_fail_in_one_line(agent, message):
    from xlrag.config import load_config

    with pytest.raises(ConfigError, match=message) as e:
        load_config(agent=agent)
    assert "\n" not in str(e.value)


def test_repairs_run_in_the_documented_order():
    assert plan_repair(["language", "citations"], [], 2) is Repair.QUOTE
    assert plan_repair(["language", "citations"], [], 0) is Repair.QUOTE  # no model: free of the budget
    # a quoted answer line is kept: what is still in another language is translated, not asked again
    assert plan_repair(["language"], [Repair.QUOTE], 2) is Repair.TRANSLATE
    assert plan_repair(["language", "citations"], [], 2, quotable=False) is Repair.REGENERATE_LANGUAGE
    assert plan_repair(["language", "citations"], [Repair.REGENERATE_LANGUAGE], 1, quotable=False) is Repair.TRANSLATE
    assert plan_repair(["citations"], [Repair.REGENERATE_LANGUAGE, Repair.TRANSLATE], 0) is Repair.POST_HOC
    assert plan_repair(["citations"], [], 2) is Repair.RECITE
    assert plan_repair(["attribution"], [Repair.RECITE], 1) is Repair.POST_HOC
    assert plan_repair(["language"], [Repair.REGENERATE_LANGUAGE, Repair.TRANSLATE], 0, quotable=False) is None
    # no budget: the language stays as it is, the citations still get the free fallback
    assert plan_repair(["language", "citations"], [], 0, quotable=False) is Repair.POST_HOC


@given(failures=st.lists(st.sets(st.sampled_from(CHECKS)), min_size=1, max_size=12),
       budget=st.integers(0, 5))
def test_every_plan_ends_and_post_hoc_is_always_reached(failures, budget):
    """Whatever fails, and however often: each repair runs once, LLM repairs spend the
    budget, and failing citations always end with post-hoc citations."""
    tried: list[Repair] = []
    for failed in failures:
        left = budget - sum(r in LLM_REPAIRS for r in tried)
        nxt = plan_repair(failed, tried, left)
        if nxt is None:
            assert not ({"citations", "attribution"} & failed) or Repair.POST_HOC in tried
            break
        assert nxt not in tried and (nxt not in LLM_REPAIRS or left > 0)
        tried.append(nxt)
    assert len(tried) <= len(Repair)
    assert sum(r in LLM_REPAIRS for r in tried) <= budget


@pytest.mark.parametrize("check", ["non_answer", "unsupported", "refusal"])
def test_an_answer_without_substance_is_asked_again_extractively_first(check):
    assert plan_repair([check, "language", "citations"], [], 2) is Repair.EXTRACT
    # once extracted, a reply in the passage's language is quoted from a passage in the user's
    # language, or translated, not regenerated
    assert plan_repair([check, "language"], [Repair.EXTRACT], 1) is Repair.QUOTE
    assert plan_repair([check, "language"], [Repair.EXTRACT], 1, quotable=False) is Repair.TRANSLATE
    assert plan_repair(["language"], [Repair.EXTRACT, Repair.QUOTE], 1) is Repair.TRANSLATE
    # still without substance: a passage's sentence is quoted, when there is one to quote
    assert plan_repair([check], [Repair.EXTRACT], 1) is Repair.QUOTE
    # and nothing else failing: nothing left to try, it is flagged
    assert plan_repair([check], [Repair.EXTRACT], 1, quotable=False) is None
    assert plan_repair([check], [Repair.EXTRACT, Repair.QUOTE], 1) is None
    assert plan_repair([check], [], 0) is Repair.QUOTE  # no budget: the free repair only
    assert plan_repair([check], [], 0, quotable=False) is None


def test_every_check_the_plan_reads_is_a_trace_check():
    from xlrag.checks.substance import SUBSTANCE_CHECKS

    assert set(SUBSTANCE_CHECKS) <= set(CHECKS)
    assert {"language", "citations", "attribution"} <= set(CHECKS)
