"""Records into OTLP: each record one LogRecord, each ended span also one Span.

The wire is docs/live.md's. A record's body is the record as compact JSON, exactly
as the carrier holds it (values that JSON cannot hold are made plain by
:func:`slime_trace_widget.values.plain_value`; NaN stays NaN, as Python's ``json``
reads and writes it; text is ASCII-escaped, so any string survives). Ids are the
W3C ids of :mod:`slime_trace_widget.schema`, the ones a request to the engine
carries in its ``traceparent``: in Phoenix or Jaeger the engine's own spans hang
under the spans sent here.

Encoding runs on the sender's thread, never on the recording one.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import time
from collections.abc import Callable, Mapping
from typing import Any

from ..._version import __version__
from ...schema import (
    ERROR_MESSAGE_ATTR,
    ERROR_TYPE_ATTR,
    LIVE_END_RESENT,
    LIVE_MAX_RECORD_TYPE,
    LIVE_RECEIVER_START,
    LIVE_RECEIVER_STOP,
    RECEIVER_PREFIX,
    RECORD_ATTEMPT,
    RECORD_ATTRS,
    RECORD_GROUP_ID,
    RECORD_NAME,
    RECORD_PARENT_SPAN_ID,
    RECORD_SAMPLE_ID,
    RECORD_SPAN_ID,
    RECORD_TRACE_ID,
    RECORD_TS,
    RECORD_TYPE,
    SPAN_END,
    SPAN_START,
    w3c_trace_id,
)
from ...values import plain_value, short_text
from . import wire
from .outbox import Queued, ResentEnd

#: Instrumentation scope of everything sent; the receiver skips spans of this scope.
SCOPE_NAME = "slime_trace_widget.live"
DEFAULT_SERVICE = "slime-rollout"
# Attribute keys of the wire (docs/live.md).
ATTR_RECORD = "slime.record"
ATTR_SEQ = "slime.seq"
ATTR_DROPPED = "slime.dropped"
ATTR_QUEUED = "slime.queued"
ATTR_SAMPLE_ID = "slime.sample_id"
ATTR_GROUP_ID = "slime.group_id"
ATTR_ATTEMPT = "slime.attempt"
ATTR_ROLLOUT_ID = "slime.rollout_id"
ATTR_SENDER = "slime.live.sender"
#: Open spans the encoder remembers for their end; beyond that the oldest is forgotten
#: (its log records are sent all the same, only its OTLP span is not).
MAX_OPEN_SPANS = 100_000
#: Records encoded between two calls of ``encode``'s ``pause`` (well under a millisecond).
PAUSE_EVERY = 64
#: The receiver keeps times after the epoch and within int64 nanoseconds, and a trace
#: record only with a 16-byte trace id; it refuses a whole request that breaks either.
MAX_NANOSECONDS = 2**63
MAX_SECONDS = MAX_NANOSECONDS / 1e9
TRACE_ID_BYTES = 16
_COLLECTORS = (LIVE_RECEIVER_START, LIVE_RECEIVER_STOP)
_MAX_TEXT = 1000
_INT64 = range(-(2**63), 2**63)
_KEYS = {key: wire.text(key) for key in (ATTR_RECORD, ATTR_SEQ, ATTR_DROPPED, ATTR_QUEUED,
                                         ATTR_SAMPLE_ID, ATTR_GROUP_ID, ATTR_ATTEMPT,
                                         ATTR_ROLLOUT_ID)}
_SEQ_KEY = _KEYS[ATTR_SEQ]
#: Attribute keys remembered as UTF-8 at most (then encoded each time).
_MAX_KEYS = 10_000


def sender_identity(pid: int | None = None) -> tuple[str, int, str]:
    """This process's (host, pid, sender id): ``<host>:<pid>:<start epoch ns>``, or
    ``host <host>:<pid>:<start epoch ns>`` on a host whose name would make the id begin
    with the collector's own prefix (``schema.RECEIVER_PREFIX``), which the collector
    refuses: a host name has no space, so the id is still no other host's."""
    host = socket.gethostname()
    pid = os.getpid() if pid is None else pid
    sender = f"{host}:{pid}:{time.time_ns()}"
    return host, pid, f"host {sender}" if sender.startswith(RECEIVER_PREFIX) else sender


def resource_attributes(host: str, pid: int, sender: str) -> dict[str, Any]:
    """The resource of every request: who sends (``OTEL_SERVICE_NAME`` names the service)."""
    return {
        "service.name": os.environ.get("OTEL_SERVICE_NAME") or DEFAULT_SERVICE,
        "host.name": host,
        "process.pid": pid,
        ATTR_SENDER: sender,
    }


_to_json = json.JSONEncoder(separators=(",", ":"), default=plain_value).encode
_plain_to_json = json.JSONEncoder(separators=(",", ":")).encode


def record_body(record: Any) -> str:
    """The record as compact JSON, as the carrier holds it (see the module docstring).

    A snapshot of the record and its attrs is taken first: a span's end attributes
    may still be added by the recording thread (``span.set`` after the block).
    """
    snapshot = dict(record)
    attrs = snapshot.get(RECORD_ATTRS)
    if type(attrs) is dict:
        snapshot[RECORD_ATTRS] = dict(attrs)
    try:
        return _to_json(snapshot)
    except (TypeError, ValueError, RecursionError):
        return _plain_to_json(plain_value(snapshot))


def attribute_value(value: Any) -> Any:
    """``value`` as an attribute: bool, 64-bit int, float and text as themselves,
    anything else (containers, big ints, arrays) as JSON text."""
    kind = type(value)
    if kind is str or kind is bool or kind is float or (kind is int and value in _INT64):
        return value
    plain = plain_value(value)
    if type(plain) is not type(value) and type(plain) in (str, bool, float, int):
        return attribute_value(plain)
    try:
        return _plain_to_json(plain)
    except (TypeError, ValueError, RecursionError):
        return short_text(plain, _MAX_TEXT)


def _encoded_key(key: Any) -> bytes:
    """An attribute key as UTF-8, remembered (a rollout uses a few dozen keys)."""
    try:
        return _KEYS[key]
    except KeyError:
        encoded = wire.text(key if type(key) is str else short_text(key, _MAX_TEXT))
        if type(key) is str and len(_KEYS) < _MAX_KEYS:
            _KEYS[key] = encoded
        return encoded
    except TypeError:
        return wire.text(short_text(key, _MAX_TEXT))


def _span_attributes(values: Mapping[Any, Any]) -> bytes:
    """A span's attribute fields, of the values that are not None."""
    return b"".join(wire.span_attribute(_encoded_key(key), attribute_value(value))
                    for key, value in values.items() if value is not None)


def _log_attributes(values: Mapping[Any, Any]) -> bytes:
    """A log record's attribute fields, of the values that are not None."""
    return b"".join(wire.log_attribute(_encoded_key(key), attribute_value(value))
                    for key, value in values.items() if value is not None)


class _IdentityAttributes:
    """The attribute fields of a record's identity (its type, sample, group, attempt and
    rollout), remembered per distinct identity: a rollout repeats a few thousand of them
    over and over, so most records cost one lookup here."""

    __slots__ = ("_attribute", "_keys", "_known")
    #: Identities kept before starting over (a few MB at most).
    LIMIT = 50_000

    def __init__(self, attribute: Callable[[bytes, Any], bytes], keys: tuple[str, ...]) -> None:
        self._attribute = attribute  # wire.log_attribute or wire.span_attribute
        self._keys = tuple(_KEYS[key] for key in keys)
        self._known: dict[tuple, bytes] = {}

    def encoded(self, *values: Any) -> bytes:
        """The fields of ``values`` (one per key; None left out)."""
        lookup = (values, tuple(map(type, values)))  # 1, 1.0 and True are equal keys
        try:
            return self._known[lookup]
        except KeyError:
            encoded = self._encode(values)
            if len(self._known) >= self.LIMIT:
                self._known.clear()
            self._known[lookup] = encoded
            return encoded
        except TypeError:  # an unhashable value from a damaged record
            return self._encode(values)

    def _encode(self, values: tuple) -> bytes:
        return b"".join(self._attribute(key, attribute_value(value))
                        for key, value in zip(self._keys, values, strict=True)
                        if value is not None)


def _trace_bytes(trace_id: Any) -> bytes:
    """The 16 bytes of :func:`~slime_trace_widget.schema.w3c_trace_id`."""
    if trace_id is None:
        return b""
    try:
        return bytes.fromhex(w3c_trace_id(trace_id))
    except Exception:  # an id whose str() fails: the record goes without it
        return b""


def _span_bytes(span_id: Any) -> bytes:
    """The 8 bytes of :func:`~slime_trace_widget.schema.w3c_span_id`, without the hex."""
    if span_id is None:
        return b""
    try:
        text = span_id if type(span_id) is str else str(span_id)
        return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).digest()
    except Exception:
        return b""


class Encoder:
    """Turns queued records into one logs request and one traces request per batch.

    Keeps each open span's start (bounded by :data:`MAX_OPEN_SPANS`) until its end
    arrives, so the ended span can be sent whole.
    """

    def __init__(self, resource: Mapping[str, Any]) -> None:
        self._resource = wire.resource({key: attribute_value(value)
                                        for key, value in resource.items()})
        self._scope = wire.scope(SCOPE_NAME, __version__)
        self._open: dict[Any, tuple[dict, int | None]] = {}
        self._identity = _IdentityAttributes(wire.log_attribute, (
            ATTR_RECORD, ATTR_SAMPLE_ID, ATTR_GROUP_ID, ATTR_ATTEMPT, ATTR_ROLLOUT_ID))
        self._span_identity = _IdentityAttributes(wire.span_attribute, (
            ATTR_SAMPLE_ID, ATTR_GROUP_ID, ATTR_ATTEMPT, ATTR_ROLLOUT_ID))
        self._trace_ids: dict[Any, bytes] = {}
        self.forgotten_spans = 0

    def request(self, items: list[bytes]) -> bytes:
        """An export request of log records or of spans (the two have one shape)."""
        return wire.export_request(self._resource, self._scope, items)

    def encode(self, batch: list[Queued], dropped: int,
               pause: Callable[[], None] | None = None) -> tuple[list[bytes], list[bytes], int]:
        """The batch's log records (its last record carrying ``dropped``; :meth:`request`
        makes a request of them), its ended spans, and how many of its records could not
        be encoded (left out: the caller counts them dropped, so one odd record never
        stops the stream, nor makes the receiver refuse the others); ``pause`` is called
        after every :data:`PAUSE_EVERY` records."""
        logs: list[bytes] = []
        spans: list[bytes] = []
        unencodable = 0
        last = len(batch) - 1
        for position, item in enumerate(batch):
            try:
                log, span = self._encode_one(item, dropped if position == last else None)
            except Exception:  # any record the encoder cannot write is dropped, counted
                unencodable += 1
                continue
            logs.append(log)
            if span is not None:
                spans.append(span)
            if pause is not None and position % PAUSE_EVERY == PAUSE_EVERY - 1:
                pause()
        return logs, spans, unencodable

    def status_request(self, kind: str, seq: int, dropped: int, queued: int,
                       rollout_id: int | None) -> bytes:
        """A heartbeat or the closing record: body empty, the sender's counts as attributes."""
        now = time.time_ns()
        attrs = _log_attributes({ATTR_RECORD: kind, ATTR_SEQ: seq, ATTR_DROPPED: dropped,
                                 ATTR_QUEUED: queued, ATTR_ROLLOUT_ID: rollout_id})
        return self.request([wire.log_record(now, now, b"", attrs, b"", b"")])

    def _encode_one(self, item: Queued, dropped: int | None) -> tuple[bytes, bytes | None]:
        seq, observed_ns, rollout_id, record = item
        resent = type(record) is ResentEnd
        if resent:
            record = record.record
        get = record.get
        kind = get(RECORD_TYPE)
        own_span = get(RECORD_SPAN_ID)
        ts = get(RECORD_TS)
        time_ns = int(ts * 1e9) if type(ts) is float and 0 < ts < MAX_SECONDS else 0
        if not 0 < time_ns < MAX_NANOSECONDS:
            time_ns = _nanoseconds(ts, observed_ns)
        record_type = (LIVE_END_RESENT if resent
                       else kind if type(kind) is str else short_text(kind))
        if not 0 < len(record_type) <= LIVE_MAX_RECORD_TYPE or record_type in _COLLECTORS:
            raise ValueError("a record type the receiver refuses")
        attrs = wire.log_int_attribute(_SEQ_KEY, seq) + self._identity.encoded(
            record_type, get(RECORD_SAMPLE_ID), get(RECORD_GROUP_ID), get(RECORD_ATTEMPT),
            rollout_id)
        if dropped is not None:
            attrs += wire.log_int_attribute(_KEYS[ATTR_DROPPED], dropped)
        span_bytes = _span_bytes(own_span if own_span is not None
                                 else get(RECORD_PARENT_SPAN_ID))
        trace_bytes = self._trace_id(get(RECORD_TRACE_ID))
        if len(trace_bytes) != TRACE_ID_BYTES:  # the receiver keeps no record without one
            raise ValueError("a record without a usable trace id")
        log = wire.log_record(time_ns, observed_ns, record_body(record).encode("ascii"), attrs,
                              trace_bytes, span_bytes)
        span = None
        if kind == SPAN_START and own_span is not None:
            self._remember(own_span, record, rollout_id)
        elif kind == SPAN_END and own_span is not None:
            span = self._ended_span(own_span, span_bytes, record, time_ns)
        return log, span

    def _trace_id(self, text: Any) -> bytes:
        """The trace id's bytes, remembered per trace (a sample's records share one)."""
        try:
            return self._trace_ids[text]
        except KeyError:
            encoded = _trace_bytes(text)
            if len(self._trace_ids) >= _IdentityAttributes.LIMIT:
                self._trace_ids.clear()
            self._trace_ids[text] = encoded
            return encoded
        except TypeError:
            return _trace_bytes(text)

    def _remember(self, span_id: Any, record: dict, rollout_id: int | None) -> None:
        try:
            self._open[span_id] = (record, rollout_id)
        except TypeError:  # an unhashable id from a damaged record: no span for it
            return
        if len(self._open) > MAX_OPEN_SPANS:
            del self._open[next(iter(self._open))]
            self.forgotten_spans += 1

    def _ended_span(self, span_id: Any, span_bytes: bytes, end: dict, end_ns: int
                    ) -> bytes | None:
        try:
            start, rollout_id = self._open.pop(span_id)
        except (KeyError, TypeError):
            return None
        start_get = start.get
        attrs: dict[Any, Any] = {}
        for source in (start_get(RECORD_ATTRS), end.get(RECORD_ATTRS)):
            if isinstance(source, Mapping):
                attrs.update(dict(source))
        error = attrs.get(ERROR_TYPE_ATTR)
        message = None if error is None else short_text(
            attrs.get(ERROR_MESSAGE_ATTR) or error, _MAX_TEXT)
        encoded_attrs = _span_attributes(attrs) + self._span_identity.encoded(
            start_get(RECORD_SAMPLE_ID), start_get(RECORD_GROUP_ID), start_get(RECORD_ATTEMPT),
            rollout_id)
        name = start_get(RECORD_NAME)
        start_ns = _nanoseconds(start_get(RECORD_TS), end_ns)
        return wire.span(
            self._trace_id(start_get(RECORD_TRACE_ID)), span_bytes,
            _span_bytes(start_get(RECORD_PARENT_SPAN_ID)),
            name if type(name) is str else short_text(name, _MAX_TEXT),
            start_ns, max(end_ns, start_ns), encoded_attrs, message)


def _nanoseconds(ts: Any, fallback: int) -> int:
    """Epoch seconds as integer nanoseconds; ``fallback`` (the time the record was
    queued) for a missing time or one outside what the receiver keeps: after the epoch,
    within int64 nanoseconds. The record's body keeps its own time either way."""
    try:
        value = int(float(ts) * 1e9)
    except (TypeError, ValueError, OverflowError):
        return fallback
    return value if 0 < value < MAX_NANOSECONDS else fallback
