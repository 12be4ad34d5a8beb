"""The agent: a LangGraph ``StateGraph`` that answers, checks its answer and repairs it.

    detect language → choose mode → retrieve → generate (citation format) → verify
                                                   ↑                          │ failed
                                                   └──────── repair ←─────────┘

``verify`` (:mod:`xlrag.agents.checking`) checks the response language (lingua, markers
stripped; the answer line and the explanation each on its own), the citations (at least one
valid model-made citation, no invalid one), the substance of the answer
(:mod:`xlrag.checks.substance`: not the question or the template repeated, nor an explanation
that only restates the question; the answer and what the question asks about in one sentence
of a cited passage, or of the answer's translation into that passage's language; no refusal
while the top passage holds the answer) and, with ``answer.attribution_check``, that a cited
passage supports the answer (:mod:`xlrag.checks.attribution`). ``repair`` runs the next step
of :func:`xlrag.agents.repair.plan_repair`. The loop is bounded three times: each repair runs
at most once and LLM repairs spend ``agent.max_repairs``; the checks and repairs after the
first answer share ``agent.budget_seconds`` and ``agent.budget_tokens``
(:mod:`xlrag.agents.budget`: once spent, no model is called again and the best answer so far
is shown, flagged ``over_budget``); LangGraph's ``recursion_limit`` caps the steps anyway.
Every node is one procedure (:func:`steps_node`, :mod:`xlrag.steps`), run blocking under
``invoke`` and awaited under ``ainvoke``, so the async path awaits the model.

Only the answering model streams (``stream_mode="messages"``): translation and
attribution calls carry LangGraph's ``nostream`` tag.
"""

from __future__ import annotations

import operator
import time
from collections import Counter
from collections.abc import Callable
from functools import partial
from typing import Annotated, Any, Required, TypedDict

from langchain_core.runnables import RunnableConfig, RunnableLambda

from xlrag.agents.budget import OVER_BUDGET, Tally, over_budget, spent, tallying
from xlrag.agents.checking import AnswerChecks, attribution_detail
from xlrag.agents.routing import ModeChoice, choose_mode
from xlrag.agents.view_route import (
    NODE,
    PERSPECTIVES,
    View,
    agent_result,
    view_input,
    why_contested,
)
from xlrag.chains.pipeline import Pipeline
from xlrag.chains.postprocess import POST_HOC
from xlrag.chains.state import ChainInput, ChainState
from xlrag.checks import substance
from xlrag.config import AgentConfig
from xlrag.languages import native_name
from xlrag.perspectives.models import Perspectives
from xlrag.schema import Citation, GroundedAnswer, Query, Retrieval
from xlrag.steps import Call, Steps, arun, run
from xlrag.trace import CheckResult, Repair, RepairStep, Spent, Timing, ToolStep, Trace

__all__ = ["ANSWER_TAG", "AgentInput", "AgentOutput", "AgentState", "XlragAgent", "steps_node"]

ANSWER_TAG = "xlrag:answer"  # the answering model's calls: what a UI streams


class AgentInput(TypedDict, total=False):
    question: Required[str]
    lang: str | None
    mode: str | None
    relevant_langs: list[str] | None
    target_lang: str | None
    id: str | None
    original_question: str | None  # a chat follow-up before it was condensed
    view: View | None  # "perspectives": a contested question is answered per language of sources
    # given: the question already made into a Query (the server's admitted one), searched as it is,
    # its id kept; the detect node replaces it with the prepared one
    query: Query


class _Answered(TypedDict):
    answer: GroundedAnswer
    trace: Trace


class AgentOutput(_Answered, total=False):
    # the route to the perspectives view only (a base class, not NotRequired: the annotations
    # are strings here, and TypedDict reads NotRequired only from evaluated ones)
    perspectives: Perspectives


class AgentState(AgentInput, total=False):
    templates: str  # the sent instructions an echo would copy (the chain's echo reference)
    choice: ModeChoice
    hits: Retrieval  # the passages, and whether the index was complete and why a store was left out
    answer: GroundedAnswer
    failed: list[str]
    next_repair: Repair | None
    tried: list[Repair]
    checks: Annotated[list[CheckResult], operator.add]
    repairs: Annotated[list[RepairStep], operator.add]
    timings: Annotated[list[Timing], operator.add]
    tool_calls: Annotated[list[ToolStep], operator.add]
    trace: Trace
    perspectives: Perspectives
    contested: str | None  # why the question has perspectives to compare (view: perspectives)
    stopped: Annotated[list[str], operator.add]  # what the budget stopped: checks not run, repairs not made
    best: GroundedAnswer  # the answer that failed fewest checks so far (the latest of equals)
    best_failed: list[str]  # and the checks it failed


_ASK_AGAIN = (Repair.EXTRACT, Repair.REGENERATE_LANGUAGE, Repair.RECITE)  # a follow-up turn to the model


Procedure = Callable[[Any, RunnableConfig, Tally], Steps[dict]]


def steps_node(name: str, procedure: Procedure) -> RunnableLambda:
    """A graph node from one procedure (``state, config, tally`` -> steps): run blocking under
    ``invoke``, awaited under ``ainvoke``; every model call it makes reports its tokens to
    ``tally`` (the agent's budget)."""

    def blocking(s: Any, config: RunnableConfig) -> dict:
        with tallying() as tally:
            return run(procedure(s, config, tally))

    async def awaited(s: Any, config: RunnableConfig) -> dict:
        with tallying() as tally:
            return await arun(procedure(s, config, tally))

    return RunnableLambda(blocking, afunc=awaited, name=name)


def _answering(config: RunnableConfig | None) -> RunnableConfig:
    return {**(config or {}), "tags": [*(config or {}).get("tags", []), ANSWER_TAG]}


class XlragAgent(AnswerChecks):
    """The nodes of the graph: the pipeline's steps (its retriever, LLM, prompts, profile and
    postprocessors) plus verify and repair. ``translator`` defaults to the pipeline's."""

    def __init__(self, pipeline: Pipeline, config: AgentConfig, translator: Any = None,
                 attribution: Any = None, perspectives_view: Callable[[], Any] | None = None):
        self.pipeline = pipeline
        self.config = config
        self.translator = translator if translator is not None else pipeline.translator
        self.attribution = attribution
        # builds the perspectives view (a Runnable) on first use; None: the route is closed
        self._view_factory = perspectives_view
        self._view: Any = None

    @property
    def perspectives_view(self) -> Any:
        """The perspectives view this agent routes contested questions to (a Runnable whose
        output is :class:`~xlrag.perspectives.models.Perspectives`), or None."""
        if self._view is None and self._view_factory is not None:
            self._view = self._view_factory()
        return self._view

    # -- detect, route, retrieve --------------------------------------------------------
    def _input(self, s: AgentState) -> ChainInput:
        return ChainInput(question=s["question"], lang=s.get("lang"), relevant_langs=s.get("relevant_langs"),
                          target_lang=s.get("target_lang"), id=s.get("id"))

    def detect(self, s: AgentState, config: RunnableConfig, tally: Tally) -> Steps[dict]:
        t0 = time.perf_counter()
        # lingua's detection blocks: on the event loop it runs in a thread
        inp = self._input(s)
        if "query" in s:
            inp = ChainInput(**inp.model_dump(exclude_none=True), query=s["query"])
        query = yield Call(self.pipeline.query_for, (inp,))
        return {"query": query, "timings": [Timing(step="detect", seconds=time.perf_counter() - t0)]}

    def route(self, s: AgentState) -> dict:
        choice = choose_mode(s["question"], self.config, requested=s.get("mode"),
                             relevant_langs=s.get("relevant_langs"))
        query = s["query"]
        if choice.relevant_langs and not query.relevant_langs:
            query = query.model_copy(update={"relevant_langs": choice.relevant_langs})
        why = None
        if s.get("view") == PERSPECTIVES:
            view = self.perspectives_view
            if view is not None:
                why = why_contested(s["question"], s.get("relevant_langs"), self.config.rules, view.territories)
            closed = "this agent has no index to compare" if view is None else \
                "no agent rule or disputed territory names the question's entity"
            if why is None:
                choice = choice.model_copy(update={"reason": f"{choice.reason}; perspectives were asked for, but "
                                                             f"{closed}: one answer"})
        return {"choice": choice, "query": query, "tried": [], "failed": [], "contested": why}

    @staticmethod
    def after_route(s: AgentState) -> str:
        return NODE if s.get("contested") else "retrieve"

    def _perspectives_input(self, s: AgentState) -> dict:
        return view_input(s["question"], s["query"].lang, s.get("relevant_langs"))

    # Each node is one procedure (s, config, tally) -> steps (xlrag/steps.py); :func:`steps_node`
    # runs it blocking under invoke and on the event loop under ainvoke, where only the calls
    # themselves (a model, the retriever) differ.
    def compare(self, s: AgentState, config: RunnableConfig, tally: Tally) -> Steps[dict]:
        t0 = time.perf_counter()
        runnable = self.perspectives_view
        view = yield Call(runnable.invoke, (self._perspectives_input(s), config), runnable.ainvoke)
        # the route enters this node only for a contested question (after_route)
        return agent_result(view, self.pipeline.label, s.get("contested") or "", time.perf_counter() - t0)

    # config: the node's, so that the retriever run is the node's child in a trace
    def retrieve(self, s: AgentState, config: RunnableConfig, tally: Tally) -> Steps[dict]:
        t0 = time.perf_counter()
        hits = yield Call(self.pipeline.retrieve, (s["query"], s["choice"].mode, config), self.pipeline.aretrieve)
        return {"hits": hits, "timings": [Timing(step="retrieve", seconds=time.perf_counter() - t0)]}

    # -- generate -------------------------------------------------------------------------
    def _request(self, s: AgentState, followup: list[tuple[str, str]] | None = None) -> ChainState:
        return self.pipeline.request(self._input(s), s["query"], s["hits"], mode=s["choice"].mode, followup=followup)

    def _llm(self, request: ChainState, config: RunnableConfig) -> Call:
        return Call(self.pipeline.generate, (request, _answering(config)), self.pipeline.agenerate)

    # no post-hoc citations after the parse: they are the last repair, and must show as one
    def generate(self, s: AgentState, config: RunnableConfig, tally: Tally) -> Steps[dict]:
        t0 = time.perf_counter()
        state = yield self._llm((yield Call(self._request, (s,))), config)
        return {"answer": self.pipeline.parse(state), "templates": state.echo_reference,
                "timings": [Timing(step="generate", seconds=time.perf_counter() - t0, tokens=tally.tokens)]}

    # -- verify ---------------------------------------------------------------------------
    def _over(self, s: AgentState, t0: float, tally: Tally) -> str | None:
        """Why no model may be called now (the budget is spent), or None."""
        seconds, tokens = spent(s.get("timings", []))
        return over_budget(self.config, seconds + time.perf_counter() - t0, tokens + tally.tokens)

    def verify(self, s: AgentState, config: RunnableConfig, tally: Tally) -> Steps[dict]:
        t0 = time.perf_counter()
        attributable, why, stopped = None, "", []
        if (args := self._attribution_inputs(s)) is not None:
            if (over := self._over(s, t0, tally)) is None:
                result = yield Call(self.attribution.check, (s["query"].question, *args, s["query"].lang or "en"),
                                    self.attribution.acheck)
                attributable, why = result.attributable, attribution_detail(result)
            else:
                stopped.append(f"the attribution check was not run: {over}")
        langs = yield Call(self._to_translate, (s,))
        renderings: dict[str, substance.Rendering] = {}
        if langs:
            renderings, not_made = yield Call(self._renderings, (s, langs, lambda: self._over(s, t0, tally)))
            stopped += not_made
        out = yield Call(self._checks, (s, attributable, why, renderings, self._over(s, t0, tally)))
        return {**out, "stopped": [*stopped, *out["stopped"]],
                "timings": [Timing(step="verify", seconds=time.perf_counter() - t0, tokens=tally.tokens)]}

    @staticmethod
    def after_verify(s: AgentState) -> str:
        return "repair" if s.get("next_repair") is not None else "finish"

    # -- repair ---------------------------------------------------------------------------
    def _followup(self, s: AgentState, repair: Repair) -> list[tuple[str, str]]:
        lang = s["query"].lang or "en"
        role = {Repair.REGENERATE_LANGUAGE: "language_repair", Repair.EXTRACT: "extract_repair"}.get(
            repair, "citation_repair")
        instruction = self.pipeline.prompts.render(role, lang, language=native_name(lang))
        return [("assistant", s["answer"].raw_output or "-"), ("user", instruction)]

    def _post_hoc(self, s: AgentState) -> GroundedAnswer:
        answer = s["answer"]
        kept: list[Citation] = [c for c in answer.citations if c.valid]
        if "attribution" in s.get("failed", []):
            kept = [c for c in kept if c.source != "model"]  # the model's citation did not hold up
        answer = answer.model_copy(update={"flags": [f for f in answer.flags if f != "invalid_citation"]})
        post_hoc = self.pipeline.postprocessor(POST_HOC)
        if post_hoc is None:
            return answer.model_copy(update={"citations": kept})
        return post_hoc.cite(answer, kept)

    def _repaired(self, s: AgentState, repair: Repair, answer: GroundedAnswer, t0: float,
                  failure: str | None = None) -> dict:
        before, after = len(s["answer"].citations), len(answer.citations)
        detail = failure or {Repair.EXTRACT: "asked again for a short answer taken from the passage that holds it",
                             Repair.REGENERATE_LANGUAGE: "answered again with the language instruction repeated",
                             Repair.TRANSLATE: f"translated into {s['query'].lang}, citations kept",
                             Repair.QUOTE: (f"the answer line quoted from <doc{answer.citations[0].marker}>, "
                                           f"a passage in {s['query'].lang}"
                                           + (" (the model gave none: its sentence most about the question)"
                                              if substance.QUOTED_ONLY in answer.flags else ""))
                                          if answer.citations else "",
                             Repair.RECITE: "asked again for <docN> citations",
                             Repair.POST_HOC: f"post-hoc citations by embedding similarity ({before} → {after})",
                             }[repair]
        if s["answer"].answered and not answer.answered:
            cited = [c for c in answer.citations if c.valid]
            if repair is Repair.RECITE and cited:
                # asked for citations, the model gave just those: they go with the answer it had
                flags = [f for f in s["answer"].flags if f not in ("no_citations", "invalid_citation")]
                answer = s["answer"].model_copy(update={"citations": cited, "flags": flags})
                detail += f"; the reply gave citations only ({', '.join(f'<doc{c.marker}>' for c in cited)}), " \
                          f"joined to the previous answer"
            else:
                # a repair must not lose the answer: the next repair works on the previous one
                answer = s["answer"]
                detail += "; the new reply held no answer, so the previous one is kept"
        seconds = time.perf_counter() - t0
        return {"answer": answer, "tried": [*s.get("tried", []), repair],
                "repairs": [RepairStep(repair=repair, attempt=len(s.get("tried", [])) + 1, detail=detail,
                                       seconds=seconds)],
                "timings": [Timing(step=f"repair:{repair.value}", seconds=seconds)]}

    def repair(self, s: AgentState, config: RunnableConfig, tally: Tally) -> Steps[dict]:
        t0, repair, failure = time.perf_counter(), s["next_repair"], None
        if repair is None:  # after_verify routes here only with a repair to make
            return {}
        if repair in _ASK_AGAIN:
            request = yield Call(self._request, (s, self._followup(s, repair)))
            answer = self.pipeline.parse((yield self._llm(request, config)))
        elif repair is Repair.TRANSLATE:
            answer, failure = yield Call(self._translate, (s,))
        elif repair is Repair.QUOTE:
            answer, failure = yield Call(self._quote, (s,))
        else:
            answer = yield Call(self._post_hoc, (s,))
        out = self._repaired(s, repair, answer, t0, failure)
        return {**out, "timings": [t.model_copy(update={"tokens": tally.tokens}) for t in out["timings"]]}

    # -- finish ---------------------------------------------------------------------------
    def finish(self, s: AgentState, config: RunnableConfig, tally: Tally) -> Steps[dict]:
        answer, failed = self._shown(s)
        # the pipeline's postprocessors but post-hoc citations, which were the last repair
        answer = yield Call(partial(self.pipeline.postprocess, skip=[POST_HOC]), (answer,),
                            partial(self.pipeline.apostprocess, skip=[POST_HOC]))
        return self._finished(s, answer, failed)

    @staticmethod
    def _shown(s: AgentState) -> tuple[GroundedAnswer, list[str]]:
        """The answer to show and the checks it failed: the one that failed fewest checks (a
        repair's answer may be worse: a regenerated reply after a quoted answer line), the latest
        of equals."""
        answer, failed = s["answer"], s.get("failed", [])
        if "best" in s and len(s["best_failed"]) < len(failed):
            return s["best"], s["best_failed"]
        return answer, failed

    def _finished(self, s: AgentState, answer: GroundedAnswer, failed: list[str]) -> dict:
        if s.get("stopped"):
            answer = answer.model_copy(update={"flags": [*answer.flags, OVER_BUDGET]})
        # the agent's own checks decide the substance flags (the chain's lexical ones included):
        # what a reader must see first is that the answer says nothing, or nothing the passages hold
        shown = [substance.FLAGS[c] for c in failed if c in substance.FLAGS]
        kept = [f for f in answer.flags if f not in substance.FLAGS.values()]
        flags = [*dict.fromkeys(shown), *kept, *(f"unrepaired_{c}" for c in failed)]
        answer = answer.model_copy(update={"flags": flags})
        answer = answer.model_copy(update={"mode": s["choice"].mode})
        trace = Trace(question=s["question"], original_question=s.get("original_question"),
                      lang=s["query"].lang or "", mode=s["choice"].mode, mode_reason=s["choice"].reason,
                      retrieved_langs=dict(Counter(h.lang for h in s["hits"].hits) if "hits" in s else {}),
                      checks=s.get("checks", []), repairs=s.get("repairs", []), timings=s.get("timings", []),
                      unrepaired=list(failed), tool_calls=list(s.get("tool_calls", [])), spent=self._spent(s),
                      notes=list(s["hits"].notes) if isinstance(s.get("hits"), Retrieval) else [])
        return {"answer": answer, "trace": trace}

    def _spent(self, s: AgentState) -> Spent:
        seconds, tokens = spent(s.get("timings", []))
        stopped = s.get("stopped", [])
        return Spent(seconds=round(seconds, 3), tokens=tokens, budget_seconds=self.config.budget_seconds,
                     budget_tokens=self.config.budget_tokens, exhausted="; ".join(stopped) or None)

    # -- the graph ------------------------------------------------------------------------
    state_schema: Any = AgentState
    name = "xlrag_agent"

    def _answer_steps(self, g: Any, node: Any) -> None:
        """The steps from the retrieved passages to an answer for ``verify``: one call here."""
        g.add_node("generate", steps_node("generate", self.generate))
        g.add_edge("retrieve", "generate")
        g.add_edge("generate", "verify")

    def graph(self, checkpointer: Any = None):
        from langgraph.graph import END, START, StateGraph

        g = StateGraph(self.state_schema, input_schema=AgentInput, output_schema=AgentOutput)

        def node(name: str, sync: Any, asyn: Any = None) -> None:
            g.add_node(name, RunnableLambda(sync, afunc=asyn, name=name))

        for name, procedure in (("detect", self.detect), ("retrieve", self.retrieve), ("verify", self.verify),
                                ("repair", self.repair), ("finish", self.finish), (NODE, self.compare)):
            g.add_node(name, steps_node(name, procedure))
        node("route", self.route)
        g.add_edge(START, "detect")
        g.add_edge("detect", "route")
        g.add_conditional_edges("route", self.after_route, {NODE: NODE, "retrieve": "retrieve"})
        g.add_edge(NODE, END)
        self._answer_steps(g, node)
        g.add_conditional_edges("verify", self.after_verify, {"repair": "repair", "finish": "finish"})
        g.add_edge("repair", "verify")
        g.add_edge("finish", END)
        compiled = g.compile(checkpointer=checkpointer, name=self.name)
        return compiled.with_config(recursion_limit=self.config.recursion_limit)
