"""Substance checks: does an answer say something, and does what it says stand in the passages?

The language and citation checks look at an answer's form; a small model can pass both
while answering nothing: it echoes the question, copies the format template, or cites two
passages for "the documents do not say". These checks read what the answer says:

- :func:`non_answer`: empty, markers only, the question repeated, the prompt's template
  text repeated, a lead-in whose list never comes ("… are:"), or a yes/no answered both
  ways (:mod:`xlrag.checks.polarity`);
- :func:`unsupported`: the answer's words (character n-grams, beyond those it shares with
  the question) occur in none of its cited passages, nor in the answer's translation into
  a cited passage's language, beyond those it shares with the question's translation (a
  :class:`Rendering`: the caller translates; this module stays pure);
- :func:`refusal_despite_evidence`: "no information" while the passage the retriever
  ranked first holds the gold answer span, or, with no gold, shares most of the question's
  words (the lexical signal alone).

Each returns a :class:`Finding`; none calls a model. Character n-grams are used rather
than words because they survive morphology (Arabic prefixes, Russian case endings) and
scripts written without spaces (:mod:`xlrag.checks.lexical`). The thresholds are module
constants, measured on the vendored XQuAD items (``tests/checks/test_substance.py``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import cache
from importlib import resources
from typing import Any, Literal, get_args

import yaml
from pydantic import BaseModel, ConfigDict

from xlrag.checks.language import visible_text
from xlrag.checks.lexical import char_ngrams, has_no_space_script, normalize_answer, tokenize
from xlrag.checks.polarity import contradicts_itself, glued_negation, polarity_words

__all__ = [
    "FLAGS",
    "POST_HOC_ONLY",
    "SUBSTANCE_CHECKS",
    "UNCITED",
    "UNVERIFIED_REASONS",
    "Finding",
    "Rendering",
    "evidence_in",
    "is_refusal",
    "non_answer",
    "polarity_words",
    "refusal_cues",
    "refusal_despite_evidence",
    "unsupported",
    "unverified",
]

SubstanceCheck = Literal["non_answer", "unsupported", "refusal"]
SUBSTANCE_CHECKS: tuple[str, ...] = get_args(SubstanceCheck)
# The flag an answer carries when a check still fails after every repair: what the CLI,
# the server and the chat show. A refusal while the evidence was there is no answer either.
FLAGS: dict[str, str] = {"non_answer": "not_an_answer", "unsupported": "unsupported",
                         "refusal": "not_an_answer"}
# Why an answer over passages may be grounded in none of them: it cites none that was shown
# (an obeyed injection's "<doc7>", say), or only post-hoc citations, xlrag's guess by similarity.
UNCITED, POST_HOC_ONLY = "uncited", "post_hoc_only"
#: Every reason an answer is not shown as verified (the CLI has words for each, the server's
#: ``verified`` is false for each).
UNVERIFIED_REASONS: tuple[str, ...] = (*dict.fromkeys(FLAGS.values()), UNCITED, POST_HOC_ONLY)


def unverified(answer: Any) -> list[str]:
    """Why ``answer`` (a GroundedAnswer) must not be shown as verified; empty when it may be.
    The substance flags, then the grounding: an answer over passages needs a valid citation
    the model (or the vendor's API) gave itself."""
    reasons = [f for f in dict.fromkeys(FLAGS.values()) if f in answer.flags]
    if answer.passages and not answer.model_citations:
        reasons.append(POST_HOC_ONLY if answer.post_hoc_only else UNCITED)
    return reasons

# An answer inside the question: most of its n-grams are the question's (ECHO_INSIDE) and it
# repeats a good part of the question (ECHO_COVER); "France" for "France or Spain?" is not.
ECHO_INSIDE = 0.85
ECHO_COVER = 0.5
# A reply that ends in a question mark and shares this much with the question asks it back.
QUESTION_BACK = 0.6
_QUESTION_MARKS = ("?", "؟", "？", ";", "՞")  # Greek writes its question mark as ";"
# Share of the answer's own n-grams (those not in the question) that a cited passage must hold.
SUPPORT = 0.5
# With no gold: the top passage holds this share of the question's n-grams.
EVIDENCE = 0.6

_HAS_WORD = re.compile(r"[^\W_]")
_NUMBER = re.compile(r"\d")
# A last clause ending in a colon announces what comes next ("العطل الرسمية في جزر كوك هي:",
# "The answer is:"); when nothing comes, the clause said nothing. A clause with a number in it
# is a list cut short ("Ambulance 911, Police:"), which said something.
_LEAD_IN = re.compile(r"[^.!?؟。！？\n]*[:：]\s*$")


class Finding(BaseModel):
    """One check's result on one answer."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    check: SubstanceCheck
    passed: bool
    reason: str
    score: float | None = None


class Rendering(BaseModel):
    """An answer translated into a cited passage's language, with its question translated
    too: the words the translation shares with the translated question are the question's,
    as the original's are (an answer restating "the South Kuril Islands" must not need
    "南クリル諸島" in a passage that says "北方四島"). Whole lines are translated, not the
    words an answer adds: the default 1.5B model turned "ukraine" alone into "Відповідь:
    English" and "japan" into Arabic "China"."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    answer: str
    question: str


def _spelled(text: str, lang: str | None) -> str:
    """``text`` with the spellings ``lang`` writes interchangeably made one (the lexical
    channel's folding, :meth:`xlrag.indexes.analyzers.Analyzer.fold`): every check compares
    folded texts, so "أنا اماراتي ..." repeats "انا اماراتي ...". The answer metrics keep MLQA's
    normalisation, which does not fold."""
    import unicodedata

    from xlrag.indexes.analyzers import analyzer_for

    return analyzer_for(lang).fold(unicodedata.normalize("NFKC", text))


def _share(part: set[str], whole: set[str]) -> float:
    return len(part & whole) / len(part) if part else 0.0


def _inside(answer: str, reference: str, lang: str | None) -> tuple[float, float]:
    """How much of ``answer`` is in ``reference``, and how much of ``reference`` it repeats."""
    a, r = char_ngrams(answer, lang), char_ngrams(reference, lang)
    return _share(a, r), _share(r, a)


def _adds_content(answer: str, question: str, lang: str | None) -> bool:
    """Whether the answer has a word of its own: a number, a yes or a no the question lacks
    (:func:`~xlrag.checks.polarity.polarity_words`), or a word most of whose n-grams the question lacks ("الطلاب" in a
    sentence that otherwise restates the question; an inflected question word such as
    "توافدوا" for "توافد" is not one)."""
    asked_tokens = set(tokenize(question, lang))
    asked = char_ngrams(question, lang)
    for token in tokenize(answer, lang):
        if token in asked_tokens:
            continue
        if _NUMBER.search(token) or has_no_space_script(token):
            return True
        # a yes or a no the question lacks answers it: "لا أحتاج إلى تأشيرة" for "هل أحتاج إلى تأشيرة؟"
        if token in polarity_words(lang) or glued_negation(token, asked_tokens, lang):
            return True
        grams = char_ngrams(token, lang)
        if len(token) >= 3 and len(grams - asked) * 2 > len(grams):
            return True
    return False


def non_answer(answer: str | None, question: str, lang: str | None = None,
               templates: Sequence[str] = ()) -> Finding:
    """Whether ``answer`` says nothing: ``passed`` is False for an empty reply, markers only,
    the question repeated, or a line of the prompt's template (``templates``) repeated."""
    text, question = _spelled(visible_text(answer or ""), lang), _spelled(question, lang)
    if not text:
        return Finding(check="non_answer", passed=False, reason="the answer is empty (or only <docN> markers)")
    if not _HAS_WORD.search(text):
        return Finding(check="non_answer", passed=False, reason=f"the answer is only punctuation: {text!r}")
    lead_in = _LEAD_IN.search(text)
    if lead_in and not _NUMBER.search(lead_in.group()):
        text = text[:lead_in.start()]
        if not _HAS_WORD.search(text):
            return Finding(check="non_answer", passed=False,
                           reason=f"the answer only announces what it never says: {lead_in.group().strip()[:80]!r}")
    inside, cover = _inside(text, question, lang)
    if inside >= ECHO_INSIDE and cover >= ECHO_COVER and not _adds_content(text, question, lang):
        return Finding(check="non_answer", passed=False, score=inside,
                       reason=f"the answer repeats the question ({inside:.0%} of it is the question's words)")
    # "No, I need a visa" for "Do I need a visa?" answers both ways, which is no answer
    if (why := contradicts_itself(text, question, lang)) is not None:
        return Finding(check="non_answer", passed=False, reason=why)
    if text.rstrip().endswith(_QUESTION_MARKS) and inside >= QUESTION_BACK:
        return Finding(check="non_answer", passed=False, score=inside,
                       reason="the answer is the question asked back in other words")
    # the template's lines as a reader sees them, labels stripped like the answer's: "Answer:
    # 你的答案" left the placeholder too short a part of the line to count as its repetition
    for line in (_spelled(visible_text(x), lang) for t in templates for x in t.splitlines()):
        if len(char_ngrams(line, lang)) < 3:
            continue
        inside, cover = _inside(text, line, lang)
        if inside >= ECHO_INSIDE and cover >= ECHO_COVER:
            return Finding(check="non_answer", passed=False, score=inside,
                           reason=f"the answer repeats the prompt's template: {line.strip()[:80]!r}")
    return Finding(check="non_answer", passed=True, reason="the answer says something of its own")


def unsupported(answer: str | None, question: str, passages: Sequence[str], lang: str | None = None,
                renderings: Sequence[Rendering] = ()) -> Finding:
    """Whether the answer's own words occur in a cited passage: ``passed`` is False when no
    passage holds :data:`SUPPORT` of them. ``renderings``: the answer and its question
    translated into the cited passages' languages, checked the same way (a Spanish answer
    from a German passage). An answer with no words beyond the question's is left to
    :func:`non_answer`."""
    if not passages:
        return Finding(check="unsupported", passed=False, reason="the answer cites no passage")
    asked = char_ngrams(_spelled(question, lang), lang)
    held = [char_ngrams(_spelled(p, lang), None) for p in passages]
    best, found_any = 0.0, False
    # a translation may keep a name as the original question spells it, so its words count as asked too
    for text, also_asked in ((answer or "", set()),
                             *((r.answer, char_ngrams(_spelled(r.question, lang), lang)) for r in renderings)):
        own = char_ngrams(_spelled(visible_text(text), lang), None) - asked - also_asked
        if not own:
            continue
        found_any = True
        for grams in held:
            best = max(best, _share(own, grams))
    if not found_any:
        return Finding(check="unsupported", passed=True, score=None,
                       reason="nothing beyond the question's words to look up")
    verdict = best >= SUPPORT
    via = " (with its translation)" if renderings else ""
    return Finding(check="unsupported", passed=verdict, score=best,
                   reason=f"{best:.0%} of the answer's own words{via} occur in its best cited passage"
                          f" (needs {SUPPORT:.0%})")


@cache
def refusal_cues() -> dict[str, tuple[str, ...]]:
    """Phrases that say "the documents do not answer", by language (``refusals.yaml``)."""
    raw = yaml.safe_load(resources.files("xlrag.checks").joinpath("refusals.yaml").read_text("utf-8"))
    return {lang: tuple(normalize_answer(_spelled(c, lang), lang) for c in cues) for lang, cues in raw.items()}


def is_refusal(answer: str | None, lang: str | None = None) -> bool:
    """Whether the answer says the documents do not hold the answer: a cue of its language
    (or English, which small models fall back to) inside the normalised answer."""
    cues = refusal_cues()
    for code in dict.fromkeys((lang or "en", "en")):
        text = f" {normalize_answer(_spelled(visible_text(answer or ''), code), lang)} "
        # Chinese, Japanese and Thai cues have no spaces around them to match on
        if any((c in text) if has_no_space_script(c) else (f" {c} " in text) for c in cues.get(code, ())):
            return True
    return False


def evidence_in(passage: str, question: str, gold: Sequence[str] | None = None,
                lang: str | None = None) -> tuple[bool, str]:
    """Whether ``passage`` holds the answer: a gold span in it when gold is known, else
    :data:`EVIDENCE` of the question's n-grams in it (a lexical signal, same language only)."""
    passage, question = _spelled(passage, lang), _spelled(question, lang)
    if gold:
        body = f" {normalize_answer(passage, lang)} "
        for g in gold:
            norm = normalize_answer(_spelled(g, lang), lang)
            if norm and f" {norm} " in body:
                return True, f"the top passage holds the gold answer {g!r}"
        return False, "the top passage holds no gold answer"
    share = _share(char_ngrams(question, lang), char_ngrams(passage, lang))
    return share >= EVIDENCE, f"the top passage holds {share:.0%} of the question's words"


def refusal_despite_evidence(answer: str | None, question: str, top_passage: str | None,
                             lang: str | None = None, gold: Sequence[str] | None = None) -> Finding:
    """``passed`` is False when the answer refuses while the retriever's first passage holds
    the answer (:func:`evidence_in`)."""
    if not is_refusal(answer, lang):
        return Finding(check="refusal", passed=True, reason="the answer does not refuse")
    if not top_passage:
        return Finding(check="refusal", passed=True, reason="refuses, and no passage was retrieved")
    found, why = evidence_in(top_passage, question, gold, lang)
    return Finding(check="refusal", passed=not found,
                   reason=f"the answer says the documents do not answer, but {why}" if found
                   else f"the answer refuses; {why}")
