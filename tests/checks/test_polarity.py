"""Yes/no answers that answer both ways: the check's accuracy on items of known truth, and
its place in the non-answer check every answer gets."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from xlrag.checks.language import visible_text
from xlrag.checks.polarity import _VERDICT_ONLY, _WORDS, contradicts_itself, negated, polarity_words
from xlrag.checks.substance import _spelled, non_answer

ITEMS = [json.loads(line) for line in (Path(__file__).parent / "data" / "yes_no.jsonl").open(encoding="utf-8")]
# What words cannot read: a pronoun and a verb changed ("Ai-je besoin" → "vous avez besoin"),
# a verb the question lacks ("لن تستطيع" for "يمكنني"), Chinese (no table).
KNOWN_MISSES = {
    "نعم، لن تستطيع القيادة في الأردن برخصة إماراتية.",
    "Non, vous avez besoin d'un visa pour visiter le Japon.",
    "Oui, vous n'avez pas besoin d'un visa pour visiter le Japon.",
    "不，你需要签证去日本。",
}


def _flags(item: dict) -> bool:
    lang = item["lang"]
    said, asked = _spelled(visible_text(item["answer"]), lang), _spelled(item["question"], lang)
    return contradicts_itself(said, asked, lang) is not None


def test_items_of_known_truth_cover_real_answers_and_languages():
    real = [i for i in ITEMS if i["source"] != "written"]
    assert len(ITEMS) >= 70 and len(real) >= 25
    assert sum(i["contradicts"] for i in real) >= 2  # the README's answer and a benchmark row
    assert {i["lang"] for i in ITEMS if i["contradicts"]} >= {"en", "ar", "de", "es", "ru", "fr"}


def test_no_false_alarm_and_every_miss_is_known():
    wrong = [i["answer"] for i in ITEMS if _flags(i) != i["contradicts"]]
    false_alarms = [i["answer"] for i in ITEMS if _flags(i) and not i["contradicts"]]
    assert false_alarms == []
    assert set(wrong) == KNOWN_MISSES
    found = sum(i["contradicts"] for i in ITEMS) - len(KNOWN_MISSES)
    assert found / sum(i["contradicts"] for i in ITEMS) >= 0.75


def test_the_readme_answer_is_not_an_answer():
    question = "هل أحتاج إلى تأشيرة لزيارة اليابان؟"
    said = non_answer("لا، أحتاج إلى تأشيرة لزيارة اليابان. <doc0>", question, "ar")
    assert not said.passed and "restates the question as true" in said.reason
    # the same words with the negation back answer the question
    assert non_answer("لا، لا تحتاج إلى تأشيرة لزيارة اليابان. <doc0>", question, "ar").passed
    # hamzas dropped by the model are the same words (the checks read folded spellings)
    assert not non_answer("لا، احتاج الى تاشيرة لزيارة اليابان.", question, "ar").passed


@pytest.mark.parametrize(("text", "lang", "expected"), [
    ("you don't need one", "en", True), ("you can’t", "en", True), ("you need one", "en", False),
    ("لاحتاج إلى تأشيرة", "ar", True), ("Sie brauchen kein Visum", "de", True), ("вам нужна", "ru", False),
])
def test_negation(text, lang, expected):
    assert negated(text, lang, {"احتاج"}) is expected


def test_polarity_words_derive_from_the_one_table():
    for lang, (yes, no, negations) in _WORDS.items():
        assert polarity_words(lang) == set(f"{yes} {no} {negations}".split())
        assert set(yes.split()).isdisjoint(no.split())
    assert set(_WORDS).isdisjoint(_VERDICT_ONLY)
    for lang in _VERDICT_ONLY:  # a verdict word with no negation words to read: never checked
        yes_no = sorted(polarity_words(lang))
        assert contradicts_itself(f"{yes_no[0]}, x y z", "x y z", lang) is None
    assert polarity_words("xx") == frozenset()
