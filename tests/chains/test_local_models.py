"""The local model catalogue: verified assembly from the real installed chunk packages,
corruption, concurrent assembly, selection, any-GGUF loading, and ``xlrag models list``.
Real llama.cpp, no mocks."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.chains.conftest import TEST_THREADS
from xlrag.chains.llms import LocalLlamaChat, build_llm
from xlrag.chains.local import assembly, loaded
from xlrag.chains.local.assembly import ModelChecksumError, assemble, gguf_name, sha256_file
from xlrag.chains.local.catalogue import CATALOGUE, DEFAULT_ENTRY, lookup
from xlrag.chains.profiles import profile_for
from xlrag.config import LLMConfig
from xlrag.errors import MissingDependencyError, UnknownProviderError

GEMMA = CATALOGUE["gemma-3-270m"]
QWEN_05 = CATALOGUE["qwen2.5-coder-0.5b-instruct"]


@pytest.fixture(scope="module")
def gemma_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A private cache holding gemma assembled from its installed parts (once per module)."""
    root = tmp_path_factory.mktemp("xlrag-cache")
    assemble(GEMMA, root / "models")
    return root


def test_assembly_from_installed_parts(gemma_cache: Path) -> None:
    path = gemma_cache / "models" / GEMMA.filename
    assert path.stat().st_size == GEMMA.size == sum(p.stat().st_size for p in assembly.part_files(GEMMA))
    assert sha256_file(path) == GEMMA.sha256
    assert gguf_name(path) == GEMMA.general_name
    leftovers = [p.name for p in path.parent.iterdir() if p.name.endswith(".tmp")]
    assert leftovers == []


def test_cache_dir_follows_the_env_var(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XLRAG_CACHE_DIR", str(tmp_path))
    assert assembly.cache_dir() == tmp_path / "models"


def test_corrupt_byte_is_a_clear_error_and_nothing_loads(tmp_path: Path, gemma_cache: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    models = tmp_path / "models"
    models.mkdir()
    damaged = models / GEMMA.filename
    data = bytearray((gemma_cache / "models" / GEMMA.filename).read_bytes())
    data[len(data) // 2] ^= 0xFF
    damaged.write_bytes(bytes(data))
    monkeypatch.setenv("XLRAG_CACHE_DIR", str(tmp_path))
    before = dict(loaded._MODELS)
    llm = build_llm(LLMConfig(model="gemma-3-270m", n_threads=TEST_THREADS, max_tokens=4))
    with pytest.raises(ModelChecksumError, match=r"SHA-256 .*nothing was loaded\. Delete the file"):
        llm.invoke("hi")
    assert llm._llama is None and loaded._MODELS == before
    assert damaged.read_bytes() == bytes(data)  # left for the user to inspect, not overwritten


def test_two_processes_racing_to_assemble(tmp_path: Path) -> None:
    code = ("import sys; from pathlib import Path; from xlrag.chains.local.assembly import assemble;"
            "from xlrag.chains.local.catalogue import lookup;"
            "print(assemble(lookup('gemma-3-270m'), Path(sys.argv[1])))")
    procs = [subprocess.Popen([sys.executable, "-c", code, str(tmp_path)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(2)]
    results = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], results
    assert {out.strip() for out, _ in results} == {str(tmp_path / GEMMA.filename)}
    assert sorted(p.name for p in tmp_path.iterdir()) == [GEMMA.filename, GEMMA.filename + ".lock"]
    assert sha256_file(tmp_path / GEMMA.filename) == GEMMA.sha256


def test_models_list(tmp_path: Path, gemma_cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from xlrag.cli import app

    monkeypatch.setenv("XLRAG_CACHE_DIR", str(gemma_cache))
    runner = CliRunner()
    res = runner.invoke(app, ["models", "list", "--json"])
    assert res.exit_code == 0, res.output
    rows = {r["name"]: r for r in json.loads(res.output)}
    assert list(rows) == list(CATALOGUE)
    assert rows["gemma-3-270m"]["verified"] is True and rows[DEFAULT_ENTRY]["default"] is True
    assert rows["qwen2.5-coder-0.5b-instruct"]["verified"] is None  # not assembled in this cache
    assert {r["kind"] for r in rows.values()} == {"base", "instruct"}
    assert all(r["installed"] for r in rows.values())  # the dev extra pulls in every entry
    res = runner.invoke(app, ["models", "list"], env={"COLUMNS": "200"})
    assert res.exit_code == 0 and "qwen2.5-coder-1.5b-instruct" in res.output and "Apache-2.0" in res.output


def test_unknown_names_suggest() -> None:
    with pytest.raises(UnknownProviderError, match=r"did you mean 'qwen2.5-coder-1.5b-instruct'"):
        build_llm(LLMConfig.parse_spec("local:qwen2.5-coder-1.5b"))
    with pytest.raises(UnknownProviderError, match=r"unknown chat_format 'chatmll'.*did you mean 'chatml'"):
        build_llm(LLMConfig(model_path=Path("/x.gguf"), chat_format="chatmll"))


def test_missing_extra_names_the_install(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    absent = QWEN_05.model_copy(update={"parts": ("xlrag-test-absent-part1", *QWEN_05.parts[1:])})
    monkeypatch.setitem(CATALOGUE, QWEN_05.name, absent)
    monkeypatch.setenv("XLRAG_CACHE_DIR", str(tmp_path))
    with pytest.raises(MissingDependencyError) as e:
        build_llm(LLMConfig(model=QWEN_05.name))
    assert str(e.value).endswith("pip install 'xlrag[qwen2.5-coder-0.5b-instruct]'")
    with pytest.raises(MissingDependencyError):
        assemble(absent)
    assert not list(tmp_path.rglob("*.gguf"))


def test_selection_and_profile_contract() -> None:
    gemma, qwen = build_llm(LLMConfig(model="gemma-3-270m")), build_llm(LLMConfig(model=QWEN_05.name))
    assert isinstance(gemma, LocalLlamaChat) and isinstance(qwen, LocalLlamaChat)
    assert (gemma.chat, gemma.few_shot_default) == (False, GEMMA.few_shot)
    assert (qwen.chat, qwen.few_shot_default) == (True, QWEN_05.few_shot)
    assert profile_for(qwen).is_chat(qwen) and not profile_for(gemma).is_chat(gemma)
    assert build_llm().entry == lookup(None).name == DEFAULT_ENTRY
    assert gemma._llm_type == "xlrag-llama-cpp"


@pytest.mark.slow
def test_model_path_loads_any_gguf(gemma_cache: Path) -> None:
    path = gemma_cache / "models" / GEMMA.filename
    llm = build_llm(LLMConfig(model_path=path, n_threads=TEST_THREADS, max_tokens=8, n_ctx=512))
    assert isinstance(llm, LocalLlamaChat) and not llm.chat and llm.few_shot_default
    assert llm.invoke("The capital of France is").text.strip()
    assert llm._path == str(path)


@pytest.mark.slow
def test_instruct_model_answers_through_its_chat_template() -> None:
    path = assemble(QWEN_05)
    for cfg in (LLMConfig(model=QWEN_05.name, n_threads=TEST_THREADS, max_tokens=12, n_ctx=512),
                LLMConfig(model_path=path, chat_format="gguf", n_threads=TEST_THREADS, max_tokens=12, n_ctx=512)):
        llm = build_llm(cfg)
        assert llm.chat and not (cfg.model_path and llm.few_shot_default)
        msg = llm.invoke([("system", "Answer with one word."), ("user", "What is the capital of France?")])
        assert "Paris" in msg.text, msg.text
        assert "<|im_" not in msg.text  # the template's turn markers never leak into the text
        assert msg.response_metadata["finish_reason"] in {"stop", "length"}
    streamed = "".join(c.text for c in llm.stream([("user", "What is the capital of France? One word.")]))
    assert "Paris" in streamed

