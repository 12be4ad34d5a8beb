"""The report from hand-written records: aggregates, agreement, human labels, rendering."""

from __future__ import annotations

import json

import pytest
import yaml
from pydantic import ValidationError

from xlrag.errors import CorpusRowError
from xlrag.evals.experiment import ExperimentConfig
from xlrag.evals.report import build_report, markdown
from xlrag.evals.studies import write_reports


def _vote(judge, verdict):
    return {"judge": judge, "verdict": verdict, "justification": "j", "raw": "{}", "reason": None}


def _record(qid, lang, verdicts, final, status, f1):
    valid = {v for v in verdicts if v != "invalid"}
    maj = max(sorted(valid), key=verdicts.count) if valid else "invalid"
    return {
        "key": f"travel|qlang|local:default|localized|{qid}", "dataset": "travel", "mode": "qlang",
        "llm": "local:default", "variant": "localized", "query_id": qid, "lang": lang, "question": "q",
        "golds": ["g"], "retrieved": [{"passage_id": f"{qid}-p", "doc_id": "d1", "lang": "en", "score": 1.0}],
        "answered": True, "flags": [], "raw_output": "r", "answer": "a", "explanation": None,
        "shown": [{"passage_id": f"{qid}-p", "doc_id": "d1", "lang": "en"}],
        "citations": [{"marker": 0, "passage_id": f"{qid}-p", "doc_id": "d1", "lang": "en", "valid": True,
                       "source": "model"}],
        "language": {"expected": lang, "detected": lang if status == "correct" else None, "confidence": 0.9,
                     "status": status, "reason": None},
        "metrics": {"em": 0.0, "f1": f1, "char3_recall": f1},
        "judges": {"verdict": maj, "votes": [_vote(f"j{i}", v) for i, v in enumerate(verdicts)],
                   "counts": {}, "tie": False, "disagreement": len(valid) > 1, "final": final},
        "seconds": 1.0,
    }


@pytest.fixture
def run_dir(tmp_path):
    cfg = ExperimentConfig.model_validate({
        "name": "hand", "datasets": [{"name": "travel"}], "modes": ["qlang"],
        "judges": {"judges": [{"seed": 0}, {"seed": 1}]}, "human_labels": str(tmp_path / "labels.jsonl")})
    (tmp_path / "labels.jsonl").write_text("\n".join(json.dumps({"query_id": q, "label": lab}) for q, lab in
                                                    [("q1", "correct"), ("q2", "incorrect"), ("q3", "correct"),
                                                     ("q4", "incorrect")]) + "\n")
    (tmp_path / "experiment.yaml").write_text(yaml.safe_dump(cfg.model_dump(mode="json")))
    records = [
        _record("q1", "ar", ["correct", "correct"], "correct", "correct", 1.0),
        _record("q2", "ar", ["correct", "incorrect"], "incorrect", "wrong", 0.5),
        _record("q3", "en", ["incorrect", "incorrect"], "incorrect", "correct", 0.0),
        _record("q4", "en", ["incorrect", "invalid"], "incorrect", "not_applicable", 0.5),
    ]
    (tmp_path / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    return tmp_path


def test_aggregates_hand_computed(run_dir):
    rep = build_report(run_dir)
    cell = rep["cells"]["travel/qlang/local:default/localized"]
    a = cell["answers"]
    assert a["n"] == 4
    # language: 2 correct of 3 applicable (q4 has no language)
    assert a["language_correct"]["mean"] == pytest.approx(2 / 3) and a["language_not_applicable"] == 1
    assert a["f1"]["mean"] == pytest.approx(0.5)
    # q4's second vote is invalid: Fleiss' kappa covers the three items with every vote valid
    ag = cell["agreement"]
    assert ag["items"] == 4 and ag["items_all_valid"] == 3 and ag["invalid_votes"] == {"j1": 1}
    # Fleiss over q1 (c,c), q2 (c,i), q3 (i,i): P_i = 1, 0, 1 -> P-bar 2/3; p_c = p_i = 1/2 -> kappa 1/3
    assert ag["fleiss_kappa"] == pytest.approx(1 / 3)
    # language-strict finals vs human: c/c, i/i, i/c, i/i -> p_o 3/4, p_e = (1*2 + 3*2)/16 = 1/2 -> 0.5
    assert ag["cohen_kappa_vs_human_language_strict"] == pytest.approx(0.5)
    assert ag["human_labelled_items"] == 4
    assert cell["citations"]["valid_model_citation_rate"] == 1.0
    assert rep["retrieval"]["travel/qlang"]["retrieved_languages"] == {"ar": {"en": 1.0}, "en": {"en": 1.0}}
    assert any("not independent" in n for n in rep["notes"])


def test_rendered_reports(run_dir):
    paths = write_reports(run_dir)
    md = paths["md"].read_text(encoding="utf-8")
    assert "## Answers" in md and "## Citations" in md and "Fleiss' kappa 0.333" in md
    assert paths["html"].read_text(encoding="utf-8").count("data:image/png;base64,") >= 3
    assert json.loads(paths["json"].read_text(encoding="utf-8"))["records"] == 4
    assert markdown(build_report(run_dir)) == md


def test_bad_labels_file_names_the_line(run_dir):
    (run_dir / "labels.jsonl").write_text('{"query_id": "q1", "label": "yes"}\n')
    with pytest.raises(CorpusRowError, match=r"labels\.jsonl.*1"):
        build_report(run_dir)


def test_answers_are_tabled_per_question_language():
    from xlrag.evals.report import _per_language

    def stats(lang_ok, char3):
        return {"language_correct": {"mean": lang_ok}, "char3_recall": {"mean": char3}}

    cells = {"xquad/qlang/m/english": {"per_lang": {"ar": stats(0.25, 0.5), "de": stats(1.0, None)}},
             "xquad/qlang/m/translated": {"per_lang": {"de": stats(0.5, 0.75)}}}
    md = "\n".join(_per_language(cells))
    assert "| cell | ar | de |" in md
    assert "| xquad/qlang/m/english | 0.250 | 1.000 |" in md and "| xquad/qlang/m/translated | – | 0.500 |" in md
    assert "| xquad/qlang/m/english | 0.500 | – |" in md and "| xquad/qlang/m/translated | – | 0.750 |" in md
    assert _per_language({"c": {"per_lang": {"de": stats(1.0, 1.0)}}}) == []  # one language: the cell row says it


def test_qrels_without_the_runs_inventory_say_why_retrieval_is_not_scored(run_dir):
    (run_dir / "qrels.jsonl").write_text(json.dumps({"query_id": "q1", "doc_id": "d1", "relevance": 1}) + "\n")
    cfg = yaml.safe_load((run_dir / "experiment.yaml").read_text())
    cfg["datasets"][0]["qrels"] = str(run_dir / "qrels.jsonl")
    (run_dir / "experiment.yaml").write_text(yaml.safe_dump(cfg))
    rep = build_report(run_dir)
    assert "metrics" not in rep["retrieval"]["travel/qlang"]
    assert any("no retrieval metrics, because inventory-travel.json" in n for n in rep["notes"])
    (run_dir / "inventory-travel.json").write_text(json.dumps({"doc_langs": {"d1": "en"}, "counts": {"en": 1}}))
    rep = build_report(run_dir)
    assert rep["retrieval"]["travel/qlang"]["metrics"]["summary"] and not any("inventory" in n for n in rep["notes"])


def test_the_grid_report_reads_no_file(run_dir):
    # the inputs come in memory; the files the config names are gone, so a read would fail
    from xlrag.evals.report import GridInputs, grid_report
    from xlrag.evals.run_folder import read_records

    cfg = ExperimentConfig.model_validate(yaml.safe_load((run_dir / "experiment.yaml").read_text())
                                          | {"datasets": [{"name": "travel", "qrels": str(run_dir / "gone.jsonl")}]})
    records = read_records(run_dir / "records.jsonl")
    (run_dir / "labels.jsonl").unlink()
    inputs = GridInputs(versions={"python": "3.x"},
                        inventories={"travel": {"doc_langs": {"d1": "en"}, "counts": {"en": 1}}},
                        qrels={"travel": {"q1": {"d1": 1}}}, human={"q1": "correct", "q2": "incorrect"})
    rep = grid_report(cfg, records, inputs)
    assert rep["versions"] == {"python": "3.x"}
    assert rep["retrieval"]["travel/qlang"]["metrics"]["summary"]
    assert rep["cells"]["travel/qlang/local:default/localized"]["agreement"]["human_labelled_items"] == 2
    with pytest.raises(ValidationError, match="Extra inputs"):
        GridInputs(labels={})


def _with_modes(run_dir, modes, **extra):
    cfg = yaml.safe_load((run_dir / "experiment.yaml").read_text())
    (run_dir / "experiment.yaml").write_text(yaml.safe_dump(cfg | {"modes": modes} | extra))
    return build_report(run_dir)


def test_a_balanced_grid_says_its_retrieval_table_is_not_what_the_answers_saw(run_dir):
    # the default grid retrieves 20 and shows 3 with no reranker: balanced's first 3 of 20 are not
    # the balanced 3 the chain plans, so the report says which figure scores the shown passages
    assert any(n.startswith("balanced: the retrieval tables score the 20") and "'relevant shown'" in n
               for n in _with_modes(run_dir, ["qlang", "balanced"])["notes"])
    assert not any("relevant shown" in n for n in _with_modes(run_dir, ["qlang", "all"])["notes"])
    # a reranker cuts the same retrieve_k list the table scores
    reranked = _with_modes(run_dir, ["balanced"], rerank={"name": "cohere"})
    assert not any("relevant shown" in n for n in reranked["notes"])
