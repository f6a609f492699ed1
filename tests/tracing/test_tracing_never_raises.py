"""Tracing never raises into the traced code: the common failures, one by one.

A carrier or handle replaced mid-span, events that are not a list, raising
getters, attribute values that are not picklable, samples that refuse attributes,
``None`` targets, a failing clock and non-mapping attributes: the traced code
gets its result, and the failure is logged at debug level on the tracing logger.
``test_tracing_faults_*.py`` attacks the same promise systematically.
"""

from __future__ import annotations

import math
import threading
from typing import Any

import numpy as np
import pytest
import torch

from slime_trace_widget.tracing import (
    TRACE_CHILDREN_KEY,
    TraceHandle,
    bind_trace,
    export_trace,
    merge_trace,
    trace_event,
    trace_function,
    trace_next_attempt,
    trace_span,
    use_clock,
)
from tests.support.traced_samples import FakeSample, SlottedSample, events_of, span_pair
from tests.support.traced_samples import assert_logged as _assert_logged


def test_carrier_replaced_by_a_non_dict_mid_span(debug_log):
    sample = FakeSample()
    with trace_span(sample, "outer") as span:
        sample.trace = "corrupted by user code"
        with trace_span(sample, "inner"):
            trace_event(sample, "event")
        trace_next_attempt(sample)
        span.set("k", 1)
    assert sample.trace == "corrupted by user code"


def test_handle_carrier_replaced_mid_span(debug_log):
    handle = bind_trace(FakeSample())
    with trace_span(handle, "outer"):
        handle.carrier = None
        trace_event(handle, "event")
        trace_next_attempt(handle)
    _assert_logged(debug_log)


@pytest.mark.parametrize("events", ["oops", ("a",), 42])
def test_events_that_are_not_a_list(debug_log, events):
    sample = {"index": 0, "trace": {"trace_id": "t", "events": events, "attempt": 0}}

    @trace_function("work", target="sample")
    def work(sample: dict) -> int:
        trace_event(sample, "tick")
        return 5

    assert work(sample) == 5
    assert sample["trace"]["events"] == events
    _assert_logged(debug_log)


def test_raising_getters_leave_the_call_alone(debug_log):
    def explode(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("getter failed")

    @trace_function("by_getter", target_getter=explode)
    def by_getter(sample: FakeSample) -> str:
        return "ran"

    @trace_function("attrs", target="sample", attrs_getter=explode)
    def with_attrs(sample: FakeSample) -> str:
        return "ran"

    sample = FakeSample()
    assert by_getter(sample) == "ran"
    assert with_attrs(sample) == "ran"
    start, end = span_pair(sample, "attrs")
    assert "attrs" not in start
    assert end is not None
    _assert_logged(debug_log)


def test_odd_attr_values_are_kept_picklable(tmp_path):
    class Local:
        pass

    sample = FakeSample()
    lock = threading.Lock()
    odd = {
        "fn": lambda x: x,
        "obj": object(),
        "local": Local(),
        "lock": lock,
        "nested": {"fn": print, "ok": [1, 2]},
        "array": np.arange(3),
        "tensor": torch.ones(2),
        "scalar": np.float32(1.5),
        "nan": float("nan"),
        7: "int key",
    }
    with trace_span(sample, "odd", attrs=odd) as span:
        span.update(odd)
        trace_event(sample, "odd_event", attrs=odd)
        span.update(["not", "a", "mapping"])
        span.update({TRACE_CHILDREN_KEY: [{"type": "span", "name": "x"}, 5, None]})
        span.set(["unhashable"], 1)

    start, end = span_pair(sample, "odd")
    assert start["attrs"]["fn"].startswith("<function")
    assert start["attrs"]["lock"].startswith("<unlocked _thread.lock")
    assert start["attrs"]["7"] == "int key"
    assert start["attrs"]["nested"] == {"fn": "<built-in function print>", "ok": [1, 2]}
    assert start["attrs"]["array"] == [0, 1, 2]
    assert start["attrs"]["tensor"] == [1.0, 1.0] and start["attrs"]["scalar"] == 1.5
    assert math.isnan(end["attrs"]["nan"])
    path = tmp_path / "odd.pt"
    torch.save({"samples": [sample]}, path)
    loaded = torch.load(path, weights_only=False)["samples"][0]
    assert len(events_of(loaded)) == len(events_of(sample))


def test_samples_that_refuse_attributes_and_none_targets(debug_log):
    slotted = SlottedSample()

    @trace_function("work", target="sample")
    def work(sample: Any) -> str:
        return "ran"

    assert work(slotted) == "ran"
    assert work(None) == "ran"
    with trace_span(None, "nothing") as span:
        span.set("k", 1)
    trace_event(None, "nothing")
    trace_next_attempt(None)
    assert span.span_ids == ()
    assert isinstance(bind_trace(slotted), TraceHandle)
    assert export_trace(None)["trace_id"] is None
    assert merge_trace(None, {"events": []}) == 0
    _assert_logged(debug_log)


def test_a_failing_clock_loses_records_not_the_call(debug_log):
    def broken() -> float:
        raise OSError("clock gone")

    sample = FakeSample()
    with use_clock(broken), trace_span(sample, "s"):
        trace_event(sample, "e")
        result = "ran"
    assert result == "ran"
    assert events_of(sample) == []
    _assert_logged(debug_log)


def test_non_mapping_attrs_are_ignored(debug_log):
    sample = FakeSample()
    with trace_span(sample, "s", attrs=[("a", 1)]):
        trace_event(sample, "e", attrs=np.arange(3))
    assert all("attrs" not in e for e in events_of(sample))
