"""``xlrag eval judge`` and ``xlrag eval calibrate``: a judge panel on any answers, and on known truth."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Annotated, Any

import typer

from xlrag.cli._app import OUT, _csv, _fail, echo, err, warn
from xlrag.cli.evaluating import eval_app
from xlrag.errors import ConfigError, XlragError
from xlrag.outputs import Kind, check_output, document_kind, jsonl_kind

PanelOpt = Annotated[Path | None, typer.Option(
    "--panel", help="YAML with a judges: section (a panel, or an experiment holding one); default: the "
                    "calibrated offline panel (xlrag.judges.panel.default_panel)")]


def _progress():
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeRemainingColumn,
    )

    return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TextColumn("eta"),
                    TimeRemainingColumn(), console=err, transient=True)


@eval_app.command("judge")
def eval_judge(
    items: Annotated[Path, typer.Option(
        "--in", help='JSONL of {"id", "question", "lang", "answer", "gold": [...]} to judge')],
    out: Annotated[Path, typer.Option(
        *OUT, help="JSONL written row by row: each input row with verdict and votes")],
    panel: PanelOpt = None,
    cache: Annotated[Path | None, typer.Option(
        "--cache", help="SQLite cache of the LLM judges' calls (default: none; rows already in --out are "
                        "skipped anyway)")] = None,
) -> None:
    """Judge every row with the panel; rerun the same command to resume after a kill."""
    from xlrag.evals.judge_items import VERDICT_FILE, judge_file, load_panel, read_items
    from xlrag.judges.panel import default_panel

    try:
        # both files before the progress bar and the panel: judge_file checks them again, for the API
        read_items(items)
        check_output(out, "--out", VERDICT_FILE)
        cfg = load_panel(panel) if panel is not None else default_panel()
        llm_cache = None
        if cache is not None:
            from xlrag.evals.cache import SQLiteLLMCache

            llm_cache = SQLiteLLMCache(cache)
        try:
            with _progress() as bar:
                task = bar.add_task("judging", total=None)
                summary = judge_file(items, out, cfg, llm_cache=llm_cache,
                                     progress=lambda done, total: bar.update(task, completed=done, total=total))
        finally:
            if llm_cache is not None:
                llm_cache.close()
    except XlragError as e:
        _fail(e)
    echo(f"{summary['judged']} rows judged, {summary['skipped']} already in {out}; verdicts: {summary['true']} "
         f"true, {summary['false']} false, {summary['null']} null (no valid vote); "
         f"{summary['invalid_votes']} invalid votes; panel: {', '.join(cfg.labels)}")
    if summary["invalid_votes"]:
        warn(f"{summary['invalid_votes']} votes are invalid; their reasons are in {out}")


def _candidates(panel: Path | None, judges: list[str], threads: int | None) -> Any:
    from xlrag.evals.calibration import candidate_judges
    from xlrag.evals.judge_items import load_panel
    from xlrag.judges.panel import PanelConfig

    cfg = load_panel(panel) if panel is not None else candidate_judges(threads)
    if not judges:
        return cfg
    unknown = [j for j in judges if j not in cfg.labels]
    if unknown:
        raise ConfigError(f"--judges {', '.join(unknown)}: no such candidate; choose from {', '.join(cfg.labels)}")
    return PanelConfig(judges=[j for j in cfg.judges if j.label in judges], tie_break=cfg.tie_break)


def _calibration_json(text: str) -> str | None:
    try:
        report = json.loads(text)
    except json.JSONDecodeError:
        return "not JSON"
    return None if isinstance(report, dict) and {"judges", "panels", "chosen"} <= report.keys() else \
        "not a judge calibration (no judges, panels and chosen)"


def _calibration_files(out: Path) -> list[tuple[Path, Kind]]:
    """The three files `eval calibrate --out` writes, each of its own kind: none may hold anything else."""
    return [(out, document_kind("a judge calibration", "judges.json", _calibration_json)),
            (out.with_suffix(".md"), document_kind(
                "a judge calibration's tables", "judges.md",
                lambda text: None if text.startswith("# Judge calibration") else "not a judge calibration's tables")),
            (out.with_suffix(".votes.jsonl"), jsonl_kind("calibration votes", "judges.votes.jsonl", "id", "votes"))]


def _default_cache() -> Path:
    from xlrag.chains.local.assembly import cache_dir

    return cache_dir().parent / "judge-calibration.sqlite"


@eval_app.command("calibrate")
def eval_calibrate(
    out: Annotated[Path | None, typer.Option(
        *OUT, help="write the calibration JSON here, its tables beside it (.md) and every vote "
                            "(.votes.jsonl)")] = None,
    panel: Annotated[Path | None, typer.Option(
        "--panel", help="YAML whose judges: are the candidates (default: lexical and every catalogue model)")] = None,
    judges: Annotated[str | None, typer.Option(
        "--judges", help="comma-separated labels of the candidates to calibrate (default: all)")] = None,
    limit: Annotated[int | None, typer.Option(
        "--limit", help="a stratified part of the items: N taken in turn from each dataset, language and kind")] = None,
    langs: Annotated[str | None,
                     typer.Option("--langs", help="comma-separated languages (default: every vendored one)")] = None,
    seed: Annotated[int, typer.Option("--seed", help="which items are drawn")] = 0,
    threads: Annotated[int | None, typer.Option(
        "--threads", help="llama.cpp threads per candidate model (default: every core; 1 when the machine "
                          "is shared: llama.cpp's threads wait on each other when a core is busy)")] = None,
    cache: Annotated[Path | None, typer.Option(
        "--cache", help="SQLite cache of the judges' calls (default: judge-calibration.sqlite in the xlrag "
                        "cache folder), so that a rerun costs nothing")] = None,
) -> None:
    """Measure each candidate judge, and every majority panel of them, on items of known truth
    built from the vendored data; the best panel is the one to ship as the default."""
    from xlrag.evals.calibration import calibrate, judge_items, markdown
    from xlrag.evals.calibration_items import build_items, stratified

    try:
        for name, value in (("--limit", limit), ("--threads", threads)):
            if value is not None and value < 1:
                raise ConfigError(f"{name} must be a whole number >= 1, got {value}")
        if threads is not None and panel is not None:
            raise ConfigError("--threads sets the default candidates' threads; with --panel, set n_threads "
                              "in the panel file instead")
        if out is not None:
            for path, kind in _calibration_files(out):
                check_output(path, "--out", kind)
        candidates = _candidates(panel, _csv(judges), threads)
        every = build_items(_csv(langs) or None, seed=seed)
        items = stratified(every, limit)
        with _progress() as bar:
            task = bar.add_task("calibrating", total=len(items))

            def progress(label: str, done: int, total: int) -> None:
                bar.update(task, description=label, completed=done, total=total)

            t0 = time.perf_counter()
            votes = judge_items(candidates, items, cache or _default_cache(), progress=progress)
        report = calibrate(candidates, items, votes, seed=seed, all_items=every)
        # how the run was made to fit the machine, for whoever reads the figures
        report["run"] = {"limit": limit, "threads": threads, "wall_seconds": round(time.perf_counter() - t0)}
    except XlragError as e:
        _fail(e)
    md = markdown(report)
    echo(md)
    if out is not None:
        out.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        out.with_suffix(".md").write_text(md, encoding="utf-8")
        with out.with_suffix(".votes.jsonl").open("w", encoding="utf-8") as fh:
            for item in items:
                row = item.model_dump() | {"votes": {k: v["votes"][item.id].model_dump(exclude={"judge"})
                                                     for k, v in votes.items()}}
                fh.write(json.dumps(row, ensure_ascii=False) + "\n")
        echo(f"wrote {out}, {out.with_suffix('.md')} and {out.with_suffix('.votes.jsonl')}")
