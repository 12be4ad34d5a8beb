"""BordIRlines as a runnable study: the multiple-choice chain over every territory's MQS,
per IR mode, scored with the CS metrics (:mod:`xlrag.evals.robustness`).

Each record is one (mode, territory, query language): the question in that language, its
native options, the option the model picked mapped back to the claimant's English name
(null when the reply does not parse, never guessed), and the passages shown and cited.

The IR modes: ``no_ir`` needs no passages and runs over every territory. The RAG modes run
over the passage corpus (or index) in the config, and the report names it. ``rel_langs``
retrieves in the claimants' languages; ``swap_docs`` in another claimant's language than
the query's (BordIRlines: the documents of the other side of the dispute).

Relevance-controlled variants (BordIRlines' ``relevance_filter``): with ``qrels`` (passage
relevance labels, keyed by a query's id such as ``Ceuta_ar`` or by the territory for all its
languages) each RAG mode also runs as ``<mode>:relevant`` and ``<mode>:non_relevant``, over
the relevant (grade > 0) or non-relevant (grade 0) passages among its k retrieved. A passage
without a label is in neither; a query left with no passage is skipped and counted, not
answered closed-book under the mode's name.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar, Literal, get_args

from pydantic import Field, field_validator, model_validator

from xlrag.borderlines import MCQuery, Territory, load_territories
from xlrag.config import EmbedderConfig, LLMConfig, RetrievalConfig
from xlrag.evals.experiment import Published, _Strict, llm_label
from xlrag.evals.records import CitationRecord, PassageRecord, Record
from xlrag.evals.robustness import CS_KEYS, concurrence_scores
from xlrag.evals.run_folder import RunSummary
from xlrag.evals.studies.base import StudyRun
from xlrag.formats import AnswerFormat
from xlrag.languages import normalize_code
from xlrag.modes import IRMode, Mode
from xlrag.schema import make_query
from xlrag.validate import DEFAULT_K, k_field

__all__ = ["PUBLISHED", "BordIRlinesConfig", "BordIRlinesRunner", "bordirlines_figures", "bordirlines_markdown",
           "bordirlines_report"]

# BordIRlines' modes with retrieval (and no_ir, closed-book)
RAG_MODES = (IRMode.QLANG, IRMode.QLANG_EN, IRMode.EN_ONLY, IRMode.REL_LANGS, IRMode.SWAP_DOCS)
Relevance = Literal["all", "relevant", "non_relevant"]
RELEVANCE: tuple[str, ...] = get_args(Relevance)

# Published figures, 0-100, to sit beside xlrag's (other models, other data: see each source).
_BORDERLINES = {
    "GPT-4 (BorderLines, vanilla)": {"kb_cs": 79.503, "con_cs": 76.923, "non_cs": 63.239, "delta_cs": 21.639,
                                     "delta_cs_abs": 13.684, "cst_cs_unk": 65.556, "cst_cs_all": 70.849,
                                     "n_countries_mean": 1.287, "n_countries_std": 0.471},
    "BLOOMZ-7B (BorderLines)": {"kb_cs": 45.062, "con_cs": 57.516, "non_cs": 43.750, "delta_cs": 31.466,
                                "delta_cs_abs": 13.766, "cst_cs_unk": 39.200, "cst_cs_all": 53.580,
                                "n_countries_mean": 1.453, "n_countries_std": 0.537},
    "GPT-4o no_ir (BordIRlines Table 4)": {"con_cs": 77.4, "non_cs": 67.7, "delta_cs_abs": 9.7, "delta_cs": 14.3},
}
PUBLISHED = Published(
    source="BorderLines reference scores (Li, Haider & Callison-Burch, NAACL 2024; manestay/borderlines "
           "all_results/scores_for_all.csv, 251 territories, no retrieval) and BordIRlines Table 4 "
           "(GPT-4o, no_ir, as quoted in xlrag issue #10)",
    columns=list(CS_KEYS),
    rows={name: [row.get(k) for k in CS_KEYS] for name, row in _BORDERLINES.items()},
    note="The published figures come from other models on other data (251 territories, Wikipedia passages); "
         "they show the scale, not a target.",
)


def _default_modes() -> list[IRMode | str]:
    return [IRMode.NO_IR, *RAG_MODES]


class BordIRlinesConfig(_Strict):
    """``experiments/bordirlines.yaml``. Change ``llm`` to run it with a vendor model."""

    # the generator from the user's xlrag config when the YAML has no llm: (its retrieval settings
    # are the study's protocol, not the user's)
    FROM_SETTINGS: ClassVar[dict[str, str]] = {"llm": "llm"}
    RECORD_INERT: ClassVar[frozenset[str]] = frozenset({"name", "timeout", "corpus_name"})

    study: Literal["bordirlines"] = "bordirlines"
    name: str
    territories: Path | None = Field(None, description="a territories JSONL or an upstream BorderLines folder "
                                                       "(default: the 13 shipped territories)")
    only: list[str] | None = Field(None, description="these territories only")
    modes: list[Mode] = Field(default_factory=_default_modes, min_length=1)
    corpus: Path | None = Field(None, description="passages for the RAG modes (an xlrag corpus JSONL)")
    corpus_name: str | None = Field(None, description="how the report names the corpus")
    index_dir: Path | None = Field(None, description="index of the corpus (default: <out>/index)")
    qrels: Path | None = Field(None, description="passage relevance labels ({query_id, doc_id, relevance} JSONL; "
                                                 "query_id a query's id or its territory, doc_id a passage or doc id)")
    relevance: list[Relevance] | None = Field(
        None, min_length=1, description="the relevance variants of each RAG mode (default: all three with qrels, "
                                        "else all)")
    format: Literal["mc", "citation"] = "mc"
    llm: LLMConfig = Field(default_factory=LLMConfig)
    k: int = k_field(DEFAULT_K, "passages shown to the LLM")
    timeout: float = Field(300.0, gt=0)

    @field_validator("modes")
    @classmethod
    def _modes(cls, modes: list[IRMode]) -> list[IRMode]:
        known = (IRMode.NO_IR, *RAG_MODES)
        for m in modes:
            if m not in known:
                raise ValueError(f"{m.value!r} is not a BordIRlines mode; use {', '.join(known)}")
        return modes

    @model_validator(mode="after")
    def _relevance_needs_labels(self) -> BordIRlinesConfig:
        filtered = [v for v in self.relevance or () if v != "all"]
        if filtered and self.qrels is None:
            raise ValueError(f"relevance {', '.join(filtered)} needs passage labels: give qrels: (a JSONL of "
                             "{query_id, doc_id, relevance} rows) or keep relevance: [all]")
        return self

    def variants(self) -> list[str]:
        return list(self.relevance or (RELEVANCE if self.qrels is not None else ["all"]))

    def resolved(self, base: Path) -> BordIRlinesConfig:
        fix = {k: (base / v).resolve() for k in ("territories", "corpus", "index_dir", "qrels")
               if (v := getattr(self, k)) is not None and not v.is_absolute()}
        return self.model_copy(update=fix)


def _langs(t: Territory) -> list[str]:
    return list(dict.fromkeys(normalize_code(k) for k in t.langs))


def _swap_target(t: Territory, lang: str) -> str | None:
    """Another claimant's language than ``lang`` (None: every other language)."""
    return next((x for x in _langs(t) if x != lang), None)


def _route(mode: str, t: Territory, q: MCQuery) -> dict[str, Any]:
    """The query fields a mode routes by."""
    if mode == "rel_langs":
        return {"relevant_langs": _langs(t)}
    if mode == "swap_docs" and (target := _swap_target(t, q.lang)):
        return {"target_lang": target}
    return {}


def run_label(mode: str, variant: str) -> str:
    """How records and the report name a mode's relevance variant (``qlang``, ``qlang:relevant``)."""
    return mode if variant == "all" else f"{mode}:{variant}"


def passage_grade(labels: dict[str, dict[str, int]], t: Territory, q: MCQuery, passage_id: str,
                  doc_id: str) -> int | None:
    """A shown passage's relevance grade for this query (its own id's labels first, then its
    territory's; the passage's id before its document's); None when it has no label."""
    for key in (q.query_id, t.territory):
        mine = labels.get(key)
        if mine is not None and (grade := mine.get(passage_id, mine.get(doc_id))) is not None:
            return grade
    return None


class ShownPassage(PassageRecord):
    relevance: int | None = None  # its grade, when the config has qrels


class RetrievedCounts(_Strict):
    n: int
    unlabelled: int
    kept: int


class BordIRlinesRecord(Record):
    """One (mode, territory, query language); a failed one has only its identity and error."""

    mode: str
    territory: str
    query_lang: str
    ir_mode: str | None = None  # absent from records made before relevance variants
    relevance: Relevance | None = None
    question: str | None = None
    options: list[str] | None = None
    retrieved: RetrievedCounts | None = None
    skipped: str | None = None
    answer: str | None = None
    option_index: int | None = None
    raw_output: str | None = None
    flags: list[str] | None = None
    shown: list[ShownPassage] | None = None
    citations: list[CitationRecord] | None = None


class BordIRlinesRunner(StudyRun):
    record_model = BordIRlinesRecord

    def __init__(self, config: BordIRlinesConfig, out: str | Path,
                 progress: Callable[[str, int, int], None] | None = None):
        super().__init__(config, out, progress)
        self.config: BordIRlinesConfig = config
        self.territories = load_territories(config.territories, names=config.only)
        self._retriever = None
        if config.qrels is not None:
            from xlrag.evals.retrieval import load_qrels

            self.labels: dict[str, dict[str, int]] = load_qrels(config.qrels)
        else:
            self.labels = {}

    @staticmethod
    def not_run(config: BordIRlinesConfig) -> dict[str, str]:
        """The RAG modes, when the config gives no passages."""
        if config.corpus is not None or config.index_dir is not None:
            return {}
        return {m: "no passage corpus in the config (give corpus: or index_dir:)" for m in config.modes
                if m != IRMode.NO_IR}

    def modes(self) -> list[str]:
        skipped = self.not_run(self.config)
        return [m for m in self.config.modes if m not in skipped]

    def retriever(self):
        if self._retriever is None:
            from xlrag.evals.run_index import run_retriever

            # each call names its mode; a corpus brings the index up to date, an index alone is read as it is
            self._retriever = run_retriever(self.folder, "bordirlines", corpus=self.config.corpus,
                                            index=self.config.index_dir or self.out / "index",
                                            embedder=EmbedderConfig(),
                                            retrieval=RetrievalConfig(mode="qlang", k=self.config.k))
        return self._retriever

    def runs(self) -> list[tuple[str, str]]:
        """(IR mode, relevance variant) pairs: closed book has no passages to filter."""
        return [(m, v) for m in self.modes() for v in (["all"] if m == IRMode.NO_IR else self.config.variants())]

    def work(self) -> list[tuple[str, str, Territory, str, MCQuery]]:
        return [(m, v, t, key, q) for m, v in self.runs() for t in self.territories for key, q in t.queries.items()]

    @staticmethod
    def key(mode: str, t: Territory, lang: str) -> str:
        return f"{mode}|{t.territory}|{lang}"

    async def record(self, chains: dict[str, Any], mode: str, variant: str, t: Territory, key: str,
                     q: MCQuery) -> dict:
        label = run_label(mode, variant)
        rec: dict[str, Any] = {"key": self.key(label, t, key), "mode": label, "ir_mode": mode, "relevance": variant,
                               "territory": t.territory, "query_lang": key, "question": q.question,
                               "options": q.choices}
        inp: dict[str, Any] = {"question": q.question, "lang": q.lang, "options": q.choices, "id": q.query_id}
        t0 = time.perf_counter()
        if variant == "all":
            inp.update(mode=mode, **_route(mode, t, q))
        else:
            # the mode's own k passages, filtered: the variant changes which passages, not how many were looked at
            query = make_query(q.question, lang=q.lang, id=q.query_id, **_route(mode, t, q))
            hits = await self.retriever().aretrieve(query, mode=mode, k=self.config.k)
            grades = [passage_grade(self.labels, t, q, h.id, h.doc_id) for h in hits.hits]
            keep = [h.passage for h, g in zip(hits.hits, grades, strict=True)
                    if g is not None and (g > 0) == (variant == "relevant")]
            rec["retrieved"] = {"n": len(hits.hits), "unlabelled": grades.count(None), "kept": len(keep)}
            if not keep:
                rec.update(skipped=f"no {variant.replace('_', '-')} passage among the {len(hits.hits)} retrieved",
                           answer=None, shown=[], citations=[], seconds=round(time.perf_counter() - t0, 3))
                return rec
            inp["passages"] = keep
        ans = await chains[IRMode.NO_IR if mode == IRMode.NO_IR else "rag"].ainvoke(inp)
        index = ans.option_index
        rec.update(answer=t.claimant(index) if index is not None else None, option_index=index,
                   raw_output=ans.raw_output, flags=ans.flags,
                   shown=[{"passage_id": h.id, "doc_id": h.doc_id, "lang": h.lang,
                           **({"relevance": passage_grade(self.labels, t, q, h.id, h.doc_id)} if self.labels else {})}
                          for h in ans.passages],
                   citations=[c.model_dump(include={"marker", "passage_id", "doc_id", "lang", "valid", "source"})
                              for c in ans.citations],
                   seconds=round(time.perf_counter() - t0, 3))
        return rec

    async def make_records(self) -> RunSummary:
        from xlrag.chains.rag import GroundedChain
        from xlrag.evals.experiment import answering_config

        fmt = AnswerFormat.MC if self.config.format == "mc" else AnswerFormat.CITATION
        llm = self.llm(self.config.llm)
        modes = self.modes()
        cfg = answering_config(self.config.k)
        chains: dict[str, GroundedChain] = {IRMode.NO_IR: GroundedChain.from_config(cfg, llm=llm, fmt=AnswerFormat.MC,
                                                                                    mode=IRMode.NO_IR)}
        if any(m != IRMode.NO_IR for m in modes):
            chains["rag"] = GroundedChain.from_config(cfg, llm=llm, retriever=self.retriever(), fmt=fmt)
        return await self.append(self.work(), lambda w: self.key(run_label(w[0], w[1]), w[2], w[3]),
                                 lambda w: self.record(chains, *w),
                                 lambda w: {"key": self.key(run_label(w[0], w[1]), w[2], w[3]),
                                            "mode": run_label(w[0], w[1]), "territory": w[2].territory,
                                            "query_lang": w[3]},
                                 timeout=self.config.timeout, models=[self.config.llm])

    def close(self) -> None:
        if self._retriever is not None:
            self._retriever.close()
        super().close()


def bordirlines_report(config: BordIRlinesConfig, records: list[dict], not_run: dict[str, str]) -> dict[str, Any]:
    """CS metrics per mode, citation vs inclusion per language, and the published figures."""
    from xlrag.evals.citations import citation_vs_inclusion

    territories = load_territories(config.territories, names=config.only)
    modes: dict[str, Any] = {}
    for mode in dict.fromkeys(r["mode"] for r in records):
        recs = [r for r in records if r["mode"] == mode]
        ok = [r for r in recs if "error" not in r and "skipped" not in r]
        cs = concurrence_scores(ok, territories)
        modes[mode] = {"records": len(recs), "answers": len(ok), "failed": sum("error" in r for r in recs),
                       "skipped": sum("skipped" in r for r in recs), **cs.model_dump(exclude={"per_territory"}),
                       "per_territory": [p.model_dump() for p in cs.per_territory]}
        graded = [p["relevance"] for r in ok for p in r["shown"] if p.get("relevance") is not None]
        if graded:
            modes[mode]["shown_relevant"] = {"rate": sum(g > 0 for g in graded) / len(graded), "n": len(graded)}
        if config.format == "citation" and mode != IRMode.NO_IR:
            modes[mode]["citation_vs_inclusion"] = citation_vs_inclusion(ok)
    return {
        "study": "bordirlines", "experiment": config.name, "llm": llm_label(config.llm), "format": config.format,
        "territories": len(territories),
        "corpus": config.corpus_name or (str(config.corpus or config.index_dir) if (config.corpus or config.index_dir)
                                         else None),
        "modes_not_run": not_run,
        "modes": modes, "published": PUBLISHED.model_dump(),
    }


def _f(x: float | None, digits: int = 1) -> str:
    return "–" if x is None else f"{x:.{digits}f}"


def bordirlines_markdown(report: dict[str, Any]) -> str:
    heads = ["KB", "Con", "Non", "ΔCS", "ΔCS abs", "Cst unk", "Cst all", "# countries", "σ"]
    lines = [f"# {report['experiment']}: BordIRlines cross-lingual robustness", "",
             f"LLM `{report['llm']}`, format `{report['format']}`, {report['territories']} territories; "
             f"passages: {report['corpus'] or 'none (closed book only)'}.", "",
             "| run | " + " | ".join(heads) + " | answers | unparseable |",
             "|---|" + "---:|" * (len(heads) + 2)]
    for mode, m in report["modes"].items():
        cells = [_f(m["mean"][k], 2 if k.startswith("n_") else 1) for k in CS_KEYS]
        lines.append(f"| xlrag {mode} | " + " | ".join(cells) + f" | {m['answers']} | {m['unparseable']} |")
    pub = Published.model_validate(report["published"])
    for name, values in pub.rows.items():
        cells = [_f(v, 2 if k.startswith("n_") else 1) for k, v in zip(pub.columns, values, strict=True)]
        lines.append(f"| {name} | " + " | ".join(cells) + " | | |")
    lines += ["", f"Published: {pub.source}. {pub.note}", ""]
    for mode, m in report["modes"].items():
        n = m["n"]
        lines.append(f"- {mode}: KB over {n['kb_cs']}, Con over {n['con_cs']}, Non over {n['non_cs']}, "
                     f"Cst over {n['cst_cs_unk']} (unk) and {n['cst_cs_all']} (all) territories; "
                     f"{m['failed']} failed records, {m['other_langs']} answers outside the claimant languages"
                     + (f", {m['skipped']} queries skipped with no passage of their variant" if m.get("skipped")
                        else "")
                     + (f"; {100 * m['shown_relevant']['rate']:.0f}% of {m['shown_relevant']['n']} labelled passages "
                        "shown were relevant" if m.get("shown_relevant") else "") + ".")
    for mode, why in report["modes_not_run"].items():
        lines.append(f"- {mode}: not run, {why}.")
    for mode, m in report["modes"].items():
        civ = m.get("citation_vs_inclusion")
        if civ:
            lines += ["", f"## Citation rate vs inclusion rate, {mode}", "",
                      "| language | shown | cited | inclusion | citation |", "|---|---:|---:|---:|---:|"]
            for lang, c in civ.items():
                lines.append(f"| {lang} | {c['shown']} | {c['cited']} | {_f(c['inclusion_rate'], 3)} | "
                             f"{_f(c['citation_rate'], 3)} |")
    return "\n".join(lines) + "\n"


def bordirlines_figures(report: dict[str, Any]) -> dict[str, bytes]:
    """CS by mode (bars), and citation rate against inclusion rate per language."""
    from xlrag.pages import citation_inclusion_figure, grouped_bars, pyplot

    modes = list(report["modes"])
    if pyplot() is None or not modes:
        return {}
    series = {key: [report["modes"][m]["mean"][key] for m in modes]
              for key in ("kb_cs", "con_cs", "non_cs", "cst_cs_all")}
    out = {"cs_by_mode": grouped_bars(modes, series, top=100, ylabel="CS (0-100)")}
    for mode in modes:
        civ = report["modes"][mode].get("citation_vs_inclusion")
        if civ:
            out[f"citation_vs_inclusion_{mode}"] = citation_inclusion_figure(civ, mode)
    return out
