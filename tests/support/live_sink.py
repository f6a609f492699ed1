"""An OTLP/HTTP sink in the test process: what the live stream sent, decoded by
opentelemetry-proto, and answers scripted per request (200, 503 with Retry-After...)."""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

#: Hang guard for waits on the sink: generous, a busy 2-core machine is slow.
WAIT_SECONDS = 120.0


def plain(value: AnyValue) -> Any:
    """An attribute's value as Python data."""
    kind = value.WhichOneof("value")
    return None if kind is None else getattr(value, kind)


def attributes(message: Any) -> dict[str, Any]:
    return {kv.key: plain(kv.value) for kv in message.attributes}


@dataclass
class Post:
    """One request the sink answered: its path, its status, when it came, what it held."""

    path: str
    status: int
    arrived: float
    request: Any


@dataclass
class Sink:
    """The sink's state; ``answers`` holds (status, headers) for the next requests
    (then 200), ``default`` the status when it is empty; ``path_answers`` the same per
    path, asked first."""

    posts: list[Post] = field(default_factory=list)
    answers: deque = field(default_factory=deque)
    path_answers: dict[str, deque] = field(default_factory=dict)
    default: tuple[int, dict[str, str]] = (200, {})
    lock: threading.Lock = field(default_factory=threading.Lock)
    changed: threading.Condition = field(init=False)
    port: int = 0

    def __post_init__(self) -> None:
        self.changed = threading.Condition(self.lock)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def taken(self, path: str = "/v1/logs") -> list[Any]:
        """Requests to ``path`` answered 2xx, in arrival order."""
        with self.lock:
            return [post.request for post in self.posts
                    if post.path == path and 200 <= post.status < 300]

    def log_records(self) -> list[Any]:
        """Every LogRecord taken, in arrival order."""
        return [record for request in self.taken() for resource in request.resource_logs
                for scope in resource.scope_logs for record in scope.log_records]

    def records(self) -> list[tuple[dict[str, Any], dict[str, Any]]]:
        """(attributes, body as data) of each taken record that is a trace record."""
        out = []
        for record in self.log_records():
            attrs = attributes(record)
            if attrs["slime.record"] not in ("heartbeat", "close"):
                out.append((attrs, json.loads(record.body.string_value)))
        return out

    def spans(self) -> list[Any]:
        return [span for request in self.taken("/v1/traces")
                for resource in request.resource_spans for scope in resource.scope_spans
                for span in scope.spans]

    def wait_for(self, condition: Any, timeout: float = WAIT_SECONDS) -> None:
        """Block until ``condition(self)`` holds (checked again after each request)."""
        deadline = time.monotonic() + timeout
        while not condition(self):
            if time.monotonic() > deadline:
                raise AssertionError("the sink never saw what the test waited for")
            with self.changed:
                self.changed.wait(0.2)


def _handler(sink: Sink) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            with sink.lock:
                own = sink.path_answers.get(self.path)
                status, headers = (own.popleft() if own else sink.answers.popleft()
                                   if sink.answers else sink.default)
            request = (ExportLogsServiceRequest() if self.path.endswith("/v1/logs")
                       else ExportTraceServiceRequest())
            request.ParseFromString(body)
            with sink.changed:
                sink.posts.append(Post(self.path, status, time.monotonic(), request))
                sink.changed.notify_all()
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    return Handler


class SinkServer:
    """The sink on a free loopback port, served by a thread until ``stop``."""

    def __init__(self) -> None:
        self.sink = Sink()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self.sink))
        self._server.daemon_threads = True
        self.sink.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()
