"""Aggregation by language cell, micro and macro means, bias, qrels files and TREC runs."""

import json

import pytest

from xlrag.errors import CorpusError, CorpusRowError, InvalidArgumentError
from xlrag.evals.retrieval import (
    RankedPassage,
    Ranking,
    language_bias,
    load_qrels,
    retrieval_report,
    trec_run,
    write_trec_run,
)

LANGS = {"e1": "en", "e2": "en", "a1": "ar", "a2": "ar"}
INDEX = {"en": 6, "ar": 2}  # passages per language: English is 3/4 of the index


def ranking(qid, lang, *docs):
    return Ranking(query_id=qid, lang=lang, passages=[
        RankedPassage(id=f"{d}#{i}", doc_id=d, lang=LANGS[d], score=1.0 - i / 10) for i, d in enumerate(docs)])


RANKINGS = [
    ranking("q1", "en", "e1", "a1"),  # en->en  hit@1 1, mrr 1
    ranking("q2", "en", "a1", "e1"),  # en->en  missed (gold e2)
    ranking("q3", "en", "e1", "a1"),  # en->ar  hit@1 0, hit@2 1, mrr 1/2
    ranking("q4", "ar", "e1", "e2"),  # ar->en  hit@1 1
    ranking("q5", "ar", "a2", "a1"),  # ar->ar  hit@1 1
    ranking("q6", "ar", "e2", "a1"),  # relevant in both languages: mixed
    ranking("q7", "en", "e1", "e2"),  # no qrels
    ranking("q8", "ar", "a1", "e1"),  # judged, nothing relevant
]
QRELS = {"q1": {"e1": 1}, "q2": {"e2": 1}, "q3": {"a1": 1}, "q4": {"e1": 1}, "q5": {"a2": 1},
         "q6": {"a1": 1, "e2": 2}, "q8": {"e1": 0}}


@pytest.fixture(scope="module")
def report():
    return retrieval_report(RANKINGS, QRELS, LANGS, INDEX, k=2)


def test_cells_and_groups(report):
    cells = report["by_cell"]
    assert list(cells) == ["ar->ar", "ar->ar+en", "ar->en", "en->ar", "en->en"]
    assert {c: (m["group"], m["n"]) for c, m in cells.items()} == {
        "ar->ar": ("same_lang", 1), "ar->ar+en": ("mixed_lang", 1), "ar->en": ("cross_lang", 1),
        "en->ar": ("cross_lang", 1), "en->en": ("same_lang", 2)}
    assert cells["en->en"]["hit@1"] == 0.5 and cells["en->en"]["mrr@2"] == 0.5
    assert cells["en->ar"]["hit@1"] == 0.0 and cells["en->ar"]["hit@2"] == 1.0 and cells["en->ar"]["mrr@2"] == 0.5
    assert cells["en->en"]["ci95"]["hit@1"] == [0.0, 1.0]


def test_micro_and_macro_means(report):
    s = report["summary"]
    assert s["n"] == {"same_lang": 3, "cross_lang": 2, "mixed_lang": 1}
    # micro over q1, q2, q5: hits 1, 0, 1
    assert s["same_lang"]["hit@1"] == pytest.approx(2 / 3)
    # macro over cells en->en (0.5) and ar->ar (1.0)
    assert s["macro"]["same_lang"]["hit@1"] == pytest.approx(0.75)
    assert s["cells"] == {"same_lang": ["ar->ar", "en->en"], "cross_lang": ["ar->en", "en->ar"]}
    # cross: q3 (mrr 1/2) and q4 (mrr 1)
    assert s["cross_lang"]["mrr@2"] == pytest.approx(0.75)
    assert s["cross_lang"]["hit@1"] == 0.5 and s["cross_lang"]["hit@2"] == 1.0
    assert s["macro"]["cross_lang"]["hit@1"] == 0.5
    # the mixed query is reported apart: e2 (grade 2) at rank 1, a1 (grade 1) at rank 2 is the ideal order
    assert s["mixed_lang"]["ndcg@2"] == pytest.approx(1.0) and s["mixed_lang"]["recall@2"] == 1.0
    assert s["ci95"]["cross_lang"]["hit@2"] == [1.0, 1.0]
    assert set(s["same_lang"]) == set(report["metrics"]) == {"hit@1", "hit@2", "mrr@2", "ndcg@2", "recall@2"}


def test_unscored_queries_are_listed_not_counted(report):
    assert report["queries"] == {"ranked": 8, "evaluated": 6, "no_qrels": ["q7"], "no_relevant": ["q8"]}


def test_bias(report):
    b = report["bias"]
    # English queries' 8 passages: en en|ar, ar|en, en|ar, en en -> 5 en, 3 ar
    assert b["en"]["n_queries"] == 4 and b["en"]["n_passages"] == 8
    assert b["en"]["retrieved"] == {"ar": 3 / 8, "en": 5 / 8}
    assert b["en"]["index_share"] == 0.75
    assert b["en"]["in_language_ratio"] == pytest.approx((5 / 8) / 0.75)  # 0.833: below its index share
    assert b["en"]["english_share"] == 5 / 8
    # Arabic queries: 4 of 8 passages Arabic, against 1/4 of the index -> ratio 2
    assert b["ar"]["in_language_share"] == 0.5 and b["ar"]["in_language_ratio"] == pytest.approx(2.0)
    assert b["ar"]["english_share"] == 0.5


def test_bias_counts_only_the_top_k_and_a_missing_language():
    rankings = [ranking("q", "de", "e1", "a1", "a2")]
    b = language_bias(rankings, INDEX, 1)["de"]
    assert b["retrieved"] == {"en": 1.0} and b["in_language_share"] == 0.0
    assert b["index_share"] == 0.0 and b["in_language_ratio"] is None  # no German passage indexed


def test_passage_level_matches_passage_ids():
    qrels = {"q1": {"a1#1": 1}}
    passage_langs = {"e1#0": "en", "a1#1": "ar"}
    r = retrieval_report([RANKINGS[0]], qrels, passage_langs, INDEX, k=2, level="passage")
    assert r["by_cell"]["en->ar"]["mrr@2"] == 0.5 and r["level"] == "passage"


def test_relevant_documents_missing_from_the_index_fail_loudly():
    with pytest.raises(CorpusError,
                       match=r"1 relevant document id\(s\) in the qrels are not in the index, e\.g\. '94'"):
        retrieval_report(RANKINGS[:1], {"q1": {"94": 1}}, LANGS, INDEX, k=2)


def test_no_matching_query_ids_and_duplicates_fail():
    with pytest.raises(CorpusError, match="query ids must match the qrels query_id"):
        retrieval_report(RANKINGS[:2], {"tq1": {"e1": 1}}, LANGS, INDEX, k=2)
    with pytest.raises(CorpusError, match="'q1' occurs 2 times"):
        retrieval_report([RANKINGS[0], RANKINGS[0]], QRELS, LANGS, INDEX, k=2)
    with pytest.raises(InvalidArgumentError, match="did you mean 'passage'"):
        retrieval_report(RANKINGS, QRELS, LANGS, INDEX, k=2, level="pasage")  # type: ignore[arg-type]


def test_report_is_plain_json(report):
    assert json.loads(json.dumps(report, allow_nan=False)) == report


# --------------------------------------------------------------------------- qrels files


def write(tmp_path, *lines):
    path = tmp_path / "qrels.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_load_qrels(tmp_path):
    path = write(tmp_path, '{"query_id": "q1", "doc_id": "d1", "relevance": 2}', "",
                 '{"query_id": "q1", "doc_id": "d2", "relevance": 0}', '{"query_id": 7, "doc_id": 94, "relevance": 1}')
    assert load_qrels(path) == {"q1": {"d1": 2, "d2": 0}, "7": {"94": 1}}


@pytest.mark.parametrize(("line", "reason"), [
    ('{"query_id": "q2", "doc_id": "d1"', "invalid JSON"),
    ('["q2", "d1", 1]', "each line must be a JSON object"),
    ('{"query_id": "q2", "doc_id": "d1"}', "missing 'relevance' (each line needs query_id, doc_id and relevance)"),
    ('{"query_id": "q2", "doc_id": "d1", "relevance": "1"}', "'relevance' input should be a valid integer (got '1')"),
    ('{"query_id": "q2", "doc_id": "d1", "relevance": true}', "'relevance' input should be a valid integer"),
    ('{"query_id": "q2", "doc_id": "d1", "relevance": -1}', "'relevance' input should be greater than or equal to 0"),
    ('{"query_id": "q2", "doc_id": 1.5, "relevance": 1}', "'doc_id' must be a string or a whole number"),
    ('{"query_id": " ", "doc_id": "d1", "relevance": 1}', "'query_id' must not be empty"),
    ('{"query_id": "q1", "doc_id": "d1", "relevance": 0}', "('q1', 'd1') is judged twice (first on line 1)"),
])
def test_bad_qrels_rows_name_the_line(tmp_path, line, reason):
    path = write(tmp_path, '{"query_id": "q1", "doc_id": "d1", "relevance": 1}', line)
    with pytest.raises(CorpusRowError) as e:
        load_qrels(path)
    assert e.value.line == 2
    assert str(e.value).startswith(f"{path}:2: ") and reason in str(e.value)
    assert "\n" not in str(e.value)


def test_missing_or_empty_qrels_file(tmp_path):
    with pytest.raises(CorpusError, match="does not exist"):
        load_qrels(tmp_path / "nope.jsonl")
    with pytest.raises(CorpusError, match="has no rows"):
        load_qrels(write(tmp_path, ""))


# --------------------------------------------------------------------------- TREC runs


def test_trec_run_lists_each_document_once():
    r = ranking("q1", "en", "e1", "a1", "e1", "e2")
    assert trec_run([r]) == {"q1": [("e1", 3.0), ("a1", 2.0), ("e2", 1.0)]}
    assert trec_run([r], "passage")["q1"] == [("e1#0", 4.0), ("a1#1", 3.0), ("e1#2", 2.0), ("e2#3", 1.0)]


def test_write_trec_run_format(tmp_path):
    path = tmp_path / "run.trec"
    n = write_trec_run(path, {"q1": [("d7", 2.0), ("d3", 0.5)], "q2": [("d1", 1.0)]}, tag="mine")
    assert n == 3
    assert path.read_text(encoding="utf-8") == "q1 Q0 d7 1 2.0 mine\nq1 Q0 d3 2 0.5 mine\nq2 Q0 d1 1 1.0 mine\n"


@pytest.mark.parametrize(("run", "match"), [
    ({"q 1": [("d1", 1.0)]}, "query id must be a non-empty id without white space"),
    ({"q1": [("d 1", 1.0)]}, "doc id must be"),
    ({"q1": [("d1", 2.0), ("d1", 1.0)]}, "each doc id once per query"),
    ({"q1": [("d1", 1.0), ("d2", 1.0)]}, "strictly decrease"),
])
def test_write_trec_run_refuses_what_trec_eval_would_misread(tmp_path, run, match):
    path = tmp_path / "run.trec"
    with pytest.raises(InvalidArgumentError, match=match):
        write_trec_run(path, run)
    assert not path.exists() and list(tmp_path.iterdir()) == []
    with pytest.raises(InvalidArgumentError, match="a file in an existing directory"):
        write_trec_run(tmp_path, {"q1": [("d1", 1.0)]})
