"""Records in the edge cases where slime's own trace_utils decides what is written:
a child given alone, a child that ends before it starts, a finish reason without a
type; and a record listener that fails, which must cost no record."""

from __future__ import annotations

from typing import Any

import pytest

from slime_trace_widget.tracing import build_sglang_meta_trace_attrs, carriers, trace_span
from tests.support.traced_samples import FakeSample, events_of, span_pair


def test_a_child_given_alone_is_written_and_one_ending_before_it_starts_is_not():
    sample = FakeSample(index=0)
    with trace_span(sample, "generate") as span:
        span.update({"_trace_children": {"type": "span", "name": "alone",
                                         "start_offset": 0.1, "end_offset": 0.2}})
        span.update({"_trace_children": [
            {"type": "span", "name": "backwards", "start_offset": 2.0, "end_offset": 0.5},
            {"type": "span", "name": "no_time", "start_offset": 0.0,
             "end_offset": float("nan")}]})
    start, end = span_pair(sample, "alone")
    assert end["ts"] - start["ts"] == pytest.approx(0.1, abs=1e-6)  # epoch seconds: µs apart
    names = {event["name"] for event in events_of(sample)}
    assert "backwards" not in names and "no_time" not in names


@pytest.mark.parametrize("reason, kept", [
    ({"type": "length", "length": 3}, "length"),
    ({"matched": 128009, "length": 3}, {"matched": 128009, "length": 3}),
    ({"type": None, "message": "aborted"}, {"type": None, "message": "aborted"}),
    ("stop", "stop"),
])
def test_a_finish_reason_is_its_type_or_else_kept_whole(reason: Any, kept: Any):
    assert build_sglang_meta_trace_attrs({"finish_reason": reason})["finish_reason"] == kept


def test_a_failing_listener_costs_no_record(monkeypatch):
    calls = []

    def listener(record: dict) -> Any:
        calls.append(record["type"])
        if len(calls) == 1:
            raise RuntimeError("listener broke")
        return len(calls)

    monkeypatch.setattr(carriers, "_record_listener", listener)
    group = [FakeSample(index=i) for i in range(3)]
    with trace_span(group, "group_rm"):
        pass
    for member in group:
        start, end = span_pair(member, "group_rm")
        assert start is not None and end is not None
    assert len(calls) == 6
