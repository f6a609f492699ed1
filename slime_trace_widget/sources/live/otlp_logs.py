"""OTLP log requests into rows of live records: the one place that knows their wire form.

An ``ExportLogsServiceRequest`` arrives as protobuf (gRPC, or HTTP with
``application/x-protobuf``) or as OTLP's JSON (ids in hex). A log record is slime's
when it has the attribute ``slime.record``; the others are not kept and are counted
(:attr:`LiveRows.foreign`): an OpenTelemetry Collector may route other logs here
with ours, and refusing the request would make it send ours again and again. One of
our records whose fields are wrong (see :func:`request_rows`) refuses the whole request
with a reason (:class:`BadRequest`), so nothing of it is half-kept. The request is
read through lean messages (:mod:`.lean_logs`): the receiver's cost per record is a few
microseconds.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import KeyValue
from opentelemetry.proto.resource.v1.resource_pb2 import Resource

from ...schema import (
    LIVE_MAX_RECORD_TYPE,
    LIVE_RECEIVER_START,
    LIVE_RECEIVER_STOP,
    MAX_ATTEMPT,
)
from ..engine.otlp import BadRequest, attributes_of, json_message
from .lean_logs import AttributeCache, Meaning, body_text, parse_request
from .store import (
    COLUMNS,
    RECEIVER_PREFIX,
    STATUS_RECORDS,
    UNKNOWN_ROLLOUT,
)

SENDER_ATTR = "slime.live.sender"
RECORD_ATTR = "slime.record"
ATTEMPT_ATTR = "slime.attempt"
_INT_ATTRS = {"slime.seq": "seq", "slime.rollout_id": "rollout_id", "slime.dropped": "dropped",
              "slime.queued": "queued"}
_SCALARS = ("string_value", "int_value", "double_value", "bool_value")
_ID_ATTRS = {"slime.sample_id": "sample_id", "slime.group_id": "group_id"}
#: Longest sender name and sample or group id text kept.
MAX_NAME = 256
_NS_LIMIT = 2**63


@dataclass
class LiveRows:
    """Decoded records as columns (one list per name of the store's columns)."""

    columns: dict[str, list] = field(default_factory=lambda: {name: [] for name in COLUMNS})
    #: Log records in the request that are not slime's (no ``slime.record``): not kept.
    foreign: int = 0

    def __len__(self) -> int:
        return len(self.columns["seq"])


def parse_protobuf(body: bytes, received_ns: int) -> LiveRows:
    """Records of a binary ``ExportLogsServiceRequest``."""
    return request_rows(parse_request(body), received_ns)


def parse_json(body: bytes, received_ns: int) -> LiveRows:
    """Records of an OTLP/JSON ``ExportLogsServiceRequest`` (ids in hex)."""
    request = json_message(body, ExportLogsServiceRequest())
    return parse_protobuf(request.SerializeToString(), received_ns)


def request_rows(request: Any, received_ns: int) -> LiveRows:
    """Every slime record of a (lean) request as a row; :class:`BadRequest` for an
    unusable one.

    The framing must be right, or the request is refused: the resource's
    ``slime.live.sender`` (text); ``slime.record`` text of at most 64 characters;
    ``slime.seq`` an integer (at least 1 on trace records); a time; on trace records
    (all but ``heartbeat`` and ``close``) a 16-byte trace id and a body that is JSON
    object text; a span id of 8 bytes when there is one; ``slime.rollout_id``,
    ``slime.dropped`` and ``slime.queued`` integers (the last two at least 0). What
    comes from the record itself is taken as it is, since the body holds it whole and a
    damaged record must not cost its batch: sample and group ids of any scalar kind
    become text (cut to 256 characters), an attempt that is not an integer from 0 to
    2**31-2 reads as 0."""
    rows = LiveRows()
    out = rows.columns
    meaning = _ATTRIBUTES.meaning
    for resource_logs in request.resource_logs:
        sender, service = _resource(resource_logs.resource)
        for scope_logs in resource_logs.scope_logs:
            for record in scope_logs.log_records:
                fields: dict[str, Any] = {}
                for raw in record.attributes:
                    known = meaning(raw)
                    if known is not None:
                        fields[known[0]] = known[1]
                if "record" not in fields:
                    rows.foreign += 1
                    continue
                if sender is None:
                    raise BadRequest(f"a resource has no valid {SENDER_ATTR} (text of 1 to "
                                     f"{MAX_NAME} characters)")
                ts, trace_id, span_id = record.time_unix_nano, record.trace_id, record.span_id
                body = body_text(record.body)
                _check(fields, ts, trace_id, span_id, body)
                out["sender"].append(sender)
                out["seq"].append(fields["seq"])
                out["record"].append(fields["record"])
                out["ts_ns"].append(ts)
                out["trace_id"].append(trace_id.hex())
                out["span_id"].append(span_id.hex() if span_id else None)
                out["sample_id"].append(fields.get("sample_id"))
                out["group_id"].append(fields.get("group_id"))
                out["attempt"].append(fields.get("attempt", 0))
                out["rollout_id"].append(fields.get("rollout_id", UNKNOWN_ROLLOUT))
                out["body"].append(body or "")
                out["dropped"].append(fields.get("dropped"))
                out["queued"].append(fields.get("queued"))
                out["service"].append(service)
    out["received_ns"] = [received_ns] * len(out["seq"])
    return rows


def _resource(raw: bytes) -> tuple[str | None, str]:
    """The sender id (None when missing or unusable) and service name of a resource."""
    try:
        attributes = attributes_of(Resource.FromString(raw).attributes)
    except (DecodeError, RuntimeError, ValueError) as exc:
        raise BadRequest(f"a resource is not an OTLP Resource ({exc})") from None
    sender, service = attributes.get(SENDER_ATTR), attributes.get("service.name")
    usable = (isinstance(sender, str) and 0 < len(sender) <= MAX_NAME
              and not sender.startswith(RECEIVER_PREFIX))
    return (sender if usable else None,  # type: ignore[return-value]
            service[:MAX_NAME] if isinstance(service, str) else "")


def _attribute(pair: KeyValue) -> Meaning:
    """What one attribute means to the store (see :class:`AttributeCache`)."""
    key, value = pair.key, pair.value
    kind = value.WhichOneof("value")
    if key == RECORD_ATTR:
        if kind != "string_value" or not 0 < len(value.string_value) <= LIVE_MAX_RECORD_TYPE:
            raise BadRequest(f"{RECORD_ATTR} is not text of 1 to {LIVE_MAX_RECORD_TYPE} characters")
        if value.string_value in (LIVE_RECEIVER_START, LIVE_RECEIVER_STOP):
            raise BadRequest(f"{RECORD_ATTR} {value.string_value!r} is the collector's own")
        return "record", value.string_value
    if key == ATTEMPT_ATTR:
        attempt = value.int_value if kind == "int_value" else 0
        return "attempt", attempt if 0 <= attempt <= MAX_ATTEMPT else 0
    if key in _INT_ATTRS:
        if kind != "int_value":
            raise BadRequest(f"{key} is not an integer")
        return _INT_ATTRS[key], value.int_value
    if key in _ID_ATTRS and kind in _SCALARS:
        return _ID_ATTRS[key], str(getattr(value, kind))[:MAX_NAME]
    return None


_ATTRIBUTES = AttributeCache(_attribute, "slime.seq", "seq")


def _check(fields: dict[str, Any], ts: int, trace_id: bytes, span_id: bytes,
           body: str | None) -> None:
    kind = fields["record"]
    traced = kind not in STATUS_RECORDS
    seq = fields.get("seq")
    if seq is None or seq < (1 if traced else 0):
        raise BadRequest(f"a {kind} record has no valid slime.seq")
    if not 0 < ts < _NS_LIMIT:
        raise BadRequest(f"a {kind} record has no valid time")
    if fields.get("dropped", 0) < 0 or fields.get("queued", 0) < 0:
        raise BadRequest(f"a {kind} record has a negative slime.dropped or slime.queued")
    if span_id and len(span_id) != 8:
        raise BadRequest(f"a {kind} record has a span id that is not 8 bytes")
    if not traced:
        return
    if len(trace_id) != 16 or not any(trace_id):
        raise BadRequest(f"a {kind} record has no valid 16-byte trace id")
    if body is None or not _looks_like_object(body):
        raise BadRequest(f"a {kind} record's body is not a JSON object as text")


def _looks_like_object(text: str) -> bool:
    """A JSON object's text: the reader parses it (and counts one that does not parse);
    here only its shape is checked, so receiving stays cheap."""
    return text[:1] == "{" and text[-1:] == "}"
