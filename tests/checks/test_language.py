"""Response-language correctness: what is stripped, what has no language, how rates count."""

from __future__ import annotations

import json

import pytest

from xlrag.checks.language import (
    LanguageVerdict,
    foreign_script,
    is_name,
    judge_answer_line,
    judge_language,
    judge_reply,
    language_summary,
    lingua_knows,
)


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


# issue 51: an English answer line under a Hindi explanation that restated the question was
# judged Hindi ("detected hi, expected hi"): lingua read the two together
HINDI_QUESTION = "इस्लाम के प्रगतिशील नरमपंथी क्या अलग करना चाहते हैं?"
HINDI_RESTATED = "इस्लाम के प्रगतिशील नरमपंथी जो अलग करना चाहते हैं, वह दस्तावेज़ में बताया गया है।"
ENGLISH_LINE = "The progressive moderates of Islam want to separate religion from politics."


def test_the_answer_line_is_judged_on_its_own_whatever_the_explanation_says():
    together = judge_language(f"{ENGLISH_LINE}\n{HINDI_RESTATED}", "hi")
    assert together.status == "correct"  # what the check read before: the explanation outweighs the line
    verdict = judge_reply(ENGLISH_LINE, HINDI_RESTATED, "hi")
    assert not verdict.passed and verdict.wrong == ["answer line"]
    assert verdict.answer_line.detected == "en" and verdict.explanation.status == "correct"
    assert verdict.detail.startswith("wrong: answer line wrong (detected en), explanation correct")


def test_an_explanation_in_another_language_under_a_right_answer_line_is_wrong_too():
    verdict = judge_reply("इस्लाम को राजनीति से अलग करना", "The documents say the moderates want to separate "
                          "religion from politics.", "hi")
    assert verdict.wrong == ["explanation"]


@pytest.mark.parametrize(("line", "lang"), [
    ("Nicholas E. Golovin", "hi"), ("Nicholas E. Golovin", "th"), ("Leonardo da Vinci", "tr"),
    ("1900", "th"), ("308 <doc0>", "vi"), ("Super Bowl 50", "el"),
])
def test_a_bare_name_or_number_answer_line_has_no_language_to_be_wrong(line, lang):
    verdict = judge_reply(line, None, lang)
    assert verdict.passed and verdict.answer_line.status == "not_applicable"


@pytest.mark.parametrize(("text", "lang"), [("Россия", "hi"), ("the documents do not say so", "th")])
def test_a_name_rule_lets_no_sentence_or_foreign_script_through(text, lang):
    assert not is_name(text, lang) and judge_answer_line(text, lang).status == "wrong"


@pytest.mark.parametrize(("text", "lang", "status"), [
    ("លេខទូរស័ព្ទសង្គ្រោះបន្ទាន់នៅប្រទេសកេនយ៉ាគឺ 959។", "km", "not_applicable"),  # its own script
    ("Номер экстренной службы в Кении 959.", "km", "wrong"),  # a script Khmer is not written in
    ("The emergency telephone number in Kenya is 959.", "km", "wrong"),  # English, read as such
    ("The emergency telephone number in Kenya is 959.", "ht", "wrong"),  # Latin both: lingua's English
    ("Nimewo telefòn ijans an Kenya se 959.", "ht", "not_applicable"),
])
def test_a_language_lingua_cannot_identify_is_judged_by_its_script(text, lang, status):
    # lingua names another language for every Khmer or Haitian reply: its verdict would call them all wrong
    assert not lingua_knows(lang)
    assert judge_language(text, lang).status == status


def test_in_every_language_of_the_test_bed_an_answer_line_in_another_language_is_caught():
    """Known truth: each test bed page's first sentence as the answer line is in its language; the
    English page's sentence (the French one for English) under it as the explanation is not. The
    check before #51 caught 0.46 of the foreign lines; each part on its own, every one, and no
    line in its own language is called wrong (Bosnian read as Croatian is one language to CLDR)."""
    from xlrag.checks.sentences import split_sentences
    from xlrag.evals import testbed

    own = {d.metadata["testbed_lang"]: split_sentences(d.text, d.lang)[0] for d in testbed.documents(countries=("KE",))}
    missed, called_wrong = [], []
    for lang, line in own.items():
        foreign = own["fr" if lang == "en" else "en"]
        if judge_reply(foreign, line, lang).passed:
            missed.append(lang)
        if not judge_reply(line, None, lang).passed:
            called_wrong.append(lang)
    assert len(own) >= 50 and missed == []
    assert called_wrong == [], called_wrong


@pytest.mark.parametrize(("expected", "detected", "same"), [
    ("bs", "hr", True), ("hr", "bs", True), ("ms", "id", False), ("no", "da", False), ("uk", "ru", False),
    ("pt", "es", False)])
def test_only_languages_cldr_calls_one_for_a_reader_pass_for_each_other(expected, detected, same):
    from xlrag.checks.language import _one_for_readers

    assert _one_for_readers(expected, detected) is same


def test_a_bosnian_line_lingua_reads_as_croatian_is_correct_and_malay_read_as_indonesian_is_not():
    line = "Broj hitne službe u Keniji je 959."
    verdict = judge_language(line, "bs")
    assert verdict.status == "correct", verdict
    assert judge_language("Nomor darurat di Kenya adalah 959 untuk semua warga negara", "ms").status == "wrong"
