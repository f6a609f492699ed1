"""The live page's server (``slime-trace-viewer live``): the page, its deltas and an
item's details over real HTTP on loopback, and nothing else; only to requests that
name this server's host; a log without a terminal's control characters; with a dump
folder, the hand-over to the step's dump once it lands."""

from __future__ import annotations

import base64
import contextlib
import functools
import http.client
import json
import os
import socket
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from slime_trace_widget.demo import make_demo_samples
from slime_trace_widget.sources.handover import new_dumps_watcher
from slime_trace_widget.view.live import LiveSession
from slime_trace_widget.view.live_blocks import LiveDelta
from slime_trace_widget.view.page.http_guard import allowed_names
from slime_trace_widget.view.page.live_server import (
    Handover,
    LiveHandler,
    LiveServer,
    make_live_server,
)
from tests.support.live_deltas import as_payload, assert_same_rows, page_payload
from tests.support.live_feeds import RecordQueue
from tests.support.slow_clients import body_of, idle_connection_is_dropped, read_slowly


@pytest.fixture(scope="module")
def served() -> Iterator[str]:
    feed = RecordQueue()
    feed.put([r for s in make_demo_samples(3, seed=4) for r in s["trace"]["events"]])
    session = LiveSession(feed)
    session.poll()
    with _serving(session) as url:
        yield url


@contextlib.contextmanager
def _serving(session: LiveSession, handover: Handover | None = None) -> Iterator[str]:
    server = make_live_server(session, "127.0.0.1", 0, handover)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1},
                              daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=30)


def _get(url: str) -> tuple[int, str, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=30) as response:
            return response.status, response.headers["Content-Type"], response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.headers["Content-Type"], error.read()


def test_the_page_asks_its_own_server(served: str) -> None:
    status, kind, body = _get(f"{served}/live.html")
    assert status == 200 and kind.startswith("text/html")
    assert b"connect-src 'self'" in body  # the page may fetch its deltas, nothing else


def test_deltas_since_a_number_and_of_another_epoch(served: str) -> None:
    status, _, body = _get(f"{served}/live.json?since=0")
    whole = json.loads(body)
    assert status == 200 and whole["positions"] == [0, 1, 2]
    assert set(whole["buffers"]) >= {"span_start", "smp_start"}
    _, _, body = _get(f"{served}/live.json?since={whole['seq']}&epoch={whole['epoch']}")
    assert json.loads(body)["positions"] == []
    _, _, body = _get(f"{served}/live.json?since={whole['seq']}&epoch=another")
    assert json.loads(body)["positions"] == [0, 1, 2]  # another epoch: everything again


def test_details_and_bad_requests(served: str) -> None:
    status, _, body = _get(f"{served}/attrs.json?kind=span&index=0")
    assert status == 200 and json.loads(body)["detail"]["name"]
    assert _get(f"{served}/attrs.json?kind=span&index=999999")[0] == 404
    assert _get(f"{served}/attrs.json?kind=script&index=0")[0] == 400
    assert _get(f"{served}/live.json?since=-3")[0] == 400
    assert _get(f"{served}/live.json?since=abc")[0] == 400
    assert _get(f"{served}/../etc/passwd")[0] == 404
    assert _get(f"{served}/live_server.py")[0] == 404


def test_the_page_hands_over_to_the_steps_dump(tmp_path: Path) -> None:
    samples = make_demo_samples(5, seed=7)
    (tmp_path / "rollout_2.pt").write_bytes(b"an earlier step's dump, never read")
    feed = RecordQueue()
    feed.put([r for s in samples for r in s["trace"]["events"]])
    session = LiveSession(feed, title="collect (live)")
    session.poll()
    handover = Handover(new_dumps_watcher(tmp_path))
    with _serving(session, handover) as url:
        _, _, body = _get(f"{url}/live.json?since=0")
        live = json.loads(body)
        assert "handover" not in live and handover.look(session) is False
        assert _get(f"{url}/dump.html")[0] == 404  # nothing to hand over to yet

        other = tmp_path / "rollout_25_other_run.pt"  # complete, but none of these samples
        torch.save({"rollout_id": 3, "samples": make_demo_samples(2, seed=99)}, other)
        dump = tmp_path / "rollout_3.pt"
        torch.save({"rollout_id": 3, "samples": samples}, dump)
        old = time.time() - 60
        for path in (other, dump):
            os.utime(path, (old, old))  # complete: not modified within the settle time
        assert handover.look(session) is True  # what the CLI's poll thread does

        _, _, body = _get(f"{url}/live.json?since={live['seq']}&epoch={live['epoch']}")
        assert json.loads(body)["handover"] == {"url": "dump.html", "dump": "rollout_3.pt"}
        status, kind, page = _get(f"{url}/dump.html")
        assert status == 200 and kind.startswith("text/html")
        assert b"<title>rollout_3.pt: the step&#x27;s dump (handed over from collect (live))" \
            in page

    # the live rows are the dump page's rows: the same samples with the same spans
    buffers = {name: base64.b64decode(text) for name, text in live.pop("buffers").items()}
    assert_same_rows(as_payload(LiveDelta(live, buffers)), page_payload(page),
                     {s["trace"]["trace_id"] for s in samples})


PAGE_AND_DATA = ["/live.html", "/", "/live.json?since=0", "/attrs.json?kind=span&index=0"]


def _port(url: str) -> int:
    return int(url.rsplit(":", 1)[1])


def _get_as(url: str, path: str, host: str) -> tuple[int, str, bytes]:
    """``path`` of the server at ``url``, asked with ``Host: host``."""
    connection = http.client.HTTPConnection("127.0.0.1", _port(url), timeout=30)
    try:
        connection.request("GET", path, headers={"Host": host.format(port=_port(url))})
        response = connection.getresponse()
        return response.status, response.getheader("Content-Type", ""), response.read()
    finally:
        connection.close()


@pytest.mark.parametrize("host", ["attacker.example:{port}", "attacker.example",
                                  "localhost.attacker.example:{port}"])
@pytest.mark.parametrize("path", [*PAGE_AND_DATA, "/dump.html"])
def test_a_request_naming_another_host_is_refused(served: str, path: str, host: str) -> None:
    """DNS rebinding: a page of attacker.example that pointed its name at 127.0.0.1
    reads neither the page nor its samples' data."""
    status, kind, body = _get_as(served, path, host)
    assert (status, kind) == (403, "text/plain; charset=utf-8"), (path, host)
    assert b"Host" in body  # says why
    assert b"stw-data" not in body and b"positions" not in body and b"detail" not in body


@pytest.mark.parametrize("host", ["127.0.0.1:{port}", "localhost:{port}", "[::1]:{port}"])
@pytest.mark.parametrize("path", PAGE_AND_DATA)
def test_a_request_naming_this_machine_is_answered(served: str, path: str, host: str) -> None:
    assert _get_as(served, path, host)[0] == 200


def _raw_exchange(url: str, request: bytes) -> bytes:
    """Everything the server sends back to ``request`` written as is on a new connection,
    up to its closing it (HTTP/1.0, or a request it cannot read)."""
    with socket.create_connection(("127.0.0.1", _port(url)), timeout=30) as connection:
        connection.sendall(request)
        chunks = []
        while chunk := connection.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


@pytest.mark.parametrize(("request_line", "code"), [
    (b"GET /\x1b[2J\x1b]0;owned\x07 HTTP/1.0", b"404"),  # a path it refuses, logged
    (b"GET /\x1b[2J HTTP/\x9b1.0", b"400"),  # a line it cannot read, logged too
])
def test_the_log_escapes_control_characters(served: str, request_line: bytes, code: bytes,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    """A request line with escape sequences must not reach the terminal as is: the
    log shows them as ``\\xNN``; a line too broken to have a path is answered too."""
    assert code in _raw_exchange(served, request_line + b"\r\n\r\n")
    log = capsys.readouterr().err  # written before the answer was sent
    assert log.startswith("127.0.0.1 ")
    assert r"\x1b[2J" in log
    assert not [c for c in log if (ord(c) < 0x20 and c != "\n") or 0x7f <= ord(c) < 0xa0], log


def test_a_head_request_is_answered_as_its_get_without_the_body(served: str) -> None:
    port = int(served.rsplit(":", 1)[1])
    for path in ("/live.html", "/nothing"):
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        try:
            connection.request("GET", path)
            got = connection.getresponse()
            length, status = got.getheader("Content-Length"), got.status
            got.read()
            connection.request("HEAD", path)
            head = connection.getresponse()
            assert (head.status, head.getheader("Content-Length")) == (status, length)
            assert head.read() == b""
        finally:
            connection.close()


@contextlib.contextmanager
def _running(server: LiveServer, read_timeout: float) -> Iterator[tuple[str, int]]:
    """``server`` serving in a thread, its connections' timeout ``read_timeout``, until
    the block ends; its address."""
    server.read_timeout = read_timeout
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1},
                              daemon=True)
    thread.start()
    try:
        yield server.server_address
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=30)


def test_an_idle_connection_is_closed_and_its_thread_ends(
        capsys: pytest.CaptureFixture[str]) -> None:
    """A connection that never sends a request held a thread and a descriptor for as
    long as the server ran. Closing it is routine: no line in the terminal."""
    session = LiveSession(RecordQueue())
    with _running(make_live_server(session, "127.0.0.1", 0), 1.0) as address:
        assert idle_connection_is_dropped(address)
        assert capsys.readouterr().err == ""
        assert body_of(read_slowly(address, "/live.json?since=0"))[0] == 200  # answers on


def test_a_slow_client_gets_a_large_page_whole() -> None:
    """The timeout bounds each part the server writes, not the whole answer: a client
    that takes a 24 MiB page (a large dump's, handed over) over several times the
    timeout gets all of it."""
    page = os.urandom(24 << 20)
    handler = functools.partial(LiveHandler, session=LiveSession(RecordQueue()),
                                page_bytes=page, handover=None,
                                host_names=allowed_names("127.0.0.1"))
    with _running(LiveServer(("127.0.0.1", 0), handler), 2.0) as address:
        status, body = body_of(read_slowly(address, "/live.html"))
    assert status == 200 and len(body) == len(page)  # before the bytes: a short failure
    assert body == page
