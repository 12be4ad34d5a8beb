"""`xlrag ask` and `xlrag demo`: grounded answers with <docN> citations."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from xlrag.checks.substance import unverified as unverified_reasons
from xlrag.cli._app import (
    MODE_NAMES,
    TOP_K,
    ChannelsOpt,
    ConfigOpt,
    EmbedderOpt,
    ExplanationOpt,
    IndexDirOpt,
    LangOpt,
    LLMOpt,
    RelevantLangsOpt,
    TargetLangOpt,
    _config,
    _csv,
    _fail,
    app,
    config_default,
    fit,
    out,
    shown,
    shown_warnings,
    terminal_text,
)
from xlrag.cli.retrieving import retrieval_warnings
from xlrag.errors import ConfigError, XlragError
from xlrag.formats import AnswerFormat, parse_format
from xlrag.languages import display_name
from xlrag.outputs import check_output
from xlrag.queries import check_question

# what each reason an answer is not verified means to a reader (xlrag.checks.substance.UNVERIFIED_REASONS)
_UNVERIFIED = {"not_an_answer": "does not answer the question (it is empty, repeats the question or the "
                                "template, or refuses although the top passage holds the answer)",
               "unsupported": "says things that none of its cited passages holds",
               "uncited": "cites none of the passages it was shown",
               "post_hoc_only": "cites no passage itself: its citations were attributed afterwards by "
                                "similarity, and may not support it",
               "quoted_only": "is not the model's: it gave no answer, and this is the sentence of a passage "
                              "in your language most about the question"}


@app.command()
def ask(
    question: Annotated[str, typer.Argument(help="the question, in any language")],
    index_dir: IndexDirOpt = None,
    mode: Annotated[str | None, typer.Option("--mode", "-m", help=f"IR mode: {MODE_NAMES} (no_ir answers closed-book) "
                                             f"{config_default('retrieval.mode')}")] = None,
    fmt: Annotated[str, typer.Option("--format", "-f", help=f"answer format: {', '.join(AnswerFormat)}")] = "citation",
    options: Annotated[list[str] | None, typer.Option(
        "--option", help="an answer option of --format mc (repeat: --option A --option B)")] = None,
    k: Annotated[int | None,
                 typer.Option(*TOP_K, help=f"passages shown to the LLM {config_default('retrieval.k')}")] = None,
    llm: LLMOpt = None,
    channels: ChannelsOpt = None,
    lang: LangOpt = None,
    relevant_langs: RelevantLangsOpt = None,
    target_lang: TargetLangOpt = None,
    embedder: EmbedderOpt = None,
    explanation: ExplanationOpt = None,
    config: ConfigOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help="print the GroundedAnswer as JSON")] = False,
    agent: Annotated[bool, typer.Option("--agent", help="answer with the agent: verify language and citations, "
                                        "repair; --json adds the trace under 'trace'")] = False,
    perspectives: Annotated[bool, typer.Option(
        "--perspectives", help="answer once per language of sources (each checked by the agent), side by side, "
                               "and flag where they disagree; the languages: --relevant-langs, else an agent rule's or "
                               "a disputed territory's, else the best-ranked stores; the answers stop at their "
                               "explanation, which the view does not show, unless --explanation "
                               "(agent.perspectives.explanation)")] = False,
    max_langs: Annotated[int | None, typer.Option(
        "--max-langs", help="with --perspectives: at most this many languages (default 3; every one "
                            "--relevant-langs names)")] = None,
    html: Annotated[Path | None, typer.Option(
        "--html", help="with --perspectives: also write the view as a self-contained HTML page to this file")] = None,
) -> None:
    """Answer a question in its own language, grounded in retrieved passages with <docN> citations."""
    from xlrag.chains.rag import GroundedChain

    try:
        fmt = parse_format(fmt)
        if fmt is AnswerFormat.MC and len(options or []) < 2:
            raise ConfigError("--format mc needs at least two answer options: repeat --option, e.g. "
                              "--option España --option Marruecos")
        if explanation is not None and fmt is not AnswerFormat.CITATION:
            flag = "--explanation" if explanation else "--no-explanation"
            raise ConfigError(f"{flag} goes with --format citation, the one format with an explanation; "
                              f"drop {flag} or --format {fmt}")
        cfg = _config(config, index_dir=index_dir, mode=mode, k=k, embedder=embedder, llm=llm, channels=channels,
                      explanation=explanation)
        # before any model or index is opened (the pipeline checks it again, for every other door)
        check_question(question, cfg.retrieval.max_question_chars)
        if perspectives:
            _check_perspectives(fmt, options, mode, target_lang, html)
            from xlrag.cli.perspectives import ask_perspectives, view_config

            ask_perspectives(view_config(cfg, explanation), {"question": question, "lang": lang,
                                   "relevant_langs": _csv(relevant_langs) if relevant_langs else None,
                                   "max_langs": max_langs}, as_json, html)
            return
        if max_langs is not None or html is not None:
            raise ConfigError("--max-langs and --html go with --perspectives")
        if agent:
            if fmt is not AnswerFormat.CITATION or options:
                raise ConfigError("--agent answers in the citation format; drop --format and --option")
            _ask_agent(cfg, {"question": question, "lang": lang, "mode": mode,
                             "relevant_langs": _csv(relevant_langs) or None, "target_lang": target_lang}, as_json)
            return
        chain = GroundedChain.from_config(cfg, fmt=fmt)
        inputs: dict[str, Any] = {"question": question, "lang": lang, "relevant_langs": _csv(relevant_langs) or None,
                                  "target_lang": target_lang, "options": options or None}
        given = {k_: v for k_, v in inputs.items() if v is not None}
        with shown_warnings():
            # JSON is one document; a reader at a terminal sees the reply as it is written
            answer = chain.invoke(given) if as_json else print_stream(chain.stream(given))
    except XlragError as e:
        _fail(e)
    retrieval_warnings(answer.complete, answer.notes)
    if as_json:
        out.print_json(answer.model_dump_json())
        return
    print_answer(answer)


def _check_perspectives(fmt: AnswerFormat, options: list[str] | None, mode: str | None,
                        target_lang: str | None, html: Path | None) -> None:
    if fmt is not AnswerFormat.CITATION or options:
        raise ConfigError("--perspectives answers in the citation format; drop --format and --option")
    given = [name for name, v in (("--mode", mode), ("--target-lang", target_lang)) if v]
    if given:
        raise ConfigError(f"--perspectives searches one language's store per answer; drop {given[0]} "
                          f"(choose the languages with --relevant-langs)")
    if html is not None:
        from xlrag.pages import HTML_PAGE

        check_output(html, "--html", HTML_PAGE)


def _ask_agent(cfg: Any, inputs: dict[str, Any], as_json: bool) -> None:
    import json

    from xlrag.agents.build import build_agent
    from xlrag.agents.chat import agent_run

    graph = build_agent(cfg)
    given = {k: v for k, v in inputs.items() if v is not None}
    with shown_warnings():
        result = graph.invoke(given) if as_json else print_stream(agent_run(graph, given))
    answer, trace = result["answer"], result["trace"]
    retrieval_warnings(answer.complete, answer.notes)
    if as_json:
        out.print_json(json.dumps({**answer.model_dump(mode="json"), "trace": trace.model_dump(mode="json")}))
        return
    print_answer(answer)
    print_trace(trace)


def print_stream(items: Iterable[Any]) -> Any:
    """Print the model's tokens as they come (control characters stripped) and return the
    stream's last item, the answer. A repair's regenerated reply (agent) starts a new line."""
    from xlrag.chains.state import AnswerToken

    final, attempt, printed = None, 0, False
    for item in items:
        if not isinstance(item, AnswerToken):
            final = item
            continue
        if item.attempt != attempt:
            attempt = item.attempt
            out.print(f"\n[dim]regenerated by a repair (attempt {attempt}):[/]", highlight=False)
        out.print(terminal_text(item.text), end="", markup=False, highlight=False)
        printed = True
    if printed:
        out.print()
    if final is None:
        raise RuntimeError("the answer stream ended without an answer")
    return final


def print_trace(trace: Any) -> None:
    """The agent's steps, one line each: what a user reads to trust (or not) the answer."""
    out.print(f"[bold]mode[/] {trace.mode}: {shown(trace.mode_reason)}", highlight=False)
    if trace.original_question:
        out.print(f"[bold]searched as[/] {shown(trace.question)}", highlight=False)
    langs = ", ".join(f"{lang} {n}" for lang, n in sorted(trace.retrieved_langs.items())) or "none"
    out.print(f"[bold]retrieved[/] {langs}", highlight=False)
    for c in trace.checks:
        mark = "[green]pass[/]" if c.passed else "[red]fail[/]"
        out.print(f"  check {c.check} (attempt {c.attempt}): {mark} {shown(c.detail)}", highlight=False)
    for r in trace.repairs:
        out.print(f"  repair {r.repair.value}: {shown(r.detail)} ({r.seconds:.1f}s)", highlight=False)
    if trace.unrepaired:
        out.print(f"[yellow]still failing:[/] {', '.join(trace.unrepaired)}", highlight=False)
    out.print(f"[dim]{trace.seconds:.1f}s in all[/]")


def print_unverified(answer: Any) -> None:
    """A red line when the substance checks still fail: such an answer is never shown as verified."""
    unverified = unverified_reasons(answer)
    if unverified:
        out.print(f"[bold red]not verified ({', '.join(unverified)}):[/] the checks found that this answer "
                  f"{_UNVERIFIED[unverified[0]]}; read the passages before relying on it", highlight=False)


def print_answer(answer: Any) -> None:
    out.rule(f"[bold]{display_name(answer.lang)}[/] · mode {answer.mode} · {answer.format} · {shown(answer.model)}")
    if answer.chosen_option is not None:
        out.print(f"[bold]chosen option:[/] {chr(65 + answer.option_index)}) {shown(answer.chosen_option)}",
                  highlight=False)
    out.print(f"[bold]answer:[/] {shown(terminal_text(answer.answer or '—'))}", highlight=False)
    if answer.explanation:
        out.print(f"[bold]explanation:[/] {shown(terminal_text(answer.explanation))}", highlight=False)
    print_unverified(answer)
    if answer.flags:
        out.print(f"[yellow]flags:[/] {shown(', '.join(answer.flags))}", highlight=False)
    if not answer.citations:
        return
    table = Table(title="citations")
    for col, width in (("doc", 7), ("source", 8), ("lang", 4), ("document", 12)):
        table.add_column(col, no_wrap=True, min_width=width)
    table.add_column("snippet", no_wrap=True)
    room = max(20, out.width - 50)
    # a citation per supported sentence: one row per passage and source is what a reader needs
    rows: dict[tuple[int, str], Any] = {}
    for c in answer.citations:
        rows.setdefault((c.marker, c.source), c)
    for c in rows.values():
        hit = answer.passages[c.marker] if c.valid else None
        flat = " ".join(hit.passage.text.split()) if hit else "(no such document)"
        table.add_row(f"<doc{c.marker}>", c.source, c.lang or "", shown(c.doc_id or ""),
                      shown(fit(flat, room)))
    out.print(table)
