"""Fault injection: cancellation and timeouts at every await point of nested spans.

A task is cancelled (the cancellation propagating or absorbed) or timed out by
``asyncio.wait_for`` at each of seven await points inside ``with``, ``async with``
and decorated spans: the spans that were open stay open without error attributes,
the ones that finished are ended, and the awaiting code's next span gets the right
parent. A timeout escaping a decorated coroutine is recorded as its error.

Every case checks that the user's code gets its own result or its own exception
(the very object), and that the samples still save, load and flatten
(``assert_loadable``). Injected faults are counted for ``test_tracing_faults_total.py``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from slime_trace_widget.tracing import trace_event, trace_function, trace_span
from tests.support.trace_faults import Result, assert_loadable, assert_well_formed, inject
from tests.support.traced_samples import FakeSample, end_of, events_of, starts

pytestmark = pytest.mark.usefixtures("isolated_context")


#: Spans open at each await point of :func:`_nested_work`, in order.
OPEN_AT = [
    {"outer"},
    {"outer", "middle"},
    {"outer", "middle", "inner"},
    {"outer", "middle", "inner"},
    {"outer", "middle"},
    {"outer"},
    {"outer", "tail"},
]
SPAN_NAMES = {"outer", "middle", "inner", "tail"}


@trace_function("inner", target="sample")
async def _inner_step(sample: FakeSample, checkpoint: Callable[[int], Any]) -> None:
    await checkpoint(2)
    trace_event(sample, "tick")
    await checkpoint(3)


async def _nested_work(sample: FakeSample, stop_at: int, reached: asyncio.Event,
                       absorb: bool = False) -> Result:
    """Nested spans (``with``, ``async with``, a decorated coroutine) with seven await points.

    The await point ``stop_at`` blocks for an hour; every other one yields once.
    With ``absorb`` the cancellation is caught inside the outer span.
    """

    async def checkpoint(point: int) -> None:
        if point == stop_at:
            reached.set()
            await asyncio.sleep(3600)
        await asyncio.sleep(0)

    result = Result()
    async with trace_span(sample, "outer"):
        try:
            await checkpoint(0)
            with trace_span(sample, "middle"):
                await checkpoint(1)
                await _inner_step(sample, checkpoint)
                await checkpoint(4)
            await checkpoint(5)
            with trace_span(sample, "tail"):
                await checkpoint(6)
        except asyncio.CancelledError:
            if not absorb:
                raise
    return result


def _check_cancelled_trace(sample: FakeSample, stop_at: int, absorbed: bool) -> None:
    open_names = OPEN_AT[stop_at] - ({"outer"} if absorbed else set())
    started = {e["name"] for e in events_of(sample) if e["type"] == "span_start"}
    for name in started & SPAN_NAMES:
        (start,) = starts(sample, name)
        end = end_of(sample, start)
        assert (end is None) == (name in open_names), (stop_at, name)
        assert end is None or "error_type" not in end.get("attrs", {})
    assert_well_formed(sample)


@pytest.mark.parametrize("absorb", [False, True], ids=["propagates", "absorbed"])
@pytest.mark.parametrize("stop_at", range(len(OPEN_AT)))
def test_cancellation_at_every_await_point(stop_at, absorb, tmp_path):
    sample = FakeSample()
    outcome: dict[str, Any] = {}

    async def driver() -> None:
        reached = asyncio.Event()
        with trace_span(sample, "driver") as driver_span:
            task = asyncio.create_task(_nested_work(sample, stop_at, reached, absorb))
            await reached.wait()
            inject("task cancelled at an await point")
            task.cancel()
            try:
                outcome["result"] = await task
            except asyncio.CancelledError:
                outcome["cancelled"] = task.cancelled()
            with trace_span(sample, "after"):
                pass
        outcome["driver"] = driver_span.span_ids[0]

    asyncio.run(driver())

    if absorb:
        assert isinstance(outcome["result"], Result)
    else:
        assert outcome["cancelled"] is True
    (after,) = starts(sample, "after")
    assert after["parent_span_id"] == outcome["driver"]
    assert starts(sample, "outer")[0]["parent_span_id"] == outcome["driver"]
    _check_cancelled_trace(sample, stop_at, absorb)
    assert_loadable([sample], tmp_path / "cancelled.pt")


@pytest.mark.parametrize("stop_at", range(len(OPEN_AT)))
def test_wait_for_timeout_at_every_await_point(stop_at, tmp_path):
    sample = FakeSample()

    async def main() -> TimeoutError:
        with trace_span(sample, "deadline") as deadline:
            inject("asyncio.wait_for timeout")
            try:
                await asyncio.wait_for(_nested_work(sample, stop_at, asyncio.Event()), 0.02)
            except TimeoutError as exc:
                deadline.set("timed_out", True)
                caught = exc
            with trace_span(sample, "after"):
                pass
        return caught

    assert isinstance(asyncio.run(main()), TimeoutError)
    (deadline,) = starts(sample, "deadline")
    assert end_of(sample, deadline)["attrs"] == {"timed_out": True}
    assert starts(sample, "after")[0]["parent_span_id"] == deadline["span_id"]
    _check_cancelled_trace(sample, stop_at, absorbed=False)
    assert_loadable([sample], tmp_path / "timeout.pt")


def test_timeout_escaping_a_traced_span_is_recorded_as_an_error():
    """TimeoutError is an ``Exception``: the span around ``wait_for`` ends with it."""
    sample = FakeSample()

    @trace_function("bounded", target="sample")
    async def bounded(sample: FakeSample) -> None:
        await asyncio.wait_for(asyncio.sleep(3600), 0.01)

    inject("wait_for timeout through a decorated coroutine")
    with pytest.raises(TimeoutError):
        asyncio.run(bounded(sample))
    (start,) = starts(sample, "bounded")
    assert end_of(sample, start)["attrs"]["error_type"] == "TimeoutError"
