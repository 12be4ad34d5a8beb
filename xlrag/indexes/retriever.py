"""The composed cross-lingual retriever.

question → detect language → policy plans stores → embed each distinct query
text once → search the stores concurrently → fuse → rerank → hits.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from xlrag.config import XlragConfig
from xlrag.detect import LanguageDetector, LinguaDetector
from xlrag.errors import PolicyError
from xlrag.indexes.embedders import Embedder, build_embedder
from xlrag.indexes.fusion import FUSIONS, fuse
from xlrag.indexes.policies import RetrievalPlan, RetrievalPolicy, make_policy
from xlrag.indexes.rerank import NoRerank, Reranker, build_reranker
from xlrag.indexes.store import LanguageStores, StoreResult
from xlrag.indexes.translate import Translator
from xlrag.schema import Hit, Query, make_query

__all__ = ["CrossLingualRetriever"]


class CrossLingualRetriever:
    """Retrieve with any IR mode over language-tagged stores.

    ``k`` is the final list length; with a real reranker, ``k_retrieve``
    candidates are fetched first and reranked down to ``k``.
    """

    def __init__(
        self,
        stores: LanguageStores,
        embedder: Embedder,
        policy: RetrievalPolicy | str = "qlang_en",
        *,
        k: int = 5,
        k_retrieve: int = 20,
        fusion: str = "zscore",
        reranker: Reranker | None = None,
        detector: LanguageDetector | None = None,
        translator: Translator | None = None,
        max_workers: int = 8,
    ):
        if fusion not in FUSIONS:
            raise PolicyError(f"unknown fusion {fusion!r}; choose one of: {', '.join(FUSIONS)}")
        if stores.manifest.embedder != embedder.name:
            from xlrag.errors import EmbedderMismatchError

            raise EmbedderMismatchError(stores.index_dir, stores.manifest.embedder, stores.manifest.dim,
                                        embedder.name, embedder.dim)
        self.stores = stores
        self.embedder = embedder
        self.translator = translator
        self.policy = self._policy(policy)
        self.k = k
        self.k_retrieve = max(k_retrieve, k)
        self.fusion = fusion
        self.reranker = reranker or NoRerank()
        self.detector = detector or LinguaDetector()
        self._pool = ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="xlrag-search")
        self._languages: list[str] | None = None

    @classmethod
    def from_config(cls, config: XlragConfig, index_dir: str | Path | None = None, **kwargs: Any) -> CrossLingualRetriever:
        embedder = kwargs.pop("embedder", None) or build_embedder(config.embedder)
        stores = LanguageStores.open(index_dir or config.index_dir, embedder.name, embedder.dim, store=config.store)
        r = config.retrieval
        detector = kwargs.pop("detector", None) or LinguaDetector(r.detect_candidates)
        if kwargs.get("translator") is None:
            from xlrag.registry import create

            kwargs["translator"] = create("translator", "llm", config.llm)
        return cls(
            stores,
            embedder,
            kwargs.pop("policy", r.mode),
            k=kwargs.pop("k", r.k),
            k_retrieve=kwargs.pop("k_retrieve", r.k_retrieve),
            fusion=kwargs.pop("fusion", r.fusion),
            reranker=kwargs.pop("reranker", None) or build_reranker(config.rerank),
            detector=detector,
            **kwargs,
        )

    def _policy(self, policy: RetrievalPolicy | str) -> RetrievalPolicy:
        if isinstance(policy, str) and policy == "translate":
            return make_policy(policy, translator=self.translator)
        return make_policy(policy)

    @property
    def languages(self) -> list[str]:
        if self._languages is None:
            self._languages = self.stores.languages()
        return self._languages

    # -- steps ----------------------------------------------------------------------
    def prepare(self, query: str | Query, **fields: Any) -> Query:
        q = query if isinstance(query, Query) else make_query(query, **fields)
        if isinstance(query, Query) and fields:
            q = q.model_copy(update=make_query(q.text, **fields).model_dump(exclude_unset=True, exclude={"text"}))
        if q.lang is None:
            lang = self.detector.detect(q.text)
            if lang is None:
                raise PolicyError(
                    f"could not detect the language of {q.text[:60]!r}; pass it explicitly (lang=..., CLI --lang)"
                )
            q = q.model_copy(update={"lang": lang})
        return q

    def plan(self, query: Query, policy: RetrievalPolicy | None = None, k: int | None = None) -> RetrievalPlan:
        policy = policy or self.policy
        return policy.plan(query, query.lang or "", self.languages, k or self._fetch_k())

    def _fetch_k(self, k: int | None = None) -> int:
        k = k or self.k
        # With no reranker, fetching more than k only to cut it off is wasted work.
        return k if isinstance(self.reranker, NoRerank) else max(self.k_retrieve, k)

    def _embed_plan(self, plan: RetrievalPlan) -> dict[str, np.ndarray]:
        texts = list(dict.fromkeys(s.text for s in plan.searches))
        if not texts:
            return {}
        vecs = self.embedder.embed(texts, "query")
        return dict(zip(texts, vecs, strict=True))

    def _hits(self, query: Query, plan: RetrievalPlan, results: Sequence[StoreResult], k: int) -> list[Hit]:
        fused = fuse(results, self.fusion, plan.k, plan.shares)
        hits = [
            Hit(passage=f.passage, score=f.score, raw_score=f.raw_score, rank=i, store=f.store,
                policy=plan.policy, query_text=f.query_text)
            for i, f in enumerate(fused, 1)
        ]
        return self.reranker.rerank(query.text, hits, k)

    def _resolve(self, query: str | Query, mode: str | RetrievalPolicy | None, k: int | None,
                 fields: dict[str, Any]) -> tuple[Query, RetrievalPolicy, int]:
        q = self.prepare(query, **fields)
        policy = self._policy(mode) if mode is not None else self.policy
        return q, policy, k or self.k

    # -- public API ---------------------------------------------------------------------
    def retrieve(self, query: str | Query, *, mode: str | RetrievalPolicy | None = None,
                 k: int | None = None, **fields: Any) -> list[Hit]:
        """Hits for ``query``. ``fields`` fill the query (lang, relevant_langs, target_lang)."""
        q, policy, k = self._resolve(query, mode, k, fields)
        plan = policy.plan(q, q.lang or "", self.languages, self._fetch_k(k))
        if not plan.searches:
            return []
        vectors = self._embed_plan(plan)
        futures = [self._pool.submit(self.stores.search, s.store, vectors[s.text], s.quota, s.text)
                   for s in plan.searches]
        return self._hits(q, plan, [f.result() for f in futures], k)

    async def aretrieve(self, query: str | Query, *, mode: str | RetrievalPolicy | None = None,
                        k: int | None = None, **fields: Any) -> list[Hit]:
        """Async :meth:`retrieve`: detection, translation, embedding and store searches all
        run in worker threads, so the event loop is never blocked."""
        q = await asyncio.to_thread(self.prepare, query, **fields)
        policy = self._policy(mode) if mode is not None else self.policy
        k = k or self.k
        plan = await asyncio.to_thread(policy.plan, q, q.lang or "", self.languages, self._fetch_k(k))
        if not plan.searches:
            return []
        vectors = await asyncio.to_thread(self._embed_plan, plan)
        results = await asyncio.gather(
            *(asyncio.to_thread(self.stores.search, s.store, vectors[s.text], s.quota, s.text)
              for s in plan.searches)
        )
        return await asyncio.to_thread(self._hits, q, plan, results, k)

    def close(self) -> None:
        self._pool.shutdown(wait=False)
