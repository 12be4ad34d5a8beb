"""Runtime checks of an answer: its language, its structure, its substance and its attribution.

Pure functions where they can be (language, structure, substance); the attribution check asks
an LLM. The agent's verify step runs them on every answer, and evaluation scores with them,
so an answer is judged by one rule wherever it is judged. Names load on first use.
"""

from __future__ import annotations

from xlrag._lazy import lazy_exports

# name -> module that defines it; one line per name.
_LAZY = {
    "AttributionChecker": "xlrag.checks.attribution",
    "Finding": "xlrag.checks.substance",
    "LanguageVerdict": "xlrag.checks.language",
    "judge_language": "xlrag.checks.language",
    "non_answer": "xlrag.checks.substance",
    "refusal_despite_evidence": "xlrag.checks.substance",
    "unsupported": "xlrag.checks.substance",
}

__all__ = sorted(_LAZY)

__getattr__, __dir__ = lazy_exports(__name__, _LAZY, __all__)
