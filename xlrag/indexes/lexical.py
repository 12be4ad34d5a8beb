"""The lexical channel: one BM25 index per language store, built with that language's analyzer.

A store holds one language, so its lexical index can use that language's analyzer
(:mod:`xlrag.indexes.analyzers`: ICU word breaks, Snowball stems, Arabic normalisation)
where one index over a mixed corpus could only use a generic one. Scoring is bm25s
(sparse-matrix BM25, Lucene's variant), never a hand-written scorer.

On disk (local Chroma files) each store's index is a folder ``lexical/<lang>-<digest>``
named after what it was built from; the manifest's ``lexical`` entry points at it. A write
run builds new folders first and rewrites the manifest last, so a killed run leaves the
old folder, still named by the manifest, and readers see either the old pair or the new
one, never half of each. Folders no manifest names are removed by the next write.

A reader trusts a lexical index only when the manifest names it, its analyzer is this
xlrag's, and it holds as many passages as the store: anything else is reported (the
retriever searches that store dense-only, flags the result incomplete and says why) and
``xlrag check`` finds it by comparing ids, ``check --repair`` rebuilds it.

With a Chroma server (``store.kind: http``) the stores are shared by every client, but a
folder beside one client is not: each client builds its lexical indexes in memory from the
server's passages on first use, and again after any write changes the manifest.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import threading
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel

from xlrag.indexes.analyzers import analyzer_for
from xlrag.indexes.store import LEXICAL_FOLDER, LanguageStores, LexicalRef

__all__ = ["LEXICAL_DIR", "LexicalIndex", "LexicalRanking", "LexicalRef", "LexicalStores", "ids_digest", "problem",
           "prune_lexical", "sync_lexical", "unreadable", "unusable"]

LEXICAL_DIR = LEXICAL_FOLDER  # the folder under the index that holds the lexical indexes
_IDS = "ids.json"


class LexicalRanking(BaseModel):
    """One store's BM25 ranking: ids and scores, best first (only passages sharing a token)."""

    store: str
    query_text: str
    tokens: list[str]
    ids: list[str]
    scores: list[float]


def ids_digest(ids: Iterable[str]) -> str:
    """Order-free digest of a store's passage ids. Ids embed the document's fingerprint and the
    passage text, so equal digests mean equal contents."""
    h = hashlib.sha1(usedforsecurity=False)
    for pid in sorted(ids):
        h.update(pid.encode("utf-8"))
        h.update(b"\n")
    return h.hexdigest()[:16]


class LexicalIndex:
    """BM25 over one store's passages."""

    def __init__(self, lang: str, ids: list[str], bm25: Any, analyzer: str, empty: int):
        self.lang = lang
        self.ids = ids
        self.bm25 = bm25  # None when no passage gave a token
        self.analyzer = analyzer
        self.empty = empty

    @classmethod
    def build(cls, lang: str, rows: Sequence[tuple[str, str]]) -> LexicalIndex:
        """Index ``(passage id, text)`` rows of one store."""
        import bm25s

        analyzer = analyzer_for(lang)
        ids = [pid for pid, _ in rows]
        tokens = [analyzer.tokens(text) for _, text in rows]
        empty = sum(1 for t in tokens if not t)
        bm25 = None
        if len(tokens) > empty:
            bm25 = bm25s.BM25()
            bm25.index(tokens, show_progress=False)
        return cls(lang, ids, bm25, analyzer.version, empty)

    def ref(self, folder: str) -> LexicalRef:
        return LexicalRef(analyzer=self.analyzer, digest=ids_digest(self.ids), passages=len(self.ids),
                          empty=self.empty, folder=folder)

    def save(self, root: Path, overwrite: bool = False) -> LexicalRef:
        """Write under ``root/lexical/``: built in a temporary folder whose files are synced, then
        renamed into place, so a folder with the final name is always whole, even after a power
        cut. A readable folder of that name is kept (the same ids and analyzer) unless
        ``overwrite`` (``check --repair`` of a damaged one); anything else standing at its path
        (a damaged folder, a plain file, a plain file where ``lexical/`` should be) is replaced."""
        digest = ids_digest(self.ids)
        folder = f"{self.lang}-{digest}-{hashlib.sha1(self.analyzer.encode(), usedforsecurity=False).hexdigest()[:6]}"
        base = root / LEXICAL_DIR
        final = base / folder
        ref = self.ref(folder)
        if not overwrite and unreadable(root, ref) is None:
            return ref  # the same ids, same analyzer, and whole: already written
        _clear(base, keep_dir=True)
        base.mkdir(parents=True, exist_ok=True)
        tmp = base / f".tmp-{folder}-{os.getpid()}-{threading.get_ident()}"
        _clear(tmp)
        tmp.mkdir(parents=True)
        if self.bm25 is not None:
            self.bm25.save(str(tmp), show_progress=False)
        # each file's size: a stat per file tells a file of another store or of another write
        # (same shape, other bytes) from its own without reading the arrays
        sizes = {f.name: f.stat().st_size for f in sorted(tmp.iterdir())}
        (tmp / _IDS).write_text(json.dumps({"ids": self.ids, "order": _order_digest(self.ids), "sizes": sizes,
                                            "ref": ref.model_dump()}, ensure_ascii=False), encoding="utf-8")
        for f in tmp.iterdir():  # the data first: a synced rename of unsynced files can name empty ones
            _fsync(f, os.O_RDONLY)
        _fsync(tmp, os.O_RDONLY)
        if final.exists() or final.is_symlink():
            trash = base / f".old-{folder}-{os.getpid()}"
            _clear(trash)
            os.replace(final, trash)
            _clear(trash)
        os.replace(tmp, final)
        _fsync(base, os.O_RDONLY)
        return ref

    @classmethod
    def load(cls, root: Path, lang: str, ref: LexicalRef, *, mmap: bool = False) -> LexicalIndex:
        """The folder ``ref`` names. :class:`FileNotFoundError` when it is missing; :class:`ValueError`
        when it cannot be read for any other reason (a truncated array, a file of another store, an
        unknown parameter, a file where a folder should be...), the shape check included."""
        folder = root / LEXICAL_DIR / ref.folder
        if not folder.is_dir():
            raise FileNotFoundError(f"lexical folder {LEXICAL_DIR}/{ref.folder} is missing")
        try:
            return cls._read(folder, lang, ref, mmap)
        except Exception as e:  # numpy, json and bm25s raise what they like on damaged files
            raise ValueError(f"lexical folder {ref.folder} is unreadable: {type(e).__name__}: {str(e)[:120]}") from e

    @classmethod
    def _read(cls, folder: Path, lang: str, ref: LexicalRef, mmap: bool) -> LexicalIndex:
        import bm25s

        raw = json.loads((folder / _IDS).read_text(encoding="utf-8"))
        ids = raw["ids"]
        if len(ids) != ref.passages or LexicalRef.model_validate(raw["ref"]).digest != ref.digest \
                or ids_digest(ids) != ref.digest:
            raise ValueError("it does not hold the passages the manifest names")
        if raw.get("order") != _order_digest(ids):
            raise ValueError("its ids are not in the order the index was built in")
        sizes = {f.name: f.stat().st_size for f in folder.iterdir() if f.name != _IDS}
        if sizes != raw.get("sizes"):
            raise ValueError("its files are not the ones it was written with (missing, cut short or replaced)")
        bm25 = None
        if ref.passages > ref.empty:
            bm25 = bm25s.BM25.load(str(folder), mmap=mmap, show_progress=False, verbosity=0)
            _check_shape(bm25, len(ids))
        return cls(lang, ids, bm25, ref.analyzer, ref.empty)

    def holding(self, names: Sequence[str]) -> np.ndarray | None:
        """Which passages hold one of ``names`` (each word of a name by one of its terms, as
        :func:`xlrag.indexes.names.names_in` matches a word), as a mask over the store; None when
        no passage holds any. Words split into single characters (a Chinese transliteration) need
        each character, in any order: a passage that holds the name is never left out."""
        if self.bm25 is None or not names:
            return None
        vocab = self.bm25.vocab_dict
        groups = analyzer_for(self.lang).groups
        held = np.zeros(len(self.ids), dtype=bool)
        for name in names:
            words = groups(name)
            mask = np.ones(len(self.ids), dtype=bool) if words else np.zeros(len(self.ids), dtype=bool)
            for word in words:
                terms = [t for t in word if t in vocab]
                mask &= self.bm25.get_scores(terms) > 0 if terms else False
                if not mask.any():
                    break
            held |= mask
        return held if held.any() else None

    def rank(self, text: str, n: int, tie: float = 0.0, *, within: np.ndarray | None = None) -> LexicalRanking:
        """The ``n`` best passages for ``text``, less those tied with the ``n``-th (within ``tie``
        times the best score) when the tie runs past the cut: the cut would pick some of the
        tied passages by their position in the store, and fusion would take that pick for
        evidence. Only passages sharing a token with ``text`` score. ``within`` (a mask from
        :meth:`holding`) then drops the passages outside it: it only takes evidence away, so a
        passage that shares little but the name with ``text`` is not lifted into the cut (lifting
        them cost XQuAD's Chinese two questions of 95 and Travel nothing: docs/explanation/languages.md)."""
        tokens = analyzer_for(self.lang).tokens(text)
        known = [t for t in tokens if self.bm25 is not None and t in self.bm25.vocab_dict]
        if not known or n <= 0:
            return LexicalRanking(store=self.lang, query_text=text, tokens=tokens, ids=[], scores=[])
        scores = self.bm25.get_scores(known)
        positive = int(np.count_nonzero(scores > 0))
        n = min(n, positive)
        if n == 0:
            return LexicalRanking(store=self.lang, query_text=text, tokens=tokens, ids=[], scores=[])
        top = np.argpartition(-scores, min(n, positive - 1))[:min(n + 1, positive)]
        # ties broken by position in the store: stable across runs
        top = top[np.lexsort((top, -scores[top]))]
        band = tie * scores[top[0]]
        if len(top) > n and scores[top[n]] >= scores[top[n - 1]] - band:  # the tie runs past the cut
            top = top[:n][scores[top[:n]] > scores[top[n - 1]] + band]
        else:
            top = top[:n]
        if within is not None:
            top = top[within[top]]
        return LexicalRanking(store=self.lang, query_text=text, tokens=tokens,
                              ids=[self.ids[i] for i in top], scores=[float(scores[i]) for i in top])


def _order_digest(ids: Sequence[str]) -> str:
    """Digest of the ids in their order: BM25's rows are positions, so a reordered ``ids.json``
    would credit every score to another passage."""
    return hashlib.sha1("\n".join(ids).encode("utf-8"), usedforsecurity=False).hexdigest()[:16]


def _check_shape(bm25: Any, n_ids: int) -> None:
    """The cheap consistency of a loaded BM25 matrix with its ids: files of another store, or of
    two writes, disagree here. A CSC matrix: one column per vocabulary term, rows are passages."""
    scores = bm25.scores
    data, indices, indptr = scores["data"], scores["indices"], scores["indptr"]
    if int(scores["num_docs"]) != n_ids:
        raise ValueError(f"it scores {scores['num_docs']} passages, its ids list {n_ids}")
    if len(data) != len(indices) or len(indptr) < 1 or int(indptr[-1]) != len(data) \
            or len(indptr) - 1 > len(bm25.vocab_dict):
        raise ValueError("its score arrays disagree with each other or with its vocabulary")
    if len(indices) and int(np.max(indices)) >= n_ids:
        raise ValueError("it scores passages its ids list does not have")


def unreadable(root: Path, ref: LexicalRef) -> str | None:
    """Why the folder ``ref`` names cannot be used, or None: loaded memory-mapped (cheap), with
    the shape check."""
    try:
        LexicalIndex.load(root, "", ref, mmap=True)
    except (OSError, ValueError) as e:
        return str(e)
    return None


def _fsync(path: Path, flags: int) -> None:
    # a rename is durable only once its folder is synced, and names whole files only once they are
    try:
        fd = os.open(path, flags)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _clear(path: Path, keep_dir: bool = False) -> None:
    """Remove what stands at ``path``: a file or link always, a folder unless ``keep_dir``."""
    if path.is_symlink() or path.is_file():
        path.unlink(missing_ok=True)
    elif path.is_dir() and not keep_dir:
        shutil.rmtree(path, ignore_errors=True)


def _build(stores: LanguageStores, lang: str) -> LexicalIndex:
    rows = [(pid, text or "") for pid, text, _ in stores.scan(lang, texts=True)]
    return LexicalIndex.build(lang, rows)


def sync_lexical(stores: LanguageStores, force: Iterable[str] = ()) -> dict[str, LexicalRef]:
    """The manifest's ``lexical`` entry after a write: a store whose passages (by their ids'
    digest) or analyzer differ from its lexical index's is indexed again from the passages
    Chroma holds; the others keep theirs. Comparing digests, not a list of what this run
    changed, also catches a run killed after its vector writes. Call it holding the writer
    lock, before the manifest is saved. A Chroma server keeps no lexical folders (see the
    module's docstring): returns {}. Stores in ``force`` are rebuilt whatever their state."""
    if stores.store.kind != "persistent":
        return {}
    force = set(force)
    refs: dict[str, LexicalRef] = {}
    for lang in stores.languages():
        old = stores.manifest.lexical.get(lang)
        digest = ids_digest(pid for pid, _, _ in stores.scan(lang))
        fresh = (old is not None and lang not in force and old.digest == digest
                 and old.analyzer == analyzer_for(lang).version
                 and unreadable(stores.index_dir, old) is None)
        refs[lang] = old if fresh and old is not None else \
            _build(stores, lang).save(stores.index_dir, overwrite=lang in force)
    return refs


def prune_lexical(index_dir: Path, refs: dict[str, LexicalRef]) -> int:
    """Remove lexical folders the manifest no longer names (after it was saved). Returns how many."""
    base = Path(index_dir) / LEXICAL_DIR
    if not base.is_dir():
        return 0
    keep = {r.folder for r in refs.values()}
    gone = 0
    for p in base.iterdir():
        if p.name not in keep:
            _clear(p)
            gone += 1
    return gone


def problem(stores: LanguageStores, lang: str) -> str | None:
    """Why the manifest's lexical index of ``lang`` cannot be trusted, or None."""
    ref = stores.manifest.lexical.get(lang)
    if ref is None:
        return f"store {lang!r} has no lexical index (built by an older xlrag, or a write was stopped)"
    current = analyzer_for(lang).version
    if ref.analyzer != current:
        return f"store {lang!r}'s lexical index was built with analyzer {ref.analyzer}; this xlrag uses {current}"
    count = stores.manifest.counts.get(lang)
    if count is not None and count != ref.passages:
        return f"store {lang!r}'s lexical index holds {ref.passages} passages, the store {count}"
    if not (stores.index_dir / LEXICAL_DIR / ref.folder).is_dir():
        return f"store {lang!r}'s lexical folder {LEXICAL_DIR}/{ref.folder} is missing"
    return None


def unusable(stores: LanguageStores, lang: str) -> str | None:
    """:func:`problem`, or why its files cannot be read: what ``check`` reports and ``check
    --repair`` rebuilds, what ``xlrag index`` never reuses."""
    why = problem(stores, lang)
    if why is None and (broken := unreadable(stores.index_dir, stores.manifest.lexical[lang])) is not None:
        why = f"store {lang!r}'s lexical index is unreadable ({broken[:160]})"
    return why


class LexicalStores:
    """The lexical indexes of one open index, loaded on first use and reloaded after writes."""

    def __init__(self, stores: LanguageStores):
        self.stores = stores
        # lang -> (key, index, why not, the manifest's version when it was read)
        self._cache: dict[str, tuple[Any, LexicalIndex | None, str | None, Any]] = {}
        self._lock = threading.Lock()

    def _key(self, lang: str) -> Any:
        m = self.stores.manifest
        ref = m.lexical.get(lang)
        if self.stores.store.kind != "persistent":
            return (m.updated, m.counts.get(lang))
        return (ref.folder, ref.analyzer) if ref is not None else None

    def index(self, lang: str) -> tuple[LexicalIndex | None, str | None]:
        """The store's lexical index, or None and the reason it cannot be used."""
        if not self.stores.complete:
            return None, "the lexical channel is off while the index is being written"
        key = self._key(lang)
        with self._lock:
            hit = self._cache.get(lang)
            # a folder that could not be read is tried again after any write: check --repair
            # rebuilds it under the same name, which a reader keyed on the name alone never sees
            if hit is not None and hit[0] == key and (hit[1] is not None or hit[3] == self.stores.manifest_version):
                return hit[1], hit[2]
            if self.stores.store.kind != "persistent":
                idx, why = _build(self.stores, lang), None
            elif (why := problem(self.stores, lang)) is not None:
                idx = None
            else:
                ref = self.stores.manifest.lexical[lang]
                try:
                    idx = LexicalIndex.load(self.stores.index_dir, lang, ref)
                except (OSError, ValueError) as e:
                    idx, why = None, f"store {lang!r}'s lexical index is unreadable ({str(e)[:160]})"
            if why is not None:
                why += "; searched dense-only: run 'xlrag check --repair' to rebuild it"
            self._cache[lang] = (key, idx, why, self.stores.manifest_version)
            return idx, why
