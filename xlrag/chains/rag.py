"""The grounded RAG chain as a typed LangChain Runnable: ``answer``, ``mc`` and ``citation``.

    ChainInput → prepare (detect language) → retrieve (IR mode) → localized prompt
               → request (provider profile) → LLM → parse → postprocess (post-hoc
               citations if the model gave none, attribution rerank) → GroundedAnswer

A thin driver of :class:`~xlrag.chains.pipeline.Pipeline`, which writes the steps. Input is
a question string, a :class:`~xlrag.schema.Query`, a :class:`ChainInput` or a mapping with
its fields. ``invoke``, ``ainvoke`` and ``batch`` return a GroundedAnswer; ``stream`` and
``astream`` yield the model's reply as :class:`AnswerToken` chunks while it is generated,
then the GroundedAnswer ``invoke`` would have returned. Retrieval is a retriever run in the
chain's callback tree (a tracer sees its query and documents); the async path awaits the
LLM and runs retrieval's and grounding's blocking work in worker threads.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from langchain_core.runnables import (
    Runnable,
    RunnableConfig,
    RunnableGenerator,
    RunnableLambda,
    RunnableSerializable,
)
from pydantic import ConfigDict, model_validator

from xlrag.chains.fewshot import base_model_messages
from xlrag.chains.finalize import finalize
from xlrag.chains.pipeline import Pipeline
from xlrag.chains.state import AnswerChunk, AnswerToken, ChainInput, ChainState
from xlrag.formats import AnswerFormat
from xlrag.modes import Mode
from xlrag.schema import GroundedAnswer, Query

if TYPE_CHECKING:
    from collections.abc import Sequence

    from xlrag.chains.grounding import PostHocCiter
    from xlrag.chains.postprocess import Postprocessor
    from xlrag.chains.profiles import ProviderProfile
    from xlrag.config import XlragConfig
    from xlrag.indexes.retriever import CrossLingualRetriever
    from xlrag.prompts import PromptLibrary

__all__ = ["AnswerChunk", "AnswerToken", "ChainInput", "ChainState", "GroundedChain", "base_model_messages",
           "finalize"]


class GroundedChain(RunnableSerializable[Any, GroundedAnswer]):
    """Answer in the user's language over passages chosen by an IR mode, with <docN> citations.

    A retriever of None or ``mode="no_ir"`` answers closed-book. The parts are the
    pipeline's (``chain.pipeline``); ``retriever``, ``llm``, ``prompts`` and the rest read
    through to it. Over parts already built:
    ``GroundedChain(pipeline=Pipeline.create(retriever, llm, answer=AnswerConfig(format="mc"), k=3))``.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    pipeline: Pipeline

    @model_validator(mode="before")
    @classmethod
    def _named_for_its_format(cls, data: Any) -> Any:
        # a tracer shows the run as xlrag_<format>, however the chain was made
        if isinstance(data, dict) and data.get("name") is None and isinstance(data.get("pipeline"), Pipeline):
            data = {**data, "name": f"xlrag_{data['pipeline'].fmt.value}"}
        return data

    @classmethod
    def from_config(cls, config: XlragConfig | str | Path | None = None, *, llm: Runnable | None = None,
                    retriever: CrossLingualRetriever | None = None, fmt: AnswerFormat | str | None = None,
                    mode: Mode | str | None = None, prompts: PromptLibrary | None = None,
                    few_shot: bool | None = None, postprocessors: Sequence[Postprocessor] = ()
                    ) -> GroundedChain:
        """The chain over :meth:`Pipeline.from_config <xlrag.chains.pipeline.Pipeline.from_config>`
        (the same arguments)."""
        return cls(pipeline=Pipeline.from_config(config, llm=llm, retriever=retriever, fmt=fmt, mode=mode,
                                                 prompts=prompts, few_shot=few_shot, postprocessors=postprocessors))

    # -- the parts, read through ---------------------------------------------------------------
    @property
    def retriever(self) -> CrossLingualRetriever | None:
        return self.pipeline.retriever

    @property
    def llm(self) -> Runnable:
        return self.pipeline.llm

    @property
    def fmt(self) -> AnswerFormat:
        return self.pipeline.fmt

    @property
    def mode(self) -> Mode | None:
        return self.pipeline.mode

    @property
    def k(self) -> int | None:
        return self.pipeline.k

    @property
    def prompts(self) -> PromptLibrary:
        return self.pipeline.prompts

    @property
    def profile(self) -> ProviderProfile:
        return self.pipeline.profile

    @property
    def few_shot(self) -> bool:
        return self.pipeline.few_shot

    @property
    def citer(self) -> PostHocCiter | None:
        return self.pipeline.citer

    @property
    def label(self) -> str:
        return self.pipeline.label

    def query_for(self, inp: ChainInput) -> Query:
        return self.pipeline.query_for(inp)

    def prepare(self, value: Any, config: RunnableConfig | None = None) -> ChainState:
        """Retrieve and build the request: everything up to the LLM call."""
        return self.pipeline.prepare(value, config)

    async def aprepare(self, value: Any, config: RunnableConfig | None = None) -> ChainState:
        return await self.pipeline.aprepare(value, config)

    # -- Runnable --------------------------------------------------------------------------
    # The run is LangChain's own: a RunnableLambda (RunnableGenerator to stream) under the
    # chain's name opens it, reports its errors and end, and hands the pipeline a config whose
    # callbacks are the run's children.
    def _steps(self) -> RunnableLambda:
        return RunnableLambda(self.pipeline.answer, afunc=self.pipeline.aanswer, name=self.get_name())

    # **kwargs: Runnable's own contract (a caller's per-call options reach the steps' Runnable)
    def invoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> GroundedAnswer:
        return self._steps().invoke(input, config, **kwargs)

    async def ainvoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> GroundedAnswer:
        return await self._steps().ainvoke(input, config, **kwargs)

    # The input is one value (a question, a mapping), never a stream of pieces: the first is it.
    def _stream(self, inputs: Iterator[Any], config: RunnableConfig) -> Iterator[AnswerChunk]:
        yield from self.pipeline.stream_answer(next(inputs), config)

    async def _astream(self, inputs: AsyncIterator[Any], config: RunnableConfig) -> AsyncIterator[AnswerChunk]:
        async for chunk in self.pipeline.astream_answer(await anext(inputs), config):
            yield chunk

    def _streamed(self) -> RunnableGenerator:
        # langchain_core passes the config to a transform whose signature takes one; its
        # annotation names only the one-argument form
        return RunnableGenerator(self._stream, self._astream, name=self.get_name())  # type: ignore[arg-type]

    def stream(self, input: Any, config: RunnableConfig | None = None) -> Iterator[AnswerChunk]:  # type: ignore[override]
        """The model's reply as :class:`AnswerToken` chunks while it is generated, then the
        GroundedAnswer ``invoke`` would have returned."""
        return self._streamed().stream(input, config)

    async def astream(self, input: Any, config: RunnableConfig | None = None  # type: ignore[override]
                      ) -> AsyncIterator[AnswerChunk]:
        """:meth:`stream`, awaiting the model's own async stream."""
        async for chunk in self._streamed().astream(input, config):
            yield chunk

