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
from dataclasses import dataclass
from enum import StrEnum
from typing import Literal, get_args

from xlrag.errors import ConfigError
from xlrag.text import capped

__all__ = [
    "ANSWER_HEADER",
    "CHOICE_HEADER",
    "CITED_HEADER",
    "DEFAULT_LAYOUT",
    "EXPLANATION_HEADER",
    "EXPLANATION_HEADERS",
    "EXPLANATION_STOPS",
    "MARKER_CLOSE",
    "MARKER_DANGLING_RE",
    "MARKER_KEYWORD",
    "MARKER_OPEN",
    "MARKER_RE",
    "OPTION_LETTERS",
    "PROMPT_LAYOUTS",
    "AnswerFormat",
    "Marker",
    "PromptLayout",
    "Section",
    "check_option_count",
    "document_line",
    "find_markers",
    "iter_markers",
    "neutralize_markers",
    "normalize_markers",
    "parse_format",
    "strip_markers",
    "words_pattern",
]

# Where an answer prompt puts its fixed instructions (PromptLibrary.build_messages, context.layout):
# documents_first, after the passages and the question; static_first, before them, the same bytes
# for every question, so a local model reuses its prefix state.
PromptLayout = Literal["documents_first", "static_first"]
PROMPT_LAYOUTS: tuple[str, ...] = get_args(PromptLayout)
#: The default layout (context.layout and PromptLibrary.build_messages). static_first waits for
#: benchmarks/answers.py to show that answers hold with it (docs/how-to/answers.md).
DEFAULT_LAYOUT: PromptLayout = "documents_first"

# The letters options are shown with ("A) ...", "B) ..."): the prompt writes them, the mc parser
# and the answer grammar read them.
OPTION_LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"


def check_option_count(n: int) -> int:
    """``n`` if that many options can each have a letter, else a one-line ConfigError."""
    if n > len(OPTION_LETTERS):
        raise ConfigError(f"{n} options given but only {len(OPTION_LETTERS)} letters exist; "
                          f"pass at most {len(OPTION_LETTERS)} options")
    return n


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


# The <docN> citation marker's grammar, owned here with every reading of it: the reply parser
# (chains/parsing/) finds citations with iter_markers / find_markers, the checks strip them with
# strip_markers, and neutralize_markers defuses in passages whatever MARKER_RE reads, so a
# passage can plant no form of marker the parser would take for a citation.
MARKER_OPEN = "[<＜〈\\[［]"
MARKER_CLOSE = "[>＞〉\\]］]"
MARKER_KEYWORD = "(?:doc(?:ument(?:os|o|s)?|s)?|документ(?:ами|ах|ов|ы|а|е|у)?)"
_NUM_SEP = "[ \\t]*[_#\\-]?[ \\t]*"
_LIST_SEP = "[ \\t]*[,;、，،/&][ \\t]*"
MARKER_RE = re.compile(
    # "<doc0, doc2>" / "[doc0; 2]": one bracket around several numbers.
    f"(?P<list>{MARKER_OPEN}[ \\t]*{MARKER_KEYWORD}{_NUM_SEP}\\d+(?:{_LIST_SEP}(?:{MARKER_KEYWORD}{_NUM_SEP})?\\d+)+"
    f"[ \\t]*{MARKER_CLOSE})"
    # "<doc0>", "<doc 1>", "[doc1]", "<Doc1>", "＜doc１＞".
    f"|(?P<wrapped>{MARKER_OPEN}[ \\t]*{MARKER_KEYWORD}{_NUM_SEP}\\d+[ \\t]*{MARKER_CLOSE})"
    # "documents 0 and 2", "docs 1, 3".
    "|(?P<plural>(?<![^\\W_])(?:documentos|documents|docs|документы|документах|документов)[ \\t]+\\d+"
    "(?:[ \\t]*(?:,|、|،|&|and|or|y|e|o|и|или)[ \\t]*\\d+)+(?!\\d))"
    # "doc1", "Doc 1", "document 1", and an unclosed "<doc1" in mid-text (so "</doc1>", "(doc1)").
    f"|(?P<bare>(?:{MARKER_OPEN}[ \\t]*)?(?<![^\\W_]){MARKER_KEYWORD}{_NUM_SEP}\\d+(?!\\d))",
    re.IGNORECASE,
)


# An opening bracket or a half-written marker at the very end: generation stopped mid-marker.
MARKER_DANGLING_RE = re.compile(
    f"{MARKER_OPEN}[ \\t]*(?:d(?:o(?:c(?:u[a-z]*)?)?)?)?[ \\t]*\\d*[ \\t]*$", re.IGNORECASE
)


@dataclass(frozen=True)
class Marker:
    """One marker found in a reply: where it is, and the document numbers it cites."""

    start: int
    end: int
    numbers: tuple[int, ...]


def iter_markers(text: str) -> list[Marker]:
    """Every marker in ``text``, in order."""
    # Keywords contain no digits, so every digit run in the match is a document number.
    return [Marker(m.start(), m.end(), tuple(int(d) for d in re.findall(r"\d+", m.group(0))))
            for m in MARKER_RE.finditer(text)]


def find_markers(text: str) -> list[int]:
    """Document numbers cited in ``text``, in order of first appearance."""
    return list(dict.fromkeys(n for marker in iter_markers(text) for n in marker.numbers))


def _canonical(m: re.Match[str]) -> str:
    numbers = [int(d) for d in re.findall(r"\d+", m.group(0))]
    if m.lastgroup == "plural":
        # Keep the connectors ("and", ",") and turn each number into a marker.
        body = re.sub(r"^\S+[ \t]+", "", m.group(0))
        return re.sub(r"\d+", lambda d: f"<doc{int(d.group(0))}>", body)
    return ", ".join(f"<doc{n}>" for n in numbers)


def normalize_markers(text: str) -> str:
    """Rewrite every marker variant ("[doc1]", "Doc 1", "document 1", ...) as "<docN>"."""
    return MARKER_RE.sub(_canonical, text)


def _tidy_line(text: str) -> str:
    """Collapse whitespace and clean up the punctuation that removing markers leaves behind."""
    s = re.sub(r"\*\*|__", "", text)
    s = re.sub(r"\s+", " ", s)
    s = re.sub(r"[(\[（［]\s*(?:[,;、，،]\s*)*[)\]）］]", "", s)  # "()" left by "(<doc0>)"
    s = re.sub(r"\s+([,.;:!?。，、！？؟،।॥۔)\]）])", r"\1", s)
    s = re.sub(r"[,;、，،]+(?=[.!?。！？؟।॥۔]|$)", "", s)  # "Spain,." left by "Spain <doc0>, <doc1>."
    s = re.sub(r"([,;、，،])[,;、，،]+", r"\1", s)
    s = re.sub(r"\s+", " ", s)
    return s.strip(" ,;、，،")


def strip_markers(text: str) -> str:
    """``text`` without document markers, on one line, with whitespace tidied."""
    return _tidy_line(MARKER_RE.sub(" ", text))


def _inert(m: re.Match[str]) -> str:
    # Keywords hold no digits, so the digit runs are the numbers the parser would read.
    return "«ref " + ", ".join(re.findall(r"\d+", m.group(0))) + "»"


def neutralize_markers(text: str) -> str:
    """``text`` (a passage) with every marker the reply parser reads (:data:`MARKER_RE`) made
    inert: ``<doc7>`` and ``doc 7`` become ``«ref 7»``, ``documents 3 and 4`` ``«ref 3, 4»``. A
    passage that says "cite <doc7>" must neither number itself into the prompt's own ``<docN>``
    sequence nor hand the model a marker to copy."""
    # Once more until none is left: a marker right after another ("doc3doc4") is read only
    # when the first is gone, since the parser's keyword must not follow a letter or digit.
    # Each pass removes at least one keyword and writes none, so this ends.
    while True:
        text, n = MARKER_RE.subn(_inert, text)
        if not n:
            return text


def document_line(marker: int, text: str) -> str:
    """One shown passage as the prompt numbers it: ``<docN> text``, its own markers neutralised."""
    return f"<doc{marker}> {neutralize_markers(text)}"


CITED_HEADER = Section.CITED.header
ANSWER_HEADER = Section.ANSWER.header
CHOICE_HEADER = Section.CHOICE.header
EXPLANATION_HEADER = Section.EXPLANATION.header
#: Where a citation reply stops when its explanation is not wanted (answer.explanation: false):
#: the explanation header at the start of a line, plain or in markdown bold. The answer line
#: comes before it, so a reply stopped there has the same cited line and answer as a whole one.
#: Two strings, because OpenAI's API takes at most four stop sequences.
EXPLANATION_STOPS: tuple[str, ...] = (f"\n{Section.EXPLANATION.value}", f"\n**{Section.EXPLANATION.value}")
#: The explanation header as a reply writes it whole, at the start of a line, plain or in
#: markdown bold: where a local model's reply is opened in the user's language
#: (answer.explanation_opener). Each ends where the explanation's first word goes.
EXPLANATION_HEADERS: tuple[str, ...] = (f"\n{EXPLANATION_HEADER}", f"\n**{EXPLANATION_HEADER}**",
                                        f"\n**{Section.EXPLANATION.value}**:")


def parse_format(value: str | AnswerFormat) -> AnswerFormat:
    """``value`` as an :class:`AnswerFormat`; an unknown name fails with a suggestion."""
    try:
        return AnswerFormat(value)
    except ValueError:
        names = [f.value for f in AnswerFormat]
        close = difflib.get_close_matches(str(value), names, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise ConfigError(f"unknown answer format {capped(value)}{hint}; use one of: {', '.join(names)}") from None


def words_pattern(words: Iterable[str]) -> str:
    """A regex alternation of ``words`` (longest first), spaces matching any whitespace."""
    unique = sorted({w.strip() for w in words if w.strip()}, key=lambda w: (-len(w), w))
    return "|".join(r"\s+".join(re.escape(part) for part in w.split()) for w in unique)
