"""`xlrag serve` as a careless user and an unlucky operator meet it (issue #32): an index moved
away before the first request, SIGTERM a moment into a local model's answer, a bad perspectives
request behind a busy generation slot. Real server processes, a real llama.cpp model
(gemma-3-270m, the catalogue's smallest), real files and signals."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from tests.server.conftest import QUESTION, free_port, iter_sse_events, wait_until_up
from tests.server.test_graceful_shutdown import server, slow_openai

XLRAG = str(Path(sys.executable).with_name("xlrag"))
SMALLEST = "gemma-3-270m"  # xlrag.chains.local.catalogue: a few seconds an answer


@contextmanager
def serving(index: Path, cwd: Path, *options: str, ready: str = "/v1/health") -> Iterator[tuple[subprocess.Popen, str]]:
    """``xlrag serve`` over ``index`` with the smallest local model, up once ``ready`` answers 200."""
    port = free_port()
    # cwd: no xlrag.yaml of the repository's is read; PYTHONPATH passes on: the xlrag under test
    env = {k: v for k, v in os.environ.items() if not k.startswith("XLRAG_")}
    env.update({"XLRAG_LLM__MODEL": SMALLEST, "ANONYMIZED_TELEMETRY": "False"})
    proc = subprocess.Popen([XLRAG, "serve", "--index-dir", str(index), "--no-auth", "--port", str(port), *options],
                            cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until_up(proc, url, path=ready)
        yield proc, url
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


def _unavailable(response: httpx.Response, tmp_path: Path) -> None:
    assert response.status_code == 503, response.text
    error = response.json()["error"]
    assert error["type"] == "index_unavailable", error
    assert "moved or removed" in error["message"] and "IndexNotFoundError" in error["message"], error
    assert str(tmp_path) not in response.text  # the reason, never the server's paths


def test_an_index_moved_away_before_the_first_request_is_never_served(xquad_index, tmp_path):
    index = tmp_path / "index"
    shutil.copytree(xquad_index, index)
    # up without a request that opens the index: the first request comes after the move
    with serving(index, tmp_path, ready="/openapi.json") as (_proc, url):
        away = tmp_path / "moved"
        index.rename(away)
        _unavailable(httpx.get(f"{url}/v1/health", timeout=60), tmp_path)  # a load balancer routes elsewhere
        _unavailable(httpx.post(f"{url}/v1/retrieve", json={"question": QUESTION}, timeout=60), tmp_path)
        _unavailable(httpx.post(f"{url}/v1/ask", json={"question": QUESTION}, timeout=120), tmp_path)
        # no database where the index was: a rebuild there is not refused
        assert not index.exists(), sorted(p.name for p in index.rglob("*"))
        away.rename(index)  # put back: served again, by the same process
        health = httpx.get(f"{url}/v1/health", timeout=60)
        assert health.status_code == 200, health.text
        assert health.json()["index"]["languages"] == ["ar", "de", "en", "es", "ru", "zh"]
        assert httpx.post(f"{url}/v1/retrieve", json={"question": QUESTION, "k": 1}, timeout=60).json()["hits"]


ROUNDS = 10


@pytest.mark.slow
def test_sigterm_at_the_first_token_of_a_local_model_exits_0_every_time(xquad_index, tmp_path):
    """A 1-second grace cuts the answer while llama.cpp is still generating it in a worker
    thread; the model must not be freed under that thread (it was: signal 11, exit 139)."""
    rounds = []
    for _ in range(ROUNDS):
        with serving(xquad_index, tmp_path, "--grace-seconds", "1") as (proc, url):
            events: list[tuple[str, dict]] = []
            # closed-book: no retrieval before the model, so each round is the model's answer alone
            body = {"question": "Who won Super Bowl 50?", "lang": "en", "mode": "no_ir", "stream": True}
            with httpx.Client(timeout=120) as client, client.stream("POST", f"{url}/v1/ask", json=body) as response:
                assert response.status_code == 200
                for event in iter_sse_events(response):
                    events.append(event)
                    if [n for n, _ in events].count("token") == 1 and event[0] == "token":
                        proc.send_signal(signal.SIGTERM)
            output = proc.communicate(timeout=120)[0]
        last, data = events[-1]
        ended = data["error"]["type"] if last == "error" else last
        rounds.append((proc.returncode, ended, "token" in [n for n, _ in events], output))
    summary = f"exit codes {[code for code, *_ in rounds]}, streams ended {[ended for _, ended, *_ in rounds]}"
    crashed = [o for code, *_, o in rounds if code != 0]
    assert not crashed, f"{summary}; the first failed round's output:\n{crashed[0][-3000:]}"
    assert all(ended in ("shutting_down", "done") for _, ended, _, _ in rounds), summary
    assert all(tokens for _, _, tokens, _ in rounds), summary  # each signal came mid-answer
    assert not [o for *_, o in rounds if "Traceback" in o or "Fatal Python error" in o]


def test_a_bad_perspectives_request_is_refused_at_once_behind_a_busy_slot(xquad_index, tmp_path):
    streaming = threading.Event()

    def hold_the_slot(url: str) -> None:
        """A long streamed answer (400 words, one every 0.2 s): the only generation slot is taken."""
        try:
            with httpx.Client(timeout=120) as client, client.stream(
                    "POST", f"{url}/v1/ask", json={"question": QUESTION, "stream": True}) as response:
                for name, _ in iter_sse_events(response):
                    if name == "token":
                        streaming.set()
        except httpx.TransportError:
            pass  # the server was stopped under it: the test is over

    with slow_openai(words=400) as llm_url, server(xquad_index, llm_url, grace=1, cwd=tmp_path) as (_proc, url):
        holder = threading.Thread(target=hold_the_slot, args=(url,), daemon=True)
        holder.start()
        assert streaming.wait(60), "the long answer did not start"
        assert httpx.get(f"{url}/v1/health", timeout=10).json()["generation"]["active"] == 1
        for body, kind, words in [
            ({"question": QUESTION, "relevant_langs": ["en", "xx"]}, "unknown_language", "unknown language code 'xx'"),
            ({"question": QUESTION, "relevant_langs": ["en", "fi"]}, "language_not_indexed", "no 'fi' store"),
            ({"question": QUESTION, "relevant_langs": ["en", "ru", "es", "de"], "max_langs": 3}, "invalid_argument",
             "max_langs=3"),
        ]:
            t0 = time.monotonic()
            r = httpx.post(f"{url}/v1/perspectives", json=body, timeout=20)  # the queue would hold it 80 s
            seconds = time.monotonic() - t0
            assert r.status_code == 422, r.text
            error = r.json()["error"]
            assert error["type"] == kind and words in error["message"], error
            assert seconds < 10, seconds
        health = httpx.get(f"{url}/v1/health", timeout=10).json()["generation"]
        assert health == {**health, "active": 1, "queued": 0}  # none of them ever queued
