"""`xlrag demo`: build the demo index, retrieve in several modes, answer with citations."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from xlrag.cli._app import _fail, app, err, out
from xlrag.cli.answering import print_answer
from xlrag.cli.indexing import counts_table
from xlrag.cli.retrieving import print_hits
from xlrag.errors import XlragError


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
        out.print(f"demo index {escape(str(index_dir))}: " + "; ".join(
            f"{r.documents} docs → {r.passages} passages ({r.added} embedded now)" for r in reports)
            + f" in {time.perf_counter() - t0:.1f}s", highlight=False)
        embedder = demo_embedder()
        stores = LanguageStores.open(index_dir, embedder.name, embedder.dim)
        counts_table(stores.counts(), embedder.name)
        retriever = CrossLingualRetriever(stores, embedder, k=k, detector=LinguaDetector())
        for dq in DEMO_QUESTIONS:
            q = retriever.prepare(make_query(dq.text, relevant_langs=list(dq.relevant_langs)))
            out.rule(f"[bold]{escape(dq.text)}[/]  (detected: {q.lang})")
            for mode in dq.modes:
                print_hits(retriever.retrieve(q, mode=mode), as_json=False)
        if answers:
            from xlrag.chains.local.catalogue import lookup
            from xlrag.chains.rag import GroundedChain
            from xlrag.config import XlragConfig

            entry = lookup(None)  # the catalogue's default, chosen by benchmarks/generation.py
            out.rule(f"[bold]grounded answers[/] (local {entry.name}, {entry.kind}, citation format, "
                     f"mode qlang_en, k=3)")
            cfg = XlragConfig(index_dir=index_dir, llm={"max_tokens": 96}, retrieval={"mode": "qlang_en", "k": 3})
            chain = GroundedChain.from_config(cfg, retriever=retriever)
            for dq in DEMO_QUESTIONS[:answers]:
                out.print(f"\n[bold]Q:[/] {escape(dq.text)}", highlight=False)
                print_answer(chain.invoke({"question": dq.text}))
    except XlragError as e:
        _fail(e)


