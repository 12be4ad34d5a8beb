"""Chat models behind one LangChain interface, built from the registry by provider name.

``local`` (default) is :class:`LocalLlamaChat` (xlrag/chains/local/runtime.py): a
catalogue entry (xlrag/chains/local/catalogue.py, ``--llm local:<name>``) or any GGUF
file (``llm.model_path``), run in-process by llama.cpp. It needs no network and no key.
Instruct entries go through their chat template; base models get plain completion with
stop sequences.

The vendor providers are the official LangChain integrations, opt-in through extras
(``pip install 'xlrag[openai]'`` etc.); keys are read from the environment only:

=========  ==========================  ===========================  =========================
provider   class                       key                          ``base_url`` means
=========  ==========================  ===========================  =========================
openai     ``ChatOpenAI``              ``OPENAI_API_KEY`` (optional  OpenAI-compatible root
                                       when ``base_url`` is set)     incl. ``/v1``
anthropic  ``ChatAnthropic``           ``ANTHROPIC_API_KEY``        host root (SDK adds
                                                                     ``/v1/messages``)
cohere     ``ChatCohere`` (+max_tokens ``COHERE_API_KEY`` /         host root (SDK adds
           /seed/retries)              ``CO_API_KEY``               ``/v2/chat``)
mistral    ``ChatMistralAI``           ``MISTRAL_API_KEY``          root incl. ``/v1``
                                                                     (adds ``/chat/completions``)
=========  ==========================  ===========================  =========================

Where grounded-generation metadata lands on the returned ``AIMessage`` (a later chain
maps it onto ``<docN>`` citations):

* Cohere (v2 chat, non-streaming): ``msg.additional_kwargs["citations"]`` and, identically,
  ``msg.response_metadata["citations"]`` — a list of ``cohere`` ``Citation`` objects
  (``.start``/``.end`` character offsets into ``msg.content``, ``.text``, ``.sources``
  whose items have ``.type == "document"``, ``.id`` and ``.document``). The documents
  sent are echoed in ``additional_kwargs["documents"]``. Streaming drops citations.
* Anthropic (Messages API citations): ``msg.content`` becomes a *list* of content blocks;
  each ``{"type": "text", "text": ..., "citations": [...]}`` block carries the
  citations (``char_location`` dicts with ``cited_text``, ``document_index``,
  ``document_title``, ``start_char_index``, ``end_char_index``). ``msg.text`` joins the
  text; without citations ``msg.content`` stays a plain string.
"""

from __future__ import annotations

import os
from typing import Any
from urllib.parse import urlsplit

from langchain_core.language_models import BaseChatModel

from xlrag.chains.local.catalogue import (
    GGUF_TEMPLATE,
    LOCAL_EXTRA,
    RUNTIME,
    check_chat_format,
    lookup,
)
from xlrag.chains.local.runtime import (
    DEFAULT_STOP,
    LocalLlamaChat,
    bundled_model_path,
    render_prompt,
)
from xlrag.chains.profiles import (
    FEW_SHOT_KEY,
    GRAMMAR_KEY,
    PROVIDER_KEY,
    AnthropicProfile,
    CohereProfile,
    LocalProfile,
    OpenAIProfile,
    ProviderProfile,
)
from xlrag.config import LLMConfig
from xlrag.registry import api_key, create, register, require

__all__ = [
    "DEFAULT_MODELS",
    "DEFAULT_STOP",
    "LocalLlamaChat",
    "build_llm",
    "bundled_model_path",
    "render_prompt",
]

#: Provider defaults when ``LLMConfig.model`` is None.
DEFAULT_MODELS: dict[str, str] = {
    "openai": "gpt-4o-mini",
    "anthropic": "claude-sonnet-4-5",
    "cohere": "command-a-03-2025",  # Cohere's current multilingual RAG model (23 languages)
    "mistral": "mistral-large-latest",
}


# -- registry factories ----------------------------------------------------------------------






@register("llm", "local", profile=LocalProfile())
def _local(cfg: LLMConfig) -> BaseChatModel:
    common = {"n_ctx": cfg.n_ctx, "n_threads": cfg.n_threads, "seed": cfg.seed,
              "temperature": cfg.temperature, "max_tokens": cfg.max_tokens,
              "prefix_cache_mb": cfg.prefix_cache_mb, "draft": cfg.draft, "draft_tokens": cfg.draft_tokens}
    if cfg.model_path is not None or (cfg.model and cfg.model.lower().endswith(".gguf")):
        require(RUNTIME[1], LOCAL_EXTRA, "a local GGUF model")
        # any GGUF: driven through a chat template only when a chat_format is given
        path = str(cfg.model_path or cfg.model)
        chat_format = check_chat_format(cfg.chat_format)
        chat = chat_format is not None
        return LocalLlamaChat(model_path=path, chat=chat, few_shot_default=not chat,
                              chat_format=None if chat_format == GGUF_TEMPLATE else chat_format, **common)
    entry = lookup(cfg.model)
    entry.require()  # a missing extra fails here, with the install hint, before any loading
    return LocalLlamaChat(entry=entry.name, chat=entry.chat, few_shot_default=entry.few_shot,
                          chat_format=cfg.chat_format, **common)


@register("llm", "openai", profile=OpenAIProfile())
def _openai(cfg: LLMConfig) -> BaseChatModel:
    require("langchain_openai", "openai", "the openai LLM")
    if cfg.base_url:
        # OpenAI-compatible servers (vLLM, llama.cpp, Ollama) usually need no key, but the
        # SDK refuses to start without one: send a placeholder.
        key = os.environ.get("OPENAI_API_KEY") or "not-needed"
    else:
        key = api_key("openai LLM", "OPENAI_API_KEY")
    from langchain_openai import ChatOpenAI

    kwargs: dict[str, Any] = {
        "model": cfg.model or DEFAULT_MODELS["openai"], "api_key": key,
        "temperature": cfg.temperature, "seed": cfg.seed, "max_tokens": cfg.max_tokens,
        "timeout": cfg.timeout, "max_retries": cfg.max_retries,
    }
    if cfg.base_url:
        kwargs["base_url"] = cfg.base_url  # includes /v1; the SDK appends /chat/completions
        host = urlsplit(cfg.base_url).hostname or ""
        if not host.endswith("openai.com"):
            # langchain-openai sends only `max_completion_tokens`; several compatible servers
            # (llama-cpp-python's among them) ignore it and would generate until n_ctx.
            kwargs["extra_body"] = {"max_tokens": cfg.max_tokens}
    return ChatOpenAI(**kwargs)


@register("llm", "anthropic", profile=AnthropicProfile())
def _anthropic(cfg: LLMConfig) -> BaseChatModel:
    require("langchain_anthropic", "anthropic", "the anthropic LLM")
    key = api_key("anthropic LLM", "ANTHROPIC_API_KEY")
    from langchain_anthropic import ChatAnthropic

    kwargs: dict[str, Any] = {
        "model": cfg.model or DEFAULT_MODELS["anthropic"], "api_key": key,
        "temperature": cfg.temperature, "max_tokens": cfg.max_tokens,
        "timeout": cfg.timeout, "max_retries": cfg.max_retries,
    }
    # The Messages API has no seed parameter.
    if cfg.base_url:
        kwargs["base_url"] = cfg.base_url  # the host root; the SDK appends /v1/messages
    return ChatAnthropic(**kwargs)


_COHERE_CLASS: type[BaseChatModel] | None = None


def _cohere_class() -> type[BaseChatModel]:
    """ChatCohere plus the request fields it has no constructor parameters for.

    ChatCohere (langchain-cohere 0.6) forwards only model/temperature/preamble by default;
    max_tokens, seed and the SDK's per-request retry count go into every v2 chat request here.
    """
    global _COHERE_CLASS
    if _COHERE_CLASS is None:
        from langchain_cohere import ChatCohere

        class XlragChatCohere(ChatCohere):
            max_tokens: int | None = None
            seed: int | None = None
            max_retries: int = 2

            @property
            def _default_params(self) -> dict[str, Any]:
                params = dict(super()._default_params)
                if self.max_tokens is not None:
                    params["max_tokens"] = self.max_tokens
                if self.seed is not None:
                    params["seed"] = self.seed
                params["request_options"] = {"max_retries": self.max_retries}
                return params

        _COHERE_CLASS = XlragChatCohere
    return _COHERE_CLASS


@register("llm", "cohere", profile=CohereProfile())
def _cohere(cfg: LLMConfig) -> BaseChatModel:
    require("langchain_cohere", "cohere", "the cohere LLM")
    key = api_key("cohere LLM", "COHERE_API_KEY", "CO_API_KEY")
    cls = _cohere_class()
    # model must be set: ChatCohere otherwise asks the API for a default at construction.
    return cls(model=cfg.model or DEFAULT_MODELS["cohere"], cohere_api_key=key,
               temperature=cfg.temperature, max_tokens=cfg.max_tokens, seed=cfg.seed,
               timeout_seconds=cfg.timeout, max_retries=cfg.max_retries,
               base_url=cfg.base_url or None)  # the host root; the SDK appends /v2/chat


@register("llm", "mistral", profile=ProviderProfile(name="mistral"))
def _mistral(cfg: LLMConfig) -> BaseChatModel:
    require("langchain_mistralai", "mistral", "the mistral LLM")
    key = api_key("mistral LLM", "MISTRAL_API_KEY")
    from langchain_mistralai import ChatMistralAI

    kwargs: dict[str, Any] = {
        "model": cfg.model or DEFAULT_MODELS["mistral"], "api_key": key,
        "temperature": cfg.temperature, "max_tokens": cfg.max_tokens,
        "random_seed": cfg.seed, "timeout": max(1, round(cfg.timeout)),  # whole seconds
        "max_retries": cfg.max_retries,
    }
    if cfg.base_url:
        kwargs["endpoint"] = cfg.base_url  # includes /v1; requests go to /chat/completions
    return ChatMistralAI(**kwargs)


def build_llm(cfg: LLMConfig | None = None) -> BaseChatModel:
    """The chat model configured by ``cfg`` (default: the local catalogue's default entry)."""
    cfg = cfg or LLMConfig()
    llm = create("llm", cfg.provider, cfg)
    # Public metadata, so Pipeline.create finds the provider's profile (and the configured
    # few_shot choice) without inspecting the model's type.
    llm.metadata = {**(llm.metadata or {}), PROVIDER_KEY: cfg.provider, FEW_SHOT_KEY: cfg.few_shot,
                    GRAMMAR_KEY: cfg.grammar}
    return llm

