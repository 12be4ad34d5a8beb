"""Answer metrics that hold up outside English: char 3-gram recall, EM/F1, chrF.

SQuAD's normalisation splits on white space and strips English articles, so for Chinese,
Japanese or Thai a whole answer becomes one token and F1 is all or nothing. Here the
normalisation follows MLQA (Lewis et al., 2020): punctuation is every Unicode ``P*``
character, articles are stripped per language, and scripts written without spaces are
split into characters ("character level where there are no spaces"), for every language
rather than a fixed list, so a Chinese name inside a German answer is still split.

Every metric takes several gold answers and keeps the best match, as SQuAD does.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from collections.abc import Sequence

__all__ = ["char3_recall", "chrf", "exact_match", "normalize_answer", "token_f1", "tokenize"]

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


def exact_match(prediction: str, golds: Sequence[str], lang: str | None = None) -> float:
    """1.0 when the normalised prediction equals a normalised gold answer."""
    pred = tokenize(prediction, lang)
    return float(any(pred == tokenize(g, lang) for g in golds))


def token_f1(prediction: str, golds: Sequence[str], lang: str | None = None) -> float:
    """SQuAD token F1 over :func:`tokenize`, best over the gold answers."""
    pred = tokenize(prediction, lang)
    best = 0.0
    for gold in golds:
        want = tokenize(gold, lang)
        if not pred or not want:
            best = max(best, float(pred == want))
            continue
        same = sum((Counter(pred) & Counter(want)).values())
        if same:
            precision, recall = same / len(pred), same / len(want)
            best = max(best, 2 * precision * recall / (precision + recall))
    return best


def _fold(text: str) -> str:
    return " ".join(text.lower().split())


def _grams(text: str) -> set[str]:
    return {text[i:i + 3] for i in range(len(text) - 2)}


def char3_recall(answer: str, golds: Sequence[str]) -> float:
    """Share of a gold answer's character 3-grams found in ``answer``; max over golds (mRAG).

    Lower-cased and white space folded, nothing else: the metric is meant to be lenient about
    wording and strict about nothing, so it is comparable across scripts.
    """
    folded = _fold(answer)
    have = _grams(folded)
    best = 0.0
    for gold in golds:
        g = _fold(gold)
        if 0 < len(g) < 3:
            # "24" has no 3-gram: it is found or not (an earlier version compared it with the
            # answer's 3-grams and scored every two-character gold 0)
            best = max(best, float(g in folded))
            continue
        want = _grams(g)
        if want:
            best = max(best, len(want & have) / len(want))
    return best


def chrf(prediction: str, golds: Sequence[str]) -> float:
    """Sentence chrF (sacrebleu, character 6-grams, beta 2) on 0-100, best over the golds."""
    from xlrag.registry import require

    require("sacrebleu", "eval", "chrF")
    from sacrebleu.metrics import CHRF

    metric = CHRF()
    return max((metric.sentence_score(prediction, [g]).score for g in golds), default=0.0)
