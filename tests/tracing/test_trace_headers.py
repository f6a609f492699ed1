"""trace_headers: the W3C context of a sample's current span, for requests to SGLang."""

from __future__ import annotations

import re

from slime_trace_widget.schema import w3c_span_id, w3c_trace_id
from slime_trace_widget.tracing import bind_trace, trace_headers, trace_span

TRACEPARENT = re.compile(r"00-[0-9a-f]{32}-[0-9a-f]{16}-01")


def test_headers_name_the_innermost_open_span() -> None:
    sample: dict = {"index": 0}
    handle = bind_trace(sample)
    with trace_span(sample, "agent"), trace_span(sample, "sglang_generate") as span:
        headers = trace_headers(sample)
    assert TRACEPARENT.fullmatch(headers["traceparent"])
    _, trace, parent, _ = headers["traceparent"].split("-")
    assert trace == w3c_trace_id(handle.trace_id) == handle.trace_id  # slime's ids are W3C's
    assert parent == w3c_span_id(span.span_ids[0])
    assert headers["tracestate"] == f"slime={span.span_ids[0]}"


def test_no_open_span_and_bad_targets_give_no_headers() -> None:
    sample: dict = {"index": 1}
    bind_trace(sample)
    assert trace_headers(sample) == {}
    assert trace_headers(None) == {}
    assert trace_headers(object()) == {}


def test_ids_that_are_not_w3c_are_hashed_stably() -> None:
    assert w3c_trace_id("run-7/sample-3") == w3c_trace_id("run-7/sample-3")
    assert re.fullmatch(r"[0-9a-f]{32}", w3c_trace_id("run-7/sample-3"))
    assert w3c_trace_id("0" * 32) != "0" * 32  # the all-zero id is invalid in W3C
    assert re.fullmatch(r"[0-9a-f]{16}", w3c_span_id("\ud800 odd"))
