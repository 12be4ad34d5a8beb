"""Building an index: corpus → validated documents → passages → embedded batches → stores.

The corpus is the truth, per source: indexing a source (a corpus file's
resolved path, or a name) makes the index hold exactly that source's current
documents, and leaves other sources alone. A document's fingerprint (text,
lang, title, metadata, source) is part of its passage ids, so an edit yields new
ids, and the old passages are removed from every store.

Idempotent and resumable: every batch is committed on its own with its vectors,
and a run embeds only the passages the stores do not hold yet. New passages are
written before old ones are removed, so a killed run leaves the old version in
place (status ``building``) and a re-run finishes the job. Every write holds the
per-index :class:`~xlrag.indexes.lock.WriterLock`.
"""

from __future__ import annotations

import hashlib
import json
import time
import warnings
from collections import defaultdict
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

from pydantic import BaseModel, Field

from xlrag.config import EmbedderConfig, SplitterConfig, StoreConfig
from xlrag.errors import IndexDirError, XlragWarning
from xlrag.indexes.chroma import Backend
from xlrag.indexes.corpus import FieldMap, load_corpus
from xlrag.indexes.embedders import Embedder, build_embedder
from xlrag.indexes.integrity import CheckReport, check_index
from xlrag.indexes.lexical import prune_lexical, require_lexical_dir, sync_lexical
from xlrag.indexes.lock import WriterLock
from xlrag.indexes.splitting import HUGE_DOCUMENT_CHARS, PassageSplitter, passage_id
from xlrag.indexes.store import LanguageStores, metadata_for
from xlrag.schema import Document, Passage
from xlrag.text import capped

__all__ = ["DEFAULT_SOURCE", "DeleteReport", "IndexReport", "Progress", "build_index", "delete_documents",
           "document_fingerprint", "index_documents"]

# (passages done, passages to do, language); while a huge document is split,
# (characters split, characters in it, "splitting DOC_ID")
Progress = Callable[[int, int, str], None]
DEFAULT_SOURCE = "python"


class IndexReport(BaseModel):
    index_dir: str
    embedder: str
    source: str = Field(description="the source this run made the index match")
    documents: int
    passages: int
    added: int = Field(description="passages embedded and written by this run")
    already_present: int = Field(description="passages found in the stores and left alone")
    removed_stale: int = Field(0, description="passages deleted: of edited documents, or documents gone from the source")
    pruned_documents: list[str] = Field(default_factory=list, description="documents no longer in the source, removed")
    edited_documents: int = Field(0, description="documents whose old passages were replaced")
    skipped_rows: list[str] = Field(default_factory=list, description="malformed rows skipped (--skip-bad)")
    detected_langs: int = 0
    per_language: dict[str, int] = Field(default_factory=dict, description="passages per store after the run")
    check: CheckReport | None = Field(None, description="the cheap integrity check run at the end")
    seconds: float = 0.0


class DeleteReport(BaseModel):
    index_dir: str
    documents: list[str]
    removed: int = Field(description="passages deleted")
    per_language: dict[str, int] = Field(default_factory=dict)


def document_fingerprint(doc: Document, source: str) -> str:
    """Changes whenever anything stored with the document's passages changes."""
    blob = json.dumps([doc.text, doc.lang, doc.title, doc.metadata, source], ensure_ascii=False,
                      sort_keys=True, default=str)
    return hashlib.sha1(blob.encode("utf-8"), usedforsecurity=False).hexdigest()[:12]


def _passages(documents: Sequence[Document], splitter: SplitterConfig, source: str,
              progress: Progress | None = None, notice: Callable[[str], None] | None = None,
              ) -> tuple[list[Passage], dict[str, dict]]:
    split = PassageSplitter(splitter)
    started = time.time()  # newest version wins when check --repair meets two
    passages: list[Passage] = []
    metas: dict[str, dict] = {}
    for doc in documents:
        fp = document_fingerprint(doc, source)
        on_split = None
        if len(doc.text) > HUGE_DOCUMENT_CHARS:
            # minutes of splitting, then of embedding: said once, then shown as it goes
            message = (f"document {capped(doc.id)} is {len(doc.text) / 1e6:.1f} million characters: splitting and "
                       f"embedding it can take minutes; its progress is shown as it goes")
            if notice:
                notice(message)
            else:
                warnings.warn(message, XlragWarning, stacklevel=3)
            if progress:
                phase = f"splitting {capped(doc.id, 30)}"
                on_split = lambda done, total, phase=phase: progress(done, total, phase)  # noqa: E731
        for p in split.split(doc, on_split):
            p = p.model_copy(update={"id": passage_id(doc.id, p.position, f"{fp}\x00{p.text}")})
            passages.append(p)
            metas[p.id] = {**metadata_for(p, source, fp), "at": started}
    return passages, metas


def _open_for_write(index_dir: Path, embedder: Embedder, splitter: SplitterConfig, store: StoreConfig,
                    rebuild: bool) -> LanguageStores:
    if rebuild:
        Backend(index_dir, store).drop_all()
    stores = LanguageStores.create(index_dir, embedder.name, embedder.dim, splitter.model_dump(), store=store)
    if stores.manifest.splitter and stores.manifest.splitter != splitter.model_dump():
        # Different splitting would make every passage id new and silently double the index.
        raise IndexDirError(
            f"{index_dir} was built with splitter {stores.manifest.splitter}; this run asks for "
            f"{splitter.model_dump()}; use the same settings, or --rebuild"
        )
    return stores


def index_documents(
    documents: Sequence[Document],
    index_dir: str | Path,
    embedder: Embedder,
    splitter: SplitterConfig | None = None,
    *,
    source: str = DEFAULT_SOURCE,
    store: StoreConfig | None = None,
    rebuild: bool = False,
    wait: bool = True,
    on_wait: Callable[[str], None] | None = None,
    batch_size: int = 32,
    progress: Progress | None = None,
    notice: Callable[[str], None] | None = None,
    skipped_rows: Sequence[str] = (),
    detected_langs: int = 0,
) -> IndexReport:
    """Make ``source``'s part of the index match ``documents``.

    ``wait=False`` raises :class:`~xlrag.errors.IndexLockedError` at once if another
    process is writing; otherwise ``on_wait`` gets one message and the call queues.
    ``rebuild`` wipes the whole index (all sources) first. ``notice`` gets one line per huge
    document (an :class:`~xlrag.errors.XlragWarning` without it).
    """
    t0 = time.perf_counter()
    splitter = splitter or SplitterConfig()
    store = store or StoreConfig()
    index_dir = Path(index_dir)
    with WriterLock(index_dir, wait=wait, on_wait=on_wait):
        stores = _open_for_write(index_dir, embedder, splitter, store, rebuild)
        require_lexical_dir(stores)
        stores.save_manifest(status="building")
        passages, metas = _passages(documents, splitter, source, progress, notice)
        wanted = {p.id: p.lang for p in passages}
        doc_ids = {d.id for d in documents}

        present: dict[str, set[str]] = defaultdict(set)
        stale: dict[str, list[str]] = defaultdict(list)
        pruned: set[str] = set()
        edited: set[str] = set()
        for lang in stores.languages():
            for pid, _, meta in stores.scan(lang):
                doc_id = str(meta.get("doc_id"))
                if wanted.get(pid) == lang:
                    present[lang].add(pid)
                elif doc_id in doc_ids:
                    stale[lang].append(pid)  # edited, relabelled, or a copy in the wrong store
                    edited.add(doc_id)
                elif meta.get("source") == source:
                    stale[lang].append(pid)
                    pruned.add(doc_id)
        todo: dict[str, list[Passage]] = defaultdict(list)
        for p in passages:
            if p.id not in present[p.lang]:
                todo[p.lang].append(p)
        total = sum(len(v) for v in todo.values())
        _write(stores, todo, metas, embedder, batch_size, total, progress)
        removed = sum(stores.delete(lang, ids) for lang, ids in stale.items())

        counts = stores.counts()
        before = stores.manifest.lexical
        lexical = sync_lexical(stores)
        stores.save_manifest(status="complete", counts=counts, lexical=lexical)
        prune_lexical(stores, lexical, before)
        # The cheap check: every passage of this source has its vector (a vector lost before this
        # run would otherwise hide behind "already present"), nothing duplicated or misplaced.
        by_lang: dict[str, list[str]] = defaultdict(list)
        for p in passages:
            by_lang[p.lang].append(p.id)
        check = check_index(stores, sample=0, vector_ids=dict(by_lang))
    return IndexReport(
        index_dir=str(index_dir) if store.kind == "persistent" else stores.backend.where,
        embedder=embedder.name,
        source=source,
        documents=len(documents),
        passages=len(passages),
        added=total,
        already_present=sum(len(v) for v in present.values()),
        removed_stale=removed,
        pruned_documents=sorted(pruned),
        edited_documents=len(edited - pruned),
        skipped_rows=list(skipped_rows),
        detected_langs=detected_langs,
        per_language=counts,
        check=check,
        seconds=round(time.perf_counter() - t0, 3),
    )


def _write(stores: LanguageStores, todo: dict[str, list[Passage]], metas: dict[str, dict], embedder: Embedder,
           batch_size: int, total: int, progress: Progress | None) -> dict[str, list[str]]:
    done = 0
    written: dict[str, list[str]] = defaultdict(list)
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
                pending = writer.submit(stores.add, batch, vectors, [metas[p.id] for p in batch])
                written[lang].extend(p.id for p in batch)
                done += len(batch)
                if progress:
                    progress(done, total, lang)
        if pending is not None:
            pending.result()
    return dict(written)


def delete_documents(
    index_dir: str | Path,
    doc_ids: Sequence[str],
    *,
    store: StoreConfig | None = None,
    wait: bool = True,
    on_wait: Callable[[str], None] | None = None,
) -> DeleteReport:
    """Remove documents (all their passages, from every store). Unknown ids are an error,
    raised before anything is deleted."""
    import difflib

    store = store or StoreConfig()
    wanted = list(dict.fromkeys(doc_ids))
    if not wanted:
        raise IndexDirError("no document ids given; pass --doc-id ID (repeatable)")
    with WriterLock(index_dir, wait=wait, on_wait=on_wait, create=store.kind == "http"):
        stores = LanguageStores.open(index_dir, store=store)
        found: dict[str, list[str]] = defaultdict(list)
        known: set[str] = set()
        for lang in stores.languages():
            for pid, _, meta in stores.scan(lang):
                doc_id = str(meta.get("doc_id"))
                known.add(doc_id)
                if doc_id in wanted:
                    found[lang].append(pid)
        missing = [d for d in wanted if d not in known]
        if missing:
            hints = [capped(d) + (f" (did you mean {capped(close[0])}?)" if (close := difflib.get_close_matches(d, known, 1)) else "")
                     for d in missing]
            raise IndexDirError(f"no document {', '.join(hints)} in index {index_dir}; nothing was deleted; "
                                f"list ids with 'xlrag retrieve --json' or check the corpus")
        require_lexical_dir(stores)
        stores.save_manifest(status="building")
        removed = sum(stores.delete(lang, ids) for lang, ids in found.items())
        counts = stores.counts()
        before = stores.manifest.lexical
        lexical = sync_lexical(stores)
        stores.save_manifest(status="complete", counts=counts, lexical=lexical)
        prune_lexical(stores, lexical, before)
    return DeleteReport(index_dir=str(index_dir), documents=wanted, removed=removed, per_language=counts)


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
    source: str | None = None,
    store: StoreConfig | None = None,
    rebuild: bool = False,
    wait: bool = True,
    on_wait: Callable[[str], None] | None = None,
    notice: Callable[[str], None] | None = None,
) -> IndexReport:
    """Index a corpus file into ``index_dir`` (created if needed). See :func:`index_documents`.

    ``source`` defaults to the corpus file's resolved path.
    """
    embedder_config = embedder_config or EmbedderConfig()
    embedder = embedder or build_embedder(embedder_config)
    # Validate the whole corpus first: a bad row must not leave a half-written index.
    loaded = load_corpus(corpus, fields, skip_bad=skip_bad)
    return index_documents(
        loaded.documents,
        index_dir,
        embedder,
        splitter,
        source=source or str(Path(corpus).resolve()),
        store=store,
        rebuild=rebuild,
        wait=wait,
        on_wait=on_wait,
        batch_size=batch_size or embedder_config.batch_size,
        progress=progress,
        notice=notice,
        skipped_rows=[str(e) for e in loaded.skipped],
        detected_langs=loaded.detected,
    )
