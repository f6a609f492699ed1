"""OTLP trace requests into rows of spans: the one place that knows the wire format.

An ``ExportTraceServiceRequest`` arrives as protobuf (gRPC, or HTTP with
``application/x-protobuf``) or as OTLP's JSON (HTTP ``application/json``: the
protobuf JSON mapping, except that trace and span ids are hex, not base64). Both
end as :class:`SpanRows`, plain columns the store writes as they are. A request
that does not parse, or a span without valid ids and times or with a status code
OTLP does not define, is refused whole with a reason (:class:`BadRequest`): a
receiver must not half-accept a batch the client will send again. Spans of the
instrumentation scope :data:`LIVE_SCOPE` are slime's own, streamed live as log
records too (``sources/live``): they are taken (the client is answered) and not
kept here, where they would pass for an engine's requests. Attribute values become
plain data (strings, numbers, booleans, lists, dicts; bytes as hex) and are kept as
JSON text. The address the request came from, when the receiver knows it, is added to
each span's resource as :data:`~.span_schema.PEER_ADDRESS`.
"""

from __future__ import annotations

import base64
import json
import math
from dataclasses import dataclass, field
from typing import Any, TypeVar

from google.protobuf import json_format
from google.protobuf.message import DecodeError, Message
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from .span_schema import COLUMNS, PEER_ADDRESS

MessageT = TypeVar("MessageT", bound=Message)
#: Deepest nesting of array and kvlist values kept; deeper ones are cut to their text.
MAX_VALUE_DEPTH = 16
_ID_FIELDS = ("traceId", "spanId", "parentSpanId")
#: The instrumentation scope of the spans slime's live stream sends beside its log records.
LIVE_SCOPE = "slime_trace_widget.live"
#: Times are unsigned 64-bit in OTLP and signed in the store (year 2262).
_NS_LIMIT = 2**63
#: The span status codes OTLP defines: unset, ok, error. The wire takes any int32 (proto3
#: enums are open); a span with another code is refused, as one with a broken id is.
STATUS_CODES = range(3)


class BadRequest(ValueError):
    """The request cannot be taken: the reason is sent back to the client."""


@dataclass
class SpanRows:
    """Decoded spans as columns (one list per name of :data:`COLUMNS`)."""

    columns: dict[str, list] = field(default_factory=lambda: {name: [] for name in COLUMNS})
    #: Spans of :data:`LIVE_SCOPE` in the request, left out.
    live_spans: int = 0

    def __len__(self) -> int:
        return len(self.columns["span_id"])


def parse_protobuf(body: bytes, peer: str | None = None) -> SpanRows:
    """Spans of a binary ``ExportTraceServiceRequest`` sent from address ``peer``."""
    return request_rows(binary_message(body, ExportTraceServiceRequest()), peer)


def binary_message(body: bytes, message: MessageT) -> MessageT:
    """``message`` read from the binary ``body``; BadRequest naming its type if it is not one."""
    try:
        message.ParseFromString(body)
    except (DecodeError, RuntimeError, ValueError) as exc:
        raise BadRequest(f"the body is not an OTLP {message.DESCRIPTOR.name} ({exc})") from None
    return message


def parse_json(body: bytes, peer: str | None = None) -> SpanRows:
    """Spans of an OTLP/JSON ``ExportTraceServiceRequest`` (ids in hex) sent from ``peer``."""
    return request_rows(json_message(body, ExportTraceServiceRequest()), peer)


def json_message(body: bytes, message: MessageT) -> MessageT:
    """``message`` filled from an OTLP/JSON body (ids in hex, as OTLP writes them);
    :class:`BadRequest` naming the message type when the body is not one."""
    kind = type(message).__name__
    try:
        document = json.loads(body)
    except (ValueError, RecursionError) as exc:
        raise BadRequest(f"the body is not JSON ({exc})") from None
    if not isinstance(document, dict):
        raise BadRequest(f"the body is not an OTLP/JSON {kind} object")
    try:
        hex_ids_to_base64(document)
        return json_format.ParseDict(document, message, ignore_unknown_fields=True)
    except (json_format.ParseError, ValueError, TypeError, RecursionError) as exc:
        raise BadRequest(f"the body is not an OTLP/JSON {kind} ({exc})") from None


def request_rows(request: ExportTraceServiceRequest, peer: str | None = None) -> SpanRows:
    """Every span of the request as a row, ``peer`` (the sender's address) in each
    resource; :class:`BadRequest` for an unusable span."""
    rows = SpanRows()
    out = rows.columns
    for resource_spans in request.resource_spans:
        resource = attributes_of(resource_spans.resource.attributes)
        if peer:
            resource[PEER_ADDRESS] = peer
        service = resource.get("service.name")
        service_text = service if isinstance(service, str) else ""
        resource_text = json.dumps(resource, ensure_ascii=False)
        for scope_spans in resource_spans.scope_spans:
            if scope_spans.scope.name == LIVE_SCOPE:
                rows.live_spans += len(scope_spans.spans)
                continue
            for span in scope_spans.spans:
                if len(span.trace_id) != 16 or not any(span.trace_id):
                    raise BadRequest(f"span {span.name!r} has no valid 16-byte trace id")
                if len(span.span_id) != 8 or not any(span.span_id):
                    raise BadRequest(f"span {span.name!r} has no valid 8-byte span id")
                if span.parent_span_id and len(span.parent_span_id) != 8:
                    raise BadRequest(f"span {span.name!r} has a parent id that is not 8 bytes")
                start, end = span.start_time_unix_nano, span.end_time_unix_nano
                if not start or end < start:
                    raise BadRequest(f"span {span.name!r} has no start time or ends before it")
                if end >= _NS_LIMIT:
                    raise BadRequest(f"span {span.name!r} ends past what a store can hold")
                if span.status.code not in STATUS_CODES:
                    raise BadRequest(f"span {span.name!r} has status code {span.status.code}, "
                                     "not one OTLP defines (0 unset, 1 ok, 2 error)")
                out["trace_id"].append(span.trace_id.hex())
                out["span_id"].append(span.span_id.hex())
                out["parent_id"].append(span.parent_span_id.hex() if any(span.parent_span_id)
                                        else None)
                out["name"].append(span.name)
                out["start_ns"].append(start)
                out["end_ns"].append(end)
                out["service"].append(service_text)
                out["status"].append(int(span.status.code))
                out["attributes"].append(json.dumps(attributes_of(span.attributes),
                                                    ensure_ascii=False))
                out["resource"].append(resource_text)
                out["events"].append(json.dumps(
                    [{"name": event.name, "time_ns": event.time_unix_nano,
                      "attributes": attributes_of(event.attributes)} for event in span.events],
                    ensure_ascii=False))
                out["links"].append(json.dumps(
                    [{"trace_id": link.trace_id.hex(), "span_id": link.span_id.hex(),
                      "attributes": attributes_of(link.attributes)} for link in span.links],
                    ensure_ascii=False))
    return rows


def attributes_of(pairs: Any) -> dict[str, Any]:
    """OTLP key-values as plain data in a dict (a repeated key keeps its last value, as SDKs do)."""
    return {pair.key: _value(pair.value, 0) for pair in pairs}


def _value(value: Any, depth: int) -> Any:
    kind = value.WhichOneof("value")
    if kind is None:
        return None
    if kind == "string_value":
        return value.string_value
    if kind == "bool_value":
        return value.bool_value
    if kind == "int_value":
        return value.int_value
    if kind == "double_value":
        number = value.double_value
        return number if math.isfinite(number) else str(number)  # JSON has no inf or nan
    if kind == "bytes_value":
        return value.bytes_value.hex()
    if depth >= MAX_VALUE_DEPTH:
        return "…"
    if kind == "array_value":
        return [_value(item, depth + 1) for item in value.array_value.values]
    if kind == "kvlist_value":
        return {pair.key: _value(pair.value, depth + 1) for pair in value.kvlist_value.values}
    return None  # a string-table index (profiles only): nothing to resolve it against


def hex_ids_to_base64(node: Any) -> None:
    """OTLP/JSON writes ids as hex; the protobuf JSON mapping reads bytes as base64."""
    stack = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            for key, child in item.items():
                if key in _ID_FIELDS or (key in ("trace_id", "span_id", "parent_span_id")):
                    if isinstance(child, str) and child:
                        try:
                            item[key] = base64.b64encode(bytes.fromhex(child)).decode("ascii")
                        except ValueError:
                            raise BadRequest(f"{key} {child[:40]!r} is not hex") from None
                else:
                    stack.append(child)
        elif isinstance(item, list):
            stack.extend(item)
