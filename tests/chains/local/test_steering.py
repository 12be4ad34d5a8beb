"""A local reply opened for the model (xlrag/chains/local/steering.py, answer.explanation_opener):
what comes before the header is what the plain request writes, the words follow the header, and
the model goes on from them. Real llama.cpp on the bundled models; no stand-ins."""

from __future__ import annotations

import asyncio

import pytest
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage
from pydantic import ValidationError

from tests.chains.conftest import TEST_THREADS
from xlrag.chains.local.grammar import answer_grammar, explanation_grammar
from xlrag.chains.local.runtime import LocalLlamaChat
from xlrag.chains.local.steering import Steer
from xlrag.chains.parsing.citation import parse_citation
from xlrag.chains.pipeline import Pipeline
from xlrag.chains.state import ChainInput
from xlrag.config import AnswerConfig
from xlrag.errors import ProviderError
from xlrag.formats import (
    EXPLANATION_HEADER,
    EXPLANATION_HEADERS,
    EXPLANATION_STOPS,
    AnswerFormat,
    Section,
)
from xlrag.prompts import PromptLibrary
from xlrag.schema import make_query

SMALL = "qwen2.5-coder-0.5b-instruct"
DEFAULT = "qwen2.5-coder-1.5b-instruct"
MESSAGES = [
    ("system", "Answer from the documents, then explain, citing them."),
    ("user", "<doc0> Fiji's emergency numbers: police 917, ambulance 911, fire 910.\n"
             "<doc1> Samoa's emergency numbers: police 995, ambulance 996, fire 994.\n"
             "<doc2> In Tonga, dial 911 for police, fire and ambulance.\n"
             "Question: What are Fiji's emergency numbers?\n"
             "Reply as:\nCited Documents: <docN>\nAnswer: ...\nExplanation: ..."),
]
GRAMMAR = answer_grammar(AnswerFormat.CITATION, 3)


# -- the steer itself -------------------------------------------------------------------------


def test_the_headers_derive_from_the_one_owner_of_the_header() -> None:
    # each is the explanation header at a line's start, as the stops that end a reply there see it
    assert all(h.startswith("\n") and Section.EXPLANATION.value in h for h in EXPLANATION_HEADERS)
    assert all(any(h.startswith(s) for s in EXPLANATION_STOPS) for h in EXPLANATION_HEADERS)
    assert f"\n{EXPLANATION_HEADER}" in EXPLANATION_HEADERS


@pytest.mark.parametrize(("text", "opened"), [
    ("Answer: 917\nExplanation:", len("Answer: 917\nExplanation:")),
    ("Answer: 917\n**Explanation:** Fiji", len("Answer: 917\n**Explanation:**")),
    ("Answer: 917\n**Explanation**: Fiji", len("Answer: 917\n**Explanation**:")),
    # not whole yet: the bold form may still close, so nothing is opened
    ("Answer: 917\n**Explanation:", None),
    ("Answer: 917\nExplanation", None),
    # the header mid-line is prose, not the format's
    ("Answer: the Explanation: 917", None),
    # the first header written is the one opened
    ("A\nExplanation: x\n**Explanation:** y", len("A\nExplanation:")),
])
def test_a_reply_is_opened_after_the_first_whole_header(text: str, opened: int | None) -> None:
    assert Steer(at=EXPLANATION_HEADERS, write=" Because").opening(text) == opened


def test_a_steer_needs_headers_and_words() -> None:
    with pytest.raises(ValidationError):
        Steer(at=(), write=" Because")
    with pytest.raises(ValidationError):
        Steer(at=EXPLANATION_HEADERS, write="")
    with pytest.raises(ValidationError):
        Steer(at=EXPLANATION_HEADERS, write=" x", words=" y")  # no swallowed arguments


def test_the_opener_is_a_languages_own_or_none() -> None:
    lib = PromptLibrary()
    assert lib.own("explanation_opener", "ar") == "لأن"
    # English has none, and so none reaches the languages without a file of their own
    assert lib.own("explanation_opener", "en") == "" and lib.own("explanation_opener", "eu") is None
    assert PromptLibrary(overrides={"eu": {"explanation_opener": "Zeren"}}).own("explanation_opener", "eu") == "Zeren"
    # an English override would reach Basque through get(); the opener reads own(), so it does not
    english = PromptLibrary(overrides={"en": {"explanation_opener": "Because"}})
    assert english.get("explanation_opener", "eu") == "Because" and english.own("explanation_opener", "eu") is None


def test_every_default_of_the_setting_is_the_configs() -> None:
    # one owner: the config's field; a pipeline built without a config holds the config's defaults
    owner = AnswerConfig.model_fields["explanation_opener"].default
    fake = GenericFakeChatModel(messages=iter([]))
    assert Pipeline.create(None, fake).answer_config.explanation_opener is owner
    assert "explanation_opener" not in Pipeline.model_fields  # read from answer_config, not copied


def test_a_vendor_is_sent_no_steer(retriever) -> None:
    # a vendor cannot continue a reply it has begun: the setting leaves its request as it was
    fake = GenericFakeChatModel(messages=iter([AIMessage("x")]))
    pipeline = Pipeline.create(retriever, fake, answer=AnswerConfig(explanation_opener=True), k=2)
    query = make_query("ما هي عاصمة فرنسا؟", lang="ar")
    state = pipeline.request(ChainInput(question=query.question, lang="ar"), query,
                             retriever.retrieve(query, mode="qlang", k=2))
    assert "steer" not in state.request.kwargs


# -- real llama.cpp ---------------------------------------------------------------------------


def _chat(n_ctx: int, model: str = SMALL, max_tokens: int = 90, **kw) -> LocalLlamaChat:
    # each its own loaded model (another n_ctx): no call restores another's prompt state, so
    # every reply is decoded from scratch and greedy decoding gives the same tokens
    return LocalLlamaChat(entry=model, chat=True, n_threads=TEST_THREADS, max_tokens=max_tokens, n_ctx=n_ctx, **kw)


def test_a_grammar_held_reply_is_opened_and_keeps_what_came_before() -> None:
    # the default model: the 0.5B one rambles on its answer line until the tokens run out
    steer = Steer(at=EXPLANATION_HEADERS, write=" Because", grammar=explanation_grammar(3))
    plain = _chat(1024, DEFAULT, 40).invoke(MESSAGES, grammar=GRAMMAR).content
    opened = _chat(1040, DEFAULT).invoke(MESSAGES, grammar=GRAMMAR, steer=steer)
    head = plain[: steer.opening(plain)]
    assert head and opened.content.startswith(head + " Because"), (plain, opened.content)
    # the model went on from the words, within the grammar of an explanation's rest
    assert len(opened.content) > len(head) + len(" Because ") and opened.content[-1] in ".!?>"
    parsed = parse_citation(opened.content, 3)
    assert parsed.explanation.startswith("Because") and parsed.answer
    meta = opened.response_metadata
    # the first token is the first part's; the count is the whole reply's, the words included
    assert meta["time_to_first_token"] > 0 and meta["prompt_tokens"] == meta["prompt_tokens_evaluated"]
    assert meta["completion_tokens"] == _chat(1040, DEFAULT).count_tokens(opened.content)


def test_a_grammar_held_reply_needs_the_grammar_of_its_rest() -> None:
    with pytest.raises(ProviderError, match=r"Steer\.grammar") as info:
        _chat(1040).invoke(MESSAGES, grammar=GRAMMAR, steer=Steer(at=EXPLANATION_HEADERS, write=" Because"))
    assert "\n" not in str(info.value)


def test_a_steer_is_a_steer() -> None:
    wrong = {"at": ["\nExplanation:"], "write": " Because"}

    async def streamed() -> None:
        async for _ in _chat(1040).astream(MESSAGES, steer=wrong):
            pass

    # every way of calling the model reads it: invoke (which streams), stream and astream
    for call in (lambda: _chat(1040).invoke(MESSAGES, steer=wrong),
                 lambda: list(_chat(1040).stream(MESSAGES, steer=wrong)),
                 lambda: asyncio.run(streamed())):
        with pytest.raises(ProviderError, match=r"takes a xlrag\.chains\.local\.steering\.Steer"):
            call()


def test_a_named_chat_format_cannot_be_continued() -> None:
    # llama.cpp renders a named format in code, not from a template xlrag could render again
    assert _chat(1040).continues_replies()
    assert not _chat(1072, chat_format="chatml").continues_replies()
    assert LocalLlamaChat(entry="gemma-3-270m", chat=False, n_threads=TEST_THREADS).continues_replies()


@pytest.mark.slow
def test_the_default_models_arabic_explanation_is_opened_and_its_answer_kept(retriever) -> None:
    # the pipeline end to end on the default model: an Arabic question over XQuAD's passages
    from xlrag.chains.llms import build_llm
    from xlrag.chains.pipeline import Pipeline
    from xlrag.chains.rag import GroundedChain
    from xlrag.config import LLMConfig

    question = "كم عدد النقاط التي سمح بها دفاع فريق بانثرز؟"
    seen = {}
    # today's answer line without an explanation (answer.explanation: false stops at the header,
    # so it is also the cheap way to get it), then the whole reply, opened
    for opener, n_ctx in ((False, 2080), (True, 2096)):
        llm = build_llm(LLMConfig(model="qwen2.5-coder-1.5b-instruct", max_tokens=140, n_threads=TEST_THREADS,
                                  n_ctx=n_ctx))
        chain = GroundedChain(pipeline=Pipeline.create(retriever, llm,
                                                       answer=AnswerConfig(post_hoc_citations=False, explanation=opener,
                                                                           explanation_opener=opener), mode="qlang_en",
                                                       k=1))
        seen[opener] = chain.invoke({"question": question, "lang": "ar"})
    plain, opened = seen[False], seen[True]
    assert opened.explanation.startswith("لأن"), opened.raw_output
    assert opened.answer == plain.answer
    assert [c.marker for c in opened.citations] == [c.marker for c in plain.citations]
    # the stop left the reply at the newline before the header; the opened reply goes on from there
    assert opened.raw_output.startswith(plain.raw_output), (plain.raw_output, opened.raw_output)
    assert opened.raw_output[len(plain.raw_output):].lstrip("\n").startswith("Explanation: لأن"), opened.raw_output
