"""Per-language text analysis for the BM25 lexical channel: text in, index terms out.

Every analyzer runs the same pipeline; only the steps a language has differ:

1. ICU's NFKC_Casefold (Lucene's ICUNormalizer2Filter): NFKC, full case folding, and the
   default-ignorable code points removed, so a soft hyphen (``Pan\u00adthers``), a bidi mark
   after an Arabic word or a Persian zero-width non-joiner (``می‌خواهم``) leaves no trace in a
   term; apostrophe-like marks folded to ``'`` (:data:`xlrag.indexes.morphology.APOSTROPHES`);
2. orthographic normalisation for Arabic-script and Turkic text (below);
3. ICU word segmentation, keeping only letter/number/kana/ideograph segments; ICU's
   dictionaries segment Chinese, Japanese, Thai, Lao, Khmer and Burmese;
4. apostrophes as Lucene's analyzers treat them: elided articles (French, Italian, Catalan,
   Irish), the Turkish suffix after a name, the English possessive;
5. lemmas (simplemma), Snowball stems (PyStemmer), or a lemma's stem, per language as
   measured (``_LEMMAS``, ``_STEM_LEMMAS`` below; benchmarks/analyzers.py);
6. extra terms beside the word's own: Hebrew words without their prefix letters, Korean nouns
   without their particles, and in alphabetic languages without a Snowball stemmer, a word's
   first four characters (see :mod:`xlrag.indexes.morphology`); for Han and kana words of
   three characters or more, their character bigrams, so a query word ICU segments differently
   from the passage still matches.

An unknown or missing language code (``lang='und'``) gets steps 1, 3 and the bigrams: analysis
never raises on a language. Korean is analyzed without kiwipiepy: its model is 105 MB on disk and
seconds to load per process, and the closed list of particles meets every name form of the test
bed (8 of 8). Stopwords are kept:
BM25's IDF already weighs them near zero, and stopword lists would turn a query made only of
function words ("to be or not to be") into no query at all.

A text with letters or digits never yields zero terms: if the pipeline finds none, the
character bigrams of its letter/digit runs are the terms. Only text without letters or digits
(punctuation, symbols, emoji) yields ``[]``.

ICU break iterators and Snowball stemmers are not thread-safe: each thread gets its own.
"""

from __future__ import annotations

import re
import threading
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache, lru_cache

from xlrag.errors import UnknownLanguageError
from xlrag.indexes import morphology
from xlrag.languages import normalize_code

__all__ = ["ANALYZER_VERSION", "Analyzer", "analyze_many", "analyzer_for"]

# Bump whenever this module could produce other terms for the same text; the library versions
# are part of Analyzer.version as well, since a new ICU dictionary or Snowball release re-segments.
ANALYZER_VERSION = "2"

GENERIC = "und"

# Snowball algorithms whose name is not the language's English name in langcodes.
_STEMMER_ALIASES = {"nb": "norwegian", "nn": "norwegian", "st": "sesotho"}
# Where ICU's dictionaries segment Han/kana, the bigram fallback earns its extra terms.
_CJK_LANGS = frozenset({"zh", "ja", "yue", "wuu", "hak", "nan", "gan", "hsn", "cjy", "lzh", GENERIC})
# Persian and Urdu only: Pashto, Sindhi and Uyghur spell distinct sounds with the Arabic yeh,
# alef maqsura or kaf that the Persian folding below would merge.
_ARABIC_SCRIPT_SAFE = frozenset({"fa", "ur"})

# Lemmas (simplemma) instead of Snowball stems, per language, measured by benchmarks/analyzers.py
# (the test bed's case forms of a name meeting; XQuAD and Travel for the shipped languages):
# languages Snowball has no algorithm for in every PyStemmer release xlrag allows (Czech and
# Polish exist only from 3.0: lemmas keep both installs alike), and Greek, where Snowball's
# stems of a name's cases part (ιταλ/ιταλι: 3 of 8 names met, 8 of 8 with lemmas and truncation).
# Not Hebrew: simplemma's dictionary makes בקניה "reed" (קנה) and knows no prefix on an unknown
# name; the prefix terms (xlrag.indexes.morphology.hebrew_variants) meet every form.
_LEMMAS = frozenset({"pl", "cs", "sk", "uk", "bg", "mk", "sl", "hr", "bs", "is", "ka", "lv", "et", "sq", "el",
                     "ar", "de"})
# ... then Snowball's stem of the lemma, where that measured better than either alone: Arabic (a
# name after the preposition لـ: 3 → 7 of 8; Travel same-language Hit@1 0.745 → 0.786, XQuAD 0.937
# → 0.947) and German (the genitive -s of Kenias: 7 → 8 of 8; XQuAD Hit@5 0.968 → 0.979).
_STEM_LEMMAS = frozenset({"ar", "de"})
# Apostrophes handled as Lucene's analyzers handle them (see xlrag.indexes.morphology).
_APOSTROPHE = {**dict.fromkeys(morphology.ELISION_ARTICLES, "elision"), "tr": "suffix", "az": "suffix",
               "en": "possessive"}
_VARIANTS = {"he": "hebrew", "ko": "korean"}
# Scripts whose words are letters in a row, where a word's first letters carry its stem; not the
# syllabaries (Hangul, Ethiopic) nor the scripts ICU segments with a dictionary.
_TRUNCATE_SCRIPTS = frozenset({"Latn", "Cyrl", "Grek", "Armn", "Geor", "Deva", "Beng", "Guru", "Gujr", "Orya",
                               "Taml", "Telu", "Knda", "Mlym", "Sinh", "Mong"})

_CJK_RUN = re.compile(r"[\u3041-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0003134f]+")


def _arabic_script_table(full: bool) -> dict[int, str | None]:
    # Vowel marks (harakat/tashkeel: fatha, damma, kasra, sukun, shadda, tanwin), the dagger alef
    # and Quranic annotation marks are optional in all Arabic-script writing: most text omits
    # them, so a voweled word must match its bare form. Derived from the Unicode category so that
    # every nonspacing mark of the Arabic blocks goes, not a hand-kept list.
    marks = [*range(0x0610, 0x0620), *range(0x064B, 0x0660), 0x0670, *range(0x06D6, 0x06EE),
             *range(0x08D3, 0x0900)]
    table: dict[int, str | None] = {cp: None for cp in marks if unicodedata.category(chr(cp)) == "Mn"}
    table[0x0640] = None  # tatweel: a justification stretch, never part of the spelling
    # Arabic-Indic and Persian digits: the same numbers are written in both and in ASCII.
    table.update({0x0660 + d: str(d) for d in range(10)})
    table.update({0x06F0 + d: str(d) for d in range(10)})
    if full:
        # Alef with hamza above/below, madda and wasla are spelled bare alef in much modern text
        # (keyboards, headlines), so أحمد/احمد and إسلام/اسلام must meet.
        table.update({ord(c): "\u0627" for c in "\u0623\u0625\u0622\u0671"})
        # Final alef maqsura is written as yeh (and vice versa, Egyptian usage): ى → ي. It also
        # makes Snowball stem مستشفى like المستشفيات (مستشف); left alone, they stem apart.
        table[0x0649] = "\u064a"
        # Persian yeh/kaf typed on Persian keyboards in Arabic text.
        table[0x06CC], table[0x06A9] = "\u064a", "\u0643"
    else:
        # Persian, Urdu and neighbours: Arabic yeh/alef maqsura/kaf typed on Arabic keyboards
        # stand for the Persian letters; nothing else is folded (alef forms carry meaning there).
        table[0x064A] = table[0x0649] = "\u06cc"
        table[0x0643] = "\u06a9"
    return table


# Turkish/Azeri dotted and dotless i: casefold maps I to i and İ to i + U+0307, which Snowball's
# Turkish stemmer (and every reader) treats as other letters; fold them the Turkish way first.
_TURKIC_TABLE = {ord("I"): "ı", ord("İ"): "i"}


@dataclass(frozen=True)
class Analyzer:
    """The analysis recipe for one language; build it with :func:`analyzer_for`."""

    lang: str
    name: str
    stemmer: str | None = None  # Snowball algorithm
    script: str | None = None  # "arabic" (full folding), "arabic-script" (safe parts), "turkic"
    cjk_bigrams: bool = False
    apostrophe: str | None = None  # "elision", "suffix" (Turkish), "possessive" (English)
    lemmas: bool = False  # simplemma's lemmas (before the stemmer, if both)
    variants: str | None = None  # extra terms: "hebrew" prefixes, "korean" particles
    truncate: bool = False  # extra terms: a word's first morphology.TRUNCATE characters

    @property
    def version(self) -> str:
        """What an index built with this analyzer depends on, e.g. ``2:ar:icu77+snowball3.1.0-arabic+arnorm``."""
        import icu

        parts = [f"icu{icu.ICU_VERSION.split('.')[0]}"]
        if self.apostrophe:
            parts.append(f"apos-{self.apostrophe}")
        if self.lemmas:
            parts.append(f"simplemma{_library_version('simplemma')}")
        if self.stemmer:
            parts.append(f"snowball{_library_version('PyStemmer')}-{self.stemmer}")
        if self.script:
            parts.append({"arabic": "arnorm", "arabic-script": "arsafe", "turkic": "trfold"}[self.script])
        if self.variants:
            parts.append(self.variants)
        if self.truncate:
            parts.append(f"trunc{morphology.TRUNCATE}")
        if self.cjk_bigrams:
            parts.append("cjk2")
        return f"{ANALYZER_VERSION}:{self.lang}:{'+'.join(parts)}"

    def fold(self, text: str) -> str:
        """``text`` (NFKC-normalised) with the spellings this language writes interchangeably
        made one: for Arabic the hamza forms of alef, alef maqsura, vowel marks and tatweel; for
        Persian and Urdu the safe part. What the index terms are made from, and what the runtime
        checks compare, so that "أنا" repeats "انا"."""
        if self.script in ("arabic", "arabic-script"):
            return _fold_arabic_script(text, self.script == "arabic")
        return text

    def tokens(self, text: str) -> list[str]:
        """The index terms of ``text``, in order (repeats kept: BM25 counts them)."""
        return [t for group in self.groups(text) for t in group]

    def groups(self, text: str) -> list[tuple[str, ...]]:
        """The index terms of ``text``, grouped by the word they come from: the word's own term
        first, then the extra terms it adds (prefix or particle forms, a truncation, CJK
        bigrams). What :func:`xlrag.indexes.names.names_in` matches a name on, word by word: the
        flat list interleaves one word's extra terms with the next word's."""
        if not text:
            return []
        raw = text
        if self.script == "turkic":
            text = text.translate(_TURKIC_TABLE)
        folded = _normalize(text)
        text = self.fold(folded)
        words = _segment(text, self.lang)
        if self.apostrophe and words:
            words = self._apostrophes(words)
        if self.lemmas and words:
            lemma = morphology.lemmatizer(self.lang)
            words = [lemma(w) for w in words]
            if self.script:  # a dictionary's lemma is spelled in full: fold it as the text was
                words = [self.fold(w) for w in words]
        if self.stemmer and words:
            if self.script == "arabic":
                words = [_strip_conjunction(w) for w in words]
            stems = _stemmer(self.stemmer).stemWords(words)
            words = [s or w for s, w in zip(stems, words, strict=True)]  # a stemmer never empties a word
            if self.script == "arabic":
                # Taa marbuta is often typed as heh (سنه for سنة), so ة → ه, but *after* stemming:
                # before it, Snowball stops stripping the ending after the article, and الجامعة
                # stems to جامعه, apart from جامعة and الجامعات (جامع). After it, the words Snowball
                # leaves whole still meet (سنة/سنه); an informal definite form (الجامعه) does not.
                words = [w.replace("\u0629", "\u0647") for w in words]
        groups: list[tuple[str, ...]] = [(w,) for w in words]
        if self.variants and groups:
            more = _VARIANT_FUNCTIONS[self.variants]
            groups = [(g[0], *more(g[0])) for g in groups]
        if self.truncate and groups:
            groups = [(*g, *morphology.truncated(g[0])) for g in groups]
        if self.cjk_bigrams:
            groups = [(*g, *_bigrams(g[0])) for g in groups]
        if groups:
            return groups
        # the folded text's letters last: a lone tatweel is a letter the Arabic folding removes,
        # a Hangul filler one that NFKC_Casefold removes (a default-ignorable letter)
        fallback = _fallback(text) or _fallback(folded) or _fallback(unicodedata.normalize("NFKC", raw))
        return [(t,) for t in fallback]

    def _apostrophes(self, words: list[str]) -> list[str]:
        if self.apostrophe == "elision":
            articles = morphology.ELISION_ARTICLES[self.lang]
            return [morphology.elide(w, articles) if "'" in w else w for w in words]
        strip = morphology.possessive if self.apostrophe == "possessive" else morphology.strip_suffix_after_apostrophe
        return [strip(w) if "'" in w else w for w in words]


_VARIANT_FUNCTIONS = {"hebrew": morphology.hebrew_variants, "korean": morphology.korean_variants}
_APOSTROPHE_TABLE = dict.fromkeys(map(ord, morphology.APOSTROPHES), "'")


def _normalize(text: str) -> str:
    """NFKC_Casefold (which drops default-ignorable code points), apostrophe-like marks as ``'``."""
    out = _nfkc_cf().normalize(text)
    if any(a in out for a in morphology.APOSTROPHES):
        out = out.translate(_APOSTROPHE_TABLE)
    return out


@lru_cache(maxsize=1)
def _nfkc_cf():
    import icu

    return icu.Normalizer2.getNFKCCasefoldInstance()  # immutable: one for every thread


def _strip_conjunction(word: str) -> str:
    # Snowball strips بال/كال/لل but not the conjunctions و/ف before the article (والمستشفى stays
    # whole), the commonest prefix pair in running Arabic; Larkey's light10 stemmer strips them.
    # Six letters at least, so that roots beginning و+ال (والد, والي) keep their first letter.
    if len(word) >= 6 and word[0] in "\u0648\u0641" and word.startswith("\u0627\u0644", 1):
        return word[1:]
    return word


def _bigrams(word: str) -> list[str]:
    """The Han/kana character bigrams of ``word``, when it has three characters or more (a
    two-character word *is* its one bigram; one character stays itself)."""
    if len(word) < 3:
        return []
    return [run[i:i + 2] for run in _CJK_RUN.findall(word) for i in range(len(run) - 1)]


def _fallback(text: str) -> list[str]:
    """Character bigrams (a lone character: itself) of the letter/digit runs of ``text``."""
    runs: list[str] = []
    current: list[str] = []
    for ch in text + " ":
        if unicodedata.category(ch)[0] in "LN":
            current.append(ch)
        elif current:
            runs.append("".join(current))
            current = []
    return [r[i:i + 2] for r in runs for i in range(max(1, len(r) - 1))]


_local = threading.local()


def _segment(text: str, lang: str) -> list[str]:
    if not text:
        return []
    breakers = getattr(_local, "breakers", None)
    if breakers is None:
        breakers = _local.breakers = {}
    bi = breakers.get(lang)
    if bi is None:
        import icu

        bi = breakers[lang] = icu.BreakIterator.createWordInstance(icu.Locale(lang))
    bi.setText(text)
    spans: list[tuple[int, int]] = []
    start = bi.first()
    status = bi.getRuleStatus
    for end in bi:
        # UBRK_WORD_NONE (0-99) covers spaces, punctuation, symbols and emoji; 100 and up are
        # numbers, letters, kana and ideographs.
        if status() >= 100:
            spans.append((start, end))
        start = end
    if max(text) <= "\uffff":
        return [text[s:e] for s, e in spans]
    # ICU's offsets count UTF-16 units: past an emoji or a rare Han character (two units, one
    # Python character), slicing the str would cut words apart.
    units = text.encode("utf-16-le")
    return [units[2 * s:2 * e].decode("utf-16-le") for s, e in spans]


def _stemmer(algorithm: str):
    stemmers = getattr(_local, "stemmers", None)
    if stemmers is None:
        stemmers = _local.stemmers = {}
    s = stemmers.get(algorithm)
    if s is None:
        import Stemmer

        s = stemmers[algorithm] = Stemmer.Stemmer(algorithm)
    return s


@lru_cache(maxsize=2)
def _folder(full: bool) -> tuple[re.Pattern[str], dict[str, str]]:
    table = {chr(cp): to or "" for cp, to in _arabic_script_table(full).items()}
    return re.compile("[" + "".join(map(re.escape, table)) + "]"), table


def _fold_arabic_script(text: str, full: bool) -> str:
    # A regex substitution, not str.translate: translate looks every character up in the table
    # (120 µs a passage, a third of the analysis), the regex only the few it matches.
    pattern, table = _folder(full)
    return pattern.sub(lambda m: table[m.group()], text)


@lru_cache(maxsize=4)
def _library_version(name: str) -> str:
    import importlib.metadata

    return importlib.metadata.version(name)


def _stemmer_for(lang: str) -> str | None:
    """The Snowball algorithm whose name is the language's English name (``ar`` → ``arabic``)."""
    import langcodes
    import Stemmer

    # an alias names an algorithm some PyStemmer releases lack (sesotho came with 3.0)
    name = _STEMMER_ALIASES.get(lang) or langcodes.get(lang).language_name("en").casefold()
    return name if name in Stemmer.algorithms() else None


@cache
def _build(lang: str) -> Analyzer:
    lemmas = lang in _LEMMAS
    stemmer = None if lang == GENERIC or (lemmas and lang not in _STEM_LEMMAS) else _stemmer_for(lang)
    script = ("arabic" if lang == "ar" else "arabic-script" if lang in _ARABIC_SCRIPT_SAFE
              else "turkic" if lang in ("tr", "az") else None)
    cjk = lang in _CJK_LANGS
    variants = _VARIANTS.get(lang)
    truncate = lang != GENERIC and not stemmer and _script_of(lang) in _TRUNCATE_SCRIPTS
    apostrophe = _APOSTROPHE.get(lang)
    name = "+".join(["icu", *([f"apostrophe:{apostrophe}"] if apostrophe else []),
                     *(["simplemma"] if lemmas else []),
                     *([f"snowball:{stemmer}"] if stemmer else []),
                     *([{"arabic": "arabic-norm", "arabic-script": "arabic-script-norm",
                         "turkic": "turkic-i"}[script]] if script else []),
                     *([f"{variants}-terms"] if variants else []),
                     *(["truncation-terms"] if truncate else []),
                     *(["cjk-bigrams"] if cjk else [])])
    return Analyzer(lang=lang, name=name, stemmer=stemmer, script=script, cjk_bigrams=cjk,
                    apostrophe=apostrophe, lemmas=lemmas, variants=variants, truncate=truncate)


def _script_of(lang: str) -> str | None:
    import langcodes

    return langcodes.get(lang).maximize().script


@lru_cache(maxsize=1024)
def analyzer_for(lang: str | None) -> Analyzer:
    """The analyzer of ``lang`` (any code :func:`xlrag.languages.normalize_code` takes: ``'AR'``,
    ``'ar-EG'``); an unknown, empty or ``None`` code gets the generic analyzer (``lang='und'``)
    instead of an error, since a store's text must be indexed whatever its label says."""
    try:
        code = normalize_code(lang) if lang else GENERIC
    except UnknownLanguageError:
        code = GENERIC
    return _build(code)


def analyze_many(lang: str | None, texts: Sequence[str]) -> list[list[str]]:
    """``analyzer_for(lang).tokens`` of each text, in order."""
    tokens = analyzer_for(lang).tokens
    return [tokens(t) for t in texts]
