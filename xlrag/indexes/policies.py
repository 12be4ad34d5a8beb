"""IR modes as routing policies.

A policy looks at a query, its language and the languages the index holds, and
returns a :class:`RetrievalPlan`: which stores to search, with which query text,
and how many passages to take from each. Policies never touch vectors or stores,
so they are cheap to test and easy to write: anything with ``plan`` fits.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any, ClassVar, Protocol, runtime_checkable

from pydantic import BaseModel, Field

from xlrag.errors import PolicyError
from xlrag.indexes.translate import Translator
from xlrag.languages import normalize_code
from xlrag.modes import SHARE_MARGIN, IRMode, parse_mode
from xlrag.registry import get, register
from xlrag.schema import Query

__all__ = [
    "MODES",
    "All",
    "Balanced",
    "EnOnly",
    "NoIR",
    "OracleLang",
    "QLang",
    "QLangEn",
    "RelLangs",
    "RetrievalPlan",
    "RetrievalPolicy",
    "StoreQuery",
    "SwapDocs",
    "Translate",
    "check_margin",
    "make_policy",
    "plans_language_shares",
    "share_out",
]


class StoreQuery(BaseModel):
    store: str = Field(description="language of the store to search")
    text: str = Field(description="query text to embed for this store")
    quota: int = Field(description="passages to fetch from this store")


class RetrievalPlan(BaseModel):
    policy: str
    query_lang: str
    k: int = Field(description="passages in the final list")
    searches: list[StoreQuery] = Field(default_factory=list)
    shares: dict[str, int] | None = Field(
        None, description="exact passages per store in the final list (balanced); None = one merged ranking"
    )
    share_margin: float | None = Field(
        None, description="balanced: a store whose best passage scores more than this under the best store in "
                          "another language than the question's gets no share (None: every store its share)")
    notes: list[str] = Field(default_factory=list, description="why a wanted store was left out, etc.")

    def gated_shares(self, best: Mapping[str, float], named: Collection[str] | None = ()
                     ) -> tuple[dict[str, int] | None, list[str]]:
        """The shares once the stores with nothing near the question are out, and why each went.

        ``best`` is each searched store's best dense score for the question. Cosines of one
        multilingual embedder compare across the other languages, but the question's own language
        scores higher whatever it holds, so the reference is the best store in another language,
        and the question's own store always keeps its share. A store left out gives its share to
        the others by the plan's own rule, in the plan's order.

        ``named``: the stores that hold a place the question names, in their own language
        (:meth:`CrossLingualRetriever.named_stores`). They keep their share whatever their cosine:
        how close two languages sit in the embedder's space differs by pair (a Greek question
        scores a Turkish page above the same page in Hindi), so a cosine margin alone leaves out
        stores that hold the answer in the languages the embedder ranks lower. ``named=None``: the
        question names no place xlrag can look for, so nothing tells a store far under the others
        from one the embedder merely ranks lower in its language, and every store keeps its share.
        """
        if self.shares is None or self.share_margin is None or named is None:
            return self.shares, []
        others = {s: v for s, v in best.items() if s != self.query_lang and s in self.shares}
        if not others:
            return self.shares, []
        ref_store = max(others, key=lambda s: others[s])
        floor = others[ref_store] - self.share_margin
        out = [s for s, v in others.items() if v < floor and s not in named]
        if not out:
            return self.shares, []
        notes = [f"balanced: no share for store {s!r}: its best passage scores {others[s]:.3f}, more than "
                 f"{self.share_margin:g} under store {ref_store!r}'s {others[ref_store]:.3f}, and it holds no "
                 "place the question names" for s in out]
        kept = [s for s in self.shares if s not in out]
        return {**share_out(self.k, kept), **dict.fromkeys(out, 0)}, notes


@runtime_checkable
class RetrievalPolicy(Protocol):
    name: str

    def plan(self, query: Query, query_lang: str, available: Sequence[str], k: int) -> RetrievalPlan:
        """Decide which stores to search for ``query`` and how much to take from each."""


def share_out(k: int, langs: Sequence[str]) -> dict[str, int]:
    """``k`` split evenly over ``langs``; the remainder goes to the first of them, in order."""
    base, extra = divmod(k, len(langs))
    return {lang: base + (1 if i < extra else 0) for i, lang in enumerate(langs)}


def check_margin(margin: float | None) -> float | None:
    """``margin`` when it is a cosine difference from 0 to 2 (or None); a one-line error otherwise."""
    if margin is None:
        return None
    if isinstance(margin, bool) or not isinstance(margin, int | float) or not 0 <= margin <= 2:
        raise PolicyError(f"balanced's share margin is a cosine difference from 0 to 2, not {margin!r}; "
                          "None gives every store its share (retrieval.share_margin)")
    return float(margin)


def _order(langs: Sequence[str], query_lang: str) -> list[str]:
    """Query language first, then English, then the rest alphabetically (stable, readable)."""
    rest = sorted(set(langs) - {query_lang, "en"})
    head = [x for x in (query_lang, "en") if x in langs]
    return list(dict.fromkeys(head + rest))


class _Merged:
    """Shared shape of the modes that merge a fixed set of stores into one ranking."""

    name: ClassVar[str]

    def wanted(self, query: Query, query_lang: str, available: Sequence[str]) -> list[str]:
        raise NotImplementedError

    def plan(self, query: Query, query_lang: str, available: Sequence[str], k: int) -> RetrievalPlan:
        wanted = self.wanted(query, query_lang, available)
        have = [lang for lang in wanted if lang in available]
        notes = [f"no '{lang}' store in this index" for lang in wanted if lang not in available]
        return RetrievalPlan(
            policy=self.name,
            query_lang=query_lang,
            k=k,
            searches=[StoreQuery(store=lang, text=query.question, quota=k) for lang in _order(have, query_lang)],
            notes=notes,
        )


class NoIR:
    """The closed-book baseline: retrieve nothing."""

    name = IRMode.NO_IR

    def plan(self, query: Query, query_lang: str, available: Sequence[str], k: int) -> RetrievalPlan:
        return RetrievalPlan(policy=self.name, query_lang=query_lang, k=0)


class QLang(_Merged):
    """Only passages in the query's language."""

    name = IRMode.QLANG

    def wanted(self, query, query_lang, available):
        return [query_lang]


class QLangEn(_Merged):
    """The query's language and English."""

    name = IRMode.QLANG_EN

    def wanted(self, query, query_lang, available):
        return [query_lang, "en"]


class EnOnly(_Merged):
    """English passages only."""

    name = IRMode.EN_ONLY

    def wanted(self, query, query_lang, available):
        return ["en"]


class RelLangs(_Merged):
    """The query's language, English and the relevant languages given with the query
    (for a territorial dispute, the claimants' languages)."""

    name = IRMode.REL_LANGS

    def __init__(self, relevant_langs: Sequence[str] = ()):
        self.relevant_langs = [normalize_code(x) for x in relevant_langs]

    def wanted(self, query, query_lang, available):
        rel = query.relevant_langs or self.relevant_langs
        if not rel:
            raise PolicyError(
                "rel_langs needs relevant languages: give the query relevant_langs "
                "(CLI: --relevant-langs ar,he)"
            )
        return [query_lang, "en", *rel]


class SwapDocs(_Merged):
    """Passages NOT in the query's language: a given language, or all the others."""

    name = IRMode.SWAP_DOCS

    def __init__(self, target_lang: str | None = None):
        self.target_lang = normalize_code(target_lang) if target_lang else None

    def wanted(self, query, query_lang, available):
        target = query.target_lang or self.target_lang
        if target == query_lang:
            raise PolicyError(
                f"swap_docs retrieves in a language other than the query's; the target "
                f"{target!r} is the query's own language"
            )
        if target:
            return [target]
        return [lang for lang in available if lang != query_lang]


class All(_Merged):
    """One merged ranking over every store ("direct" retrieval in the papers)."""

    name = IRMode.ALL

    def wanted(self, query, query_lang, available):
        return list(available)


class OracleLang(_Merged):
    """Restrict retrieval to one language's store (``target_lang``): the gold document's, for
    analysis, or one perspective's (:mod:`xlrag.perspectives`)."""

    name = IRMode.ORACLE_LANG

    def wanted(self, query, query_lang, available):
        if not query.target_lang:
            raise PolicyError("oracle_lang needs the gold language as the query's target_lang (CLI: --target-lang)")
        return [query.target_lang]


class Balanced:
    """An equal share of the final list per language; shares a store cannot fill
    go to the others, and the remainder of ``k`` goes to the query's language first.

    With ``margin`` (default :data:`xlrag.modes.SHARE_MARGIN`), a store whose best passage
    scores more than ``margin`` under the best store in another language than the question's
    gets no share (:meth:`RetrievalPlan.gated_shares`): over a corpus of several subjects, a
    language whose store holds nothing on the question no longer fills a place with the nearest
    unrelated passage. ``margin=None`` gives every store its share."""

    name = IRMode.BALANCED
    # the shares depend on k: the first 5 of a balanced 20 are not a balanced 5
    language_shares: ClassVar[bool] = True

    def __init__(self, languages: Sequence[str] | None = None, margin: float | None = SHARE_MARGIN):
        self.languages = [normalize_code(x) for x in languages] if languages else None
        self.margin = check_margin(margin)

    def plan(self, query: Query, query_lang: str, available: Sequence[str], k: int) -> RetrievalPlan:
        wanted = self.languages or list(available)
        langs = _order([x for x in wanted if x in available], query_lang)
        notes = [f"no '{x}' store in this index" for x in wanted if x not in available]
        if not langs:
            return RetrievalPlan(policy=self.name, query_lang=query_lang, k=k, notes=notes)
        shares = share_out(k, langs)
        # Fetch k from every store, not just its share: a store with fewer passages
        # than its share leaves a deficit that the others fill.
        return RetrievalPlan(
            policy=self.name,
            query_lang=query_lang,
            k=k,
            searches=[StoreQuery(store=lang, text=query.question, quota=k) for lang in langs],
            shares=shares,
            share_margin=self.margin,
            notes=notes,
        )


class Translate:
    """Translate the query into each store's language, search each store with its
    own translation, and merge the rankings."""

    name = IRMode.TRANSLATE

    def __init__(self, translator: Translator | None = None, languages: Sequence[str] | None = None):
        self.translator = translator
        self.languages = [normalize_code(x) for x in languages] if languages else None

    def plan(self, query: Query, query_lang: str, available: Sequence[str], k: int) -> RetrievalPlan:
        if self.translator is None:
            raise PolicyError(
                "translate mode needs a translator: pass translator=... (any object with "
                "translate(text, source_lang, target_lang))"
            )
        wanted = self.languages or list(available)
        langs = _order([x for x in wanted if x in available], query_lang)
        searches = [
            StoreQuery(
                store=lang,
                text=(query.question if lang == query_lang
                      else self.translator.translate(query.question, query_lang, lang)),
                quota=k,
            )
            for lang in langs
        ]
        return RetrievalPlan(policy=self.name, query_lang=query_lang, k=k, searches=searches)


# keyed by xlrag.modes.IRMode (a StrEnum: "qlang" finds it too, so it is looked up by str); a
# test holds the two equal
MODES: dict[str, type] = {
    IRMode(cls.name): cls
    for cls in (NoIR, QLang, QLangEn, EnOnly, RelLangs, SwapDocs, All, Balanced, Translate, OracleLang)
}
# the registry is where a mode is looked up: a plugin's policy class registers as register("mode", name)
for _mode, _cls in MODES.items():
    register("mode", str(_mode))(_cls)


def _policy_class(mode: str) -> Any:
    try:
        return get("mode", str(parse_mode(mode)))
    except ValueError as e:
        raise PolicyError(str(e)) from None


def plans_language_shares(mode: str) -> bool:
    """Whether ``mode`` plans a fixed share of the final list per language, so that its
    list for a smaller k is not the first k of its list for a larger one."""
    try:
        return bool(getattr(_policy_class(mode), "language_shares", False))
    except PolicyError:
        return False


def make_policy(mode: str | RetrievalPolicy, **kwargs: Any) -> RetrievalPolicy:
    """A policy from its mode name (``"qlang_en"``, or a plugin's) and that mode's own arguments."""
    if not isinstance(mode, str):
        return mode
    return _policy_class(mode)(**kwargs)
