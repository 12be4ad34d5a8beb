import pytest

from xlrag.errors import PolicyError
from xlrag.indexes.policies import (
    MODES,
    Balanced,
    RetrievalPolicy,
    Translate,
    make_policy,
    plans_language_shares,
)
from xlrag.indexes.translate import CachedTranslator, TableTranslator
from xlrag.schema import Query

LANGS = ["ar", "de", "en", "es", "ru", "zh"]


def plan(mode, q="Frage?", qlang="de", k=6, langs=LANGS, **policy_kw):
    query = Query(question=q, lang=qlang, **{k_: v for k_, v in policy_kw.items() if k_ in ("relevant_langs", "target_lang")})
    kw = {k_: v for k_, v in policy_kw.items() if k_ not in ("relevant_langs", "target_lang")}
    return make_policy(mode, **kw).plan(query, qlang, langs, k)


def stores(p):
    return [s.store for s in p.searches]


def test_every_mode_is_a_policy():
    assert set(MODES) == {"no_ir", "qlang", "qlang_en", "en_only", "rel_langs", "swap_docs", "all",
                          "balanced", "translate", "oracle_lang"}
    for cls in MODES.values():
        assert isinstance(cls.__new__(cls), RetrievalPolicy)


def test_simple_modes():
    assert stores(plan("no_ir")) == []
    assert stores(plan("qlang")) == ["de"]
    assert stores(plan("qlang_en")) == ["de", "en"]
    assert stores(plan("en_only")) == ["en"]
    assert stores(plan("all")) == ["de", "en", "ar", "es", "ru", "zh"]
    assert stores(plan("oracle_lang", target_lang="ru")) == ["ru"]


def test_rel_langs_and_swap_docs():
    assert stores(plan("rel_langs", relevant_langs=["zh", "iw"])) == ["de", "en", "zh"]
    assert plan("rel_langs", relevant_langs=["zh", "iw"]).notes == ["no 'he' store in this index"]
    assert stores(plan("swap_docs")) == ["en", "ar", "es", "ru", "zh"]
    assert stores(plan("swap_docs", target_lang="ar")) == ["ar"]
    with pytest.raises(PolicyError, match="relevant languages"):
        plan("rel_langs")
    with pytest.raises(PolicyError, match="other than the query"):
        plan("swap_docs", target_lang="de")
    with pytest.raises(PolicyError, match="gold language"):
        plan("oracle_lang")


def test_missing_store_is_noted_not_invented():
    p = plan("qlang", qlang="fr")
    assert p.searches == [] and p.notes == ["no 'fr' store in this index"]


@pytest.mark.parametrize(("k", "expected"), [(6, [1] * 6), (12, [2] * 6), (8, [2, 2, 1, 1, 1, 1]), (3, [1, 1, 1, 0, 0, 0])])
def test_balanced_shares(k, expected):
    p = plan("balanced", k=k)
    assert list(p.shares.values()) == expected
    assert list(p.shares)[:2] == ["de", "en"]  # remainder goes to the query language, then English
    assert all(s.quota == k for s in p.searches)


def test_balanced_over_chosen_languages():
    p = Balanced(["ar", "en"]).plan(Query(question="x", lang="de"), "de", LANGS, 5)
    assert p.shares == {"en": 3, "ar": 2}


def test_plans_language_shares_is_derived_from_the_plans():
    for mode in set(MODES) - {"translate"}:  # translate's plan needs a translator; it merges one ranking
        p = plan(mode, relevant_langs=["zh"], target_lang="ru")
        assert plans_language_shares(mode) == (p.shares is not None), mode
    assert not plans_language_shares("translate") and not plans_language_shares("nonsense")
    # why it matters: the first 3 of a balanced 6 are not the balanced 3
    assert plan("balanced", k=6).shares != plan("balanced", k=3).shares


def test_translate_uses_the_translator_once_per_language():
    calls = []

    class Recording:
        def translate(self, text, source_lang, target_lang):
            calls.append(target_lang)
            return f"[{target_lang}] {text}"

    t = CachedTranslator(Recording())
    policy = Translate(t)
    p1 = policy.plan(Query(question="Frage?", lang="de"), "de", LANGS, 4)
    policy.plan(Query(question="Frage?", lang="de"), "de", LANGS, 4)
    assert {s.store: s.text for s in p1.searches}["de"] == "Frage?"
    assert {s.store: s.text for s in p1.searches}["zh"] == "[zh] Frage?"
    assert sorted(calls) == ["ar", "en", "es", "ru", "zh"]  # cached on the second plan
    with pytest.raises(PolicyError, match="needs a translator"):
        Translate().plan(Query(question="x", lang="de"), "de", LANGS, 4)


def test_cached_translator_keeps_the_most_recently_used():
    calls = []

    class Recording:
        def translate(self, text, source_lang, target_lang):
            calls.append(text)
            return text.upper()

    t = CachedTranslator(Recording(), maxsize=2)
    for text in ("a", "b", "a", "c", "a", "b"):  # "c" evicts "b", the least recently used
        assert t.translate(text, "de", "en") == text.upper()
    assert calls == ["a", "b", "c", "b"]
    with pytest.raises(ValueError, match="at least one"):
        CachedTranslator(Recording(), maxsize=0)


def test_table_translator_refuses_unknown_text():
    t = TableTranslator({("Hallo", "en"): "Hello"})
    assert t.translate("Hallo", "de", "en") == "Hello"
    assert t.translate("Hallo", "de", "de") == "Hallo"
    with pytest.raises(PolicyError, match="no known"):
        t.translate("Tschüss", "de", "en")


def test_unknown_mode():
    with pytest.raises(PolicyError, match="unknown IR mode"):
        make_policy("bm25")
