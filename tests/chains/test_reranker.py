"""The LLM reranker (``rerank.name: llm``) with real llama.cpp models and a real llama_cpp.server.

No mocks: the local tests load the catalogue's models, the OpenAI test goes through the real
ChatOpenAI and OpenAI SDK to ``python -m llama_cpp.server`` on 127.0.0.1 (``llama_server``).
"""

from __future__ import annotations

import socket
import threading

import pytest

from tests.chains.conftest import TEST_THREADS
from xlrag.config import LLMConfig, RerankConfig, load_config
from xlrag.errors import ConfigError, ProviderError
from xlrag.indexes.postprocess import PassagePostprocessor
from xlrag.indexes.rerank import build_reranker
from xlrag.schema import Hit, Passage, make_query

SWISS = "Switzerland's currency is the Swiss franc (CHF). Euros are accepted in some shops, change is given in francs."
EN = [
    "Tokyo is the capital of Japan and its largest city, with about 14 million people.",
    "The Amazon rainforest covers much of northern Brazil and is home to many species.",
    SWISS,
    "Canada has ten provinces and three territories; Ottawa is its capital.",
    "The Nile flows north through Egypt and Sudan into the Mediterranean Sea.",
]
ZH_AR = [
    "长城是中国古代修建的防御工事，全长两万多公里。",
    "القاهرة هي عاصمة مصر وأكبر مدنها.",
    "澳大利亚的首都是堪培拉，不是悉尼。堪培拉位于澳大利亚首都领地。",
    "巴西是南美洲面积最大的国家，官方语言是葡萄牙语。",
    "تشتهر المغرب بأسواقها التقليدية ومطبخها الغني بالتوابل.",
]


def hits(texts: list[str], lang: str = "en") -> list[Hit]:
    return [Hit(passage=Passage(id=f"p{i}", doc_id=f"d{i}", text=t, lang=lang), score=1.0 - i / 10,
                raw_score=0.5, rank=i + 1, store=lang, mode="all") for i, t in enumerate(texts)]


@pytest.fixture(scope="module")
def reranker():
    """The default LLM reranker (the local model chosen by benchmarks/rerank_methods.py)."""
    from xlrag.chains.reranker import DEFAULT_RERANK_LLM

    llm = DEFAULT_RERANK_LLM.model_copy(update={"n_threads": TEST_THREADS})
    return build_reranker(RerankConfig(name="llm", llm=llm, max_passage_tokens=64))


def test_build_reranker_returns_the_llm_reranker_behind_the_protocol(reranker):
    from xlrag.chains.reranker import LLMReranker

    assert isinstance(reranker, LLMReranker) and isinstance(reranker, PassagePostprocessor)


def test_an_arabic_question_finds_the_english_passage_that_answers_it(reranker):
    out = reranker.postprocess(hits(EN), make_query("ما هي العملة المستخدمة في سويسرا؟"), 3)
    assert out[0].passage.text == SWISS
    assert [h.rank for h in out] == [1, 2, 3]
    assert all(h.rerank_score is not None and h.score == h.rerank_score for h in out)
    assert out[0].rerank_score > out[1].rerank_score
    assert out[0].fused_score is None and out[0].raw_score == 0.5  # the rest of the hit survives


def test_an_english_question_finds_the_chinese_passage_among_chinese_and_arabic(reranker):
    out = reranker.postprocess(hits(ZH_AR, "zh"), make_query("What is the capital of Australia?"), 5)
    assert out[0].id == "p2"
    assert sorted(h.id for h in out) == [f"p{i}" for i in range(5)]


def test_the_prefix_of_instruction_and_question_is_evaluated_once_per_question(reranker):
    scorer = reranker.scorer
    before_eval, before_prompt = scorer.evaluated, scorer.prompted
    scorer.score("What is the capital of Australia?", ZH_AR)
    evaluated, prompted = scorer.evaluated - before_eval, scorer.prompted - before_prompt
    shared = len(scorer._head) + len(scorer.question_tokens("What is the capital of Australia?")) + len(scorer._middle)
    # the first candidate pays for the shared prefix, the other four only for passage and tail
    assert evaluated <= prompted - 4 * shared


def test_a_long_passage_is_cut_to_max_passage_tokens(reranker):
    scorer = reranker.scorer
    question = "What is the currency of Switzerland?"
    long_text = " ".join([SWISS] * 200)  # ~5,000 tokens
    assert len(scorer._tok(long_text)) > 20 * scorer.max_passage_tokens
    overhead = len(scorer._head) + len(scorer.question_tokens(question)) + len(scorer._middle) + len(scorer._tail)
    assert len(scorer.prompt_tokens(question, long_text)) == overhead + scorer.max_passage_tokens
    before = scorer.evaluated
    out = reranker.postprocess(hits([long_text, EN[0]]), make_query(question), 2)
    assert out[0].passage.text == long_text  # the hit keeps its whole text; only the prompt is cut
    assert scorer.evaluated - before <= 2 * (overhead + scorer.max_passage_tokens)


def test_only_candidates_are_reranked_and_ties_keep_the_fused_order(reranker):
    from xlrag.chains.reranker import LLMReranker

    narrow = LLMReranker(reranker.scorer, candidates=3, model="test")
    same = [EN[0]] * 3 + [SWISS, EN[1]]
    out = narrow.postprocess(hits(same), make_query("What is the currency of Switzerland?"), 5)
    # identical passages score alike: the fused order decides; p3 and p4 were not candidates
    assert [h.id for h in out] == ["p0", "p1", "p2", "p3", "p4"]
    assert [h.rerank_score is None for h in out] == [False, False, False, True, True]


def test_concurrent_callers_share_the_model_under_its_lock(reranker):
    question, passages = "What is the currency of Switzerland?", EN[1:4]
    expected = reranker.scorer.score(question, passages)
    got: list[list[float]] = []

    def run() -> None:
        got.append(reranker.scorer.score(question, passages))

    threads = [threading.Thread(target=run) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    # interleaved calls would mix two prompts in one context: serialised ones agree exactly. The
    # first candidate of the first call differs in rounding only: its prefix was evaluated in
    # other batches (after another question)
    assert len(got) == 2 and got[0] == got[1]
    assert got[0][1:] == expected[1:] and got[0][0] == pytest.approx(expected[0], abs=0.25)


def test_listwise_returns_every_candidate_once(reranker):
    from xlrag.chains.reranker import DEFAULT_RERANK_LLM

    llm = DEFAULT_RERANK_LLM.model_copy(update={"n_threads": TEST_THREADS})
    listwise = build_reranker(RerankConfig(name="llm", method="listwise", llm=llm, max_passage_tokens=64))
    out = listwise.postprocess(hits(EN), make_query("ما هي العملة المستخدمة في سويسرا؟"), 5)
    assert sorted(h.id for h in out) == [f"p{i}" for i in range(5)]
    assert any(ch.isdigit() for ch in listwise.scorer.last_reply)


# -- configuration errors ------------------------------------------------------------------------


def test_an_unknown_rerank_name_is_one_line_naming_the_choices(tmp_path):
    cfg = tmp_path / "xlrag.yaml"
    cfg.write_text("rerank:\n  name: colbert\n", encoding="utf-8")
    with pytest.raises(ConfigError,
                       match=r"unknown rerank.name 'colbert' \(did you mean 'cohere'\?\); choose one of: cohere, llm, "
                             r"none") as e:
        load_config(cfg)
    assert "\n" not in str(e.value)


def test_more_candidates_than_retrieved_is_refused(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no xlrag.yaml here
    with pytest.raises(ConfigError, match=r"rerank.candidates \(30\) is more than retrieval.retrieve_k \(20\)"):
        load_config(rerank={"name": "llm", "candidates": 30})


def test_a_provider_without_logprobs_is_one_line_at_construction():
    cfg = RerankConfig(name="llm", scoring="logprobs", llm=LLMConfig(provider="anthropic"))
    with pytest.raises(ConfigError, match=r"returns no logprobs .*set rerank.scoring: grade") as e:
        build_reranker(cfg)
    assert "\n" not in str(e.value)


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_an_unreachable_logprobs_server_is_one_line_at_construction():
    llm = LLMConfig(provider="openai", model="m", base_url=f"http://127.0.0.1:{_closed_port()}/v1",
                    max_retries=0, timeout=5)
    with pytest.raises(ConfigError, match=r"did not answer a logprobs request .*set rerank.scoring: grade") as e:
        build_reranker(RerankConfig(name="llm", llm=llm))
    assert "\n" not in str(e.value)


def test_a_reranker_failing_mid_call_raises_provider_error():
    llm = LLMConfig(provider="openai", model="m", base_url=f"http://127.0.0.1:{_closed_port()}/v1",
                    max_retries=0, timeout=5)
    graded = build_reranker(RerankConfig(name="llm", scoring="grade", llm=llm))  # no probe: builds
    with pytest.raises(ProviderError, match=r"llm rerank with rerank\.llm openai:m failed"):
        graded.postprocess(hits(EN[:2]), make_query("What is the currency of Switzerland?"), 2)


# -- the OpenAI path: the real SDK against a real llama_cpp.server -------------------------------------


@pytest.fixture(scope="module")
def instruct_server(tmp_path_factory):
    """A real llama_cpp.server serving the instruct qwen2.5-coder-0.5b (its chat template makes
    the first reply token the verdict, which the base gemma's does not)."""
    from tests.chains.conftest import serve_llama

    with serve_llama("qwen2.5-coder-0.5b-instruct", tmp_path_factory.mktemp("instruct-server"), n_ctx=1024) as base:
        yield base


def test_openai_logprobs_from_a_real_llama_cpp_server(instruct_server, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    llm = LLMConfig(provider="openai", model="qwen", base_url=instruct_server, timeout=300)
    by_logprobs = build_reranker(RerankConfig(name="llm", llm=llm, concurrency=2, max_passage_tokens=64))
    assert by_logprobs.scorer.logprobs  # auto: openai returns logprobs, and the probe saw yes/no among them
    out = by_logprobs.postprocess(hits(ZH_AR[:3], "zh"), make_query("What is the capital of Australia?"), 3)
    assert [h.rank for h in out] == [1, 2, 3] and sorted(h.id for h in out) == ["p0", "p1", "p2"]
    scores = [h.rerank_score for h in out]
    assert scores == sorted(scores, reverse=True) and len(set(scores)) == 3  # real, distinct logprobs


def test_a_base_model_behind_the_openai_api_is_refused_for_logprobs_but_grades(llama_server, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    llm = LLMConfig(provider="openai", model="gemma-3-270m", base_url=llama_server, timeout=300)
    # gemma-3-270m (base) continues the chat template with blank lines: no yes/no to read
    with pytest.raises(ConfigError, match=r"ranks neither 'yes' nor 'no' .*set rerank.scoring: grade") as e:
        build_reranker(RerankConfig(name="llm", llm=llm))
    assert "\n" not in str(e.value)
    graded = build_reranker(RerankConfig(name="llm", llm=llm, scoring="grade", concurrency=2, max_passage_tokens=64))
    out = graded.postprocess(hits(EN[:3]), make_query("What is the currency of Switzerland?"), 3)
    assert [h.rank for h in out] == [1, 2, 3] and all(0.0 <= h.rerank_score <= 3.0 for h in out)
