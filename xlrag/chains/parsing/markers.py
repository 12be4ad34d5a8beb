"""<docN> document markers: finding, normalising and stripping them."""

from __future__ import annotations

import re
from dataclasses import dataclass

from xlrag.chains.parsing.common import _dedupe
from xlrag.formats import MARKER_OPEN as _OPEN
from xlrag.formats import (
    MARKER_RE as _MARKER_RE,  # the grammar's one owner: the neutraliser reads it too
)

# An opening bracket or a half-written marker at the very end: generation stopped mid-marker.
_DANGLING_RE = re.compile(
    f"{_OPEN}[ \\t]*(?:d(?:o(?:c(?:u[a-z]*)?)?)?)?[ \\t]*\\d*[ \\t]*$", re.IGNORECASE
)


@dataclass(frozen=True)
class _Marker:
    start: int
    end: int
    numbers: tuple[int, ...]


def _iter_markers(text: str) -> list[_Marker]:
    found: list[_Marker] = []
    for m in _MARKER_RE.finditer(text):
        # Keywords contain no digits, so every digit run in the match is a document number.
        numbers = tuple(int(d) for d in re.findall(r"\d+", m.group(0)))
        found.append(_Marker(m.start(), m.end(), numbers))
    return found


def find_markers(text: str) -> list[int]:
    """Document numbers cited in `text`, in order of first appearance."""
    return _dedupe(n for marker in _iter_markers(text) for n in marker.numbers)


def _canonical(m: re.Match[str]) -> str:
    numbers = [int(d) for d in re.findall(r"\d+", m.group(0))]
    if m.lastgroup == "plural":
        # Keep the connectors ("and", ",") and turn each number into a marker.
        body = re.sub(r"^\S+[ \t]+", "", m.group(0))
        return re.sub(r"\d+", lambda d: f"<doc{int(d.group(0))}>", body)
    return ", ".join(f"<doc{n}>" for n in numbers)


def normalize_markers(text: str) -> str:
    """Rewrite every marker variant ("[doc1]", "Doc 1", "document 1", ...) as "<docN>"."""
    return _MARKER_RE.sub(_canonical, text)


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
    """`text` without document markers, on one line, with whitespace tidied."""
    return _tidy_line(_MARKER_RE.sub(" ", text))
