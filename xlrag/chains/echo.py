"""Echo detection: reply lines copied from the prompt are not an answer.

Small models often copy the format example ("Cited Documents: the documents you
used, e.g. <doc0>, <doc2>") or fill the template with its own placeholders
("Answer: 你的答案") instead of answering. The reference they are compared with is
cut from the very messages sent, never re-rendered, so it cannot drift from them.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from xlrag.formats import Section

__all__ = ["drop_echo", "echo_reference", "strip_markup"]


_WORD = re.compile(r"\w+", re.UNICODE)
_MARKUP = re.compile(r"[*#|_]+|-{3,}")


def strip_markup(text: str) -> str:
    """Markdown bullets and table rules removed, white space folded."""
    return " ".join(_MARKUP.sub(" ", text).split())
# A line made only of section headers and <docN> markers is structure, not a copy.
_HEADER_WORDS = frozenset(w.lower() for s in Section for w in s.value.split())
_MARKER_WORD = re.compile(r"^doc\d*$")


def _words(line: str) -> frozenset[str]:
    return frozenset(w for w in _WORD.findall(line.lower()) if not _MARKER_WORD.match(w) and not w.isdigit())


def echo_reference(messages: Sequence[tuple[str, str]], documents: Sequence[str], question: str,
                   options: Sequence[str] | None = None) -> str:
    """What an echo copies: every line of the messages actually sent, except the documents,
    the question and the answer options (quoting a passage or naming an option is an answer)."""
    from xlrag.prompts import format_options

    norm = strip_markup
    doc_lines = {norm(x) for d in documents for x in d.splitlines() if x.strip()}
    doc_lines |= {norm(d) for d in documents}
    doc_lines |= {norm(x) for x in format_options(options or []).splitlines()}
    asked = norm(question)
    kept = []
    for _, content in messages:
        for line in content.splitlines():
            n = norm(line)
            body = _DOC_PREFIX.sub("", n)
            if not n or body in doc_lines or n in doc_lines or (asked and asked in n):
                continue
            kept.append(line)
    return "\n".join(kept)


_DOC_PREFIX = re.compile(r"^<doc\d+>\s*")
_HEADER_PREFIX = re.compile(
    r"^[\s*_#>]*(?:" + "|".join(re.escape(s.value) for s in Section) + r")[\s*_]*:[\s*_]*", re.IGNORECASE
)
_ELLIPSIS = "….。 "


def _placeholder(line: str) -> str | None:
    """The value of a "Header: value" line, folded for comparison (None: no header)."""
    m = _HEADER_PREFIX.match(line)
    if not m:
        return None
    value = " ".join(line[m.end():].split()).lower()
    return value or None


def _fills_placeholder(value: str, placeholder: str) -> bool:
    """``value`` copies ``placeholder``, whole or up to the template's own ellipsis."""
    if value == placeholder:
        return True
    stem = value.rstrip(_ELLIPSIS)
    if not stem or not placeholder.startswith(stem):
        return False
    # "因为……" copies "因为……（…）": a short stem counts when the template's "…" follows it.
    return len(stem) >= 4 or placeholder[len(stem):].lstrip().startswith(("…", "..."))


def drop_echo(raw: str, instructions_text: str) -> str:
    """Remove reply lines copied from the prompt's instructions.

    Small base models often copy the format example ("Cited Documents: the documents
    you used, e.g. <doc0>, <doc2>") instead of filling it in, sometimes cut short or
    with the markers dropped or two lines spliced; such a line is not an answer. A line
    counts as copied when nearly all its words come from one instruction line and it
    shares most of that line's words, or when (five words or more) nine in ten of its
    words are instruction words. Document blocks are not instructions: an extractive answer
    quoting a passage is kept.
    """
    lines_in = [x for x in instructions_text.splitlines() if x.strip()]
    exact = {" ".join(x.lower().split()) for x in lines_in}
    instructions = [_words(x) for x in lines_in if len(_words(x)) >= 3]
    if not instructions:
        return raw

    vocabulary = frozenset().union(*instructions)
    # "Answer: your answer" in the template: a reply line whose value is a template
    # placeholder ("Answer: 你的答案", "**Explanation:** because …") fills nothing in.
    placeholders = {v for v in map(_placeholder, lines_in) if v and _words(v)}

    def copied(line: str) -> bool:
        value = _placeholder(line)
        if value is not None and any(_fills_placeholder(value, p) for p in placeholders):
            return True
        if _words(line) <= _HEADER_WORDS:
            return False
        norm = " ".join(line.lower().split())
        if norm and (norm in exact or f"cited documents: {norm}" in exact):
            return True
        words = _words(line)
        if len(words) < 3:
            return False
        # Spliced from several instruction lines: almost every word is an instruction word.
        if len(words) >= 5 and len(words & vocabulary) >= 0.9 * len(words):
            return True
        for inst in instructions:
            shared = len(words & inst)
            if shared >= 0.85 * len(words) and shared >= 0.5 * len(inst):
                return True
        return False

    lines = raw.splitlines()
    kept = [x for x in lines if not copied(x)]
    return "\n".join(kept) if len(kept) != len(lines) else raw
