"""The sentence of a passage in the user's language that answers as the model did: an answer
line the model wrote in another language, replaced by what a passage in the user's language
says, with no model call.

A small model shown passages in many languages often copies an English one for its answer
line (the test bed in Shona: the English page's three sentences under a Shona question), and
translating it back with the same model fails in the languages it writes worst (it answered
"I apologize, but I can't assist with that request." for the translation). When a passage in
the user's language was retrieved, one of its sentences is about the question and holds the
model's answer (a number whole, a name by its letters): that sentence is an answer line in the
user's language, grounded by construction.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, Field

from xlrag.checks.language import _code, visible_text
from xlrag.checks.substance import TOPIC, _content, _holds, _own_words, _Sentences
from xlrag.schema import Passage

__all__ = ["Quote", "best_sentence", "quote"]

NAMING = 1.0  # the least content (substance._content) a held word needs: a number or a 5-letter word
COVER_TIE = 0.05  # passages this close to the best coverage of the question's words are as much about it


class Quote(BaseModel):
    """A sentence quoted from a passage for the answer line."""

    index: int = Field(description="the passage's position in the list given (its <docN> marker)")
    text: str = Field(description="the sentence, as the passage writes it")
    about: float = Field(description="the weighted share of the question's words it (or a heading above it) holds")
    held: list[str] = Field(description="the answer's own words it holds")


def best_sentence(question: str, passages: Sequence[Passage], lang: str) -> Quote | None:
    """The sentence most about ``question`` (at least :data:`~xlrag.checks.substance.TOPIC`) of
    the passages in ``lang`` most about it: what a reader is shown when the model gave no answer
    line at all (a small model echoing its instructions in Burmese). None when no passage in
    ``lang`` has one."""
    return quote(None, question, passages, lang)


def quote(answer: str | None, question: str, passages: Sequence[Passage], lang: str) -> Quote | None:
    """The sentence of a passage in ``lang`` that is about ``question`` (:data:`~xlrag.checks.substance.TOPIC`
    of its words, as the support check reads it) and holds a naming word of ``answer``'s own (a
    number whole, or a word of five letters or more, with any ending); the one most about the
    question, then holding most of the answer. None when no passage in ``lang`` has one, or the
    answer says nothing beyond the question's words. ``answer`` None: no answer to hold
    (:func:`best_sentence`)."""
    own = _own_words(visible_text(answer), (question,), lang) if answer is not None else []
    if answer is not None and not own:
        return None
    read = {i: _Sentences(p, lang) for i, p in enumerate(passages) if p.lang and _code(p.lang) == _code(lang)}
    if not read:
        return None
    # only from the passages most about the question: a page about Kenya holds a sentence about
    # the emergency number too, and quoting it for Italy would ground a wrong answer
    cover = {i: _coverage(passages[i], question, lang) for i in read}
    top = max(cover.values())
    best: Quote | None = None
    for i, r in read.items():
        if cover[i] < top - COVER_TIE:
            continue
        for j, score in enumerate(r.about(question, lang)):
            held = [t for t in own if _content(t) >= NAMING and _holds(t, r.units[j])]
            if score < TOPIC or (answer is not None and not held):
                continue
            found = Quote(index=i, text=r.texts[j], about=score, held=held)
            if best is None or (found.about, len(found.held)) > (best.about, len(best.held)):
                best = found
    return best


def _coverage(passage: Passage, question: str, lang: str) -> float:
    """The share of the question's terms the passage holds, as the lexical channel reads both
    (:func:`~xlrag.indexes.analyzers.analyzer_for`: elisions, particles, prefixes and case
    endings taken off, so Arabic "لمصر" meets "مصر")."""
    from xlrag.indexes.analyzers import analyzer_for

    analyzer = analyzer_for(lang)
    asked = set(analyzer.tokens(question))
    return len(asked & set(analyzer.tokens(passage.text))) / len(asked) if asked else 0.0
