"""What one answering call takes (:class:`ChainInput`) and what it knows step by step
(:class:`ChainState`), shared by every driver of :class:`~xlrag.chains.pipeline.Pipeline`."""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from xlrag.chains.profiles import Request
from xlrag.errors import ConfigError
from xlrag.formats import AnswerFormat
from xlrag.modes import Mode
from xlrag.schema import Hit, Passage, Query, QueryFields

__all__ = ["GIVEN", "ChainInput", "ChainState"]

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

    @classmethod
    def coerce(cls, value: Any) -> ChainInput:
        if isinstance(value, ChainInput):
            return value
        if isinstance(value, str):
            return cls(question=value)
        if isinstance(value, Query):
            return cls(question=value.text, lang=value.lang, relevant_langs=value.relevant_langs or None,
                       target_lang=value.target_lang, id=value.id)
        if not isinstance(value, Mapping):
            raise ConfigError(f"chain input must be a question string or a mapping, not {type(value).__name__}")
        unknown = [k for k in value if k not in cls.model_fields]
        if unknown:
            close = difflib.get_close_matches(str(unknown[0]), list(cls.model_fields), n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ConfigError(f"unknown chain input {unknown[0]!r}{hint}; fields: {', '.join(cls.model_fields)}")
        try:
            return cls.model_validate(dict(value))
        except ValidationError as e:
            err = e.errors()[0]
            where = ".".join(str(x) for x in err["loc"]) or "input"
            raise ConfigError(f"bad chain input {where}: {err['msg']}") from None

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
