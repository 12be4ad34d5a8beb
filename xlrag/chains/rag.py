"""The grounded RAG chain as a typed LangChain Runnable: ``answer``, ``mc`` and ``citation``.

    ChainInput → prepare (detect language) → retrieve (IR mode) → localized prompt
               → request (provider profile) → LLM → parse → validate citations
               (post hoc if the model gave none) → GroundedAnswer

Input is a question string, a :class:`~xlrag.schema.Query`, a :class:`ChainInput` or a
mapping with its fields. ``invoke``, ``ainvoke``, ``batch`` and ``stream`` all work; the
async path awaits the LLM and runs retrieval and grounding in worker threads.
"""

from __future__ import annotations

import asyncio
import difflib
from collections.abc import Mapping
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from langchain_core.callbacks import AsyncCallbackManagerForChainRun, CallbackManagerForChainRun
from langchain_core.messages import BaseMessage
from langchain_core.runnables import Runnable, RunnableConfig, RunnableSerializable
from langchain_core.runnables.config import patch_config
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from xlrag.chains.echo import drop_echo, echo_reference, strip_markup
from xlrag.chains.grounding import PostHocAttributor, resolve_markers
from xlrag.chains.parsing import find_markers, parse_citation, parse_mc, strip_markers
from xlrag.chains.profiles import ProviderProfile, Request, configured_few_shot, profile_for
from xlrag.checks.substance import FLAGS, non_answer, refusal_despite_evidence
from xlrag.errors import ConfigError
from xlrag.formats import CITED_HEADER, AnswerFormat, Section, parse_format
from xlrag.indexes.retriever import CrossLingualRetriever
from xlrag.modes import IRMode, Mode
from xlrag.prompts import PromptLibrary, format_options, join_parts
from xlrag.schema import Citation, GroundedAnswer, Hit, Passage, Query, make_query
from xlrag.text import first_line

if TYPE_CHECKING:
    from xlrag.chains.attribution_rerank import AttributionReranker

__all__ = ["ChainInput", "ChainState", "GroundedChain", "base_model_messages", "build_chain", "finalize"]


GIVEN = "given"  # the mode, store and policy of passages the caller hands the chain


class ChainInput(BaseModel):
    """What one chain call takes. Unknown fields are an error, never ignored."""

    model_config = ConfigDict(extra="forbid")

    question: str
    lang: str | None = None
    options: list[str] | None = None
    option_aliases: dict[int, list[str]] | None = None
    relevant_langs: list[str] | None = None
    target_lang: str | None = None
    mode: Mode | None = None
    id: str | None = None
    passages: list[Passage] | None = Field(
        None, description="answer over exactly these passages, in this order, with no retrieval "
                          "(controlled studies, or passages the caller found)")

    @classmethod
    def coerce(cls, value: Any) -> ChainInput:
        if isinstance(value, ChainInput):
            return value
        if isinstance(value, str):
            return cls(question=value)
        if isinstance(value, Query):
            return cls(question=value.text, lang=value.lang, relevant_langs=value.relevant_langs or None,
                       target_lang=value.target_lang, id=value.id)
        if not isinstance(value, Mapping):
            raise ConfigError(f"chain input must be a question string or a mapping, not {type(value).__name__}")
        unknown = [k for k in value if k not in cls.model_fields]
        if unknown:
            close = difflib.get_close_matches(str(unknown[0]), list(cls.model_fields), n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ConfigError(f"unknown chain input {unknown[0]!r}{hint}; fields: {', '.join(cls.model_fields)}")
        try:
            return cls.model_validate(dict(value))
        except ValidationError as e:
            err = e.errors()[0]
            where = ".".join(str(x) for x in err["loc"]) or "input"
            raise ConfigError(f"bad chain input {where}: {err['msg']}") from None


class ChainState(BaseModel):
    """Everything one call knows, step by step; typed so no step guesses at a key."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    query: Query
    hits: list[Hit]
    fmt: AnswerFormat
    mode: str
    model: str
    options: list[str] | None = None
    option_aliases: dict[int, list[str]] | None = None
    request: Request | None = None
    echo_reference: str = Field("", description="the sent instructions an echo would copy")
    message: Any = None
    complete: bool = True
    notes: list[str] = Field(default_factory=list)


@lru_cache(maxsize=1)
def _examples() -> dict[str, str]:
    # Package data that never changes at run time: read once, not on every chain call.
    from importlib import resources

    import yaml

    text = resources.files("xlrag.prompts").joinpath("fewshot", "examples.yaml").read_text(encoding="utf-8")
    return yaml.safe_load(text)


def base_model_messages(prompts: PromptLibrary, lang: str, question: str, docs: list[str], fmt: AnswerFormat | str,
                        options: list[str] | None) -> tuple[list[tuple[str, str]], str]:
    """Messages with one worked example of the format: localized system + language
    instruction, the example, then the documents and question. Returns the messages and
    the example text."""
    fmt = parse_format(fmt)
    qlabel, alabel = prompts.render("question_label", lang), prompts.render("answer_label", lang)
    example = _examples()[fmt.value].format(question_label=qlabel, answer_label=alabel)
    system = join_parts([prompts.render("system", lang), prompts.render("answer_language", lang)], "\n")
    lines = [example, ""]
    # Markdown bullets and table rules ("* * *", "|---|") send a small model into
    # repeating them; the words are what it needs.
    lines += [f"<doc{i}> {strip_markup(d)}" for i, d in enumerate(docs)]
    lines.append(f"{qlabel}: {question}")
    if fmt is AnswerFormat.MC:
        lines += [format_options(options or []), f"{alabel}:"]
    elif fmt is AnswerFormat.CITATION:
        lines.append(CITED_HEADER)
    else:
        lines.append(f"{alabel}:")
    return [("system", system), ("user", "\n".join(lines))], example


def _text(message: Any) -> str:
    if isinstance(message, str):
        return message
    content = getattr(message, "content", "")
    if isinstance(content, list):  # content blocks (Anthropic, Cohere)
        return "".join(b.get("text", "") if isinstance(b, dict) else str(b) for b in content)
    return str(content)


def _says_nothing(said: str, query: Query, hits: list[Hit], templates: str) -> bool:
    """The lexical substance checks any answer gets, with no model call: the question or the
    template repeated, or a refusal while the top passage holds the question's words. (Support
    by the cited passages needs a translation across languages: the agent checks that.)"""
    lang = query.lang
    if not non_answer(said, query.text, lang, templates=[templates]).passed:
        return True
    top = hits[0].passage.text if hits else None
    return not refusal_despite_evidence(said, query.text, top, lang).passed


def finalize(state: ChainState, attributor: PostHocAttributor | None,
             profile: ProviderProfile | None = None) -> GroundedAnswer:
    """Parse the LLM reply in ``state.message`` into a GroundedAnswer."""
    query, hits, fmt, options = state.query, state.hits, state.fmt, state.options
    message = state.message
    raw = _text(message)
    flags: list[str] = [] if hits else ["closed_book"]
    cleaned = drop_echo(raw, state.echo_reference)
    if cleaned != raw:
        flags.append("prompt_echo")
    citations: list[Citation] = []
    answer = explanation = chosen = None
    index = None

    if fmt is AnswerFormat.MC:
        mc = parse_mc(cleaned, options or [], state.option_aliases)
        if mc.status != "ok":
            flags.append(mc.status)
        index, chosen, answer = mc.index, mc.option, mc.option
    elif fmt is AnswerFormat.CITATION:
        answer_section = Section.CHOICE if options else Section.ANSWER
        lowered = cleaned.lower()
        if CITED_HEADER.lower() in lowered:
            text = cleaned
        elif find_markers(cleaned) or any(s.header.lower() in lowered for s in Section):
            # The prompt ends with the "Cited Documents:" header for the model to continue.
            text = f"{CITED_HEADER} {cleaned}"
        else:
            # A bare reply ("308") is an answer with no citations, not a list of documents.
            text = f"{CITED_HEADER}\n{answer_section.header} {cleaned.strip()}"
        parsed = parse_citation(text, len(hits), answer_section)
        if parsed.status == "unparseable":
            flags.append("unparseable")
        if parsed.truncated:
            flags.append("truncated")
        answer, explanation = parsed.answer, parsed.explanation
        citations = resolve_markers([*parsed.cited, *parsed.inline], hits)
        if options and answer:
            mc = parse_mc(answer, options, state.option_aliases)
            if mc.status == "ok":
                index, chosen = mc.index, mc.option
            else:
                flags.append(mc.status)
    else:
        answer = strip_markers(first_line(cleaned)) or None
        citations = resolve_markers(find_markers(cleaned), hits)

    if profile is not None:
        citations += profile.citations(message, hits)
    if any(not c.valid for c in citations):
        flags.append("invalid_citation")
    if hits and fmt is not AnswerFormat.MC and not any(c.valid for c in citations):
        flags.append("no_citations")
        claim = " ".join(x for x in (answer, strip_markers(explanation or "")) if x)
        if attributor is not None and claim:
            post = attributor.attribute(claim, hits)
            if post:
                citations += post
                flags.append("post_hoc_citations")
    if fmt is not AnswerFormat.MC and _says_nothing(answer or cleaned, query, hits, state.echo_reference):
        flags.insert(0, FLAGS["non_answer"])
    return GroundedAnswer(question=query.text, lang=query.lang or "", format=fmt, mode=state.mode,
                          model=state.model, passages=hits, raw_output=raw, answer=answer,
                          explanation=explanation, option_index=index, chosen_option=chosen,
                          citations=citations, flags=flags, index_complete=state.complete,
                          retrieval_notes=state.notes)


class GroundedChain(RunnableSerializable[Any, GroundedAnswer]):
    """Answer in the user's language over passages chosen by an IR mode, with <docN> citations.

    ``retriever=None`` or ``mode="no_ir"`` answers closed-book. ``few_shot`` shows one
    worked example of the format before the real turn (None: ``LLMConfig.few_shot``, else
    the provider profile's measured default).
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    retriever: CrossLingualRetriever | None
    llm: Runnable
    fmt: AnswerFormat = AnswerFormat.CITATION
    mode: str | None = None
    k: int | None = None
    prompts: PromptLibrary = Field(default_factory=PromptLibrary)
    attributor: PostHocAttributor | None = None
    profile: ProviderProfile
    few_shot: bool
    attribution_reranker: Any = Field(None, description="an AttributionReranker: the supporting passage is cited first")

    # -- steps ---------------------------------------------------------------------------
    def _mode(self, inp: ChainInput) -> str:
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
        return [Hit(passage=p, score=0.0, raw_score=0.0, rank=i, store=GIVEN, policy=GIVEN)
                for i, p in enumerate(inp.passages, 1)]

    def query_for(self, inp: ChainInput) -> Query:
        """The query with its language detected (and prepared for the retriever)."""
        fields = {"lang": inp.lang, "relevant_langs": inp.relevant_langs, "target_lang": inp.target_lang,
                  "id": inp.id}
        fields = {k: v for k, v in fields.items() if v is not None}
        if self.retriever is not None:
            return self.retriever.prepare(make_query(inp.question, **fields))
        from xlrag.detect import question_language

        q = make_query(inp.question, **fields)
        return q if q.lang else q.model_copy(update={"lang": question_language(q.text)})

    def _check(self, inp: ChainInput) -> None:
        if self.fmt is AnswerFormat.MC and (not inp.options or len(inp.options) < 2):
            raise ConfigError("the mc format needs at least two options: pass {'question': ..., 'options': [...]}")

    def build_state(self, inp: ChainInput, query: Query, hits: list[Hit],
                    followup: list[tuple[str, str]] | None = None) -> ChainState:
        """The request for ``query`` over ``hits``. ``followup`` turns (the model's earlier
        reply and a repair instruction, say) go after the prompt, which is then the chat
        prompt even for a few-shot model: a worked example would end mid-format."""
        state = ChainState(query=query, hits=list(hits), fmt=self.fmt, mode=self._mode(inp), model=self.label,
                           options=list(inp.options) if inp.options else None,
                           option_aliases=inp.option_aliases, complete=getattr(hits, "complete", True),
                           notes=list(getattr(hits, "notes", [])))
        docs = [h.passage.text for h in hits]
        lang = query.lang or "en"
        if self.few_shot and not followup and not (self.fmt is AnswerFormat.CITATION and state.options):
            msgs, _ = base_model_messages(self.prompts, lang, query.text, docs, self.fmt, state.options)
        else:
            msgs = self.prompts.build_messages(lang, query.text, docs or None, self.fmt, state.options)
        # the model's own earlier reply is not an instruction it could echo: repeating it
        # is a (wrong) answer, which the checks must see
        sent = [*msgs, *((role, text) for role, text in followup or [] if role == "user")]
        msgs = [*msgs, *(followup or [])]
        request = self.profile.request(msgs, hits, self.profile.stop(self.llm, self.prompts, lang))
        return state.model_copy(update={"request": request,
                                        "echo_reference": echo_reference(sent, docs, query.text, state.options)})

    @property
    def label(self) -> str:
        name = getattr(self.llm, "model_name", None) or getattr(self.llm, "model", None) or ""
        return f"{self.profile.name}/{name}" if name else self.profile.name

    def prepare(self, value: Any) -> ChainState:
        """Retrieve and build the request: everything up to the LLM call."""
        inp = ChainInput.coerce(value)
        self._check(inp)
        query = self.query_for(inp)
        mode = self._mode(inp)
        hits = self._given(inp)
        if hits is None:
            hits = [] if self.retriever is None or mode == IRMode.NO_IR else self.retriever.retrieve(
                query, mode=mode, k=self.k)
        return self.build_state(inp, query, hits)

    async def aprepare(self, value: Any) -> ChainState:
        inp = ChainInput.coerce(value)
        self._check(inp)
        query = await asyncio.to_thread(self.query_for, inp)
        mode = self._mode(inp)
        hits = self._given(inp)
        if hits is None:
            hits = [] if self.retriever is None or mode == IRMode.NO_IR else await self.retriever.aretrieve(
                query, mode=mode, k=self.k)
        return self.build_state(inp, query, hits)

    # -- Runnable --------------------------------------------------------------------------
    def _run(self, value: Any, run_manager: CallbackManagerForChainRun, config: RunnableConfig) -> GroundedAnswer:
        state = self.prepare(value)
        assert state.request is not None  # noqa: S101  (set by prepare)
        child = patch_config(config, callbacks=run_manager.get_child())
        message: BaseMessage = self.llm.invoke(state.request.messages, child, **state.request.kwargs)
        answer = finalize(state.model_copy(update={"message": message}), self.attributor, self.profile)
        return self.attribution_reranker.rerank(answer) if self.attribution_reranker is not None else answer

    async def _arun(self, value: Any, run_manager: AsyncCallbackManagerForChainRun,
                    config: RunnableConfig) -> GroundedAnswer:
        state = await self.aprepare(value)
        assert state.request is not None  # noqa: S101
        child = patch_config(config, callbacks=run_manager.get_child())
        message = await self.llm.ainvoke(state.request.messages, child, **state.request.kwargs)
        # Post-hoc attribution embeds sentences: keep it off the event loop.
        answer = await asyncio.to_thread(finalize, state.model_copy(update={"message": message}),
                                         self.attributor, self.profile)
        if self.attribution_reranker is not None:
            answer = await self.attribution_reranker.arerank(answer)
        return answer

    def invoke(self, input: Any, config: RunnableConfig | None = None) -> GroundedAnswer:
        return self._call_with_config(self._run, input, config, run_type="chain")

    async def ainvoke(self, input: Any, config: RunnableConfig | None = None) -> GroundedAnswer:
        return await self._acall_with_config(self._arun, input, config, run_type="chain")


def build_chain(
    retriever: CrossLingualRetriever | None,
    llm: Runnable,
    *,
    fmt: AnswerFormat | str = AnswerFormat.CITATION,
    mode: str | None = None,
    k: int | None = None,
    prompts: PromptLibrary | None = None,
    attributor: PostHocAttributor | None = None,
    post_hoc: bool = True,
    few_shot: bool | None = None,
    profile: ProviderProfile | str | None = None,
    attribution_reranker: AttributionReranker | None = None,
) -> GroundedChain:
    """A :class:`GroundedChain` answering with ``fmt`` over passages chosen by IR ``mode``.

    Post-hoc citations use the retriever's embedder and stored vectors unless
    ``post_hoc=False``. ``profile`` overrides the provider profile found for ``llm``.
    ``attribution_reranker`` (XOR-AttriQA) checks each shown passage against the answer and
    cites the first one that supports it first.
    """
    fmt = parse_format(fmt)
    if k is not None and (not isinstance(k, int) or isinstance(k, bool) or k < 1):
        raise ConfigError(f"k must be a whole number >= 1, got {k!r}")
    prof = profile_for(llm, profile)
    if attributor is None and post_hoc and retriever is not None:
        attributor = PostHocAttributor(retriever.embedder, retriever.stores)
    if few_shot is None:
        few_shot = configured_few_shot(llm)
    if few_shot is None:
        few_shot = prof.few_shot_default(llm)
    return GroundedChain(retriever=retriever, llm=llm, fmt=fmt, mode=mode, k=k, prompts=prompts or PromptLibrary(),
                         attributor=attributor, profile=prof, few_shot=few_shot, name=f"xlrag_{fmt.value}",
                         attribution_reranker=attribution_reranker)
