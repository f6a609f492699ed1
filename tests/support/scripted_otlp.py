"""An OTLP/HTTP receiver that answers from a script and keeps every request it took:
for tests of what an export sends again (and what it must not) after a failure."""

from __future__ import annotations

import http.server
import os
import signal
import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)


class _Scripted(http.server.BaseHTTPRequestHandler):
    """Answers requests with the server's script (one answer per request, then 200):
    a status, ``"hang up"`` to close without a reply, ``"kill sender"`` to take the
    request and kill the process ``server.sender`` (a pid) before any reply, as a
    ``kill -9`` or a power cut would while the request was out, ``("partial", N)``
    to take it with an OTLP partial success rejecting N spans, or ``"503 later"`` to
    refuse it with a 503 whose ``Retry-After`` asks for a long wait, ``("503 after",
    TEXT)`` to refuse it with a 503 whose ``Retry-After`` is TEXT, or ``("hold", event)``
    to take it and answer once ``event`` is set."""

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        server = self.server
        answer = server.script.pop(0) if server.script else 200
        if answer == "kill sender":
            server.bodies.append(body)
            os.kill(server.sender, signal.SIGKILL)
            self.close_connection = True
            return
        if answer == "hang up":
            server.bodies.append(body)
            self.close_connection = True
            self.connection.close()
            return
        payload = b"bad spans" if answer == 400 else b""
        retry_after = None
        if isinstance(answer, tuple) and answer[0] == "503 after":
            answer, retry_after = 503, answer[1]
        if isinstance(answer, tuple) and answer[0] == "hold":
            server.held.set()
            answer[1].wait()
            answer = 200
        if isinstance(answer, tuple):
            response = ExportTraceServiceResponse()
            response.partial_success.rejected_spans = answer[1]
            payload, answer = response.SerializeToString(), 200
        if answer == 200:
            server.bodies.append(body)
        retry_after = retry_after or {429: "0", 503: "0", "503 later": "30"}.get(answer)
        self.send_response(503 if answer == "503 later" else answer)
        if retry_after is not None:
            self.send_header("Retry-After", retry_after)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *_: object) -> None:
        return None


@contextmanager
def scripted_receiver() -> Iterator[http.server.ThreadingHTTPServer]:
    """The receiver on a free loopback port, its ``script`` empty (all 200) and its
    ``bodies`` the requests it took, for the block's duration."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Scripted)
    server.script, server.bodies, server.sender = [], [], None
    server.held = threading.Event()  # set when a ("hold", event) request came
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def spans_taken(bodies: list[bytes]) -> Counter:
    """How often each span (by its dump, as the resource names it, and its id) arrived."""
    taken: Counter = Counter()
    for body in bodies:
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        for resource in request.resource_spans:
            dump = next((kv.value.string_value for kv in resource.resource.attributes
                         if kv.key == "slime.dump"), "")
            taken.update((dump, span.span_id) for scope in resource.scope_spans
                         for span in scope.spans)
    return taken
