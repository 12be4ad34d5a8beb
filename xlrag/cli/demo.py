"""`xlrag demo`: build the demo index, retrieve in several modes, answer with citations, then
print the commands to try next."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from xlrag.cli._app import TOP_K, ConfigOpt, _config, _fail, app, config_default, echo, err, out
from xlrag.cli.answering import print_answer
from xlrag.cli.indexing import counts_table
from xlrag.cli.retrieving import print_hits
from xlrag.config import RetrievalConfig, XlragConfig
from xlrag.errors import XlragError
from xlrag.schema import make_query

# The demo's own choice, not retrieval.k's default: it answers five questions with the local
# model on a laptop, and three passages keep each prompt (and the first minutes) short.
DEMO_K = 3


def _shown(path: Path) -> str:
    """``path`` as a user types it here: relative to the working folder when inside it."""
    try:
        return shlex.quote(str(path.resolve().relative_to(Path.cwd())))
    except ValueError:
        return shlex.quote(str(path.resolve()))


def _activate() -> str | None:
    """``source .venv/bin/activate`` when xlrag runs from a virtualenv whose commands are not on
    PATH (``make demo`` runs .venv/bin/xlrag directly): without it, ``xlrag`` is not found."""
    import shutil
    import sys

    bin_dir = Path(sys.prefix) / "bin"
    found = shutil.which("xlrag")
    if sys.prefix == sys.base_prefix or not (bin_dir / "activate").exists() or (
            found and Path(found).parent.resolve() == bin_dir.resolve()):
        return None
    return f"source {_shown(bin_dir / 'activate')}"


def next_commands(index_dir: Path, default_index_dir: Path, config: Path | None = None) -> list[str]:
    """What to type after the demo, over its index: ``-i`` only when the index is not where
    every command looks by default."""
    from xlrag.demo import DATA

    where = "" if index_dir.resolve() == default_index_dir.resolve() else f" -i {_shown(index_dir)}"
    where += f" --config {_shown(config)}" if config else ""
    travel = DATA / "travel"
    return [
        *filter(None, [_activate()]),
        f'xlrag ask{where} "¿Cuántos puntos permitió la defensa de los Panthers?"',
        f'xlrag ask{where} --agent "ما هي ارقام الطوارئ في سريلانكا؟"',
        f'xlrag retrieve{where} --mode balanced --top-k 5 "Wann starb Tesla?"',
        f"xlrag chat{where}",
        f"xlrag eval retrieval{where} --queries {_shown(travel / 'queries.jsonl')} "
        f"--qrels {_shown(travel / 'qrels.jsonl')}",
    ]


@app.command()
def demo(
    index_dir: Annotated[Path | None, typer.Option("--index-dir", "-i", help=(
        f"where to build the demo index {config_default('index_dir')}; a folder holding another index "
        "is refused"))] = None,
    k: Annotated[int, typer.Option(*TOP_K, help="passages per question and mode, and shown to the LLM")] = DEMO_K,
    answers: Annotated[int, typer.Option(help="sample questions to answer with the local LLM (0: retrieval only)")] = 5,
    config: ConfigOpt = None,
) -> None:
    """Build the demo index (Travel ar/en + XQuAD in 6 languages) where `ask` looks by default,
    retrieve for sample questions in several IR modes, answer some of them with the local LLM
    with <docN> citations, and print the commands to try next."""
    import time

    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    from xlrag.demo import DEMO_QUESTIONS, build_demo_index, demo_embedder
    from xlrag.indexes.retriever import CrossLingualRetriever
    from xlrag.indexes.store import LanguageStores

    try:
        default_index_dir = _config(config).index_dir
        index_dir = index_dir or default_index_dir
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
        retriever = CrossLingualRetriever.from_settings(stores, embedder, RetrievalConfig(k=k))  # modes per call
        for dq in DEMO_QUESTIONS:
            q = retriever.prepare(make_query(dq.text, relevant_langs=list(dq.relevant_langs)))
            out.rule(f"[bold]{escape(dq.text)}[/]  (detected: {q.lang})")
            for mode in dq.modes:
                print_hits(retriever.retrieve(q, mode=mode).hits, as_json=False)
        if answers:
            from xlrag.chains.local.catalogue import lookup
            from xlrag.chains.rag import GroundedChain

            entry = lookup(None)  # the catalogue's default, chosen by benchmarks/generation.py
            out.rule(f"[bold]grounded answers[/] (local {entry.name}, {entry.kind}, citation format, "
                     f"mode qlang_en, k={k})")
            # the answer budget is llm.max_tokens's default: at 96 tokens 3 of the 5 answers were cut off
            cfg = XlragConfig(index_dir=index_dir, retrieval={"mode": "qlang_en", "k": k})
            chain = GroundedChain.from_config(cfg, retriever=retriever)
            for dq in DEMO_QUESTIONS[:answers]:
                out.print(f"\n[bold]Q:[/] {escape(dq.text)}", highlight=False)
                print_answer(chain.invoke({"question": dq.text}))
    except XlragError as e:
        _fail(e)
    out.rule("[bold]try next[/]")
    for command in next_commands(index_dir, default_index_dir, config):
        echo(f"  {command}")
