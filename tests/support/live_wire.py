"""The live stream's wire form (the contract of issue 45, docs/live.md), written here from
the contract for the receiver's tests and benchmarks: trace records as OTLP log records
in an ``ExportLogsServiceRequest``, and the HTTP client that posts them."""

from __future__ import annotations

import hashlib
import http.client
import json
from collections.abc import Iterable
from dataclasses import dataclass

from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest

from slime_trace_widget.schema import CARRIER_EVENTS, SAMPLE_TRACE_KEY
from slime_trace_widget.values import plain_value

SCOPE = "slime_trace_widget.live"


def wire_id(value: object, size: int) -> bytes:
    """The record's own id when it is hex of ``size`` bytes, else blake2b of its text."""
    text = str(value)
    if len(text) == 2 * size:
        try:
            return bytes.fromhex(text)
        except ValueError:
            pass
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=size).digest()


@dataclass
class Sender:
    """One sending process: its id and the numbers it gave out so far."""

    host: str = "rollout-0"
    pid: int = 4242
    start_ns: int = 1_767_225_600_000_000_000
    service: str = "slime-rollout"
    seq: int = 0
    dropped: int = 0

    @property
    def name(self) -> str:
        return f"{self.host}:{self.pid}:{self.start_ns}"

    def request(self, records: Iterable[dict], rollout_id: int | None = None,
                skip: Iterable[int] = ()) -> ExportLogsServiceRequest:
        """A request with ``records`` numbered on from the last; the positions in ``skip``
        are numbered and left out (dropped at the sender, counted in ``dropped``)."""
        request = ExportLogsServiceRequest()
        resource = request.resource_logs.add()
        for key, value in (("service.name", self.service), ("host.name", self.host),
                           ("slime.live.sender", self.name)):
            pair = resource.resource.attributes.add()
            pair.key, pair.value.string_value = key, value
        resource.resource.attributes.add(key="process.pid").value.int_value = self.pid
        scope = resource.scope_logs.add()
        scope.scope.name = SCOPE
        skipped = set(skip)
        last = None
        for position, record in enumerate(records):
            self.seq += 1
            if position in skipped:
                self.dropped += 1
                continue
            last = scope.log_records.add()
            last.time_unix_nano = round(float(record["ts"]) * 1e9)
            last.observed_time_unix_nano = last.time_unix_nano
            last.trace_id = wire_id(record.get("trace_id"), 16)
            if record.get("span_id") is not None:
                last.span_id = wire_id(record["span_id"], 8)
            last.body.string_value = json.dumps(plain_value(record), separators=(",", ":"))
            attrs = {"slime.record": record["type"], "slime.seq": self.seq,
                     "slime.sample_id": record.get("sample_id"),
                     "slime.group_id": record.get("group_id"),
                     "slime.attempt": record.get("attempt", 0), "slime.rollout_id": rollout_id}
            _put(last, attrs)
        if last is not None:
            _put(last, {"slime.dropped": self.dropped})
        return request

    def heartbeat(self, at_ns: int, rollout_id: int | None = None, queued: int = 0,
                  kind: str = "heartbeat") -> ExportLogsServiceRequest:
        """A heartbeat (or ``close``) carrying the last number given out and the drops."""
        request = self.request([])
        record = request.resource_logs[0].scope_logs[0].log_records.add()
        record.time_unix_nano = record.observed_time_unix_nano = at_ns
        record.body.string_value = ""
        _put(record, {"slime.record": kind, "slime.seq": self.seq,
                      "slime.dropped": self.dropped, "slime.queued": queued,
                      "slime.rollout_id": rollout_id})
        return request


def _put(record: object, attrs: dict[str, object]) -> None:
    for key, value in attrs.items():
        if value is None:
            continue
        pair = record.attributes.add()  # type: ignore[attr-defined]
        pair.key = key
        if isinstance(value, bool) or not isinstance(value, int):
            pair.value.string_value = str(value)
        else:
            pair.value.int_value = value


def recording_order(samples: list[dict]) -> list[dict]:
    """Every record of ``samples``' carriers, each carrier's in its order, carriers
    interleaved by time (the order one process recorded them in)."""
    tagged = [(record.get("ts", 0.0), sample_no, position, record)
              for sample_no, sample in enumerate(samples)
              for position, record in enumerate(
                  (sample.get(SAMPLE_TRACE_KEY) or {}).get(CARRIER_EVENTS) or ())]
    tagged.sort(key=lambda item: item[:3])
    return [record for *_, record in tagged]


class Poster:
    """A kept-alive HTTP connection to a receiver's ``/v1/logs``."""

    def __init__(self, port: int) -> None:
        self.connection = http.client.HTTPConnection("127.0.0.1", port, timeout=120)

    def post(self, request: ExportLogsServiceRequest | bytes, path: str = "/v1/logs",
             kind: str = "application/x-protobuf") -> tuple[int, bytes]:
        body = request if isinstance(request, bytes) else request.SerializeToString()
        self.connection.request("POST", path, body=body, headers={"Content-Type": kind})
        response = self.connection.getresponse()
        return response.status, response.read()

    def close(self) -> None:
        self.connection.close()
