"""The answer benchmark's XQuAD figure on more questions: is 10 a language enough?

The answer benchmark (``benchmarks/answers.py``) asks 10 XQuAD questions per language, and its
Arabic ten were judged right 2 or 3 times in every arm, while the other five languages reached
0.86 together. This script asks questions *outside* those 100, ``--per-lang`` per language
(seeded), with the chain of the benchmark's ``chain/now/shares`` arm (``balanced``, the share
margin, k = 3, the shipped prompts and explanation opener) on the default local model, judged by
the calibrated default panel. ``--arms`` adds other IR modes or k (``mode:k``) to compare on the
same questions, and ``agent/mode:k`` the default agent over them (it checks the chain's answer
and repairs it: an Arabic question answered in English is translated). Every model call goes
through one SQLite cache, so a stopped run resumes, and the agent's first answer, the chain's
very prompt, is read from it.

Figures per arm and language: judged correct with its 95% bootstrap CI, beside the same arm's
counts on the answer benchmark's questions (``chain/now/shares`` and ``agent/now/shares`` in
the committed answers.json).

    python benchmarks/xquad_heldout.py [--per-lang 20] [--langs ar,de,...] [--arms balanced:3,qlang:3]
                                       [--out xquad_heldout.json]

Writes benchmarks/results/xquad_heldout.json (or ``--out``). Its questions are the first
``--per-lang`` of a seeded order, so a smaller run asks the first questions of a larger one.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import answer_arms
from _common import CACHE, RESULTS, bootstrap_ci, read_jsonl, write_json

RUN = CACHE / "xquad_heldout"
# the answer benchmark's arms this script's default arms repeat
BENCHMARK_ARMS = {"balanced:3": "chain/now/shares", "agent/balanced:3": "agent/now/shares"}
MARGIN = answer_arms.ARMS["chain/now/shares"].margin


def held_out(langs: list[str], per_lang: int) -> list[dict]:
    """``per_lang`` XQuAD questions per language outside the answer benchmark's, seeded, one
    language after another in turn (a stopped run is a sample of every language)."""
    taken = {q["id"] for q in answer_arms.questions()}
    by_lang = {lang: [] for lang in langs}
    for q in read_jsonl(answer_arms.XQUAD_QUERIES):
        if q["lang"] in by_lang and q["id"] not in taken:
            by_lang[q["lang"]].append(q)
    for lang, qs in by_lang.items():
        random.Random(f"heldout:{lang}").shuffle(qs)
        by_lang[lang] = qs[:per_lang]
    return [q for rnd in zip(*by_lang.values(), strict=False) for q in rnd]


def _ci(vals: list[float]) -> dict:
    mean, lo, hi = bootstrap_ci(vals)
    return {"mean": round(mean, 3), "ci95": [round(lo, 3), round(hi, 3)], "n": len(vals)}


def summary(rows: list[dict]) -> dict:
    out: dict = {}
    for arm in dict.fromkeys(r["arm"] for r in rows):
        rs = [r for r in rows if r["arm"] == arm]
        out[arm] = {"all": _ci([float(r["correct"]) for r in rs])}
        for lang in sorted({r["lang"] for r in rs}):
            out[arm][lang] = _ci([float(r["correct"]) for r in rs if r["lang"] == lang])
    return out


def on_the_benchmark() -> dict:
    """The same arms' judged-correct counts per language on the answer benchmark's own 10 a language."""
    committed = json.loads((RESULTS / "answers.json").read_text(encoding="utf-8"))
    return {arm: {"arm": bench, **committed["summary"][bench]["all"]["per_lang_judged"]}
            for arm, bench in BENCHMARK_ARMS.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--per-lang", type=int, default=20)
    ap.add_argument("--langs", default=",".join(answer_arms.XQUAD_LANGS))
    ap.add_argument("--arms", default="balanced:3,agent/balanced:3",
                    help="comma-separated mode:k (the chain) or agent/mode:k")
    ap.add_argument("--out", default="xquad_heldout.json", help="file name under benchmarks/results/")
    args = ap.parse_args()
    from xlrag.agents.build import build_agent
    from xlrag.chains.llms import build_llm
    from xlrag.chains.pipeline import Pipeline
    from xlrag.chains.rag import GroundedChain
    from xlrag.config import LLMConfig, XlragConfig
    from xlrag.demo import demo_embedder
    from xlrag.evals.cache import SQLiteLLMCache
    from xlrag.evals.scoring import score_answer
    from xlrag.indexes.retriever import CrossLingualRetriever
    from xlrag.indexes.store import LanguageStores
    from xlrag.judges.panel import JudgePanel, default_panel

    arms = [a.strip() for a in args.arms.split(",") if a.strip()]
    index = CACHE / "agent-index"  # the answer benchmark's index (answers.py builds it)
    embedder = demo_embedder()
    stores = LanguageStores.open(index, embedder.name, embedder.dim)
    RUN.mkdir(parents=True, exist_ok=True)
    llm_cfg = LLMConfig(model=answer_arms.MODEL, max_tokens=160)
    llm = build_llm(llm_cfg)
    llm.cache = SQLiteLLMCache(RUN / "calls.sqlite")
    panel = JudgePanel(default_panel())
    chains, agents, retrievers = {}, set(), []
    for arm in arms:
        driver, _, spec = arm.rpartition("/")
        mode, k = spec.split(":")
        retriever = CrossLingualRetriever(stores, embedder, mode, k=int(k), share_margin=MARGIN)
        retrievers.append(retriever)
        cfg = XlragConfig(index_dir=index, llm=llm_cfg, retrieval={"k": int(k), "share_margin": MARGIN},
                          context={"layout": "documents_first"}, answer={"explanation_opener": True},
                          agent={"mode": mode})
        if driver == "agent":
            pipeline = Pipeline.from_config(cfg, llm=llm, retriever=retriever, mode="auto")
            chains[arm] = build_agent(cfg, pipeline=pipeline)
            agents.add(arm)
        else:
            pipeline = Pipeline.from_config(cfg, llm=llm, retriever=retriever, mode=mode)
            chains[arm] = GroundedChain(pipeline=pipeline, name="xlrag_citation")
    qs = held_out(args.langs.split(","), args.per_lang)
    rows = []
    for i, q in enumerate(qs, 1):
        for arm in arms:
            answer = chains[arm].invoke({"question": q["question"], "lang": q["lang"]})
            if arm in agents:
                answer = answer["answer"]  # the agent returns its trace beside the answer
            judged = asyncio.run(score_answer(answer, q["question"], q["answers"], q["lang"], panel)).judges
            rows.append({"arm": arm, "id": q["id"], "lang": q["lang"], "question": q["question"],
                         "gold": q["answers"], "answer": answer.answer, "explanation": answer.explanation,
                         "shown_langs": [h.lang for h in answer.passages], "correct": judged.final == "correct"})
        print(f"\r{i}/{len(qs)}", end="", flush=True)
    print()
    for r in retrievers:
        r.close()
    result = {"benchmark": "xquad_heldout", "model": answer_arms.MODEL, "per_lang": args.per_lang,
              "judge": "the calibrated default panel (benchmarks/results/judges.json)",
              "on_the_benchmark": on_the_benchmark(),
              "summary": summary(rows), "rows": rows}
    print(json.dumps(result["summary"], indent=1))
    print(f"written {write_json(args.out, result)}")


if __name__ == "__main__":
    main()
