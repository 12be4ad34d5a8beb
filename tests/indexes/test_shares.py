"""``balanced`` over the demo index, two corpora in six language stores: a store that holds
nothing on the question gets no share (retrieval.share_margin, benchmarks/shares.py)."""

import pytest

from xlrag.demo import demo_embedder
from xlrag.indexes.retriever import CrossLingualRetriever
from xlrag.indexes.store import LanguageStores
from xlrag.schema import make_query

TRAVEL = [("What are the emergency numbers in Fiji?", "en"), ("ما هي ارقام الطوارئ في جزر القمر؟", "ar")]


@pytest.fixture(scope="module")
def demo(demo_index):
    embedder = demo_embedder()
    return LanguageStores.open(demo_index, embedder.name, embedder.dim), embedder


@pytest.mark.parametrize(("question", "lang"), TRAVEL)
def test_a_travel_question_is_shown_no_paragraph_on_another_subject(demo, question, lang):
    stores, embedder = demo
    assert len(stores.languages()) == 6
    gated = CrossLingualRetriever(stores, embedder, "balanced", k=3)
    equal = CrossLingualRetriever(stores, embedder, "balanced", k=3, share_margin=None)
    try:
        q = make_query(question, lang=lang)
        before = equal.retrieve(q)
        # every store its share: the third place goes to German by the alphabet, an XQuAD paragraph
        assert {h.store for h in before.hits} == {"ar", "en", "de"}
        assert [h.doc_id.startswith("xquad-") for h in before.hits if h.store == "de"] == [True]
        after = gated.retrieve(q)
        assert len(after.hits) == 3 and not any(h.doc_id.startswith("xquad-") for h in after.hits)
        assert {h.store for h in after.hits} <= {"ar", "en"}
        left_out = [n for n in after.notes if n.startswith("balanced: no share")]
        assert {n.split("'")[1] for n in left_out} >= {"de"}
    finally:
        gated.close()
        equal.close()


def test_the_config_sets_the_margin(demo):
    from xlrag.config import RetrievalConfig

    stores, embedder = demo
    # the default leaves the XQuAD stores out; None and a wide margin let every store in
    for settings, strays in (({}, False), ({"share_margin": None}, True), ({"share_margin": 0.5}, True)):
        r = CrossLingualRetriever.from_settings(stores, embedder, RetrievalConfig(mode="balanced", k=3, **settings))
        try:
            hits = r.retrieve(make_query(TRAVEL[0][0], lang="en"))
            assert any(h.doc_id.startswith("xquad-") for h in hits.hits) is strays, settings
            assert any(n.startswith("balanced: no share") for n in hits.notes) is not strays, settings
        finally:
            r.close()


def test_a_wrong_margin_fails_when_the_retriever_is_made(demo):
    from xlrag.errors import PolicyError

    stores, embedder = demo
    with pytest.raises(PolicyError, match=r"share margin is a cosine difference from 0 to 2, not -0\.5"):
        CrossLingualRetriever(stores, embedder, "qlang_en", share_margin=-0.5)
