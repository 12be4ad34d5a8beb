"""The perspectives view as Markdown and as a self-contained HTML page (the eval reports'
style, :func:`xlrag.pages.html_document`). The per-language answers come first; the
verdict follows them, never alone.

Everything in the view that came from the corpus, the model or the user (the question, answers,
notes, reasons, document ids) is put in as inert text: on one line (a line break in an answer
cannot start a heading or a list), without control characters (no ESC or BEL reaches a
terminal), and in the Markdown with every character Markdown or HTML could read as syntax
escaped, so an answer holding ``<img src=https://...>``, ``[x](javascript:...)``,
``![](https://...)`` or ``# Verdict: consensus`` shows those characters and does nothing.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING

from xlrag.languages import display_name
from xlrag.text import strip_controls

if TYPE_CHECKING:
    from xlrag.perspectives.models import Perspectives, Side

__all__ = ["to_html", "to_markdown"]

Escape = Callable[[str], str]
# CommonMark lets any ASCII punctuation be backslash-escaped; these are the ones that open
# inline syntax anywhere in a line: emphasis, code, links and images, raw HTML, entities,
# GFM tables and strikethrough
_INLINE = re.compile(r"([\\`*_\[\]{}()<>!|~&#])")
# and these only at a line's start: a list item, a setext underline, an ordered list
_LINE_START = re.compile(r"^([-+=])|^(\d+)([.)])")


def _plain(text: str) -> str:
    """One line without control characters."""
    return " ".join(strip_controls(text).split())


def _markdown_text(text: str) -> str:
    """:func:`_plain`, with Markdown's and HTML's syntax characters escaped."""
    out = _INLINE.sub(r"\\\1", _plain(text))
    return _LINE_START.sub(lambda m: f"\\{m.group(1)}" if m.group(1) else f"{m.group(2)}\\{m.group(3)}", out)


def _cites(side_citations: list) -> str:
    return ", ".join(f"<doc{c.marker}> {c.doc_id or ''}".strip() + (" (post hoc)" if c.source == "post_hoc" else "")
                     for c in side_citations) or "none"


def _side(s: Side, esc: Escape) -> str:
    return f"{display_name(s.lang)} ({esc(s.lang)}): {esc(s.answer)} [{esc(_cites(s.citations))}]"


def _render(view: Perspectives, esc: Escape) -> str:
    """The report's lines, each piece of the view's own text through ``esc``."""
    lines = [f"# Perspectives: {esc(view.question)}", "",
             f"Languages {esc(', '.join(view.choice.langs)) or 'none'}: {esc(view.choice.reason)}; answers in "
             f"{display_name(view.lang) if view.lang else 'the question’s language'}.", ""]
    lines += [f"- {esc(n)}" for n in view.choice.notes]
    lines += ["", "| language | answer | citations | agrees with | flags |", "|---|---|---|---|---|"]
    for p in view.perspectives:
        answer = p.shown + (f" ({p.note})" if p.note and p.answer is not None and p.answer.answered else "")
        flags = ", ".join(p.answer.flags) if p.answer is not None else ""
        lines.append(f"| {display_name(p.lang)} ({esc(p.lang)}) | {esc(answer)} | {esc(_cites(p.citations))} | "
                     f"{esc(', '.join(view.agrees_with(p.lang))) or '-'} | {esc(flags)} |")
    lines += ["", f"## Verdict: {view.status}", ""]
    if view.note:
        lines += [esc(view.note), ""]
    for c in view.consensus:
        lines += [f"- Consensus of {esc(', '.join(c.langs))}: {_side(c.chosen, esc)} ({esc(c.why_chosen)})"]
    for d in view.disagreements:
        lines += [f"- Disagreement ({esc(d.method)}, {esc(d.reason)}):", *(f"  - {_side(s, esc)}" for s in d.sides)]
    unsure = [p for p in view.pairs if p.agreement == "unsure"]
    lines += [f"- Undecided: {esc(p.a)} and {esc(p.b)} ({esc(p.reason)})" for p in unsure]
    k = view.costs
    lines += ["", f"Cost: {k.answers} answers, {k.repairs} repairs, {k.lexical_comparisons} lexical comparisons, "
                  f"{k.judge_calls} judge calls."]
    return "\n".join(lines)


def to_markdown(view: Perspectives) -> str:
    """The view as Markdown: the languages and why, the table of answers, then the verdict.
    The view's own text is inert in it (see the module's docstring)."""
    return _render(view, _markdown_text)


def to_html(view: Perspectives) -> str:
    """The view as one self-contained HTML page: the report's text in a ``<pre>``, escaped for
    HTML (so without Markdown's backslashes)."""
    from xlrag.pages import html_document

    return html_document(f"Perspectives: {_plain(view.question)}", _render(view, _plain), {})
