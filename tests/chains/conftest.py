"""Fixtures for the chat-model provider tests (tests/chains/test_llm_providers.py).

* ``llama_server``: a real ``python -m llama_cpp.server`` subprocess serving the bundled
  gemma-3-270m on 127.0.0.1, for the OpenAI adapter (real ChatOpenAI → real OpenAI SDK).
* ``vendor_replay``: a stdlib HTTP server on 127.0.0.1 that records every request and
  answers with a recorded response in a vendor's wire format.
* ``travel_passage``: a short real passage of the vendored Travel corpus.

None of these are autouse, so other tests in this folder are unaffected.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.replay import Replay, Route, serve

ROOT = Path(__file__).resolve().parents[2]
TRAVEL = ROOT / "xlrag" / "data" / "travel" / "corpus.jsonl"
PROXY_VARS = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy")

# llama.cpp spins its worker threads; on a shared 2-core box two threads slow generation
# down 5-10x as soon as anything else runs. One thread is slower only when idle.
TEST_THREADS = 1


# -- a real Travel passage -------------------------------------------------------------------


@dataclass(frozen=True)
class Passage:
    id: str
    title: str
    text: str


@pytest.fixture(scope="session")
def travel_passage() -> Passage:
    """The visa section of the Swiss page (travel-0): short enough for a quick prompt."""
    with TRAVEL.open(encoding="utf-8") as fh:
        row = next(json.loads(line) for line in fh if json.loads(line)["id"] == "travel-0")
    text = row["text"]
    start = text.index("* Tourism:")
    end = text.index("* For more information", start)
    return Passage(row["id"], row["title"], text[start:end].strip())


# -- the real llama.cpp OpenAI-compatible server ----------------------------------------------


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(url: str, timeout: float = 2.0) -> bytes:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # never via a proxy
    with opener.open(url, timeout=timeout) as resp:
        return resp.read()


@contextlib.contextmanager
def serve_llama(model: str, log_dir: Path, n_ctx: int = 2048, ready_within: float = 180) -> Iterator[str]:
    """Base URL (``http://127.0.0.1:PORT/v1``) of a real llama_cpp.server on the catalogue
    model ``model``, stopped on exit."""
    from xlrag.chains.llms import bundled_model_path

    port = _free_port()
    log = log_dir / "server.log"
    env = {k: v for k, v in os.environ.items() if k not in PROXY_VARS}
    env["NO_PROXY"] = env["no_proxy"] = "127.0.0.1,localhost"
    # the server loads its model through llama-cpp-python alone: the same weight buffers as xlrag's
    launch = ("import runpy; from xlrag.chains.local.loaded import use_plain_weight_buffers; "
              "use_plain_weight_buffers(); runpy.run_module('llama_cpp.server', run_name='__main__', alter_sys=True)")
    cmd = [sys.executable, "-c", launch, "--model", bundled_model_path(model),
           "--host", "127.0.0.1", "--port", str(port), "--n_ctx", str(n_ctx),
           "--n_threads", str(TEST_THREADS), "--seed", "0", "--verbose", "False"]
    with log.open("wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env)
    base = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + ready_within
        while True:
            if proc.poll() is not None:
                pytest.fail(f"llama_cpp.server exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
            try:
                models = json.loads(_get(f"{base}/models"))
                if models.get("data"):
                    break
            except OSError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"llama_cpp.server not ready after {ready_within:.0f} s:\n{log.read_text()[-3000:]}")
            time.sleep(0.2)
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


@pytest.fixture(scope="session")
def llama_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Base URL of a real llama_cpp.server on gemma-3-270m."""
    with serve_llama("gemma-3-270m", tmp_path_factory.mktemp("llama-server"), ready_within=120) as base:
        yield base


# -- recorded vendor responses, replayed over real HTTP ----------------------------------------


@pytest.fixture
def vendor_replay() -> Iterator[Callable[[dict[str, Route]], Replay]]:
    """Factory: ``vendor_replay({"/v1/messages": route})`` starts a replay server for the test."""
    with ExitStack() as stack:
        yield lambda routes: stack.enter_context(serve(routes))
