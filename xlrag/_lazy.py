"""Package attributes that import their module on first use (keeps ``import xlrag`` light)."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Mapping
from typing import Any


def lazy_exports(package: str, table: Mapping[str, str],
                 public: Iterable[str] | None = None) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``__getattr__`` and ``__dir__`` for ``package``, from a name -> owning module table;
    ``__dir__`` lists ``public`` (the package's ``__all__``), or the table's names."""
    names = sorted(public if public is not None else table)

    def __getattr__(name: str) -> Any:
        module = table.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(module), name)

    def __dir__() -> list[str]:
        return list(names)

    return __getattr__, __dir__


def moved(module: str, table: Mapping[str, str], removed_in: str = "0.2") -> Callable[[str], Any]:
    """``__getattr__`` for ``module`` whose names in ``table`` moved to the module each maps
    to (``"module:NewName"`` when renamed too): they resolve for one release with a warning
    naming the new place. The new place may stand higher (a name moved up to the floor that can
    build it); the floor test (``tests/test_layers.py``) lists each such table."""

    def __getattr__(name: str) -> Any:
        target = table.get(name)
        if target is None:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        import warnings

        from xlrag.errors import XlragDeprecationWarning

        # "module:NewName": the name was renamed as well as moved
        owner, _, new = target.partition(":")
        new = new or name
        warnings.warn(f"{module}.{name} moved: use {owner}.{new} (the old name goes in {removed_in})",
                      XlragDeprecationWarning, stacklevel=2)
        return getattr(importlib.import_module(owner), new)

    return __getattr__
