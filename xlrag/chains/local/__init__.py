"""The local llama.cpp models: the catalogue of GGUF files published on PyPI as chunk
packages, their verified assembly into the user cache, and the LangChain chat model."""

from xlrag.chains.local.catalogue import CATALOGUE, DEFAULT_ENTRY, CatalogueEntry, lookup

__all__ = ["CATALOGUE", "DEFAULT_ENTRY", "CatalogueEntry", "lookup"]
