"""The llama.cpp runtime: :class:`LocalLlamaChat`, a GGUF model as a LangChain chat model.

Instruct models (``chat=True``) go through the GGUF's own chat template via llama.cpp's
``create_chat_completion`` with system and user messages. Base models get the messages
rendered as one plain completion prompt (:func:`render_prompt`) and stop sequences.

Loaded models are shared process-wide (:func:`_shared_model`), and llama.cpp's native log
is routed into Python logging.
"""

from __future__ import annotations

import asyncio
import atexit
import json
import os
import threading
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import closing
from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    HumanMessage,
    SystemMessage,
)
from langchain_core.messages.ai import UsageMetadata
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from pydantic import Field, PrivateAttr

from xlrag.config import DRAFTS, LLMConfig
from xlrag.errors import ProviderError

__all__ = ["DEFAULT_STOP", "LocalLlamaChat", "bundled_model_path", "chat_messages", "render_prompt"]

#: Stop sequences suited to xlrag's completion prompts ("Question: ... Answer:") and to
#: gemma's own end-of-turn / end-of-text markers.
DEFAULT_STOP: tuple[str, ...] = ("\nQuestion:", "\n\n\n", "<end_of_turn>", "<eos>", "\nUser:")


# -- the local llama.cpp model ---------------------------------------------------------------


def bundled_model_path(name: str | None = None) -> str:
    """Path of catalogue entry ``name`` (None: the default), assembled and verified on first use."""
    from xlrag.chains.local.assembly import assemble
    from xlrag.chains.local.catalogue import lookup

    return str(assemble(lookup(name)))


# Loaded llama.cpp models shared by every LocalLlamaChat with the same file and settings
# (_ModelKey). Loading costs seconds and a few hundred MB per copy, and chains, judges and
# translators each build their own chat model from the same config, so without sharing a
# pipeline would hold several identical copies. Each entry carries the lock that serialises
# use of its native context (llama.cpp contexts are not thread-safe). The cache is small:
# the least recently used model is dropped beyond _CACHE_SIZE (chat models already holding
# it keep it alive until they go away).
_CACHE_SIZE = 2
# The file's size and modification time are part of the key: a file replaced at the same path
# (a new download, another model copied over it) gets a new model and with it a new prefix cache,
# whose states were computed by the old weights and must never be restored into the new ones.
_ModelKey = tuple[str, int, int, int, int, str | None, int, str, int]
_MODELS: OrderedDict[_ModelKey, tuple[Any, threading.Lock]] = OrderedDict()
_MODELS_LOCK = threading.Lock()

# Streams generating in worker threads, with each one's cancel flag. Cancelling a stream (a
# client that left, a server's grace period that ended) ends its asyncio side at once, but its
# worker sees the flag only at its next token: until then it is inside llama.cpp, and the
# model must not be freed under it (see _close_all).
_STREAMS: dict[threading.Thread, threading.Event] = {}
#: Seconds the process's exit waits for streams to leave llama.cpp before freeing the models:
#: a cancelled one leaves at its next token; only a prompt still being read takes longer.
_EXIT_WAIT = 30.0


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
    would run with its ctypes bindings already gone (a noisy, harmless TypeError).

    Never under a generation: freeing a context while a cancelled stream's worker was still
    decoding in it killed the server with signal 11 after a short grace period (issue #32).
    So the streams still running are cancelled (at exit nobody reads them) and awaited, and
    each model is freed holding its lock, which every generation holds while it runs. The lock
    is not released: a generation starting after this would call into freed memory, so it
    waits instead, until the process ends. A model still in use after the wait is left to the
    operating system."""
    import logging
    import time

    deadline = time.monotonic() + _EXIT_WAIT
    for worker, cancel in list(_STREAMS.items()):
        cancel.set()
        if worker.is_alive():
            worker.join(max(0.0, deadline - time.monotonic()))
    with _MODELS_LOCK:
        entries = list(_MODELS.values())
        _MODELS.clear()
    for llama, lock in entries:
        # the streams are done; this waits only for a generation no stream accounts for
        if lock.acquire(timeout=max(1.0, deadline - time.monotonic())):
            llama.close()
        else:
            logging.getLogger("xlrag.llama_cpp").warning(
                "a local model was still generating at exit; it is left to the operating system to free")


_LLAMA_CLASS: Any = None


def _llama_class() -> Any:
    """``Llama`` that notes, at the first generated token, when it came and how many prompt
    tokens llama.cpp had to evaluate for it (``first_token``: :class:`_FirstToken` or None), and
    whose saved states (the prefix cache's) hold no logits.

    The count is of the tokens handed to ``eval`` before the first token was sampled: the prompt
    tokens neither still in the context from the previous call nor restored from the prefix
    cache (draft batches come later). llama.cpp's perf counters were no use: they report at least
    1 for each of their two counts, so they overstate by one for most prompts.

    ``save_state`` copies the logits buffer (up to n_batch x n_vocab floats: 238 MB for a
    392-token prompt of qwen2.5, 0.34 s, after every answer) and the cache's capacity counts only
    the KV state, so a few entries would hold gigabytes unaccounted. Nothing reads restored logits:
    after a restore ``generate`` evaluates at least the prompt's last token again
    (``_requires_eval``), and xlrag asks completions for no logprobs. So one row is saved, and
    restored into one row: broadcast over the buffer as ``load_state`` would, it first-touched up
    to 311 MB that a model without ``logits_all`` never uses otherwise (0.6 s on the first
    restore)."""
    global _LLAMA_CLASS
    if _LLAMA_CLASS is None:
        from llama_cpp import Llama

        class XlragLlama(Llama):  # type: ignore[misc]
            first_token: _FirstToken | None = None
            evaluated: int = 0

            def save_state(self) -> Any:
                scores, self.scores = self.scores, self.scores[:1]
                try:
                    return super().save_state()
                finally:
                    self.scores = scores

            def load_state(self, state: Any) -> None:
                scores, self.scores = self.scores, self.scores[:1]
                try:
                    super().load_state(state)
                finally:
                    self.scores = scores

            def eval(self, tokens: Sequence[int]) -> None:
                self.evaluated += len(tokens)
                super().eval(tokens)

            def generate(self, tokens: Sequence[int], *args: Any, **kwargs: Any) -> Iterator[int]:
                self.first_token, self.evaluated = None, 0
                steps = super().generate(tokens, *args, **kwargs)
                try:
                    token = next(steps)
                    self.first_token = _FirstToken(time.perf_counter(), len(tokens), self.evaluated)
                    while True:
                        sent = yield token  # create_completion never sends, but generate's protocol allows it
                        token = steps.send(sent)
                except StopIteration:
                    return
                finally:
                    steps.close()

        _LLAMA_CLASS = XlragLlama
    return _LLAMA_CLASS


class _FirstToken:
    """When a generation's first token came (``time.perf_counter``), the prompt's tokens and how
    many of them llama.cpp evaluated (the rest were reused)."""

    __slots__ = ("at", "evaluated", "prompt")

    def __init__(self, at: float, prompt: int, evaluated: int):
        self.at, self.prompt, self.evaluated = at, prompt, evaluated


def _shared_model(path: str, n_ctx: int, n_threads: int, seed: int | None,
                  chat_format: str | None = None, prefix_cache_mb: int = 0, draft: str = "none",
                  draft_tokens: int = 10) -> tuple[Any, threading.Lock]:
    if not os.path.isfile(path):
        raise ProviderError(
            f"local model file {path} does not exist; set llm.model_path to a GGUF file, "
            f"or choose a catalogue entry with --llm local:<name> (see `xlrag models list`)"
        )
    if draft not in DRAFTS:
        raise ProviderError(f"unknown llm.draft {draft!r}; choose one of: {', '.join(DRAFTS)}")
    stat = os.stat(path)
    key = (os.path.realpath(path), stat.st_size, stat.st_mtime_ns, n_ctx, n_threads, chat_format,
           prefix_cache_mb, draft, draft_tokens if draft != "none" else 0)
    with _MODELS_LOCK:
        if key in _MODELS:
            _MODELS.move_to_end(key)
            return _MODELS[key]
        from llama_cpp.llama_speculative import LlamaPromptLookupDecoding

        _route_native_log()

        draft_model = LlamaPromptLookupDecoding(num_pred_tokens=draft_tokens) if draft == "prompt_lookup" else None
        try:
            # chat_format None lets llama.cpp use the GGUF's own chat template
            llama = _llama_class()(model_path=path, n_ctx=n_ctx, n_threads=n_threads, chat_format=chat_format,
                                   seed=seed if seed is not None else 0, draft_model=draft_model, verbose=False)
        except Exception as e:  # llama.cpp raises ValueError/RuntimeError on bad files
            raise ProviderError(f"could not load local model {path}: {e}") from e
        if prefix_cache_mb:
            from llama_cpp import LlamaRAMCache

            # with the model, never shared: its states are only valid for these weights
            llama.set_cache(LlamaRAMCache(capacity_bytes=prefix_cache_mb << 20))
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


def chat_messages(messages: Sequence[BaseMessage]) -> list[dict[str, str]]:
    """LangChain messages as llama.cpp chat-completion messages (system, user, assistant)."""
    out = []
    for message in messages:
        if isinstance(message, SystemMessage):
            role = "system"
        elif isinstance(message, HumanMessage):
            role = "user"
        elif isinstance(message, AIMessage):
            role = "assistant"
        else:
            raise ProviderError(f"the local model takes system, user and AI messages, not {message.type!r}; "
                                f"convert it to one of those before calling the model")
        out.append({"role": role, "content": message.text})
    return out


Payload = str | list[dict[str, str]]


class LocalLlamaChat(BaseChatModel):
    """A llama.cpp GGUF model as a LangChain chat model.

    ``chat=True``: the model's chat template (llama.cpp chat completion). ``chat=False``: a
    base model, given one plain completion prompt and stop sequences.

    The model is loaded on first use and shared with every other instance using the same
    (model_path, n_ctx, n_threads). Calls are serialised by a per-model lock; the async
    methods run the blocking llama.cpp call in a worker thread so the event loop never blocks.
    """

    model_path: str | None = Field(None, description="any GGUF file; None = the catalogue entry `entry`")
    entry: str | None = Field(None, description="catalogue entry name; None = the default entry")
    chat: bool = Field(False, description="requests go through the chat template")
    chat_format: str | None = Field(None, description="llama.cpp chat format; None = the GGUF's template")
    few_shot_default: bool = Field(True, description="show the worked example unless configured")
    n_ctx: int = 4096
    n_threads: int | None = Field(None, description="None = all cores")
    seed: int | None = 0
    temperature: float = 0.0
    max_tokens: int = 256
    stop: list[str] = Field(default_factory=lambda: list(DEFAULT_STOP))
    prefix_cache_mb: int = Field(LLMConfig.model_fields["prefix_cache_mb"].default, ge=0,
                                 description="see LLMConfig.prefix_cache_mb")
    draft: str = Field(LLMConfig.model_fields["draft"].default, description="see LLMConfig.draft")
    draft_tokens: int = Field(LLMConfig.model_fields["draft_tokens"].default, ge=1,
                              description="see LLMConfig.draft_tokens")

    _llama: Any = PrivateAttr(default=None)
    _lock: threading.Lock | None = PrivateAttr(default=None)
    _path: str | None = PrivateAttr(default=None)

    # -- LangChain plumbing

    @property
    def _llm_type(self) -> str:
        return "xlrag-llama-cpp"

    @property
    def _identifying_params(self) -> dict[str, Any]:
        return {"model_path": self.model_path or f"catalogue:{self.model_name}", "n_ctx": self.n_ctx,
                "chat": self.chat, "chat_format": self.chat_format,
                "temperature": self.temperature, "max_tokens": self.max_tokens, "seed": self.seed}

    @property
    def model_name(self) -> str:
        if self.model_path:
            return os.path.basename(self.model_path)
        from xlrag.chains.local.catalogue import lookup

        return lookup(self.entry).name

    # -- the native model

    def _load(self) -> tuple[Any, threading.Lock]:
        if self._llama is None or self._lock is None:
            self._path = self.model_path or bundled_model_path(self.entry)
            threads = self.n_threads or os.cpu_count() or 1
            self._llama, self._lock = _shared_model(self._path, self.n_ctx, threads, self.seed,
                                                    self.chat_format if self.chat else None,
                                                    self.prefix_cache_mb, self.draft, self.draft_tokens)
        return self._llama, self._lock

    def native(self) -> tuple[Any, threading.Lock]:
        """The shared llama.cpp model and the lock that serialises its context, for callers that
        read logits themselves (the LLM reranker); hold the lock for every use of the context."""
        return self._load()

    def compile_grammar(self, text: str) -> Any:
        """The GBNF grammar ``text`` compiled for this model (a one-line ConfigError if it cannot be)."""
        from xlrag.chains.local.grammar import compiled

        llama, _ = self._load()
        return compiled(llama, text, self.model_name)

    def count_tokens(self, text: str) -> int:
        """Tokens of ``text`` under this model's tokenizer (no BOS)."""
        llama, _ = self._load()
        # Tokenising reads only the vocabulary, not the context: no need to wait for the lock.
        return len(llama.tokenize(text.encode("utf-8"), add_bos=False, special=True))

    def get_token_ids(self, text: str) -> list[int]:
        """LangChain's token hook (``get_num_tokens``) on the model's own tokenizer."""
        llama, _ = self._load()
        return list(llama.tokenize(text.encode("utf-8"), add_bos=False, special=True))

    def _payload(self, messages: Sequence[BaseMessage]) -> Payload:
        return chat_messages(messages) if self.chat else render_prompt(messages)

    def _params(self, prompt: Payload, stop: list[str] | None, kwargs: dict[str, Any]) -> tuple[dict[str, Any], int]:
        """create_(chat_)completion arguments, and the prompt's token count (checked against n_ctx)."""
        llama, _ = self._load()
        max_tokens = int(kwargs.get("max_tokens") or self.max_tokens)
        # the completion stops match xlrag's base-model prompt; a chat template ends the turn itself
        own = [] if self.chat else self.stop
        stops = list(dict.fromkeys([*own, *(stop or []), *(kwargs.get("stop") or [])]))
        if isinstance(prompt, str):
            # exactly as create_completion tokenises: BOS + special-aware tokens (vocabulary
            # only, so no lock needed)
            n_prompt = len(llama.tokenize(prompt.encode("utf-8"), add_bos=True, special=True))
        else:
            # the template adds a few role tokens per message: an upper bound is enough here
            n_prompt = sum(len(llama.tokenize(m["content"].encode("utf-8"), add_bos=False, special=False)) + 8
                           for m in prompt)
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
        grammar = kwargs.get("grammar")
        if grammar is not None:
            # a GBNF answer grammar (chains/local/grammar.py); llama.cpp takes it for chat
            # completions too, where the chat template still frames the turn
            params["grammar"] = self.compile_grammar(grammar)
        schema = kwargs.get("json_schema")
        if schema is not None:
            # A grammar built from the schema: the model cannot write anything but such JSON.
            if isinstance(prompt, str):
                from llama_cpp import LlamaGrammar

                params["grammar"] = LlamaGrammar.from_json_schema(json.dumps(schema), verbose=False)
            else:
                params["response_format"] = {"type": "json_object", "schema": schema}
        return params, n_prompt

    def _metadata(self, finish_reason: str | None, n_prompt: int, n_completion: int,
                  timing: dict[str, Any] | None = None) -> dict[str, Any]:
        return {"model_name": self.model_name, "model_provider": "llama-cpp",
                "finish_reason": finish_reason, "prompt_tokens": n_prompt,
                "completion_tokens": n_completion, **(timing or {})}

    @staticmethod
    def _timing(llama: Any, started: float) -> dict[str, Any]:
        """``time_to_first_token`` (seconds from when this call had the model, its lock taken, to
        the first generated token: templating, prefix-cache restore, prompt evaluation and the first
        sampling; waiting for other calls is not counted), the prompt's exact token count, and how
        many of them llama.cpp evaluated vs reused (still in the context, or restored by the prefix
        cache). Empty when no token was generated. Call holding the model lock."""
        first = getattr(llama, "first_token", None)
        if first is None or first.at < started:
            return {}
        return {"time_to_first_token": round(first.at - started, 4), "prompt_tokens": first.prompt,
                "prompt_tokens_evaluated": first.evaluated,
                "prompt_tokens_cached": max(0, first.prompt - first.evaluated)}

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
        prompt = self._payload(messages)
        params, n_prompt = self._params(prompt, stop, kwargs)
        llama, lock = self._load()
        try:
            with lock:
                started = time.perf_counter()
                if isinstance(prompt, str):
                    out = llama.create_completion(prompt, **params)
                else:
                    out = llama.create_chat_completion(messages=prompt, **params)
                timing = self._timing(llama, started)
        except Exception as e:
            raise ProviderError(f"local model {self.model_name} failed: {e}") from e
        choice = out["choices"][0]
        text = choice["text"] if isinstance(prompt, str) else (choice["message"].get("content") or "")
        usage = out.get("usage") or {}
        n_prompt = usage.get("prompt_tokens", n_prompt)
        n_completion = usage.get("completion_tokens", 0)
        meta = self._metadata(choice.get("finish_reason"), n_prompt, n_completion, timing)
        message = AIMessage(content=text, response_metadata=meta,
                            usage_metadata=self._usage(n_prompt, n_completion))
        return ChatResult(generations=[ChatGeneration(message=message)],
                          llm_output={"token_usage": usage, "model_name": self.model_name})

    def _chunks(self, prompt: Payload, params: dict[str, Any], n_prompt: int,
                cancel: threading.Event | None = None) -> Iterator[ChatGenerationChunk]:
        """Stream completion chunks; the model lock is held until the stream ends or is closed."""
        llama, lock = self._load()
        text, finish = "", None
        with lock:
            started = time.perf_counter()
            try:
                if isinstance(prompt, str):
                    stream = llama.create_completion(prompt, stream=True, **params)
                else:
                    stream = llama.create_chat_completion(messages=prompt, stream=True, **params)
                try:
                    for part in stream:
                        if cancel is not None and cancel.is_set():
                            break
                        choice = part["choices"][0]
                        finish = choice.get("finish_reason") or finish
                        piece = choice["text"] if "text" in choice else (choice.get("delta") or {}).get("content")
                        if piece:
                            text += piece
                            yield ChatGenerationChunk(message=AIMessageChunk(content=piece))
                finally:
                    stream.close()
            except ProviderError:
                raise
            except Exception as e:
                raise ProviderError(f"local model {self.model_name} failed: {e}") from e
            # Streams carry no usage; count the generated text with the model's tokenizer.
            n_completion = len(llama.tokenize(text.encode("utf-8"), add_bos=False, special=True)) if text else 0
            timing = self._timing(llama, started)
            n_prompt = timing.get("prompt_tokens", n_prompt)  # exact where generation started
        yield ChatGenerationChunk(
            message=AIMessageChunk(content="", response_metadata=self._metadata(finish, n_prompt, n_completion,
                                                                                timing),
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
        prompt = self._payload(messages)
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
        prompt = self._payload(messages)
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
            finally:
                _STREAMS.pop(threading.current_thread(), None)

        worker = threading.Thread(target=produce, name="xlrag-llama-stream", daemon=True)
        _STREAMS[worker] = cancel  # before it starts: an exit that comes first still waits for it
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

