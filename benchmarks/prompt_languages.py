"""Prompt languages: is the answer line in the question's language, in every language of the test bed?

Issue #51: "every language of the test bed has localized prompts, or a measured fallback that
still gets the answer line in the user's language". This script asks the test bed's number
questions (``xlrag.evals.testbed``, ``--per-lang`` a language: an emergency number and a park's
year, of two countries drawn from a seed per language) through the grounded chain with the
default local model and the default configuration, over one index of the test bed's pages (every
measured language's eight pages), in two arms on the same questions:

- ``fallback``: what a language without its own prompt file gets: every role's English template,
  ``{language}`` filled with the language's native name (a library that ships English only);
- ``localized``: the shipped prompt files (``xlrag/prompts/<lang>.yaml``).

Per reply, the *answer line* alone is judged (the issue's Hindi answer line in English passed
a check that read the Hindi explanation):

- ``in_language``: lingua's verdict (``xlrag.checks.language.judge_language``) where lingua knows
  the language; where it does not (ht, km, ky, lo, mg, my, ne, tg, ti, uz), whether the line's
  letters are in the language's script and lingua does not read it as English (``method``
  ``script``: it cannot tell Kyrgyz from Russian, nor Haitian Creole from French). A line with
  no letters ("112") has no language: ``not_applicable``, counted apart;
- ``correct``: the line holds the gold number (digits of any script read as their values);
- ``gold_shown``: the gold country's page, in any language, was among the passages shown, so a
  wrong number with no gold page shown is retrieval's, not the prompt's.

Every model call goes through one SQLite cache under benchmarks/.cache/prompt_languages/, so a
stopped run resumes; rows are written to results as they come.

    python benchmarks/prompt_languages.py [--langs ar,az,...] [--arms fallback,localized] [--per-lang 2]

Writes benchmarks/results/prompt_languages.json (``--out`` for another name).
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

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import CACHE, write_json

RUN = CACHE / "prompt_languages"
ARMS = ("fallback", "localized")
_DIGIT_GROUP = re.compile(r"(?<=\d)[,.\u00a0\u202f' ](?=\d{3}(?!\d))")


def pick_questions(langs: list[str], per_lang: int) -> list:
    """``per_lang`` number questions a language, alternating the two facts, of countries drawn
    from a seed per language; one language after another in turn, so a stopped run is a sample
    of every language."""
    from xlrag.evals import testbed

    by_lang = {}
    for lang in langs:
        rng = random.Random(f"prompt_languages:{lang}")
        countries = rng.sample(testbed.COUNTRIES, per_lang)
        by_lang[lang] = [testbed.questions([lang], facts=(testbed.FACTS[i % 2],), countries=(c,))[0]
                         for i, c in enumerate(countries)]
    return [q for rnd in zip(*by_lang.values(), strict=True) for q in rnd]


def ascii_digits(text: str) -> str:
    """Digits of every script as ASCII ('১৯১২' → '1912'), thousands separators between digits
    dropped ('1,912' → '1912')."""
    out = "".join(str(unicodedata.decimal(ch)) if ch.isdecimal() else ch for ch in text)
    return _DIGIT_GROUP.sub("", out)


def holds_number(text: str, gold: str) -> bool:
    return re.search(rf"(?<!\d){re.escape(gold)}(?!\d)", ascii_digits(text or "")) is not None


def lingua_knows(lang: str) -> bool:
    from lingua import IsoCode639_1

    from xlrag.languages import normalize_code

    return hasattr(IsoCode639_1, normalize_code(lang).upper())


def judge_line(line: str, lang: str) -> dict:
    """The answer line's language: lingua's verdict, or its script where lingua lacks the language."""
    from xlrag.checks.language import _scripts_of, judge_language, visible_text
    from xlrag.checks.lexical import dominant_script
    from xlrag.detect import LinguaDetector
    from xlrag.languages import normalize_code

    code = normalize_code(lang)
    if lingua_knows(code):
        v = judge_language(line, code)
        return {"method": "lingua", "status": v.status, "detected": v.detected,
                "confidence": None if v.confidence is None else round(v.confidence, 3)}
    kept = visible_text(line)
    script = dominant_script(kept)
    if script is None:
        return {"method": "script", "status": "not_applicable", "detected": None, "confidence": None}
    detected = LinguaDetector().detect(kept)
    scripts = _scripts_of(code) or frozenset()
    ok = script in scripts and detected != "en"
    return {"method": "script", "status": "correct" if ok else "wrong", "detected": detected,
            "script": script, "confidence": None}


def in_language(status: str) -> bool | None:
    return None if status == "not_applicable" else status == "correct"


def libraries() -> dict:
    from xlrag.prompts import FALLBACK_LANGUAGE, PromptLibrary

    class EnglishOnly(PromptLibrary):
        """The library a language without its own file sees: English's, its {language} the
        language's native name (the shipped fallback path, not a copy of it)."""

        def languages(self) -> list[str]:
            return [FALLBACK_LANGUAGE]

    return {"fallback": EnglishOnly(), "localized": PromptLibrary()}


def build_index(langs: list[str]) -> Path:
    """One index of the measured languages' test bed pages, rebuilt when the languages change."""
    from xlrag import build_index as index
    from xlrag.evals import testbed

    index_dir = RUN / "index"
    corpus = RUN / "corpus.jsonl"
    text = "".join(json.dumps(d.model_dump(), ensure_ascii=False) + "\n" for d in testbed.documents(langs))
    if not (corpus.is_file() and corpus.read_text(encoding="utf-8") == text and index_dir.is_dir()):
        corpus.write_text(text, encoding="utf-8")
        index(corpus, index_dir, rebuild=True)
    return index_dir


def summarize(rows: list[dict]) -> dict:
    def rates(rs: list[dict]) -> dict:
        judged = [r["in_language"] for r in rs if r["in_language"] is not None]
        return {"n": len(rs), "n_with_language": len(judged),
                "in_language": round(sum(judged) / len(judged), 3) if judged else None,
                "no_language": sum(r["in_language"] is None for r in rs),
                "correct": round(sum(r["correct"] for r in rs) / len(rs), 3) if rs else None,
                "gold_shown": round(sum(r["gold_shown"] for r in rs) / len(rs), 3) if rs else None}

    out: dict = {}
    for arm in dict.fromkeys(r["arm"] for r in rows):
        rs = [r for r in rows if r["arm"] == arm]
        out[arm] = {"all": rates(rs), "lingua": rates([r for r in rs if r["method"] == "lingua"]),
                    "script": rates([r for r in rs if r["method"] == "script"])}
    return out


def per_language(rows: list[dict]) -> dict:
    """lang → arm → the rows' figures (in_language as right/with a language, correct as a count)."""
    table: dict = {}
    for r in rows:
        cell = table.setdefault(r["lang"], {}).setdefault(r["arm"], {"n": 0, "in_language": 0, "with_language": 0,
                                                                      "correct": 0, "answer_lines": []})
        cell["n"] += 1
        cell["correct"] += r["correct"]
        if r["in_language"] is not None:
            cell["with_language"] += 1
            cell["in_language"] += r["in_language"]
        cell["answer_lines"].append(r["answer"])
    for lang, arms in table.items():
        arms["method"] = "lingua" if lingua_knows(lang) else "script"
    return dict(sorted(table.items()))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--langs", default=None, help="comma-separated test bed languages (default: all of them)")
    ap.add_argument("--arms", default=",".join(ARMS))
    ap.add_argument("--per-lang", type=int, default=2)
    ap.add_argument("--explanation", action="store_true",
                    help="let the model write its explanation too (judged apart); by default the reply stops at "
                         "its header: the answer line is written before it, so it is the same, for fewer tokens")
    ap.add_argument("--out", default="prompt_languages.json")
    args = ap.parse_args()
    from xlrag.chains.llms import build_llm
    from xlrag.chains.local.catalogue import DEFAULT_ENTRY
    from xlrag.chains.rag import GroundedChain
    from xlrag.config import XlragConfig
    from xlrag.evals import testbed
    from xlrag.evals.cache import SQLiteLLMCache
    from xlrag.indexes.retriever import CrossLingualRetriever

    langs = args.langs.split(",") if args.langs else testbed.languages()
    arms = [a.strip() for a in args.arms.split(",") if a.strip()]
    unknown = sorted(set(arms) - set(ARMS))
    if unknown:
        raise SystemExit(f"unknown arm(s) {', '.join(unknown)}; choose from: {', '.join(ARMS)}")
    RUN.mkdir(parents=True, exist_ok=True)
    cfg = XlragConfig(index_dir=build_index(langs), answer={"explanation": args.explanation})
    llm = build_llm(cfg.llm)
    llm.cache = SQLiteLLMCache(RUN / "calls.sqlite")
    libs = libraries()
    # one retriever for both arms: the same passages for the same question
    retriever = CrossLingualRetriever.from_config(cfg)
    chains = {arm: GroundedChain.from_config(cfg, llm=llm, retriever=retriever, prompts=libs[arm]) for arm in arms}
    qs = pick_questions(langs, args.per_lang)
    rows: list[dict] = []
    started = time.perf_counter()
    for i, q in enumerate(qs, 1):
        for arm in arms:
            t0 = time.perf_counter()
            answer = chains[arm].invoke({"question": q.question, "lang": q.lang})
            line = answer.answer or ""
            verdict = judge_line(line, q.lang)
            shown = [h.passage.doc_id.rsplit("-", 1)[-1] for h in answer.passages]
            rows.append({"arm": arm, "id": q.id, "lang": q.lang, "fact": q.fact, "question": q.question,
                         "gold": q.answer, "answer": line, "explanation": (answer.explanation or "")[:300],
                         "prompt_source": libs[arm].source("answer_language", q.lang),
                         **verdict, "in_language": in_language(verdict["status"]),
                         "correct": holds_number(line, q.answer), "gold_shown": q.country in shown,
                         "explanation_language": judge_line(answer.explanation, q.lang)["status"]
                         if answer.explanation else None,
                         "flags": list(answer.flags), "seconds": round(time.perf_counter() - t0, 1)})
        print(f"{i}/{len(qs)} {q.lang} {time.perf_counter() - started:.0f}s", flush=True)
        if i % 4 == 0 or i == len(qs):
            write_json(args.out, {"benchmark": "prompt_languages", "model": cfg.llm.model or DEFAULT_ENTRY,
                                  "per_lang": args.per_lang, "explanation": args.explanation, "arms": arms,
                                  "langs": langs,
                                  "done": i, "of": len(qs), "summary": summarize(rows),
                                  "per_language": per_language(rows), "rows": rows})
    retriever.close()
    print(json.dumps(summarize(rows), indent=1))


if __name__ == "__main__":
    main()
