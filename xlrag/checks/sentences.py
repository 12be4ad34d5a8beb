"""A passage as the sentences a reader reads, each with the headings it stands under.

The support check (:func:`xlrag.checks.substance.unsupported`) asks whether an answer and what
the question asks about meet in one sentence. Sentences are ICU's (the sentence
``BreakIterator`` of PyICU, the library the lexical channel already segments words with), in
every script, with corrections measured on the test bed and the answer benchmark:

- an initial ("Nicholas E. Golovin"), a title ("Dr."), a dotted abbreviation ("U.S.") or an
  ordinal ("am 7. Januar") ends no sentence: ICU breaks there unless its locale's list of
  abbreviations (``@ss=standard``) holds the word;
- a text in Thai or Lao script (ICU finds no sentence boundary in Thai at all: it writes no
  full stop) is cut at its spaces, the way Thai separates sentences and clauses, keeping a
  number or a short piece with the clause before it ("... คือ 959", "ปี ค.ศ. 1960") unless it
  opens a second number;
- the page's structure is kept: a blank line ends a paragraph and a single line break inside
  one is a space (Markdown's reading: a list item goes on on the next line), a Markdown list
  item or table row is a sentence of its own, and a heading line ("## Emergency numbers", a
  bold line, a line ending in a colon) is the context of the lines under it: "Police: 999"
  under "Emergency numbers in Kenya:" is about Kenya's emergency numbers. The passage's title
  is not: a title such as "Kenya: emergency services and parks" names all a page's subjects,
  and as the context of every sentence would make each about all of them.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass

__all__ = ["Sentence", "sentences", "split_sentences"]

# a list item or a table row starts a sentence of its own
_ITEM = re.compile(r"^\s*(?:(?:[-*+•·‣]|\d{1,3}[.)])\s+|\|)")
# a heading: Markdown's "#", a whole bold line, or a line announcing what follows with a colon
_HEADING = re.compile(r"^\s*(?:#{1,6}\s+.+|\*\*[^*]+\*\*\s*:?|__[^_]+__\s*:?"
                      r"|[^.!?。！？؟।\n]{2,80}[:：]\s*\**)\s*$")
# Thai and Lao: ICU has no sentence rules for them (no terminator), and both write a space
# between sentences and clauses
_UNSPACED_NO_TERMINATOR = re.compile("[\u0e00-\u0e7f\u0e80-\u0eff]")
# the shortest piece between spaces that stands as a clause of its own (letters)
_CLAUSE_LETTERS = 12
_NUMBER = re.compile(r"\d")


@dataclass(frozen=True)
class Sentence:
    """One sentence of a passage, with the heading lines above it."""

    text: str
    context: tuple[str, ...] = ()


_local = threading.local()  # a break iterator holds the text it reads: one per thread


def _breaker(locale: str):
    cached = _local.__dict__.setdefault("breakers", {})
    if locale not in cached:
        import icu

        cached[locale] = icu.BreakIterator.createSentenceInstance(icu.Locale(locale))
    return cached[locale]


def _icu(text: str, lang: str | None) -> list[str]:
    # ``@ss=standard``: ICU's own list of abbreviations that end no sentence, where its locale has one
    bi = _breaker(f"{lang or 'und'}@ss=standard")
    bi.setText(text)
    out, start = [], bi.first()
    for end in bi:
        out.append(text[start:end])
        start = end
    return out


def _ends_in_abbreviation(piece: str) -> bool:
    """Whether ICU cut after an initial ("E."), a title ("Dr.") or a dotted abbreviation ("U.S.",
    "z.B."): no sentence ends there. A sentence ending in a short lower-case word ("Ich bin da.")
    does."""
    words = piece.split()
    if not words or not words[-1].endswith(".") or "\n" in piece[len(piece.rstrip()):]:
        return False
    core = words[-1][:-1]
    if core.isdigit() and len(core) <= 2:
        return True  # an ordinal: "am 7. Januar 1943", "15. století"
    if not core or not all(part.isalpha() for part in core.split(".") if part):
        return False
    dotted = "." in core and all(len(part) <= 2 for part in core.split("."))
    # one letter: an initial, or in a script without case an abbreviation's part (Thai "ค.ศ.")
    return dotted or (len(core) == 1 and not core.islower()) or (len(core) == 2 and core.istitle())


def _join_initials(pieces: list[str]) -> list[str]:
    out: list[str] = []
    for piece in pieces:
        if out and _ends_in_abbreviation(out[-1]):
            out[-1] += piece
        else:
            out.append(piece)
    return out


def _letters(text: str) -> int:
    return sum(ch.isalpha() for ch in text)


def _clauses(text: str) -> list[str]:
    """A Thai or Lao sentence cut at its spaces, a short piece (a number, "ค.ศ.", one word of a
    list) kept with the one before it, unless it opens a second number: "... ในปี 1900" then
    "ในปี 1915 เขาได้รับ..." ("in 1915 he was ..."), two clauses, each with its year."""
    pieces = text.split()
    out: list[str] = []
    for i, piece in enumerate(pieces):
        opens_number = (i + 1 < len(pieces) and _NUMBER.match(pieces[i + 1]) is not None
                        and out and _NUMBER.search(out[-1]) is not None)
        if out and not opens_number and (_letters(piece) < _CLAUSE_LETTERS or _letters(out[-1]) < _CLAUSE_LETTERS):
            out[-1] += " " + piece
        else:
            out.append(piece)
    return out


def split_sentences(text: str, lang: str | None = None) -> list[str]:
    """``text``'s sentences, stripped, empty ones left out (a line break ends one)."""
    out: list[str] = []
    for piece in _join_initials(_icu(text, lang)):
        piece = piece.strip()
        if not piece:
            continue
        if _UNSPACED_NO_TERMINATOR.search(piece):
            out.extend(_clauses(piece))
        else:
            out.append(piece)
    return out


def _is_heading(line: str) -> bool:
    return bool(_HEADING.match(line)) and not _ITEM.match(line)


def _level(line: str) -> int:
    m = re.match(r"\s*(#{1,6})\s", line)
    return len(m.group(1)) if m else 7  # a bold or colon line stands under every "#" heading


def sentences(text: str, title: str | None = None, lang: str | None = None) -> list[Sentence]:
    """The sentences of a passage, each with the headings above it as its context; ``title``, the
    passage's title line the splitter prepends, is left out. A heading line is a sentence too (it
    may hold the answer: "Emergency number: 112")."""
    if title and text.startswith(f"{title}\n"):
        text = text[len(title) + 1:]
    headings: list[tuple[int, str]] = []
    out: list[Sentence] = []
    # a soft line break inside a paragraph is a space (Markdown's reading): what a list item
    # continues on the next line ("* Police - Ambulance\n+676 7401064") is the same item
    lines: list[str] = []
    for line in text.split("\n"):
        if lines and line.strip() and lines[-1].strip() and not (_ITEM.match(line) or _is_heading(line)
                                                                 or _is_heading(lines[-1])):
            lines[-1] = f"{lines[-1].rstrip()} {line.strip()}"
        else:
            lines.append(line)
    for line in lines:
        if not line.strip():
            continue
        context = tuple(h for _, h in headings)
        if _is_heading(line):
            level = _level(line)
            headings = [(lv, h) for lv, h in headings if lv < level]
            out.append(Sentence(line.strip(), context))
            headings.append((level, line.strip()))
            continue
        out.extend(Sentence(s, context) for s in split_sentences(line, lang))
    return out
