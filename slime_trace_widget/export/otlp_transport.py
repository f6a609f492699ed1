"""Sending OTLP trace requests: over HTTP (protobuf body) or gRPC, with retries.

A request is sent again only when the receiver said, or the connection showed,
that it was not taken: HTTP 429/502/503/504 (after ``Retry-After`` when given),
gRPC ``UNAVAILABLE`` (when the receiver said it: the connection that carried the
request then takes an empty request after it, see :class:`GrpcSender`) or
``RESOURCE_EXHAUSTED``, or a connection that could not be opened. When a request
went out and no answer came back (a timeout, a reset while reading the reply, a
gRPC ``UNAVAILABLE`` of a connection lost) it may have been taken, so it is not
sent again: the export stops with
:class:`RequestUnanswered`. A request larger than the receiver takes (HTTP 413,
gRPC ``RESOURCE_EXHAUSTED`` saying "larger than max") will never be taken as it
is, so it is not retried either: :class:`RequestTooLarge` lets the caller send it
again in smaller pieces. A receiver that refuses a request otherwise (400, 401,
404, ``INVALID_ARGUMENT``...) stops the export, in one line. Spans the receiver
accepted with a partial success are not retried (OTLP says those were rejected as
invalid); their count is reported.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import gzip
import http.client
import random
import re
import threading
import time
import urllib.parse
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass
from typing import Any

from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from ..tracing.live.transport import retry_after

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
#: After an ``UNAVAILABLE`` whose empty follow-up request failed too, how long a lost
#: connection is given to show as a change of the channel's state (grpc reports it
#: moments after the failed call) before the status is taken for the receiver's.
LOST_CONNECTION_GRACE_SECONDS = 2.0
#: How often a caller waiting on the sender's loop wakes, so that an interrupt raised
#: in its thread (``_thread.interrupt_main``) is seen while a request is out.
_WAKE_SECONDS = 0.25
#: A gRPC metadata name: lowercase letters, digits, ``-``, ``_`` and ``.``.
_METADATA_NAME = re.compile(r"[0-9a-z_.\-]+")
#: Names gRPC sets itself and drops from a caller's metadata without a word.
_RESERVED_NAMES = re.compile(r"grpc-.*|te|content-type|user-agent")


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
    gzip-compressed (gRPC's own message compression, which every receiver accepts).

    After an ``UNAVAILABLE`` it sends an empty request (no spans: nothing for a receiver
    to keep; the OpenTelemetry Collector answers one at once) to tell the receiver's
    answer from a lost connection (:meth:`_connection_kept`). The channel is grpc's
    asyncio one, on the senders' event loop (:func:`_senders_loop`, so a caller already
    in a running loop, a notebook's, can call :meth:`send`), for what it tells of the
    connection: its state as it is when asked, and its changes in order with the
    calls' answers."""

    def __init__(self, endpoint: str, headers: Mapping[str, str] | None = None,
                 timeout: float = DEFAULT_TIMEOUT_SECONDS, compression: str | None = None
                 ) -> None:
        import grpc
        import grpc.aio

        _check_compression(compression)
        self._grpc = grpc
        self.endpoint = endpoint
        scheme, _, rest = endpoint.rpartition("://")
        target = rest.rstrip("/")
        if scheme not in ("", "http", "https", "grpc") or ":" not in target:
            raise OtlpExportError(f"{endpoint}: an OTLP/gRPC endpoint is HOST:PORT "
                                  "(or http:// / https:// HOST:PORT)")
        self.metadata = _grpc_metadata(endpoint, headers)
        self.timeout = timeout
        self._closed = False
        self._watches: list[asyncio.Future[Any]] = []
        self._loop = _senders_loop()
        squeeze = grpc.Compression.Gzip if compression == "gzip" else None
        self.channel, self.stub = self._run(self._open(target, scheme == "https", squeeze))

    async def _open(self, target: str, secure: bool, compression: Any) -> tuple[Any, Any]:
        """The channel and its stub, made on the senders' loop (they belong to it)."""
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2_grpc import (
            TraceServiceStub,
        )

        aio = self._grpc.aio
        channel = (aio.secure_channel(target, self._grpc.ssl_channel_credentials(),
                                      compression=compression)
                   if secure else aio.insecure_channel(target, compression=compression))
        return channel, TraceServiceStub(channel)

    def send(self, request: ExportTraceServiceRequest) -> Reply:
        if self._closed:
            raise OtlpExportError(f"{self.endpoint}: the gRPC sender was closed")
        return self._run(self._send(request))

    async def _send(self, request: ExportTraceServiceRequest) -> Reply:
        grpc = self._grpc
        await self._connect()
        try:
            response = await self.stub.Export(request, timeout=self.timeout,
                                              metadata=self.metadata)
        except grpc.RpcError as exc:
            code = exc.code() if hasattr(exc, "code") else None
            details = exc.details() if hasattr(exc, "details") else str(exc)
            if code == grpc.StatusCode.RESOURCE_EXHAUSTED and \
                    GRPC_TOO_LARGE in str(details).lower():
                raise RequestTooLarge(f"{self.endpoint}: gRPC {code.name}: "
                                      f"{' '.join(str(details).split())[:300]}") from None
            if code == grpc.StatusCode.UNAVAILABLE and not await self._connection_kept():
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

    async def _connection_kept(self) -> bool:
        """After an ``UNAVAILABLE``: whether the connection that carried the request is
        still up, so that the status was the receiver's answer (the request of a lost
        connection may have arrived). grpc can fail a call before its channel leaves
        READY, so the channel's state alone proves nothing: an empty request (no spans,
        nothing to take) goes next, under a watch of the channel's state begun before
        it. Taken over the same connection, it proves that connection up; over a new one,
        grpc had to connect first, a change of state the watch reports before the
        empty request's answer comes back. Refused too (a proxy that answers every call
        ``UNAVAILABLE`` while its backend is down, a receiver that takes no empty
        request), it proves nothing: the connection is taken for lost only if the state
        changes within :data:`LOST_CONNECTION_GRACE_SECONDS`."""
        grpc = self._grpc
        if self.channel.get_state() != grpc.ChannelConnectivity.READY:
            return False
        watch = self._watch(grpc.ChannelConnectivity.READY)
        await asyncio.sleep(0)  # the watch runs up to its wait: on grpc's books from here
        try:
            await self.stub.Export(ExportTraceServiceRequest(), timeout=self.timeout,
                                   metadata=self.metadata, wait_for_ready=False)
        except grpc.RpcError:
            changed, _ = await asyncio.wait({watch}, timeout=LOST_CONNECTION_GRACE_SECONDS)
            return not changed
        return not watch.done()

    async def _connect(self) -> None:
        """Connect the channel before a request (it connects lazily, and goes idle when
        a connection is lost; a connected one is READY at once): an endpoint nobody
        listens on is a clear error at once, not a slow ``UNAVAILABLE`` on every retry,
        and a request only ever starts on a connected channel."""
        connectivity = self._grpc.ChannelConnectivity
        settled = (connectivity.READY, connectivity.TRANSIENT_FAILURE, connectivity.SHUTDOWN)
        deadline = self._loop.time() + self.timeout
        state = self.channel.get_state(try_to_connect=True)
        while state not in settled:
            changed, _ = await asyncio.wait({self._watch(state)},
                                            timeout=deadline - self._loop.time())
            if not changed:
                break
            state = self.channel.get_state(try_to_connect=True)
        if state != connectivity.READY:
            raise _Retry("cannot connect", unreached=True)

    def _watch(self, state: Any) -> asyncio.Future[Any]:
        """A watch for the channel's next change from ``state``, kept until it ends (when
        the state changes, at the latest when the channel closes: see :meth:`close`)."""
        watch = asyncio.ensure_future(self.channel.wait_for_state_change(state))
        self._watches = [kept for kept in self._watches if not kept.done()] + [watch]
        return watch

    def _run(self, work: Coroutine[Any, Any, Any], finish_if_interrupted: bool = False
             ) -> Any:
        """Run ``work`` on the sender's loop; its result (or its exception). An interrupt
        of the waiting thread (Ctrl-C) cancels it, or with ``finish_if_interrupted``
        leaves it to finish on the loop while the interrupt goes on."""
        future = asyncio.run_coroutine_threadsafe(work, self._loop)
        try:
            while True:
                try:
                    return future.result(timeout=_WAKE_SECONDS)
                except concurrent.futures.TimeoutError:  # not TimeoutError before 3.11
                    if future.done():
                        raise
        except BaseException:
            if not finish_if_interrupted:
                future.cancel()
            raise

    def close(self) -> None:
        """End the channel; once is enough, more do nothing. A Ctrl-C while it closes
        stops the wait, not the close: a second call would not close it again."""
        if not self._closed:
            self._closed = True
            self._run(self._close(), finish_if_interrupted=True)

    async def _close(self) -> None:
        """Close the channel, then end the watches still waiting (grpc may keep one past
        the close while a failed call's error is still referenced)."""
        await self.channel.close()
        for watch in self._watches:
            watch.cancel()
        await asyncio.gather(*self._watches, return_exceptions=True)


class _SendersLoop:
    """The event loop every gRPC sender of this process runs on, in a daemon thread
    started with the first sender. It is never stopped: grpc hands the events of its
    asyncio calls to the loop they began on, some after their channel closed, and a
    closed loop would refuse them. A forked child starts a loop of its own, but grpc's
    asyncio channels do not work there once the parent made one (open, closed or merely
    referenced, grpc's fork support aside): export from a spawned process instead."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    def __call__(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None or self._thread is None or not self._thread.is_alive():
                self._loop = asyncio.new_event_loop()
                self._thread = threading.Thread(target=self._loop.run_forever,
                                                name="otlp-grpc-senders", daemon=True)
                self._thread.start()
            return self._loop


_senders_loop = _SendersLoop()


def _grpc_metadata(endpoint: str, headers: Mapping[str, str] | None
                   ) -> tuple[tuple[str, Any], ...]:
    """``headers`` as gRPC metadata, names lowercased, the value of a name ending in
    ``-bin`` as bytes (a text's UTF-8); an :class:`OtlpExportError` naming a header gRPC
    would refuse mid-request or drop: a name of other than lowercase letters, digits,
    ``-``, ``_`` and ``.``, one of gRPC's own (``grpc-*``, ``te``, ``content-type``,
    ``user-agent``), a value neither text nor bytes, or another name's value of other
    than printable ASCII."""
    metadata = []
    for key, value in dict(headers or {}).items():
        name = str(key).lower()
        if not _METADATA_NAME.fullmatch(name):
            raise OtlpExportError(f"{endpoint}: the header name {name!r} is not one gRPC "
                                  "takes (lowercase letters, digits, '-', '_' and '.')")
        if _RESERVED_NAMES.fullmatch(name):
            raise OtlpExportError(f"{endpoint}: the header {name!r} is gRPC's own; it would "
                                  "not be sent")
        if name.endswith("-bin") and isinstance(value, (str, bytes)):
            value = value.encode() if isinstance(value, str) else value
        elif not (isinstance(value, str) and all(" " <= char <= "~" for char in value)):
            raise OtlpExportError(f"{endpoint}: the header {name!r} has a value gRPC does "
                                  "not take (text of printable ASCII; text or bytes under "
                                  "a name ending in -bin)")
        metadata.append((name, value))
    return tuple(metadata)


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
    """``Retry-After`` seconds, read as the live stream reads them (seconds or an HTTP
    date; None when absent or unreadable, NaN included), capped at
    :data:`MAX_BACKOFF_SECONDS` x 3."""
    seconds = retry_after(value)
    return None if seconds is None else min(seconds, MAX_BACKOFF_SECONDS * 3)


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
