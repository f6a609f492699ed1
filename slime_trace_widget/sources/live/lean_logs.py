"""A lean reading of OTLP log requests: the same wire bytes, decoded only as deep as the
live store needs, so the receiver keeps up with tens of thousands of records a second.

Declared here at run time, the messages ``ExportLogsServiceRequest`` >
``ResourceLogs`` > ``ScopeLogs`` > ``LogRecord`` keep their field numbers and wire
types, but a record's ``attributes`` are left as the bytes of each ``KeyValue`` and its
``body`` as the bytes of its ``AnyValue`` (a message and a bytes field are the same on
the wire). Most attributes of a stream repeat byte for byte (the record type, the
sample and group ids, the attempt, the rollout), so each distinct ``KeyValue`` is
decoded once, by the real OTLP message, and then looked up (:class:`AttributeCache`);
only ``slime.seq``, new on every record, is decoded each time, as the varint it is.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.message import DecodeError
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

from ..engine.otlp import BadRequest, binary_message

_F = descriptor_pb2.FieldDescriptorProto
_ONE, _MANY = _F.LABEL_OPTIONAL, _F.LABEL_REPEATED
_PACKAGE = "slime_trace_widget.lean_logs"
#: (message, ((field, number, type, label, message type or ""), ...)), as OTLP numbers them.
_MESSAGES = (
    ("LogRecord", (("time_unix_nano", 1, _F.TYPE_FIXED64, _ONE, ""),
                   ("body", 5, _F.TYPE_BYTES, _ONE, ""),
                   ("attributes", 6, _F.TYPE_BYTES, _MANY, ""),
                   ("trace_id", 9, _F.TYPE_BYTES, _ONE, ""),
                   ("span_id", 10, _F.TYPE_BYTES, _ONE, ""))),
    ("ScopeLogs", (("scope", 1, _F.TYPE_BYTES, _ONE, ""),
                   ("log_records", 2, _F.TYPE_MESSAGE, _MANY, "LogRecord"))),
    ("ResourceLogs", (("resource", 1, _F.TYPE_BYTES, _ONE, ""),
                      ("scope_logs", 2, _F.TYPE_MESSAGE, _MANY, "ScopeLogs"))),
    ("ExportLogsServiceRequest", (("resource_logs", 1, _F.TYPE_MESSAGE, _MANY,
                                   "ResourceLogs"),)),
)


def _request_class() -> Any:
    proto = descriptor_pb2.FileDescriptorProto(name="slime_trace_widget/lean_logs.proto",
                                               package=_PACKAGE, syntax="proto3")
    for name, fields in _MESSAGES:
        message = proto.message_type.add(name=name)
        for field_name, number, kind, label, type_name in fields:
            field = message.field.add(name=field_name, number=number, type=kind, label=label)
            if type_name:
                field.type_name = f".{_PACKAGE}.{type_name}"
    pool = descriptor_pool.DescriptorPool()
    pool.Add(proto)
    return message_factory.GetMessageClass(
        pool.FindMessageTypeByName(f"{_PACKAGE}.ExportLogsServiceRequest"))


LeanRequest = _request_class()


def parse_request(body: bytes) -> Any:
    """The lean request of a binary ``ExportLogsServiceRequest``; BadRequest if it is not."""
    return binary_message(body, LeanRequest())


def body_text(raw: bytes) -> str | None:
    """The string of a body's ``AnyValue`` bytes; None when it holds no string."""
    if not raw:
        return None
    if raw[0] == 0x0A:  # field 1, length-delimited: string_value, the usual case
        length, at = _varint(raw, 1)
        if length is not None and at + length == len(raw):
            try:
                return raw[at:].decode("utf-8")
            except UnicodeDecodeError:
                raise BadRequest("a record's body is not valid UTF-8") from None
    value = _any_value(raw)
    return value.string_value if value.WhichOneof("value") == "string_value" else None


def _any_value(raw: bytes) -> AnyValue:
    try:
        return AnyValue.FromString(raw)
    except (DecodeError, RuntimeError, ValueError) as exc:
        raise BadRequest(f"a record's body is not an OTLP AnyValue ({exc})") from None


def _varint(raw: bytes, at: int) -> tuple[int | None, int]:
    """The varint at ``raw[at:]`` and where it ends (None: cut short or over 64 bits)."""
    value = shift = 0
    while at < len(raw) and shift < 64:
        byte = raw[at]
        value |= (byte & 0x7F) << shift
        at += 1
        if byte < 0x80:
            return value, at
        shift += 7
    return None, at


#: What an attribute means to the store: (column, value), or None for one it ignores.
Meaning = tuple[str, Any] | None


class AttributeCache:
    """Each distinct ``KeyValue`` of a stream decoded once by ``decode`` (the real OTLP
    message, typed checks and all), then looked up by its bytes; ``slime.seq``, unique per
    record, is decoded directly as ``(unique_column, value)`` when it is a plain
    non-negative integer. Bounded: emptied when it holds :data:`LIMIT` entries."""

    LIMIT = 100_000
    #: Longest attribute (as bytes) remembered: repeats are short (ids, names, kinds);
    #: a long one is decoded each time, so the cache stays small whatever arrives.
    LARGEST_KEPT = 256

    def __init__(self, decode: Callable[[KeyValue], Meaning], unique_key: str,
                 unique_column: str) -> None:
        self._decode = decode
        self._unique_column = unique_column
        self._known: dict[bytes, Meaning] = {}
        encoded = unique_key.encode()
        # KeyValue: field 1 (key) length-delimited, then field 2 (value) length-delimited
        # holding AnyValue field 3 (int_value) as a varint.
        self._unique_prefix = bytes([0x0A, len(encoded)]) + encoded + b"\x12"

    def meaning(self, raw: bytes) -> Meaning:
        known = self._known.get(raw, _MISSING)
        if known is not _MISSING:
            return known  # type: ignore[return-value]
        if raw.startswith(self._unique_prefix):
            size, at = _varint(raw, len(self._unique_prefix))
            if size is not None and at + size == len(raw) and size and raw[at] == 0x18:
                value, end = _varint(raw, at + 1)
                if value is not None and end == len(raw) and value < 2**63:
                    return self._unique_column, value
        try:
            pair = KeyValue.FromString(raw)
        except (DecodeError, RuntimeError, ValueError) as exc:
            raise BadRequest(f"an attribute is not an OTLP KeyValue ({exc})") from None
        meaning = self._decode(pair)
        if len(raw) <= self.LARGEST_KEPT:
            if len(self._known) >= self.LIMIT:
                self._known.clear()
            self._known[raw] = meaning
        return meaning


_MISSING = object()
