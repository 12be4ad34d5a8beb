"""What one answering call takes (:class:`ChainInput`), what it knows step by step
(:class:`ChainState`) and what a stream of it yields (:class:`AnswerToken`, then the
:class:`~xlrag.schema.GroundedAnswer`), shared by every driver of
:class:`~xlrag.chains.pipeline.Pipeline`."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from xlrag.chains.profiles import Request
from xlrag.formats import AnswerFormat
from xlrag.modes import Mode
from xlrag.schema import GroundedAnswer, Hit, Passage, Query, QueryFields, check_carried
from xlrag.validate import validate_mapping

__all__ = ["GIVEN", "AnswerChunk", "AnswerToken", "ChainInput", "ChainState"]

GIVEN = "given"  # the mode, store and policy of passages the caller hands the chain


class ChainInput(QueryFields):
    """What one chain call takes. Unknown fields are an error, never ignored."""

    model_config = ConfigDict(extra="forbid")

    question: str
    options: list[str] | None = None
    option_aliases: dict[int, list[str]] | None = None
    mode: Mode | None = None
    id: str | None = None
    passages: list[Passage] | None = Field(
        None, description="answer over exactly these passages, in this order, with no retrieval "
                          "(controlled studies, or passages the caller found)")
    query: Query | None = Field(
        None, description="the question already made into a Query (a server's admitted one, a caller's own): "
                          "searched as it is, its id kept, rather than made again from the fields")

    @model_validator(mode="after")
    def _one_question(self) -> ChainInput:
        # the question is the query's: a different one would be answered over another's passages
        check_carried(self.question, self.query, self.query_fields())
        return self

    @classmethod
    def coerce(cls, value: Any) -> ChainInput:
        if isinstance(value, ChainInput):
            return value
        if isinstance(value, str):
            return cls(question=value)
        if isinstance(value, Query):
            return cls(question=value.question, lang=value.lang, relevant_langs=value.relevant_langs or None,
                       target_lang=value.target_lang, id=value.id, query=value)
        return validate_mapping(cls, value, "chain input")

    def query_fields(self) -> dict[str, Any]:
        """The :class:`~xlrag.schema.Query` fields this input sets, its id included."""
        return super().query_fields() | ({"id": self.id} if self.id is not None else {})


class ChainState(BaseModel):
    """Everything one call knows, step by step; typed so no step guesses at a key."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    query: Query
    hits: list[Hit]
    fmt: AnswerFormat
    mode: str
    model: str
    options: list[str] | None = None
    option_aliases: dict[int, list[str]] | None = None
    request: Request | None = None
    echo_reference: str = Field("", description="the sent instructions an echo would copy")
    message: Any = None
    complete: bool = True
    notes: list[str] = Field(default_factory=list)


class AnswerToken(BaseModel):
    """A piece of the model's reply as it is generated: the raw text, markers and format
    labels included. The stream's last item is the parsed, checked
    :class:`~xlrag.schema.GroundedAnswer`, which is what to show as the answer.

    Tokens add up like LangChain's message chunks, and a GroundedAnswer added to them
    replaces them: so LangChain's own accumulation of a stream (``on_chain_end``, a
    ``RunnableLambda`` after the chain) ends with the answer, as ``invoke`` returns it.
    """

    model_config = ConfigDict(frozen=True)

    text: str
    attempt: int = Field(0, ge=0, description="0: the first answer; n: the reply of the agent's n-th "
                                              "model-made repair (the chat and the agent stream those too)")

    def __add__(self, other: AnswerToken | GroundedAnswer) -> AnswerToken | GroundedAnswer:
        if isinstance(other, AnswerToken):
            # a repair's reply is a new reply: it replaces the one before, as its answer does
            if other.attempt != self.attempt:
                return other
            return AnswerToken(text=self.text + other.text, attempt=self.attempt)
        if isinstance(other, GroundedAnswer):
            return other
        return NotImplemented


AnswerChunk = AnswerToken | GroundedAnswer  # what GroundedChain.stream/astream yield
