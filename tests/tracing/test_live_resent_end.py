"""End attributes set after a span's end was sent (``span.set`` after the block): the stream
sends the end record again as ``span_end_resent``, numbered like any record, against an
OTLP sink in the test process; with no stream the carrier alone changes."""

from __future__ import annotations

import pytest

from slime_trace_widget.schema import LIVE_END_RESENT
from slime_trace_widget.tracing import live, trace_span

pytestmark = pytest.mark.usefixtures("no_stream_left")


def ends(sample: dict) -> list[dict]:
    return [r for r in sample["trace"]["events"] if r["type"] == "span_end"]


def test_an_end_given_attributes_after_it_was_sent_is_sent_again(sink) -> None:
    stream = live.install(sink.endpoint)
    live.set_rollout(4)
    samples = [{"index": i, "group_index": 0} for i in range(2)]
    with trace_span(samples, "reward") as span:  # a group: one end per member
        span.set("early", 1)
    sink.wait_for(lambda s: len(s.records()) == 4)
    span.set("late", 2)
    stats = stream.close()
    assert stats.sent == stats.seq == 6 and stats.dropped == stats.queued == 0
    arrived = sink.records()
    assert [attrs["slime.seq"] for attrs, _ in arrived] == list(range(1, 7))
    again = arrived[4:]
    assert [attrs["slime.record"] for attrs, _ in again] == [LIVE_END_RESENT] * 2
    assert [body for _, body in again] == [end for s in samples for end in ends(s)]
    for attrs, body in again:
        assert body["type"] == "span_end" and body["attrs"] == {"early": 1, "late": 2}
        assert attrs["slime.rollout_id"] == 4 and attrs["slime.sample_id"] == body["sample_id"]
    assert len(sink.spans()) == 2  # each span once, as it ended


def test_without_a_stream_a_late_attribute_changes_the_carrier_only(sink) -> None:
    sample = {"index": 0, "group_index": 0}
    stream = live.install(sink.endpoint)
    with trace_span(sample, "reward") as span:
        pass
    before = stream.close()
    span.update({"late": 2})  # the stream has closed: nothing is queued
    assert stream.stats() == before
    assert ends(sample)[0]["attrs"] == {"late": 2}
    assert [attrs["slime.record"] for attrs, _ in sink.records()] == ["span_start", "span_end"]
