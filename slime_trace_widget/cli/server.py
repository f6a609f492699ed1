"""The page server: the files the command wrote into a folder, by exact name, on
127.0.0.1 unless told otherwise, to requests that name this server's host (not a
site that pointed its own name here: ``view/page/http_guard``), until Ctrl-C."""

from __future__ import annotations

import functools
import http.server
import ipaddress
import os
import shutil
import urllib.parse
from collections.abc import Sequence
from http import HTTPStatus
from pathlib import Path
from typing import Any, BinaryIO

from ..sources.listening import WRITE_PART_BYTES, HttpServer, QuietTimeouts, url_host
from ..view.page.http_guard import allowed_names, printable, refused_foreign_host
from .errors import CliError
from .terminal import note, say

#: Seconds the server loop waits in ``select``: a Ctrl-C that the OS hands to another
#: thread (a request, the loader's readers, the poller) is only seen when it returns.
POLL_INTERVAL = 0.1


class PageHandler(QuietTimeouts, http.server.SimpleHTTPRequestHandler):
    """The files the command wrote into a folder, by exact name, and nothing else of it.

    A dump's folder also holds the ``.pt`` dumps (prompts, responses), the cache and
    whatever else lies there, so anything not in ``served`` is a 404, as is a served
    name that resolves out of the folder (a symlink put in its place): no listing, no
    hidden files, no ``..``. ``/`` redirects to the page (``served[0]``). A request
    whose ``Host`` is not one of ``host_names`` (or an address) is a 403 before all that.
    A connection that sends no request within the server's read timeout is closed
    (``sources/listening``); a file is written in parts, each within it.
    """

    def __init__(self, *args: Any, served: Sequence[str], host_names: frozenset[str],
                 **kwargs: Any) -> None:
        self.served = tuple(served)  # before the base class handles the request
        self.host_names = host_names
        super().__init__(*args, **kwargs)

    def send_head(self) -> BinaryIO | None:
        if refused_foreign_host(self, self.host_names):
            return None
        path = self.named(self.path)
        if path == "/":
            self.send_response(HTTPStatus.FOUND)
            self.send_header("Location", "/" + url_path(self.served[0]))
            self.send_header("Content-Length", "0")
            self.end_headers()
            return None
        name = path[1:]
        root = Path(self.directory).resolve()
        if name not in self.served or (root / name).resolve().parent != root:
            self.send_error(HTTPStatus.NOT_FOUND, "Not served")
            return None
        # The files are rewritten in place (a followed run's page) and dates have whole
        # seconds: a page rewritten within the second the browser saw would be answered
        # "304 Not Modified", and an update would reload the old page. Always the file.
        del self.headers["If-Modified-Since"]
        return super().send_head()

    def copyfile(self, source: Any, outputfile: Any) -> None:
        """The served file, :data:`WRITE_PART_BYTES` at a time: a slow client's page
        is not cut by the timeout that bounds each write (``sources/listening``)."""
        shutil.copyfileobj(source, outputfile, WRITE_PART_BYTES)

    @staticmethod
    def named(request_path: str) -> str:
        """The path a request names, as the file system names files: its bytes, not UTF-8
        text (``os.fsdecode``), so that a name an old system wrote in Latin-1 is found."""
        return os.fsdecode(urllib.parse.unquote_to_bytes(urllib.parse.urlsplit(request_path).path))

    def translate_path(self, path: str) -> str:
        """The file a request names in the folder (only a served name gets this far)."""
        return os.path.join(self.directory, self.named(path)[1:])

    def end_headers(self) -> None:
        self.send_header("Cache-Control", "no-store")
        super().end_headers()

    def log_message(self, format: str, *args: object) -> None:
        """One line on stderr, the client's text with its control characters escaped."""
        note(f"{self.address_string()} {printable(format % args)}")


class PageServer(HttpServer):
    request_queue_size = 256  # a burst of page loads should queue, not be refused


def make_server(folder: Path, served: Sequence[str], host: str,
                port: int) -> http.server.ThreadingHTTPServer:
    """A threaded server of the files ``served`` in ``folder``, the page first (port 0
    picks a free one), to requests that name ``host``, ``localhost`` or an address."""
    handler = functools.partial(PageHandler, directory=str(folder), served=served,
                                host_names=allowed_names(host))
    try:
        return PageServer((host, port), handler)
    except OSError as exc:
        raise CliError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from exc


def audience(host: str, port: int) -> str:
    """Who can open a server on ``host``, in words for the start-up line."""
    try:
        address = ipaddress.ip_address(host)
    except ValueError:  # a host name
        return ("this machine only (localhost)" if host == "localhost"
                else f"anyone who can reach {host}:{port}")
    if address.is_loopback:
        return f"this machine only ({host})"
    if address.is_unspecified:
        return (f"anyone who can reach this machine on port {port} "
                f"({url_host(host)}: every interface)")
    return f"anyone who can reach {url_host(host)}:{port}"


def url_path(name: str) -> str:
    """A file's name as a URL path: its bytes on the file system, percent-encoded (a name
    that is not UTF-8, as an old system may have written it, too)."""
    return urllib.parse.quote(os.fsencode(name))


def serve(folder: Path, served: Sequence[str], host: str, port: int) -> None:
    """Serve the files ``served`` (the page first) from ``folder`` until Ctrl-C, saying
    what is served, to whom, and the page's URL."""
    server = make_server(folder, served, host, port)
    port = server.server_address[1]
    shown_host = url_host(host) if host not in ("0.0.0.0", "::") else "127.0.0.1"
    url = f"http://{shown_host}:{port}/{url_path(served[0])}"
    try:  # from the start-up line on, Ctrl-C is the normal way to stop
        say(f"serving {' and '.join(served)} to {audience(host, port)} at {url}"
            "  (Ctrl-C to stop)")
        server.serve_forever(poll_interval=POLL_INTERVAL)
    except KeyboardInterrupt:
        say("stopped")
    finally:
        server.server_close()
