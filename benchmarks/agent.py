"""The agent against the plain citation chain, with the local model (issue #9).

60 XQuAD questions, 10 in each of ar, de, en, es, ru and zh, over the demo index (XQuAD
and Travel, embeddings shipped). For each question the chain and the agent run one after
the other on the same loaded model, in the same IR mode, so that load drift hits both
alike. Figures, each with a 95% bootstrap CI:

- response-language correctness (lingua on the reply, markers stripped; replies with no
  language, such as "308", are counted apart) — target for the agent: >= 0.98;
- valid model-made citation rate (post-hoc citations do not count);
- repairs per question (agent);
- latency ratio agent / chain (sum of agent seconds over sum of chain seconds).

    python benchmarks/agent.py [--per-lang 10] [--model qwen2.5-coder-1.5b-instruct] [--threads 1]

Writes benchmarks/results/agent.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import CACHE, bootstrap_ci, read_jsonl, write_json

from xlrag.config import AnswerConfig
from xlrag.evals.scoring import score_answer

LANGS = ("ar", "de", "en", "es", "ru", "zh")
TARGET = 0.98
MODE = "balanced"


def questions(per_lang: int) -> list[dict]:
    path = Path(__file__).resolve().parent.parent / "xlrag" / "data" / "xquad" / "queries.jsonl"
    by_lang: dict[str, list[dict]] = defaultdict(list)
    for q in read_jsonl(path):
        by_lang[q["lang"]].append(q)
    out = []
    for lang in LANGS:
        qs = list(by_lang[lang])
        random.Random(f"agent:{lang}").shuffle(qs)
        out += qs[:per_lang]
    return out


def row(kind: str, q: dict, answer, seconds: float, trace=None) -> dict:
    verdict = asyncio.run(score_answer(answer, q["question"], q["answers"], q["lang"])).language
    return {"kind": kind, "id": q["id"], "lang": q["lang"], "seconds": seconds, "answer": answer.answer,
            "explanation": answer.explanation, "flags": answer.flags, "language": verdict.status,
            "detected": verdict.detected, "lang_correct": verdict.correct,
            "model_cited": any(c.valid and c.source == "model" for c in answer.citations),
            "invalid_citation": any(not c.valid for c in answer.citations),
            "repairs": [r.repair.value for r in trace.repairs] if trace else [],
            "unrepaired": trace.unrepaired if trace else []}


def summary(rows: list[dict]) -> dict:
    def ci(vals: list[float]) -> dict:
        mean, lo, hi = bootstrap_ci(vals)
        return {"mean": mean, "ci95": [lo, hi], "n": len(vals)}

    out: dict = {}
    for kind in ("chain", "agent"):
        rs = [r for r in rows if r["kind"] == kind]
        out[kind] = {
            "lang_correct": ci([float(r["lang_correct"]) for r in rs if r["lang_correct"] is not None]),
            "lang_not_applicable": sum(r["lang_correct"] is None for r in rs),
            "model_citation_rate": ci([float(r["model_cited"]) for r in rs]),
            "invalid_citation_rate": ci([float(r["invalid_citation"]) for r in rs]),
            "seconds": ci([r["seconds"] for r in rs]),
            "per_lang_lang_correct": {lang: ci([float(r["lang_correct"]) for r in rs
                                               if r["lang"] == lang and r["lang_correct"] is not None])["mean"]
                                      for lang in LANGS},
        }
    agent = [r for r in rows if r["kind"] == "agent"]
    out["agent"]["repairs_per_question"] = ci([float(len(r["repairs"])) for r in agent])
    out["agent"]["repairs"] = dict(sorted(
        {k: sum(k in r["repairs"] for r in agent) for k in {x for r in agent for x in r["repairs"]}}.items()))
    out["agent"]["unrepaired"] = sum(bool(r["unrepaired"]) for r in agent)
    chain_s = sum(r["seconds"] for r in rows if r["kind"] == "chain")
    out["latency_ratio_agent_over_chain"] = sum(r["seconds"] for r in agent) / chain_s if chain_s else None
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--per-lang", type=int, default=10)
    ap.add_argument("--model", default="qwen2.5-coder-1.5b-instruct")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out", default="agent.json")
    args = ap.parse_args()

    from xlrag.agents.build import build_agent
    from xlrag.chains.llms import build_llm
    from xlrag.chains.pipeline import Pipeline
    from xlrag.chains.rag import GroundedChain
    from xlrag.config import XlragConfig
    from xlrag.demo import build_demo_index, demo_embedder
    from xlrag.indexes.retriever import CrossLingualRetriever
    from xlrag.indexes.store import LanguageStores

    index = CACHE / "agent-index"
    if not (index / "chroma").exists():
        build_demo_index(index)
    embedder = demo_embedder()
    retriever = CrossLingualRetriever(LanguageStores.open(index, embedder.name, embedder.dim), embedder, MODE, k=3)
    cfg = XlragConfig(index_dir=index, llm={"model": args.model, "max_tokens": 160, "n_threads": args.threads},
                      agent={"mode": MODE}, retrieval={"k": 3})
    llm = build_llm(cfg.llm)
    chain = GroundedChain(pipeline=Pipeline.create(retriever, llm,
                                                   answer=AnswerConfig(format="citation"), mode=MODE, k=3))
    agent = build_agent(cfg, llm=llm, retriever=retriever)
    qs = questions(args.per_lang)
    rows: list[dict] = []
    t_all = time.perf_counter()
    for i, q in enumerate(qs, 1):
        # alternate which runs first: the second of a pair finds the model's caches warm
        order = ("chain", "agent") if i % 2 else ("agent", "chain")
        for kind in order:
            t0 = time.perf_counter()
            if kind == "chain":
                ans = chain.invoke({"question": q["question"], "lang": q["lang"]})
                rows.append(row("chain", q, ans, time.perf_counter() - t0))
            else:
                out = agent.invoke({"question": q["question"], "lang": q["lang"]})
                rows.append(row("agent", q, out["answer"], time.perf_counter() - t0, out["trace"]))
        print(f"\r{i}/{len(qs)} {time.perf_counter() - t_all:.0f}s", end="", flush=True)
    print()
    result = {"benchmark": "agent", "mode": MODE, "k": 3, "model": args.model, "threads": args.threads,
              "questions": len(qs), "languages": list(LANGS), "target_agent_lang_correct": TARGET,
              "summary": summary(rows), "rows": rows}
    s = result["summary"]
    result["meets_target"] = s["agent"]["lang_correct"]["mean"] >= TARGET
    path = write_json(args.out, result)
    print(json.dumps({k: v for k, v in s.items() if k != "rows"}, indent=1, ensure_ascii=False)[:3000])
    print(f"written {path}")
    retriever.close()


if __name__ == "__main__":
    main()
