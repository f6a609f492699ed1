"""``slime-trace-viewer collect``: the real receiver in its own process, fed by the
OpenTelemetry SDK's OTLP exporters (HTTP and gRPC), hostile requests, and ``kill -9``."""

from __future__ import annotations

import base64
import gzip
import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import zlib
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.ipc
import pyarrow.parquet as pq
import pytest

from slime_trace_widget.cli.collect import stop_line
from slime_trace_widget.demo import make_demo_samples
from slime_trace_widget.frames import build_frames
from slime_trace_widget.sources.engine import receiver as receiver_module
from slime_trace_widget.sources.engine.receiver import Received
from slime_trace_widget.sources.engine.store import LAYOUT, SUBDIR, SpanStore, load_engine_traces
from slime_trace_widget.sources.live.collector import LiveCollector
from slime_trace_widget.whole_files import replaced
from tests.support.engine_traces import Request, replay, requests_for
from tests.support.receiver import STARTUP_SECONDS, Receiver, read_until_closed, start_receiver

ROOT = Path(__file__).parents[2]


@pytest.fixture
def collector(tmp_path: Path) -> Iterator[Receiver]:
    running = start_receiver(tmp_path / "engine")
    yield running
    running.kill()


@pytest.fixture(scope="module")
def requests() -> list[Request]:
    return requests_for(build_frames(make_demo_samples(16, seed=4)), pd=False)


def spans_of(requests: list[Request]) -> int:
    """Spans the replay makes: a bootstrap room, and per half a root, a thread, slices."""
    return sum(1 + sum(2 + len(half.slices) for half in r.halves) for r in requests)


def post(port: int, body: bytes, headers: dict[str, str], path: str = "/v1/traces",
         method: str = "POST") -> tuple[int, bytes, dict[str, str]]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        connection.request(method, path, body=body, headers=headers)
        response = connection.getresponse()
        return response.status, response.read(), dict(response.getheaders())
    finally:
        connection.close()


def gzip_of_zeros(size: int) -> bytes:
    """A gzip member of ``size`` zero bytes, made a MB at a time."""
    packer = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    zeros = bytes(1 << 20)
    parts = [packer.compress(zeros) for _ in range(size >> 20)]
    return b"".join([*parts, packer.flush()])


def test_the_first_line_says_where_it_listens(collector: Receiver) -> None:
    assert collector.first_line.startswith("receiving OTLP on ")
    assert f"127.0.0.1:{collector.http_port}/v1/traces" in collector.first_line
    assert f"127.0.0.1:{collector.grpc_port}" in collector.first_line


def test_sdk_exporters_over_http_and_grpc_are_kept(collector: Receiver,
                                                   requests: list[Request]) -> None:
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (
        OTLPSpanExporter as GrpcExporter,
    )
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
        OTLPSpanExporter as HttpExporter,
    )

    def exporter_for(host: str) -> object:
        if host == "engine-a":
            return HttpExporter(endpoint=collector.traces_url)
        return GrpcExporter(endpoint=f"127.0.0.1:{collector.grpc_port}", insecure=True)

    replay(requests, exporter_for, {"engine-a": 0.5, "engine-b": -0.5})
    assert "stopped:" in collector.stop()
    stored = load_engine_traces(collector.folder)
    assert len(stored) == spans_of(requests)
    assert stored["span_id"].is_unique
    assert set(stored["service"]) == {"sglang"}
    assert {r["host.name"] for r in stored["resource"]} == {"engine-a", "engine-b"}
    rids = {a["rid"] for a in stored["attributes"] if "rid" in a}
    assert rids == {r.rid for r in requests}
    events = [e for events in stored["events"] for e in events]
    assert {"schedule"} <= {e["name"] for e in events}
    # finished files only, each readable, named by the time it covers; no folded companion,
    # since these spans are not mostly decode loops
    files = sorted(f for f in (collector.folder / SUBDIR).iterdir() if f.name != ".lock")
    finished = [f for f in files if LAYOUT.finished.fullmatch(f.name)]
    assert finished and finished == files
    assert sum(pq.read_metadata(f).num_rows for f in finished) == len(stored)


def test_json_and_gzip_bodies(collector: Receiver, requests: list[Request]) -> None:
    from google.protobuf.json_format import MessageToDict
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    memory = InMemorySpanExporter()
    replay(requests[:3], lambda host: memory, {}, batch=False)
    message = encode_spans(memory.get_finished_spans())
    document = MessageToDict(message)
    for resource in document["resourceSpans"]:  # OTLP/JSON writes ids in hex
        for scope in resource["scopeSpans"]:
            for span in scope["spans"]:
                for key in ("traceId", "spanId", "parentSpanId"):
                    if key in span:
                        span[key] = base64.b64decode(span[key]).hex()
    status, body, _ = post(collector.http_port, json.dumps(document).encode(),
                           {"Content-Type": "application/json"})
    assert status == 200 and json.loads(body) == {}
    status, _, _ = post(collector.http_port, gzip.compress(message.SerializeToString()),
                        {"Content-Type": "application/x-protobuf", "Content-Encoding": "gzip"})
    assert status == 200
    collector.stop()
    stored = load_engine_traces(collector.folder)
    assert len(stored) == 2 * len(memory.get_finished_spans())
    assert set(stored[stored["name"] == "prefill_waiting"]["span_id"].value_counts()) == {2}


def test_hostile_requests_get_a_clear_answer_and_nothing_else(collector: Receiver) -> None:
    port = collector.http_port
    protobuf = {"Content-Type": "application/x-protobuf"}
    status, body, _ = post(port, b"\xff\xfe garbage", protobuf)
    assert status == 400 and b"not an OTLP" in body
    status, body, _ = post(port, b'{"resourceSpans": [{"scopeSpans": 3}]}',
                           {"Content-Type": "application/json"})
    assert status == 400 and body.strip()
    status, body, _ = post(port, b"[1, 2", {"Content-Type": "application/json"})
    assert status == 400 and b"not JSON" in body
    status, body, _ = post(port, b"", protobuf, path="/v1/metrics")
    assert status == 404
    status, _, _ = post(port, b"", {}, method="GET")
    assert status == 405
    status, _, _ = post(port, b"x", {"Content-Type": "text/plain"})
    assert status == 415
    # a gzip bomb: 200 MB of zeros in 200 KB; refused without inflating it whole
    bomb = gzip_of_zeros(200 << 20)
    status, body, _ = post(port, bomb, {**protobuf, "Content-Encoding": "gzip"})
    assert status == 413 and b"decompressed" in body
    status, _, _ = post(port, b"\x1f\x8b\x08\x00garbage", {**protobuf,
                                                             "Content-Encoding": "gzip"})
    assert status == 400
    # a declared length over the limit is refused before the body is read
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    connection.putrequest("POST", "/v1/traces")
    connection.putheader("Content-Type", "application/x-protobuf")
    connection.putheader("Content-Length", str(1 << 40))
    connection.endheaders()
    response = connection.getresponse()
    assert response.status == 413
    connection.close()
    # a span with a broken id: the whole request is refused, nothing of it kept
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    request = ExportTraceServiceRequest()
    span = request.resource_spans.add().scope_spans.add().spans.add()
    span.name, span.trace_id, span.span_id = "<img src=x onerror=alert(1)>", b"\1" * 16, b"\2" * 3
    span.start_time_unix_nano = span.end_time_unix_nano = 10**18
    status, body, _ = post(port, request.SerializeToString(), protobuf)
    assert status == 400 and b"8-byte span id" in body
    # still serving, and what it keeps is exactly what it accepted
    span.span_id = b"\2" * 8
    assert post(port, request.SerializeToString(), protobuf)[0] == 200
    collector.stop()
    stored = load_engine_traces(collector.folder)
    assert list(stored["name"]) == ["<img src=x onerror=alert(1)>"]


def test_a_refused_body_still_being_sent_gets_its_answer(collector: Receiver) -> None:
    """A refusal decided from the headers (wrong path, media type) reads the body
    first: a sender still writing a large one would otherwise meet a reset
    connection, take it for a network fault and retry what is refused for good."""
    from slime_trace_widget.tracing.live.transport import Poster

    poster = Poster(f"http://127.0.0.1:{collector.http_port}")
    body = os.urandom(8 << 20)  # the live sender's largest request
    outcomes = [poster.post("/v1/metrics", body) for _ in range(3)]
    assert [(o.taken, o.retry, o.reason) for o in outcomes] == [
        (False, False, "HTTP 404 Not Found")] * 3
    connection = http.client.HTTPConnection("127.0.0.1", collector.http_port, timeout=60)
    try:
        for _ in range(2):  # the same connection serves the next request
            connection.request("POST", "/v1/traces", body=body,
                               headers={"Content-Type": "text/plain"})
            response = connection.getresponse()
            assert response.status == 415 and b"Content-Type" in response.read()
            assert not response.will_close
    finally:
        connection.close()


def test_grpc_refuses_what_is_not_otlp_with_a_reason(collector: Receiver) -> None:
    import grpc

    with grpc.insecure_channel(f"127.0.0.1:{collector.grpc_port}") as channel:
        export = channel.unary_unary(
            "/opentelemetry.proto.collector.trace.v1.TraceService/Export",
            request_serializer=bytes, response_deserializer=bytes)
        with pytest.raises(grpc.RpcError) as refused:
            export(b"\xff\xfe garbage", timeout=60)
        assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "not an OTLP" in refused.value.details()
        with pytest.raises(grpc.RpcError) as too_big:
            export(bytes(200 << 20), timeout=120)
        assert too_big.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert export(b"", timeout=60) == b""  # an empty request: nothing to keep
    assert "stopped: 0 span(s)" in collector.stop()


def test_a_full_writer_asks_clients_to_come_back_later(tmp_path: Path) -> None:
    """When more spans wait than the writer takes, the answer is 503 with Retry-After,
    and the spans held back are written when the disk catches up."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    from slime_trace_widget.sources.engine.receiver import Collector as Writer
    from slime_trace_widget.sources.engine.receiver import http_server

    class SlowDisk(SpanStore):
        """A disk that takes its time: the first write waits until released."""

        release = threading.Event()

        def append(self, table: object) -> None:
            self.release.wait(STARTUP_SECONDS)
            super().append(table)  # type: ignore[arg-type]

    writer = Writer(SlowDisk(tmp_path), max_pending_spans=1)
    server = http_server(writer, "127.0.0.1", 0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_address[1]
    request = ExportTraceServiceRequest()
    span = request.resource_spans.add().scope_spans.add().spans.add()
    span.name, span.trace_id, span.span_id = "slice", b"\1" * 16, b"\2" * 8
    span.start_time_unix_nano, span.end_time_unix_nano = 10**18, 10**18 + 5
    body = request.SerializeToString()
    results: list[int] = []
    first = threading.Thread(target=lambda: results.append(
        post(port, body, {"Content-Type": "application/x-protobuf"})[0]))
    first.start()
    try:
        while not writer.pending_rows:  # the first request is waiting for the disk
            first.join(0.05)
        status, reason, headers = post(port, body, {"Content-Type": "application/x-protobuf"})
        assert status == 503 and headers["Retry-After"] == "1" and b"waiting" in reason
        assert writer.refused == 1
    finally:
        SlowDisk.release.set()
        first.join(STARTUP_SECONDS)
        server.shutdown()
        server.server_close()
        writer.close()
    assert results == [200]
    assert len(load_engine_traces(tmp_path)) == 1
    live = LiveCollector(tmp_path / "live")
    live.close()
    assert stop_line(Received(writer, live), "DIR") == (
        "stopped: 1 span(s) and 0 live record(s) kept in DIR "
        "(1 request(s) asked to come back later while the disk was behind)")


def test_acknowledged_spans_survive_kill_9(tmp_path: Path, requests: list[Request]) -> None:
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
        OTLPSpanExporter as HttpExporter,
    )

    folder = tmp_path / "engine"
    first = start_receiver(folder)
    try:
        # one export per span, each answered before the next: every one acknowledged
        replay(requests, lambda host: HttpExporter(endpoint=first.traces_url), {},
               batch=False)
    finally:
        os.kill(first.process.pid, signal.SIGKILL)
        first.process.communicate(timeout=STARTUP_SECONDS)
    assert list((folder / SUBDIR).glob("wal-*.arrows"))  # what was kept, not yet rolled
    assert len(load_engine_traces(folder)) == spans_of(requests)  # readable as it lies
    second = start_receiver(folder)
    second.stop()
    stored = load_engine_traces(folder)
    assert len(stored) == spans_of(requests) and stored["span_id"].is_unique
    files = [f for f in (folder / SUBDIR).iterdir() if f.name != ".lock"]
    assert files and all(f.suffix == ".parquet" for f in files)
    for path in files:
        pq.read_table(path)  # every finished file whole


def test_a_write_ahead_file_cut_mid_batch_loses_only_that_batch(tmp_path: Path,
                                                               requests: list[Request]) -> None:
    """A crash in the middle of a write: the batches before it are whole, the cut one is
    not acknowledged and is left out, and the store opens."""
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from slime_trace_widget.sources.engine.otlp import request_rows

    memory = InMemorySpanExporter()
    replay(requests[:4], lambda host: memory, {}, batch=False)
    table = LAYOUT.rows(request_rows(encode_spans(memory.get_finished_spans())).columns)
    # a collector that appends two batches and dies without closing its store
    batches = tmp_path / "batches.arrows"
    with pa.OSFile(str(batches), "wb") as sink, pa.ipc.new_stream(sink, table.schema) as out:
        out.write_table(table)
    crash = ("import os, signal, sys, pyarrow as pa\n"
             "from slime_trace_widget.sources.engine.store import SpanStore\n"
             "table = pa.ipc.open_stream(sys.argv[2]).read_all()\n"
             "store = SpanStore(sys.argv[1])\n"
             "store.append(table.slice(0, 10))\n"
             "store.append(table.slice(10))\n"
             "os.kill(os.getpid(), signal.SIGKILL)\n")
    subprocess.run([sys.executable, "-c", crash, str(tmp_path), str(batches)],
                   timeout=STARTUP_SECONDS, cwd=ROOT)
    wal = next((tmp_path / SUBDIR).glob("wal-*.arrows"))
    wal.write_bytes(wal.read_bytes()[:-40])  # the second batch cut short
    assert len(load_engine_traces(tmp_path)) == 10
    SpanStore(tmp_path).close()  # reopening rolls what is whole
    assert len(load_engine_traces(tmp_path)) == 10


def test_reopening_a_store_removes_what_a_roll_cut_short_left(tmp_path: Path) -> None:
    SpanStore(tmp_path).close()
    folder = tmp_path / SUBDIR
    target = folder / "spans-1-2-000001.parquet"
    with replaced(target) as temporary:  # the name a roll's temporary file gets
        temporary.write_bytes(b"")
    target.unlink()
    (folder / temporary.name).write_bytes(b"half a Parquet file: the roll was killed")
    (folder / "notes.tmp").write_bytes(b"not the store's")
    SpanStore(tmp_path).close()
    assert not (folder / temporary.name).exists()
    assert (folder / "notes.tmp").exists()
    assert len(load_engine_traces(tmp_path)) == 0


def test_a_client_that_stops_mid_body_frees_its_slot(monkeypatch: pytest.MonkeyPatch) -> None:
    """A sender's host lost mid-request leaves its connection open: the read waits at
    most the handler's timeout, then the request is answered 408, the connection is
    closed and its slot is free."""
    assert 0 < receiver_module._Handler.timeout <= 60  # the receiver's own setting
    monkeypatch.setattr(receiver_module._Handler, "timeout", 1.0)  # quicker, same path
    server = receiver_module._HttpServer(("127.0.0.1", 0), None, None)  # type: ignore[arg-type]
    serving = threading.Thread(target=server.serve_forever, daemon=True)
    serving.start()
    try:
        with socket.create_connection(server.server_address, timeout=120) as client:
            client.sendall(b"POST /v1/traces HTTP/1.1\r\nHost: x\r\n"
                           b"Content-Type: application/x-protobuf\r\nContent-Length: 100\r\n"
                           b"\r\n" + b"x" * 10)
            answer = b""
            while chunk := client.recv(4096):  # closed by the receiver, not by the guard
                answer += chunk
            assert answer.startswith(b"HTTP/1.1 408 ") and b"Connection: close" in answer
        # The slot is given back before the connection closes: every one is free now.
        taken = [server.slots.acquire(blocking=False)
                 for _ in range(receiver_module.MAX_CONCURRENT_REQUESTS)]
        assert all(taken)
        for _ in taken:
            server.slots.release()
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def in_process_server() -> Iterator[receiver_module._HttpServer]:
    """The HTTP side alone, in this process (no collector: nothing here is taken)."""
    server = receiver_module._HttpServer(("127.0.0.1", 0), None, None)  # type: ignore[arg-type]
    serving = threading.Thread(target=server.serve_forever, daemon=True)
    serving.start()
    yield server
    server.shutdown()
    server.server_close()


def answer_to_headers(server: receiver_module._HttpServer, head: bytes) -> bytes:
    """What the receiver says to a request's ``head`` sent without a byte of its body,
    read until it closes the connection (120 s guard)."""
    with socket.create_connection(server.server_address, timeout=120) as client:
        client.sendall(head)
        answer = b""
        while chunk := client.recv(4096):
            answer += chunk
    return answer


def test_a_client_waiting_to_continue_is_refused_before_its_body(
        in_process_server: receiver_module._HttpServer) -> None:
    answer = answer_to_headers(
        in_process_server,
        b"POST /v1/metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 8388608\r\n"
        b"Content-Type: application/x-protobuf\r\nExpect: 100-continue\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 404 ") and b"100 Continue" not in answer


def test_a_refused_body_that_trickles_is_not_waited_for(
        in_process_server: receiver_module._HttpServer,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Reading a refused body to drop it has a deadline for the whole body, not only
    per read: a client sending a byte now and then does not hold its thread."""
    assert 0 < receiver_module.DROP_SECONDS <= 30  # the receiver's own setting
    monkeypatch.setattr(receiver_module, "DROP_SECONDS", 0.5)  # quicker, same path
    with socket.create_connection(in_process_server.server_address, timeout=120) as client:
        client.sendall(b"POST /v1/metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n")
        # a byte every 0.2 s would take 200 s for the whole body
        answer = read_until_closed(client)
    assert answer.startswith(b"HTTP/1.1 404 ") and b"Connection: close" in answer


def test_a_sign_or_separator_in_the_length_is_refused(collector: Receiver) -> None:
    for length in ("+5", "1_0", " -1"):
        connection = http.client.HTTPConnection("127.0.0.1", collector.http_port, timeout=60)
        try:
            connection.putrequest("POST", "/v1/traces")
            connection.putheader("Content-Type", "application/x-protobuf")
            connection.putheader("Content-Length", length)
            connection.endheaders()
            assert connection.getresponse().status == 411
        finally:
            connection.close()


def test_a_request_told_to_come_back_is_answered_without_its_body(
        in_process_server: receiver_module._HttpServer,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """With every slot taken, the 503 goes out and the connection closes: its body is
    not read outside the slots (a reset brings the same retry as the answer). A read
    of the body that never comes would wait out the handler's timeouts, made longer
    here than the client's guard."""
    monkeypatch.setattr(receiver_module._Handler, "timeout", 600.0)
    monkeypatch.setattr(receiver_module, "DROP_SECONDS", 600.0)
    taken = 0
    while in_process_server.slots.acquire(blocking=False):
        taken += 1
    try:
        answer = answer_to_headers(
            in_process_server, b"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Length: 1000"
                               b"\r\nContent-Type: application/x-protobuf\r\n\r\n")
    finally:
        for _ in range(taken):
            in_process_server.slots.release()
    assert answer.startswith(b"HTTP/1.1 503 ") and b"Connection: close" in answer
    assert b"Retry-After: " in answer
