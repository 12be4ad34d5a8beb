"""Seeded percentile-bootstrap confidence intervals, the one implementation the evals and
the benchmarks share (so a figure and its interval never come from two different resamplers).

Seeded with :class:`random.Random`, so the same values give the same interval on every
machine and every run; the default seed (13) and replicate count (1000) are the ones the
benchmarks have always used, so their published intervals stay reproducible.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence

from xlrag.errors import InvalidArgumentError

__all__ = ["bootstrap_ci", "bootstrap_macro_ci"]


def _check_n(n: int) -> None:
    if isinstance(n, bool) or not isinstance(n, int) or n < 40:
        # Below 40 replicates the 2.5% and 97.5% percentiles are the same order statistic.
        raise InvalidArgumentError("n", "a whole number >= 40 (bootstrap replicates)", n)


def _interval(means: list[float], n: int) -> tuple[float, float]:
    means.sort()
    return means[int(0.025 * n)], means[int(0.975 * n) - 1]


def bootstrap_ci(values: Sequence[float], n: int = 1000, seed: int = 13) -> tuple[float, float, float]:
    """``(mean, low, high)``: the mean of ``values`` and its 95% percentile-bootstrap interval.

    No values gives three NaNs (an empty group has no mean; callers decide how to show it).
    """
    _check_n(n)
    vals = [float(v) for v in values]
    if not vals:
        return (math.nan,) * 3
    rng = random.Random(seed)
    means = [sum(rng.choices(vals, k=len(vals))) / len(vals) for _ in range(n)]
    return (sum(vals) / len(vals), *_interval(means, n))


def bootstrap_macro_ci(groups: Sequence[Sequence[float]], n: int = 1000, seed: int = 13) -> tuple[float, float, float]:
    """``(macro mean, low, high)``: the unweighted mean of the group means, with a 95% interval
    from a stratified bootstrap (each replicate resamples every group within itself, so a
    small group keeps its full weight and its own size).

    Empty groups are ignored (they have no mean); no non-empty group gives three NaNs.
    """
    _check_n(n)
    cells = [[float(v) for v in g] for g in groups if len(g)]
    if not cells:
        return (math.nan,) * 3
    rng = random.Random(seed)
    macro = sum(sum(c) / len(c) for c in cells) / len(cells)
    means = [sum(sum(rng.choices(c, k=len(c))) / len(c) for c in cells) / len(cells) for _ in range(n)]
    return (macro, *_interval(means, n))
