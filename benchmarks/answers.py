"""Answer substance (issue #20): does the answer answer, on the default local model?

100 questions: 60 XQuAD (10 in each of ar, de, en, es, ru, zh) and 40 Travel (10 in each
of the pairs en→en, en→ar, ar→en, ar→ar), over the demo index (XQuAD and Travel, shipped
embeddings). Each *arm* is one way of answering; each row one question in one arm:

- ``chain`` and ``agent`` in the IR modes ``balanced`` (what ``auto`` picks when no rule
  matches, so the default agent), ``all`` and ``qlang_en``;
- variants of the chain: k = 5 passages, the extractive instruction (put before the citation
  format's own: a short phrase taken from the document), and *pivot* (answer in the language of
  the top passage, then translate into the user's);
- issue #33, run interleaved question by question in one run: ``before`` (the prompt layout
  shipped before #33, whole passages), ``static`` (the format's instructions first, byte-identical
  across questions, so llama.cpp reuses the prefix), ``segments`` (each passage cut to its title
  and the segments nearest the question, ``context.select: segments``), with k = 5 and with the
  best passage last; the agent before and with segments.

Figures per arm, each with a 95% bootstrap CI, per source (XQuAD, Travel): right language;
non-answer rate (:func:`xlrag.checks.substance.non_answer`, refusals included); non-answers
*presented as verified* (no ``not_an_answer`` flag); char 3-gram recall and token F1 of the
answer against gold (and char 3-gram recall of answer + explanation, since Travel's gold is
a whole sentence); the calibrated panel's accuracy (``--judge``, the default panel of
:func:`xlrag.judges.panel.default_panel`, with its calibration beside it); valid model-made
citations; template copies (``prompt_echo``); seconds; prompt tokens, prompt tokens evaluated
(not restored from the prefix cache), completion tokens and time to first token (the rows made
before #33 have none).

Every model call goes through one SQLite cache, so the agent's first answer costs nothing
after the chain's (the same prompt) and a killed run resumes where it stopped.

    python benchmarks/answers.py [--arms chain/balanced,agent/balanced,...] [--limit N] [--judge]

Writes benchmarks/results/answers.json (rows and summary).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import CACHE, RESULTS, read_jsonl, write_json
from answer_arms import ARMS, ISSUE_33, MODEL, questions
from answer_figures import figures, table

from xlrag.checks.language import response_text
from xlrag.checks.substance import FLAGS, non_answer, refusal_despite_evidence
from xlrag.evals.answers import char3_recall
from xlrag.evals.scoring import score_answer
from xlrag.formats import Section
from xlrag.prompts import PromptLibrary
from xlrag.schema import GroundedAnswer

RUN = CACHE / "answers"
ROWS = "rows.jsonl"
RESULT = "answers.json"


# The extractive instruction, in English for every language: a variant under test, not yet
# a localized prompt (it becomes one, in every language file, if it wins).
EXTRACTIVE = ("Answer the question with a short phrase taken from the document that answers it: "
              "copy its words, translated into {language} if the document is in another language.")


class Answerer:
    """The loaded model, index and drivers: one of each per (mode, k, variant)."""

    def __init__(self, threads: int, arms: list[str]):
        from xlrag.chains.llms import build_llm
        from xlrag.config import LLMConfig
        from xlrag.demo import build_demo_index
        from xlrag.evals.cache import SQLiteLLMCache

        index = CACHE / "agent-index"
        if not (index / "chroma").exists():
            build_demo_index(index)
        self.index = index
        self.retrievers = arm_retrievers(index, arms)
        self.retriever = self.retrievers[None]
        RUN.mkdir(parents=True, exist_ok=True)
        self.llm_cfg = LLMConfig(model=MODEL, max_tokens=160, n_threads=threads)
        self.llm = build_llm(self.llm_cfg)
        self.llm.cache = SQLiteLLMCache(RUN / "calls.sqlite")
        # The #33 arms call the model every time: their seconds and time to first token are the
        # figures, and the agent's first answer (the chain's prompt) would be a cache hit. Only the
        # loaded models this run's arms answer with are loaded, all before the first answer, so
        # no answer's seconds include a load.
        self.uncached = {key: self._runtime(build_llm, key)
                         for key in dict.fromkeys(runtime(a) for a in arms if a in ISSUE_33)}
        self._built: dict[tuple, object] = {}

    def _runtime(self, build_llm, key: object):
        """The loaded model ``key`` (:func:`runtime`) names. Both grammar settings share one loaded
        llama.cpp model and its prefix cache (the grammar is a per-call argument), so every arm
        reads with the same prefix states available. Every other key is a loaded model of its own
        (another cache size makes another loaded model) on the runtime before #33, without the
        pinned prefix states: ``before``; prompt lookup; the agent's own clock; the fourth run's
        brief arms, so the chain's brief prompt (the clock's very prompt) cannot restore the
        clock's state; the fifth run's two arms; the sixth's; the seventh's; the eighth's; the ninth's; the tenth's."""
        if isinstance(key, bool):
            return build_llm(self.llm_cfg.model_copy(update={"grammar": key}))
        offset = {"before": 1, "lookup": 1, "own": 2, "brief": 3, "agent_brief": 4, "noopener": 5, "opener": 6,
                  "unopened": 7, "opened": 8, "chain_now": 9, "agent_now": 10,
                  "chain_now_qlang_en": 11, "chain_now_again": 12, "chain_now_shares": 13,
                  "agent_now_shares": 14, "chain_now_shares_k5": 15}[key]
        update = {"grammar": False, "prefix_cache_mb": self.llm_cfg.prefix_cache_mb - offset}
        if key == "lookup":
            update["draft"] = "prompt_lookup"
        llm = build_llm(self.llm_cfg.model_copy(update=update))
        llm.native()[0].pinned = None
        return llm

    def driver(self, name: str):
        # keyed by name: two arms may be equal tuples (chain/before is chain/balanced, answered
        # without the answer cache)
        arm = ARMS[name]
        if name not in self._built:
            from xlrag.agents.build import build_agent
            from xlrag.chains.rag import GroundedChain

            llm_cfg, llm = self.llm_cfg, self.llm
            if name in ISSUE_33:
                llm_cfg = self.llm_cfg.model_copy(update={"grammar": arm.grammar})
                # the model call is made again, not read from the call cache: a reproduction
                llm = self.uncached[runtime(name)]
            cfg, pipeline = arm_pipeline(name, index=self.index, llm_cfg=llm_cfg, llm=llm,
                                         retriever=self.retrievers[arm.margin])
            self._built[name] = (build_agent(cfg, pipeline=pipeline) if arm.driver == "agent"
                                else GroundedChain(pipeline=pipeline, name="xlrag_citation"))
        return self._built[name]

    def answer(self, name: str, q: dict) -> tuple[object, object | None]:
        arm = ARMS[name]
        run = self.driver(name)
        if arm.driver == "agent":
            out = run.invoke({"question": q["question"], "lang": q["lang"]})
            return out["answer"], out["trace"]
        if arm.variant == "pivot":
            return self._pivot(run, q, arm.mode, arm.k), None
        return run.invoke({"question": q["question"], "lang": q["lang"]}), None

    def _pivot(self, chain, q: dict, mode: str, k: int):
        """Answer in the top passage's language over the same passages, then translate."""
        from xlrag.chains.translator import LLMTranslator

        hits, first = pivot_input(self.retriever, q, mode, k)
        ans = chain.invoke(first)
        if first["lang"] == q["lang"] or not ans.answer:
            return ans.model_copy(update={"lang": q["lang"], "passages": hits})
        tr = LLMTranslator(llm=self.llm)
        update = {"answer": tr.translate(ans.answer, first["lang"], q["lang"]), "lang": q["lang"], "passages": hits,
                  "flags": [*ans.flags, "translated"], "explanation": None}
        return ans.model_copy(update=update)


def arm_retrievers(index: Path, arms: list[str]) -> dict:
    """One retriever over ``index`` per share margin the ``arms`` name (None: every store its
    share, as every arm before the ninth run was made; the ninth run's: retrieval.share_margin)."""
    from xlrag.demo import demo_embedder
    from xlrag.indexes.retriever import CrossLingualRetriever
    from xlrag.indexes.store import LanguageStores

    embedder = demo_embedder()
    stores = LanguageStores.open(index, embedder.name, embedder.dim)
    return {m: CrossLingualRetriever(stores, embedder, "balanced", k=3, share_margin=m)
            for m in dict.fromkeys([None, *(ARMS[a].margin for a in arms)])}


def pivot_input(retriever, q: dict, mode: str, k: int) -> tuple[list, dict]:
    """The pivot arm's hits and its first call's input: the question over the passages
    retrieved for it, to be answered in the top passage's language."""
    from xlrag.schema import make_query

    query = retriever.prepare(make_query(q["question"], lang=q["lang"]))
    hits = retriever.retrieve(query, mode=mode, k=k)
    # a list of hits before #54, a Retrieval model since (read by request_fingerprint.py at both)
    hits = list(getattr(hits, "hits", hits))
    top = hits[0].lang if hits else q["lang"]
    return hits, {"question": q["question"], "lang": top, "passages": [h.passage for h in hits]}


def arm_pipeline(name: str, *, index: Path, llm_cfg, llm, retriever) -> tuple[object, object]:
    """The config and the pipeline arm ``name`` answers through (an agent arm's agent is built
    over it): the one place an arm's settings become a stack, so what an arm sends the model can
    be fingerprinted without running it (``request_fingerprint.py --questions answers``)."""
    from xlrag.chains.pipeline import Pipeline
    from xlrag.config import XlragConfig

    arm = ARMS[name]
    shipped = PromptLibrary()
    overrides = {}
    if arm.variant == "extractive":
        from xlrag.languages import display_name

        # the citation format's instruction, extractive first; the format itself is kept
        overrides = {lang: {"citation_format": f"{EXTRACTIVE.format(language=display_name(lang))}\n"
                                               f"{shipped.get('citation_format', lang)}"}
                     for lang in shipped.languages()}
    if arm.variant == "opener":
        # the words the shipped setting writes: each language's own, English's empty
        overrides = {lang: {"citation_format": with_opener(shipped.get("citation_format", lang), word)}
                     for lang in shipped.languages() if (word := shipped.own("explanation_opener", lang))}
    cfg = XlragConfig(index_dir=index, llm=llm_cfg, agent={"mode": arm.mode},
                      retrieval={"k": arm.k, "share_margin": arm.margin},
                      context={"select": arm.context, "order": arm.order, "layout": arm.layout},
                      answer={"explanation": arm.explanation, "explanation_opener": arm.opener})
    mode = "auto" if arm.driver == "agent" else arm.mode
    return cfg, Pipeline.from_config(cfg, llm=llm, retriever=retriever, mode=mode,
                                     prompts=PromptLibrary(overrides=overrides))


def with_opener(template: str, word: str) -> str:
    """The citation template with its last line, the explanation header, followed by ``word``."""
    head, _, last = template.rstrip().rpartition("\n")
    assert last == Section.EXPLANATION.header, last
    return f"{head}\n{last} {word}"


def runtime(name: str) -> object:
    """Which loaded model an issue-#33 arm answers with (a key of ``Answerer.uncached``)."""
    arm = ARMS[name]
    if arm.draft != "none":
        return "lookup"
    if name.split("/")[1] == "now":  # the seventh run's arms and later: a loaded model each
        return name.replace("/", "_")
    if name.endswith(("/own", "/noopener", "/opener", "/unopened", "/opened")):
        return name.rsplit("/", 1)[1]
    if not arm.explanation:
        return "agent_brief" if arm.driver == "agent" else "brief"
    return "before" if "/before" in name else arm.grammar


def row(arm: str, q: dict, answer, trace, seconds: float) -> dict:
    score = asyncio.run(score_answer(answer, q["question"], q["gold"], q["lang"]))  # the panel: judge_rows
    said = answer.answer if answer.answered else response_text(answer)
    top = answer.passages[0].passage.text if answer.passages else None
    says_nothing = not (non_answer(said, q["question"], q["lang"]).passed
                        and refusal_despite_evidence(said, q["question"], top, q["lang"]).passed)
    flagged = FLAGS["non_answer"] in answer.flags
    return {"arm": arm, "id": q["id"], "lang": q["lang"], "source": q["source"], "seconds": seconds,
            "question": q["question"], "gold": q["gold"], "answer": answer.answer,
            "explanation": answer.explanation, "flags": list(answer.flags),
            "language": score.language.status, "lang_correct": score.language.correct,
            "non_answer": says_nothing, "non_answer_verified": says_nothing and not flagged,
            "char3": score.metrics.char3_recall,
            "char3_response": char3_recall(response_text(answer), q["gold"]),
            "f1": score.metrics.f1,
            "model_cited": any(c.valid and c.source == "model" for c in answer.citations),
            "invalid_citation": any(not c.valid for c in answer.citations),
            "shown_langs": [h.lang for h in answer.passages],
            # which passages: a rerun that answers differently can then say whether the prompt changed
            "shown_ids": [h.passage.id for h in answer.passages],
            "usage": answer.usage.model_dump() if answer.usage else None,
            "repairs": [r.repair.value for r in trace.repairs] if trace else [],
            "unrepaired": list(trace.unrepaired) if trace else []}


def stored_answer(r: dict) -> GroundedAnswer:
    """A row's answer as :func:`score_answer` reads it: the answer and the explanation are all
    it scores (the raw output only stands in for a reply that holds no answer, scored empty)."""
    mode = ARMS[r["arm"]].mode
    return GroundedAnswer(question=r["question"], lang=r["lang"], format="citation", mode=mode, model=MODEL,
                          answer=r["answer"], explanation=r["explanation"])


async def judge_rows(rows: list[dict], again: bool = False) -> None:
    """The calibrated default panel's verdict on every row not judged yet (cached calls); with
    ``again``, on every row: a judge that changed need not make the answers again."""
    from xlrag.evals.cache import SQLiteLLMCache
    from xlrag.judges.panel import JudgePanel, default_panel

    panel = JudgePanel(default_panel())
    cache = SQLiteLLMCache(RUN / "judge_calls.sqlite")
    for m in panel.models():
        if hasattr(m, "cache"):
            m.cache = cache
    todo = [r for r in rows if again or "panel" not in r]
    for i, r in enumerate(todo, 1):
        judges = (await score_answer(stored_answer(r), r["question"], r["gold"], r["lang"], panel)).judges
        r["panel"] = judges.verdict
        r["panel_final"] = judges.final
        r["votes"] = [{"judge": v.judge, "vote": v.verdict} for v in judges.votes]
        recheck(r)
        print(f"\rjudged {i}/{len(todo)}", end="", flush=True)
    print()


def recheck(r: dict) -> None:
    """A row's non-answer figures with today's substance check on its stored answer: a row made
    before the check learnt a spelling (an Arabic question repeated with its hamzas restored
    passed as an answer, and as a verified one) counts as the check reads it now. What the chain
    flagged when it answered stays as it was; the refusal part needs the passage shown, which a
    row does not keep, so a row's earlier verdict on it stands, and so does the verdict on a row
    that kept no answer or explanation (the check read the raw reply, which a row does not keep).
    The verdict made with the answer stays in ``non_answer_at_run``."""
    at_run = r.setdefault("non_answer_at_run", r["non_answer"])
    if not (r["answer"] or r["explanation"]):
        return
    answer = stored_answer(r)
    said = answer.answer if answer.answered else response_text(answer)
    says_nothing = at_run or not non_answer(said, r["question"], r["lang"]).passed
    r["non_answer"] = says_nothing
    r["non_answer_verified"] = says_nothing and FLAGS["non_answer"] not in r["flags"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--arms", default=",".join(ARMS), help="comma-separated, from: " + ", ".join(ARMS))
    ap.add_argument("--limit", type=int, default=None, help="questions in all (a trial run); default 100")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--judge", action="store_true", help="judge the rows with the calibrated default panel")
    ap.add_argument("--rejudge", action="store_true",
                    help="judge every row made so far again (a changed judge), making no new answers")
    args = ap.parse_args()
    arms = [a.strip() for a in args.arms.split(",") if a.strip()]
    unknown = [a for a in arms if a not in ARMS]
    if unknown:
        sys.exit(f"unknown arm(s) {unknown}; choose from {', '.join(ARMS)}")

    path = RUN / ROWS
    RUN.mkdir(parents=True, exist_ok=True)
    if not path.exists() and (RESULTS / RESULT).exists():
        # a new machine resumes from the committed rows
        saved = json.loads((RESULTS / RESULT).read_text(encoding="utf-8"))
        path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in saved["rows"]), encoding="utf-8")
    rows = read_jsonl(path) if path.exists() else []
    done = {(r["arm"], r["id"]) for r in rows}
    qs = questions(args.limit)
    # question by question, every arm in turn: a load that changes during the run (the machine
    # is shared) falls on every arm alike, so the arms' times compare
    # Stratum by stratum in turn (the 6 XQuAD languages, the 4 Travel pairs), so a run stopped
    # early is still a sample of every stratum and resumes where it stopped.
    strata: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for q in qs:
        strata[q["stratum"]].append(q)
    qs = [q for rnd in zip(*strata.values(), strict=True) for q in rnd]
    todo = [] if args.rejudge else [(a, q) for q in qs for a in arms if (a, q["id"]) not in done]
    if todo:
        answerer = Answerer(args.threads, arms)
        t_all = time.perf_counter()
        with path.open("a", encoding="utf-8") as fh:
            for i, (arm, q) in enumerate(todo, 1):
                t0 = time.perf_counter()
                answer, trace = answerer.answer(arm, q)
                r = row(arm, q, answer, trace, time.perf_counter() - t0)
                rows.append(r)
                fh.write(json.dumps(r, ensure_ascii=False) + "\n")
                fh.flush()
                print(f"\r{arm} {i}/{len(todo)} {time.perf_counter() - t_all:.0f}s", end="", flush=True)
        print()
        for r in answerer.retrievers.values():
            r.close()
    if args.judge or args.rejudge:
        asyncio.run(judge_rows(rows, again=args.rejudge))
        path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    # the benchmark's questions, whatever --limit this run had: the tables pair rows of earlier runs too
    result = {"benchmark": "answers", "model": MODEL, "questions": len(questions()),
              "arms": {a: ARMS[a]._asdict() for a in ARMS}, **figures(rows), "rows": rows}
    for cmp in result["issue_33"].values():
        print(table(cmp))
    print("hand-labelled Travel check:", json.dumps(result["hand_check"], ensure_ascii=False))
    out = write_json(RESULT, result)
    print(json.dumps(result["summary"], indent=1, ensure_ascii=False)[:4000])
    print(f"written {out}")


if __name__ == "__main__":
    main()
