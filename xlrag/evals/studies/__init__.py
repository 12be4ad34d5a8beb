"""The seed studies as runnable experiments: one YAML file each, with ``study: <name>``.

``xlrag eval run FILE --out DIR`` runs a study like an experiment grid (cached, resumable)
and ``xlrag eval report DIR`` rebuilds its report; :data:`STUDIES` is the one list of them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from xlrag.errors import ConfigError

__all__ = ["STUDIES", "Study", "is_study", "load_study", "write_study_reports"]


@dataclass(frozen=True)
class Study:
    config: str  # "module:Class" of each part, imported when the study is used
    runner: str
    report: str
    markdown: str
    figures: str

    def get(self, part: str) -> Any:
        from importlib import import_module

        module, name = getattr(self, part).split(":")
        return getattr(import_module(module), name)


_B, _X, _A = "xlrag.evals.studies.bordirlines", "xlrag.evals.studies.xrag", "xlrag.evals.studies.attribution"
STUDIES: dict[str, Study] = {
    "bordirlines": Study(f"{_B}:BordIRlinesConfig", f"{_B}:BordIRlinesRunner", f"{_B}:bordirlines_report",
                         f"{_B}:bordirlines_markdown", f"{_B}:bordirlines_figures"),
    "xrag": Study(f"{_X}:XRAGConfig", f"{_X}:XRAGRunner", f"{_X}:xrag_report", f"{_X}:xrag_markdown",
                  f"{_X}:xrag_figures"),
    "attribution": Study(f"{_A}:AttributionConfig", f"{_A}:AttributionRunner", f"{_A}:attribution_report",
                         f"{_A}:attribution_markdown", f"{_A}:attribution_figures"),
}


def is_study(path: str | Path) -> bool:
    """Whether the YAML at ``path`` is a study (it has a ``study:`` key), not an experiment grid."""
    from xlrag.evals.experiment import read_yaml

    return "study" in read_yaml(Path(path))


def load_study(path: str | Path) -> Any:
    """The study config in the YAML at ``path``; relative paths are taken from its folder."""
    from xlrag.evals.experiment import read_yaml, validate_as
    from xlrag.validate import did_you_mean

    path = Path(path)
    data = read_yaml(path)
    name = data.get("study")
    if name not in STUDIES:
        raise ConfigError(f"{path}: unknown study {name!r}{did_you_mean(str(name), STUDIES)}; "
                          f"use one of: {', '.join(STUDIES)}")
    return validate_as(STUDIES[name].get("config"), data, path).resolved(path.resolve().parent)


def write_study_reports(run_dir: str | Path) -> dict[str, Path]:
    """report.json, report.md and report.html (figures embedded) from a study's run folder."""
    import json

    from xlrag.evals.report import html_document
    from xlrag.evals.run_folder import RECORDS, read_records

    run_dir = Path(run_dir)
    cfg = load_study(run_dir / "experiment.yaml")
    study = STUDIES[cfg.study]
    report = study.get("report")(cfg, read_records(run_dir / RECORDS), study.get("runner").not_run(cfg))
    md = study.get("markdown")(report)
    paths = {"json": run_dir / "report.json", "md": run_dir / "report.md", "html": run_dir / "report.html"}
    paths["json"].write_text(json.dumps(report, indent=2, ensure_ascii=False), encoding="utf-8")
    paths["md"].write_text(md, encoding="utf-8")
    paths["html"].write_text(html_document(report["experiment"], md, study.get("figures")(report)), encoding="utf-8")
    return paths
