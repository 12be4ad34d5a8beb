"""Greedy sampling under a grammar (xlrag/chains/local/sampling.py) on the real 0.5B model: the
same tokens as llama-cpp-python's own chain, the grammar still binding, and sampled choices left
to the library."""

from __future__ import annotations

import re

import pytest

from xlrag.chains.local.grammar import answer_grammar
from xlrag.chains.local.runtime import LocalLlamaChat
from xlrag.chains.local.sampling import GrammarLast
from xlrag.formats import AnswerFormat

MODEL = "qwen2.5-coder-0.5b-instruct"
MESSAGES = [
    {"role": "system", "content": "Answer from the documents, then explain, then cite them."},
    {"role": "user", "content": "<doc0> Fiji's emergency numbers: police 917, ambulance 911, fire 910.\n"
                                "<doc1> Samoa's emergency numbers: police 995, ambulance 996, fire 994.\n"
                                "<doc2> In Tonga, dial 911 for police, fire and ambulance.\n"
                                "Question: What are Fiji's emergency numbers?"},
]


@pytest.fixture(scope="module")
def native():
    chat = LocalLlamaChat(entry=MODEL, chat=True, n_threads=1, max_tokens=60, n_ctx=1024)
    return chat, *chat.native()


def _reply(llama, lock, grammar, temperature: float = 0.0) -> str:
    with lock:
        out = llama.create_chat_completion(MESSAGES, grammar=grammar, temperature=temperature,
                                           max_tokens=60, seed=7)
    return out["choices"][0]["message"]["content"]


def test_greedy_under_the_grammar_gives_the_librarys_tokens(native):
    chat, llama, lock = native
    grammar = chat.compile_grammar(answer_grammar(AnswerFormat.CITATION, 3))
    ours = _reply(llama, lock, grammar)
    assert isinstance(llama._init_sampler(grammar=grammar, temp=0.0), GrammarLast)
    llama.grammar_last = False  # llama-cpp-python's own chain
    try:
        assert not isinstance(llama._init_sampler(grammar=grammar, temp=0.0), GrammarLast)
        assert _reply(llama, lock, grammar) == ours
    finally:
        llama.grammar_last = True


def test_the_grammar_still_binds_where_the_model_would_write_otherwise(native):
    chat, llama, lock = native
    grammar = chat.compile_grammar('root ::= "Zebra: " [0-9] [0-9] [0-9] "."')
    reply = _reply(llama, lock, grammar)
    assert re.fullmatch(r"Zebra: [0-9]{3}\.", reply), reply
    # the model would not open on "Zebra": the grammar overruled its first choice, and the
    # generation ran on the grammar-last sampler
    assert isinstance(llama._sampler, GrammarLast) and llama._sampler.rejected > 0


def test_a_sampled_choice_keeps_the_librarys_chain(native):
    chat, llama, _ = native
    grammar = chat.compile_grammar(answer_grammar(AnswerFormat.CITATION, 3))
    assert not isinstance(llama._init_sampler(grammar=grammar, temp=0.7), GrammarLast)
    assert not isinstance(llama._init_sampler(grammar=None, temp=0.0), GrammarLast)
