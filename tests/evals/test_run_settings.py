"""`xlrag eval run` reads the user's xlrag config like every other command: the experiment YAML
first, then what xlrag.yaml or an XLRAG_* variable sets, then the experiment's defaults; the
run folder keeps the values as run, and its report never reads the user's config."""

from __future__ import annotations

import os

import pytest
import yaml

from tests.clitools import error_line, run
from tests.conftest import index_copy
from xlrag.config import LLMConfig, load_config
from xlrag.errors import ConfigError
from xlrag.evals.experiment import ExperimentConfig, with_settings
from xlrag.evals.run_folder import RECORDS, read_records
from xlrag.evals.studies import load_run_config
from xlrag.validate import DEFAULT_K


@pytest.fixture(autouse=True)
def _no_xlrag_environment(monkeypatch):
    for key in [k for k in os.environ if k.upper().startswith("XLRAG_")]:
        monkeypatch.delenv(key)


def _yaml(path, data):
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def test_the_experiment_beats_the_xlrag_config_which_beats_the_defaults(tmp_path, monkeypatch):
    exp = _yaml(tmp_path / "exp.yaml", {"name": "t", "datasets": [{"name": "travel"}], "retrieval": {"k": 4}})
    user = _yaml(tmp_path / "xlrag.yaml", {"retrieval": {"k": 2, "fusion": "score", "retrieve_k": 30},
                                            "llm": {"max_tokens": 99},
                                            "embedder": {"name": "openai", "model": "text-embedding-3-small"}})
    cfg = load_run_config(exp, load_config(user))
    assert cfg.retrieval.k == 4  # the experiment's own
    assert (cfg.retrieval.fusion, cfg.retrieval.retrieve_k) == ("score", 30)  # the user's
    assert cfg.llms == [LLMConfig(max_tokens=99)]
    assert (cfg.embedder.name, cfg.embedder.model) == ("openai", "text-embedding-3-small")
    assert cfg.modes == ["qlang_en"] and cfg.rerank.name == "none"  # set nowhere: the experiment's defaults
    # a variable beats the file, even one equal to the default (it is set all the same)
    monkeypatch.setenv("XLRAG_RETRIEVAL__FUSION", "zscore")
    assert load_run_config(exp, load_config(user)).retrieval.fusion == "zscore"
    # no settings (a run folder's snapshot, the Python API): nothing from any config
    monkeypatch.setenv("XLRAG_RETRIEVAL__FUSION", "score")
    bare = load_run_config(exp)
    assert (bare.retrieval.fusion, bare.retrieval.retrieve_k, bare.embedder.name, bare.llms) == (
        "rrf", 20, "local", [LLMConfig()])


def test_only_what_the_user_set_counts_not_the_configs_defaults(tmp_path):
    # the user set retrieval.mode, not k: the mode is filled in, k stays the experiment's own
    # default (the one default of k, xlrag.validate.DEFAULT_K, since #35)
    exp = _yaml(tmp_path / "exp.yaml", {"name": "t", "datasets": [{"name": "travel"}]})
    user = load_config(_yaml(tmp_path / "xlrag.yaml", {"retrieval": {"mode": "balanced"}}))
    assert with_settings(ExperimentConfig, {"name": "t", "datasets": [{"name": "travel"}]}, user)[1] == ["modes"]
    cfg = load_run_config(exp, user)
    assert (cfg.retrieval.k, cfg.modes) == (DEFAULT_K, ["balanced"])


def test_the_retrieval_settings_are_under_retrieval_only(tmp_path):
    exp = _yaml(tmp_path / "exp.yaml", {"name": "t", "datasets": [{"name": "travel"}], "retrieval": {"k": 4}})
    user = load_config(_yaml(tmp_path / "xlrag.yaml", {"retrieval": {"k": 2, "retrieve_k": 30}}))
    cfg = load_run_config(exp, user)
    # the experiment's own setting beats the user's config
    assert (cfg.retrieval.k, cfg.retrieval.retrieve_k) == (4, 30)
    assert not hasattr(cfg, "retrieve_k")
    # 0.1.0 never shipped the top-level keys: one is an unknown key, named
    old = _yaml(tmp_path / "old.yaml", {"name": "t", "datasets": [{"name": "travel"}], "k": 4})
    with pytest.raises(ConfigError, match=r"\bk\b"):
        load_run_config(old, user)
    moded = _yaml(tmp_path / "mode.yaml", {"name": "t", "datasets": [{"name": "travel"}], "retrieval": {"mode": "all"}})
    with pytest.raises(ConfigError, match=r"move retrieval\.mode there"):
        load_run_config(moded)


def test_a_dumped_run_config_reloads_as_it_was(tmp_path):
    exp = _yaml(tmp_path / "exp.yaml", {"name": "t", "datasets": [{"name": "travel"}], "modes": ["all", "qlang"],
                                        "retrieval": {"k": 4, "channels": ["dense"]}})
    cfg = load_run_config(exp)
    dumped = cfg.model_dump(mode="json")
    assert "mode" not in dumped["retrieval"]  # the grid's modes are its own
    assert ExperimentConfig.model_validate(dumped) == cfg


def test_a_study_takes_its_llm_from_the_xlrag_config_when_it_names_none(tmp_path):
    user = load_config(_yaml(tmp_path / "xlrag.yaml", {"llm": {"provider": "local", "model": "gemma-3-270m"},
                                                        "retrieval": {"k": 7}}))
    study = {"study": "xrag", "name": "x", "langs": ["de"], "per_lang": 1}
    cfg = load_run_config(_yaml(tmp_path / "a.yaml", study), user)
    assert cfg.llm.model == "gemma-3-270m"
    own = load_run_config(_yaml(tmp_path / "b.yaml", {**study, "llm": {"provider": "local", "max_tokens": 64}}), user)
    assert (own.llm.model, own.llm.max_tokens) == (None, 64)


def test_a_value_from_the_config_that_does_not_fit_says_where_it_came_from(tmp_path):
    exp = _yaml(tmp_path / "exp.yaml", {"name": "t", "datasets": [{"name": "travel"}], "retrieval": {"retrieve_k": 5}})
    cfg = _yaml(tmp_path / "xlrag.yaml", {"retrieval": {"k": 8}})
    line = error_line(run("eval", "run", exp, "--out", tmp_path / "run", "--config", cfg))
    assert "with retrieval.k from the xlrag config" in line
    assert "retrieval.k=8 passages shown but only retrieval.retrieve_k=5" in line


def test_eval_run_reads_the_config_and_the_run_folder_keeps_it(tmp_path, travel_run_index):
    index = index_copy(travel_run_index, tmp_path)  # the vendored Travel corpus, as a run builds it
    exp = _yaml(tmp_path / "exp.yaml", {"name": "t", "llms": [], "datasets": [
        {"name": "travel", "sample": {"per_lang": 1}, "index_dir": str(index)}]})
    cfg = _yaml(tmp_path / "xlrag.yaml", {"retrieval": {"fusion": "score", "retrieve_k": 7, "mode": "all"}})
    out = tmp_path / "run"
    res = run("eval", "run", exp, "--out", out, "--config", cfg)
    assert res.exit_code == 0, res.output
    line = next(x for x in res.output.splitlines() if x.startswith("note: from the xlrag config (not set in"))
    assert sorted(line.rsplit(": ", 1)[1].split(", ")) == ["modes", "retrieval.fusion", "retrieval.retrieve_k"]
    snap = yaml.safe_load((out / "experiment.yaml").read_text(encoding="utf-8"))
    assert (snap["retrieval"]["fusion"], snap["retrieval"]["retrieve_k"], snap["modes"], snap["embedder"]["name"]) == (
        "score", 7, ["all"], "local")
    recs = read_records(out / RECORDS)
    assert len(recs) == 2 and all(len(r["retrieved"]) == 7 for r in recs)
    # the report rebuilds from the folder alone, whatever the user's config says now
    _yaml(tmp_path / "xlrag.yaml", {"retrieval": {"fusion": "rrf"}})
    res = run("eval", "report", out, "--json")
    assert res.exit_code == 0 and "travel/all" in res.output

    # the embedder comes from the config too: a vendor's fails here for want of its key, not
    # silently embedding with the bundled model
    _yaml(cfg, {"embedder": {"name": "openai"}})
    res = run("eval", "run", exp, "--out", tmp_path / "run2", "--config", cfg)
    assert res.exit_code == 2 and "OPENAI_API_KEY" in res.output.splitlines()[-1]
