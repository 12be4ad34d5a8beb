"""The tool-calling variant of the agent, for LLMs that take tools.

    detect → route → retrieve → plan ⇄ act (search, translate; at most agent.max_tool_rounds)
           → answer → verify ⇄ repair → finish

The model starts from the passages of the chosen mode, numbered ``<doc0>…``, and may call
``search(query, languages)`` for more (numbered on from there, so every marker stays
valid) and ``translate(text, language)``. Its final reply is parsed in the citation format
and goes through the same checks and repairs as the fixed graph. Models without tool
calling (llama.cpp here) run the fixed graph: :func:`xlrag.agents.build.build_agent`
chooses, from the provider profile and ``agent.tools``.
"""

from __future__ import annotations

import operator
import time
from collections.abc import Iterable
from typing import Annotated, Any

from langchain_core.messages import AIMessage, AnyMessage, SystemMessage, ToolCall, ToolMessage
from langchain_core.runnables import RunnableConfig
from pydantic import BaseModel, ConfigDict, Field

from xlrag.agents.budget import Tally
from xlrag.agents.graph import AgentState, XlragAgent, _answering, steps_node
from xlrag.chains.echo import strip_markup
from xlrag.chains.pipeline import Pipeline
from xlrag.chains.state import ChainState
from xlrag.config import AgentConfig
from xlrag.detect import LinguaDetector
from xlrag.errors import TranslationCutOffError
from xlrag.formats import ANSWER_HEADER, CITED_HEADER, AnswerFormat, document_line
from xlrag.languages import normalize_code
from xlrag.modes import IRMode
from xlrag.prompts import join_parts
from xlrag.schema import Hit
from xlrag.steps import Call, Steps
from xlrag.trace import Timing, ToolStep

__all__ = ["Search", "ToolAgentState", "ToolCallingAgent", "Translate", "tool_specs"]

# the tools' own descriptions are API text the model reads beside the localized prompt


class Search(BaseModel):
    """Search the multilingual corpus. Returns passages numbered <docN>, to cite as they are numbered."""

    model_config = ConfigDict(extra="forbid")

    query: str = Field(description="what to search for, in any language")
    languages: list[str] | None = Field(None, description="ISO 639-1 codes of the languages to search in; "
                                                          "omit to search as the system chose")


class Translate(BaseModel):
    """Translate text into a language (ISO 639-1 code)."""

    model_config = ConfigDict(extra="forbid")

    text: str
    language: str


TOOLS: dict[str, type[Search] | type[Translate]] = {"search": Search, "translate": Translate}


def tool_specs() -> list[dict[str, Any]]:
    """The tools as function specs (OpenAI's format, which every LangChain ``bind_tools`` takes)."""
    return [{"type": "function", "function": {"name": name, "description": (model.__doc__ or "").strip(),
                                              "parameters": model.model_json_schema()}}
            for name, model in TOOLS.items()]


class ToolAgentState(AgentState, total=False):
    messages: Annotated[list[AnyMessage], operator.add]
    rounds: int


def _numbered(hits: Iterable[Hit], start: int) -> str:
    return "\n".join(document_line(start + i, strip_markup(h.passage.text)) for i, h in enumerate(hits))


class ToolCallingAgent(XlragAgent):
    def __init__(self, pipeline: Pipeline, config: AgentConfig, translator: Any = None, attribution: Any = None,
                 max_rounds: int = 3, perspectives_view: Any = None):
        super().__init__(pipeline, config, translator=translator, attribution=attribution,
                         perspectives_view=perspectives_view)
        self.max_rounds = max_rounds
        self.with_tools = self.pipeline.llm.bind_tools(tool_specs())

    # -- plan -----------------------------------------------------------------------------
    def _opening(self, s: ToolAgentState) -> list[AnyMessage]:
        p, lang = self.pipeline.prompts, s["query"].lang or "en"
        system = join_parts([p.render("system", lang), p.render("answer_language", lang),
                              "Use the search tool for more passages (you may name the languages to search "
                              "in) and the translate tool to translate. Cite passages by their <docN> numbers."])

        user = join_parts([f"{p.render('documents_label', lang)}:\n{_numbered(s['hits'].hits, 0)}",
                            f"{p.render('question_label', lang)}: {s['query'].question}",
                            p.render("citation_format", lang, answer_header=ANSWER_HEADER),
                            p.render("answer_language", lang), CITED_HEADER])
        return [SystemMessage(system), ("user", user)]  # type: ignore[list-item]

    def _plan_input(self, s: ToolAgentState) -> tuple[Any, list, bool]:
        messages = s.get("messages") or []
        new = [] if messages else self._opening(s)
        last_round = s.get("rounds", 0) + 1 >= self.max_rounds
        # the last round has no tools: the model must answer now
        return (self.pipeline.llm if last_round else self.with_tools), [*messages, *new], bool(new)

    def plan(self, s: ToolAgentState, config: RunnableConfig, tally: Tally) -> Steps[dict]:
        t0 = time.perf_counter()
        model, messages, opened = self._plan_input(s)
        reply = yield Call(model.invoke, (messages, _answering(config)), model.ainvoke)
        start = messages if opened else []
        return {"messages": [*start, reply], "rounds": s.get("rounds", 0) + 1,
                "timings": [Timing(step="plan", seconds=time.perf_counter() - t0)]}

    @staticmethod
    def after_plan(s: ToolAgentState) -> str:
        last = s["messages"][-1]
        return "act" if isinstance(last, AIMessage) and last.tool_calls else "answer"

    # -- act ------------------------------------------------------------------------------
    def _call(self, s: ToolAgentState, call: ToolCall, hits: list[Hit], config: RunnableConfig
              ) -> tuple[str, list[Hit]]:
        schema = TOOLS.get(call["name"])
        if schema is None:
            return f"unknown tool {call['name']!r}; the tools are {', '.join(TOOLS)}", []
        try:
            args = schema.model_validate(call["args"])
        except ValueError as e:
            return f"bad arguments for {call['name']}: {str(e).splitlines()[0]}", []
        if isinstance(args, Translate):
            source = LinguaDetector().detect(args.text) or "en"
            try:
                return self.translator.translate(args.text, source, normalize_code(args.language)), []
            except TranslationCutOffError as e:
                # the model reads the reason and can answer untranslated; half a translation would mislead it
                return f"translation failed: {e}", []
        query = s["query"].model_copy(update={"question": args.query, "id": None})
        mode = s["choice"].mode
        if args.languages:
            query = query.model_copy(update={"relevant_langs": [normalize_code(x) for x in args.languages]})
            mode = IRMode.REL_LANGS
        seen = {h.id for h in hits}
        found = [h for h in self.pipeline.retrieve(query, mode, config).hits if h.id not in seen]
        return (_numbered(found, len(hits)) or "no new passages"), found

    def acting(self, s: ToolAgentState, config: RunnableConfig, tally: Tally) -> Steps[dict]:
        # the tools' own calls (a search, a translation) block: on the event loop, in a thread
        return (yield Call(self.act, (s, config)))

    def act(self, s: ToolAgentState, config: RunnableConfig) -> dict:
        t0 = time.perf_counter()
        hits = list(s["hits"].hits)
        messages, steps = [], []
        last = s["messages"][-1]
        # after_plan routes here only from an AIMessage with tool calls
        for call in last.tool_calls if isinstance(last, AIMessage) else []:
            text, found = self._call(s, call, hits, config)
            hits += found
            messages.append(ToolMessage(text, tool_call_id=call["id"]))
            steps.append(ToolStep(name=call["name"], args=call["args"],
                                  result=f"{len(found)} passages" if call["name"] == "search" else text[:200]))
        # still a Retrieval: the first search's notes and completeness travel on with the tools' passages
        return {"hits": s["hits"].model_copy(update={"hits": hits}), "messages": messages, "tool_calls": steps,
                "timings": [Timing(step="act", seconds=time.perf_counter() - t0)]}

    # -- answer ---------------------------------------------------------------------------
    def answer(self, s: ToolAgentState) -> dict:
        query = s["query"]
        state = ChainState(query=query, hits=list(s["hits"].hits), fmt=AnswerFormat.CITATION, mode=s["choice"].mode,
                           model=self.pipeline.label, message=s["messages"][-1])
        return {"answer": self.pipeline.parse(state)}

    # -- the graph ------------------------------------------------------------------------
    state_schema = ToolAgentState
    name = "xlrag_tool_agent"

    def _answer_steps(self, g: Any, node: Any) -> None:
        g.add_node("plan", steps_node("plan", self.plan))
        g.add_node("act", steps_node("act", self.acting))
        node("answer", self.answer)
        g.add_edge("retrieve", "plan")
        g.add_conditional_edges("plan", self.after_plan, {"act": "act", "answer": "answer"})
        g.add_edge("act", "plan")
        g.add_edge("answer", "verify")
