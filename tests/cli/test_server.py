"""The CLI's static server: the files it wrote and nothing else, loopback by default,
``/`` leads to the page, bursts of requests, only to requests that name this server's
host, and a log that never writes a terminal's control characters."""

from __future__ import annotations

import contextlib
import http.client
import os
import socket
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import quote

import pytest

from slime_trace_widget.cli.command import parser, with_subcommand
from slime_trace_widget.cli.server import audience, make_server
from slime_trace_widget.view.page.http_guard import allowed_names, host_allowed
from tests.support.slow_clients import body_of, idle_connection_is_dropped, read_slowly

PAGE = "rollout_1+1 <b>.trace_timeline_viewer.html"  # a name that needs quoting in a URL


@pytest.fixture
def served(tmp_path: Path):
    folder = tmp_path / "out"
    folder.mkdir()
    (folder / PAGE).write_text("<p>timeline</p>")
    (folder / "follow.json").write_text('{"version": 1}')
    (folder / "rollout_0.pt").write_text("prompts and responses")
    (folder / "rollout_0.trace_timeline_cache.stw").write_text("cache")
    (folder / "notes.txt").write_text("private notes")
    (folder / ".hidden").write_text("secret")
    (folder / "sub").mkdir()
    (folder / "sub" / "inner.txt").write_text("private notes")
    (tmp_path / "outside.txt").write_text("outside")
    os.symlink(tmp_path / "outside.txt", folder / "link.txt")
    os.symlink(tmp_path / "outside.txt", folder / "swapped.html")  # served name, links out
    with _serving(folder, [PAGE, "follow.json", "swapped.html"]) as port:
        yield port


@contextlib.contextmanager
def _serving(folder: Path, names: list[str], host: str = "127.0.0.1",
             read_timeout: float | None = None) -> Iterator[int]:
    """The CLI's server of ``names`` in ``folder`` on a free port, in a thread, until
    the block ends (with ``read_timeout`` for its connections, when given); the port."""
    server = make_server(folder, names, host, 0)
    if read_timeout is not None:
        server.read_timeout = read_timeout
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1},
                              daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=60)


def _request(port: int, path: str, method: str = "GET", headers: dict[str, str] | None = None
             ) -> tuple[int, bytes, dict[str, str]]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        connection.request(method, path, headers=headers or {})
        response = connection.getresponse()
        return response.status, response.read(), dict(response.getheaders())
    finally:
        connection.close()


def _get(port: int, path: str) -> tuple[int, bytes]:
    return _request(port, path)[:2]


def test_serves_its_page_and_follow_state(served: int) -> None:
    assert _get(served, "/rollout_1%2B1%20%3Cb%3E.trace_timeline_viewer.html") == (
        200, b"<p>timeline</p>")
    assert _get(served, "/follow.json?t=3") == (200, b'{"version": 1}')


def test_root_redirects_to_the_page(served: int) -> None:
    status, body, headers = _request(served, "/")
    assert status == 302 and body == b""
    assert headers["Location"] == "/rollout_1%2B1%20%3Cb%3E.trace_timeline_viewer.html"
    assert _get(served, headers["Location"]) == (200, b"<p>timeline</p>")
    assert _request(served, "/", "HEAD")[0] == 302


@pytest.mark.parametrize("path", [
    "/rollout_0.pt", "/rollout_0.trace_timeline_cache.stw", "/notes.txt", "/sub/",
    "/sub/inner.txt", "/sub", "/../outside.txt", "/%2e%2e/outside.txt", "/..%2foutside.txt",
    "/link.txt", "/swapped.html", "/.hidden", "//etc/passwd", "/page.html/../../outside.txt",
    f"/sub/../{quote(PAGE)}", "/index.html",
])
@pytest.mark.parametrize("method", ["GET", "HEAD"])
def test_nothing_else_of_the_folder(served: int, path: str, method: str) -> None:
    status, body, _ = _request(served, path, method)
    assert status == 404, (path, status)
    for private in (b"outside", b"secret", b"prompts", b"cache", b"private", b"root:"):
        assert private not in body


def test_binds_loopback_by_default() -> None:
    assert parser().parse_args(with_subcommand(["x.pt"])).host == "127.0.0.1"
    server = make_server(Path("."), ["page.html"], "127.0.0.1", 0)
    try:
        assert server.server_address[0] == "127.0.0.1"
    finally:
        server.server_close()


def _binds_ipv6_loopback() -> bool:
    try:
        with socket.socket(socket.AF_INET6) as probe:
            probe.bind(("::1", 0))
        return True
    except OSError:
        return False


@pytest.mark.skipif(not _binds_ipv6_loopback(), reason="no IPv6 loopback here")
def test_an_ipv6_host_is_served_on_ipv6(tmp_path: Path) -> None:
    """``--host ::1`` failed: "Address family for hostname not supported" (an IPv4
    socket), as did ``collect --http [::1]:PORT``."""
    from slime_trace_widget.sources.engine.receiver import Collector, http_server
    from slime_trace_widget.sources.engine.store import SpanStore

    (tmp_path / PAGE).write_text("<p>timeline</p>")
    with _serving(tmp_path, [PAGE], "::1") as port:
        connection = http.client.HTTPConnection("::1", port, timeout=60)
        connection.request("GET", "/" + quote(PAGE))  # Host: [::1]:PORT
        response = connection.getresponse()
        assert (response.status, response.read()) == (200, b"<p>timeline</p>")
        connection.close()
    collector = Collector(SpanStore(tmp_path / "collector"))
    try:
        receiver = http_server(collector, "::1", 0)
        assert receiver.socket.family == socket.AF_INET6
        receiver.server_close()
    finally:
        collector.close()


@pytest.mark.parametrize(("host", "words"), [
    ("127.0.0.1", "this machine only (127.0.0.1)"),
    ("localhost", "this machine only (localhost)"),
    ("::1", "this machine only (::1)"),
    ("0.0.0.0", "anyone who can reach this machine on port 9999 (0.0.0.0: every interface)"),
    ("::", "anyone who can reach this machine on port 9999 ([::]: every interface)"),
    ("10.1.2.3", "anyone who can reach 10.1.2.3:9999"),
    ("fd00::5", "anyone who can reach [fd00::5]:9999"),
    ("gpu-node-7", "anyone who can reach gpu-node-7:9999"),
])
def test_start_up_line_says_to_whom(host: str, words: str) -> None:
    assert audience(host, 9999) == words


def test_survives_200_concurrent_requests(served: int) -> None:
    with ThreadPoolExecutor(max_workers=50) as pool:
        results = list(pool.map(lambda _: _get(served, "/follow.json")[0], range(200)))
    assert results.count(200) == 200
    assert _get(served, "/follow.json")[0] == 200


def test_a_page_rewritten_within_the_same_second_is_served_anew(served: int, tmp_path: Path
                                                                ) -> None:
    """A followed run rewrites its page in place; the browser's reload asks with the date
    it saw, which has whole seconds. The new page must come back, never a 304."""
    status, body, headers = _request(served, "/follow.json")
    assert status == 200 and headers["Cache-Control"] == "no-store"
    state = tmp_path / "out" / "follow.json"
    seen = state.stat().st_mtime
    state.write_text('{"version": 2}')
    os.utime(state, (seen, seen))  # the same second as the copy the browser holds
    status, body, _ = _request(served, "/follow.json",
                               headers={"If-Modified-Since": headers["Last-Modified"]})
    assert (status, body) == (200, b'{"version": 2}')


SERVED_PATHS = [f"/{quote(PAGE)}", "/follow.json", "/"]


@pytest.mark.parametrize("host", [
    "attacker.example:{port}", "attacker.example", "localhost.attacker.example:{port}",
    "127.0.0.1.nip.io:{port}", "evil@127.0.0.1:{port}", "127.0.0.1:{port}:80", "",
])
@pytest.mark.parametrize("path", SERVED_PATHS)
@pytest.mark.parametrize("method", ["GET", "HEAD"])
def test_a_request_naming_another_host_is_refused(served: int, host: str, path: str,
                                                  method: str) -> None:
    """DNS rebinding: a page of attacker.example points its name at 127.0.0.1 and reads
    what this server answers, unless the server refuses a Host that is not its own."""
    status, body, headers = _request(served, path, method,
                                     headers={"Host": host.format(port=served)})
    assert status == 403, (host, path, status)
    assert headers["Content-Type"].startswith("text/plain")
    assert b"timeline" not in body and b"version" not in body
    if method == "GET":
        assert b"Host" in body  # says why


@pytest.mark.parametrize("host", [
    "127.0.0.1:{port}", "localhost:{port}", "LocalHost:{port}", "127.0.0.1", "localhost",
    "[::1]:{port}", "[::1]",
])
def test_a_request_naming_this_machine_is_answered(served: int, host: str) -> None:
    headers = {"Host": host.format(port=served)}
    assert _request(served, f"/{quote(PAGE)}", headers=headers)[:2] == (200, b"<p>timeline</p>")
    assert _request(served, "/follow.json", headers=headers)[:2] == (200, b'{"version": 1}')
    assert _request(served, "/", headers=headers)[0] == 302


def _raw_exchange(port: int, request: bytes) -> bytes:
    """Everything the server sends back to ``request`` written as is on a new connection,
    up to its closing it (HTTP/1.0, or a request it cannot read)."""
    with socket.create_connection(("127.0.0.1", port), timeout=60) as connection:
        connection.sendall(request)
        chunks = []
        while chunk := connection.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


def test_a_request_without_a_host_header_is_answered(served: int) -> None:
    """HTTP/1.0 has no Host header: nothing names another host."""
    answer = _raw_exchange(served, b"GET /follow.json HTTP/1.0\r\n\r\n")
    assert answer.startswith(b"HTTP/1.0 200") and answer.endswith(b'{"version": 1}')


@pytest.mark.parametrize(("bind", "host", "allowed"), [
    ("gpu-node-7", "gpu-node-7:9999", True),  # the --host value, with or without the port
    ("gpu-node-7", "GPU-Node-7", True),
    ("gpu-node-7", "gpu-node-8:9999", False),
    ("127.0.0.1", "10.1.2.3:9999", True),  # an address: no DNS name to point elsewhere
    ("127.0.0.1", "[fe80::1]:9999", True),
    ("127.0.0.1", "[not-an-address]:9999", False),
    ("127.0.0.1", "localhost:port", False),
    ("::1", "[::1]:9999", True),
    ("0.0.0.0", socket.gethostname(), True),  # every interface: this machine's own name
    ("0.0.0.0", "attacker.example", False),
    ("127.0.0.1", None, True),  # no Host header (HTTP/1.0)
])
def test_which_hosts_a_server_answers(bind: str, host: str | None, allowed: bool) -> None:
    assert host_allowed(host, allowed_names(bind)) is allowed


@pytest.mark.parametrize(("request_line", "code"), [
    (b"GET /\x1b[2J\x1b]0;owned\x07 HTTP/1.0", b"404"),  # a path it refuses, logged
    (b"GET /\x1b[2J HTTP/\x9b1.0", b"400"),  # a line it cannot read, logged too
])
def test_the_log_escapes_control_characters(served: int, request_line: bytes, code: bytes,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    """A request line with escape sequences must not reach the terminal as is: the
    log shows them as ``\\xNN``, in the server's own format."""
    assert code in _raw_exchange(served, request_line + b"\r\n\r\n")
    log = capsys.readouterr().err  # written before the answer was sent
    assert log.startswith("127.0.0.1 ")
    assert r"\x1b[2J" in log
    assert not [c for c in log if (ord(c) < 0x20 and c != "\n") or 0x7f <= ord(c) < 0xa0], log


def test_a_page_named_in_bytes_that_are_not_utf8_is_served(tmp_path: Path) -> None:
    # A dump from an old system, b"r\xff.pt": its page's name holds a byte UTF-8 lacks.
    name = os.fsdecode(b"r\xff.trace_timeline_viewer.html")
    (tmp_path / name).write_text("<p>latin-1 named</p>")
    with _serving(tmp_path, [name]) as port:
        status, _, headers = _request(port, "/")
        assert status == 302 and headers["Location"] == "/r%FF.trace_timeline_viewer.html"
        assert _get(port, headers["Location"]) == (200, b"<p>latin-1 named</p>")
        assert _get(port, "/r%EF%BF%BD.trace_timeline_viewer.html")[0] == 404  # U+FFFD


def test_an_idle_connection_is_closed_and_its_thread_ends(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A connection that never sends a request held a thread and a descriptor for as
    long as the server ran (50 idle sockets: 58 descriptors, 54 threads after 65 s).
    Closing it is routine (a browser's spare connection): no line in the terminal."""
    (tmp_path / PAGE).write_text("<p>timeline</p>")
    with _serving(tmp_path, [PAGE], read_timeout=1.0) as port:
        assert idle_connection_is_dropped(("127.0.0.1", port))
        assert capsys.readouterr().err == ""
        assert _get(port, "/")[0] == 302  # the server answers on


def test_a_slow_client_gets_a_large_page_whole(tmp_path: Path) -> None:
    """The timeout bounds each part the server writes, not the whole page: a client
    that takes 24 MiB over several times the timeout gets all of it."""
    page = os.urandom(24 << 20)
    (tmp_path / PAGE).write_bytes(page)
    with _serving(tmp_path, [PAGE], read_timeout=2.0) as port:
        status, body = body_of(read_slowly(("127.0.0.1", port), "/" + quote(PAGE)))
    assert status == 200 and len(body) == len(page)  # before the bytes: a short failure
    assert body == page
