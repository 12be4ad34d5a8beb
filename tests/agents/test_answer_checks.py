"""Issue 51's answer checks through the agent, on the real XQuAD index with a scripted model:
the answer line's language on its own, an explanation that restates the question, and a
language code xlrag does not know."""

from __future__ import annotations

import pytest

from tests.agents.test_agent import SPANISH, agent, scripted
from xlrag.chains.rag import GroundedChain
from xlrag.config import XlragConfig
from xlrag.trace import Repair

QUESTION = "¿Cuántos puntos dejaron escapar en defensa los Panthers?"


def _first(trace, check):
    return next(c for c in trace.checks if c.check == check and c.attempt == 0)


def test_an_english_answer_line_under_an_explanation_in_the_users_language_is_repaired(retriever):
    # the Hindi case, in a language the index has: lingua reading the answer line with a
    # longer explanation in the right language called the reply Spanish; the answer line is English
    english_line = ("Cited Documents: <doc0>\nAnswer: The Panthers defense allowed only 308 points all season.\n"
                    "Explanation: Según <doc0>, la defensa de los Panthers solo permitió 308 puntos en toda la "
                    "temporada regular, la sexta cifra más baja de la liga.")
    out = agent(retriever, scripted(english_line, SPANISH)).invoke({"question": QUESTION})
    answer, trace = out["answer"], out["trace"]
    first = _first(trace, "language")
    assert not first.passed
    assert first.detail.startswith("wrong: answer line wrong (detected en), explanation correct (detected es)")
    assert trace.repairs and answer.answer == "La defensa de los Panthers permitió 308 puntos."
    assert "language" not in trace.unrepaired


def test_an_explanation_that_restates_the_question_is_asked_again(retriever):
    restated = ("Cited Documents: <doc0>\nAnswer: 308\n"
                "Explanation: Los puntos que dejaron escapar en defensa los Panthers <doc0>.")
    out = agent(retriever, scripted(restated, SPANISH)).invoke({"question": QUESTION})
    answer, trace = out["answer"], out["trace"]
    first = _first(trace, "non_answer")
    assert not first.passed and "explanation only restates the question" in first.detail
    assert [r.repair for r in trace.repairs] == [Repair.EXTRACT]
    assert answer.answer.endswith("308 puntos.") and trace.unrepaired == []


REPLY = ("Cited Documents: <doc0>\nAnswer: 308\n"
         "Explanation: The Panthers defense gave up just 308 points, sixth in the league <doc0>.")


@pytest.mark.parametrize(("code", "noted"), [("xx", True), ("und", True), ("zz-ZZ", True), ("en_US", False),
                                             ("EN", False)])
def test_a_language_code_xlrag_does_not_know_falls_back_to_detection_with_a_note(retriever, code, noted):
    # issue 51's bad input: never an exception; the question's language is detected, and the
    # trace says so (retrieval's note: xlrag.schema.Query.unknown_lang), as the chain's answer does
    question = "How many points did the Panthers defense give up?"
    out = agent(retriever, scripted(*[REPLY] * 4)).invoke({"question": question, "lang": code})
    answer, trace = out["answer"], out["trace"]
    assert trace.lang == "en" and answer.lang == "en"
    note = f"{code!r} names no language xlrag knows: the question's language was detected as 'en'"
    assert (note in trace.notes) is noted and (note in answer.notes) is noted
    cfg = XlragConfig(retrieval={"k": 3, "mode": "qlang_en"})
    chained = GroundedChain.from_config(cfg, llm=scripted(REPLY), retriever=retriever).invoke(
        {"question": question, "lang": code})
    assert chained.lang == "en" and (note in chained.notes) is noted and chained.answer == "308"


def test_a_translated_explanation_keeps_a_right_answer_line_as_it_was(retriever):
    # the translation repair translates only the part in another language
    english_explanation = ("Cited Documents: <doc0>\nAnswer: La defensa de los Panthers permitió 308 puntos.\n"
                           "Explanation: The document says the defense gave up only 308 points in the whole "
                           "regular season, the sixth lowest in the league <doc0>.")
    llm = scripted(english_explanation, english_explanation,
                   "El documento dice que la defensa solo permitió 308 puntos.")
    out = agent(retriever, llm).invoke({"question": QUESTION})
    answer, trace = out["answer"], out["trace"]
    assert [r.repair for r in trace.repairs][:2] == [Repair.REGENERATE_LANGUAGE, Repair.TRANSLATE]
    assert answer.answer == "La defensa de los Panthers permitió 308 puntos."
    assert answer.explanation.startswith("El documento dice") and "translated" in answer.flags


def test_the_chain_reads_a_restating_explanation_as_the_agent_does(retriever):
    restated = ("Cited Documents: <doc0>\nAnswer: 308\n"
                "Explanation: Los puntos que dejaron escapar en defensa los Panthers <doc0>.")
    cfg = XlragConfig(retrieval={"k": 3, "mode": "qlang_en"})
    answer = GroundedChain.from_config(cfg, llm=scripted(restated), retriever=retriever).invoke(
        {"question": QUESTION})
    assert answer.flags[0] == "not_an_answer"
    fine = GroundedChain.from_config(cfg, llm=scripted(SPANISH), retriever=retriever).invoke(
        {"question": QUESTION})
    assert "not_an_answer" not in fine.flags


@pytest.mark.parametrize(("out", "why"), [
    ("The Panthers defense allowed 308 points.", "untranslated"),
    ("Cited Documents: <doc0>", "has no words"),
    ("I apologize, but I can't assist with that request.", "is not in es"),
    ("La defensa de los Panthers permitió 308 puntos.", None),
])
def test_a_translation_is_checked_before_it_replaces_the_answer(out, why):
    # the default model once gave "I apologize, ..." as the Shona translation of an answer, and it was shown
    from xlrag.agents.checking import _not_a_translation

    said = _not_a_translation("The Panthers defense allowed 308 points.", out, "es")
    assert (said is None) if why is None else (why in said), said
