"""The CLI's static server: the files it wrote and nothing else, loopback by default,
``/`` leads to the page, bursts of requests."""

from __future__ import annotations

import http.client
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import quote

import pytest

from slime_trace_widget.cli.command import parser, with_subcommand
from slime_trace_widget.cli.server import audience, make_server

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
    server = make_server(folder, [PAGE, "follow.json", "swapped.html"], "127.0.0.1", 0)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1},
                              daemon=True)
    thread.start()
    yield server.server_address[1]
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


@pytest.mark.parametrize(("host", "words"), [
    ("127.0.0.1", "this machine only (127.0.0.1)"),
    ("localhost", "this machine only (localhost)"),
    ("::1", "this machine only (::1)"),
    ("0.0.0.0", "anyone who can reach this machine on port 9999 (0.0.0.0: every interface)"),
    ("10.1.2.3", "anyone who can reach 10.1.2.3:9999"),
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
