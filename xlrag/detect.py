"""Language identification with lingua.

lingua ships its models, so detection works offline. Building a detector over all
75 languages is the expensive step, so detectors are built once per candidate set.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from functools import lru_cache
from typing import Protocol, runtime_checkable

from xlrag.errors import PolicyError
from xlrag.languages import normalize_code

__all__ = ["LanguageDetector", "LinguaDetector", "question_language"]


@runtime_checkable
class LanguageDetector(Protocol):
    def detect(self, text: str) -> str | None:
        """ISO 639-1 code of ``text``'s language, or ``None`` when it cannot tell."""


@lru_cache(maxsize=16)
def _build(candidates: tuple[str, ...] | None, min_distance: float):
    from lingua import IsoCode639_1, Language, LanguageDetectorBuilder

    if candidates:
        langs = []
        for code in candidates:
            try:
                iso = getattr(IsoCode639_1, code.upper())
                langs.append(Language.from_iso_code_639_1(iso))
            except (AttributeError, ValueError):
                continue  # lingua cannot detect this language; it simply is not a candidate
        builder = (
            LanguageDetectorBuilder.from_languages(*langs)
            if len(langs) >= 2
            else LanguageDetectorBuilder.from_all_languages()
        )
    else:
        builder = LanguageDetectorBuilder.from_all_languages()
    return builder.with_minimum_relative_distance(min_distance).build()


class LinguaDetector:
    """lingua over all its languages, or over the ``candidates`` you give.

    Restricting candidates (say, to the languages of an index plus English) makes
    short queries far more reliable: lingua then only has to separate plausible ones.
    """

    def __init__(self, candidates: Iterable[str] | None = None, min_distance: float = 0.0):
        cands = tuple(sorted({normalize_code(c) for c in candidates})) if candidates else None
        self._candidates = cands
        self._min_distance = min_distance

    def detect(self, text: str) -> str | None:
        lang = _build(self._candidates, self._min_distance).detect_language_of(text)
        if lang is None:
            return None
        return normalize_code(lang.iso_code_639_1.name.lower())

    def detect_with_confidence(self, text: str) -> tuple[str | None, float | None]:
        """``detect`` and lingua's confidence (0-1) in the language it chose."""
        det = _build(self._candidates, self._min_distance)
        lang = det.detect_language_of(text)
        if lang is None:
            values = det.compute_language_confidence_values(text)
            return None, (values[0].value if values else None)
        return normalize_code(lang.iso_code_639_1.name.lower()), det.compute_language_confidence(text, lang)

    def detect_many(self, texts: Sequence[str]) -> list[str | None]:
        det = _build(self._candidates, self._min_distance)
        out = det.detect_languages_in_parallel_of(list(texts))
        return [normalize_code(x.iso_code_639_1.name.lower()) if x else None for x in out]


def question_language(text: str, detector: LanguageDetector | None = None) -> str:
    """The language of a question, for every path that answers one (retrieval, the chain
    without retrieval, the chat's follow-ups): one rule, an undetectable question is an error
    that says how to give the language, never a silent guess."""
    detected = (detector or LinguaDetector()).detect(text)
    if detected is None:
        raise PolicyError(f"could not detect the language of {text[:60]!r}; pass it explicitly (lang=..., CLI --lang)")
    return detected
