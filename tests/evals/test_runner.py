"""The experiment runner end to end: real index, real local models, records, cache, report."""

from __future__ import annotations

import json

import pytest
import yaml

from tests.conftest import index_copy
from xlrag.errors import ConfigError
from xlrag.evals.experiment import load_experiment
from xlrag.evals.run_folder import RECORDS, read_records
from xlrag.evals.runner import ExperimentRunner
from xlrag.evals.studies import write_reports

GEMMA = {"provider": "local", "model": "gemma-3-270m", "max_tokens": 48}
EXPERIMENT = {
    "name": "tiny",
    "datasets": [{"name": "travel", "sample": {"per_lang": 1}}],
    "modes": ["qlang", "all"],
    "generate_modes": ["qlang"],
    "retrieval": {"retrieve_k": 5, "k": 2},
    "llms": [GEMMA],
    "judges": {"judges": [{**GEMMA, "seed": 1, "max_tokens": 64}, {**GEMMA, "seed": 2, "max_tokens": 64}]},
}


def _write(tmp_path, data, name="exp.yaml"):
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


@pytest.mark.slow
def test_run_rerun_report(tmp_path):
    # one index for every run of the test: building it is the slow part
    exp = {**EXPERIMENT, "datasets": [{"name": "travel", "sample": {"per_lang": 1}, "index_dir": str(tmp_path / "ix")}]}
    cfg = load_experiment(_write(tmp_path, exp))
    out = tmp_path / "run"
    runner = ExperimentRunner(cfg, out)
    first = runner.run()
    runner.close()
    assert first["written"] == 4 and first["failed"] == 0 and first["llm_calls"] > 0
    recs = read_records(out / RECORDS)
    assert sorted(r["mode"] for r in recs) == ["all", "all", "qlang", "qlang"]
    assert {r["lang"] for r in recs} == {"ar", "en"}
    # `all` is only retrieved: no answer, no model call
    assert all(r["llm"] is None and "answer" not in r and len(r["retrieved"]) == 5 for r in recs if r["mode"] == "all")
    for r in (r for r in recs if r["mode"] == "qlang"):
        assert len(r["retrieved"]) == 5 and len(r["shown"]) == 2
        assert r["judges"]["verdict"] in ("correct", "incorrect", "invalid")
        assert len(r["judges"]["votes"]) == 2
        assert r["language"]["status"] in ("correct", "wrong", "undetected", "not_applicable")

    # the same folder: everything is there, nothing is redone
    again = ExperimentRunner(cfg, out)
    second = again.run()
    again.close()
    assert second == {"written": 0, "skipped": 4, "failed": 0, "retried": 0, "other_settings": 0, "llm_calls": 0}

    # a fresh folder sharing the cache: every record again, not one model call
    cached = load_experiment(_write(tmp_path, {**exp, "cache": str(out / "cache.sqlite")}, "exp2.yaml"))
    fresh = ExperimentRunner(cached, tmp_path / "run2")
    third = fresh.run()
    fresh.close()
    assert third["written"] == 4 and third["llm_calls"] == 0
    replayed = {r["key"]: r.get("raw_output") for r in read_records(tmp_path / "run2" / RECORDS)}
    assert replayed == {r["key"]: r.get("raw_output") for r in recs}

    paths = write_reports(out)
    report = json.loads(paths["json"].read_text(encoding="utf-8"))
    assert report["records"] == 4 and report["failed"] == 0
    assert set(report["retrieval"]) == {"travel/qlang", "travel/all"}
    # the Travel index holds Travel's languages only, not the other demo corpus's
    assert {lang for dist in report["retrieval"]["travel/all"]["retrieved_languages"].values() for lang in dist} \
        <= {"ar", "en"}
    metrics = report["retrieval"]["travel/all"]["metrics"]
    assert set(metrics["summary"]) >= {"same_lang", "cross_lang"}
    assert any("not independent" in n for n in report["notes"])  # one model as the panel
    cell = report["cells"]["travel/qlang/local:gemma-3-270m/localized"]
    assert cell["answers"]["n"] == 2 and cell["agreement"]["judges"] == ["local:gemma-3-270m:seed1",
                                                                          "local:gemma-3-270m:seed2"]
    html = paths["html"].read_text(encoding="utf-8")
    assert html.count("data:image/png;base64,") >= 3
    assert "## Judge agreement" in paths["md"].read_text(encoding="utf-8")


def test_generate_modes_answer_some_modes_and_retrieve_the_rest(tmp_path):
    cfg = load_experiment(_write(tmp_path, {
        "name": "x", "datasets": [{"name": "travel"}], "modes": ["qlang", "qlang_en", "balanced"],
        "generate_modes": ["balanced"], "llms": [GEMMA, {**GEMMA, "seed": 3}],
        "variants": [{"name": "localized"}, {"name": "english", "prompt_lang": "en"}]}))
    cells = [(c.mode, c.llm, c.variant) for c in cfg.cells()]
    assert cells[:2] == [("qlang", None, "-"), ("qlang_en", None, "-")]
    assert sorted(cells[2:]) == sorted(("balanced", llm, v)
                                       for llm in ("local:gemma-3-270m", "local:gemma-3-270m[seed=3]")
                                        for v in ("localized", "english"))
    # no LLM at all: one retrieval-only cell per mode, not one per prompt variant
    bare = load_experiment(_write(tmp_path, {"name": "y", "datasets": [{"name": "travel"}], "modes": ["qlang"],
                                             "llms": [], "variants": [{"name": "a"}, {"name": "b"}]}, "y.yaml"))
    assert [(c.mode, c.llm, c.variant) for c in bare.cells()] == [("qlang", None, "-")]


def test_generate_sample_answers_a_part_and_retrieves_every_query_once_per_mode(tmp_path):
    from xlrag.evals.experiment import sample_queries

    cfg = load_experiment(_write(tmp_path, {
        "name": "x", "datasets": [{"name": "travel"}], "modes": ["all", "balanced"],
        "generate_modes": ["balanced"], "generate_sample": {"per_lang": 2, "seed": 1}, "llms": [GEMMA]}))
    queries = [{"id": f"{lang}{i}", "lang": lang} for lang in ("ar", "en") for i in range(5)]
    plan = cfg.plan("travel", queries)
    answered = {q["id"] for q in sample_queries(queries, cfg.generate_sample)}
    assert len(answered) == 4
    for mode in ("all", "balanced"):
        ids = [q["id"] for c, q in plan if c.mode == mode]
        assert sorted(ids) == sorted(q["id"] for q in queries)  # each query retrieved once per mode
    assert {q["id"] for c, q in plan if c.llm is not None} == answered
    assert all(c.mode == "balanced" for c, _ in plan if c.llm is not None)
    # without the key, every query of an answered mode is answered
    full = load_experiment(_write(tmp_path, {**cfg.model_dump(mode="json", exclude={"generate_sample"})}, "f.yaml"))
    assert sum(c.llm is not None for c, _ in full.plan("travel", queries)) == 10


@pytest.mark.slow
def test_attribution_rerank_variant(tmp_path, travel_run_index):
    from xlrag.chains.attribution_rerank import KEPT, NONE, RERANKED

    cfg = load_experiment(_write(tmp_path, {
        "name": "attr", "datasets": [{"name": "travel", "sample": {"per_lang": 1},
                                      "index_dir": index_copy(travel_run_index, tmp_path)}], "modes": ["qlang"],
        "retrieval": {"retrieve_k": 2, "k": 2}, "llms": [GEMMA], "attribution_checker": {**GEMMA, "max_tokens": 64},
        "variants": [{"name": "plain"}, {"name": "attributed", "rerank": "attribution"}]}))
    runner = ExperimentRunner(cfg, tmp_path / "run")
    assert runner.run()["failed"] == 0
    runner.close()
    recs = {(r["variant"], r["query_id"]): r for r in read_records(tmp_path / "run" / RECORDS)}
    assert len(recs) == 4
    for (variant, qid), r in recs.items():
        flags = set(r["flags"]) & {RERANKED, KEPT, NONE}
        if variant == "plain":
            assert not flags
        else:  # the same answer (one prompt, one cached call), then the check's verdict on it
            assert len(flags) == 1 and r["raw_output"] == recs[("plain", qid)]["raw_output"]
            if RERANKED in flags:
                assert r["citations"][0]["source"] in ("model", "attribution")
    md = write_reports(tmp_path / "run")["md"].read_text(encoding="utf-8")
    assert "top-cited relevant" in md and "travel/qlang/local:gemma-3-270m/attributed" in md


def test_torn_last_line_is_cut_on_resume(tmp_path):
    path = tmp_path / RECORDS
    path.write_bytes(b'{"key": "a"}\n{"key": "b"}\n{"key": "c", "ans')
    assert [r["key"] for r in read_records(path)] == ["a", "b"]
    assert path.read_bytes().endswith(b'"ans')  # reading alone changes nothing
    read_records(path, repair=True)
    assert path.read_bytes() == b'{"key": "a"}\n{"key": "b"}\n'


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"datasets": [{"name": "travel"}]}, "name: Field required"),
        ({"name": "x", "datasets": [{"name": "travel"}], "modes": ["qlnag"]}, "did you mean 'qlang'"),
        ({"name": "x", "datasets": [{"name": "mine"}]}, "give its corpus and queries"),
        ({"name": "x", "datasets": [{"name": "travel"}], "retrieval": {"k": 30, "retrieve_k": 20}},
         "only retrieval.retrieve_k=20"),
        ({"name": "x", "datasets": [{"name": "travel"}], "llm": [{}]}, "llm: Extra inputs"),
        ({"name": "x", "datasets": [{"name": "travel"}, {"name": "travel"}]}, "appears twice"),
        ({"name": "x", "datasets": [{"name": "travel"}], "generate_modes": ["all"]}, "not in modes"),
        ({"name": "x", "datasets": [{"name": "travel"}], "variants": [{"rerank": "atribution"}]}, "'attribution'"),
    ],
)
def test_bad_experiments_fail_in_one_line(tmp_path, data, message):
    with pytest.raises(ConfigError, match=message) as e:
        load_experiment(_write(tmp_path, data))
    assert "\n" not in str(e.value)


def test_missing_experiment_file(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        load_experiment(tmp_path / "nope.yaml")


@pytest.mark.slow
def test_ragas_scores_land_in_records_and_report(tmp_path, travel_run_index):
    exp = {"name": "ragas", "modes": ["qlang"], "retrieval": {"retrieve_k": 3, "k": 2}, "llms": [GEMMA],
           "datasets": [{"name": "travel", "sample": {"per_lang": 1, "langs": ["en"]},
                         "index_dir": index_copy(travel_run_index, tmp_path)}],
           "ragas": ["faithfulness"]}
    cfg = load_experiment(_write(tmp_path, exp))
    runner = ExperimentRunner(cfg, tmp_path / "run")
    assert runner.run()["failed"] == 0
    runner.close()
    (rec,) = read_records(tmp_path / "run" / RECORDS)
    score = rec["ragas"]["faithfulness"]
    # a score in [0, 1], or null with the reason: never NaN in JSON, never a dropped row
    assert (score["value"] is not None and 0 <= score["value"] <= 1) or score["reason"]
    report = json.loads(write_reports(tmp_path / "run")["json"].read_text(encoding="utf-8"))
    agg = report["cells"]["travel/qlang/local:gemma-3-270m/localized"]["answers"]["ragas_faithfulness"]
    assert agg["failed"] + agg["n"] == 1


def test_ragas_scores_on_its_own_llm_when_given(tmp_path):
    """`ragas_llm` replaces the generator as Ragas's LLM (say, more max_tokens for NLI verdicts),
    even when both have the same label."""
    from xlrag.config import LLMConfig
    from xlrag.evals.ragas_adapter import ragas_llm

    exp = {"name": "ragas", "modes": ["qlang"], "llms": [GEMMA], "ragas": ["faithfulness"],
           "ragas_llm": {**GEMMA, "max_tokens": 512},
           "datasets": [{"name": "travel", "index_dir": str(tmp_path / "ix")}]}
    runner = ExperimentRunner(load_experiment(_write(tmp_path, exp)), tmp_path / "run")
    scorer, generator = runner.ragas().llm, ragas_llm(runner.llm(LLMConfig(**GEMMA)))
    assert scorer.label == generator.label == "local:gemma-3-270m"
    assert scorer.key != generator.key  # 512 tokens, not the generator's 48


def test_mrag_prompt_variants_differ_only_where_they_should():
    """English instruction / translated instruction / translated + "answer in {language}"."""
    from xlrag.evals.experiment import Variant
    from xlrag.prompts import PromptLibrary

    shipped = PromptLibrary()
    english = Variant(name="en", prompt_lang="en", language_instruction=False).prompts({"es"})
    translated = Variant(name="tr", language_instruction=False).prompts({"es"})
    assert Variant(name="tr+lang").prompts({"es"}) is None  # the shipped prompts: translated + the line

    def system(lib):
        return lib.build_messages("es", "¿Quién ganó?", ["doc"], "answer")[0][1]

    line = shipped.render("answer_language", "es")
    assert system(shipped) == shipped.render("system", "es") + "\n\n" + line
    assert system(translated) == shipped.render("system", "es")  # no gap where the line was
    assert system(english) == shipped.render("system", "en") and "español" not in system(english)
    assert "Responde en español" in line and "entidades" in line


@pytest.mark.slow
def test_translate_mode_translates_through_the_cache_and_published_figures_are_reported(tmp_path, travel_run_index):
    exp = {"name": "tr", "modes": ["translate", "all"], "retrieval": {"retrieve_k": 5, "fusion": "score"}, "llms": [],
           "translator": {**GEMMA, "max_tokens": 40},
           "datasets": [{"name": "travel", "sample": {"per_lang": 1},
                         "index_dir": index_copy(travel_run_index, tmp_path)}],
           "published": {"source": "A paper, Table 2.", "columns": ["Hit@20"], "rows": {"ar->en": [0.55]}}}
    cfg = load_experiment(_write(tmp_path, {**exp, "cache": str(tmp_path / "calls.sqlite")}))
    runner = ExperimentRunner(cfg, tmp_path / "run")
    first = runner.run()
    runner.close()
    assert first["failed"] == 0 and first["written"] == 4 and first["llm_calls"] == 2  # one translation a query
    rerun = ExperimentRunner(cfg, tmp_path / "run2")  # a fresh run folder, the same call cache
    assert rerun.run()["llm_calls"] == 0
    rerun.close()
    recs = [r for r in read_records(tmp_path / "run" / RECORDS) if r["mode"] == "translate"]
    assert len(recs) == 2 and all(len(r["retrieved"]) == 5 for r in recs)
    md = write_reports(tmp_path / "run")["md"].read_text(encoding="utf-8")
    assert "## Published figures" in md and "| ar->en | 0.550 |" in md and "| query->doc |" in md


@pytest.mark.parametrize(("data", "message"), [
    ({"retrieval": {"fusion": "zscor"}}, "did you mean 'zscore'"),
    ({"published": {"source": "x", "columns": ["a", "b"], "rows": {"r": [1.0]}}}, "1 values for 2 columns"),
    ({"published": {"source": "x"}}, "rows \\(with columns\\) or findings"),
    ({"published": {"source": "x", "rows": {"r": [1.0]}}}, "rows need columns"),
])
def test_bad_retrieval_settings_fail_in_one_line(tmp_path, data, message):
    with pytest.raises(ConfigError, match=message):
        load_experiment(_write(tmp_path, {"name": "x", "datasets": [{"name": "travel"}], **data}))


def test_published_findings_in_words_are_reported_beside_the_run():
    from pathlib import Path

    from xlrag.evals.report import markdown

    cfg = load_experiment(Path(__file__).parents[2] / "experiments" / "mrag_prompts.yaml")
    assert cfg.published is not None and not cfg.published.rows and len(cfg.published.findings) == 4
    report = {"experiment": cfg.name, "records": 0, "failed": 0, "notes": [], "retrieval": {}, "cells": {},
              "published": cfg.published.model_dump()}
    md = markdown(report)
    assert "## Published figures" in md and "| |" not in md  # no empty table
    assert "- task-specific prompt engineering is needed" in md and "No published number is quoted" in md


def test_a_dataset_read_without_its_files_is_a_one_line_error():
    # a DatasetConfig made in Python, not by load_experiment, has no paths for a built-in
    # dataset: a ConfigError, not read_objects(None)'s TypeError (mypy found it)
    from xlrag.evals.experiment import DatasetConfig
    from xlrag.evals.runner import _load_queries

    with pytest.raises(ConfigError, match="load_experiment"):
        _load_queries(DatasetConfig(name="travel"))
