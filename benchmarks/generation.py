"""Generation benchmark on vendored XQuAD: response language, citation format, chain overhead.

All figures come from one run with the bundled local model (gemma-3-270m via llama.cpp),
retrieving with ``qlang_en`` (k=3) from an index of the vendored XQuAD corpus.

1. Response-language correctness (XRAG style): share of ``answer``-format replies that
   lingua detects in the question's language, with the localized prompts against the
   same prompts in English (mRAG's "English instructions" baseline; the English
   ``answer_language`` still names the target language natively). Also character
   3-gram recall of the XQuAD gold answers (mRAG/BERGEN).
2. Citation format: how often the model writes valid ``<docN>`` citations itself, how
   often post-hoc attribution has to step in, and the parser's problem flags.
3. Chain overhead: end-to-end ``chain.invoke`` time against raw llama.cpp completing the
   exact same prompt to the same number of tokens. Target sum(chain)/sum(raw) <= 1.3.

    python benchmarks/generation.py [--per-lang 10] [--langs ar,de,en,es,ru,zh]
                                    [--latency-n 8] [--latency-reps 3] [--max-tokens 64]
                                    [--threads N]

Prints a table and writes benchmarks/results/generation.json. The defaults take about
ten minutes on 2 CPU cores.

The comparison of every local catalogue entry is benchmarks/generation_models.py.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import CACHE, bootstrap_ci, read_jsonl, write_json
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import convert_to_messages

from xlrag.chains.llms import build_llm, render_prompt
from xlrag.chains.pipeline import Pipeline
from xlrag.chains.rag import GroundedChain, base_model_messages
from xlrag.config import AnswerConfig, LLMConfig, SplitterConfig
from xlrag.demo import demo_embedder
from xlrag.detect import LinguaDetector
from xlrag.evals.answers import char3_recall
from xlrag.indexes.indexer import build_index
from xlrag.indexes.retriever import CrossLingualRetriever
from xlrag.indexes.store import LanguageStores
from xlrag.prompts import ROLES, PromptLibrary

DATA = Path(__file__).resolve().parent.parent / "xlrag" / "data" / "xquad"
INDEX = CACHE / "gen-index"
MODE, K = "qlang_en", 3
LATENCY_TARGET = 1.3
CITATION_FLAGS = ("post_hoc_citations", "invalid_citation", "prompt_echo", "truncated", "unparseable")


# -- metrics -----------------------------------------------------------------------------------


def reply_text(ans) -> str:
    """The text to judge: the parsed answer, or the whole reply when parsing found none."""
    return (ans.answer or "").strip() or ans.raw_output.strip()


# -- setup -------------------------------------------------------------------------------------


def open_retriever() -> CrossLingualRetriever:
    embedder = demo_embedder()
    t0 = time.perf_counter()
    # Idempotent: a second run finds every passage present and embeds nothing; the first is
    # cheap too, because the vendored embedding pack covers this corpus under the default splitter.
    report = build_index(DATA / "corpus.jsonl", INDEX, embedder=embedder, splitter=SplitterConfig())
    print(f"index: {report.passages} passages ({report.added} new) in {time.perf_counter() - t0:.1f}s; "
          f"per store {report.per_language}", flush=True)
    stores = LanguageStores.open(INDEX, embedder.name, embedder.dim)
    return CrossLingualRetriever(stores, embedder, MODE, k=K)


def pick_questions(langs: list[str], per_lang: int) -> dict[str, list[dict]]:
    by_lang: dict[str, list[dict]] = defaultdict(list)
    for q in read_jsonl(DATA / "queries.jsonl"):
        if q["lang"] in langs and len(by_lang[q["lang"]]) < per_lang:
            by_lang[q["lang"]].append(q)
    missing = [x for x in langs if not by_lang[x]]
    if missing:
        raise SystemExit(f"no XQuAD questions for {missing}; the vendored set has ar, de, en, es, ru, zh")
    return {x: by_lang[x] for x in langs}


def english_library(langs: list[str]) -> PromptLibrary:
    base = PromptLibrary()
    english = {role: base.get(role, "en") for role in ROLES}
    return PromptLibrary(overrides={lang: dict(english) for lang in langs})


def chain_input(q: dict) -> dict:
    # The language is given, as a caller who knows it would: detection is not under test here.
    return {"question": q["question"], "lang": q["lang"]}


def progress(label: str, done: int, total: int, t0: float) -> None:
    if done == total or done % 10 == 0:
        print(f"  {label}: {done}/{total} ({time.perf_counter() - t0:.0f}s)", flush=True)


# -- 1. response language ----------------------------------------------------------------------


def run_answers(chain, questions: dict[str, list[dict]], detector: LinguaDetector, label: str,
                reuse: dict[str, list[dict]] | None = None) -> dict[str, list[dict]]:
    rows: dict[str, list[dict]] = {}
    total = sum(len(qs) for qs in questions.values())
    done, t0 = 0, time.perf_counter()
    for lang, qs in questions.items():
        if reuse and lang in reuse:  # identical prompts and greedy decoding: identical replies
            rows[lang] = reuse[lang]
            done += len(qs)
            progress(label, done, total, t0)
            continue
        rows[lang] = []
        for q in qs:
            ans = chain.invoke(chain_input(q))
            text = reply_text(ans)
            detected = detector.detect(text) if text else None
            rows[lang].append({"id": q["id"], "answer": ans.answer, "raw_output": ans.raw_output,
                               "detected": detected, "correct_lang": detected == lang,
                               "char3_recall": char3_recall(text, q["answers"]), "flags": ans.flags})
            done += 1
            progress(label, done, total, t0)
    return rows


def _detectable(rows: list[dict]) -> float | None:
    """Correctness among replies lingua could place: numeric answers ("308") have no language."""
    seen = [r for r in rows if r["detected"] is not None]
    return sum(r["correct_lang"] for r in seen) / len(seen) if seen else None


def summarise_answers(rows: dict[str, list[dict]]) -> dict:
    out: dict = {"per_lang": {}}
    flat = [r for rs in rows.values() for r in rs]
    for lang, rs in rows.items():
        out["per_lang"][lang] = {
            "n": len(rs),
            "lang_correct": sum(r["correct_lang"] for r in rs) / len(rs),
            "lang_correct_detectable": _detectable(rs),
            "char3_recall": sum(r["char3_recall"] for r in rs) / len(rs),
            "detected": dict(Counter(str(r["detected"]) for r in rs).most_common()),
        }
    for key in ("lang_correct", "char3_recall"):
        field = "correct_lang" if key == "lang_correct" else key
        mean, lo, hi = bootstrap_ci([float(r[field]) for r in flat])
        out[key] = {"mean": mean, "ci95": [lo, hi]}
    out["n"] = len(flat)
    out["undetectable"] = sum(r["detected"] is None for r in flat) / len(flat)
    out["lang_correct_detectable"] = _detectable(flat)
    out["detected"] = dict(Counter(str(r["detected"]) for r in flat).most_common())
    return out


# -- 2. citation format ------------------------------------------------------------------------


def run_citations(chain, questions: dict[str, list[dict]]) -> tuple[dict, list[dict]]:
    rows = []
    total = sum(len(qs) for qs in questions.values())
    t0 = time.perf_counter()
    for qs in questions.values():
        for q in qs:
            ans = chain.invoke(chain_input(q))
            rows.append({
                "id": q["id"], "lang": q["lang"], "answer": ans.answer, "raw_output": ans.raw_output,
                "flags": ans.flags,
                "model_cited": any(c.source == "model" and c.valid for c in ans.citations),
                "any_citation": any(c.valid for c in ans.citations),
            })
            progress("citation", len(rows), total, t0)
    n = len(rows)
    summary = {
        "n": n,
        "model_cited": sum(r["model_cited"] for r in rows) / n,
        "no_citation_after_post_hoc": sum(not r["any_citation"] for r in rows) / n,
        **{flag: sum(flag in r["flags"] for r in rows) / n for flag in CITATION_FLAGS},
    }
    return summary, rows


# -- 3. chain overhead -------------------------------------------------------------------------


class _Capture(BaseCallbackHandler):
    """Keeps the chat messages the chain sends to the model (only on the untimed warm-up)."""

    def __init__(self) -> None:
        self.messages: list = []

    def on_chat_model_start(self, serialized, messages, **kwargs) -> None:
        self.messages = messages[0]


def spread(questions: dict[str, list[dict]], n: int) -> list[dict]:
    """``n`` questions taken round-robin over the languages."""
    langs = list(questions)
    picked = []
    for i in range(n):
        qs = questions[langs[i % len(langs)]]
        j = i // len(langs)
        if j < len(qs):
            picked.append(qs[j])
    return picked


def rebuilt_prompt(ans) -> str:
    # The local model is a base model: the chain shows it a worked example first.
    msgs, _ = base_model_messages(PromptLibrary(), ans.lang, ans.question,
                                  [h.passage.text for h in ans.passages], "answer", None)
    return render_prompt(convert_to_messages(msgs))


def _timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


def run_latency(chain, llm, questions: list[dict], warmup: dict, reps: int) -> dict:
    llama, lock = llm._load()

    # Warm-up, untimed; it also checks that the rebuilt prompt is byte-identical to the one
    # the chain sends, which is what makes the raw call a like-for-like baseline.
    capture = _Capture()
    ans = chain.invoke(chain_input(warmup), config={"callbacks": [capture]})
    if render_prompt(capture.messages) != rebuilt_prompt(ans):
        raise SystemExit("the rebuilt prompt differs from the chain's; the latency ratio would mean nothing")

    def chain_call(q: dict):
        # llama-cpp-python reuses the KV cache of the longest common prompt prefix. Without a
        # reset the raw call would find the chain's identical prompt already evaluated (and the
        # chain the previous call's shared system prompt): every timed call starts cold.
        llama.reset()
        out = _timed(lambda: chain.invoke(chain_input(q)))
        return out, llama.n_tokens

    def raw_call(prompt: str, n: int):
        llama.reset()
        with lock:  # the chain's model call takes the same lock
            out = _timed(lambda: llama.create_completion(prompt, max_tokens=n, temperature=0, stop=[]))
        return out, llama.n_tokens

    rows = []
    for q in questions:
        chain_times, raw_times = [], []
        (ans, t), kv_chain = chain_call(q)
        chain_times.append(t)
        prompt = rebuilt_prompt(ans)
        n = llm.count_tokens(ans.raw_output)
        # max_tokens <= 0 means "until the context is full" in llama.cpp; an empty reply still
        # sampled at least one token (the stop).
        want = max(n, 1)
        # Repetitions alternate the order (chain-raw, raw-chain, chain-raw, ...) so a burst of
        # load from other processes does not always hit the same side; the minimum per side is
        # the least-disturbed run.
        for rep in range(reps):
            if rep % 2 == 0 and rep:
                chain_times.append(chain_call(q)[0][1])
            (out, t), kv_raw = raw_call(prompt, want)
            raw_times.append(t)
            if rep % 2 == 1:
                chain_times.append(chain_call(q)[0][1])
        choice = out["choices"][0]
        chain_s, raw_s = min(chain_times), min(raw_times)
        rows.append({
            "id": q["id"], "lang": q["lang"], "chain_s": chain_s, "raw_s": raw_s, "ratio": chain_s / raw_s,
            "chain_times": chain_times, "raw_times": raw_times, "completion_tokens": n,
            "raw_completion_tokens": out["usage"]["completion_tokens"],
            "prompt_tokens": out["usage"]["prompt_tokens"],
            # tokens in the KV cache after each call: prompt + generated, so the chain's count
            # also shows the stop-sequence tokens it generated but its reply no longer contains
            "kv_tokens_chain": kv_chain, "kv_tokens_raw": kv_raw,
            "raw_stopped_early": choice.get("finish_reason") == "stop",
            "same_text": choice["text"].startswith(ans.raw_output),
        })
    chain_sum, raw_sum = sum(r["chain_s"] for r in rows), sum(r["raw_s"] for r in rows)
    all_chain = sum(sum(r["chain_times"]) for r in rows)
    all_raw = sum(sum(r["raw_times"]) for r in rows)
    ratio = chain_sum / raw_sum if raw_sum else float("nan")
    return {"n": len(rows), "reps": reps, "chain_s": chain_sum, "raw_s": raw_sum, "ratio": ratio,
            "ratio_all_reps": all_chain / all_raw if all_raw else float("nan"),
            "target": LATENCY_TARGET, "ok": ratio <= LATENCY_TARGET, "rows": rows}


# -- report ------------------------------------------------------------------------------------


def _f(x: float | None) -> str:
    return "  -  " if x is None else f"{x:.3f}"


def print_language_table(local: dict, english: dict) -> None:
    print("\nresponse language (format 'answer', qlang_en k=3); loc = localized prompts, "
          "eng = English prompts\n"
          "  lang-correct: reply detected in the question's language (undetectable = wrong)\n"
          "  detectable: the same among replies lingua could place (numbers have no language)")
    head = (f"{'lang':5s} {'n':>3s} | {'lang-correct':^13s} | {'detectable':^13s} | {'3-gram recall':^13s} "
            f"| detected (loc / eng)")
    sub = f"{'':5s} {'':>3s} | {'loc':>6s} {'eng':>6s} | {'loc':>6s} {'eng':>6s} | {'loc':>6s} {'eng':>6s} |"
    print(head + "\n" + sub + "\n" + "-" * len(head))
    for lang, a in local["per_lang"].items():
        b = english["per_lang"][lang]
        print(f"{lang:5s} {a['n']:3d} | {a['lang_correct']:6.3f} {b['lang_correct']:6.3f} | "
              f"{_f(a['lang_correct_detectable']):>6s} {_f(b['lang_correct_detectable']):>6s} | "
              f"{a['char3_recall']:6.3f} {b['char3_recall']:6.3f} | "
              f"{_short(a['detected'])} / {_short(b['detected'])}")
    print(f"{'all':5s} {local['n']:3d} | {local['lang_correct']['mean']:6.3f} {english['lang_correct']['mean']:6.3f} | "
          f"{_f(local['lang_correct_detectable']):>6s} {_f(english['lang_correct_detectable']):>6s} | "
          f"{local['char3_recall']['mean']:6.3f} {english['char3_recall']['mean']:6.3f} | "
          f"undetectable {local['undetectable']:.3f} / {english['undetectable']:.3f}")
    for name, s in (("localized", local), ("english", english)):
        ci, cr = s["lang_correct"]["ci95"], s["char3_recall"]["ci95"]
        print(f"  {name:9s} 95% CI: lang-correct [{ci[0]:.3f}, {ci[1]:.3f}]  3-gram recall [{cr[0]:.3f}, {cr[1]:.3f}]")


def _short(counts: dict) -> str:
    return ",".join(f"{k}:{v}" for k, v in counts.items())


def print_citation_table(s: dict) -> None:
    print(f"\ncitation format (localized prompts, n={s['n']})")
    print(f"  valid model-made citation      {s['model_cited']:.3f}")
    print(f"  needed post-hoc citations      {s['post_hoc_citations']:.3f}")
    print(f"  no citation even after post-hoc {s['no_citation_after_post_hoc']:.3f}")
    for flag in ("invalid_citation", "prompt_echo", "truncated", "unparseable"):
        print(f"  flagged {flag:22s} {s[flag]:.3f}")


def print_latency_table(lat: dict) -> None:
    print(f"\nchain vs raw llama.cpp, same prompt, same completion tokens "
          f"(n={lat['n']}, min of {lat['reps']} runs per side, cold KV cache each)")
    print(f"  {'id':30s} {'lang':4s} {'p_tok':>5s} {'c_tok':>5s} {'chain s':>8s} {'raw s':>7s} {'ratio':>6s}  note")
    for r in lat["rows"]:
        notes = []
        if r["raw_stopped_early"]:
            notes.append(f"raw hit EOS after {r['raw_completion_tokens']} tokens")
        if not r["same_text"]:
            notes.append("raw text differs from the chain's reply")
        print(f"  {r['id']:30s} {r['lang']:4s} {r['prompt_tokens']:5d} {r['completion_tokens']:5d} "
              f"{r['chain_s']:8.3f} {r['raw_s']:7.3f} {r['ratio']:6.3f}  {'; '.join(notes)}")
    print(f"  {'sum':30s} {'':4s} {'':5s} {'':5s} {lat['chain_s']:8.3f} {lat['raw_s']:7.3f} {lat['ratio']:6.3f}")
    print(f"  (sum over all runs instead of the minima: ratio {lat['ratio_all_reps']:.3f}; "
          f"load average during the runs {lat['load_before']:.2f} -> {lat['load_after']:.2f})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--per-lang", type=int, default=10, help="questions per language (the first N in the file)")
    ap.add_argument("--langs", default="ar,de,en,es,ru,zh")
    ap.add_argument("--latency-n", type=int, default=8, help="questions timed for the overhead ratio")
    ap.add_argument("--latency-reps", type=int, default=3, help="timed runs per side and question (min kept)")
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--threads", type=int, default=None, help="llama.cpp threads (default: all cores)")
    args = ap.parse_args()
    langs = [x.strip() for x in args.langs.split(",") if x.strip()]
    t_start = time.perf_counter()

    retriever = open_retriever()
    questions = pick_questions(langs, args.per_lang)
    n_q = sum(len(qs) for qs in questions.values())
    print(f"questions: {n_q} in {len(questions)} languages", flush=True)
    # gemma-3-270m: the overhead check rebuilds the base-model prompt the chain sends
    llm = build_llm(LLMConfig(model="gemma-3-270m", max_tokens=args.max_tokens, n_threads=args.threads))
    # Over all of lingua's languages, as XRAG does: an answer in a related language is wrong too.
    detector = LinguaDetector()

    localized, english = PromptLibrary(), english_library(langs)
    # Where the localized prompts already are the English ones (English itself), the two runs
    # would be identical under greedy decoding, so the English-prompt run reuses them.
    same = [x for x in langs if all(localized.get(r, x) == english.get(r, x) for r in ROLES)]

    timings: dict[str, float] = {}
    t0 = time.perf_counter()
    local_rows = run_answers(GroundedChain(pipeline=Pipeline.create(retriever, llm,
                                                                    answer=AnswerConfig(format="answer"), k=K,
                                                                    prompts=localized)),
                             questions, detector, "answer/localized")
    timings["answer_localized_s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    english_rows = run_answers(GroundedChain(pipeline=Pipeline.create(retriever, llm,
                                                                      answer=AnswerConfig(format="answer"), k=K,
                                                                      prompts=english)),
                               questions, detector, "answer/english",
                               reuse={x: local_rows[x] for x in same})
    timings["answer_english_s"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    citing = Pipeline.create(retriever, llm, answer=AnswerConfig(format="citation"), k=K, prompts=localized)
    cite_summary, cite_rows = run_citations(GroundedChain(pipeline=citing), questions)
    timings["citation_s"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    timed = spread(questions, args.latency_n)
    # The warm-up question is one that is not timed, when there is one.
    rest = [q for qs in questions.values() for q in qs if q not in timed]
    load_before = os.getloadavg()[0]
    latency = run_latency(GroundedChain(pipeline=Pipeline.create(retriever, llm, answer=AnswerConfig(format="answer"),
                                                                 k=K, prompts=localized)),
                          llm,
                          timed, (rest or timed)[0], max(args.latency_reps, 1))
    latency |= {"load_before": load_before, "load_after": os.getloadavg()[0]}
    timings["latency_s"] = time.perf_counter() - t0
    retriever.close()

    local_sum, english_sum = summarise_answers(local_rows), summarise_answers(english_rows)
    print_language_table(local_sum, english_sum)
    print_citation_table(cite_summary)
    print_latency_table(latency)

    gap = local_sum["lang_correct"]["mean"] - english_sum["lang_correct"]["mean"]
    print("\ntargets:")
    print(f"  chain / raw llama.cpp latency: {latency['ratio']:.3f}  (target <= {LATENCY_TARGET}) "
          f"{'OK' if latency['ok'] else 'MISS'}")
    print(f"  localized - english prompts, response-language correctness: {gap * 100:+.1f} pts "
          f"(informational; expected >= 0)")
    timings["total_s"] = time.perf_counter() - t_start
    print(f"\ntimings: {', '.join(f'{k} {v:.0f}' for k, v in timings.items())}")

    path = write_json("generation.json", {
        "benchmark": "xquad-generation", "model": llm.model_name, "mode": MODE, "k": K,
        "max_tokens": args.max_tokens, "threads": args.threads, "langs": langs, "per_lang": args.per_lang,
        "questions": n_q, "english_prompts_reused_for": same,
        "response_language": {"localized": local_sum, "english": english_sum,
                              "localized_minus_english": gap},
        "citation": cite_summary,
        "latency": latency,
        "timings_s": timings,
        "rows": {"answer_localized": local_rows, "answer_english": english_rows, "citation": cite_rows},
    })
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
