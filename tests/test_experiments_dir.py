"""Every file in experiments/ loads: a study by its `study:` key, the others as grids."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from xlrag.evals.experiment import ExperimentConfig, load_experiment
from xlrag.evals.studies import load_run_config

EXPERIMENTS = sorted((Path(__file__).resolve().parent.parent / "experiments").glob("*.yaml"))


def test_there_are_experiments():
    assert {p.stem for p in EXPERIMENTS} >= {"bordirlines", "xrag", "attribution", "mrag_prompts"}


@pytest.mark.parametrize("path", EXPERIMENTS, ids=lambda p: p.stem)
def test_each_experiment_loads_and_runs_locally_by_default(path):
    cfg = load_run_config(path)
    grid = isinstance(cfg, ExperimentConfig)
    assert grid == ("study" not in yaml.safe_load(path.read_text(encoding="utf-8")))
    llms = (cfg.llms if grid else
            [cfg.llm, *(m for m in (getattr(cfg, "checker", None), getattr(cfg, "rerank_checker", None)) if m)])
    assert llms and all(m.provider == "local" for m in llms)  # offline by default: one line to change


def test_mrag_grid_is_three_variants_by_four_settings():
    cfg = load_experiment(next(p for p in EXPERIMENTS if p.stem == "mrag_prompts"))
    assert cfg.modes == ["qlang", "en_only", "qlang_en", "all"]
    assert [(v.prompt_lang, v.language_instruction) for v in cfg.variants] == [("en", False), (None, False),
                                                                              (None, True)]
    assert len(list(cfg.cells())) == 12
