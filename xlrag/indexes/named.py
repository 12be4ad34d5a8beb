"""The stores that hold the places a question names: evidence about a store that no embedder's
cosine gives, since how close two languages sit in its space differs by pair.

Balanced's share margin never leaves such a store out (:meth:`RetrievalPlan.gated_shares`), and
where two stores' passages tie in the merged ranking theirs go first
(:func:`xlrag.indexes.fusion.select`). Names are CLDR's (:mod:`xlrag.indexes.names`), looked up in
each store's lexical vocabulary.
"""

from __future__ import annotations

from xlrag.indexes.analyzers import analyzer_for
from xlrag.indexes.lexical import LexicalStores
from xlrag.indexes.names import spellings, subjects_in
from xlrag.indexes.policies import RetrievalPlan
from xlrag.schema import Query

__all__ = ["named_stores", "prefer"]


def named_stores(lexical: LexicalStores, q: Query, plan: RetrievalPlan) -> frozenset[str] | None:
    """The planned stores whose passages hold a country the question names (:func:`subjects_in`), in the store's
    language (CLDR's name, each word of it in the store's lexical vocabulary by one of its terms): stores that
    hold the subject of the question. Balanced's share margin never leaves them out
    (:meth:`RetrievalPlan.gated_shares`), and where two stores' passages tie in the merged
    ranking, theirs go first (:func:`xlrag.indexes.fusion.select`). Computed when more than
    one store is searched; a store without a readable lexical index gives no evidence. None
    when the question names no place xlrag knows: then no store is told from another by it."""
    if len(plan.searches) < 2 or not q.lang:
        return frozenset()
    codes = subjects_in(q.question, q.lang)
    if not codes:
        return None
    out = set()
    for s in plan.searches:
        index, _ = lexical.index(s.store)
        if index is None or index.bm25 is None:
            continue
        vocab = index.bm25.vocab_dict
        groups = analyzer_for(s.store).groups
        # each word of the name in the vocabulary by one of its terms (its own, or the lemma,
        # particle or truncation form a page spells it with: Creole "Itali" for CLDR's
        # "Italie"); a name ICU breaks into single characters (a transliteration no dictionary
        # knows: 科摩罗) is in every Chinese store's vocabulary, so evidence needs a longer term
        if any((words := groups(name)) and all(any(t in vocab for t in w) for w in words)
               and any(len(t) > 1 for w in words for t in w if t in vocab)
               for code in codes for name in spellings(code, s.store)):
            out.add(s.store)
    return frozenset(out)


def prefer(plan: RetrievalPlan, named: frozenset[str] | None) -> dict[str, int]:
    """Which store's passage goes first where two tie in the merged ranking: a store holding a
    place the question names, then the question's own store (where the embedder is strongest),
    then the others (benchmarks/languages.py measured the order on Travel and XQuAD)."""
    return {s.store: 2 * (s.store in (named or ())) + (s.store == plan.query_lang) for s in plan.searches}
