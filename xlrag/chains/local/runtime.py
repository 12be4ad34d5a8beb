"""The llama.cpp runtime: :class:`LocalLlamaChat`, a GGUF model as a LangChain chat model.

Instruct models (``chat=True``) go through the GGUF's own chat template via llama.cpp's
``create_chat_completion`` with system and user messages. Base models get the messages
rendered as one plain completion prompt (:func:`render_prompt`) and stop sequences.

Loaded models are shared process-wide (:mod:`xlrag.chains.local.loaded`).
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
import time
from collections.abc import AsyncIterator, Callable, Generator, Iterator, Sequence
from contextlib import closing
from typing import TYPE_CHECKING, Any, TypeAlias

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

from xlrag.chains.local.loaded import STREAMS, shared_model, usable_cores
from xlrag.chains.local.steering import Steer, chat_prompt, continues_chat
from xlrag.config import LLMConfig
from xlrag.errors import ProviderError

if TYPE_CHECKING:
    from llama_cpp.llama_types import ChatCompletionRequestMessage

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


def chat_messages(messages: Sequence[BaseMessage]) -> list[ChatCompletionRequestMessage]:
    """LangChain messages as llama.cpp chat-completion messages (system, user, assistant)."""
    out: list[ChatCompletionRequestMessage] = []
    for message in messages:
        if isinstance(message, SystemMessage):
            out.append({"role": "system", "content": message.text})
        elif isinstance(message, HumanMessage):
            out.append({"role": "user", "content": message.text})
        elif isinstance(message, AIMessage):
            out.append({"role": "assistant", "content": message.text})
        else:
            raise ProviderError(f"the local model takes system, user and AI messages, not {message.type!r}; "
                                f"convert it to one of those before calling the model")
    return out


def _content(message: ChatCompletionRequestMessage) -> str:
    """A message's text as :func:`chat_messages` wrote it (one string)."""
    content = message.get("content")
    return content if isinstance(content, str) else ""


Payload: TypeAlias = "str | list[ChatCompletionRequestMessage]"


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
    n_threads: int | None = Field(None, description="None = every core this process may run on")
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
            threads = self.n_threads or usable_cores()
            self._llama, self._lock = shared_model(self._path, self.n_ctx, threads, self.seed,
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

    def continues_replies(self) -> bool:
        """Whether a reply can be opened for the model (``steer=``): a base model's always; a chat
        model's on its GGUF's own template (``chat_format`` None)."""
        if not self.chat:
            return True
        llama, _ = self._load()
        return self.chat_format is None and continues_chat(llama)

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
            n_prompt = sum(len(llama.tokenize(_content(m).encode("utf-8"), add_bos=False, special=False)) + 8
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
        steer = self._steer(kwargs)
        if steer is not None:
            # the header is found as the reply is written: a steered reply is always streamed
            chunks = list(self._chunks(prompt, params, n_prompt, steer=steer))
            last = chunks[-1].message  # _chunks writes AIMessageChunks; the last one carries the usage
            message = AIMessage(content="".join(c.text for c in chunks), response_metadata=last.response_metadata,
                                usage_metadata=last.usage_metadata if isinstance(last, AIMessageChunk) else None)
            return ChatResult(generations=[ChatGeneration(message=message)], llm_output={"model_name": self.model_name})
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

    @staticmethod
    def _steer(kwargs: dict[str, Any]) -> Steer | None:
        steer = kwargs.get("steer")
        if steer is not None and not isinstance(steer, Steer):
            raise ProviderError(f"steer= takes a xlrag.chains.local.steering.Steer, not {type(steer).__name__}")
        return steer

    @staticmethod
    def _pieces(stream: Any, cancel: threading.Event | None) -> Generator[tuple[str, str | None], None, None]:
        """``(text, finish reason)`` of each chunk of a llama.cpp stream, which is closed at the end."""
        try:
            for part in stream:
                if cancel is not None and cancel.is_set():
                    break
                choice = part["choices"][0]
                piece = choice["text"] if "text" in choice else (choice.get("delta") or {}).get("content")
                yield piece or "", choice.get("finish_reason")
        finally:
            stream.close()

    def _steered(self, llama: Any, prompt: Payload, params: dict[str, Any], steer: Steer,
                 cancel: threading.Event | None,
                 first_done: Callable[[], None]) -> Generator[tuple[str, str | None], None, None]:
        """The reply as :meth:`_pieces` gives it, opened by ``steer``: up to the first of its
        headers as the plain request writes it, then ``steer.write``, then the model again from
        there. The context still holds the prompt and the reply, so only the new words are read.
        ``first_done()`` is called when the first part ends (the reply's first token is there)."""
        if isinstance(prompt, str):
            stops, criteria = params["stop"], None

            def prompt_for(reply: str) -> Any:
                return prompt + reply
        else:
            # create_chat_completion's own rendering and defaults, as a completion that can be continued
            chat = chat_prompt(llama, prompt)
            stops, criteria = [*params["stop"], *chat.stop], chat.stopping_criteria

            def prompt_for(reply: str) -> Any:
                return chat.tokens(llama, reply)
        first = {**params, "stop": stops, "stopping_criteria": criteria}
        if first.get("grammar") is not None and steer.grammar is None:
            raise ProviderError("a reply held to a grammar is opened only with the grammar of what follows the "
                                "opening (Steer.grammar); give one, or leave steer= out")
        reply, opened = "", None
        for piece, finish in self._pieces(llama.create_completion(prompt_for(""), stream=True, **first), cancel):
            before, reply = len(reply), reply + piece
            opened = steer.opening(reply)
            if opened is not None:
                # what came after the header in the same chunk is the model's own opening: replaced
                yield reply[before:opened], None
                break
            yield piece, finish
        first_done()
        if opened is None or (cancel is not None and cancel.is_set()):
            return
        reply = reply[:opened] + steer.write
        yield steer.write, None
        left = first["max_tokens"] - len(llama.tokenize(reply.encode("utf-8"), add_bos=False, special=True))
        if left <= 0:
            yield "", "length"
            return
        second = {**first, "max_tokens": left,
                  "grammar": self.compile_grammar(steer.grammar) if steer.grammar is not None else None}
        yield from self._pieces(llama.create_completion(prompt_for(reply), stream=True, **second), cancel)

    def _chunks(self, prompt: Payload, params: dict[str, Any], n_prompt: int,
                cancel: threading.Event | None = None,
                steer: Steer | None = None) -> Generator[ChatGenerationChunk, None, None]:
        """Stream completion chunks; the model lock is held until the stream ends or is closed."""
        llama, lock = self._load()
        text, finish = "", None
        with lock:
            started = time.perf_counter()
            timing: dict[str, Any] = {}

            def first_done() -> None:
                # a second generation restarts llama.cpp's count: the reply's first token is the first one's
                timing.update(self._timing(llama, started))

            try:
                if steer is not None:
                    pieces = self._steered(llama, prompt, params, steer, cancel, first_done)
                elif isinstance(prompt, str):
                    pieces = self._pieces(llama.create_completion(prompt, stream=True, **params), cancel)
                else:
                    pieces = self._pieces(llama.create_chat_completion(messages=prompt, stream=True, **params),
                                          cancel)
                with closing(pieces):
                    for piece, reason in pieces:
                        finish = reason or finish
                        if piece:
                            text += piece
                            yield ChatGenerationChunk(message=AIMessageChunk(content=piece))
            except ProviderError:
                raise
            except Exception as e:
                raise ProviderError(f"local model {self.model_name} failed: {e}") from e
            # Streams carry no usage; count the generated text with the model's tokenizer.
            n_completion = len(llama.tokenize(text.encode("utf-8"), add_bos=False, special=True)) if text else 0
            if steer is None:
                first_done()
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
        # lock freed on early exit
        with closing(self._chunks(prompt, params, n_prompt, steer=self._steer(kwargs))) as chunks:
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
                with closing(self._chunks(prompt, params, n_prompt, cancel, self._steer(kwargs))) as chunks:
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
                STREAMS.pop(threading.current_thread(), None)

        worker = threading.Thread(target=produce, name="xlrag-llama-stream", daemon=True)
        STREAMS[worker] = cancel  # before it starts: an exit that comes first still waits for it
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

