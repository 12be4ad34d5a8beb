"""What the pipeline sends the model, fingerprinted: a refactor that should change nothing shows
the same digests.

Every demo question (five languages) in each of its IR modes and in each answer format goes
through ``Pipeline.from_config`` (the default config over the demo index) up to the request:
language, mode, retrieval, the passage steps, the localized prompt. Each request's passages,
messages and call options (names and values) are hashed; no model is run (a scripted chat
model stands in, and prepare stops before it). Run at two commits and compare ``digest``: equal
digests mean every answer benchmark sends the same prompts over the same passages, so its
committed figures stand.

``--questions answers`` does the same for ``answers.py``: its 100 questions through every arm's
own stack (``answers.arm_pipeline``: mode, k, share margin, context, layout, explanation,
opener, the extractive and opener prompts; the pivot arm's first call over the passages it
retrieves), up to each arm's first request. Arms whose settings send the same request are
fingerprinted once. What it does not cover: the LLM's own settings (grammar, prompt lookup,
prefix-cache sizes), the agent's later turns and its route (an agent arm is fingerprinted in
its arm's mode) and the pivot's translation. ``--questions generation`` does it for
``generation_models.py``: its 100 questions through each configuration's chain (the provider's
profile, the worked example shown or not; qlang_en, k=3, citation). ``--against FILE`` names
the arms and questions whose request differs from FILE's, and whether the passages differ too.

    python benchmarks/request_fingerprint.py [--questions demo|answers|generation] [--out FILE]
                                             [--against FILE]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import write_json
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel

import xlrag
from xlrag.chains.pipeline import Pipeline
from xlrag.config import XlragConfig
from xlrag.demo import DEMO_QUESTIONS, build_demo_index

FORMATS = ("citation", "answer")


def _digest(value: object) -> str:
    return hashlib.sha256(json.dumps(value, ensure_ascii=False, sort_keys=True).encode()).hexdigest()


def _sent(state) -> dict:
    request = state.request
    assert request is not None
    # a passage by its document and text: its id holds a digest of the corpus file's path,
    # which differs between two checkouts
    return {"passages": [[h.doc_id, _digest(h.passage.text)] for h in state.hits],
            "messages": [(m.type, m.content) if hasattr(m, "type") else list(m) for m in request.messages],
            # the call options' values too (stop sequences, a vendor's documents): they shape the reply
            "kwargs": json.loads(json.dumps(request.kwargs, ensure_ascii=False, sort_keys=True, default=str))}


def _shown(state) -> dict:
    """The passages shown, for a reader (documents) and for comparing: two passages of one
    document (another part of a long Travel page) are other passages."""
    return {"passages": [h.doc_id for h in state.hits], "texts": [_digest(h.passage.text)[:12] for h in state.hits]}


def demo_rows(index: Path) -> list[dict]:
    rows = []
    cfg = XlragConfig(index_dir=index)
    for fmt in FORMATS:
        pipeline = Pipeline.from_config(cfg, llm=GenericFakeChatModel(messages=iter([])), fmt=fmt)
        try:
            for q in DEMO_QUESTIONS:
                for mode in q.modes:
                    inp = {"question": q.text, "lang": q.lang, "mode": mode,
                           **({"relevant_langs": list(q.relevant_langs)} if q.relevant_langs else {})}
                    state = pipeline.prepare(inp)
                    rows.append({"format": fmt, "lang": q.lang, "mode": mode,
                                 **_shown(state), "digest": _digest(_sent(state))})
        finally:
            pipeline.close()
    return rows


def answer_rows(index: Path, arms: list[str]) -> list[dict]:
    from answer_arms import ARMS, MODEL, questions
    from answers import arm_pipeline, arm_retrievers, pivot_input

    from xlrag.config import LLMConfig

    retrievers = arm_retrievers(index, arms)
    llm_cfg = LLMConfig(model=MODEL, max_tokens=160)
    qs = questions()
    rows, done = [], {}
    try:
        for name in arms:
            arm = ARMS[name]
            # what reaches the request; grammar and draft are the LLM's, the driver the agent's
            key = arm._replace(driver="chain", grammar=False, draft="none")
            if key in done:
                rows += [{**r, "arm": name, "same_as": done[key]} for r in rows if r["arm"] == done[key]]
                continue
            done[key] = name
            _, pipeline = arm_pipeline(name, index=index, llm_cfg=llm_cfg, llm=GenericFakeChatModel(messages=iter([])),
                                       retriever=retrievers[arm.margin])
            for q in qs:
                inp = {"question": q["question"], "lang": q["lang"], "mode": arm.mode}
                if arm.variant == "pivot":
                    inp = pivot_input(retrievers[arm.margin], q, arm.mode, arm.k)[1]
                state = pipeline.prepare(inp)
                rows.append({"arm": name, "id": q["id"], "lang": q["lang"],
                             **_shown(state), "digest": _digest(_sent(state))})
            print(f"  {name}: {len(qs)} requests", flush=True)
    finally:
        for r in retrievers.values():
            r.close()
    return rows


def _generation_pipeline(retriever, llm, few_shot: bool | None):
    """generation_models.py's pipeline at either side of #54, which replaced build_chain."""
    from generation_models import K, pipeline_for

    try:
        from xlrag.chains.rag import build_chain  # type: ignore[attr-defined]
    except ImportError:
        return pipeline_for(retriever, llm, few_shot)
    return build_chain(retriever, llm, fmt="citation", k=K, few_shot=few_shot).pipeline


def generation_rows(index: Path) -> list[dict]:
    import os

    from generation import MODE, K, chain_input
    from generation_models import DEFAULT_CONFIGS, bench_questions, config_settings

    from xlrag.chains.llms import build_llm
    from xlrag.demo import demo_embedder
    from xlrag.indexes.retriever import CrossLingualRetriever
    from xlrag.indexes.store import LanguageStores

    embedder = demo_embedder()
    retriever = CrossLingualRetriever(LanguageStores.open(index, embedder.name, embedder.dim), embedder, MODE, k=K)
    xq, travel = bench_questions(10, 20)
    os.environ.setdefault("OPENAI_API_KEY", "not-needed")  # the client is built, never called
    rows = []
    try:
        for config in DEFAULT_CONFIGS.split(","):
            # a base URL nothing listens on: the server's client is built, never called
            cfg, few_shot, sets = config_settings(config, max_tokens=96, threads=2, base_url="http://127.0.0.1:9/v1")
            # the model the benchmark builds, for its metadata (provider, profile): never loaded
            fake = GenericFakeChatModel(messages=iter([]), metadata=build_llm(cfg).metadata)
            pipeline = _generation_pipeline(retriever, fake, few_shot)
            for q in xq + travel:
                if q["set"] in sets:
                    state = pipeline.prepare(chain_input(q))
                    rows.append({"arm": config, "id": q["id"], "lang": q["lang"],
                                 **_shown(state), "digest": _digest(_sent(state))})
            print(f"  {config}: {sum(r['arm'] == config for r in rows)} requests", flush=True)
    finally:
        retriever.close()
    return rows


def compare(rows: list[dict], other: dict) -> dict:
    """Per arm (or demo request), the questions whose request differs from ``other``'s, and
    of those, the ones whose passages differ too."""
    def key(r: dict) -> tuple:
        return (r["arm"], r["id"]) if "arm" in r else (r["format"], r["lang"], r["mode"])

    theirs = {key(r): r for r in other["rows"]}
    out: dict = {"against": other.get("commit"), "missing": sorted(map(str, set(theirs) - {key(r) for r in rows})),
                 "arms": {}}
    for r in rows:
        t = theirs.get(key(r))
        arm = out["arms"].setdefault(r.get("arm", r.get("format")), {"n": 0, "differ": [], "passages_differ": []})
        arm["n"] += 1
        if t is None or t["digest"] != r["digest"]:
            arm["differ"].append(r.get("id", key(r)))
            if t is None or (t["passages"], t.get("texts")) != (r["passages"], r.get("texts")):
                arm["passages_differ"].append(r.get("id", key(r)))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--questions", choices=["demo", "answers", "generation"], default="demo")
    ap.add_argument("--arms", default=None, help="answers: comma-separated arms (default: every arm)")
    ap.add_argument("--out", default=None, help="default: request_fingerprint.json (demo), "
                                                "request_fingerprint_<questions>.json (the others)")
    ap.add_argument("--against", type=Path, default=None, help="a result of another commit to compare with")
    args = ap.parse_args()
    if args.arms and args.questions != "answers":
        ap.error("--arms goes with --questions answers")
    against = json.loads(args.against.read_text(encoding="utf-8")) if args.against else None
    with tempfile.TemporaryDirectory() as tmp:
        index = Path(tmp) / "index"
        build_demo_index(index)
        if args.questions == "demo":
            rows = demo_rows(index)
        elif args.questions == "generation":
            rows = generation_rows(index)
        else:
            from answer_arms import ARMS

            arms = args.arms.split(",") if args.arms else list(ARMS)
            if unknown := [a for a in arms if a not in ARMS]:
                ap.error(f"unknown arms {unknown}; choose from {', '.join(ARMS)}")
            rows = answer_rows(index, arms)
    # the commit of the xlrag imported (run a checkout's package with this script: PYTHONPATH=...)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            cwd=Path(xlrag.__file__).resolve().parent).stdout.strip()
    out = {"commit": commit, "questions": args.questions, "requests": len(rows),
           "digest": _digest([r["digest"] for r in rows]), "rows": rows}
    if against is not None:
        out["compared"] = compare(rows, against)
        for arm, c in out["compared"]["arms"].items():
            print(f"  {arm}: {len(c['differ'])} of {c['n']} requests differ, "
                  f"{len(c['passages_differ'])} with other passages", flush=True)
    write_json(args.out or {"demo": "request_fingerprint.json"}.get(args.questions,
                                                                    f"request_fingerprint_{args.questions}.json"), out)
    print(f"{len(rows)} requests, digest {out['digest'][:16]} ({commit})")


if __name__ == "__main__":
    main()
