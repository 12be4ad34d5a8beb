"""The perspectives view as Markdown and as a self-contained HTML page (the eval reports'
style, :func:`xlrag.evals.pages.html_document`). The per-language answers come first; the
verdict follows them, never alone."""

from __future__ import annotations

from typing import TYPE_CHECKING

from xlrag.languages import display_name

if TYPE_CHECKING:
    from xlrag.perspectives.models import Perspectives, Side

__all__ = ["to_html", "to_markdown"]


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _cites(side_citations: list) -> str:
    return ", ".join(f"<doc{c.marker}> {c.doc_id or ''}".strip() + (" (post hoc)" if c.source == "post_hoc" else "")
                     for c in side_citations) or "none"


def _side(s: Side) -> str:
    return f"{display_name(s.lang)} ({s.lang}): {_cell(s.answer)} [{_cites(s.citations)}]"


def to_markdown(view: Perspectives) -> str:
    """The view as Markdown: the languages and why, the table of answers, then the verdict."""
    lines = [f"# Perspectives: {_cell(view.question)}", "",
             f"Languages {', '.join(view.choice.langs) or 'none'}: {view.choice.reason}; answers in "
             f"{display_name(view.lang) if view.lang else 'the question’s language'}.", ""]
    lines += [f"- {n}" for n in view.choice.notes]
    lines += ["", "| language | answer | citations | agrees with | flags |", "|---|---|---|---|---|"]
    for p in view.perspectives:
        answer = p.shown + (f" ({p.note})" if p.note and p.answer is not None and p.answer.answered else "")
        flags = ", ".join(p.answer.flags) if p.answer is not None else ""
        lines.append(f"| {display_name(p.lang)} ({p.lang}) | {_cell(answer)} | {_cell(_cites(p.citations))} | "
                     f"{', '.join(view.agrees_with(p.lang)) or '-'} | {_cell(flags)} |")
    lines += ["", f"## Verdict: {view.status}", ""]
    if view.note:
        lines += [view.note, ""]
    for c in view.consensus:
        lines += [f"- Consensus of {', '.join(c.langs)}: {_side(c.chosen)} ({c.why_chosen})"]
    for d in view.disagreements:
        lines += [f"- Disagreement ({d.method}, {d.reason}):", *(f"  - {_side(s)}" for s in d.sides)]
    unsure = [p for p in view.pairs if p.agreement == "unsure"]
    lines += [f"- Undecided: {p.a} and {p.b} ({p.reason})" for p in unsure]
    k = view.costs
    lines += ["", f"Cost: {k.answers} answers, {k.repairs} repairs, {k.lexical_comparisons} lexical comparisons, "
                  f"{k.judge_calls} judge calls."]
    return "\n".join(lines)


def to_html(view: Perspectives) -> str:
    """The view as one self-contained HTML page."""
    from xlrag.evals.pages import html_document

    return html_document(f"Perspectives: {view.question}", to_markdown(view), {})
