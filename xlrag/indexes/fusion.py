"""Merging rankings from several language stores.

Raw cosine scores are not comparable across languages: a multilingual encoder
scores any same-language passage higher than a relevant passage in another
language, so merging by raw score ("score") buries cross-lingual evidence. The
other methods compare each passage only with its own store's candidates. With the
dense channel alone "zscore" was the best on the Travel benchmark (benchmarks/retrieval.py);
with the dense and lexical channels, the default, "rrf" (benchmarks/channels.py).

Inside one store the channels are fused first (:func:`fuse_channels`), so the stores are
fused as if each had been searched once.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from xlrag.indexes.store import StoreResult
from xlrag.registry import get, register
from xlrag.schema import Passage

__all__ = ["LEXICAL_SPILL", "LEXICAL_TIE", "Fused", "Ranked", "StoreChannels", "fuse", "fuse_channels", "normaliser",
           "select",
           "tier_ranks"]

_RRF_K = 60
# Lexical scores this close to a better one (a share of the store's top BM25 score) are a tie:
# chosen by benchmarks/languages.py on the many-language test bed, Travel and XQuAD in one run
# (exact ties only cost the test bed's template pages; 0.1 kept Travel and XQuAD at dense's level).
LEXICAL_TIE = 0.1
# How many passages past a store's lexical cut a tie at the cut may run and still be kept whole,
# as a share of the cut (:meth:`xlrag.indexes.lexical.LexicalIndex.rank`); a longer tie is left
# out. Chosen with LEXICAL_TIE by the same benchmark.
LEXICAL_SPILL = 1.0
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
    channels: tuple[str, ...] = ("dense",)
    dense_score: float | None = None
    lexical_score: float | None = None


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
    return get("fusion", method)


class Ranked(Protocol):
    """One store's ranking: a :class:`StoreResult`, or a :class:`StoreRanking` (ids only)."""

    @property
    def store(self) -> str: ...

    @property
    def scores(self) -> list[float]: ...


def select(results: Sequence[Ranked], method: str, k: int, shares: dict[str, int] | None = None,
           prefer: Mapping[str, int] | None = None) -> list[tuple[int, int, float]]:
    """The merged list of at most ``k``, as ``(result index, rank in that result, fused score)``.

    With ``shares`` (balanced mode) each store contributes exactly its share, or all
    it has; a shortfall is filled from the stores with the best leftover candidates.
    Equal fused scores (the same rank in two stores, under ``rrf``) go first to the store
    ``prefer`` ranks higher (the retriever prefers stores that hold a place the question names,
    then the question's own store), then by raw score, so ``interleave`` puts the store with
    the higher cosine first at each rank. Only scores are read: the passages of the chosen are
    fetched afterwards (see :meth:`CrossLingualRetriever.retrieve`).
    """
    norm = normaliser(method)
    prefer = prefer or {}
    # (fused, preference, raw, result index, rank), sorted on the first three only: ties keep
    # store, then rank order
    pool = [(f, prefer.get(res.store, 0), raw, i, r) for i, res in enumerate(results) if res.scores
            for r, (raw, f) in enumerate(zip(res.scores, norm(res.scores), strict=True))]
    if shares is None:
        chosen = pool
    else:
        chosen, leftovers = [], []
        for store, share in shares.items():
            mine = [c for c in pool if results[c[3]].store == store]  # already in store-rank order
            chosen.extend(mine[:share])
            leftovers.extend(mine[share:])
        deficit = k - len(chosen)
        if deficit > 0:
            chosen.extend(sorted(leftovers, key=_key, reverse=True)[:deficit])
    return [(i, r, f) for f, _, _, i, r in sorted(chosen, key=_key, reverse=True)[:k]]


def _key(c: tuple[float, int, float, int, int]) -> tuple[float, int, float]:
    return c[0], c[1], c[2]


@dataclass(frozen=True)
class StoreChannels:
    """One store's ranking after its channels were fused: ids and in-store scores, best first,
    with what each channel scored (a passage one channel did not find has no score there)."""

    store: str
    query_text: str
    ids: list[str]
    scores: list[float]
    dense: dict[str, float]
    lexical: dict[str, float]


def tier_ranks(scores: dict[str, float], tie: float) -> dict[str, int]:
    """Competition ranks of ``scores`` ({id: score}, any order) in which a score within ``tie``
    times the top score of the first score of its tier shares that tier's rank: ``{a: 9.0,
    b: 8.9, c: 3.0}`` with ``tie=0.05`` ranks a and b 1st, c 3rd. ``tie=0`` ties equal scores only."""
    if not scores:
        return {}
    ordered = sorted(scores.items(), key=lambda kv: -kv[1])
    eps = tie * abs(ordered[0][1])
    ranks: dict[str, int] = {}
    rank, anchor = 1, ordered[0][1]
    for i, (pid, s) in enumerate(ordered, 1):
        if anchor - s > eps:
            rank, anchor = i, s
        ranks[pid] = rank
    return ranks


def fuse_channels(store: str, query_text: str, dense: dict[str, float], lexical: dict[str, float],
                  n: int, hybrid: bool, *, tie: float = LEXICAL_TIE) -> StoreChannels:
    """Reciprocal-rank fusion of a store's dense and lexical rankings, cut to ``n``.

    Ranks, not scores: BM25 scores are unbounded and cosines sit in a narrow band, so any
    weighting of the raw values would be one corpus's tuning (benchmarks/retrieval.py
    measured RRF against a z-score sum). Lexical scores within ``tie`` of each other share a
    rank (:func:`tier_ranks`): when the question's distinctive words match nothing, every
    passage scores on the same common words and their order is length normalisation, not
    evidence; fused as ranks it would reorder the dense ranking. With ``hybrid`` the scores are
    RRF's even when one channel found nothing in this store, so every store's scores are on one
    scale; a lone channel (not ``hybrid``) keeps its own scores.
    """
    d, lx = dense, lexical  # each {id: score}, best first
    if not hybrid:
        only = d or lx
        ids = list(only)[:n]
        return StoreChannels(store, query_text, ids, [only[i] for i in ids], d, lx)
    fused: dict[str, float] = {}
    for r, pid in enumerate(d, 1):
        fused[pid] = 1.0 / (_RRF_K + r)
    for pid, r in tier_ranks(lx, tie).items():
        fused[pid] = fused.get(pid, 0.0) + 1.0 / (_RRF_K + r)
    # equal fused scores keep the dense order: a passage dense found first, then by its cosine
    order = sorted(fused, key=lambda pid: (-fused[pid], pid not in d, -d.get(pid, -1.0)))[:n]
    return StoreChannels(store, query_text, order, [fused[i] for i in order], d, lx)


def fuse(results: Sequence[StoreResult], method: str, k: int, shares: dict[str, int] | None = None,
         prefer: Mapping[str, int] | None = None) -> list[Fused]:
    """Merge per-store rankings into one list of at most ``k`` (see :func:`select`)."""
    return [Fused(results[i].passages[r], f, results[i].scores[r], results[i].store, results[i].query_text, r + 1)
            for i, r, f in select(results, method, k, shares, prefer)]
