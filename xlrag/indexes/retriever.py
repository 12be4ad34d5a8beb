"""The composed cross-lingual retriever.

question → detect language → policy plans stores → each store searched by its channels
(dense: the embedder's vectors, each distinct query text embedded once; lexical: BM25 with
the store language's analyzer, a store in another language searched with the question's
translation) → channels fused inside each store → stores fused → read the chosen passages
→ rerank → one :class:`~xlrag.schema.Retrieval`.
"""

from __future__ import annotations

import asyncio
import time
import warnings
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar, get_args

import numpy as np

from xlrag.config import LexicalTranslation, RetrievalConfig, XlragConfig, parse_channels
from xlrag.detect import LanguageDetector, LinguaDetector, question_language
from xlrag.errors import ConfigError, EmbedderMismatchError, XlragError, XlragWarning
from xlrag.indexes import fusion as fusion_rules
from xlrag.indexes.embedders import Embedder, build_embedder
from xlrag.indexes.fusion import Fused, StoreChannels, fuse, fuse_channels, normaliser, select
from xlrag.indexes.lexical import LexicalDamageError, LexicalStores
from xlrag.indexes.named import named_stores
from xlrag.indexes.named import prefer as _prefer
from xlrag.indexes.names import NameTranslator, spellings, subjects_in
from xlrag.indexes.policies import RetrievalPlan, RetrievalPolicy, check_margin, make_policy
from xlrag.indexes.store import LanguageStores, StoreRanking
from xlrag.indexes.translate import Translator
from xlrag.modes import SHARE_MARGIN, IRMode
from xlrag.registry import create
from xlrag.schema import Channel, Hit, Passage, Query, Retrieval, make_query
from xlrag.validate import DEFAULT_K, DEFAULT_RETRIEVE_K, check_k, strict_kwargs

__all__ = ["CrossLingualRetriever"]

T = TypeVar("T")
R = TypeVar("R")


class CrossLingualRetriever:
    """Retrieve with any IR mode over language-tagged stores.

    ``k`` is the list's length when a call names none. ``retrieve_k`` is how many candidates
    a reranker chooses from: the pipeline asks for that many when one of its passage
    postprocessors (:mod:`xlrag.indexes.postprocess`) chooses; the retriever returns its
    fused ranking.
    """

    def __init__(
        self,
        stores: LanguageStores,
        embedder: Embedder,
        mode: RetrievalPolicy | str | None = None,
        *,
        k: int = DEFAULT_K,
        retrieve_k: int | None = None,
        fusion: str | None = None,
        detector: LanguageDetector | None = None,
        translator: Translator | None = None,
        max_workers: int = 8,
        channels: Sequence[Channel] | str | None = None,
        lexical_translation: LexicalTranslation | None = None,
        share_margin: float | None = SHARE_MARGIN,
    ):
        defaults = RetrievalConfig.model_fields  # one owner of the defaults: the config
        fusion = fusion or defaults["fusion"].default
        normaliser(fusion)  # an unknown name fails here, listing the registered ones
        self.channels = _channels(channels if channels is not None else defaults["channels"].default)
        self.lexical_translation: LexicalTranslation = (
            lexical_translation if lexical_translation is not None else defaults["lexical_translation"].default)
        if self.lexical_translation not in get_args(LexicalTranslation):
            raise ConfigError(f"unknown lexical_translation {str(lexical_translation)[:40]!r}; choose from: "
                              f"{', '.join(get_args(LexicalTranslation))}")
        if stores.manifest.embedder != embedder.name:
            raise EmbedderMismatchError(stores.index_dir, stores.manifest.embedder, stores.manifest.dim,
                                        embedder.name, embedder.dim)
        self.stores = stores
        self.embedder = embedder
        self.translator = translator
        self.share_margin = check_margin(share_margin)  # wrong here, not at the first balanced retrieval
        self.policy = self._policy(mode if mode is not None else defaults["mode"].default)
        self.k = check_k(k) or DEFAULT_K
        self.retrieve_k = max(check_k(retrieve_k, "retrieve_k") or DEFAULT_RETRIEVE_K, self.k)
        self.fusion = fusion
        self.detector = detector or LinguaDetector()
        self._pool = ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="xlrag-search")
        self.lexical = LexicalStores(stores)
        self._languages: tuple[int, list[str]] | None = None  # (stores generation, languages)

    @classmethod
    def from_settings(cls, stores: LanguageStores, embedder: Embedder, retrieval: RetrievalConfig, *,
                      translator: Translator | None = None) -> CrossLingualRetriever:
        """A retriever over stores already open, searched as ``retrieval:`` says (mode, k,
        retrieve_k, fusion, channels, lexical_translation, detect_candidates): how an eval run,
        a study and the demo build theirs (:func:`xlrag.evals.run_index.run_retriever`)."""
        r = retrieval
        return cls(stores, embedder, r.mode, k=r.k, retrieve_k=r.retrieve_k, fusion=r.fusion,
                   detector=LinguaDetector(r.detect_candidates), translator=translator, channels=r.channels,
                   lexical_translation=r.lexical_translation, share_margin=r.share_margin)

    @classmethod
    @strict_kwargs
    def from_config(
        cls,
        config: XlragConfig,
        index_dir: str | Path | None = None,
        *,
        embedder: Embedder | None = None,
        mode: RetrievalPolicy | str | None = None,
        k: int | None = None,
        retrieve_k: int | None = None,
        fusion: str | None = None,
        detector: LanguageDetector | None = None,
        translator: Translator | None = None,
        channels: Sequence[Channel] | str | None = None,
    ) -> CrossLingualRetriever:
        """A retriever over ``index_dir`` (default ``config.index_dir``); arguments beat the config."""
        embedder = embedder or build_embedder(config.embedder)
        stores = LanguageStores.open(index_dir or config.index_dir, embedder.name, embedder.dim, store=config.store)
        r = config.retrieval
        if translator is None:
            translator = create("translator", "llm", config.llm)
        return cls(
            stores,
            embedder,
            mode if mode is not None else r.mode,
            k=check_k(k) or r.k,
            retrieve_k=check_k(retrieve_k, "retrieve_k") or r.retrieve_k,
            fusion=fusion or r.fusion,
            detector=detector or LinguaDetector(r.detect_candidates),
            translator=translator,
            channels=channels if channels is not None else r.channels,
            lexical_translation=r.lexical_translation,
            share_margin=r.share_margin,
        )

    def _policy(self, policy: RetrievalPolicy | str) -> RetrievalPolicy:
        if isinstance(policy, str) and policy == IRMode.TRANSLATE:
            return make_policy(policy, translator=self.translator)
        if isinstance(policy, str) and policy == IRMode.BALANCED:
            return make_policy(policy, margin=self.share_margin)
        return make_policy(policy)

    @property
    def languages(self) -> list[str]:
        """The index's stores, listed again once another process has written to it."""
        self.stores.refresh()
        if self._languages is None or self._languages[0] != self.stores.generation:
            self._languages = (self.stores.generation, self.stores.languages())
        return self._languages[1]

    # -- steps ----------------------------------------------------------------------
    @strict_kwargs
    def prepare(self, query: str | Query, *, lang: str | None = None, relevant_langs: list[str] | None = None,
                target_lang: str | None = None, query_id: str | None = None) -> Query:
        """The query with its fields filled in and its language detected when not given."""
        fields = {"lang": lang, "relevant_langs": relevant_langs, "target_lang": target_lang, "id": query_id}
        given: dict[str, Any] = {k: v for k, v in fields.items() if v is not None}
        if isinstance(query, Query):
            q = query.model_copy(update=make_query(query.question, **given).model_dump(include=set(given))) if given \
                else query
        else:
            q = make_query(query, **given)
        if q.lang is None:
            q = q.model_copy(update={"lang": question_language(q.question, self.detector)})
        return q

    def _fit(self, text: str) -> str:
        """``text`` cut to the embedder's window, with a warning: a 50,000-character question
        embedded whole costs seconds and hundreds of MB, and the model reads 512 tokens anyway."""
        window = getattr(self.embedder, "window", None)
        count = getattr(self.embedder, "token_count", None)
        if not window or count is None or len(text) < window or count(text) <= window:
            return text
        lo, hi = 0, len(text)
        while lo < hi:  # longest prefix that fits
            mid = (lo + hi + 1) // 2
            if count(text[:mid]) <= window:
                lo = mid
            else:
                hi = mid - 1
        warnings.warn(f"the question is longer than the embedder's {window}-token window; "
                      f"only its first {lo} of {len(text)} characters are searched", XlragWarning, stacklevel=4)
        return text[:lo]

    def _embed_plan(self, plan: RetrievalPlan) -> dict[str, np.ndarray]:
        return self._embed_texts([s.text for s in plan.searches])

    def _map(self, fn: Callable[[T], R], items: Sequence[T]) -> list[R]:
        """``fn`` over ``items`` on the search pool (Chroma releases the GIL while it searches)."""
        if len(items) == 1:
            return [fn(items[0])]
        return [f.result() for f in [self._pool.submit(fn, x) for x in items]]

    def _fused(self, plan: RetrievalPlan, vectors: dict[str, np.ndarray], notes: list[str],
               named: frozenset[str] | None = frozenset()) -> list[Fused]:
        """The plan's merged list. Several stores: rank them all (ids and scores only), fuse,
        then read just the chosen passages, one call per store that has any: reading the text
        of every store's candidates cost more than the searches themselves. One store, or an
        index being written (ids may lose their text meanwhile): one full search per store,
        which drops deleted ids and asks deeper."""
        searches = plan.searches
        if len(searches) > 1 and self.stores.complete:
            rankings = self._map(lambda s: self.stores.rank(s.store, vectors[s.text], s.quota, s.text), searches)
            shares = _shares(plan, {r.store: r.scores[0] for r in rankings if r.scores}, notes, named)
            chosen = select(rankings, self.fusion, plan.k, shares, _prefer(plan, named))
            read = self._read_chosen(rankings, chosen)
            try:
                return [Fused(read[rankings[i].store][rankings[i].ids[r]], f, rankings[i].scores[r],
                              rankings[i].store, rankings[i].query_text, r + 1) for i, r, f in chosen]
            except KeyError:
                pass  # a chosen id was deleted since the ranking (a write ended): search afresh
        results = self._map(lambda s: self.stores.search(s.store, vectors[s.text], s.quota, s.text), searches)
        shares = _shares(plan, {r.store: r.scores[0] for r in results if r.scores}, notes, named)
        return fuse(results, self.fusion, plan.k, shares, _prefer(plan, named))

    def _read_chosen(self, rankings: Sequence[StoreChannels] | Sequence[StoreRanking],
                     chosen: Sequence[tuple[int, int, float]]) -> dict[str, dict[str, Passage]]:
        """The passages fusion chose, read in one call per store that has any (ids deleted since
        the ranking are left out: the caller searches again)."""
        wanted: dict[str, list[str]] = {}
        for i, r, _ in chosen:
            wanted.setdefault(rankings[i].store, []).append(rankings[i].ids[r])
        stores = list(wanted)
        return dict(zip(stores, self._map(lambda lang: self.stores.passages(lang, wanted[lang]), stores),
                        strict=True))

    def _lexical_text(self, q: Query, store: str, planned: str, notes: list[str]) -> str:
        """The text the lexical channel searches ``store`` with: the plan's own (a translation,
        in ``translate`` mode), else the question translated into the store's language."""
        if store == q.lang or planned != q.question or self.lexical_translation == "off":
            return planned
        translator = NameTranslator() if self.lexical_translation == "names" else self.translator
        if translator is None:
            notes.append(f"store {store!r} searched lexically with the question as asked: no translator "
                         "(pass translator=..., or set lexical_translation)")
            return planned
        try:
            return translator.translate(q.question, q.lang or "", store)
        except XlragError as e:
            notes.append(f"store {store!r} searched lexically with the question as asked: "
                         f"its translation failed ({str(e)[:120]})")
            return planned

    def _hybrid(self, q: Query, plan: RetrievalPlan, channels: list[Channel], seconds: dict[str, float],
                named: frozenset[str] | None) -> tuple[list[Fused], list[str], bool, dict[str, str]]:
        """Every planned store searched by its channels, fused inside each store, then across
        stores; only the chosen passages are read. Returns the fused list, notes, whether every
        wanted channel could search every store, and the translated lexical texts."""
        notes: list[str] = []
        complete = True
        searches = plan.searches
        lexical: dict[int, dict[str, float]] = {}
        texts: dict[str, str] = {}
        if "lexical" in channels:
            t0 = time.perf_counter()
            # Where the question names a country, a store's lexical evidence comes from the passages
            # that name it: otherwise a page about another country that shares the question's other
            # words ("credit card", "cash limit") outranks the one it asks about, and fusion lifts
            # it over the dense channel's first (benchmarks/languages.py, "subject" arms).
            places = subjects_in(q.question, q.lang) if q.lang else []
            for i, s in enumerate(searches):
                index, why = self.lexical.index(s.store)
                if index is None:
                    if why not in notes:
                        notes.append(why or "")
                    complete = False
                    continue
                t1 = time.perf_counter()
                text = self._lexical_text(q, s.store, s.text, notes)
                seconds["translate"] = seconds.get("translate", 0.0) + time.perf_counter() - t1
                try:
                    ranking = index.rank(text, s.quota, tie=fusion_rules.LEXICAL_TIE,
                                         spill=int(fusion_rules.LEXICAL_SPILL * s.quota),
                                         within=index.holding([n for c in places for n in spellings(c, s.store)]))
                except LexicalDamageError as e:
                    notes.append(str(e))
                    complete = False
                    continue
                if text != q.question:
                    texts[s.store] = text  # "" when nothing of the question carries over by name
                if not ranking.tokens:
                    if text == s.text:  # the question itself has no word to search with
                        notes.append(f"the question gives no lexical token in store {s.store!r}: "
                                     "searched dense-only")
                    elif "dense" not in channels:  # asked for words only: say why meaning stepped in
                        notes.append(f"store {s.store!r} searched by meaning: the question names nothing the "
                                     "lexical channel can carry into its language")
                    continue
                lexical[i] = dict(zip(ranking.ids, ranking.scores, strict=True))
            seconds["lexical"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        need = [i for i in range(len(searches)) if "dense" in channels or i not in lexical]
        vectors = self._embed_texts([searches[i].text for i in need])
        rankings = self._map(lambda i: self.stores.rank(searches[i].store, vectors[searches[i].text],
                                                        searches[i].quota, searches[i].text), need)
        dense = {i: dict(zip(r.ids, r.scores, strict=True)) for i, r in zip(need, rankings, strict=True)}
        hybrid = len(channels) > 1
        per_store: list[StoreChannels] = [
            fuse_channels(s.store, texts.get(s.store, s.text), dense.get(i, {}), lexical.get(i, {}), s.quota, hybrid)
            for i, s in enumerate(searches)]
        # dense scores only: BM25's are per store, and a lone lexical channel cannot weigh stores
        best = {sc.store: max(sc.dense.values()) for sc in per_store if sc.dense} if "dense" in channels else {}
        chosen = select(per_store, self.fusion, plan.k, _shares(plan, best, notes, named), _prefer(plan, named))
        read = self._read_chosen(per_store, chosen)
        out: list[Fused] = []
        for i, r, f in chosen:
            sc = per_store[i]
            pid = sc.ids[r]
            passage = read[sc.store].get(pid)
            if passage is None:  # deleted by a write that ended after the ranking
                notes.append("the index changed during the search: searched again, dense-only")
                return self._fused(plan, self._embed_plan(plan), notes, named), notes, False, texts
            d, lx = sc.dense.get(pid), sc.lexical.get(pid)
            out.append(Fused(passage, f, d if d is not None else lx or 0.0, sc.store, searches[i].text, r + 1,
                             tuple(c for c, v in (("dense", d), ("lexical", lx)) if v is not None), d, lx))
        seconds["search"] = time.perf_counter() - t0
        return out, notes, complete, texts

    def named_stores(self, q: Query, plan: RetrievalPlan) -> frozenset[str] | None:
        """The planned stores that hold a place the question names (:func:`xlrag.indexes.named.named_stores`)."""
        return named_stores(self.lexical, q, plan)

    def _embed_texts(self, texts: Sequence[str]) -> dict[str, np.ndarray]:
        unique = list(dict.fromkeys(texts))
        if not unique:
            return {}
        return dict(zip(unique, self.embedder.embed([self._fit(t) for t in unique], "query"), strict=True))

    def _run(self, q: Query, plan: RetrievalPlan, k: int, channels: list[Channel]) -> Retrieval:
        """The plan carried out: searched and fused."""
        seconds: dict[str, float] = {}
        notes, complete = list(plan.notes), self.stores.complete
        texts: dict[str, str] = {}
        if q.unknown_lang:
            notes.insert(0, f"{q.unknown_lang!r} names no language xlrag knows: the question's language was "
                            f"detected as {q.lang!r}")
        fused: list[Fused] = []
        if plan.searches:
            named = self.named_stores(q, plan)
            if "lexical" in channels and self.stores.complete:
                fused, more, ok, texts = self._hybrid(q, plan, channels, seconds, named)
                notes += more
                complete = complete and ok
            else:
                if "lexical" in channels:
                    notes.append("the lexical channel is off while the index is being written: searched dense-only")
                t0 = time.perf_counter()
                fused = self._fused(plan, self._embed_plan(plan), notes, named)
                seconds["search"] = time.perf_counter() - t0
        return self._result(q, plan, fused, k, channels, notes, complete, texts, seconds)

    def _result(self, query: Query, plan: RetrievalPlan, fused: Sequence[Fused], k: int, channels: list[Channel],
                notes: list[str], complete: bool, texts: dict[str, str], seconds: dict[str, float]) -> Retrieval:
        hits: list[Hit] = [
            Hit(passage=f.passage, score=f.score, raw_score=f.raw_score, rank=i, store=f.store,
                mode=plan.policy, query_text=f.query_text, channels=list(f.channels),
                dense_score=f.dense_score if f.dense_score is not None else
                (f.raw_score if "dense" in f.channels else None),
                lexical_score=f.lexical_score, fused_score=f.score, lexical_text=texts.get(f.store))
            for i, f in enumerate(fused, 1)
        ]
        if plan.searches and not hits and not notes:
            notes.append("the searched stores returned no passages")
        return Retrieval(query=query, mode=plan.policy, hits=hits, stores=[s.store for s in plan.searches],
                         channels=channels, lexical_texts=texts, notes=list(dict.fromkeys(notes)),
                         complete=complete, seconds={key: round(v, 4) for key, v in seconds.items()})

    def _resolve(self, query: str | Query, mode: str | RetrievalPolicy | None,
                 k: int | None) -> tuple[Query, RetrievalPolicy, int]:
        q = self.prepare(query)
        policy = self._policy(mode) if mode is not None else self.policy
        return q, policy, check_k(k) or self.k

    # -- public API ---------------------------------------------------------------------
    @strict_kwargs
    def retrieve(self, query: str | Query, *, mode: str | RetrievalPolicy | None = None, k: int | None = None,
                 channels: Sequence[Channel] | str | None = None) -> Retrieval:
        """The :class:`~xlrag.schema.Retrieval` for ``query``: one :class:`~xlrag.schema.Query`
        carries what the modes need (``make_query(question, lang="ar", relevant_langs=[...])``;
        ``rel_langs`` reads ``relevant_langs``, ``swap_docs`` and ``oracle_lang`` read
        ``target_lang``), or a bare question whose language is detected. ``mode``, ``k`` and
        ``channels`` override the retriever's own for this call."""
        q, policy, k = self._resolve(query, mode, k)
        plan = policy.plan(q, q.lang or "", self.languages, k)
        return self._run(q, plan, k, _channels(channels) if channels is not None else self.channels)

    @strict_kwargs
    async def aretrieve(self, query: str | Query, *, mode: str | RetrievalPolicy | None = None,
                        k: int | None = None, channels: Sequence[Channel] | str | None = None) -> Retrieval:
        """Async :meth:`retrieve`: detection, translation, embedding, searches and reranking run
        in a worker thread, so the event loop is never blocked."""
        chosen = _channels(channels) if channels is not None else self.channels
        q, policy, n = await asyncio.to_thread(self._resolve, query, mode, k)
        plan = await asyncio.to_thread(policy.plan, q, q.lang or "", self.languages, n)
        return await asyncio.to_thread(self._run, q, plan, n, chosen)

    def translates(self, mode: str | RetrievalPolicy | None = None,
                   channels: Sequence[Channel] | str | None = None) -> bool:
        """Whether a retrieval with ``mode`` and ``channels`` may call the translator (an LLM),
        so that a server queues it for a generation slot."""
        name = getattr(mode, "name", mode) or self.policy.name
        chosen = _channels(channels) if channels is not None else self.channels
        one_store = name in (IRMode.QLANG, IRMode.NO_IR)  # only the question's own language: nothing to translate
        return name == IRMode.TRANSLATE or (not one_store and "lexical" in chosen
                                            and self.lexical_translation == "llm" and self.translator is not None)

    def close(self) -> None:
        self._pool.shutdown(wait=False)


def _shares(plan: RetrievalPlan, best: dict[str, float], notes: list[str],
            named: frozenset[str] | None = frozenset()) -> dict[str, int] | None:
    """The plan's shares, gated on each store's best score and the places it names
    (:meth:`RetrievalPlan.gated_shares`); the reason for each store left out goes to ``notes``."""
    shares, why = plan.gated_shares(best, named)
    notes.extend(why)
    return shares


def _channels(channels: Sequence[str] | str) -> list[Channel]:
    try:
        return parse_channels(channels if isinstance(channels, str) else list(channels))
    except ValueError as e:
        raise ConfigError(str(e)) from None

