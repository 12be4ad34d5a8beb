"""The records of ``records.jsonl``, typed: one model per kind of run, and the sections they share.

A record is validated when it is written and when it is read (:class:`~xlrag.evals.run_folder.RunFolder`),
so a field renamed in a producer fails the run's tests at once, not a report weeks later.
The JSON on disk is the producer's dict, unchanged: every section is optional because a
record that failed holds only its identity and ``error``, and a retrieval-only record no
answer. The sections derive from the models they dump (``Citation``, ``LanguageReading``: a
``LanguageVerdict`` less its text, ``JudgeVote``), so the record cannot drift from them.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from xlrag.checks.language import LanguageReading
from xlrag.judges.panel import JudgeVote, Vote
from xlrag.schema import Citation

__all__ = ["AnswerMetrics", "CitationRecord", "GridRecord", "JudgesRecord", "LanguageRecord", "PassageRecord",
           "RagasScore", "Record", "RetrievedPassage"]


class _Forbid(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Record(_Forbid):
    """What every record has: its key in the run, and, when it failed, the error instead of its results."""

    key: str
    error: str | None = None
    seconds: float | None = None
    # the fingerprint of the settings that made it (xlrag.evals.fingerprint); absent before them
    fp: str | None = None


class RetrievedPassage(_Forbid):
    passage_id: str
    doc_id: str
    lang: str
    score: float


class PassageRecord(_Forbid):
    """A passage shown to the model (a study that gives passages by hand has no ``doc_id``)."""

    passage_id: str
    doc_id: str | None = None
    lang: str


class CitationRecord(Citation):
    model_config = ConfigDict(extra="forbid")


class LanguageRecord(LanguageReading):
    """The verdict on the reply's language, without the text it judged."""

    model_config = ConfigDict(extra="forbid")
    text: None = None


class VoteRecord(JudgeVote):
    model_config = ConfigDict(extra="forbid")


class JudgesRecord(_Forbid):
    """:class:`~xlrag.judges.panel.PanelVerdict` dumped, plus ``final``: wrong language = incorrect (XRAG's rule).
    Not a subclass: ``final`` is PanelVerdict's method (a test holds the fields equal)."""

    verdict: Vote
    votes: list[VoteRecord]
    counts: dict[str, int]
    tie: bool = False
    disagreement: bool = False
    final: Vote


class AnswerMetrics(_Forbid):
    em: float
    f1: float
    char3_recall: float


class RagasScore(_Forbid):
    value: float | None  # None: the metric failed, ``reason`` says why
    reason: str | None = None
    note: str | None = None


class GridRecord(Record):
    """One (cell, query) of an experiment grid: its retrieval, and for a cell with an LLM its answer."""

    dataset: str
    mode: str
    llm: str | None
    variant: str
    query_id: str
    lang: str
    question: str
    golds: list[str]
    retrieved: list[RetrievedPassage] | None = None
    answer: str | None = None
    explanation: str | None = None
    raw_output: str | None = None
    flags: list[str] | None = None
    answered: bool | None = None
    shown: list[PassageRecord] | None = None
    citations: list[CitationRecord] | None = None
    language: LanguageRecord | None = None
    metrics: AnswerMetrics | None = None
    ragas: dict[str, RagasScore] | None = None
    judges: JudgesRecord | None = None
