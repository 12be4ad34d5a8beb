"""Language-tagged ChromaDB stores: one cosine collection per language.

An index is a manifest (embedder name and dimension, splitter settings, build
status) plus one collection per language, on local Chroma files or a Chroma
server (see :mod:`xlrag.indexes.chroma`). Chroma's default embedding function
is never used: vectors always come from xlrag's embedder, so nothing is
downloaded and an index cannot be searched with vectors from another model.

Every passage carries its document's ``source`` (corpus file or name) and
fingerprint in its metadata; the fingerprint is part of the passage id, so an
edited document (text, lang, title, metadata or source) gets new ids and its
old passages are found and removed, from every store.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel, Field, ValidationError

from xlrag.config import StoreConfig
from xlrag.errors import EmbedderMismatchError, IndexCorruptError, IndexDirError, IndexNotFoundError
from xlrag.indexes.chroma import MANIFEST, Backend, guard, stored_collections, verify_files
from xlrag.schema import Passage

__all__ = ["FORMAT_VERSION", "SERVED_MANIFEST_AGE", "IndexManifest", "LanguageStores", "LexicalRef", "StoreRanking",
           "StoreResult"]

# 2: passage ids include the document fingerprint; metadata holds source and fp;
# collections are named xlrag.<index>.<lang>.
FORMAT_VERSION = 2
_PAGE = 2000
LEXICAL_FOLDER = "lexical"  # xlrag.indexes.lexical.LEXICAL_DIR: that module imports this one
_RETRIES = 6  # deeper searches past ids deleted meanwhile, before giving up
# seconds a client of a Chroma server trusts its copy of the manifest (LanguageStores.refresh):
# a write by another client is seen by the first search this long after the manifest changed
SERVED_MANIFEST_AGE = 0.2


class LexicalRef(BaseModel):
    """What the manifest records of one store's lexical index (:mod:`xlrag.indexes.lexical`)."""

    analyzer: str = Field(description="the analyzer version that tokenized it")
    digest: str = Field(description="digest of the store's passage ids it was built from")
    passages: int
    empty: int = Field(0, description="passages that gave no lexical token (found by the dense channel only)")
    folder: str = Field(description="its folder under lexical/")


class IndexManifest(BaseModel):
    format: int = FORMAT_VERSION
    embedder: str
    dim: int
    splitter: dict[str, Any] = Field(default_factory=dict)
    status: str = "building"  # "building" while (or if a crash stopped) a write run
    counts: dict[str, int] = Field(default_factory=dict, description="passages per store after the last write")
    lexical: dict[str, LexicalRef] = Field(default_factory=dict,
                                           description="each store's lexical index: its folder under "
                                                       "index_dir/lexical, or under store.lexical_dir/<name> "
                                                       "for a Chroma server")
    created: str = Field(default_factory=lambda: datetime.now(UTC).isoformat(timespec="seconds"))
    updated: str | None = None


class StoreResult(BaseModel):
    """Raw results of one store search, best first."""

    store: str
    query_text: str
    passages: list[Passage]
    scores: list[float]


class StoreRanking(BaseModel):
    """Passage ids and scores of one store search, best first, without the passages:
    what fusion needs to choose, so that only the chosen are read (:meth:`LanguageStores.passages`)."""

    store: str
    query_text: str
    ids: list[str]
    scores: list[float]


def metadata_for(p: Passage, source: str, fingerprint: str) -> dict[str, Any]:
    meta: dict[str, Any] = {"doc_id": p.doc_id, "lang": p.lang, "position": p.position,
                            "source": source, "fp": fingerprint}
    if p.title:
        meta["title"] = p.title
    if p.metadata:
        meta["extra"] = json.dumps(p.metadata, ensure_ascii=False)
    return meta


def passage_from(pid: str, doc: str, meta: dict[str, Any]) -> Passage:
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
    """An index: opened (``open``, read side) or created (``create``, write side)."""

    def __init__(self, index_dir: Path, manifest: IndexManifest, store: StoreConfig | None = None):
        self.index_dir = Path(index_dir)
        self.manifest = manifest
        self.store = store or StoreConfig()
        self.backend = Backend(self.index_dir, self.store)
        self._collections: dict[str, Any] = {}
        self._lock = threading.Lock()
        self.generation = 0  # bumped by every reload: what callers key their caches on
        self._manifest_stamp = self.backend.manifest_stamp()
        self.manifest_version = 0  # bumped whenever the manifest is written or read afresh
        # a Chroma server's manifest: the text last read or written, and when (see refresh)
        self._served: tuple[str | None, float] = (None, time.monotonic())

    @property
    def complete(self) -> bool:
        """False while a write runs, or when one was stopped half-way: results may be partial."""
        return self.manifest.status == "complete"

    # -- opening -----------------------------------------------------------------
    @classmethod
    def open(cls, index_dir: str | Path, embedder: str | None = None, dim: int | None = None,
             *, store: StoreConfig | None = None, verify: bool = True) -> LanguageStores:
        """Open an existing index; refuse it if damaged or if ``embedder``/``dim`` do not match."""
        index_dir, store = Path(index_dir), store or StoreConfig()
        if store.kind == "persistent":
            if index_dir.exists() and not index_dir.is_dir():
                raise IndexNotFoundError(index_dir, "it is a file, not a directory")
            if not index_dir.is_dir():
                raise IndexNotFoundError(index_dir, "no such directory")
        backend = Backend(index_dir, store)
        text = backend.read_manifest()
        if text is None:
            if store.kind == "persistent" and stored_collections(index_dir):
                raise IndexCorruptError(index_dir, f"{MANIFEST} is missing but chroma/ holds stores")
            if store.kind == "http":
                raise IndexNotFoundError(index_dir, f"the Chroma server {backend.where} has no such index")
            raise IndexNotFoundError(index_dir)
        manifest = cls._parse(index_dir, text)
        if verify and store.kind == "persistent":
            verify_files(index_dir)
        cls._check(index_dir, manifest, embedder, dim)
        stores = cls(index_dir, manifest, store)
        stores._served = (text, time.monotonic())
        return stores

    @staticmethod
    def _parse(index_dir: Path, text: str) -> IndexManifest:
        try:
            raw = json.loads(text)
            version = raw.get("format") if isinstance(raw, dict) else None
            if version is not None and version != FORMAT_VERSION:
                raise IndexDirError(
                    f"{index_dir} uses index format {version}; this xlrag reads format {FORMAT_VERSION}; "
                    f"rebuild it with 'xlrag index --rebuild --corpus FILE --index-dir {index_dir}'"
                )
            return IndexManifest.model_validate(raw)
        except (ValueError, ValidationError) as e:
            if isinstance(e, IndexDirError):
                raise
            raise IndexCorruptError(index_dir, f"{MANIFEST} is unreadable: {str(e).splitlines()[0][:120]}") from None

    @classmethod
    def create(cls, index_dir: str | Path, embedder: str, dim: int, splitter: dict[str, Any] | None = None,
               *, store: StoreConfig | None = None) -> LanguageStores:
        """Open ``index_dir`` for writing, creating it if needed (same embedder required).

        Call it holding the :class:`~xlrag.indexes.lock.WriterLock`.
        """
        index_dir, store = Path(index_dir), store or StoreConfig()
        backend = Backend(index_dir, store)
        if backend.read_manifest() is not None:
            return cls.open(index_dir, embedder, dim, store=store)
        if store.kind == "persistent":
            leftovers = [p for p in index_dir.iterdir()
                         if not p.name.startswith(".xlrag-write")] if index_dir.is_dir() else []
            if leftovers and {p.name for p in leftovers} <= {"chroma", LEXICAL_FOLDER}:
                # what a first build leaves when it is stopped before its first manifest
                raise IndexDirError(
                    f"{index_dir} holds a first build that was stopped before it finished (chroma/ without "
                    f"xlrag-index.json); start it again with 'xlrag index --rebuild --corpus FILE --index-dir "
                    f"{index_dir}', or keep what it wrote with 'xlrag check --repair --index-dir {index_dir}'"
                )
            if leftovers:
                raise IndexDirError(
                    f"{index_dir} exists, is not empty and is not an xlrag index; choose a new --index-dir"
                )
            index_dir.mkdir(parents=True, exist_ok=True)
        elif backend.languages():
            raise IndexCorruptError(backend.where, "the server holds its stores but not its manifest")
        stores = cls(index_dir, IndexManifest(embedder=embedder, dim=dim, splitter=splitter or {}), store)
        with stores._guard():
            stores.backend.create_database()  # the database exists before the manifest that readers trust
        stores.save_manifest()
        return stores

    @staticmethod
    def _check(index_dir: Path, m: IndexManifest, embedder: str | None, dim: int | None) -> None:
        if embedder is not None and (embedder != m.embedder or (dim is not None and dim != m.dim)):
            raise EmbedderMismatchError(index_dir, m.embedder, m.dim, embedder, dim or 0)

    def save_manifest(self, **updates: Any) -> None:
        # to the microsecond: a reader keys on it (another client's write, the in-memory lexical
        # index) and a write within the same second as the last (check --repair rebuilding a
        # folder under its own name) must still read as a change
        self.manifest = self.manifest.model_copy(
            update={**updates, "updated": datetime.now(UTC).isoformat(timespec="microseconds")}
        )
        text = self.manifest.model_dump_json(indent=2)
        self.backend.write_manifest(text)
        self._served = (text, time.monotonic())
        self.manifest_version += 1

    def _guard(self):
        return guard(self.index_dir, self.store)

    # -- collections ---------------------------------------------------------------
    def languages(self) -> list[str]:
        self.refresh()
        return self.backend.languages()

    def collection(self, lang: str, create: bool = False) -> Any:
        with self._lock, self._guard():
            col = self._collections.get(lang)
            if col is not None:
                return col
            name = self.backend.collection_name(lang)
            if create:
                col = self.backend.client.get_or_create_collection(
                    name,
                    embedding_function=None,
                    configuration={"hnsw": {"space": "cosine", "ef_construction": 200, "ef_search": 200}},
                    metadata={"lang": lang, "embedder": self.manifest.embedder, "dim": self.manifest.dim},
                )
            else:
                try:
                    col = self.backend.client.get_collection(name, embedding_function=None)
                except Exception as e:  # NotFoundError, or ValueError in older Chroma
                    from chromadb.errors import NotFoundError

                    if isinstance(e, NotFoundError | ValueError):
                        return None
                    raise
            self._collections[lang] = col
            return col

    def counts(self) -> dict[str, int]:
        with self._guard():
            return {lang: self.collection(lang).count() for lang in self.languages()}

    def scan(self, lang: str, texts: bool = False) -> Iterator[tuple[str, str | None, dict[str, Any]]]:
        """Every ``(id, text or None, metadata)`` of one store, in pages."""
        col = self.collection(lang)
        if col is None:
            return
        offset = 0
        include = ["documents", "metadatas"] if texts else ["metadatas"]
        while True:
            with self._guard():
                got = col.get(include=include, limit=_PAGE, offset=offset)
            docs = got["documents"] if texts else [None] * len(got["ids"])
            yield from zip(got["ids"], docs, got["metadatas"], strict=True)
            if len(got["ids"]) < _PAGE:
                return
            offset += _PAGE

    def other_source(self, sources: Sequence[str]) -> str | None:
        """A source of this index's passages that is none of ``sources``, or None: one filtered
        lookup per store, not a scan."""
        for lang in self.languages():
            col = self.collection(lang)
            if col is None:
                continue
            with self._guard():
                got = col.get(where={"source": {"$nin": list(sources)}}, limit=1, include=["metadatas"])
            if got["ids"]:
                return str(got["metadatas"][0]["source"])
        return None

    def existing_ids(self, lang: str, ids: Sequence[str]) -> set[str]:
        col = self.collection(lang)
        if col is None or not ids:
            return set()
        found: set[str] = set()
        with self._guard():
            for i in range(0, len(ids), 5000):
                found.update(col.get(ids=list(ids[i : i + 5000]), include=[])["ids"])
        return found

    def add(self, passages: Sequence[Passage], vectors: np.ndarray, metadatas: Sequence[dict[str, Any]]) -> None:
        """Write one batch (all passages of one language) in one Chroma call: text, vector
        and metadata together, so a passage never exists without its vector."""
        if not passages:
            return
        langs = {p.lang for p in passages}
        if len(langs) != 1:
            raise IndexDirError("internal: a batch must hold passages of a single language")
        col = self.collection(langs.pop(), create=True)
        with self._guard():
            col.upsert(
                ids=[p.id for p in passages],
                embeddings=np.asarray(vectors, dtype=np.float32),
                documents=[p.text for p in passages],
                metadatas=list(metadatas),
            )

    def delete(self, lang: str, ids: Sequence[str]) -> int:
        col = self.collection(lang)
        if col is None or not ids:
            return 0
        with self._guard():
            for i in range(0, len(ids), 5000):
                col.delete(ids=list(ids[i : i + 5000]))
        return len(ids)

    def refresh(self) -> bool:
        """Follow writes made by other processes since this one loaded the index (see
        :meth:`Backend.outdated`). The manifest is read again at once; the vectors are
        loaded afresh only once no write is running (status ``complete``), because opening
        local Chroma rewrites its files and must not happen under a writer. Until then
        searches answer from the last loaded state, flagged incomplete. True if reloaded."""
        with self._lock:
            if self.store.kind == "http":
                return self._refresh_served()
            vectors = self.backend.outdated()
            # a write that touched the manifest alone (a lexical-only check --repair) is followed too
            stamp = self.backend.manifest_stamp()
            if not vectors and stamp == self._manifest_stamp:
                return False
            text = self.backend.read_manifest()
            if text is None:
                raise IndexNotFoundError(self.index_dir, f"its {MANIFEST} was removed while it was open")
            manifest = self._parse(self.index_dir, text)
            self._check(self.index_dir, manifest, self.manifest.embedder, self.manifest.dim)
            self.manifest, self._manifest_stamp = manifest, stamp
            self.manifest_version += 1
            if not vectors or not self.complete:
                return False
            self.backend.reload()
            self._collections.clear()
            self.generation += 1
            return True

    def _refresh_served(self) -> bool:
        """:meth:`refresh` for a Chroma server, which serves every client its current vectors but
        tells none that another wrote: the manifest is read again when this copy is older than
        :data:`SERVED_MANIFEST_AGE`, one small request per retrieve rather than one per store
        searched. A new manifest (another client's write) drops the collection handles (a
        rebuild makes new collections) and bumps ``generation``, so stores added are listed."""
        text, read_at = self._served
        now = time.monotonic()
        if now - read_at < SERVED_MANIFEST_AGE:
            return False
        fresh = self.backend.read_manifest()
        if fresh is None:
            raise IndexNotFoundError(self.index_dir, f"the Chroma server {self.backend.where} no longer holds it, "
                                     "removed or being rebuilt: open it again once that ends")
        self._served = (fresh, now)
        if fresh == text:
            return False
        manifest = self._parse(self.index_dir, fresh)
        self._check(self.index_dir, manifest, self.manifest.embedder, self.manifest.dim)
        self.manifest = manifest
        self.manifest_version += 1
        if not self.complete:
            return False
        self._collections.clear()
        self.generation += 1
        return True

    def _empty_or_damaged(self, lang: str, col: Any) -> None:
        """A search returned no ids: fine for an empty store, damage for one holding passages.
        Counted only then, not before every search (a count costs a fifth of a search)."""
        with self._guard():
            count = col.count()
        if count:
            # Passages recorded but no vector found: damage, never an empty answer.
            raise IndexCorruptError(self.index_dir,
                                    f"store {lang!r} holds {count} passages but its vector index returned none")

    def rank(self, lang: str, vector: np.ndarray, n: int, query_text: str = "") -> StoreRanking:
        """The ids and scores of the ``n`` nearest passages of one store, best first; no text
        is read (a search reading the text of ``n`` passages costs ~2.5 times as much)."""
        self.refresh()
        col = self.collection(lang)
        if col is None or n <= 0:
            return StoreRanking(store=lang, query_text=query_text, ids=[], scores=[])
        with self._guard():
            res = col.query(query_embeddings=np.asarray(vector, dtype=np.float32).reshape(1, -1),
                            n_results=n, include=["distances"])
        ids, dists = res["ids"][0], res["distances"][0]
        if not ids:
            self._empty_or_damaged(lang, col)
        return StoreRanking(store=lang, query_text=query_text, ids=ids,
                            scores=[1.0 - float(d) for d in dists])  # Chroma's cosine distance is 1 - cos

    def passages(self, lang: str, ids: Sequence[str]) -> dict[str, Passage]:
        """The passages of ``ids`` in one store, by id; ids no longer in it are left out
        (deleted by a write since the ranking): the caller searches again."""
        col = self.collection(lang)
        if col is None or not ids:
            return {}
        with self._guard():
            got = col.get(ids=list(ids), include=["documents", "metadatas"])
        out = {}
        for pid, doc, meta in zip(got["ids"], got["documents"], got["metadatas"], strict=True):
            if (doc is None) != (meta is None):
                raise IndexCorruptError(self.index_dir, f"store {lang!r} holds passages with text but no metadata, "
                                        "or metadata but no text")
            if doc is not None:
                out[pid] = passage_from(pid, doc, meta)
        return out

    def search(self, lang: str, vector: np.ndarray, n: int, query_text: str = "") -> StoreResult:
        self.refresh()
        extra = 0
        for _ in range(_RETRIES):
            col = self.collection(lang)
            if col is None or n <= 0:
                return StoreResult(store=lang, query_text=query_text, passages=[], scores=[])
            with self._guard():
                # n past the store's size is fine: Chroma returns what it has
                asked = n + extra
                res = col.query(
                    query_embeddings=np.asarray(vector, dtype=np.float32).reshape(1, -1),
                    n_results=asked,
                    include=["documents", "metadatas", "distances"],
                )
            ids, docs, metas, dists = res["ids"][0], res["documents"][0], res["metadatas"][0], res["distances"][0]
            if not ids:
                self._empty_or_damaged(lang, col)
                return StoreResult(store=lang, query_text=query_text, passages=[], scores=[])
            if any((d is None) != (m is None) for d, m in zip(docs, metas, strict=True)):
                raise IndexCorruptError(self.index_dir, f"store {lang!r} holds passages with text but no metadata, "
                                        "or metadata but no text")
            rows = [r for r in zip(ids, docs, metas, dists, strict=True) if r[1] is not None]
            gone = len(ids) - len(rows)
            if gone and self.refresh():
                continue  # a write ended since the check above: ask the reloaded index
            if gone and self.complete:
                # ids without text in an index no process is writing: not a deletion in flight
                raise IndexCorruptError(self.index_dir, f"store {lang!r} returned {gone} passage ids "
                                        "that have neither text nor metadata")
            # During a write, ids deleted after this process loaded the vectors come back
            # without text: they are gone, so they are dropped and the ranking asked deeper.
            if gone and len(rows) < n and len(ids) == asked:
                extra = 2 * extra + gone
                continue
            rows = rows[:n]
            return StoreResult(
                store=lang,
                query_text=query_text,
                passages=[passage_from(i, d, m) for i, d, m, _ in rows],
                scores=[1.0 - float(dist) for *_, dist in rows],  # Chroma's cosine distance is 1 - cos
            )
        raise IndexCorruptError(
            self.index_dir, f"store {lang!r} kept returning passage ids without text while it was written"
        )

    def get_embeddings(self, lang: str, ids: Sequence[str]) -> dict[str, np.ndarray]:
        """Stored vectors of ``ids`` in one store (no re-embedding needed to compare with them)."""
        self.refresh()
        col = self.collection(lang)
        if col is None or not ids:
            return {}
        with self._guard():
            res = col.get(ids=list(ids), include=["embeddings"])
        return {i: np.asarray(v, dtype=np.float32) for i, v in zip(res["ids"], res["embeddings"], strict=True)}
