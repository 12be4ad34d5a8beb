import pytest

from xlrag.config import XlragConfig, load_config
from xlrag.errors import ConfigError


def test_defaults():
    cfg = XlragConfig()
    assert cfg.embedder.name == "local"
    assert cfg.retrieval.fusion == "rrf" and cfg.retrieval.channels == ["dense", "lexical"]
    assert cfg.retrieval.lexical_translation == "names"
    assert cfg.retrieval.retrieve_k == 20 and cfg.retrieval.k == 5


def test_yaml_then_env_then_overrides(tmp_path, monkeypatch):
    f = tmp_path / "xlrag.yaml"
    f.write_text("retrieval:\n  mode: balanced\n  k: 7\nembedder:\n  batch_size: 8\n")
    cfg = load_config(f)
    assert (cfg.retrieval.mode, cfg.retrieval.k, cfg.embedder.batch_size) == ("balanced", 7, 8)
    monkeypatch.setenv("XLRAG_RETRIEVAL__MODE", "qlang")
    cfg = load_config(f)
    assert cfg.retrieval.mode == "qlang" and cfg.retrieval.k == 7
    cfg = load_config(f, retrieval={"mode": "all"})
    assert cfg.retrieval.mode == "all" and cfg.retrieval.k == 7


def test_a_variable_equal_to_the_default_still_beats_the_file(tmp_path, monkeypatch):
    f = tmp_path / "xlrag.yaml"
    f.write_text("retrieval:\n  k: 8\n")
    monkeypatch.setenv("XLRAG_RETRIEVAL__K", "5")  # 5 is the default, and it is set
    cfg = load_config(f)
    assert cfg.retrieval.k == 5 and cfg.model_dump(exclude_unset=True)["retrieval"] == {"k": 5}


def test_bad_config_is_explained(tmp_path):
    f = tmp_path / "xlrag.yaml"
    f.write_text("retrieval:\n  fusion: magic\n")
    with pytest.raises(ConfigError, match=r"retrieval\.fusion"):
        load_config(f)
    f.write_text("splitter:\n  chunk_size: 50\n  chunk_overlap: 60\n")
    with pytest.raises(ConfigError, match="chunk_overlap"):
        load_config(f)
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(tmp_path / "nope.yaml")


def test_unknown_keys_are_rejected(tmp_path):
    f = tmp_path / "xlrag.yaml"
    f.write_text("retreival:\n  mode: qlang\n")
    with pytest.raises(ConfigError, match="retreival"):
        load_config(f)


def test_registry_unknown_provider():
    from xlrag.errors import UnknownProviderError
    from xlrag.registry import available, create

    assert {"local", "openai", "cohere", "mistral"} <= set(available("embedder"))
    with pytest.raises(UnknownProviderError, match="local"):
        create("embedder", "nope", None)


def test_the_candidates_fetched_are_retrieve_k_only(retriever):
    from pydantic import ValidationError

    from xlrag.config import XlragConfig
    from xlrag.indexes.retriever import CrossLingualRetriever

    assert XlragConfig(retrieval={"retrieve_k": 7}).retrieval.retrieve_k == 7
    with pytest.raises(ValidationError, match="k_retrieve"):  # 0.1.0 never shipped the old name
        XlragConfig(retrieval={"k_retrieve": 7})
    assert CrossLingualRetriever(retriever.stores, retriever.embedder, "all", k=3, retrieve_k=9).retrieve_k == 9
    with pytest.raises(TypeError, match="k_retrieve"):
        CrossLingualRetriever(retriever.stores, retriever.embedder, "all", k=3, k_retrieve=9)


def test_the_retries_are_max_retries_only():
    from pydantic import ValidationError

    from xlrag.config import LLMConfig
    from xlrag.judges.panel import JudgeConfig

    assert LLMConfig(max_retries=5).max_retries == 5
    for model in (LLMConfig, JudgeConfig):
        with pytest.raises(ValidationError, match="retries"):
            model(retries=1)
    # one name with the embedder's, and the SDKs'
    from xlrag.config import EmbedderConfig

    assert "max_retries" in EmbedderConfig.model_fields and "max_retries" in LLMConfig.model_fields


@pytest.mark.parametrize(("section", "field", "kind"),
                         [("retrieval", "fusion", "fusion"), ("rerank", "name", "reranker")])
def test_a_setting_naming_a_provider_is_checked_against_the_registry(section, field, kind):
    from xlrag.config import XlragConfig
    from xlrag.registry import available

    for name in available(kind):  # every registered name is accepted, and only those
        XlragConfig(**{section: {field: name}})
    with pytest.raises(ValueError, match=r"\(did you mean '.+'\?\); choose one of: " + ", ".join(available(kind))):
        XlragConfig(**{section: {field: available(kind)[-1][:-1] + "q"}})
