"""Agreement between raters: Fleiss' kappa across a judge panel, Cohen's kappa against humans."""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable, Sequence

__all__ = ["cohen_kappa", "fleiss_kappa", "fleiss_table"]


def fleiss_table(ratings: Sequence[Sequence[Hashable]], categories: Sequence[Hashable]) -> list[list[int]]:
    """Per item, how many raters chose each category (the n_ij table of Fleiss, 1971)."""
    table = []
    for row in ratings:
        counts = Counter(row)
        unknown = set(counts) - set(categories)
        if unknown:
            raise ValueError(f"ratings {sorted(map(str, unknown))} are not among the categories {list(categories)}")
        table.append([counts[c] for c in categories])
    return table


def fleiss_kappa(table: Sequence[Sequence[int]]) -> float | None:
    """Fleiss' kappa of an items × categories count table, every item rated by the same number
    of raters. None when it is undefined: no items, one rater, or every rating in one category
    (chance agreement is then 1)."""
    if not table:
        return None
    n = sum(table[0])
    if n < 2 or any(sum(row) != n for row in table):
        if n >= 2:
            raise ValueError("every item needs the same number of ratings; drop items with invalid votes first")
        return None
    items = len(table)
    p_j = [sum(row[j] for row in table) / (items * n) for j in range(len(table[0]))]
    p_i = [(sum(c * c for c in row) - n) / (n * (n - 1)) for row in table]
    p_bar = sum(p_i) / items
    p_e = sum(p * p for p in p_j)
    if p_e == 1:
        return None
    return (p_bar - p_e) / (1 - p_e)


def cohen_kappa(a: Sequence[Hashable], b: Sequence[Hashable]) -> float | None:
    """Cohen's kappa between two raters over the same items; None when chance agreement is 1."""
    if len(a) != len(b):
        raise ValueError(f"the raters labelled {len(a)} and {len(b)} items; pair them by item first")
    if not a:
        return None
    n = len(a)
    p_o = sum(x == y for x, y in zip(a, b, strict=True)) / n
    ca, cb = Counter(a), Counter(b)
    p_e = sum(ca[k] * cb[k] for k in set(ca) | set(cb)) / (n * n)
    if p_e == 1:
        return None
    return (p_o - p_e) / (1 - p_e)
