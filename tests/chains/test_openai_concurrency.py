"""The experiment runner's bounded concurrency, against a real OpenAI-compatible server.

A real ``llama_cpp.server`` (the ``llama_server`` fixture) answers through the real OpenAI
SDK; between them, a counting proxy on 127.0.0.1 sees how many requests are in flight at
once. API models run ``concurrency`` records at a time: never more, and in parallel.
"""

from __future__ import annotations

import threading
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import yaml

from tests.conftest import index_copy
from xlrag.evals.experiment import load_experiment
from xlrag.evals.run_folder import RECORDS, read_records
from xlrag.evals.runner import ExperimentRunner


class CountingProxy:
    def __init__(self, upstream: str):
        self.upstream, self.inflight, self.peak, self.requests = upstream.rstrip("/"), 0, 0, 0
        lock = threading.Lock()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):  # keep the test output clean
                pass

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                with lock:
                    proxy.inflight += 1
                    proxy.requests += 1
                    proxy.peak = max(proxy.peak, proxy.inflight)
                try:
                    req = urllib.request.Request(proxy.upstream + self.path.removeprefix("/v1"), data=body,
                                                 headers={"Content-Type": "application/json"}, method="POST")
                    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
                    with opener.open(req, timeout=300) as resp:
                        data, status = resp.read(), resp.status
                finally:
                    with lock:
                        proxy.inflight -= 1
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()


@pytest.mark.slow
def test_api_models_run_at_most_concurrency_records_at_once(llama_server, travel_run_index, tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-local-test")
    proxy = CountingProxy(llama_server)
    try:
        exp = {"name": "openai-concurrency", "modes": ["qlang"], "retrieval": {"retrieve_k": 3, "k": 2},
               "concurrency": 2,
               "datasets": [{"name": "travel", "sample": {"per_lang": 3},
                             "index_dir": index_copy(travel_run_index, tmp_path)}],
               "llms": [{"provider": "openai", "model": "gemma-3-270m", "base_url": proxy.base, "max_tokens": 24}]}
        path = tmp_path / "exp.yaml"
        path.write_text(yaml.safe_dump(exp), encoding="utf-8")
        runner = ExperimentRunner(load_experiment(path), tmp_path / "run")
        summary = runner.run()
        runner.close()
    finally:
        proxy.close()
    assert summary["written"] == 6 and summary["failed"] == 0, summary
    assert proxy.requests == 6
    assert proxy.peak == 2  # bounded by the semaphore, and the bound was used
    recs = read_records(tmp_path / "run" / RECORDS)
    assert len({r["key"] for r in recs}) == 6 and all(r.get("raw_output") is not None for r in recs)
