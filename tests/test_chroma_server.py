"""A real `chroma run` server on 127.0.0.1: two indexing processes and a querying process
through it, a second index sharing the server, and `xlrag check` clean at the end."""

import json
import os
import subprocess
import sys
import time

import pytest

from tests.chroma_server import chroma_server
from tests.conftest import DATA, ROOT
from xlrag.config import StoreConfig
from xlrag.errors import IndexDirError
from xlrag.indexes.store import LanguageStores

XLRAG = [sys.executable, "-c", "from xlrag.cli import main; main()"]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    yield from chroma_server(tmp_path_factory.mktemp("chroma-server"))


def _env(port, name):
    return {**os.environ, "XLRAG_STORE__KIND": "http", "XLRAG_STORE__HOST": "127.0.0.1",
            "XLRAG_STORE__PORT": str(port), "XLRAG_STORE__NAME": name}


def _run(port, name, *args):
    return subprocess.run([*XLRAG, *map(str, args)], capture_output=True, text=True, cwd=ROOT, env=_env(port, name))


@pytest.mark.slow
def test_two_writers_and_a_reader_through_a_server(server, tmp_path):
    lines = (DATA / "xquad" / "corpus.jsonl").read_text(encoding="utf-8").splitlines(keepends=True)
    corpora = []
    for n, (a, b) in enumerate(((0, 12), (12, 24))):
        corpora.append(tmp_path / f"c{n}.jsonl")
        corpora[-1].write_text("".join(lines[a:b]), encoding="utf-8")
    ix = tmp_path / "ix"  # local: only the writer lock lives here
    writers = [subprocess.Popen([*XLRAG, "index", "--corpus", c, "--index-dir", ix, "--chunk-size", "400"],
                                cwd=ROOT, env=_env(server, "shared"), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
               for c in corpora]
    # The querying process: retrieve until both writers are done, then once more.
    answers = []
    while any(w.poll() is None for w in writers):
        res = _run(server, "shared", "retrieve", "Wie viele Punkte?", "--lang", "de", "--index-dir", ix, "--json")
        answers.append(res)
        time.sleep(0.5)
    for w in writers:
        out, err = w.communicate()
        assert w.returncode == 0, err
        assert "into http://127.0.0.1:" in out and "quick check:" in out
    for res in answers:  # while building: hits, or "not an index yet", never a traceback
        assert res.returncode in (0, 2) and "Traceback" not in res.stderr, res.stderr
    final = _run(server, "shared", "retrieve", "Wie viele Punkte?", "--lang", "de", "--index-dir", ix, "--json")
    assert final.returncode == 0 and json.loads(final.stdout), final.stderr

    # A second index on the same server, namespaced apart.
    other = _run(server, "other", "index", "--corpus", corpora[0], "--index-dir", tmp_path / "other",
                 "--chunk-size", "400")
    assert other.returncode == 0, other.stderr
    info = json.loads(_run(server, "shared", "info", "--index-dir", ix, "--json").stdout)
    assert sum(info["passages"].values()) == 24 and info["status"] == "complete"
    info = json.loads(_run(server, "other", "info", "--index-dir", tmp_path / "other", "--json").stdout)
    assert sum(info["passages"].values()) == 12

    check = _run(server, "shared", "check", "--index-dir", ix, "--json")
    report = json.loads(check.stdout)
    assert check.returncode == 0 and report["ok"] and report["passages"] == 24, check.stdout
    assert report["sample_checked"] == 20 and report["missing_vectors"] == [] and report["duplicates"] == []

    # The manifest lives on the server: another embedder is refused there too.
    store = StoreConfig(kind="http", host="127.0.0.1", port=server, name="shared")
    with pytest.raises(IndexDirError, match="was built with embedder"):
        LanguageStores.open(tmp_path / "elsewhere", "local/other", 384, store=store)
