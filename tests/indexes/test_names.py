"""Place names and numbers carried across languages from CLDR (xlrag.indexes.names): the lexical
channel's model-free translation. The cases are Travel questions whose country page is in the
other language, which the dense channel missed (benchmarks/results/experiments/travel_retrieval)."""

from __future__ import annotations

import pytest

from xlrag.indexes.names import NameTranslator, names_in

T = NameTranslator()


@pytest.mark.parametrize(("question", "src", "tgt", "expected"), [
    ("كم أرقام الطوارئ في جزر القمر؟", "ar", "en", "Comoros"),
    ("ما أرقام الطوارئ في بابوا غينيا الجديدة؟", "ar", "en", "Papua New Guinea"),  # not "Guinea"
    ("emergency phone numbers police ambulance fire department laos", "en", "ar", "لاوس"),
    ("emergency numbers guinea bissau police ambulance", "en", "ar", "غينيا بيساو"),
    ("ارقام طوارئ فيجي مهمة شرطة اسعاف مطافئ ٩١١", "ar", "en", "Fiji 911"),  # Arabic-Indic digits fold
    ("Wie viele Einwohner hat Ägypten?", "de", "zh", "埃及"),
    ("Сколько стоит виза в Японию?", "ru", "es", "Japón"),  # inflected: Японию
])
def test_places_and_numbers_carry_over(question, src, tgt, expected):
    assert T.translate(question, src, tgt) == expected


def test_longest_name_wins_and_each_place_once():
    assert names_in("From Guinea to Papua New Guinea and back to Guinea", "en") == ["GN", "PG"]


def test_nothing_to_carry_over_is_empty():
    assert T.translate("What is the weather like in the mountains?", "en", "ar") == ""


def test_same_language_is_the_question_itself():
    q = "When is the weekend in Djibouti?"
    assert T.translate(q, "en", "en") == q
