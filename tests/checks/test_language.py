"""Response-language correctness: what is stripped, what has no language, how rates count."""

from __future__ import annotations

import pytest

from xlrag.checks.language import LanguageVerdict, foreign_script, judge_language, language_summary


def test_markers_headers_and_urls_are_not_judged():
    v = judge_language("Cited Documents: <doc0>, <doc2>\nAnswer: Москва — столица России, "
                       "см. https://ru.wikipedia.org/wiki/Москва <doc0>", "ru")
    assert v.status == "correct" and v.detected == "ru"
    assert "<doc" not in v.text and "http" not in v.text and "Cited" not in v.text
    assert 0 < v.confidence <= 1


def test_localized_answer_label_is_stripped():
    v = judge_language("Ответ: 308", "ru")
    assert v.status == "not_applicable" and v.text == "308"


@pytest.mark.parametrize("text", ["308", "<doc0> 10,000 € <doc1>", "", "https://example.org"])
def test_replies_without_words_are_not_applicable(text):
    v = judge_language(text, "de")
    assert v.status == "not_applicable" and v.correct is None and v.detected is None


def test_wrong_language_is_wrong():
    v = judge_language("The Panthers defense gave up just 308 points.", "es")
    assert v.status == "wrong" and v.detected == "en" and v.correct is False


def test_summary_counts_both_ways():
    def mk(status):
        return LanguageVerdict(expected="de", detected="de" if status == "correct" else None,
                               status=status, text="")

    s = language_summary([mk("correct"), mk("correct"), mk("wrong"), mk("not_applicable")])
    assert s["n"] == 4 and s["n_applicable"] == 3
    assert s["rate"] == pytest.approx(2 / 3) and s["rate_all"] == pytest.approx(0.5)
    assert s["status"] == {"correct": 2, "not_applicable": 1, "wrong": 1}


@pytest.mark.parametrize(("text", "lang", "script"), [
    ("الساحل المتوسطي شمال المغرب", "en", "ARABIC"), ("طبريا", "en", "ARABIC"), ("Россия", "en", "CYRILLIC"),
    ("北非海岸", "ru", "CJK"),
    # the expected language's own scripts, and Latin (names are often left in it), pass
    ("Spain", "ar", None), ("Jared Allen", "ru", None), ("北非海岸", "zh", None), ("北非", "zh-Hant", None),
    ("日本です", "ja", None), ("대한민국", "ko", None), ("Україна", "uk", None), ("ישראל", "he", None),
    ("ایران", "fa", None), ("308 <doc0>", "en", None), ("", "en", None),
])
def test_foreign_script_names_an_answer_line_in_a_script_its_language_is_not_written_in(text, lang, script):
    assert foreign_script(text, lang) == script
