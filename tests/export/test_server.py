"""The CLI's static server: its folder only, loopback by default, bursts of requests."""

from __future__ import annotations

import http.client
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from slime_trace_widget.cli import _parser, make_server


@pytest.fixture
def served(tmp_path: Path):
    folder = tmp_path / "out"
    folder.mkdir()
    (folder / "page.html").write_text("<p>timeline</p>")
    (folder / ".hidden").write_text("secret")
    (tmp_path / "outside.txt").write_text("outside")
    os.symlink(tmp_path / "outside.txt", folder / "link.txt")
    server = make_server(folder, "127.0.0.1", 0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()
    thread.join(timeout=10)


def _get(port: int, path: str) -> tuple[int, bytes]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=20)
    try:
        connection.request("GET", path)
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


def test_serves_its_page(served: int) -> None:
    assert _get(served, "/page.html") == (200, b"<p>timeline</p>")


@pytest.mark.parametrize("path", [
    "/../outside.txt", "/%2e%2e/outside.txt", "/..%2foutside.txt", "/link.txt", "/.hidden",
    "/", "//etc/passwd", "/page.html/../../outside.txt",
])
def test_nothing_outside_the_folder(served: int, path: str) -> None:
    status, body = _get(served, path)
    assert status == 404, (path, status)
    assert b"outside" not in body and b"secret" not in body and b"root:" not in body


def test_binds_loopback_by_default() -> None:
    assert _parser().parse_args(["x.pt"]).host == "127.0.0.1"
    server = make_server(Path("."), "127.0.0.1", 0)
    try:
        assert server.server_address[0] == "127.0.0.1"
    finally:
        server.server_close()


def test_survives_200_concurrent_requests(served: int) -> None:
    with ThreadPoolExecutor(max_workers=50) as pool:
        results = list(pool.map(lambda _: _get(served, "/page.html")[0], range(200)))
    assert results.count(200) == 200
    assert _get(served, "/page.html")[0] == 200
