"""The fingerprint moves with every setting that shapes a record and with the contents of
the input files, and with nothing else; each config names its inert fields once."""

from __future__ import annotations

import json

import pytest

from xlrag.config import EmbedderConfig, LLMConfig
from xlrag.errors import ConfigError
from xlrag.evals.experiment import ExperimentConfig
from xlrag.evals.fingerprint import inert_fields, run_fingerprint
from xlrag.evals.studies import STUDIES


def _grid(tmp_path, **changes) -> ExperimentConfig:
    corpus, queries = tmp_path / "corpus.jsonl", tmp_path / "queries.jsonl"
    if not corpus.exists():
        corpus.write_text(json.dumps({"id": "d", "lang": "en", "text": "t"}) + "\n", encoding="utf-8")
        queries.write_text(json.dumps({"id": "1", "question": "q", "lang": "en"}) + "\n", encoding="utf-8")
    data = {"name": "x", "datasets": [{"name": "mine", "corpus": str(corpus), "queries": str(queries)}], **changes}
    return ExperimentConfig.model_validate(data)


def _fp(tmp_path, **changes) -> str:
    return run_fingerprint(_grid(tmp_path, **changes)).fingerprint


def test_every_inert_name_is_a_field_of_its_model():
    models = [LLMConfig, EmbedderConfig, *(s.get("config") for s in STUDIES.values())]
    for model in models:
        assert inert_fields(model), model.__name__
        assert inert_fields(model) <= set(model.model_fields), model.__name__


@pytest.mark.parametrize("change", [
    {"retrieval": {"retrieve_k": 7}}, {"retrieval": {"k": 2}}, {"retrieval": {"fusion": "zscore"}},
    {"retrieval": {"channels": ["dense"]}}, {"retrieval": {"lexical_translation": "off"}},
    {"retrieval": {"detect_candidates": ["en", "ar"]}},
    {"modes": ["qlang"]}, {"rerank": {"name": "cohere"}},
    {"llms": [{"provider": "local", "max_tokens": 64}]}, {"llms": [{"provider": "local", "temperature": 0.5}]},
    {"variants": [{"name": "localized", "format": "answer"}]}, {"variants": [{"name": "en", "prompt_lang": "en"}]},
    {"variants": [{"name": "localized", "rerank": "attribution"}]}, {"judges": {"judges": [{"seed": 0}]}},
    {"ragas": ["faithfulness"]}, {"generate_sample": {"per_lang": 1}},
])
def test_a_setting_that_shapes_records_changes_it(tmp_path, change):
    assert _fp(tmp_path, **change) != _fp(tmp_path)


@pytest.mark.parametrize("change", [
    {"name": "other"}, {"timeout": 5.0}, {"concurrency": 9}, {"cache": "/elsewhere/cache.sqlite"},
    {"llms": [{"provider": "local", "timeout": 5.0, "max_retries": 0, "n_threads": 1}]},
    {"embedder": {"name": "local", "batch_size": 8}},
    {"published": {"source": "a paper", "findings": ["x"]}},
])
def test_a_setting_that_shapes_no_record_leaves_it(tmp_path, change):
    assert _fp(tmp_path, **change) == _fp(tmp_path)


# Fingerprints of grids made before ``retrieval:`` held the retrieval settings (xlrag at
# f00e4fc, where these settings were top-level keys): a run folder made then must keep its records.
@pytest.mark.parametrize(("new", "fingerprint"), [
    ({}, "3e2dde0a9e4eb6f8"),
    ({"retrieval": {"k": 2, "fusion": "zscore", "channels": ["dense"], "retrieve_k": 7, "lexical_translation": "off"}},
     "f16204c52b493bab"),
])
def test_the_retrieval_section_keeps_the_fingerprints_of_the_flat_layout(tmp_path, new, fingerprint):
    assert _fp(tmp_path, **new) == fingerprint


def test_the_share_margin_counts_only_where_balanced_is_run_and_relabels_no_old_record(tmp_path):
    # balanced's records made before share_margin existed gave every store its share: that is
    # share_margin None, which keeps their fingerprint (xlrag at 947c77f gave this grid
    # c9b6c95417e196c9); the new default makes new records
    made_before = "c9b6c95417e196c9"
    assert _fp(tmp_path, modes=["balanced"], retrieval={"share_margin": None}) == made_before
    assert _fp(tmp_path, modes=["balanced"]) != made_before
    assert _fp(tmp_path, modes=["balanced"], retrieval={"share_margin": 0.5}) not in (made_before, _fp(
        tmp_path, modes=["balanced"]))
    # a grid without balanced retrieves the same whatever the margin (947c77f: feccfab26851f97b)
    assert _fp(tmp_path, modes=["all"], retrieval={"share_margin": 0.5}) == _fp(tmp_path, modes=["all"]) \
        == "feccfab26851f97b"


def test_input_files_count_by_contents_not_by_place(tmp_path):
    before = run_fingerprint(_grid(tmp_path))
    assert set(before.inputs) == {str(tmp_path / "corpus.jsonl"), str(tmp_path / "queries.jsonl")}
    moved = tmp_path / "moved"
    moved.mkdir()
    for name in ("corpus.jsonl", "queries.jsonl"):
        (moved / name).write_bytes((tmp_path / name).read_bytes())
    assert run_fingerprint(_grid(moved)).fingerprint == before.fingerprint
    with (tmp_path / "corpus.jsonl").open("a", encoding="utf-8") as fh:
        fh.write(json.dumps({"id": "e", "lang": "en", "text": "edited"}) + "\n")
    assert run_fingerprint(_grid(tmp_path)).fingerprint != before.fingerprint


def test_a_missing_input_is_one_line_naming_the_dataset(tmp_path):
    cfg = _grid(tmp_path)
    (tmp_path / "corpus.jsonl").unlink()
    with pytest.raises(ConfigError, match=r"^datasets\['mine'\]\.corpus: .*corpus\.jsonl does not exist; fix the path"):
        run_fingerprint(cfg)
