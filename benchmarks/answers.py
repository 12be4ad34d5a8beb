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
:func:`xlrag.evals.judges.default_panel`, with its calibration beside it); valid model-made
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
import random
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import NamedTuple

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import CACHE, HERE, RESULTS, bootstrap_ci, read_jsonl, write_json

from xlrag.checks.language import response_text
from xlrag.checks.substance import FLAGS, non_answer, refusal_despite_evidence
from xlrag.evals.answers import char3_recall
from xlrag.evals.scoring import score_answer
from xlrag.formats import Section
from xlrag.prompts import PromptLibrary
from xlrag.schema import GroundedAnswer

ROOT = HERE.parent
XQUAD_LANGS = ("ar", "de", "en", "es", "ru", "zh")
TRAVEL_PAIRS = (("en", "en"), ("en", "ar"), ("ar", "en"), ("ar", "ar"))
MODEL = "qwen2.5-coder-1.5b-instruct"
RUN = CACHE / "answers"
ROWS = "rows.jsonl"
RESULT = "answers.json"

class Arm(NamedTuple):
    driver: str  # chain | agent
    mode: str  # the IR mode
    k: int  # passages shown
    variant: str = "plain"  # plain | extractive | pivot | opener (the explanation opened in the user's language)
    layout: str = "static_first"  # context.layout: static_first | documents_first (the default before #33)
    context: str = "whole"  # context.select: whole | segments
    order: str = "best_first"  # context.order
    grammar: bool = False  # llm.grammar: the reply held to its format, the explanation one sentence
    draft: str = "none"  # llm.draft: none | prompt_lookup
    explanation: bool = True  # answer.explanation: false stops the reply at its explanation header
    opener: bool = False  # answer.explanation_opener: "because" written after the answer line
    margin: float | None = None  # retrieval.share_margin (balanced); None: every store its share, as
    # every arm before the ninth run was made


# The arms made before issue #33 ran with the layout of their day, documents first; their rows
# are kept as they were made. The #33 arms run interleaved, question by question, in one run:
# ``before`` is the configuration shipped before #33 on today's retrieval.
ARMS: dict[str, Arm] = {
    "chain/balanced": Arm("chain", "balanced", 3, layout="documents_first"),
    "agent/balanced": Arm("agent", "balanced", 3, layout="documents_first"),
    "chain/all": Arm("chain", "all", 3, layout="documents_first"),
    "agent/all": Arm("agent", "all", 3, layout="documents_first"),
    "chain/qlang_en": Arm("chain", "qlang_en", 3, layout="documents_first"),
    "agent/qlang_en": Arm("agent", "qlang_en", 3, layout="documents_first"),
    "chain/balanced/k5": Arm("chain", "balanced", 5, layout="documents_first"),
    "chain/balanced/extractive": Arm("chain", "balanced", 3, "extractive", layout="documents_first"),
    "chain/balanced/pivot": Arm("chain", "balanced", 3, "pivot", layout="documents_first"),
    # issue #33
    "chain/before": Arm("chain", "balanced", 3, layout="documents_first"),
    # the layout alone (with the pinned prefixes, and the parser that reads translated headers)
    "chain/static": Arm("chain", "balanced", 3),
    "chain/segments": Arm("chain", "balanced", 3, context="segments"),
    "chain/segments/k5": Arm("chain", "balanced", 5, context="segments"),
    "chain/segments/last": Arm("chain", "balanced", 3, context="segments", order="best_last"),
    "agent/before": Arm("agent", "balanced", 3, layout="documents_first"),
    # today's default made again after a refactor (#35): greedy decoding on the same prompt, so
    # its answers must equal chain/before's question by question (compare_arms reports it)
    "chain/before/again": Arm("chain", "balanced", 3, layout="documents_first"),
    "agent/segments": Arm("agent", "balanced", 3, context="segments"),
    # the first candidate default: every fixed instruction first, segments, the grammar with a
    # one-sentence explanation (its rows were made with that grammar, since undone: it lost 0.11
    # of judged correctness, 0.19 on Travel)
    "chain/after": Arm("chain", "balanced", 3, context="segments", grammar=True),
    "agent/after": Arm("agent", "balanced", 3, context="segments", grammar=True),
    # the second: the same passages and explanation as before, the form and the prefix changed:
    # every fixed instruction first, the grammar, pinned prefixes; its rows from before the
    # grammar-last sampler (chains/local/sampling.py) are archived, since they timed the old one
    "chain/form": Arm("chain", "balanced", 3, grammar=True),
    "agent/form": Arm("agent", "balanced", 3, grammar=True),
    # the third run on one machine (#33, speed): today's default again as this run's clock, the
    # same prompts decoded with prompt-lookup drafts (greedy, so the same text is expected), and
    # the agent on a loaded model of its own, so its first answer cannot restore the chain's state
    "chain/before/now": Arm("chain", "balanced", 3, layout="documents_first"),
    "chain/before/lookup": Arm("chain", "balanced", 3, layout="documents_first", draft="prompt_lookup"),
    "agent/before/own": Arm("agent", "balanced", 3, layout="documents_first"),
    # the fourth run on one machine (#33, speed): today's default as this run's clock, the same
    # prompt stopped at the explanation header (the cited line and the answer come first, so
    # greedy decoding writes them as the clock does), and the agent so, each on a model of its own
    "chain/before/clock": Arm("chain", "balanced", 3, layout="documents_first"),
    "chain/before/brief": Arm("chain", "balanced", 3, layout="documents_first", explanation=False),
    "agent/before/brief": Arm("agent", "balanced", 3, layout="documents_first", explanation=False),
    # the fifth (#33, right language): today's default as this run's clock, and the citation
    # template's explanation header followed by the user's language's "because" (the prompts'
    # explanation_opener, the words answer.explanation_opener writes later in the reply; none for
    # English), each on a loaded model of its own
    "chain/before/noopener": Arm("chain", "balanced", 3, layout="documents_first"),
    "chain/before/opener": Arm("chain", "balanced", 3, "opener", layout="documents_first"),
    # the sixth: the same opener written for the model once its answer line is written
    # (answer.explanation_opener), against today's default made again as this run's clock
    "chain/before/unopened": Arm("chain", "balanced", 3, layout="documents_first"),
    "chain/before/opened": Arm("chain", "balanced", 3, layout="documents_first", opener=True),
    # the seventh: today's defaults, the chain and the agent, each on a loaded model of its own,
    # after the support check came to read translations with their question (substance.Rendering)
    "chain/now": Arm("chain", "balanced", 3, layout="documents_first", opener=True),
    "agent/now": Arm("agent", "balanced", 3, layout="documents_first", opener=True),
    # the eighth: today's default chain over qlang_en (the question's store and English's merged)
    # instead of balanced, whose k = 3 over the demo index's six stores gives the third passage
    # to a store picked by the alphabet (German, for every Travel question)
    "chain/now/qlang_en": Arm("chain", "qlang_en", 3, layout="documents_first", opener=True),
    # the ninth: balanced with retrieval.share_margin (a store far under the best other language
    # gets no share), the chain and the agent, against today's default chain made again as this
    # run's clock (every store its share)
    "chain/now/again": Arm("chain", "balanced", 3, layout="documents_first", opener=True),
    "chain/now/shares": Arm("chain", "balanced", 3, layout="documents_first", opener=True, margin=0.03),
    "agent/now/shares": Arm("agent", "balanced", 3, layout="documents_first", opener=True, margin=0.03),
    # the tenth, right after the ninth on the same machine: the same with five passages, where the
    # margin shows a Travel question a gold page most often (benchmarks/shares.py)
    "chain/now/shares/k5": Arm("chain", "balanced", 5, layout="documents_first", opener=True, margin=0.03),
}
ISSUE_33 = ("chain/before", "chain/static", "chain/segments", "chain/segments/k5", "chain/segments/last",
            "agent/before", "agent/segments", "chain/after", "agent/after", "chain/form", "agent/form",
            "chain/before/again", "chain/before/now", "chain/before/lookup", "agent/before/own",
            "chain/before/clock", "chain/before/brief", "agent/before/brief", "chain/before/noopener",
            "chain/before/opener", "chain/before/unopened", "chain/before/opened", "chain/now", "agent/now",
            "chain/now/qlang_en", "chain/now/again", "chain/now/shares", "agent/now/shares",
            "chain/now/shares/k5")


# The extractive instruction, in English for every language: a variant under test, not yet
# a localized prompt (it becomes one, in every language file, if it wins).
EXTRACTIVE = ("Answer the question with a short phrase taken from the document that answers it: "
              "copy its words, translated into {language} if the document is in another language.")


def questions(limit: int | None = None) -> list[dict]:
    """The benchmark's questions, seeded: ``{"id", "question", "lang", "gold", "source", "top_lang"?}``."""
    out: list[dict] = []
    by_lang: dict[str, list[dict]] = defaultdict(list)
    for q in read_jsonl(ROOT / "xlrag" / "data" / "xquad" / "queries.jsonl"):
        by_lang[q["lang"]].append(q)
    per = 10 if limit is None else max(1, limit // 10)
    for lang in XQUAD_LANGS:
        qs = list(by_lang[lang])
        random.Random(f"answers:{lang}").shuffle(qs)
        out += [{"id": q["id"], "question": q["question"], "lang": lang, "gold": q["answers"], "source": "xquad",
                 "stratum": lang}
                for q in qs[:per]]
    by_pair: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for q in read_jsonl(HERE / "data" / "travel" / "queries.jsonl"):
        by_pair[(q["lang"], q["gold_doc_lang"])].append(q)
    for pair in TRAVEL_PAIRS:
        qs = sorted(by_pair[pair], key=lambda q: q["id"])
        random.Random(f"answers:{pair}").shuffle(qs)
        out += [{"id": q["id"], "question": q["question"], "lang": q["lang"], "gold": [q["answer"]],
                 "source": "travel", "stratum": "travel:" + "->".join(pair)} for q in qs[:per]]
    return out


class Answerer:
    """The loaded model, index and drivers: one of each per (mode, k, variant)."""

    def __init__(self, threads: int, arms: list[str]):
        from xlrag.chains.llms import build_llm
        from xlrag.config import LLMConfig
        from xlrag.demo import build_demo_index, demo_embedder
        from xlrag.evals.cache import SQLiteLLMCache
        from xlrag.indexes.retriever import CrossLingualRetriever
        from xlrag.indexes.store import LanguageStores

        index = CACHE / "agent-index"
        if not (index / "chroma").exists():
            build_demo_index(index)
        embedder = demo_embedder()
        self.index = index
        stores = LanguageStores.open(index, embedder.name, embedder.dim)
        # one retriever per share margin an arm names; the earlier arms were made with every store
        # its share, the ninth run's with retrieval.share_margin
        self.retrievers = {m: CrossLingualRetriever(stores, embedder, "balanced", k=3, share_margin=m)
                           for m in dict.fromkeys([None, *(ARMS[a].margin for a in arms)])}
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
            from xlrag.chains.pipeline import Pipeline
            from xlrag.chains.rag import GroundedChain
            from xlrag.config import XlragConfig

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
            prompts = PromptLibrary(overrides=overrides)
            llm_cfg, llm = self.llm_cfg, self.llm
            if name in ISSUE_33:
                llm_cfg = self.llm_cfg.model_copy(update={"grammar": arm.grammar})
                # the model call is made again, not read from the call cache: a reproduction
                llm = self.uncached[runtime(name)]
            cfg = XlragConfig(index_dir=self.index, llm=llm_cfg, agent={"mode": arm.mode},
                              retrieval={"k": arm.k, "share_margin": arm.margin},
                              context={"select": arm.context, "order": arm.order, "layout": arm.layout},
                              answer={"explanation": arm.explanation, "explanation_opener": arm.opener})
            mode = "auto" if arm.driver == "agent" else arm.mode
            pipeline = Pipeline.from_config(cfg, llm=llm, retriever=self.retrievers[arm.margin], mode=mode,
                                            prompts=prompts)
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
        from xlrag.schema import make_query

        query = self.retriever.prepare(make_query(q["question"], lang=q["lang"]))
        hits = self.retriever.retrieve(query, mode=mode, k=k)
        top = hits[0].lang if hits else q["lang"]
        ans = chain.invoke({"question": q["question"], "lang": top, "passages": [h.passage for h in hits]})
        if top == q["lang"] or not ans.answer:
            return ans.model_copy(update={"lang": q["lang"], "passages": list(hits)})
        tr = LLMTranslator(llm=self.llm)
        update = {"answer": tr.translate(ans.answer, top, q["lang"]), "lang": q["lang"], "passages": list(hits),
                  "flags": [*ans.flags, "translated"], "explanation": None}
        return ans.model_copy(update=update)


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


def _ci(vals: list[float]) -> dict:
    mean, lo, hi = bootstrap_ci(vals)
    return {"mean": mean, "ci95": [lo, hi], "n": len(vals)}


def summarize(rows: list[dict]) -> dict:
    out: dict = {}
    for arm in ARMS:
        rs = [r for r in rows if r["arm"] == arm]
        if not rs:
            continue
        out[arm] = {}
        for source in ("all", "xquad", "travel"):
            sub = [r for r in rs if source in ("all", r["source"])]
            if not sub:
                continue
            fig = {
                "n": len(sub),
                "lang_correct": _ci([float(r["lang_correct"]) for r in sub if r["lang_correct"] is not None]),
                "non_answer": _ci([float(r["non_answer"]) for r in sub]),
                "non_answer_presented_as_verified": sum(r["non_answer_verified"] for r in sub),
                "char3": _ci([r["char3"] for r in sub]),
                "char3_response": _ci([r["char3_response"] for r in sub]),
                "f1": _ci([r["f1"] for r in sub]),
                "model_cited": _ci([float(r["model_cited"]) for r in sub]),
                "seconds": _ci([r["seconds"] for r in sub]),
                "seconds_median": round(statistics.median(r["seconds"] for r in sub), 2),
                "template_copies": sum("prompt_echo" in r["flags"] for r in sub),
                "invalid_citation": sum(bool(r["invalid_citation"]) for r in sub),
            }
            used = [r["usage"] for r in sub if r.get("usage")]
            if used:
                for key in ("prompt_tokens", "prompt_tokens_evaluated", "completion_tokens"):
                    fig[key] = _ci([float(u[key]) for u in used if u.get(key) is not None])
                ttft = [u["time_to_first_token"] for u in used if u.get("time_to_first_token") is not None]
                if ttft:
                    fig["time_to_first_token"] = _ci(ttft)
                    fig["time_to_first_token_median"] = round(statistics.median(ttft), 2)
            judged = [r for r in sub if r.get("panel") in ("correct", "incorrect")]
            if judged:
                fig["panel_accuracy"] = _ci([float(r["panel_final"] == "correct") for r in judged])
                fig["panel_no_majority"] = sum(r.get("panel") not in ("correct", "incorrect") for r in sub)
            if source == "all":
                fig["per_lang_char3"] = {lang: round(sum(r["char3"] for r in sub if r["lang"] == lang)
                                                     / max(1, sum(r["lang"] == lang for r in sub)), 3)
                                         for lang in sorted({r["lang"] for r in sub})}
            if judged and source == "all":
                # "no language below today's figure" (#33): judged correct per stratum, as counts
                strata: dict[str, list[bool]] = defaultdict(list)
                for r in judged:
                    strata[r["lang"] if r["source"] == "xquad" else f"travel:{r['lang']}"].append(
                        r["panel_final"] == "correct")
                fig["per_lang_judged"] = {k: f"{sum(v)}/{len(v)}" for k, v in sorted(strata.items())}
            out[arm][source] = fig
        if rs[0]["repairs"] is not None and ARMS[arm].driver == "agent":
            out[arm]["all"]["repairs"] = dict(sorted(defaultdict(int, {
                k: sum(k in r["repairs"] for r in rs) for k in {x for r in rs for x in r["repairs"]}}).items()))
            out[arm]["all"]["unrepaired"] = sum(bool(r["unrepaired"]) for r in rs)
    return out


BASELINE = "chain/balanced"


def paired(rows: list[dict]) -> dict:
    """Each arm against the baseline on the questions both answered (the variants ran on a
    prefix of the questions): ``{arm: {"n", "arm": figures, "baseline": figures}}``."""
    by: dict[str, dict[str, dict]] = defaultdict(dict)
    for r in rows:
        by[r["arm"]][r["id"]] = r
    out = {}
    for arm in ARMS:
        if arm == BASELINE or arm not in by:
            continue
        ids = sorted(set(by[arm]) & set(by[BASELINE]))
        if not ids:
            continue
        figs = {}
        for name, rs in (("arm", [by[arm][i] for i in ids]), ("baseline", [by[BASELINE][i] for i in ids])):
            lang = [float(r["lang_correct"]) for r in rs if r["lang_correct"] is not None]
            figs[name] = {k: round(sum(float(r[k]) for r in rs) / len(rs), 3)
                          for k in ("non_answer", "char3", "char3_response", "f1", "model_cited")}
            figs[name]["lang_correct"] = round(sum(lang) / len(lang), 3) if lang else None
        out[arm] = {"n": len(ids), **figs}
    return out


# issue #33: the candidate default against the configuration before it, on the same questions
COMPARED = (("chain/after", "chain/before"), ("agent/after", "agent/before"), ("chain/form", "chain/before"),
            ("agent/form", "agent/before"), ("chain/static", "chain/before"),
            # the agent against the chain it checks and repairs, made in one run on one machine
            ("agent/before", "chain/before/again"),
            # the third run: decoding with prompt-lookup drafts, and the agent's own clock
            ("chain/before/lookup", "chain/before/now"), ("agent/before/own", "chain/before/now"),
            # the fourth: the reply stopped at its explanation header, the chain's and the agent's
            ("chain/before/brief", "chain/before/clock"), ("agent/before/brief", "chain/before/clock"),
            # the fifth: the explanation opened in the user's language
            ("chain/before/opener", "chain/before/noopener"),
            # the sixth: the explanation opened after the answer line (answer.explanation_opener)
            ("chain/before/opened", "chain/before/unopened"),
            # the seventh: today's default agent against today's default chain; the eighth:
            # the chain over qlang_en
            ("agent/now", "chain/now"), ("chain/now/qlang_en", "chain/now"),
            # the ninth: balanced with a share margin, the chain and the agent, on this run's clock
            # (the agent against the seventh run's agent, which the clock ties to this run)
            ("chain/now/shares", "chain/now/again"), ("agent/now/shares", "agent/now"),
            # the tenth: five passages with the margin, against the ninth run's clock
            ("chain/now/shares/k5", "chain/now/again"))


def _median_ratio(old: list[float], new: list[float], n: int = 1000, seed: int = 13) -> dict:
    """median(old) / median(new) over paired questions, with a 95% bootstrap interval."""
    rng = random.Random(seed)
    idx = range(len(old))
    ratios = []
    for _ in range(n):
        pick = rng.choices(idx, k=len(old))
        ratios.append(statistics.median(old[i] for i in pick) / statistics.median(new[i] for i in pick))
    ratios.sort()
    return {"ratio": round(statistics.median(old) / statistics.median(new), 3),
            "ci95": [round(ratios[int(0.025 * n)], 3), round(ratios[int(0.975 * n) - 1], 3)],
            "old_median": round(statistics.median(old), 2), "new_median": round(statistics.median(new), 2)}


def _paired(rows: list[dict], old: str, new: str) -> list[tuple[dict, dict]]:
    """``(old row, new row)`` for each question both arms answered, by question id."""
    by: dict[str, dict[str, dict]] = defaultdict(dict)
    for r in rows:
        by[r["arm"]][r["id"]] = r
    return [(by[old][i], by[new][i]) for i in sorted(set(by[new]) & set(by[old]))]


def compare(rows: list[dict], new: str, old: str) -> dict | None:
    """``new`` against ``old`` on the questions both answered: each figure's mean in both arms and
    the paired difference with its 95% bootstrap interval; per language, the judged accuracy;
    the speed-up of the median seconds and time to first token."""
    pairs = _paired(rows, old, new)
    if not pairs:
        return None
    ids = [a["id"] for a, _ in pairs]

    def correct(r: dict) -> float | None:
        return None if r.get("panel_final") is None else float(r["panel_final"] == "correct")

    figures = {
        "correct": correct,
        "lang_correct": lambda r: None if r["lang_correct"] is None else float(r["lang_correct"]),
        "non_answer": lambda r: float(r["non_answer"]),
        "char3": lambda r: r["char3"],
        "char3_response": lambda r: r["char3_response"],
        "f1": lambda r: r["f1"],
        "model_cited": lambda r: float(r["model_cited"]),
    }
    out: dict = {"n": len(ids), "new": new, "old": old}
    for source in ("all", "xquad", "travel"):
        sub = [(a, b) for a, b in pairs if source in ("all", a["source"])]
        fig = {}
        for name, get in figures.items():
            both = [(get(a), get(b)) for a, b in sub if get(a) is not None and get(b) is not None]
            if not both:
                continue
            mean, lo, hi = bootstrap_ci([y - x for x, y in both])
            fig[name] = {"old": round(sum(x for x, _ in both) / len(both), 3),
                         "new": round(sum(y for _, y in both) / len(both), 3),
                         "difference": round(mean, 3), "ci95": [round(lo, 3), round(hi, 3)], "n": len(both)}
        for name in ("template_copies", "invalid_citation", "non_answer_verified"):
            def count(r: dict, name: str = name) -> int:
                return int("prompt_echo" in r["flags"]) if name == "template_copies" else int(bool(r[name]))
            fig[name] = {"old": sum(count(a) for a, _ in sub), "new": sum(count(b) for _, b in sub)}
        out[source] = fig
    per_lang: dict[str, dict] = {}
    for source, lang in sorted({(a["source"], a["lang"]) for a, _ in pairs}):
        ps = [(correct(a), correct(b)) for a, b in pairs if (a["source"], a["lang"]) == (source, lang)]
        ps = [(x, y) for x, y in ps if x is not None and y is not None]
        if ps:
            per_lang[f"{source}:{lang}"] = {"old": round(sum(x for x, _ in ps) / len(ps), 3),
                                            "new": round(sum(y for _, y in ps) / len(ps), 3), "n": len(ps)}
    out["per_lang_correct"] = per_lang
    out["seconds_speedup"] = _median_ratio([a["seconds"] for a, _ in pairs], [b["seconds"] for _, b in pairs])
    timed = [(a["usage"], b["usage"]) for a, b in pairs if a.get("usage") and b.get("usage")
             and a["usage"].get("time_to_first_token") and b["usage"].get("time_to_first_token")]
    if timed:
        out["time_to_first_token_speedup"] = _median_ratio([a["time_to_first_token"] for a, _ in timed],
                                                           [b["time_to_first_token"] for _, b in timed])
        for key in ("prompt_tokens", "prompt_tokens_evaluated", "completion_tokens"):
            out[key] = {"old": round(statistics.mean(a[key] for a, _ in timed), 1),
                        "new": round(statistics.mean(b[key] for _, b in timed), 1)}
    return out


def reproduced(rows: list[dict], again: str = "chain/before/again", before: str = "chain/before") -> dict | None:
    """How many of ``again``'s replies equal ``before``'s on the same questions: after a change
    that must not change what the default answers (greedy decoding, the same prompt), all."""
    pairs = _paired(rows, before, again)
    if not pairs:
        return None
    same = {key: sum(a.get(key) == b.get(key) for a, b in pairs)
            for key in ("answer", "explanation", "model_cited", "panel_final")}
    return {"arm": again, "against": before, "n": len(pairs), "same": same,
            "differing": [a["id"] for a, b in pairs if a.get("answer") != b.get("answer")]}


HAND_LABELS = HERE / "data" / "travel" / "answers_hand_labels.jsonl"


def hand_check(rows: list[dict], labels: list[dict] | None = None) -> dict:
    """The calibrated panel on this benchmark's Travel answers, against labels read by hand
    (``answers_hand_labels.jsonl``: ``chain/before`` and ``chain/form``, every Travel row).
    Per arm: accuracy by hand and by the panel on the same rows, their agreement, the panel's
    misses each way, each with its 95% interval; then the arms' paired difference by hand.

    A label was read against the gold answer: *correct* when the answer line gives the gold's
    facts (a part of a list counts, a wrong figure, currency or country does not), *incorrect*
    otherwise; a row whose answer changed since it was labelled is left out, not guessed."""
    labels = read_jsonl(HAND_LABELS) if labels is None else labels
    by = {(r["arm"], r["id"]): r for r in rows}
    out: dict = {}
    for arm in dict.fromkeys(lab["arm"] for lab in labels):
        pairs = [(lab, by[arm, lab["query_id"]]) for lab in labels if lab["arm"] == arm
                 and (arm, lab["query_id"]) in by and by[arm, lab["query_id"]]["answer"] == lab["answer"]]
        pairs = [(lab, r) for lab, r in pairs if r.get("panel_final") in ("correct", "incorrect")]
        if not pairs:
            continue
        hand = [lab["label"] == "correct" for lab, _ in pairs]
        panel = [r["panel_final"] == "correct" for _, r in pairs]
        out[arm] = {"n": len(pairs), "hand": _ci(hand), "panel": _ci(panel),
                    "agreement": _ci([h == p for h, p in zip(hand, panel, strict=True)]),
                    "panel_said_correct_hand_incorrect": sum(p and not h for h, p in zip(hand, panel, strict=True)),
                    "panel_said_incorrect_hand_correct": sum(h and not p for h, p in zip(hand, panel, strict=True))}
    arms = list(out)
    if len(arms) == 2:
        old, new = arms
        lab = {(x["arm"], x["query_id"]): x["label"] == "correct" for x in labels}
        both = sorted({q for a, q in lab if a == old} & {q for a, q in lab if a == new})
        diff = [lab[new, q] - lab[old, q] for q in both]
        mean, lo, hi = bootstrap_ci(diff)
        out["paired"] = {"old": old, "new": new, "n": len(diff), "difference": mean, "ci95": [lo, hi]}
    return out


QRELS = HERE / "data" / "travel" / "qrels.jsonl"
XQUAD_QUERIES = ROOT / "xlrag" / "data" / "xquad" / "queries.jsonl"


def gold_pages() -> dict[str, set[str]]:
    """Each question's gold documents: Travel's qrels; an XQuAD question's paragraph in every
    language (the parallel paragraphs hold the same answer)."""
    gold: dict[str, set[str]] = defaultdict(set)
    for q in read_jsonl(QRELS):
        gold[q["query_id"]].add(q["doc_id"])
    for q in read_jsonl(XQUAD_QUERIES):
        gold[q["id"]].update(f"{q['parallel_id']}-{lang}" for lang in XQUAD_LANGS)
    return gold


def evidence(rows: list[dict], labels: list[dict] | None = None) -> dict:
    """Where the answers are lost, per source and arm: how often a gold page was among the
    passages shown (a retrieval miss otherwise), and how often the answer was judged right with
    it shown and without; by hand too, on the Travel rows whose answer a hand label read (the
    label of the same answer to the same question, whichever arm it was made in)."""
    gold = gold_pages()
    labels = read_jsonl(HAND_LABELS) if labels is None else labels
    by_answer = {(lab["query_id"], lab["answer"]): lab["label"] == "correct" for lab in labels}
    out: dict = {}
    for source in ("travel", "xquad"):
        for arm in ARMS:
            rs = [r for r in rows if r["arm"] == arm and r["source"] == source and r.get("shown_ids")]
            if not rs:
                continue
            shown = [any(i.split("#")[0] in gold[r["id"]] for i in r["shown_ids"]) for r in rs]
            fig: dict = {"n": len(rs), "gold_shown": _ci([float(x) for x in shown])}
            for name, want in (("when_shown", True), ("when_not_shown", False)):
                sub = [r for r, x in zip(rs, shown, strict=True) if x is want]
                judged = [float(r["panel_final"] == "correct") for r in sub
                          if r.get("panel_final") in ("correct", "incorrect")]
                hand = [float(by_answer[r["id"], r["answer"]]) for r in sub if (r["id"], r["answer"]) in by_answer]
                fig[name] = {"n": len(sub), "judged_correct": _ci(judged) if judged else None,
                             "hand_correct": _ci(hand) if hand else None}
            out.setdefault(source, {})[arm] = fig
    return out


def table(cmp: dict) -> str:
    """The comparison as the Markdown table of docs/how-to/answers.md."""
    def cell(f: dict | None) -> str:
        if not f:
            return "n/a"
        if "difference" not in f:
            return f"{f['old']} → {f['new']}"
        lo, hi = f["ci95"]
        return f"{f['old']:.2f} → {f['new']:.2f} ({f['difference']:+.2f} [{lo:+.2f}, {hi:+.2f}])"

    rows = [("judged correct (lexical judge), all", cmp["all"].get("correct")),
            ("judged correct, XQuAD", cmp.get("xquad", {}).get("correct")),
            ("judged correct, Travel", cmp.get("travel", {}).get("correct")),
            ("char 3-gram recall of the answer", cmp["all"].get("char3")),
            ("token F1 of the answer", cmp["all"].get("f1")),
            ("right language (answer and explanation)", cmp["all"].get("lang_correct")),
            ("non-answers", cmp["all"].get("non_answer")),
            ("non-answers shown as verified", cmp["all"].get("non_answer_verified")),
            ("template copies", cmp["all"].get("template_copies")),
            ("invalid citations", cmp["all"].get("invalid_citation")),
            ("model-made valid citation", cmp["all"].get("model_cited"))]
    lines = [f"| {cmp['old']} → {cmp['new']} (n = {cmp['n']}) | before → after (difference [95% CI]) |", "|---|---|"]
    lines += [f"| {name} | {cell(f)} |" for name, f in rows]
    for key, label in (("seconds_speedup", "median seconds per answer"),
                       ("time_to_first_token_speedup", "median time to first token")):
        sp = cmp.get(key)
        if sp:
            lo, hi = sp["ci95"]
            lines.append(f"| {label} | {sp['old_median']} s → {sp['new_median']} s "
                         f"({sp['ratio']}× faster [{lo}, {hi}]) |")
    for key, label in (("prompt_tokens", "prompt tokens"), ("prompt_tokens_evaluated", "prompt tokens read"),
                       ("completion_tokens", "completion tokens")):
        if key in cmp:
            lines.append(f"| {label} (mean) | {cmp[key]['old']} → {cmp[key]['new']} |")
    return "\n".join(lines)


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
    from xlrag.evals.judges import JudgePanel, default_panel

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
              "arms": {a: ARMS[a]._asdict() for a in ARMS},
              "summary": summarize(rows), "paired_with_" + BASELINE.replace("/", "_"): paired(rows),
              "issue_33": {new: c for new, old in COMPARED if (c := compare(rows, new, old))},
              "reproduced": reproduced(rows),
              # greedy decoding with prompt-lookup drafts must write what plain decoding writes
              "reproduced_lookup": reproduced(rows, "chain/before/lookup", "chain/before/now"),
              # today's default made twice on this machine, in two runs with #35's changes between
              "reproduced_this_machine": reproduced(rows, "chain/before/now", "chain/before/again"),
              # a reply stopped at its explanation header must keep the clock's answer line
              "reproduced_brief": reproduced(rows, "chain/before/brief", "chain/before/clock"),
              # the fifth run's clock is today's default again: the fourth run's answers expected
              "reproduced_noopener": reproduced(rows, "chain/before/noopener", "chain/before/clock"),
              # the sixth run's clock is today's default again; the opened arm must keep its answer lines
              "reproduced_unopened": reproduced(rows, "chain/before/unopened", "chain/before/noopener"),
              "reproduced_opened": reproduced(rows, "chain/before/opened", "chain/before/unopened"),
              # the seventh run's clock: nothing the chain does changed since the sixth
              "reproduced_now": reproduced(rows, "chain/now", "chain/before/opened"),
              # the ninth run's clock: today's default chain again, the seventh run's answers expected
              "reproduced_again": reproduced(rows, "chain/now/again", "chain/now"),
              "hand_check": hand_check(rows),
              "evidence": evidence(rows),
              "rows": rows}
    for cmp in result["issue_33"].values():
        print(table(cmp))
    print("hand-labelled Travel check:", json.dumps(result["hand_check"], ensure_ascii=False))
    out = write_json(RESULT, result)
    print(json.dumps(result["summary"], indent=1, ensure_ascii=False)[:4000])
    print(f"written {out}")


if __name__ == "__main__":
    main()
