"""Answer metrics that hold up outside English: char 3-gram recall, EM/F1, chrF.

The normalisation (MLQA's, for every script) lives in :mod:`xlrag.checks.lexical`, shared
with the runtime substance checks.

Every metric takes several gold answers and keeps the best match, as SQuAD does.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from xlrag.checks.lexical import fold as _fold
from xlrag.checks.lexical import normalize_answer, tokenize
from xlrag.registry import require

__all__ = ["char3_recall", "chrf", "exact_match", "normalize_answer", "token_f1", "tokenize"]


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
    require("sacrebleu", "eval", "chrF")
    from sacrebleu.metrics import CHRF

    metric = CHRF()
    return max((metric.sentence_score(prediction, [g]).score for g in golds), default=0.0)
