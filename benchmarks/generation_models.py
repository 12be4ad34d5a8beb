"""Every local catalogue entry on the same questions, through the public chain (issue #7).

Configurations are model names from the catalogue, optionally with ``:shot`` or
``:noshot`` (worked example shown or not; without a suffix, the entry's default), and
``server:shot`` / ``server:noshot``: the 0.5B model behind ``llama_cpp.server``, reached
through the ``openai`` provider (the XQuAD questions only).

Questions are interleaved: for each question every configuration answers in turn, so
load from anything else on the machine spreads over all of them alike, and the seconds
per answer are comparable within the run. Results are written after every 10 questions.

Per configuration, per set and language, with 95% bootstrap CIs:
- answered: the reply has an answer section and is not a copy of the template;
- response-language correctness over answered replies (xlrag.checks.language: lingua over
  the answer and the explanation, <docN> markers, URLs and headers stripped; replies with
  no words, "308", are counted apart as not applicable);
- character 3-gram recall and whether the gold answer string appears (xlrag.evals.answers);
- valid model-made citation rate; seconds per answer.

    python benchmarks/generation_models.py [--xquad-per-lang 10] [--travel-per-lang 20]
                                           [--configs gemma-3-270m,qwen2.5-coder-1.5b-instruct:noshot,...]
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import CACHE, SHARED, bootstrap_ci, read_jsonl, write_json
from generation import DATA, MODE, K, chain_input, pick_questions

from xlrag.chains.llms import build_llm
from xlrag.chains.pipeline import Pipeline
from xlrag.chains.rag import GroundedChain
from xlrag.checks.language import judge_language, language_summary, response_text
from xlrag.config import AnswerConfig, LLMConfig
from xlrag.detect import LinguaDetector
from xlrag.evals.answers import char3_recall

DEFAULT_CONFIGS = ("gemma-3-270m,qwen2.5-coder-0.5b-instruct:shot,qwen2.5-coder-0.5b-instruct:noshot,"
                   "qwen2.5-coder-1.5b-instruct:shot,qwen2.5-coder-1.5b-instruct:noshot,server:shot,server:noshot")
SERVER_MODEL = "qwen2.5-coder-0.5b-instruct"
METRICS = ("answered", "lang_correct", "char3_recall", "gold_in_answer", "model_cited", "seconds")


def travel_questions(per_lang: int) -> list[dict]:
    shared = SHARED / "travel" / "queries.jsonl"
    path = shared if shared.exists() else DATA.parent / "travel" / "queries.jsonl"
    by_lang: dict[str, list[dict]] = defaultdict(list)
    for q in read_jsonl(path):
        if q["lang"] in ("ar", "en") and len(by_lang[q["lang"]]) < per_lang:
            by_lang[q["lang"]].append({"id": q["id"], "question": q["question"], "lang": q["lang"],
                                       "answers": [q["answer"]], "set": "travel"})
    return [q for lang in ("ar", "en") for q in by_lang[lang]]


def _fold(text: str) -> str:
    return " ".join(text.lower().split())


def gold_in(answer: str, golds: list[str]) -> bool:
    have = _fold(answer)
    return any(_fold(g) and _fold(g) in have for g in golds)


def judge(ans, q: dict, detector: LinguaDetector, seconds: float) -> dict:
    # A reply that copied the template, or that has no answer section, is not an answer: its
    # language is not scored (it would count a copied template as "in the right language").
    answered = bool(ans.answer) and "prompt_echo" not in ans.flags
    verdict = judge_language(response_text(ans) if answered else "", q["lang"], detector)
    answer = ans.answer or ""
    return {"id": q["id"], "set": q.get("set", "xquad"), "lang": q["lang"], "seconds": seconds,
            "answer": ans.answer, "explanation": ans.explanation, "raw_output": ans.raw_output,
            "flags": ans.flags, "answered": answered, "language": verdict.model_dump(exclude={"text"}),
            "lang_correct": verdict.correct, "char3_recall": char3_recall(answer, q["answers"]),
            "gold_in_answer": gold_in(answer, q["answers"]),
            "model_cited": any(c.source == "model" and c.valid for c in ans.citations)}


def summarise(rows: list[dict]) -> dict:
    def block(rs: list[dict]) -> dict:
        out: dict = {"n": len(rs)}
        for m in METRICS:
            # lang_correct: over replies that have a language (None = numbers only)
            vals = [float(r[m]) for r in rs if r[m] is not None]
            mean, lo, hi = bootstrap_ci(vals)
            out[m] = {"mean": mean, "ci95": [lo, hi], "n": len(vals)}
        from xlrag.checks.language import LanguageVerdict

        out["language"] = language_summary(LanguageVerdict(text="", **r["language"]) for r in rs)
        return out

    groups: dict[str, list[dict]] = defaultdict(list)
    for r in rows:
        groups[f"{r['set']}-{r['lang']}"].append(r)
    return {"all": block(rows), "per_lang": {k: block(v) for k, v in sorted(groups.items())}}


def start_server(model_path: str, threads: int) -> tuple[subprocess.Popen, str]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if "proxy" not in k.lower()}
    proc = subprocess.Popen([sys.executable, "-m", "llama_cpp.server", "--model", model_path,
                             "--host", "127.0.0.1", "--port", str(port), "--n_ctx", "4096",
                             "--n_threads", str(threads), "--seed", "0", "--verbose", "False"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    base = f"http://127.0.0.1:{port}/v1"
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    for _ in range(600):
        if proc.poll() is not None:
            raise SystemExit("llama_cpp.server exited early")
        try:
            with opener.open(f"{base}/models", timeout=2):
                return proc, base
        except OSError:
            time.sleep(0.2)
    proc.kill()
    raise SystemExit("llama_cpp.server did not start")


def bench_questions(xquad_per_lang: int, travel_per_lang: int) -> tuple[list[dict], list[dict]]:
    """The XQuAD questions (``per_lang`` in each of the six languages) and the Travel ones."""
    xq = [dict(q, set="xquad") for qs in pick_questions(["ar", "de", "en", "es", "ru", "zh"],
                                                         xquad_per_lang).values() for q in qs]
    return xq, travel_questions(travel_per_lang)


def config_settings(config: str, *, max_tokens: int, threads: int,
                    base_url: str | None = None) -> tuple[LLMConfig, bool | None, set[str]]:
    """A configuration's LLM settings, whether its worked example is shown, and the question
    sets it answers; ``server:*`` reaches the llama_cpp.server at ``base_url``."""
    from xlrag.chains.local.catalogue import CATALOGUE

    name, _, variant = config.partition(":")
    few_shot: bool | None = {"shot": True, "noshot": False, "": None}[variant]
    if name == "server":
        if base_url is None:
            raise ValueError(f"{config}: the server's base_url is needed")
        cfg = LLMConfig(provider="openai", base_url=base_url, model=SERVER_MODEL, max_tokens=max_tokens, timeout=600)
        return cfg, few_shot, {"xquad"}  # the OpenAI-compatible path: the XQuAD questions
    if few_shot is None:
        few_shot = CATALOGUE[name].few_shot
    return LLMConfig(model=name, max_tokens=max_tokens, n_threads=threads), few_shot, {"xquad", "travel"}


def pipeline_for(retriever, llm, few_shot: bool | None) -> Pipeline:
    """The chain's pipeline: citation format, ``qlang_en``, k = 3."""
    return Pipeline.create(retriever, llm, answer=AnswerConfig(format="citation"), k=K, few_shot=few_shot)


def make_config(config: str, args, retriever, servers: list) -> dict:
    from xlrag.chains.local.runtime import bundled_model_path

    base = None
    if config.partition(":")[0] == "server":
        if not servers:
            servers.append(start_server(bundled_model_path(SERVER_MODEL), args.threads))
        base = servers[0][1]
        os.environ.setdefault("OPENAI_API_KEY", "not-needed")
    cfg, few_shot, sets = config_settings(config, max_tokens=args.max_tokens, threads=args.threads, base_url=base)
    chain = GroundedChain(pipeline=pipeline_for(retriever, build_llm(cfg), few_shot))
    return {"name": config, "cfg": cfg, "few_shot": few_shot, "sets": sets, "chain": chain, "rows": []}


def main(argv: list[str] | None = None) -> None:
    from xlrag.demo import build_demo_index, demo_embedder
    from xlrag.indexes.retriever import CrossLingualRetriever
    from xlrag.indexes.store import LanguageStores

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--xquad-per-lang", type=int, default=10)
    ap.add_argument("--travel-per-lang", type=int, default=20)
    ap.add_argument("--max-tokens", type=int, default=96)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--configs", default=DEFAULT_CONFIGS)
    ap.add_argument("--out", default="generation_models.json")
    args = ap.parse_args(argv)

    index = CACHE / "gen-models-index"
    build_demo_index(index)  # the demo corpora (XQuAD + Travel), embeddings vendored
    embedder = demo_embedder()
    stores = LanguageStores.open(index, embedder.name, embedder.dim)
    retriever = CrossLingualRetriever(stores, embedder, MODE, k=K)
    xq, travel = bench_questions(args.xquad_per_lang, args.travel_per_lang)
    questions = xq + travel
    detector = LinguaDetector()
    servers: list = []
    configs = [make_config(c, args, retriever, servers) for c in args.configs.split(",") if c]
    result: dict = {"benchmark": "generation-models", "mode": MODE, "k": K, "format": "citation",
                    "max_tokens": args.max_tokens, "threads": args.threads, "nice": os.nice(0),
                    "interleaved": True, "questions": {"xquad": len(xq), "travel": len(questions) - len(xq)},
                    "configs": {}}
    try:
        for c in configs:  # untimed warm-up: model load and first-call costs
            c["chain"].invoke(chain_input(questions[-1] if "travel" in c["sets"] else xq[-1]))
        t0, load0 = time.perf_counter(), os.getloadavg()[0]
        for i, q in enumerate(questions, 1):
            for c in configs:
                if q["set"] not in c["sets"]:
                    continue
                t = time.perf_counter()
                ans = c["chain"].invoke(chain_input(q))
                c["rows"].append(judge(ans, q, detector, time.perf_counter() - t))
            if i % 10 == 0 or i == len(questions):
                print(f"  {i}/{len(questions)} questions ({time.perf_counter() - t0:.0f}s)", flush=True)
                for c in configs:
                    result["configs"][c["name"]] = {
                        "llm": c["cfg"].model_dump(mode="json"), "few_shot": c["few_shot"],
                        "complete": i == len(questions), "load_start": load0, "load_now": os.getloadavg()[0],
                        "summary": summarise(c["rows"]) if c["rows"] else None, "rows": c["rows"]}
                write_json(args.out, result)
    finally:
        for proc, _ in servers:
            proc.terminate()
            proc.wait(timeout=30)
        retriever.close()
    for c in configs:
        a = result["configs"][c["name"]]["summary"]["all"]
        print(f"{c['name']:38s} " + "  ".join(f"{m} {a[m]['mean']:.3f}" for m in METRICS), flush=True)


if __name__ == "__main__":
    main()
