"""Sampling under the answer grammar: llama-cpp-python's chain against xlrag's grammar-last
greedy sampler (xlrag/chains/local/sampling.py), on the default model, in one run (#33).

llama-cpp-python applies the grammar to the whole vocabulary at every step; xlrag asks the
grammar about the greedy choice alone and falls back to the whole vocabulary only when it is
refused. Both must write the same tokens; what differs is the time per generated token. Each
question (XQuAD, one per vendored language, with its gold paragraph and the next two of the
corpus as <doc0..2>) is answered both ways, in an order that alternates per question, each
from the same state: the prompt is read once beforehand by a two-token reply, so each way
finds it in the context and evaluates its last token again, alone. (A one-token reply leaves
the prompt's own logits behind, which the first way then samples from: logits of a whole
batch differ in the last bits from those of one token evaluated alone, and greedy choices
between near-equal tokens flip; in the first runs 5 of 12 explanations parted mid-sentence.)
Decoding time is the reply's time after its first token.

    python benchmarks/grammar_sampling.py [--per-lang 2] [--threads 2]

Writes benchmarks/results/grammar_sampling.json.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import bootstrap_ci, read_jsonl, write_json

from xlrag.chains.local.runtime import LocalLlamaChat
from xlrag.chains.pipeline import Pipeline
from xlrag.chains.profiles import LocalProfile
from xlrag.config import AnswerConfig
from xlrag.schema import Passage

ROOT = Path(__file__).resolve().parents[1]
MODEL = "qwen2.5-coder-1.5b-instruct"
WAYS = ("library", "grammar_last")


def questions(per_lang: int) -> list[tuple[dict, list[Passage]]]:
    data = ROOT / "xlrag" / "data" / "xquad"
    corpus = read_jsonl(data / "corpus.jsonl")
    index = {d["id"]: i for i, d in enumerate(corpus)}
    out, taken = [], {}
    for q in read_jsonl(data / "queries.jsonl"):
        if taken.get(q["lang"], 0) >= per_lang:
            continue
        taken[q["lang"]] = taken.get(q["lang"], 0) + 1
        i = index[q["gold_doc_id"]]
        same = [d for d in corpus[i:] + corpus[:i] if d["lang"] == q["lang"]][:3]
        out.append((q, [Passage(id=d["id"], doc_id=d["id"], text=d["text"], lang=d["lang"]) for d in same]))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--per-lang", type=int, default=2)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    chat = LocalLlamaChat(entry=MODEL, chat=True, n_threads=args.threads, max_tokens=160, n_ctx=4096)
    llama, _ = chat.native()
    pipeline = Pipeline.create(None, chat, answer=AnswerConfig(post_hoc_citations=False, format="citation"),
                               profile=LocalProfile(), grammar=True)
    rows = []
    for n, (q, passages) in enumerate(questions(args.per_lang)):
        state = pipeline.prepare({"question": q["question"], "passages": passages, "lang": q["lang"]})
        request = state.request
        row = {"id": q["id"], "lang": q["lang"]}
        chat.invoke(request.messages, max_tokens=2)  # the prompt read once, for both ways alike
        for way in WAYS[n % 2:] + WAYS[:n % 2]:
            llama.grammar_last = way == "grammar_last"
            t0 = time.perf_counter()
            reply = chat.invoke(request.messages, **request.kwargs)
            seconds = time.perf_counter() - t0
            meta = reply.response_metadata
            tokens = meta["completion_tokens"]
            decode = seconds - meta["time_to_first_token"]
            row[way] = {"text": reply.content, "tokens": tokens, "seconds": round(seconds, 3),
                        "decode_ms_per_token": round(1000 * decode / max(tokens - 1, 1), 2)}
        llama.grammar_last = True
        row["same_text"] = row["library"]["text"] == row["grammar_last"]["text"]
        rows.append(row)
        print(f"{q['id']}: library {row['library']['decode_ms_per_token']} ms/token, grammar-last "
              f"{row['grammar_last']['decode_ms_per_token']}; same text {row['same_text']}", flush=True)

    def ms(way: str) -> list[float]:
        return [r[way]["decode_ms_per_token"] for r in rows]

    ratio = [a / b for a, b in zip(ms("library"), ms("grammar_last"), strict=True)]
    summary = {
        "questions": len(rows), "same_text": sum(r["same_text"] for r in rows),
        "decode_ms_per_token_median": {w: statistics.median(ms(w)) for w in WAYS},
        "library_over_grammar_last": dict(zip(("mean", "low", "high"), bootstrap_ci(ratio), strict=True)),
    }
    print(summary)
    out = write_json("grammar_sampling.json", {"benchmark": "grammar_sampling", "model": MODEL,
                                               "threads": args.threads, "summary": summary, "rows": rows})
    print(f"written {out}")


if __name__ == "__main__":
    main()
