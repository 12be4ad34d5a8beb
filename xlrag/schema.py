"""Pydantic models at xlrag's boundaries: what goes in, what comes out."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from xlrag.errors import EmptyQueryError
from xlrag.languages import normalize_code

__all__ = ["Document", "Hit", "Passage", "Query", "make_query"]


def _lang_or_none(v: str | None) -> str | None:
    return None if v in (None, "") else normalize_code(v)


class Document(BaseModel):
    """One corpus row, before splitting."""

    model_config = ConfigDict(frozen=True)

    id: str
    text: str
    lang: str
    title: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)


class Passage(BaseModel):
    """A retrievable chunk of one document, in one language."""

    model_config = ConfigDict(frozen=True)

    id: str
    doc_id: str
    text: str
    lang: str
    position: int = 0
    title: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)


class Query(BaseModel):
    """A question, with what the IR modes may need to know about it.

    ``lang`` is detected when absent. ``relevant_langs`` feeds ``rel_langs``;
    ``target_lang`` feeds ``swap_docs`` and ``oracle_lang``.
    """

    id: str | None = None
    text: str
    lang: str | None = None
    relevant_langs: list[str] = Field(default_factory=list)
    target_lang: str | None = None

    @field_validator("text")
    @classmethod
    def _non_empty(cls, v: str) -> str:
        if not v or not v.strip():
            raise EmptyQueryError()
        return v.strip()

    @field_validator("lang", "target_lang")
    @classmethod
    def _norm(cls, v: str | None) -> str | None:
        return _lang_or_none(v)

    @field_validator("relevant_langs")
    @classmethod
    def _norm_list(cls, v: list[str]) -> list[str]:
        out: list[str] = []
        for code in v:
            c = normalize_code(code)
            if c not in out:
                out.append(c)
        return out


class Hit(BaseModel):
    """One retrieved passage and where it came from."""

    passage: Passage
    score: float = Field(description="score used for the final order (after fusion or rerank)")
    raw_score: float = Field(description="cosine similarity from the language store")
    rank: int = Field(description="1-based rank in the final list")
    store: str = Field(description="language store the passage came from")
    policy: str = Field(description="IR mode that produced the hit")
    query_text: str | None = Field(default=None, description="text searched (translated for 'translate')")

    @property
    def id(self) -> str:
        return self.passage.id

    @property
    def doc_id(self) -> str:
        return self.passage.doc_id

    @property
    def lang(self) -> str:
        return self.passage.lang

    def summary(self) -> dict[str, Any]:
        """The flat record written by batch retrieval."""
        return {
            "id": self.id,
            "doc_id": self.doc_id,
            "lang": self.lang,
            "score": round(self.score, 6),
            "rank": self.rank,
        }


def make_query(text: str, **fields: Any) -> Query:
    """Build a :class:`Query`, raising xlrag's own error (not pydantic's wrapper) on bad input."""
    from pydantic import ValidationError

    try:
        return Query(text=text, **fields)
    except ValidationError as e:
        for err in e.errors():
            inner = (err.get("ctx") or {}).get("error")
            if isinstance(inner, Exception):
                raise inner from None
        raise
