"""XRAG (Liu et al.) as a runnable study: settings and controlled ablations on parallel XQuAD.

For a question in language X, the supporting passage is its gold paragraph and the
distractors are other paragraphs of the same article (``xlrag/data/xquad/distractors.jsonl``).
The passages are given to the chain, not retrieved, so each condition controls exactly which
language every passage is in (:func:`contexts`, a pure plan):

* ``monolingual``: every passage in English (monolingual retrieval over an English store);
* ``multilingual``: the supporting passage in X, the distractors alternating English and X;
* the ablations, cumulative on ``multilingual``: ``+EQ`` the question in English, ``+ES``
  the supporting passage too, ``+ED`` the distractors too. Parallel data makes
  translation unnecessary, so no translation error enters.

The answer is always asked for in X. Accuracy comes from the judge panel, with a
wrong-language response counted as incorrect (XRAG), and the response-language error rate
is reported on its own.
"""

from __future__ import annotations

import hashlib
import random
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, Field

from xlrag.config import LLMConfig
from xlrag.evals.experiment import Published, _Strict, llm_label
from xlrag.evals.records import AnswerMetrics, JudgesRecord, LanguageRecord, PassageRecord, Record
from xlrag.evals.run_folder import RunSummary
from xlrag.evals.studies.base import StudyRun
from xlrag.evals.studies.xquad import xquad_rows
from xlrag.judges.panel import PanelConfig
from xlrag.modes import IRMode
from xlrag.schema import Passage

__all__ = ["ABLATIONS", "SETTINGS", "Context", "XRAGConfig", "XRAGRunner", "contexts", "xrag_figures",
           "xrag_markdown", "xrag_report"]

Condition = Literal["monolingual", "multilingual", "+EQ", "+ES", "+ED"]
SETTINGS: tuple[Condition, ...] = ("monolingual", "multilingual")
ABLATIONS: tuple[Condition, ...] = ("+EQ", "+ES", "+ED")  # cumulative, on the multilingual setting
_Lang = Literal["ar", "de", "es", "ru", "zh"]
_LANGS: tuple[_Lang, ...] = ("ar", "de", "es", "ru", "zh")


class XRAGConfig(_Strict):
    """``experiments/xrag.yaml``. Change ``llm`` (and the judges) to run it with vendor models."""

    # the generator from the user's xlrag config when the YAML has no llm: (its retrieval settings
    # are the study's protocol, not the user's)
    FROM_SETTINGS: ClassVar[dict[str, str]] = {"llm": "llm"}
    RECORD_INERT: ClassVar[frozenset[str]] = frozenset({"name", "timeout"})

    study: Literal["xrag"] = "xrag"
    name: str
    langs: list[_Lang] = Field(default_factory=lambda: list(_LANGS), min_length=1)
    per_lang: int = Field(10, ge=1, description="questions per language (from the articles with distractors)")
    seed: int = 0
    distractors: int = Field(2, ge=1, le=4, description="same-article distractor paragraphs per question")
    conditions: list[Condition] = Field(default_factory=lambda: [*SETTINGS, *ABLATIONS], min_length=1)
    llm: LLMConfig = Field(default_factory=LLMConfig)
    judges: PanelConfig | None = None
    timeout: float = Field(600.0, gt=0)

    def resolved(self, base: Path) -> XRAGConfig:
        return self


class Context(BaseModel):
    """What one condition shows: the question's language and each passage's language."""

    question_lang: str
    support_lang: str
    distractor_langs: list[str]


def contexts(lang: str, n_distractors: int) -> dict[str, Context]:
    """The language plan of every condition for a question in ``lang``."""
    split = [("en", lang)[i % 2] for i in range(n_distractors)]  # English first: half of them, rounded up
    en = ["en"] * n_distractors
    return {
        "monolingual": Context(question_lang=lang, support_lang="en", distractor_langs=en),
        "multilingual": Context(question_lang=lang, support_lang=lang, distractor_langs=split),
        "+EQ": Context(question_lang="en", support_lang=lang, distractor_langs=split),
        "+ES": Context(question_lang="en", support_lang="en", distractor_langs=split),
        "+ED": Context(question_lang="en", support_lang="en", distractor_langs=en),
    }


class XRAGRecord(Record):
    """One (condition, question); a failed one has only its identity and error."""

    condition: str
    query_id: str
    lang: str
    question: str | None = None
    golds: list[str] | None = None
    support_at: int | None = None
    shown: list[PassageRecord] | None = None
    answer: str | None = None
    raw_output: str | None = None
    flags: list[str] | None = None
    answered: bool | None = None
    language: LanguageRecord | None = None
    metrics: AnswerMetrics | None = None
    judges: JudgesRecord | None = None


class XRAGRunner(StudyRun):
    record_model = XRAGRecord

    def __init__(self, config: XRAGConfig, out: str | Path,
                 progress: Callable[[str, int, int], None] | None = None):
        super().__init__(config, out, progress)
        self.config: XRAGConfig = config

        self.passages = {r["id"]: Passage(id=r["id"], doc_id=r["id"], text=r["text"], lang=r["lang"],
                                          title=r.get("title"), metadata=r.get("metadata") or {})
                         for r in [*xquad_rows("corpus.jsonl"), *xquad_rows("distractors.jsonl")]}
        by_id = {r["id"]: r for r in xquad_rows("queries.jsonl")}
        self.distractor_ids: dict[str, list[str]] = {}  # gold parallel id -> distractor parallel ids
        for r in xquad_rows("distractors.jsonl"):
            ids = self.distractor_ids.setdefault(r["metadata"]["gold_parallel_id"], [])
            if r["metadata"]["parallel_id"] not in ids:
                ids.append(r["metadata"]["parallel_id"])
        self.questions = self._sample(by_id)
        self.english = {q["id"]: by_id[q["id"].rsplit("-", 1)[0] + "-en"] for q in self.questions}
        self.panel = None
        if config.judges is not None:
            from xlrag.judges.panel import JudgePanel

            self.panel = JudgePanel(config.judges, generator=config.llm)  # models load on their first call
            for m in self.panel.models():
                m.cache = self.cache

    def _sample(self, by_id: dict[str, dict]) -> list[dict]:
        out = []
        for lang in self.config.langs:
            pool = [q for q in by_id.values() if q["lang"] == lang and q["parallel_id"] in self.distractor_ids]
            random.Random(f"{self.config.seed}:{lang}").shuffle(pool)
            out += pool[: self.config.per_lang]
        return out

    def passages_for(self, q: dict, ctx: Context) -> tuple[list[Any], int]:
        """The condition's passages, and where the supporting one sits (seeded per question,
        the same in every condition so that only languages change)."""
        chosen = self.distractor_ids[q["parallel_id"]][: self.config.distractors]
        shown = [self.passages[f"{pid}-{lang}"] for pid, lang in zip(chosen, ctx.distractor_langs, strict=False)]
        digest = hashlib.sha256(f"{self.config.seed}:{q['id']}".encode()).digest()
        at = digest[0] % (len(shown) + 1)
        shown.insert(at, self.passages[f"{q['parallel_id']}-{ctx.support_lang}"])
        return shown, at

    @staticmethod
    def key(condition: str, q: dict) -> str:
        return f"{condition}|{q['id']}"

    async def record(self, chain: Any, condition: str, q: dict) -> dict:
        from xlrag.evals.scoring import score_answer

        ctx = contexts(q["lang"], self.config.distractors)[condition]
        question = q["question"] if ctx.question_lang == q["lang"] else self.english[q["id"]]["question"]
        shown, at = self.passages_for(q, ctx)
        t0 = time.perf_counter()
        ans = await chain.ainvoke({"question": question, "lang": q["lang"], "passages": shown, "id": q["id"]})
        # the judges see the question in its own language, whichever one the condition asked
        score = await score_answer(ans, q["question"], q["answers"], q["lang"], self.panel)
        rec: dict[str, Any] = {
            "key": self.key(condition, q), "condition": condition, "query_id": q["id"], "lang": q["lang"],
            "question": question, "golds": q["answers"], "support_at": at,
            "shown": [{"passage_id": p.id, "lang": p.lang} for p in shown],
            "answer": ans.answer, "raw_output": ans.raw_output, "flags": ans.flags, "answered": ans.answered,
            **score.sections(),
        }
        rec["seconds"] = round(time.perf_counter() - t0, 3)
        return rec

    async def make_records(self) -> RunSummary:
        from xlrag.chains.rag import GroundedChain
        from xlrag.evals.experiment import answering_config

        # the passages are given with each question: no retriever, and no_ir until they are
        chain = GroundedChain.from_config(answering_config(3), llm=self.llm(self.config.llm), fmt="answer",
                                          mode=IRMode.NO_IR)
        work = [(c, q) for c in self.config.conditions for q in self.questions]
        models = [self.config.llm, *(self.config.judges.llm_judges if self.config.judges else [])]
        return await self.append(work, lambda w: self.key(*w), lambda w: self.record(chain, *w),
                                 lambda w: {"key": self.key(*w), "condition": w[0], "query_id": w[1]["id"],
                                            "lang": w[1]["lang"]},
                                 timeout=self.config.timeout, models=models)


def _share(values: list[bool]) -> float | None:
    return sum(values) / len(values) if values else None


def xrag_report(config: XRAGConfig, records: list[dict], not_run: dict[str, str]) -> dict[str, Any]:
    """Accuracy (panel, wrong language = incorrect) and the response-language error rate, per
    condition and language, and the same accuracy with the language rule off."""
    table: dict[str, dict[str, Any]] = {}
    for cond in config.conditions:
        row: dict[str, Any] = {}
        for lang in [*config.langs, "all"]:
            recs = [r for r in records if r["condition"] == cond and (lang == "all" or r["lang"] == lang)
                    and "error" not in r]
            judged = [r for r in recs if "judges" in r]
            # as in the experiment report: a reply with no words ("308") has no language to judge
            statuses = [r["language"]["status"] for r in recs if r["language"]["status"] != "not_applicable"]
            row[lang] = {
                "n": len(recs),
                "accuracy": _share([r["judges"]["final"] == "correct" for r in judged]),
                "accuracy_ignoring_language": _share([r["judges"]["verdict"] == "correct" for r in judged]),
                "language_error_rate": _share([st != "correct" for st in statuses]),
                "char3_recall": (sum(r["metrics"]["char3_recall"] for r in recs) / len(recs)) if recs else None,
                "failed": sum(1 for r in records if r["condition"] == cond and "error" in r
                              and (lang == "all" or r["lang"] == lang)),
            }
        table[cond] = row
    notes = []
    if config.judges is not None:
        from xlrag.judges.panel import JudgePanel

        notes = JudgePanel(config.judges, generator=config.llm).notes
    return {"study": "xrag", "experiment": config.name, "llm": llm_label(config.llm),
            "judges": [llm_label(j) if j in config.judges.llm_judges else j.label for j in config.judges.judges]
            if config.judges else [],
            "notes": notes, "published": PUBLISHED.model_dump(),
            "questions_per_lang": config.per_lang, "distractors": config.distractors,
            "plan": {c: v.model_dump() for c, v in contexts("X", config.distractors).items()},
            "conditions": table}


# What can be quoted of XRAG's results offline: its abstract. Its tables (other models, its own
# news-based data) were not readable here, so no number is quoted beside xlrag's.
PUBLISHED = Published(
    source="Liu et al., XRAG: Cross-lingual Retrieval-Augmented Generation, arXiv 2505.10089 (abstract)",
    findings=["in the monolingual retrieval setting, all evaluated models struggle with response "
              "language correctness",
              "in the multilingual retrieval setting, the main challenge lies in reasoning over retrieved "
              "information across languages rather than generation of non-English text"],
    note="The paper's result tables could not be read offline (only its abstract is stored), so no "
         "published number is shown; compare the direction of the findings, not values.",
)


def xrag_markdown(report: dict[str, Any]) -> str:
    langs = [x for x in next(iter(report["conditions"].values()))]
    f = lambda x: "–" if x is None else f"{x:.2f}"  # noqa: E731
    lines = [f"# {report['experiment']}: XRAG settings and ablations", "",
             f"LLM `{report['llm']}`; judges {', '.join(report['judges']) or 'none'}; "
             f"{report['questions_per_lang']} XQuAD questions per language, {report['distractors']} "
             f"same-article distractors.", "",
             *(f"> {n}" for n in report.get("notes", [])), "",
             "Accuracy (panel majority; a wrong-language answer counts as incorrect):", "",
             "| condition | " + " | ".join(langs) + " | n |", "|---|" + "---:|" * (len(langs) + 1)]
    for cond, row in report["conditions"].items():
        lines.append(f"| {cond} | " + " | ".join(f(row[x]["accuracy"]) for x in langs) + f" | {row['all']['n']} |")
    lines += ["", "Response-language error rate:", "", "| condition | " + " | ".join(langs) + " |",
              "|---|" + "---:|" * len(langs)]
    for cond, row in report["conditions"].items():
        lines.append(f"| {cond} | " + " | ".join(f(row[x]["language_error_rate"]) for x in langs) + " |")
    lines += ["", "Accuracy with the language rule off:", "", "| condition | " + " | ".join(langs) + " |",
              "|---|" + "---:|" * len(langs)]
    for cond, row in report["conditions"].items():
        lines.append(f"| {cond} | " + " | ".join(f(row[x]["accuracy_ignoring_language"]) for x in langs) + " |")
    lines += ["", "Conditions (X = the question's language):", ""]
    for cond, plan in report["plan"].items():
        lines.append(f"- {cond}: question {plan['question_lang']}, supporting passage {plan['support_lang']}, "
                     f"distractors {', '.join(plan['distractor_langs'])}")
    if report.get("published"):
        lines += ["", *Published.model_validate(report["published"]).markdown()]
    return "\n".join(lines) + "\n"


def xrag_figures(report: dict[str, Any]) -> dict[str, bytes]:
    from xlrag.pages import grouped_bars, pyplot

    if pyplot() is None:
        return {}
    conds = list(report["conditions"])
    series = {label: [report["conditions"][c]["all"][key] for c in conds]
              for key, label in (("accuracy", "accuracy"), ("language_error_rate", "wrong language"))}
    return {"xrag_conditions": grouped_bars(conds, series, top=1)}
