"""How a span ends when its code does not return normally, and how retries are marked.

An exception ends the span with ``error_type`` and ``error_message`` (truncated,
and survived when the exception cannot be printed) and is re-raised untouched;
cancellation, timeouts, ``KeyboardInterrupt`` and ``GeneratorExit`` leave the span
open and give the next span its old parent back. ``trace_next_attempt`` numbers
the attempts, also with a span open across one and on a whole group.
"""

from __future__ import annotations

import asyncio

import pytest

from slime_trace_widget.tracing import MAX_ERROR_MESSAGE_CHARS, trace_next_attempt, trace_span
from tests.support.traced_samples import FakeSample, named, span_pair

# --------------------------------------------------------------------------- errors, cancellation


def test_exception_records_error_attrs_and_reraises():
    sample = FakeSample()
    with pytest.raises(ValueError, match="bad tool"), trace_span(sample, "tool") as span:
        span.set("turn", 2)
        raise ValueError("bad tool")
    _, end = span_pair(sample, "tool")
    assert end["attrs"] == {"turn": 2, "error_type": "ValueError", "error_message": "bad tool"}


def test_record_error_false_ends_the_span_without_error_attrs():
    sample = FakeSample()
    with pytest.raises(KeyError), trace_span(sample, "lookup", record_error=False):
        raise KeyError("x")
    _, end = span_pair(sample, "lookup")
    assert end is not None
    assert "attrs" not in end


def test_error_message_is_truncated_and_unprintable_errors_are_survived():
    class Unprintable(Exception):
        def __str__(self) -> str:
            raise RuntimeError("no str")

    sample = FakeSample()
    with pytest.raises(RuntimeError), trace_span(sample, "long"):
        raise RuntimeError("x" * 10_000)
    with pytest.raises(Unprintable), trace_span(sample, "odd"):
        raise Unprintable()

    message = span_pair(sample, "long")[1]["attrs"]["error_message"]
    assert message.startswith("x" * MAX_ERROR_MESSAGE_CHARS)
    assert len(message) < MAX_ERROR_MESSAGE_CHARS + 40
    odd = span_pair(sample, "odd")[1]["attrs"]
    assert odd["error_type"] == "Unprintable"
    assert "Unprintable" in odd["error_message"]


def test_cancelled_task_leaves_its_span_open_and_restores_the_parent():
    sample = FakeSample()

    async def main() -> None:
        started = asyncio.Event()

        async def doomed() -> None:
            async with trace_span(sample, "doomed"):
                started.set()
                await asyncio.sleep(10)

        with trace_span(sample, "outer"):
            task = asyncio.create_task(doomed())
            await started.wait()
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            with trace_span(sample, "after"):
                pass
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(doomed_again(), timeout=0.01)

    async def doomed_again() -> None:
        with trace_span(sample, "timed_out"):
            await asyncio.sleep(10)

    asyncio.run(main())
    outer, _ = span_pair(sample, "outer")
    doomed, doomed_end = span_pair(sample, "doomed")
    after, _ = span_pair(sample, "after")
    timed_out, timed_out_end = span_pair(sample, "timed_out")
    assert doomed["parent_span_id"] == outer["span_id"]
    assert doomed_end is None
    assert timed_out_end is None
    assert "parent_span_id" not in timed_out
    assert after["parent_span_id"] == outer["span_id"]


def test_keyboard_interrupt_and_generator_exit_leave_spans_open():
    sample = FakeSample()
    with pytest.raises(KeyboardInterrupt), trace_span(sample, "interrupted"):
        raise KeyboardInterrupt

    def stream():
        with trace_span(sample, "streaming"):
            yield 1
            yield 2

    generator = stream()
    next(generator)
    generator.close()
    with trace_span(sample, "next"):
        pass

    assert span_pair(sample, "interrupted")[1] is None
    assert span_pair(sample, "streaming")[1] is None
    assert "parent_span_id" not in span_pair(sample, "next")[0]


# --------------------------------------------------------------------------- retries


def test_span_open_across_next_attempt_starts_and_ends_in_different_attempts():
    sample = FakeSample()
    with trace_span(sample, "generate_and_rm"):
        trace_next_attempt(sample, {"reason": "engine_abort", "attempt": 99})
        with trace_span(sample, "sglang_generate"):
            pass
    trace_next_attempt(sample)

    start, end = span_pair(sample, "generate_and_rm")
    assert (start["attempt"], end["attempt"]) == (0, 1)
    first, second = named(sample, "attempt_start")
    assert first["attrs"] == {"attempt": 1, "reason": "engine_abort"}
    assert list(first["attrs"]) == ["attempt", "reason"]
    assert first["attempt"] == 1
    assert first["parent_span_id"] == start["span_id"]
    assert span_pair(sample, "sglang_generate")[0]["attempt"] == 1
    assert second["attrs"] == {"attempt": 2}
    assert sample.trace["attempt"] == 2


def test_next_attempt_on_a_group_bumps_every_member():
    group = [FakeSample(index=i) for i in range(3)]
    trace_next_attempt(group)
    assert [s.trace["attempt"] for s in group] == [1, 1, 1]
