"""`xlrag retrieve`: one question or a batch, with any IR mode."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any, Literal

import typer
from rich.table import Table

from xlrag.cli._app import (
    MODE_NAMES,
    OUT,
    TOP_K,
    ChannelsOpt,
    ConfigOpt,
    EmbedderOpt,
    FusionOpt,
    IndexDirOpt,
    LangOpt,
    RelevantLangsOpt,
    TargetLangOpt,
    _config,
    _csv,
    _fail,
    app,
    config_default,
    echo,
    err,
    fit,
    out,
    shown,
    shown_warnings,
    warn,
)
from xlrag.errors import ConfigError, EmptyQueryError, XlragError
from xlrag.indexes.postprocess import build_postprocessors, retrieve_through
from xlrag.outputs import check_output, jsonl_kind
from xlrag.queries import read_queries
from xlrag.schema import Hit, make_query

# what `retrieve --queries --out` writes: a file holding anything else is refused, not replaced
RESULTS = jsonl_kind("retrieval results", "results.jsonl", "query_id", "results")


@app.command()
def retrieve(
    question: Annotated[str | None, typer.Argument(help="the question (omit with --queries)")] = None,
    index_dir: IndexDirOpt = None,
    mode: Annotated[str | None, typer.Option(
        "--mode", "-m", help=f"IR mode: {MODE_NAMES} {config_default('retrieval.mode')}")] = None,
    k: Annotated[int | None, typer.Option(*TOP_K, help=f"passages to return {config_default('retrieval.k')}")] = None,
    fusion: FusionOpt = None,
    channels: ChannelsOpt = None,
    lang: LangOpt = None,
    relevant_langs: RelevantLangsOpt = None,
    target_lang: TargetLangOpt = None,
    queries: Annotated[Path | None, typer.Option(
        help="batch input: JSONL of {id, question, lang?, relevant_langs?, target_lang?}")] = None,
    out_path: Annotated[Path | None, typer.Option(*OUT, help="batch output JSONL (with --queries)")] = None,
    embedder: EmbedderOpt = None,
    config: ConfigOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help="print hits as JSON")] = False,
) -> None:
    """Retrieve passages for a question (or a batch) with an IR mode, as an answer's prompt
    would get them (the steps of postprocess: included, a reranker's choice among
    retrieval.retrieve_k candidates)."""
    from xlrag.indexes.retriever import CrossLingualRetriever

    try:
        if (question is None) == (queries is None):
            raise ConfigError("give either a QUESTION or --queries FILE (with --out FILE)")
        if queries is not None and out_path is None:
            raise ConfigError("--queries needs --out FILE for the results")
        batch = (queries, out_path) if queries is not None and out_path is not None else None
        if question is not None and not question.strip():
            raise EmptyQueryError()
        cfg = _config(config, index_dir=index_dir, mode=mode, k=k, fusion=fusion, embedder=embedder,
                      channels=channels)
        if out_path is not None:
            check_output(out_path, "--out", RESULTS)
        retriever = CrossLingualRetriever.from_config(cfg)
        steps = build_postprocessors(cfg, retriever.embedder)
        if question is not None:
            q = make_query(question, lang=lang, relevant_langs=_csv(relevant_langs), target_lang=target_lang)
            with shown_warnings():
                hits = retrieve_through(retriever, steps, q, retriever.k)
            retrieval_warnings(hits.complete, hits.notes)
        elif batch is not None:
            prepared = read_queries(batch[0])
    except XlragError as e:
        _fail(e)
    if batch is None:
        print_hits(hits.hits, as_json)
        return
    _batch(retriever, steps, prepared, batch[1])


def retrieval_warnings(complete: bool, notes: list[str]) -> None:
    if not complete:
        warn("passages may be missing: the index is half-built (a build is running or was stopped) or a "
             "store could not be searched by every channel (the notes say which); finish it with "
             "'xlrag index', verify with 'xlrag check'")
    for note in notes:
        warn(note, "note")


def _batch(retriever: Any, steps: list[Any], queries: list[Any], out_path: Path) -> None:
    import os
    import tempfile

    from rich.progress import Progress

    # A temp file beside the target, so the final rename is atomic; removed on any failure.
    fd, tmp_name = tempfile.mkstemp(prefix=f".{out_path.name}.", suffix=".tmp", dir=out_path.parent)
    tmp = Path(tmp_name)
    complete = True
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh, Progress(console=err, transient=True) as bar:
            task = bar.add_task("retrieving", total=len(queries))
            for q in queries:
                prepared = retriever.prepare(q)
                with shown_warnings():
                    hits = retrieve_through(retriever, steps, prepared, retriever.k)
                complete = complete and hits.complete
                fh.write(json.dumps({"query_id": q.id, "lang": prepared.lang, "notes": hits.notes,
                                     "results": [h.summary() for h in hits.hits]}, ensure_ascii=False) + "\n")
                bar.advance(task)
        tmp.replace(out_path)  # all or nothing: a failed batch never leaves a partial results file
    except XlragError as e:
        _fail(e)
    finally:
        tmp.unlink(missing_ok=True)
    retrieval_warnings(complete, [])
    echo(f"wrote {len(queries)} results to {out_path}")


def print_hits(hits: Sequence[Hit], as_json: bool) -> None:
    if as_json:
        out.print_json(json.dumps([{**h.summary(), "store": h.store, "mode": h.mode,
                                    "raw_score": h.raw_score,
                                    "channels": h.channels, "dense_score": h.dense_score,
                                    "lexical_score": h.lexical_score, "fused_score": h.fused_score,
                                    "rerank_score": h.rerank_score, "lexical_text": h.lexical_text,
                                    "text": h.passage.text} for h in hits],
                                  ensure_ascii=False))
        return
    if not hits:
        out.print("no passages retrieved")
        return
    table = Table(title=f"mode: {hits[0].mode}")
    doc_w = min(max(len(h.doc_id) for h in hits), 24)
    reranked = any(h.rerank_score is not None for h in hits)
    # one column per score a hit can carry: which channel found it, and what each scored
    rerank: list[tuple[str, int, Literal["left", "right"]]] = [("rerank", 6, "right")] if reranked else []
    cols: list[tuple[str, int, Literal["left", "right"]]] = [
        ("rank", 4, "right"), ("lang", 4, "left"), ("found by", 8, "left"), ("cos", 5, "right"), ("bm25", 5, "right"),
        ("fused", 6, "right"), *rerank, ("doc", doc_w, "left")]
    for col, width, justify in cols:
        table.add_column(col, no_wrap=True, min_width=width, justify=justify)
    table.add_column("snippet", no_wrap=True)
    room = max(20, out.width - doc_w - 62)

    def num(v: float | None, fmt: str = ".3f") -> str:
        return "-" if v is None else format(v, fmt)

    for h in hits:
        flat = " ".join(h.passage.text.split())
        found = "+".join("d" if c == "dense" else "lex" for c in h.channels)
        row = [str(h.rank), h.lang, found, num(h.dense_score), num(h.lexical_score, ".2f"),
               num(h.fused_score, ".4g"), *([num(h.rerank_score)] if reranked else []), shown(h.doc_id),
               shown(fit(flat, room))]
        table.add_row(*row)
    out.print(table)
    searched = {h.store: h.lexical_text for h in hits if h.lexical_text}
    for store, text in searched.items():
        out.print(f"lexical search of the {store!r} store used: {shown(fit(text, max(20, out.width - 40)))}")
