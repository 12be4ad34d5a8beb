"""The attribution check: strict parsing, the localized prompt, and the real local model."""

from __future__ import annotations

import pytest

from xlrag.checks.attribution import (
    ATTRIBUTION_VERDICTS,
    AttributionChecker,
    AttributionReply,
    PassageVote,
    parse_attribution_reply,
)
from xlrag.config import LLMConfig
from xlrag.errors import ConfigError, EmptyQueryError, InvalidArgumentError
from xlrag.indexes.translate import TableTranslator
from xlrag.schema import Hit, Passage


@pytest.mark.parametrize(
    ("raw", "verdict"),
    [
        ('{"justification": "It says 308.", "verdict": "attributable"}', "attributable"),
        ('Here:\n```json\n{"justification": "No.", "verdict": "not_attributable"}\n```', "not_attributable"),
        ('The passage names 1943. {"justification": "1943", "verdict": "attributable"} Done.', "attributable"),
        ('{"justification": "a {brace} inside", "verdict": "not_attributable"}', "not_attributable"),
    ],
)
def test_parse_valid_replies(raw, verdict):
    reply, reason = parse_attribution_reply(raw)
    assert reason is None and reply == AttributionReply(justification=reply.justification, verdict=verdict)


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        ("", "empty"),
        ("   ", "empty"),
        ("The passage supports the answer: attributable.", "no JSON"),  # never guessed from keywords
        ('{"justification": "x", "verdict": "correct"}', "schema"),  # the judge's verdict is not ours
        ('{"verdict": "attributable"}', "schema"),
        ('{"justification": "x", "verdict": "attributable", "score": 1}', "schema"),
        ('{"justification": "a", "verdict": "attributable"} {"justification": "b", "verdict": "not_attributable"}',
         "conflicting"),
        ('{"justification": "cut off", "verdict": "attrib', "no JSON"),
    ],
)
def test_parse_invalid_replies(raw, reason):
    reply, why = parse_attribution_reply(raw)
    assert reply is None and reason in why


def test_agreeing_objects_are_one_vote():
    reply, reason = parse_attribution_reply(
        '{"justification": "a", "verdict": "attributable"}\n{"justification": "b", "verdict": "attributable"}')
    assert reason is None and reply.verdict == "attributable" and reply.justification == "b"


# -- the prompt and the inputs, without a model ----------------------------------------------

P_ES = Passage(id="es-1", doc_id="d1", lang="es",
               text="La defensa de los Panthers cedió solo 308 puntos en toda la temporada regular.")


def test_localized_prompt_carries_the_case_without_markers():
    checker = AttributionChecker(llm=None)
    (role, text), = checker.messages("¿Cuántos puntos?", "308 puntos", P_ES.text, "es")
    assert role == "user"
    assert "Pasaje: La defensa" in text and "Pregunta: ¿Cuántos puntos?" in text
    assert '"verdict": "not_attributable"' in text and "{{" not in text
    q, a, code = checker._inputs(" ¿Cuántos puntos? ", "Cedió 308 puntos <doc0>.", "es-ES", "in_language")
    assert (q, a, code) == ("¿Cuántos puntos?", "Cedió 308 puntos.", "es")


def test_bad_inputs_are_typed_errors():
    checker = AttributionChecker(llm=None)
    with pytest.raises(InvalidArgumentError, match="setting"):
        checker.check("q", "a", [P_ES], "es", setting="english")
    with pytest.raises(EmptyQueryError, match="answer"):
        checker.check("q", "  ", [P_ES], "es")
    with pytest.raises(EmptyQueryError, match="question"):
        checker.check("", "a", [P_ES], "es")
    with pytest.raises(InvalidArgumentError, match="passages"):
        checker.check("q", "a", P_ES.text, "es")
    with pytest.raises(InvalidArgumentError, match="passage"):
        checker.check("q", "a", [P_ES.text], "es")


def test_a_failed_model_call_is_an_invalid_vote_with_its_reason():
    # llm=None cannot be invoked: the vote records the failure instead of raising
    result = AttributionChecker(llm=None).check("¿Cuántos?", "308", [P_ES], "es")
    (vote,) = result.votes
    assert vote.verdict == "invalid" and vote.passage_id == "es-1" and vote.lang == "es"
    assert vote.reason and result.attributable is None and result.supporting == []


def test_no_passages_decides_nothing():
    result = AttributionChecker(llm=None).check("¿Cuántos?", "308", [], "es")
    assert result.votes == [] and result.attributable is None


def test_failed_translation_invalidates_every_vote():
    checker = AttributionChecker(llm=None, translator=TableTranslator({}))
    result = checker.check("¿Cuántos?", "308", [P_ES, P_ES], "es", setting="in_english")
    assert [v.verdict for v in result.votes] == ["invalid", "invalid"]
    assert all("translating the question" in v.reason for v in result.votes)
    assert result.prompt_lang == "en" and result.attributable is None


def test_in_english_without_a_translator_says_how_to_get_one():
    # a check stands below the chains: it is handed its translator, it does not build one
    with pytest.raises(ConfigError, match="attribution_checker"):
        AttributionChecker(llm=None).check("¿Cuántos?", "308", [P_ES], "es", setting="in_english")


def test_the_builder_hands_the_check_its_translator_and_runnable():
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage

    from xlrag.chains.checkers import attribution_checker
    from xlrag.indexes.translate import CachedTranslator

    llm = GenericFakeChatModel(messages=iter([AIMessage('{"justification": "Dice 308.", "verdict": "attributable"}')]))
    checker = attribution_checker(llm)
    assert isinstance(checker.translator, CachedTranslator) and checker.translator.inner.llm is llm
    assert checker.check("¿Cuántos?", "308", [P_ES], "es").attributable is True


def test_votes_add_up_to_any_support():
    votes = [PassageVote(passage_id="a", lang="es", verdict="not_attributable"),
             PassageVote(passage_id="b", lang="ar", verdict="invalid"),
             PassageVote(passage_id="c", lang="en", verdict="attributable")]
    made = AttributionChecker._result("q", "a", "es", "in_language", ("q", "a"), votes)
    assert made.attributable is True and made.supporting == ["c"]
    # "not" and an invalid vote: the invalid one could have been "attributable", so it stays open
    made = AttributionChecker._result("q", "a", "es", "in_language", ("q", "a"), votes[:2])
    assert made.attributable is None and made.supporting == []
    made = AttributionChecker._result("q", "a", "es", "in_language", ("q", "a"), votes[:1])
    assert made.attributable is False


@pytest.mark.parametrize(("votes", "expected"), [
    (["not_attributable", "attributable"], True), (["invalid", "attributable"], True),
    (["not_attributable", "not_attributable"], False), (["not_attributable", "invalid"], None),
    (["not_attributable", None], None), (["invalid"], None), ([], False),
])
def test_any_attributable_never_reads_an_invalid_vote_as_not(votes, expected):
    from xlrag.checks.attribution import any_attributable

    assert any_attributable(votes) is expected


# -- the real local model at temperature 0 ---------------------------------------------------

P_AR = Passage(id="ar-1", doc_id="d2", lang="ar",
               text="توفي نيكولا تسلا في مدينة نيويورك في 7 يناير 1943 عن عمر يناهز 86 عامًا.")
P_AR_OTHER = Passage(id="ar-2", doc_id="d3", lang="ar",
                     text="استقبل دفاع فريق بانثرز 308 نقاط فقط طوال الموسم العادي، وهو سادس أفضل رقم في الدوري.")
Q_ES = "¿Cuántos puntos cedió la defensa de los Panthers?"
Q_AR = "متى توفي نيكولا تسلا؟"


@pytest.fixture(scope="module")
def checker():
    from xlrag.chains.llms import build_llm

    llm = build_llm(LLMConfig(provider="local", model="qwen2.5-coder-1.5b-instruct", temperature=0.0,
                              max_tokens=80))
    from xlrag.chains.checkers import attribution_checker

    return attribution_checker(llm)


def _hit(p: Passage) -> Hit:
    return Hit(passage=p, score=1.0, raw_score=1.0, rank=1, store=p.lang, mode="qlang")


@pytest.mark.slow
@pytest.mark.parametrize(
    ("question", "answer", "passage", "lang", "expected"),
    [
        (Q_ES, "La defensa cedió 308 puntos <doc0>.", P_ES, "es", True),
        (Q_ES, "La defensa cedió 412 puntos.", P_ES, "es", False),
        (Q_AR, "توفي تسلا في 7 يناير 1943.", P_AR, "ar", True),
        # a passage about something else: the 1.5B model misses contradicted dates in Arabic
        # ("1856 in Paris" against this passage's 1943 is judged attributable), not this
        (Q_AR, "توفي تسلا في 7 يناير 1943.", P_AR_OTHER, "ar", False),
    ],
)
def test_real_model_in_language(checker, question, answer, passage, lang, expected):
    result = checker.check(question, answer, [_hit(passage)], lang)
    (vote,) = result.votes
    assert vote.verdict in ATTRIBUTION_VERDICTS, vote  # held to the schema by the grammar
    assert result.attributable is expected, vote
    assert result.prompt_lang == lang and vote.passage_id == passage.id and vote.justification


@pytest.mark.slow
async def test_real_model_in_english_async(checker):
    # Spanish question and answer, Arabic passage: everything is translated to English first
    result = await checker.acheck("¿Cuándo murió Nikola Tesla?", "Tesla murió el 7 de enero de 1943.",
                                  [P_AR], "es", setting="in_english")
    (vote,) = result.votes
    assert result.prompt_lang == "en" and result.setting == "in_english"
    assert "1943" in result.answer_shown and result.question_shown != result.question
    assert result.attributable is True, (vote, result.question_shown, result.answer_shown)
