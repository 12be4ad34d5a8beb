"""The parse step: an LLM reply into a :class:`~xlrag.schema.GroundedAnswer` (answer,
explanation or chosen option, ``<docN>`` citations resolved to the shown passages, flags).

Post-hoc citations are not made here: they are a postprocessor
(:class:`~xlrag.chains.postprocess.PostHocCitations`), and in the agent the last repair.
"""

from __future__ import annotations

from typing import Any

from xlrag.chains.echo import drop_echo
from xlrag.chains.grounding import PostHocCiter, resolve_markers
from xlrag.chains.parsing import find_markers, parse_citation, parse_mc, strip_markers
from xlrag.chains.parsing.citation import opens_with_section
from xlrag.chains.profiles import ProviderProfile
from xlrag.chains.state import ChainState
from xlrag.checks.substance import FLAGS, non_answer, refusal_despite_evidence
from xlrag.formats import CITED_HEADER, AnswerFormat, Section
from xlrag.schema import AnswerUsage, Citation, GroundedAnswer, Hit, Query
from xlrag.text import first_line

__all__ = ["finalize", "message_text", "message_usage", "parse_reply", "whole_reply"]


def message_text(message: Any) -> str:
    """The text of an LLM reply: a string, a message, or a message of content blocks."""
    if isinstance(message, str):
        return message
    content = getattr(message, "content", "")
    if isinstance(content, list):  # content blocks (Anthropic, Cohere)
        return "".join(b.get("text", "") if isinstance(b, dict) else str(b) for b in content)
    return str(content)


def message_usage(message: Any) -> AnswerUsage | None:
    """The cost of an LLM reply: the local runtime's ``response_metadata`` (exact prompt tokens,
    evaluated vs reused, time to first token), else LangChain's standard ``usage_metadata``
    (vendors; ``cache_read`` is their prompt cache). None when the reply reports nothing."""
    meta = getattr(message, "response_metadata", None) or {}
    usage = getattr(message, "usage_metadata", None) or {}
    cached = (usage.get("input_token_details") or {}).get("cache_read")
    fields = {
        "prompt_tokens": meta.get("prompt_tokens", usage.get("input_tokens")),
        "completion_tokens": meta.get("completion_tokens", usage.get("output_tokens")),
        "prompt_tokens_evaluated": meta.get("prompt_tokens_evaluated"),
        "prompt_tokens_cached": meta.get("prompt_tokens_cached", cached),
        "time_to_first_token": meta.get("time_to_first_token"),
    }
    return AnswerUsage(**fields) if any(v is not None for v in fields.values()) else None


def _says_nothing(said: str, query: Query, hits: list[Hit], templates: str, explanation: str | None = None) -> bool:
    """The lexical substance checks any answer gets, with no model call: the question or the
    template repeated, an explanation that only restates the question, or a refusal while the
    top passage holds the question's words. (Support by the cited passages needs a translation
    across languages: the agent checks that.)"""
    lang = query.lang
    if not non_answer(said, query.question, lang, templates=[templates], explanation=explanation).passed:
        return True
    top = hits[0].passage.text if hits else None
    return not refusal_despite_evidence(said, query.question, top, lang).passed


def _citation_reply(cleaned: str, n_docs: int, options: list[str] | None) -> Any:
    """The citation-format reply, parsed (a bare reply is an answer with no citations)."""
    answer_section = Section.CHOICE if options else Section.ANSWER
    lowered = cleaned.lower()
    if CITED_HEADER.lower() in lowered:
        text = cleaned
    elif find_markers(cleaned) or any(s.header.lower() in lowered for s in Section):
        # The prompt ends with the "Cited Documents:" header for the model to continue.
        text = f"{CITED_HEADER} {cleaned}"
    elif opens_with_section(cleaned):
        # The answer under a translated header, the cited line skipped: read as headed, not
        # as a bare answer that would keep "الإجابة:" in it.
        text = f"{CITED_HEADER}\n{cleaned}"
    else:
        # A bare reply ("308") is an answer with no citations, not a list of documents.
        text = f"{CITED_HEADER}\n{answer_section.header} {cleaned.strip()}"
    return parse_citation(text, n_docs, answer_section)


def parse_reply(state: ChainState, profile: ProviderProfile | None = None) -> GroundedAnswer:
    """The LLM reply in ``state.message`` as a GroundedAnswer, with the lexical substance flags."""
    query, hits, fmt, options = state.query, state.hits, state.fmt, state.options
    message = state.message
    raw = message_text(message)
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
        parsed = _citation_reply(cleaned, len(hits), options)
        if parsed.status == "unparseable":
            flags.append("unparseable")
        # the reply was cut when the provider says so (max_tokens), or when its answer line itself
        # is unfinished; not for what a last character suggests: an explanation ending on "119",
        # or a short answer with no full stop ("Nicholas E. Golovin"), is finished
        if (profile is not None and profile.reported_cut_off(message)) or parsed.answer_cut:
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
    if fmt is not AnswerFormat.MC and _says_nothing(answer or cleaned, query, hits, state.echo_reference,
                                                    explanation if answer else None):
        flags.insert(0, FLAGS["non_answer"])
    return GroundedAnswer(question=query.question, lang=query.lang or "", format=fmt, mode=state.mode,
                          model=state.model, passages=hits, raw_output=raw, answer=answer,
                          explanation=explanation, option_index=index, chosen_option=chosen,
                          citations=citations, flags=flags, complete=state.complete,
                          notes=state.notes, usage=message_usage(message))


def finalize(state: ChainState, citer: PostHocCiter | None,
             profile: ProviderProfile | None = None) -> GroundedAnswer:
    """:func:`parse_reply`, then post-hoc citations by ``citer`` when the model cited nothing."""
    from xlrag.chains.postprocess import PostHocCitations

    answer = parse_reply(state, profile)
    return PostHocCitations(citer).process(answer) if citer is not None else answer


def whole_reply(chunks: list[Any]) -> Any:
    """A streamed reply's chunks as the one reply ``invoke`` would have returned."""
    from functools import reduce
    from operator import add

    from langchain_core.messages import AIMessageChunk, BaseMessageChunk, message_chunk_to_message

    if not chunks:
        return ""
    if not isinstance(chunks[0], BaseMessageChunk):  # a text-completion model streams strings
        return "".join(message_text(c) for c in chunks)
    if len(chunks) > 1 and all(isinstance(c, AIMessageChunk) for c in chunks):
        # one merge of them all: adding them one by one re-parses tool-call arguments each time
        return message_chunk_to_message(chunks[0] + chunks[1:])
    return message_chunk_to_message(reduce(add, chunks))
