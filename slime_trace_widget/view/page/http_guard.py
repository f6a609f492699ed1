"""What both page servers (the CLI's and the live page's) check of a request and
write of it: the host the request names, and log lines a terminal shows as text.

**Host.** A server on 127.0.0.1 is not private to this machine by itself: a page
the user visits can point its own DNS name at 127.0.0.1 (DNS rebinding), and the
browser then lets it read whatever this server answers, as its own origin. Such a
request still names the attacker's host in its ``Host`` header, so a request is
answered only when that names this server: ``localhost``, the host the server was
told to bind (``--host``), an address (``127.0.0.1``, ``[::1]``, any IP literal:
no DNS name that another party could point here), or, for a server on every
interface, this machine's own names. A request without a ``Host`` header
(HTTP/1.0) names no other host and is answered.

**Log.** A request line is the client's text: written as is, its escape sequences
would drive the user's terminal. :func:`printable` escapes control characters as
``http.server``'s own ``log_message`` does (Python 3.11 and later).
"""

from __future__ import annotations

import http.server
import ipaddress
import re
import socket
from http import HTTPStatus

from ...sources.listening import url_host

#: A Host header: a name or an IPv4 address, or an IPv6 address in brackets, and
#: an optional port.
_HOST_HEADER = re.compile(r"(?P<name>\[[0-9A-Fa-f:.]+\]|[^\[\]:@/\\\s]+)(?::[0-9]*)?")

#: Every C0 control character, DEL and every C1 control character as ``\xNN``, and
#: the backslash doubled, so an escape in the log cannot be told from typed text.
_ESCAPES = str.maketrans({code: f"\\x{code:02x}"
                          for code in (*range(0x20), *range(0x7F, 0xA0))} | {"\\": "\\\\"})

REFUSED_BODY = (b"403 Forbidden: the request's Host header names another host than this "
                b"server (a page on another site may have pointed its name at this "
                b"machine: DNS rebinding). Open the page by the address the server "
                b"printed, e.g. http://127.0.0.1:PORT/ or http://localhost:PORT/.\n")


def allowed_names(bind_host: str) -> frozenset[str]:
    """The host names (lower case, IPv6 addresses in brackets) a server bound to
    ``bind_host`` answers besides any IP address: ``localhost`` and ``bind_host``;
    on every interface (``0.0.0.0``, ``::``), this machine's own names too."""
    names = {"localhost", url_host(bind_host.lower())}
    if _is_unspecified(bind_host):
        names |= {socket.gethostname().lower(), socket.getfqdn().lower()}
    return frozenset(names)


def host_allowed(header: str | None, names: frozenset[str]) -> bool:
    """Whether a request whose ``Host`` header is ``header`` (None: none sent) may be
    answered by a server that answers ``names`` (:func:`allowed_names`): the header's
    name, with or without a port, is an IP address or one of ``names``."""
    if header is None:
        return True
    match = _HOST_HEADER.fullmatch(header.strip())
    if match is None:
        return False
    name = match["name"].lower()
    return _is_address(name) or name in names


def refused_foreign_host(handler: http.server.BaseHTTPRequestHandler,
                         names: frozenset[str]) -> bool:
    """Answer ``handler``'s request 403, with a plain-text reason, when its ``Host``
    header names another host than ``names`` allow (or it sent two); whether it did."""
    headers = handler.headers.get_all("Host") or []
    if len(headers) <= 1 and host_allowed(headers[0] if headers else None, names):
        return False
    handler.send_response(HTTPStatus.FORBIDDEN)
    handler.send_header("Content-Type", "text/plain; charset=utf-8")
    handler.send_header("Content-Length", str(len(REFUSED_BODY)))
    handler.send_header("X-Content-Type-Options", "nosniff")
    handler.end_headers()
    if handler.command != "HEAD":
        handler.wfile.write(REFUSED_BODY)
    return True


def printable(message: str) -> str:
    """``message`` with each control character (C0, DEL, C1) written as ``\\xNN`` and
    each backslash doubled: one line of plain text on any terminal."""
    return message.translate(_ESCAPES)


def _is_address(name: str) -> bool:
    """Whether a Host header's ``name`` is an IPv4 address or a bracketed IPv6 one."""
    bracketed = name.startswith("[")
    try:
        address = ipaddress.ip_address(name[1:-1] if bracketed else name)
    except ValueError:
        return False
    return address.version == (6 if bracketed else 4)


def _is_unspecified(host: str) -> bool:
    try:
        return ipaddress.ip_address(host.strip("[]")).is_unspecified
    except ValueError:
        return host == ""
