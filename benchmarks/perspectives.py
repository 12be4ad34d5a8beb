"""The perspectives view on BorderLines territories (issue #24), with the local model.

Does each language's answer name the claimant that language's sources favour; how often is
a contested question flagged, and how often a question every source agrees on is not; the
CS metrics of BordIRlines computed from the per-language answers; the cost of a
perspectives query against a plain ``ask`` on the same index and model; and, first, the
comparison itself on items of known truth (:func:`validate`).

The corpus. BordIRlines' Wikipedia passages are not available offline, so
``xlrag/data/borderlines/passages.jsonl`` (35 passages, 9 languages) was written for
xlrag from the vendored BorderLines excerpt (``xlrag/data/borderlines``): for six
of its territories, two passages in each claimant's language that state that claimant's
position (as its national sources do), one neutral English passage where English is no
claimant's language, and, for three territories, one passage per language on where the
territory lies, which every language states alike (the control questions). It is a
synthetic, deliberately partisan corpus: it measures whether the view *reports* what each
language's sources say, not what the world's sources say.

Questions are asked in English ("Who does Crimea belong to?"), so every answer is in
English and names claimants by their English names. An answer names a claimant when it
holds one of the claimant's English names or adjectives (``ALIASES``); it *favours* its
sources' claimant when it names that claimant and no other.

    python benchmarks/perspectives.py [--model qwen2.5-coder-1.5b-instruct] [--threads 2] [--only Crimea,Ceuta]

Writes benchmarks/results/perspectives.json.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import CACHE, bootstrap_ci, write_json

from xlrag.borderlines import PASSAGES as CORPUS

TERRITORIES = ("Crimea", "Ceuta", "Gibraltar", "South Kuril/Chishima Islands", "Golan Heights", "Imia/Kardak")
# how the question names the territory (its English name; the view finds it among the vendored territories)
ASKED = {"South Kuril/Chishima Islands": "the South Kuril Islands", "Imia/Kardak": "Imia"}
# control questions: every language's sources say the same thing
CONTROLS = {"Crimea": "Which sea is Crimea on?", "Ceuta": "On which coast is Ceuta located?",
            "Golan Heights": "What lake do the Golan Heights overlook?"}
ALIASES = {
    "Russia": ["russia", "russian"], "Ukraine": ["ukraine", "ukrainian"], "Morocco": ["morocco", "moroccan"],
    "Spain": ["spain", "spanish"], "United Kingdom": ["united kingdom", "uk", "britain", "british"],
    "Japan": ["japan", "japanese"], "Syria": ["syria", "syrian"], "Israel": ["israel", "israeli"],
    "Greece": ["greece", "greek"], "Turkey": ["turkey", "turkish", "türkiye"],
}


def named(answer: str, claimants: list[str]) -> list[str]:
    """The claimants ``answer`` names, by their English names or adjectives."""
    text = answer.casefold()
    return [c for c in claimants if any(re.search(rf"\b{re.escape(a)}\b", text) for a in ALIASES[c])]


def favoured_by(territory, lang: str) -> str | None:
    """The claimant whose language ``lang`` is (None: a neutral language for this territory)."""
    own = [c for c, code in territory.claimant_langs.items() if code and code.split("-")[0] == lang]
    return own[0] if len(own) == 1 else None


def ci(values: list[float]) -> dict:
    if not values:
        return {"mean": None, "ci95": None, "n": 0}
    mean, lo, hi = bootstrap_ci(values)
    return {"mean": mean, "ci95": [lo, hi], "n": len(values)}


def perspective_rows(territory, view_out) -> list[dict]:
    rows = []
    for p in view_out.perspectives:
        said = p.said or ""
        names = named(said, territory.claimants) if said else []
        fav = favoured_by(territory, p.lang)
        rows.append({"lang": p.lang, "status": p.status, "answer": said,
                     "citations": [c.passage_id for c in p.citations], "named": names, "favoured": fav,
                     "names_favoured_only": None if fav is None or not said else names == [fav],
                     "cs_answer": names[0] if len(names) == 1 else None})
    return rows


def validate(judge, per_kind: int) -> dict:
    """The comparison on items of known truth: the judge-calibration items (xlrag eval
    calibrate), each a gold answer and a response known to say the same thing or not, read
    as two answers to compare. Non-answers and echoes are left out: the view never compares
    them. The lexical step on every item; the LLM judge on up to ``per_kind`` of each kind
    the lexical step left unsure (seeded), as the view would ask it."""
    import random

    from xlrag.evals.calibration_items import build_items
    from xlrag.perspectives.compare import lexical_agreement

    items = [i for i in build_items() if i.kind not in ("echo", "non_answer")]
    lexical = defaultdict(lambda: {"agree": 0, "disagree": 0, "unsure": 0})
    unsure = defaultdict(list)
    for it in items:
        decided, _, _ = lexical_agreement(it.gold[0], it.answer, it.question, it.lang)
        lexical[f"{it.kind} ({'same' if it.truth else 'different'})"][decided] += 1
        if decided == "unsure":
            unsure[it.kind].append(it)
    right = sum(c["agree"] for k, c in lexical.items() if "(same)" in k) + \
        sum(c["disagree"] for k, c in lexical.items() if "(different)" in k)
    decided = sum(c["agree"] + c["disagree"] for c in lexical.values())
    judged, rows = defaultdict(lambda: {"right": 0, "wrong": 0, "unsure": 0}), []
    for kind, its in sorted(unsure.items()):
        for it in random.Random(f"perspectives:{kind}").sample(its, min(per_kind, len(its))):
            verdict, reason = judge.judge(it.question, it.gold[0], it.answer, it.lang)
            ok = None if verdict == "unsure" else (verdict == "agree") == it.truth
            judged[kind]["unsure" if ok is None else "right" if ok else "wrong"] += 1
            rows.append({"id": it.id, "kind": kind, "truth": it.truth, "verdict": verdict, "reason": reason})
    j_right = sum(c["right"] for c in judged.values())
    j_decided = j_right + sum(c["wrong"] for c in judged.values())
    return {"items": len(items), "lexical_by_kind": dict(lexical),
            "lexical_decided": decided, "lexical_accuracy_when_decided": right / decided if decided else None,
            "lexical_unsure": len(items) - decided,
            "judge_items": len(rows), "judge_by_kind": dict(judged),
            "judge_accuracy_when_decided": j_right / j_decided if j_decided else None,
            "judge_unparsed": sum(c["unsure"] for c in judged.values()), "judge_rows": rows}


def cold(llm) -> None:
    """Drop every prompt state the local model holds (its context, the prompt cache, the pinned
    prefixes), so the next call reads its whole prompt. The plain ask used to be timed right
    after the view, whose English perspective had just read the very same prompt: the ask then
    read 1 of its 310 prompt tokens, and its time was the view's ratio's denominator."""
    from llama_cpp import LlamaRAMCache

    llama, lock = llm.native()
    with lock:
        llama.n_tokens = 0
        if llama.cache is not None:
            llama.set_cache(LlamaRAMCache(capacity_bytes=llama.cache.capacity_bytes))
        pinned = getattr(llama, "pinned", None)
        if pinned is not None:
            pinned.states.clear()
            pinned.recent.clear()


def _row(t, kind: str, question: str, out, view_s: float) -> dict:
    steps = defaultdict(float)
    for p in out.perspectives:
        for timing_ in (p.trace.timings if p.trace else []):
            steps[timing_.step.split(":")[0]] += timing_.seconds
    per = perspective_rows(t, out)
    n = len([p for p in out.perspectives if p.status == "answered"])
    return {
        "territory": t.territory, "kind": kind, "question": question, "langs": out.choice.langs,
        "lang_source": out.choice.source, "status": out.status, "flagged": out.status == "disagreement",
        "perspectives": per,
        "pairs": [p.model_dump() for p in out.pairs],
        "agreement_rate": (sum(p.agreement == "agree" for p in out.pairs) / len(out.pairs)
                           if out.pairs else None),
        "costs": out.costs.model_dump(), "answered": n,
        "within_budget": out.costs.answers <= len(out.perspectives)
        and out.costs.lexical_comparisons <= n * (n - 1) // 2
        and out.costs.judge_calls <= out.costs.lexical_comparisons,
        "seconds": view_s, "view_steps_seconds": {k: round(v, 2) for k, v in steps.items()},
    }


def _summary(rows: list[dict]) -> dict:
    from xlrag.borderlines import load_territories
    from xlrag.evals.robustness import concurrence_scores

    contested = [r for r in rows if r["kind"] == "contested"]
    controls = [r for r in rows if r["kind"] == "control"]
    favoured = [float(p["names_favoured_only"]) for r in contested for p in r["perspectives"]
                if p["names_favoured_only"] is not None]
    territories = load_territories()
    claimants = {t.territory: {x.split("-")[0] for x in t.langs} for t in territories}
    cs_responses = [{"territory": r["territory"], "query_lang": p["lang"], "answer": p["cs_answer"]}
                    for r in contested for p in r["perspectives"] if p["status"] == "answered"
                    and (p["lang"] == "en" or p["lang"] in claimants[r["territory"]])]
    cs = concurrence_scores(cs_responses, territories)
    timing = [(r["seconds"], r["ask_seconds"], r["ask_seconds_after_view"]) for r in rows]
    return {
        "names_favoured_claimant": ci(favoured),
        "contested_flagged": ci([float(r["flagged"]) for r in contested]),
        "control_false_flags": ci([float(r["flagged"]) for r in controls]),
        "control_consensus": ci([float(r["status"] == "consensus") for r in controls]),
        "agreement_rate_by_territory": {r["territory"]: r["agreement_rate"] for r in contested},
        "cs_from_perspectives": {"mean": cs.mean, "n": cs.n, "unparseable": cs.unparseable},
        "within_budget": all(r["within_budget"] for r in rows),
        "judge_calls": sum(r["costs"]["judge_calls"] for r in rows),
        "comparisons": sum(r["costs"]["lexical_comparisons"] for r in rows),
        "seconds_per_query": ci([v for v, _, _ in timing]),
        "ask_seconds_per_query": ci([a for _, a, _ in timing]),
        "seconds_ratio_view_over_ask": sum(v for v, _, _ in timing) / sum(a for _, a, _ in timing),
        # the old denominator: the ask timed right after the view, its prompt already read
        "ask_seconds_after_view": ci([w for _, _, w in timing]),
        "seconds_ratio_view_over_ask_after_view": sum(v for v, _, _ in timing) / sum(w for _, _, w in timing),
        "view_steps_seconds": {k: round(sum(r["view_steps_seconds"].get(k, 0.0) for r in rows), 1)
                               for k in sorted({k for r in rows for k in r["view_steps_seconds"]})},
        "mean_perspectives": sum(r["answered"] for r in rows) / len(rows),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="qwen2.5-coder-1.5b-instruct")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--only", default=None, help="comma-separated territories")
    ap.add_argument("--out", default="perspectives.json")
    ap.add_argument("--judge-per-kind", type=int, default=1000,
                    help="calibration items per kind the LLM judge is validated on (0: none)")
    ap.add_argument("--view-layouts", default=None,
                    help="comma-separated context.layout values: a view per layout, each from a cold model, "
                         "beside the same plain ask (the config's layout) in one run; default: the config's only")
    ap.add_argument("--view-max-repairs", type=int, default=None,
                    help="also a view whose agent makes at most this many repairs per answer (agent.max_repairs), "
                         "from a cold model beside the rest in one run")
    ap.add_argument("--view-no-explanation", action="store_true",
                    help="also a view whose answers stop at the explanation header (answer.explanation: false), "
                         "from a cold model beside the rest in one run")
    ap.add_argument("--view-explanation", action="store_true",
                    help="also a view whose answers write their explanation (agent.perspectives.explanation: true, "
                         "the default before it), from a cold model beside the rest in one run")
    ap.add_argument("--view-unopened", action="store_true",
                    help="also a view whose explanations are not opened in the user's language "
                         "(answer.explanation_opener: false, the default before it), from a cold model beside the rest "
                         "in one run")
    args = ap.parse_args()

    import xlrag
    from xlrag.borderlines import load_territories

    index = CACHE / "perspectives-index"
    if not (index / "xlrag-index.json").exists():
        xlrag.build_index(CORPUS, index)
    cfg = xlrag.XlragConfig(index_dir=index, llm={"model": args.model, "max_tokens": 160, "n_threads": args.threads},
                            retrieval={"k": 3})
    from xlrag.chains.rag import GroundedChain

    view = xlrag.build_perspectives(cfg)
    views = {"default": view}
    for layout in (args.view_layouts.split(",") if args.view_layouts else []):
        other = cfg.model_copy(update={"context": cfg.context.model_copy(update={"layout": layout})})
        views[layout] = xlrag.build_perspectives(other, llm=view.pipeline.llm, retriever=view.pipeline.retriever)
    if args.view_max_repairs is not None:
        other = cfg.model_copy(update={"agent": cfg.agent.model_copy(update={"max_repairs": args.view_max_repairs})})
        views[f"max_repairs_{args.view_max_repairs}"] = xlrag.build_perspectives(
            other, llm=view.pipeline.llm, retriever=view.pipeline.retriever)
    if args.view_no_explanation:
        other = cfg.model_copy(update={"answer": cfg.answer.model_copy(update={"explanation": False})})
        views["no_explanation"] = xlrag.build_perspectives(other, llm=view.pipeline.llm,
                                                           retriever=view.pipeline.retriever)
    if args.view_explanation:
        other = cfg.model_copy(update={"agent": cfg.agent.model_copy(
            update={"perspectives": cfg.agent.perspectives.model_copy(update={"explanation": True})})})
        views["explanation"] = xlrag.build_perspectives(other, llm=view.pipeline.llm, retriever=view.pipeline.retriever)
    if args.view_unopened:
        other = cfg.model_copy(update={"answer": cfg.answer.model_copy(update={"explanation_opener": False})})
        views["unopened"] = xlrag.build_perspectives(other, llm=view.pipeline.llm, retriever=view.pipeline.retriever)
    # the plain ask of the same stack (the config's mode), on the same loaded model
    ask = GroundedChain.from_config(cfg, llm=view.pipeline.llm, retriever=view.pipeline.retriever)
    wanted = args.only.split(",") if args.only else TERRITORIES
    territories = [t for t in load_territories() if t.territory in wanted]

    t0 = time.perf_counter()
    validation = validate(view.judge, args.judge_per_kind)
    validation["seconds"] = time.perf_counter() - t0
    print(f"validation: lexical {validation['lexical_accuracy_when_decided']} on {validation['lexical_decided']} "
          f"decided, judge {validation['judge_accuracy_when_decided']} on {validation['judge_items']}", flush=True)
    rows: dict[str, list[dict]] = {name: [] for name in views}
    t_all = time.perf_counter()
    for i, t in enumerate(territories, 1):
        questions = [("contested", f"Who does {ASKED.get(t.territory, t.territory)} belong to?")]
        if t.territory in CONTROLS:
            questions.append(("control", CONTROLS[t.territory]))
        for kind, question in questions:
            # each side from a cold model (what a process that has not seen the question pays),
            # then the ask again right after the views, as this benchmark timed it before
            cold(view.pipeline.llm)
            t0 = time.perf_counter()
            plain = ask.invoke({"question": question, "lang": "en"})
            ask_s = time.perf_counter() - t0
            made = {}
            for name, v in views.items():
                cold(view.pipeline.llm)
                t0 = time.perf_counter()
                out = v.invoke({"question": question, "lang": "en"})
                made[name] = _row(t, kind, question, out, time.perf_counter() - t0)
            t0 = time.perf_counter()
            ask.invoke({"question": question, "lang": "en"})
            warm_s = time.perf_counter() - t0
            for name, r in made.items():
                rows[name].append({**r, "ask_seconds": ask_s, "ask_seconds_after_view": warm_s,
                                   "ask_answer": plain.answer})
            print(f"\r{i}/{len(territories)} {t.territory} {kind}: "
                  + ", ".join(f"{n} {r['status']} {r['seconds']:.0f}s" for n, r in made.items())
                  + f", ask {ask_s:.0f}s ({time.perf_counter() - t_all:.0f}s)", flush=True)

    summary = _summary(rows["default"])
    result = {"benchmark": "perspectives", "model": args.model, "threads": args.threads, "k": 3,
              "corpus": "xlrag/data/borderlines/passages.jsonl", "territories": [t.territory for t in territories],
              "summary": summary, "validation": validation, "rows": rows["default"]}
    if len(views) > 1:
        # every other view of the run (a layout, a repair budget), under its name
        result["layouts"] = {name: {"summary": _summary(rs), "rows": rs} for name, rs in rows.items()
                             if name != "default"}
    path = write_json(args.out, result)
    print(json.dumps(summary, indent=1, ensure_ascii=False, default=str)[:4000])
    for name, other in result.get("layouts", {}).items():
        print(name, json.dumps(other["summary"], indent=1, ensure_ascii=False, default=str)[:3000])
    print(f"written {path}")


if __name__ == "__main__":
    main()
