"""The receiver's answers where a request used to go unanswered or half-read: a status
code OTLP does not define, a fault of the receiver's own, a gzip body of several
members, and a body that trickles in."""

from __future__ import annotations

import gzip
import http.client
import json
import socket
import threading
import zlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from slime_trace_widget.sources.engine import receiver as receiver_module
from slime_trace_widget.sources.engine.otlp import SpanRows
from slime_trace_widget.sources.engine.receiver import Collector, grpc_server, http_server
from slime_trace_widget.sources.engine.store import SpanStore, load_engine_traces
from tests.support.receiver import STARTUP_SECONDS, Receiver, read_until_closed, start_receiver

PROTOBUF = {"Content-Type": "application/x-protobuf"}
EXPORT = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"


@pytest.fixture
def collector(tmp_path: Path) -> Iterator[Receiver]:
    running = start_receiver(tmp_path / "engine")
    yield running
    running.kill()


def span_request(number: int, status: int = 0) -> bytes:
    """An ``ExportTraceServiceRequest`` of one span, ``span<number>``, with ``status``."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    request = ExportTraceServiceRequest()
    span = request.resource_spans.add().scope_spans.add().spans.add()
    span.name, span.trace_id, span.span_id = f"span{number}", b"\1" * 16, bytes([number]) * 8
    span.start_time_unix_nano, span.end_time_unix_nano = 10**18, 10**18 + 5
    span.status.code = status  # an open enum: any int32 goes on the wire
    return request.SerializeToString()


def json_request(status: int) -> bytes:
    span = {"traceId": "01" * 16, "spanId": "02" * 8, "name": "json",
            "startTimeUnixNano": str(10**18), "endTimeUnixNano": str(10**18 + 5),
            "status": {"code": status}}
    return json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]}).encode()


def post(port: int, body: bytes, headers: dict[str, str]) -> tuple[int, bytes]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=STARTUP_SECONDS)
    try:
        connection.request("POST", "/v1/traces", body=body, headers=headers)
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


def grpc_export(port: int, body: bytes) -> tuple[object, str]:
    """The status code and details the receiver answers a gRPC export of ``body`` with."""
    import grpc

    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        export = channel.unary_unary(EXPORT, request_serializer=bytes,
                                     response_deserializer=bytes)
        try:
            export(body, timeout=STARTUP_SECONDS)
        except grpc.RpcError as exc:
            return exc.code(), exc.details()
    return grpc.StatusCode.OK, ""


def test_a_status_code_otlp_does_not_define_is_refused_with_its_reason(
        collector: Receiver) -> None:
    """Before: the span passed the decoder, the store's int8 column refused it, and the
    client got a dropped connection (HTTP) or UNKNOWN (gRPC): the batch silently lost."""
    import grpc

    status, body = post(collector.http_port, span_request(1, status=200), PROTOBUF)
    assert status == 400 and b"status code 200" in body
    status, body = post(collector.http_port, span_request(1, status=-5), PROTOBUF)
    assert status == 400 and b"status code -5" in body
    status, body = post(collector.http_port, json_request(3),
                        {"Content-Type": "application/json"})
    assert status == 400 and b"status code 3" in body
    code, details = grpc_export(collector.grpc_port, span_request(1, status=200))
    assert code == grpc.StatusCode.INVALID_ARGUMENT and "status code 200" in details
    # the codes OTLP defines are kept, over every way in
    assert post(collector.http_port, span_request(2, status=2), PROTOBUF)[0] == 200
    assert post(collector.http_port, json_request(1),
                {"Content-Type": "application/json"})[0] == 200
    assert grpc_export(collector.grpc_port, span_request(3))[0] == grpc.StatusCode.OK
    assert "stopped: 3 span(s)" in collector.stop()
    stored = load_engine_traces(collector.folder)
    assert sorted(zip(stored["name"], stored["status"], strict=True)) == [
        ("json", 1), ("span2", 2), ("span3", 0)]


class FaultyCollector(Collector):
    """A writer that fails in a way the receiver does not name, while ``failing`` is set."""

    failing = True

    def submit(self, rows: SpanRows) -> None:
        if self.failing:
            raise RuntimeError("a fault of the receiver's own")
        super().submit(rows)


@pytest.fixture
def faulty(tmp_path: Path) -> Iterator[FaultyCollector]:
    writer = FaultyCollector(SpanStore(tmp_path))
    yield writer
    writer.close()


def test_a_fault_of_the_receiver_is_answered_500_with_its_reason(
        faulty: FaultyCollector) -> None:
    """Not a dropped connection: the client reads why, and the connection serves on."""
    server = http_server(faulty, "127.0.0.1", 0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    connection = http.client.HTTPConnection("127.0.0.1", server.server_address[1],
                                            timeout=STARTUP_SECONDS)
    try:
        for fails in (True, False):
            faulty.failing = fails
            connection.request("POST", "/v1/traces", body=span_request(1), headers=PROTOBUF)
            response = connection.getresponse()
            answer = response.read()
            if fails:
                assert response.status == 500 and not response.will_close
                assert b"RuntimeError: a fault of the receiver's own" in answer
            else:
                assert response.status == 200
    finally:
        connection.close()
        server.shutdown()
        server.server_close()
    assert faulty.accepted_spans == 1


def test_a_fault_of_the_receiver_is_answered_internal_over_grpc(
        faulty: FaultyCollector) -> None:
    import grpc

    server, port = grpc_server(faulty, "127.0.0.1", 0)
    try:
        code, details = grpc_export(port, span_request(1))
        assert code == grpc.StatusCode.INTERNAL
        assert "RuntimeError: a fault of the receiver's own" in details
    finally:
        server.stop(0).wait(STARTUP_SECONDS)


def gzip_of_zeros(size: int) -> bytes:
    """A gzip member of ``size`` zero bytes, made a MB at a time."""
    packer = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    zeros = bytes(1 << 20)
    return b"".join([*(packer.compress(zeros) for _ in range(size >> 20)), packer.flush()])


def test_every_member_of_a_gzip_body_is_taken(collector: Receiver) -> None:
    """Gzip allows a body of several members, their data joined (two protobuf messages
    joined are one request with the spans of both). Before: only the first was read and
    the rest dropped, answered 200."""
    gzipped = {**PROTOBUF, "Content-Encoding": "gzip"}
    two = gzip.compress(span_request(1)) + gzip.compress(span_request(2))
    assert post(collector.http_port, two, gzipped)[0] == 200
    padded = gzip.compress(span_request(3)) + bytes(100)  # zeros after a member: padding
    assert post(collector.http_port, padded, gzipped)[0] == 200
    status, body = post(collector.http_port, gzip.compress(span_request(4)) + b"junk",
                        gzipped)
    assert status == 400 and b"not valid gzip" in body
    # the limit holds for the members together: each of these is under it, both are not
    half = gzip_of_zeros(receiver_module.MAX_DECOMPRESSED_BYTES // 2 + (1 << 20))
    status, body = post(collector.http_port, half + half, gzipped)
    assert status == 413 and b"decompressed" in body
    collector.stop()
    assert sorted(load_engine_traces(collector.folder)["name"]) == ["span1", "span2", "span3"]


def test_a_body_that_trickles_in_is_answered_408_and_frees_its_slot(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A body must arrive within its deadline as a whole, not only a read at a time:
    a client sending a byte now and then is answered 408 and its slot is given back.
    Before: it held the slot as long as it trickled, and every exporter met 503."""
    assert 0 < receiver_module.body_seconds(1 << 20) <= 60  # the receiver's own setting
    monkeypatch.setattr(receiver_module, "BODY_MIN_SECONDS", 0.5)  # quicker, same path
    monkeypatch.setattr(receiver_module._Handler, "timeout", 600.0)  # no read waits it out
    writer = Collector(SpanStore(tmp_path))
    server = http_server(writer, "127.0.0.1", 0)
    server.slots = threading.BoundedSemaphore(1)  # one slot: the trickle holds them all
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        with socket.create_connection(server.server_address, timeout=STARTUP_SECONDS) as client:
            client.sendall(b"POST /v1/traces HTTP/1.1\r\nHost: x\r\n"
                           b"Content-Type: application/x-protobuf\r\nContent-Length: 1000\r\n"
                           b"\r\nxxxx")
            answer = read_until_closed(client)
        assert answer.startswith(b"HTTP/1.1 408 ") and b"Connection: close" in answer
        assert server.slots.acquire(timeout=STARTUP_SECONDS)  # given back
        server.slots.release()
        assert post(server.server_address[1], span_request(1), PROTOBUF)[0] == 200
    finally:
        server.shutdown()
        server.server_close()
        writer.close()
    assert len(load_engine_traces(tmp_path)) == 1
