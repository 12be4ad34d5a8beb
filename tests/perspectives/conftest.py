"""A scripted chat model that answers by what it is shown, for the perspectives view.

The view answers each language concurrently (async) or in turn (sync), and the agent may
ask for translations in between, so replies in a fixed order would not fit: this model
reads its prompt. An answering prompt gets the reply its passages' language is scripted
to give, citing the shown passage that holds the scripted number. Every call is counted by
kind, so a test can hold the costs (the pairs the words leave unsure go to the calibrated
judge panel, which asks no model).
Retrieval, parsing, lingua, the agent's checks and the comparisons are all real.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

import pytest
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import Field

QUESTION = "How many points did the Panthers defense give up?"
_DOC = re.compile(r"^<doc(\d+)>(.*?)(?=^<doc\d+>|\Z)", re.MULTILINE | re.DOTALL)


def script_lang(text: str) -> str:
    """The language of a passage, as far as these tests need: Cyrillic, Spanish, or English."""
    if re.search("[\u0400-\u04ff]", text):
        return "ru"
    if re.search(r"\b(puntos|Los|que|de la)\b", text):
        return "es"
    if re.search(r"\b(Punkte|Die|der|und)\b", text):
        return "de"
    return "en"


class ByPrompt(BaseChatModel):
    """``answers``: passage language -> (number to cite, answer line); ``calls`` counts
    answer and other calls."""

    answers: dict[str, tuple[str, str]]
    calls: Counter = Field(default_factory=Counter)
    asked: list[str] = Field(default_factory=list, description="every prompt that was not an answer's")

    @property
    def _llm_type(self) -> str:
        return "scripted-by-prompt"

    def reply(self, prompt: str) -> str:
        docs = _DOC.findall(prompt)
        if not docs:
            self.calls["other"] += 1
            self.asked.append(prompt)
            return prompt.strip().splitlines()[-1]  # a translation request: its text, unchanged
        self.calls["answer"] += 1
        lang = script_lang(docs[0][1])
        number, line = self.answers[lang]
        marker = next((n for n, text in docs if number in text), docs[0][0])
        return f"Cited Documents: <doc{marker}>\nAnswer: {line}\nExplanation: <doc{marker}> gives {number}."

    def _generate(self, messages: Any, stop: Any = None, run_manager: Any = None, **kwargs: Any) -> ChatResult:
        prompt = "\n".join(str(m.content) for m in messages)
        return ChatResult(generations=[ChatGeneration(message=AIMessage(self.reply(prompt)))])


@pytest.fixture
def view(retriever):
    """``view(answers, **config)``: the perspectives view over the XQuAD index."""
    from xlrag import build_perspectives
    from xlrag.config import XlragConfig

    def make(answers: dict[str, tuple[str, str]], **cfg: Any):
        llm = ByPrompt(answers=answers)
        config = XlragConfig(retrieval={"k": 3}, **cfg)
        return build_perspectives(config, llm=llm, retriever=retriever), llm

    return make
