"""Every kind of run as one table: the experiment grid and the seed studies.

A run is one YAML file: a grid when it has no ``study:`` key, else ``study: <name>``.
``xlrag eval run FILE --out DIR`` runs it (cached, resumable) and ``xlrag eval report DIR``
rebuilds its report; :data:`STUDIES` is the one list of them, and the three functions below
are all the CLI needs: :func:`load_run_config`, :func:`make_runner`, :func:`write_reports`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from xlrag.errors import ConfigError
from xlrag.text import capped
from xlrag.validate import did_you_mean

if TYPE_CHECKING:
    from xlrag.config import XlragConfig
    from xlrag.evals.run_folder import Progress

__all__ = ["GRID", "STUDIES", "Study", "load_run_config", "make_runner", "study_of", "write_reports"]

GRID = "grid"


@dataclass(frozen=True)
class Study:
    """Each part as "module:name", imported when the study is used: the config model, the
    runner (a :class:`~xlrag.evals.studies.base.StudyRun`), and the report, pure over
    ``(config, records, runner.report_inputs(...))``, with its Markdown and figures."""

    config: str
    runner: str
    report: str
    markdown: str
    figures: str

    def get(self, part: str) -> Any:
        from importlib import import_module

        module, name = getattr(self, part).split(":")
        return getattr(import_module(module), name)


_R = "xlrag.evals.report"
_B, _X, _A = "xlrag.evals.studies.bordirlines", "xlrag.evals.studies.xrag", "xlrag.evals.studies.attribution"
STUDIES: dict[str, Study] = {
    GRID: Study("xlrag.evals.experiment:ExperimentConfig", "xlrag.evals.runner:ExperimentRunner",
                f"{_R}:grid_report", f"{_R}:markdown", f"{_R}:figures"),
    "bordirlines": Study(f"{_B}:BordIRlinesConfig", f"{_B}:BordIRlinesRunner", f"{_B}:bordirlines_report",
                         f"{_B}:bordirlines_markdown", f"{_B}:bordirlines_figures"),
    "xrag": Study(f"{_X}:XRAGConfig", f"{_X}:XRAGRunner", f"{_X}:xrag_report", f"{_X}:xrag_markdown",
                  f"{_X}:xrag_figures"),
    "attribution": Study(f"{_A}:AttributionConfig", f"{_A}:AttributionRunner", f"{_A}:attribution_report",
                         f"{_A}:attribution_markdown", f"{_A}:attribution_figures"),
}


def study_of(config: Any) -> Study:
    """The table's row for a loaded run config (a grid's config has no ``study`` field)."""
    return STUDIES[getattr(config, "study", GRID)]


def load_run_config(path: str | Path, settings: XlragConfig | None = None) -> Any:
    """The run config in the YAML at ``path`` (a grid when it has no ``study:`` key); relative
    paths are taken from its folder. ``settings``: the user's xlrag config, whose explicitly set
    values fill what the YAML leaves out of the run config's ``FROM_SETTINGS`` (``xlrag eval
    run`` passes it; a run folder's snapshot is read without, as it was run)."""
    from xlrag.evals.experiment import (
        filled_from,
        load_experiment,
        read_yaml,
        validate_as,
        with_settings,
    )

    path = Path(path)
    data = read_yaml(path)
    if "study" not in data:
        return load_experiment(path, settings)
    name = data["study"]
    studies = [s for s in STUDIES if s != GRID]
    if name not in studies:
        raise ConfigError(f"{path}: unknown study {capped(name)}{did_you_mean(str(name), studies)}; "
                          f"use one of: {', '.join(studies)}, or no study: key for an experiment grid")
    model = STUDIES[name].get("config")
    data, filled = with_settings(model, data, settings)
    return validate_as(model, data, filled_from(path, filled)).resolved(path.resolve().parent)


def make_runner(config: Any, out: str | Path, progress: Progress | None = None) -> Any:
    """The runner of ``config`` into the run folder ``out`` (``progress(what, done, total)``)."""
    return study_of(config).get("runner")(config, out, progress)


def write_reports(run_dir: str | Path) -> dict[str, Path]:
    """report.json, report.md and report.html (figures embedded) from a run folder: its inputs
    are read here, the report computed from them."""
    from xlrag.evals.run_folder import RunFolder
    from xlrag.pages import html_document

    folder = RunFolder(run_dir)
    cfg = load_run_config(folder.config_path)
    study = study_of(cfg)
    runner = study.get("runner")
    report = study.get("report")(cfg, folder.records(runner.record_model), runner.report_inputs(cfg, folder))
    md = study.get("markdown")(report)
    return folder.write_reports(report, md, html_document(report["experiment"], md, study.get("figures")(report)))
