"""SGLang ``meta_info`` as span attributes, and PD disaggregation timings as child spans.

``build_sglang_meta_trace_attrs`` keeps the known keys (renaming ``id`` and
flattening ``finish_reason``) and never raises; the PD child spans it asks for are
replayed against every generation span with PD children in three fixtures and
must reproduce slime's records exactly. Unusable durations are left out, PD keys
never reach the parent span, and a group span writes the children into every
member.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import torch

from slime_trace_widget.tracing import (
    TRACE_CHILDREN_KEY,
    bind_trace_carrier,
    build_sglang_meta_trace_attrs,
    trace_span,
    use_clock,
)
from tests.support.traced_samples import FIXTURES, FakeSample, events_of, named, span_pair


def _generation_spans(samples: list[dict[str, Any]]):
    """Each fixture generation span that has PD children: its start and its record slice."""
    for sample in samples:
        events = sample["trace"]["events"]
        for index, start in enumerate(events):
            if start["type"] != "span_start" or start["name"] != "sglang_generate":
                continue
            end_index = next(
                j
                for j in range(index + 1, len(events))
                if events[j]["type"] == "span_end" and events[j]["span_id"] == start["span_id"]
            )
            records = events[index : end_index + 1]
            if any(r["name"].startswith("sglang_pd_") for r in records):
                yield start, records


def _meta_from_records(records: list[dict[str, Any]]) -> dict[str, Any]:
    """The SGLang meta_info that must have produced these fixture records."""
    meta: dict[str, Any] = {}
    for record in records:
        attrs = record.get("attrs", {})
        if record["name"] == "sglang_pd_summary" or (
            record["type"] == "span_end"
            and record["name"].startswith("sglang_pd_")
            and "phase" not in attrs
        ):
            meta.update(attrs)
    end_attrs = dict(records[-1].get("attrs", {}))
    meta["id"] = end_attrs.pop("sglang_request_id")
    meta["finish_reason"] = {"type": end_attrs.pop("finish_reason"), "matched": 2}
    meta.update(end_attrs)
    meta["unused_field"] = "ignored"
    return meta


@pytest.mark.parametrize("fixture", ["small.pt", "rollout_eval_3.pt", "edge_bare_list.pt"])
def test_pd_child_spans_reproduce_the_fixture_records_exactly(fixture):
    loaded = torch.load(FIXTURES / fixture, weights_only=False)
    samples = loaded["samples"] if isinstance(loaded, dict) else loaded
    replayed = 0
    for start, expected in _generation_spans(samples):
        carrier = {
            "version": 1,
            "trace_id": start["trace_id"],
            "events": [],
            "sample_id": start["sample_id"],
            "group_id": start["group_id"],
            "attempt": start["attempt"],
        }
        handle = bind_trace_carrier(carrier, parent_span_id=start.get("parent_span_id"))
        clock = iter([start["ts"], expected[-1]["ts"]]).__next__
        with (
            use_clock(clock),
            trace_span(handle, "sglang_generate", attrs=start.get("attrs")) as span,
        ):
            span.update(build_sglang_meta_trace_attrs(_meta_from_records(expected)))

        ours = carrier["events"]
        assert len(ours) == len(expected)
        ids = {
            a["span_id"]: b["span_id"]
            for a, b in zip(ours, expected, strict=True)
            if "span_id" in a
        }
        renamed = [
            {k: ids.get(v, v) if k in ("span_id", "parent_span_id") else v for k, v in r.items()}
            for r in ours
        ]
        assert [list(r.items()) for r in renamed] == [list(r.items()) for r in expected]
        replayed += 1
    assert replayed > 0


def test_sglang_meta_attrs_mapping():
    meta = {
        "prompt_tokens": 12,
        "completion_tokens": 7,
        "cached_tokens": 3,
        "queue_time": None,
        "e2e_latency": 1.5,
        "decode_throughput": 80.0,
        "finish_reason": {"type": "length", "length": 7},
        "id": "req-1",
        "weight_version": "w3",
    }
    assert build_sglang_meta_trace_attrs(meta) == {
        "prompt_tokens": 12,
        "completion_tokens": 7,
        "cached_tokens": 3,
        "e2e_latency": 1.5,
        "decode_throughput": 80.0,
        "finish_reason": "length",
        "sglang_request_id": "req-1",
    }
    assert build_sglang_meta_trace_attrs({"finish_reason": "stop"}) == {"finish_reason": "stop"}
    # slime keeps a finish reason without a type whole (trace_utils, build_sglang_meta_trace_attrs)
    assert build_sglang_meta_trace_attrs({"finish_reason": {"type": None}}) == {
        "finish_reason": {"type": None}}


class ExplodingMeta(dict):
    def get(self, key, default=None):
        raise RuntimeError("boom")


@pytest.mark.parametrize("meta", [None, [], "meta", 5, object(), ExplodingMeta(prompt_tokens=1)])
def test_sglang_meta_attrs_never_raise(meta):
    assert build_sglang_meta_trace_attrs(meta) == {}


def test_pd_segments_without_usable_durations_are_left_out():
    meta = {
        "pd_prefill_bootstrap_queue_duration": 0.0,
        "pd_prefill_bootstrap_duration": -1.0,
        "pd_prefill_alloc_wait_duration": float("nan"),
        "pd_prefill_forward_duration": "fast",
        "pd_prefill_transfer_queue_duration": None,
        "pd_decode_prealloc_duration": True,
        "pd_decode_forward_duration": 2.0,
        "pd_transfer_total_mb": 4.5,
        "pd_prefill_retry_count": 0,
    }
    attrs = build_sglang_meta_trace_attrs(meta)
    sample = FakeSample()
    with use_clock(iter([10.0, 11.0]).__next__), trace_span(sample, "sglang_generate") as span:
        span.update(attrs)

    names = [(e["type"], e["name"]) for e in events_of(sample)]
    assert names == [
        ("span_start", "sglang_generate"),
        ("span_start", "sglang_pd_decode"),
        ("span_start", "sglang_pd_decode_forward"),
        ("span_end", "sglang_pd_decode_forward"),
        ("span_end", "sglang_pd_decode"),
        ("event", "sglang_pd_summary"),
        ("span_end", "sglang_generate"),
    ]
    decode, decode_end = span_pair(sample, "sglang_pd_decode")
    assert (decode["ts"], decode_end["ts"]) == (10.0, 12.0)
    assert decode_end["attrs"] == {"phase": "decode", "duration_s": 2.0}
    summary = named(sample, "sglang_pd_summary")[0]
    assert summary["attrs"] == {"pd_transfer_total_mb": 4.5, "pd_prefill_retry_count": 0}
    assert summary["ts"] == 12.0
    assert "attrs" not in span_pair(sample, "sglang_generate")[1]


def test_no_pd_keys_means_no_children_and_pd_keys_never_reach_the_parent():
    assert TRACE_CHILDREN_KEY not in build_sglang_meta_trace_attrs({"prompt_tokens": 1})
    attrs = build_sglang_meta_trace_attrs({"pd_decode_forward_duration": 1.0, "id": "r"})
    assert set(attrs) == {"sglang_request_id", TRACE_CHILDREN_KEY}
    assert json.loads(json.dumps(attrs))[TRACE_CHILDREN_KEY] == attrs[TRACE_CHILDREN_KEY]


def test_pd_children_are_written_into_every_group_member():
    group = [FakeSample(index=i) for i in range(2)]
    attrs = build_sglang_meta_trace_attrs({"pd_prefill_forward_duration": 0.1})
    with trace_span(group, "sglang_generate") as span:
        span.set(TRACE_CHILDREN_KEY, attrs[TRACE_CHILDREN_KEY])
    for member, parent_id in zip(group, span.span_ids, strict=True):
        phase, _ = span_pair(member, "sglang_pd_prefill")
        assert phase["parent_span_id"] == parent_id
