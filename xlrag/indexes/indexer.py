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

Where the work runs is an :class:`Executor`: this process (:class:`LocalExecutor`), or
a Ray cluster (:mod:`xlrag.indexes.ray_executor`). Either way this module keeps what
decides the index's content: which passages the stores hold already, what is stale,
the lexical sync, the manifest and the check; an executor only splits documents and
embeds (and may write) the batches it is handed.
"""

from __future__ import annotations

import hashlib
import json
import time
import warnings
from collections import defaultdict
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from pydantic import BaseModel, Field

from xlrag.config import EmbedderConfig, SplitterConfig, StoreConfig
from xlrag.errors import DocumentError, IndexDirError, XlragWarning
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

__all__ = ["DEFAULT_SOURCE", "DeleteReport", "Executor", "IndexReport", "LocalExecutor", "Plan", "Progress",
           "build_index", "delete_documents", "document_fingerprint", "index_documents", "plan_run", "split_documents"]

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
    removed_stale: int = Field(0,
                               description="passages deleted: of edited documents, or documents gone from the source")
    pruned_documents: list[str] = Field(default_factory=list, description="documents no longer in the source, removed")
    edited_documents: int = Field(0, description="documents whose old passages were replaced")
    skipped_rows: list[str] = Field(default_factory=list, description="malformed rows skipped (--skip-bad)")
    detected_langs: int = 0
    per_language: dict[str, int] = Field(default_factory=dict, description="passages per store after the run")
    check: CheckReport | None = Field(None, description="the cheap integrity check run at the end")
    executor: str = Field("local", description="where the passages were split and embedded: local, or ray (N workers)")
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


def huge_document_notice(doc: Document, notice: Callable[[str], None] | None) -> bool:
    """Say once that a huge document will take minutes (a warning without ``notice``); True if huge."""
    if len(doc.text) <= HUGE_DOCUMENT_CHARS:
        return False
    message = (f"document {capped(doc.id)} is {len(doc.text) / 1e6:.1f} million characters: splitting and "
               f"embedding it can take minutes; its progress is shown as it goes")
    if notice:
        notice(message)
    else:
        warnings.warn(message, XlragWarning, stacklevel=5)  # index_documents' caller
    return True


def split_documents(documents: Sequence[Document], splitter: SplitterConfig | PassageSplitter, source: str,
                    started: float, progress: Progress | None = None, notice: Callable[[str], None] | None = None,
                    failed: dict[str, str] | None = None) -> tuple[list[Passage], dict[str, dict]]:
    """Passages (ids fixed by document, fingerprint and text) and their metadata, in document order.

    ``started`` is the run's start, stored as ``at`` (the newest version wins when check
    --repair meets two), the same on every worker of a run. With ``failed``, a document whose
    splitting raises is recorded there (id → reason) and left out; without it, it raises.
    """
    split = splitter if isinstance(splitter, PassageSplitter) else PassageSplitter(splitter)
    passages: list[Passage] = []
    metas: dict[str, dict] = {}
    for doc in documents:
        fp = document_fingerprint(doc, source)
        on_split = None
        if huge_document_notice(doc, notice) and progress:
            phase = f"splitting {capped(doc.id, 30)}"
            on_split = lambda done, total, phase=phase: progress(done, total, phase)  # noqa: E731
        try:
            pieces = split.split(doc, on_split)
        except Exception as e:
            if failed is None:
                raise
            failed[doc.id] = f"splitting failed: {type(e).__name__}: {capped(str(e), 200)}"
            continue
        for p in pieces:
            p = p.model_copy(update={"id": passage_id(doc.id, p.position, f"{fp}\x00{p.text}")})
            passages.append(p)
            metas[p.id] = {**metadata_for(p, source, fp), "at": started}
    return passages, metas


class Executor(Protocol):
    """Where a run's documents are split and its passages embedded and written.

    It never decides what to embed: :func:`index_documents` hands it the passages the
    stores lack. ``write`` commits every batch with its vectors in one call (a batch is in
    the index whole or not at all) and returns the documents whose passages it could not
    embed (id → reason naming the passage); it raises on anything that is not one row's fault.
    """

    @property
    def name(self) -> str: ...

    def split(self, documents: Sequence[Document], splitter: SplitterConfig, source: str, started: float,
              progress: Progress | None, notice: Callable[[str], None] | None,
              ) -> tuple[list[Passage], dict[str, dict], dict[str, str]]: ...

    def write(self, stores: LanguageStores, todo: dict[str, list[Passage]], metas: dict[str, dict],
              progress: Progress | None) -> dict[str, str]: ...


class LocalExecutor:
    """This process: split, then embed batch after batch, each write overlapping the next embedding."""

    name = "local"

    def __init__(self, embedder: Embedder, batch_size: int = 32):
        self.embedder, self.batch_size = embedder, batch_size

    def split(self, documents: Sequence[Document], splitter: SplitterConfig, source: str, started: float,
              progress: Progress | None, notice: Callable[[str], None] | None,
              ) -> tuple[list[Passage], dict[str, dict], dict[str, str]]:
        return (*split_documents(documents, splitter, source, started, progress, notice), {})

    def write(self, stores: LanguageStores, todo: dict[str, list[Passage]], metas: dict[str, dict],
              progress: Progress | None) -> dict[str, str]:
        _write(stores, todo, metas, self.embedder, self.batch_size, sum(map(len, todo.values())), progress)
        return {}


@dataclass
class Plan:
    """What a run must do to make a source's part of the index match its documents."""

    todo: dict[str, list[Passage]] = field(default_factory=lambda: defaultdict(list))
    present: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))
    stale: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))
    pruned: set[str] = field(default_factory=set)
    edited: set[str] = field(default_factory=set)

    @property
    def total(self) -> int:
        return sum(len(v) for v in self.todo.values())


def plan_run(stores: LanguageStores, passages: Sequence[Passage], doc_ids: set[str], source: str) -> Plan:
    """Scan the stores once: what is present (skipped), stale (deleted after the writes) and to do."""
    plan = Plan()
    wanted = {p.id: p.lang for p in passages}
    for lang in stores.languages():
        for pid, _, meta in stores.scan(lang):
            doc_id = str(meta.get("doc_id"))
            if wanted.get(pid) == lang:
                plan.present[lang].add(pid)
            elif doc_id in doc_ids:
                plan.stale[lang].append(pid)  # edited, relabelled, or a copy in the wrong store
                plan.edited.add(doc_id)
            elif meta.get("source") == source:
                plan.stale[lang].append(pid)
                plan.pruned.add(doc_id)
    for p in passages:
        if p.id not in plan.present[p.lang]:
            plan.todo[p.lang].append(p)
    return plan


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
    executor: Executor | None = None,
    skip_bad: bool = False,
) -> IndexReport:
    """Make ``source``'s part of the index match ``documents``.

    ``wait=False`` raises :class:`~xlrag.errors.IndexLockedError` at once if another
    process is writing; otherwise ``on_wait`` gets one message and the call queues.
    ``rebuild`` wipes the whole index (all sources) first. ``notice`` gets one line per huge
    document (an :class:`~xlrag.errors.XlragWarning` without it). ``executor`` runs the
    splitting and embedding (default: this process, ``batch_size`` passages a batch); a row it
    cannot split or embed fails the run naming it, or with ``skip_bad`` is skipped and reported.
    """
    t0 = time.perf_counter()
    splitter = splitter or SplitterConfig()
    store = store or StoreConfig()
    index_dir = Path(index_dir)
    executor = executor or LocalExecutor(embedder, batch_size)
    skipped = list(skipped_rows)
    with WriterLock(index_dir, wait=wait, on_wait=on_wait):
        stores = _open_for_write(index_dir, embedder, splitter, store, rebuild)
        require_lexical_dir(stores)
        stores.save_manifest(status="building")
        passages, metas, failed = executor.split(documents, splitter, source, time.time(), progress, notice)
        _refuse_or_skip(failed, skip_bad, skipped)
        kept = [d for d in documents if d.id not in failed]  # a skipped row is gone from the source
        plan = plan_run(stores, passages, {d.id for d in kept}, source)
        failed = executor.write(stores, plan.todo, metas, progress)
        _refuse_or_skip(failed, skip_bad, skipped)
        if failed:  # skipped: none of the document's passages stays, as if its row were malformed
            dropped: dict[str, list[str]] = defaultdict(list)
            for p in passages:
                if p.doc_id in failed:
                    dropped[p.lang].append(p.id)
            for lang, ids in dropped.items():
                there = stores.existing_ids(lang, ids)
                plan.present[lang] -= there
                plan.stale[lang].extend(there)
            passages = [p for p in passages if p.doc_id not in failed]
        removed = sum(stores.delete(lang, ids) for lang, ids in plan.stale.items())

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
    lost = sum(1 for ps in plan.todo.values() for p in ps if p.doc_id in failed)
    return IndexReport(
        index_dir=str(index_dir) if store.kind == "persistent" else stores.backend.where,
        embedder=embedder.name,
        source=source,
        documents=len(kept) - len(failed),
        passages=len(passages),
        added=plan.total - lost,
        already_present=sum(len(v) for v in plan.present.values()),
        removed_stale=removed,
        pruned_documents=sorted(plan.pruned),
        edited_documents=len(plan.edited - plan.pruned),
        skipped_rows=skipped,
        detected_langs=detected_langs,
        per_language=counts,
        check=check,
        executor=executor.name,
        seconds=round(time.perf_counter() - t0, 3),
    )


def _refuse_or_skip(failed: dict[str, str], skip_bad: bool, skipped: list[str]) -> None:
    """Rows an executor could not split or embed: the run fails naming the first (what was
    written stays, and a rerun after the fix redoes only the rest), or, with ``skip_bad``,
    each is reported as a skipped row."""
    if not failed:
        return
    errors = [DocumentError(doc_id, why) for doc_id, why in sorted(failed.items())]
    if not skip_bad:
        raise errors[0] if len(errors) == 1 else DocumentError(errors[0].doc_id, errors[0].why, more=len(errors) - 1)
    skipped.extend(str(e.skipped()) for e in errors)


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
            hints = [capped(d) + (f" (did you mean {capped(close[0])}?)"
                                  if (close := difflib.get_close_matches(d, known, 1)) else "")
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
    executor: Executor | None = None,
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
        executor=executor,
        skip_bad=skip_bad,
    )
