"""Word-level morphology for the lexical analyzers (:mod:`xlrag.indexes.analyzers`): the steps
between ICU's words and the index terms that a stemmer alone does not take.

- apostrophes: Lucene's ``ElisionFilter`` with its analyzers' article sets (French, Italian,
  Catalan, Irish: ``l'Italie`` → ``italie``), its Turkish ``ApostropheFilter`` (``Kenya'nın`` →
  ``kenya``) and its ``EnglishPossessiveFilter`` (``Kenya's`` → ``kenya``);
- lemmas from ``simplemma`` (dictionaries shipped in the wheel, nothing downloaded) for the
  languages where the analyzers' table chose them over Snowball by measurement;
- extra terms, where neither a stemmer nor a lemmatizer reaches: a word keeps its own term and
  adds the forms below, so no match the word itself made is lost (as the CJK bigrams do):
  Hebrew prefix letters, Korean particles, and for alphabetic languages with no stemmer the
  word's first letters (truncation, the language-independent pseudo-stem of McNamee, Nicholas
  and Mayfield, "Addressing morphological variation in alphabetic languages", SIGIR 2009).

Words reach these functions casefolded, NFKC-normalised, with every apostrophe-like mark ICU
keeps inside a word mapped to ``'`` (:data:`APOSTROPHES`).
"""

from __future__ import annotations

import threading
from functools import lru_cache

__all__ = ["APOSTROPHES", "ELISION_ARTICLES", "LEMMA_CODES", "TRUNCATE", "elide", "hebrew_variants",
           "korean_variants", "lemmatizer", "possessive", "strip_suffix_after_apostrophe", "truncated"]

# Marks written for an apostrophe that ICU's word breaks keep inside a word (MidNumLet, or a
# letter for U+02BC): a typed ASCII apostrophe, the typographic right quote word processors put
# in its place, the left quote some keyboards give, the modifier letter apostrophe. Folding them
# to one makes "l’Italie" and "l'Italie", "Kenya’nın" and "Kenya'nın" the same word.
APOSTROPHES = "\u2019\u2018\u02bc\uff07"

# Lucene's DEFAULT_ARTICLES of FrenchAnalyzer, ItalianAnalyzer, CatalanAnalyzer and IrishAnalyzer.
ELISION_ARTICLES: dict[str, frozenset[str]] = {
    "fr": frozenset({"l", "m", "t", "qu", "n", "s", "j", "d", "c", "jusqu", "quoiqu", "lorsqu", "puisqu"}),
    "it": frozenset({"c", "l", "all", "dall", "dell", "nell", "sull", "coll", "pell", "gl", "agl", "dagl",
                     "degl", "negl", "sugl", "un", "m", "t", "s", "v", "d"}),
    "ca": frozenset({"d", "l", "m", "n", "s", "t"}),
    "ga": frozenset({"d", "m", "b"}),
}

# The xlrag code of a language → simplemma's, where they differ (Serbo-Croatian is one dictionary).
LEMMA_CODES = {"hr": "hbs", "bs": "hbs", "sr": "hbs", "cnr": "hbs", "sh": "hbs"}

# Truncation length: McNamee et al. found 4 and 5 best across 18 languages; on xlrag's test bed 4
# met the name forms 5 missed in Mongolian (кени/кенийн), Polish, Albanian, Georgian and Uzbek, and
# 5 met none that 4 missed (benchmarks/analyzers.py).
TRUNCATE = 4

_HEBREW_PREFIXES = frozenset("והבלמשכ")
# Case particles and common postpositions written onto a Korean noun (josa), longest first so
# that 에서는 goes before 는. The list is the closed class of the standard grammar, not a lexicon.
_KOREAN_PARTICLES = tuple(sorted(
    ("의", "에", "에서", "에서는", "에서도", "에게", "에게서", "께", "께서", "한테", "으로", "로", "으로는", "로는",
     "은", "는", "이", "가", "을", "를", "와", "과", "도", "만", "까지", "부터", "보다", "처럼", "이나", "나",
     "에는", "에도", "의는", "이다", "입니다", "이며", "과의", "와의", "에서의", "으로의", "로의"),
    key=len, reverse=True))


def elide(word: str, articles: frozenset[str]) -> str:
    """Lucene's ElisionFilter: ``word`` without an elided article before its first apostrophe."""
    i = word.find("'")
    if i > 0 and i < len(word) - 1 and word[:i] in articles:
        return word[i + 1:]
    return word


def strip_suffix_after_apostrophe(word: str) -> str:
    """Lucene's Turkish ApostropheFilter: a proper name's suffix goes with its apostrophe."""
    i = word.find("'")
    return word[:i] if i > 0 else word


def possessive(word: str) -> str:
    """Lucene's EnglishPossessiveFilter: a trailing ``'s`` goes."""
    return word[:-2] if len(word) > 2 and word.endswith("'s") else word


def hebrew_variants(word: str) -> list[str]:
    """The word without one, two or three prefix letters (ו ה ב ל מ ש כ), while two letters remain:
    ``ובאיטליה`` → ``באיטליה``, ``איטליה``. A word that merely begins with one of those letters
    (``הודו``) adds forms no other word makes, so it still meets ``בהודו`` through itself."""
    out = []
    for i in range(3):
        if word[i] not in _HEBREW_PREFIXES or len(word) - i - 1 < 2:
            break
        out.append(word[i + 1:])
    return out


def korean_variants(word: str) -> list[str]:
    """The noun of a Hangul word ending in a particle: ``케냐의`` → ``케냐``, ``케냐에서는`` → ``케냐``.
    Two syllables must remain: a final syllable of a two-syllable noun is often a particle's
    homograph (인도 "India" is not 인 + 도 "also")."""
    for p in _KOREAN_PARTICLES:
        if len(word) >= len(p) + 2 and word.endswith(p) and _is_hangul(word[-len(p) - 1]):
            return [word[:-len(p)]]
    return []


def _is_hangul(ch: str) -> bool:
    return "\uac00" <= ch <= "\ud7a3"


def truncated(word: str) -> list[str]:
    """The word's first :data:`TRUNCATE` characters, when it is longer and holds no digit (a
    number's first digits are not its stem). Characters, not graphemes: an Indic vowel sign cut
    off its consonant is cut off the same way in every form of the word."""
    return [word[:TRUNCATE]] if len(word) > TRUNCATE and not any(c.isdecimal() for c in word) else []


_loading = threading.Lock()


def lemmatizer(lang: str):
    """A cached ``word -> lemma`` (casefolded) for ``lang``; simplemma returns the word itself when
    its dictionary and rules know no lemma."""
    return _lemmatizer(LEMMA_CODES.get(lang, lang))


@lru_cache(maxsize=64)
def _lemmatizer(code: str):
    import simplemma

    @lru_cache(maxsize=200_000)
    def lemma(word: str) -> str:
        return simplemma.lemmatize(word, lang=code).casefold() or word

    with _loading:  # simplemma loads a language's dictionary on first use; once, not per thread
        lemma("a")
    return lemma
