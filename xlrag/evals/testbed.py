"""The many-language test bed: one template page per country and language, and number questions.

Each language file under ``xlrag/data/testbed/languages/`` (see its README) gives a page template
and two question templates, and the forms of eight countries' names the language uses in a title
(``nom``), in running text (``loc``: "in X") and in a question (``gen``: "X's", "of X"). Pages
differ only by the country's name and its two numbers, so a retrieval channel finds the right page
only if it matches the name as a question inflects it with the name as a page does; and the gold
answers are numbers, checkable without a judge in every language.

The numbers depend on the country alone (drawn once from a fixed seed), so the page about Kenya
says the same thing in every language: a question in one language has a gold page in every other,
which is how the cross-language cells are made.
"""

from __future__ import annotations

import random
import re
from functools import cache
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from xlrag.languages import normalize_code
from xlrag.schema import Document

__all__ = ["COUNTRIES", "FACTS", "SEED_LANGUAGES", "LanguageSpec", "TestbedQuestion", "documents", "gold_doc",
           "languages",
           "numbers", "qrels", "questions", "spec"]

LANGUAGES_DIR = Path(__file__).resolve().parent.parent / "data" / "testbed" / "languages"
COUNTRIES: tuple[str, ...] = ("IT", "KE", "JP", "DE", "EG", "BR", "NL", "IN")
Fact = Literal["emergency", "park"]
FACTS: tuple[Fact, ...] = ("emergency", "park")
# The languages of the seed papers, as their data name them (normalised by the test bed's file
# names: BordIRlines' iw is he, zhs/zht are zh-Hans/zh-Hant): every one has a file, and a test
# holds the files to this list. Catalan, Czech, Polish and Hungarian are there for morphology
# the seeds' languages do not exercise (elision after de/l', seven cases, agglutination).
SEED_LANGUAGES: dict[str, tuple[str, ...]] = {
    "bordirlines": ("ar", "az", "bn", "bs", "da", "el", "en", "es", "fa", "fr", "hi", "hr", "ht", "hy", "id",
                    "is", "it", "he", "ja", "ka", "km", "ko", "ky", "lo", "mg", "mn", "ms", "my", "ne", "nl",
                    "pt", "ru", "sl", "sn", "so", "sq", "sr", "sw", "tg", "th", "ti", "tl", "tr", "uk", "ur",
                    "uz", "vi", "zh-Hans", "zh-Hant"),
    "mrag_bergen": ("ar", "zh-Hans", "fi", "fr", "de", "ja", "it", "ko", "pt", "ru", "es", "th", "en"),
    "xor_attriqa": ("bn", "fi", "ja", "ru", "te"),
    "morphology": ("ca", "cs", "pl", "hu"),
}
_SEED = 51
_SLOT = re.compile(r"\{(\w+)\}")


class Forms(BaseModel):
    """How the language writes one country's name: in a title, "in X", and "X's" / "of X"."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    nom: str
    loc: str
    gen: str


class PageSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    title: str
    text: str


class LanguageSpec(BaseModel):
    """One language file, validated: every country has every form, the page holds each number
    once and never the question's form, and the questions hold no number."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    lang: str
    name: str
    exercises: list[str] = Field(min_length=1)
    cldr_differs: str | None = None
    page: PageSpec
    questions: dict[Fact, str]
    countries: dict[str, Forms]

    @model_validator(mode="after")
    def _whole(self) -> LanguageSpec:
        if tuple(sorted(self.countries)) != tuple(sorted(COUNTRIES)):
            raise ValueError(f"{self.lang}: countries must be exactly {', '.join(COUNTRIES)}")
        if set(self.questions) != set(FACTS):
            raise ValueError(f"{self.lang}: questions must be exactly {', '.join(FACTS)}")
        if _SLOT.findall(self.page.title) != ["nom"]:
            raise ValueError(f"{self.lang}: page.title names the country once, as {{nom}}")
        slots = _SLOT.findall(self.page.text)
        if sorted(s for s in slots if s in FACTS) != sorted(FACTS) or "gen" in slots or "loc" not in slots:
            raise ValueError(f"{self.lang}: page.text holds {{loc}}, each number once, and never {{gen}}")
        for fact, q in self.questions.items():
            if _SLOT.findall(q) != ["gen"] or re.search(r"\d", q):
                raise ValueError(f"{self.lang}: question {fact!r} names the country once, as {{gen}}, with no digit")
        return self


class TestbedQuestion(BaseModel):
    """One number question: its gold answer, and the country whose page (in any language) holds it."""

    model_config = ConfigDict(frozen=True)

    id: str
    lang: str  # the file's code (``zh-Hant``); its store is ``normalize_code(lang)``
    country: str
    fact: Fact
    question: str
    answer: str


def languages() -> list[str]:
    """Every language of the test bed, as its file names it (``he``, ``zh-Hant``), sorted."""
    return sorted(p.stem for p in LANGUAGES_DIR.glob("*.yaml"))


@cache
def spec(lang: str) -> LanguageSpec:
    """The validated language file of ``lang``."""
    import yaml

    path = LANGUAGES_DIR / f"{lang}.yaml"
    if not path.is_file():
        raise FileNotFoundError(f"the test bed has no language {lang!r}; it has: {', '.join(languages())}")
    return LanguageSpec.model_validate(yaml.safe_load(path.read_text(encoding="utf-8")))


@cache
def numbers(country: str) -> dict[Fact, str]:
    """The country's emergency number (three digits) and the year its first park was founded;
    distinct across countries, so another country's page never holds the right answer."""
    rng = random.Random(_SEED)
    phones = rng.sample(range(101, 999), len(COUNTRIES))
    years = rng.sample(range(1890, 2011), len(COUNTRIES))
    i = COUNTRIES.index(country)
    return {"emergency": str(phones[i]), "park": str(years[i])}


def _render(template: str, forms: Forms, country: str) -> str:
    values = forms.model_dump() | numbers(country)
    return _SLOT.sub(lambda m: values[m.group(1)], template).strip()


def doc_id(lang: str, country: str) -> str:
    return f"tb-{lang}-{country}"


def gold_doc(question: TestbedQuestion, doc_lang: str | None = None) -> str:
    """The id of the page that answers ``question`` in ``doc_lang`` (default: its own language)."""
    return doc_id(doc_lang or question.lang, question.country)


def documents(langs: list[str] | None = None, countries: tuple[str, ...] = COUNTRIES) -> list[Document]:
    """The pages of ``langs`` (default: every language), one per country."""
    out = []
    for lang in langs or languages():
        s = spec(lang)
        for c in countries:
            forms = s.countries[c]
            out.append(Document(id=doc_id(lang, c), lang=normalize_code(lang), title=_render(s.page.title, forms, c),
                                text=_render(s.page.text, forms, c), metadata={"country": c, "testbed_lang": lang}))
    return out


def questions(langs: list[str] | None = None, facts: tuple[Fact, ...] = FACTS,
              countries: tuple[str, ...] = COUNTRIES) -> list[TestbedQuestion]:
    """The number questions of ``langs`` (default: every language)."""
    out = []
    for lang in langs or languages():
        s = spec(lang)
        for c in countries:
            for f in facts:
                out.append(TestbedQuestion(id=f"tb-{lang}-{c}-{f}", lang=lang, country=c, fact=f,
                                           question=_render(s.questions[f], s.countries[c], c),
                                           answer=numbers(c)[f]))
    return out


def qrels(items: list[TestbedQuestion], doc_lang: dict[str, str] | None = None) -> dict[str, dict[str, int]]:
    """Each question's gold page: in its own language, or in ``doc_lang[question.lang]``. Pages of
    other languages that share the gold's store (simplified and traditional Chinese) count too:
    a store cannot tell them apart, and neither should the metric."""
    by_store: dict[str, list[str]] = {}
    for lang in languages():
        by_store.setdefault(normalize_code(lang), []).append(lang)
    out: dict[str, dict[str, int]] = {}
    for q in items:
        target = (doc_lang or {}).get(q.lang, q.lang)
        out[q.id] = {doc_id(x, q.country): 1 for x in by_store[normalize_code(target)]}
    return out
