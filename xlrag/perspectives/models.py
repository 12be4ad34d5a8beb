"""What the perspectives view takes and gives: typed models, no model calls.

One :class:`Perspective` per language of sources (its answer, in the user's language, with
``<docN>`` citations into that language's passages), one :class:`PairAgreement` per pair
of answered perspectives, and the verdict: :class:`Consensus` groups and
:class:`Disagreement` points, each side with its own valid citations. The verdict never
travels without the per-language answers it was drawn from.
"""

from __future__ import annotations

from typing import Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, model_validator

from xlrag.schema import Citation, GroundedAnswer, Query, check_carried
from xlrag.trace import Trace

__all__ = [
    "AGREEMENTS",
    "LANGUAGE_SOURCES",
    "METHODS",
    "PERSPECTIVE_STATUSES",
    "STATUSES",
    "Consensus",
    "Costs",
    "Disagreement",
    "LanguageChoice",
    "PairAgreement",
    "Perspective",
    "Perspectives",
    "PerspectivesInput",
    "Side",
]

# where the languages came from: the caller; an agent rule naming the entity; the claimants
# of a BorderLines territory the question names; the best-ranked stores for the question
LanguageSource = Literal["given", "rule", "claimants", "top_by_retrieval"]
LANGUAGE_SOURCES: tuple[str, ...] = get_args(LanguageSource)
Agreement = Literal["agree", "disagree", "unsure"]
AGREEMENTS: tuple[str, ...] = get_args(Agreement)
# lexical: the answers' own words decided; judge: the calibrated judge panel did (the words were unsure)
Method = Literal["lexical", "judge"]
METHODS: tuple[str, ...] = get_args(Method)
# answered: a verified answer, compared with the others; no_passages: the store returned nothing,
# so no model was asked; not_an_answer: the answer says nothing (or refuses) after the agent's
# repairs; unverified: it says something its cited passages do not hold, or cites none itself
# (xlrag.checks.substance.unverified): shown, never compared, since a disagreement drawn from it
# could be the model's and not the sources'
PerspectiveStatus = Literal["answered", "no_passages", "not_an_answer", "unverified"]
PERSPECTIVE_STATUSES: tuple[str, ...] = get_args(PerspectiveStatus)
# consensus: every answered perspective agrees; disagreement: some pair disagrees; unsure: no
# pair disagrees but some could not be decided; single: fewer than two answers to compare
Status = Literal["consensus", "disagreement", "unsure", "single"]
STATUSES: tuple[str, ...] = get_args(Status)
MAX_LANGS = 8  # answers grow with N, comparisons with N²


class PerspectivesInput(BaseModel):
    """One question for the perspectives view. Unknown fields are an error."""

    model_config = ConfigDict(extra="forbid")

    question: str = Field(min_length=1, description="the question, in any language (the answers come back in it)")
    lang: str | None = Field(None, description="the question's language as an ISO 639 code; detected when omitted")
    relevant_langs: list[str] | None = Field(
        None, description="the languages of sources to compare, e.g. ['ru', 'uk', 'en']; omitted: "
                          "an agent rule's or a disputed territory's languages, else the best-ranked stores")
    max_langs: int = Field(3, ge=1, le=MAX_LANGS, description="at most this many perspectives (answers: N, "
                                                             "comparisons: N(N-1)/2); languages named in "
                                                             "relevant_langs are all kept unless max_langs is "
                                                             "given too")
    query: Query | None = Field(None, description="the question already made into a Query (a server's admitted "
                                                  "one): searched as it is, its id kept")

    @model_validator(mode="after")
    def _one_question(self) -> PerspectivesInput:
        # relevant_langs here are the perspectives to compare, not the query's: only the
        # question and its language must be the query's
        check_carried(self.question, self.query, {"lang": self.lang} if self.lang is not None else {})
        return self

class LanguageChoice(BaseModel):
    """Which languages were compared and what chose them."""

    langs: list[str]
    source: LanguageSource
    reason: str = Field(description="e.g. \"rule naming 'Crimea' (agent.rules)\", \"claimants of Crimea\"")
    notes: list[str] = Field(default_factory=list, description="languages wanted but left out, and why")


class Perspective(BaseModel):
    """What one language's sources say, answered in the user's language."""

    lang: str = Field(description="the language of the passages this answer was grounded in")
    status: PerspectiveStatus
    answer: GroundedAnswer | None = Field(None, description="None when no passage was found (no model call)")
    trace: Trace | None = Field(None, description="the agent's checks and repairs of this answer")
    note: str | None = None

    @property
    def said(self) -> str | None:
        """The answer line of a verified answer: what is compared."""
        return self.answer.answer if self.status == "answered" and self.answer is not None else None

    @property
    def shown(self) -> str:
        """What a reader is shown: the answer line (verified or not), else why there is none."""
        if self.answer is not None and self.answer.answered:
            return self.answer.answer or ""
        return self.note or self.status

    @property
    def citations(self) -> list[Citation]:
        """The valid citations, one per passage and source (as a reader needs them)."""
        if self.answer is None:
            return []
        seen: dict[tuple[int, str], Citation] = {}
        for c in self.answer.citations:
            if c.valid:
                seen.setdefault((c.marker, c.source), c)
        return list(seen.values())


class PairAgreement(BaseModel):
    """Whether two perspectives' answers say the same thing."""

    a: str = Field(description="the first perspective's language")
    b: str
    agreement: Agreement
    method: Method
    score: float | None = Field(description="the lexical overlap of what the answers add to the question "
                                            "(0..1; None when one adds nothing)")
    reason: str


class Side(BaseModel):
    """One side of a disagreement, or a consensus: an answer with its own citations."""

    lang: str
    answer: str
    citations: list[Citation] = Field(description="valid citations into this language's passages")


class Consensus(BaseModel):
    """Perspectives whose answers all agree; ``answer`` is one of theirs, as given."""

    langs: list[str]
    chosen: Side = Field(description="the answer shown for the group, with its citations")
    why_chosen: str


class Disagreement(BaseModel):
    """A point where two perspectives' answers differ: each side with its own citations."""

    sides: list[Side] = Field(min_length=2, max_length=2)
    method: Method
    score: float | None
    reason: str


class Costs(BaseModel):
    """What the view spent: at most N answers and N(N-1)/2 comparisons, judges only when unsure."""

    answers: int = Field(description="answering runs (one per perspective with passages)")
    repairs: int = Field(description="repairs the agent made in them")
    lexical_comparisons: int
    judge_calls: int = Field(description="pairs the words left unsure, put to the calibrated judge panel")


class Perspectives(BaseModel):
    """The question answered once per language of sources, side by side, and the verdict."""

    question: str
    lang: str = Field(description="the user's language: every answer is in it")
    choice: LanguageChoice
    perspectives: list[Perspective]
    pairs: list[PairAgreement]
    status: Status
    consensus: list[Consensus] = Field(description="groups of perspectives that agree (one group: all agree)")
    disagreements: list[Disagreement]
    note: str | None = Field(None, description="why the view is what it is (one perspective, missing answers)")
    costs: Costs

    def perspective(self, lang: str) -> Perspective:
        found = next((p for p in self.perspectives if p.lang == lang), None)
        if found is None:
            raise KeyError(f"no {lang!r} perspective; the perspectives are {[p.lang for p in self.perspectives]}")
        return found

    def agrees_with(self, lang: str) -> list[str]:
        """The languages whose answers agree with ``lang``'s."""
        return [p.b if p.a == lang else p.a for p in self.pairs
                if p.agreement == "agree" and lang in (p.a, p.b)]
