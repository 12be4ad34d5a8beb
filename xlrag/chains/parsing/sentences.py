"""Sentence splitting that keeps each sentence's <docN> markers with it."""

from __future__ import annotations

import re
from collections.abc import Mapping

from xlrag.chains.parsing.common import (
    _CLOSERS,
    _TERM_CLOSED,
    _TERM_SPACED,
    SENTENCE_FINAL,
    _dedupe,
    _is_word,
)
from xlrag.formats import Marker, find_markers, iter_markers, strip_markers

_ABBREVIATIONS = frozenset(
    {"e.g", "i.e", "etc", "cf", "vs", "mr", "mrs", "ms", "dr", "st", "no", "approx", "jr",
     "sr", "u.s", "u.k", "a.d", "b.c", "p.ej", "sra", "т.е", "т.к", "г", "гг"}
)


def _is_spaced_boundary(text: str, i: int, marker_starts: Mapping[int, Marker]) -> bool:
    j = i + 1
    if j < len(text) and not (
        text[j].isspace() or text[j] in _CLOSERS or text[j] in SENTENCE_FINAL
        or j in marker_starts
    ):
        return False  # "3.5", "U.S.A", "example.com"
    if text[i] != ".":
        return True
    word = re.search(r"([^\W\d_]+(?:\.[^\W\d_]+)*)$", text[max(0, i - 40) : i])
    if word and word.group(1).casefold() in _ABBREVIATIONS:
        return False
    line_start = text.rfind("\n", 0, i) + 1
    if re.fullmatch(r"[ \t>*\-•]*\d+", text[line_start:i]):
        return False  # "1." numbering a list item
    rest = text[j : j + 8].lstrip(" \t")
    # "e.g. the" / "approx. two": a lowercase continuation is not a new sentence.
    return not (rest[:1].isalpha() and rest[:1].islower() and rest[:1].isascii())


def _absorb_markers(text: str, end: int, marker_starts: Mapping[int, Marker]) -> int:
    """Extend a sentence over markers written after its terminator.

    "Spain.<doc0> Next" and "Spain. <doc0>\\n" cite the finished sentence; in "Spain. <doc0>
    says ..." the marker is the subject of the next sentence and stays with it.
    """
    n = len(text)
    j = end
    while j in marker_starts:  # glued to the terminator
        j = marker_starts[j].end
    k = j
    saw = False
    while True:
        p = k
        while p < n and text[p] in " \t,;、，،":
            p += 1
        if p in marker_starts:
            k = marker_starts[p].end
            saw = True
            continue
        break
    if saw and (p >= n or text[p] == "\n" or text[p] in SENTENCE_FINAL):
        j = p
        while j < n and (text[j] in SENTENCE_FINAL or text[j] in _CLOSERS):
            j += 1
    return j


def _sentence_spans(text: str) -> list[tuple[int, int]]:
    markers = iter_markers(text)
    marker_starts = {m.start: m for m in markers}
    spans: list[tuple[int, int]] = []
    start = 0
    i = 0
    n = len(text)
    while i < n:
        if i in marker_starts:
            i = marker_starts[i].end
            continue
        ch = text[i]
        if ch == "\n":
            spans.append((start, i))
            start = i = i + 1
            continue
        if ch in _TERM_CLOSED or (ch in _TERM_SPACED and _is_spaced_boundary(text, i, marker_starts)):
            end = i + 1
            while end < n and (text[end] in SENTENCE_FINAL or text[end] in _CLOSERS):
                end += 1
            end = _absorb_markers(text, end, marker_starts)
            spans.append((start, end))
            start = i = end
            continue
        i += 1
    spans.append((start, n))
    return spans


def sentences_with_markers(explanation: str) -> list[tuple[str, list[int]]]:
    """Split text into sentences, each with the document numbers it cites.

    Sentences end at . ! ? … 。 ！ ？ ؟ । ۔ and at line breaks; text without any (e.g. Thai) is
    one sentence. The returned sentence text has its markers removed, ready to be compared
    with document text; markers standing alone between sentences go to the sentence before.
    """
    result: list[tuple[str, list[int]]] = []
    pending: list[int] = []
    for s, e in _sentence_spans(explanation or ""):
        segment = explanation[s:e]
        numbers = find_markers(segment)
        clean = strip_markers(segment)
        if not any(_is_word(c) for c in clean):
            if result:
                text, prev = result[-1]
                result[-1] = (text, _dedupe([*prev, *numbers]))
            else:
                pending.extend(numbers)
            continue
        result.append((clean, _dedupe([*pending, *numbers])))
        pending = []
    return result


def _first_sentence(text: str) -> str | None:
    for line in text.splitlines():
        sentences = sentences_with_markers(line)
        if sentences:
            return sentences[0][0]
    return None
