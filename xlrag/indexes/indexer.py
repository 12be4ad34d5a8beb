"""Building an index: corpus → validated documents → passages → embedded batches → stores.

Idempotent and resumable by construction: passage ids are stable (doc id,
position, content hash), every batch is committed on its own, and a run embeds
only the passages the stores do not hold yet. Kill a build, run it again, and
it finishes the remaining batches with no duplicates.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

from pydantic import BaseModel, Field

from xlrag.config import EmbedderConfig, SplitterConfig
from xlrag.indexes.corpus import FieldMap, load_corpus
from xlrag.indexes.embedders import Embedder, build_embedder
from xlrag.indexes.splitting import PassageSplitter
from xlrag.indexes.store import LanguageStores
from xlrag.schema import Document, Passage

__all__ = ["IndexReport", "Progress", "build_index", "index_documents"]

# (passages done, passages to do, language)
Progress = Callable[[int, int, str], None]


class IndexReport(BaseModel):
    index_dir: str
    embedder: str
    documents: int
    passages: int
    added: int = Field(description="passages embedded and written by this run")
    already_present: int = Field(description="passages found in the stores and left alone")
    removed_stale: int = Field(0, description="old passages of re-indexed documents that were deleted")
    skipped_rows: list[str] = Field(default_factory=list, description="malformed rows skipped (--skip-bad)")
    detected_langs: int = 0
    per_language: dict[str, int] = Field(default_factory=dict, description="passages per store after the run")
    seconds: float = 0.0


def _remove_stale(stores: LanguageStores, passages: Sequence[Passage], doc_ids: set[str]) -> int:
    """Delete passages of documents in this corpus that are no longer produced (edited docs)."""
    wanted = {p.id for p in passages}
    removed = 0
    for lang in stores.languages():
        col = stores.collection(lang)
        got = col.get(include=["metadatas"])
        stale = [i for i, m in zip(got["ids"], got["metadatas"], strict=True)
                 if str(m.get("doc_id")) in doc_ids and i not in wanted]
        if stale:
            col.delete(ids=stale)
            removed += len(stale)
    return removed


def index_documents(
    documents: Sequence[Document],
    index_dir: str | Path,
    embedder: Embedder,
    splitter: SplitterConfig | None = None,
    *,
    batch_size: int = 32,
    progress: Progress | None = None,
    skipped_rows: Sequence[str] = (),
    detected_langs: int = 0,
) -> IndexReport:
    t0 = time.perf_counter()
    splitter = splitter or SplitterConfig()
    # Open (and check the embedder of) the stores before the costly splitting.
    stores = LanguageStores.create(index_dir, embedder.name, embedder.dim, splitter.model_dump())
    if stores.manifest.splitter and stores.manifest.splitter != splitter.model_dump():
        # Different splitting would make every passage id new and silently double the index.
        from xlrag.errors import IndexDirError

        raise IndexDirError(
            f"{index_dir} was built with splitter {stores.manifest.splitter}; this run asks for "
            f"{splitter.model_dump()}; use the same settings or a new --index-dir"
        )
    stores.save_manifest(status="building")
    passages = PassageSplitter(splitter).split_all(documents)

    by_lang: dict[str, list[Passage]] = defaultdict(list)
    for p in passages:
        by_lang[p.lang].append(p)
    todo: dict[str, list[Passage]] = {}
    present = 0
    for lang, ps in by_lang.items():
        have = stores.existing_ids(lang, [p.id for p in ps])
        present += len(have)
        todo[lang] = [p for p in ps if p.id not in have]
    total = sum(len(v) for v in todo.values())
    removed = _remove_stale(stores, passages, {d.id for d in documents})

    done = 0
    if progress:
        progress(0, total, "")
    # Writing batch i overlaps with embedding batch i+1; one pending write at most, so
    # an interrupted run loses at most the batch in flight (which a re-run redoes).
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="xlrag-write") as writer:
        pending: Future | None = None
        for lang, ps in sorted(todo.items()):
            for i in range(0, len(ps), batch_size):
                batch = ps[i : i + batch_size]
                vectors = embedder.embed([p.text for p in batch], "passage")
                if pending is not None:
                    pending.result()
                pending = writer.submit(stores.add, batch, vectors)
                done += len(batch)
                if progress:
                    progress(done, total, lang)
        if pending is not None:
            pending.result()
    counts = stores.counts()
    stores.save_manifest(status="complete")
    return IndexReport(
        index_dir=str(index_dir),
        embedder=embedder.name,
        documents=len(documents),
        passages=len(passages),
        added=total,
        already_present=present,
        removed_stale=removed,
        skipped_rows=list(skipped_rows),
        detected_langs=detected_langs,
        per_language=counts,
        seconds=round(time.perf_counter() - t0, 3),
    )


def build_index(
    corpus: str | Path,
    index_dir: str | Path,
    *,
    embedder: Embedder | None = None,
    embedder_config: EmbedderConfig | None = None,
    splitter: SplitterConfig | None = None,
    fields: FieldMap | None = None,
    skip_bad: bool = False,
    batch_size: int | None = None,
    progress: Progress | None = None,
) -> IndexReport:
    """Index a corpus file into ``index_dir`` (created if needed). See :func:`index_documents`."""
    embedder_config = embedder_config or EmbedderConfig()
    embedder = embedder or build_embedder(embedder_config)
    # Validate the whole corpus first: a bad row must not leave a half-written index.
    loaded = load_corpus(corpus, fields, skip_bad=skip_bad)
    return index_documents(
        loaded.documents,
        index_dir,
        embedder,
        splitter,
        batch_size=batch_size or embedder_config.batch_size,
        progress=progress,
        skipped_rows=[str(e) for e in loaded.skipped],
        detected_langs=loaded.detected,
    )
