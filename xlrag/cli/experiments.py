"""``xlrag eval run`` and ``xlrag eval report``: experiment grids, seed studies and their reports."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from xlrag.cli._app import OUT, ConfigOpt, _config, _fail, echo, warn
from xlrag.cli.evaluating import eval_app
from xlrag.errors import XlragError


@eval_app.command("run")
def eval_run(
    experiment: Annotated[Path, typer.Argument(help="experiment YAML (datasets × modes × llms × variants)")],
    out: Annotated[Path, typer.Option(*OUT, help="run folder: records, cache, reports")],
    no_report: Annotated[bool, typer.Option("--no-report", help="skip writing the reports at the end")] = False,
    retry_failed: Annotated[bool, typer.Option(
        "--retry-failed/--no-retry-failed",
        help="make the records that failed in an earlier run again (their errors stay in failures.jsonl)")] = True,
    config: ConfigOpt = None,
) -> None:
    """Run the grid or study; rerun the same command to resume after a kill (nothing redone, nothing lost).

    Records are kept per fingerprint of the settings that shape them (datasets and their files,
    retrieval, models, prompts, format, rerank): change one and the run makes new records,
    leaving the old ones in records.jsonl and out of the report. One run writes a folder at a
    time; a second one stops with an error. Exits 1 when records failed (rerun to retry them).

    What the experiment YAML leaves out of embedder, llm(s) and the retrieval settings (modes,
    k, retrieve_k, fusion, rerank) comes from your xlrag config (xlrag.yaml, then XLRAG_*
    variables) where you set it there, else from the experiment's defaults; a study takes only
    its llm from there. The run folder's experiment.yaml keeps every value as run.
    """
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    from xlrag.evals.experiment import read_yaml, with_settings
    from xlrag.evals.studies import load_run_config, make_runner, write_reports

    try:
        settings = _config(config)
        cfg = load_run_config(experiment, settings)
        _, filled = with_settings(type(cfg), read_yaml(experiment), settings)
        if filled:
            warn(f"from the xlrag config (not set in {experiment}): {', '.join(filled)}", "note")
        columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                   TimeElapsedColumn(), TextColumn("eta"), TimeRemainingColumn())
        with Progress(*columns, transient=False) as bar:
            task = bar.add_task(cfg.name, total=None)

            def progress(_: str, done: int, total: int) -> None:
                bar.update(task, completed=done, total=total)

            runner = make_runner(cfg, out, progress)
            try:
                summary = runner.run(retry_failed=retry_failed)
            finally:
                runner.close()
        retried = f" ({summary['retried']} of them failed before)" if summary["retried"] else ""
        echo(f"{summary['written']} records written{retried}, {summary['skipped']} already present, "
             f"{summary['failed']} failed, {summary['llm_calls']} model calls (the rest from the cache)")
        if summary["other_settings"]:
            warn(f"{runner.folder.records_path} also holds {summary['other_settings']} records made with other "
                 f"settings: kept, and left out of this run's report", "note")
        for part, why in runner.not_run(cfg).items():
            warn(f"{part} not run: {why}")
        if not no_report:
            paths = write_reports(out)
            echo(f"reports: {paths['md']} {paths['html']} {paths['json']}")
    except XlragError as e:
        _fail(e)
    if summary["failed"]:
        warn(f"{summary['failed']} records failed; their errors are in {runner.folder.failures_path}; "
             f"rerun the same command to retry them")
        raise typer.Exit(code=1)


@eval_app.command("report")
def eval_report(
    run_dir: Annotated[Path, typer.Argument(help="a run folder made by `xlrag eval run`")],
    as_json: Annotated[bool, typer.Option("--json", help="print report.json to stdout as well")] = False,
) -> None:
    """Rebuild report.json, report.md and report.html from the run's records."""
    from xlrag.evals.run_folder import RunFolder
    from xlrag.evals.studies import write_reports

    try:
        folder = RunFolder(run_dir)
        if not folder.is_run():
            raise XlragError(f"{run_dir} is not a run folder (no {folder.records_path.name} and "
                             f"{folder.config_path.name}); make one with `xlrag eval run EXPERIMENT.yaml --out "
                             f"{run_dir}`")
        paths = write_reports(run_dir)
    except XlragError as e:
        _fail(e)
    if as_json:
        echo(json.dumps(json.loads(paths["json"].read_text(encoding="utf-8")), ensure_ascii=False))
    else:
        echo(f"reports: {paths['md']} {paths['html']} {paths['json']}")
