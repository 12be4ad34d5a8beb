"""Kappas against textbook examples."""

from __future__ import annotations

import pytest

from xlrag.evals.agreement import cohen_kappa, fleiss_kappa, fleiss_table

# Fleiss (1971) as worked on Wikipedia's "Fleiss' kappa" page: 10 subjects, 14 raters,
# 5 categories; P-bar = 0.378, P-bar-e = 0.213, kappa = 0.210.
WIKIPEDIA = [
    [0, 0, 0, 0, 14],
    [0, 2, 6, 4, 2],
    [0, 0, 3, 5, 6],
    [0, 3, 9, 2, 0],
    [2, 2, 8, 1, 1],
    [7, 7, 0, 0, 0],
    [3, 2, 6, 3, 0],
    [2, 5, 3, 2, 2],
    [6, 5, 2, 1, 0],
    [0, 2, 2, 3, 7],
]


def test_fleiss_textbook():
    assert fleiss_kappa(WIKIPEDIA) == pytest.approx(0.2099, abs=5e-4)


def test_fleiss_perfect_and_undefined():
    assert fleiss_kappa(fleiss_table([["c", "c", "c"], ["i", "i", "i"]], ["c", "i"])) == pytest.approx(1.0)
    assert fleiss_kappa(fleiss_table([["c", "c"], ["c", "c"]], ["c", "i"])) is None  # no variation
    assert fleiss_kappa([]) is None


def test_fleiss_needs_equal_raters():
    with pytest.raises(ValueError, match="same number of ratings"):
        fleiss_kappa([[2, 1], [1, 1]])
    with pytest.raises(ValueError, match="not among the categories"):
        fleiss_table([["c", "maybe"]], ["c", "i"])


def test_cohen_textbook():
    # Wikipedia's "Cohen's kappa" example: 50 proposals, yes/yes 20, yes/no 5, no/yes 10,
    # no/no 15: p_o = 0.7, p_e = 0.5, kappa = 0.4
    a = ["y"] * 25 + ["n"] * 25
    b = ["y"] * 20 + ["n"] * 5 + ["y"] * 10 + ["n"] * 15
    assert cohen_kappa(a, b) == pytest.approx(0.4)


def test_cohen_edge_cases():
    assert cohen_kappa(["y", "y"], ["y", "y"]) is None
    with pytest.raises(ValueError, match="pair them"):
        cohen_kappa(["y"], ["y", "n"])
