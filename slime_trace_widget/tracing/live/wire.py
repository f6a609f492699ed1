"""The few OTLP protobuf messages the live stream sends, written byte by byte.

Protobuf's wire format is small: a field is a tag (field number and wire type)
followed by a varint, 8 fixed bytes, or a length and bytes. Writing the
messages here directly (field numbers from opentelemetry-proto's
``logs.proto``, ``trace.proto``, ``common.proto`` and ``resource.proto``)
costs a fraction of building the generated message objects, on the thread that
shares the interpreter with the rollout, and needs no package at all. The
tests decode what is written here with opentelemetry-proto itself.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Mapping
from typing import Any

from ...values import clean_text

_UINT64 = (1 << 64) - 1
_FIXED64 = struct.Struct("<Q")
# time_unix_nano (field 1) and observed_time_unix_nano (field 11) of a LogRecord, with
# its severity (field 2, INFO), in one pack.
_LOG_HEAD = struct.Struct("<BQBQBB")
_DOUBLE = struct.Struct("<d")
_SMALL = tuple(bytes((n,)) for n in range(128))

# Tags: (field number << 3) | wire type (0 varint, 1 fixed64, 2 length-delimited).
# AnyValue
_STRING_VALUE, _BOOL_VALUE, _INT_VALUE, _DOUBLE_VALUE = 0x0A, 0x10, 0x18, 0x21
# KeyValue
_KEY, _VALUE = 0x0A, 0x12
# LogRecord
_LOG_TIME, _LOG_SEVERITY, _LOG_BODY, _LOG_ATTRIBUTE = 0x09, 0x10, 0x2A, 0x32
_LOG_TRACE_ID, _LOG_SPAN_ID, _LOG_OBSERVED = 0x4A, 0x52, 0x59
# Span
_SPAN_TRACE_ID, _SPAN_ID, _SPAN_PARENT, _SPAN_NAME, _SPAN_KIND = 0x0A, 0x12, 0x22, 0x2A, 0x30
_SPAN_START, _SPAN_END, _SPAN_ATTRIBUTE, _SPAN_STATUS = 0x39, 0x41, 0x4A, 0x7A
# Status
_STATUS_MESSAGE, _STATUS_CODE = 0x12, 0x18
# InstrumentationScope, Resource, Scope*/Resource* containers, Export*ServiceRequest
_SCOPE_NAME, _SCOPE_VERSION, _RESOURCE_ATTRIBUTE = 0x0A, 0x12, 0x0A
_FIRST, _SECOND = 0x0A, 0x12

SEVERITY_INFO = 9
SPAN_KIND_INTERNAL = 1
STATUS_CODE_ERROR = 2


def varint(value: int) -> bytes:
    """An unsigned varint; a negative int is written as its 64-bit two's complement."""
    if 0 <= value < 128:
        return _SMALL[value]
    value &= _UINT64
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def field(tag: int, content: bytes) -> bytes:
    """A length-delimited field (a string, bytes or a nested message)."""
    return _SMALL[tag] + varint(len(content)) + content


def text(value: str) -> bytes:
    """``value`` as UTF-8, lone surrogates replaced: protobuf strings must be valid UTF-8."""
    return clean_text(value).encode("utf-8")


def any_value(value: Any) -> bytes:
    """An ``AnyValue`` of a bool, int (64-bit), float or str; anything else is the caller's
    to turn into one of those first."""
    kind = type(value)
    if kind is str:
        return field(_STRING_VALUE, text(value))
    if kind is bool:
        return b"\x10\x01" if value else b"\x10\x00"
    if kind is int:
        return _SMALL[_INT_VALUE] + varint(value)
    if kind is float:
        return _SMALL[_DOUBLE_VALUE] + _DOUBLE.pack(value)
    raise TypeError(f"no AnyValue for a {kind.__name__}")


def key_value(key: bytes, value: Any) -> bytes:
    """A ``KeyValue``; ``key`` already UTF-8 (see :func:`text`)."""
    content = any_value(value)
    return (_SMALL[_KEY] + varint(len(key)) + key
            + _SMALL[_VALUE] + varint(len(content)) + content)


def log_attribute(key: bytes, value: Any) -> bytes:
    """One attribute field of a ``LogRecord`` (a :func:`key_value` in its field)."""
    pair = key_value(key, value)
    return _SMALL[_LOG_ATTRIBUTE] + varint(len(pair)) + pair


def span_attribute(key: bytes, value: Any) -> bytes:
    """One attribute field of a ``Span``."""
    pair = key_value(key, value)
    return _SMALL[_SPAN_ATTRIBUTE] + varint(len(pair)) + pair


def log_int_attribute(key: bytes, value: int) -> bytes:
    """:func:`log_attribute` of a 64-bit int, the common case written in one go."""
    number = varint(value)
    pair = (_SMALL[_KEY] + _SMALL[len(key)] + key + _SMALL[_VALUE]
            + _SMALL[len(number) + 1] + _SMALL[_INT_VALUE] + number) if len(key) < 100 else (
        key_value(key, value))
    return _SMALL[_LOG_ATTRIBUTE] + varint(len(pair)) + pair


def log_record(time_ns: int, observed_ns: int, body: bytes, attributes: bytes,
               trace_id: bytes, span_id: bytes) -> bytes:
    """A ``LogRecord`` (severity INFO) with a string body (``body``: UTF-8) and
    ``attributes``, :func:`log_attribute` fields joined."""
    value = _SMALL[_STRING_VALUE] + varint(len(body)) + body
    head = _LOG_HEAD.pack(_LOG_TIME, time_ns & _UINT64, _LOG_OBSERVED, observed_ns & _UINT64,
                          _LOG_SEVERITY, SEVERITY_INFO)
    record = head + _SMALL[_LOG_BODY] + varint(len(value)) + value + attributes
    if trace_id:
        record += _SMALL[_LOG_TRACE_ID] + varint(len(trace_id)) + trace_id
    if span_id:
        record += _SMALL[_LOG_SPAN_ID] + varint(len(span_id)) + span_id
    return record


def span(trace_id: bytes, span_id: bytes, parent_span_id: bytes, name: str, start_ns: int,
         end_ns: int, attributes: bytes, error: str | None) -> bytes:
    """A ``Span`` of kind INTERNAL with ``attributes`` (:func:`span_attribute` fields
    joined); status ERROR with ``error`` as message when not None."""
    parts = [field(_SPAN_TRACE_ID, trace_id), field(_SPAN_ID, span_id)]
    if parent_span_id:
        parts.append(field(_SPAN_PARENT, parent_span_id))
    parts += [field(_SPAN_NAME, text(name)), _SMALL[_SPAN_KIND], _SMALL[SPAN_KIND_INTERNAL],
              _SMALL[_SPAN_START], _FIXED64.pack(start_ns & _UINT64),
              _SMALL[_SPAN_END], _FIXED64.pack(end_ns & _UINT64), attributes]
    if error is not None:
        parts.append(field(_SPAN_STATUS, field(_STATUS_MESSAGE, text(error))
                           + _SMALL[_STATUS_CODE] + _SMALL[STATUS_CODE_ERROR]))
    return b"".join(parts)


def resource(attributes: Mapping[str, Any]) -> bytes:
    """A ``Resource`` with these attributes (None values left out)."""
    return b"".join(field(_RESOURCE_ATTRIBUTE, key_value(text(key), value))
                    for key, value in attributes.items() if value is not None)


def scope(name: str, version: str) -> bytes:
    """An ``InstrumentationScope``."""
    return field(_SCOPE_NAME, text(name)) + field(_SCOPE_VERSION, text(version))


def export_request(resource_bytes: bytes, scope_bytes: bytes, items: Iterable[bytes]) -> bytes:
    """An ``ExportLogsServiceRequest`` of log records, or an ``ExportTraceServiceRequest``
    of spans: the two have the same shape (one resource, one scope, its items)."""
    inner = field(_FIRST, scope_bytes) + b"".join(field(_SECOND, item) for item in items)
    return field(_FIRST, field(_FIRST, resource_bytes) + field(_SECOND, inner))
