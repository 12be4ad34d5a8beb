"""One lexical index that every client of a Chroma server shares (#53): a real `chroma run`
server, one shared ``store.lexical_dir``, the writer and two clients as separate Chroma clients.

The writer builds each store's BM25 folder once per write; the clients open the folders the
server's manifest names, memory-mapped, and never read the server's passages to build their
own (a tripwire on :meth:`LanguageStores.scan`, the only way a client could read them all).
The vendored XQuAD documents come with their vectors (the demo's pack): only the documents a
test adds are embedded."""

from __future__ import annotations

import time

import numpy as np
import pytest

import xlrag.indexes.lexical as lexical_module
from tests.chroma_server import chroma_server
from tests.conftest import DATA, N_PARALLEL, XQUAD_LANGS, read_jsonl
from xlrag.config import StoreConfig
from xlrag.demo import DEMO_SPLITTER, demo_embedder
from xlrag.detect import LinguaDetector
from xlrag.errors import IndexDirError
from xlrag.indexes.indexer import index_documents
from xlrag.indexes.integrity import check_index, repair_index
from xlrag.indexes.lexical import LexicalIndex
from xlrag.indexes.lexical_files import IdList
from xlrag.indexes.retriever import CrossLingualRetriever
from xlrag.indexes.store import SERVED_MANIFEST_AGE, LanguageStores
from xlrag.schema import Document, make_query

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    yield from chroma_server(tmp_path_factory.mktemp("chroma-server"))


@pytest.fixture(scope="module")
def embedder():
    return demo_embedder()


@pytest.fixture(scope="module")
def docs():
    keep = {f"xquad-{i:02d}" for i in range(N_PARALLEL)}
    return [Document(**r) for r in read_jsonl(DATA / "xquad" / "corpus.jsonl") if r["metadata"]["parallel_id"] in keep]


class Reads:
    """What the clients read: the lexical folders they open (the real reader, watched), and a
    tripwire on reading every passage of a store, which a client building its own index must do."""

    def __init__(self, monkeypatch):
        self.opened: list[tuple[str, str]] = []
        self.armed = True
        real_read, real_scan = lexical_module.read_folder, LanguageStores.scan

        def read_folder(base, ref, *, mmap, verify):
            self.opened.append((str(base), ref.folder))
            return real_read(base, ref, mmap=mmap, verify=verify)

        def scan(stores, lang, texts=False):
            if self.armed:
                raise AssertionError(f"a client read every passage of store {lang!r}")
            return real_scan(stores, lang, texts)

        monkeypatch.setattr(lexical_module, "read_folder", read_folder)
        monkeypatch.setattr(LanguageStores, "scan", scan)

    def writing(self):
        reads = self

        class _Off:
            def __enter__(self):
                reads.armed = False

            def __exit__(self, *exc):
                reads.armed = True

        return _Off()


def _store(port, name, shared):
    return StoreConfig(kind="http", host="127.0.0.1", port=port, name=name, lexical_dir=shared)


def _client(path, store, embedder, channels=("dense", "lexical")):
    return CrossLingualRetriever(LanguageStores.open(path, embedder.name, embedder.dim, store=store), embedder,
                                 "qlang", k=4, channels=list(channels), detector=LinguaDetector(XQUAD_LANGS))


def _named(path, store):
    return {lang: ref.folder for lang, ref in LanguageStores.open(path, store=store).manifest.lexical.items()}


QUESTIONS = {"en": "How many points did the Panthers defense surrender?", "de": "Wie viele Punkte hat die Verteidigung "
             "der Panthers zugelassen?", "zh": "特斯拉是哪一年去世的？",
             "ar": "كم عدد النقاط التي سمح بها دفاع بانثرز؟",
             "es": "¿Cuántos puntos permitió la defensa de los Panthers?",
             "ru": "Сколько очков пропустила защита Пантер?"}


def test_the_writer_builds_once_and_both_clients_open_it(server, tmp_path, docs, embedder, monkeypatch):
    shared = tmp_path / "shared"
    shared.mkdir()
    store = _store(server, "once", shared)
    reads = Reads(monkeypatch)
    with reads.writing():
        index_documents(docs, tmp_path / "writer", embedder, DEMO_SPLITTER, store=store)
    named = _named(tmp_path / "writer", store)
    base = shared / "once"
    reads.opened.clear()  # the writer's own check read them
    assert sorted(named) == sorted(XQUAD_LANGS)
    assert sorted(p.name for p in base.iterdir()) == sorted(named.values())  # one folder per store, nothing else

    clients = [_client(tmp_path / name, store, embedder) for name in ("a", "b")]
    for client in clients:
        for lang, question in QUESTIONS.items():
            res = client.retrieve(make_query(question, lang=lang))
            assert res.complete and any("lexical" in h.channels for h in res.hits), (lang, res.notes)
        index, why = client.lexical.index("en")
        assert why is None and isinstance(index.ids, IdList) and isinstance(index.bm25.scores["data"], np.memmap)
    # each client opened each store's folder once, the one the manifest names, from the shared folder
    assert sorted(reads.opened) == sorted((str(base), f) for f in named.values() for _ in clients)

    # a write by the first client: the second sees the new manifest's index at its next search
    extra = Document(id="quokka", lang="en", text="The quokkaberg festival of Rottnest draws quokkas every March.")
    with reads.writing():
        index_documents([extra], tmp_path / "a", embedder, DEMO_SPLITTER, store=store, source="extra")
    after = _named(tmp_path / "writer", store)
    assert {lang for lang in after if after[lang] != named[lang]} == {"en"}
    # the replaced folder stays for a client that read the old manifest a moment before; nothing else
    assert sorted(p.name for p in base.iterdir()) == sorted({*after.values(), named["en"]})
    time.sleep(SERVED_MANIFEST_AGE)
    reads.opened.clear()  # the writer's again
    words = _client(tmp_path / "b2", store, embedder, channels=["lexical"])  # not yet open: opens the new one
    for client in (clients[1], words):
        res = client.retrieve(make_query("quokkaberg festival", lang="en"), mode="qlang", channels=["lexical"])
        assert res.complete and res.hits[0].doc_id == "quokka" and res.hits[0].channels == ["lexical"], res.notes
    assert reads.opened == [(str(base), after["en"])] * 2
    for client in (*clients, words):
        client.close()


def test_a_folder_the_manifest_does_not_name_is_never_read(server, tmp_path, docs, embedder, monkeypatch):
    shared = tmp_path / "shared"
    shared.mkdir()
    store = _store(server, "named", shared)
    en = [d for d in docs if d.lang == "en"]
    index_documents(en, tmp_path / "writer", embedder, DEMO_SPLITTER, store=store)
    named = _named(tmp_path / "writer", store)
    base = shared / "named"
    # what a writer killed after building its folders and before its manifest leaves: whole,
    # readable folders of the same store that no manifest names
    LexicalIndex.build("en", [("decoy#0:0", "How many points did the Panthers defense surrender? decoy")]).save(base)
    (base / "en-0123456789abcdef-000000").mkdir()
    assert len(list(base.iterdir())) == 3
    reads = Reads(monkeypatch)
    client = _client(tmp_path / "client", store, embedder)
    res = client.retrieve(make_query(QUESTIONS["en"], lang="en"))
    client.close()
    assert res.complete and all(not h.passage.id.startswith("decoy") for h in res.hits)
    assert reads.opened == [(str(base), named["en"])]


def test_a_stale_folder_is_reported_found_and_rebuilt(server, tmp_path, docs, embedder, monkeypatch):
    shared = tmp_path / "shared"
    shared.mkdir()
    store = _store(server, "stale", shared)
    two = [d for d in docs if d.lang in ("en", "de")]
    index_documents(two, tmp_path / "writer", embedder, DEMO_SPLITTER, store=store)
    named = _named(tmp_path / "writer", store)
    (shared / "stale" / named["en"] / "data.csc.index.npy").write_bytes(b"")  # a cut-short copy
    reads = Reads(monkeypatch)
    client = _client(tmp_path / "client", store, embedder)
    res = client.retrieve(make_query(QUESTIONS["en"], lang="en"))
    assert not res.complete and res.hits and all(h.channels == ["dense"] for h in res.hits)
    assert any("'en'" in n and "unreadable" in n and "check --repair" in n for n in res.notes), res.notes
    with reads.writing():
        report = check_index(tmp_path / "writer", store=store, sample=0)
        assert [s.split(":")[0] for s in report.lexical_stale] == ["en"] and not report.ok
        fixed = repair_index(tmp_path / "writer", store=store, embedder=embedder, sample=0)
    assert fixed.ok and fixed.repaired == {"lexical indexes rebuilt": 1}
    assert _named(tmp_path / "writer", store) == named  # the same passages: the same name, rebuilt whole
    time.sleep(SERVED_MANIFEST_AGE)
    again = client.retrieve(make_query(QUESTIONS["en"], lang="en"))  # the open client follows the repair
    client.close()
    assert again.complete and any("lexical" in h.channels for h in again.hits), again.notes


def test_a_client_or_writer_without_the_shared_folder_says_so(server, tmp_path, docs, embedder):
    shared = tmp_path / "shared"
    shared.mkdir()
    store = _store(server, "unset", shared)
    en = [d for d in docs if d.lang == "en"][:2]
    index_documents(en, tmp_path / "writer", embedder, DEMO_SPLITTER, store=store)
    bare = store.model_copy(update={"lexical_dir": None})
    client = _client(tmp_path / "client", bare, embedder)
    res = client.retrieve(make_query(QUESTIONS["en"], lang="en"))
    client.close()
    assert not res.complete and all(h.channels == ["dense"] for h in res.hits)
    assert any("sets no store.lexical_dir" in n for n in res.notes), res.notes
    (tmp_path / "elsewhere").mkdir()  # a client whose share is mounted elsewhere, or not at all
    client = _client(tmp_path / "client2", store.model_copy(update={"lexical_dir": tmp_path / "elsewhere"}), embedder)
    res = client.retrieve(make_query(QUESTIONS["en"], lang="en"))
    client.close()
    assert not res.complete and any("missing from store.lexical_dir" in n for n in res.notes), res.notes
    assert not any(str(tmp_path) in n for n in res.notes)
    with pytest.raises(IndexDirError, match=r"sets no store.lexical_dir; set it to that folder"):
        index_documents(en, tmp_path / "writer", embedder, DEMO_SPLITTER, store=bare)
    with pytest.raises(IndexDirError, match=r"store.lexical_dir .* is not a folder; mount"):
        index_documents(en, tmp_path / "writer", embedder, DEMO_SPLITTER,
                        store=store.model_copy(update={"lexical_dir": tmp_path / "not-mounted"}))
