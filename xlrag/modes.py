"""The IR modes: one enum that is both the type of every mode field and the key the
retrieval policies are found by (:data:`xlrag.indexes.policies.MODES`, which a test holds
equal to it).

A mode field is typed :data:`Mode` (an IR mode) or :data:`AgentMode` (an IR mode or
``auto``, the agent's rules); pydantic then validates it once, with one message that names
the nearest mode. Code outside pydantic calls :func:`parse_mode`. ``IRMode`` is a ``StrEnum``:
``IRMode.NO_IR == "no_ir"``, and it serialises as the plain name.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Literal, overload

from pydantic import BeforeValidator

from xlrag.text import capped

__all__ = ["AUTO", "SHARE_MARGIN", "AgentMode", "IRMode", "Mode", "parse_mode"]


class IRMode(StrEnum):
    """The routing policies over the language stores (BordIRlines, Cross-Lingual Cost, mRAG)."""

    NO_IR = "no_ir"
    QLANG = "qlang"
    QLANG_EN = "qlang_en"
    EN_ONLY = "en_only"
    REL_LANGS = "rel_langs"
    SWAP_DOCS = "swap_docs"
    ALL = "all"
    BALANCED = "balanced"
    TRANSLATE = "translate"
    ORACLE_LANG = "oracle_lang"


# balanced: a store whose best passage scores this far under the best store in another language
# than the question's gets no share (retrieval.share_margin; benchmarks/shares.py chose it)
SHARE_MARGIN = 0.03

# the agent's routing: agent.rules, then agent.default_mode
AUTO: Literal["auto"] = "auto"


@overload
def parse_mode(value: object, *, allow_auto: Literal[False] = False) -> IRMode: ...
@overload
def parse_mode(value: object, *, allow_auto: bool) -> IRMode | Literal["auto"]: ...


def parse_mode(value: object, *, allow_auto: bool = False) -> IRMode | Literal["auto"]:
    """``value`` as an :class:`IRMode` (or ``"auto"`` when allowed); ValueError naming the
    nearest mode otherwise."""
    if isinstance(value, IRMode):
        return value
    known = [m.value for m in IRMode] + ([AUTO] if allow_auto else [])
    if isinstance(value, str) and value in known:
        return AUTO if value == AUTO else IRMode(value)
    from xlrag.validate import did_you_mean

    hint = did_you_mean(value, known) if isinstance(value, str) else ""
    raise ValueError(f"unknown IR mode {capped(value)}{hint}; use one of: {', '.join(known)}")


Mode = Annotated[IRMode, BeforeValidator(parse_mode)]
AgentMode = Annotated[IRMode | Literal["auto"], BeforeValidator(lambda v: parse_mode(v, allow_auto=True))]
