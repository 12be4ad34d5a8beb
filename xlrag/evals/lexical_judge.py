"""A reference-based judge that calls no model: is a gold answer in the response?

A response is correct when it says something (:func:`xlrag.checks.substance.non_answer`
passes) and a gold answer is in it: its normalised tokens appear in order in the
response's, or enough of its character n-grams do (:data:`DEFAULT_THRESHOLD`). The
n-grams hold up where whole tokens do not (Arabic prefixes, Russian case endings); the
n-gram size follows the gold answer's script (2 for Chinese, 3 otherwise) and the response
is cut with the same size, so "1961" is found in "成立于1961年".

What it cannot do is read a gold answer in another language or script: "Jared Allen" for
"Джаред Аллен" is incorrect to it. The calibration (:mod:`xlrag.evals.calibration`) measures
how much that costs, per language.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from xlrag.checks.lexical import has_no_space_script, normalize_answer, tokenize

__all__ = ["DEFAULT_THRESHOLD", "LEXICAL_KIND", "LexicalJudge", "LexicalJudgeConfig", "gold_recall"]

LEXICAL_KIND = "lexical"
# Share of a gold answer's character n-grams the response must hold. Fixed before the
# calibration ran (a gold answer with a case ending or prefix changed keeps ~0.75 of its
# 3-grams); benchmarks/results/judges.json sweeps it for the record.
DEFAULT_THRESHOLD = 0.75


class LexicalJudgeConfig(BaseModel):
    """A panel member that matches the response against the gold answers (no model)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["lexical"] = Field(description="the reference-based judge (no LLM)")
    name: str | None = Field(None, description="label in reports; default lexical (with the threshold "
                                               "when it is not the default)")
    threshold: float = Field(DEFAULT_THRESHOLD, gt=0.0, le=1.0,
                             description="share of a gold answer's character n-grams the response must hold")

    @property
    def label(self) -> str:
        if self.name:
            return self.name
        return LEXICAL_KIND if self.threshold == DEFAULT_THRESHOLD else f"{LEXICAL_KIND}@{self.threshold:g}"


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
        from xlrag.checks.substance import non_answer

        said = non_answer(response, question, lang, templates=self.templates(lang))
        if not said.passed:
            return False, said.reason
        score, gold = gold_recall(response, golds, lang)
        if score >= self.config.threshold:
            return True, f"the response holds the gold answer {gold!r} ({score:.0%} of its n-grams)"
        return False, (f"the response holds {score:.0%} of the best gold answer's n-grams "
                       f"(needs {self.config.threshold:.0%})")
