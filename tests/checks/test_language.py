"""Response-language correctness: what is stripped, what has no language, how rates count."""

from __future__ import annotations

import json

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


@pytest.mark.parametrize(("text", "lang"), [
    # names and one-word answers lingua reads as another language of the same script
    ("Russia", "en"), ("Ukraine", "en"), ("Pons Aelius", "en"), ("eukaryotic cell", "de"),
])
def test_a_reply_too_short_to_tell_apart_from_a_language_of_its_script_is_not_judged(text, lang):
    v = judge_language(text, lang)
    assert v.status == "not_applicable" and v.correct is None and "too short" in v.reason
    assert v.detected != lang  # lingua's guess is kept, to be read


@pytest.mark.parametrize(("text", "lang", "detected"), [
    ("Россия", "en", "ru"),  # another script: as short as it is, it is wrong
    ("Rhine", "ar", None),  # Latin for Arabic: no script the two share
    ("The Panthers defense gave up just 308 points.", "es", "en"),  # long enough to tell
])
def test_short_replies_in_another_script_and_long_ones_are_still_wrong(text, lang, detected):
    v = judge_language(text, lang)
    assert v.status == "wrong" and (detected is None or v.detected == detected)


def test_the_short_text_rule_holds_its_committed_figures_on_xquads_golds():
    # benchmarks/language_check.py on items of known truth: the rule run again must give the
    # committed counts, and they must say what the rule is for
    from tests.evals.benchmarks import load_benchmark
    from xlrag.checks import language

    bench = load_benchmark("language_check")
    committed = json.loads((bench.HERE / "results" / "language_check.json").read_text(encoding="utf-8"))
    rows = [{**it, "status": judge_language(it["text"], it["lang"]).status} for it in bench.items()]
    now = bench.score(rows)
    assert now == committed["with_short_rule"]["summary"]
    assert (committed["short_words"], committed["short_confidence"]) == (language.SHORT_WORDS,
                                                                           language.SHORT_CONFIDENCE)
    before = committed["without_short_rule"]["summary"]
    assert now["own_language_called_wrong"]["rate"] < before["own_language_called_wrong"]["rate"] / 5
    assert now["wrong_verdicts_right"] > 0.99 and now["other_language_caught"]["rate"] > 0.85
