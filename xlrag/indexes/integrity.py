"""``xlrag check``: verify an index, and repair what can be repaired.

Verified: every passage has its vector (fetched in batches; Chroma's "Error
finding id" is bisected down to the passages it concerns), store counts match
the scanned passages and the manifest, no passage id sits in two stores or in a
store other than its metadata language, no document mixes passages of two
versions (stale leftovers of an interrupted edit), and a sample of passages
retrieves itself at rank 1 with its own stored vector.

Repair re-embeds missing vectors from the passage text Chroma keeps (with the
index's embedder; the store is rewritten, as Chroma cannot update an id its
vector index lost), removes duplicates and misplaced copies (moving a passage
whose only copy is misplaced), drops old versions and passages without
provenance, and rewrites the manifest's counts.
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from pydantic import BaseModel, Field

from xlrag.config import EmbedderConfig, StoreConfig
from xlrag.errors import EmbedderMismatchError, IndexCorruptError
from xlrag.indexes.chroma import missing_vector_dirs
from xlrag.schema import Passage

if TYPE_CHECKING:
    from xlrag.indexes.embedders import Embedder
    from xlrag.indexes.store import LanguageStores

__all__ = ["CheckReport", "check_index", "repair_index"]

_BATCH = 256


class CheckReport(BaseModel):
    index: str
    status: str
    passages: int = 0
    per_language: dict[str, int] = Field(default_factory=dict)
    vectors_checked: int = 0
    missing_vectors: list[str] = Field(default_factory=list, description="'lang:id' of passages without a vector")
    count_mismatches: list[str] = Field(default_factory=list)
    duplicates: list[str] = Field(default_factory=list, description="passage ids found in more than one store")
    misplaced: list[str] = Field(default_factory=list, description="'lang:id' in a store other than their language")
    stale_documents: list[str] = Field(default_factory=list, description="documents holding passages of two versions")
    orphans: list[str] = Field(default_factory=list, description="'lang:id' of passages without source/fingerprint")
    lost_stores: list[str] = Field(default_factory=list, description="stores whose vector files are gone")
    lexical_stale: list[str] = Field(default_factory=list,
                                     description="stores whose lexical index is missing, outdated or not theirs")
    sample_checked: int = 0
    self_miss: list[str] = Field(default_factory=list,
                                 description="sampled passages not at rank 1 for their own vector")
    repaired: dict[str, int] = Field(default_factory=dict)

    @property
    def unfinished(self) -> bool:
        return self.status != "complete"

    @property
    def problems(self) -> int:
        return (len(self.missing_vectors) + len(self.lost_stores) + len(self.lexical_stale)
                + len(self.count_mismatches) + len(self.duplicates) + len(self.misplaced)
                + len(self.stale_documents) + len(self.orphans) + len(self.self_miss) + int(self.unfinished))

    @property
    def ok(self) -> bool:
        return self.problems == 0

    def summary(self) -> str:
        lost = f"vector files lost in {', '.join(self.lost_stores)}; " if self.lost_stores else ""
        if self.lexical_stale:
            lost += f"lexical index to rebuild for {', '.join(s.split(':', 1)[0] for s in self.lexical_stale)}; "
        return (f"{lost}{self.passages} passages in {len(self.per_language)} stores: {len(self.missing_vectors)} "
                f"missing vectors ({self.vectors_checked} checked), {len(self.duplicates)} duplicates across stores, "
                f"{len(self.misplaced)} misplaced, {len(self.stale_documents)} stale documents, "
                f"{len(self.orphans)} orphans, {len(self.count_mismatches)} count mismatches, "
                f"self-retrieval {self.sample_checked - len(self.self_miss)}/{self.sample_checked}, status "
                f"{self.status}")


def _missing(col: Any, ids: Sequence[str]) -> list[str]:
    """Ids among ``ids`` whose vector cannot be fetched; bisects Chroma's all-or-nothing errors."""
    if not ids:
        return []
    try:
        got = col.get(ids=list(ids), include=["embeddings"])
    except Exception as e:
        from chromadb.errors import ChromaError

        if not isinstance(e, ChromaError):
            raise
        if len(ids) == 1:
            return list(ids)
        mid = len(ids) // 2
        return _missing(col, ids[:mid]) + _missing(col, ids[mid:])
    have = {i for i, v in zip(got["ids"], got["embeddings"], strict=True) if v is not None and len(v)}
    return [i for i in ids if i not in have]


def check_index(stores: LanguageStores | str | Path, *, store: StoreConfig | None = None, sample: int = 20,
                vector_ids: dict[str, list[str]] | None = None, seed: int = 0) -> CheckReport:
    """Verify an index (a path, or open ``stores``); read-only, no lock taken.

    ``vector_ids`` limits the vector check to those ids (the cheap check ``index`` runs on
    what it wrote); ``sample=0`` skips self-retrieval.
    """
    if isinstance(stores, str | Path):
        from xlrag.indexes.store import LanguageStores

        stores = LanguageStores.open(stores, store=store, verify=False)
    report = CheckReport(index=stores.backend.where, status=stores.manifest.status)
    if stores.store.kind == "persistent" and stores.backend._client is None:
        from xlrag.indexes.chroma import missing_vector_dirs

        report.lost_stores = [name[len(stores.backend.prefix):] for name, _, _ in missing_vector_dirs(stores.index_dir)]
    where: dict[str, list[str]] = defaultdict(list)
    versions: dict[str, set[str]] = defaultdict(set)
    ids_by_lang: dict[str, list[str]] = {}
    with stores._guard():
        for lang in stores.languages():
            col = stores.collection(lang)
            ids = []
            for pid, _, meta in stores.scan(lang):
                ids.append(pid)
                where[pid].append(lang)
                if meta.get("lang") != lang:
                    report.misplaced.append(f"{lang}:{pid}")
                if not meta.get("fp") or not meta.get("source"):
                    report.orphans.append(f"{lang}:{pid}")
                else:
                    versions[str(meta.get("doc_id"))].add(str(meta["fp"]))
            ids_by_lang[lang] = ids
            report.per_language[lang] = count = col.count()
            if count != len(ids):
                report.count_mismatches.append(f"{lang}: count {count}, scanned {len(ids)}")
            check = ids if vector_ids is None else [i for i in vector_ids.get(lang, []) if i in set(ids)]
            report.vectors_checked += len(check)
            for i in range(0, len(check), _BATCH):
                report.missing_vectors += [f"{lang}:{m}" for m in _missing(col, check[i : i + _BATCH])]
    report.passages = sum(report.per_language.values())
    if stores.complete:
        for lang, n in stores.manifest.counts.items():
            if report.per_language.get(lang, 0) != n:
                report.count_mismatches.append(f"{lang}: {report.per_language.get(lang, 0)} in the store, manifest "
                                               f"says {n}")
    report.lexical_stale = _lexical_problems(stores, ids_by_lang)
    report.duplicates = sorted(pid for pid, langs in where.items() if len(langs) > 1)
    report.stale_documents = sorted(d for d, fps in versions.items() if len(fps) > 1)
    if sample:
        _self_retrieval(stores, ids_by_lang, report, sample, seed)
    return report


def _lexical_problems(stores: LanguageStores, ids_by_lang: dict[str, list[str]]) -> list[str]:
    """'lang: why' for each store whose lexical index is not built from exactly its passages
    (a Chroma server's without store.lexical_dir are built in memory by each reader: nothing to check)."""
    from xlrag.indexes.lexical import built_in_memory, ids_digest, unusable

    if built_in_memory(stores):
        return []
    out = []
    for lang, ids in ids_by_lang.items():
        # damaged files are found here, not at a user's first question
        why = unusable(stores, lang)
        if why is None and stores.manifest.lexical[lang].digest != ids_digest(ids):
            why = f"store {lang!r}'s lexical index was built from other passages than the store holds"
        if why is not None:
            out.append(f"{lang}: {why}")
    return out


def _self_retrieval(stores: LanguageStores, ids_by_lang: dict[str, list[str]], report: CheckReport,
                    sample: int, seed: int) -> None:
    missing = {m.split(":", 1)[1] for m in report.missing_vectors}
    pool = [(lang, pid) for lang, ids in ids_by_lang.items() for pid in ids if pid not in missing]
    picked = random.Random(seed).sample(pool, min(sample, len(pool)))
    by_lang: dict[str, list[str]] = defaultdict(list)
    for lang, pid in picked:
        by_lang[lang].append(pid)
    with stores._guard():
        for lang, pids in by_lang.items():
            col = stores.collection(lang)
            vectors = stores.get_embeddings(lang, pids)
            n = min(3, col.count())
            for pid in pids:
                report.sample_checked += 1
                res = col.query(query_embeddings=np.asarray(vectors[pid]).reshape(1, -1), n_results=n,
                                include=["distances"])
                ids, dists = res["ids"][0], res["distances"][0]
                # Identical texts tie at distance 0: any tied id at the top counts as rank 1.
                if not ids or pid not in [i for i, d in zip(ids, dists, strict=True) if d <= dists[0] + 1e-5]:
                    report.self_miss.append(f"{lang}:{pid}")


def repair_index(
    index_dir: str | Path,
    *,
    embedder: Embedder | None = None,
    embedder_config: EmbedderConfig | None = None,
    store: StoreConfig | None = None,
    sample: int = 20,
    wait: bool = True,
    on_wait: Callable[[str], None] | None = None,
) -> CheckReport:
    """Check, repair what can be repaired (holding the writer lock), and check again."""
    from xlrag.indexes.lock import WriterLock
    from xlrag.indexes.store import LanguageStores

    with WriterLock(index_dir, wait=wait, on_wait=on_wait, create=store is not None and store.kind == "http"):
        repaired: dict[str, int] = defaultdict(int)
        if store is None or store.kind == "persistent":
            # a damaged database took the passages with it: that error says to rebuild, not repair
            missing_vector_dirs(Path(index_dir))
        try:
            stores = LanguageStores.open(index_dir, store=store, verify=False)
        except IndexCorruptError as e:
            if not e.repairable:
                raise
            stores = _recover_manifest(Path(index_dir), store or StoreConfig(), e)
            repaired["manifest rebuilt from the stores' own metadata"] = 1
        from xlrag.indexes.lexical import prune_lexical, require_lexical_dir, sync_lexical

        require_lexical_dir(stores)
        before = check_index(stores, sample=sample)
        broken = sorted({m.split(":", 1)[0] for m in before.missing_vectors} | set(before.lost_stores))
        if broken:
            embedder = _embedder_for(stores, embedder, embedder_config)
            for lang in broken:
                repaired["passages re-embedded"] += _rewrite_store(stores, lang, embedder)
                repaired["stores rewritten"] += 1
        repaired["misplaced or duplicate copies removed"] += _fix_placement(stores)
        repaired["old versions and orphans removed"] += _drop_old_versions(stores)
        # an unreadable folder may still carry a current name: rebuilt, never reused
        stale = {s.split(":", 1)[0] for s in before.lexical_stale}
        lexical = sync_lexical(stores, force=stale)
        repaired["lexical indexes rebuilt"] += len(
            stale | {lang for lang, ref in lexical.items() if stores.manifest.lexical.get(lang) != ref})
        replaced = stores.manifest.lexical
        stores.save_manifest(counts=stores.counts(), lexical=lexical)
        prune_lexical(stores, lexical, replaced)
        after = check_index(stores, sample=sample)
    after.repaired = {k: v for k, v in repaired.items() if v}
    return after


def _recover_manifest(index_dir: Path, store: StoreConfig, damage: IndexCorruptError) -> LanguageStores:
    """Write the manifest anew from what every store records of itself (its language, the
    embedder and dimension that filled it). The splitter settings it held are not recorded
    elsewhere: later additions split with the configured splitter."""
    from xlrag.indexes.chroma import Backend, guard
    from xlrag.indexes.store import IndexManifest, LanguageStores

    backend = Backend(index_dir, store)
    with guard(index_dir, store):
        found = {(str(m["embedder"]), int(m["dim"]))
                 for c in backend.client.list_collections()
                 if c.name.startswith(backend.prefix) and "embedder" in (m := c.metadata or {}) and "dim" in m}
    if len(found) != 1:
        why = "no store says" if not found else f"the stores disagree ({sorted(found)})"
        raise IndexCorruptError(index_dir, f"{damage.why}, and {why} which embedder built them",
                                repairable=False) from None
    ((embedder, dim),) = found
    backend.write_manifest(IndexManifest(embedder=embedder, dim=dim, status="complete").model_dump_json(indent=2))
    return LanguageStores.open(index_dir, store=store, verify=False)


def _embedder_for(stores: LanguageStores, embedder: Embedder | None, config: EmbedderConfig | None) -> Embedder:
    if embedder is None:
        from xlrag.indexes.embedders import build_embedder

        embedder = build_embedder(config or EmbedderConfig())
    m = stores.manifest
    if embedder.name != m.embedder or embedder.dim != m.dim:
        raise EmbedderMismatchError(stores.index_dir, m.embedder, m.dim, embedder.name, embedder.dim)
    return embedder


def _rewrite_store(stores: LanguageStores, lang: str, embedder: Embedder) -> int:
    """Recreate one store from its passages: kept vectors where Chroma still has them, fresh ones
    where not. Returns how many passages were re-embedded."""
    rows = list(stores.scan(lang, texts=True))
    col = stores.collection(lang)
    vectors: dict[str, np.ndarray] = {}
    with stores._guard():
        for i in range(0, len(rows), _BATCH):
            ids = [r[0] for r in rows[i : i + _BATCH]]
            lost = set(_missing(col, ids))
            vectors.update(stores.get_embeddings(lang, [x for x in ids if x not in lost]))
        stores.backend.client.delete_collection(stores.backend.collection_name(lang))
    stores._collections.pop(lang, None)
    fresh = [r for r in rows if r[0] not in vectors]
    for i in range(0, len(fresh), 32):
        chunk = fresh[i : i + 32]
        for (pid, _, _), v in zip(chunk, embedder.embed([r[1] or "" for r in chunk], "passage"), strict=True):
            vectors[pid] = v
    for i in range(0, len(rows), _BATCH):
        chunk = rows[i : i + _BATCH]
        passages = [Passage(id=pid, doc_id=str(m["doc_id"]), text=t or "", lang=lang) for pid, t, m in chunk]
        stores.add(passages, np.stack([vectors[r[0]] for r in chunk]), [r[2] for r in chunk])
    return len(fresh)


def _fix_placement(stores: LanguageStores) -> int:
    """Each passage ends up once, in the store of its metadata language."""
    rows: dict[str, list[tuple[str, str | None, dict]]] = defaultdict(list)
    for lang in stores.languages():
        for pid, text, meta in stores.scan(lang, texts=True):
            rows[pid].append((lang, text, meta))
    removed = 0
    for pid, copies in rows.items():
        home = str(copies[0][2].get("lang"))
        wrong = [c for c in copies if c[0] != home]
        if not wrong:
            continue
        if not any(c[0] == home for c in copies):
            lang, text, meta = wrong[0]
            vec = stores.get_embeddings(lang, [pid])[pid]
            stores.add([Passage(id=pid, doc_id=str(meta["doc_id"]), text=text or "", lang=home)], vec.reshape(1, -1),
                       [meta])
        for lang, _, _ in wrong:
            removed += stores.delete(lang, [pid])
    return removed


def _drop_old_versions(stores: LanguageStores) -> int:
    """Keep each document's newest version (``at``, the write run's time); drop passages without
    provenance, which no xlrag write of this format produces."""
    rows = [(lang, pid, meta) for lang in stores.languages() for pid, _, meta in stores.scan(lang)]
    newest: dict[str, tuple[float, str]] = {}
    for _, _, meta in rows:
        if meta.get("fp") and meta.get("source"):
            key = (float(meta.get("at", 0.0)), str(meta["fp"]))
            doc = str(meta["doc_id"])
            newest[doc] = max(newest.get(doc, key), key)
    doomed: dict[str, list[str]] = defaultdict(list)
    for lang, pid, meta in rows:
        if not meta.get("fp") or not meta.get("source") or newest[str(meta["doc_id"])][1] != meta["fp"]:
            doomed[lang].append(pid)
    return sum(stores.delete(lang, ids) for lang, ids in doomed.items())
