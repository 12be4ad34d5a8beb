"""The lexical channel: one BM25 index per language store, built with that language's analyzer.

A store holds one language, so its lexical index can use that language's analyzer
(:mod:`xlrag.indexes.analyzers`: ICU word breaks, Snowball stems, Arabic normalisation)
where one index over a mixed corpus could only use a generic one. Scoring is bm25s
(sparse-matrix BM25, Lucene's variant), never a hand-written scorer.

Each store's index is a folder named after what it was built from
(:mod:`xlrag.indexes.lexical_files`), under :func:`lexical_base`: ``index_dir/lexical`` for
local Chroma files; for a Chroma server (``store.kind: http``), ``store.lexical_dir/<index
name>``, a folder every client can read (NFS, a mounted bucket), since the server has no
place for them and a folder beside one client is seen by no other. The manifest's ``lexical``
entry names each folder; a server's manifest lives on the server (:mod:`xlrag.indexes.chroma`),
so every client reads the same names. A write builds new folders first, once, and rewrites
the manifest last, so a killed run leaves the old folder, still named by the manifest, and
readers see either the old pair or the new one, never half of each. Readers open the folder
the manifest names memory-mapped: their start-up reads the vocabulary and a few checks, not
the passages. Folders no manifest names are removed by the next write (a server's keep the
previous write's too, for clients that read the manifest a moment before it).

A reader trusts a lexical index only when the manifest names it, its analyzer is this
xlrag's, and it holds as many passages as the store: anything else is reported (the
retriever searches that store dense-only, flags the result incomplete and says why) and
``xlrag check`` finds it by comparing ids, ``check --repair`` rebuilds it. A reader never
opens a folder the manifest does not name, and never builds one itself, with one exception:
a server whose writers set no ``store.lexical_dir``, where each client builds its lexical
indexes in memory from the server's passages on first use and after every write (the way
before ``lexical_dir``; a cost that grows with the corpus).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel

from xlrag.errors import IndexDirError
from xlrag.indexes.analyzers import analyzer_for
from xlrag.indexes.lexical_files import (
    folder_name,
    ids_digest,
    prune_folders,
    read_folder,
    write_folder,
)
from xlrag.indexes.store import LEXICAL_FOLDER, LanguageStores, LexicalRef

__all__ = ["LEXICAL_DIR", "LexicalDamageError", "LexicalIndex", "LexicalRanking", "LexicalRef", "LexicalStores",
           "built_in_memory", "ids_digest", "lexical_base", "problem", "prune_lexical", "require_lexical_dir",
           "sync_lexical",
           "unreadable", "unusable"]

LEXICAL_DIR = LEXICAL_FOLDER  # the folder under a local index that holds the lexical indexes
_DENSE_ONLY = "; searched dense-only: run 'xlrag check --repair' to rebuild it"


class LexicalDamageError(ValueError):
    """A lexical index whose files passed the opening checks and failed a query (a damaged score
    array of the right size); its message is the retriever's note."""


class LexicalRanking(BaseModel):
    """One store's BM25 ranking: ids and scores, best first (only passages sharing a token)."""

    store: str
    query_text: str
    tokens: list[str]
    ids: list[str]
    scores: list[float]


class LexicalIndex:
    """BM25 over one store's passages."""

    def __init__(self, lang: str, ids: Sequence[str], bm25: Any, analyzer: str, empty: int):
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

    def save(self, base: Path, overwrite: bool = False) -> LexicalRef:
        """Write under ``base`` (:func:`lexical_base`) as :func:`~xlrag.indexes.lexical_files.write_folder`
        does. A readable folder of that name is kept (the same ids and analyzer) unless
        ``overwrite`` (``check --repair`` of a damaged one)."""
        digest = ids_digest(self.ids)
        ref = LexicalRef(analyzer=self.analyzer, digest=digest, passages=len(self.ids), empty=self.empty,
                         folder=folder_name(self.lang, digest, self.analyzer))
        if overwrite or unreadable(base, ref) is not None:
            write_folder(base, ref.folder, self.bm25, self.ids, ref)
        return ref

    @classmethod
    def load(cls, base: Path, lang: str, ref: LexicalRef, *, mmap: bool = True, verify: bool = False) -> LexicalIndex:
        """The folder ``ref`` names under ``base``, memory-mapped unless ``mmap`` is False, with the
        opening checks (``verify``: the full ones, which read the whole folder). :class:`FileNotFoundError`
        when it is missing; :class:`ValueError` when it cannot be read for any other reason (a
        truncated array, a file of another store, an unknown parameter, a file where a folder
        should be...)."""
        if not (base / ref.folder).is_dir():
            raise FileNotFoundError(f"lexical folder {ref.folder} is missing")
        try:
            ids, bm25 = read_folder(base, ref, mmap=mmap, verify=verify)
        except Exception as e:  # numpy, json and bm25s raise what they like on damaged files
            raise ValueError(f"lexical folder {ref.folder} is unreadable: {type(e).__name__}: {str(e)[:120]}") from e
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
                mask &= self._scores(terms) > 0 if terms else False
                if not mask.any():
                    break
            held |= mask
        return held if held.any() else None

    def _scores(self, terms: list[str]) -> np.ndarray:
        """BM25 of every passage for ``terms`` (known to the vocabulary); a damaged array is a
        :class:`LexicalDamageError`."""
        try:
            scores = self.bm25.get_scores(terms)
            if len(scores) != len(self.ids):
                raise ValueError(f"it scored {len(scores)} passages, its ids list {len(self.ids)}")
        except (IndexError, ValueError) as e:
            # opening does not read the score arrays whole (:mod:`xlrag.indexes.lexical_files`)
            raise LexicalDamageError(f"store {self.lang!r}'s lexical index is unreadable "
                                     f"({type(e).__name__}: {str(e)[:120]}){_DENSE_ONLY}") from e
        return scores

    def rank(self, text: str, n: int, tie: float = 0.0, *, spill: int = 0,
             within: np.ndarray | None = None) -> LexicalRanking:
        """The ``n`` best passages for ``text``. Where passages tied with the ``n``-th (within
        ``tie`` times the best score) run past the cut, the cut would pick some of them by their
        position in the store, and fusion would take that pick for evidence: the whole tie is
        kept when it ends within ``spill`` passages past the cut (each shares the tie's rank in
        fusion, :func:`xlrag.indexes.fusion.tier_ranks`), and left out when it runs further (a
        template's words, shared by every page). Only passages sharing a token with ``text``
        score. ``within`` (a mask from :meth:`holding`) then drops the passages outside it: it
        only takes evidence away, so a passage that shares little but the name with ``text`` is
        not lifted into the cut (lifting them cost XQuAD's Chinese two questions of 95 and
        Travel nothing: docs/explanation/languages.md)."""
        tokens = analyzer_for(self.lang).tokens(text)
        known = [t for t in tokens if self.bm25 is not None and t in self.bm25.vocab_dict]
        if not known or n <= 0:
            return LexicalRanking(store=self.lang, query_text=text, tokens=tokens, ids=[], scores=[])
        scores = self._scores(known)
        positive = int(np.count_nonzero(scores > 0))
        n = min(n, positive)
        if n == 0:
            return LexicalRanking(store=self.lang, query_text=text, tokens=tokens, ids=[], scores=[])
        m = n + max(spill, 0)  # the most a tie at the cut may keep
        top = np.argpartition(-scores, min(m, positive - 1))[:min(m + 1, positive)]
        # ties broken by position in the store: stable across runs
        top = top[np.lexsort((top, -scores[top]))]
        band = tie * scores[top[0]]
        floor = scores[top[n - 1]] - band
        if len(top) > n and scores[top[n]] >= floor:  # the tie runs past the cut
            # top is sorted and holds at most m + 1: the tie ends within the spill when the
            # passages at or above the floor are at most m
            tied = int(np.count_nonzero(scores[top] >= floor))
            if tied <= m:
                top = top[:tied]
            else:
                top = top[:n][scores[top[:n]] > scores[top[n - 1]] + band]
        else:
            top = top[:n]
        if within is not None:
            top = top[within[top]]
        return LexicalRanking(store=self.lang, query_text=text, tokens=tokens,
                              ids=[self.ids[i] for i in top], scores=[float(scores[i]) for i in top])


def lexical_base(stores: LanguageStores) -> Path | None:
    """The folder holding the index's lexical folders, or None for a Chroma server without
    ``store.lexical_dir`` (its clients build them in memory)."""
    if stores.store.kind == "persistent":
        return stores.index_dir / LEXICAL_DIR
    if stores.store.lexical_dir is None:
        return None
    # one server can hold several indexes, and each write prunes what its manifest does not name
    return Path(stores.store.lexical_dir).expanduser().resolve() / stores.backend.name


def require_lexical_dir(stores: LanguageStores) -> None:
    """Refuse a write that could not keep the index's lexical indexes where its clients read
    them: before anything is written."""
    if stores.store.kind == "persistent":
        return
    shared = stores.store.lexical_dir
    if shared is None and stores.manifest.lexical:
        raise IndexDirError(
            f"index {stores.backend.name!r} on {stores.backend.where} keeps its lexical indexes in a shared folder "
            f"and this writer sets no store.lexical_dir; set it to that folder (XLRAG_STORE__LEXICAL_DIR)")
    if shared is not None and not Path(shared).expanduser().is_dir():
        raise IndexDirError(
            f"store.lexical_dir {shared} is not a folder; mount the folder the index's clients share there "
            f"(or create it), or fix store.lexical_dir")


def unreadable(base: Path, ref: LexicalRef) -> str | None:
    """Why the folder ``ref`` names under ``base`` cannot be used, or None: every check, the
    whole folder read (memory-mapped)."""
    try:
        LexicalIndex.load(base, "", ref, verify=True)
    except (OSError, ValueError) as e:
        return str(e)
    return None


def _build(stores: LanguageStores, lang: str) -> LexicalIndex:
    rows = [(pid, text or "") for pid, text, _ in stores.scan(lang, texts=True)]
    return LexicalIndex.build(lang, rows)


def sync_lexical(stores: LanguageStores, force: Iterable[str] = ()) -> dict[str, LexicalRef]:
    """The manifest's ``lexical`` entry after a write: a store whose passages (by their ids'
    digest) or analyzer differ from its lexical index's is indexed again from the passages
    Chroma holds; the others keep theirs. Comparing digests, not a list of what this run
    changed, also catches a run killed after its vector writes. Call it holding the writer
    lock, before the manifest is saved. A Chroma server without ``store.lexical_dir`` keeps no
    lexical folders (see the module's docstring): returns {}. Stores in ``force`` are rebuilt
    whatever their state."""
    base = lexical_base(stores)
    if base is None:
        require_lexical_dir(stores)
        return {}
    force = set(force)
    refs: dict[str, LexicalRef] = {}
    for lang in stores.languages():
        old = stores.manifest.lexical.get(lang)
        digest = ids_digest(pid for pid, _, _ in stores.scan(lang))
        fresh = (old is not None and lang not in force and old.digest == digest
                 and old.analyzer == analyzer_for(lang).version
                 and unreadable(base, old) is None)
        refs[lang] = old if fresh and old is not None else _build(stores, lang).save(base, overwrite=lang in force)
    return refs


def prune_lexical(stores: LanguageStores, refs: dict[str, LexicalRef], before: dict[str, LexicalRef]) -> int:
    """Remove lexical folders the manifest no longer names (after it was saved); a server's keep
    those of ``before``, the manifest this write replaced: a client that read it a moment ago
    still finds its folders. Returns how many."""
    base = lexical_base(stores)
    if base is None:
        return 0
    keep = {r.folder for r in refs.values()}
    if stores.store.kind != "persistent":
        keep |= {r.folder for r in before.values()}
    return prune_folders(base, keep)


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
    base = lexical_base(stores)
    if base is None:
        return (f"store {lang!r}'s lexical index is in the index's shared folder and this client sets no "
                f"store.lexical_dir: set it to the folder the index's writer uses")
    if not (base / ref.folder).is_dir():
        if stores.store.kind == "persistent":
            return f"store {lang!r}'s lexical folder {LEXICAL_DIR}/{ref.folder} is missing"
        return (f"store {lang!r}'s lexical folder {ref.folder} is missing from store.lexical_dir "
                f"(not mounted here, or another folder than the writer's)")
    return None


def unusable(stores: LanguageStores, lang: str) -> str | None:
    """:func:`problem`, or why its files cannot be read: what ``check`` reports and ``check
    --repair`` rebuilds, what ``xlrag index`` never reuses."""
    why = problem(stores, lang)
    base = lexical_base(stores)
    if why is None and base is not None and (broken := unreadable(base, stores.manifest.lexical[lang])) is not None:
        why = f"store {lang!r}'s lexical index is unreadable ({broken[:160]})"
    return why


def built_in_memory(stores: LanguageStores) -> bool:
    """A Chroma server whose writers keep no lexical folders: each client builds its own."""
    return lexical_base(stores) is None and not stores.manifest.lexical


class LexicalStores:
    """The lexical indexes of one open index, opened on first use and again after writes."""

    def __init__(self, stores: LanguageStores):
        self.stores = stores
        # lang -> (key, index, why not, the manifest's version when it was read)
        self._cache: dict[str, tuple[Any, LexicalIndex | None, str | None, Any]] = {}
        self._lock = threading.Lock()

    def _key(self, lang: str) -> Any:
        m = self.stores.manifest
        if built_in_memory(self.stores):
            return (m.updated, m.counts.get(lang))
        ref = m.lexical.get(lang)
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
            idx: LexicalIndex | None = None
            if built_in_memory(self.stores):
                idx, why = _build(self.stores, lang), None
            elif (why := problem(self.stores, lang)) is None and (base := lexical_base(self.stores)) is not None:
                try:
                    idx = LexicalIndex.load(base, lang, self.stores.manifest.lexical[lang])
                except (OSError, ValueError) as e:
                    why = f"store {lang!r}'s lexical index is unreadable ({str(e)[:160]})"
            if why is not None:
                why += _DENSE_ONLY
            self._cache[lang] = (key, idx, why, self.stores.manifest_version)
            return idx, why
