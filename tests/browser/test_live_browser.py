"""``slime-trace-viewer live DIR`` in Chromium, fed by a real receiver subprocess that the
live stream (``tracing.live.install``) sends to: a span recorded on a real clock grows
while open and then closes, a hung sample is flagged stalled in the span it is stuck in,
and a record another process dropped is told, with that process; with ``--dumps``, the
page switches to the step's dump when it lands, its spans those seen live."""

from __future__ import annotations

import contextvars
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

from slime_trace_widget.tracing import live
from slime_trace_widget.tracing.spans import trace_event, trace_span
from tests.browser.live_stream import live_state, post_with_a_drop
from tests.support.browser import VIEWPORT, free_port
from tests.support.processes import ended_with, line_starting
from tests.support.receiver import ROOT, STARTUP_SECONDS, start_receiver

READY = '.stw-root[data-ready="1"]'
WAIT_MS = 60_000
LIVE = live_state(".stw-root")


@pytest.fixture
def live_page(tmp_path: Path) -> Iterator[tuple[int, str]]:
    """A receiver, this process's records streamed to it, and ``slime-trace-viewer live``
    on its folder (stall_after 2 s): the receiver's port and the page's URL."""
    yield from _serve_live(tmp_path, ["--stall-after", "2"])


@pytest.fixture
def live_page_with_dumps(tmp_path: Path) -> Iterator[tuple[Path, str]]:
    """As ``live_page``, with ``--dumps``: the dump folder and the page's URL."""
    (tmp_path / "dumps").mkdir()
    for _port, url in _serve_live(tmp_path, ["--dumps", str(tmp_path / "dumps")]):
        yield tmp_path / "dumps", url


def _serve_live(tmp_path: Path, options: list[str]) -> Iterator[tuple[int, str]]:
    receiver = start_receiver(tmp_path / "collect")
    server = subprocess.Popen(
        [sys.executable, "-m", "slime_trace_widget", "live", str(tmp_path / "collect"),
         "--port", str(free_port()), *options],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        line = line_starting(server, "serving", STARTUP_SECONDS)
        assert line, f"the live command did not start serving: {ended_with(server)}"
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
        # never returns; entered in a copy of this context, so the open span is not left
        # active for the tests that run after this one in the process
        contextvars.copy_context().run(tool.__enter__)
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


def test_live_page_switches_to_the_steps_dump(chromium: Any, live_page_with_dumps: tuple,
                                              tmp_path: Path) -> None:
    dumps, url = live_page_with_dumps
    sample = {"index": 0, "group_index": 0}
    page = chromium.new_page(viewport=VIEWPORT, device_scale_factor=1)
    try:
        page.goto(url)
        page.wait_for_selector(READY, timeout=WAIT_MS)
        with trace_span(sample, "generate"):
            trace_event(sample, "token_chunk")
        with trace_span(sample, "reward"):
            pass
        page.wait_for_function(f"() => {LIVE}.spans.length === 2", timeout=WAIT_MS)
        seen_live = sorted(s["name"] for s in page.evaluate(f"{LIVE}.spans"))

        written = tmp_path / "rollout_0.pt"  # written elsewhere, then moved in whole
        torch.save({"rollout_id": 0, "samples": [sample]}, written)
        old = time.time() - 60
        os.utime(written, (old, old))  # complete: not modified within the settle time
        os.replace(written, dumps / "rollout_0.pt")

        page.wait_for_url("**/dump.html", timeout=WAIT_MS)
        page.wait_for_selector(READY, timeout=WAIT_MS)
        assert page.title().startswith("rollout_0.pt: the step's dump (handed over from")
        debug = "document.querySelector('.stw-root').stwDebug"
        assert page.evaluate(f"{debug}.live()") is None  # a dump's view, no longer live
        assert page.evaluate(f"{debug}.state().rows") == 1
        # the dump's two spans, where the live page had its two, both drawn
        assert [page.evaluate(f"{debug}.visibility('span', {k})") for k in range(3)] == \
            [1, 1, -1]
        assert seen_live == ["generate", "reward"]
        assert page.locator("#stw-error").inner_text() == ""
    finally:
        page.close()
