"""The analyzers beyond the shipped languages (issues 51 and 52), term by term and on the test bed.

Each case is one the analyzer of ANALYZER_VERSION 1 got wrong: an elided article glued to the
name, a Turkish suffix after an apostrophe, a Korean particle or Hebrew prefix on the noun, case
endings no stemmer reduced, and invisible format characters kept inside a word. The test bed
test ranks each language's questions over its eight pages with the store's own BM25 index.
"""

from __future__ import annotations

import pytest

from xlrag.evals import testbed
from xlrag.indexes.analyzers import analyzer_for
from xlrag.indexes.lexical import LexicalIndex
from xlrag.languages import normalize_code


def terms(lang: str, text: str) -> list[str]:
    return analyzer_for(lang).tokens(text)


def meet(lang: str, a: str, b: str) -> set[str]:
    return set(terms(lang, a)) & set(terms(lang, b))


@pytest.mark.parametrize(("lang", "question", "page"), [
    ("fr", "numéros d'urgence de l'Italie", "Italie"),
    ("fr", "jusqu’à l’Égypte", "Égypte"),  # the typographic apostrophe, as word processors write it
    ("it", "dell'Italia", "Italia"),
    ("it", "nell’Egitto", "in Egitto"),
    ("ca", "d'Itàlia", "Itàlia"),
    ("ca", "de l'Índia", "a l'Índia"),
    ("ga", "d'Éirinn", "Éirinn"),
])
def test_elided_articles_leave_the_word(lang: str, question: str, page: str):
    name = terms(lang, page)[-1]
    assert name in terms(lang, question), (terms(lang, question), name)
    assert not any("'" in t for t in terms(lang, question))


def test_elision_keeps_words_that_only_contain_an_apostrophe():
    assert terms("fr", "aujourd'hui") == ["aujourd'hui"]  # "aujourd" is no article
    assert terms("it", "po'") == ["po"]  # ICU leaves a final apostrophe out of the word


def test_turkish_suffix_after_a_name_goes_with_its_apostrophe():
    assert terms("tr", "Kenya'nın") == terms("tr", "Kenya’da") == terms("tr", "Kenya") == ["kenya"]
    assert terms("tr", "İtalya'nın") == ["italya"]  # dotted capital I folded the Turkish way first


def test_english_possessive():
    assert terms("en", "Kenya's parks") == terms("en", "Kenya’s parks") == terms("en", "Kenya parks")


def test_korean_particles_leave_the_noun():
    assert "케냐" in terms("ko", "케냐의 긴급 전화번호")
    assert "케냐" in terms("ko", "케냐에서는")
    assert "이탈리아" in terms("ko", "이탈리아에서")
    assert terms("ko", "인도") == ["인도"]  # India: its last syllable is not the particle 도


def test_hebrew_prefixes_leave_the_word():
    assert "איטליה" in terms("he", "באיטליה")
    assert "איטליה" in terms("he", "ובאיטליה")  # two prefix letters: "and in"
    assert meet("he", "של הודו", "בהודו")  # India begins with ה itself


@pytest.mark.parametrize(("lang", "question", "page"), [
    ("fi", "Kenian hätänumero", "Keniassa"),
    ("pl", "numer alarmowy Kenii", "Kenia"),
    ("pl", "Włoch", "we Włoszech"),
    ("cs", "číslo Japonska", "v Japonsku"),
    ("uk", "номер Нідерландів", "в Нідерландах"),
    ("bn", "কেনিয়ার জরুরি নম্বর", "কেনিয়ায়"),
    ("ar", "رقم الطوارئ لإيطاليا", "في إيطاليا"),
    ("el", "της Ιταλίας", "στην Ιταλία"),
    ("de", "Kenias Notrufnummer", "in Kenia"),
    ("ka", "ეგვიპტის", "ეგვიპტეში"),
    ("az", "Keniyanın", "Keniyada"),
])
def test_case_forms_of_a_name_meet(lang: str, question: str, page: str):
    assert meet(lang, question, page) - meet(lang, "numer", page), (terms(lang, question), terms(lang, page))


def test_default_ignorable_characters_leave_no_trace():
    assert terms("en", "Pan\u00adthers") == terms("en", "Panthers")  # soft hyphen
    assert terms("ar", "مرحبا\u200f بكم") == terms("ar", "مرحبا بكم")  # right-to-left mark
    assert terms("fa", "می\u200cخواهم") == terms("fa", "میخواهم")  # zero-width non-joiner
    assert terms("te", "జపాన్\u200cలో") == terms("te", "జపాన్లో")
    assert terms("de", "Fuß\u200bball") == terms("de", "Fußball")  # zero-width space
    assert terms("ko", "\u3164")  # a Hangul filler is a (default-ignorable) letter: never no terms


def test_no_language_code_raises_and_letters_always_give_terms():
    for code in ("xx", "und", "en_US", "EN", "", None, "zz-Qaaa", "sn", "ti", "my"):
        assert analyzer_for(code).tokens("Kenya'nın l'Italie 케냐의 באיטליה") != []


# Hit@1 of each language's questions over its eight pages, measured by benchmarks/analyzers.py
# (benchmarks/results/analyzers.json): 1.0 everywhere but Shona, whose class prefixes (mu-, ye-)
# no analyzer here removes, and Arabic, where Snowball stems يابان and اليابان apart (لليابان's
# lemma keeps its ان, the article's form loses it). ANALYZER_VERSION 1 measured 0.688 overall.
FLOORS = dict.fromkeys(testbed.languages(), 1.0) | {"sn": 0.0, "ar": 0.875}
MEASURED = {"ar", "az", "bn", "bs", "ca", "cs", "da", "de", "el", "en", "es", "fa", "fi", "fr", "he", "hi", "hr",
            "ht", "hu", "hy", "id", "is", "it", "ja", "ka", "km", "ko", "ky", "lo", "mg", "mn", "ms", "my", "ne",
            "nl", "pl", "pt", "ru", "sl", "sn", "so", "sq", "sr", "sw", "te", "tg", "th", "ti", "tl", "tr", "uk",
            "ur", "uz", "vi", "zh-Hans", "zh-Hant"}


def test_bed_lexical_hit1_per_language():
    new = sorted(set(testbed.languages()) - MEASURED)
    assert not new, f"measure {new} with benchmarks/analyzers.py and add them to MEASURED (or FLOORS)"
    hits: dict[str, float] = {}
    for lang in testbed.languages():
        docs = testbed.documents([lang])
        index = LexicalIndex.build(normalize_code(lang), [(d.id, f"{d.title}\n{d.text}") for d in docs])
        qs = testbed.questions([lang])
        gold = testbed.qrels(qs)
        ok = 0
        for q in qs:
            got = index.rank(q.question, 2)
            tie = len(got.scores) > 1 and got.scores[0] <= got.scores[1]
            ok += bool(got.ids) and got.ids[0] in gold[q.id] and not tie
        hits[lang] = ok / len(qs)
    below = {lang: h for lang, h in hits.items() if h < FLOORS[lang]}
    assert not below, f"lexical Hit@1 below the measured floor: {below}"
    assert sum(hits.values()) / len(hits) >= 0.979  # measured 54.875 of 56 languages
