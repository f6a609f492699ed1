"""The clock records are stamped with: ``set_clock`` sets it for the process,
``use_clock`` for the current context only, so concurrent simulations keep their own."""

from __future__ import annotations

import asyncio

from slime_trace_widget.tracing import get_clock, set_clock, trace_event, trace_span, use_clock
from tests.support.traced_samples import FakeSample, events_of


def test_set_clock_is_global_and_use_clock_is_per_context():
    previous = set_clock(lambda: 5.0)
    try:
        sample = FakeSample()
        trace_event(sample, "global")
        with use_clock(lambda: 9.0):
            assert get_clock()() == 9.0
            trace_event(sample, "context")
    finally:
        assert set_clock(previous)() == 5.0
    assert get_clock() is previous
    assert [e["ts"] for e in events_of(sample)] == [5.0, 9.0]


def test_concurrent_simulations_keep_separate_clocks():
    samples = {"a": FakeSample(index=0), "b": FakeSample(index=1)}

    async def simulate(tag: str, now: float) -> None:
        with use_clock(lambda: now):
            await asyncio.sleep(0)
            with trace_span(samples[tag], "step"):
                await asyncio.sleep(0)

    async def main() -> None:
        await asyncio.gather(simulate("a", 1.0), simulate("b", 2.0))

    asyncio.run(main())
    assert {e["ts"] for e in events_of(samples["a"])} == {1.0}
    assert {e["ts"] for e in events_of(samples["b"])} == {2.0}
