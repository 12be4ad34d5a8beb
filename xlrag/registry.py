"""One registry for every pluggable provider, keyed by (kind, config name).

Built-in providers register themselves when their module is imported; the
registry imports those modules on first lookup so that ``import xlrag`` stays
light and vendor SDKs load only when configured.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
from collections.abc import Callable
from typing import Any, Literal

from xlrag.errors import MissingAPIKeyError, MissingDependencyError, UnknownProviderError

__all__ = ["Kind", "api_key", "available", "create", "get", "profile", "profiled", "register", "require"]

Kind = Literal["embedder", "reranker", "llm", "translator", "fusion"]

_FACTORIES: dict[tuple[str, str], Callable[..., Any]] = {}
_BUILTIN_MODULES: dict[str, tuple[str, ...]] = {
    "embedder": ("xlrag.indexes.embedders",),
    "reranker": ("xlrag.indexes.rerank", "xlrag.chains.reranker"),
    "llm": ("xlrag.chains.llms",),
    "translator": ("xlrag.chains.translator",),
    "fusion": ("xlrag.indexes.fusion",),
}
# per-provider behaviour beside the factory (an LLM's chains.profiles.ProviderProfile)
_PROFILES: dict[tuple[str, str], Any] = {}
_loaded: set[str] = set()


def register(kind: Kind, name: str, *, profile: Any = None) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorator: ``@register("embedder", "mine")`` on a factory ``(config) -> provider``;
    ``profile``: how the chain drives what the factory builds (LLMs)."""

    def deco(factory: Callable[..., Any]) -> Callable[..., Any]:
        _FACTORIES[(kind, name)] = factory
        if profile is not None:
            _PROFILES[(kind, name)] = profile
        return factory

    return deco


def set_profile(kind: Kind, name: str, profile: Any) -> Any:
    """Register ``profile`` for a provider registered (or to be registered) as ``name``."""
    _PROFILES[(kind, name)] = profile
    return profile


def profile(kind: Kind, name: str) -> Any:
    """The profile registered with ``name``'s factory, or None."""
    _load_builtins(kind)
    return _PROFILES.get((kind, name))


def profiled(kind: Kind) -> list[str]:
    """The providers of ``kind`` that have a profile."""
    _load_builtins(kind)
    return sorted(n for k, n in _PROFILES if k == kind)


def _load_builtins(kind: str) -> None:
    if kind in _loaded:
        return
    for mod in _BUILTIN_MODULES.get(kind, ()):
        importlib.import_module(mod)
    _loaded.add(kind)


def available(kind: Kind) -> list[str]:
    _load_builtins(kind)
    return sorted(n for k, n in _FACTORIES if k == kind)


def known(kind: Kind, name: str, setting: str) -> str:
    """``name`` if it is registered for ``kind``, else a ValueError naming ``setting``, the
    closest registered name and all of them: the one check of a setting that names a provider."""
    names = available(kind)
    if name not in names:
        from xlrag.text import capped
        from xlrag.validate import did_you_mean

        raise ValueError(f"unknown {setting} {capped(name)}{did_you_mean(name, names)}; "
                         f"choose one of: {', '.join(names)}")
    return name


def get(kind: Kind, name: str) -> Callable[..., Any]:
    """The callable registered as ``name`` for ``kind``; unknown names list the known ones."""
    _load_builtins(kind)
    try:
        return _FACTORIES[(kind, name)]
    except KeyError:
        raise UnknownProviderError(kind, name, available(kind)) from None


def create(kind: Kind, name: str, *args: Any, **kwargs: Any) -> Any:
    """Build the provider registered as ``name`` for ``kind``."""
    return get(kind, name)(*args, **kwargs)


def api_key(provider: str, *env_vars: str) -> str:
    """The first set variable of ``env_vars``; keys come only from the environment."""
    for var in env_vars:
        if os.environ.get(var):
            return os.environ[var]
    raise MissingAPIKeyError(provider, env_vars[0])


def require(module: str, extra: str, feature: str) -> None:
    """Fail early, naming the pip extra, when a vendor integration is not installed."""
    try:
        found = importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # a parent package is missing
        found = False
    if not found:
        raise MissingDependencyError(feature, extra, module)
