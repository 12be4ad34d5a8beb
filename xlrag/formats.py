"""The answer-format contract, defined once.

Everything that names a format, writes a section header or recognises a label
derives from here: the prompt library renders the headers, the parser finds
them, the chain and the CLI validate format names, and the result model types
its ``format`` field. ``tests/test_formats.py`` proves each derivation.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable
from enum import StrEnum

from xlrag.errors import ConfigError

__all__ = [
    "ANSWER_HEADER",
    "CHOICE_HEADER",
    "CITED_HEADER",
    "EXPLANATION_HEADER",
    "MARKER_CLOSE",
    "MARKER_KEYWORD",
    "MARKER_OPEN",
    "AnswerFormat",
    "Section",
    "document_line",
    "neutralize_markers",
    "parse_format",
    "words_pattern",
]


class AnswerFormat(StrEnum):
    """How the model is asked to answer (and how its reply is parsed)."""

    ANSWER = "answer"  # a short answer in the user's language (mRAG)
    MC = "mc"  # exactly one of the given options (BordIRlines "direct")
    CITATION = "citation"  # Cited Documents / Answer / Explanation with <docN> (BordIRlines)


class Section(StrEnum):
    """The section headers of the citation format.

    They stay in English in every language: the parser finds a reply's sections by
    these literal names whatever language the prose is in (BordIRlines convention).
    """

    CITED = "Cited Documents"
    ANSWER = "Answer"
    CHOICE = "Chosen Option"
    EXPLANATION = "Explanation"

    @property
    def header(self) -> str:
        return f"{self.value}:"


# The <docN> citation marker's grammar: the brackets and keywords a reply may write it with
# (chains/parsing/markers.py reads replies with them; neutralize_markers defuses them in passages).
MARKER_OPEN = "[<＜〈\\[［]"
MARKER_CLOSE = "[>＞〉\\]］]"
MARKER_KEYWORD = "(?:doc(?:ument(?:os|o|s)?|s)?|документ(?:ами|ах|ов|ы|а|е|у)?)"
# a bracketed marker, or a bracketed list of numbers: "<doc7>", "[doc 2]", "<doc0, doc2>"
_BRACKETED = re.compile(
    f"{MARKER_OPEN}[ \\t]*{MARKER_KEYWORD}[ \\t]*[_#\\-]?[ \\t]*\\d+"
    f"(?:[ \\t]*[,;、，،/&][ \\t]*(?:{MARKER_KEYWORD}[ \\t]*[_#\\-]?[ \\t]*)?\\d+)*[ \\t]*{MARKER_CLOSE}",
    re.IGNORECASE,
)


def neutralize_markers(text: str) -> str:
    """``text`` (a passage) with its citation-like markers made inert: ``<doc7>`` becomes
    ``«ref 7»``. A passage that says "cite <doc7>" must neither number itself into the
    prompt's own ``<docN>`` sequence nor hand the model a marker to copy."""
    return _BRACKETED.sub(lambda m: "«ref " + ", ".join(re.findall(r"\d+", m.group(0))) + "»", text)


def document_line(marker: int, text: str) -> str:
    """One shown passage as the prompt numbers it: ``<docN> text``, its own markers neutralised."""
    return f"<doc{marker}> {neutralize_markers(text)}"


CITED_HEADER = Section.CITED.header
ANSWER_HEADER = Section.ANSWER.header
CHOICE_HEADER = Section.CHOICE.header
EXPLANATION_HEADER = Section.EXPLANATION.header

def parse_format(value: str | AnswerFormat) -> AnswerFormat:
    """``value`` as an :class:`AnswerFormat`; an unknown name fails with a suggestion."""
    try:
        return AnswerFormat(value)
    except ValueError:
        names = [f.value for f in AnswerFormat]
        close = difflib.get_close_matches(str(value), names, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise ConfigError(f"unknown answer format {value!r}{hint}; use one of: {', '.join(names)}") from None


def words_pattern(words: Iterable[str]) -> str:
    """A regex alternation of ``words`` (longest first), spaces matching any whitespace."""
    unique = sorted({w.strip() for w in words if w.strip()}, key=lambda w: (-len(w), w))
    return "|".join(r"\s+".join(re.escape(part) for part in w.split()) for w in unique)
