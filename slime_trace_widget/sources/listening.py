"""The HTTP servers' one base (the page, the live page, the collector's receiver): bound
to the host the user names, an IPv6 address (``::1``, ``::``) on an IPv6 socket and
anything else on IPv4 as before, and that host as a URL writes it. In ``sources`` for
the receiver, the lowest of the three (stdlib only).

A host name is never resolved to choose the family: ``localhost`` stays on 127.0.0.1,
where the URLs printed for it send the browser.
"""

from __future__ import annotations

import http.server
import ipaddress
import socket
import sys
from typing import Any

__all__ = ["HttpServer", "url_host"]


def _is_ipv6(host: str) -> bool:
    try:
        return ipaddress.ip_address(host.strip("[]")).version == 6
    except ValueError:  # a host name
        return False


def url_host(host: str) -> str:
    """``host`` as a URL's or a ``Host`` header's host: an IPv6 address in brackets."""
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


class HttpServer(http.server.ThreadingHTTPServer):
    """A threaded HTTP server on ``(host, port)``: IPv6 for an IPv6 address, else IPv4."""

    daemon_threads = True

    def __init__(self, address: tuple[str, int], handler: Any,
                 bind_and_activate: bool = True) -> None:
        host, port = address
        if _is_ipv6(host):
            self.address_family = socket.AF_INET6
            address = (host.strip("[]"), port)
        super().__init__(address, handler, bind_and_activate)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client gone mid-answer (a reload, a closed tab) is no error to report; any
        other is reported as the standard library does."""
        if isinstance(sys.exc_info()[1], ConnectionResetError | BrokenPipeError):
            return
        super().handle_error(request, client_address)
