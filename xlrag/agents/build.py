"""``build_agent``: the agent graph from one config, ready to ``invoke``, ``stream`` or serve."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from langchain_core.runnables import Runnable

from xlrag.config import XlragConfig, resolve_config
from xlrag.modes import IRMode

__all__ = ["build_agent", "build_chat"]


def build_agent(config: XlragConfig | str | Path | None = None, *, llm: Runnable | None = None,
                retriever: Any = None, checkpointer: Any = None) -> Any:
    """The compiled agent graph (a LangGraph ``CompiledStateGraph``, so a Runnable).

    ``invoke({"question": ...})`` returns ``{"answer": GroundedAnswer, "trace": Trace}``.
    ``llm`` and ``retriever`` replace the ones the config would build (an application's
    own chat model, a retriever already open); ``checkpointer`` is passed to LangGraph.
    """
    return _agent(resolve_config(config), llm, retriever, checkpointer)[0]


def build_chat(config: XlragConfig | str | Path | None = None, *, llm: Runnable | None = None,
               retriever: Any = None, checkpointer: Any = None) -> Any:
    """The chat graph: ``invoke({"question": ...}, {"configurable": {"thread_id": "s1"}})``
    returns ``{"answer", "trace", "turns"}``; the checkpointer keeps each thread's turns
    (default: in memory; :func:`xlrag.agents.chat.open_checkpointer` for SQLite)."""
    from langgraph.checkpoint.memory import InMemorySaver

    from xlrag.agents.chat import chat_graph, strict_serde

    cfg = resolve_config(config)
    # the agent runs inside a chat turn: the chat's checkpoint is the one that matters
    agent, chain = _agent(cfg, llm, retriever, False)
    return chat_graph(agent, chain.llm, chain.prompts, cfg.agent.chat,
                      checkpointer if checkpointer is not None else InMemorySaver(serde=strict_serde()))


def _agent(cfg: XlragConfig, llm: Runnable | None, retriever: Any, checkpointer: Any) -> tuple[Any, Any]:
    from langgraph.constants import TAG_NOSTREAM

    from xlrag.agents.graph import XlragAgent
    from xlrag.chains.llms import build_llm
    from xlrag.chains.rag import build_chain
    from xlrag.chains.translator import LLMTranslator
    from xlrag.indexes.retriever import CrossLingualRetriever

    chat = llm if llm is not None else build_llm(cfg.llm)
    if retriever is None and cfg.agent.mode != IRMode.NO_IR:
        retriever = CrossLingualRetriever.from_config(cfg)
    chain = build_chain(retriever, chat, fmt="citation", k=cfg.retrieval.k)
    # the helpers' calls never reach a user's token stream
    quiet = chat.with_config(tags=[TAG_NOSTREAM])
    translator = LLMTranslator(llm=quiet, prompts=chain.prompts)
    attribution = None
    if cfg.agent.attribution:
        from xlrag.checks.attribution import AttributionChecker

        attribution = AttributionChecker(quiet, prompts=chain.prompts)
    tools = cfg.agent.tools == "on" or (cfg.agent.tools == "auto" and chain.profile.supports_tools(chat))
    if tools and not chain.profile.supports_tools(chat):
        from xlrag.errors import ConfigError

        raise ConfigError(f"agent.tools is on, but {chain.label} has no tool calling; set agent.tools to auto or off")
    if tools and retriever is not None:
        from xlrag.agents.tools import ToolCallingAgent

        agent: XlragAgent = ToolCallingAgent(chain, cfg.agent, translator=translator, attribution=attribution,
                                             max_rounds=cfg.agent.max_tool_rounds)
    else:
        agent = XlragAgent(chain, cfg.agent, translator=translator, attribution=attribution)
    return agent.graph(checkpointer), chain
