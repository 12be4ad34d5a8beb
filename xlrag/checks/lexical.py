"""Text normalisation shared by the runtime checks and the answer metrics.

SQuAD's normalisation splits on white space and strips English articles, so for Chinese,
Japanese or Thai a whole answer becomes one token and F1 is all or nothing. Here the
normalisation follows MLQA (Lewis et al., 2020): punctuation is every Unicode ``P*``
character, articles are stripped per language, and scripts written without spaces are
split into characters ("character level where there are no spaces"), for every language
rather than a fixed list, so a Chinese name inside a German answer is still split.

The character n-grams here are what the substance checks (:mod:`xlrag.checks.substance`)
compare: they hold up across morphology (Arabic prefixes, Russian case endings) where
whole words do not.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable

__all__ = ["added_tokens", "asked_by", "char_ngrams", "dominant_script", "fold", "has_no_space_script",
           "normalize_answer",
           "tokenize"]

# Scripts written without spaces between words: every character is a token.
_NO_SPACE = re.compile(
    "["
    "\u0e00-\u0e7f"  # Thai
    "\u0e80-\u0eff"  # Lao
    "\u1000-\u109f"  # Myanmar
    "\u1780-\u17ff"  # Khmer
    "\u3040-\u30ff"  # Hiragana, Katakana
    "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"  # CJK ideographs
    "\U00020000-\U0002fa1f"
    "]"
)
_ARTICLES = {
    "en": r"\b(?:a|an|the)\b",
    "es": r"\b(?:un|una|unos|unas|el|la|los|las)\b",
    "de": r"\b(?:ein|eine|einen|einem|eines|einer|der|die|das|den|dem|des)\b",
    "fr": r"\b(?:un|une|des|le|la|les|l')",
    "it": r"\b(?:un|uno|una|il|lo|la|i|gli|le|l')",
    "pt": r"\b(?:um|uma|uns|umas|o|a|os|as)\b",
    "vi": r"\b(?:của|là|cái|chiếc|những)\b",
}
# Arabic: the definite article is a prefix ("الكتاب"), so it is stripped at word starts only
# (MLQA's pattern deletes every "ال" inside words too); tashkeel and tatweel carry no meaning here.
_AR_ARTICLE = re.compile(r"(?<!\w)ال(?=\w{2,})")
_AR_MARKS = re.compile("[\u0610-\u061a\u064b-\u065f\u0670\u06d6-\u06ed\u0640]")


def _is_punct(ch: str) -> bool:
    return unicodedata.category(ch).startswith("P")


def normalize_answer(text: str, lang: str | None = None) -> str:
    """NFKC, case-folded, punctuation removed, articles of ``lang`` removed, spaces folded."""
    text = unicodedata.normalize("NFKC", text).casefold()
    if lang == "ar" or lang is None:
        text = _AR_MARKS.sub("", text)
    if lang in _ARTICLES:
        # before punctuation goes: the French and Italian elided article ends in an apostrophe
        text = re.sub(_ARTICLES[lang], " ", text)
    text = "".join(" " if _is_punct(ch) else ch for ch in text)
    if lang == "ar":
        text = _AR_ARTICLE.sub("", text)
    return " ".join(text.split())


def tokenize(text: str, lang: str | None = None) -> list[str]:
    """Tokens of the normalised text: words, and single characters of space-less scripts."""
    out: list[str] = []
    for word in normalize_answer(text, lang).split():
        start = 0
        for m in _NO_SPACE.finditer(word):
            if m.start() > start:
                out.append(word[start:m.start()])
            out.append(m.group())
            start = m.end()
        if start < len(word):
            out.append(word[start:])
    return out




def fold(text: str) -> str:
    """Lower-cased with white space folded: the lenient form char 3-gram recall compares."""
    return " ".join(text.lower().split())


def has_no_space_script(text: str) -> bool:
    """Whether most letters of ``text`` are in a script written without spaces (CJK, Thai...)."""
    letters = [ch for ch in text if ch.isalpha()]
    return bool(letters) and sum(bool(_NO_SPACE.match(ch)) for ch in letters) * 2 > len(letters)


def char_ngrams(text: str, lang: str | None = None, n: int | None = None) -> set[str]:
    """Character n-grams of the normalised text, inside words only (3 by default, 2 for
    space-less scripts, where one character already carries a word's weight)."""
    norm = normalize_answer(text, lang)
    if n is None:
        n = 2 if has_no_space_script(norm) else 3
    out: set[str] = set()
    for word in norm.split():
        if len(word) < n:
            out.add(word)
            continue
        out.update(word[i:i + n] for i in range(len(word) - n + 1))
    return out


# Share of a word's 3-grams the question's must hold for the word to count as the question's
# own, inflected ("للسياحة" asked, "سياحة" said)
ASKED_SHARE = 0.75


def asked_by(question: str, lang: str | None = None) -> Callable[[str], bool]:
    """Whether a token is one ``question`` asks about: one of its tokens, or one with another
    prefix or ending (:data:`ASKED_SHARE` of its 3-grams in the question's)."""
    asked = set(tokenize(question, lang))
    asked_grams = char_ngrams(question, lang, 3)

    def is_asked(t: str) -> bool:
        if t in asked:
            return True
        grams = char_ngrams(t, lang, 3)
        return len(t) > 3 and len(grams & asked_grams) >= ASKED_SHARE * len(grams)

    return is_asked


def added_tokens(text: str, question: str, lang: str | None = None) -> list[str]:
    """The tokens of ``text`` that ``question`` does not ask about: what an answer adds."""
    is_asked = asked_by(question, lang)
    return [t for t in tokenize(text, lang) if not is_asked(t)]


def letter_script(ch: str) -> str:
    """The Unicode script word of a letter's name (LATIN, CYRILLIC, ARABIC, CJK...)."""
    return unicodedata.name(ch, "?").split()[0]


def dominant_script(text: str) -> str | None:
    """The script most of ``text``'s letters are in, None without letters."""
    names = [letter_script(ch) for ch in text if ch.isalpha()]
    return max(set(names), key=names.count) if names else None
