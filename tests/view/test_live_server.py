"""The live page's server (``slime-trace-viewer live``): the page, its deltas and an
item's details over real HTTP on loopback, and nothing else."""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest

from slime_trace_widget.demo import make_demo_samples
from slime_trace_widget.view.live import LiveSession, RecordQueue
from slime_trace_widget.view.page.live_server import make_live_server


@pytest.fixture(scope="module")
def served() -> Iterator[str]:
    feed = RecordQueue()
    feed.put([r for s in make_demo_samples(3, seed=4) for r in s["trace"]["events"]])
    session = LiveSession(feed)
    session.poll()
    server = make_live_server(session, "127.0.0.1", 0)
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

