"""OTLP requests sized in bytes: every request stays under the byte budget, and one a
receiver finds too large (gRPC ``RESOURCE_EXHAUSTED`` "larger than max", HTTP 413) is
split in halves until it fits, never sent again whole.

Receivers are real: a gRPC ``TraceService`` with the common 4 MiB limit or a lower
one, this package's own collector, and a small HTTP server with a body limit.
"""

from __future__ import annotations

import contextlib
import copy
import http.server
import threading
from collections import Counter
from collections.abc import Iterator

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from slime_trace_widget.demo import make_demo_samples
from slime_trace_widget.export.otlp import to_otlp
from slime_trace_widget.export.otlp_spans import exported_span_count, otlp_batches
from slime_trace_widget.export.otlp_transport import OtlpExportError
from slime_trace_widget.frames import build_frames
from slime_trace_widget.frames.model import TraceFrames
from slime_trace_widget.sources.engine.store import load_engine_traces
from slime_trace_widget.tracing import trace_span
from tests.export.test_otlp import decoded
from tests.support.grpc_trace_service import serving

#: The limit gRPC servers take by default (and most OTLP receivers keep).
GRPC_DEFAULT_LIMIT = 4 << 20
#: Short: before the fix a too-large request was retried until this ran out.
RETRY_SECONDS = 1.0


def long_text_frames(samples: int, chars: int) -> TraceFrames:
    """``samples`` samples with one span each and a response of ``chars`` characters
    (sent as ``output.value`` with ``include_text``)."""
    made = []
    for index in range(samples):
        sample = {"index": index, "group_index": index, "prompt": "p" * 10,
                  "response": f"{index:06d}" + "r" * chars}
        with trace_span(sample, "generate"):
            pass
        made.append(sample)
    return build_frames({"rollout_id": 1, "samples": made})


def span_ids_of(requests: list[ExportTraceServiceRequest]) -> Counter:
    return Counter(span.span_id for request in requests for resource in request.resource_spans
                   for scope in resource.scope_spans for span in scope.spans)


def expected_ids(frames: TraceFrames, **options) -> Counter:
    return Counter(bytes.fromhex(span["id"]) for span in decoded(frames, **options))


class _Recording:
    """A gRPC ``TraceService`` that keeps every request it takes."""

    def __init__(self) -> None:
        self.taken: list[ExportTraceServiceRequest] = []
        self.lock = threading.Lock()

    def Export(self, request, context):  # the generated service's method name
        with self.lock:
            self.taken.append(request)
        return ExportTraceServiceResponse()


@contextlib.contextmanager
def grpc_receiver(limit: int | None = None) -> Iterator[tuple[str, _Recording]]:
    """A gRPC OTLP receiver on a free port taking messages of at most ``limit`` bytes
    (gRPC's default 4 MiB when None); stopped on leaving."""
    service = _Recording()
    options = [] if limit is None else [("grpc.max_receive_message_length", limit)]
    with serving(service, options) as (address, _):
        yield address, service


class _Limited(http.server.BaseHTTPRequestHandler):
    """OTLP/HTTP that answers 413 to a body over the server's ``limit`` and keeps the
    others."""

    def do_POST(self) -> None:
        length = int(self.headers["Content-Length"])
        body = self.rfile.read(length)
        status = 413 if length > self.server.limit else 200
        if status == 200:
            request = ExportTraceServiceRequest()
            request.ParseFromString(body)
            with self.server.lock:
                self.server.taken.append(request)
        self.send_response(status)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *_: object) -> None:
        return None


@pytest.fixture
def limited_http() -> Iterator[http.server.ThreadingHTTPServer]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Limited)
    server.limit, server.taken, server.lock = 150_000, [], threading.Lock()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


# --------------------------------------------------------------------------- the batches


def test_requests_stay_under_the_byte_budget_and_every_span_keeps_its_events() -> None:
    frames = build_frames(make_demo_samples(24, seed=3))
    budget = 40_000
    batches = list(otlp_batches(frames, batch_bytes=budget, include_text=True))
    assert len(batches) > 3
    assert all(batch.request.ByteSize() <= budget for batch in batches)
    assert sum(batch.spans for batch in batches) == exported_span_count(frames)
    assert sum(batch.events for batch in batches) == len(frames.event_core)
    assert sum(batch.traces for batch in batches) == len(frames.samples)
    whole = decoded(frames, include_text=True)
    split = decoded(frames, include_text=True, batch_bytes=budget)
    # the same spans, parents and events, whichever request carried them
    assert sorted(map(repr, split)) == sorted(map(repr, whole))


def test_big_samples_reach_a_grpc_receiver_with_the_common_limit() -> None:
    frames = long_text_frames(120, 60_000)
    with grpc_receiver() as (address, service):
        report = to_otlp(frames, address, protocol="grpc", include_text=True,
                         retry_seconds=RETRY_SECONDS)
    assert span_ids_of(service.taken) == expected_ids(frames, include_text=True)
    assert report.spans == exported_span_count(frames) and report.batches == len(service.taken)
    from slime_trace_widget.export.otlp_spans import DEFAULT_BATCH_BYTES

    assert DEFAULT_BATCH_BYTES < GRPC_DEFAULT_LIMIT
    assert all(request.ByteSize() <= DEFAULT_BATCH_BYTES for request in service.taken)


def test_big_samples_reach_this_package_receiver_whole(collector) -> None:
    from slime_trace_widget.export.otlp_spans import DEFAULT_BATCH_BYTES

    http_url, _, folder = collector
    frames = long_text_frames(120, 60_000)
    sizes = [batch.request.ByteSize() for batch in otlp_batches(frames, include_text=True)]
    assert len(sizes) > 1 and max(sizes) <= DEFAULT_BATCH_BYTES
    report = to_otlp(frames, http_url, include_text=True)
    assert report.batches == len(sizes)
    received = load_engine_traces(folder)
    sent = decoded(frames, include_text=True)
    assert Counter(zip(received["trace_id"], received["span_id"], strict=True)) == \
        Counter((span["trace"], span["id"]) for span in sent)
    texts = [attrs for attrs in received["attributes"] if "output.value" in attrs]
    assert len(texts) == 120 and all(len(attrs["output.value"]) > 60_000 for attrs in texts)


# --------------------------------------------------------------------------- too large


def test_a_request_too_large_for_the_grpc_receiver_is_split_until_it_fits() -> None:
    frames = long_text_frames(60, 60_000)
    limit = 200_000
    with grpc_receiver(limit) as (address, service):
        report = to_otlp(frames, address, protocol="grpc", include_text=True,
                         retry_seconds=RETRY_SECONDS)
    taken = span_ids_of(service.taken)
    assert taken == expected_ids(frames, include_text=True)  # each span once
    assert all(request.ByteSize() <= limit for request in service.taken)
    assert report.splits > 0 and report.retries == 0
    assert report.spans == exported_span_count(frames) and report.traces == 60
    assert "split" in report.summary()


def test_http_413_splits_the_request_until_it_fits(limited_http) -> None:
    frames = long_text_frames(40, 60_000)
    url = f"http://127.0.0.1:{limited_http.server_address[1]}/v1/traces"
    report = to_otlp(frames, url, include_text=True, retry_seconds=RETRY_SECONDS)
    assert span_ids_of(limited_http.taken) == expected_ids(frames, include_text=True)
    assert report.splits > 0 and report.spans == exported_span_count(frames)


def test_a_span_too_large_on_its_own_is_named() -> None:
    frames = long_text_frames(3, 300_000)  # each root holds 100,000 characters of text
    root = decoded(frames, include_text=True)[0]
    with grpc_receiver(50_000) as (address, service), \
            pytest.raises(OtlpExportError, match="too large") as caught:
        to_otlp(frames, address, protocol="grpc", include_text=True,
                retry_seconds=RETRY_SECONDS)
    message = str(caught.value)
    assert "'sample'" in message and root["id"] in message and root["trace"] in message
    assert address in message and "\n" not in message
    assert not service.taken


def test_resource_exhausted_for_another_reason_is_still_retried() -> None:
    import grpc

    class _Busy(_Recording):
        def __init__(self) -> None:
            super().__init__()
            self.refusals = 2

        def Export(self, request, context):
            if self.refusals:
                self.refusals -= 1
                context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, "quota exceeded, try later")
            return super().Export(request, context)

    service = _Busy()
    frames = long_text_frames(5, 100)
    with serving(service) as (address, _):
        report = to_otlp(frames, address, protocol="grpc")
    assert report.retries == 2 and report.splits == 0
    assert span_ids_of(service.taken) == expected_ids(frames)


def test_a_sample_larger_than_a_request_is_split_and_kept_whole() -> None:
    """A sample split across requests by the byte budget keeps one root and every span
    with its parent; its copy (same slime ids, as a dump given twice) gets ids of its own."""
    sample = {"index": 0, "group_index": 0, "response": "r" * 5_000}
    with trace_span(sample, "generate"):
        for step in range(200):
            with trace_span(sample, f"tool {step}", attrs={"output": "o" * 2_000}):
                pass
    frames = build_frames({"rollout_id": 1, "samples": [sample, copy.deepcopy(sample)]})
    batches = list(otlp_batches(frames, batch_bytes=60_000, include_text=True))
    assert len(batches) > 4 and sum(batch.traces for batch in batches) == 2
    assert all(batch.request.ByteSize() <= 60_000 for batch in batches)
    spans = decoded(frames, batch_bytes=60_000, include_text=True)
    assert len({span["id"] for span in spans}) == len(spans) == exported_span_count(frames)
    ids = {(span["trace"], span["id"]) for span in spans}
    assert all((span["trace"], span["parent"]) in ids for span in spans if span["parent"])
