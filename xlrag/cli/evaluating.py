"""`xlrag eval retrieval`: score an IR mode against qrels, by query x document language."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from xlrag.cli._app import (
    MODE_NAMES,
    ChannelsOpt,
    ConfigOpt,
    FusionOpt,
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
from xlrag.errors import ConfigError, XlragError
from xlrag.modes import parse_mode
from xlrag.outputs import check_output
from xlrag.queries import read_queries
from xlrag.validate import check_k

eval_app = typer.Typer(no_args_is_help=True, help=(
    "Evaluate: retrieval scores an IR mode against relevance judgements (qrels); run makes an experiment grid "
    "or a seed study and report rebuilds its report; judge grades answers with a judge panel and calibrate "
    "measures the judges on items of known truth; cs scores BordIRlines concurrence."))
app.add_typer(eval_app, name="eval")


def _check_inputs(mode: str | None, depth: int | None, trec: Path | None) -> None:
    """Everything that can be wrong with the arguments, before the index is opened."""
    if mode is not None:
        try:
            parse_mode(mode)
        except ValueError as e:
            raise ConfigError(f"--mode: {e}") from None
    check_k(depth, "--depth")  # the one rule of every k (xlrag.validate)
    if trec is not None:
        from xlrag.evals.retrieval import TREC_RUN

        check_output(trec, "--trec", TREC_RUN)


@eval_app.command("retrieval")
def eval_retrieval(
    queries: Annotated[Path,
                       typer.Option("--queries", help="JSONL of {id, question, lang?}; lang is detected when absent")],
    qrels: Annotated[Path, typer.Option("--qrels", help="JSONL of {query_id, doc_id, relevance}")],
    index_dir: IndexDirOpt = None,
    mode: Annotated[str | None, typer.Option(
        "--mode", "-m", help=f"IR mode to evaluate: {MODE_NAMES} {config_default('retrieval.mode')}")] = None,
    depth: Annotated[int | None, typer.Option("--depth", help=(
        "passages ranked per query, the metrics' largest cut-off (not -k, which means passages shown "
        f"everywhere else) {config_default('retrieval.retrieve_k')}"))] = None,
    fusion: FusionOpt = None,
    channels: ChannelsOpt = None,
    trec: Annotated[Path | None, typer.Option("--trec", help="also write the run as a TREC run file")] = None,
    config: ConfigOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help="print one JSON object instead of tables")] = False,
) -> None:
    """Hit@k, MRR, nDCG and recall by query language -> document language, same- and
    cross-language means with 95% bootstrap CIs, and each query language's bias.

    The list scored is retrieval.retrieve_k deep, not retrieval.k (the passages `retrieve`
    returns and `ask` shows): the candidates a reranker or an answer would choose from, so
    that hit@k and recall@k say whether the evidence was found at all.
    """
    from rich.progress import Progress

    from xlrag.cli._app import shown_warnings
    from xlrag.cli.retrieving import retrieval_warnings
    from xlrag.evals.retrieval import load_qrels, trec_run, write_trec_run
    from xlrag.evals.retrieval_run import evaluate_retriever
    from xlrag.indexes.retriever import CrossLingualRetriever

    try:
        _check_inputs(mode, depth, trec)
        judged = load_qrels(qrels)

        prepared = read_queries(queries)
        cfg = _config(config, index_dir=index_dir, mode=mode, k=depth, fusion=fusion, channels=channels)
        if depth is None:
            depth = cfg.retrieval.retrieve_k
            cfg = cfg.model_copy(update={"retrieval": cfg.retrieval.model_copy(update={"k": depth})})
        retriever = CrossLingualRetriever.from_config(cfg)
        try:
            with Progress(console=err, transient=True) as bar, shown_warnings():
                task = bar.add_task("retrieving", total=len(prepared))
                evaluation = evaluate_retriever(retriever, prepared, judged, k=depth,
                                                progress=lambda done, total: bar.update(task, completed=done))
        finally:
            retriever.close()
        report = evaluation.report
        if trec is not None:
            lines = write_trec_run(trec, trec_run(evaluation.rankings, "document"),
                                   tag=f"xlrag-{report['mode']}-{report['fusion']}")
    except XlragError as e:
        _fail(e)
    retrieval_warnings(report["complete"], list(report["notes"]))
    skipped = report["queries"]
    for key, why in (("no_qrels", "have no qrels"), ("no_relevant", "have no document with relevance > 0")):
        if skipped[key]:
            ids = ", ".join(skipped[key][:5]) + (", ..." if len(skipped[key]) > 5 else "")
            warn(f"{len(skipped[key])} queries {why} and are not scored: {ids}")
    if report["summary"]["n"]["mixed_lang"]:
        warn(f"{report['summary']['n']['mixed_lang']} queries have relevant documents in several languages: "
             "they are reported as mixed_lang, outside the same- and cross-language means")
    if as_json:
        out.print_json(json.dumps(report, ensure_ascii=False))
    else:
        print_report(report)
    if trec is not None:
        (err if as_json else out).print(f"wrote {lines} lines to {escape(str(trec))}", highlight=False)


def _f(x: float | None) -> str:
    return "–" if x is None else f"{x:.3f}"


def _ci(mean: float | None, ci: list[float] | None) -> str:
    return "–" if mean is None or ci is None else f"{mean:.3f} [{ci[0]:.3f}, {ci[1]:.3f}]"


def _table(title: str, columns: list[tuple[str, str]]) -> Table:
    from rich import box

    table = Table(title=title, box=box.SIMPLE_HEAD, pad_edge=False)
    for name, justify in columns:
        table.add_column(name, justify=justify, no_wrap=True)  # type: ignore[arg-type]
    return table


def print_report(report: dict[str, Any]) -> None:
    names, s = report["metrics"], report["summary"]
    q = report["queries"]
    cells = _table(f"mode {report['mode']}, fusion {report['fusion']}, k {report['k']}: {q['evaluated']} of "
                   f"{q['ranked']} queries scored ({report['level']} level)",
                   [("query->doc", "left"), ("n", "right"), *((n, "right") for n in names)])
    for cell, m in report["by_cell"].items():
        cells.add_row(escape(cell), str(m["n"]), *(_f(m[n]) for n in names))
    for group in ("same_lang", "cross_lang", "mixed_lang"):
        if group in s:
            cells.add_row(f"[b]{group} micro[/]", str(s["n"][group]), *(_f(s[group][n]) for n in names))
    for group in ("same_lang", "cross_lang"):
        cells.add_row(f"[b]{group} macro[/]", str(len(s["cells"][group])),
                      *(_f(s["macro"][group][n]) for n in names))
    out.print(cells)

    ci = _table("means with 95% bootstrap CIs",
                [("metric", "left"), ("mean", "left"), ("same_lang", "right"), ("cross_lang", "right")])
    for n in names:
        for kind, means, cis in (("micro", s, s["ci95"]), ("macro", s["macro"], s["macro_ci95"])):
            ci.add_row(n, kind, *(_ci(means[g][n], cis[g][n]) for g in ("same_lang", "cross_lang")))
    out.print(ci)

    bias = _table(f"retrieved languages in the top {report['k']} (ratio = in-language share / index share)",
                  [("query lang", "left"), ("queries", "right"), ("in-lang", "right"), ("index", "right"),
                   ("ratio", "right"), ("English", "right"), ("retrieved", "left")])
    for lang, b in report["bias"].items():
        dist = ", ".join(f"{x} {v:.2f}" for x, v in sorted(b["retrieved"].items(), key=lambda kv: -kv[1]))
        bias.add_row(escape(lang), str(b["n_queries"]), _f(b["in_language_share"]), _f(b["index_share"]),
                     "–" if b["in_language_ratio"] is None else f"{b['in_language_ratio']:.2f}",
                     _f(b["english_share"]), escape(dist))
    out.print(bias)
    echo("same_lang: every relevant document is in the query's language; cross_lang: none is. Micro means "
         "average queries, macro means average cells (n = cells). Ranks count passages; a passage is relevant "
         "when its document is.")
