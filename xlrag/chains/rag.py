"""The grounded RAG chains as LangChain Runnables: ``answer``, ``mc`` and ``citation``.

    inputs → prepare (detect language) → retrieve (IR mode) → localized prompt → LLM
           → parse → validate citations (post hoc if the model gave none) → GroundedAnswer

Input is a question string or a mapping ``{"question", "lang"?, "options"?,
"option_aliases"?, "relevant_langs"?, "target_lang"?, "mode"?}``. ``invoke``,
``ainvoke``, ``batch`` and ``stream`` all work; the async path awaits the LLM and
runs retrieval in worker threads.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import Any

from langchain_core.runnables import Runnable, RunnableLambda

from xlrag.chains.grounding import PostHocAttributor, resolve_markers
from xlrag.chains.parsing import find_markers, parse_citation, parse_mc, strip_markers
from xlrag.chains.vendor_citations import anthropic_documents, cohere_documents, vendor_citations
from xlrag.errors import ConfigError
from xlrag.formats import CITED_HEADER, AnswerFormat, Section, parse_format
from xlrag.indexes.retriever import CrossLingualRetriever
from xlrag.prompts import PromptLibrary
from xlrag.schema import Citation, GroundedAnswer, Hit, Query
from xlrag.text import first_line

__all__ = ["build_chain", "echo_reference", "finalize", "model_label"]

_QUERY_FIELDS = ("lang", "relevant_langs", "target_lang", "id")


def model_label(llm: Any) -> str:
    name = getattr(llm, "model_name", None) or getattr(llm, "model", None) or ""
    kind = getattr(llm, "_llm_type", type(llm).__name__)
    return f"{kind}/{name}" if name else str(kind)


def _inputs(value: Any) -> dict[str, Any]:
    if isinstance(value, str):
        return {"question": value}
    if isinstance(value, Query):
        return {"question": value.text, **value.model_dump(include=set(_QUERY_FIELDS), exclude_none=True)}
    if isinstance(value, Mapping) and "question" in value:
        return dict(value)
    raise ConfigError("chain input must be a question string or a mapping with a 'question' key")


def _text(message: Any) -> str:
    if isinstance(message, str):
        return message
    content = getattr(message, "content", "")
    if isinstance(content, list):  # content blocks (Anthropic, Cohere)
        return "".join(b.get("text", "") if isinstance(b, dict) else str(b) for b in content)
    return str(content)


_WORD = re.compile(r"\w+", re.UNICODE)
_MARKUP = re.compile(r"[*#|_]+|-{3,}")
# A line made only of section headers and <docN> markers is structure, not a copy.
_HEADER_WORDS = frozenset(w.lower() for s in Section for w in s.value.split())
_MARKER_WORD = re.compile(r"^doc\d*$")


def _words(line: str) -> frozenset[str]:
    return frozenset(w for w in _WORD.findall(line.lower()) if not _MARKER_WORD.match(w) and not w.isdigit())


def echo_reference(messages: Sequence[tuple[str, str]], documents: Sequence[str], question: str,
                   options: Sequence[str] | None = None) -> str:
    """What an echo copies: every line of the messages actually sent, except the documents,
    the question and the answer options (quoting a passage or naming an option is an answer)."""
    from xlrag.prompts import format_options

    def norm(line: str) -> str:
        return " ".join(_MARKUP.sub(" ", line).split())

    doc_lines = {norm(x) for d in documents for x in d.splitlines() if x.strip()}
    doc_lines |= {norm(d) for d in documents}
    doc_lines |= {norm(x) for x in format_options(options or []).splitlines()}
    asked = norm(question)
    kept = []
    for _, content in messages:
        for line in content.splitlines():
            n = norm(line)
            body = _DOC_PREFIX.sub("", n)
            if not n or body in doc_lines or n in doc_lines or (asked and asked in n):
                continue
            kept.append(line)
    return "\n".join(kept)


_DOC_PREFIX = re.compile(r"^<doc\d+>\s*")
_HEADER_PREFIX = re.compile(
    r"^[\s*_#>]*(?:" + "|".join(re.escape(s.value) for s in Section) + r")[\s*_]*:[\s*_]*", re.IGNORECASE
)
_ELLIPSIS = "….。 "


def _placeholder(line: str) -> str | None:
    """The value of a "Header: value" line, folded for comparison (None: no header)."""
    m = _HEADER_PREFIX.match(line)
    if not m:
        return None
    value = " ".join(line[m.end():].split()).lower()
    return value or None


def _fills_placeholder(value: str, placeholder: str) -> bool:
    """``value`` copies ``placeholder``, whole or up to the template's own ellipsis."""
    if value == placeholder:
        return True
    stem = value.rstrip(_ELLIPSIS)
    if not stem or not placeholder.startswith(stem):
        return False
    # "因为……" copies "因为……（…）": a short stem counts when the template's "…" follows it.
    return len(stem) >= 4 or placeholder[len(stem):].lstrip().startswith(("…", "..."))


def _drop_echo(raw: str, instructions_text: str) -> str:
    """Remove reply lines copied from the prompt's instructions.

    Small base models often copy the format example ("Cited Documents: the documents
    you used, e.g. <doc0>, <doc2>") instead of filling it in, sometimes cut short or
    with the markers dropped or two lines spliced; such a line is not an answer. A line
    counts as copied when nearly all its words come from one instruction line and it
    shares most of that line's words, or when (five words or more) nine in ten of its
    words are instruction words. Document blocks are not instructions: an extractive answer
    quoting a passage is kept.
    """
    lines_in = [x for x in instructions_text.splitlines() if x.strip()]
    exact = {" ".join(x.lower().split()) for x in lines_in}
    instructions = [_words(x) for x in lines_in if len(_words(x)) >= 3]
    if not instructions:
        return raw

    vocabulary = frozenset().union(*instructions)
    # "Answer: your answer" in the template: a reply line whose value is a template
    # placeholder ("Answer: 你的答案", "**Explanation:** because …") fills nothing in.
    placeholders = {v for v in map(_placeholder, lines_in) if v and _words(v)}

    def copied(line: str) -> bool:
        value = _placeholder(line)
        if value is not None and any(_fills_placeholder(value, p) for p in placeholders):
            return True
        if _words(line) <= _HEADER_WORDS:
            return False
        norm = " ".join(line.lower().split())
        if norm and (norm in exact or f"cited documents: {norm}" in exact):
            return True
        words = _words(line)
        if len(words) < 3:
            return False
        # Spliced from several instruction lines: almost every word is an instruction word.
        if len(words) >= 5 and len(words & vocabulary) >= 0.9 * len(words):
            return True
        for inst in instructions:
            shared = len(words & inst)
            if shared >= 0.85 * len(words) and shared >= 0.5 * len(inst):
                return True
        return False

    lines = raw.splitlines()
    kept = [x for x in lines if not copied(x)]
    return "\n".join(kept) if len(kept) != len(lines) else raw


def finalize(state: Mapping[str, Any], message: Any, attributor: PostHocAttributor | None) -> GroundedAnswer:
    """Parse the LLM reply for ``state`` (question, query, hits, fmt, options) into a GroundedAnswer."""
    query: Query = state["query"]
    hits: list[Hit] = state["hits"]
    fmt = AnswerFormat(state["fmt"])
    options: list[str] | None = state.get("options")
    raw = _text(message)
    flags: list[str] = [] if hits else ["closed_book"]
    cleaned = _drop_echo(raw, state.get("instructions") or "")
    if cleaned != raw:
        flags.append("prompt_echo")
        raw_for_parse = cleaned
    else:
        raw_for_parse = raw
    base = {"question": query.text, "lang": query.lang or "", "format": fmt, "mode": state["mode"],
            "model": state["model"], "passages": hits, "raw_output": raw}
    citations: list[Citation] = []
    answer = explanation = chosen = None
    index = None

    if fmt == "mc":
        mc = parse_mc(raw_for_parse, options or [], state.get("option_aliases"))
        if mc.status != "ok":
            flags.append(mc.status)
        index, chosen, answer = mc.index, mc.option, mc.option
    elif fmt == "citation":
        # The prompt ends with the "Cited Documents:" header for the model to continue.
        text = raw_for_parse if CITED_HEADER.lower() in raw_for_parse.lower() else f"{CITED_HEADER} {raw_for_parse}"
        parsed = parse_citation(text, len(hits), Section.CHOICE if options else Section.ANSWER)
        if parsed.status == "unparseable":
            flags.append("unparseable")
        if parsed.truncated:
            flags.append("truncated")
        answer, explanation = parsed.answer, parsed.explanation
        citations = resolve_markers([*parsed.cited, *parsed.inline], hits)
        if options and answer:
            mc = parse_mc(answer, options, state.get("option_aliases"))
            if mc.status == "ok":
                index, chosen = mc.index, mc.option
            else:
                flags.append(mc.status)
    else:
        answer = strip_markers(first_line(raw_for_parse)) or None
        citations = resolve_markers(find_markers(raw_for_parse), hits)

    citations += vendor_citations(message, hits)
    if any(not c.valid for c in citations):
        flags.append("invalid_citation")
    if hits and fmt != "mc" and not any(c.valid for c in citations):
        flags.append("no_citations")
        claim = " ".join(x for x in (answer, strip_markers(explanation or "")) if x)
        if attributor is not None and claim:
            post = attributor.attribute(claim, hits)
            if post:
                citations += post
                flags.append("post_hoc_citations")
    return GroundedAnswer(**base, answer=answer, explanation=explanation, option_index=index,
                          chosen_option=chosen, citations=citations, flags=flags)


@lru_cache(maxsize=1)
def _examples() -> dict[str, str]:
    # Package data that never changes at run time: read once, not on every chain call.
    from importlib import resources

    import yaml

    text = resources.files("xlrag.prompts").joinpath("fewshot", "examples.yaml").read_text(encoding="utf-8")
    return yaml.safe_load(text)


def base_model_messages(prompts: PromptLibrary, lang: str, question: str, docs: list[str], fmt: str,
                        options: list[str] | None) -> tuple[list[tuple[str, str]], str]:
    """Messages for a base model: localized system + language instruction, one worked
    example of the format, then the documents and question. Returns the messages and
    the example text (an echo of it is not an answer either)."""
    from xlrag.prompts import format_options

    qlabel, alabel = prompts.render("question_label", lang), prompts.render("answer_label", lang)
    example = _examples()[fmt].format(question_label=qlabel, answer_label=alabel)
    system = f"{prompts.render('system', lang)}\n{prompts.render('answer_language', lang)}"
    lines = [example, ""]
    # Markdown bullets and table rules ("* * *", "|---|") send a small base model into
    # repeating them; the words are what it needs.
    lines += [f"<doc{i}> {' '.join(_MARKUP.sub(' ', d).split())}" for i, d in enumerate(docs)]
    lines.append(f"{qlabel}: {question}")
    if fmt == "mc":
        lines += [format_options(options or []), f"{alabel}:"]
    elif fmt == "citation":
        lines.append(CITED_HEADER)
    else:
        lines.append(f"{alabel}:")
    return [("system", system), ("user", "\n".join(lines))], example


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
) -> Runnable:
    """A Runnable answering with ``fmt`` over passages chosen by IR ``mode``.

    ``retriever=None`` or ``mode="no_ir"`` answers closed-book. Post-hoc citations
    use the retriever's embedder and stored vectors unless ``post_hoc=False``.
    ``few_shot`` shows one worked example of the format before the real turn; by
    default only base models (the local llama.cpp model) get it.
    """
    fmt = parse_format(fmt)
    prompts = prompts or PromptLibrary()
    if attributor is None and post_hoc and retriever is not None:
        attributor = PostHocAttributor(retriever.embedder, retriever.stores)
    label = model_label(llm)

    def _state(value: Any, query: Query, hits: list[Hit]) -> dict[str, Any]:
        inputs = _inputs(value)
        options = inputs.get("options")
        if fmt == "mc" and not options:
            raise ConfigError("the mc format needs options: pass {'question': ..., 'options': [...]}")
        return {"query": query, "hits": hits, "fmt": fmt, "options": list(options) if options else None,
                "option_aliases": inputs.get("option_aliases"), "model": label,
                "mode": _mode(inputs)}

    def _mode(inputs: Mapping[str, Any]) -> str:
        return inputs.get("mode") or mode or (retriever.policy.name if retriever else "no_ir")

    def _query(inputs: Mapping[str, Any]) -> Query:
        fields = {f: inputs[f] for f in _QUERY_FIELDS if inputs.get(f) is not None}
        if retriever is not None:
            return retriever.prepare(inputs["question"], **fields)
        from xlrag.detect import LinguaDetector
        from xlrag.schema import make_query

        q = make_query(inputs["question"], **fields)
        return q if q.lang else q.model_copy(update={"lang": LinguaDetector().detect(q.text) or "en"})

    def _retrieve(value: Any) -> dict[str, Any]:
        inputs = _inputs(value)
        query = _query(inputs)
        m = _mode(inputs)
        hits = [] if retriever is None or m == "no_ir" else retriever.retrieve(query, mode=m, k=k)
        return _state(value, query, hits)

    async def _aretrieve(value: Any) -> dict[str, Any]:
        import asyncio

        inputs = _inputs(value)
        query = await asyncio.to_thread(_query, inputs)
        m = _mode(inputs)
        hits = [] if retriever is None or m == "no_ir" else await retriever.aretrieve(query, mode=m, k=k)
        return _state(value, query, hits)

    def _messages(state: dict[str, Any]) -> dict[str, Any]:
        docs = [h.passage.text for h in state["hits"]]
        lang, fmt = state["query"].lang or "en", state["fmt"]
        if base_model and not (fmt == "citation" and state["options"]):
            msgs, _ = base_model_messages(prompts, lang, state["query"].text, docs, fmt, state["options"])
        else:
            msgs = prompts.build_messages(lang, state["query"].text, docs or None, fmt, state["options"])
        # The echo reference is cut from the very messages sent, so it can never drift from them.
        return {**state, "messages": msgs, "instructions": echo_reference(msgs, docs, state["query"].text,
                                                                         state["options"])}

    kind = getattr(llm, "_llm_type", "")
    base_model = kind == "xlrag-llama-cpp" if few_shot is None else few_shot

    def _stops(lang: str, fmt: str) -> list[str]:
        # A base model does not stop by itself: it starts the next "Question:" in the
        # prompt's own language, or pads with blank lines. Chat models need none of this.
        labels = [prompts.render(role, lang) for role in ("question_label", "documents_label")]
        stops = [f"\n{label}:" for label in labels] + [f"\n{label} :" for label in labels]
        return [*stops, "\n\n", "\n<doc"]

    def _request(state: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
        """Messages and kwargs; vendors with native grounding also get the passages as documents."""
        messages, hits = state["messages"], state["hits"]
        if kind == "xlrag-llama-cpp":
            return messages, {"stop": _stops(state["query"].lang or "en", state["fmt"])}
        if hits and kind == "cohere-chat":
            return messages, {"documents": cohere_documents(hits)}
        if hits and kind == "anthropic-chat":
            (_, system), (_, user) = messages
            return [("system", system), ("user", [*anthropic_documents(hits), {"type": "text", "text": user}])], {}
        return messages, {}

    def _call(state: dict[str, Any]) -> dict[str, Any]:
        messages, kwargs = _request(state)
        return {**state, "message": llm.invoke(messages, **kwargs)}

    async def _acall(state: dict[str, Any]) -> dict[str, Any]:
        messages, kwargs = _request(state)
        return {**state, "message": await llm.ainvoke(messages, **kwargs)}

    def _finish(state: dict[str, Any]) -> GroundedAnswer:
        return finalize(state, state["message"], attributor)

    async def _afinish(state: dict[str, Any]) -> GroundedAnswer:
        import asyncio

        # Post-hoc attribution embeds sentences: keep it off the event loop.
        return await asyncio.to_thread(finalize, state, state["message"], attributor)

    return (
        RunnableLambda(_retrieve, afunc=_aretrieve, name="retrieve")
        | RunnableLambda(_messages, name="localized_prompt")
        | RunnableLambda(_call, afunc=_acall, name="llm")
        | RunnableLambda(_finish, afunc=_afinish, name="ground")
    ).with_config(run_name=f"xlrag_{fmt}")

