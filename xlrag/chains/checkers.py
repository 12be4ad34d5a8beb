"""The runtime checks' builder: a check stands below the chains (``xlrag/checks/``), so it is
handed here what only this floor can make: its translator (an LLM translator) and its
runnable (the model held to the check's reply schema by its provider's profile).

One place builds the attribution check for every xlrag stack: the pipeline's attribution
reranker, the agent's verify step and the perspectives view, all from
``answer.attribution_checker`` (default: the answering model).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from xlrag.chains.profiles import structured_runnable
from xlrag.checks.attribution import AttributionChecker, reply_schema
from xlrag.indexes.translate import CachedTranslator, Translator
from xlrag.prompts import PromptLibrary

if TYPE_CHECKING:
    from xlrag.config import XlragConfig

__all__ = ["attribution_checker", "configured_checker"]


def attribution_checker(llm: Any, prompts: PromptLibrary | None = None,
                        translator: Translator | None = None) -> AttributionChecker:
    """An :class:`AttributionChecker` over ``llm``, handed its runnable (``llm`` held to the
    verdict schema) and a translator (``translator``, else an LLM translator over ``llm``,
    cached) for the ``in_english`` setting."""
    from xlrag.chains.translator import LLMTranslator

    lib = prompts or PromptLibrary()
    if translator is None:
        translator = CachedTranslator(LLMTranslator(llm, prompts=lib))
    return AttributionChecker(llm, prompts=lib, translator=translator,
                              runnable=structured_runnable(llm, reply_schema(), "attribution", ()))


def configured_checker(config: XlragConfig, llm: Any, prompts: PromptLibrary,
                       translator: Translator | None = None) -> AttributionChecker:
    """The checker ``answer.attribution_checker`` names, quiet in every stream; with no such
    setting the stack's own ``llm`` checks (a pipeline's ``quiet_llm``), through the stack's
    ``translator`` when it has one."""
    from langgraph.constants import TAG_NOSTREAM

    from xlrag.chains.llms import build_llm

    own = config.answer.attribution_checker
    if own is None:
        if translator is not None and not isinstance(translator, CachedTranslator):
            translator = CachedTranslator(translator)
        return attribution_checker(llm, prompts, translator)
    return attribution_checker(build_llm(own).with_config(tags=[TAG_NOSTREAM]), prompts)
