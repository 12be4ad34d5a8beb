"""``build_agent``: the agent graph from one config, ready to ``invoke``, ``stream`` or serve;
``build_perspectives``: the perspectives view, answering each language with that graph."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from langchain_core.runnables import Runnable

from xlrag.config import XlragConfig, resolve_config
from xlrag.modes import AUTO, Mode

if TYPE_CHECKING:
    from xlrag.borderlines import Territory
    from xlrag.chains.pipeline import Pipeline
    from xlrag.checks.attribution import AttributionChecker
    from xlrag.perspectives.view import PerspectivesView

__all__ = ["build_agent", "build_chat", "build_perspectives", "view_over"]


def build_agent(config: XlragConfig | str | Path | None = None, *, llm: Runnable | None = None,
                retriever: Any = None, pipeline: Pipeline | None = None, checkpointer: Any = None) -> Any:
    """The compiled agent graph (a LangGraph ``CompiledStateGraph``, so a Runnable).

    ``invoke({"question": ...})`` returns ``{"answer": GroundedAnswer, "trace": Trace}``.
    ``llm`` and ``retriever`` replace the ones the config would build (an application's
    own chat model, a retriever already open); ``pipeline`` is a whole stack already built
    (:meth:`~xlrag.chains.pipeline.Pipeline.from_config`), shared with other graphs.
    ``checkpointer`` is passed to LangGraph.
    """
    cfg = resolve_config(config)
    return _agent(cfg, _pipeline(cfg, llm, retriever, pipeline), checkpointer)


def build_chat(config: XlragConfig | str | Path | None = None, *, llm: Runnable | None = None,
               retriever: Any = None, pipeline: Pipeline | None = None, checkpointer: Any = None) -> Any:
    """The chat graph: ``invoke({"question": ...}, {"configurable": {"thread_id": "s1"}})``
    returns ``{"answer", "trace", "turns"}``; the checkpointer keeps each thread's turns
    (default: in memory; :func:`xlrag.agents.chat.open_checkpointer` for SQLite)."""
    from langgraph.checkpoint.memory import InMemorySaver

    from xlrag.agents.chat import chat_graph, strict_serde

    cfg = resolve_config(config)
    stack = _pipeline(cfg, llm, retriever, pipeline)
    # the agent runs inside a chat turn: the chat's checkpoint is the one that matters
    return chat_graph(_agent(cfg, stack, False), stack.llm, stack.prompts, cfg.agent.chat,
                      checkpointer if checkpointer is not None else InMemorySaver(serde=strict_serde()))


def build_perspectives(config: XlragConfig | str | Path | None = None, *, llm: Runnable | None = None,
                       retriever: Any = None, pipeline: Pipeline | None = None,
                       territories: list[Territory] | None = None) -> PerspectivesView:
    """The perspectives view (a typed LangChain Runnable) over the stack ``config`` describes.

    ``invoke({"question": "Who does Crimea belong to?"})`` returns
    :class:`~xlrag.perspectives.models.Perspectives`: the question answered once per language
    of sources, in the user's language with ``<docN>`` citations, compared pair by pair.
    ``llm``, ``retriever`` or a whole ``pipeline`` replace what the config would build, as
    for :func:`build_agent`. ``territories`` (default: the vendored BorderLines excerpt) name
    the disputed territories whose claimants' languages are compared.
    """
    cfg = resolve_config(config)
    # each call names its stores, so the pipeline's own mode is auto
    return view_over(cfg, _pipeline(cfg, llm, retriever, pipeline, mode=AUTO), territories)


def view_over(cfg: XlragConfig, pipeline: Pipeline, territories: list[Territory] | None = None) -> PerspectivesView:
    """The view over a stack already built (the agent's, when it routes a question there)."""
    from xlrag.agents.graph import XlragAgent
    from xlrag.borderlines import load_territories
    from xlrag.perspectives.compare import AgreementJudge
    from xlrag.perspectives.view import PerspectivesView

    # the fixed graph answers each language: a tool-calling agent could search other languages' stores
    agent = XlragAgent(pipeline, cfg.agent, attribution=_attribution(cfg, pipeline)).graph()
    return PerspectivesView(pipeline=pipeline, agent=agent, judge=AgreementJudge(), rules=list(cfg.agent.rules),
                            territories=territories if territories is not None else load_territories(),
                            name="xlrag_perspectives")


def _attribution(cfg: XlragConfig, pipeline: Pipeline) -> AttributionChecker | None:
    if not cfg.agent.attribution:
        return None
    from xlrag.chains.checkers import configured_checker

    # answer.attribution_checker, as the reranker's
    return configured_checker(cfg, pipeline.quiet_llm, pipeline.prompts, pipeline.translator)


def _pipeline(cfg: XlragConfig, llm: Runnable | None, retriever: Any, pipeline: Pipeline | None,
              mode: Mode | None = None) -> Pipeline:
    from xlrag.chains.pipeline import Pipeline

    if pipeline is None:
        return Pipeline.from_config(cfg, llm=llm, retriever=retriever, mode=mode or cfg.agent.mode)
    if llm is not None or retriever is not None:
        from xlrag.errors import ConfigError

        raise ConfigError("give a pipeline, or an llm and a retriever to build one, not both")
    return pipeline


def _agent(cfg: XlragConfig, pipeline: Pipeline, checkpointer: Any) -> Any:
    from xlrag.agents.graph import XlragAgent

    attribution = _attribution(cfg, pipeline)
    chat, profile = pipeline.llm, pipeline.profile
    tools = cfg.agent.tools == "on" or (cfg.agent.tools == "auto" and profile.supports_tools(chat))
    if tools and not profile.supports_tools(chat):
        from xlrag.errors import ConfigError

        raise ConfigError(f"agent.tools is on, but {pipeline.label} has no tool calling; set agent.tools to auto or off")
    perspectives = None
    if pipeline.retriever is not None:
        from functools import partial

        perspectives = partial(view_over, cfg, pipeline)  # built when a caller first asks for perspectives
    if tools and pipeline.retriever is not None:
        from xlrag.agents.tools import ToolCallingAgent

        agent: XlragAgent = ToolCallingAgent(pipeline, cfg.agent, attribution=attribution,
                                             max_rounds=cfg.agent.max_tool_rounds, perspectives=perspectives)
    else:
        agent = XlragAgent(pipeline, cfg.agent, attribution=attribution, perspectives=perspectives)
    return agent.graph(checkpointer)
