"""Ragas faithfulness validated on items of known truth (issue #20, part 4).

For each vendored XQuAD language, questions whose gold passage is the only context, with two
responses of known truth over that same passage:

- *supported*: the passage's own sentence that holds the gold answer;
- *unsupported*: a fluent sentence of the same language from a passage of another article
  (it holds no gold answer, and shares little with the context).

Faithfulness should be high for the first and low for the second. Figures per language and
prompt setting: mean faithfulness of each kind, AUC (the chance that a supported response
scores above an unsupported one, ties half), accuracy at the 0.5 threshold, NaN count with
reasons. The rows of a language other than English are scored with Ragas's prompts adapted
to that language (``adapted``, what ``eval run`` does) and/or with its English prompts over
the same rows (``english``), to tell whether a low figure comes from the translated prompts
or from the model's NLI in that language.

    python benchmarks/ragas_validation.py [--per-lang 5] [--langs ar,en,...] [--threads 1]

Writes benchmarks/results/ragas_validation.json. Every model call is cached in
benchmarks/.cache/ragas_validation/, so a rerun costs nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import random
import re
import sys
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import CACHE, HERE, bootstrap_ci, read_jsonl, write_json

from xlrag.checks.lexical import normalize_answer

LANGS = ("ar", "de", "en", "es", "ru", "zh")
RUN = CACHE / "ragas_validation"
_SENTENCE = re.compile(r"(?<=[.!?。！？؟])\s*")


def _sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE.split(text) if len(s.strip()) > 20]


def _holds(text: str, golds: list[str], lang: str) -> bool:
    body = f" {normalize_answer(text, lang)} "
    return any(f" {normalize_answer(g, lang)} " in body for g in golds if normalize_answer(g, lang))


def items(per_lang: int, langs: tuple[str, ...]) -> list[dict]:
    data = HERE.parent / "xlrag" / "data" / "xquad"
    passages = {d["id"]: d for d in read_jsonl(data / "corpus.jsonl")}
    queries = read_jsonl(data / "queries.jsonl")
    out = []
    for lang in langs:
        rng = random.Random(f"ragas-validation:{lang}")
        qs = [q for q in queries if q["lang"] == lang]
        rng.shuffle(qs)
        others = [p for p in passages.values() if p["lang"] == lang]
        made = 0
        for q in qs:
            context = passages[q["gold_doc_id"]]["text"]
            supported = next((s for s in _sentences(context) if _holds(s, q["answers"], lang)), None)
            article = passages[q["gold_doc_id"]]["metadata"].get("article")
            pool = [s for p in others if p["metadata"].get("article") != article for s in _sentences(p["text"])
                    if not _holds(s, q["answers"], lang)]
            if supported is None or not pool:
                continue
            unsupported = rng.choice(pool)
            for kind, response in (("supported", supported), ("unsupported", unsupported)):
                out.append({"id": f"{q['id']}:{kind}", "lang": lang, "kind": kind, "question": q["question"],
                            "response": response, "context": context})
            made += 1
            if made == per_lang:
                break
    return out


def auc(pos: list[float], neg: list[float]) -> float | None:
    if not pos or not neg:
        return None
    wins = sum((p > n) + 0.5 * (p == n) for p in pos for n in neg)
    return wins / (len(pos) * len(neg))


def figures(rows: list[dict]) -> dict:
    out: dict = {}
    groups: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for r in rows:
        groups[(r["lang"], r["prompts"])].append(r)
    for (lang, prompts), rs in sorted(groups.items()):
        ok = [r for r in rs if r["value"] is not None]
        pos = [r["value"] for r in ok if r["kind"] == "supported"]
        neg = [r["value"] for r in ok if r["kind"] == "unsupported"]
        right = [float((r["value"] >= 0.5) == (r["kind"] == "supported")) for r in ok]
        mean, lo, hi = bootstrap_ci(right) if right else (None, None, None)
        out[f"{lang}/{prompts}"] = {
            "n": len(rs), "nan": len(rs) - len(ok),
            "nan_reasons": sorted({(r["reason"] or "")[:120] for r in rs if r["value"] is None}),
            "mean_supported": sum(pos) / len(pos) if pos else None,
            "mean_unsupported": sum(neg) / len(neg) if neg else None,
            "auc": auc(pos, neg), "accuracy_at_0.5": {"mean": mean, "ci95": [lo, hi], "n": len(right)},
        }
    return out


async def score(rows: list[dict], threads: int) -> list[dict]:
    from xlrag.chains.llms import build_llm
    from xlrag.config import LLMConfig
    from xlrag.evals.cache import SQLiteLLMCache
    from xlrag.evals.ragas_metrics import RagasMetrics, RagasRow, score_rows

    RUN.mkdir(parents=True, exist_ok=True)
    # the Travel report's Ragas model: the default 1.5B with room for Ragas's long replies
    llm = build_llm(LLMConfig(model="qwen2.5-coder-1.5b-instruct", max_tokens=512, n_threads=threads))
    llm.cache = SQLiteLLMCache(RUN / "calls.sqlite")
    metrics = RagasMetrics(llm, metrics=["faithfulness"], cache_dir=RUN / "prompts", untranslated="english")
    out = []
    for i, r in enumerate(rows, 1):
        t0 = time.perf_counter()
        row = RagasRow(question=r["question"], response=r["response"], contexts=[r["context"]],
                       lang=r["prompts_lang"], id=r["id"])
        (s,) = await score_rows([row], metrics)
        f = s.scores["faithfulness"]
        out.append({**{k: r[k] for k in ("id", "lang", "kind", "prompts")},
                     "value": None if math.isnan(f.value) else f.value, "reason": f.reason, "note": f.note,
                     "seconds": time.perf_counter() - t0})
        print(f"\r{i}/{len(rows)} {r['lang']}/{r['prompts']}", end="", flush=True)
    print()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--per-lang", type=int, default=5)
    ap.add_argument("--langs", default=",".join(LANGS))
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--settings", default="adapted,english",
                    help="adapted: Ragas's prompts translated into each language (costly: the small model "
                         "translates each prompt string); english: Ragas's English prompts over the same rows")
    args = ap.parse_args()
    settings = {x.strip() for x in args.settings.split(",") if x.strip()}
    if not settings or settings - {"adapted", "english"}:
        sys.exit(f"--settings takes adapted and/or english, got {args.settings!r}")
    langs = tuple(x.strip() for x in args.langs.split(",") if x.strip())
    unknown = [x for x in langs if x not in LANGS]
    if unknown:
        sys.exit(f"unknown language(s) {unknown}; the vendored XQuAD has {', '.join(LANGS)}")
    base = items(args.per_lang, langs)
    # English rows need no adaptation: their prompts are Ragas's own either way
    todo = [{**r, "prompts": "adapted", "prompts_lang": r["lang"]} for r in base
            if "adapted" in settings or r["lang"] == "en"]
    # the same rows with Ragas's English prompts: is it the prompts or the model?
    if "english" in settings:
        todo += [{**r, "prompts": "english", "prompts_lang": "en"} for r in base if r["lang"] != "en"]
    # rows measured before (other languages or settings) stay; each language is written as
    # soon as it is scored, so a run stopped midway keeps what it measured
    old = HERE / "results" / "ragas_validation.json"
    kept = json.loads(old.read_text(encoding="utf-8"))["rows"] if old.exists() else []
    for lang in dict.fromkeys(r["lang"] for r in todo):
        done = asyncio.run(score([r for r in todo if r["lang"] == lang], args.threads))
        new = {(r["id"], r["prompts"]) for r in done}
        kept = [r for r in kept if (r["id"], r["prompts"]) not in new] + done
        result = {"benchmark": "ragas_validation", "metric": "faithfulness", "model": "qwen2.5-coder-1.5b-instruct",
                  "per_lang": args.per_lang, "settings": sorted({r["prompts"] for r in kept}),
                  "figures": figures(kept), "rows": kept}
        path = write_json("ragas_validation.json", result)
        print(json.dumps({k: v for k, v in result["figures"].items() if k.startswith(lang)}, indent=1,
                         ensure_ascii=False))
        print(f"written {path}")


if __name__ == "__main__":
    main()
