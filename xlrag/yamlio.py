"""Reading YAML the user wrote (xlrag.yaml, experiment files, prompt overrides).

PyYAML's ``safe_load`` keeps the last of two equal keys, so ``k: 5`` followed later by
``k: 50`` silently runs with 50; here a repeated key is an error naming both lines.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from xlrag.errors import ConfigError
from xlrag.text import capped

__all__ = ["load_yaml", "read_yaml_file"]


# xlrag's own files nest a few levels; past this, PyYAML's recursive composer (and pydantic
# after it) would hit Python's recursion limit and die with a traceback instead.
MAX_DEPTH = 64


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that refuses a mapping holding the same key twice, and nesting deeper than
    :data:`MAX_DEPTH`."""

    _depth = 0

    def compose_node(self, parent: yaml.Node | None, index: object) -> yaml.Node | None:
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                raise yaml.composer.ComposerError(
                    None, None, f"lists or mappings nested more than {MAX_DEPTH} levels deep; xlrag's settings "
                    f"need only a few levels, so flatten it", self.peek_event().start_mark)
            # PyYAML passes None or the key node as ``index`` under a mapping; its stubs say int
            return super().compose_node(parent, index)  # type: ignore[arg-type]
        finally:
            self._depth -= 1


def _mapping(loader: _StrictLoader, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
    seen: dict[Any, int] = {}
    for key_node, _ in node.value:
        if key_node.tag == "tag:yaml.org,2002:merge":
            continue  # keys merged in with '<<' may be overridden: that is what merging means
        key = loader.construct_object(key_node, deep=deep)
        line = key_node.start_mark.line + 1
        if not isinstance(key, (str, int, float, bool, type(None))):
            continue  # an unhashable key: construct_mapping says so below
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None, None, f"key {capped(key)} appears twice (lines {seen[key]} and {line}); keep one",
                key_node.start_mark)
        seen[key] = line
    return loader.construct_mapping(node, deep=deep)


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping)


def load_yaml(text: str, where: str) -> Any:
    """``text`` parsed, or a one-line :class:`ConfigError` naming ``where`` (invalid YAML, a
    repeated key)."""
    try:
        return yaml.load(text, Loader=_StrictLoader)  # a SafeLoader subclass: no arbitrary objects
    except yaml.YAMLError as e:
        raise ConfigError(f"{where} is not valid YAML: {_describe(e)}") from None
    except RecursionError:  # deep aliases, say: whatever got past the depth check
        raise ConfigError(f"{where} nests too deep to read; xlrag's settings need only a few levels") from None


def _describe(e: yaml.YAMLError) -> str:
    problem, mark = getattr(e, "problem", None), getattr(e, "problem_mark", None)
    if not problem:
        return str(e).splitlines()[0]
    at = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
    return f"{problem}{at}"


def read_yaml_file(path: str | Path, what: str, hint: str = "pass the path of a YAML file") -> Any:
    """The YAML file at ``path`` parsed; a missing file, a directory, unreadable bytes or bad
    YAML is a one-line :class:`ConfigError` naming ``what`` and the path (``hint``: what to
    give instead)."""
    path = Path(path)
    if path.is_dir():
        raise ConfigError(f"{what} {path} is a directory; {hint}")
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{what} {path} does not exist; {hint}") from None
    except UnicodeDecodeError as e:
        raise ConfigError(f"{what} {path} is not UTF-8 text (byte {e.start}); save it as UTF-8") from None
    except OSError as e:
        raise ConfigError(f"{what} {path} cannot be read: {e.strerror}") from None
    return load_yaml(text, str(path))
