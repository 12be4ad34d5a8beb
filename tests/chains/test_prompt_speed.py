"""Faster local answers (#33): prompt states kept across questions (the prefix cache), never
for another model file; prompt-lookup decoding over a prompt longer than a batch; time to
first token and prompt tokens evaluated vs reused on every reply. Real llama.cpp, no mocks."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest
from langchain_core.messages import HumanMessage, SystemMessage

from tests.chains.conftest import TEST_THREADS
from xlrag.chains.finalize import message_usage
from xlrag.chains.llms import LocalLlamaChat, build_llm
from xlrag.chains.local.runtime import bundled_model_path
from xlrag.config import AnswerConfig, LLMConfig, load_config
from xlrag.errors import ConfigError

# the static part of an answer prompt: the same bytes before every question
STATIC = ("Answer the question from the passages, in the question's language, in one sentence, and cite "
          "the passage you used as <doc0>. Example: Question: Where is the Alhambra? Answer: In Granada "
          "<doc0>. " * 4)
QUESTIONS = [
    "<doc0> Lisbon is the capital and largest city of Portugal. </doc0>\nQuestion: What is the capital of "
    "Portugal?\nAnswer:",
    "<doc0> Ceuta is a Spanish city on the north coast of Africa. </doc0>\nQuestion: Where is Ceuta?\nAnswer:",
]
UNRELATED = "Translate into German: the train leaves at noon."


def _gemma(n_ctx: int, **settings: object) -> LocalLlamaChat:
    # an n_ctx no other test uses: a model of its own, its context and cache fresh
    return LocalLlamaChat(entry="gemma-3-270m", chat=False, n_ctx=n_ctx, n_threads=TEST_THREADS, max_tokens=6,
                          **settings)


def _ask(llm: LocalLlamaChat, question: str, *, stream: bool = False) -> dict:
    messages = [SystemMessage(STATIC), HumanMessage(question)]
    if stream:  # the counts come with the last chunk
        return [c for c in llm.stream(messages)][-1].response_metadata
    return llm.invoke(messages).response_metadata


def test_second_question_reuses_the_static_prefix_after_an_unrelated_prompt() -> None:
    cached, uncached = _gemma(1088, prefix_cache_mb=32), _gemma(1104, prefix_cache_mb=0)
    static = cached.count_tokens(STATIC)
    seen = {}
    for name, llm in (("cache", cached), ("none", uncached)):
        started = time.perf_counter()
        first = _ask(llm, QUESTIONS[0])
        wall = time.perf_counter() - started
        llm.invoke([HumanMessage(UNRELATED)])  # a judge or translation prompt in between
        seen[name] = first, _ask(llm, QUESTIONS[1], stream=True)
        # a fresh context reads the whole prompt; the counts add up and the time is sane
        assert first["prompt_tokens_evaluated"] == first["prompt_tokens"] > static
        assert first["prompt_tokens_cached"] == 0
        assert 0 < first["time_to_first_token"] < wall
    first, second = seen["cache"]
    assert second["prompt_tokens_evaluated"] + second["prompt_tokens_cached"] == second["prompt_tokens"]
    assert second["time_to_first_token"] > 0
    # the static part came back from the cache; only the passages and question were read
    assert second["prompt_tokens_cached"] >= static
    assert second["prompt_tokens_evaluated"] < first["prompt_tokens_evaluated"] - static
    # without the cache the unrelated prompt displaced it: nearly all of it is read again
    assert seen["none"][1]["prompt_tokens_cached"] < 4


THIRD = "<doc0> Tbilisi is the capital of Georgia. </doc0>\nQuestion: What is the capital of Georgia?\nAnswer:"


@pytest.mark.parametrize("pinned", [True, False])
def test_a_shared_prefix_outlives_the_turnover_of_whole_prompt_states(pinned: bool) -> None:
    # a server answering in many languages: each language's instructions come back after the
    # cache of whole prompts has turned over (emptied here, as many other prompts would)
    llm = _gemma(1136 if pinned else 1152, prefix_cache_mb=32)
    llama, _ = llm.native()
    if not pinned:
        llama.pinned = None
    static = llm.count_tokens(STATIC)
    seen = []
    for question in (*QUESTIONS, THIRD):
        llm.invoke([HumanMessage(UNRELATED)])
        llama.cache.cache_state.clear()
        seen.append(_ask(llm, question))
    # the second question shares the instructions with the first: read once more and kept
    assert seen[1]["prompt_tokens_cached"] <= 1  # the BOS the unrelated prompt began with
    if pinned:
        assert len(llama.pinned.states) == 1 and len(next(iter(llama.pinned.states))) >= static
        assert seen[2]["prompt_tokens_cached"] >= static
        assert seen[2]["prompt_tokens_evaluated"] + seen[2]["prompt_tokens_cached"] == seen[2]["prompt_tokens"]
    else:
        assert seen[2]["prompt_tokens_cached"] < 4


def test_kept_prefixes_stay_within_their_bytes() -> None:
    from xlrag.chains.local.loaded import PinnedPrefixes

    llm = _gemma(1168, prefix_cache_mb=32)
    llama, _ = llm.native()
    # longer than STATIC, so the two states together never fit
    other = "Reply in one word and cite the passage you used as <doc0>, nothing else. " * 10

    def run(static: str) -> None:
        for question in QUESTIONS:
            llm.invoke([HumanMessage(UNRELATED)])
            llama.cache.cache_state.clear()
            llm.invoke([SystemMessage(static), HumanMessage(question)])

    run(STATIC)
    (first, state), = llama.pinned.states.items()
    # room for one such state and a half: the second language's instructions push the first out
    llama.pinned = PinnedPrefixes(state.llama_state_size * 3 // 2)
    run(STATIC)
    run(other)
    assert len(llama.pinned.states) == 1 and next(iter(llama.pinned.states)) != first
    assert sum(s.llama_state_size for s in llama.pinned.states.values()) <= llama.pinned.capacity_bytes


def test_a_changed_model_file_gets_a_new_model_and_a_fresh_cache(tmp_path: Path) -> None:
    path = tmp_path / "model.gguf"
    shutil.copyfile(bundled_model_path("gemma-3-270m"), path)
    before = LocalLlamaChat(model_path=str(path), n_ctx=1120, n_threads=TEST_THREADS, max_tokens=4,
                            prefix_cache_mb=32)
    _ask(before, QUESTIONS[0])
    old, _ = before.native()
    assert old.cache.cache_state  # the first question's state is kept

    # the file is replaced at the same path (a new download); its mtime surely differs
    shutil.copyfile(bundled_model_path("gemma-3-270m"), tmp_path / "new.gguf")
    os.replace(tmp_path / "new.gguf", path)
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))

    after = LocalLlamaChat(model_path=str(path), n_ctx=1120, n_threads=TEST_THREADS, max_tokens=4,
                           prefix_cache_mb=32)
    new, _ = after.native()
    assert new is not old and new.cache is not old.cache and not new.cache.cache_state
    meta = _ask(after, QUESTIONS[1])
    # nothing computed by the old file's model was restored: the whole prompt was read
    assert meta["prompt_tokens_cached"] == 0
    assert meta["prompt_tokens_evaluated"] == meta["prompt_tokens"]


def test_prompt_lookup_reads_a_prompt_longer_than_a_batch_and_copies_the_same_span() -> None:
    # the same reply here, where the answer is a span the drafts find; not a general promise (a
    # batch of drafted tokens rounds differently: 24 of 30 benchmark answers were the same text)
    passage = ("<doc0> The Alhambra is a palace and fortress complex located in Granada, Andalusia, Spain. It was "
               "built by the Nasrid emirs in the thirteenth and fourteenth centuries. </doc0>")
    # other passages before it: the prompt is longer than llama.cpp's batch (512 tokens), where
    # llama-cpp-python's draft path once failed ("could not broadcast input array")
    others = "".join(f"<doc{i}> {STATIC} </doc{i}>\n" for i in range(1, 4))
    messages = [SystemMessage("Answer by copying the sentence of the passage that answers the question."),
                HumanMessage(f"{others}{passage}\nQuestion: Who built the Alhambra, and when?")]
    replies = {}
    for draft in ("none", "prompt_lookup"):
        llm = build_llm(LLMConfig(model="qwen2.5-coder-0.5b-instruct", n_ctx=1024, n_threads=TEST_THREADS,
                                  max_tokens=24, temperature=0.0, prefix_cache_mb=0, draft=draft))
        assert llm.draft == draft
        reply = llm.invoke(messages)
        replies[draft] = reply.content
        usage = message_usage(reply)
        assert usage is not None and usage.time_to_first_token is not None and usage.time_to_first_token > 0
        assert usage.prompt_tokens == usage.prompt_tokens_evaluated > 512  # a fresh model reads it all
        assert usage.completion_tokens is not None and 0 < usage.completion_tokens <= 24
    assert replies["none"].strip()
    assert replies["prompt_lookup"] == replies["none"]


@pytest.mark.parametrize(("setting", "says"), [
    ("prefix_cache_mb: -1", "invalid configuration: llm.prefix_cache_mb: -1 MB is negative; use 0 (off) or a "
                            "positive number of MB"),
    ("draft: medusa", "invalid configuration: llm.draft: unknown llm.draft 'medusa'; choose one of: none, "
                      "prompt_lookup"),
])
def test_a_bad_speed_setting_is_a_one_line_error_naming_the_choices(tmp_path: Path, setting: str,
                                                                     says: str) -> None:
    config = tmp_path / "xlrag.yaml"
    config.write_text(f"llm:\n  {setting}\n")
    with pytest.raises(ConfigError) as err:
        load_config(config)
    assert str(err.value) == says


@pytest.mark.slow
def test_the_answer_carries_what_the_call_cost(retriever) -> None:
    from xlrag.chains.pipeline import Pipeline
    from xlrag.chains.rag import GroundedChain

    llm = build_llm(LLMConfig(model="gemma-3-270m", max_tokens=16, n_threads=TEST_THREADS))
    answer = GroundedChain(pipeline=Pipeline.create(retriever, llm,
                                                    answer=AnswerConfig(format="answer"), mode="qlang_en", k=2)).invoke(
        {"question": "How many points did the Panthers defense surrender?", "lang": "en"})
    usage = answer.usage
    assert usage is not None and usage.prompt_tokens and 0 < usage.completion_tokens <= 16
    assert usage.prompt_tokens_evaluated + usage.prompt_tokens_cached == usage.prompt_tokens
    assert usage.time_to_first_token is not None and usage.time_to_first_token > 0
    # the server's answer shows the same
    from xlrag.server.models import AnswerOut

    assert AnswerOut.of(answer).usage == usage
