"""A loopback TCP relay that counts the bytes each side sends: for tests that check what
went over the wire (a compressed request is smaller there than its message), and that
can cut the connections it relays (a network that drops them) while it keeps taking
new ones."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress


class CountingProxy:
    """Relays each connection made to :attr:`address` to ``upstream``; :attr:`sent_up`
    counts the bytes clients sent, each counted before it is passed on (so once a reply
    has come back, the request that caused it is counted whole)."""

    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        self.sent_up = 0
        self._lock = threading.Lock()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.address = f"127.0.0.1:{self._listener.getsockname()[1]}"
        self._sockets: list[socket.socket] = [self._listener]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:  # closed: the relay is done
                return
            server = socket.create_connection(self.upstream)
            self._sockets += [client, server]
            threading.Thread(target=self._pump, args=(client, server, True),
                             daemon=True).start()
            threading.Thread(target=self._pump, args=(server, client, False),
                             daemon=True).start()

    def _pump(self, source: socket.socket, target: socket.socket, upward: bool) -> None:
        try:
            while chunk := source.recv(65536):
                if upward:
                    with self._lock:
                        self.sent_up += len(chunk)
                target.sendall(chunk)
        except OSError:
            pass  # one side closed
        finally:
            for side in (source, target):
                with suppress(OSError):  # already shut
                    side.shutdown(socket.SHUT_RDWR)

    def cut(self) -> None:
        """Shut every connection relayed so far, both sides; new ones are still taken."""
        for sock in self._sockets[1:]:
            with suppress(OSError):  # already shut
                sock.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        for sock in self._sockets:
            sock.close()


@contextmanager
def counting_proxy(upstream: tuple[str, int]) -> Iterator[CountingProxy]:
    """A :class:`CountingProxy` to ``upstream`` for the block's duration."""
    proxy = CountingProxy(upstream)
    try:
        yield proxy
    finally:
        proxy.close()
