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

