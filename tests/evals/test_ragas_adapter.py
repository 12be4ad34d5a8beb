"""Ragas 0.4 on xlrag LLMs: strict replies, prompts in the question's language cached on
disk, the bounded scoring loop that never drops a row, and telemetry off by default."""

from __future__ import annotations

import asyncio
import json
import math
import os
import subprocess
import sys

import pytest
from langchain_core.messages import AIMessage

from xlrag.config import LLMConfig
from xlrag.errors import InvalidArgumentError
from xlrag.evals.ragas_adapter import (
    PromptAdaptationError,
    StructuredReplyError,
    import_ragas,
    llm_identity,
    ragas_llm,
)
from xlrag.evals.ragas_metrics import MetricScore, RagasMetrics, score_rows
from xlrag.evals.ragas_prompts import (
    FRAMING,
    NOW_LINE,
    SCHEMA_LINE,
    Translation,
    TranslationMemory,
    adapt_prompt,
    implausible_translation,
    prompt_strings,
)

from ..conftest import DATA, read_jsonl

import_ragas()  # the eval extra is part of dev; the tests below import Ragas's own prompt classes

FAST = LLMConfig(model="qwen2.5-coder-0.5b-instruct", max_tokens=768)


# -- telemetry and lazy import ------------------------------------------------------------------

def _run(code: str, **env: str) -> str:
    clean = {k: v for k, v in os.environ.items() if k != "RAGAS_DO_NOT_TRACK"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**clean, **env})
    return out.stdout.strip().splitlines()[-1]


def test_telemetry_is_off_unless_the_user_turns_it_on():
    code = ("from xlrag.evals.ragas_adapter import import_ragas; import_ragas(); "
            "from ragas._analytics import do_not_track; import os; "
            "print(do_not_track(), os.environ['RAGAS_DO_NOT_TRACK'])")
    assert _run(code) == "True true"
    assert _run(code, RAGAS_DO_NOT_TRACK="false") == "False false"  # the user's choice stands


def test_importing_the_adapter_does_not_import_ragas():
    code = ("import sys, xlrag.evals.ragas_adapter, xlrag.evals.ragas_metrics, xlrag.evals.ragas_prompts; "
            "print('ragas' in sys.modules)")
    assert _run(code) == "False"


# -- the LLM adapter: strict replies, modes, identity -------------------------------------------

def _adapter():
    return ragas_llm(FAST)  # builds the chat model; nothing loads until the first call


def test_adapter_parses_strictly():
    from ragas.metrics.collections.context_precision.util import ContextPrecisionOutput as Out

    llm = _adapter()
    assert llm.mode == "schema" and not llm.samples and llm.calls == 0
    ok = llm.parse(AIMessage(content='{"reason": "it names 308", "verdict": 1}'), Out)
    assert (ok.reason, ok.verdict) == ("it names 308", 1)
    fenced = llm.parse(AIMessage(content='Sure:\n```json\n{"reason": "r", "verdict": 0}\n```'), Out)
    assert fenced.verdict == 0
    cases = [
        (AIMessage(content=""), "empty reply"),
        (AIMessage(content="The verdict is 1."), "no JSON object"),  # never guessed from words
        (AIMessage(content='{"reason": "r"}'), "does not match the ContextPrecisionOutput schema"),
        (AIMessage(content='{"reason": "a", "verdict": 1} {"reason": "b", "verdict": 0}'), "several different"),
        (AIMessage(content='{"reason": "cut', response_metadata={"finish_reason": "length"}), "max_tokens"),
    ]
    for message, reason in cases:
        with pytest.raises(StructuredReplyError, match=reason):
            llm.parse(message, Out)


def test_modes_and_identity(monkeypatch):
    from xlrag.chains.llms import build_llm

    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test-not-sent")
    openai = ragas_llm(LLMConfig(provider="openai", model="gpt-4o-mini", base_url="http://127.0.0.1:9/v1"))
    anthropic = ragas_llm(LLMConfig(provider="anthropic"))
    assert (openai.mode, anthropic.mode) == ("schema", "tools")  # response_format; tool calling
    bound = openai.runnable(Translation).kwargs["response_format"]
    assert bound["json_schema"]["name"] == "Translation"
    assert bound["json_schema"]["schema"]["required"] == ["translation"]
    assert anthropic.runnable(Translation) is anthropic.runnable(Translation)  # built once per schema
    assert "stream" in ragas_llm(FAST).runnable(Translation).kwargs  # local: cancellable by a timeout
    label, key = llm_identity(build_llm(FAST))
    assert label == "local:qwen2.5-coder-0.5b-instruct" and len(key) == 16
    assert llm_identity(build_llm(FAST))[1] == key  # stable across builds
    assert llm_identity(build_llm(FAST.model_copy(update={"temperature": 0.7})))[1] != key
    assert llm_identity(build_llm(LLMConfig(model="gemma-3-270m")))[1] != key
    assert "sk-test" not in anthropic.label + anthropic.key


# -- prompt adaptation and its disk cache, no model needed --------------------------------------

GERMAN = {
    SCHEMA_LINE: "Gib die Ausgabe als JSON zurück, das folgendem JSON-Schema entspricht:",
    FRAMING[1]: "Verwende keine einfachen, sondern doppelte Anführungszeichen, mit Backslash maskiert.",
    NOW_LINE: "Mache jetzt dasselbe mit der folgenden Eingabe",
    "EXAMPLES": "BEISPIELE", "Example": "Beispiel", "Input": "Eingabe", "Output": "Ausgabe",
}


async def _refuse(text: str) -> str:
    raise PromptAdaptationError(f"no translation call expected, asked for {text!r}")


async def test_adapted_prompt_renders_everything_in_the_language(tmp_path):
    from ragas.metrics.collections.answer_relevancy.util import (
        AnswerRelevanceInput,
        AnswerRelevancePrompt,
    )

    prompt = AnswerRelevancePrompt()
    memory = TranslationMemory("de", "0.4.3", "local:x", "k" * 16, tmp_path)
    for s in prompt_strings(prompt):  # hand-written "translations": the source marked [de]
        memory.put(s, GERMAN.get(s, f"[de] {s}"))
    adapted = await adapt_prompt(prompt, "de", memory, _refuse)
    text = adapted.to_string(AnswerRelevanceInput(response="Albert Einstein wurde in Ulm geboren."))
    assert text.startswith(f"[de] {prompt.instruction}")
    for english in (SCHEMA_LINE, NOW_LINE, "EXAMPLES", "Example 1", "Input:", "input:", "Output:"):
        assert english not in text
    assert "--------BEISPIELE-----------" in text and "\nBeispiel 1\nEingabe: {" in text
    assert text.rstrip().endswith("Ausgabe:") and "Eingabe: {\n" in text
    assert '"question": "[de] Where was Albert Einstein born?"' in text  # examples translated
    assert '"noncommittal": 0' in text  # JSON keys and numbers are the format, kept
    assert adapted.language == "de" and prompt.instruction.startswith("Generate")  # original untouched

    # the memory is on disk, keyed by language, Ragas version and LLM
    path = tmp_path / "0.4.3" / "de" / f"{'k' * 16}.json"
    data = json.loads(path.read_text(encoding="utf-8"))
    assert (data["language"], data["ragas_version"], data["llm"]) == ("de", "0.4.3", "local:x")
    again = TranslationMemory("de", "0.4.3", "local:x", "k" * 16, tmp_path)
    assert again.translations == memory.translations
    assert TranslationMemory("de", "0.4.4", "local:x", "k" * 16, tmp_path).translations == {}
    assert TranslationMemory("fr", "0.4.3", "local:x", "k" * 16, tmp_path).translations == {}


async def test_a_string_the_model_cannot_translate_stays_english_and_is_listed(tmp_path):
    from ragas.metrics.collections.answer_relevancy.util import AnswerRelevancePrompt

    prompt = AnswerRelevancePrompt()
    memory = TranslationMemory("de", "0.4.3", "local:x", "k" * 16, tmp_path)

    async def all_but_the_instruction(text: str) -> str | None:
        return None if text == prompt.instruction else GERMAN.get(text, f"[de] {text}")

    left: list[str] = []
    adapted = await adapt_prompt(prompt, "de", memory, all_but_the_instruction, left)
    assert left == [prompt.instruction] and adapted.instruction == prompt.instruction  # kept, and listed
    assert memory.get(prompt.instruction) is None  # asked for again next time, never cached as English
    assert adapted.framing[NOW_LINE] == GERMAN[NOW_LINE]  # the rest is translated


# What Qwen2.5-Coder-1.5B made of Ragas's framing in Arabic (benchmarks/ragas_validation.py)
SEEN_ARABIC = {
    "Input": "Please provide the text to be translated.",  # a reply to the request
    "Output": "Translation",  # English
    "EXAMPLES": "مثال",
    "Now perform the same with the following input": "نعم، استخدم نفس النص مع هذا الإدخال",
}


def test_implausible_translations_are_named():
    assert implausible_translation("Input", SEEN_ARABIC["Input"], "ar") == "41 characters for 5"
    assert implausible_translation("Output", "Translation", "ar") == "not written in the Arabic script"
    assert implausible_translation("EXAMPLES", "مثال", "ar") is None
    assert implausible_translation("Output", "Ausgabe", "de") is None  # Latin: the script says nothing
    assert implausible_translation("Input", "输入", "zh") is None
    assert implausible_translation("Input", "Вход", "zh") == "not written in the Cjk script"
    # a good translation may keep Latin names: one letter of the script is enough
    assert implausible_translation("Please return the output in JSON Schema", "请以 JSON Schema 返回", "zh") is None


async def test_an_implausible_translation_stays_english_even_from_the_cache(tmp_path):
    from ragas.metrics.collections.answer_relevancy.util import AnswerRelevancePrompt

    prompt = AnswerRelevancePrompt()
    memory = TranslationMemory("ar", "0.4.3", "local:x", "k" * 16, tmp_path)
    for s in prompt_strings(prompt):  # an earlier run stored what the model said
        memory.put(s, SEEN_ARABIC.get(s, "ترجمة النص"))
    left: list[str] = []
    adapted = await adapt_prompt(prompt, "ar", memory, _refuse, left)
    assert adapted.framing["Input"] == "Input" and adapted.framing["Output"] == "Output"
    assert adapted.framing["EXAMPLES"] == "مثال" and sorted(left) == ["Input", "Output"]

    fresh = TranslationMemory("ar", "0.4.3", "local:x", "j" * 16, tmp_path)

    async def as_seen(text: str) -> str:
        return SEEN_ARABIC.get(text, "ترجمة النص")

    left = []
    adapted = await adapt_prompt(prompt, "ar", fresh, as_seen, left)
    # stored as said (the same model would say it again), never used
    assert adapted.framing["Input"] == "Input" and fresh.get("Input") == SEEN_ARABIC["Input"]
    assert sorted(left) == ["Input", "Output"]


def test_a_damaged_or_foreign_cache_is_ignored(tmp_path):
    memory = TranslationMemory("de", "0.4.3", "local:x", "k" * 16, tmp_path)
    memory.put("Input", "Eingabe")
    memory.path.write_text("{not json", encoding="utf-8")
    assert TranslationMemory("de", "0.4.3", "local:x", "k" * 16, tmp_path).translations == {}
    memory.path.write_text(json.dumps({"format": "other", "translations": {"Input": "x"}}), encoding="utf-8")
    fresh = TranslationMemory("de", "0.4.3", "local:x", "k" * 16, tmp_path)
    assert fresh.translations == {}
    fresh.put("Output", "Ausgabe")  # rewritten in the current format
    assert json.loads(fresh.path.read_text(encoding="utf-8"))["translations"] == {"Output": "Ausgabe"}


# -- the scoring loop's contract, no model call --------------------------------------------------

def test_metric_choice_and_row_validation():
    with pytest.raises(InvalidArgumentError, match="spelling, not meaning"):
        RagasMetrics(FAST, metrics=["non_llm_context_precision_with_reference"])
    with pytest.raises(ValueError, match="needs its reason"):
        MetricScore(value=math.nan)
    metrics = RagasMetrics(FAST, metrics=["context_recall"])
    with pytest.raises(InvalidArgumentError, match=r"rows\[1\]"):
        asyncio.run(score_rows([{"question": "Q?", "lang": "en"}, {"question": ""}], metrics))


async def test_rows_missing_a_field_score_nan_with_the_reason():
    metrics = RagasMetrics(FAST, metrics=["context_recall", "context_precision"])
    rows = [{"question": "Who?", "contexts": ["Rome is in Italy."], "lang": "en", "id": "a"},
            {"question": "Where?", "reference": "Rome", "lang": "en", "id": "b"}]
    out = await score_rows(rows, metrics)
    assert [r.id for r in out] == ["a", "b"] and [r.index for r in out] == [0, 1]
    for row in out:
        for name in ("context_recall", "context_precision"):
            assert math.isnan(row.scores[name].value)
    assert out[0].scores["context_recall"].reason == "context_recall needs reference; the row has none"
    assert out[1].scores["context_precision"].reason == "context_precision needs contexts; the row has none"
    assert metrics.llm.calls == 0


# -- end to end with a real local model ---------------------------------------------------------

def _xquad_rows():
    queries = {q["id"]: q for q in read_jsonl(DATA / "xquad" / "queries.jsonl")}
    docs = {d["id"]: d for d in read_jsonl(DATA / "xquad" / "corpus.jsonl")}
    zh, en = queries["56e16182e3433e1400422e28-zh"], queries["56e7586d37bdd419002c3eb3-en"]
    return [
        {"id": zh["id"], "lang": "zh", "question": zh["question"], "reference": zh["answers"][0],
         "contexts": [docs[zh["gold_doc_id"]]["text"]],
         "response": "计算复杂性理论是按计算问题的固有难度对其进行分类的分支。"},
        # no lang: detected from the question
        {"id": en["id"], "question": en["question"], "reference": en["answers"][0],
         "contexts": [docs[en["gold_doc_id"]]["text"]],
         "response": "In the past, corporal punishment was one of the most common forms of school discipline."},
    ]


@pytest.fixture(scope="module")
def adapted(tmp_path_factory):
    """The metrics on the 0.5B model with their prompts in Chinese, cached in a fresh dir."""
    cache = tmp_path_factory.mktemp("ragas-prompts")
    metrics = RagasMetrics(FAST, metrics=["faithfulness", "answer_relevancy"], strictness=1, cache_dir=cache)
    asyncio.run(metrics.prepare("zh", timeout=300, retries=1))
    return metrics, cache


def _has_cjk(text: str) -> bool:
    return any("\u4e00" <= ch <= "\u9fff" for ch in text)


@pytest.mark.slow
async def test_real_scores_in_two_languages(adapted):
    from ragas.metrics.collections.faithfulness.util import StatementGeneratorInput

    metrics, _ = adapted
    prompt = metrics.metric("faithfulness", "zh").statement_generator_prompt
    text = prompt.to_string(StatementGeneratorInput(question="问题?", answer="回答。"))
    assert _has_cjk(prompt.instruction) and SCHEMA_LINE not in text and NOW_LINE not in text

    out = await score_rows(_xquad_rows(), metrics, timeout=600, retries=0)
    assert [r.lang for r in out] == ["zh", "en"]
    numbers = 0
    for row in out:
        assert set(row.scores) == {"faithfulness", "answer_relevancy"}
        for name, score in row.scores.items():
            assert isinstance(score.value, float), (row.id, name)
            if math.isnan(score.value):
                assert score.reason, (row.id, name)
            else:
                assert 0.0 <= score.value <= 1.0 and score.reason is None, (row.id, name, score)
                numbers += 1
    assert numbers >= 2, out  # the model does score; NaN everywhere would prove nothing
    # answer relevancy embeds with xlrag's multilingual embedder: a question regenerated from
    # a relevant answer is close to the real one
    relevancy = [r.scores["answer_relevancy"].value for r in out]
    assert any(v > 0.7 for v in relevancy if not math.isnan(v)), out


@pytest.mark.slow
async def test_a_timed_out_score_is_nan_with_its_reason_not_a_dropped_row(adapted):
    metrics, _ = adapted
    out = await score_rows(_xquad_rows(), metrics, timeout=0.001, retries=1, backoff=0.01)
    assert len(out) == 2 and [r.id for r in out] == [row["id"] for row in _xquad_rows()]
    for row in out:
        for score in row.scores.values():
            assert math.isnan(score.value)
            assert "no result within 0.001 s" in score.reason and "after 2 attempts" in score.reason
            assert score.attempts == 2


@pytest.mark.slow
async def test_adapted_prompts_come_from_the_disk_cache_the_second_time(adapted):
    from ragas.metrics.collections.faithfulness.util import NLIStatementInput

    first, cache = adapted
    second = RagasMetrics(FAST, metrics=["faithfulness", "answer_relevancy"], strictness=1, cache_dir=cache)
    assert (second.llm.label, second.llm.key) == (first.llm.label, first.llm.key)
    await second.prepare("zh", timeout=0.001, retries=0)  # a model call could not finish in time
    assert second.llm.calls == 0
    data = NLIStatementInput(context="上下文。", statements=["陈述一。"])
    assert second.metric("faithfulness", "zh").nli_statement_prompt.to_string(data) == \
        first.metric("faithfulness", "zh").nli_statement_prompt.to_string(data)
    files = list(cache.rglob("*.json"))
    assert [f.relative_to(cache).parts[1:] for f in files] == [("zh", f"{first.llm.key}.json")]


def test_public_names_are_exported_by_the_package():
    import xlrag.evals
    import xlrag.evals.ragas_adapter as adapter
    import xlrag.evals.ragas_metrics as metrics

    for module, names in ((adapter, ("ragas_embeddings", "ragas_llm")),
                          (metrics, ("MetricScore", "RagasMetrics", "RagasRow", "RowScores", "score_rows"))):
        for name in names:
            assert name in module.__all__ and getattr(xlrag.evals, name) is getattr(module, name), name
