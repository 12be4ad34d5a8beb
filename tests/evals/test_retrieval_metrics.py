"""Per-query retrieval metrics against values worked out by hand."""

import math

import pytest

from xlrag.errors import InvalidArgumentError
from xlrag.evals.retrieval import (
    RankedPassage,
    Ranking,
    hit_at,
    metric_names,
    mrr_at,
    ndcg_at,
    query_metrics,
    recall_at,
)

# Five returned passages as their documents: d3 twice (two passages of one document).
RANKED = ["d3", "d1", "d3", "d2", "d5"]
# Graded: d1 is highly relevant, d2 and d4 (never retrieved) partly, d9 judged not relevant.
GRADES = {"d1": 2, "d2": 1, "d4": 1, "d9": 0}


def test_hit_at_counts_the_first_k_passages():
    assert hit_at(RANKED, GRADES, 1) == 0.0  # d3 is not relevant
    assert hit_at(RANKED, GRADES, 2) == 1.0  # d1 at rank 2
    assert hit_at(RANKED, {"d9": 0, "d5": 1}, 4) == 0.0  # d5 is at rank 5
    assert hit_at(RANKED, {"d9": 0, "d5": 1}, 5) == 1.0


def test_mrr_is_the_first_relevant_rank_within_k():
    assert mrr_at(RANKED, GRADES, 5) == 0.5  # d1 at rank 2
    assert mrr_at(RANKED, GRADES, 1) == 0.0
    assert mrr_at(RANKED, {"d2": 1}, 20) == 0.25  # d2 at rank 4
    assert mrr_at(RANKED, {"d2": 1}, 3) == 0.0


def test_recall_is_the_share_of_relevant_documents_found():
    # relevant: d1, d2, d4 (d9 has grade 0)
    assert recall_at(RANKED, GRADES, 5) == pytest.approx(2 / 3)  # d1, d2
    assert recall_at(RANKED, GRADES, 2) == pytest.approx(1 / 3)  # d1
    assert recall_at(RANKED, GRADES, 1) == 0.0
    # a document found through two passages counts once
    assert recall_at(["d1", "d1"], {"d1": 1, "d2": 1}, 2) == 0.5


def test_ndcg_uses_graded_gains_and_the_qrels_ideal():
    # first ranks: d3 1, d1 2, d2 4, d5 5; DCG = 2/log2(3) + 1/log2(5)
    # ideal: grades 2, 1, 1 at ranks 1, 2, 3: 2/log2(2) + 1/log2(3) + 1/log2(4) = 2 + 0.6309 + 0.5
    expected = (2 / math.log2(3) + 1 / math.log2(5)) / (2 + 1 / math.log2(3) + 0.5)
    assert ndcg_at(RANKED, GRADES, 5) == pytest.approx(expected)
    assert ndcg_at(RANKED, GRADES, 5) == pytest.approx(0.54059, abs=1e-5)
    # k=2: DCG = 2/log2(3); ideal cut to two grades: 2 + 1/log2(3)
    assert ndcg_at(RANKED, GRADES, 2) == pytest.approx((2 / math.log2(3)) / (2 + 1 / math.log2(3)))
    assert ndcg_at(["d1", "d2"], GRADES, 2) == pytest.approx(1.0)  # the ideal order at k=2
    # the wrong order of two grades scores below 1: (1 + 2/log2(3)) / (2 + 1/log2(3))
    assert ndcg_at(["d2", "d1"], GRADES, 2) == pytest.approx((1 + 2 / math.log2(3)) / (2 + 1 / math.log2(3)))


def test_ndcg_counts_a_document_once_at_its_first_passage():
    # d1's second passage (rank 2) gains nothing: (1 + 1/log2(4)) / (1 + 1/log2(3)) = 0.9197
    assert ndcg_at(["d1", "d1", "d2"], {"d1": 1, "d2": 1}, 3) == pytest.approx(1.5 / (1 + 1 / math.log2(3)))
    assert ndcg_at(["d1", "d1", "d1"], {"d1": 1}, 3) == 1.0  # never above 1


def test_a_query_with_no_relevant_document_is_refused():
    for fn in (hit_at, recall_at, mrr_at, ndcg_at):
        with pytest.raises(InvalidArgumentError, match="grade > 0"):
            fn(RANKED, {"d1": 0}, 5)
    with pytest.raises(InvalidArgumentError, match="k must be"):
        hit_at(RANKED, GRADES, 0)


def test_metric_names_follow_k():
    assert metric_names(20) == ["hit@1", "hit@5", "hit@20", "mrr@20", "ndcg@10", "recall@20"]
    assert metric_names(3) == ["hit@1", "hit@3", "mrr@3", "ndcg@3", "recall@3"]
    assert metric_names(50) == ["hit@1", "hit@5", "hit@20", "hit@50", "mrr@50", "ndcg@10", "recall@50"]


def test_query_metrics_single_gold_document():
    # The Travel case: one gold document; its first passage at rank 7.
    ranked = [f"x{i}" for i in range(6)] + ["gold", "x9", "gold"] + [f"y{i}" for i in range(11)]
    m = query_metrics(ranked, {"gold": 1}, 20)
    assert m == {"hit@1": 0.0, "hit@5": 0.0, "hit@20": 1.0, "mrr@20": pytest.approx(1 / 7),
                 "ndcg@10": pytest.approx(1 / math.log2(8)), "recall@20": 1.0}


def test_units_at_document_and_passage_level():
    r = Ranking(query_id="q", lang="en", passages=[
        RankedPassage(id="d1#0", doc_id="d1", lang="en"), RankedPassage(id="d2#3", doc_id="d2", lang="ar"),
        RankedPassage(id="d1#1", doc_id="d1", lang="en")])
    assert r.units("document") == ["d1", "d2", "d1"]
    assert r.units("passage") == ["d1#0", "d2#3", "d1#1"]
    # passage-level qrels judge d1#1 only: it is at rank 3
    assert mrr_at(r.units("passage"), {"d1#1": 1}, 3) == pytest.approx(1 / 3)
    assert mrr_at(r.units("document"), {"d1": 1}, 3) == 1.0
