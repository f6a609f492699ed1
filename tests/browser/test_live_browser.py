"""``slime-trace-viewer live DIR`` in Chromium, fed by a real receiver subprocess that the
live stream (``tracing.live.install``) sends to: a span recorded on a real clock grows
while open and then closes, a hung sample is flagged stalled in the span it is stuck in,
and a record another process dropped is told, with that process."""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from slime_trace_widget.tracing import live
from slime_trace_widget.tracing.spans import trace_event, trace_span
from tests.browser.live_stream import live_state, post_with_a_drop
from tests.support.browser import VIEWPORT, free_port
from tests.support.receiver import ROOT, STARTUP_SECONDS, start_receiver

READY = '.stw-root[data-ready="1"]'
WAIT_MS = 60_000
LIVE = live_state(".stw-root")


@pytest.fixture
def live_page(tmp_path: Path) -> Iterator[tuple[int, str]]:
    """A receiver, this process's records streamed to it, and ``slime-trace-viewer live``
    on its folder (stall_after 2 s): the receiver's port and the page's URL."""
    receiver = start_receiver(tmp_path / "collect")
    server = subprocess.Popen(
        [sys.executable, "-m", "slime_trace_widget", "live", str(tmp_path / "collect"),
         "--port", str(free_port()), "--stall-after", "2"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        line = server.stdout.readline()
        assert line.startswith("serving"), server.stderr.read()
        with live.install(f"http://127.0.0.1:{receiver.http_port}") as stream:
            assert stream.enabled, stream
            yield receiver.http_port, line.split(" at ")[1].split()[0]
        server.send_signal(signal.SIGINT)
        assert server.wait(timeout=STARTUP_SECONDS) == 0
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
        receiver.kill()


def _spans(page: Any, name: str) -> list[dict]:
    return [s for s in page.evaluate(f"{LIVE}.spans") if s["name"] == name]


def test_live_page_grows_closes_and_flags_a_stall(chromium: Any, live_page: tuple) -> None:
    port, url = live_page
    running = {"index": 0, "group_index": 0}
    hung = {"index": 1, "group_index": 0}
    page = chromium.new_page(viewport=VIEWPORT, device_scale_factor=1)
    try:
        page.goto(url)
        page.wait_for_selector(READY, timeout=WAIT_MS)

        generate = trace_span(running, "generate")
        generate.__enter__()
        page.wait_for_function(f"() => {LIVE}.growing.length === 1", timeout=WAIT_MS)
        first = _spans(page, "generate")[0]
        assert first["open"]
        # it grows with the clock between records, and its bar is drawn
        page.wait_for_function(
            f"() => {LIVE}.growing[0].end > {first['end']} + 0.5", timeout=WAIT_MS)
        rect = page.evaluate(
            f"document.querySelector('.stw-root').stwDebug.spanRect({first['span']})")
        assert rect is not None and rect["w"] > 0

        trace_event(running, "token_chunk")
        generate.__exit__(None, None, None)
        page.wait_for_function(f"() => {LIVE}.growing.length === 0", timeout=WAIT_MS)
        closed = _spans(page, "generate")[0]
        assert not closed["open"]
        recorded = running["trace"]["events"]
        assert closed["end"] - closed["start"] == pytest.approx(
            recorded[-1]["ts"] - recorded[0]["ts"], abs=1e-3)
        assert _spans(page, "generate")[0]["end"] == closed["end"]  # no longer growing

        tool = trace_span(hung, "tool_call")
        tool.__enter__()  # never returns
        trace_event(hung, "note")
        lossy = post_with_a_drop(port)
        page.wait_for_function(f"() => {LIVE}.stalled.length === 1 && {LIVE}.lost === 1",
                               timeout=WAIT_MS)
        state = page.evaluate(LIVE)
        assert len(state["stalled"]) == 1  # the other process's sample has no open span
        assert any(tag["text"].startswith("stalled") and tag["text"].endswith("in tool_call")
                   for tag in state["tags"])
        assert state["lost"] == 1
        page.wait_for_function("() => document.querySelector('.stw-live-banner')"
                               ".textContent.includes('1 stalled')", timeout=WAIT_MS)
        banner = page.locator(".stw-live-banner").inner_text()
        assert "1 record(s) lost" in banner
        assert f"{lossy}: 1 dropped at the sender" in banner
        assert page.locator("#stw-error").inner_text() == ""
    finally:
        page.close()
