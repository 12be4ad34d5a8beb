"""``xlrag serve --workers 2`` (#53): two processes answer on one address, each with the key and
host checks, each with its own generation queue (a full one answers 503 with ``Retry-After``,
and the server answers normally once the burst has passed), and SIGTERM stops them all, exit 0.
One server walks all of it.

Real processes: the CLI in a subprocess over the session's XQuAD index, its model the OpenAI
stand-in (tests/server/openai_standin.py) reached through the real OpenAI SDK.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from tests.server.conftest import AUTH, KEY, QUESTION, free_port, serving
from tests.server.openai_standin import StandIn, openai_standin, standin_config, standin_env


def _ppid(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("PPid:"):
            return int(line.split()[1])
    raise AssertionError(f"no PPid for {pid}")


@contextmanager
def workers(index: Path, standin: StandIn, tmp_path: Path, *options: str) -> Iterator[tuple[subprocess.Popen, str]]:
    """``xlrag serve --workers 2`` with the key; yields once both workers have answered."""
    port = free_port()
    cfg = standin_config(tmp_path / "xlrag.yaml", index, standin)
    env = {**standin_env(dict(os.environ)), "XLRAG_API_KEY": KEY}
    xlrag = Path(sys.executable).with_name("xlrag")
    proc = subprocess.Popen([str(xlrag), "serve", "--config", str(cfg), "--workers", "2", "--port", str(port),
                             *options], cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)
    with serving(proc, f"http://127.0.0.1:{port}") as running:
        yield running


def _pids(url: str, want: int = 2, seconds: float = 120) -> set[int]:
    """The worker pids /v1/health names, asked on new connections until ``want`` have answered
    (the kernel hands each connection to whichever worker accepts it first)."""
    seen: set[int] = set()
    deadline = time.monotonic() + seconds
    with ThreadPoolExecutor(4) as pool:
        while len(seen) < want and time.monotonic() < deadline:
            replies = list(pool.map(lambda _: httpx.get(f"{url}/v1/health", timeout=30), range(8)))
            assert all(r.status_code == 200 for r in replies), [(r.status_code, r.text) for r in replies
                                                                if r.status_code != 200]
            seen |= {r.json()["worker"] for r in replies}
    return seen


def _on_each_worker(url: str, checks: dict, pids: set[int], seconds: float = 180) -> dict[tuple[int, str], int]:
    """Each check's status code as each worker answered it. A check is sent on a new connection
    right after /v1/health named the worker holding it (a refused request whose body was never
    read ends its connection, so nothing after it is known to stay on that worker)."""
    seen: dict[tuple[int, str], int] = {}
    deadline = time.monotonic() + seconds
    while len(seen) < len(pids) * len(checks) and time.monotonic() < deadline:
        for name, send in checks.items():
            with httpx.Client(base_url=url, timeout=120, limits=httpx.Limits(max_connections=1)) as client:
                pid = client.get("/v1/health").json()["worker"]
                if (pid, name) not in seen:
                    seen[(pid, name)] = send(client)
    return seen


def _key_and_host_checks(url: str, pids: set[int]) -> None:
    """Each worker refuses a missing or wrong key and another Host, and retrieves and answers."""
    body = {"question": QUESTION, "k": 1}

    def retrieved(client: httpx.Client) -> int:
        ok = client.post("/v1/retrieve", json=body, headers=AUTH)
        assert [h["doc_id"] for h in ok.json()["hits"]] == ["xquad-00-es"], ok.text
        return ok.status_code

    def asked(client: httpx.Client) -> int:
        answer = client.post("/v1/ask", json={"question": QUESTION}, headers=AUTH)
        assert answer.json()["answer"]["answer"].startswith("La defensa de los Panthers"), answer.text
        return answer.status_code

    checks = {
        "no key": lambda c: c.post("/v1/retrieve", json=body).status_code,
        "wrong key": lambda c: c.post("/v1/retrieve", json=body,
                                      headers={"X-API-Key": "wrong-key-0123456789abcdef"}).status_code,
        "other host": lambda c: c.post("/v1/retrieve", json=body,
                                       headers={**AUTH, "Host": "attacker.example"}).status_code,
        "retrieve": retrieved, "ask": asked}
    seen = _on_each_worker(url, checks, pids)
    expected = {"no key": 401, "wrong key": 401, "other host": 400, "retrieve": 200, "ask": 200}
    assert seen == {(pid, name): code for pid in pids for name, code in expected.items()}


def _a_burst_past_the_queues(url: str, standin: StandIn, gate: threading.Event) -> None:
    """Each worker runs 1 generation and queues 1: of 12 asks at once, at most 4 are taken (2 per
    worker) while the model is held, the rest are refused at once; released, the taken ones
    are answered, and so is the next ask."""
    sent = 12
    gate.clear()
    before = standin.calls
    refused: list[httpx.Response] = []
    done = threading.Condition()

    def ask(_: int) -> httpx.Response:
        r = httpx.post(f"{url}/v1/ask", json={"question": QUESTION}, headers=AUTH, timeout=180)
        if r.status_code == 503:
            with done:
                refused.append(r)
                done.notify_all()
        return r

    with ThreadPoolExecutor(sent) as pool:
        futures = [pool.submit(ask, i) for i in range(sent)]
        with done:  # everything past the 4 places is refused while the gate is shut
            assert done.wait_for(lambda: len(refused) >= sent - 4, timeout=120), len(refused)
        assert standin.calls - before <= 2  # one generation per worker at most, held at the gate
        gate.set()
        responses = [f.result() for f in futures]
    statuses = sorted(r.status_code for r in responses)
    assert set(statuses) <= {200, 503}, statuses
    answered = [r for r in responses if r.status_code == 200]
    assert 2 <= len(answered) <= 4, statuses  # each worker took its 1 + 1
    for r in responses:
        if r.status_code == 503:
            assert r.json()["error"]["type"] == "overloaded"
            assert int(r.headers["Retry-After"]) >= 1
    assert all(r.json()["answer"]["answer"].startswith("La defensa de los Panthers") for r in answered)
    for _ in range(3):  # the burst is over: answered normally, on whichever worker
        after = httpx.post(f"{url}/v1/ask", json={"question": QUESTION}, headers=AUTH, timeout=120)
        assert after.status_code == 200, after.text


@pytest.mark.slow
def test_two_workers_check_key_and_host_queue_each_and_stop_on_sigterm(xquad_index, tmp_path):
    """One server for all of it: two workers starting take most of the test's time."""
    gate = threading.Event()
    gate.set()
    with openai_standin(gate=gate) as standin, workers(xquad_index, standin, tmp_path, "--allowed-hosts", "127.0.0.1",
                                                       "--max-concurrent", "1", "--max-queue", "1") as (proc, url):
        pids = _pids(url)
        assert len(pids) == 2, pids
        assert {_ppid(pid) for pid in pids} == {proc.pid}  # the server's own worker processes
        _key_and_host_checks(url, pids)
        _a_burst_past_the_queues(url, standin, gate)
        proc.send_signal(signal.SIGTERM)
        output = proc.communicate(timeout=90)[0]
    assert proc.returncode == 0, output
    assert "--workers 2: each worker keeps its own chat sessions" in output
    assert output.count("xlrag server ready") == 2 and output.count("xlrag server stopped") == 2, output
    assert "all workers stopped" in output and "Traceback" not in output


def test_a_worker_that_cannot_start_is_a_one_line_error(tmp_path):
    env = {**standin_env(dict(os.environ)), "XLRAG_API_KEY": KEY}
    xlrag = Path(sys.executable).with_name("xlrag")
    done = subprocess.run([str(xlrag), "serve", "--index-dir", str(tmp_path / "nothing"), "--workers", "2",
                           "--port", str(free_port())], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=180)
    assert done.returncode == 2, done.stderr
    # the first worker's own one-line error is the command's, as a one-process serve prints it
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "is not an xlrag index" in errors[0], done.stderr
    assert "Traceback" not in done.stderr
