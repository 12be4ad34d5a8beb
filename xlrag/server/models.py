"""The HTTP API's request and response bodies (what ``/openapi.json`` documents).

Requests refuse unknown fields (``extra="forbid"``): a misspelt ``"sesion_id"`` is a 422
naming it, never a silently new session. Responses are flat, JSON-friendly views of
:class:`xlrag.schema.GroundedAnswer` and :class:`xlrag.schema.Hit`; the agent's
:class:`xlrag.trace.Trace` and the chat's :class:`xlrag.agents.chat.Source` are
sent as they are.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from xlrag.agents.chat import Source
from xlrag.modes import AgentMode, Mode
from xlrag.perspectives.models import MAX_LANGS, PerspectivesInput
from xlrag.schema import (
    AnswerUsage,
    Channel,
    CitationSource,
    GroundedAnswer,
    Hit,
    QueryFields,
    Retrieval,
)
from xlrag.trace import Trace
from xlrag.validate import k_field

__all__ = [
    "AnswerOut", "AskRequest", "AskResponse", "ChatRequest", "ChatResponse", "CitationOut", "DoneEvent",
    "ErrorBody", "ErrorDetail", "ErrorResponse", "GenerationHealth", "HealthResponse", "HitOut", "IndexHealth",
    "PassageOut", "PerspectivesRequest", "RetrieveRequest", "RetrieveResponse", "TokenEvent",
]

QUESTION = "the question, in any language (the answer comes back in it)"


class _In(BaseModel):
    # strict: a JSON body says what it means; k: true or k: "3" is a client's bug, not a 1 or a 3
    model_config = ConfigDict(extra="forbid", strict=True)


class _Out(BaseModel):
    model_config = ConfigDict(extra="forbid")


# -- requests ---------------------------------------------------------------------------------


class AskRequest(_In, QueryFields):
    """One question for the agent: retrieve, answer with ``<docN>`` citations, verify, repair."""

    question: str = Field(min_length=1, description=QUESTION,
                          examples=["¿Cuántos puntos permitió la defensa de los Panthers?"])
    mode: AgentMode | None = Field(None,
                                   description="IR mode, or auto (the agent's rules); default: the server's agent.mode")
    stream: bool = Field(
        False, description="true: a text/event-stream of token, answer and done events; false: one JSON AskResponse")

    def agent_input(self) -> dict[str, Any]:
        """The agent's input: the question's fields, not how the reply is sent."""
        return self.model_dump(exclude_none=True, exclude={"stream"})


class ChatRequest(_In):
    """One turn of a conversation; follow-ups are condensed in the user's language."""

    question: str = Field(min_length=1, description=QUESTION, examples=["¿y cuántos puntos permitió?"])
    session_id: str | None = Field(
        None, pattern=r"^[A-Za-z0-9_.:-]{1,128}$",
        description="the conversation to continue, an id this server issued to this key (else 404 "
                    "unknown_session); omitted: a new one, whose id comes back in the reply")
    # a follow-up's sources come from the conversation, so only the language is the caller's
    lang: str | None = Field(None, description=QueryFields.model_fields["lang"].description)
    mode: AgentMode | None = Field(None,
                                   description="IR mode, or auto (the agent's rules); default: the server's agent.mode")
    stream: bool = Field(
        True, description="true: a text/event-stream of token, answer and done events; false: one JSON ChatResponse")


class PerspectivesRequest(_In):
    """One question answered once per language of sources, side by side (the perspectives view)."""

    question: str = Field(min_length=1, description=QUESTION, examples=["Who does Crimea belong to?"])
    lang: str | None = Field(None, description=QueryFields.model_fields["lang"].description)
    relevant_langs: list[str] | None = Field(None, min_length=1, max_length=MAX_LANGS,
                                             description=PerspectivesInput.model_fields["relevant_langs"].description,
                                             examples=[["ru", "uk", "en"]])
    max_langs: int = Field(PerspectivesInput.model_fields["max_langs"].default, ge=1, le=MAX_LANGS,
                           description=PerspectivesInput.model_fields["max_langs"].description)
    def view_input(self) -> dict[str, Any]:
        return self.model_dump(exclude_none=True)


class RetrieveRequest(_In, QueryFields):
    """Retrieval only: the passages an IR mode finds for a question, no generation."""

    question: str = Field(min_length=1, description=QUESTION, examples=["Who controls Ceuta?"])
    mode: Mode | None = Field(None, description="IR mode; default: the server's retrieval.mode")
    k: int | None = k_field(None, "passages to return; default: the server's retrieval.k")
    channels: list[Channel] | None = Field(
        None, min_length=1, description="how each store is searched: dense, lexical or both; "
                                        "default: the server's retrieval.channels")


# -- answers ----------------------------------------------------------------------------------


class PassageOut(_Out):
    marker: int = Field(description="N of <docN>: the passage's position in the prompt")
    id: str
    doc_id: str
    lang: str
    title: str | None = None
    text: str
    score: float
    rank: int
    store: str = Field(description="the language store it came from")


class CitationOut(_Out):
    marker: int = Field(description="N of <docN>")
    passage_id: str | None = Field(description="None when N points at no passage shown to the model")
    doc_id: str | None
    lang: str | None
    valid: bool
    source: CitationSource = Field(
        description="model: the LLM's own <docN>; post_hoc: attributed afterwards by embedding similarity; "
                    "vendor: the API's native citations; attribution: put first by the attribution "
                    "reranker's AIS check")
    text: str | None = Field(None, description="the answer sentence this citation supports (post hoc, vendor)")


class AnswerOut(_Out):
    answer: str | None = Field(description="the answer, in the question's language")
    explanation: str | None = Field(description="the explanation, with its <docN> markers")
    lang: str = Field(description="the question's language")
    mode: str = Field(description="the IR mode that chose the passages")
    model: str = Field(description="provider/model that answered")
    citations: list[CitationOut]
    passages: list[PassageOut] = Field(description="the passages shown to the model, <doc0> first")
    flags: list[str] = Field(description="what went wrong and what was done about it, e.g. translated, "
                                         "post_hoc_citations, unrepaired_language")
    verified: bool = Field(description="false when the substance checks still fail after every repair (the "
                                       "answer says nothing, flag not_an_answer, or nothing its passages "
                                       "hold, flag unsupported), or when it cites none of its passages "
                                       "itself (none valid, or only post hoc: attributed by similarity "
                                       "afterwards, not by the model)")
    unverified: list[str] = Field(default_factory=list, description=(
        "why verified is false, each a code of xlrag.checks.substance.UNVERIFIED_REASONS (not_an_answer, "
        "unsupported, uncited, post_hoc_only, quoted_only); empty when verified"))
    complete: bool = Field(description=GroundedAnswer.model_fields["complete"].description)
    notes: list[str] = Field(description=GroundedAnswer.model_fields["notes"].description)
    usage: AnswerUsage | None = Field(None, description=GroundedAnswer.model_fields["usage"].description)

    @classmethod
    def of(cls, a: GroundedAnswer) -> AnswerOut:
        from xlrag.checks.substance import unverified

        reasons = unverified(a)
        return cls(
            answer=a.answer, explanation=a.explanation, lang=a.lang, mode=a.mode, model=a.model,
            citations=[CitationOut(marker=c.marker, passage_id=c.passage_id, doc_id=c.doc_id, lang=c.lang,
                                   valid=c.valid, source=c.source, text=c.text) for c in a.citations],
            passages=[PassageOut(marker=i, id=h.id, doc_id=h.doc_id, lang=h.lang, title=h.passage.title,
                                 text=h.passage.text, score=h.score, rank=h.rank, store=h.store)
                      for i, h in enumerate(a.passages)],
            flags=list(a.flags), verified=not reasons, unverified=reasons,
            complete=a.complete, notes=list(a.notes), usage=a.usage)


class AskResponse(_Out):
    answer: AnswerOut
    trace: Trace = Field(description="what the agent did: mode and why, languages retrieved, checks, repairs, timings")


class ChatResponse(_Out):
    session_id: str = Field(description="send it back to continue this conversation")
    turn: int = Field(description="this turn's number among the turns the session keeps (1 = first)")
    answer: AnswerOut
    trace: Trace = Field(description="includes the condensed standalone question of a follow-up")
    sources: list[Source] = Field(description="the passages this turn's answer cites")


class TokenEvent(_Out):
    """``event: token``: a piece of the answering model's reply, as it is generated."""

    text: str
    attempt: int = Field(description="0: the first answer; 1, 2: an answer regenerated by a repair")


class DoneEvent(_Out):
    """``event: done``: the last event of a stream that succeeded."""

    session_id: str | None = Field(description="the conversation (/v1/chat); null for /v1/ask")
    seconds: float


# -- retrieval --------------------------------------------------------------------------------


class HitOut(_Out):
    rank: int
    id: str
    doc_id: str
    lang: str
    title: str | None = None
    text: str
    score: float = Field(description="the score of the final order (after fusion or rerank)")
    raw_score: float = Field(description=Hit.model_fields["raw_score"].description)
    store: str
    mode: str = Field(description="the IR mode that produced it")
    channels: list[Channel] = Field(description=Hit.model_fields["channels"].description)
    dense_score: float | None = Field(description=Hit.model_fields["dense_score"].description)
    lexical_score: float | None = Field(description=Hit.model_fields["lexical_score"].description)
    fused_score: float | None = Field(description=Hit.model_fields["fused_score"].description)
    rerank_score: float | None = Field(description=Hit.model_fields["rerank_score"].description)

    @classmethod
    def of(cls, h: Hit) -> HitOut:
        return cls(rank=h.rank, id=h.id, doc_id=h.doc_id, lang=h.lang, title=h.passage.title, text=h.passage.text,
                   score=h.score, raw_score=h.raw_score, store=h.store, mode=h.mode, channels=h.channels,
                   dense_score=h.dense_score, lexical_score=h.lexical_score, fused_score=h.fused_score,
                   rerank_score=h.rerank_score)


class RetrieveResponse(_Out):
    question: str
    lang: str | None = Field(description="the question's language, given or detected")
    mode: str
    k: int
    hits: list[HitOut]
    complete: bool = Field(description=Retrieval.model_fields["complete"].description)
    notes: list[str] = Field(description=Retrieval.model_fields["notes"].description)
    stores: list[str] = Field(description=Retrieval.model_fields["stores"].description)
    channels: list[Channel] = Field(description=Retrieval.model_fields["channels"].description)
    lexical_texts: dict[str, str] = Field(description=Retrieval.model_fields["lexical_texts"].description)

    @classmethod
    def of(cls, question: str, r: Retrieval, k: int) -> RetrieveResponse:
        return cls(question=question, lang=r.query.lang, mode=r.mode, k=k, hits=[HitOut.of(h) for h in r.hits],
                   complete=r.complete, notes=r.notes, stores=r.stores, channels=r.channels,
                   lexical_texts=r.lexical_texts)


# -- health and errors ------------------------------------------------------------------------


class IndexHealth(_Out):
    languages: list[str]
    passages: dict[str, int] = Field(description="passages per language store")
    complete: bool = Field(description="false while a build is running or was interrupted")


class GenerationHealth(_Out):
    active: int = Field(description="generations running now")
    queued: int = Field(description="requests waiting for a generation slot")
    max_concurrent: int
    max_queue: int


class HealthResponse(_Out):
    status: Literal["ok"]
    version: str
    index: IndexHealth | None = Field(description="None when the server answers closed-book (mode no_ir)")
    generation: GenerationHealth
    worker: int = Field(description="the process id of the worker that answered: under `serve --workers N` "
                                    "each worker has its own generation queue, and `generation` is this one's")


class ErrorDetail(_Out):
    loc: list[str | int] = Field(description="where in the request, e.g. ['body', 'question']")
    msg: str
    type: str


class ErrorBody(_Out):
    type: str = Field(description="machine-readable: unauthorized, not_found, body_too_large, invalid_request, "
                                  "question_too_long, overloaded, internal_error, or an xlrag error such as "
                                  "unknown_language")
    message: str = Field(description="what went wrong and how to fix it")
    details: list[ErrorDetail] | None = Field(None, description="each invalid field (invalid_request only)")


class ErrorResponse(_Out):
    error: ErrorBody

    @classmethod
    def make(cls, type: str, message: str, details: list[dict[str, Any]] | None = None) -> ErrorResponse:
        return cls(error=ErrorBody(type=type, message=message,
                                   details=[ErrorDetail(**d) for d in details] if details is not None else None))
