"""The answer checks of issue 51 on items of known truth: support by a sentence, the language
of the answer line on its own, and an explanation that restates the question. No model unless
``--translate``.

Sections (each the check before #51 beside today's, in one run):

* ``support``: is a number or span supported by a cited passage? Known right: XQuAD's gold
  answer in its gold passage (570, the vendored excerpt); each test bed question's number in its
  page (every language of ``xlrag.evals.testbed``). Known wrong: another question's gold taken
  from another sentence of the same XQuAD passage (the issue's "1900" from a sentence about a
  patent), another article's gold, and the test bed page's other number (each page holds its two
  numbers in different sentences). Answers come bare and restated (the question's words, then
  the span, as a small model writes them).
* ``sweep``: the support rule's constants (``NEAR_BEST``, ``CONTENT_LETTERS``) beside their
  neighbours on the same items, bare answers.
* ``answers``: the answer benchmark's answers of known truth (``benchmarks/results/answers.json``:
  the Travel answers read by hand, ``benchmarks/data/travel/answers_hand_labels.jsonl``, and the
  XQuAD answers of ``chain/before/opened`` the calibrated judge read), each looked up in every
  passage it was shown (an upper bound on support, the same for both rules), as
  ``benchmarks/support_translations.py`` measured the check before. The shown passages are
  split again from the vendored corpora with the demo's splitter (the rows keep their ids). With
  ``--translate``, an answer not supported alone is translated with its question into its other
  shown languages by the default model, as the agent does.
* ``language``: per test bed language, the page's first sentence (in the language, with the
  number) as the answer line; the English page's sentence as the answer line under the
  language's sentence as the explanation (wrong: the issue's Hindi case), and a name and a bare
  number as the answer line (no language to be wrong).
* ``restated``: the committed answer benchmark's explanations that only restate the question,
  by how the calibrated judge read their answers.

    python benchmarks/checks_testbed.py [--translate] [--threads 2] [--sections support,sweep,...]

Writes benchmarks/results/checks_testbed.json.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
from collections import Counter, defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import CACHE, HERE, read_jsonl, support_rates, write_json

ANSWERS = HERE / "results" / "answers.json"
HAND = HERE / "data" / "travel" / "answers_hand_labels.jsonl"
JUDGED_ARM = "chain/before/opened"


# -- the rules before #51, as they were (the baselines) ------------------------------------------

def support_before(answer: str, question: str, passages: list[str], lang: str | None) -> bool:
    """The support check before #51: half the answer's character n-grams beyond the question's
    anywhere in one cited passage."""
    from xlrag.checks.language import visible_text
    from xlrag.checks.lexical import char_ngrams
    from xlrag.checks.substance import SUPPORT, _spelled

    asked = char_ngrams(_spelled(question, lang), lang)
    own = char_ngrams(_spelled(visible_text(answer), lang), None) - asked
    if not own:
        return True
    best = max((len(own & char_ngrams(_spelled(p, lang), None)) / len(own) for p in passages), default=0.0)
    return best >= SUPPORT


def language_before(answer: str | None, explanation: str | None, lang: str) -> bool:
    """The agent's language check before #51: lingua on the answer and explanation together, and
    the answer line's script."""
    from xlrag.checks.language import foreign_script, judge_language

    verdict = judge_language("\n".join(p for p in (answer, explanation) if p), lang)
    return verdict.status != "wrong" and (verdict.status == "wrong" or foreign_script(answer or "", lang) is None)


# -- items -------------------------------------------------------------------------------------

def _restated(question: str, span: str) -> str:
    return re.sub(r"[?？؟;;՞።\s]+$", "", question) + " " + span


def support_items() -> list[dict]:
    from xlrag.checks.sentences import split_sentences
    from xlrag.evals import testbed
    from xlrag.schema import Passage

    data = HERE.parent / "xlrag" / "data" / "xquad"
    queries = read_jsonl(data / "queries.jsonl")
    passages = {d["id"]: d["text"] for d in read_jsonl(data / "corpus.jsonl")}
    by_doc: dict[str, list[dict]] = defaultdict(list)
    for q in queries:
        by_doc[q["gold_doc_id"]].append(q)
    rng = random.Random(0)
    out = []
    for q in queries:
        text, gold = passages[q["gold_doc_id"]], q["answers"][0]
        base = {"source": "xquad", "lang": q["lang"], "question": q["question"], "passage": text}
        out.append({**base, "kind": "right", "span": gold})
        gold_sentences = [s for s in split_sentences(text, q["lang"]) if gold in s]
        for o in by_doc[q["gold_doc_id"]]:
            span = o["answers"][0]
            if o is q or span not in text or gold in span or span in gold or any(span in s for s in gold_sentences):
                continue
            out.append({**base, "kind": "wrong_same_passage", "span": span})
        other = rng.choice([x for x in queries if x["lang"] == q["lang"] and x["parallel_id"] != q["parallel_id"]])
        out.append({**base, "kind": "wrong_other_article", "span": other["answers"][0]})
    docs = {d.id: d for d in testbed.documents()}
    for q in testbed.questions():
        d = docs[testbed.gold_doc(q)]
        page = Passage(id=d.id, doc_id=d.id, text=f"{d.title}\n{d.text}", lang=d.lang, title=d.title)
        other = testbed.numbers(q.country)["park" if q.fact == "emergency" else "emergency"]
        base = {"source": "testbed", "lang": q.lang, "question": q.question, "passage": page}
        out += [{**base, "kind": "right", "span": q.answer}, {**base, "kind": "wrong_same_passage", "span": other}]
    return out


def run_support() -> dict:
    from xlrag.checks.substance import unsupported

    rows = []
    for it in support_items():
        text = it["passage"] if isinstance(it["passage"], str) else it["passage"].text
        for form in ("bare", "restated"):
            said = it["span"] if form == "bare" else _restated(it["question"], it["span"])
            rows.append({"source": it["source"], "lang": it["lang"], "kind": it["kind"], "form": form,
                         "before": support_before(said, it["question"], [text], it["lang"]),
                         "now": unsupported(said, it["question"], [it["passage"]], it["lang"]).passed})
    summary: dict = {}
    for key in sorted({(r["source"], r["kind"], r["form"]) for r in rows}):
        sel = [r for r in rows if (r["source"], r["kind"], r["form"]) == key]
        right = key[1] == "right"
        summary["/".join(key)] = {"n": len(sel), **{rule: round(sum(r[rule] is right for r in sel) / len(sel), 3)
                                                    for rule in ("before", "now")}}
    per_lang = {}
    for lang in sorted({r["lang"] for r in rows if r["source"] == "testbed"}):
        sel = [r for r in rows if r["source"] == "testbed" and r["lang"] == lang]
        right = [r for r in sel if r["kind"] == "right"]
        wrong = [r for r in sel if r["kind"] != "right"]
        per_lang[lang] = {"right_supported": round(sum(r["now"] for r in right) / len(right), 3),
                          "wrong_unsupported": round(sum(not r["now"] for r in wrong) / len(wrong), 3),
                          "wrong_unsupported_before": round(sum(not r["before"] for r in wrong) / len(wrong), 3)}
    return {"summary": summary, "testbed_per_language": per_lang}


def run_sweep() -> dict:
    """The support rule's constants, each beside its neighbours, on the known-truth items (bare
    answers): how the chosen ones were chosen."""
    from xlrag.checks import substance

    chosen = (substance.TOPIC, substance.NEAR_BEST, substance.CONTENT_LETTERS)
    items = support_items()
    out = []
    try:
        for near in (0.5, 0.6, 0.7):
            for letters in (1, 5):  # 1: a word's length does not matter
                substance.NEAR_BEST, substance.CONTENT_LETTERS = near, letters
                tally: Counter = Counter()
                for it in items:
                    ok = substance.unsupported(it["span"], it["question"], [it["passage"]], it["lang"]).passed
                    tally[f"{it['source']}/{it['kind']}"] += ok if it["kind"] == "right" else not ok
                counts = Counter(f"{it['source']}/{it['kind']}" for it in items)
                out.append({"topic": substance.TOPIC, "near_best": near, "content_letters": letters,
                            **{k: round(tally[k] / n, 3) for k, n in sorted(counts.items())}})
    finally:
        substance.TOPIC, substance.NEAR_BEST, substance.CONTENT_LETTERS = chosen
    return {"chosen": dict(zip(("topic", "near_best", "content_letters"), chosen, strict=True)), "grid": out}


def answer_items() -> list[dict]:
    """The answer benchmark's answers of known truth, with the passages each was shown."""
    from xlrag.demo import DEMO_CORPORA, DEMO_SPLITTER
    from xlrag.indexes.splitting import PassageSplitter
    from xlrag.schema import Document

    splitter = PassageSplitter(DEMO_SPLITTER)
    # the rows' ids end in a digest of a splitter run before this one's; document and position name a passage
    passages = {p.id.split(":")[0]: p for corpus in DEMO_CORPORA for line in read_jsonl(corpus)
                for p in splitter.split(Document(**line))}
    rows = {(r["arm"], r["id"]): r for r in json.loads(ANSWERS.read_text(encoding="utf-8"))["rows"]}
    shown = {}
    for (_, q), r in rows.items():
        if r.get("shown_ids"):
            shown.setdefault(q, r["shown_ids"])
    out = []
    for lab in read_jsonl(HAND):
        r = rows.get((lab["arm"], lab["query_id"]))
        if r is not None and r["answer"] == lab["answer"] and r["answer"] and r["id"] in shown:
            out.append({**r, "truth": lab["label"] == "correct", "by": "hand"})
    for (arm, _), r in rows.items():
        if arm == JUDGED_ARM and r["source"] == "xquad" and r["answer"] and r.get("panel_final") in ("correct",
                                                                                                      "incorrect"):
            out.append({**r, "truth": r["panel_final"] == "correct", "by": "judge"})
    for it in out:
        it["passages"] = [passages[i.split(":")[0]] for i in shown[it["id"]]]
    return out


def run_answers(translate: bool, threads: int) -> dict:
    from xlrag.chains.parsing import strip_markers
    from xlrag.checks.substance import Rendering, unsupported
    from xlrag.errors import TranslationCutOffError

    translator = None
    if translate:
        from xlrag.chains.llms import build_llm
        from xlrag.chains.translator import LLMTranslator
        from xlrag.config import LLMConfig
        from xlrag.evals.cache import SQLiteLLMCache
        from xlrag.indexes.translate import CachedTranslator

        llm = build_llm(LLMConfig(model="qwen2.5-coder-1.5b-instruct", max_tokens=160, n_threads=threads))
        CACHE.mkdir(parents=True, exist_ok=True)
        llm.cache = SQLiteLLMCache(CACHE / "checks_testbed_calls.sqlite")  # a run again translates nothing again
        translator = CachedTranslator(LLMTranslator(llm))
    results = []
    for it in answer_items():
        said, question, lang = strip_markers(it["answer"]).strip(), it["question"], it["lang"]
        texts = [p.text for p in it["passages"]]
        verdict = {"before": support_before(said, question, texts, lang),
                   "now": unsupported(said, question, it["passages"], lang).passed, "translated": False}
        others = sorted({p.lang for p in it["passages"] if p.lang != lang})[:2]
        if translator is not None and others and not (verdict["before"] and verdict["now"]):
            renderings = []
            for target in others:
                try:
                    renderings.append(Rendering(answer=translator.translate(said, lang, target),
                                                question=translator.translate(question, lang, target), lang=target))
                except TranslationCutOffError:
                    continue
            verdict = {"before": verdict["before"] or any(support_before(r.answer, r.question, texts, lang)
                                                           for r in renderings),
                       "now": unsupported(said, question, it["passages"], lang, renderings=renderings).passed,
                       "translated": True}
        results.append({"id": it["id"], "arm": it["arm"], "lang": lang, "by": it["by"], "truth": it["truth"],
                        "answer": said, **verdict})

    return {"translate": translate, "summary": support_rates(results, ("before", "now")), "rows": results}


def run_language() -> dict:
    from xlrag.checks.language import judge_reply
    from xlrag.checks.sentences import split_sentences
    from xlrag.evals import testbed

    # each page's first sentence: "The emergency telephone number in Kenya is 959."
    sentence = {d.metadata["testbed_lang"]: split_sentences(d.text, d.lang)[0]
                for d in testbed.documents(countries=("KE",))}
    out: dict = {}
    for lang in testbed.languages():
        foreign = sentence["fr" if lang == "en" else "en"]
        own = sentence[lang]
        cases = {"own_line": (own, None, True), "foreign_line_own_explanation": (foreign, own, False),
                 "name_line": ("Nicholas E. Golovin", own, True), "number_line": ("959", own, True)}
        out[lang] = {name: {"truth": "right" if ok else "wrong",
                            "before": "right" if language_before(line, expl, lang) else "wrong",
                            "now": "right" if judge_reply(line, expl, lang).passed else "wrong"}
                     for name, (line, expl, ok) in cases.items()}
    tally: dict = {}
    for case in ("own_line", "foreign_line_own_explanation", "name_line", "number_line"):
        tally[case] = {rule: round(sum(v[case][rule] == v[case]["truth"] for v in out.values()) / len(out), 3)
                       for rule in ("before", "now")}
    return {"summary": tally, "per_language": out}


def run_restated() -> dict:
    from xlrag.checks.language import visible_text
    from xlrag.checks.substance import RESTATE_ADDS, restates_question

    rows = json.loads(ANSWERS.read_text(encoding="utf-8"))["rows"]
    seen, counts, caught = set(), Counter(), []
    for r in rows:
        if not r.get("explanation"):
            continue
        key = (visible_text(r["explanation"]), r["question"], r["answer"])
        if key in seen:
            continue
        seen.add(key)
        flagged = restates_question(r["explanation"], r["question"], r["lang"])
        counts[f"{'flagged' if flagged else 'passed'}/{r['panel_final']}"] += 1
        if flagged:
            caught.append({"lang": r["lang"], "question": r["question"], "answer": r["answer"],
                           "explanation": r["explanation"], "judged": r["panel_final"]})
    return {"restate_adds": RESTATE_ADDS, "distinct_explanations": len(seen), "counts": dict(sorted(counts.items())),
            "flagged": caught}


SECTIONS = ("support", "sweep", "language", "restated", "answers")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--translate", action="store_true", help="translate answers not supported alone (the model)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--sections", default=",".join(SECTIONS),
                    help="the sections to measure again; the others are kept from the results file")
    args = ap.parse_args()
    wanted = [x.strip() for x in args.sections.split(",") if x.strip()]
    if unknown := sorted(set(wanted) - set(SECTIONS)):
        ap.error(f"unknown sections {unknown}; choose from {', '.join(SECTIONS)}")
    path = HERE / "results" / "checks_testbed.json"
    payload = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {"benchmark": "checks_testbed"}
    runs = {"support": run_support, "sweep": run_sweep, "language": run_language, "restated": run_restated,
            "answers": lambda: run_answers(args.translate, args.threads)}
    for name in wanted:
        payload[name] = runs[name]()
    kept = ("provenance", "benchmark", *SECTIONS)
    path = write_json("checks_testbed.json", {k: payload[k] for k in kept if k in payload})
    for section in ("support", "language"):
        if section in payload:
            print(section, json.dumps(payload[section]["summary"], indent=1))
    for row in payload.get("sweep", {}).get("grid", []):
        print("sweep", row)
    if "restated" in payload:
        print("restated", payload["restated"]["counts"])
    for name, s in payload.get("answers", {}).get("summary", {}).items():
        print("answers", name, "translated", s["translated"],
              "right supported", {k: round(v["mean"] or 0, 3) for k, v in s["right_supported"].items()},
              "wrong unsupported", {k: round(v["mean"] or 0, 3) for k, v in s["wrong_unsupported"].items()},
              "n", s["right_supported"]["now"]["n"], s["wrong_unsupported"]["now"]["n"])
    print(f"written {path}")


if __name__ == "__main__":
    main()
