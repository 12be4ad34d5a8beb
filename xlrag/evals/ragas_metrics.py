"""Ragas 0.4 metrics in the question's language, scored through a bounded, timed loop.

* :class:`RagasMetrics` holds faithfulness, answer relevancy, context precision (against the
  reference) and context recall on one LLM (:func:`~xlrag.evals.ragas_adapter.ragas_llm`),
  with every prompt adapted to the question's language (:mod:`xlrag.evals.ragas_prompts`).
  Ragas's Levenshtein "NonLLM" context metrics are not offered: across languages they
  measure spelling, not meaning.
* :func:`score_rows` replaces Ragas's ``abatch_score`` (an unbounded ``gather`` with no
  timeout, where one failure loses the batch): at most ``concurrency`` scores in flight,
  each timed and retried; a failed score is NaN with its reason, never a dropped row.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from xlrag.detect import LinguaDetector
from xlrag.errors import InvalidArgumentError
from xlrag.evals.ragas_adapter import (
    PromptAdaptationError,
    StructuredReplyError,
    import_ragas,
    ragas_embeddings,
    ragas_llm,
)
from xlrag.evals.ragas_prompts import (
    Translation,
    TranslationMemory,
    adapt_prompt,
    prompt_strings,
    translation_request,
)
from xlrag.languages import normalize_code
from xlrag.prompts import PromptLibrary

__all__ = ["METRICS", "MetricScore", "RagasMetrics", "RagasRow", "RowScores", "score_rows"]

MetricName = Literal["faithfulness", "answer_relevancy", "context_precision", "context_recall"]
METRICS: tuple[str, ...] = get_args(MetricName)
# the row fields each metric reads besides the question
_NEEDS: dict[str, tuple[str, ...]] = {
    "faithfulness": ("response", "contexts"),
    "answer_relevancy": ("response",),
    "context_precision": ("reference", "contexts"),
    "context_recall": ("reference", "contexts"),
}


class RagasRow(BaseModel):
    """One RAG exchange to score. A metric that needs a field the row lacks scores NaN."""

    model_config = ConfigDict(extra="forbid")

    question: str = Field(min_length=1)
    response: str | None = None
    contexts: list[str] = Field(default_factory=list, description="retrieved passages, in rank order")
    reference: str | None = Field(None, description="the gold answer")
    lang: str | None = Field(None, description="the question's language; None: detected from it")
    id: str | None = None


class MetricScore(BaseModel):
    value: float = Field(description="in [0, 1]; NaN when the metric failed or found nothing to score")
    reason: str | None = Field(None, description="why the value is NaN")
    note: str | None = Field(None, description="what to know about a value, e.g. prompts left partly in English")
    attempts: int = 0
    seconds: float = Field(0.0, description="time in attempts, waiting for a free slot excluded")

    @model_validator(mode="after")
    def _nan_has_reason(self) -> MetricScore:
        if math.isnan(self.value) and not self.reason:
            raise ValueError("a NaN score needs its reason")
        return self


class RowScores(BaseModel):
    index: int = Field(description="the row's position in the input")
    id: str | None = None
    lang: str | None = None
    scores: dict[str, MetricScore]


class RagasMetrics:
    """The Ragas metrics, on one LLM, with prompts adapted per language (and cached on disk).

    ``llm``: a LangChain chat model, an :class:`~xlrag.config.LLMConfig`, or None for the
    default local model. ``strictness``: questions answer relevancy generates per answer
    (Ragas's default 3; at temperature 0 they repeat, and 1 costs a third).
    ``untranslated``: when the LLM cannot translate a prompt string into a row's language,
    ``fail`` scores that language NaN with the reason; ``english`` keeps the string in
    English and says so in each score's ``note`` (small local models cannot translate
    Ragas's longer instructions into every language).
    """

    def __init__(self, llm: Any = None, *, metrics: Sequence[str] = METRICS, embedder: Any = None,
                 strictness: int = 3, cache_dir: str | Path | None = None,
                 prompts: PromptLibrary | None = None, untranslated: Literal["fail", "english"] = "fail"):
        unknown = [m for m in metrics if m not in METRICS]
        if unknown or not metrics:
            raise InvalidArgumentError("metrics", f"a non-empty subset of {list(METRICS)} (the Levenshtein "
                                       f"NonLLM context metrics compare spelling, not meaning, across languages)",
                                       unknown or list(metrics))
        if strictness < 1:
            raise InvalidArgumentError("strictness", "at least 1", strictness)
        self.ragas = import_ragas()
        self.names: tuple[str, ...] = tuple(dict.fromkeys(metrics))
        self.llm = ragas_llm(llm)
        self.embeddings = ragas_embeddings(embedder) if "answer_relevancy" in self.names else None
        self.strictness = strictness
        self.cache_dir = Path(cache_dir) if cache_dir is not None else None
        self.prompts = prompts or PromptLibrary()
        self.untranslated = untranslated
        self.notes: dict[str, str] = {}
        self._failed: dict[str, PromptAdaptationError] = {}
        self._by_lang: dict[str, dict[str, Any]] = {}
        self._locks: dict[tuple[int, str], asyncio.Lock] = {}

    def _build(self) -> dict[str, Any]:
        from ragas.metrics.collections.answer_relevancy import AnswerRelevancy
        from ragas.metrics.collections.context_precision import ContextPrecision
        from ragas.metrics.collections.context_recall import ContextRecall
        from ragas.metrics.collections.faithfulness import Faithfulness

        def relevancy() -> AnswerRelevancy:
            if self.embeddings is None:  # made in __init__ whenever answer_relevancy is asked for
                raise InvalidArgumentError("metrics", "answer_relevancy asked for when the scorer was made",
                                           list(self.names))
            return AnswerRelevancy(llm=self.llm, embeddings=self.embeddings, strictness=self.strictness)

        make = {
            "faithfulness": lambda: Faithfulness(llm=self.llm),
            "answer_relevancy": relevancy,
            "context_precision": lambda: ContextPrecision(llm=self.llm),
            "context_recall": lambda: ContextRecall(llm=self.llm),
        }
        return {name: make[name]() for name in self.names}

    def memory(self, lang: str) -> TranslationMemory:
        return TranslationMemory(lang, self.ragas.__version__, self.llm.label, self.llm.key, self.cache_dir)

    async def prepare(self, lang: str, *, timeout: float = 180.0, retries: int = 2,
                      semaphore: asyncio.Semaphore | None = None) -> None:
        """Adapt every prompt of the metrics to ``lang`` (no LLM call when the disk cache has
        them). Each translation call is timed and retried like a score; raises
        :class:`PromptAdaptationError` when one still fails."""
        from ragas.prompt.metrics.base_prompt import BasePrompt

        lang = normalize_code(lang)
        # one lock per event loop and language: a lock must not outlive the loop it waits on
        async with self._locks.setdefault((id(asyncio.get_running_loop()), lang), asyncio.Lock()):
            if lang in self._by_lang:
                return
            if lang in self._failed:  # a failed adaptation is not paid for again on every row
                raise self._failed[lang]
            metrics = self._build()
            if lang != "en":  # Ragas's prompts are English
                memory = self.memory(lang)
                sem = semaphore or asyncio.Semaphore(1)

                async def translate(text: str) -> str | None:
                    reply, reason, attempts, _ = await _attempt(
                        lambda: self.llm.agenerate(translation_request(text, lang, self.prompts,
                                                                       self.llm.mode == "prompt"), Translation),
                        sem=sem, timeout=timeout, retries=retries, retry_invalid=self.llm.samples)
                    if reply is None:
                        if self.untranslated == "english":
                            return None
                        error = PromptAdaptationError(f"the Ragas prompts could not be translated into {lang} "
                                                      f"with {self.llm.label}: {reason} (after {attempts} "
                                                      f"attempts, at {text[:60]!r})")
                        self._failed[lang] = error
                        raise error
                    return reply.translation

                left: list[str] = []
                total = 0
                for metric in metrics.values():
                    for attr, value in list(vars(metric).items()):
                        if isinstance(value, BasePrompt):
                            total += len(prompt_strings(value))
                            setattr(metric, attr, await adapt_prompt(value, lang, memory, translate, left))
                if left:
                    self.notes[lang] = (f"{len(left)} of {total} Ragas prompt strings stay in English: "
                                        f"{self.llm.label} could not translate them into {lang} "
                                        f"(first: {left[0][:60]!r})")
            self._by_lang[lang] = metrics

    def metric(self, name: str, lang: str) -> Any:
        """The Ragas metric ``name`` with its prompts in ``lang`` (after :meth:`prepare`)."""
        return self._by_lang[normalize_code(lang)][name]


def _inputs(name: str, row: RagasRow) -> dict[str, Any]:
    base = {"user_input": row.question}
    if name == "answer_relevancy":
        return {**base, "response": row.response}
    if name == "faithfulness":
        return {**base, "response": row.response, "retrieved_contexts": row.contexts}
    return {**base, "reference": row.reference, "retrieved_contexts": row.contexts}


async def _attempt(make: Any, *, sem: asyncio.Semaphore, timeout: float, retries: int,
                   retry_invalid: bool, backoff: float = 1.0) -> tuple[Any, str | None, int, float]:
    """``(result, None, attempts, seconds)`` or ``(None, reason, attempts, seconds)``; never
    raises but on cancellation. ``seconds`` is the time spent in attempts (not queued).

    Each attempt holds a slot of ``sem`` and has ``timeout`` seconds. Not retried: bad input
    (ValueError, as Ragas raises for an empty field) and, from a model that does not sample,
    an invalid reply (it would come back the same).
    """
    reason, spent = "not attempted", 0.0
    for attempt in range(1, retries + 2):
        async with sem:
            start = time.perf_counter()
            try:
                result = await asyncio.wait_for(make(), timeout)
                return result, None, attempt, spent + time.perf_counter() - start
            except TimeoutError:
                reason = f"no result within {timeout:g} s"
            except StructuredReplyError as e:
                reason = str(e)
                if not retry_invalid:
                    return None, reason, attempt, spent + time.perf_counter() - start
            except (ValueError, ValidationError) as e:
                return None, f"{type(e).__name__}: {e}", attempt, spent + time.perf_counter() - start
            except Exception as e:  # any provider failure is this score's, not the batch's
                reason = f"{type(e).__name__}: {e}"
            spent += time.perf_counter() - start
        if attempt <= retries:
            await asyncio.sleep(backoff * 2 ** (attempt - 1))
    return None, reason, retries + 1, spent


def _value(v: float) -> float:
    # cosine similarity of unit vectors can stray a rounding error outside [0, 1]
    return min(max(v, 0.0), 1.0) if -1e-6 < v < 1 + 1e-6 else v


async def score_rows(rows: Iterable[RagasRow | dict[str, Any]], metrics: RagasMetrics, *,
                     concurrency: int | None = None, timeout: float = 180.0, retries: int = 2,
                     backoff: float = 1.0) -> list[RowScores]:
    """One :class:`RowScores` per row, in order, with a :class:`MetricScore` per metric.

    At most ``concurrency`` scores (and prompt translations) are in flight; None means 1
    for a model that runs in this process (its calls queue on one lock anyway, and queued
    time would count against the timeout) and 4 otherwise. Each score has ``timeout``
    seconds per attempt and up to ``retries`` retries, ``backoff`` seconds doubling between.
    Rows are validated first (a malformed row raises before any model call).
    """
    from xlrag.chains.local.runtime import LocalLlamaChat

    checked = []
    for i, row in enumerate(rows):
        try:
            checked.append(row if isinstance(row, RagasRow) else RagasRow.model_validate(row))
        except ValidationError as e:
            raise InvalidArgumentError(f"rows[{i}]", "a RagasRow (question, response, contexts, "
                                       "reference, lang, id)", e.errors()[0]["msg"]) from None
    if concurrency is None:
        concurrency = 1 if isinstance(metrics.llm.llm, LocalLlamaChat) else 4
    if concurrency < 1 or timeout <= 0 or retries < 0:
        raise InvalidArgumentError("concurrency/timeout/retries", "concurrency >= 1, timeout > 0, retries >= 0",
                                   (concurrency, timeout, retries))
    sem = asyncio.Semaphore(concurrency)

    langs: list[str | None] = []
    detector = None
    for row in checked:
        if row.lang:
            langs.append(normalize_code(row.lang))
            continue
        if detector is None:
            detector = LinguaDetector()
        langs.append(detector.detect(row.question))

    failed: dict[str, str] = {}
    for lang in dict.fromkeys(x for x in langs if x):
        try:
            await metrics.prepare(lang, timeout=timeout, retries=retries, semaphore=sem)
        except PromptAdaptationError as e:
            failed[lang] = str(e)
        except OSError as e:  # the prompt cache could not be written
            failed[lang] = f"the Ragas prompts for {lang} could not be cached: {type(e).__name__}: {e}"

    async def one(row: RagasRow, lang: str | None, name: str) -> MetricScore:
        if lang is None:
            return MetricScore(value=math.nan, reason="the question's language could not be detected; give lang")
        if lang in failed:
            return MetricScore(value=math.nan, reason=failed[lang])
        missing = [f for f in _NEEDS[name] if not getattr(row, f)]
        if missing:
            return MetricScore(value=math.nan, reason=f"{name} needs {' and '.join(missing)}; the row has none")
        metric = metrics.metric(name, lang)
        result, reason, attempts, spent = await _attempt(
            lambda: metric.ascore(**_inputs(name, row)), sem=sem, timeout=timeout, retries=retries,
            retry_invalid=metrics.llm.samples, backoff=backoff)
        seconds = round(spent, 3)
        if result is None:
            if attempts > 1:
                reason = f"{reason} (after {attempts} attempts)"
            return MetricScore(value=math.nan, reason=reason, attempts=attempts, seconds=seconds)
        value = float(result.value) if result.value is not None else math.nan
        if math.isnan(value):
            return MetricScore(value=value, attempts=attempts, seconds=seconds,
                               reason=f"{name} found nothing to score (Ragas returns NaN when no statements "
                                      f"or classifications come out of the reply)")
        return MetricScore(value=_value(value), attempts=attempts, seconds=seconds, note=metrics.notes.get(lang))

    jobs = [[one(row, lang, name) for name in metrics.names] for row, lang in zip(checked, langs, strict=True)]
    flat = await asyncio.gather(*(job for row_jobs in jobs for job in row_jobs))
    n = len(metrics.names)
    return [RowScores(index=i, id=row.id, lang=lang,
                      scores=dict(zip(metrics.names, flat[i * n:(i + 1) * n], strict=True)))
            for i, (row, lang) in enumerate(zip(checked, langs, strict=True))]
