"""Merging rankings from several language stores.

Raw cosine scores are not comparable across languages: a multilingual encoder
scores any same-language passage higher than a relevant passage in another
language, so merging by raw score ("score") buries cross-lingual evidence. The
other methods compare each passage only with its own store's candidates. The
default, "zscore", was the best on the Travel benchmark (see benchmarks/retrieval.py).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from xlrag.indexes.store import StoreResult
from xlrag.registry import register
from xlrag.schema import Passage

__all__ = ["Fused", "fuse", "normaliser"]

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


# Each method turns one store's scores (best first) into scores comparable across stores.
Normaliser = Callable[[Sequence[float]], list[float]]


@register("fusion", "score")
def _score(s: Sequence[float]) -> list[float]:
    return list(s)


@register("fusion", "zscore")
def _zscore(s: Sequence[float]) -> list[float]:
    mean = sum(s) / len(s)
    std = math.sqrt(sum((x - mean) ** 2 for x in s) / len(s))
    return [(x - mean) / max(std, _MIN_STD) for x in s]


@register("fusion", "minmax")
def _minmax(s: Sequence[float]) -> list[float]:
    lo, hi = min(s), max(s)
    return [(x - lo) / (hi - lo) if hi > lo else 1.0 for x in s]


@register("fusion", "rrf")
def _rrf(s: Sequence[float]) -> list[float]:
    return [1.0 / (_RRF_K + r) for r in range(1, len(s) + 1)]


@register("fusion", "interleave")
def _interleave(s: Sequence[float]) -> list[float]:
    return [1.0 / r for r in range(1, len(s) + 1)]


def normaliser(method: str) -> Normaliser:
    """The registered fusion method ``method``; unknown names list the registered ones."""
    from xlrag.registry import get

    return get("fusion", method)


def _normalised(res: StoreResult, method: str) -> list[float]:
    return normaliser(method)(res.scores) if res.scores else []


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
