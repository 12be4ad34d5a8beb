"""The seeded bootstrap shared by the evals and the benchmarks."""

import math
import random

import pytest

from xlrag.errors import InvalidArgumentError
from xlrag.evals.stats import bootstrap_ci, bootstrap_macro_ci


def test_constant_values_have_a_point_interval():
    assert bootstrap_ci([1.0, 1.0, 1.0]) == (1.0, 1.0, 1.0)


def test_two_values_span_the_full_range():
    # Resampling [0, 1] gives means 0, 0.5, 1 with chances 1/4, 1/2, 1/4, so with 1000
    # replicates the 2.5th percentile is 0 and the 97.5th is 1.
    assert bootstrap_ci([0.0, 1.0]) == (0.5, 0.0, 1.0)


def test_seeded_and_reproducible():
    rng = random.Random(1)
    vals = [rng.random() for _ in range(50)]
    assert bootstrap_ci(vals) == bootstrap_ci(vals)
    assert bootstrap_ci(vals, seed=1) != bootstrap_ci(vals, seed=2)
    mean, lo, hi = bootstrap_ci(vals)
    assert lo < mean < hi


def test_same_numbers_as_the_benchmarks_had_before_the_move():
    # benchmarks/_common.py's original implementation, verbatim: published CIs stay reproducible.
    def legacy(values, n=1000, seed=13):
        vals = list(values)
        rng = random.Random(seed)
        means = sorted(sum(rng.choices(vals, k=len(vals))) / len(vals) for _ in range(n))
        return sum(vals) / len(vals), means[int(0.025 * n)], means[int(0.975 * n) - 1]

    rng = random.Random(7)
    for size in (1, 7, 200):
        vals = [float(rng.random() < 0.6) for _ in range(size)]
        assert bootstrap_ci(vals) == legacy(vals)


def test_macro_weights_groups_equally():
    # Group means 0 and 1: macro 0.5, while the micro mean over the 4 values is 0.25.
    groups = [[0.0, 0.0, 0.0], [1.0]]
    assert bootstrap_macro_ci(groups) == (0.5, 0.5, 0.5)  # each group is constant: no spread
    assert bootstrap_ci([v for g in groups for v in g])[0] == 0.25
    # empty groups have no mean and are ignored
    assert bootstrap_macro_ci([[], [1.0, 1.0]]) == (1.0, 1.0, 1.0)


def test_macro_interval_resamples_within_groups():
    mean, lo, hi = bootstrap_macro_ci([[0.0, 1.0], [1.0, 1.0]])
    # group 1 always averages 1; group 0 averages 0, 0.5 or 1, so the macro is 0.5, 0.75 or 1
    assert mean == 0.75 and (lo, hi) == (0.5, 1.0)


def test_empty_input_and_bad_replicates():
    assert all(math.isnan(x) for x in bootstrap_ci([]))
    assert all(math.isnan(x) for x in bootstrap_macro_ci([[], []]))
    with pytest.raises(InvalidArgumentError, match="n must be"):
        bootstrap_ci([1.0], n=10)
