"""``trace_function`` on generator and async generator functions: one span per call.

The span starts at the first ``next()`` (or ``asend``) and ends when the generator
finishes, raises (the end gets ``error_type``/``error_message``) or is closed.
Records the body makes are nested under it; the consumer's own records between
two items are not. Values sent and thrown in, and the return value, pass through.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import inspect
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from slime_trace_widget.tracing import trace_event, trace_function, trace_span
from tests.support.traced_samples import FakeSample, events_of, named, span_pair

pytestmark = pytest.mark.usefixtures("isolated_context")


class Boom(ValueError):
    pass


@trace_function("stream", target="sample")
def stream(sample: FakeSample, count: int, fail: bool = False) -> Iterator[int]:
    for index in range(count):
        trace_event(sample, "chunk")
        yield index
    if fail:
        raise Boom("stream broke")


@trace_function("astream", target="sample")
async def astream(sample: FakeSample, count: int, fail: bool = False) -> AsyncIterator[int]:
    for index in range(count):
        await asyncio.sleep(0)
        trace_event(sample, "chunk")
        yield index
    if fail:
        raise Boom("astream broke")


def _order(sample: FakeSample) -> list[tuple[str, str]]:
    return [(e["type"], e["name"]) for e in events_of(sample)]


def _assert_one_span_around_chunks(sample: FakeSample, name: str, chunks: int) -> dict[str, Any]:
    """The span starts before the body's first record and ends after its last one."""
    start, end = span_pair(sample, name)
    assert end is not None
    own = [(t, n) for t, n in _order(sample) if n in (name, "chunk")]
    assert own == [("span_start", name), *[("event", "chunk")] * chunks, ("span_end", name)]
    assert all(e["parent_span_id"] == start["span_id"] for e in named(sample, "chunk"))
    return end


def test_a_generator_span_lasts_until_it_is_exhausted():
    sample = FakeSample()
    assert inspect.isgeneratorfunction(stream)
    with trace_span(sample, "consumer") as consumer:
        for _ in stream(sample, 3):
            trace_event(sample, "consumed")
    end = _assert_one_span_around_chunks(sample, "stream", 3)
    assert "attrs" not in end
    (outer,) = consumer.span_ids
    assert {e["parent_span_id"] for e in named(sample, "consumed")} == {outer}
    assert span_pair(sample, "stream")[0]["parent_span_id"] == outer


def test_a_closed_generator_ends_its_span():
    sample = FakeSample()
    items = stream(sample, 5)
    assert next(items) == 0
    assert named(sample, "stream", "span_end") == []
    items.close()
    end = _assert_one_span_around_chunks(sample, "stream", 1)
    assert "attrs" not in end
    unstarted = stream(sample, 5)
    unstarted.close()
    assert len(named(sample, "stream", "span_start")) == 1


def test_a_generator_that_raises_marks_its_span_and_the_error_propagates():
    sample = FakeSample()
    with pytest.raises(Boom, match="stream broke"):
        list(stream(sample, 2, fail=True))
    end = _assert_one_span_around_chunks(sample, "stream", 2)
    assert end["attrs"] == {"error_type": "Boom", "error_message": "stream broke"}


def test_send_throw_and_return_value_pass_through():
    sample = FakeSample()

    @trace_function("echo", target="sample")
    def echo(sample: FakeSample) -> Iterator[Any]:
        received = yield "ready"
        try:
            yield received
        except Boom as caught:
            yield f"caught {caught}"
        return "finished"

    items = echo(sample)
    assert next(items) == "ready"
    assert items.send("ping") == "ping"
    assert items.throw(Boom("b")) == "caught b"
    with pytest.raises(StopIteration) as stop:
        next(items)
    assert stop.value.value == "finished"
    _, end = span_pair(sample, "echo")
    assert end is not None and "attrs" not in end


def test_an_async_generator_span_lasts_until_it_is_exhausted():
    sample = FakeSample()
    assert inspect.isasyncgenfunction(astream)

    async def consume() -> list[int]:
        with trace_span(sample, "consumer"):
            got = []
            async for item in astream(sample, 3):
                trace_event(sample, "consumed")
                got.append(item)
            return got

    assert asyncio.run(consume()) == [0, 1, 2]
    end = _assert_one_span_around_chunks(sample, "astream", 3)
    assert "attrs" not in end
    (consumer, _) = span_pair(sample, "consumer")
    assert {e["parent_span_id"] for e in named(sample, "consumed")} == {consumer["span_id"]}


def test_a_closed_async_generator_ends_its_span():
    sample = FakeSample()

    async def take_one() -> int:
        items = astream(sample, 5)
        first = await items.__anext__()
        assert named(sample, "astream", "span_end") == []
        await items.aclose()
        return first

    assert asyncio.run(take_one()) == 0
    end = _assert_one_span_around_chunks(sample, "astream", 1)
    assert "attrs" not in end


def test_an_async_generator_that_raises_marks_its_span():
    sample = FakeSample()

    async def drain() -> None:
        async for _ in astream(sample, 2, fail=True):
            pass

    with pytest.raises(Boom, match="astream broke"):
        asyncio.run(drain())
    end = _assert_one_span_around_chunks(sample, "astream", 2)
    assert end["attrs"] == {"error_type": "Boom", "error_message": "astream broke"}


def test_async_send_and_throw_pass_through():
    sample = FakeSample()

    @trace_function("aecho", target="sample")
    async def aecho(sample: FakeSample) -> AsyncIterator[Any]:
        received = yield "ready"
        try:
            yield received
        except Boom as caught:
            yield f"caught {caught}"

    async def drive() -> list[Any]:
        items = aecho(sample)
        got = [await items.asend(None), await items.asend("ping"), await items.athrow(Boom("b"))]
        with pytest.raises(StopAsyncIteration):
            await items.asend(None)
        return got

    assert asyncio.run(drive()) == ["ready", "ping", "caught b"]
    _, end = span_pair(sample, "aecho")
    assert end is not None and "attrs" not in end


def test_a_generator_without_a_target_still_runs():
    @trace_function("untargeted")
    def numbers(count: int) -> Iterator[int]:
        yield from range(count)

    assert list(numbers(3)) == [0, 1, 2]


def test_spans_the_body_keeps_open_across_a_yield_stay_in_the_generator():
    sample = FakeSample()

    @trace_function("pages", target="sample")
    def pages(sample: FakeSample) -> Iterator[int]:
        with trace_span(sample, "page"):
            yield 1
            trace_event(sample, "inside_page")
            yield 2

    with trace_span(sample, "consumer") as consumer:
        for _ in pages(sample):
            trace_event(sample, "consumed")
        trace_event(sample, "after")
    (outer,) = consumer.span_ids
    generator, _ = span_pair(sample, "pages")
    page, page_end = span_pair(sample, "page")
    assert page["parent_span_id"] == generator["span_id"] and page_end is not None
    assert named(sample, "inside_page")[0]["parent_span_id"] == page["span_id"]
    consumer_records = named(sample, "consumed") + named(sample, "after")
    assert {e["parent_span_id"] for e in consumer_records} == {outer}


def _steps_nest_under_the_generator(sample: FakeSample, name: str) -> None:
    """Each ``step<k>`` the body opened around a yield hangs under the generator's span,
    not under the step before it, which had ended."""
    generator, _ = span_pair(sample, name)
    for step in range(3):
        start, end = span_pair(sample, f"step{step}")
        assert end is not None
        assert start["parent_span_id"] == generator["span_id"], f"step{step}"


def test_steps_pulled_through_asyncio_wait_for_nest_under_the_generator():
    """``wait_for`` runs each ``anext`` as a task of its own, so each step of the body
    enters and leaves its span in a different context."""
    sample = FakeSample()

    @trace_function("agen", target="sample")
    async def agen(sample: FakeSample) -> AsyncIterator[int]:
        for step in range(3):
            with trace_span(sample, f"step{step}"):
                await asyncio.sleep(0)
                yield step

    async def consume() -> list[int]:
        items, got = agen(sample), []
        with contextlib.suppress(StopAsyncIteration):
            while True:
                got.append(await asyncio.wait_for(anext(items), 60))
        return got

    assert asyncio.run(consume()) == [0, 1, 2]
    _steps_nest_under_the_generator(sample, "agen")


def test_steps_pulled_in_copied_contexts_nest_under_the_generator():
    sample = FakeSample()

    @trace_function("gen", target="sample")
    def gen(sample: FakeSample) -> Iterator[int]:
        for step in range(3):
            with trace_span(sample, f"step{step}"):
                yield step

    items, got = gen(sample), []
    with contextlib.suppress(StopIteration):
        while True:
            got.append(contextvars.copy_context().run(next, items))
    assert got == [0, 1, 2]
    _steps_nest_under_the_generator(sample, "gen")


def test_a_cancelled_async_generator_leaves_its_span_open():
    sample = FakeSample()
    started = asyncio.Event()

    @trace_function("waiting", target="sample")
    async def waiting(sample: FakeSample) -> AsyncIterator[int]:
        started.set()
        await asyncio.Event().wait()
        yield 1

    async def consume() -> None:
        async for _ in waiting(sample):
            pass

    async def main() -> None:
        task = asyncio.create_task(consume())
        await started.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    _, end = span_pair(sample, "waiting")
    assert end is None
