"""Language codes and names, via langcodes.

Every language code that enters xlrag goes through :func:`normalize`, so stores,
hits, prompts and metrics all speak ISO 639-1 where one exists (``zh``, ``he``),
while the script a code carried (``zh-Hant``) is kept aside.
"""

from __future__ import annotations

from functools import lru_cache
from typing import NamedTuple

from xlrag.errors import UnknownLanguageError

__all__ = ["LangCode", "display_name", "native_name", "normalize", "normalize_code"]

# Codes seen in real multilingual datasets that are not BCP 47: BorderLines and
# several MT corpora write Chinese as zhs/zht.
_NONSTANDARD = {"zhs": "zh-Hans", "zht": "zh-Hant", "zh_cn": "zh-Hans", "zh_tw": "zh-Hant"}
# langcodes prefers the macrolanguage "fil" for Tagalog; ISO 639-1 has "tl".
_PREFERRED = {"fil": "tl"}


class LangCode(NamedTuple):
    code: str
    script: str | None


@lru_cache(maxsize=4096)
def normalize(code: str) -> LangCode:
    """Map any BCP 47 / ISO 639 code to ``(iso639_1 or shortest code, script)``.

    Raises :class:`UnknownLanguageError` for codes langcodes does not know.
    """
    import langcodes

    raw = (code or "").strip()
    if not raw:
        raise UnknownLanguageError(code)
    raw = _NONSTANDARD.get(raw.lower().replace("-", "_"), raw)
    try:
        lang = langcodes.get(raw.replace("_", "-"))
    except (langcodes.LanguageTagError, ValueError):
        raise UnknownLanguageError(code) from None
    if not lang.language or not lang.is_valid() or lang.language_name().startswith("Unknown"):
        raise UnknownLanguageError(code)
    base = _PREFERRED.get(lang.language, lang.language)
    return LangCode(base, lang.script)


def normalize_code(code: str) -> str:
    """Just the normalised language code (``'zh-Hant'`` → ``'zh'``)."""
    return normalize(code).code


@lru_cache(maxsize=1024)
def native_name(code: str) -> str:
    """The language's name in itself (``'ar'`` → ``'العربية'``)."""
    import langcodes

    norm = normalize(code)
    tag = f"{norm.code}-{norm.script}" if norm.script else norm.code
    return langcodes.get(tag).autonym()


@lru_cache(maxsize=1024)
def display_name(code: str, in_language: str = "en") -> str:
    """The language's name in another language (English by default)."""
    import langcodes

    return langcodes.get(normalize_code(code)).display_name(normalize_code(in_language))
