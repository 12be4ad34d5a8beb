"""The composed cross-lingual retriever.

question → detect language → policy plans stores → embed each distinct query
text once → rank the stores concurrently (ids and scores) → fuse → read the chosen
passages → rerank → hits.
"""

from __future__ import annotations

import asyncio
import warnings
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from xlrag.config import XlragConfig
from xlrag.detect import LanguageDetector, LinguaDetector, question_language
from xlrag.errors import XlragWarning
from xlrag.indexes.embedders import Embedder, build_embedder
from xlrag.indexes.fusion import Fused, fuse, normaliser, select
from xlrag.indexes.policies import RetrievalPlan, RetrievalPolicy, make_policy
from xlrag.indexes.rerank import NoRerank, Reranker, build_reranker
from xlrag.indexes.store import LanguageStores
from xlrag.indexes.translate import Translator
from xlrag.schema import Hit, Query, make_query
from xlrag.validate import check_k, renamed, strict_kwargs

__all__ = ["CrossLingualRetriever", "RetrievalResult"]

T = TypeVar("T")
R = TypeVar("R")


class RetrievalResult(list[Hit]):
    """The hits, best first, plus what the caller must know to trust them.

    ``complete`` is False while the index is half-built (a build running or killed);
    ``notes`` say why a wanted store was not searched (e.g. no store for the asked
    language), so an empty or short list is never silent.
    """

    def __init__(self, hits: Sequence[Hit] = (), *, complete: bool = True, notes: Sequence[str] = (),
                 query: Query | None = None):
        super().__init__(hits)
        self.complete = complete
        self.notes = list(notes)
        self.query = query


class CrossLingualRetriever:
    """Retrieve with any IR mode over language-tagged stores.

    ``k`` is the final list length; with a real reranker, ``retrieve_k``
    candidates are fetched first and reranked down to ``k``.
    """

    def __init__(
        self,
        stores: LanguageStores,
        embedder: Embedder,
        policy: RetrievalPolicy | str = "qlang_en",
        *,
        k: int = 5,
        retrieve_k: int | None = None,
        fusion: str = "zscore",
        reranker: Reranker | None = None,
        detector: LanguageDetector | None = None,
        translator: Translator | None = None,
        max_workers: int = 8,
        k_retrieve: int | None = None,
    ):
        retrieve_k = renamed("CrossLingualRetriever", "k_retrieve", "retrieve_k", k_retrieve, retrieve_k)
        normaliser(fusion)  # an unknown name fails here, listing the registered ones
        if stores.manifest.embedder != embedder.name:
            from xlrag.errors import EmbedderMismatchError

            raise EmbedderMismatchError(stores.index_dir, stores.manifest.embedder, stores.manifest.dim,
                                        embedder.name, embedder.dim)
        self.stores = stores
        self.embedder = embedder
        self.translator = translator
        self.policy = self._policy(policy)
        self.k = check_k(k) or 5
        self.retrieve_k = max(check_k(retrieve_k, "retrieve_k") or 20, self.k)
        self.fusion = fusion
        self.reranker = reranker or NoRerank()
        self.detector = detector or LinguaDetector()
        self._pool = ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="xlrag-search")
        self._languages: tuple[int, list[str]] | None = None  # (stores generation, languages)

    @classmethod
    @strict_kwargs
    def from_config(
        cls,
        config: XlragConfig,
        index_dir: str | Path | None = None,
        *,
        embedder: Embedder | None = None,
        policy: RetrievalPolicy | str | None = None,
        k: int | None = None,
        retrieve_k: int | None = None,
        fusion: str | None = None,
        reranker: Reranker | None = None,
        detector: LanguageDetector | None = None,
        translator: Translator | None = None,
        k_retrieve: int | None = None,
    ) -> CrossLingualRetriever:
        """A retriever over ``index_dir`` (default ``config.index_dir``); arguments beat the config.
        ``k_retrieve`` is ``retrieve_k``'s old name (accepted with a warning for one release)."""
        retrieve_k = renamed("CrossLingualRetriever.from_config", "k_retrieve", "retrieve_k", k_retrieve, retrieve_k)
        embedder = embedder or build_embedder(config.embedder)
        stores = LanguageStores.open(index_dir or config.index_dir, embedder.name, embedder.dim, store=config.store)
        r = config.retrieval
        if translator is None:
            from xlrag.registry import create

            translator = create("translator", "llm", config.llm)
        return cls(
            stores,
            embedder,
            policy if policy is not None else r.mode,
            k=check_k(k) or r.k,
            retrieve_k=check_k(retrieve_k, "retrieve_k") or r.retrieve_k,
            fusion=fusion or r.fusion,
            reranker=reranker or build_reranker(config.rerank),
            detector=detector or LinguaDetector(r.detect_candidates),
            translator=translator,
        )

    def _policy(self, policy: RetrievalPolicy | str) -> RetrievalPolicy:
        if isinstance(policy, str) and policy == "translate":
            return make_policy(policy, translator=self.translator)
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
        given = {k: v for k, v in fields.items() if v is not None}
        if isinstance(query, Query):
            q = query.model_copy(update=make_query(query.text, **given).model_dump(include=set(given))) if given \
                else query
        else:
            q = make_query(query, **given)
        if q.lang is None:
            q = q.model_copy(update={"lang": question_language(q.text, self.detector)})
        return q

    def _fetch_k(self, k: int | None = None) -> int:
        k = k or self.k
        # With no reranker, fetching more than k only to cut it off is wasted work.
        return k if isinstance(self.reranker, NoRerank) else max(self.retrieve_k, k)

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
        texts = list(dict.fromkeys(s.text for s in plan.searches))
        if not texts:
            return {}
        vecs = self.embedder.embed([self._fit(t) for t in texts], "query")
        return dict(zip(texts, vecs, strict=True))

    def _map(self, fn: Callable[[T], R], items: Sequence[T]) -> list[R]:
        """``fn`` over ``items`` on the search pool (Chroma releases the GIL while it searches)."""
        if len(items) == 1:
            return [fn(items[0])]
        return [f.result() for f in [self._pool.submit(fn, x) for x in items]]

    def _fused(self, plan: RetrievalPlan, vectors: dict[str, np.ndarray]) -> list[Fused]:
        """The plan's merged list. Several stores: rank them all (ids and scores only), fuse,
        then read just the chosen passages, one call per store that has any: reading the text
        of every store's candidates cost more than the searches themselves. One store, or an
        index being written (ids may lose their text meanwhile): one full search per store,
        which drops deleted ids and asks deeper."""
        searches = plan.searches
        if len(searches) > 1 and self.stores.complete:
            rankings = self._map(lambda s: self.stores.rank(s.store, vectors[s.text], s.quota, s.text), searches)
            chosen = select(rankings, self.fusion, plan.k, plan.shares)
            wanted: dict[str, list[str]] = {}
            for i, r, _ in chosen:
                wanted.setdefault(rankings[i].store, []).append(rankings[i].ids[r])
            stores = list(wanted)
            read = dict(zip(stores, self._map(lambda lang: self.stores.passages(lang, wanted[lang]), stores),
                            strict=True))
            try:
                return [Fused(read[rankings[i].store][rankings[i].ids[r]], f, rankings[i].scores[r],
                              rankings[i].store, rankings[i].query_text, r + 1) for i, r, f in chosen]
            except KeyError:
                pass  # a chosen id was deleted since the ranking (a write ended): search afresh
        results = self._map(lambda s: self.stores.search(s.store, vectors[s.text], s.quota, s.text), searches)
        return fuse(results, self.fusion, plan.k, plan.shares)

    def _result(self, query: Query, plan: RetrievalPlan, fused: Sequence[Fused], k: int) -> RetrievalResult:
        hits: list[Hit] = [
            Hit(passage=f.passage, score=f.score, raw_score=f.raw_score, rank=i, store=f.store,
                policy=plan.policy, query_text=f.query_text)
            for i, f in enumerate(fused, 1)
        ]
        if plan.searches:
            hits = self.reranker.rerank(query.text, hits, k)
        notes = list(plan.notes)
        if plan.searches and not hits and not notes:
            notes.append("the searched stores returned no passages")
        return RetrievalResult(hits, complete=self.stores.complete, notes=notes, query=query)

    def _resolve(self, query: str | Query, mode: str | RetrievalPolicy | None, k: int | None,
                 fields: dict[str, Any]) -> tuple[Query, RetrievalPolicy, int]:
        q = self.prepare(query, **fields)
        policy = self._policy(mode) if mode is not None else self.policy
        return q, policy, check_k(k) or self.k

    # -- public API ---------------------------------------------------------------------
    @strict_kwargs
    def retrieve(self, query: str | Query, *, mode: str | RetrievalPolicy | None = None, k: int | None = None,
                 lang: str | None = None, relevant_langs: list[str] | None = None, target_lang: str | None = None,
                 query_id: str | None = None) -> RetrievalResult:
        """Hits for ``query``; the query fields feed the modes that need them (``rel_langs``
        takes ``relevant_langs``, ``swap_docs`` and ``oracle_lang`` take ``target_lang``)."""
        fields = {"lang": lang, "relevant_langs": relevant_langs, "target_lang": target_lang, "query_id": query_id}
        q, policy, k = self._resolve(query, mode, k, fields)
        plan = policy.plan(q, q.lang or "", self.languages, self._fetch_k(k))
        if not plan.searches:
            return self._result(q, plan, [], k)
        return self._result(q, plan, self._fused(plan, self._embed_plan(plan)), k)

    @strict_kwargs
    async def aretrieve(self, query: str | Query, *, mode: str | RetrievalPolicy | None = None,
                        k: int | None = None, lang: str | None = None, relevant_langs: list[str] | None = None,
                        target_lang: str | None = None, query_id: str | None = None) -> RetrievalResult:
        """Async :meth:`retrieve`: detection, translation, embedding and store searches all
        run in worker threads, so the event loop is never blocked."""
        fields = {"lang": lang, "relevant_langs": relevant_langs, "target_lang": target_lang, "query_id": query_id}
        q, policy, k = await asyncio.to_thread(self._resolve, query, mode, k, fields)
        plan = await asyncio.to_thread(policy.plan, q, q.lang or "", self.languages, self._fetch_k(k))
        if not plan.searches:
            return self._result(q, plan, [], k)
        vectors = await asyncio.to_thread(self._embed_plan, plan)
        fused = await asyncio.to_thread(self._fused, plan, vectors)
        return await asyncio.to_thread(self._result, q, plan, fused, k)

    def close(self) -> None:
        self._pool.shutdown(wait=False)
