"""The ``xlrag`` command line (typer + rich)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from xlrag.errors import XlragError

app = typer.Typer(add_completion=False, no_args_is_help=True, help="Cross-lingual RAG: index, retrieve, inspect.")
out = Console(soft_wrap=True)
err = Console(stderr=True, soft_wrap=True)

ConfigOpt = Annotated[Path | None, typer.Option("--config", help="xlrag.yaml to read (default: ./xlrag.yaml if present)")]
IndexDirOpt = Annotated[Path | None, typer.Option("--index-dir", "-i", help="index directory")]
EmbedderOpt = Annotated[str | None, typer.Option("--embedder", help="embedder name: local, openai, cohere, mistral")]


def _fail(e: Exception) -> None:
    err.print(f"[bold red]error:[/] {e}", highlight=False, soft_wrap=True)
    raise typer.Exit(code=2)


def _config(config: Path | None, **overrides: Any):
    from xlrag.config import load_config

    return load_config(config, **{k: v for k, v in overrides.items() if v})


def _csv(value: str | None) -> list[str]:
    return [x.strip() for x in value.split(",") if x.strip()] if value else []


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
    _counts_table(report.per_language, report.embedder)


def _counts_table(counts: dict[str, int], embedder: str, status: str | None = None) -> None:
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
    _counts_table(counts, f"{m.embedder} ({m.dim}-d)", m.status)


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
        _print_hits(hits, as_json)
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


def _print_hits(hits: list[Any], as_json: bool) -> None:
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


@app.command()
def ask(
    question: Annotated[str, typer.Argument(help="the question, in any language")],
    index_dir: IndexDirOpt = None,
    mode: Annotated[str | None, typer.Option("--mode", "-m", help="IR mode (no_ir answers closed-book)")] = None,
    fmt: Annotated[str, typer.Option("--format", "-f", help="citation, answer or mc")] = "citation",
    options: Annotated[list[str] | None, typer.Option("--options", "-o", help="an answer option (repeat for each)")] = None,
    k: Annotated[int | None, typer.Option("-k", help="passages shown to the LLM")] = None,
    llm: Annotated[str | None, typer.Option("--llm", help="provider:model, e.g. local, openai:gpt-4o-mini")] = None,
    lang: Annotated[str | None, typer.Option(help="the question's language (detected if omitted)")] = None,
    relevant_langs: Annotated[str | None, typer.Option(help="comma-separated languages for rel_langs")] = None,
    target_lang: Annotated[str | None, typer.Option(help="language for swap_docs / oracle_lang")] = None,
    embedder: EmbedderOpt = None,
    config: ConfigOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help="print the GroundedAnswer as JSON")] = False,
) -> None:
    """Answer a question in its own language, grounded in retrieved passages with <docN> citations."""
    from xlrag.chains.llms import build_llm
    from xlrag.chains.rag import build_chain
    from xlrag.config import LLMConfig
    from xlrag.errors import ConfigError, EmptyQueryError
    from xlrag.indexes.retriever import CrossLingualRetriever

    try:
        if not question.strip():
            raise EmptyQueryError()
        if fmt not in ("citation", "answer", "mc"):
            raise ConfigError(f"unknown --format {fmt!r}; use citation, answer or mc")
        retrieval: dict[str, Any] = {"mode": mode} if mode else {}
        if k:
            retrieval["k"] = k
        cfg = _config(config, index_dir=index_dir, retrieval=retrieval or None)
        if embedder:
            cfg.embedder.name = embedder
        if llm:
            cfg.llm = LLMConfig.parse_spec(llm, cfg.llm)
        chat = build_llm(cfg.llm)
        retriever = None if cfg.retrieval.mode == "no_ir" else CrossLingualRetriever.from_config(cfg)
        chain = build_chain(retriever, chat, fmt=fmt, mode=cfg.retrieval.mode)
        inputs: dict[str, Any] = {"question": question, "lang": lang, "relevant_langs": _csv(relevant_langs) or None,
                                  "target_lang": target_lang, "options": options or None}
        answer = chain.invoke({k_: v for k_, v in inputs.items() if v is not None})
    except XlragError as e:
        _fail(e)
    if as_json:
        out.print_json(answer.model_dump_json())
        return
    _print_answer(answer)


def _print_answer(answer: Any) -> None:
    from xlrag.languages import display_name

    out.rule(f"[bold]{display_name(answer.lang)}[/] · mode {answer.mode} · {answer.format} · {answer.model}")
    if answer.chosen_option is not None:
        out.print(f"[bold]chosen option:[/] {chr(65 + answer.option_index)}) {answer.chosen_option}", highlight=False)
    out.print(f"[bold]answer:[/] {answer.answer or '—'}", highlight=False)
    if answer.explanation:
        out.print(f"[bold]explanation:[/] {answer.explanation}", highlight=False)
    if answer.flags:
        out.print(f"[yellow]flags:[/] {', '.join(answer.flags)}", highlight=False)
    if not answer.citations:
        return
    table = Table(title="citations")
    for col, width in (("doc", 7), ("source", 8), ("lang", 4), ("document", 12)):
        table.add_column(col, no_wrap=True, min_width=width)
    table.add_column("snippet", no_wrap=True)
    room = max(20, out.width - 50)
    for c in answer.citations:
        hit = answer.passages[c.marker] if c.valid else None
        flat = " ".join(hit.passage.text.split()) if hit else "(no such document)"
        table.add_row(f"<doc{c.marker}>", c.source, c.lang or "", c.doc_id or "",
                      flat if len(flat) <= room else flat[: room - 1] + "…")
    out.print(table)


prompts_app = typer.Typer(no_args_is_help=True, help="List, show and check the localized prompt templates.")
app.add_typer(prompts_app, name="prompts")
PromptsDirOpt = Annotated[Path | None, typer.Option("--overrides", help="folder of <lang>.yaml files overriding roles")]


@prompts_app.command("list")
def prompts_list(
    lang: Annotated[str | None, typer.Option("--lang", help="only this language")] = None,
    overrides: PromptsDirOpt = None,
) -> None:
    """Every (language, role) with where its template comes from."""
    from xlrag.languages import normalize_code
    from xlrag.prompts import PromptLibrary

    try:
        lib = PromptLibrary(overrides_dir=overrides)
        if lang:
            code = normalize_code(lang)
            rows = [(code, role, src, (tmpl.splitlines() or [""])[0]) for role, src, tmpl in lib.entries(code)]
        else:
            rows = lib.rows()
    except XlragError as e:
        _fail(e)
    table = Table(title="prompt templates")
    for col, width in (("lang", 4), ("role", 15), ("source", 11)):
        table.add_column(col, no_wrap=True, min_width=width)
    table.add_column("first line", no_wrap=True)
    room = max(20, out.width - 45)
    for code, role, source, first in rows:
        table.add_row(code, role, source, first if len(first) <= room else first[: room - 1] + "…")
    out.print(table)


@prompts_app.command("show")
def prompts_show(
    lang: Annotated[str, typer.Argument(help="language code, e.g. ar, zh-Hant, sw")],
    role: Annotated[str | None, typer.Option("--role", help="only this role")] = None,
    overrides: PromptsDirOpt = None,
) -> None:
    """The templates one language uses (falling back to English where it has none)."""
    from xlrag.prompts import PromptLibrary

    try:
        lib = PromptLibrary(overrides_dir=overrides)
        entries = lib.entries(lang)
        if role:
            lib.get(role, lang)  # unknown role → ConfigError listing the roles
            entries = [e for e in entries if e[0] == role]
    except XlragError as e:
        _fail(e)
    for name, source, template in entries:
        out.rule(f"[bold]{name}[/]  ({source})")
        out.print(template, highlight=False, markup=False)


@app.command()
def demo(
    index_dir: Annotated[Path, typer.Option("--index-dir", "-i", help="where to build the demo index")] = Path(".demo-index"),
    k: Annotated[int, typer.Option("-k", help="passages per question and mode")] = 3,
    answers: Annotated[int, typer.Option(help="sample questions to answer with the local LLM (0: retrieval only)")] = 5,
) -> None:
    """Build the demo index (Travel ar/en + XQuAD in 6 languages) and retrieve for sample questions."""
    import time

    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    from xlrag.demo import DEMO_QUESTIONS, build_demo_index, demo_embedder
    from xlrag.detect import LinguaDetector
    from xlrag.indexes.retriever import CrossLingualRetriever
    from xlrag.indexes.store import LanguageStores
    from xlrag.schema import make_query

    try:
        t0 = time.perf_counter()
        with Progress(TextColumn("[bold]indexing demo corpora[/] {task.fields[lang]}"), BarColumn(),
                      MofNCompleteColumn(), console=err, transient=True) as bar:
            task = bar.add_task("index", total=None, lang="")
            reports = build_demo_index(index_dir, lambda d, t, lang: bar.update(task, completed=d, total=t, lang=lang))
        out.print(f"demo index {index_dir}: " + "; ".join(
            f"{r.documents} docs → {r.passages} passages ({r.added} embedded now)" for r in reports)
            + f" in {time.perf_counter() - t0:.1f}s", highlight=False)
        embedder = demo_embedder()
        stores = LanguageStores.open(index_dir, embedder.name, embedder.dim)
        _counts_table(stores.counts(), embedder.name)
        retriever = CrossLingualRetriever(stores, embedder, k=k, detector=LinguaDetector())
        for dq in DEMO_QUESTIONS:
            q = retriever.prepare(make_query(dq.text, relevant_langs=list(dq.relevant_langs)))
            out.rule(f"[bold]{dq.text}[/]  (detected: {q.lang})")
            for mode in dq.modes:
                _print_hits(retriever.retrieve(q, mode=mode), as_json=False)
        if answers:
            from xlrag.chains.llms import build_llm
            from xlrag.chains.rag import build_chain
            from xlrag.config import LLMConfig

            out.rule("[bold]grounded answers[/] (local gemma-3-270m, citation format, mode qlang_en, k=3)")
            chain = build_chain(retriever, build_llm(LLMConfig(max_tokens=96)), fmt="citation", mode="qlang_en", k=3)
            for dq in DEMO_QUESTIONS[:answers]:
                out.print(f"\n[bold]Q:[/] {dq.text}", highlight=False)
                _print_answer(chain.invoke({"question": dq.text}))
    except XlragError as e:
        _fail(e)


def main() -> None:
    try:
        app()
    except KeyboardInterrupt:
        err.print("interrupted; re-run the same command to resume")
        sys.exit(130)


if __name__ == "__main__":
    main()
