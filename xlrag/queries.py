"""A question's checks and the queries file, written once for every door: the pipeline, the
CLI and the server call :func:`check_question`; ``xlrag retrieve --queries`` and ``xlrag eval
retrieval`` read JSONL rows of ``{"question", "id"?, "lang"?, "relevant_langs"?, "target_lang"?}``
with :func:`read_queries`."""

from __future__ import annotations

from pathlib import Path

from xlrag.errors import (
    ConfigError,
    CorpusRowError,
    EmptyQueryError,
    QuestionTooLongError,
    XlragError,
)
from xlrag.schema import Query, make_query

__all__ = ["check_question", "read_queries"]


def check_question(question: str, limit: int | None, setting: str | None = "retrieval.max_question_chars") -> None:
    """Refuse an empty question, or one over ``limit`` characters (``setting`` names the knob
    that raises it, None where the caller cannot: a server's client)."""
    if not question.strip():
        raise EmptyQueryError()
    if limit is not None and len(question) > limit:
        raise QuestionTooLongError(len(question), limit, setting)


def read_queries(path: Path) -> list[Query]:
    """The rows of ``path`` as queries, ``id`` defaulting to ``q<line>``. A row without a
    question, or with a bad field, is a one-line error naming its line; so is a file with no row."""
    from xlrag.jsonl import read_objects

    out = []
    for n, row in read_objects(path, "queries"):
        if not str(row.get("question") or "").strip():
            raise CorpusRowError(path, n, "each line needs a non-empty 'question'", skippable=False)
        try:
            out.append(make_query(row["question"], id=str(row.get("id") or f"q{n}"), lang=row.get("lang"),
                                  relevant_langs=row.get("relevant_langs") or [], target_lang=row.get("target_lang")))
        except (XlragError, ValueError) as e:
            raise ConfigError(f"{path}:{n}: {e}") from None
    if not out:
        raise ConfigError(f"queries file {path} has no rows")
    return out
