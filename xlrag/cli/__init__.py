"""The ``xlrag`` command line (typer + rich): one module per command group."""

from __future__ import annotations

import sys

from xlrag.cli import (  # noqa: F401  (register commands)
    answering,
    chatting,
    demo,
    evaluating,
    experiments,
    indexing,
    judging,
    models,
    prompts,
    retrieving,
    robustness,
    serving,
)
from xlrag.cli._app import app, err

__all__ = ["app", "main"]


def main() -> None:
    try:
        app()
    except KeyboardInterrupt:
        err.print("interrupted; re-run the same command to resume")
        sys.exit(130)


if __name__ == "__main__":
    main()
