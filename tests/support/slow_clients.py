"""Clients that hold a server's connection: one that never sends a request, and one
that takes a large answer slowly; for the servers' read timeout (``sources/listening``)."""

from __future__ import annotations

import socket
import threading
import time

#: How long a test waits for what a server does within its timeout: generous, so a busy
#: machine never fails it; only a server that never does it reaches the limit.
GUARD_SECONDS = 120.0


def idle_connection_is_dropped(address: tuple[str, int]) -> bool:
    """Whether a connection to ``address`` that sends nothing is closed by the server
    within :data:`GUARD_SECONDS`, and the thread that held it has ended by then."""
    threads = threading.active_count()
    with socket.create_connection(address, timeout=GUARD_SECONDS) as client:
        try:
            closed = client.recv(1) == b""
        except TimeoutError:
            return False
    deadline = time.monotonic() + GUARD_SECONDS
    while threading.active_count() > threads:
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return closed


def read_slowly(address: tuple[str, int], path: str, *, pause: float = 0.1,
                every: int = 512 << 10) -> bytes:
    """The whole answer to ``GET path`` (headers and body, until the server closes the
    connection), read through a small receive buffer with a ``pause`` after each
    ``every`` bytes: a client that takes a large answer slowly but steadily."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as client:
        client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 << 10)
        client.settimeout(GUARD_SECONDS)
        client.connect(address)
        client.sendall(f"GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n".encode())
        received = bytearray()
        since_pause = 0
        while chunk := client.recv(64 << 10):
            received += chunk
            since_pause += len(chunk)
            if since_pause >= every:
                since_pause = 0
                time.sleep(pause)
        return bytes(received)


def body_of(answer: bytes) -> tuple[int, bytes]:
    """The status code and body of a whole HTTP/1.0 answer."""
    head, _, body = answer.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), body
