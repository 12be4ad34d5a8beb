"""The experiment grid's report: ``report.json``, ``report.md``, ``report.html``.

:func:`grid_report` is computed from the config, the records and :class:`GridInputs` (what
else the run folder and the config name: versions, inventories, qrels, human labels, the
judges' calibration), which :func:`read_inputs` reads at the edge; so ``xlrag eval report
DIR`` rebuilds the same reports at any time, including from a run that is still going or
was cut short. Means come with 95% bootstrap intervals.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from xlrag.errors import CorpusRowError
from xlrag.evals.agreement import fleiss_kappa, fleiss_table
from xlrag.evals.citations import citation_summary, citation_vs_inclusion
from xlrag.evals.experiment import ExperimentConfig, Published
from xlrag.evals.run_folder import RunFolder
from xlrag.evals.stats import bootstrap_ci
from xlrag.indexes.policies import plans_language_shares
from xlrag.jsonl import read_objects
from xlrag.judges.panel import VERDICTS
from xlrag.pages import citation_inclusion_figure, html_document, png, pyplot

__all__ = ["GridInputs", "build_report", "grid_report", "read_inputs"]


def _mean_ci(values: Iterable[float | None]) -> dict[str, Any]:
    vals = [float(v) for v in values if v is not None and not (isinstance(v, float) and math.isnan(v))]
    if not vals:
        return {"mean": None, "ci95": None, "n": 0}
    mean, lo, hi = bootstrap_ci(vals)
    return {"mean": mean, "ci95": [lo, hi], "n": len(vals)}


def _answers(recs: list[dict]) -> dict[str, Any]:
    gen = [r for r in recs if "answered" in r]
    if not gen:
        return {}
    out: dict[str, Any] = {"n": len(gen), "answered": _mean_ci(float(r["answered"]) for r in gen)}
    lang = [r["language"] for r in gen]
    applicable = [v for v in lang if v["status"] != "not_applicable"]
    out["language_correct"] = _mean_ci(float(v["status"] == "correct") for v in applicable)
    out["language_not_applicable"] = len(lang) - len(applicable)
    out["language_detected"] = dict(Counter(str(v["detected"]) for v in lang).most_common())
    for m in ("char3_recall", "em", "f1"):
        out[m] = _mean_ci(r["metrics"][m] for r in gen if "metrics" in r)
    names = sorted({m for r in gen for m in (r.get("ragas") or {})})
    for m in names:
        scored = [r["ragas"][m] for r in gen if m in (r.get("ragas") or {})]
        out[f"ragas_{m}"] = _mean_ci(x["value"] for x in scored) | {
            "failed": sum(x["value"] is None for x in scored),
            "notes": sorted({x["note"] for x in scored if x.get("note")})}
    judged = [r["judges"] for r in gen if r.get("judges")]
    if judged:
        out["judge_accuracy"] = _mean_ci(float(j["verdict"] == "correct") for j in judged if j["verdict"] != "invalid")
        out["judge_accuracy_language_strict"] = _mean_ci(
            float(j["final"] == "correct") for j in judged if j["final"] != "invalid")
        out["judge_invalid_panels"] = sum(j["verdict"] == "invalid" for j in judged)
        out["judge_disagreement"] = _mean_ci(float(j["disagreement"]) for j in judged)
    return out


def read_labels(path: Path) -> dict[str, str]:
    """Human verdicts ``{"query_id", "label"}`` per line; a bad row is an error naming its line."""
    labels: dict[str, str] = {}
    for n, row in read_objects(path, "human labels"):
        if row.get("label") not in VERDICTS or not row.get("query_id"):
            raise CorpusRowError(path, n, f"each line needs query_id and a label in {list(VERDICTS)}",
                                 skippable=False)
        labels[str(row["query_id"])] = row["label"]
    return labels


def _agreement(recs: list[dict], human: dict[str, str] | None = None) -> dict[str, Any]:
    panels = [r["judges"] for r in recs if r.get("judges")]
    if not panels:
        return {}
    labels = [v["judge"] for v in panels[0]["votes"]]
    complete = [[v["verdict"] for v in p["votes"]] for p in panels
                if all(v["verdict"] != "invalid" for v in p["votes"])]
    invalid = Counter(v["judge"] for p in panels for v in p["votes"] if v["verdict"] == "invalid")
    kappa = fleiss_kappa(fleiss_table(complete, VERDICTS)) if len(labels) > 1 and complete else None
    per_judge = {j: _mean_ci(float(v["verdict"] == "correct") for p in panels for v in p["votes"]
                             if v["judge"] == j and v["verdict"] != "invalid") for j in labels}
    out = {"judges": labels, "fleiss_kappa": kappa, "items_all_valid": len(complete),
           "items": len(panels), "invalid_votes": dict(invalid), "accuracy_per_judge": per_judge}
    if human:
        from xlrag.evals.agreement import cohen_kappa

        for key, field in (("cohen_kappa_vs_human", "verdict"), ("cohen_kappa_vs_human_language_strict", "final")):
            pairs = [(r["judges"][field], human[r["query_id"]]) for r in recs
                     if r.get("judges") and r["query_id"] in human and r["judges"][field] != "invalid"]
            out[key] = cohen_kappa([a for a, _ in pairs], [b for _, b in pairs]) if pairs else None
            out["human_labelled_items"] = len(pairs)
    return out


def _calibration(panel: Any, data: dict[str, Any] | None) -> dict[str, Any]:
    """Each judge's accuracy on items of known truth (``xlrag eval calibrate``), matched on its
    voting settings; None for a judge the committed calibration did not measure."""
    from xlrag.evals.calibration import CALIBRATION_FILE, judge_calibration

    # the path from the repository root: the report is committed and read on other machines
    return {"source": "/".join(CALIBRATION_FILE.parts[-3:]) if data else None,
            "judges": {j.label: judge_calibration(j, data) for j in panel.judges}}


def _calibrated(cal: dict[str, Any] | None) -> str:
    if not cal:
        return "not calibrated"
    acc = cal["accuracy"]
    langs = ", ".join(f"{lang} {v:.2f}" for lang, v in cal["per_language"].items())
    return (f"calibrated accuracy {acc['mean']:.3f} [{acc['ci95'][0]:.2f}, {acc['ci95'][1]:.2f}] on {cal['items']} "
            f"items of known truth ({langs}), invalid {cal['invalid_rate']:.1%}")


def _retrieval(recs: list[dict], qrels: dict[str, dict[str, int]] | None, inventory: dict | None, k: int) -> dict:
    """Retrieved-language distribution per query language; with qrels, the retrieval report
    of ``xlrag eval retrieval`` (metrics by language cell, bias) from the recorded rankings."""
    by_qlang: dict[str, Counter] = defaultdict(Counter)
    for r in recs:
        for h in r.get("retrieved") or []:
            by_qlang[r["lang"]][h["lang"]] += 1
    out: dict[str, Any] = {"retrieved_languages": {
        q: {lang: n / sum(c.values()) for lang, n in sorted(c.items())} for q, c in sorted(by_qlang.items())}}
    if qrels and inventory:
        from xlrag.evals.retrieval import RankedPassage, Ranking, retrieval_report

        rankings = [Ranking(query_id=r["query_id"], lang=r["lang"],
                            passages=[RankedPassage(id=h["passage_id"], doc_id=h["doc_id"], lang=h["lang"],
                                                    score=h["score"]) for h in r["retrieved"]])
                    for r in recs if "retrieved" in r]
        out["metrics"] = retrieval_report(rankings, qrels, inventory["doc_langs"], inventory["counts"], k=k)
    return out


class GridInputs(BaseModel):
    """What a grid's report needs besides its config and records, read by :func:`read_inputs`."""

    model_config = ConfigDict(extra="forbid")

    versions: dict[str, Any] = Field(default_factory=dict, description="the run's versions.json")
    inventories: dict[str, dict[str, Any]] = Field(
        default_factory=dict, description="per dataset: its index's doc_langs and counts at run time")
    qrels: dict[str, dict[str, dict[str, int]]] = Field(default_factory=dict, description="per dataset with qrels")
    human: dict[str, str] | None = Field(None, description="human verdicts by query id (human_labels)")
    calibration: dict[str, Any] | None = Field(None, description="the judges' calibration (xlrag eval calibrate)")


def read_inputs(cfg: ExperimentConfig, folder: RunFolder) -> GridInputs:
    """The grid report's inputs, from the run folder and the files its config names."""
    from xlrag.evals.retrieval import load_qrels

    calibration = None
    if cfg.judges is not None:
        from xlrag.evals.calibration import load_calibration

        calibration = load_calibration()
    return GridInputs(
        versions=folder.versions(),
        inventories={ds.name: inv for ds in cfg.datasets if (inv := folder.inventory(ds.name)) is not None},
        qrels={ds.name: load_qrels(ds.qrels) for ds in cfg.datasets if ds.qrels},
        human=read_labels(cfg.human_labels) if cfg.human_labels else None, calibration=calibration)


def build_report(run_dir: str | Path) -> dict[str, Any]:
    """The report of the grid in ``run_dir`` (reading it: see :func:`grid_report`)."""
    from xlrag.evals.experiment import load_experiment

    folder = RunFolder(run_dir)
    cfg = load_experiment(folder.config_path)
    return grid_report(cfg, folder.records(), read_inputs(cfg, folder))


def grid_report(cfg: ExperimentConfig, records: list[dict], inputs: GridInputs) -> dict[str, Any]:
    ok = [r for r in records if "error" not in r]
    report: dict[str, Any] = {
        "experiment": cfg.name, "records": len(records), "failed": len(records) - len(ok),
        "errors": dict(Counter(r["error"].split(":")[0] for r in records if "error" in r)),
        "versions": inputs.versions, "notes": [], "retrieval": {}, "cells": {},
        "published": cfg.published.model_dump() if cfg.published else None,
    }
    if cfg.judges is not None:
        from xlrag.judges.panel import JudgePanel

        report["notes"] += JudgePanel(cfg.judges, generator=cfg.llms[0] if cfg.llms else None).notes
        report["judge_calibration"] = _calibration(cfg.judges, inputs.calibration)
    if cfg.embedder.name != "local":  # every retrieval figure depends on it
        model = f" ({cfg.embedder.model})" if cfg.embedder.model else ""
        report["notes"].append(f"The indexes embed with the {cfg.embedder.name} embedder{model}, not the bundled "
                               "multilingual-e5-small.")
    if cfg.generate_sample is not None:
        report["notes"].append(f"The answers are a stratified part of the sample ({cfg.generate_sample.per_lang} per "
                               f"language, seed {cfg.generate_sample.seed}); retrieval is scored on the whole sample.")
    if cfg.ragas and cfg.ragas_sample is not None:
        report["notes"].append(f"Ragas scores a stratified part of the answered records ({cfg.ragas_sample.per_lang} "
                               f"per language, seed {cfg.ragas_sample.seed}); the other figures use them all.")
    if cfg.ragas and cfg.ragas_untranslated == "english":
        report["notes"].append("Ragas prompt strings the LLM could not translate stay in English "
                               "(see each Ragas figure's notes).")
    shared = [m for m in cfg.modes if plans_language_shares(m)]
    if (shared and cfg.rerank.name == "none" and cfg.retrieval.k < cfg.retrieval.retrieve_k
            and any(c.llm for c in cfg.cells())):
        report["notes"].append(
            f"{', '.join(shared)}: the retrieval tables score the {cfg.retrieval.retrieve_k} passages retrieved, whose "
            f"first {cfg.retrieval.k} are the best by fused score; with no reranker the chain plans the language "
            f"shares for its {cfg.retrieval.k} passages itself, so the answers may have seen other passages: 'relevant "
            "shown' (Citations) scores those.")
    human = inputs.human
    for ds in cfg.datasets:
        qrels = inputs.qrels.get(ds.name)
        inventory = inputs.inventories.get(ds.name)
        if qrels and inventory is None:
            report["notes"].append(f"{ds.name}: no retrieval metrics, because {RunFolder.inventory_name(ds.name)} (the "
                                   "index's document languages and counts, written by `xlrag eval run`) is not in the "
                                   "run folder; rerun the experiment there to score retrieval.")
        for mode in cfg.modes:
            # retrieval does not depend on the LLM or prompt: score one copy per query
            seen, recs = set(), []
            for r in ok:
                if r["dataset"] == ds.name and r["mode"] == mode and r["query_id"] not in seen:
                    seen.add(r["query_id"])
                    recs.append(r)
            if recs:
                report["retrieval"][f"{ds.name}/{mode}"] = _retrieval(recs, qrels, inventory, cfg.retrieval.retrieve_k)
        relevant = {q: {d for d, rel in docs.items() if rel > 0} for q, docs in (qrels or {}).items()} or None
        for cell in cfg.cells():
            if cell.dataset != ds.name or cell.llm is None:
                continue
            recs = [r for r in ok if (r["dataset"], r["mode"], r["llm"], r["variant"]) ==
                    (cell.dataset, cell.mode, cell.llm, cell.variant)]
            if not recs:
                continue
            name = "/".join([cell.dataset, cell.mode, cell.llm, cell.variant])
            per_lang = {lang: _answers([r for r in recs if r["lang"] == lang])
                        for lang in sorted({r["lang"] for r in recs})}
            report["cells"][name] = {
                "answers": _answers(recs), "per_lang": per_lang,
                "citations": citation_summary(recs, relevant),
                "citation_vs_inclusion": citation_vs_inclusion(recs),
                "agreement": _agreement(recs, human),
            }
    return report


# -- rendering --------------------------------------------------------------------------------


def _fmt(m: dict | None) -> str:
    if not m or m.get("mean") is None:
        return "–"
    lo, hi = m["ci95"]
    return f"{m['mean']:.3f} [{lo:.2f}, {hi:.2f}]"


_ANSWER_COLS = (("answered", "answered"), ("language_correct", "lang correct"),
                ("char3_recall", "char3 recall"), ("f1", "F1"), ("em", "EM"),
                ("judge_accuracy", "judges"), ("judge_accuracy_language_strict", "judges, lang-strict"),
                ("ragas_faithfulness", "faithfulness"), ("ragas_answer_relevancy", "answer relevancy"))


_PER_LANG_COLS = (("language_correct", "correct-language rate"), ("char3_recall", "char 3-gram recall"))


def _per_language(cells: dict[str, dict]) -> list[str]:
    """One table per metric: a row per cell, a column per question language (mRAG's tables)."""
    langs = sorted({lang for c in cells.values() for lang in c.get("per_lang") or {}})
    if len(langs) < 2:
        return []
    lines: list[str] = []
    for key, label in _PER_LANG_COLS:
        rows = [(name, [((c.get("per_lang") or {}).get(lang) or {}).get(key) for lang in langs])
                for name, c in cells.items()]
        if not any(v and v.get("mean") is not None for _, vals in rows for v in vals):
            continue
        lines += ["", f"### {label} per question language", "", "| cell | " + " | ".join(langs) + " |",
                  "|---" + "|---:" * len(langs) + "|"]
        lines += [f"| {name} | " + " | ".join(_num(v.get("mean") if v else None) for v in vals) + " |"
                  for name, vals in rows]
    return lines


def markdown(report: dict[str, Any]) -> str:
    lines = [f"# {report['experiment']}", "",
             f"{report['records']} records, {report['failed']} failed.", ""]
    lines += [f"> {n}" for n in report["notes"]]
    if report["retrieval"]:
        lines += ["", "## Retrieval", ""]
        for name, r in report["retrieval"].items():
            lines.append(f"### {name}")
            m = r.get("metrics", {}).get("summary")
            groups = [g for g in ("same_lang", "cross_lang", "mixed_lang") if m and isinstance(m.get(g), dict) and m[g]]
            if groups:
                keys = list(m[groups[0]])
                n = m.get("n") or {}
                lines += ["", "| queries | n | " + " | ".join(keys) + " |", "|---" * (len(keys) + 2) + "|"]
                for group in groups:
                    vals = m[group]
                    lines.append(f"| {group} | {n.get(group, '')} | " + " | ".join(
                        "–" if vals.get(k) is None else f"{vals[k]:.3f}" for k in keys) + " |")
            cells = (r.get("metrics") or {}).get("by_cell") or {}
            if cells:
                lines += ["", "| query->doc | n | hit@5 | hit@20 |", "|---|---:|---:|---:|"]
                lines += [f"| {c} | {v['n']} | {_num(v.get('hit@5'))} | {_num(v.get('hit@20'))} |"
                          for c, v in cells.items()]
            dist = r["retrieved_languages"]
            lines += ["", "retrieved languages by query language: " + "; ".join(
                f"{q}: " + ", ".join(f"{d} {v:.2f}" for d, v in ds.items()) for q, ds in dist.items()), ""]
    if report["cells"]:
        lines += ["## Answers", "", "| cell | n | " + " | ".join(c for _, c in _ANSWER_COLS) + " |",
                  "|---" * (len(_ANSWER_COLS) + 2) + "|"]
        for name, c in report["cells"].items():
            a = c["answers"]
            lines.append(f"| {name} | {a.get('n', 0)} | " + " | ".join(_fmt(a.get(k)) for k, _ in _ANSWER_COLS) + " |")
        lines += _per_language(report["cells"])
        lines += ["", "## Citations", "",
                  "| cell | valid model-made | post-hoc only | precision | top-cited relevant | relevant shown |",
                  "|---|---|---|---|---|---|"]
        for name, c in report["cells"].items():
            s = c["citations"]
            if s.get("n"):
                prec, top, shown = (_num(s.get(k)) for k in
                                    ("citation_precision", "top_citation_precision", "relevant_shown_rate"))
                lines.append(f"| {name} | {s['valid_model_citation_rate']:.3f} | {s['post_hoc_share']:.3f} | {prec} "
                             f"| {top} | {shown} |")
        lines += ["", "## Judge agreement", ""]
        cal = report.get("judge_calibration") or {}
        for name, c in report["cells"].items():
            ag = c["agreement"]
            if ag:
                k = "–" if ag["fleiss_kappa"] is None else f"{ag['fleiss_kappa']:.3f}"
                lines.append(f"- {name}: Fleiss' kappa {k} over {ag['items_all_valid']}/{ag['items']} items "
                             f"with every vote valid; invalid votes {ag['invalid_votes'] or 0}")
                for judge, acc in ag["accuracy_per_judge"].items():
                    said = "–" if acc["mean"] is None else f"{acc['mean']:.2f}"
                    lines.append(f"  - {judge}: voted correct {said} of {acc['n']} valid votes, "
                                 f"{ag['invalid_votes'].get(judge, 0)} invalid; "
                                 f"{_calibrated((cal.get('judges') or {}).get(judge))}")
        if cal.get("source"):
            lines += ["", f"Calibration: {cal['source']} (`xlrag eval calibrate`)."]
    if report.get("published"):
        lines += ["", *Published.model_validate(report["published"]).markdown()]
    return "\n".join(lines) + "\n"


def _num(x: float | None) -> str:
    return "–" if x is None else f"{x:.3f}"


def figures(report: dict[str, Any]) -> dict[str, bytes]:
    """PNG figures: per-language bars with CIs, retrieved-language heatmaps, citation vs
    inclusion, judge agreement. Empty when matplotlib is not installed."""
    plt = pyplot()
    if plt is None:
        return {}
    out: dict[str, bytes] = {}

    def save(name: str, fig) -> None:
        out[name] = png(fig)

    for name, c in report["cells"].items():
        langs = [x for x in c["per_lang"] if c["per_lang"][x]]
        if not langs:
            continue
        fig, ax = plt.subplots(figsize=(max(4, 1.2 * len(langs) + 2), 3))
        width = 0.38
        for i, (key, label) in enumerate((("language_correct", "language correct"),
                                          ("char3_recall", "char 3-gram recall"))):
            means: list[float] = []
            errs: list[list[float]] = [[], []]
            for x in langs:
                m = c["per_lang"][x].get(key) or {}
                mean = m.get("mean") or 0.0
                lo, hi = m.get("ci95") or (mean, mean)
                means.append(mean)
                errs[0].append(mean - lo)
                errs[1].append(hi - mean)
            ax.bar([j + i * width for j in range(len(langs))], means, width, yerr=errs, capsize=3, label=label)
        ax.set_xticks([j + width / 2 for j in range(len(langs))], langs)
        ax.set_ylim(0, 1.05)
        ax.set_title(name, fontsize=8)
        ax.legend(fontsize=7)
        save(f"per_lang::{name}", fig)
        if c["citation_vs_inclusion"]:
            out[f"citation_vs_inclusion::{name}"] = citation_inclusion_figure(c["citation_vs_inclusion"], name)
    for name, r in report["retrieval"].items():
        dist = r["retrieved_languages"]
        qs = list(dist)
        ds = sorted({d for v in dist.values() for d in v})
        if not qs or not ds:
            continue
        fig, ax = plt.subplots(figsize=(1 + 0.6 * len(ds), 1 + 0.5 * len(qs)))
        grid = [[dist[q].get(d, 0.0) for d in ds] for q in qs]
        ax.imshow(grid, vmin=0, vmax=1, cmap="Blues")
        ax.set_xticks(range(len(ds)), ds)
        ax.set_yticks(range(len(qs)), qs)
        for i, row in enumerate(grid):
            for j, v in enumerate(row):
                ax.text(j, i, f"{v:.2f}", ha="center", va="center", fontsize=7)
        ax.set_xlabel("retrieved language")
        ax.set_ylabel("query language")
        ax.set_title(name, fontsize=8)
        save(f"retrieved_languages::{name}", fig)
    agreement = {n: c["agreement"] for n, c in report["cells"].items() if c["agreement"]}
    if agreement:
        fig, ax = plt.subplots(figsize=(5, 0.5 + 0.4 * len(agreement)))
        names = list(agreement)
        ax.barh(names, [agreement[n]["fleiss_kappa"] or 0.0 for n in names])
        ax.set_xlim(-1, 1)
        ax.set_xlabel("Fleiss' kappa")
        ax.tick_params(axis="y", labelsize=6)
        save("judge_agreement", fig)
    return out


def html_page(report: dict[str, Any], figs: dict[str, bytes]) -> str:
    return html_document(report["experiment"], markdown(report), figs)
