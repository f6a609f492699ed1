"""Fault injection: clocks that raise or give readings that are not finite floats.

Each faulty reading (an exception, NaN, infinities, None, text, an int too big for
a float, an object) is injected at every one of the six readings of a nested run,
and a process-wide clock fails every time: a bad reading costs its record (and a
failed span start also its end), never the call, and no bad time is written.

Every case checks that the user's code gets its own result or its own exception
(the very object), and that the samples still save, load and flatten
(``assert_loadable``). Injected faults are counted for ``test_tracing_faults_total.py``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pytest

from slime_trace_widget.tracing import (
    set_clock,
    trace_event,
    trace_next_attempt,
    trace_span,
    use_clock,
)
from tests.support.trace_faults import Result, assert_loadable, inject
from tests.support.traced_samples import FakeSample, events_of

pytestmark = pytest.mark.usefixtures("isolated_context")


def _fault_clock(fault: Callable[[], Any], failing_call: int) -> Callable[[], Any]:
    """A clock that ticks normally except on call number ``failing_call``."""
    calls = iter(range(10**9))

    def now() -> Any:
        call = next(calls)
        return fault() if call == failing_call else 1_700_000_000.0 + call

    return now


def _raise_os_error() -> Any:
    raise OSError("clock gone")


CLOCK_FAULTS: dict[str, Callable[[], Any]] = {
    "raises": _raise_os_error,
    "NaN": lambda: float("nan"),
    "inf": lambda: float("inf"),
    "-inf": lambda: -float("inf"),
    "None": lambda: None,
    "text": lambda: "soon",
    "too big for a float": lambda: 10**400,
    "object": object,
}
#: Clock readings in :func:`_clocked_work`: outer start, inner start, event, attempt,
#: inner end, outer end.
CLOCK_CALLS = 6
SPAN_START_CALLS = (0, 1)


def _clocked_work(sample: FakeSample) -> Result:
    with trace_span(sample, "outer") as outer:
        with trace_span(sample, "inner"):
            trace_event(sample, "tick")
            trace_next_attempt(sample)
        outer.set("k", 1)
    return Result()


@pytest.mark.parametrize("fault", list(CLOCK_FAULTS))
def test_faulty_clock_at_every_reading(fault, tmp_path):
    samples = []
    for failing_call in range(CLOCK_CALLS):
        sample = FakeSample(index=failing_call)
        samples.append(sample)
        inject(f"clock: {fault}")
        with use_clock(_fault_clock(CLOCK_FAULTS[fault], failing_call)):
            assert isinstance(_clocked_work(sample), Result)
        events = events_of(sample)
        # The failed reading costs its record; a span whose start failed also loses its end.
        assert len(events) == CLOCK_CALLS - (2 if failing_call in SPAN_START_CALLS else 1)
        assert all(isinstance(e["ts"], float) and math.isfinite(e["ts"]) for e in events)
    assert_loadable(samples, tmp_path / "clock.pt")


def test_process_clock_that_always_fails(tmp_path):
    sample = FakeSample()
    previous = set_clock(_raise_os_error)
    try:
        inject("process-wide clock raising", CLOCK_CALLS)
        assert isinstance(_clocked_work(sample), Result)
    finally:
        set_clock(previous)
    assert sample.trace["attempt"] == 1
    assert events_of(sample) == []
    assert_loadable([sample], tmp_path / "no_clock.pt")
