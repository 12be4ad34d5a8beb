"""The one configuration object, passed explicitly everywhere.

Sources, later ones winning: defaults < ``xlrag.yaml`` < ``XLRAG_*`` environment
variables (nested with ``__``, e.g. ``XLRAG_RETRIEVAL__MODE=qlang``) < explicit
arguments. API keys are never read from here: providers take them from the
environment only.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from xlrag.config_sections import (
    AgentConfig,
    AgentRule,
    AnswerConfig,
    ChatConfig,
    ContextConfig,
    ContextOrder,
    EmbedderConfig,
    IndexConfig,
    LexicalTranslation,
    LLMConfig,
    PerspectivesConfig,
    RerankConfig,
    RetrievalConfig,
    SplitterConfig,
    StoreConfig,
    parse_channels,
)
from xlrag.errors import ConfigError, XlragWarning
from xlrag.text import capped

__all__ = [
    "AgentConfig",
    "AgentRule",
    "AnswerConfig",
    "ChatConfig",
    "ContextConfig",
    "ContextOrder",
    "EmbedderConfig",
    "IndexConfig",
    "LLMConfig",
    "LexicalTranslation",
    "PerspectivesConfig",
    "RerankConfig",
    "RetrievalConfig",
    "SplitterConfig",
    "StoreConfig",
    "XlragConfig",
    "load_config",
    "parse_channels",
    "resolve_config",
]

DEFAULT_CONFIG_FILE = "xlrag.yaml"


class XlragConfig(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="XLRAG_", env_nested_delimiter="__", extra="forbid", validate_default=True
    )

    index_dir: Path = Field(Path(".xlrag-index"), description="where the language stores live")
    embedder: EmbedderConfig = Field(default_factory=EmbedderConfig)
    splitter: SplitterConfig = Field(default_factory=SplitterConfig)
    retrieval: RetrievalConfig = Field(default_factory=RetrievalConfig)
    rerank: RerankConfig = Field(default_factory=RerankConfig)
    store: StoreConfig = Field(default_factory=StoreConfig)
    index: IndexConfig = Field(default_factory=IndexConfig)
    llm: LLMConfig = Field(default_factory=LLMConfig)
    agent: AgentConfig = Field(default_factory=AgentConfig)
    answer: AnswerConfig = Field(default_factory=AnswerConfig)
    context: ContextConfig = Field(default_factory=ContextConfig)
    postprocess: list[str] = Field(
        default_factory=lambda: ["rerank", "context"],
        description="the steps between retrieval and the prompt, in the order they run: rerank (rerank:), "
                    "context (context:) and any postprocessor a plugin registers")

    @field_validator("postprocess")
    @classmethod
    def _known_steps(cls, v: list[str]) -> list[str]:
        from xlrag.registry import known

        twice = sorted({name for name in v if v.count(name) > 1})
        if twice:
            raise ValueError(f"postprocess names {', '.join(twice)} twice; list each step once")
        return [known("postprocessor", name, "postprocess step") for name in v]

    @field_validator("index_dir")
    @classmethod
    def _usable_path(cls, v: Path) -> Path:
        # the OS refuses longer names with a traceback that prints the whole path back
        if any(len(os.fsencode(part)) > 255 for part in v.parts) or len(os.fsencode(str(v))) > 4096:
            raise ValueError(f"{capped(str(v))} is not a usable path (a folder name over 255 bytes); give a "
                             f"shorter one")
        return v

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # The YAML file is merged in load_config as init values underneath explicit
        # overrides; here only the environment and explicit arguments remain.
        return (init_settings, env_settings)

    @model_validator(mode="after")
    def _rerank_within_retrieval(self) -> XlragConfig:
        # The reranker sees only what retrieval fetched: more candidates than retrieve_k would
        # silently rerank fewer than configured.
        if self.rerank.candidates is not None and self.rerank.candidates > self.retrieval.retrieve_k:
            raise ValueError(f"rerank.candidates ({self.rerank.candidates}) is more than retrieval.retrieve_k "
                             f"({self.retrieval.retrieve_k}); lower the one or raise the other")
        return self


def _deep_merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for k, v in over.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = _deep_merge(out[k], v)
        else:
            out[k] = v
    return out


ENV_PREFIX = "XLRAG_"
# XLRAG_* variables that are not settings: read by the model cache and the HTTP server.
OTHER_ENV_VARS = frozenset({"XLRAG_CACHE_DIR", "XLRAG_API_KEY"})


def _setting_paths(model: type[BaseModel], prefix: str = "") -> list[str]:
    paths = []
    for name, field in model.model_fields.items():
        ann = field.annotation
        if isinstance(ann, type) and issubclass(ann, BaseModel):
            paths += _setting_paths(ann, f"{prefix}{name}__")
        else:
            paths.append(f"{prefix}{name}")
    return paths


# What Kubernetes sets in every pod for a Service named "xlrag" (XLRAG_PORT, XLRAG_SERVICE_HOST,
# XLRAG_PORT_8000_TCP_ADDR, ...): not settings, and not typos either
_SERVICE_VARS = re.compile(r"SERVICE_(HOST|PORT(_[A-Z0-9_]+)?)|PORT(_\d+_(TCP|UDP|SCTP)(_(PROTO|PORT|ADDR))?)?")


def check_environment(environ: Mapping[str, str] | None = None) -> list[str]:
    """Unknown ``XLRAG_*`` variables (``XLRAG_RETREIVAL__K``): each is warned about once, with the
    setting it likely meant, and ignored; start-up never fails on one, since a platform may
    set variables of that prefix itself (Kubernetes, for a Service named xlrag, which pass
    silently). Returns the unknown names."""
    import difflib
    import os
    import warnings

    env = os.environ if environ is None else environ
    valid = [f"{ENV_PREFIX}{p.upper()}" for p in _setting_paths(XlragConfig)]
    sections = {v.rsplit("__", 1)[0] for v in valid if "__" in v}
    unknown = []
    for key in env:
        upper = key.upper()
        if not upper.startswith(ENV_PREFIX) or upper in OTHER_ENV_VARS or upper in valid:
            continue
        if upper in sections:
            continue  # a whole section as JSON, e.g. XLRAG_LLM='{"provider": "openai"}'
        if _SERVICE_VARS.fullmatch(upper[len(ENV_PREFIX):]):
            continue
        unknown.append(key)
        close = difflib.get_close_matches(upper, valid + sorted(OTHER_ENV_VARS), n=1, cutoff=0.6)
        hint = f"; did you mean {close[0]}?" if close else ""
        warnings.warn(f"unknown environment variable {key} ignored{hint} (unset it, or see XlragConfig for "
                      "the settings)", XlragWarning, stacklevel=2)
    return unknown


def load_config(path: str | Path | None = None, **overrides: Any) -> XlragConfig:
    """Build the config from ``xlrag.yaml`` (if present), the environment and overrides.

    ``overrides`` use the config's own nesting: ``load_config(retrieval={"mode": "qlang"})``.
    Environment variables beat the YAML file; explicit overrides beat both.
    """
    check_environment()
    data: dict[str, Any] = {}
    file = Path(path) if path else Path(DEFAULT_CONFIG_FILE)
    if path and not file.exists():
        raise ConfigError(f"config file {file} does not exist; create it or drop --config")
    if file.exists():
        from xlrag.yamlio import read_yaml_file

        loaded = read_yaml_file(file, "config file") or {}
        if not isinstance(loaded, dict):
            raise ConfigError(f"{file} must hold a mapping of settings at top level")
        data = loaded
    try:
        # The environment must beat the file, so apply the file under it: build once from
        # env alone to learn which keys the environment sets, then merge. exclude_unset, not
        # exclude_defaults: XLRAG_RETRIEVAL__K=5 is set even though 5 is the default.
        env_only = _from_environment().model_dump(exclude_unset=True)
        merged = _deep_merge(_deep_merge(data, env_only), overrides)
        return XlragConfig(**merged)
    except ValidationError as e:
        raise ConfigError(_explain(e)) from None


def _from_environment() -> XlragConfig:
    """The config the ``XLRAG_*`` variables describe; a variable that cannot be parsed (a nested
    setting's JSON, say) is a one-line error naming it, not pydantic-settings' traceback."""
    from pydantic_settings import SettingsError

    try:
        return XlragConfig()
    except SettingsError as e:
        field = str(e).split('"')[1] if str(e).count('"') >= 2 else ""
        var = f"{ENV_PREFIX}{field.upper()}" if field else f"an {ENV_PREFIX}* variable"
        raise ConfigError(f"environment variable {var} cannot be read as the {field or 'a'} setting "
                          f"(nested settings take JSON, e.g. {ENV_PREFIX}RETRIEVAL='{{\"k\": 5}}', or one "
                          f"variable per key: {ENV_PREFIX}RETRIEVAL__K=5); fix or unset it") from None


def _explain(e: ValidationError) -> str:
    parts = []
    for err in e.errors():
        loc = ".".join(str(x) for x in err["loc"])
        parts.append(f"{loc}: {err['msg'].removeprefix('Value error, ')}")
    return "invalid configuration: " + "; ".join(parts)


def resolve_config(config: XlragConfig | str | Path | None) -> XlragConfig:
    """What the builders (``build_agent``, ``build_query_engine``, ...) take as ``config``: an
    ``XlragConfig`` as it is, a YAML file's path, or None (``xlrag.yaml``, environment, defaults)."""
    import os

    from xlrag.errors import InvalidArgumentError

    if isinstance(config, XlragConfig):
        return config
    if config is None:
        return load_config()
    if isinstance(config, (str, os.PathLike)):
        if Path(config).is_dir():
            # the likeliest slip: the index directory where the config belongs
            raise InvalidArgumentError("config", "a YAML config file, not a directory (for an index, pass "
                                       "XlragConfig(index_dir=...))", str(config))
        return load_config(config)
    raise InvalidArgumentError("config", "an XlragConfig, a path to a YAML config file, or None", config)
