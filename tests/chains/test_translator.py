"""The LLM translator: a translation the model stopped at max_tokens is an error, not a fragment."""

from __future__ import annotations

import pytest
from langchain_core.messages import AIMessage

from tests.chains.conftest import TEST_THREADS
from xlrag.chains.profiles import CHAT, AnthropicProfile, CohereProfile, LocalProfile, OpenAIProfile
from xlrag.config import LLMConfig
from xlrag.errors import TranslationCutOffError
from xlrag.schema import Passage

LONG = "How many points did the Panthers defense surrender over the whole of the regular season?"


@pytest.mark.parametrize(("profile", "metadata", "cut"), [
    (OpenAIProfile(), {"finish_reason": "length"}, True),
    (OpenAIProfile(), {"finish_reason": "stop"}, False),
    (LocalProfile(), {"finish_reason": "length"}, True),
    (CHAT, {}, False),
    (AnthropicProfile(), {"stop_reason": "max_tokens"}, True),
    (AnthropicProfile(), {"stop_reason": "end_turn"}, False),
    (CohereProfile(), {"finish_reason": "MAX_TOKENS"}, True),
    (CohereProfile(), {"finish_reason": "COMPLETE"}, False),
])
def test_each_profile_reads_its_providers_token_limit_stop(profile, metadata, cut):
    assert profile.cut_off(AIMessage("x", response_metadata=metadata)) is cut


@pytest.fixture(scope="module")
def tiny_budget():
    from xlrag.chains.llms import build_llm

    return build_llm(LLMConfig(model="gemma-3-270m", max_tokens=4, n_threads=TEST_THREADS))


def test_a_translation_cut_at_max_tokens_raises(tiny_budget):
    from xlrag.chains.translator import LLMTranslator

    with pytest.raises(TranslationCutOffError, match="max_tokens=4; raise") as e:
        LLMTranslator(tiny_budget).translate(LONG, "en", "de")
    assert "\n" not in str(e.value)


def test_attribution_in_english_says_why_instead_of_judging_a_fragment(tiny_budget):
    from xlrag.chains.checkers import attribution_checker

    passage = Passage(id="p", doc_id="d", lang="de", text="Die Verteidigung der Panthers ließ 308 Punkte zu.")
    result = attribution_checker(tiny_budget).check(LONG, "Sie ließ in der ganzen Saison 308 Punkte zu.", [passage],
                                                    "de", setting="in_english")
    (vote,) = result.votes
    assert vote.verdict == "invalid" and "TranslationCutOffError" in vote.reason and "max_tokens" in vote.reason
    assert result.attributable is None
