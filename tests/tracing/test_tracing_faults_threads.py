"""Fault injection: threads racing on shared samples and spans.

Sixteen threads write group spans, member spans, events and end attributes into
one group (in their own context or a copy of the caller's), bump attempts and bind
fresh samples at once; a span ends in another thread than it started in; a span
gets a new attribute while its end record is being written. Nothing is lost,
every parent resolves.

Every case checks that the user's code gets its own result or its own exception
(the very object), and that the samples still save, load and flatten
(``assert_loadable``). Injected faults are counted for ``test_tracing_faults_total.py``.
"""

from __future__ import annotations

import contextvars
import sys
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from slime_trace_widget.tracing import trace_event, trace_next_attempt, trace_span
from tests.support.trace_faults import Result, assert_loadable, assert_well_formed, inject
from tests.support.traced_samples import FakeSample, end_of, events_of, starts

pytestmark = pytest.mark.usefixtures("isolated_context")

THREADS = 16
PER_THREAD = 60
GROUP_SIZE = 8


def _thread_work(group: list[FakeSample], group_span: Any, worker: int) -> int:
    """Group spans, member spans, events and end attributes, all into the shared group."""
    for step in range(PER_THREAD):
        member = group[(worker + step) % len(group)]
        with trace_span(group, "group_step", attrs={"worker": worker}) as group_step:
            with trace_span(member, "member_step", attrs={"worker": worker}):
                trace_event(member, "tick", {"worker": worker})
                group_span.set(f"w{worker}_{step}", step)
            group_step.set("step", step)
        trace_event(group, "group_tick", {"worker": worker})
    return worker


@pytest.mark.parametrize("inherit", [False, True], ids=["own-context", "copy_context"])
def test_sixteen_threads_write_into_one_group(inherit, tmp_path):
    group = [FakeSample(index=i, group_index=0) for i in range(GROUP_SIZE)]
    previous = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)  # switch threads often so that races get a chance
    try:
        with trace_span(group, "group_generate") as group_span, ThreadPoolExecutor(
            THREADS
        ) as pool:
            if inherit:
                futures = [pool.submit(contextvars.copy_context().run, _thread_work, group,
                                       group_span, worker) for worker in range(THREADS)]
            else:
                futures = [pool.submit(_thread_work, group, group_span, worker)
                           for worker in range(THREADS)]
            assert [future.result() for future in futures] == list(range(THREADS))
    finally:
        sys.setswitchinterval(previous)
    inject("concurrent writer threads", THREADS)

    for member in group:
        assert_well_formed(member)
        events = events_of(member)
        by_id = {e["span_id"]: e for e in events if e["type"] == "span_start"}
        (root,) = starts(member, "group_generate")
        assert len(end_of(member, root)["attrs"]) == THREADS * PER_THREAD
        assert len(starts(member, "group_step")) == THREADS * PER_THREAD
        assert sum(e["name"] == "group_tick" for e in events) == THREADS * PER_THREAD
        for start in starts(member, "group_step"):
            expected = root["span_id"] if inherit else None
            assert start.get("parent_span_id") == expected
            assert end_of(member, start)["attrs"]["step"] < PER_THREAD
        for start in starts(member, "member_step"):
            parent = by_id[start["parent_span_id"]]
            assert parent["name"] == "group_step"
            assert parent["attrs"]["worker"] == start["attrs"]["worker"]
        for tick in (e for e in events if e["name"] == "tick"):
            parent = by_id[tick["parent_span_id"]]
            assert parent["name"] == "member_step"
            assert parent["attrs"]["worker"] == tick["attrs"]["worker"]
    member_steps = sum(len(starts(member, "member_step")) for member in group)
    assert member_steps == THREADS * PER_THREAD
    frames = assert_loadable(group, tmp_path / "threads.pt")
    assert len(frames.span_core) == sum(
        sum(e["type"] == "span_start" for e in events_of(m)) for m in group)


def test_threads_bumping_attempts_and_binding_fresh_samples():
    fresh = [FakeSample(index=i) for i in range(GROUP_SIZE)]

    def work(worker: int) -> int:
        for _ in range(PER_THREAD):
            trace_next_attempt(fresh, {"worker": worker})
        return worker

    with ThreadPoolExecutor(THREADS) as pool:
        assert list(pool.map(work, range(THREADS))) == list(range(THREADS))
    inject("concurrent attempt-bumping threads", THREADS)
    for sample in fresh:
        assert sample.trace["attempt"] == THREADS * PER_THREAD
        attempts = sorted(e["attrs"]["attempt"] for e in events_of(sample))
        assert attempts == list(range(1, THREADS * PER_THREAD + 1))


def test_span_closed_in_another_thread_does_not_raise(tmp_path):
    """A span handed to a worker thread and ended there: recorded, nothing raised."""
    sample = FakeSample()

    def scenario() -> None:
        span = trace_span(sample, "handoff")
        span.__enter__()
        with ThreadPoolExecutor(1) as pool:
            assert pool.submit(span.__exit__, None, None, None).result() is False

    inject("span exited in another thread")
    contextvars.copy_context().run(scenario)
    (start,) = starts(sample, "handoff")
    assert end_of(sample, start) is not None
    assert_loadable([sample], tmp_path / "handoff.pt")


class SetsDuringPickling:
    """An attribute value whose pickling (done when the end record is cleaned) calls span.set.

    Deterministically reproduces another thread calling ``span.set`` while the span ends.
    """

    def __init__(self, span: Any) -> None:
        self.span = span

    def __reduce__(self) -> Any:
        self.span.set(f"late_{id(self)}", 1)
        return (Result, ())


def test_span_set_while_the_end_record_is_written():
    """Regression: the end attrs were iterated live, so a concurrent ``set`` lost the end."""
    sample = FakeSample()
    inject("end attrs changed while being recorded")
    with trace_span(sample, "racing") as span:
        span.set("value", SetsDuringPickling(span))
    (start,) = starts(sample, "racing")
    end = end_of(sample, start)
    assert end is not None
    assert "value" in end["attrs"]
