"""The HTTP servers' one base (the page, the live page, the collector's receiver): bound
to the host the user names, an IPv6 address (``::1``, ``::``) on an IPv6 socket and
anything else on IPv4 as before, and that host as a URL writes it. In ``sources`` for
the receiver, the lowest of the three (stdlib only).

Each connection waits at most :data:`READ_TIMEOUT_SECONDS` for what it reads and for
each part it writes: a connection opened and never used (a client that went quiet or
away) would otherwise hold a thread and a descriptor for as long as the server runs.
No answer is cut for being slow: the pages' requests are answered at once (the live
page polls once a second, a followed page its state file, each a request of its own),
and a large answer is written in parts of :data:`WRITE_PART_BYTES`
(:func:`write_in_parts`), each taken by the client well within the timeout.

A host name is never resolved to choose the family: ``localhost`` stays on 127.0.0.1,
where the URLs printed for it send the browser.
"""

from __future__ import annotations

import http.server
import ipaddress
import socket
import sys
from typing import Any

__all__ = ["READ_TIMEOUT_SECONDS", "WRITE_PART_BYTES", "HttpServer", "QuietTimeouts",
           "url_host", "write_in_parts"]

#: Seconds a connection's read, or the write of one part, may wait (see the module).
READ_TIMEOUT_SECONDS = 30.0
#: The most an answer hands the connection at once: a client that takes 3 KiB a second
#: takes each part in about 21 s, within :data:`READ_TIMEOUT_SECONDS`.
WRITE_PART_BYTES = 64 << 10


def _is_ipv6(host: str) -> bool:
    try:
        return ipaddress.ip_address(host.strip("[]")).version == 6
    except ValueError:  # a host name
        return False


def url_host(host: str) -> str:
    """``host`` as a URL's or a ``Host`` header's host: an IPv6 address in brackets."""
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


def write_in_parts(stream: Any, body: bytes) -> None:
    """``body`` written to a connection's ``stream`` :data:`WRITE_PART_BYTES` at a time:
    a connection's timeout bounds one write whole, so a body written at once to a slow
    client would be cut where each part is not."""
    view = memoryview(body)
    for start in range(0, len(view), WRITE_PART_BYTES):
        stream.write(view[start:start + WRITE_PART_BYTES])


class QuietTimeouts(http.server.BaseHTTPRequestHandler):
    """A handler that logs no line for a connection closed by the timeout: a browser
    opens spare connections it may never use, so that close is routine, and a line for
    each would fill the terminal of a server left running. Any other error is logged as
    the handler logs it."""

    def log_error(self, format: str, *args: Any) -> None:
        if not any(isinstance(arg, TimeoutError) for arg in args):
            super().log_error(format, *args)


class HttpServer(http.server.ThreadingHTTPServer):
    """A threaded HTTP server on ``(host, port)``: IPv6 for an IPv6 address, else IPv4;
    each connection with a timeout of :attr:`read_timeout` seconds (see the module)."""

    daemon_threads = True
    read_timeout: float = READ_TIMEOUT_SECONDS

    def __init__(self, address: tuple[str, int], handler: Any,
                 bind_and_activate: bool = True) -> None:
        host, port = address
        if _is_ipv6(host):
            self.address_family = socket.AF_INET6
            address = (host.strip("[]"), port)
        super().__init__(address, handler, bind_and_activate)

    def get_request(self) -> tuple[socket.socket, Any]:
        """A new connection, its reads and writes waiting :attr:`read_timeout` at most
        (a handler with a ``timeout`` of its own sets that instead)."""
        connection, address = super().get_request()
        connection.settimeout(self.read_timeout)
        return connection, address

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client gone mid-answer (a reload, a closed tab), or that stopped taking it
        for the timeout, is no error to report; any other is reported as the standard
        library does."""
        if isinstance(sys.exc_info()[1], ConnectionResetError | BrokenPipeError | TimeoutError):
            return
        super().handle_error(request, client_address)
