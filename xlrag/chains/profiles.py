"""What differs between LLM providers, in one profile per provider.

A :class:`ProviderProfile` says whether a model is driven as a chat model or a
base model, whether it gets the worked example of the answer format by default,
which stop sequences end its reply, how the request is built (Cohere takes the
passages as ``documents``, Anthropic as document blocks) and how the vendor's
native citations are read. Each LLM factory registers its profile beside itself
(``xlrag/chains/llms.py``), so adding a vendor touches one place, and the chain
never branches on a provider's type.

``build_llm`` records the provider name in the model's public ``metadata``
(``xlrag_provider``); a chat model built by the user gets :data:`CHAT`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.messages import BaseMessage
from pydantic import BaseModel, ConfigDict

from xlrag import registry
from xlrag.chains.vendor_citations import (
    anthropic_citations,
    anthropic_documents,
    cohere_citations,
    cohere_documents,
)
from xlrag.errors import ConfigError, UnknownProviderError
from xlrag.formats import EXPLANATION_HEADERS, AnswerFormat
from xlrag.prompts import PromptLibrary
from xlrag.schema import Citation, Hit

__all__ = [
    "CHAT",
    "PROVIDER_KEY",
    "AnthropicProfile",
    "CohereProfile",
    "LocalProfile",
    "OpenAIProfile",
    "ProviderProfile",
    "Request",
    "profile_for",
    "register_profile",
    "structured_runnable",
]

PROVIDER_KEY = "xlrag_provider"  # in BaseChatModel.metadata
FEW_SHOT_KEY = "xlrag_few_shot"  # LLMConfig.few_shot, carried with the model built from it
GRAMMAR_KEY = "xlrag_grammar"  # LLMConfig.grammar, likewise

Messages = list[tuple[str, Any]]


# pydantic's mypy plugin gives __init__ a **kwargs beside the field named kwargs (pydantic#3125)
class Request(BaseModel):  # type: ignore[no-redef]
    """The messages and call options actually sent to the model."""

    model_config = ConfigDict(arbitrary_types_allowed=True, frozen=True)

    messages: Messages
    kwargs: dict[str, Any] = {}


class ProviderProfile(BaseModel):
    """The generic chat model: instructions only, no stop sequences, no native citations."""

    model_config = ConfigDict(frozen=True)

    name: str = "chat"
    # the response_metadata entry that says the reply stopped at max_tokens (LangChain's
    # OpenAI-style chat models, Mistral and llama.cpp report finish_reason "length")
    cut_off_at: tuple[str, str] = ("finish_reason", "length")
    # whether a streamed reply carries all that the profile reads (its native citations):
    # when not, a stream asks for the whole reply and yields its text at once
    streams: bool = True

    def is_chat(self, llm: Any) -> bool:
        return True

    def cut_off(self, message: BaseMessage | Any) -> bool:
        """Whether the reply ended because it reached max_tokens, not because it was done."""
        return self.reported_cut_off(message) is True

    def reported_cut_off(self, message: BaseMessage | Any) -> bool | None:
        """What the provider says of how the reply ended: True at max_tokens, False when it
        finished (or met a stop sequence), None when it does not say."""
        key, value = self.cut_off_at
        reported = (getattr(message, "response_metadata", None) or {}).get(key)
        return None if reported is None else reported == value

    def few_shot_default(self, llm: Any) -> bool:
        return False

    def stop(self, llm: Any, prompts: PromptLibrary, lang: str) -> list[str]:
        return []

    def request(self, messages: Messages, hits: Sequence[Hit], stop: list[str]) -> Request:
        return Request(messages=messages, kwargs={"stop": stop} if stop else {})

    def open_explanation(self, llm: Any, words: str, n_docs: int, grammar: bool) -> dict[str, Any]:
        """Request arguments that open a citation reply's explanation with ``words`` once its
        answer line is written ({} where the provider cannot continue a reply it has begun)."""
        return {}

    def citations(self, message: BaseMessage | Any, hits: Sequence[Hit]) -> list[Citation]:
        return []

    def supports_tools(self, llm: Any) -> bool:
        """Whether ``llm`` takes tools (``bind_tools``): LangChain's base chat model raises
        NotImplementedError there, so a class that overrides it has tool calling."""
        from langchain_core.language_models.chat_models import BaseChatModel

        bind = getattr(type(llm), "bind_tools", None)
        return bind is not None and bind is not BaseChatModel.bind_tools

    def grammar_default(self, llm: Any) -> bool:
        """Whether replies are held to the format's grammar when ``llm.grammar`` is not set:
        vendors take none (their structured output is their own)."""
        return False

    def answer_grammar(self, llm: Any, fmt: AnswerFormat, n_docs: int, n_options: int) -> dict[str, Any]:
        """Call options that hold the reply to ``fmt`` over ``n_docs`` passages (``llm.grammar``).

        Vendors' APIs take no grammar, and ignoring the setting would pass unconstrained
        replies off as constrained ones, so asking is an error.
        """
        from xlrag.chains.local.grammar import SETTING

        raise ConfigError(f"llm provider {self.name!r} takes no answer grammar (only the local llama.cpp "
                          f"provider does); set {SETTING}: false")

    def check_grammar(self, llm: Any, fmt: AnswerFormat, n_docs: int) -> None:
        """Fail now, with the setting to change, if ``llm`` cannot take ``fmt``'s grammar."""
        self.answer_grammar(llm, fmt, n_docs, 2 if fmt is AnswerFormat.MC else 0)

    def json_request(self, schema: dict[str, Any], name: str) -> dict[str, Any]:
        """Call options that hold the reply to the JSON ``schema``.

        ``{}``: the provider has no such option here, and the prompt alone asks for JSON (the
        reply is still parsed strictly, and one that does not parse is recorded as invalid).
        """
        return {}


class OpenAIProfile(ProviderProfile):
    """OpenAI and OpenAI-compatible servers: structured outputs through ``response_format``."""

    name: str = "openai"

    def json_request(self, schema: dict[str, Any], name: str) -> dict[str, Any]:
        return {"response_format": {"type": "json_schema",
                                    "json_schema": {"name": name, "schema": schema}}}


class LocalProfile(ProviderProfile):
    """llama.cpp: a base model continues a pattern and never stops by itself; an instruct
    model goes through its chat template. The model itself says which it is."""

    name: str = "local"

    def is_chat(self, llm: Any) -> bool:
        return bool(getattr(llm, "chat", False))

    def few_shot_default(self, llm: Any) -> bool:
        return bool(getattr(llm, "few_shot_default", True))

    def stop(self, llm: Any, prompts: PromptLibrary, lang: str) -> list[str]:
        if self.is_chat(llm):
            return []
        # A base model starts the next "Question:" in the prompt's own language, or pads
        # with blank lines, or starts another document.
        labels = [prompts.render(role, lang) for role in ("question_label", "documents_label")]
        return [*(f"\n{label}:" for label in labels), *(f"\n{label} :" for label in labels), "\n\n", "\n<doc"]

    def answer_grammar(self, llm: Any, fmt: AnswerFormat, n_docs: int, n_options: int) -> dict[str, Any]:
        from xlrag.chains.local.grammar import answer_grammar

        # the text only: LocalLlamaChat compiles it for its model, once (chains/local/grammar.py)
        return {"grammar": answer_grammar(fmt, n_docs, n_options)}

    def open_explanation(self, llm: Any, words: str, n_docs: int, grammar: bool) -> dict[str, Any]:
        continues = getattr(llm, "continues_replies", None)
        if continues is None or not continues():
            return {}
        from xlrag.chains.local.grammar import explanation_grammar
        from xlrag.chains.local.steering import Steer

        # the header's end is where the grammar's "Explanation: " has its space: the words take it
        return {"steer": Steer(at=EXPLANATION_HEADERS, write=f" {words}",
                               grammar=explanation_grammar(n_docs) if grammar else None)}

    def check_grammar(self, llm: Any, fmt: AnswerFormat, n_docs: int) -> None:
        from xlrag.chains.local.grammar import SETTING

        compile_grammar = getattr(llm, "compile_grammar", None)
        if compile_grammar is None:
            raise ConfigError(f"the local profile's grammar needs xlrag's llama.cpp model, not "
                              f"{type(llm).__name__}; set {SETTING}: false")
        # a citation reply may carry a choice line (options given per call): both shapes
        for n_options in ((2,) if fmt is AnswerFormat.MC else (0, 2) if fmt is AnswerFormat.CITATION else (0,)):
            compile_grammar(self.answer_grammar(llm, fmt, n_docs, n_options)["grammar"])

    def json_request(self, schema: dict[str, Any], name: str) -> dict[str, Any]:
        # LocalLlamaChat turns this into a llama.cpp grammar (base) or response_format (chat)
        return {"json_schema": schema}


class CohereProfile(ProviderProfile):
    """Cohere v2 chat grounds on ``documents=`` and answers with citation spans."""

    name: str = "cohere"
    cut_off_at: tuple[str, str] = ("finish_reason", "MAX_TOKENS")
    streams: bool = False  # langchain-cohere's stream drops the citations (its message-end chunk has none)

    def request(self, messages: Messages, hits: Sequence[Hit], stop: list[str]) -> Request:
        base = super().request(messages, hits, stop)
        return Request(messages=messages, kwargs={**base.kwargs, "documents": cohere_documents(hits)}) if hits else base

    def citations(self, message: BaseMessage | Any, hits: Sequence[Hit]) -> list[Citation]:
        return cohere_citations(message, hits)


class AnthropicProfile(ProviderProfile):
    """Anthropic takes the passages as document blocks with citations enabled."""

    name: str = "anthropic"
    cut_off_at: tuple[str, str] = ("stop_reason", "max_tokens")

    def request(self, messages: Messages, hits: Sequence[Hit], stop: list[str]) -> Request:
        if not hits:
            return super().request(messages, hits, stop)
        (_, system), (_, user) = messages
        blocks = [*anthropic_documents(hits), {"type": "text", "text": user}]
        return super().request([("system", system), ("user", blocks)], hits, stop)

    def citations(self, message: BaseMessage | Any, hits: Sequence[Hit]) -> list[Citation]:
        return anthropic_citations(message, hits)


CHAT = ProviderProfile()


def register_profile(provider: str, profile: ProviderProfile) -> ProviderProfile:
    """Register ``profile`` for the LLM provider registered as ``provider`` (the built-in
    providers pass theirs to ``registry.register``)."""
    return registry.set_profile("llm", provider, profile)


def profile_for(llm: Any, profile: ProviderProfile | str | None = None) -> ProviderProfile:
    """The profile to drive ``llm`` with: the one given, else its provider's, else :data:`CHAT`."""
    if isinstance(profile, ProviderProfile):
        return profile
    name = profile or (getattr(llm, "metadata", None) or {}).get(PROVIDER_KEY)
    if name is None:
        return CHAT
    found = registry.profile("llm", name)  # loads the built-in providers, which bring theirs
    if found is None:
        raise UnknownProviderError("llm profile", name, registry.profiled("llm"))
    return found


def structured_runnable(llm: Any, schema: dict[str, Any], name: str, tags: Sequence[str]) -> Any:
    """``llm`` bound to the call options that hold its reply to ``schema`` (none when its
    provider has no such option), tagged with ``tags``. The checks and judges parse the reply
    (:mod:`xlrag.checks.structured`); their builders hand them this runnable."""
    options = profile_for(llm).json_request(schema, name)
    return (llm.bind(**options) if options else llm).with_config(tags=list(tags))


def configured_grammar(llm: Any) -> bool | None:
    """``LLMConfig.grammar`` of the config the model was built from (None: not set)."""
    return (getattr(llm, "metadata", None) or {}).get(GRAMMAR_KEY)


def configured_few_shot(llm: Any) -> bool | None:
    """``LLMConfig.few_shot`` of the config the model was built from (None: not set)."""
    return (getattr(llm, "metadata", None) or {}).get(FEW_SHOT_KEY)
