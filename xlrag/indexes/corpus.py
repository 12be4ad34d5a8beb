"""Reading a corpus file (JSONL, Parquet, CSV) into validated documents.

The whole file is read and validated before anything is indexed, so a malformed
row can never leave an index half-written.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from xlrag.detect import LanguageDetector, LinguaDetector
from xlrag.errors import CorpusError, CorpusRowError, UnknownLanguageError
from xlrag.jsonl import open_text, read_rows, undecodable, unencodable
from xlrag.languages import normalize
from xlrag.registry import require
from xlrag.schema import Document
from xlrag.text import capped

__all__ = ["CorpusLoad", "FieldMap", "load_corpus"]


class FieldMap(BaseModel):
    """Which source column holds each document field."""

    id: str = "id"
    text: str = "text"
    lang: str | None = "lang"
    title: str | None = "title"
    metadata: str | list[str] | None = Field(
        "metadata", description="a column holding a mapping (or JSON text), or a list of columns"
    )

    @classmethod
    def parse(cls, spec: str | None) -> FieldMap:
        """From CLI form ``text=body,id=uid,metadata=country|city``."""
        if not spec:
            return cls()
        values: dict[str, Any] = {}
        for part in spec.split(","):
            key, sep, value = part.partition("=")
            key = key.strip()
            if not sep or key not in cls.model_fields:
                raise CorpusError(
                    f"bad field mapping {part!r}; use e.g. 'text=body,id=uid' with keys "
                    f"{', '.join(cls.model_fields)}"
                )
            value = value.strip()
            values[key] = value.split("|") if key == "metadata" and "|" in value else (value or None)
        return cls(**values)


@dataclass
class CorpusLoad:
    documents: list[Document]
    skipped: list[CorpusRowError] = field(default_factory=list)
    detected: int = 0  # documents whose language was detected rather than given


def _rows(path: Path) -> Iterator[tuple[int, Any]]:
    """Yield ``(line_or_row_number, raw_row)``; a row that cannot be read is an exception value
    (xlrag.jsonl owns what a line may hold: UTF-8 text, JSON, no lone surrogate)."""
    suffix = path.suffix.lower()
    if suffix in {".jsonl", ".ndjson", ".json"}:
        yield from read_rows(path, "corpus")
    elif suffix == ".csv":
        try:
            with open_text(path, "corpus", newline="") as fh:
                reader = csv.DictReader(fh)
                for row in reader:
                    # a row with more cells than the header keeps the extra ones in a list
                    cells = [c for v in (*row.keys(), *row.values()) for c in (v if isinstance(v, list) else [v])]
                    why = next((w for c in cells if isinstance(c, str) and (w := undecodable(c))), None)
                    yield reader.line_num, CorpusRowError(path, reader.line_num, why) if why else row
        except UnicodeError as e:  # only a UTF-16 file cut mid-character is left to fail here
            raise CorpusError(f"corpus file {path} is not UTF-8 or UTF-16 text ({getattr(e, 'reason', e)}); save it as "
                              "UTF-8") from None
        except OSError as e:
            raise CorpusError(f"cannot read corpus file {path}: {e.strerror or e}; check its permissions") from None
        except csv.Error as e:
            raise CorpusError(f"corpus file {path} is not a readable CSV file ({e}); check its quoting") from None
    elif suffix in {".parquet", ".pq"}:
        # Arrow checks its strings are UTF-8 when it reads them: no row holds a lone surrogate
        require("pyarrow", "parquet", "a Parquet corpus")
        import pyarrow.parquet as pq

        try:
            table = pq.read_table(path)
        except Exception as e:  # pyarrow raises several unrelated types for bad files
            raise CorpusError(f"corpus file {path} is not a readable Parquet file: {e}") from None
        for n, row in enumerate(table.to_pylist(), start=1):
            yield n, row
    else:
        raise CorpusError(f"corpus file {path} has the unsupported format {suffix or '(no extension)'!r}; "
                          f"save it as .jsonl, .csv or .parquet")


def _metadata(row: dict[str, Any], fields: FieldMap) -> dict[str, Any]:
    if fields.metadata is None:
        return {}
    if isinstance(fields.metadata, list):
        return {c: row[c] for c in fields.metadata if row.get(c) not in (None, "")}
    raw = row.get(fields.metadata)
    if raw in (None, ""):
        return {}
    if isinstance(raw, str):
        raw = json.loads(raw)
    if not isinstance(raw, dict):
        raise ValueError(f"field {fields.metadata!r} must be a mapping")
    return raw


def _document(path: Path, n: int, row: Any, fields: FieldMap) -> tuple[Document, bool]:
    if not isinstance(row, dict):
        raise CorpusRowError(path, n, "row is not an object")
    doc_id = row.get(fields.id)
    if doc_id in (None, ""):
        raise CorpusRowError(path, n, f"missing id field {fields.id!r}")
    text = row.get(fields.text)
    if text is None:
        raise CorpusRowError(path, n, f"missing text field {fields.text!r}")
    if not isinstance(text, str):
        raise CorpusRowError(path, n, f"text field {fields.text!r} must be a string, got {type(text).__name__}")
    if not text.strip():
        raise CorpusRowError(path, n, f"empty text field {fields.text!r}")
    try:
        meta = _metadata(row, fields)
    except (ValueError, json.JSONDecodeError) as e:
        raise CorpusRowError(path, n, f"bad metadata: {e}") from None
    why = unencodable(meta, "metadata")  # a metadata column's own JSON may escape a lone surrogate
    if why:
        raise CorpusRowError(path, n, why)
    raw_lang = row.get(fields.lang) if fields.lang else None
    needs_detection = raw_lang in (None, "")
    lang = ""
    if not needs_detection:
        try:
            norm = normalize(str(raw_lang))
        except UnknownLanguageError:
            raise CorpusRowError(path, n, f"unknown language code {capped(raw_lang)}") from None
        lang = norm.code
        if norm.script:
            meta = {**meta, "script": norm.script}
        if str(raw_lang) != norm.code:
            meta = {**meta, "lang_original": str(raw_lang)}
    title = row.get(fields.title) if fields.title else None
    doc = Document(id=str(doc_id), text=text, lang=lang, title=str(title) if title else None, metadata=meta)
    return doc, needs_detection


def load_corpus(
    path: str | Path,
    fields: FieldMap | None = None,
    *,
    skip_bad: bool = False,
    detector: LanguageDetector | None = None,
) -> CorpusLoad:
    """Read and validate every row of ``path``.

    A malformed row raises :class:`CorpusRowError` naming the file and line, unless
    ``skip_bad`` is set, in which case it is skipped and reported in ``skipped``.
    Missing languages are detected with lingua; duplicate ids are errors.
    """
    path = Path(path)
    fields = fields or FieldMap()
    if not path.exists():
        raise CorpusError(f"corpus file {path} does not exist; check the --corpus path")
    if not path.is_file():
        raise CorpusError(f"corpus path {path} is a directory, not a file; pass the corpus file itself "
                          f"(.jsonl, .csv or .parquet) to --corpus")
    docs: list[Document] = []
    undetected: list[int] = []
    skipped: list[CorpusRowError] = []
    seen: dict[str, int] = {}
    for n, row in _rows(path):
        try:
            if isinstance(row, CorpusRowError):
                raise row
            doc, needs = _document(path, n, row, fields)
            if doc.id in seen:
                raise CorpusRowError(path, n, f"duplicate id {capped(doc.id)} (first on line {seen[doc.id]})")
            seen[doc.id] = n
        except CorpusRowError as e:
            if not skip_bad:
                raise
            skipped.append(e.skipped())
            continue
        if needs:
            undetected.append(len(docs))
        docs.append(doc)
    if undetected:
        det = detector or LinguaDetector()
        texts = [docs[i].text[:2000] for i in undetected]
        many = getattr(det, "detect_many", None)
        langs = many(texts) if many else [det.detect(t) for t in texts]
        for i, lang in zip(undetected, langs, strict=True):
            if lang is None:
                err = CorpusRowError(path, seen[docs[i].id], "language could not be detected; add a lang field")
                if not skip_bad:
                    raise err
                skipped.append(err.skipped())
                continue
            docs[i] = docs[i].model_copy(update={"lang": lang, "metadata": {**docs[i].metadata, "lang_detected": True}})
        docs = [d for d in docs if d.lang]
    if not docs:
        if skipped:
            raise CorpusError(f"corpus file {path}: all {len(skipped)} rows were skipped as malformed (the first: "
                              f"line {skipped[0].line}, {skipped[0].reason}); fix them and index again")
        raise CorpusError(f"corpus file {path} holds no rows; write one JSON object per line, "
                          f'e.g. {{"id": "d1", "lang": "en", "text": "..."}}')
    return CorpusLoad(documents=docs, skipped=skipped, detected=len(undetected))
