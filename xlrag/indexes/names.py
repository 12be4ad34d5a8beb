"""Names and numbers across languages, without a model: what the lexical channel searches a
store in another language with when ``retrieval.lexical_translation`` is ``names``.

A multilingual embedder links "جزر القمر" to an English page about "the Comoros" poorly, and
BM25 over the English store cannot match Arabic words at all. The places a question names
are the words that pick out its document, and their names in every language are public data:
CLDR's territory names (countries, regions, continents) in about 300 locales, which xlrag
already ships through ``language_data`` (the data behind ``langcodes``). Numbers carry over
as they are (the analyzers fold Arabic-Indic and Persian digits to ASCII).

Names are matched on analyzer terms, so inflection, case and Arabic orthography do not stop
a match, and the longest name wins ("Papua New Guinea" before "Guinea"). The cost is a
dictionary lookup per question: no LLM call, no cache needed. What it cannot do is carry
over words that are not names (benchmarks/channels.py measures it against the LLM).
"""

from __future__ import annotations

import threading
from functools import cache

from xlrag.indexes.analyzers import analyzer_for
from xlrag.languages import normalize_code

__all__ = ["NameTranslator", "name_of", "names_in"]

_MAX_NAME_TERMS = 6
# CLDR's territory names are keyed by ISO 3166 code ("KM") or UN M49 region ("002"); the same
# table holds language names under lowercase codes, which are common words ("English"), not places.
_PLACE = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
_lock = threading.Lock()


def _is_place(code: str) -> bool:
    return code.isupper() or code.isdigit()


@cache
def _names() -> dict[str, dict[str, str]]:
    from language_data.name_data import CODE_TO_NAMES

    return {code: names for code, names in CODE_TO_NAMES.items() if _is_place(code)}


def _name(names: dict[str, str], lang: str) -> str | None:
    # a regional locale's own name first, then its base language's ("zh-Hant" falls back to "zh")
    return names.get(lang) or names.get(lang.split("-", 1)[0])


@cache
def _table(lang: str) -> dict[tuple[str, ...], str]:
    """Analyzer terms of every place's name in ``lang`` → its code; names that analyze to
    the same terms as another place's are left out (ambiguous)."""
    analyzer = analyzer_for(lang)
    out: dict[tuple[str, ...], str] = {}
    clash: set[tuple[str, ...]] = set()
    for code, names in _names().items():
        name = _name(names, lang)
        if not name:
            continue
        terms = tuple(analyzer.tokens(name))
        if not terms or len(terms) > _MAX_NAME_TERMS or (len(terms) == 1 and len(terms[0]) < 3):
            continue
        if terms in out and out[terms] != code:
            clash.add(terms)
        out[terms] = code
    for terms in clash:
        del out[terms]
    return out


def names_in(text: str, lang: str) -> list[str]:
    """The place codes named in ``text`` (in ``lang``), in order, each once; longest match first."""
    lang = normalize_code(lang)
    with _lock:  # the first call per language builds its table
        table = _table(lang)
    terms = analyzer_for(lang).tokens(text)
    found: list[str] = []
    i = 0
    while i < len(terms):
        for n in range(min(_MAX_NAME_TERMS, len(terms) - i), 0, -1):
            code = table.get(tuple(terms[i : i + n]))
            if code is not None:
                if code not in found:
                    found.append(code)
                i += n
                break
        else:
            i += 1
    return found


def name_of(code: str, lang: str) -> str | None:
    """CLDR's name of the place ``code`` (from :func:`names_in`) in ``lang`` (a script subtag
    kept: ``zh-Hant`` gives the traditional name), or None."""
    names = _names()[code]
    return names.get(lang) or _name(names, normalize_code(lang))


class NameTranslator:
    """A :class:`~xlrag.indexes.translate.Translator` that renders only what carries over
    without a model: the places ``text`` names, in ``target_lang``, and its numbers.
    Returns "" when there are none: the caller then searches that store by meaning alone."""

    name = "names"

    def translate(self, text: str, source_lang: str, target_lang: str) -> str:
        src, tgt = normalize_code(source_lang), normalize_code(target_lang)
        if src == tgt:
            return text
        places = [n for code in names_in(text, src) if (n := name_of(code, tgt))]
        numbers = [t for t in analyzer_for(src).tokens(text) if t.isdigit()]
        return " ".join(dict.fromkeys([*places, *numbers]))
