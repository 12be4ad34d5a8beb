"""Each of the five shipped experiments on a vendor model is a one-line change: the YAML with
only its model line swapped (`llm:` in a study, `llms:` in a grid; the judges, checkers and
translator likewise when the file names them), run through the real OpenAI SDK against
OpenAI's wire format on 127.0.0.1."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.chains.test_tool_agent_openai import completion
from tests.replay import serve
from xlrag.borderlines import load_territories
from xlrag.evals.run_folder import RECORDS, read_records
from xlrag.evals.studies import STUDIES, load_run_config

EXPERIMENTS = Path(__file__).resolve().parents[2] / "experiments"


def vendor_turn(body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    if body.get("response_format"):  # a judge held to its JSON schema
        verdict = {"justification": "The response gives the reference's answer.", "verdict": "correct"}
        return 200, completion({"content": json.dumps(verdict)}, "stop")
    return 200, completion({"content": "B"}, "stop")  # a multiple-choice letter, or a terse answer


def distinct_turn(body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    """:func:`vendor_turn`, with an answer of its own for each answer prompt. Two conditions that
    answered alike would be judged by the same judge prompts, and the run's call cache answers
    the second from the first whenever the first finished before it started (once in CI): how
    many requests reached the server then depended on timing."""
    if body.get("response_format"):
        return vendor_turn(body)
    digest = hashlib.sha256(json.dumps(body["messages"], sort_keys=True).encode()).hexdigest()[:8]
    return 200, completion({"content": f"Die Antwort ist {digest}."}, "stop")


@pytest.fixture(autouse=True)
def _env(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-studies")
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")


def _swap(name: str, tmp_path: Path, url: str, **slice_: Any) -> Any:
    """The shipped YAML with the one line changed (plus a smaller slice, for the test's time)."""
    data = yaml.safe_load((EXPERIMENTS / f"{name}.yaml").read_text(encoding="utf-8"))
    vendor = {"provider": "openai", "model": "gpt-4o-mini", "base_url": f"{url}/v1", "max_tokens": 64}
    data["llm"] = vendor
    if "judges" in data:
        data["judges"] = {"judges": [{**vendor, "name": f"gpt-{i}", "seed": i} for i in range(3)]}
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump({**data, **slice_}), encoding="utf-8")
    return load_run_config(path)


def _run(cfg: Any, out: Path) -> dict:
    runner = STUDIES[cfg.study].get("runner")(cfg, out)
    try:
        return runner.run()
    finally:
        runner.close()


def test_bordirlines_on_a_vendor(tmp_path):
    with serve({"/v1/chat/completions": vendor_turn}) as replay:
        cfg = _swap("bordirlines", tmp_path, replay.url, only=["Crimea"], modes=["no_ir"])
        summary = _run(cfg, tmp_path / "run")
    assert (summary["written"], summary["failed"]) == (3, 0) and len(replay.requests) == 3
    recs = read_records(tmp_path / "run" / RECORDS)
    # option B of every Crimea question is the same claimant, whatever language it is written in
    (crimea,) = load_territories(names=["Crimea"])
    assert sorted((r["query_lang"], r["answer"]) for r in recs) == [(lang, crimea.claimants[1])
                                                                    for lang in ("en", "ru", "uk")]
    russian = next(r.body for r in replay.requests if "Крым" in json.dumps(r.body, ensure_ascii=False))
    assert russian["model"] == "gpt-4o-mini"


def test_xrag_on_a_vendor_with_a_vendor_panel(tmp_path):
    with serve({"/v1/chat/completions": distinct_turn}) as replay:
        cfg = _swap("xrag", tmp_path, replay.url, langs=["de"], per_lang=1, conditions=["monolingual", "+ED"])
        summary = _run(cfg, tmp_path / "run")
    # two answers, each judged by three judges
    assert len({r.body["messages"][-1]["content"] for r in replay.requests if not r.body.get("response_format")}) == 2
    assert (summary["written"], summary["failed"], len(replay.requests)) == (2, 0, 8)
    for r in read_records(tmp_path / "run" / RECORDS):
        assert [v["verdict"] for v in r["judges"]["votes"]] == ["correct"] * 3
        # XRAG's rule: an answer lingua reads as another language than German is incorrect
        wrong = r["language"]["status"] == "wrong"
        assert r["judges"]["verdict"] == "correct" and r["judges"]["final"] == ("incorrect" if wrong else "correct")


def _vendor(url: str) -> dict[str, Any]:
    return {"provider": "openai", "model": "gpt-4o-mini", "base_url": f"{url}/v1", "max_tokens": 64}


def _swap_grid(name: str, tmp_path: Path, url: str, **slice_: Any) -> Any:
    """A shipped grid with its `llms:` line (and translator, judges) on the vendor."""
    from xlrag.evals.experiment import load_experiment

    data = yaml.safe_load((EXPERIMENTS / f"{name}.yaml").read_text(encoding="utf-8"))
    data["llms"] = [_vendor(url)]
    for key in ("translator",):
        if key in data:
            data[key] = _vendor(url)
    if "judges" in data:
        data["judges"] = {"judges": [{**_vendor(url), "name": f"gpt-{i}", "seed": i} for i in range(3)]}
    data = {**data, **slice_, "cache": str(tmp_path / "calls.sqlite")}
    for ds in data["datasets"]:  # the shipped paths are relative to experiments/
        ds.update({k: str((EXPERIMENTS / ds[k]).resolve()) for k in ("corpus", "queries", "qrels") if k in ds})
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return load_experiment(path)


def _run_grid(cfg: Any, out: Path) -> dict:
    from xlrag.evals.runner import ExperimentRunner

    runner = ExperimentRunner(cfg, out)
    try:
        return runner.run()
    finally:
        runner.close()


def _system(body: dict) -> str:
    return next(m["content"] for m in body["messages"] if m["role"] == "system")


def test_mrag_prompt_variants_on_a_vendor(tmp_path):
    with serve({"/v1/chat/completions": vendor_turn}) as replay:
        cfg = _swap_grid("mrag_prompts", tmp_path, replay.url, modes=["qlang"],
                         datasets=[{"name": "xquad", "sample": {"per_lang": 1, "langs": ["es"], "seed": 0}}])
        summary = _run_grid(cfg, tmp_path / "run")
    # one Spanish question, three prompt variants: three answers, each one request
    assert (summary["written"], summary["failed"], len(replay.requests)) == (3, 0, 3)
    # API records run concurrently, so the requests arrive in any order: tell
    # the variants apart by what their system prompts say
    systems = [_system(r.body) for r in replay.requests]
    english = [s for s in systems if s.startswith("You are")]
    instructed = [s for s in systems if s.startswith("Eres") and "Responde en español" in s]
    translated = [s for s in systems if s.startswith("Eres") and "Responde en español" not in s]
    assert (len(english), len(translated), len(instructed)) == (1, 1, 1), systems
    assert "español" not in english[0]
    recs = read_records(tmp_path / "run" / RECORDS)
    assert sorted(r["variant"] for r in recs) == sorted(v.name for v in cfg.variants)
    assert all(r["llm"] == "openai:gpt-4o-mini" for r in recs)


def test_travel_retrieval_on_a_vendor_translates_through_it(tmp_path):
    with serve({"/v1/chat/completions": vendor_turn}) as replay:
        cfg = _swap_grid("travel_retrieval", tmp_path, replay.url, modes=["translate"],
                         generate_modes=["translate"], generate_sample={"per_lang": 1, "seed": 0},
                         datasets=[{"name": "travel", "sample": {"per_lang": 1, "seed": 0}}])
        summary = _run_grid(cfg, tmp_path / "run")
    # two questions: each translated once, answered once and judged three times
    assert (summary["written"], summary["failed"]) == (2, 0)
    assert len(replay.requests) == 2 * (1 + 1 + 3)
    assert all(r.body["model"] == "gpt-4o-mini" for r in replay.requests)
    recs = read_records(tmp_path / "run" / RECORDS)
    assert all(r["mode"] == "translate" and len(r["retrieved"]) == cfg.retrieval.retrieve_k for r in recs)


def attribution_turn(body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    if body.get("response_format"):  # the AIS check, held to its JSON schema
        vote = {"justification": "The passage gives the answer.", "verdict": "attributable"}
        return 200, completion({"content": json.dumps(vote)}, "stop")
    if "<doc0>" in json.dumps(body, ensure_ascii=False):  # the generator, shown numbered passages
        return 200, completion({"content": "Cited Documents: <doc0>\nAnswer: 1773\n"
                                           "Explanation: <doc0> gives the year."}, "stop")
    return 200, completion({"content": "The passage, in English."}, "stop")  # a translation


def test_attribution_on_a_vendor(tmp_path):
    with serve({"/v1/chat/completions": attribution_turn}) as replay:
        data = {"langs": ["es"], "per_lang": 1, "k": 2, "checker": _vendor(replay.url),
                "rerank_checker": _vendor(replay.url)}
        cfg = _swap("attribution", tmp_path, replay.url, **data)
        summary = _run(cfg, tmp_path / "run")
    assert (summary["written"], summary["failed"]) == (1, 0)
    assert all(r.body["model"] == "gpt-4o-mini" for r in replay.requests)
    (rec,) = read_records(tmp_path / "run" / RECORDS)
    assert rec["answer"] == "1773" and len(rec["shown"]) == 2
    for setting in ("in_language", "in_english"):
        assert list(rec["ais"][setting].values()) == ["attributable", "attributable"], setting
    assert rec["rerank"] is not None
