"""Sending OTLP trace requests: over HTTP (protobuf body) or gRPC, with retries.

A request is sent again only when the receiver said, or the connection showed,
that it was not taken: HTTP 429/502/503/504 (after ``Retry-After`` when given),
gRPC ``UNAVAILABLE`` (with the channel still connected after it: the receiver's
answer) or ``RESOURCE_EXHAUSTED``, or a connection that could not be opened.
When a request went out and no answer came back (a timeout, a reset while
reading the reply, a gRPC ``UNAVAILABLE`` that leaves the channel disconnected)
it may have been taken, so it is not sent again: the export stops with
:class:`RequestUnanswered`. A request larger than the receiver takes (HTTP 413,
gRPC ``RESOURCE_EXHAUSTED`` saying "larger than max") will never be taken as it
is, so it is not retried either: :class:`RequestTooLarge` lets the caller send it
again in smaller pieces. A receiver that refuses a request otherwise (400, 401,
404, ``INVALID_ARGUMENT``...) stops the export, in one line. Spans the receiver
accepted with a partial success are not retried (OTLP says those were rejected as
invalid); their count is reported.
"""

from __future__ import annotations

import gzip
import http.client
import random
import threading
import time
import urllib.parse
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

PROTOCOLS = ("http/protobuf", "grpc")
TRACES_PATH = "/v1/traces"
RETRY_STATUSES = frozenset({429, 502, 503, 504})
#: What HTTP answers to a body larger than the receiver takes.
TOO_LARGE_STATUS = 413
#: How gRPC says a message was over a size limit (with ``RESOURCE_EXHAUSTED``), on either
#: side: "Received message larger than max (N vs. M)", "Sent message larger than max".
GRPC_TOO_LARGE = "larger than max"
#: Seconds one request may keep being retried before the export gives up.
RETRY_SECONDS = 60.0
FIRST_BACKOFF_SECONDS = 0.5
MAX_BACKOFF_SECONDS = 10.0
DEFAULT_TIMEOUT_SECONDS = 30.0


class OtlpExportError(RuntimeError):
    """The export stopped: the message is one line, naming the endpoint and the reason."""


class RequestTooLarge(OtlpExportError):
    """The receiver refused the request for its size: sent again whole it would be
    refused again, so it is not retried; smaller requests may go through."""


class RequestUnanswered(OtlpExportError):
    """A request went out and no reply came: it may have arrived, so it is not sent
    again, by this export or (through the dataset's journal) a later one."""


class _Retry(Exception):
    """The request was not taken and may be sent again (after ``after`` seconds if known);
    ``unreached`` when no connection could be made at all."""

    def __init__(self, reason: str, after: float | None = None, unreached: bool = False
                 ) -> None:
        super().__init__(reason)
        self.after, self.unreached = after, unreached


@dataclass
class Reply:
    """What the receiver answered to one request it took."""

    rejected_spans: int = 0
    message: str = ""


class HttpSender:
    """OTLP/HTTP with a protobuf body, a new connection per request (so a connection
    that fails to open is known not to have carried the request)."""

    def __init__(self, endpoint: str, headers: Mapping[str, str] | None = None,
                 timeout: float = DEFAULT_TIMEOUT_SECONDS, compression: str | None = None
                 ) -> None:
        parts = urllib.parse.urlsplit(endpoint)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise OtlpExportError(f"{endpoint}: an OTLP/HTTP endpoint is a URL such as "
                                  f"http://127.0.0.1:4318{TRACES_PATH}")
        _check_compression(compression)
        self.endpoint = endpoint
        self.secure = parts.scheme == "https"
        self.host, self.port = parts.hostname, parts.port
        self.path = (parts.path if parts.path not in ("", "/") else TRACES_PATH) + (
            f"?{parts.query}" if parts.query else "")
        self.timeout, self.compression = timeout, compression
        self.headers = {"Content-Type": "application/x-protobuf", **dict(headers or {})}
        if compression:
            self.headers["Content-Encoding"] = compression

    def send(self, request: ExportTraceServiceRequest) -> Reply:
        body = request.SerializeToString()
        if self.compression == "gzip":
            body = gzip.compress(body, compresslevel=5)
        connection_type = (http.client.HTTPSConnection if self.secure
                           else http.client.HTTPConnection)
        connection = connection_type(self.host, self.port, timeout=self.timeout)
        try:
            try:
                connection.connect()
            except OSError as exc:
                raise _Retry(f"cannot connect ({_reason(exc)})", unreached=True) from None
            try:
                connection.request("POST", self.path, body, self.headers)
                response = connection.getresponse()
                answer = response.read()
            except (OSError, http.client.HTTPException) as exc:
                raise RequestUnanswered(f"{self.endpoint}: no reply to a request that was "
                                        f"sent ({_reason(exc)}); it may have arrived, so it "
                                        "is not sent again") from None
        finally:
            connection.close()
        if response.status in RETRY_STATUSES:
            raise _Retry(f"HTTP {response.status} {response.reason}",
                         _retry_after(response.getheader("Retry-After")))
        if response.status == TOO_LARGE_STATUS:
            raise RequestTooLarge(f"{self.endpoint}: HTTP {response.status} "
                                  f"{response.reason} for {len(body)} bytes"
                                  f"{_quoted_body(answer)}")
        if not 200 <= response.status < 300:
            raise OtlpExportError(f"{self.endpoint} refused the spans: HTTP {response.status} "
                                  f"{response.reason}{_quoted_body(answer)}")
        return _reply(answer)


class GrpcSender:
    """OTLP/gRPC on one channel: ``host:port`` or ``http://host:port`` in the clear,
    ``https://host:port`` with TLS; with ``compression="gzip"`` every request goes
    gzip-compressed (gRPC's own message compression, which every receiver accepts)."""

    def __init__(self, endpoint: str, headers: Mapping[str, str] | None = None,
                 timeout: float = DEFAULT_TIMEOUT_SECONDS, compression: str | None = None
                 ) -> None:
        import grpc

        _check_compression(compression)
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2_grpc import (
            TraceServiceStub,
        )

        self._grpc = grpc
        self.endpoint = endpoint
        scheme, _, rest = endpoint.rpartition("://")
        target = rest.rstrip("/")
        if scheme not in ("", "http", "https", "grpc") or ":" not in target:
            raise OtlpExportError(f"{endpoint}: an OTLP/gRPC endpoint is HOST:PORT "
                                  "(or http:// / https:// HOST:PORT)")
        squeeze = grpc.Compression.Gzip if compression == "gzip" else None
        self.channel = (grpc.secure_channel(target, grpc.ssl_channel_credentials(),
                                            compression=squeeze)
                        if scheme == "https" else
                        grpc.insecure_channel(target, compression=squeeze))
        self.stub = TraceServiceStub(self.channel)
        self.metadata = [(key.lower(), value) for key, value in dict(headers or {}).items()]
        self.timeout = timeout

    def send(self, request: ExportTraceServiceRequest) -> Reply:
        grpc = self._grpc
        if self._state() != grpc.ChannelConnectivity.READY:
            self._connect()
        try:
            response = self.stub.Export(request, timeout=self.timeout, metadata=self.metadata)
        except grpc.RpcError as exc:
            code = exc.code() if hasattr(exc, "code") else None
            details = exc.details() if hasattr(exc, "details") else str(exc)
            if code == grpc.StatusCode.RESOURCE_EXHAUSTED and \
                    GRPC_TOO_LARGE in str(details).lower():
                raise RequestTooLarge(f"{self.endpoint}: gRPC {code.name}: "
                                      f"{' '.join(str(details).split())[:300]}") from None
            if code == grpc.StatusCode.UNAVAILABLE and \
                    self._state() != grpc.ChannelConnectivity.READY:
                raise RequestUnanswered(f"{self.endpoint}: the connection was lost during a "
                                        f"request ({details}); it may have arrived, so it "
                                        "is not sent again") from None
            if code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.RESOURCE_EXHAUSTED):
                raise _Retry(f"gRPC {code.name}: {details}") from None
            if code == grpc.StatusCode.DEADLINE_EXCEEDED:
                raise RequestUnanswered(f"{self.endpoint}: no reply within {self.timeout:g} "
                                        "s to a request that was sent; it may have arrived, "
                                        "so it is not sent again") from None
            name = code.name if code is not None else "error"
            raise OtlpExportError(f"{self.endpoint} refused the spans: gRPC {name}: "
                                  f"{' '.join(str(details).split())[:300]}") from None
        partial = response.partial_success
        return Reply(int(partial.rejected_spans), partial.error_message)

    def _state(self) -> Any:
        """The channel's connectivity now (grpc calls a new subscriber with it)."""
        return self._first_state(lambda connectivity: True, try_to_connect=False)

    def _connect(self) -> None:
        """Connect the channel before a request (it connects lazily, and goes idle when
        a connection is lost): an endpoint nobody listens on is a clear error at once,
        not a slow ``UNAVAILABLE`` on every retry, and a request only ever starts on a
        connected channel, so an ``UNAVAILABLE`` that leaves the channel connected is
        the receiver's answer, and one that does not is a connection lost while the
        request may have reached it."""
        connectivity = self._grpc.ChannelConnectivity
        settled = (connectivity.READY, connectivity.TRANSIENT_FAILURE, connectivity.SHUTDOWN)
        if self._first_state(settled.__contains__, try_to_connect=True) != connectivity.READY:
            raise _Retry("cannot connect", unreached=True)

    def _first_state(self, wanted: Callable[[Any], bool], try_to_connect: bool) -> Any:
        """The first connectivity state grpc reports that ``wanted`` accepts, waiting at
        most the request timeout for it (None when none came)."""
        came = threading.Event()
        states: list[Any] = []

        def watch(connectivity: Any) -> None:
            if wanted(connectivity):
                states.append(connectivity)
                came.set()

        self.channel.subscribe(watch, try_to_connect=try_to_connect)
        try:
            came.wait(self.timeout)
        finally:
            self.channel.unsubscribe(watch)
        return states[0] if states else None

    def close(self) -> None:
        self.channel.close()


def send_with_retries(send: Callable[[], Reply], endpoint: str, *,
                      retry_seconds: float = RETRY_SECONDS, confirmed: int = 0,
                      sleep: Callable[[float], None] = time.sleep,
                      clock: Callable[[], float] = time.monotonic,
                      attempting: Callable[[], None] | None = None,
                      retrying: Callable[[], None] | None = None) -> tuple[Reply, int]:
    """``send()`` until it is taken; the reply and the number of retries. Waits double
    from :data:`FIRST_BACKOFF_SECONDS` (with jitter, or the receiver's ``Retry-After``)
    for up to ``retry_seconds``; ``confirmed`` (spans taken before) goes in the error.
    ``attempting()`` is called before each try, ``retrying()`` after each refusal that
    is tried again, before the wait (a journal's records of each try: a process
    stopped during the wait then knows the request was not taken)."""
    started = clock()
    retries = 0
    wait = FIRST_BACKOFF_SECONDS
    while True:
        try:
            if attempting is not None:
                attempting()
            return send(), retries
        except _Retry as exc:
            if exc.unreached and not confirmed:
                raise OtlpExportError(f"{endpoint}: {exc}: is an OTLP receiver listening "
                                      "there?") from None
            pause = exc.after if exc.after is not None else wait * random.uniform(0.5, 1.0)
            if clock() + pause - started > retry_seconds:
                raise OtlpExportError(
                    f"{endpoint}: {exc} (gave up after {retries + 1} tries in "
                    f"{clock() - started:.0f} s; {confirmed} span(s) confirmed before)"
                ) from None
            if retrying is not None:
                retrying()
            sleep(pause)
            retries += 1
            wait = min(wait * 2, MAX_BACKOFF_SECONDS)


def _check_compression(compression: str | None) -> None:
    """OtlpExportError unless ``compression`` is one both senders apply."""
    if compression not in (None, "gzip"):
        raise OtlpExportError(f"compression must be 'gzip' or None, not {compression!r}")


def _reply(body: bytes) -> Reply:
    """The partial success of an ``ExportTraceServiceResponse`` (an empty or non-protobuf
    body, as some receivers send, means all taken)."""
    response = ExportTraceServiceResponse()
    try:
        response.ParseFromString(body)
    except (DecodeError, RuntimeError, ValueError):
        return Reply()
    partial = response.partial_success
    return Reply(int(partial.rejected_spans), partial.error_message)


def _retry_after(value: str | None) -> float | None:
    """``Retry-After`` seconds (capped at :data:`MAX_BACKOFF_SECONDS` x 3); None for a
    date or nothing."""
    try:
        seconds = float(value) if value is not None else None
    except ValueError:
        return None
    return None if seconds is None or seconds < 0 else min(seconds, MAX_BACKOFF_SECONDS * 3)


def _reason(exc: BaseException) -> str:
    return getattr(exc, "strerror", None) or str(exc) or type(exc).__name__


def _quoted_body(body: bytes) -> str:
    text = " ".join(body[:300].decode("utf-8", "replace").split())
    return f": {text}" if text else ""


def sender_for(endpoint: str, protocol: str, headers: Mapping[str, str] | None,
               timeout: float, compression: str | None) -> Any:
    """The sender of ``protocol`` (one of :data:`PROTOCOLS`)."""
    if protocol == "grpc":
        return GrpcSender(endpoint, headers, timeout, compression)
    if protocol == "http/protobuf":
        return HttpSender(endpoint, headers, timeout, compression)
    raise OtlpExportError(f"protocol must be one of {', '.join(PROTOCOLS)}, not {protocol!r}")
