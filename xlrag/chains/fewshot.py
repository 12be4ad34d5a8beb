"""The worked example a base model is shown before the real question (gemma-3-270m and any
model whose provider profile asks for it, ``llm.few_shot``): the localized system prompt and
language instruction, one example of the format laid out with the user's language's labels
(``xlrag/prompts/fewshot/examples.yaml``), then the documents and the question, ending where
the model is to continue. The pipeline builds every other prompt with
:meth:`~xlrag.prompts.PromptLibrary.build_messages`."""

from __future__ import annotations

from functools import lru_cache

from xlrag.chains.echo import strip_markup
from xlrag.formats import CITED_HEADER, AnswerFormat, document_line, parse_format
from xlrag.prompts import PromptLibrary, format_options, join_parts

__all__ = ["base_model_messages"]


@lru_cache(maxsize=1)
def _examples() -> dict[str, str]:
    # Package data that never changes at run time: read once, not on every call.
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
    lines += [document_line(i, strip_markup(d)) for i, d in enumerate(docs)]
    lines.append(f"{qlabel}: {question}")
    if fmt is AnswerFormat.MC:
        lines += [format_options(options or []), f"{alabel}:"]
    elif fmt is AnswerFormat.CITATION:
        lines.append(CITED_HEADER)
    else:
        lines.append(f"{alabel}:")
    return [("system", system), ("user", "\n".join(lines))], example
