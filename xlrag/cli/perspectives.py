"""``xlrag ask --perspectives``: the question answered per language of sources, side by side.

The table of per-language answers comes first; the verdict (consensus groups, disagreement
points) follows it, never alone. Every corpus or model text goes through ``shown``/``fit``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.table import Table

from xlrag.cli._app import fit, out, shown, shown_warnings, warn
from xlrag.languages import display_name

__all__ = ["ask_perspectives", "print_perspectives", "view_config"]

_STATUS = {"consensus": "[green]consensus[/]", "disagreement": "[bold red]the sources disagree[/]",
           "unsure": "[yellow]undecided[/]", "single": "[yellow]one perspective[/]"}


def _cites(citations: list[Any]) -> str:
    return ", ".join(f"<doc{c.marker}> {c.doc_id or ''}".strip() + (" (post hoc)" if c.source == "post_hoc" else "")
                     for c in citations) or "none"


def _side(side: Any, room: int) -> str:
    return f"[bold]{side.lang}[/] {shown(fit(' '.join(side.answer.split()), room))} " \
           f"[dim]({shown(_cites(side.citations))})[/]"


def view_config(cfg: Any, explanation: bool | None) -> Any:
    """``cfg`` for the view under ``--explanation/--no-explanation``: ``--explanation`` asks the
    view's answers for theirs (agent.perspectives.explanation); ``--no-explanation`` is already
    answer.explanation: false, which turns them off everywhere."""
    if not explanation:
        return cfg
    view = cfg.agent.perspectives.model_copy(update={"explanation": True})
    return cfg.model_copy(update={"agent": cfg.agent.model_copy(update={"perspectives": view})})


def print_perspectives(view: Any) -> None:
    """The per-language table, then the verdict: what a reader needs to see both sides."""
    out.rule(f"[bold]perspectives[/] · answers in {display_name(view.lang) if view.lang else '?'}")
    out.print(f"[bold]languages[/] {', '.join(view.choice.langs) or 'none'}: {shown(view.choice.reason)}",
              highlight=False)
    for note in view.choice.notes:
        warn(note, "note")
    table = Table(title="what each language's sources say")
    table.add_column("language", no_wrap=True)
    table.add_column("answer")
    table.add_column("citations")
    table.add_column("agrees with", no_wrap=True)
    for p in view.perspectives:
        answer = shown(p.shown) if p.answer is not None and p.answer.answered else f"[yellow]{shown(p.shown)}[/]"
        if p.note and p.answer is not None and p.answer.answered:
            answer += f"\n[yellow]{shown(p.note)}[/]"
        flags = [f for f in (p.answer.flags if p.answer is not None else []) if f]
        if flags:
            answer += f"\n[yellow]flags:[/] {shown(', '.join(flags))}"
        table.add_row(f"{display_name(p.lang)} ({p.lang})", answer, shown(_cites(p.citations)),
                      ", ".join(view.agrees_with(p.lang)) or "-")
    out.print(table)
    room = max(20, out.width - 30)
    out.print(f"[bold]verdict:[/] {_STATUS[view.status]}", highlight=False)
    if view.note:
        out.print(shown(view.note), highlight=False)
    for c in view.consensus:
        out.print(f"  agree ({', '.join(c.langs)}): {_side(c.chosen, room)}", highlight=False)
    for d in view.disagreements:
        out.print(f"  [red]disagree[/] ({d.method}: {shown(d.reason)}):", highlight=False)
        for s in d.sides:
            out.print(f"    {_side(s, room)}", highlight=False)
    for p in view.pairs:
        if p.agreement == "unsure":
            out.print(f"  [yellow]undecided[/] {p.a} / {p.b}: {shown(p.reason)}", highlight=False)
    k = view.costs
    out.print(f"[dim]{k.answers} answers, {k.repairs} repairs, {k.lexical_comparisons} comparisons, "
              f"{k.judge_calls} judge calls[/]")


def ask_perspectives(cfg: Any, inputs: dict[str, Any], as_json: bool, html: Path | None) -> None:
    """Build the view from ``cfg``, answer ``inputs``, print it (or its JSON), write ``html``."""
    from xlrag.agents.build import build_perspectives
    from xlrag.perspectives import to_html

    view = build_perspectives(cfg)
    try:
        with shown_warnings():
            result = view.invoke({k: v for k, v in inputs.items() if v is not None})
    finally:
        view.pipeline.close()
    if html is not None:
        html.write_text(to_html(result), encoding="utf-8")
    if as_json:
        out.print_json(result.model_dump_json())
        return
    print_perspectives(result)
    if html is not None:
        out.print(f"[dim]written {shown(str(html))}[/]", highlight=False)
