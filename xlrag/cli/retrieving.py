"""`xlrag retrieve`: one question or a batch, with any IR mode."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from xlrag.cli._app import ConfigOpt, EmbedderOpt, IndexDirOpt, _config, _csv, _fail, app, err, out
from xlrag.errors import XlragError


def _read_queries(path: Path) -> list[tuple[int, dict[str, Any]]]:
    from xlrag.errors import CorpusError, CorpusRowError

    if not path.exists():
        raise CorpusError(f"queries file {path} does not exist")
    rows = []
    with path.open(encoding="utf-8") as fh:
        for n, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as e:
                raise CorpusRowError(path, n, f"invalid JSON ({e.msg})") from None
            if not isinstance(row, dict) or not str(row.get("question") or "").strip():
                raise CorpusRowError(path, n, "each line needs a non-empty 'question'")
            row.setdefault("id", f"q{n}")
            rows.append((n, row))
    return rows


@app.command()
def retrieve(
    question: Annotated[str | None, typer.Argument(help="the question (omit with --queries)")] = None,
    index_dir: IndexDirOpt = None,
    mode: Annotated[str | None, typer.Option("--mode", "-m", help="IR mode: qlang, qlang_en, en_only, rel_langs, swap_docs, all, balanced, translate, oracle_lang, no_ir")] = None,
    k: Annotated[int | None, typer.Option("-k", help="passages to return")] = None,
    fusion: Annotated[str | None, typer.Option(help="zscore, score, rrf, interleave, minmax")] = None,
    lang: Annotated[str | None, typer.Option(help="the question's language (detected if omitted)")] = None,
    relevant_langs: Annotated[str | None, typer.Option(help="comma-separated languages for rel_langs")] = None,
    target_lang: Annotated[str | None, typer.Option(help="language for swap_docs / oracle_lang")] = None,
    queries: Annotated[Path | None, typer.Option(help="batch input: JSONL of {id, question, lang?, relevant_langs?, target_lang?}")] = None,
    out_path: Annotated[Path | None, typer.Option("--out", help="batch output JSONL")] = None,
    embedder: EmbedderOpt = None,
    config: ConfigOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help="print hits as JSON")] = False,
) -> None:
    """Retrieve passages for a question (or a batch) with an IR mode."""
    from xlrag.errors import ConfigError, EmptyQueryError
    from xlrag.indexes.retriever import CrossLingualRetriever
    from xlrag.schema import make_query

    try:
        if (question is None) == (queries is None):
            raise ConfigError("give either a QUESTION or --queries FILE (with --out FILE)")
        if queries is not None and out_path is None:
            raise ConfigError("--queries needs --out FILE for the results")
        if question is not None and not question.strip():
            raise EmptyQueryError()
        retrieval: dict[str, Any] = {}
        if mode:
            retrieval["mode"] = mode
        if fusion:
            retrieval["fusion"] = fusion
        if k:
            retrieval["k"] = k
        cfg = _config(config, index_dir=index_dir, retrieval=retrieval or None)
        if embedder:
            cfg.embedder.name = embedder
        retriever = CrossLingualRetriever.from_config(cfg)
        if question is not None:
            q = make_query(question, lang=lang, relevant_langs=_csv(relevant_langs), target_lang=target_lang)
            hits = retriever.retrieve(q)
        else:
            rows = _read_queries(queries)
            prepared = []
            for n, row in rows:
                try:
                    prepared.append(make_query(row["question"], id=str(row["id"]), lang=row.get("lang"),
                                          relevant_langs=row.get("relevant_langs") or [],
                                          target_lang=row.get("target_lang")))
                except (XlragError, ValueError) as e:
                    raise ConfigError(f"{queries}:{n}: {e}") from None
    except XlragError as e:
        _fail(e)
    if question is not None:
        print_hits(hits, as_json)
        return
    _batch(retriever, prepared, out_path)


def _batch(retriever: Any, queries: list[Any], out_path: Path) -> None:
    from rich.progress import Progress

    tmp = out_path.with_suffix(out_path.suffix + ".tmp")
    try:
        with tmp.open("w", encoding="utf-8") as fh, Progress(console=err, transient=True) as bar:
            task = bar.add_task("retrieving", total=len(queries))
            for q in queries:
                prepared = retriever.prepare(q)
                hits = retriever.retrieve(prepared)
                fh.write(json.dumps({"query_id": q.id, "lang": prepared.lang,
                                     "results": [h.summary() for h in hits]}, ensure_ascii=False) + "\n")
                bar.advance(task)
        tmp.replace(out_path)  # all or nothing: a failed batch never leaves a partial results file
    except XlragError as e:
        tmp.unlink(missing_ok=True)
        _fail(e)
    out.print(f"wrote {len(queries)} results to {out_path}", highlight=False)


def print_hits(hits: list[Any], as_json: bool) -> None:
    if as_json:
        out.print_json(json.dumps([{**h.summary(), "store": h.store, "policy": h.policy,
                                    "raw_score": h.raw_score, "text": h.passage.text} for h in hits],
                                  ensure_ascii=False))
        return
    if not hits:
        out.print("no passages retrieved")
        return
    table = Table(title=f"mode: {hits[0].policy}")
    doc_w = min(max(len(h.doc_id) for h in hits), 24)
    for col, width, justify in (("rank", 4, "right"), ("lang", 4, "left"), ("score", 6, "right"),
                                ("cos", 5, "right"), ("doc", doc_w, "left")):
        table.add_column(col, no_wrap=True, min_width=width, justify=justify)
    table.add_column("snippet", no_wrap=True)
    room = max(20, out.width - doc_w - 42)
    for h in hits:
        flat = " ".join(h.passage.text.split())
        snippet = flat if len(flat) <= room else flat[: room - 1] + "…"
        table.add_row(str(h.rank), h.lang, f"{h.score:.3f}", f"{h.raw_score:.3f}", h.doc_id, snippet)
    out.print(table)


