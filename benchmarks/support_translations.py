"""The support check through translations on real answers: the answer translated alone (the
check before #33's last stop) against the answer and its question translated (today's).

``xlrag.checks.substance.unsupported`` looks an answer up in its passages; when they are in
another language, in the answer's translation. Today the question is translated too and what the
two translations share counts as asked. Its validation on items of known truth (XQuAD's parallel
questions) is ``tests/checks/test_substance.py``; this script measures what the change does to
answers the default model wrote, whose correctness is known:

* the Travel answers of the answer benchmark read by hand
  (``benchmarks/data/travel/answers_hand_labels.jsonl``, arms ``chain/before`` and ``chain/form``);
* the XQuAD answers of ``chain/before/opened``, as the calibrated judge read them (0.960 on 376
  items of known truth).

Each answer is looked up in the passages it was shown (the rows keep no citations, so every shown
passage counts as cited: an upper bound on support, the same for both checks). Translations by the
default model, one llama.cpp process, cached for the run.

    python benchmarks/support_translations.py [--threads 2]

Writes benchmarks/results/support_translations.json.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import CACHE, read_jsonl, support_rates, write_json

ROWS = CACHE / "answers" / "rows.jsonl"
HAND = Path(__file__).resolve().parent / "data" / "travel" / "answers_hand_labels.jsonl"
JUDGED_ARM = "chain/before/opened"


def items() -> list[dict]:
    """(row, truth, source of truth) for every hand-labelled Travel answer and every judged XQuAD one."""
    rows = {(r["arm"], r["id"]): r for r in read_jsonl(ROWS)}
    # the arms share their retrieval; the labelled arms' rows predate keeping the shown ids
    shown = {q: {"shown_ids": r["shown_ids"], "shown_langs": r["shown_langs"]}
             for (arm, q), r in rows.items() if arm == JUDGED_ARM}
    out = []
    for lab in read_jsonl(HAND):
        r = rows.get((lab["arm"], lab["query_id"]))
        if r is not None and r["answer"] == lab["answer"] and r["answer"]:
            assert r["shown_langs"] == shown[r["id"]]["shown_langs"], r["id"]
            out.append({**r, **shown[r["id"]], "truth": lab["label"] == "correct", "by": "hand"})
    for (arm, _), r in rows.items():
        if (arm == JUDGED_ARM and r["source"] == "xquad" and r["answer"]
                and r.get("panel_final") in ("correct", "incorrect")):
            out.append({**r, "truth": r["panel_final"] == "correct", "by": "judge"})
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()

    from xlrag.chains.llms import build_llm
    from xlrag.chains.parsing import strip_markers
    from xlrag.chains.translator import LLMTranslator
    from xlrag.checks.substance import Rendering, unsupported
    from xlrag.config import LLMConfig
    from xlrag.demo import demo_embedder
    from xlrag.errors import TranslationCutOffError
    from xlrag.indexes.store import LanguageStores
    from xlrag.indexes.translate import CachedTranslator

    embedder = demo_embedder()
    stores = LanguageStores.open(CACHE / "agent-index", embedder.name, embedder.dim)
    translator = CachedTranslator(LLMTranslator(build_llm(LLMConfig(
        model="qwen2.5-coder-1.5b-instruct", max_tokens=160, n_threads=args.threads))))

    results = []
    for i, r in enumerate(its := items(), 1):
        by_lang: dict[str, list[str]] = {}
        for pid, plang in zip(r["shown_ids"], r["shown_langs"], strict=True):
            by_lang.setdefault(plang, []).append(pid)
        texts = [p.text for plang, ids in by_lang.items() for p in stores.passages(plang, ids).values()]
        said, question, lang = strip_markers(r["answer"]).strip(), r["question"], r["lang"]
        alone = unsupported(said, question, texts, lang)
        verdict = {"alone": alone.passed, "with_question": alone.passed, "translated": False}
        others = sorted({x for x in r["shown_langs"] if x != lang})[:2]
        if not alone.passed and others:
            old, new = [], []
            for target in others:
                try:
                    answer = translator.translate(said, lang, target)
                    asked = translator.translate(question, lang, target)
                except TranslationCutOffError:
                    continue
                old.append(Rendering(answer=answer, question=""))  # the question's words not subtracted
                new.append(Rendering(answer=answer, question=asked))
            verdict = {"alone": unsupported(said, question, texts, lang, renderings=old).passed,
                       "with_question": unsupported(said, question, texts, lang, renderings=new).passed,
                       "translated": True}
        results.append({"arm": r["arm"], "id": r["id"], "lang": lang, "source": r["source"], "by": r["by"],
                        "truth": r["truth"], "answer": said, **verdict})
        print(f"\r{i}/{len(its)}", end="", flush=True)
    print()

    summary = support_rates(results, ("alone", "with_question"))
    for name, sel in (("all", results), ("travel_by_hand", [x for x in results if x["by"] == "hand"]),
                      ("xquad_judged", [x for x in results if x["by"] == "judge"])):
        summary[name]["changed"] = [{"id": x["id"], "truth": x["truth"], "answer": x["answer"], "alone": x["alone"],
                                     "with_question": x["with_question"]}
                                    for x in sel if x["alone"] != x["with_question"]]
    path = write_json("support_translations.json", {"benchmark": "support_translations", "summary": summary,
                                                    "rows": results})
    for name, s in summary.items():
        print(name, "translated", s["translated"],
              "right supported", {k: round(v["mean"] or 0, 3) for k, v in s["right_supported"].items()},
              "wrong unsupported", {k: round(v["mean"] or 0, 3) for k, v in s["wrong_unsupported"].items()},
              "n", s["right_supported"]["alone"]["n"], s["wrong_unsupported"]["alone"]["n"])
    print(f"written {path}")


if __name__ == "__main__":
    main()
