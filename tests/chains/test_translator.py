"""The LLM translator: a translation the model stopped at max_tokens is an error, not a fragment;
a passage is translated whole, line by line, and what a cut reply leaves is flagged."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import Field

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


# -- whole passages (issue #52) ----------------------------------------------------------------

class Upper(BaseChatModel):
    """Translates into capitals: the text after the prompt's blank line, upper-cased; a text in
    ``cut`` gets a reply stopped at max_tokens. Every text asked is kept, in order."""

    max_tokens: int = 256
    asked: list[str] = Field(default_factory=list)
    cut: set[str] = Field(default_factory=set)

    @property
    def _llm_type(self) -> str:
        return "upper"

    def _generate(self, messages: Any, stop: Any = None, run_manager: Any = None, **kwargs: Any) -> ChatResult:
        text = str(messages[-1].content).rsplit("\n\n", 1)[-1]
        self.asked.append(text)
        done = {"finish_reason": "length" if text in self.cut else "stop"}
        reply = text.upper()[: len(text) // 2] if text in self.cut else text.upper()
        return ChatResult(generations=[ChatGeneration(message=AIMessage(reply, response_metadata=done))])


TITLE = "Kenia: Notdienste und Nationalparks"
BODY = ("Die Notrufnummer in Kenia ist 959. Polizei, Rettungsdienst und Zivilschutz nehmen Anrufe Tag und "
        "Nacht entgegen. Der erste Nationalpark des Landes wurde 1960 gegründet.")


def test_a_passage_is_translated_whole_one_line_at_a_time():
    from xlrag.chains.translator import LLMTranslator, translate_passage

    llm = Upper()
    out = translate_passage(LLMTranslator(llm), f"{TITLE}\n{BODY}", "de", "en")
    assert out.text == f"{TITLE.upper()}\n{BODY.upper()}" and out.complete and out.notes == []
    assert llm.asked == [TITLE, BODY]
    # the one-line translation of a search query is as it was
    assert LLMTranslator(Upper()).translate(TITLE, "de", "en") == TITLE.upper()


def test_a_line_longer_than_a_reply_goes_in_pieces_of_whole_sentences():
    from xlrag.chains.translator import LLMTranslator, translate_passage

    llm = Upper(max_tokens=80)  # 40 tokens a piece: about 80 bytes as counted without a tokenizer
    translator = LLMTranslator(llm)
    out = translate_passage(translator, f"{TITLE}\n{BODY}", "de", "en")
    sentences = [s for s in BODY.replace(". ", ".\n").splitlines()]
    assert llm.asked == [TITLE, *sentences]  # each sentence whole, none cut in the middle
    assert all(translator.count_tokens(p) <= 40 for p in llm.asked)
    assert out.text == f"{TITLE.upper()}\n{BODY.upper()}" and out.complete


def test_a_piece_cut_at_max_tokens_stays_untranslated_and_is_noted():
    from xlrag.chains.translator import LLMTranslator, translate_passage

    llm = Upper(cut={BODY})
    out = translate_passage(LLMTranslator(llm), f"{TITLE}\n{BODY}", "de", "en")
    assert out.text == f"{TITLE.upper()}\n{BODY}" and not out.complete
    (note,) = out.notes
    assert note.startswith("line 2: the en translation of") and "max_tokens=256" in note


def test_a_real_model_cut_at_its_budget_gives_the_passage_back_flagged(tiny_budget):
    """gemma-3-270m with max_tokens=4: every line's reply is cut; the passage comes back whole,
    in its own words, each line noted, and nothing raises."""
    from xlrag.chains.translator import LLMTranslator, translate_passage

    out = translate_passage(LLMTranslator(tiny_budget), f"{TITLE}\n{BODY}", "de", "en")
    assert not out.complete and out.notes and all("max_tokens=4" in n for n in out.notes)
    assert out.text.count("\n") == 1  # line for line
    assert "959" in out.text and "1960" in out.text  # the untranslated sentences are there, not dropped


def test_a_label_the_model_puts_before_its_translation_is_not_the_translation():
    """The default model answered a line of the test bed with "日本語訳：" (Japanese translation:)
    and the translation under it; a line that itself ends in a colon keeps its colon line."""
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel

    from xlrag.chains.translator import LLMTranslator

    llm = GenericFakeChatModel(messages=iter([AIMessage("日本語訳：\n\nケニア：緊急サービスと国立公園"),
                                              AIMessage("緊急番号：\n警察：110")]))
    assert LLMTranslator(llm).translate(TITLE, "de", "ja") == "ケニア：緊急サービスと国立公園"
    assert LLMTranslator(llm).translate("Notrufnummern:", "de", "ja") == "緊急番号："
