"""The OTLP receiver the engines and the live stream export to: OTLP/HTTP and OTLP/gRPC.

Traces (``/v1/traces``, ``TraceService``) go to the engine span store; logs
(``/v1/logs``, ``LogsService``) are the rollout's live records and go to the live
store (:mod:`slime_trace_widget.sources.live`). A request is answered with success
only once what it carries is on disk: handler threads hand their decoded rows to one
writer thread per store, which appends whatever has gathered as one durable write
(group commit) and then releases them all. What cannot be taken is refused before
anything is kept, so the client's retry never duplicates rows: a body that is not
OTLP (400, ``INVALID_ARGUMENT``), a body or a decompressed body over the limits (413,
read no further than the limit), a body that does not arrive in time (408, see
:func:`body_seconds`), a wrong path (404), and more than the writer has room for (503
with ``Retry-After``, ``UNAVAILABLE``: the exporters retry both). A request that fails
in a way none of these name (a fault of the receiver's) is answered 500 or ``INTERNAL``
with the reason, and its traceback is logged: the client is never left with a dropped
connection, and the connection stays of use.

:func:`collect` is the command: the receiver, and the scrapers of the engines' load.
"""

from __future__ import annotations

import http.server
import ipaddress
import json
import logging
import threading
import time
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from http import HTTPStatus
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from ..listening import READ_TIMEOUT_SECONDS, HttpServer, url_host
from ..live import otlp_logs
from ..live.collector import LiveCollector
from ..live.store import SUBDIR as LIVE_SUBDIR
from .group_commit import Busy, GroupWriter
from .load_store import SUBDIR as LOAD_SUBDIR
from .load_store import LoadStore
from .otlp import BadRequest, SpanRows, parse_json, parse_protobuf
from .scrape import DEFAULT_INTERVAL, STATUS_FILE, Scraper, Target
from .store import LAYOUT, SpanStore

TRACES_PATH = "/v1/traces"
LOGS_PATH = "/v1/logs"
GRPC_SERVICE = "opentelemetry.proto.collector.trace.v1.TraceService"
GRPC_LOGS_SERVICE = "opentelemetry.proto.collector.logs.v1.LogsService"
#: Largest request body taken as it comes over the wire, and once decompressed.
MAX_BODY_BYTES = 32 << 20
MAX_DECOMPRESSED_BYTES = 128 << 20
#: Spans waiting for the writer beyond which new requests are asked to come back later.
MAX_PENDING_SPANS = 400_000
#: Requests being read and decoded at once; more wait for a slot or are refused.
MAX_CONCURRENT_REQUESTS = 32
#: A request refused for good is answered after its body is read and dropped, when
#: that body is at most this long (the live sender's requests are at most 8 MiB) and
#: arrives within this time; else the connection closes after the answer.
DROP_MAX_BYTES = 8 << 20
DROP_SECONDS = 10.0
#: A body to take must arrive within :func:`body_seconds`: at least this many bytes a
#: second on average, with at least this many seconds for any body, so that a client
#: trickling its body holds a request slot for a bounded time.
BODY_MIN_BYTES_PER_SECOND = 128 << 10
BODY_MIN_SECONDS = 10.0
MEDIA_TYPES = ("application/x-protobuf", "application/protobuf", "application/json")
RETRY_AFTER_SECONDS = 1
#: How often the scrapers' counts are rewritten to their status file.
STATUS_SECONDS = 5.0
_CHUNK = 1 << 16
#: Compressed bytes given to the inflater at a time, the first time for a member and at
#: most: what follows a member's end in its input is copied, so a body of many tiny
#: members costs little more to inflate than one of one member.
_GZIP_FIRST_INPUT = 1 << 8
_GZIP_INPUT = 1 << 14
_log = logging.getLogger(__name__)


class Collector(GroupWriter):
    """The writer side: accepts decoded spans from any thread, one durable write at a time."""

    def __init__(self, store: SpanStore, max_pending_spans: int = MAX_PENDING_SPANS) -> None:
        super().__init__(store, max_pending_spans, "engine-span-writer")

    @property
    def accepted_spans(self) -> int:
        return self.accepted_rows

    def submit(self, rows: SpanRows) -> None:
        """Keep ``rows`` durably; returns once they are on disk. :class:`Busy` when full."""
        if len(rows):
            self.submit_table(LAYOUT.rows(rows.columns))


# --------------------------------------------------------------------------- OTLP/HTTP


class _TooLarge(Exception):
    pass


class _TooSlow(Exception):
    """The body did not arrive within its deadline (or a read waited past its timeout)."""


def body_seconds(length: int) -> float:
    """Seconds a request body of ``length`` bytes may take to arrive, whole."""
    return max(BODY_MIN_SECONDS, length / BODY_MIN_BYTES_PER_SECOND)


def internal_reason(exc: BaseException) -> str:
    """What a client is told of a failure that is the receiver's, not its request's."""
    return f"the receiver failed on this request ({type(exc).__name__}: {exc})"[:500]


class _Handler(http.server.BaseHTTPRequestHandler):
    """``POST /v1/traces`` and ``POST /v1/logs`` with an OTLP body, and nothing else."""

    protocol_version = "HTTP/1.1"
    server: _HttpServer
    #: Seconds a read of the connection may wait (each one; the whole body has
    #: :func:`body_seconds`): a client that stops mid-request (its host lost) is answered
    #: 408 and frees its slot then.
    timeout = READ_TIMEOUT_SECONDS

    def do_POST(self) -> None:
        refusal = self._header_refusal()
        if refusal is not None:
            self._reply(*refusal, read=False)
            return
        if not self.server.slots.acquire(timeout=5):
            self._reply(HTTPStatus.SERVICE_UNAVAILABLE, "too many requests at once",
                        retry=True, read=False)
            return
        try:
            self._export()
        finally:
            self.server.slots.release()

    def do_GET(self) -> None:
        status = HTTPStatus.METHOD_NOT_ALLOWED if self.path in (TRACES_PATH, LOGS_PATH) else \
            HTTPStatus.NOT_FOUND
        self._reply(status, f"OTLP is sent with POST to {TRACES_PATH} or {LOGS_PATH}",
                    read=False)

    do_PUT = do_DELETE = do_PATCH = do_GET

    def handle_expect_100(self) -> bool:
        """A client that waits for "100 Continue" before its body is refused at once
        when its path or headers would be, its body never sent."""
        refusal = self._header_refusal() if self.command == "POST" else None
        if refusal is None:
            return super().handle_expect_100()
        self.close_connection = True
        self._reply(*refusal)
        return False

    def _header_refusal(self) -> tuple[HTTPStatus, str] | None:
        """Why a POST is refused by its path and headers alone; None when it is not."""
        path = self.path.split("?", 1)[0]
        if path not in (TRACES_PATH, LOGS_PATH) or (path == LOGS_PATH
                                                    and self.server.live is None):
            return (HTTPStatus.NOT_FOUND,
                    f"not found; OTLP traces go to {TRACES_PATH} and logs to {LOGS_PATH}")
        if self._media_type() not in MEDIA_TYPES:
            return (HTTPStatus.UNSUPPORTED_MEDIA_TYPE,
                    "Content-Type must be application/x-protobuf or application/json")
        if self._encoding() not in ("identity", "gzip"):
            return HTTPStatus.UNSUPPORTED_MEDIA_TYPE, "Content-Encoding must be gzip or none"
        return None

    def _declared_length(self) -> int | None:
        """The Content-Length, when it is plain decimal digits (no sign, no '_')."""
        text = (self.headers.get("Content-Length") or "").strip()
        return int(text) if text.isascii() and text.isdigit() else None

    def _media_type(self) -> str:
        return (self.headers.get("Content-Type") or "").split(";", 1)[0].strip().lower()

    def _encoding(self) -> str:
        return (self.headers.get("Content-Encoding") or "identity").strip().lower()

    def _export(self) -> None:
        kind, encoding = self._media_type(), self._encoding()
        length = self._declared_length()
        if length is None:
            self._reply(HTTPStatus.LENGTH_REQUIRED, "a Content-Length is required", read=False)
            return
        if length > MAX_BODY_BYTES:
            self._reply(HTTPStatus.REQUEST_ENTITY_TOO_LARGE,
                        f"the body is over {MAX_BODY_BYTES} bytes", read=False)
            return
        try:
            body = self._read_body(length)
        except _TooSlow:
            self.close_connection = True
            self._reply(HTTPStatus.REQUEST_TIMEOUT,
                        f"the body of {length} bytes did not arrive within "
                        f"{body_seconds(length):g} s")
            return
        if body is None:
            self.close_connection = True
            return  # the client went away mid-body
        try:
            if encoding == "gzip":
                body = _gunzip(body, MAX_DECOMPRESSED_BYTES)
            as_json = kind == "application/json"
            if self.path.split("?", 1)[0] == LOGS_PATH:
                answer = self._take_logs(body, as_json)
            else:
                peer = plain_address(str(self.client_address[0]))
                rows = parse_json(body, peer) if as_json else parse_protobuf(body, peer)
                self.server.collector.submit(rows)
                answer = b"{}" if as_json else b""  # an empty response message
        except _TooLarge:
            self._reply(HTTPStatus.REQUEST_ENTITY_TOO_LARGE,
                        f"the decompressed body is over {MAX_DECOMPRESSED_BYTES} bytes")
        except BadRequest as exc:
            self._reply(HTTPStatus.BAD_REQUEST, str(exc))
        except Busy as exc:
            self._reply(HTTPStatus.SERVICE_UNAVAILABLE, str(exc), retry=True)
        except Exception as exc:  # the receiver's fault: say so, never drop the client
            _log.exception("OTLP/HTTP request to %s failed", self.path)
            self._reply(HTTPStatus.INTERNAL_SERVER_ERROR, internal_reason(exc))
        else:
            self._send(HTTPStatus.OK, answer, kind)

    def _read_body(self, length: int) -> bytearray | None:
        """The request's body of ``length`` bytes, read whole within
        :func:`body_seconds` (checked before each read, each read waiting no longer than
        what is left, nor than :attr:`timeout`); None when the client closes or breaks
        the connection first. :class:`_TooSlow` when the time runs out."""
        body = bytearray(length)
        view, got = memoryview(body), 0
        deadline = time.monotonic() + body_seconds(length)
        try:
            while got < length:
                wait = deadline - time.monotonic()
                if wait <= 0:
                    raise _TooSlow
                self.connection.settimeout(min(wait, self.timeout))
                count = self.rfile.readinto1(view[got:])
                if not count:
                    return None
                got += count
        except TimeoutError:
            raise _TooSlow from None
        except OSError:  # reset by the client
            return None
        finally:
            self.connection.settimeout(self.timeout)
        return body

    def _take_logs(self, body: bytes, as_json: bool) -> bytes:
        """Keep the live records of a logs request; the response message's bytes."""
        assert self.server.live is not None
        received = time.time_ns()
        rows = (otlp_logs.parse_json(body, received) if as_json
                else otlp_logs.parse_protobuf(body, received))
        self.server.live.submit(rows)
        return logs_response(rows.foreign, as_json)

    def _reply(self, status: HTTPStatus, reason: str, retry: bool = False,
               read: bool = True) -> None:
        """An error answer with its reason as text. A body not yet ``read`` of a refusal
        for good is read and dropped first (see :meth:`_drop_body`): a client still
        sending it would otherwise meet a reset connection rather than this answer, and
        retry what is refused. Otherwise (and for an answer to retry, which a reset
        brings about as well) the connection closes."""
        if not read and (retry or not self._drop_body()):
            self.close_connection = True
        headers = {"Retry-After": str(RETRY_AFTER_SECONDS)} if retry else {}
        self._send(status, (reason + "\n").encode("utf-8", "replace"),
                   "text/plain; charset=utf-8", headers)

    def _drop_body(self) -> bool:
        """Read and drop the request's body: True once done within
        :data:`DROP_SECONDS`, for a declared length of at most :data:`DROP_MAX_BYTES`."""
        if self.headers.get("Transfer-Encoding"):
            return False
        left = self._declared_length() if "Content-Length" in self.headers else 0
        if left is None or left > DROP_MAX_BYTES:
            return False
        deadline = time.monotonic() + DROP_SECONDS
        try:
            while left:
                wait = deadline - time.monotonic()
                if wait <= 0:
                    return False
                self.connection.settimeout(min(wait, self.timeout))
                part = self.rfile.read1(min(left, _CHUNK))
                if not part:
                    return False
                left -= len(part)
        except OSError:  # the read timed out or the connection broke
            return False
        finally:
            self.connection.settimeout(self.timeout)
        return True

    def _send(self, status: HTTPStatus, body: bytes, kind: str,
              headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass  # one line per export batch would drown the collector's own output


class _HttpServer(HttpServer):
    request_queue_size = 128

    def __init__(self, address: tuple[str, int], collector: Collector,
                 live: LiveCollector | None) -> None:
        self.collector = collector
        self.live = live
        self.slots = threading.BoundedSemaphore(MAX_CONCURRENT_REQUESTS)
        super().__init__(address, _Handler)


def _gunzip(body: bytes | bytearray, limit: int) -> bytes:
    """Inflate a gzip body: all its members, one after another (gzip allows several; their
    data joined is the body's), stopping as soon as the whole would pass ``limit`` bytes
    (a bomb is never inflated whole). Zero bytes after a member end the body (padding, as
    gzip readers take it). :class:`BadRequest` when it is not gzip or is cut short."""
    parts: list[bytes] = []
    position = size = 0
    try:
        while True:
            position, inflated = _inflate_member(body, position, parts, limit - size)
            size += inflated
            if position == len(body):
                break
            if body[position] == 0:
                if body.count(0, position) != len(body) - position:
                    raise BadRequest("the body is not valid gzip (bytes after its padding)")
                break
    except zlib.error as exc:
        raise BadRequest(f"the body is not valid gzip ({exc})") from None
    return b"".join(parts)


def _inflate_member(body: bytes | bytearray, position: int, parts: list[bytes],
                    room: int) -> tuple[int, int]:
    """Inflate the gzip member at ``position`` of ``body`` onto ``parts``: where the
    member ends, and how many bytes it gave. :class:`_TooLarge` once they would pass
    ``room``; :class:`BadRequest` when the body ends inside the member."""
    inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
    size, step = 0, _GZIP_FIRST_INPUT
    while not inflater.eof:
        data = body[position:position + step]
        step = min(2 * step, _GZIP_INPUT)
        part = inflater.decompress(data, _CHUNK)
        if not data and not part:
            raise BadRequest("the gzip body is cut short")
        size += len(part)
        if size > room:
            raise _TooLarge
        if part:
            parts.append(part)
        # what follows the member at its end (where the tail may still hold it too),
        # else what the output's limit left
        left = inflater.unused_data if inflater.eof else inflater.unconsumed_tail
        position += len(data) - len(left)
    return position, size


def http_server(collector: Collector, host: str, port: int,
                live: LiveCollector | None = None) -> _HttpServer:
    """An OTLP/HTTP server bound to ``host:port`` (0: a free port), not yet serving; it
    takes logs when given a ``live`` writer."""
    return _HttpServer((host, port), collector, live)


def logs_response(foreign: int, as_json: bool) -> bytes:
    """An ``ExportLogsServiceResponse``: empty, or a partial success naming the records
    that are not slime's (taken and not kept; OTLP clients do not send them again)."""
    if not foreign:
        return b"{}" if as_json else b""
    reason = f"{foreign} log record(s) without slime.record are not kept here"
    if as_json:
        return json.dumps({"partialSuccess": {"rejectedLogRecords": str(foreign),
                                              "errorMessage": reason}}).encode()
    from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
        ExportLogsServiceResponse,
    )

    response = ExportLogsServiceResponse()
    response.partial_success.rejected_log_records = foreign
    response.partial_success.error_message = reason
    return response.SerializeToString()


# --------------------------------------------------------------------------- OTLP/gRPC


def grpc_server(collector: Collector, host: str, port: int,
                live: LiveCollector | None = None) -> tuple[Any, int]:
    """An OTLP/gRPC server bound to ``host:port`` and started; with the port it got. It
    serves the logs service too when given a ``live`` writer.

    The request arrives as bytes and is parsed here, as over HTTP, so a body that is not
    OTLP gets ``INVALID_ARGUMENT`` with the reason (gRPC's own parsing would answer
    ``INTERNAL`` without one)."""
    from concurrent.futures import ThreadPoolExecutor

    import grpc
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceResponse,
    )

    def export(body: bytes, context: Any) -> bytes:
        try:
            collector.submit(parse_protobuf(body, grpc_peer_address(context.peer())))
        except BadRequest as exc:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
        except Busy as exc:
            context.abort(grpc.StatusCode.UNAVAILABLE, str(exc))
        except Exception as exc:  # the receiver's fault: INTERNAL with the reason
            _log.exception("OTLP/gRPC trace export failed")
            context.abort(grpc.StatusCode.INTERNAL, internal_reason(exc))
        return ExportTraceServiceResponse().SerializeToString()

    def export_logs(body: bytes, context: Any) -> bytes:
        assert live is not None
        try:
            rows = otlp_logs.parse_protobuf(body, time.time_ns())
            live.submit(rows)
        except BadRequest as exc:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
        except Busy as exc:
            context.abort(grpc.StatusCode.UNAVAILABLE, str(exc))
        except Exception as exc:  # the receiver's fault: INTERNAL with the reason
            _log.exception("OTLP/gRPC logs export failed")
            context.abort(grpc.StatusCode.INTERNAL, internal_reason(exc))
        return logs_response(rows.foreign, as_json=False)

    handlers = [grpc.method_handlers_generic_handler(GRPC_SERVICE, {
        "Export": grpc.unary_unary_rpc_method_handler(
            export, request_deserializer=bytes, response_serializer=bytes)})]
    if live is not None:
        handlers.append(grpc.method_handlers_generic_handler(GRPC_LOGS_SERVICE, {
            "Export": grpc.unary_unary_rpc_method_handler(
                export_logs, request_deserializer=bytes, response_serializer=bytes)}))
    server = grpc.server(
        ThreadPoolExecutor(max_workers=MAX_CONCURRENT_REQUESTS, thread_name_prefix="otlp-grpc"),
        handlers=handlers, maximum_concurrent_rpcs=4 * MAX_CONCURRENT_REQUESTS,
        options=[("grpc.max_receive_message_length", MAX_DECOMPRESSED_BYTES)])
    try:
        bound = server.add_insecure_port(f"{url_host(host)}:{port}")
    except RuntimeError:  # grpc raises where its older releases returned 0
        bound = 0
    if not bound:
        server.stop(None)
        raise OSError(f"cannot listen on {host}:{port} for OTLP/gRPC (the port is taken, "
                      "or the address is not this machine's)")
    server.start()
    return server, bound


def grpc_peer_address(peer: str) -> str | None:
    """The IP address of a gRPC peer (``ipv4:10.0.0.5:41234``, ``ipv6:[::1]:41234``, the
    brackets maybe percent-encoded), without its port; None for another kind (a unix
    socket)."""
    kind, _, rest = unquote(peer or "").partition(":")
    if kind not in ("ipv4", "ipv6") or not rest:
        return None
    address = rest.rsplit(":", 1)[0] if rest.count(":") == 1 or rest.startswith("[") else rest
    return plain_address(address.strip("[]"))


def plain_address(address: str) -> str | None:
    """An IP address as text, an IPv4 address mapped into IPv6 as the IPv4 one (a
    dual-stack listener sees a host so); None when it is no IP address."""
    try:
        parsed = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return None
    mapped = getattr(parsed, "ipv4_mapped", None)
    return str(mapped or parsed)


# --------------------------------------------------------------------------- the command


@dataclass
class Received:
    """What :func:`collect` kept: the engine spans' writer and the live records' (their
    counts)."""

    spans: Collector
    live: LiveCollector


def collect(directory: str, http_address: tuple[str, int], grpc_address: tuple[str, int] | None,
            announce: Callable[[str], None], stop: threading.Event,
            targets: Sequence[Target] = (), scrape_interval: float = DEFAULT_INTERVAL
            ) -> Received:
    """Receive OTLP into the stores at ``directory`` until ``stop`` is set, and scrape the
    engines' ``/metrics`` at ``targets`` every ``scrape_interval`` seconds into its load
    store (:mod:`.scrape`); then write what is waiting, finish the files, announce each
    target's counts and return the writers (their counts). The live store records when
    this collector started and, unless killed, when it stopped."""
    collector = Collector(SpanStore(directory))
    live: LiveCollector | None = None
    servers: list[Callable[[], None]] = []
    scraper: Scraper | None = None
    try:
        live = LiveCollector(directory)
        web = http_server(collector, *http_address, live=live)
        threading.Thread(target=web.serve_forever, kwargs={"poll_interval": 0.2},
                         daemon=True).start()
        servers.append(lambda: (web.shutdown(), web.server_close()))
        where = [f"http://{url_host(http_address[0])}:{web.server_address[1]}{TRACES_PATH}"
                 f" and {LOGS_PATH}"]
        if grpc_address is not None:
            rpc, port = grpc_server(collector, *grpc_address, live=live)
            servers.append(lambda: rpc.stop(grace=5).wait())
            where.append(f"grpc {url_host(grpc_address[0])}:{port}")
        announce(f"receiving OTLP on {' and '.join(where)}, writing {directory} "
                 f"(live records in {directory}/{LIVE_SUBDIR})")
        if targets:
            scraper = Scraper(directory, list(targets), interval=scrape_interval).start()
            listed = ", ".join(f"{t.name}={t.url}" for t in targets)
            announce(f"scraping {len(targets)} engine(s) every {scrape_interval:g} s into "
                     f"{directory}/{LOAD_SUBDIR} ({listed}); counts in {STATUS_FILE}")
        elif (Path(directory) / LOAD_SUBDIR).is_dir():
            LoadStore(directory).close()  # opening rolls what a killed collector left
        while not stop.wait(STATUS_SECONDS):
            if scraper is not None:
                scraper.write_status()
    finally:
        if scraper is not None:
            scraper.stop()
            for name, stats in scraper.stats.items():
                announce(f"scraped {name}: {stats.summary()}")
        for close in reversed(servers):
            close()
        try:
            collector.close()
        finally:
            if live is not None:
                live.close()
    return Received(collector, live)
