"""Citation metrics on hand-built records."""

from __future__ import annotations

import pytest

from xlrag.evals.citations import citation_summary, citation_vs_inclusion


def _p(pid, doc, lang):
    return {"passage_id": pid, "doc_id": doc, "lang": lang}


def _c(pid, doc, lang, source="model", valid=True):
    return {"passage_id": pid if valid else None, "doc_id": doc, "lang": lang, "source": source, "valid": valid}


RECORDS = [
    # model cites p1 (relevant) and p2 (not): valid model citations, precision 1/2
    {"query_id": "q1", "shown": [_p("p1", "d1", "ar"), _p("p2", "d2", "en")],
     "citations": [_c("p1", "d1", "ar"), _c("p2", "d2", "en"), _c("p1", "d1", "ar")]},
    # one valid and one out-of-range model citation: not a clean model-made citation
    {"query_id": "q2", "shown": [_p("p3", "d3", "en"), _p("p4", "d4", "en")],
     "citations": [_c("p3", "d3", "en"), _c(None, None, None, valid=False)]},
    # the model wrote none: post-hoc only
    {"query_id": "q3", "shown": [_p("p5", "d5", "ar"), _p("p6", "d6", "en")],
     "citations": [_c("p5", "d5", "ar", source="post_hoc")]},
]
RELEVANT = {"q1": {"d1"}, "q2": {"d3"}, "q3": {"d9"}}


def test_summary_hand_computed():
    s = citation_summary(RECORDS, RELEVANT)
    assert s["n"] == 3
    assert s["valid_model_citation_rate"] == pytest.approx(1 / 3)
    assert s["post_hoc_share"] == pytest.approx(1 / 3)
    assert s["invalid_citation_share"] == pytest.approx(1 / 3)
    # distinct cited passages: q1 p1 (rel), p2 (not); q2 p3 (rel); q3 p5 (not) -> 2/4
    assert s["citation_precision"] == pytest.approx(0.5) and s["cited_passages_judged"] == 4
    # the first valid citation: q1 p1 (rel), q2 p3 (rel), q3 p5 (post-hoc, not rel) -> 2/3
    assert s["top_citation_precision"] == pytest.approx(2 / 3)
    # a relevant document among the passages shown: q1 d1, q2 d3, not q3 (d9 never shown) -> 2/3
    assert s["relevant_shown_rate"] == pytest.approx(2 / 3)


def test_citation_vs_inclusion_hand_computed():
    out = citation_vs_inclusion(RECORDS)
    # shown: ar 2, en 4 -> inclusion 1/3, 2/3. model-cited distinct: ar p1, en p2, en p3 -> 1/3, 2/3
    assert out["ar"]["inclusion_rate"] == pytest.approx(1 / 3)
    assert out["en"]["inclusion_rate"] == pytest.approx(2 / 3)
    assert out["ar"]["citation_rate"] == pytest.approx(1 / 3)
    assert out["en"]["cited_when_shown"] == pytest.approx(2 / 4)
    with_post_hoc = citation_vs_inclusion(RECORDS, model_only=False)
    assert with_post_hoc["ar"]["cited"] == 2


def test_empty():
    assert citation_summary([]) == {"n": 0}
    assert citation_summary(RECORDS)["citation_precision"] is None
