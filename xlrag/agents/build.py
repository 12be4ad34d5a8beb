"""The root of every answering stack that stands on a :class:`~xlrag.chains.pipeline.Pipeline`.

:class:`Stack` is built once from one config: the pipeline (with its one attribution checker),
the agent graph, the chat graph and the perspectives view all come from it and share its
model, retriever, translator and checker. ``build_agent``, ``build_chat`` and
``build_perspectives`` (and the chat engine and the server above them) are thin calls on it.
"""

from __future__ import annotations

from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from langchain_core.runnables import Runnable

from xlrag.config import XlragConfig, resolve_config
from xlrag.errors import ConfigError
from xlrag.modes import AUTO, Mode

if TYPE_CHECKING:
    from xlrag.borderlines import Territory
    from xlrag.chains.pipeline import Pipeline
    from xlrag.checks.attribution import AttributionChecker
    from xlrag.perspectives.view import PerspectivesView

__all__ = ["Stack", "build_agent", "build_chat", "build_perspectives", "view_over"]


class Stack:
    """One config's answering stack: :attr:`pipeline`, and the graphs over it, each built on
    first use and shared (a server's agent, chat and perspectives view are one stack)."""

    def __init__(self, config: XlragConfig, pipeline: Pipeline,
                 territories: list[Territory] | None = None) -> None:
        config = resolve_config(config)  # an old setting left in a section swapped in unvalidated moves too
        self.config, self.pipeline, self.territories = config, pipeline, territories
        if config.answer.attribution_check and pipeline.attribution is None:
            raise ConfigError("answer.attribution_check is on, but the pipeline given has no attribution checker; "
                              "build it with Pipeline.from_config")

    @classmethod
    def build(cls, config: XlragConfig | str | Path | None = None, *, llm: Runnable | None = None,
              retriever: Any = None, pipeline: Pipeline | None = None, mode: Mode | None = None,
              territories: list[Territory] | None = None) -> Stack:
        """The stack ``config`` describes. ``llm`` and ``retriever`` replace the ones the config
        would build; ``pipeline`` is one already built (then neither may be given). ``mode`` is
        the pipeline's default IR mode (default ``agent.mode``)."""
        from xlrag.chains.pipeline import Pipeline

        cfg = resolve_config(config)
        if pipeline is None:
            pipeline = Pipeline.from_config(cfg, llm=llm, retriever=retriever, mode=mode or cfg.agent.mode)
        elif llm is not None or retriever is not None:
            raise ConfigError("give a pipeline, or an llm and a retriever to build one, not both")
        return cls(cfg, pipeline, territories)

    @property
    def attribution(self) -> AttributionChecker | None:
        """The agent's attribution check: the pipeline's one checker, when ``answer.attribution_check``."""
        return self.pipeline.attribution if self.config.answer.attribution_check else None

    def _agent(self, tools: bool, pipeline: Pipeline | None = None) -> Any:
        from xlrag.agents.graph import XlragAgent

        cfg, pipeline = self.config.agent, pipeline if pipeline is not None else self.pipeline
        # a caller asking for perspectives builds the view then, once
        view = (lambda: self.perspectives_view) if pipeline.retriever is not None else None
        if tools:
            from xlrag.agents.tools import ToolCallingAgent

            return ToolCallingAgent(pipeline, cfg, attribution=self.attribution, max_rounds=cfg.max_tool_rounds,
                                    perspectives_view=view)
        return XlragAgent(pipeline, cfg, attribution=self.attribution, perspectives_view=view)

    @property
    def tools(self) -> bool:
        """Whether the agent calls tools (``agent.tools``, and the model's profile)."""
        chat, profile, setting = self.pipeline.llm, self.pipeline.profile, self.config.agent.tools
        if setting == "on" and not profile.supports_tools(chat):
            raise ConfigError(f"agent.tools is on, but {self.pipeline.label} has no tool calling; set agent.tools "
                              "to auto or off")
        return self.pipeline.retriever is not None and (
            setting == "on" or (setting == "auto" and profile.supports_tools(chat)))

    def agent(self, checkpointer: Any = None) -> Any:
        """The compiled agent graph (``checkpointer`` is passed to LangGraph)."""
        return self._agent(self.tools).graph(checkpointer)

    def chat(self, checkpointer: Any = None) -> Any:
        """The chat graph; ``checkpointer`` keeps each thread's turns (default: in memory)."""
        from langgraph.checkpoint.memory import InMemorySaver

        from xlrag.agents.chat import chat_graph, strict_serde

        p = self.pipeline
        # the agent runs inside a chat turn: the chat's checkpoint is the one that matters
        return chat_graph(self.agent(False), p.llm, p.prompts, self.config.agent.chat,
                          checkpointer if checkpointer is not None else InMemorySaver(serde=strict_serde()))

    @cached_property
    def perspectives_view(self) -> PerspectivesView:
        """The perspectives view, answering each language with the fixed agent graph (a
        tool-calling agent could search other languages' stores)."""
        from xlrag.borderlines import load_territories
        from xlrag.perspectives.compare import AgreementJudge
        from xlrag.perspectives.view import PerspectivesView

        # the view shows answer lines and citations: an explanation it never shows is not written
        # unless asked for (agent.perspectives.explanation), on the same loaded model and stores
        answer = self.pipeline.answer_config
        answer = answer.model_copy(update={"explanation": answer.explanation
                                           and self.config.agent.perspectives.explanation})
        pipeline = self.pipeline.model_copy(update={"answer_config": answer})
        return PerspectivesView(pipeline=pipeline, agent=self._agent(False, pipeline).graph(), judge=AgreementJudge(),
                                rules=list(self.config.agent.rules),
                                territories=self.territories if self.territories is not None else load_territories(),
                                name="xlrag_perspectives")

    def close(self) -> None:
        """Stop the search threads of a retriever the stack opened."""
        self.pipeline.close()


def build_agent(config: XlragConfig | str | Path | None = None, *, llm: Runnable | None = None,
                retriever: Any = None, pipeline: Pipeline | None = None, checkpointer: Any = None) -> Any:
    """The compiled agent graph (a LangGraph ``CompiledStateGraph``, so a Runnable).

    ``invoke({"question": ...})`` returns ``{"answer": GroundedAnswer, "trace": Trace}``.
    ``llm`` and ``retriever`` replace the ones the config would build (an application's
    own chat model, a retriever already open); ``pipeline`` is a whole stack already built
    (:meth:`~xlrag.chains.pipeline.Pipeline.from_config`), shared with other graphs.
    ``checkpointer`` is passed to LangGraph.
    """
    return Stack.build(config, llm=llm, retriever=retriever, pipeline=pipeline).agent(checkpointer)


def build_chat(config: XlragConfig | str | Path | None = None, *, llm: Runnable | None = None,
               retriever: Any = None, pipeline: Pipeline | None = None, checkpointer: Any = None) -> Any:
    """The chat graph: ``invoke({"question": ...}, {"configurable": {"thread_id": "s1"}})``
    returns ``{"answer", "trace", "turns"}``; the checkpointer keeps each thread's turns
    (default: in memory; :func:`xlrag.agents.chat.open_checkpointer` for SQLite)."""
    return Stack.build(config, llm=llm, retriever=retriever, pipeline=pipeline).chat(checkpointer)


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
    # each call names its stores, so the pipeline's own mode is auto
    return Stack.build(config, llm=llm, retriever=retriever, pipeline=pipeline, mode=AUTO,
                       territories=territories).perspectives_view


def view_over(cfg: XlragConfig, pipeline: Pipeline, territories: list[Territory] | None = None) -> PerspectivesView:
    """The view over a stack already built (``Stack(cfg, pipeline).perspectives_view``)."""
    return Stack(cfg, pipeline, territories).perspectives_view
