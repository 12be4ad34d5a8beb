"""One registry for every pluggable provider, keyed by (kind, config name).

Built-in providers register themselves when their module is imported; the
registry imports those modules on first lookup so that ``import xlrag`` stays
light and vendor SDKs load only when configured.

Third-party providers come by entry point, as simonw/llm's plugins do: a package declares

    [project.entry-points."xlrag.plugins"]
    mine = "my_package.xlrag_plugin"

and the module it names registers with :func:`register` when imported. Plugins are imported
once, on the first lookup of any kind, after the built-ins: a plugin that fails to import, or
registers a name that is already taken, is a one-line warning naming its package, and xlrag
goes on without it.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import warnings
from collections.abc import Callable
from typing import Any, Literal

from xlrag.errors import (
    MissingAPIKeyError,
    MissingDependencyError,
    PluginWarning,
    UnknownProviderError,
)

__all__ = ["PLUGIN_GROUP", "Kind", "api_key", "available", "create", "get", "known", "plugins", "profile", "profiled",
           "register", "require", "set_profile"]

Kind = Literal["embedder", "reranker", "postprocessor", "llm", "translator", "fusion", "mode"]

_FACTORIES: dict[tuple[str, str], Callable[..., Any]] = {}
_BUILTIN_MODULES: dict[str, tuple[str, ...]] = {
    "embedder": ("xlrag.indexes.embedders",),
    "reranker": ("xlrag.indexes.rerank", "xlrag.chains.reranker"),
    "postprocessor": ("xlrag.indexes.rerank", "xlrag.chains.context"),
    "llm": ("xlrag.chains.llms",),
    "translator": ("xlrag.chains.translator",),
    "fusion": ("xlrag.indexes.fusion",),
    "mode": ("xlrag.indexes.policies",),
}
# per-provider behaviour beside the factory (an LLM's chains.profiles.ProviderProfile)
_PROFILES: dict[tuple[str, str], Any] = {}
_loaded: set[str] = set()

PLUGIN_GROUP = "xlrag.plugins"
# what plugins registered, held apart until their kind's built-ins are loaded (so that a plugin
# never takes a built-in's name, and looking up a fusion method does not import every LLM SDK)
_PLUGIN_FACTORIES: dict[tuple[str, str], tuple[Callable[..., Any], Any, str]] = {}
_merged: set[str] = set()
_plugin: str | None = None  # the package whose plugin module is being imported
_plugins: dict[str, list[tuple[str, str]]] = {}  # package -> the (kind, name) it registered
_plugins_loaded = False


def register(kind: Kind, name: str, *, profile: Any = None) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorator: ``@register("embedder", "mine")`` on a factory ``(config) -> provider``;
    ``profile``: how the chain drives what the factory builds (LLMs)."""

    def deco(factory: Callable[..., Any]) -> Callable[..., Any]:
        # xlrag's own modules may first be imported by a plugin's import: theirs stay built-ins
        if _plugin is not None and not factory.__module__.startswith("xlrag."):
            if (kind, name) in _PLUGIN_FACTORIES:
                _taken(_plugin, kind, name, f"plugin package {_PLUGIN_FACTORIES[(kind, name)][2]!r}")
            else:
                _PLUGIN_FACTORIES[(kind, name)] = (factory, profile, _plugin)
            return factory
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
    if kind not in _loaded:
        for mod in _BUILTIN_MODULES.get(kind, ()):
            importlib.import_module(mod)
        _loaded.add(kind)
    if not _plugins_loaded:
        _load_plugins()
    if kind not in _merged:
        _merged.add(kind)
        for (k, name), (factory, prof, package) in _PLUGIN_FACTORIES.items():
            if k != kind:
                continue
            if (k, name) in _FACTORIES:
                _taken(package, k, name, "xlrag")
                continue
            _FACTORIES[(k, name)] = factory
            if prof is not None:
                _PROFILES[(k, name)] = prof
            _plugins[package].append((k, name))


def _taken(package: str, kind: str, name: str, owner: str) -> None:
    warnings.warn(f"xlrag plugin package {package!r} registers the {kind} {name!r}, which {owner} already has: "
                  f"ignored (rename it in {package})", PluginWarning, stacklevel=4)


def _load_plugins() -> None:
    """Import every ``xlrag.plugins`` entry point once; what they register joins a kind when that
    kind's built-ins are loaded (:func:`_load_builtins`)."""
    global _plugin, _plugins_loaded
    from importlib.metadata import entry_points

    _plugins_loaded = True
    for ep in entry_points(group=PLUGIN_GROUP):
        package = ep.dist.name if ep.dist is not None else ep.value.split(":")[0]
        _plugins.setdefault(package, [])
        _plugin = package
        try:
            ep.load()
        except Exception as e:  # a plugin's import may raise anything; xlrag starts without it
            warnings.warn(f"xlrag plugin {ep.name!r} of package {package!r} failed to load "
                          f"({type(e).__name__}: {str(e)[:160]}): skipped; fix or uninstall {package}",
                          PluginWarning, stacklevel=3)
        finally:
            _plugin = None


def plugins() -> dict[str, list[tuple[str, str]]]:
    """The installed plugin packages and the ``(kind, name)`` each registered (every kind's
    built-ins are loaded to tell which names a plugin could not take)."""
    for kind in _BUILTIN_MODULES:
        _load_builtins(kind)
    return {package: list(names) for package, names in _plugins.items()}


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
