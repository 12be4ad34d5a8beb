"""Ragas 0.4 on any xlrag LLM: the LLM and embedding interfaces its metrics take.

Ragas 0.4 deprecates ``evaluate()``, the ``ragas.metrics.X`` imports and
``LangchainLLMWrapper``; its collections metrics (``ragas.metrics.collections``) take only
an ``InstructorBaseRagasLLM`` (``generate``/``agenerate(prompt, response_model)`` returning
the pydantic reply) and a ``BaseRagasEmbedding``. Here:

* :func:`ragas_llm` is that LLM over any xlrag model (a LangChain chat model): held to the
  reply's JSON schema by the provider's profile where it can be (a llama.cpp grammar, an
  OpenAI ``response_format``), else through LangChain's structured output for models with
  tool calling, else asked in the prompt; the reply is parsed strictly either way
  (:mod:`xlrag.checks.structured`), and one that does not parse is an error with its reason.
* :func:`ragas_embeddings` is the embedding interface over xlrag's multilingual embedder.

The metrics themselves, in the question's language and scored through a bounded loop, are
in :mod:`xlrag.evals.ragas_metrics`.

Ragas posts usage telemetry unless ``RAGAS_DO_NOT_TRACK=true``; it is set here unless the
user set the variable (``RAGAS_DO_NOT_TRACK=false`` turns telemetry on).
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import importlib.util
import json
import os
import sys
from types import ModuleType
from typing import Any, Literal

from pydantic import BaseModel

from xlrag.chains.profiles import structured_runnable
from xlrag.checks.structured import json_objects, message_text
from xlrag.config import LLMConfig
from xlrag.errors import XlragError
from xlrag.registry import require

__all__ = [
    "TELEMETRY_ENV",
    "PromptAdaptationError",
    "StructuredReplyError",
    "import_ragas",
    "llm_identity",
    "ragas_embeddings",
    "ragas_llm",
]

TELEMETRY_ENV = "RAGAS_DO_NOT_TRACK"
_TAGS = ("xlrag:ragas", "nostream")


_VERTEX = "langchain_community.chat_models.vertexai"


def _vertexai_module() -> None:
    """Let ``import ragas`` work with current langchain-community.

    ragas 0.4.3 imports ``ChatVertexAI`` from ``langchain_community.chat_models.vertexai`` at
    import time, only to list it among the models that take ``n`` completions (an
    ``isinstance`` check); langchain-community no longer has that module (the class moved to
    langchain-google-vertexai), so ``import ragas`` fails (ragas issues #2745, #2995). When the
    module is missing, one is registered whose ``ChatVertexAI`` no model is an instance of:
    exactly the answer that check must give, since a Vertex model today is never the old class.
    """
    if _VERTEX in sys.modules:
        return
    try:
        if importlib.util.find_spec(_VERTEX) is not None:
            return
    except ModuleNotFoundError:  # no langchain-community at all: ragas's own error says so
        return
    module = ModuleType(_VERTEX, "Registered by xlrag: the module left langchain-community, "
                                 "and ragas 0.4.3 still imports it.")
    vars(module)["ChatVertexAI"] = type("ChatVertexAI", (), {"__module__": _VERTEX, "__doc__":
                               "Not a model: the class moved to langchain-google-vertexai."})
    sys.modules[_VERTEX] = module


def import_ragas() -> ModuleType:
    """``ragas``, with its telemetry off unless the user turned it on."""
    require("ragas", "eval", "Ragas metrics")
    _vertexai_module()
    # Ragas posts usage events to its vendor unless this is "true". A value the user set
    # (RAGAS_DO_NOT_TRACK=false turns telemetry on) is left alone.
    os.environ.setdefault(TELEMETRY_ENV, "true")
    import ragas
    from ragas import _analytics

    _analytics.do_not_track.cache_clear()  # lru-cached: a value read before the line above must not stick
    return ragas


class StructuredReplyError(XlragError):
    """The model's reply is not valid JSON of the schema Ragas asked for."""

    def __init__(self, schema: str, reason: str, raw: str):
        self.schema, self.reason, self.raw = schema, reason, raw
        shown = raw.strip()[:160]
        super().__init__(f"the model's reply is not a valid {schema}: {reason}; "
                         f"it starts {shown!r}" if shown else f"the model's reply is not a valid {schema}: {reason}")


class PromptAdaptationError(XlragError):
    """A Ragas prompt could not be translated into a row's language."""


def llm_identity(llm: Any) -> tuple[str, str]:
    """A readable label (``provider:model``) and a key for ``llm``: a hash of its class and
    LangChain identifying parameters (model, path, temperature, max tokens, ...), never keys."""
    from xlrag.chains.profiles import PROVIDER_KEY

    provider = (getattr(llm, "metadata", None) or {}).get(PROVIDER_KEY) or type(llm).__name__
    name = getattr(llm, "model_name", None) or getattr(llm, "model", None) or ""
    try:
        params = dict(llm._identifying_params)
    except (AttributeError, TypeError):
        params = {}
    blob = json.dumps({"class": f"{type(llm).__module__}.{type(llm).__qualname__}", "params": params},
                      sort_keys=True, default=str)
    return f"{provider}:{name}", hashlib.sha256(blob.encode()).hexdigest()[:16]


def _mode(llm: Any) -> Literal["schema", "tools", "prompt"]:
    """How ``llm``'s replies are held to a schema (see the module docstring)."""
    from langchain_core.language_models import BaseChatModel

    from xlrag.chains.profiles import profile_for

    if profile_for(llm).json_request({"type": "object"}, "probe"):
        return "schema"
    if type(llm).bind_tools is not BaseChatModel.bind_tools:
        return "tools"
    return "prompt"


def _samples(llm: Any) -> bool:
    """Whether the model may answer the same prompt differently (so a retry can help)."""
    temperature = getattr(llm, "temperature", None)
    return temperature is None or temperature > 0


@functools.cache
def _classes() -> tuple[type, type]:
    """The Ragas subclasses, built on first use so that importing xlrag never imports ragas."""
    import_ragas()
    from ragas.embeddings.base import BaseRagasEmbedding
    from ragas.llms.base import InstructorBaseRagasLLM

    from xlrag.chains.local.runtime import LocalLlamaChat

    class XlragRagasLLM(InstructorBaseRagasLLM):
        """Ragas's LLM interface over an xlrag LangChain chat model."""

        def __init__(self, llm: Any):
            self.llm = llm
            self.label, self.key = llm_identity(llm)
            self.mode = _mode(llm)
            self.samples = _samples(llm)
            self.calls = 0  # model calls made through this adapter
            self._runnables: dict[type, Any] = {}

        def __repr__(self) -> str:
            return f"XlragRagasLLM({self.label}, mode={self.mode})"

        def runnable(self, model: type[BaseModel]) -> Any:
            if model not in self._runnables:
                if self.mode == "tools":
                    run = self.llm.with_structured_output(model, include_raw=True).with_config(tags=list(_TAGS))
                else:
                    run = structured_runnable(self.llm, model.model_json_schema(), model.__name__, _TAGS)
                    if isinstance(self.llm, LocalLlamaChat):
                        # llama.cpp runs in a worker thread that a timeout cannot stop; its
                        # stream stops at the next token once the caller gives up
                        run = run.bind(stream=True)
                self._runnables[model] = run
            return self._runnables[model]

        def parse(self, reply: Any, model: type[BaseModel]) -> Any:
            if self.mode == "tools":
                if reply.get("parsed") is not None:
                    return reply["parsed"]
                error = reply.get("parsing_error")
                raise StructuredReplyError(model.__name__, f"{type(error).__name__}: {error}" if error
                                           else "the reply holds no structured output",
                                           message_text(reply.get("raw", "")))
            raw = message_text(reply)
            found, reason = json_objects(raw.strip(), model, model.__name__) if raw.strip() else ([], "empty reply")
            if len({f.model_dump_json() for f in found}) == 1:
                return found[0]
            if found:
                reason = "the reply holds several different JSON objects"
            if (getattr(reply, "response_metadata", None) or {}).get("finish_reason") == "length":
                reason += "; the reply was cut off at max_tokens (raise llm.max_tokens)"
            raise StructuredReplyError(model.__name__, reason, raw)

        def generate(self, prompt: str, response_model: type[BaseModel]) -> Any:
            self.calls += 1
            return self.parse(self.runnable(response_model).invoke([("user", prompt)]), response_model)

        async def agenerate(self, prompt: str, response_model: type[BaseModel]) -> Any:
            self.calls += 1
            return self.parse(await self.runnable(response_model).ainvoke([("user", prompt)]), response_model)

    class XlragRagasEmbeddings(BaseRagasEmbedding):
        """Ragas's embedding interface over an xlrag embedder.

        Answer relevancy compares the question with questions generated from the answer, so
        every text is embedded in the query role (E5's prefix for symmetric comparisons).
        """

        def __init__(self, embedder: Any):
            super().__init__(cache=None)
            self.embedder = embedder

        def __repr__(self) -> str:
            return f"XlragRagasEmbeddings({getattr(self.embedder, 'name', type(self.embedder).__name__)})"

        def embed_texts(self, texts: list[str]) -> list[list[float]]:  # type: ignore[override]
            return [[float(x) for x in v] for v in self.embedder.embed(list(texts), "query")]

        def embed_text(self, text: str) -> list[float]:  # type: ignore[override]
            return self.embed_texts([text])[0]

        async def aembed_texts(self, texts: list[str]) -> list[list[float]]:  # type: ignore[override]
            # the embedder is native and blocking: keep it off the event loop
            return await asyncio.to_thread(self.embed_texts, list(texts))

        async def aembed_text(self, text: str) -> list[float]:  # type: ignore[override]
            return (await self.aembed_texts([text]))[0]

    return XlragRagasLLM, XlragRagasEmbeddings


def ragas_llm(llm: Any = None) -> Any:
    """A Ragas ``InstructorBaseRagasLLM`` over ``llm``: a LangChain chat model, an
    :class:`~xlrag.config.LLMConfig`, or None for the default local model."""
    if llm is None or isinstance(llm, LLMConfig):
        from xlrag.chains.llms import build_llm

        llm = build_llm(llm or LLMConfig())
    return _classes()[0](llm)


def ragas_embeddings(embedder: Any = None) -> Any:
    """A Ragas ``BaseRagasEmbedding`` over an xlrag embedder (default: the local multilingual one)."""
    if embedder is None:
        from xlrag.indexes.embedders import build_embedder

        embedder = build_embedder()
    return _classes()[1](embedder)
