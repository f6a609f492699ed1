"""The live stream's hand-written protobuf, read back by opentelemetry-proto itself, and
the small pure helpers around it."""

from __future__ import annotations

import json
import math
import time

import numpy as np
import pytest
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from slime_trace_widget import __version__
from slime_trace_widget.schema import w3c_span_id, w3c_trace_id
from slime_trace_widget.tracing.live import wire
from slime_trace_widget.tracing.live.otlp import (
    SCOPE_NAME,
    Encoder,
    attribute_value,
    record_body,
)
from slime_trace_widget.tracing.live.transport import (
    MAX_RETRY_AFTER_SECONDS,
    EndpointError,
    parse_endpoint,
    retry_after,
)
from tests.support.live_sink import attributes

RESOURCE = {"service.name": "svc", "host.name": "h", "process.pid": 12,
            "slime.live.sender": "h:12:1"}


def decode_logs(body: bytes) -> ExportLogsServiceRequest:
    request = ExportLogsServiceRequest()
    request.ParseFromString(body)
    return request


@pytest.mark.parametrize("value", [0, 1, 127, 128, 300, 2**32, 2**63 - 1, -1, -(2**63)])
def test_varints_read_back(value: int) -> None:
    encoded = wire.log_int_attribute(b"k", value)
    record = wire.log_record(1, 2, b"", encoded, b"", b"")
    logs = decode_logs(wire.export_request(b"", b"", [record]))
    assert attributes(logs.resource_logs[0].scope_logs[0].log_records[0]) == {"k": value}


def test_attribute_values_of_every_kind_read_back() -> None:
    values = {"text": "héllo \ud800 end", "yes": True, "no": False, "n": -5, "x": 2.5,
              "nan": math.nan, "big": 2**70, "list": [1, "a", None], "dict": {"a": {"b": 1}},
              "numpy": np.int64(7), "array": np.arange(3), "float32": np.float32(0.5)}
    encoded = b"".join(wire.log_attribute(wire.text(k), attribute_value(v))
                       for k, v in values.items())
    record = wire.log_record(1, 2, b"", encoded, b"", b"")
    logs = decode_logs(wire.export_request(b"", b"", [record]))
    got = attributes(logs.resource_logs[0].scope_logs[0].log_records[0])
    assert got["text"] == "héllo \ufffd end"  # a lone surrogate cannot be UTF-8
    assert (got["yes"], got["no"], got["n"], got["x"]) == (True, False, -5, 2.5)
    assert math.isnan(got["nan"])
    assert got["big"] == str(2**70)
    assert json.loads(got["list"]) == [1, "a", None]
    assert json.loads(got["dict"]) == {"a": {"b": 1}}
    assert got["numpy"] == 7 and got["array"] == "[0,1,2]" and got["float32"] == 0.5


def test_a_body_is_the_record_exactly() -> None:
    record = {"type": "event", "name": "naïve \U0001f600 \ud800", "ts": 1.5, "trace_id": "t",
              "sample_id": "s-1", "group_id": None, "attempt": 0,
              "attrs": {"reward": math.nan, "tokens": [1, 2], "score": np.float64(0.25),
                        "count": np.int32(3), 5: "int key", "blob": b"xyz"}}
    body = json.loads(record_body(record))
    assert body["name"] == record["name"]  # lone surrogates survive JSON's escapes
    assert math.isnan(body["attrs"]["reward"])
    assert body["attrs"]["tokens"] == [1, 2] and body["attrs"]["score"] == 0.25
    assert body["attrs"]["count"] == 3 and body["attrs"]["5"] == "int key"
    assert body["attrs"]["blob"] == "<3 bytes>"
    assert record_body(record).isascii()


def test_a_batch_and_its_spans_read_back() -> None:
    encoder = Encoder(RESOURCE)
    start = {"type": "span_start", "name": "gen", "ts": 10.0, "trace_id": "a" * 32,
             "sample_id": 1, "group_id": 2, "attempt": 0, "span_id": "s1",
             "parent_span_id": "p0", "attrs": {"turn": 3}}
    event = {"type": "event", "name": "e", "ts": 10.5, "trace_id": "a" * 32, "sample_id": 1,
             "group_id": 2, "attempt": 0, "parent_span_id": "s1"}
    end = {"type": "span_end", "name": "gen", "ts": 11.25, "trace_id": "a" * 32,
           "sample_id": 1, "group_id": 2, "attempt": 1, "span_id": "s1",
           "attrs": {"error_type": "KeyError", "error_message": "boom"}}
    now = time.time_ns()
    batch = [(1, now, 4, start), (2, now, 4, event), (3, now, None, end)]
    log_records, spans, unencodable = encoder.encode(batch, dropped=6)
    assert unencodable == 0
    logs = decode_logs(encoder.request(log_records))
    resource_logs = logs.resource_logs[0]
    assert attributes(resource_logs.resource) == RESOURCE
    scope = resource_logs.scope_logs[0].scope
    assert (scope.name, scope.version) == (SCOPE_NAME, __version__)
    records = resource_logs.scope_logs[0].log_records
    assert [json.loads(r.body.string_value) for r in records] == [start, event, end]
    assert [attributes(r)["slime.seq"] for r in records] == [1, 2, 3]
    assert [attributes(r).get("slime.rollout_id") for r in records] == [4, 4, None]
    assert ["slime.dropped" in attributes(r) for r in records] == [False, False, True]
    assert attributes(records[2])["slime.dropped"] == 6
    assert records[0].time_unix_nano == 10_000_000_000 and records[0].observed_time_unix_nano == now
    assert records[0].severity_number == 9
    assert records[1].span_id.hex() == w3c_span_id("s1")  # an event: its parent span
    assert records[0].trace_id.hex() == "a" * 32 == w3c_trace_id("a" * 32)
    traces = ExportTraceServiceRequest()
    traces.ParseFromString(encoder.request(spans))
    (span,) = traces.resource_spans[0].scope_spans[0].spans
    assert span.name == "gen" and span.kind == span.SPAN_KIND_INTERNAL
    assert span.parent_span_id.hex() == w3c_span_id("p0")
    assert (span.start_time_unix_nano, span.end_time_unix_nano) == (10 * 10**9, 11_250_000_000)
    assert attributes(span) == {"turn": 3, "error_type": "KeyError", "error_message": "boom",
                                "slime.sample_id": 1, "slime.group_id": 2, "slime.attempt": 0,
                                "slime.rollout_id": 4}
    assert span.status.code == span.status.STATUS_CODE_ERROR and span.status.message == "boom"


def test_a_damaged_record_still_travels() -> None:
    encoder = Encoder(RESOURCE)
    odd = {"type": ["x"], "name": None, "ts": "soon", "trace_id": {"a": 1},
           "sample_id": [1], "span_id": ["unhashable"]}
    logs = decode_logs(encoder.request(encoder.encode([(1, 99, None, odd)], 0)[0]))
    (record,) = logs.resource_logs[0].scope_logs[0].log_records
    assert record.time_unix_nano == 99  # the time it was queued, for want of a ts
    assert attributes(record)["slime.record"] == '["x"]'
    assert json.loads(record.body.string_value) == odd


def test_status_records() -> None:
    logs = decode_logs(Encoder(RESOURCE).status_request("heartbeat", 41, 2, 7, 3))
    (record,) = logs.resource_logs[0].scope_logs[0].log_records
    assert record.body.string_value == ""
    assert attributes(record) == {"slime.record": "heartbeat", "slime.seq": 41,
                                  "slime.dropped": 2, "slime.queued": 7, "slime.rollout_id": 3}


@pytest.mark.parametrize(("header", "seconds"), [
    ("3", 3.0), (" 0.5 ", 0.5), ("-4", 0.0), ("99999", MAX_RETRY_AFTER_SECONDS),
    ("Wed, 21 Oct 2015 07:28:10 GMT", 10.0), ("soon", None), (None, None), ("nan", None)])
def test_retry_after(header: str | None, seconds: float | None) -> None:
    now = 1445412480.0  # 07:28:00 that day
    assert retry_after(header, now=now) == seconds


@pytest.mark.parametrize("endpoint", ["127.0.0.1:4318", "ftp://h", "http://", "http://h:x",
                                      "http://[::1", "http://[::1:4318/x"])
def test_bad_endpoints(endpoint: str) -> None:
    with pytest.raises(EndpointError, match="live endpoint"):
        parse_endpoint(endpoint)
