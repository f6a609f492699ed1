"""``slime-trace-viewer collect`` taking the live stream: OTLP logs over HTTP (protobuf,
JSON, gzip) and gRPC into ``DIR/live``, the live spans on ``/v1/traces`` taken and not
kept, log records that are not slime's left out, hostile requests refused with nothing
kept, and ``kill -9`` in the middle of a stream."""

from __future__ import annotations

import base64
import gzip
import json
import os
import signal
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pyarrow as pa
import pytest
from google.protobuf import json_format
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
    ExportLogsServiceRequest,
    ExportLogsServiceResponse,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from slime_trace_widget.demo import make_demo_samples
from slime_trace_widget.schema import LIVE_RECEIVER_START, LIVE_RECEIVER_STOP
from slime_trace_widget.sources.engine.store import load_engine_traces
from slime_trace_widget.sources.live import load_live
from slime_trace_widget.sources.live.lean_logs import LeanRequest
from slime_trace_widget.sources.live.read import Tail, store_files, store_folder
from slime_trace_widget.tracing import live as streaming
from tests.support.browser import free_port
from tests.support.live_wire import SCOPE, Poster, Sender, recording_order
from tests.support.receiver import STARTUP_SECONDS, Receiver, start_receiver

PROTOBUF = {"Content-Type": "application/x-protobuf"}


@pytest.fixture
def collector(tmp_path: Path) -> Iterator[Receiver]:
    running = start_receiver(tmp_path / "collector")
    yield running
    running.kill()


@pytest.fixture(scope="module")
def records() -> list[dict]:
    return recording_order(make_demo_samples(32, seed=5))


def stored(folder: Path) -> pa.Table:
    """Every row of the live store as it lies on disk (write-ahead and finished files)."""
    tail = Tail(folder)
    return tail.read()


def sender_rows(folder: Path) -> pa.Table:
    table = stored(folder)
    return table.filter(pa.compute.invert(pa.compute.starts_with(table["sender"], "receiver:")))


def test_logs_over_http_json_gzip_and_grpc_are_kept(collector: Receiver,
                                                    records: list[dict]) -> None:
    import grpc

    sender = Sender()
    poster = Poster(collector.http_port)
    assert "/v1/logs" in collector.first_line
    status, answer = poster.post(sender.request(records[:100], rollout_id=3))
    assert status == 200 and answer == b""
    document = json_format.MessageToDict(sender.request(records[100:200], rollout_id=3))
    _ids_to_hex(document)
    status, answer = poster.post(json.dumps(document).encode(), kind="application/json")
    assert status == 200 and json.loads(answer) == {}
    body = gzip.compress(sender.request(records[200:300], rollout_id=3).SerializeToString())
    poster.connection.request("POST", "/v1/logs", body=body,
                              headers={**PROTOBUF, "Content-Encoding": "gzip"})
    response = poster.connection.getresponse()
    assert response.status == 200, response.read()
    response.read()
    poster.close()
    with grpc.insecure_channel(f"127.0.0.1:{collector.grpc_port}") as channel:
        export = channel.unary_unary(
            "/opentelemetry.proto.collector.logs.v1.LogsService/Export",
            request_serializer=lambda message: message.SerializeToString(),
            response_deserializer=ExportLogsServiceResponse.FromString)
        export(sender.request(records[300:400], rollout_id=3), timeout=60)
    rows = sender_rows(collector.folder)
    assert rows["seq"].to_pylist() == list(range(1, 401))  # acknowledged = on disk
    assert set(rows["rollout_id"].to_pylist()) == {3}
    assert [json.loads(body) for body in rows["body"].to_pylist()] == records[:400]
    assert set(rows["sender"].to_pylist()) == {sender.name}
    output = collector.stop()
    assert "400 live record(s)" in output


def _ids_to_hex(node: object) -> None:
    """OTLP/JSON writes ids as hex (the protobuf JSON mapping gives base64)."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key in ("traceId", "spanId") and isinstance(value, str):
                node[key] = base64.b64decode(value).hex()
            else:
                _ids_to_hex(value)
    elif isinstance(node, list):
        for item in node:
            _ids_to_hex(item)


def test_records_not_slimes_are_answered_and_not_kept(collector: Receiver,
                                                      records: list[dict]) -> None:
    request = Sender().request(records[:3], rollout_id=1)
    foreign = request.resource_logs[0].scope_logs[0].log_records.add()
    foreign.time_unix_nano = 10**18
    foreign.body.string_value = "GET /health 200"
    poster = Poster(collector.http_port)
    status, answer = poster.post(request)
    poster.close()
    assert status == 200
    response = ExportLogsServiceResponse.FromString(answer)
    assert response.partial_success.rejected_log_records == 1
    assert "slime.record" in response.partial_success.error_message
    assert len(sender_rows(collector.folder)) == 3
    assert "(1 log record(s) not slime's, not kept)" in collector.stop()


def test_live_spans_on_traces_are_answered_and_left_out(collector: Receiver) -> None:
    request = ExportTraceServiceRequest()
    resource = request.resource_spans.add()
    for scope_name in (SCOPE, "sglang"):
        scope = resource.scope_spans.add()
        scope.scope.name = scope_name
        span = scope.spans.add()
        span.name, span.trace_id, span.span_id = scope_name, b"\1" * 16, b"\2" * 8
        span.start_time_unix_nano, span.end_time_unix_nano = 10**18, 10**18 + 5
    poster = Poster(collector.http_port)
    status, _ = poster.post(request, path="/v1/traces")
    poster.close()
    assert status == 200
    collector.stop()
    assert load_engine_traces(collector.folder)["name"].tolist() == ["sglang"]


def hostile_requests(records: list[dict]) -> dict[str, tuple[bytes, dict[str, str]]]:
    """Requests the receiver must refuse whole, by what is wrong with them."""
    def edited(change: object) -> bytes:
        request = Sender().request(records[:5], rollout_id=0)
        change(request)  # type: ignore[operator]
        return request.SerializeToString()

    def records_of(request: ExportLogsServiceRequest) -> object:
        return request.resource_logs[0].scope_logs[0].log_records

    def set_attr(key: str, kind: str, value: object) -> object:
        def change(request: ExportLogsServiceRequest) -> None:
            for pair in records_of(request)[2].attributes:
                if pair.key == key:
                    pair.value.Clear()
                    setattr(pair.value, kind, value)
        return change

    def no_sender(request: ExportLogsServiceRequest) -> None:
        attrs = request.resource_logs[0].resource.attributes
        keep = [pair for pair in attrs if pair.key != "slime.live.sender"]
        del attrs[:]
        attrs.extend(keep)

    def receiver_sender(request: ExportLogsServiceRequest) -> None:
        for pair in request.resource_logs[0].resource.attributes:
            if pair.key == "slime.live.sender":
                pair.value.string_value = "receiver:" + pair.value.string_value

    protobuf = PROTOBUF
    return {
        "not protobuf": (b"\xff\xfe not a message", protobuf),
        "not JSON": (b"{not json", {"Content-Type": "application/json"}),
        "JSON of another shape": (b'{"resourceLogs": 5}', {"Content-Type": "application/json"}),
        "no sender": (edited(no_sender), protobuf),
        "seq as text": (edited(set_attr("slime.seq", "string_value", "7")), protobuf),
        "seq zero": (edited(set_attr("slime.seq", "int_value", 0)), protobuf),
        "record type not text": (edited(set_attr("slime.record", "int_value", 1)), protobuf),
        "the collector's own start row": (
            edited(set_attr("slime.record", "string_value", "receiver_start")), protobuf),
        "the collector's own stop row": (
            edited(set_attr("slime.record", "string_value", "receiver_stop")), protobuf),
        "a sender named like the collector": (edited(receiver_sender), protobuf),
        "rollout as text": (edited(set_attr("slime.rollout_id", "string_value", "x")),
                            protobuf),
        "short trace id": (edited(lambda r: setattr(records_of(r)[1], "trace_id", b"\1" * 3)),
                           protobuf),
        "long span id": (edited(lambda r: setattr(records_of(r)[1], "span_id", b"\1" * 9)),
                         protobuf),
        "no time": (edited(lambda r: setattr(records_of(r)[0], "time_unix_nano", 0)), protobuf),
        "body not an object": (edited(lambda r: setattr(records_of(r)[4].body, "string_value",
                                                        "[1, 2]")), protobuf),
        "body not text": (edited(lambda r: setattr(records_of(r)[3].body, "int_value", 5)),
                          protobuf),
        "attribute cut short": (cut_attribute(edited(lambda r: None)), protobuf),
        "wrong content type": (edited(lambda r: None), {"Content-Type": "text/plain"}),
    }


def cut_attribute(body: bytes) -> bytes:
    """``body`` with an attribute on its first record whose value ends mid-varint."""
    request = LeanRequest.FromString(body)
    request.resource_logs[0].scope_logs[0].log_records[0].attributes.append(
        b"\n\tslime.seq\x12\x02\x18\x80")
    return request.SerializeToString()


def test_hostile_requests_get_a_4xx_and_nothing_is_kept(collector: Receiver,
                                                        records: list[dict]) -> None:
    poster = Poster(collector.http_port)
    for what, (body, headers) in hostile_requests(records).items():
        poster.connection.request("POST", "/v1/logs", body=body, headers=headers)
        response = poster.connection.getresponse()
        answer = response.read()
        assert 400 <= response.status < 500, (what, response.status, answer)
        if response.getheader("Connection") == "close":
            poster.close()
            poster = Poster(collector.http_port)
    bomb = gzip.compress(bytes(200 << 20))
    poster.connection.request("POST", "/v1/logs", body=bomb,
                              headers={**PROTOBUF, "Content-Encoding": "gzip"})
    response = poster.connection.getresponse()
    assert response.status == 413, response.read()
    poster.close()
    assert len(sender_rows(collector.folder)) == 0
    assert "0 live record(s)" in collector.stop()


def test_grpc_refuses_bad_logs_with_a_reason(collector: Receiver, records: list[dict]) -> None:
    import grpc

    request = Sender().request(records[:2], rollout_id=0)
    request.resource_logs[0].scope_logs[0].log_records[0].trace_id = b"\1"
    with grpc.insecure_channel(f"127.0.0.1:{collector.grpc_port}") as channel:
        export = channel.unary_unary(
            "/opentelemetry.proto.collector.logs.v1.LogsService/Export",
            request_serializer=lambda message: message.SerializeToString(),
            response_deserializer=lambda data: data)
        with pytest.raises(grpc.RpcError) as refused:
            export(request, timeout=60)
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "trace id" in refused.value.details()
    assert len(sender_rows(collector.folder)) == 0


def test_kill_9_keeps_what_was_acknowledged_and_the_loss_is_counted(
        tmp_path: Path, records: list[dict]) -> None:
    """Acknowledged records survive ``kill -9``; records sent while the receiver is down are
    lost (the sender numbered them), later ones arrive, and ``load_live`` counts the loss
    and reports the restart."""
    folder = tmp_path / "collector"
    sender = Sender()
    first = start_receiver(folder)
    poster = Poster(first.http_port)
    acknowledged = 0
    for start in range(0, 300, 50):
        status, _ = poster.post(sender.request(records[start:start + 50], rollout_id=2))
        assert status == 200
        acknowledged += 50
    poster.close()
    os.kill(first.process.pid, signal.SIGKILL)
    first.process.communicate(timeout=STARTUP_SECONDS)
    assert len(sender_rows(folder)) == acknowledged  # readable as it lies
    lost = sender.request(records[300:350], rollout_id=2)
    with pytest.raises(OSError):  # refused: nobody listens
        Poster(first.http_port).post(lost)
    with start_receiver(folder) as second:
        poster = Poster(second.http_port)
        status, _ = poster.post(sender.request(records[350:], rollout_id=2))
        poster.post(sender.heartbeat(time.time_ns(), rollout_id=2))
        poster.close()
        assert status == 200
    rows = sender_rows(folder)
    assert sorted(rows["seq"].to_pylist()) == [*range(1, 301), *range(351, len(records) + 1),
                                             len(records)]  # and the heartbeat's
    assert all(store_file.finished for store_file in store_files(store_folder(folder)))
    frames = load_live(folder, now=time.time())
    health = frames.live
    assert [s.missing for s in health.senders] == [50]
    assert [s.records for s in health.senders] == [len(records) - 50]
    assert health.senders[0].process == f"{sender.host}:{sender.pid}"
    assert len(health.restarts) == 1 and not health.restarts[0].clean
    kinds = stored(folder)["record"].to_pylist()
    assert kinds.count(LIVE_RECEIVER_START) == 2 and kinds.count(LIVE_RECEIVER_STOP) == 1


def test_kill_9_mid_rollout_with_the_real_sender(tmp_path: Path) -> None:
    """A demo rollout on a real clock streams through ``tracing.live``; the receiver is
    killed with ``kill -9`` once records are on disk and restarted on its ports. The
    rollout ends without an error, records sent after the restart arrive, every number
    is received or counted missing, and the restart is reported."""
    folder = tmp_path / "collector"
    collector = start_receiver(folder)
    stream = streaming.install(collector.endpoint_url, interval=0.05)
    streaming.set_rollout(4)
    outcome: dict[str, object] = {}

    def rollout() -> None:
        try:
            outcome["samples"] = make_demo_samples(64, seed=5, rollout_id=4,
                                                   real_time_scale=0.05)
        except BaseException as exc:  # the test asserts there is none
            outcome["error"] = exc

    thread = threading.Thread(target=rollout, name="demo-rollout")
    thread.start()
    try:
        wait_until(lambda: Tail(folder).read().num_rows > 100, "records on disk")
        os.kill(collector.process.pid, signal.SIGKILL)
        collector.process.communicate(timeout=STARTUP_SECONDS)
        killed_at_ns = time.time_ns()
        collector = start_receiver(folder, collector.http_port, collector.grpc_port)
        thread.join(timeout=600)
        assert not thread.is_alive() and "error" not in outcome
        stats = stream.close(timeout=30)
    finally:
        streaming.set_rollout(None)
        stream.close(timeout=1)
        collector.stop()
    assert stats.queued == 0 and stats.sent + stats.dropped == stats.seq
    rows = Tail(folder).read()
    received = rows["received_ns"].to_numpy()
    assert (received > killed_at_ns).sum() > 0
    (sender,) = load_live(folder, engine_traces=False).live.senders
    assert sender.records + sender.missing == sender.highest_seq == stats.seq
    health = load_live(folder, engine_traces=False).live
    assert len(health.restarts) == 1 and not health.restarts[0].clean


#: Hang guard for conditions the tests wait on (generous: the machine may be busy).
WAIT_SECONDS = 300.0


def wait_until(condition: Callable[[], bool], what: str) -> None:
    """Poll ``condition`` until it holds; fail naming ``what`` after :data:`WAIT_SECONDS`."""
    deadline = time.monotonic() + WAIT_SECONDS
    while not condition():
        assert time.monotonic() < deadline, f"waited {WAIT_SECONDS:.0f} s for {what}"
        time.sleep(0.05)


def test_a_sender_on_a_host_named_like_the_collector_is_kept(
        collector: Receiver, monkeypatch: pytest.MonkeyPatch) -> None:
    """The collector names its own rows ``receiver:...`` and refuses a sender so named:
    the recording API on a host called ``receiver`` had every record refused, and the
    view showed no sender and no loss."""
    monkeypatch.setattr(socket, "gethostname", lambda: "receiver")
    stream = streaming.install(collector.endpoint_url, interval=0.05)
    streaming.set_rollout(2)
    try:
        make_demo_samples(4, seed=5, rollout_id=2)
        stats = stream.close(timeout=60)
    finally:
        streaming.set_rollout(None)
        stream.close(timeout=1)
    assert stats.seq > 0 and stats.sent == stats.seq and stats.dropped == 0
    rows = sender_rows(collector.folder)
    (name,) = set(rows["sender"].to_pylist())
    assert name.startswith("host receiver:")
    (sender,) = load_live(collector.folder, engine_traces=False).live.senders
    assert sender.records == stats.seq and sender.missing == 0


def test_records_a_full_queue_refused_before_the_collector_came_are_told_dropped(
        tmp_path: Path) -> None:
    """A sender that starts before its collector fills its queue and refuses the newest
    records. Its first batch said the drops so far, numbers past its own among them,
    and the reader took them for drops before the first number read: the banner said
    "dropped 0, lost N" for records the sender had dropped."""
    port = free_port()
    stream = streaming.install(f"http://127.0.0.1:{port}", capacity=50, interval=0.05)
    streaming.set_rollout(9)
    try:
        make_demo_samples(16, seed=5, rollout_id=9)
        assert stream.stats().dropped > 0
        collector = start_receiver(tmp_path / "collector", port)
        try:
            stats = stream.close(timeout=120)
        finally:
            collector.stop()
    finally:
        streaming.set_rollout(None)
        stream.close(timeout=1)
    assert stats.queued == 0 and stats.sent + stats.dropped == stats.seq
    (sender,) = load_live(tmp_path / "collector", engine_traces=False).live.senders
    assert (sender.records, sender.dropped, sender.missing) == (
        stats.sent, stats.dropped, stats.dropped)
