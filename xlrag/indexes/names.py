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
from functools import cache, lru_cache

from xlrag.errors import UnknownLanguageError
from xlrag.indexes.analyzers import analyzer_for
from xlrag.languages import normalize_code

__all__ = ["NameTranslator", "name_of", "names_in", "names_of", "spellings", "subjects_in"]

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
def _locales(lang: str) -> tuple[str, ...]:
    """The CLDR locales whose names a store of ``lang`` may hold: the language and its script
    and regional variants (a ``zh`` store holds simplified and traditional Chinese, an ``sr``
    store Cyrillic and Latin Serbian; ``tl`` is CLDR's ``fil``)."""
    keys = {k for names in _names().values() for k in names}
    out = []
    for k in sorted(keys):
        base, *rest = k.split("-")
        if any(not ((len(t) in (2, 3) and t.isupper()) or t.isdigit() or t in _SCRIPTS) for t in rest):
            continue  # a script few write the language in (English in Deseret), or a variant
        try:
            if normalize_code(base) == lang:
                out.append(k)
        except UnknownLanguageError:
            continue
    return tuple(out)


# Scripts whose CLDR names a store may hold beside its language's default script
_SCRIPTS = frozenset({"Latn", "Cyrl", "Arab", "Hans", "Hant", "Deva", "Beng"})


def names_of(code: str, lang: str) -> list[str]:
    """CLDR's names of the place ``code`` in every script and region of ``lang``, the
    language's own first (``zh``: 意大利, 義大利)."""
    names = _names()[code]
    first = names.get(lang) or _name(names, normalize_code(lang))
    rest = [names[k] for k in _locales(normalize_code(lang)) if k in names]
    return list(dict.fromkeys([n for n in (first, *rest) if n]))


@cache
def _latin(lang: str) -> bool:
    import langcodes

    try:
        return langcodes.Language.get(lang).maximize().script == "Latn"
    except (ValueError, LookupError):
        return True  # a code langcodes cannot place: add nothing


def spellings(code: str, lang: str) -> list[str]:
    """The names a passage in ``lang`` may give the place ``code``: CLDR's in the language
    (:func:`names_of`), and for a language written in another script than Latin, the English
    name too, since such text often keeps a foreign name in Latin letters (XQuAD's Russian
    paragraph on Kenya writes "Kenya"). Latin-script languages get nothing more: the English
    name there is a foreign word ("Italy" in an Italian page), seldom written."""
    own = names_of(code, lang)
    if _latin(normalize_code(lang)):
        return own
    return list(dict.fromkeys([*own, *names_of(code, "en")]))


def name_of(code: str, lang: str) -> str | None:
    """CLDR's name of the place ``code`` (from :func:`names_in`) in ``lang`` (a script subtag
    kept: ``zh-Hant`` gives the traditional name), or None."""
    names = _names()[code]
    return names.get(lang) or _name(names, normalize_code(lang))


# A name, as the analyzer reads it: each word's terms (its own term first, then the extra terms it
# adds: a truncation, prefix or particle forms, CJK bigrams).
Name = tuple[frozenset[str], ...]
# Terms are indexed by their first characters, so that an inflected form finds its name.
_KEY = 2
# A word's own term meets a longer one that begins with it, four characters at least, when the
# longer adds at most three (a case ending Snowball did not strip: Italia / Italiassa stem apart in
# no language, but ken / kenia do in Finnish). Shorter stems begin too many other words: "and" is
# not "andorra", "com" not "comoras", "welt" not "welch".
_PREFIX_MIN = 4
_PREFIX_ADDS = 3


def _short(term: str) -> bool:
    # a Han, kana or Hangul character is a syllable: two of them make a country's name (日本, 케냐)
    return len(term) < (2 if any(_is_syllabic(ch) for ch in term) else 3)


def _is_syllabic(ch: str) -> bool:
    return "\u3040" <= ch <= "\u30ff" or "\u3400" <= ch <= "\u9fff" or "\uac00" <= ch <= "\ud7af" \
        or "\uf900" <= ch <= "\ufaff"


def _meet(name_word: frozenset[str], own: str, text_word: frozenset[str], text_own: str) -> int | None:
    """How well a name's word meets the text's word: a shared term (the longer the better, its
    own term best), or one's own term beginning the other's (:data:`_PREFIX_MIN`,
    :data:`_PREFIX_ADDS`); None if neither."""
    if shared := name_word & text_word:
        return 1000 if own == text_own else len(max(shared, key=len))
    short, long_ = sorted((own, text_own), key=len)
    if len(short) >= _PREFIX_MIN and long_.startswith(short) and len(long_) - len(short) <= _PREFIX_ADDS:
        return len(short)
    return None


@cache
def _table(lang: str) -> dict[str, list[tuple[Name, tuple[str, ...], str]]]:
    """Every place's names in ``lang`` (every script and region of it), indexed by the first
    characters of each term of their first word: ``key → [(name's words, their own terms,
    code)]``. Names that read the same as another place's are left out (ambiguous)."""
    analyzer = analyzer_for(lang)
    by_terms: dict[tuple[str, ...], tuple[Name, str] | None] = {}
    for code, names in _names().items():
        for locale in _locales(lang):
            name = names.get(locale)
            if not name:
                continue
            groups = analyzer.groups(name)
            own = tuple(g[0] for g in groups)
            if not groups or len(groups) > _MAX_NAME_TERMS or (len(groups) == 1 and _short(own[0])):
                continue
            seen = by_terms.get(own, ())
            if seen is None or (seen and seen[1] != code):
                by_terms[own] = None  # two places read alike
            else:
                by_terms[own] = (tuple(frozenset(g) for g in groups), code)
    out: dict[str, list[tuple[Name, tuple[str, ...], str]]] = {}
    for own, entry in by_terms.items():
        if entry is None:
            continue
        words, code = entry
        for key in {t[:_KEY] for t in words[0]}:
            out.setdefault(key, []).append((words, own, code))
    return out


def names_in(text: str, lang: str) -> list[str]:
    """The place codes named in ``text`` (in ``lang``), in order, each once.

    A name matches where each of its words meets the text's word at the same place: a shared
    term (a lemma, a stem, a particle's noun, a truncation) or a long common beginning of their
    own terms, so an inflected form meets its name ("Kenian" and "Kenia", "Египта" and "Египет").
    The longest name wins ("Papua New Guinea" before "Guinea"), then the closest meeting; two
    places still tied there are both left out."""
    lang = normalize_code(lang)
    with _lock:  # the first call per language builds its table
        table = _table(lang)
    groups = analyzer_for(lang).groups(text)
    words = [frozenset(g) for g in groups]
    found: list[str] = []
    i = 0
    while i < len(words):
        best: tuple[int, int] | None = None
        codes: set[str] = set()
        for key in {t[:_KEY] for t in words[i]}:
            for name, own, code in table.get(key, ()):
                n = len(name)
                if i + n > len(words):
                    continue
                meets = [_meet(name[j], own[j], words[i + j], groups[i + j][0]) for j in range(n)]
                if any(m is None for m in meets):
                    continue
                score = (n, sum(m for m in meets if m is not None))
                if best is None or score > best:
                    best, codes = score, {code}
                elif score == best:
                    codes.add(code)
        if best is not None and len(codes) == 1:
            code = codes.pop()
            if code not in found:
                found.append(code)
            i += best[0]
        else:
            i += 1
    return found


def subjects_in(text: str, lang: str) -> list[str]:
    """The countries and territories ``text`` names (:func:`names_in` less the UN M49 regions):
    what a question can be about, page by page. A region names a class of countries that many
    passages mention in passing, and its names meet adjectives and compass words ("American"
    the Americas, German "West Side" Westasien: benchmarks/languages.py, XQuAD)."""
    return list(_subjects(text, lang))


@lru_cache(maxsize=256)
def _subjects(text: str, lang: str) -> tuple[str, ...]:
    # the retriever asks twice per question: which stores hold them, and each store's lexical mask
    return tuple(code for code in names_in(text, lang) if not code.isdigit())


class NameTranslator:
    """A :class:`~xlrag.indexes.translate.Translator` that renders only what carries over
    without a model: the places ``text`` names, in ``target_lang``, and its numbers.
    Returns "" when there are none: the caller then searches that store by meaning alone."""

    name = "names"

    def translate(self, text: str, source_lang: str, target_lang: str) -> str:
        src, tgt = normalize_code(source_lang), normalize_code(target_lang)
        if src == tgt:
            return text
        places = [n for code in names_in(text, src) for n in names_of(code, tgt)]
        numbers = [t for t in analyzer_for(src).tokens(text) if t.isdigit()]
        return " ".join(dict.fromkeys([*places, *numbers]))
