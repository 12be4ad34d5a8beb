"""Option names folded for matching across scripts (accents, clitics, unspaced scripts)."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache

from xlrag.chains.parsing.common import _is_word

# Combining marks dropped when comparing names: Latin/Greek/Cyrillic accents, Hebrew points,
# Arabic harakat and hamza carriers (so "إسبانيا" == "اسبانيا"). Japanese dakuten and
# Devanagari signs change the word and are kept.
_DROP_MARKS = ((0x0300, 0x036F), (0x0591, 0x05C7), (0x0610, 0x061A), (0x064B, 0x065F),
               (0x0670, 0x0670), (0x06D6, 0x06ED))
_CHAR_FOLD = str.maketrans(
    {
        "’": "'", "‘": "'", "ʼ": "'", "`": "'", "“": '"', "”": '"',
        "ـ": "",  # tatweel
        "ٱ": "ا", "ى": "ي", "ی": "ي", "ک": "ك", "ة": "ه", "ہ": "ه",
        "‐": "-", "‑": "-", "–": "-", "—": "-",
    }
)
# Scripts written without spaces between words: names match as plain substrings there.
_UNSPACED = ((0x0E00, 0x0EFF), (0x1000, 0x109F), (0x1100, 0x11FF), (0x1780, 0x17FF),
             (0x2E80, 0x9FFF), (0xA960, 0xA97F), (0xAC00, 0xD7FF), (0xF900, 0xFAFF),
             (0x20000, 0x3FFFF))
_ARABIC_CLITICS = "وفبلك"  # wa-, fa-, bi-, li-, ka- ("لإسبانيا" = "to Spain")
_HEBREW_CLITICS = "והבלמשכ"
_INFLECTING_VOWELS = frozenset("аяоеёыиьйуюэєії" "αηοιυωες")


def _in_ranges(ch: str, ranges: Iterable[tuple[int, int]]) -> bool:
    cp = ord(ch)
    return any(lo <= cp <= hi for lo, hi in ranges)


@lru_cache(maxsize=8192)  # replies repeat a small alphabet; folding is per character
def _fold_char(ch: str) -> str:
    if ch.isspace():
        return " "
    kept = "".join(c for c in unicodedata.normalize("NFD", ch) if not _in_ranges(c, _DROP_MARKS))
    return unicodedata.normalize("NFC", kept).casefold().translate(_CHAR_FOLD)


def _fold(text: str) -> tuple[str, list[int]]:
    """Fold `text` for name comparison, with the source index of every folded character."""
    out: list[str] = []
    index: list[int] = []
    for i, ch in enumerate(text):
        for c in _fold_char(ch):
            if c == " " and out and out[-1] == " ":
                continue
            out.append(c)
            index.append(i)
    return "".join(out), index


def _fold_name(name: str) -> str:
    return _fold(unicodedata.normalize("NFKC", name))[0].strip(" ")


@dataclass(frozen=True)
class _Form:
    """One spelling of an option name, as searched for in folded text."""

    text: str
    index: int
    method: str  # "name" | "alias"
    left_bounded: bool
    right_bounded: bool
    clitics: str
    inflects: bool


@dataclass(frozen=True)
class _Hit:
    start: int
    end: int
    index: int
    method: str


def _script_of(ch: str) -> str:
    cp = ord(ch)
    if 0x0600 <= cp <= 0x06FF or 0x0750 <= cp <= 0x077F:
        return "arabic"
    if 0x0590 <= cp <= 0x05FF:
        return "hebrew"
    if 0x0400 <= cp <= 0x052F or 0x0370 <= cp <= 0x03FF:
        return "inflecting"
    if _in_ranges(ch, _UNSPACED):
        return "unspaced"
    return "other"


def _make_forms(options: Sequence[str], aliases: Mapping[int, Sequence[str]] | None) -> list[_Form]:
    spelled: dict[str, dict[int, str]] = {}

    def add(name: str, index: int, method: str) -> None:
        # Options are sometimes passed pre-labelled ("A) Spain"); the label is not part of the name.
        folded = _fold_name(re.sub(r"^\s*[A-Za-z][)）]\s+", "", name))
        if not folded:
            return
        variants = [folded]
        if _script_of(folded[0]) == "arabic" and folded.startswith("ال"):
            variants.append("ل" + folded[1:])  # li- + al- contracts to "لل"
        for v in variants:
            by_index = spelled.setdefault(v, {})
            if by_index.get(index) != "name":
                by_index[index] = method

    for i, option in enumerate(options):
        add(option, i, "name")
    for i, names in (aliases or {}).items():
        if not 0 <= i < len(options):
            raise ValueError(f"alias index {i} is outside the {len(options)} options")
        if isinstance(names, str):
            names = [names]
        for name in names:
            add(name, i, "alias")

    forms: list[_Form] = []
    for text, by_index in spelled.items():
        if len(by_index) != 1:
            continue  # the same spelling names two options, so it cannot tell them apart
        (index, method), = by_index.items()
        first, last = _script_of(text[0]), _script_of(text[-1])
        clitics = {"arabic": _ARABIC_CLITICS, "hebrew": _HEBREW_CLITICS}.get(first, "")
        forms.append(
            _Form(
                text=text, index=index, method=method,
                left_bounded=first != "unspaced", right_bounded=last != "unspaced",
                clitics=clitics, inflects=last == "inflecting" and len(text) >= 4,
            )
        )
    return forms


def _find_hits(text: str, forms: Sequence[_Form]) -> list[_Hit]:
    """Non-overlapping option-name occurrences in `text`; the longest match wins overlaps."""
    folded, source = _fold(text)
    n = len(folded)
    candidates: list[tuple[int, int, _Form]] = []
    for form in forms:
        pattern = form.text
        if form.inflects and pattern[-1] in _INFLECTING_VOWELS:
            pattern = pattern[:-1]  # "Украина" -> "Украин" to accept "Украине", "Украины"
        pos = folded.find(pattern)
        while pos != -1:
            start, end = pos, pos + len(pattern)
            ok = True
            if form.inflects:
                # Russian/Greek case endings: up to three more letters of the same word.
                k = end
                while k < n and _is_word(folded[k]) and k - end < 3:
                    k += 1
                if k < n and _is_word(folded[k]):
                    ok = False
                end = k
            elif form.right_bounded and end < n and _is_word(folded[end]):
                ok = False
            if ok and form.left_bounded and start > 0 and _is_word(folded[start - 1]):
                k, taken = start, 0
                while k > 0 and taken < 2 and folded[k - 1] in form.clitics:
                    k -= 1
                    taken += 1
                if taken == 0 or (k > 0 and _is_word(folded[k - 1])):
                    ok = False
                start = k
            if ok:
                candidates.append((start, end, form))
            pos = folded.find(pattern, pos + 1)
    candidates.sort(key=lambda c: (-(c[1] - c[0]), c[0]))
    chosen: list[tuple[int, int, _Form]] = []
    for cand in candidates:
        if all(cand[1] <= c[0] or cand[0] >= c[1] for c in chosen):
            chosen.append(cand)
    hits = [_Hit(source[s], source[e - 1] + 1, f.index, f.method) for s, e, f in chosen]
    return sorted(hits, key=lambda h: h.start)
