"""`xlrag index`, `info`, `check` and `delete`: building, inspecting, verifying and editing an index."""

from __future__ import annotations

import json
from contextlib import nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape
from rich.table import Table

from xlrag.cli._app import (
    ConfigOpt,
    EmbedderOpt,
    IndexDirOpt,
    _config,
    _fail,
    app,
    config_default,
    echo,
    err,
    out,
    warn,
)
from xlrag.config import IndexConfig
from xlrag.errors import ConfigError, XlragError
from xlrag.languages import display_name

if TYPE_CHECKING:
    from xlrag.config import XlragConfig

NoWaitOpt = Annotated[bool, typer.Option("--no-wait", help="fail at once if another process is writing the index")]


def _waiting(message: str) -> None:
    warn(message, "waiting")


@app.command()
def index(
    corpus: Annotated[Path, typer.Option("--corpus", "-c", help="corpus file: .jsonl, .csv or .parquet")],
    index_dir: IndexDirOpt = None,
    embedder: EmbedderOpt = None,
    fields: Annotated[str | None,
                      typer.Option("--fields",
                                   help="field mapping, e.g. 'text=body,id=uid,metadata=country|city'")] = None,
    chunk_size: Annotated[int | None, typer.Option(
        help=f"passage length in tokenizer units {config_default('splitter.chunk_size')}")] = None,
    skip_bad: Annotated[bool, typer.Option("--skip-bad", help="skip malformed rows and report them")] = False,
    source: Annotated[str | None,
                      typer.Option("--source",
                                   help="source name (default: the corpus file's path); re-indexing a source prunes "
                                        "documents gone from it")] = None,
    rebuild: Annotated[bool,
                       typer.Option("--rebuild", help="wipe the whole index (all sources) and build it fresh")] = False,
    no_wait: NoWaitOpt = False,
    executor: Annotated[str | None, typer.Option(
        "--executor", help=f"where to split and embed: local (this process) or ray (one embedder per Ray "
                           f"worker; pip install 'xlrag[ray]') {config_default('index.executor')}")] = None,
    ray_address: Annotated[str | None, typer.Option(
        "--ray-address", help="the Ray cluster's head, host:port or ray://host:port, or auto (default: "
                              "index.ray_address from config, else a Ray started on this machine)")] = None,
    workers: Annotated[int | None, typer.Option(
        "--workers", min=1, help="Ray workers, each with its own embedder (default: index.workers from config, "
                                 "else one per CPU; 4 for a vendor embedder)")] = None,
    config: ConfigOpt = None,
) -> None:
    """Index a corpus into language-tagged stores (idempotent, resumable).

    The index is made to match the corpus, per source: documents gone from the
    file are removed, edited ones replaced, other sources left alone.
    """
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
        cfg = _config(config, index_dir=index_dir, embedder=embedder, chunk_size=chunk_size)
        chosen: dict[str, object] = {"executor": executor, "ray_address": ray_address, "workers": workers}
        if any(v is not None for v in chosen.values()):
            cfg = _with_index_options(cfg, chosen)
        runner = None
        if cfg.index.executor == "ray":
            from xlrag.indexes.ray_executor import RayExecutor

            runner = RayExecutor(cfg.embedder, address=cfg.index.ray_address, workers=cfg.index.workers,
                                 batch_size=cfg.index.batch_size)
        with Progress(TextColumn("[bold]indexing[/] {task.fields[lang]}"), BarColumn(), MofNCompleteColumn(),
                      TimeRemainingColumn(), console=err, transient=True,
                      disable=not err.is_terminal) as bar:  # off a terminal it would only leave a blank line
            task = bar.add_task("index", total=None, lang="")

            def progress(done: int, total: int, lang: str) -> None:
                bar.update(task, completed=done, total=total, lang=lang)

            with runner or nullcontext():
                report = build_index(corpus, cfg.index_dir, embedder_config=cfg.embedder, splitter=cfg.splitter,
                                     fields=FieldMap.parse(fields), skip_bad=skip_bad, progress=progress,
                                     source=source, store=cfg.store, rebuild=rebuild, wait=not no_wait,
                                     on_wait=_waiting, notice=warn, executor=runner)
    except XlragError as e:
        _fail(e)
    for row in report.skipped_rows:
        warn(row, "skipped")
    out.print(
        f"indexed {report.documents} documents → {report.passages} passages into {report.index_dir}: "
        f"{report.added} added, {report.already_present} already present"
        + (f", {report.removed_stale} stale removed" if report.removed_stale else "")
        + (f" ({len(report.pruned_documents)} documents gone from the source)" if report.pruned_documents else "")
        + (f", {len(report.skipped_rows)} bad rows skipped" if report.skipped_rows else "")
        + (f" on {report.executor}" if report.executor != "local" else "")
        + f" ({report.seconds:.1f}s)",
        highlight=False,
    )
    counts_table(report.per_language, report.embedder)
    if report.check is not None:
        c = report.check
        line = (f"quick check: {c.vectors_checked - len(c.missing_vectors)} vectors of this source present, "
                f"{len(c.missing_vectors)} missing, "
                f"{len(c.duplicates)} duplicates across stores, {len(c.misplaced)} misplaced, "
                f"{len(c.stale_documents)} stale documents"
                + (f", lexical index to rebuild for {', '.join(s.split(':', 1)[0] for s in c.lexical_stale)}"
                   if c.lexical_stale else "")
                + (" (fix: xlrag check --repair)" if not c.ok else " (full check: xlrag check)"))
        (echo if c.ok else lambda m: warn(m, "check"))(line)


def _with_index_options(cfg: XlragConfig, chosen: dict[str, object]) -> XlragConfig:
    """The config with the index section's command-line options on top, validated as the file's are."""
    from pydantic import ValidationError

    merged = {**cfg.index.model_dump(), **{k: v for k, v in chosen.items() if v is not None}}
    try:
        return cfg.model_copy(update={"index": IndexConfig(**merged)})
    except ValidationError as e:
        first = e.errors()[0]
        raise ConfigError(f"--{str(first['loc'][0]).replace('_', '-')}: {first['msg']}") from None


def counts_table(counts: dict[str, int], embedder: str, status: str | None = None) -> None:
    table = Table(title=escape(f"embedder: {embedder}" + (f"   status: {status}" if status else "")))
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
        stores = LanguageStores.open(cfg.index_dir, store=cfg.store)
        counts = stores.counts()
    except XlragError as e:
        _fail(e)
    m = stores.manifest
    if as_json:
        out.print_json(json.dumps({"index_dir": str(cfg.index_dir), "embedder": m.embedder, "dim": m.dim,
                                   "status": m.status, "splitter": m.splitter, "passages": counts}))
        return
    counts_table(counts, f"{m.embedder} ({m.dim}-d)", m.status)


@app.command()
def check(
    index_dir: IndexDirOpt = None,
    repair: Annotated[bool,
                      typer.Option("--repair",
                                   help="re-embed missing vectors, remove duplicates, misplaced copies, old versions "
                                        "and orphans")] = False,
    sample: Annotated[int,
                      typer.Option("--sample", min=0, help="passages checked to retrieve themselves at rank 1")] = 20,
    embedder: EmbedderOpt = None,
    no_wait: NoWaitOpt = False,
    config: ConfigOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help="print the report as JSON")] = False,
) -> None:
    """Verify an index: every passage has its vector, counts match, no passage in two stores or
    in the wrong one, no stale versions, a sample retrieves itself at rank 1.

    Exit code 0 when clean, 1 when problems remain (after --repair, if given), 2 on errors.
    """
    from xlrag.indexes.integrity import check_index, repair_index

    try:
        cfg = _config(config, index_dir=index_dir, embedder=embedder)
        if repair:
            report = repair_index(cfg.index_dir, embedder_config=cfg.embedder, store=cfg.store, sample=sample,
                                  wait=not no_wait, on_wait=_waiting)
        else:
            report = check_index(cfg.index_dir, store=cfg.store, sample=sample)
    except XlragError as e:
        _fail(e)
    if as_json:
        out.print_json(json.dumps({**report.model_dump(), "problems": report.problems, "ok": report.ok}))
    else:
        for what, n in report.repaired.items():
            echo(f"repaired: {n} {what}")
        for label, items in (("vector files lost", report.lost_stores), ("missing vector", report.missing_vectors),
                             ("duplicate", report.duplicates),
                             ("misplaced", report.misplaced), ("stale document", report.stale_documents),
                             ("orphan", report.orphans), ("count mismatch", report.count_mismatches),
                             ("not rank 1 for its own vector", report.self_miss)):
            for item in items[:10]:
                warn(item, label)
            if len(items) > 10:
                warn(f"... and {len(items) - 10} more", label)
        if report.unfinished:
            warn(f"status {report.status}: a write run did not finish; rerun 'xlrag index' for its corpus",
                 "unfinished")
        echo(("ok: " if report.ok else f"{report.problems} problems: ") + report.summary())
    if not report.ok:
        raise typer.Exit(code=1)


@app.command()
def delete(
    doc_id: Annotated[list[str], typer.Option("--doc-id", help="document id to remove (repeatable)")],
    index_dir: IndexDirOpt = None,
    no_wait: NoWaitOpt = False,
    config: ConfigOpt = None,
) -> None:
    """Remove documents (all their passages, from every store) from an index."""
    from xlrag.indexes.indexer import delete_documents

    try:
        cfg = _config(config, index_dir=index_dir)
        report = delete_documents(cfg.index_dir, doc_id, store=cfg.store, wait=not no_wait, on_wait=_waiting)
    except XlragError as e:
        _fail(e)
    echo(f"deleted {len(report.documents)} documents ({report.removed} passages) from {report.index_dir}")
