"""POSTing OTLP/HTTP protobuf requests to the live receiver, on one kept-alive connection.

Each post has one of three outcomes: taken (2xx), worth sending again (429, 502,
503, 504, or no connection or no answer; ``Retry-After`` is honoured), or refused
for good (any other status: the batch would be refused again). A request whose
answer was lost may have been taken, and is sent again all the same: the stream
would rather repeat a record than lose it, and a record is told apart by its
sender and ``slime.seq`` (docs/live.md).
"""

from __future__ import annotations

import contextlib
import email.utils
import http.client
import socket
import time
import urllib.parse
from dataclasses import dataclass

LOGS_PATH = "/v1/logs"
TRACES_PATH = "/v1/traces"
RETRY_STATUSES = frozenset({429, 502, 503, 504})
#: Longest ``Retry-After`` honoured; a receiver asking for more is asked again then.
MAX_RETRY_AFTER_SECONDS = 30.0
DEFAULT_TIMEOUT_SECONDS = 10.0
_HEADERS = {"Content-Type": "application/x-protobuf"}


class EndpointError(ValueError):
    """The live endpoint is not an ``http://`` or ``https://`` URL with a host."""


@dataclass(frozen=True)
class Outcome:
    """What one post came to: ``taken``; else ``retry`` (after ``after`` s when the
    receiver said) or refused for good; ``reason`` says why, in a few words."""

    taken: bool
    retry: bool = False
    after: float | None = None
    reason: str = ""


def parse_endpoint(endpoint: str) -> urllib.parse.SplitResult:
    """The endpoint's parts; raises :class:`EndpointError` naming what is wrong."""
    try:
        parts = urllib.parse.urlsplit(endpoint.strip())
    except ValueError as exc:  # an unclosed IPv6 bracket, say
        raise EndpointError(f"live endpoint {endpoint!r}: {exc}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise EndpointError(f"live endpoint {endpoint!r}: expected a URL such as "
                            "http://127.0.0.1:4318 (the receiver's OTLP/HTTP address)")
    try:
        parts.port  # noqa: B018 (raises on a port that is not a number)
        parts.hostname.encode("idna")  # what connecting does: an empty or overlong label
    except (ValueError, UnicodeError) as exc:
        raise EndpointError(f"live endpoint {endpoint!r}: {exc}") from None
    return parts


class Poster:
    """Posts bodies to ``{endpoint}/v1/logs`` and ``{endpoint}/v1/traces``.

    Used by the sender's thread only. The connection is opened on first use and
    reopened after any failure.
    """

    def __init__(self, endpoint: str, timeout: float = DEFAULT_TIMEOUT_SECONDS) -> None:
        parts = parse_endpoint(endpoint)
        self._secure = parts.scheme == "https"
        self._host, self._port = parts.hostname, parts.port
        self._base = parts.path.rstrip("/")
        self._timeout = timeout
        self._connection: http.client.HTTPConnection | None = None

    def post(self, path: str, body: bytes) -> Outcome:
        try:
            connection = self._connect()
            connection.request("POST", self._base + path, body, _HEADERS)
            response = connection.getresponse()
            response.read()
        except (OSError, http.client.HTTPException) as exc:
            self.close()
            return Outcome(False, retry=True, reason=_reason(exc))
        except Exception as exc:  # anything else would fail again: refused for good
            self.close()
            return Outcome(False, reason=_reason(exc))
        if response.will_close:
            self.close()
        status = response.status
        if 200 <= status < 300:
            return Outcome(True)
        reason = f"HTTP {status} {response.reason}"
        if status in RETRY_STATUSES:
            return Outcome(False, retry=True, after=retry_after(response.getheader("Retry-After")),
                           reason=reason)
        return Outcome(False, reason=reason)

    def set_timeout(self, seconds: float) -> None:
        """Wait at most ``seconds`` for each later connect and answer (a closing stream)."""
        self._timeout = seconds
        self.close()

    def abort(self) -> None:
        """Cut the open connection from another thread: a post waiting on a receiver that
        took the request and never answers fails at once (and is handled as one that
        got no answer), so a closing stream keeps its deadline."""
        connection = self._connection
        sock = connection.sock if connection is not None else None
        if sock is not None:
            with contextlib.suppress(OSError):  # already closed: nothing waits on it
                sock.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        connection, self._connection = self._connection, None
        if connection is not None:
            connection.close()

    def _connect(self) -> http.client.HTTPConnection:
        if self._connection is None:
            kind = http.client.HTTPSConnection if self._secure else http.client.HTTPConnection
            self._connection = kind(self._host, self._port, timeout=self._timeout)
        return self._connection


def retry_after(value: str | None, now: float | None = None) -> float | None:
    """Seconds a ``Retry-After`` header asks to wait (seconds or an HTTP date), at most
    :data:`MAX_RETRY_AFTER_SECONDS`; None when absent or unreadable."""
    if value is None:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError):
            return None
        if when.tzinfo is None:
            return None
        seconds = when.timestamp() - (time.time() if now is None else now)
    if seconds != seconds:  # NaN
        return None
    return min(max(seconds, 0.0), MAX_RETRY_AFTER_SECONDS)


def _reason(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {getattr(exc, 'strerror', None) or exc}"
