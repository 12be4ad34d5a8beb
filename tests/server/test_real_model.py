"""/v1/ask with the real local model (Qwen2.5-Coder-0.5B through llama.cpp), over real HTTP."""

from __future__ import annotations

import pytest

from tests.server.conftest import QUESTION, config


@pytest.mark.slow
def test_ask_with_the_local_model(serve):
    from xlrag.chains.llms import build_llm
    from xlrag.config import LLMConfig

    llm = build_llm(LLMConfig(provider="local", model="qwen2.5-coder-0.5b-instruct", max_tokens=64, n_threads=1))
    client = serve(llm, cfg=config(max_repairs=1))
    # one thread on a shared machine: minutes, not seconds
    response = client.post("/v1/ask", json={"question": QUESTION}, timeout=900)
    assert response.status_code == 200, response.text
    data = response.json()
    answer, trace = data["answer"], data["trace"]
    assert answer["lang"] == "es" and answer["model"].startswith("local/")
    assert answer["passages"][0]["doc_id"] == "xquad-00-es"
    assert trace["question"] == QUESTION and trace["mode"] == "qlang" and trace["lang"] == "es"
    assert {c["check"] for c in trace["checks"]} >= {"language", "citations"}
    assert any(t["step"] == "generate" for t in trace["timings"])
    # whatever the small model wrote, the reply holds only resolved citations, or says why not
    assert all(c["passage_id"] for c in answer["citations"] if c["valid"])
    assert [c for c in answer["citations"] if c["valid"]] or "unrepaired_citations" in answer["flags"]
