"""``slime-trace-viewer live DIR``: a live rollout in a served page.

The page is the snapshot page with an empty live payload (``data_blocks``), its
data block's ``source.live`` naming where its server answers; the page's poller
(``js/src/page/live_page.js``) fetches ``live.json?since=N&epoch=E`` once a
second: the blocks changed since its last answer (all of them for another
epoch), as the widget's deltas with base64 buffers. ``attrs.json?kind=&index=``
answers a click. A background thread polls the collector's live store every half
second. With a dump folder (``--dumps``), once the step's dump lands (the rule the
widget uses, ``sources/handover.py``) ``dump.html`` serves its snapshot page and every
``live.json`` answer names it (``"handover": {"url", "dump"}``): the page goes there.
Anything else is a 404; the server listens on loopback unless asked, and answers
only requests that name its host (``http_guard``: not a site that pointed its own
name here).
"""

from __future__ import annotations

import functools
import json
import sys
import threading
import urllib.parse
from http import HTTPStatus
from pathlib import Path
from typing import Any

import numpy as np

from ...frames.flatten import build_frames
from ...sources.follow import DumpWatcher
from ...sources.listening import HttpServer, QuietTimeouts, write_in_parts
from ..live import LiveSession
from ..payload import EncodedView, encode
from .htmlpage import page
from .http_guard import allowed_names, printable, refused_foreign_host
from .snapshot import data_blocks

PAGE = "live.html"
DELTAS = "live.json"
ATTRS = "attrs.json"
DUMP_PAGE = "dump.html"


def live_page(session: LiveSession) -> bytes:
    """The page: no samples yet, and where to ask for them."""
    empty = np.zeros(0, dtype=np.int64)
    view = EncodedView(session.starting_payload(), empty, empty, empty)
    source = {"live": {"url": DELTAS, "attrs": ATTRS, "interval_s": 1}}
    blocks = data_blocks(build_frames([]), view, source=source)
    return page(blocks, session.title, follow=True).encode()


class Handover:
    """The step's dump a live page hands over to: none until it lands, then its
    snapshot page, kept."""

    def __init__(self, watcher: DumpWatcher) -> None:
        self.watcher = watcher
        self.dump: str | None = None
        self.page_bytes: bytes | None = None
        self._lock = threading.Lock()

    def look(self, session: LiveSession) -> bool:
        """Look for the step's dump once (it is loaded here, off the request
        threads); whether the page has handed over."""
        if self.page_bytes is not None:
            return True
        found = session.step_dump(self.watcher)
        if found is None:
            return False
        path, frames = found
        name = Path(path).name
        title = f"{name}: the step's dump (handed over from {session.title})"
        blocks = data_blocks(frames, encode(frames, title=title))
        with self._lock:
            self.dump, self.page_bytes = name, page(blocks, title).encode()
        return True

    def note(self) -> dict[str, str] | None:
        """What a ``live.json`` answer says once handed over."""
        with self._lock:
            return None if self.dump is None else {"url": DUMP_PAGE, "dump": self.dump}


class LiveHandler(QuietTimeouts):
    """The page, its deltas and its items' details; nothing else, and nothing to a
    request whose ``Host`` is not one of ``host_names`` (or an address): a 403."""

    #: Whether the request is a HEAD: answered as its GET, without the body.
    head_only = False

    def __init__(self, *args: Any, session: LiveSession, page_bytes: bytes,
                 handover: Handover | None, host_names: frozenset[str], **kwargs: Any) -> None:
        self.session = session
        self.page_bytes = page_bytes
        self.handover = handover
        self.host_names = host_names
        super().__init__(*args, **kwargs)

    def do_HEAD(self) -> None:
        """As GET, without the body (a proxy's or a link checker's probe)."""
        self.head_only = True
        self.do_GET()

    def do_GET(self) -> None:
        if refused_foreign_host(self, self.host_names):
            return
        parts = urllib.parse.urlsplit(self.path)
        query = urllib.parse.parse_qs(parts.query)
        if parts.path in ("/", f"/{PAGE}"):
            self._answer(HTTPStatus.OK, "text/html; charset=utf-8", self.page_bytes)
        elif parts.path == f"/{DELTAS}":
            since = _integer(query.get("since", ["0"])[0])
            epoch = query.get("epoch", [None])[0]
            if since is None or since < 0:
                self._json(HTTPStatus.BAD_REQUEST, {"error": "since: a whole number >= 0"})
                return
            answer = self.session.delta_since(since, epoch).as_json()
            handed = self.handover.note() if self.handover is not None else None
            if handed is not None:
                answer["handover"] = handed
            self._json(HTTPStatus.OK, answer)
        elif parts.path == f"/{DUMP_PAGE}" and self.handover is not None \
                and self.handover.page_bytes is not None:
            self._answer(HTTPStatus.OK, "text/html; charset=utf-8", self.handover.page_bytes)
        elif parts.path == f"/{ATTRS}":
            index = _integer(query.get("index", [""])[0])
            kind = query.get("kind", ["span"])[0]
            if index is None or kind not in ("span", "event"):
                self._json(HTTPStatus.BAD_REQUEST,
                           {"error": "kind: span or event; index: a number"})
                return
            try:
                self._json(HTTPStatus.OK, {"detail": self.session.detail(kind, index)})
            except (IndexError, ValueError) as exc:
                self._json(HTTPStatus.NOT_FOUND, {"error": str(exc)})
        else:
            self._answer(HTTPStatus.NOT_FOUND, "text/plain; charset=utf-8", b"Not served")

    def _json(self, status: HTTPStatus, body: dict[str, Any]) -> None:
        text = json.dumps(body, allow_nan=False, separators=(",", ":"), default=str)
        self._answer(status, "application/json", text.encode())

    def _answer(self, status: HTTPStatus, kind: str, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        self.end_headers()
        if not self.head_only:
            write_in_parts(self.wfile, body)  # a large page to a slow client is not cut

    def log_message(self, format: str, *args: object) -> None:
        """One line on stderr, the client's text with its control characters escaped;
        none for the deltas. A request line too broken to name a path is logged."""
        if not getattr(self, "path", "").startswith(f"/{DELTAS}"):  # once a second a page
            sys.stderr.write(f"{self.address_string()} {printable(format % args)}\n")


def _integer(text: str) -> int | None:
    try:
        return int(text)
    except ValueError:
        return None


class LiveServer(HttpServer):
    pass


def make_live_server(session: LiveSession, host: str, port: int,
                     handover: Handover | None = None) -> LiveServer:
    """A threaded server of ``session``'s page (port 0 picks a free one), to requests
    that name ``host``, ``localhost`` or an address; with ``handover``, of the step's
    dump's page once it has landed."""
    handler = functools.partial(LiveHandler, session=session, page_bytes=live_page(session),
                                handover=handover, host_names=allowed_names(host))
    return LiveServer((host, port), handler)

