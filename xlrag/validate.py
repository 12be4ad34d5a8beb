"""Checks at xlrag's public boundary: argument names, counts, and did-you-mean hints."""

from __future__ import annotations

import difflib
import functools
import inspect
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, TypeVar

from xlrag.errors import ConfigError, InvalidArgumentError, UnknownArgumentError
from xlrag.text import ECHO_LIMIT, capped

if TYPE_CHECKING:
    from pydantic import BaseModel

__all__ = ["DEFAULT_K", "DEFAULT_RETRIEVE_K", "MAX_K", "check_k", "check_kwargs", "did_you_mean", "k_field",
           "strict_kwargs", "validate_mapping"]

F = TypeVar("F", bound=Callable[..., Any])
M = TypeVar("M", bound="BaseModel")


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """`` (did you mean 'x'?)`` for the closest of ``known``, or ''."""
    if len(name) > 4 * ECHO_LIMIT:
        return ""  # nothing that long is a typo of a name
    close = difflib.get_close_matches(name, list(known), n=1, cutoff=0.6)
    return f" (did you mean {capped(close[0])}?)" if close else ""


def check_kwargs(where: str, given: Iterable[str], valid: Iterable[str]) -> None:
    """Raise :class:`UnknownArgumentError` for the first of ``given`` not in ``valid``,
    naming the closest valid one (``where`` is the callee as the user called it)."""
    valid = list(valid)
    for key in given:
        if key not in valid:
            raise UnknownArgumentError(f"{where}() got an unexpected keyword argument {capped(key)}"
                                       f"{did_you_mean(key, valid)}; valid: {', '.join(valid)}")


def strict_kwargs(fn: F) -> F:
    """Reject an unknown keyword with the nearest valid one named.

    Python 3.11 says only "unexpected keyword argument 'target_lan'"; a user who typed
    it wants to hear 'target_lang'. The error is an :class:`UnknownArgumentError` (an
    XlragError and a TypeError), so the CLI prints it on one line.
    """
    params = inspect.signature(fn).parameters
    keywords = [n for n, p in params.items() if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)
                and n not in ("self", "cls")]

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if any(key not in params for key in kwargs):
            check_kwargs(fn.__qualname__, kwargs, keywords)
        return fn(*args, **kwargs)

    return wrapper  # type: ignore[return-value]


# The one rule for every count of passages (k: shown or returned; retrieve_k: fetched before
# rerank, and the depth an evaluation ranks to). The config, the CLI's -k, the server's
# requests, the experiments and studies, the LangChain/LlamaIndex adapters and the pipeline
# read it from here: pydantic fields through k_field, plain arguments through check_k
# (tests/test_k_rule.py proves each). One ceiling: past 100 passages no prompt holds them and
# no reader reads them; it is the widest any surface allowed before (the server's).
MIN_K = 1
MAX_K = 100
DEFAULT_K = 5  # passages shown or returned (retrieval.k)
DEFAULT_RETRIEVE_K = 20  # candidates fetched before rerank, and ranking depth (retrieval.retrieve_k)
_K_EXPECTED = f"a whole number >= {MIN_K} and <= {MAX_K}"


def check_k(k: Any, name: str = "k") -> int | None:
    """``k`` as a whole number from 1 to :data:`MAX_K` (None stays None: the configured
    default applies)."""
    if k is None:
        return None
    if isinstance(k, bool) or not isinstance(k, int) or not MIN_K <= k <= MAX_K:
        raise InvalidArgumentError(name, _K_EXPECTED, k)
    return k


def k_field(default: Any, description: str | None = None) -> Any:
    """A pydantic field holding a count of passages to :func:`check_k`'s bounds (``default``
    None: the field is optional, and the configured value applies)."""
    from pydantic import Field

    return Field(default, ge=MIN_K, le=MAX_K, description=description)


def validate_mapping(model: type[M], value: Any, what: str) -> M:
    """``value`` (a mapping) as ``model``, or a one-line :class:`ConfigError`: ``what`` names
    the input ("chain input"); an unknown key is named with the closest field, a bad value
    with its field."""
    from collections.abc import Mapping

    from pydantic import ValidationError

    if not isinstance(value, Mapping):
        raise ConfigError(f"{what} must be a question string or a mapping, not {type(value).__name__}")
    fields = list(model.model_fields)
    unknown = [k for k in value if k not in fields]
    if unknown:
        raise ConfigError(f"unknown {what} {unknown[0]!r}{did_you_mean(str(unknown[0]), fields)}; "
                          f"fields: {', '.join(fields)}")
    try:
        return model.model_validate(dict(value))
    except ValidationError as e:
        err = e.errors()[0]
        where = ".".join(str(x) for x in err["loc"]) or "input"
        raise ConfigError(f"bad {what} {where}: {err['msg']}") from None
