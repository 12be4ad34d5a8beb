"""XOR-AttriQA (Muller et al.) as a runnable study: are answers attributable to the passages
the generator saw, in-language and in-English, and does attribution reranking help?

Per XQuAD question: the grounded chain answers over the passages its IR mode retrieves. The
evaluation checker (:class:`~xlrag.checks.attribution.AttributionChecker`) then rates every
shown passage (AIS ∈ {0, 1}) in each setting; a string-match baseline says whether the
answer's text occurs in the passage. From those:

* **TOP-1**: the passage ranked first is attributable; **ALL**: some shown passage is;
* over **ANY** candidate passage, only **EN**glish ones, or only ones in the question's
  **LANG**uage; each also restricted to exact-match and to non-exact-match answers (the
  paper's Table 3 columns);
* **attribution reranking**: a checker (``rerank_checker``, by default the scorer's model) in
  ``rerank_setting`` (by default in English, like the paper's TRANSLATE-TEST reranker) picks
  the passage that supports the answer, the chain option's rule makes it the top-cited one,
  and TOP-1 is measured again on it with the scorer's votes. The report says, per setting,
  how independent that measure is: scored by the reranker's own votes it is an upper bound.

The paper's in-language setting machine-translates passages into the question's language;
here ``in_language`` shows each passage as it is, with the prompt in the question's language.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import Field

from xlrag.checks.attribution import Setting
from xlrag.checks.attribution import Vote as AISVote
from xlrag.config import EmbedderConfig, LLMConfig, RetrievalConfig
from xlrag.evals.experiment import Published, _Strict, llm_label
from xlrag.evals.records import PassageRecord, Record
from xlrag.evals.run_folder import RunSummary
from xlrag.evals.studies.base import StudyRun
from xlrag.evals.studies.xquad import XQUAD, xquad_rows
from xlrag.schema import CitationSource, GroundedAnswer, Passage
from xlrag.validate import DEFAULT_K, k_field

__all__ = ["PUBLISHED", "AttributionConfig", "AttributionRunner", "attribution_figures", "attribution_markdown",
           "attribution_report", "rerank_record", "string_match"]

# XOR-AttriQA Table 6 (% of answers attributed; CORA on XOR-TyDiQA validation, human AIS)
PUBLISHED = Published(
    source="Muller et al., Evaluating and Modeling Attribution for Cross-Lingual Question Answering, "
           "EMNLP 2023, Table 6 (CORA on XOR-TyDiQA; human AIS; T5-NLI TRANSLATE-TEST reranker)",
    columns=["TOP-1", "ALL", "TOP-1 reranked"],
    rows={"bn": [27.9, 45.6, 39.2], "fi": [38.7, 50.9, 46.0], "ja": [11.8, 37.3, 29.1],
          "ru": [27.5, 40.9, 39.6], "te": [23.3, 31.7, 30.3], "avg": [25.8, 41.3, 36.8]},
    note="Percent of answers attributed.",
)
SETTINGS: tuple[Setting, ...] = ("in_language", "in_english")
_Lang = Literal["ar", "de", "en", "es", "ru", "zh"]
_LANGS: tuple[_Lang, ...] = ("ar", "de", "es", "ru", "zh")


class AttributionConfig(_Strict):
    """``experiments/attribution.yaml``. The ``llm`` line swaps the generator for a vendor's."""

    # the generator from the user's xlrag config when the YAML has no llm: (its retrieval settings
    # are the study's protocol, not the user's)
    FROM_SETTINGS: ClassVar[dict[str, str]] = {"llm": "llm"}
    RECORD_INERT: ClassVar[frozenset[str]] = frozenset({"name", "timeout"})

    study: Literal["attribution"] = "attribution"
    name: str
    langs: list[_Lang] = Field(default_factory=lambda: list(_LANGS), min_length=1)
    per_lang: int = Field(20, ge=1, le=95)
    seed: int = 0
    mode: str = Field("qlang_en", description="IR mode over the shipped XQuAD corpus")
    k: int = k_field(DEFAULT_K, "passages shown to the generator (the candidates)")
    llm: LLMConfig = Field(default_factory=LLMConfig)
    checker: LLMConfig | None = Field(None, description="the AIS checker that scores (default: llm)")
    rerank_checker: LLMConfig | None = Field(
        None, description="the checker that reranks (default: checker; then the gain is not measured "
                          "independently, and the report says so)")
    settings: list[Literal["in_language", "in_english"]] = Field(default_factory=lambda: list(SETTINGS),
                                                                 min_length=1)
    rerank_setting: Literal["in_language", "in_english"] = Field(
        "in_english", description="the reranker's setting (XOR-AttriQA reranks TRANSLATE-TEST: in English)")
    timeout: float = Field(900.0, gt=0)

    def resolved(self, base: Path) -> AttributionConfig:
        return self


def string_match(answer: str | None, passage: Passage, lang: str) -> bool:
    """The baseline: the answer's normalised text occurs in the passage's body.

    The title line the splitter prepends is left out: XQuAD's titles are English in every
    language, so an English answer would "occur" in each Arabic passage of its article.
    """
    from xlrag.evals.answers import normalize_answer
    from xlrag.indexes.splitting import passage_body

    a = normalize_answer(answer or "", lang)
    return bool(a) and a in normalize_answer(passage_body(passage), lang)


def rerank_record(answer: GroundedAnswer, supporting: set[str]) -> dict[str, Any]:
    """The record's before/after: the top-cited passage of ``answer`` and of its reranking by the
    chain option's rule (:func:`~xlrag.chains.attribution_rerank.rerank_citations`), so the study
    measures what users run."""
    from xlrag.chains.attribution_rerank import rerank_citations, top_cited

    after = rerank_citations(answer, supporting)
    # one definition of "top-cited" on both sides, or the rerank would be credited with what the
    # post-hoc aligner did, or blamed for a leading invalid marker
    before, top = top_cited(answer), top_cited(after)
    return {"cited_before": before and before.passage_id, "source_before": before and before.source,
            "top": top and top.passage_id, "source_top": top and top.source, "flag": after.flags[-1]}


class RankedPassage(PassageRecord):
    rank: int
    string_match: bool


class RerankRecord(_Strict):
    """:func:`rerank_record`."""

    cited_before: str | None
    source_before: CitationSource | None
    top: str | None
    source_top: CitationSource | None
    flag: str


class AttributionRecord(Record):
    """One question; a failed one has only its identity and error."""

    query_id: str
    lang: str
    question: str | None = None
    golds: list[str] | None = None
    answer: str | None = None
    raw_output: str | None = None
    flags: list[str] | None = None
    em: float | None = None
    shown: list[RankedPassage] | None = None
    ais: dict[Setting, dict[str, AISVote]] | None = None  # setting -> passage id -> verdict
    rerank: RerankRecord | None = None


class AttributionRunner(StudyRun):
    record_model = AttributionRecord

    def __init__(self, config: AttributionConfig, out: str | Path,
                 progress: Callable[[str, int, int], None] | None = None):
        super().__init__(config, out, progress)
        self.config: AttributionConfig = config
        pool = xquad_rows("queries.jsonl")
        self.questions = []
        for lang in config.langs:
            mine = [q for q in pool if q["lang"] == lang]
            random.Random(f"{config.seed}:{lang}").shuffle(mine)
            self.questions += mine[: config.per_lang]
        self._retriever = None
        # once per run: each checker keeps its translations in memory across records
        self.scorer, self.reranker = self.checkers()

    def retriever(self):
        if self._retriever is None:
            from xlrag.evals.run_index import run_retriever

            # the shipped XQuAD embeddings: nothing to embed
            self._retriever = run_retriever(self.folder, "xquad", corpus=XQUAD / "corpus.jsonl",
                                            index=self.out / "index-xquad", embedder=EmbedderConfig(),
                                            retrieval=RetrievalConfig(mode=self.config.mode, k=self.config.k))
        return self._retriever

    def checkers(self) -> tuple[Any, Any]:
        from xlrag.chains.checkers import attribution_checker

        scorer_cfg = self.config.checker or self.config.llm
        scorer = attribution_checker(self.llm(scorer_cfg))
        rerank_cfg = self.config.rerank_checker or scorer_cfg
        return scorer, (scorer if rerank_cfg == scorer_cfg else attribution_checker(self.llm(rerank_cfg)))

    async def record(self, chain: Any, q: dict) -> dict:
        from xlrag.evals.answers import exact_match

        scorer, reranker = self.scorer, self.reranker
        t0 = time.perf_counter()
        ans = await chain.ainvoke({"question": q["question"], "lang": q["lang"], "mode": self.config.mode,
                                   "id": q["id"]})
        answer = ans.answer or ""
        shown = [{"passage_id": h.id, "doc_id": h.doc_id, "lang": h.lang, "rank": i,
                  "string_match": string_match(answer, h.passage, q["lang"])}
                 for i, h in enumerate(ans.passages)]
        rec: dict[str, Any] = {"key": q["id"], "query_id": q["id"], "lang": q["lang"], "question": q["question"],
                               "golds": q["answers"], "answer": ans.answer, "raw_output": ans.raw_output,
                               "flags": ans.flags, "em": exact_match(answer, q["answers"], q["lang"]),
                               "shown": shown, "ais": {}, "rerank": None}
        if answer and ans.passages:
            for setting in self.config.settings:
                result = await scorer.acheck(q["question"], answer, ans.passages, q["lang"], setting=setting)
                rec["ais"][setting] = {v.passage_id: v.verdict for v in result.votes}
            # the chain option's rule (rerank_citations), so the study measures what users run
            ranked = await reranker.acheck(q["question"], answer, ans.passages, q["lang"],
                                           setting=self.config.rerank_setting)
            rec["rerank"] = rerank_record(ans, set(ranked.supporting))
        rec["seconds"] = round(time.perf_counter() - t0, 3)
        return rec

    async def make_records(self) -> RunSummary:
        from xlrag.chains.rag import GroundedChain
        from xlrag.evals.experiment import answering_config

        chain = GroundedChain.from_config(answering_config(self.config.k), llm=self.llm(self.config.llm),
                                          retriever=self.retriever())
        models = [m for m in (self.config.llm, self.config.checker, self.config.rerank_checker) if m is not None]
        return await self.append(self.questions, lambda q: q["id"], lambda q: self.record(chain, q),
                                 lambda q: {"key": q["id"], "query_id": q["id"], "lang": q["lang"]},
                                 timeout=self.config.timeout, models=models)

    def close(self) -> None:
        if self._retriever is not None:
            self._retriever.close()
        super().close()


def _rate(recs: list[dict], attributed: Callable[[dict], bool | None]) -> dict[str, Any]:
    votes = [v for r in recs if (v := attributed(r)) is not None]
    return {"rate": 100 * sum(votes) / len(votes) if votes else None, "n": len(votes)}


def _candidates(r: dict, which: str) -> list[dict]:
    if which == "ANY":
        return r["shown"]
    return [p for p in r["shown"] if (p["lang"] == "en") == (which == "EN")]


def _ais(r: dict, setting: str, passages: list[dict]) -> bool | None:
    """Some of ``passages`` is attributable, by the checker's rule (an invalid vote is never a "not")."""
    from xlrag.checks.attribution import any_attributable

    return any_attributable(r["ais"][setting].get(p["passage_id"]) for p in passages)


def attribution_report(config: AttributionConfig, records: list[dict], not_run: dict[str, str]) -> dict[str, Any]:
    scored = [r for r in records if "error" not in r and r.get("ais")]
    out: dict[str, Any] = {"study": "attribution", "experiment": config.name, "llm": llm_label(config.llm),
                           "checker": llm_label(config.checker or config.llm),
                           "rerank_checker": llm_label(config.rerank_checker or config.checker or config.llm),
                           "rerank_setting": config.rerank_setting,
                           "records": len(records), "scored": len(scored),
                           "failed": sum("error" in r for r in records),
                           "unanswered": sum("error" not in r and not r.get("ais") for r in records),
                           "published": PUBLISHED.model_dump(), "settings": {}}
    out["rerank_scored_by"] = {s: _scored_by(out, s) for s in config.settings}
    for setting in config.settings:
        out["settings"][setting] = {
            lang: _cell([r for r in scored if (lang == "all" or r["lang"] == lang) and setting in r["ais"]], setting)
            for lang in [*config.langs, "all"]}
    return out


_SCORED_BY = {
    "own votes": "the reranker's own votes (same model, same setting): the reranked TOP-1 is attributable "
                 "whenever any passage is, an upper bound",
    "same model": "the same model in the other setting: a cross-check, not an independent judge",
    "independent": "another model than the reranker's",
}


def _scored_by(report: dict[str, Any], setting: str) -> str:
    if report["rerank_checker"] != report["checker"]:
        return "independent"
    return "own votes" if setting == report["rerank_setting"] else "same model"


_SUBSETS = {"all": lambda r: True, "of EM": lambda r: r["em"] == 1.0, "non-EM": lambda r: r["em"] != 1.0}


def _cell(mine: list[dict], setting: str) -> dict[str, Any]:
    """One language's column: TOP-1 / ALL per candidate row and answer subset, the reranking, the baseline."""

    def top1(r: dict, row: str) -> bool | None:
        first = [p for p in _candidates(r, row) if p["rank"] == 0]
        return _ais(r, setting, first) if first else False  # the top passage is not a candidate of this row

    def any_of(r: dict, row: str) -> bool | None:
        cands = _candidates(r, row)
        return _ais(r, setting, cands) if cands else False

    def cited(r: dict, which: str) -> bool | None:
        pid = r["rerank"][which] if r.get("rerank") else None
        return _ais(r, setting, [p for p in r["shown"] if p["passage_id"] == pid]) if pid else False

    cell: dict[str, Any] = {}
    for row in ("ANY", "LANG", "EN"):
        for name, keep in _SUBSETS.items():
            sub = [r for r in mine if keep(r)]
            cell[f"{row} {name}"] = {"top1": _rate(sub, partial(top1, row=row)),
                                     "all": _rate(sub, partial(any_of, row=row))}
    cell["top-cited before rerank"] = _rate(mine, lambda r: cited(r, "cited_before"))
    cell["top-cited after rerank"] = _rate(mine, lambda r: cited(r, "top"))
    # what the reranker did, so a flat before/after reads as "kept" or as "found nothing"
    cell["rerank flags"] = {flag.removeprefix("attribution_"): sum(r["rerank"]["flag"] == flag for r in mine
                                                                  if r.get("rerank"))
                            for flag in ("attribution_reranked", "attribution_top_kept", "attribution_none")}
    cell["string_match top1"] = _rate(mine, lambda r: r["shown"][0]["string_match"])
    cell["string_match all"] = _rate(mine, lambda r: any(p["string_match"] for p in r["shown"]))
    return cell


def attribution_markdown(report: dict[str, Any]) -> str:
    f = lambda x: "–" if x is None else f"{x:.1f}"  # noqa: E731
    lines = [f"# {report['experiment']}: XOR-AttriQA attribution", "",
             f"Generator `{report['llm']}`, AIS checker `{report['checker']}`, reranker `{report['rerank_checker']}`; "
             f"{report['scored']} answers scored ({report['failed']} failed, {report['unanswered']} without an "
             f"answer or passages).", ""]
    lines += [f"The reranker checks {report['rerank_setting'].replace('_', ' ')}. TOP-1 after rerank is scored by "
              + "; ".join(f"{s.replace('_', ' ')}: {_SCORED_BY[k]}" for s, k in report["rerank_scored_by"].items())
              + ".", ""]
    for setting, table in report["settings"].items():
        langs = list(table)
        lines += [f"## {setting}: % attributed, TOP-1 / ALL", "", "| candidates | " + " | ".join(langs) + " |",
                  "|---|" + "---:|" * len(langs)]
        for key in next(iter(table.values())):
            if key.startswith(("ANY", "LANG", "EN")):
                cells = [f"{f(table[x][key]['top1']['rate'])} / {f(table[x][key]['all']['rate'])}" for x in langs]
                lines.append(f"| {key} | " + " | ".join(cells) + " |")
        for key in ("top-cited before rerank", "top-cited after rerank"):
            lines.append(f"| {key} | " + " | ".join(f(table[x][key]["rate"]) for x in langs) + " |")
        lines.append("| reranks: moved / kept / none | " + " | ".join(
            " / ".join(str(n) for n in table[x]["rerank flags"].values()) for x in langs) + " |")
        lines.append("| string match TOP-1 / ALL | " + " | ".join(
            f"{f(table[x]['string_match top1']['rate'])} / {f(table[x]['string_match all']['rate'])}" for x in langs)
            + " |")
        lines += ["", "(n answers: " + ", ".join(f"{x} {table[x]['ANY all']['all']['n']}" for x in langs) + ")", ""]
    lines += Published.model_validate(report["published"]).markdown(digits=1)
    return "\n".join(lines) + "\n"


def attribution_figures(report: dict[str, Any]) -> dict[str, bytes]:
    from xlrag.pages import grouped_bars, pyplot

    if pyplot() is None or not report["settings"]:
        return {}
    out = {}
    for setting, table in report["settings"].items():
        langs = list(table)
        series = {"TOP-1": [table[x]["ANY all"]["top1"]["rate"] for x in langs],
                  "ALL": [table[x]["ANY all"]["all"]["rate"] for x in langs],
                  "top-cited before rerank": [table[x]["top-cited before rerank"]["rate"] for x in langs],
                  "top-cited after rerank": [table[x]["top-cited after rerank"]["rate"] for x in langs]}
        out[f"attribution_{setting}"] = grouped_bars(langs, series, top=100, ylabel="% attributed")
    return out
