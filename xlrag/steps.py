"""A procedure written once, run blocking or on an event loop.

xlrag's checks and views used to be written twice: a ``check`` and an ``acheck`` that said the
same thing, one with ``invoke`` and one with ``await ainvoke`` and ``asyncio.gather``, and they
drifted. Here the procedure is a generator that *yields* the calls it needs (a :class:`Call`,
or several at once as :class:`Together`) and is sent back each result; an exception a call
raised is thrown in at the ``yield``, so ``try``/``except`` reads as it would around the call.
:func:`run` makes each call in turn; :func:`arun` awaits them, and runs the parts of a
:class:`Together` concurrently. Only the calls themselves (a model's ``invoke``/``ainvoke``) keep
two bodies, which is what langchain-core asks of a Runnable.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Generator, Sequence
from typing import Any, NamedTuple, TypeVar

__all__ = ["Call", "Steps", "Together", "arun", "run"]

T = TypeVar("T")


class Call(NamedTuple):
    """``fn(*args)``, or on an event loop ``await afn(*args)``; without ``afn`` the blocking
    ``fn`` runs in a thread, so the loop is never blocked."""

    fn: Callable[..., Any]
    args: tuple[Any, ...] = ()
    afn: Callable[..., Awaitable[Any]] | None = None


class Together(NamedTuple):
    """Parts whose results come back as one list, in order: each a :class:`Call` or a
    procedure of its own. :func:`arun` runs them concurrently, :func:`run` one after another;
    either way the exception of the first part in order that failed is thrown in at the
    ``yield`` (:func:`run` makes no later call; :func:`arun` has made them all)."""

    parts: Sequence[Call | Generator[Any, Any, Any]]


Step = Call | Together
Steps = Generator[Step, Any, T]


def run(steps: Steps[T]) -> T:
    """The procedure's result, making its calls in turn (the blocking path)."""
    value: Any = None
    error: BaseException | None = None
    while True:
        try:
            step = steps.throw(error) if error is not None else steps.send(value)
        except StopIteration as stop:
            return stop.value
        try:
            value, error = _do(step), None
        except Exception as e:
            value, error = None, e


def _do(step: Step) -> Any:
    if isinstance(step, Call):
        return step.fn(*step.args)
    return [_do(p) if isinstance(p, Call) else run(p) for p in step.parts]


async def arun(steps: Steps[T]) -> T:
    """The procedure's result, awaiting its calls (the parts of a :class:`Together` at once)."""
    value: Any = None
    error: BaseException | None = None
    while True:
        try:
            step = steps.throw(error) if error is not None else steps.send(value)
        except StopIteration as stop:
            return stop.value
        try:
            value, error = await _ado(step), None
        except Exception as e:
            value, error = None, e


async def _ado(step: Step) -> Any:
    if isinstance(step, Call):
        if step.afn is not None:
            return await step.afn(*step.args)
        return await asyncio.to_thread(step.fn, *step.args)
    results = await asyncio.gather(*(_ado(p) if isinstance(p, Call) else arun(p) for p in step.parts),
                                   return_exceptions=True)
    # the first failing part in order, whichever failed first in time: as run() would raise
    failed = next((r for r in results if isinstance(r, BaseException)), None)
    if failed is not None:
        raise failed
    return results
