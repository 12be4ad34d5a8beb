"""Loaded llama.cpp models, shared process-wide: one ``Llama`` per model file and settings,
with the lock that serialises its context, the prefix cache that lives with it, the streams
still generating in it, and their orderly release at exit. :mod:`xlrag.chains.local.runtime`
builds its chat model on these."""

from __future__ import annotations

import atexit
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Generator, Sequence
from typing import Any

from xlrag.config_sections import DRAFTS
from xlrag.errors import ProviderError

__all__ = ["STREAMS", "PinnedPrefixes", "plain_weight_buffers", "shared_model", "usable_cores",
           "use_plain_weight_buffers"]


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
STREAMS: dict[threading.Thread, threading.Event] = {}
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
    for worker, cancel in list(STREAMS.items()):
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


def plain_weight_buffers(cpuinfo: str) -> bool:
    """Whether llama.cpp must keep the weights in plain CPU buffers on a CPU whose
    ``/proc/cpuinfo`` is ``cpuinfo``: True where the CPU advertises AMX tiles.

    llama.cpp built for such a CPU (``-march=native``) repacks the weights into AMX buffers, and
    on a Xeon whose kernel grants the tile permission but does not keep the tile state (a
    sandboxed VM) the first prompt of more than one token kills the process with signal 11
    (llama-cpp-python 0.3.36, qwen2.5-coder-1.5b, 2026-11-27; a one-token prompt survives, so
    loading alone proves nothing). Plain buffers cost AMX's speed-up where AMX works, and crash
    nowhere."""
    for line in cpuinfo.splitlines():
        if line.startswith("flags"):
            return "amx_tile" in line.split(":", 1)[-1].split()
    return False


_PLAIN_BUFFERS: bool | None = None


def use_plain_weight_buffers() -> bool:
    """Make every model llama.cpp loads in this process after the call keep plain weight buffers
    when :func:`plain_weight_buffers` says so; returns whether it did. Idempotent.

    llama-cpp-python offers no argument for it: ``Llama.__init__`` fills its model parameters from
    ``llama_model_default_params()``, so that function is wrapped. A process that loads models
    through llama-cpp-python alone (``python -m llama_cpp.server``) calls this first."""
    global _PLAIN_BUFFERS
    if _PLAIN_BUFFERS is None:
        try:
            with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
                _PLAIN_BUFFERS = plain_weight_buffers(f.read())
        except OSError:  # not Linux: no AMX builds seen
            _PLAIN_BUFFERS = False
        if _PLAIN_BUFFERS:
            import llama_cpp.llama_cpp as native

            defaults = native.llama_model_default_params

            def plain_defaults() -> Any:
                params = defaults()
                params.use_extra_bufts = False
                return params

            native.llama_model_default_params = plain_defaults
    return _PLAIN_BUFFERS


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

        class XlragLlama(Llama):
            first_token: _FirstToken | None = None
            evaluated: int = 0
            pinned: PinnedPrefixes | None = None
            # greedy sampling under a grammar asks it about the chosen token only (sampling.py);
            # False is llama-cpp-python's own chain, which benchmarks/grammar_sampling.py compares
            grammar_last: bool = True

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

            # the ignore: keyword-only, narrower than the Llama method it overrides (see below)
            def _init_sampler(  # type: ignore[override]
                    self, *, grammar: Any = None, temp: float = 0.8, **settings: Any) -> Any:
                # llama-cpp-python's only caller passes its sampling settings by keyword
                if grammar is None or temp != 0.0 or not self.grammar_last:
                    return super()._init_sampler(grammar=grammar, temp=temp, **settings)
                from xlrag.chains.local.sampling import GrammarLast

                return GrammarLast(self, super()._init_sampler(temp=temp, **settings), grammar)

            def eval(self, tokens: Sequence[int]) -> None:
                self.evaluated += len(tokens)
                super().eval(tokens)

            def generate(self, tokens: Sequence[int], *args: Any,
                         **kwargs: Any) -> Generator[int, Sequence[int] | None, None]:
                self.first_token, self.evaluated = None, 0
                if self.pinned is not None:
                    self.pinned.prepare(self, tokens)
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


class PinnedPrefixes:
    """The states of prompt prefixes that several prompts share, kept apart from the cache of
    whole prompts and restored into a context that lost them.

    llama-cpp-python's cache keeps each whole prompt's state, least recently used first out. A
    process answering in many languages (a server, an eval run, the perspectives view) turns
    that over before the same language comes back, so each language's fixed instructions were
    read again (benchmarks/answers.py: 374 of 504 prompt tokens evaluated with them first).
    Here a prompt that shares at least ``min_tokens`` leading tokens with one of the last
    ``window`` prompts, more than the context still holds, is read up to that point first and
    the state saved there: about 28 KB a token for qwen2.5-coder-1.5b, so a language's
    instructions cost a few MB. A later prompt starting with a kept prefix longer than what
    the context shares restores it. ``capacity_bytes`` bounds the kept states (least recently
    used out). The states live with their model, so they are never restored into another.
    """

    def __init__(self, capacity_bytes: int, *, min_tokens: int = 32, window: int = 64):
        from collections import deque

        self.capacity_bytes, self.min_tokens = capacity_bytes, min_tokens
        self.states: OrderedDict[tuple[int, ...], Any] = OrderedDict()
        self.recent: deque[tuple[int, ...]] = deque(maxlen=window)

    def prepare(self, llama: Any, tokens: Sequence[int]) -> None:
        """Before ``llama`` reads ``tokens``: restore the longest kept prefix the context lacks,
        or read up to a newly shared prefix and keep its state. Call holding the model lock."""
        common = llama.longest_token_prefix
        prompt = tuple(tokens)
        last = len(prompt) - 1  # generate reads at least the last token itself
        held = common(llama.input_ids[: llama.n_tokens].tolist(), prompt)
        kept = max((k for k in self.states if len(k) <= last and prompt[: len(k)] == k), key=len, default=())
        if len(kept) > held:
            self.states.move_to_end(kept)
            llama.load_state(self.states[kept])
            held = len(kept)
        shared = min(last, max((common(r, prompt) for r in self.recent), default=0))
        self.recent.append(prompt)
        if shared < self.min_tokens or shared <= held:
            return
        llama.n_tokens = held
        llama.eval(prompt[held:shared])
        state = llama.save_state()
        if state.llama_state_size > self.capacity_bytes:
            return
        self.states[prompt[:shared]] = state
        while sum(s.llama_state_size for s in self.states.values()) > self.capacity_bytes:
            self.states.popitem(last=False)


class _FirstToken:
    """When a generation's first token came (``time.perf_counter``), the prompt's tokens and how
    many of them llama.cpp evaluated (the rest were reused)."""

    __slots__ = ("at", "evaluated", "prompt")

    def __init__(self, at: float, prompt: int, evaluated: int):
        self.at, self.prompt, self.evaluated = at, prompt, evaluated


def usable_cores() -> int:
    """The cores this process may run on, llama.cpp's thread count when none is configured.

    ``os.cpu_count()`` counts every core of the machine, also those a container's cpuset or
    ``taskset`` keeps the process off. llama.cpp's threads wait for each other at every layer,
    so threads beyond the cores they may use stall the ones that run: two processes answering at
    once on two cores took 78 s with two threads each, 41 s with one (qwen2.5-coder-1.5b).
    """
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):  # no affinity on this OS (macOS, Windows)
        return os.cpu_count() or 1


def shared_model(path: str, n_ctx: int, n_threads: int, seed: int | None,
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
        use_plain_weight_buffers()

        draft_model = LlamaPromptLookupDecoding(num_pred_tokens=draft_tokens) if draft == "prompt_lookup" else None
        try:
            # chat_format None lets llama.cpp use the GGUF's own chat template
            # logits_all with a draft model: llama-cpp-python 0.3.36 keeps every token's logits then,
            # but sizes their array by the argument, one batch (512) when it is False, so a prompt
            # longer than a batch failed with a broadcast error
            llama = _llama_class()(model_path=path, n_ctx=n_ctx, n_threads=n_threads, chat_format=chat_format,
                                   seed=seed if seed is not None else 0, draft_model=draft_model,
                                   logits_all=draft_model is not None, verbose=False)
        except Exception as e:  # llama.cpp raises ValueError/RuntimeError on bad files
            raise ProviderError(f"could not load local model {path}: {e}") from e
        if prefix_cache_mb:
            from llama_cpp import LlamaRAMCache

            # with the model, never shared: its states are only valid for these weights
            # three quarters for whole prompts (a chat's next turn, the same question again), a
            # quarter for the prefixes many prompts share
            llama.set_cache(LlamaRAMCache(capacity_bytes=(prefix_cache_mb << 20) * 3 // 4))
            llama.pinned = PinnedPrefixes((prefix_cache_mb << 20) // 4)
        entry = (llama, threading.Lock())
        if not _MODELS:
            atexit.register(_close_all)
        _MODELS[key] = entry
        while len(_MODELS) > _CACHE_SIZE:
            _MODELS.popitem(last=False)
        return entry
