"""Merging rankings from several language stores.

Raw cosine scores are not comparable across languages: a multilingual encoder
scores any same-language passage higher than a relevant passage in another
language, so merging by raw score ("score") buries cross-lingual evidence. The
other methods compare each passage only with its own store's candidates. The
default, "zscore", was the best on the Travel benchmark (see benchmarks/retrieval.py).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from xlrag.indexes.store import StoreResult
from xlrag.schema import Passage

__all__ = ["FUSIONS", "Fused", "fuse"]

FUSIONS = ("zscore", "score", "rrf", "interleave", "minmax")
_RRF_K = 60
# Floor for a store's score spread: with a handful of near-identical scores the
# z-score would otherwise blow tiny differences up into large ones.
_MIN_STD = 0.01


@dataclass(frozen=True)
class Fused:
    passage: Passage
    score: float
    raw_score: float
    store: str
    query_text: str
    store_rank: int


def _normalised(res: StoreResult, method: str) -> list[float]:
    s = res.scores
    if not s:
        return []
    if method == "score":
        return list(s)
    if method == "zscore":
        mean = sum(s) / len(s)
        std = math.sqrt(sum((x - mean) ** 2 for x in s) / len(s))
        return [(x - mean) / max(std, _MIN_STD) for x in s]
    if method == "minmax":
        lo, hi = min(s), max(s)
        return [(x - lo) / (hi - lo) if hi > lo else 1.0 for x in s]
    if method == "rrf":
        return [1.0 / (_RRF_K + r) for r in range(1, len(s) + 1)]
    if method == "interleave":
        return [1.0 / r for r in range(1, len(s) + 1)]
    raise ValueError(f"unknown fusion {method!r}; choose one of {', '.join(FUSIONS)}")


def fuse(results: Sequence[StoreResult], method: str, k: int, shares: dict[str, int] | None = None) -> list[Fused]:
    """Merge per-store rankings into one list of at most ``k``.

    With ``shares`` (balanced mode) each store contributes exactly its share, or all
    it has; a shortfall is filled from the stores with the best leftover candidates.
    Ties are broken by raw score, so ``interleave`` puts the store with the higher
    cosine first at each rank.
    """
    pool: list[Fused] = []
    for res in results:
        for r, (p, raw, fused) in enumerate(zip(res.passages, res.scores, _normalised(res, method), strict=True), 1):
            pool.append(Fused(p, fused, raw, res.store, res.query_text, r))
    key = lambda f: (f.score, f.raw_score)  # noqa: E731
    if shares is None:
        return sorted(pool, key=key, reverse=True)[:k]
    chosen: list[Fused] = []
    leftovers: list[Fused] = []
    for store, share in shares.items():
        mine = [f for f in pool if f.store == store]  # already in store-rank order
        chosen.extend(mine[:share])
        leftovers.extend(mine[share:])
    deficit = k - len(chosen)
    if deficit > 0:
        chosen.extend(sorted(leftovers, key=key, reverse=True)[:deficit])
    return sorted(chosen, key=key, reverse=True)[:k]
