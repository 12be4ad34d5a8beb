"""The pairwise comparison, the verdict and the choice of languages, without a model."""

from __future__ import annotations

import pytest

from xlrag.perspectives.compare import AGREE_AT, DISAGREE_BELOW, AgreementJudge, lexical_agreement
from xlrag.perspectives.langs import choose_langs, contested

CRIMEA = "Who does Crimea belong to?"


@pytest.mark.parametrize(("a", "b", "agreement"), [
    ("Crimea belongs to Russia.", "Crimea belongs to Ukraine.", "disagree"),  # most words shared, not the answer
    ("Crimea belongs to Ukraine.", "Crimea is part of Ukraine.", "agree"),
    ("It belongs to Ukraine.", "Ukraine", "agree"),  # one says the same and more
    ("Crimea belongs to Russia.", "Crimea does not belong to Russia.", "unsure"),  # only one says 'not'
    ("Russia annexed Crimea in 2014; Ukraine claims it.", "Crimea is Ukrainian territory occupied by Russia.",
     "unsure"),
    ("Crimea belongs to", "Crimea belongs to Ukraine.", "unsure"),  # adds nothing to the question
])
def test_lexical_agreement_compares_what_the_answers_add_to_the_question(a, b, agreement):
    got, score, reason = lexical_agreement(a, b, CRIMEA, "en")
    assert got == agreement, (score, reason)
    assert lexical_agreement(b, a, CRIMEA, "en")[0] == agreement  # symmetric


def test_the_bands_and_numbers():
    assert 0 < DISAGREE_BELOW < AGREE_AT <= 1
    q = "How many points did the Panthers defense give up?"
    assert lexical_agreement("308 points.", "24 points.", q, "en")[:2] == ("disagree", 0.0)
    assert lexical_agreement("308 points.", "308", q, "en")[0] == "agree"
    # a short answer held by a much longer one: the rest may change what it says (the LLM decides)
    agreement, _, reason = lexical_agreement("308 points.", "It gave up 308 points in all, the most in the league.",
                                             q, "en")
    assert agreement == "unsure" and "holds the other" in reason
    agreement, score, reason = lexical_agreement("308 points.", "308 points and 24 sacks.", q, "en")
    assert agreement == "unsure" and score == 1.0 and "different numbers (24)" in reason


def test_the_same_name_in_two_scripts_is_left_to_the_judge():
    q = "Who does Crimea belong to?"
    agreement, _, reason = lexical_agreement("Russia", "Россия", q, "en")
    assert agreement == "unsure" and "different scripts (latin, cyrillic)" in reason


def test_answers_in_a_script_without_spaces_are_compared_by_characters():
    q = "克里米亚属于哪个国家？"
    assert lexical_agreement("克里米亚属于俄罗斯。", "克里米亚属于乌克兰。", q, "zh")[0] == "disagree"
    assert lexical_agreement("属于乌克兰。", "乌克兰", q, "zh")[0] == "agree"


def test_the_judge_is_the_calibrated_panel_reference_first():
    judge = AgreementJudge()  # default_panel(): the lexical judge, no model
    q = "How many points did the Panthers defense give up?"
    assert judge.judge(q, "308 points <doc0>", "It gave up 308 points in all <doc2>.", "en")[0] == "agree"
    agreement, reason = judge.judge("Who does Ceuta belong to?", "Spain", "The Kingdom of Morocco", "en")
    assert agreement == "disagree" and reason.startswith("the judge:")


def test_a_disputed_territory_gives_its_claimants_languages_after_the_users():
    from xlrag.borderlines import load_territories

    territories = load_territories()
    choice = choose_langs(CRIMEA, "en", ["en", "ru", "de"], relevant_langs=None, rules=[], territories=territories,
                          max_langs=3, ranked=lambda: pytest.fail("not needed"))
    assert choice.source == "claimants" and choice.langs == ["en", "ru"]
    assert choice.reason == "claimants of Crimea (Russia, Ukraine)"
    assert choice.notes == ["claimants of Crimea (Russia, Ukraine) names 'uk', which has no store in this index"]
    # a rule beats the territories; '/'-separated names each count
    from xlrag.config import AgentRule

    rule = AgentRule(names=["Krim", "Crimea"], relevant_langs=["uk", "ru"])
    assert contested(CRIMEA, [rule], territories)[:2] == ("rule", ["uk", "ru"])
    assert contested("Who owns Takeshima?", [], territories)[1] == ["ko", "ja"]


def test_when_too_few_of_an_entitys_languages_are_indexed_the_best_ranked_stores_are_taken():
    from xlrag.borderlines import load_territories

    choice = choose_langs(CRIMEA, "en", ["en", "de"], relevant_langs=None, rules=[], territories=load_territories(),
                          max_langs=2, ranked=lambda: ["de", "de", "en"])
    assert choice.source == "top_by_retrieval" and choice.langs == ["de", "en"]
    assert any("fewer than two of its languages have a store" in n for n in choice.notes)
    asked_in_finnish = choose_langs("Kenelle Krim kuuluu? Crimea", "fi", ["ru", "uk"], relevant_langs=None, rules=[],
                                    territories=load_territories(), max_langs=3, ranked=lambda: [])
    assert asked_in_finnish.langs == ["ru", "uk"] and asked_in_finnish.source == "claimants"
    assert asked_in_finnish.notes == ["the question's language 'fi' has no store in this index"]
