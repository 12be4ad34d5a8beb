"""The judge panel: strict parsing, the vote, the notes, and real constrained decoding."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from xlrag.config import LLMConfig
from xlrag.evals.judges import (
    VERDICTS,
    JudgePanel,
    JudgeVote,
    PanelConfig,
    PanelVerdict,
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
