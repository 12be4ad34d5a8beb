"""The ``Translator`` contract used by the ``translate`` IR mode.

The LLM-backed translator lives with the generation code; any object with a
``translate`` method fits, so users can plug an MT system of their own.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping
from typing import Protocol, runtime_checkable

from xlrag.errors import PolicyError
from xlrag.languages import normalize_code

__all__ = ["CachedTranslator", "TableTranslator", "Translator"]


@runtime_checkable
class Translator(Protocol):
    def translate(self, text: str, source_lang: str, target_lang: str) -> str:
        """``text`` (in ``source_lang``) rendered in ``target_lang``."""


class TableTranslator:
    """Known translations, e.g. the parallel questions of XQuAD ("oracle translation").

    ``table`` maps ``(text, target_lang)`` to the translation. Unknown texts raise
    :class:`PolicyError` rather than pass through untranslated, so an analysis never
    silently mixes translated and untranslated queries.
    """

    def __init__(self, table: Mapping[tuple[str, str], str]):
        self._table = {(t.strip(), normalize_code(lang)): v for (t, lang), v in table.items()}

    def translate(self, text: str, source_lang: str, target_lang: str) -> str:
        target = normalize_code(target_lang)
        if normalize_code(source_lang) == target:
            return text
        try:
            return self._table[(text.strip(), target)]
        except KeyError:
            raise PolicyError(f"no known {target} translation of {text[:60]!r} in this table") from None


class CachedTranslator:
    """Memoises another translator: each (text, source, target) is translated once while it
    is among the ``maxsize`` most recently used; a long-running server's memory stays bounded."""

    def __init__(self, inner: Translator, maxsize: int = 4096):
        if maxsize < 1:
            raise ValueError(f"maxsize={maxsize}: keep at least one translation")
        self.inner = inner
        self.maxsize = maxsize
        self._cache: OrderedDict[tuple[str, str, str], str] = OrderedDict()
        self._lock = threading.Lock()

    def translate(self, text: str, source_lang: str, target_lang: str) -> str:
        key = (text, normalize_code(source_lang), normalize_code(target_lang))
        with self._lock:
            if key in self._cache:
                self._cache.move_to_end(key)
                return self._cache[key]
        out = self.inner.translate(text, key[1], key[2])
        with self._lock:
            self._cache[key] = out
            self._cache.move_to_end(key)
            while len(self._cache) > self.maxsize:
                self._cache.popitem(last=False)
        return out
