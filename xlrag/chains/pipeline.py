"""The answering pipeline: the steps every driver runs, and the one place a stack is built.

    prepare (detect the language, choose the mode, retrieve, the passage postprocessors:
    rerank, context selection) → request (localized prompt, provider profile) → generate
    (the LLM) → parse → the answer postprocessors (post-hoc citations, attribution rerank)

:class:`Pipeline` holds the parts (retriever, LLM, profile, prompts, postprocessors) and its
settings (the ``answer:`` section whole, the retrieval limits it reads), and writes each step
once. Its ``postprocessors`` are one list, in order: the
:class:`~xlrag.indexes.postprocess.PassagePostprocessor` steps run on the passages before the
prompt, the :class:`~xlrag.chains.postprocess.AnswerPostprocessor` steps on the parsed answer.

The drivers are thin: :class:`~xlrag.chains.rag.GroundedChain` runs the steps straight
through; the agent's nodes are the same steps plus verify and repair; the tool agent, the
query engine, the CLI, the server and the eval runners get theirs from
:meth:`Pipeline.from_config`. Retrieval runs as a LangChain retriever
(:class:`~xlrag.indexes.langchain.XlragLangChainRetriever`), so the ``config`` a step is
given puts a retriever run, with its documents, into the caller's trace. The LLM call and
retrieval have async bodies of their own (retrieval's blocking work runs in worker
threads); the other steps reach the event loop through one thread bridge.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Sequence
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from langchain_core.runnables import Runnable, RunnableConfig
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr

from xlrag.chains.context import ContextSelector
from xlrag.chains.echo import echo_reference
from xlrag.chains.fewshot import base_model_messages
from xlrag.chains.finalize import message_text, parse_reply, whole_reply
from xlrag.chains.postprocess import (
    ATTRIBUTION_RERANK,
    POST_HOC,
    AnswerPostprocessor,
    PostHocCitations,
    Postprocessor,
    checked_postprocessors,
)
from xlrag.chains.profiles import (
    ProviderProfile,
    Request,
    configured_few_shot,
    configured_grammar,
    profile_for,
)
from xlrag.chains.state import GIVEN, AnswerChunk, AnswerToken, ChainInput, ChainState
from xlrag.config import resolve_config
from xlrag.config_sections import AnswerConfig
from xlrag.detect import question_language
from xlrag.errors import ConfigError
from xlrag.formats import (
    DEFAULT_LAYOUT,
    EXPLANATION_STOPS,
    AnswerFormat,
    PromptLayout,
    neutralize_markers,
    parse_format,
)
from xlrag.indexes.langchain import XlragLangChainRetriever
from xlrag.indexes.postprocess import PassagePostprocessor, build_postprocessors, fetch_k, postprocessed
from xlrag.indexes.retriever import CrossLingualRetriever
from xlrag.modes import AUTO, IRMode, Mode, parse_mode
from xlrag.prompts import PromptLibrary
from xlrag.queries import check_question
from xlrag.schema import GroundedAnswer, Hit, Query, Retrieval, make_query
from xlrag.steps import Call, Steps, arun, run
from xlrag.validate import check_k, k_field

if TYPE_CHECKING:
    from xlrag.chains.grounding import PostHocCiter
    from xlrag.config import XlragConfig

__all__ = ["Pipeline"]


class Pipeline(BaseModel):
    """The parts of an answering stack and its steps. Build one with :meth:`from_config`
    (or :meth:`create` from parts already built)."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    retriever: CrossLingualRetriever | None
    llm: Runnable
    mode: Mode | None = Field(None, description="the IR mode when a call names none (None: the retriever's)")
    # the settings it reads: the answer: section whole (named so beside the answer() step), and
    # the two retrieval limits
    answer_config: AnswerConfig = Field(default_factory=AnswerConfig, description="how it answers (answer:)")
    k: int | None = k_field(None, "passages shown to the LLM (None: the retriever's k)")
    max_question_chars: int | None = Field(None, description="longer questions are refused (None: no limit)")
    prompts: PromptLibrary = Field(default_factory=PromptLibrary)
    profile: ProviderProfile
    few_shot: bool
    grammar: bool = Field(False, description="replies held to the format's grammar (llm.grammar; the profile's)")
    postprocessors: list[Any] = Field(default_factory=list,
                                      description="passage postprocessors (before the prompt) and answer "
                                                  "postprocessors (after the parse), each kind run in this order")
    translator: Any = Field(None, description="a (cached) LLMTranslator over the same LLM, for the agent's checks "
                                              "and repairs")
    attribution: Any = Field(None, description="the stack's one AttributionChecker (answer.attribution_checker), "
                                               "shared by the attribution reranker, the agent and the view; None: "
                                               "no step checks attribution")
    owns_retriever: bool = Field(False, description="close() closes the retriever: from_config opened it")
    # the retriever as LangChain runs it, made once with the pipeline: every retrieval is a run of
    # this one object, not of a model rebuilt per call
    _searcher: XlragLangChainRetriever | None = PrivateAttr(None)

    def model_post_init(self, context: Any) -> None:
        self._searcher = XlragLangChainRetriever(retriever=self.retriever) if self.retriever is not None else None

    # -- building ---------------------------------------------------------------------------
    @classmethod
    def create(cls, retriever: CrossLingualRetriever | None, llm: Runnable, *, answer: AnswerConfig | None = None,
               mode: Mode | None = None, k: int | None = None, prompts: PromptLibrary | None = None,
               profile: ProviderProfile | str | None = None, few_shot: bool | None = None,
               grammar: bool | None = None, postprocessors: Sequence[Postprocessor] = ()) -> Pipeline:
        """A pipeline over parts already built, answering as ``answer`` says (an
        :class:`~xlrag.config.AnswerConfig`: the format, the explanation, the answer
        postprocessors; default: its defaults, the config's own). ``postprocessors``: the passage
        steps (a reranker, a :class:`~xlrag.chains.context.ContextSelector`) in the order they run,
        and answer steps, which run after the post-hoc citations (``answer.post_hoc_citations``, by
        the retriever's embedder and stored vectors): an
        :class:`~xlrag.chains.attribution_rerank.AttributionReranker` for ``answer.attribution_rerank``.
        ``profile`` overrides the provider profile found for ``llm``. ``few_shot`` and ``grammar``
        (None: the ``llm.few_shot``/``llm.grammar`` the model was built with, else the profile's
        default) override the model's; a grammar is compiled here, so a model that cannot take it
        fails now rather than on the first question. :meth:`from_config` builds every part from a config."""
        from xlrag.chains.grounding import PostHocCiter

        answer = answer if answer is not None else AnswerConfig()
        postprocessors = checked_postprocessors(postprocessors)
        if answer.attribution_rerank and not any(getattr(p, "name", None) == ATTRIBUTION_RERANK
                                                  for p in postprocessors):
            raise ConfigError("answer.attribution_rerank is on, but no AttributionReranker was given; pass "
                              "postprocessors=[AttributionReranker(checker)], or build it with Pipeline.from_config")
        prof = profile_for(llm, profile)
        if few_shot is None:
            few_shot = configured_few_shot(llm)
        if few_shot is None:
            few_shot = prof.few_shot_default(llm)
        if grammar is None:
            grammar = configured_grammar(llm)
        if grammar is None:
            grammar = prof.grammar_default(llm)
        k = check_k(k)
        if grammar:
            # the grammar's shape is the same for any number of passages: k's (or one) stands for all
            prof.check_grammar(llm, answer.format, k or getattr(retriever, "k", None) or 1)
        after: list[Postprocessor] = ([PostHocCitations(PostHocCiter(retriever.embedder, retriever.stores))]
                                      if answer.post_hoc_citations and retriever is not None else [])
        return cls(retriever=retriever, llm=llm, mode=mode, answer_config=answer, k=k, grammar=grammar,
                   prompts=prompts or PromptLibrary(), profile=prof, few_shot=few_shot,
                   postprocessors=[*after, *postprocessors])

    @classmethod
    def from_config(cls, config: XlragConfig | str | Path | None = None, *, llm: Runnable | None = None,
                    retriever: CrossLingualRetriever | None = None, fmt: AnswerFormat | str | None = None,
                    mode: Mode | str | None = None, prompts: PromptLibrary | None = None,
                    few_shot: bool | None = None, postprocessors: Sequence[Postprocessor] = ()) -> Pipeline:
        """The stack ``config`` describes: the only place one is assembled.

        ``llm`` and ``retriever`` replace the ones the config would build (an application's
        own chat model, a retriever already open). ``fmt`` overrides ``answer.format``; ``mode``
        is the IR mode calls default to (default ``retrieval.mode``); ``auto`` (the agent's)
        leaves the choice to each call. No retriever is opened for ``no_ir``. The LLM, one
        translator over it (the ``translate`` policy's query translations and the agent's
        repairs), the steps of ``postprocess:`` and the postprocessors of ``answer:`` are shared
        by every step; ``postprocessors`` run after those of their kind.
        """
        from langgraph.constants import TAG_NOSTREAM

        from xlrag.chains.llms import build_llm
        from xlrag.chains.translator import LLMTranslator
        from xlrag.indexes.translate import CachedTranslator

        cfg = resolve_config(config)
        try:
            chosen = parse_mode(mode if mode is not None else cfg.retrieval.mode, allow_auto=True)
        except ValueError as e:
            raise ConfigError(str(e)) from None
        chat = llm if llm is not None else build_llm(cfg.llm)
        lib = prompts or PromptLibrary()
        # the helpers' calls never reach a user's token stream; one cache for the stack: the
        # agent checks an answer again after a repair that left its words as they were
        translator = CachedTranslator(LLMTranslator(llm=chat.with_config(tags=[TAG_NOSTREAM]), prompts=lib))
        owns = retriever is None and chosen != IRMode.NO_IR
        if owns:
            retriever = CrossLingualRetriever.from_config(cfg, translator=translator)
        after: list[AnswerPostprocessor] = []
        checker = None
        if cfg.answer.attribution_rerank or cfg.answer.attribution_check:
            from xlrag.chains.checkers import configured_checker

            # the one checker of the stack: the reranker's, the agent's and the view's
            checker = configured_checker(cfg, chat.with_config(tags=[TAG_NOSTREAM]), lib, translator)
        if cfg.answer.attribution_rerank:
            from xlrag.chains.attribution_rerank import AttributionReranker

            after.append(AttributionReranker(checker))
        embedder = retriever.embedder if retriever is not None else None
        if embedder is None and "context" in cfg.postprocess and cfg.context.select == "segments":
            from xlrag.indexes.embedders import build_embedder

            embedder = build_embedder(cfg.embedder)
        answer = cfg.answer if fmt is None else cfg.answer.model_copy(update={"format": parse_format(fmt)})
        pipeline = cls.create(retriever, chat, answer=answer, mode=None if chosen == AUTO else chosen,
                              k=cfg.retrieval.k, prompts=lib, few_shot=few_shot,
                              postprocessors=[*build_postprocessors(cfg, embedder), *after, *postprocessors])
        # what only a stack has: its shared helpers, the retriever it opened, and the question
        # limit a server or the CLI enforces (a pipeline built from parts has none of them)
        return pipeline.model_copy(update={"translator": translator, "attribution": checker, "owns_retriever": owns,
                                           "max_question_chars": cfg.retrieval.max_question_chars})

    def close(self) -> None:
        """Stop the search threads of a retriever this pipeline opened."""
        if self.owns_retriever and self.retriever is not None:
            self.retriever.close()

    # -- what it is ---------------------------------------------------------------------------
    @property
    def label(self) -> str:
        name = getattr(self.llm, "model_name", None) or getattr(self.llm, "model", None) or ""
        return f"{self.profile.name}/{name}" if name else self.profile.name

    @property
    def fmt(self) -> AnswerFormat:
        """The answer format (``answer.format``)."""
        return self.answer_config.format

    @property
    def passage_steps(self) -> list[PassagePostprocessor]:
        """The postprocessors that run on the passages before the prompt, in order."""
        return [p for p in self.postprocessors if isinstance(p, PassagePostprocessor)]

    @property
    def answer_steps(self) -> list[AnswerPostprocessor]:
        """The postprocessors that run on the parsed answer, in order."""
        return [p for p in self.postprocessors if isinstance(p, AnswerPostprocessor)]

    @property
    def layout(self) -> PromptLayout:
        """Where the prompt puts its fixed instructions: context selection's (``context.layout``)."""
        return next((p.layout for p in self.passage_steps if isinstance(p, ContextSelector)), DEFAULT_LAYOUT)

    @property
    def quiet_llm(self) -> Runnable:
        """The LLM for helper calls (checks, translations): tagged so that no stream shows them."""
        from langgraph.constants import TAG_NOSTREAM

        return self.llm.with_config(tags=[TAG_NOSTREAM])

    def postprocessor(self, name: str) -> Any:
        """The postprocessor called ``name``, or None."""
        return next((p for p in self.postprocessors if p.name == name), None)

    @property
    def citer(self) -> PostHocCiter | None:
        """What makes the post-hoc citations (``answer.post_hoc_citations``), or None."""
        post = self.postprocessor(POST_HOC)
        return post.citer if post is not None else None

    # -- prepare ----------------------------------------------------------------------------
    def mode_for(self, inp: ChainInput) -> str:
        if inp.passages is not None:
            return GIVEN
        return inp.mode or self.mode or (self.retriever.policy.name if self.retriever else IRMode.NO_IR)

    def _given(self, inp: ChainInput) -> list[Hit] | None:
        """The caller's passages as hits, in their order (None: retrieve)."""
        if inp.passages is None:
            return None
        if inp.mode not in (None, GIVEN):
            raise ConfigError(f"give passages or an IR mode, not both (mode {inp.mode!r} with "
                              f"{len(inp.passages)} passages)")
        # store GIVEN: post-hoc citations embed these texts rather than read an indexed
        # passage that happens to share an id
        return [Hit(passage=p, score=0.0, raw_score=0.0, rank=i, store=GIVEN, mode=GIVEN)
                for i, p in enumerate(inp.passages, 1)]

    def query_for(self, inp: ChainInput) -> Query:
        """The query with its language detected (and prepared for the retriever). Every driver
        comes through here, so the question's checks are made here, once."""
        check_question(inp.question, self.max_question_chars)
        q = inp.query if inp.query is not None else make_query(inp.question, **inp.query_fields())
        if self.retriever is not None:
            return self.retriever.prepare(q)

        return q if q.lang else q.model_copy(update={"lang": question_language(q.question)})

    def validate_input(self, inp: ChainInput) -> None:
        """Refuse an input the format cannot answer (mc with fewer than two options)."""
        if self.fmt is AnswerFormat.MC and (not inp.options or len(inp.options) < 2):
            raise ConfigError("the mc format needs at least two options: pass {'question': ..., 'options': [...]}")

    @property
    def searcher(self) -> XlragLangChainRetriever | None:
        """The retriever as a LangChain retriever (None without one): the same object for every call."""
        if self._searcher is not None and self._searcher.retriever is not self.retriever:
            # model_copy(update={"retriever": ...}) copies the private attribute: follow the new retriever
            self._searcher = XlragLangChainRetriever(retriever=self.retriever)
        return self._searcher

    # The steps up to and after the LLM call are written once (xlrag/steps.py): ``x`` runs them
    # blocking, ``ax`` on the event loop, where only the calls themselves differ.
    def retrieve(self, query: Query, mode: str, config: RunnableConfig | None = None) -> Retrieval:
        """The passages ``mode`` chooses for ``query`` (none without a retriever, or for no_ir),
        retrieved as a retriever run in ``config``'s callback tree."""
        return run(self._retrieve(query, mode, config))

    async def aretrieve(self, query: Query, mode: str, config: RunnableConfig | None = None) -> Retrieval:
        return await arun(self._retrieve(query, mode, config))

    def _retrieve(self, query: Query, mode: str, config: RunnableConfig | None) -> Steps[Retrieval]:
        searcher = self.searcher
        if searcher is None or self.retriever is None or mode == IRMode.NO_IR:
            return Retrieval(query=query, mode=mode)
        k = self.k or self.retriever.k
        # the Query goes whole (its id, an unknown language code and its note included); the
        # question is the run's input, what a tracer shows
        args = {"k": fetch_k(self.passage_steps, k, self.retriever.retrieve_k), "mode": mode, "query": query}
        found = yield Call(partial(searcher.invoke, query.question, config, **args), (),
                           partial(searcher.ainvoke, query.question, config, **args))
        return (yield Call(self.postprocess_passages, (found.retrieval, k)))

    def postprocess_passages(self, retrieval: Retrieval, k: int) -> Retrieval:
        """``retrieval`` with its hits through the passage postprocessors, ``k`` kept."""
        return postprocessed(retrieval, self.passage_steps, k)

    def request(self, inp: ChainInput, query: Query, hits: Retrieval | Sequence[Hit], *, mode: str | None = None,
                followup: list[tuple[str, str]] | None = None) -> ChainState:
        """The request for ``query`` over ``hits``. ``followup`` turns (the model's earlier
        reply and a repair instruction, say) go after the prompt, which is then the chat
        prompt even for a few-shot model: a worked example would end mid-format."""
        shown = list(hits.hits if isinstance(hits, Retrieval) else hits)
        state = ChainState(query=query, hits=shown, fmt=self.fmt, mode=mode or self.mode_for(inp),
                           model=self.label, options=list(inp.options) if inp.options else None,
                           option_aliases=inp.option_aliases,
                           # passages given by the caller carry no retrieval's state: complete, no notes
                           complete=hits.complete if isinstance(hits, Retrieval) else True,
                           notes=list(hits.notes) if isinstance(hits, Retrieval) else [])
        # what the model is shown: the echo check compares its reply with these, not the raw text
        docs = [neutralize_markers(h.shown_text if h.shown_text is not None else h.passage.text) for h in shown]
        lang = query.lang or "en"
        if self.few_shot and not followup and not (self.fmt is AnswerFormat.CITATION and state.options):
            msgs, _ = base_model_messages(self.prompts, lang, query.question, docs, self.fmt, state.options)
        else:
            msgs = self.prompts.build_messages(lang, query.question, docs or None, self.fmt, state.options,
                                               layout=self.layout)
        # the model's own earlier reply is not an instruction it could echo: repeating it
        # is a (wrong) answer, which the checks must see
        sent = [*msgs, *((role, text) for role, text in followup or [] if role == "user")]
        msgs = [*msgs, *(followup or [])]
        stop = self.profile.stop(self.llm, self.prompts, lang)
        if not self.answer_config.explanation and self.fmt is AnswerFormat.CITATION:
            # the answer line comes before the explanation: stopping at its header keeps the
            # cited line and the answer as a whole reply has them, and skips most of the tokens
            stop = [*stop, *EXPLANATION_STOPS]
        request = self.profile.request(msgs, shown, stop)
        if self.grammar:
            held = self.profile.answer_grammar(self.llm, self.fmt, len(shown), len(state.options or ()))
            request = Request(messages=request.messages, kwargs={**request.kwargs, **held})
        words = self.prompts.own("explanation_opener", lang) if self.answer_config.explanation_opener else None
        if words and self.answer_config.explanation and self.fmt is AnswerFormat.CITATION:
            opened = self.profile.open_explanation(self.llm, words, len(shown), self.grammar)
            request = Request(messages=request.messages, kwargs={**request.kwargs, **opened})
        return state.model_copy(update={"request": request,
                                        "echo_reference": echo_reference(sent, docs, query.question, state.options)})

    def prepare(self, value: Any, config: RunnableConfig | None = None) -> ChainState:
        """Detect, retrieve and build the request: everything up to the LLM call."""
        return run(self._prepare(value, config))

    async def aprepare(self, value: Any, config: RunnableConfig | None = None) -> ChainState:
        return await arun(self._prepare(value, config))

    def _prepare(self, value: Any, config: RunnableConfig | None) -> Steps[ChainState]:
        inp = ChainInput.coerce(value)
        self.validate_input(inp)
        query = yield Call(self.query_for, (inp,))
        given = self._given(inp)
        hits: Retrieval
        if given is None:
            # on the loop the retriever is awaited, not bridged: an async tracer (astream_events)
            # sees its run
            hits = yield from self._retrieve(query, self.mode_for(inp), config)
        else:
            # the caller's passages go through the same steps; none is cut
            hits = yield Call(self.postprocess_passages, (Retrieval(query=query, mode=GIVEN, hits=given),
                                                          len(given)))
        return (yield Call(self.request, (inp, query, hits)))

    # -- generate, parse, postprocess --------------------------------------------------------
    def generate(self, state: ChainState, config: RunnableConfig | None = None) -> ChainState:
        """``state`` with the LLM's reply to its request."""
        assert state.request is not None  # noqa: S101  (set by request)
        message = self.llm.invoke(state.request.messages, config, **state.request.kwargs)
        return state.model_copy(update={"message": message})

    async def agenerate(self, state: ChainState, config: RunnableConfig | None = None) -> ChainState:
        assert state.request is not None  # noqa: S101
        message = await self.llm.ainvoke(state.request.messages, config, **state.request.kwargs)
        return state.model_copy(update={"message": message})

    def generate_stream(self, state: ChainState, config: RunnableConfig | None = None
                        ) -> Iterator[AnswerToken | ChainState]:
        """:meth:`generate`, the reply's text yielded as the model writes it, then ``state``
        with the whole reply."""
        assert state.request is not None  # noqa: S101
        if not self.profile.streams:
            whole = self.generate(state, config)
            if text := message_text(whole.message):
                yield AnswerToken(text=text)
            yield whole
            return
        chunks: list[Any] = []
        for chunk in self.llm.stream(state.request.messages, config, **state.request.kwargs):
            chunks.append(chunk)
            if text := message_text(chunk):
                yield AnswerToken(text=text)
        yield state.model_copy(update={"message": whole_reply(chunks)})

    async def agenerate_stream(self, state: ChainState, config: RunnableConfig | None = None
                               ) -> AsyncIterator[AnswerToken | ChainState]:
        assert state.request is not None  # noqa: S101
        if not self.profile.streams:
            whole = await self.agenerate(state, config)
            if text := message_text(whole.message):
                yield AnswerToken(text=text)
            yield whole
            return
        chunks: list[Any] = []
        async for chunk in self.llm.astream(state.request.messages, config, **state.request.kwargs):
            chunks.append(chunk)
            if text := message_text(chunk):
                yield AnswerToken(text=text)
        yield state.model_copy(update={"message": whole_reply(chunks)})

    def parse(self, state: ChainState) -> GroundedAnswer:
        answer = parse_reply(state, self.profile)
        if self.answer_config.explanation or answer.explanation is None:
            return answer
        # an explanation under a header the stop strings do not know (a translated one) was
        # written all the same; it is not shown, so every provider's answer has the same parts
        return answer.model_copy(update={"explanation": None})

    def postprocess(self, answer: GroundedAnswer, skip: Sequence[str] = ()) -> GroundedAnswer:
        """``answer`` through every postprocessor not named in ``skip``."""
        return run(self._postprocess(answer, skip))

    async def apostprocess(self, answer: GroundedAnswer, skip: Sequence[str] = ()) -> GroundedAnswer:
        return await arun(self._postprocess(answer, skip))

    def _postprocess(self, answer: GroundedAnswer, skip: Sequence[str]) -> Steps[GroundedAnswer]:
        for step in self.answer_steps:
            if step.name not in skip:
                answer = yield Call(step.process, (answer,), step.aprocess)
        return answer

    def finish(self, state: ChainState) -> GroundedAnswer:
        """Parse the reply and postprocess it: every step after the LLM call."""
        return run(self._finish(state))

    async def afinish(self, state: ChainState) -> GroundedAnswer:
        return await arun(self._finish(state))

    def _finish(self, state: ChainState) -> Steps[GroundedAnswer]:
        return (yield from self._postprocess((yield Call(self.parse, (state,))), ()))

    # -- straight through ----------------------------------------------------------------------
    def answer(self, value: Any, config: RunnableConfig | None = None) -> GroundedAnswer:
        """Every step in order: what :class:`~xlrag.chains.rag.GroundedChain` runs."""
        return self.finish(self.generate(self.prepare(value, config), config))

    async def aanswer(self, value: Any, config: RunnableConfig | None = None) -> GroundedAnswer:
        return await self.afinish(await self.agenerate(await self.aprepare(value, config), config))

    def stream_answer(self, value: Any, config: RunnableConfig | None = None) -> Iterator[AnswerChunk]:
        """:meth:`answer`, with the reply's tokens first: AnswerTokens, then the GroundedAnswer."""
        state = self.prepare(value, config)
        for item in self.generate_stream(state, config):
            if isinstance(item, AnswerToken):
                yield item
            else:
                state = item
        yield self.finish(state)

    async def astream_answer(self, value: Any, config: RunnableConfig | None = None) -> AsyncIterator[AnswerChunk]:
        state = await self.aprepare(value, config)
        async for item in self.agenerate_stream(state, config):
            if isinstance(item, AnswerToken):
                yield item
            else:
                state = item
        yield await self.afinish(state)
