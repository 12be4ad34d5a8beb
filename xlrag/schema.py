"""Pydantic models at xlrag's boundaries: what goes in, what comes out."""

from __future__ import annotations

import typing
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from xlrag.errors import EmptyQueryError, InvalidArgumentError, UnknownLanguageError
from xlrag.formats import AnswerFormat
from xlrag.languages import normalize_code

__all__ = ["CHANNELS", "AnswerUsage", "Channel", "Citation", "CitationSource", "Document", "GroundedAnswer", "Hit",
           "Passage", "Query", "QueryFields", "Retrieval",
           "make_query"]

#: The ways a store is searched (``retrieval.channels``): dense vectors, BM25 over the store
#: language's analyzer, or both fused inside each store. The one list; config, CLI and server derive from it.
Channel = Literal["dense", "lexical"]
CHANNELS: tuple[str, ...] = typing.get_args(Channel)

# Who made a citation; the server's CitationOut reuses it (it once lacked "attribution")
CitationSource = Literal["model", "post_hoc", "vendor", "attribution", "quote"]


def _lang_or_none(v: str | None) -> str | None:
    return None if v in (None, "") else normalize_code(v)


class Document(BaseModel):
    """One corpus row, before splitting."""

    model_config = ConfigDict(frozen=True)

    id: str
    text: str
    lang: str
    title: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)


class Passage(BaseModel):
    """A retrievable chunk of one document, in one language."""

    model_config = ConfigDict(frozen=True)

    id: str
    doc_id: str
    text: str
    lang: str
    position: int = 0
    title: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)


class QueryFields(BaseModel):
    """What a caller may say about a question beyond its text, declared once: the chain's
    input, the server's requests and the LangChain retriever take these fields, and the CLI's
    options take their help from them (``tests/test_vocabulary.py`` holds every door to it).
    As given, unchecked; :func:`make_query` validates them into a :class:`Query`."""

    lang: str | None = Field(None, description="the question's language as an ISO 639 code, e.g. 'es'; "
                                               "detected when omitted")
    relevant_langs: list[str] | None = Field(None, description="languages whose sources matter for this "
                                                               "question (mode rel_langs), e.g. es, ar")
    target_lang: str | None = Field(None, description="the language for modes swap_docs and oracle_lang")

    def query_fields(self) -> dict[str, Any]:
        """The fields given (not None), for :func:`make_query`."""
        return {name: v for name in QueryFields.model_fields if (v := getattr(self, name)) is not None}


class Query(QueryFields):
    """A question, with what the IR modes may need to know about it, validated.

    ``lang`` is detected when absent. ``relevant_langs`` feeds ``rel_langs``;
    ``target_lang`` feeds ``swap_docs`` and ``oracle_lang``.
    """

    id: str | None = None
    question: str
    # validated, never None: the policies iterate over it
    relevant_langs: list[str] = Field(default_factory=list,
                                      description=QueryFields.model_fields["relevant_langs"].description)
    unknown_lang: str | None = Field(None, description="a code given as the question's language that names no "
                                                       "language ('xx', 'und'): the language is detected instead, "
                                                       "and the retrieval's notes say so")

    @model_validator(mode="before")
    @classmethod
    def _unknown_lang(cls, data: Any) -> Any:
        # The question's language only decides what to detect, so a code that names no language
        # ("und" is BCP 47's "undetermined") is a request to detect it, with a note; a store's
        # language (target_lang, relevant_langs) names what to search, and stays an error.
        if isinstance(data, dict) and isinstance(lang := data.get("lang"), str) and lang.strip():
            try:
                normalize_code(lang)
            except UnknownLanguageError:
                data = {**data, "lang": None, "unknown_lang": lang[:40]}
        return data

    @field_validator("question")
    @classmethod
    def _non_empty(cls, v: str) -> str:
        if not v or not v.strip():
            raise EmptyQueryError()
        return v.strip()

    @field_validator("lang", "target_lang")
    @classmethod
    def _norm(cls, v: str | None) -> str | None:
        return _lang_or_none(v)

    @field_validator("relevant_langs")
    @classmethod
    def _norm_list(cls, v: list[str]) -> list[str]:
        out: list[str] = []
        for code in v:
            c = normalize_code(code)
            if c not in out:
                out.append(c)
        return out


def _dense_only() -> list[Channel]:
    return ["dense"]


class Hit(BaseModel):
    """One retrieved passage and where it came from."""

    passage: Passage
    score: float = Field(description="score used for the final order (after fusion or rerank)")
    raw_score: float = Field(description="the store's own score: the cosine similarity when the dense channel "
                                         "found the passage, else its BM25 score")
    rank: int = Field(description="1-based rank in the final list")
    store: str = Field(description="language store the passage came from")
    mode: str = Field(description="IR mode that produced the hit")
    query_text: str | None = Field(default=None, description="text searched (translated for 'translate')")
    channels: list[Channel] = Field(default_factory=lambda: _dense_only(),
                                    description="the retrieval channels that found this passage in its store")
    dense_score: float | None = Field(None, description="cosine similarity from the dense channel, if it found it")
    lexical_score: float | None = Field(None, description="BM25 score from the lexical channel, if it found it")
    fused_score: float | None = Field(None, description="score after fusing channels and stores")
    lexical_text: str | None = Field(None, description="text the lexical channel searched this store with "
                                                       "(the question's translation for another language's store)")
    rerank_score: float | None = Field(None, description="the reranker's score, when a reranker ordered the list")
    shown_text: str | None = Field(None, description="what the model reads of the passage, when context selection "
                                                     "cut it (context.select: segments); None: its whole text")

    @property
    def id(self) -> str:
        return self.passage.id

    @property
    def doc_id(self) -> str:
        return self.passage.doc_id

    @property
    def lang(self) -> str:
        return self.passage.lang

    def summary(self) -> dict[str, Any]:
        """The flat record written by batch retrieval."""
        return {
            "id": self.id,
            "doc_id": self.doc_id,
            "lang": self.lang,
            "score": round(self.score, 6),
            "rank": self.rank,
        }


class Retrieval(BaseModel):
    """What one retrieval returns: the hits, best first, and what a caller must know to trust
    them. ``complete`` is False while the index is half-built, or when a store's lexical index
    could not be used; ``notes`` say why (no store for the asked language, a store searched
    dense-only, a question with no lexical token), so a short or empty list is never silent.

    A model, not a list: the hits are ``.hits`` (iterating a Retrieval gives pydantic's (field, value) pairs)."""

    query: Query
    mode: str = Field(description="IR mode that planned the stores")
    hits: list[Hit] = Field(default_factory=list)
    stores: list[str] = Field(default_factory=list, description="the language stores searched")
    channels: list[Channel] = Field(default_factory=list, description="the channels asked for")
    lexical_texts: dict[str, str] = Field(
        default_factory=dict, description="per store, the text its lexical channel searched, where it was "
        "not the question as asked (a translation, or with lexical_translation names the places and numbers "
        "carried over; empty: none, so that store was searched by meaning alone)")
    notes: list[str] = Field(default_factory=list, description="why a wanted store, or channel, was not searched")
    complete: bool = Field(True, description="false while the index is half-built, or when a wanted store's "
                                             "lexical index could not be used (the notes say which)")
    seconds: dict[str, float] = Field(default_factory=dict,
                                      description="time per step: translate, search, rerank")


class Citation(BaseModel):
    """One ``<docN>`` citation, resolved to the passage it points at."""

    marker: int = Field(description="N of <docN>: position of the passage in the prompt")
    passage_id: str | None = Field(None, description="None when N points at no shown passage")
    doc_id: str | None = None
    lang: str | None = None
    valid: bool = Field(description="N exists among the passages shown to the model")
    source: CitationSource = Field(
        "model",
        description="model: written by the LLM; post_hoc: attributed afterwards by embedding "
        "similarity (never the model's own claim); vendor: the API's native citations (Cohere, Anthropic); "
        "attribution: put first by the attribution reranker's AIS check (never the model's own claim); "
        "quote: the answer line is this passage's sentence, quoted by the agent's quote repair",
    )
    text: str | None = Field(None, description="the answer sentence or span this citation supports")
    score: float | None = Field(None, description="similarity, for post-hoc citations")

    @property
    def post_hoc(self) -> bool:
        return self.source == "post_hoc"


class AnswerUsage(BaseModel):
    """What the answering LLM call cost, as far as its provider reports it (None: not reported)."""

    prompt_tokens: int | None = Field(None, description="tokens of the prompt the model was given")
    completion_tokens: int | None = Field(None, description="tokens the model wrote")
    prompt_tokens_evaluated: int | None = Field(
        None, description="local models: prompt tokens llama.cpp had to read; the rest were reused")
    prompt_tokens_cached: int | None = Field(
        None, description="prompt tokens reused: still in the local model's context or restored by its prefix "
                          "cache (llm.prefix_cache_mb), or read from a vendor's prompt cache")
    time_to_first_token: float | None = Field(
        None, description="local models: seconds from when the call had the model to its first generated token "
                          "(mostly reading the prompt); waiting for other calls is not counted")


class GroundedAnswer(BaseModel):
    """A parsed, validated answer with its citations and the passages it was shown."""

    question: str
    lang: str = Field(description="the user's language: the answer should be in it")
    format: AnswerFormat
    mode: str = Field(description="IR mode that chose the passages")
    model: str = Field(description="provider/model that answered")
    answer: str | None = None
    option_index: int | None = Field(None, description="chosen option (mc and citation-with-options)")
    chosen_option: str | None = None
    explanation: str | None = None
    citations: list[Citation] = Field(default_factory=list)
    passages: list[Hit] = Field(default_factory=list, description="the passages shown, <doc0> first")
    flags: list[str] = Field(
        default_factory=list,
        description="problems found: not_an_answer (empty, the question or the template repeated, or a refusal "
        "while the top passage holds the answer), unsupported (agent: no cited passage holds what it says), "
        "unparseable, ambiguous, truncated, no_citations, invalid_citation, post_hoc_citations, closed_book",
    )
    raw_output: str = ""
    complete: bool = Field(True, description="False when the index was half-built, or a store could not be "
                                             "searched by every channel: passages may be missing (the "
                                             "same as Retrieval.complete)")
    notes: list[str] = Field(default_factory=list, description="why a wanted store, or channel, was not searched")
    usage: AnswerUsage | None = Field(None, description="tokens and time of the answering LLM call, where reported")

    @property
    def answered(self) -> bool:
        """An answer is left once lines copied from the prompt are dropped.

        ``prompt_echo`` alone does not unmake an answer: a small model often copies the
        format example's citation line and then answers; the copied line is gone by now.
        """
        return bool(self.answer and self.answer.strip())

    @property
    def cited_passages(self) -> list[Hit]:
        shown = {h.id: h for h in self.passages}
        seen: dict[str, Hit] = {}
        for c in self.citations:
            if c.valid and c.passage_id in shown:
                seen.setdefault(c.passage_id, shown[c.passage_id])
        return list(seen.values())

    @property
    def model_citations(self) -> list[Citation]:
        return [c for c in self.citations if c.valid and c.source != "post_hoc"]

    @property
    def post_hoc_only(self) -> bool:
        """Its only valid citations are post hoc: xlrag's guess by similarity after the fact,
        not grounding the model gave. Such an answer is never shown as verified."""
        return not self.model_citations and any(c.valid and c.post_hoc for c in self.citations)


_EXPECTED = {
    "question": "the question as text",
    "lang": "a language code such as 'es'",
    "target_lang": "a language code such as 'es'",
    "relevant_langs": "a list of language codes, e.g. ['es', 'ar']",
    "id": "a string id",
}


def check_carried(question: str, query: Query | None, given: dict[str, Any]) -> None:
    """A ValueError when an input carrying ``query`` says otherwise beside it: another
    ``question``, or one of the ``given`` query fields (``lang``, ``relevant_langs``,
    ``target_lang``, ``id``) unlike the query's once written as :func:`make_query` writes them
    ("EN" is "en"). Such an input is one question with two answers to "which language?"."""
    if query is None:
        return
    if question.strip() != query.question:
        raise ValueError(f"question {question[:60]!r} is not the query's ({query.question[:60]!r})")
    made = make_query(query.question, **given) if given else query
    for name in given:
        if getattr(made, name) != getattr(query, name):
            raise ValueError(f"{name} {given[name]!r} is not the query's ({getattr(query, name)!r}); "
                             f"give one or the other")


def make_query(question: str, *, lang: str | None = None, relevant_langs: list[str] | None = None,
               target_lang: str | None = None, id: str | None = None) -> Query:
    """Build a :class:`Query`, raising xlrag's own one-line errors (never pydantic's dump)."""
    from pydantic import ValidationError

    values: dict[str, Any] = {"question": question, "lang": lang, "target_lang": target_lang, "id": id}
    if relevant_langs is not None:
        values["relevant_langs"] = relevant_langs
    if isinstance(question, str) and not question.strip():
        raise EmptyQueryError()
    for name in ("question", "lang", "target_lang", "id"):
        if values[name] is not None and not isinstance(values[name], str):
            raise InvalidArgumentError(name, _EXPECTED[name], values[name])
    if relevant_langs is not None and (not isinstance(relevant_langs, list | tuple)
                                       or not all(isinstance(x, str) for x in relevant_langs)):
        raise InvalidArgumentError("relevant_langs", _EXPECTED["relevant_langs"], relevant_langs)
    try:
        return Query(**{k: v for k, v in values.items() if v is not None})
    except ValidationError as e:
        for err in e.errors():
            inner = (err.get("ctx") or {}).get("error")
            if isinstance(inner, Exception):
                raise inner from None
        err = e.errors()[0]
        name = str(err["loc"][0]) if err["loc"] else "query"
        raise InvalidArgumentError(name, _EXPECTED.get(name, "valid"), err.get("input")) from None
