"""`xlrag index` and `xlrag info`: building and inspecting an index."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from xlrag.cli._app import ConfigOpt, EmbedderOpt, IndexDirOpt, _config, _fail, app, err, out
from xlrag.errors import XlragError


@app.command()
def index(
    corpus: Annotated[Path, typer.Option("--corpus", "-c", help="corpus file: .jsonl, .csv or .parquet")],
    index_dir: IndexDirOpt = None,
    embedder: EmbedderOpt = None,
    fields: Annotated[str | None, typer.Option("--fields", help="field mapping, e.g. 'text=body,id=uid,metadata=country|city'")] = None,
    chunk_size: Annotated[int | None, typer.Option(help="passage length in tokenizer units")] = None,
    skip_bad: Annotated[bool, typer.Option("--skip-bad", help="skip malformed rows and report them")] = False,
    config: ConfigOpt = None,
) -> None:
    """Index a corpus into language-tagged stores (idempotent, resumable)."""
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeRemainingColumn,
    )

    from xlrag.indexes.corpus import FieldMap
    from xlrag.indexes.indexer import build_index

    try:
        cfg = _config(config, index_dir=index_dir)
        if embedder:
            cfg.embedder.name = embedder
        if chunk_size:
            cfg.splitter.chunk_size = chunk_size
        with Progress(TextColumn("[bold]indexing[/] {task.fields[lang]}"), BarColumn(), MofNCompleteColumn(),
                      TimeRemainingColumn(), console=err, transient=True) as bar:
            task = bar.add_task("index", total=None, lang="")

            def progress(done: int, total: int, lang: str) -> None:
                bar.update(task, completed=done, total=total, lang=lang)

            report = build_index(corpus, cfg.index_dir, embedder_config=cfg.embedder, splitter=cfg.splitter,
                                 fields=FieldMap.parse(fields), skip_bad=skip_bad, progress=progress)
    except XlragError as e:
        _fail(e)
    for row in report.skipped_rows:
        err.print(f"[yellow]skipped:[/] {row}", highlight=False, soft_wrap=True)
    out.print(
        f"indexed {report.documents} documents → {report.passages} passages into {report.index_dir}: "
        f"{report.added} added, {report.already_present} already present"
        + (f", {report.removed_stale} stale removed" if report.removed_stale else "")
        + (f", {len(report.skipped_rows)} bad rows skipped" if report.skipped_rows else "")
        + f" ({report.seconds:.1f}s)",
        highlight=False,
    )
    counts_table(report.per_language, report.embedder)


def counts_table(counts: dict[str, int], embedder: str, status: str | None = None) -> None:
    from xlrag.languages import display_name

    table = Table(title=f"embedder: {embedder}" + (f"   status: {status}" if status else ""))
    table.add_column("lang")
    table.add_column("language")
    table.add_column("passages", justify="right")
    for lang, n in sorted(counts.items()):
        table.add_row(lang, display_name(lang), str(n))
    table.add_row("", "[bold]total[/]", f"[bold]{sum(counts.values())}[/]")
    out.print(table)


@app.command()
def info(index_dir: IndexDirOpt = None, config: ConfigOpt = None,
         as_json: Annotated[bool, typer.Option("--json", help="print JSON")] = False) -> None:
    """Passage counts per language and the embedder of an index."""
    from xlrag.indexes.store import LanguageStores

    try:
        cfg = _config(config, index_dir=index_dir)
        stores = LanguageStores.open(cfg.index_dir)
        counts = stores.counts()
    except XlragError as e:
        _fail(e)
    m = stores.manifest
    if as_json:
        out.print_json(json.dumps({"index_dir": str(cfg.index_dir), "embedder": m.embedder, "dim": m.dim,
                                   "status": m.status, "splitter": m.splitter, "passages": counts}))
        return
    counts_table(counts, f"{m.embedder} ({m.dim}-d)", m.status)


