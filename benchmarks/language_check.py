"""The response-language check on items of known truth: XQuAD's gold answers (the vendored
excerpt, 95 questions in 6 languages). Each gold is in its own question's language, so the check
must never call it wrong; the gold of the same question in another language, where the two
strings differ, is in the wrong language and should be caught. Short golds ("Russia", "Pons
Aelius", "1943") are what a reply without its explanation gives the check to read.

The check with and without its short-text rule (``SHORT_WORDS`` words or fewer, in a script
both languages share, lingua less sure than ``SHORT_CONFIDENCE``: not judged), in one run.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter, defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import HERE, read_jsonl, write_json


def items() -> list[dict]:
    """Every (text, language, truth) pair: a gold in its own language (right) and, where its
    string differs, in each other language of its question (wrong)."""
    by: dict[str, dict[str, str]] = defaultdict(dict)
    for q in read_jsonl(HERE.parent / "xlrag" / "data" / "xquad" / "queries.jsonl"):
        by[q["id"].rsplit("-", 1)[0]][q["lang"]] = q["answers"][0]
    out = []
    for gid, golds in sorted(by.items()):
        for lang, text in sorted(golds.items()):
            out.append({"id": gid, "lang": lang, "text": text, "written_in": lang, "truth": "right"})
            out += [{"id": gid, "lang": lang, "text": other, "written_in": olang, "truth": "wrong"}
                    for olang, other in sorted(golds.items())
                    if olang != lang and other.strip().casefold() != text.strip().casefold()]
    return out


def score(rows: list[dict]) -> dict:
    """Counts per truth and verdict, and the figures that matter: golds in their own language
    called wrong, other languages' golds caught, the precision of a "wrong" verdict."""
    counts = Counter((r["truth"], r["status"]) for r in rows)
    right = sum(n for (t, _), n in counts.items() if t == "right")
    wrong = sum(n for (t, _), n in counts.items() if t == "wrong")
    false_wrong, caught = counts["right", "wrong"], counts["wrong", "wrong"]
    return {"counts": {f"{t}/{s}": n for (t, s), n in sorted(counts.items())},
            "own_language_called_wrong": {"n": false_wrong, "of": right, "rate": round(false_wrong / right, 3)},
            "other_language_caught": {"n": caught, "of": wrong, "rate": round(caught / wrong, 3)},
            "wrong_verdicts_right": round(caught / (caught + false_wrong), 3) if caught + false_wrong else None}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="language_check.json")
    args = ap.parse_args()

    import xlrag.checks.language as language

    data = items()
    results, statuses = {}, {}
    rule = language.SHORT_WORDS
    for name, words in (("without_short_rule", 0), ("with_short_rule", rule)):
        language.SHORT_WORDS = words
        rows = [{**it, **language.judge_language(it["text"], it["lang"]).model_dump(
            include={"status", "detected", "confidence"})} for it in data]
        statuses[name] = [r["status"] for r in rows]
        results[name] = {"summary": score(rows), "short": score([r for r in rows if len(r["text"].split()) <= rule])}
    language.SHORT_WORDS = rule
    # every item once, lingua's reading and both verdicts (the rule changes the status alone)
    judged = [{**{k: v for k, v in r.items() if k != "status"}, "without_short_rule": a, "with_short_rule": b}
              for r, a, b in zip(rows, *statuses.values(), strict=True)]
    out = {"benchmark": "language_check", "items": len(data), "short_words": rule,
           "short_confidence": language.SHORT_CONFIDENCE, **results, "rows": judged}
    print(json.dumps({k: v["summary"] for k, v in results.items()}, indent=1))
    print(f"written {write_json(args.out, out)}")


if __name__ == "__main__":
    main()
