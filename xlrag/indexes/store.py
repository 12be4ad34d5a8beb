"""Language-tagged ChromaDB stores: one cosine collection per language.

The index directory holds ``xlrag-index.json`` (the manifest: embedder name and
dimension, languages, splitter settings, build status) and ``chroma/``. Chroma's
default embedding function is never used: vectors always come from xlrag's
embedder, so nothing is downloaded and an index cannot be searched with vectors
from another model.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel, Field

from xlrag.errors import EmbedderMismatchError, IndexDirError, IndexNotFoundError
from xlrag.schema import Passage

__all__ = ["IndexManifest", "LanguageStores", "StoreResult"]

MANIFEST = "xlrag-index.json"
FORMAT_VERSION = 1
_PREFIX = "xlrag_"


class IndexManifest(BaseModel):
    format: int = FORMAT_VERSION
    embedder: str
    dim: int
    splitter: dict[str, Any] = Field(default_factory=dict)
    status: str = "building"  # "building" until a build run finishes
    created: str = Field(default_factory=lambda: datetime.now(UTC).isoformat(timespec="seconds"))
    updated: str | None = None


class StoreResult(BaseModel):
    """Raw results of one store search, best first."""

    store: str
    query_text: str
    passages: list[Passage]
    scores: list[float]


def _client(path: Path):
    os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
    import chromadb
    from chromadb.config import Settings

    return chromadb.PersistentClient(path=str(path), settings=Settings(anonymized_telemetry=False))


def _collection_name(lang: str) -> str:
    return f"{_PREFIX}{lang.replace('-', '_')}"


def _metadata_for(p: Passage) -> dict[str, Any]:
    meta: dict[str, Any] = {"doc_id": p.doc_id, "lang": p.lang, "position": p.position}
    if p.title:
        meta["title"] = p.title
    if p.metadata:
        meta["extra"] = json.dumps(p.metadata, ensure_ascii=False)
    return meta


def _passage_from(pid: str, doc: str, meta: dict[str, Any]) -> Passage:
    return Passage(
        id=pid,
        doc_id=str(meta["doc_id"]),
        text=doc,
        lang=str(meta["lang"]),
        position=int(meta.get("position", 0)),
        title=meta.get("title"),
        metadata=json.loads(meta["extra"]) if meta.get("extra") else {},
    )


class LanguageStores:
    """An index directory: opened (``open``) or created (``create``)."""

    def __init__(self, index_dir: Path, manifest: IndexManifest):
        self.index_dir = Path(index_dir)
        self.manifest = manifest
        self._client = _client(self.index_dir / "chroma")
        self._collections: dict[str, Any] = {}
        self._lock = threading.Lock()

    # -- opening -----------------------------------------------------------------
    @classmethod
    def open(cls, index_dir: str | Path, embedder: str | None = None, dim: int | None = None) -> LanguageStores:
        """Open an existing index; refuse it if ``embedder``/``dim`` do not match the manifest."""
        index_dir = Path(index_dir)
        if not index_dir.is_dir():
            raise IndexNotFoundError(index_dir, "no such directory")
        mpath = index_dir / MANIFEST
        if not mpath.exists():
            raise IndexNotFoundError(index_dir)
        try:
            manifest = IndexManifest.model_validate_json(mpath.read_text(encoding="utf-8"))
        except ValueError as e:
            raise IndexDirError(f"{mpath} is unreadable ({e}); rebuild the index") from None
        if manifest.format != FORMAT_VERSION:
            raise IndexDirError(f"{index_dir} uses index format {manifest.format}; this xlrag reads {FORMAT_VERSION}; rebuild it")
        cls._check(index_dir, manifest, embedder, dim)
        return cls(index_dir, manifest)

    @classmethod
    def create(cls, index_dir: str | Path, embedder: str, dim: int, splitter: dict[str, Any] | None = None) -> LanguageStores:
        """Open ``index_dir`` for writing, creating it if needed (same embedder required)."""
        index_dir = Path(index_dir)
        mpath = index_dir / MANIFEST
        if mpath.exists():
            stores = cls.open(index_dir, embedder, dim)
            return stores
        if index_dir.exists() and any(index_dir.iterdir()):
            raise IndexDirError(
                f"{index_dir} exists, is not empty and is not an xlrag index; choose a new --index-dir"
            )
        index_dir.mkdir(parents=True, exist_ok=True)
        manifest = IndexManifest(embedder=embedder, dim=dim, splitter=splitter or {})
        stores = cls(index_dir, manifest)
        stores.save_manifest()
        return stores

    @staticmethod
    def _check(index_dir: Path, m: IndexManifest, embedder: str | None, dim: int | None) -> None:
        if embedder is not None and (embedder != m.embedder or (dim is not None and dim != m.dim)):
            raise EmbedderMismatchError(index_dir, m.embedder, m.dim, embedder, dim or 0)

    def save_manifest(self, **updates: Any) -> None:
        self.manifest = self.manifest.model_copy(
            update={**updates, "updated": datetime.now(UTC).isoformat(timespec="seconds")}
        )
        tmp = self.index_dir / (MANIFEST + ".tmp")
        tmp.write_text(self.manifest.model_dump_json(indent=2), encoding="utf-8")
        tmp.replace(self.index_dir / MANIFEST)  # atomic: a crash never leaves half a manifest

    # -- collections ---------------------------------------------------------------
    def languages(self) -> list[str]:
        names = [c.name if hasattr(c, "name") else str(c) for c in self._client.list_collections()]
        return sorted(n[len(_PREFIX):].replace("_", "-") for n in names if n.startswith(_PREFIX))

    def collection(self, lang: str, create: bool = False) -> Any:
        with self._lock:
            col = self._collections.get(lang)
            if col is not None:
                return col
            name = _collection_name(lang)
            if create:
                col = self._client.get_or_create_collection(
                    name,
                    embedding_function=None,
                    configuration={"hnsw": {"space": "cosine", "ef_construction": 200, "ef_search": 200}},
                    metadata={"lang": lang, "embedder": self.manifest.embedder, "dim": self.manifest.dim},
                )
            else:
                try:
                    col = self._client.get_collection(name, embedding_function=None)
                except Exception:  # chroma raises NotFoundError/ValueError across versions
                    return None
            self._collections[lang] = col
            return col

    def counts(self) -> dict[str, int]:
        return {lang: self.collection(lang).count() for lang in self.languages()}

    def existing_ids(self, lang: str, ids: Sequence[str]) -> set[str]:
        col = self.collection(lang)
        if col is None or not ids:
            return set()
        found: set[str] = set()
        for i in range(0, len(ids), 5000):
            found.update(col.get(ids=list(ids[i : i + 5000]), include=[])["ids"])
        return found

    def add(self, passages: Sequence[Passage], vectors: np.ndarray) -> None:
        """Write one batch (all passages of one language) in one Chroma call."""
        if not passages:
            return
        langs = {p.lang for p in passages}
        if len(langs) != 1:
            raise IndexDirError("internal: a batch must hold passages of a single language")
        col = self.collection(langs.pop(), create=True)
        col.upsert(
            ids=[p.id for p in passages],
            embeddings=np.asarray(vectors, dtype=np.float32),
            documents=[p.text for p in passages],
            metadatas=[_metadata_for(p) for p in passages],
        )

    def search(self, lang: str, vector: np.ndarray, n: int, query_text: str = "") -> StoreResult:
        col = self.collection(lang)
        if col is None or n <= 0:
            return StoreResult(store=lang, query_text=query_text, passages=[], scores=[])
        count = col.count()
        if count == 0:
            return StoreResult(store=lang, query_text=query_text, passages=[], scores=[])
        res = col.query(
            query_embeddings=np.asarray(vector, dtype=np.float32).reshape(1, -1),
            n_results=min(n, count),
            include=["documents", "metadatas", "distances"],
        )
        ids, docs, metas, dists = res["ids"][0], res["documents"][0], res["metadatas"][0], res["distances"][0]
        return StoreResult(
            store=lang,
            query_text=query_text,
            passages=[_passage_from(i, d, m) for i, d, m in zip(ids, docs, metas, strict=True)],
            scores=[1.0 - float(d) for d in dists],  # Chroma's cosine distance is 1 - cos
        )

    def get_embeddings(self, lang: str, ids: Sequence[str]) -> dict[str, np.ndarray]:
        """Stored vectors of ``ids`` in one store (no re-embedding needed to compare with them)."""
        col = self.collection(lang)
        if col is None or not ids:
            return {}
        res = col.get(ids=list(ids), include=["embeddings"])
        return {i: np.asarray(v, dtype=np.float32) for i, v in zip(res["ids"], res["embeddings"], strict=True)}

    def get_passages(self, ids: Sequence[str]) -> list[Passage]:
        out: list[Passage] = []
        for lang in self.languages():
            res = self.collection(lang).get(ids=list(ids), include=["documents", "metadatas"])
            out.extend(_passage_from(i, d, m) for i, d, m in zip(res["ids"], res["documents"], res["metadatas"], strict=True))
        order = {pid: n for n, pid in enumerate(ids)}
        return sorted(out, key=lambda p: order.get(p.id, 0))
