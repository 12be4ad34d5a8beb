"""The judge panel: strict parsing, the vote, the notes, and real constrained decoding."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from xlrag.config import LLMConfig
from xlrag.judges.panel import (
    VERDICTS,
    JudgePanel,
    JudgeVote,
    PanelConfig,
    PanelVerdict,
    default_panel,
    judge_reply_schema,
    majority,
    model_family,
    parse_judge_reply,
)


@pytest.mark.parametrize(
    ("raw", "verdict"),
    [
        ('{"justification": "Both say 308.", "verdict": "correct"}', "correct"),
        ('Sure.\n```json\n{"justification": "No.", "verdict": "incorrect"}\n```', "incorrect"),
        ('The reply names Paris. {"justification": "Paris", "verdict": "correct"} Done.', "correct"),
        ('{"justification": "a {brace} inside", "verdict": "correct"}', "correct"),
    ],
)
def test_parse_valid_replies(raw, verdict):
    reply, reason = parse_judge_reply(raw)
    assert reason is None and reply.verdict == verdict


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        ("", "empty"),
        ("The answer is correct.", "no JSON"),  # never guessed from keywords
        ('{"justification": "x", "verdict": "yes"}', "schema"),
        ('{"verdict": "correct"}', "schema"),
        ('{"justification": "a", "verdict": "correct"} {"justification": "b", "verdict": "incorrect"}', "conflicting"),
        ('{"justification": "cut off", "verdict": "corr', "no JSON"),
    ],
)
def test_parse_invalid_replies(raw, reason):
    reply, why = parse_judge_reply(raw)
    assert reply is None and reason in why


def _votes(*verdicts):
    return [JudgeVote(judge=f"j{i}", verdict=v) for i, v in enumerate(verdicts)]


def test_majority_and_ties():
    assert majority(_votes("correct", "correct", "incorrect"), "incorrect") == ("correct", False)
    assert majority(_votes("correct", "invalid", "incorrect"), "incorrect") == ("incorrect", True)
    assert majority(_votes("correct", "invalid", "incorrect"), "correct") == ("correct", True)
    assert majority(_votes("invalid", "correct", "incorrect"), "first") == ("correct", True)
    assert majority(_votes("invalid", "invalid"), "incorrect") == ("invalid", False)


def test_wrong_language_overrides_the_judges():
    v = PanelVerdict(verdict="correct", votes=_votes("correct"), counts={"correct": 1})
    assert v.final(False) == "incorrect"
    assert v.final(None) == "correct" and v.final(True) == "correct"


@pytest.mark.parametrize(
    ("cfg", "family"),
    [
        (LLMConfig(), "qwen"),  # the local default
        (LLMConfig(model="gemma-3-270m"), "google"),
        (LLMConfig(provider="openai", model="gpt-4o-mini"), "openai"),
        (LLMConfig(provider="openai", model="o3-mini"), "openai"),
        (LLMConfig(provider="anthropic"), "anthropic"),
        (LLMConfig(provider="cohere"), "cohere"),
        (LLMConfig(provider="openai", model="photon-1"), None),
    ],
)
def test_model_family(cfg, family):
    assert model_family(cfg) == family


def test_panel_notes_single_model_and_self_preference():
    cfg = PanelConfig(judges=[{"seed": s} for s in (0, 1, 2)])
    panel = JudgePanel(cfg, generator=LLMConfig())
    assert any("not independent" in n for n in panel.notes)
    assert any("self-preference" in n for n in panel.notes)
    other = JudgePanel(PanelConfig(judges=[{"provider": "openai", "model": "gpt-4o-mini"},
                                           {"model": "gemma-3-270m"}]), generator=LLMConfig())
    assert other.notes == []


def test_panel_config_rejects_duplicates_and_unknown_fields():
    with pytest.raises(ValidationError, match="configured twice"):
        PanelConfig(judges=[{}, {}])
    with pytest.raises(ValidationError, match="Extra inputs"):
        PanelConfig(judges=[{"modle": "x"}])
    with pytest.raises(ValidationError):
        PanelConfig(judges=[])


def test_localized_judge_prompt_carries_the_case():
    panel = JudgePanel(PanelConfig(judges=[{}]))
    (_, text), = panel.messages("Wer?", ["Rom", "Roma"], "Rom <doc0>", "de")
    assert "Referenzantwort: Rom | Roma" in text and "Frage: Wer?" in text
    assert '"verdict": "correct"' in text


def test_the_justification_is_held_to_one_clause():
    import re

    pattern = judge_reply_schema()["properties"]["justification"]["pattern"]
    assert re.match(pattern, "Both say 308.") and re.match(pattern, "الرد يذكر 308؟") and re.match(pattern, "")
    for run_on in ("It says 308. It also says", "وهي معلومات الإجابة، وهي", "厘米/秒²，SI", "a; b", 'a "quote"',
                   "a\nb"):
        assert not re.match(pattern, run_on), run_on
    assert judge_reply_schema()["required"] == ["justification", "verdict"]


def test_a_lexical_judge_votes_without_a_model():
    panel = JudgePanel(PanelConfig(judges=[{"kind": "lexical"}]), llms=[])
    assert panel.models() == [] and panel.labels == ["lexical"]
    v = panel.judge("How many points?", ["308"], "They gave up 308 points <doc0>.", "en")
    assert v.verdict == "correct" and v.votes[0].judge == "lexical" and "308" in v.votes[0].justification
    v = panel.judge("How many points?", "308", "<doc0>", "en")
    assert v.verdict == "incorrect" and "empty" in v.votes[0].justification
    with pytest.raises(ValueError, match="1 models for 0 LLM judges"):
        JudgePanel(PanelConfig(judges=[{"kind": "lexical"}]), llms=[object()])


async def test_a_mixed_panel_keeps_its_order():
    # a real OpenAI-compatible client against a port nothing listens on: its vote is invalid
    # with the reason, the lexical judge still votes, and the majority of valid votes decides
    dead = {"provider": "openai", "model": "judge", "base_url": "http://127.0.0.1:9/v1", "max_retries": 0, "timeout": 5}
    v = await JudgePanel(PanelConfig(judges=[dead, {"kind": "lexical"}])).ajudge("How many?", ["308"], "308", "en")
    assert [x.judge for x in v.votes] == ["openai:judge:seed0", "lexical"]
    assert v.votes[0].verdict == "invalid" and "Connection" in v.votes[0].reason
    assert v.verdict == "correct"


def test_default_panel_is_valid():
    panel = default_panel()
    assert len(set(panel.labels)) == len(panel.judges) >= 1
    assert default_panel() == panel  # a fresh copy each time


@pytest.mark.slow
def test_real_local_judges_are_held_to_the_schema():
    # gemma-3-270m is a base model: without the grammar it does not write this JSON at all
    panel = JudgePanel(PanelConfig(judges=[{"model": "gemma-3-270m", "seed": s, "max_tokens": 96}
                                           for s in (0, 1)]))
    verdict = panel.judge("How many points did the Panthers give up?", "308",
                          "The Panthers gave up 308 points <doc0>.", "en")
    assert [v.verdict for v in verdict.votes] != ["invalid", "invalid"]
    for v in verdict.votes:
        assert v.verdict in VERDICTS, v
        assert v.raw.lstrip().startswith("{")
    assert verdict.verdict in VERDICTS


@pytest.mark.slow
async def test_real_chat_judge_async():
    panel = JudgePanel(PanelConfig(judges=[{"model": "qwen2.5-coder-0.5b-instruct", "max_tokens": 128}]))
    verdict = await panel.ajudge("¿Cuántos puntos cedió la defensa?", "308", "Cedió 308 puntos.", "es")
    assert verdict.votes[0].verdict in VERDICTS, verdict.votes[0]
