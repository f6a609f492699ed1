"""What tracing writes must be slime's own records, key by key.

The reference is ``tests/fixtures/small.pt`` (written by slime's tracing code): the
carrier a sample is bound to (object or dict, fresh or partial) and the key
sequence of every record type are compared against it. Records carry their
carrier's identity, the clock's time and copies of their attributes; span ids are
uuid4 hex; traced samples survive ``torch.save`` and ``torch.load``.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
import torch

from slime_trace_widget import tracing
from slime_trace_widget.tracing import (
    bind_trace,
    build_sglang_meta_trace_attrs,
    trace_event,
    trace_span,
    use_clock,
)
from tests.support.traced_samples import FIXTURES, FakeSample, events_of, span_pair, step_clock


@pytest.fixture(scope="module")
def fixture_samples() -> list[dict[str, Any]]:
    return torch.load(FIXTURES / "small.pt", weights_only=False)["samples"]


def test_new_carrier_has_the_fixture_layout(fixture_samples):
    sample = FakeSample(index=12, group_index=3)
    handle = bind_trace(sample)

    assert list(sample.trace) == list(fixture_samples[0]["trace"])
    assert sample.trace == {
        "version": 1,
        "trace_id": handle.trace_id,
        "events": [],
        "sample_id": 12,
        "group_id": 3,
        "attempt": 0,
    }
    assert uuid.UUID(handle.trace_id).version == 4
    assert uuid.UUID(handle.trace_id).hex == handle.trace_id
    assert bind_trace(sample).carrier is sample.trace


def test_dict_samples_get_their_carrier_under_trace():
    sample = {"index": 5, "group_index": 2}
    with trace_span(sample, "generate"):
        pass
    assert sample["trace"]["sample_id"] == 5
    assert sample["trace"]["group_id"] == 2
    assert [e["type"] for e in events_of(sample)] == ["span_start", "span_end"]


def test_a_carrier_passed_as_target_is_written_directly():
    sample = FakeSample()
    bind_trace(sample)
    with trace_span(sample.trace, "direct"):
        pass
    assert "trace" not in sample.trace
    assert [e["name"] for e in events_of(sample)] == ["direct", "direct"]


@pytest.mark.parametrize("existing", [None, {}, {"trace_id": "abc", "events": None}])
def test_missing_or_partial_carriers_are_completed(existing):
    sample = {"index": 1, "group_index": 0, "trace": existing}
    handle = bind_trace(sample)
    carrier = sample["trace"]
    assert handle.carrier is carrier
    assert carrier["events"] == []
    assert carrier["trace_id"]
    assert carrier["version"] == 1
    assert carrier["attempt"] == 0
    if existing is not None:
        assert carrier is existing


def test_record_key_sequences_match_the_fixture(fixture_samples):
    fixture_shapes = {
        (event["type"], tuple(event)) for s in fixture_samples for event in s["trace"]["events"]
    }
    sample = FakeSample()
    with trace_span(sample, "group", attrs={"group_size": 1}):
        with trace_span(sample, "generate") as span:
            span.set("completion_tokens", 3)
            trace_event(sample, "tool_result", {"chars": 10})
        with trace_span(sample, "reward", attrs={"k": 1}):
            pass
    our_shapes = {(event["type"], tuple(event)) for event in events_of(sample)}

    assert our_shapes == fixture_shapes


def test_records_hold_carrier_identity_clock_time_and_copied_attrs():
    sample = FakeSample(index=7, group_index=2)
    attrs = {"max_new_tokens": 16}
    with use_clock(step_clock(100.0, 1.0)), trace_span(sample, "generate", attrs=attrs) as span:
        span.update({"completion_tokens": 4})
    attrs["max_new_tokens"] = 0

    start, end = span_pair(sample, "generate")
    assert start["ts"] == 100.0
    assert end["ts"] == 101.0
    for record in (start, end):
        assert record["trace_id"] == sample.trace["trace_id"]
        assert (record["sample_id"], record["group_id"], record["attempt"]) == (7, 2, 0)
        assert record["span_id"] == span.span_ids[0]
    assert start["attrs"] == {"max_new_tokens": 16}
    assert end["attrs"] == {"completion_tokens": 4}
    assert "parent_span_id" not in start
    assert "parent_span_id" not in end


def test_empty_attrs_leave_the_key_out():
    sample = FakeSample()
    with trace_span(sample, "s", attrs={}) as span:
        span.update({})
        trace_event(sample, "e", attrs={})
    assert all("attrs" not in event for event in events_of(sample))


def test_span_ids_are_valid_uuid4_hex():
    sample = FakeSample()
    with trace_span(sample, "s") as span:
        pass
    parsed = uuid.UUID(span.span_ids[0])
    assert parsed.version == 4
    assert parsed.hex == span.span_ids[0]
    assert tracing.TRACE_VERSION == 1


def test_samples_survive_torch_save_and_load(tmp_path):
    objects = [FakeSample(index=i, group_index=0) for i in range(2)]
    dicts = [{"index": i, "group_index": 1} for i in range(2)]
    with trace_span(objects + dicts, "group"):
        for sample in objects + dicts:
            with trace_span(sample, "generate") as span:
                span.update(build_sglang_meta_trace_attrs({"pd_decode_forward_duration": 0.5}))
    path = tmp_path / "rollout_0.pt"
    torch.save({"rollout_id": 0, "samples": objects + dicts}, path)
    loaded = torch.load(path, weights_only=False)["samples"]
    assert [s.trace for s in loaded[:2]] == [s.trace for s in objects]
    assert [s["trace"] for s in loaded[2:]] == [s["trace"] for s in dicts]
