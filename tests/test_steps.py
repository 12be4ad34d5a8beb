"""A procedure written once (xlrag/steps.py): the blocking and the event-loop drivers give the
same result and raise at the same ``yield``, and only the loop runs a Together's parts at once."""

from __future__ import annotations

import asyncio
import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from xlrag.steps import Call, Together, arun, run


class Boom(Exception):
    pass


def _double(x: int) -> int:
    if x < 0:
        raise Boom(x)
    return 2 * x


async def _adouble(x: int) -> int:
    await asyncio.sleep(0)
    return _double(x)


def _program(plan: list[list[int]], async_calls: bool):
    """Each round calls _double on its numbers together (a nested procedure for even
    positions), catching a Boom at the yield; returns what it saw."""

    def nested(x: int):
        return (yield Call(_double, (x,), _adouble if async_calls else None))

    seen: list[object] = []
    for numbers in plan:
        parts = [nested(x) if i % 2 == 0 else Call(_double, (x,), _adouble if async_calls else None)
                 for i, x in enumerate(numbers)]
        try:
            seen.append((yield Together(parts)))
        except Boom as e:
            seen.append(("boom", e.args))
    return seen


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.integers(-3, 50), max_size=4), max_size=4), st.booleans())
def test_run_and_arun_agree(plan, async_calls):
    blocking = run(_program(plan, async_calls))
    looped = asyncio.run(arun(_program(plan, async_calls)))
    assert blocking == looped
    assert blocking == [("boom", (next(x for x in r if x < 0),)) if any(x < 0 for x in r) else [2 * x for x in r]
                        for r in plan]


def test_an_uncaught_error_leaves_both_drivers_alike():
    def program():
        yield Call(_double, (-1,))
        return "never"

    with pytest.raises(Boom):
        run(program())
    with pytest.raises(Boom):
        asyncio.run(arun(program()))


def test_only_the_loop_runs_together_at_once():
    async def meet(barrier: asyncio.Barrier) -> str:
        await asyncio.wait_for(barrier.wait(), 5)  # passes only when both parts are in flight
        return "met"

    async def main() -> list[str]:
        barrier = asyncio.Barrier(2)

        def program():
            return (yield Together([Call(lambda: "blocking", (), lambda: meet(barrier)) for _ in range(2)]))

        return await arun(program())

    assert asyncio.run(main()) == ["met", "met"]
    # a blocking call without an async twin runs in a thread, never on the loop itself
    loop_thread = threading.get_ident()

    def where() -> bool:
        return threading.get_ident() != loop_thread

    def off_loop():
        return (yield Call(where))

    assert asyncio.run(arun(off_loop())) is True
    assert run(off_loop()) is False
