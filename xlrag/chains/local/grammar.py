"""llama.cpp GBNF grammars that hold a local model's reply to an answer format (issue #33).

Every literal comes from :mod:`xlrag.formats` (the headers, the ``<docN>`` marker) and
the option letters, so the grammar cannot drift from what the
prompt asks for and the parser reads; ``tests/chains/local/test_grammar.py`` proves that every
reply the grammar admits parses with status ok.

A grammar string is checked once per model (:func:`compiled`): llama.cpp builds its sampler
from the string on every call, and a string it rejects would crash that call natively, so it
is checked against the model's vocabulary first and refused with a :class:`ConfigError`.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import threading
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from typing import Any

from xlrag.chains.parsing.common import SENTENCE_FINAL
from xlrag.errors import ConfigError
from xlrag.formats import (
    ANSWER_HEADER,
    CHOICE_HEADER,
    CITED_HEADER,
    EXPLANATION_HEADER,
    OPTION_LETTERS,
    AnswerFormat,
    check_option_count,
)

__all__ = ["LEAD_EXCLUDED", "SETTING", "TEXT_EXCLUDED", "answer_grammar", "compiled", "explanation_grammar"]

#: The configuration key that turns the grammar on, named in every error about it.
SETTING = "llm.grammar"

#: Characters free text may not hold. A newline would start a section the grammar does not
#: control; ``:`` after a header word mid-line ("… Explanation: …") is read by the parser as a
#: new section; ``<`` and ``>`` are kept for the ``<docN>`` markers the grammar writes itself,
#: so a model cannot invent one (``<doc9>`` over three passages) or a chat turn token.
TEXT_EXCLUDED = "\n\r\t:<>"

#: Characters an answer may not start with: the parser tidies an answer line by dropping "**",
#: "__", empty brackets and edge commas (formats.py, ``_tidy_line``), so an answer
#: made only of them would read as no answer; one starting otherwise keeps its first character.
LEAD_EXCLUDED = " *_,;、，،([（［"

# The sentence-final characters an explanation may end with: the parser reads a section ending
# otherwise as cut off. Sorted, so one format and count always give the same grammar string.
_FINAL = "".join(sorted(SENTENCE_FINAL))


def _literal(text: str) -> str:
    # GBNF string literals take JSON's escapes (\" \\ \n \uXXXX)
    return json.dumps(text, ensure_ascii=False)


def _char_class(chars: str, *, negated: bool) -> str:
    escaped = "".join(json.dumps(c, ensure_ascii=False)[1:-1].replace("]", "\\]").replace("-", "\\-")
                      .replace("^", "\\^") for c in chars)
    return f"[{'^' if negated else ''}{escaped}]"


def _markers(n_docs: int) -> str:
    return " | ".join(_literal(f"<doc{i}>") for i in range(n_docs))


@cache
def answer_grammar(fmt: AnswerFormat, n_docs: int, n_options: int = 0) -> str:
    """The GBNF grammar of a reply in ``fmt`` over ``n_docs`` shown passages (``n_options``
    options: the citation format's choice line, or the mc format's letter).

    citation: an optional ``Cited Documents:`` header (the prompt ends with it, and chat models
    restate it), one to ``n_docs`` markers of shown passages (none when none is shown), then the
    answer line (``Answer:`` text, or ``Chosen Option:`` and a letter) and an ``Explanation:``
    line ending a sentence or on a marker. mc: one option letter. answer: one line of text.
    """
    if n_docs < 0 or n_options < 0:
        raise ValueError("n_docs and n_options must be >= 0")
    check_option_count(n_options)
    first = _char_class(TEXT_EXCLUDED + LEAD_EXCLUDED, negated=True)
    rest = _char_class(TEXT_EXCLUDED, negated=True)
    rules = [f"text ::= {first} {rest}*"]
    letters = _char_class(OPTION_LETTERS[:n_options], negated=False) if n_options else None
    if fmt is AnswerFormat.MC:
        if letters is None:
            raise ConfigError("format 'mc' needs options; pass options=['...', '...']")
        rules.insert(0, f'root ::= " "? {letters}')
        return "\n".join(rules[:1]) + "\n"
    if fmt is AnswerFormat.ANSWER:
        rules.insert(0, 'root ::= " "? text')
        return "\n".join(rules) + "\n"
    answer = f"{_literal(CHOICE_HEADER + ' ')} {letters}" if letters else f"{_literal(ANSWER_HEADER + ' ')} text"
    cited = "cited " if n_docs else ""
    # The explanation is free, not cut to one sentence: on benchmarks/answers.py (44 questions)
    # the one-sentence form, with segments and static_first, lost 0.19 of judged correctness on
    # Travel, whose details (which tests a licence spares, each emergency number) sit in it.
    rules.insert(0, f"root ::= {_literal(CITED_HEADER)}? \" \"? {cited}\"\\n\" {answer} \"\\n\" explanation")
    if n_docs:
        # At least one: the format asks which passages the answer rests on, and the 0.5B model
        # left the line empty when it could (a wrong citation is still caught by the substance
        # checks). At most n_docs entries bound a model that loops.
        rules.append(f'cited ::= marker (", " marker){{0,{n_docs - 1}}}')
    rules.append(f"explanation ::= {_literal(EXPLANATION_HEADER + ' ')} body")
    rules += _body_rules(n_docs)
    return "\n".join(rules) + "\n"


def _body_rules(n_docs: int) -> list[str]:
    # an explanation's text: free text and markers of shown passages, ending a sentence or on one
    rest = _char_class(TEXT_EXCLUDED, negated=True)
    final = _char_class(_FINAL, negated=False)
    if not n_docs:
        return [f"body ::= {rest}* {final}"]
    return [f"body ::= ({rest} | marker)* ({final} | marker)", f"marker ::= {_markers(n_docs)}"]


@cache
def explanation_grammar(n_docs: int) -> str:
    """The GBNF grammar of the rest of an explanation: what :func:`answer_grammar` allows after
    its ``Explanation:`` header, for a reply whose first words were written for the model (an
    explanation opened in the user's language, answer.explanation_opener)."""
    if n_docs < 0:
        raise ValueError("n_docs must be >= 0")
    return "\n".join(["root ::= body", *_body_rules(n_docs)]) + "\n"


# The grammars each loaded model has accepted (weak: a model dropped from the runtime's cache
# takes its entry with it), and llama-cpp-python's grammar object per string.
_ACCEPTED: weakref.WeakKeyDictionary[Any, set[str]] = weakref.WeakKeyDictionary()
_ACCEPTED_LOCK = threading.Lock()


@cache
def _grammar_object(text: str) -> Any:
    from llama_cpp import LlamaGrammar

    return LlamaGrammar.from_string(text, verbose=False)


def compiled(llama: Any, text: str, model_name: str) -> Any:
    """``text`` as a LlamaGrammar for the loaded model ``llama``, checked once per model.

    llama.cpp parses a grammar when it builds the sampler for a call and returns no sampler
    for one it rejects (which then crashes the call), so the check builds one here and frees it.
    """
    import llama_cpp

    with _ACCEPTED_LOCK:
        accepted = _ACCEPTED.setdefault(llama, set())
        if text not in accepted:
            with _native_stderr() as said:
                sampler = llama_cpp.llama_sampler_init_grammar(llama._model.vocab, text.encode("utf-8"), b"root")
            if not sampler:
                first = text.strip().splitlines()[0] if text.strip() else "(empty)"
                reason = next((x.strip() for x in said if "error" in x.lower()), "rejected")
                raise ConfigError(f"the answer grammar (starting {first[:60]!r}) does not compile for local model "
                                  f"{model_name} ({reason[:160]}); set {SETTING}: false")
            llama_cpp.llama_sampler_free(sampler)
            accepted.add(text)
    return _grammar_object(text)


@contextmanager
def _native_stderr() -> Iterator[list[str]]:
    """What native code writes to stderr meanwhile, as lines, instead of the terminal.

    llama.cpp prints a grammar's parse error straight to file descriptor 2, past the log
    callback: uncaught, it would add lines of its own around xlrag's one-line error.
    """
    lines: list[str] = []
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with tempfile.TemporaryFile(mode="w+b") as sink:
            os.dup2(sink.fileno(), 2)
            try:
                yield lines
            finally:
                os.dup2(saved, 2)
                sink.seek(0)
                lines.extend(sink.read().decode("utf-8", errors="replace").splitlines())
    finally:
        os.close(saved)
