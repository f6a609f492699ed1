"""Snapshots from ``file://`` in Chromium: a half-second span reads half a second in a
dump whose timestamps lie 1.8e9 s apart (one stray clock), the loader's warnings
show as a notice in the toolbar, absent for a clean dump, and a dump whose file name
is not UTF-8 makes a page that opens."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from slime_trace_widget.sources.loading import load_frames
from slime_trace_widget.view.page.snapshot import write_snapshot
from slime_trace_widget.view.payload import encode
from tests.browser.test_snapshot_browser import Snapshot, _debug, opened
from tests.view.test_payload import decode
from tests.view.test_payload_meta import NOT_UTF8, repaired_dump
from tests.view.test_payload_times import stray_clock_dump

pytestmark = pytest.mark.browser

FIXTURES = Path(__file__).parents[1] / "fixtures"
#: How long a condition may take to hold in the page (the frame loop, a hover).
WAIT_MS = 30_000
HOSTILE_KIND = "<img src=x onerror=window.__pwned=1>"


def _snapshot(frames: Any, path: Path) -> Snapshot:
    view = encode(frames)
    return Snapshot(write_snapshot(path, frames, view), frames, view)


def _tooltip_rows(page: Any) -> dict[str, str]:
    return page.locator(".stw-tooltip").evaluate(
        "(tip) => Object.fromEntries([...tip.querySelectorAll('.stw-tt-row')].map("
        "(row) => [row.querySelector('.stw-tt-k').textContent,"
        " row.querySelector('.stw-tt-v').textContent]))")


def _details_durations(page: Any) -> list[str]:
    """The values of the details panel's "duration" rows (the sample's, the span's)."""
    return page.locator(".stw-details").evaluate(
        "(panel) => [...panel.querySelectorAll('.stw-k')]"
        ".filter((key) => key.textContent === 'duration')"
        ".map((key) => key.nextElementSibling.textContent)")


def _show_span(page: Any, snap: Snapshot, index: int) -> dict[str, float]:
    """Zoom to span ``index`` (a quarter second either side), scroll its row into view
    and return its client rectangle once it is drawn."""
    cols = decode(snap.view.payload)
    start, end = float(cols["span_start"][index]), float(cols["span_end"][index])
    _debug(page, "debug.setView(arg[0], arg[1])", [start - 0.25, end + 0.25])
    sample = snap.sample_of("span_sample", index)
    _debug(page, "debug.scrollToRow(debug.rowOfSample(arg))", sample)
    page.wait_for_function(
        "(i) => !!document.querySelector('.stw-root').stwDebug.spanRect(i)",
        arg=index, timeout=WAIT_MS)
    return _debug(page, "debug.spanRect(arg)", index)


def test_a_half_second_span_reads_half_a_second_beside_a_stray_clock(
        chromium: Any, tmp_path: Path) -> None:
    snap = _snapshot(load_frames(stray_clock_dump(tmp_path / "clock.pt")), tmp_path / "c.html")
    target = snap.span(0, "step0")
    with opened(chromium, snap.path) as page:
        rect = _show_span(page, snap, target)
        page.mouse.move(rect["x"] + rect["w"] / 2, rect["y"] + rect["h"] / 2)
        page.wait_for_function(
            "() => document.querySelector('.stw-tooltip')?.innerText.includes('step0')",
            timeout=WAIT_MS)
        rows = _tooltip_rows(page)
        assert rows["duration"] == "500 ms", rows
        assert rect["w"] > 100, rect  # half of the view: 0.5 s of 1 s
        page.mouse.click(rect["x"] + rect["w"] / 2, rect["y"] + rect["h"] / 2)
        page.locator(".stw-details .stw-k", has_text="duration").first.wait_for(timeout=WAIT_MS)
        durations = _details_durations(page)
        assert "500 ms" in durations and "0 s" not in durations, durations


def test_the_loader_warnings_show_as_a_notice(chromium: Any, tmp_path: Path) -> None:
    frames = load_frames(repaired_dump(tmp_path / "edge.pt"))
    snap = _snapshot(frames, tmp_path / "edge.html")
    total = sum(frames.warnings.values())
    with opened(chromium, snap.path) as page:
        notice = page.locator(".stw-warnings")
        notice.wait_for(state="visible", timeout=WAIT_MS)
        assert notice.locator("summary").inner_text() == f"⚠ {total} load warnings"
        title = notice.get_attribute("title")
        for kind, count in frames.warnings.items():
            assert f"{kind}: {count}" in title
        items = notice.locator("li")
        assert not items.first.is_visible()
        notice.locator("summary").click()
        items.first.wait_for(state="visible", timeout=WAIT_MS)
        assert sorted(items.all_inner_texts()) == sorted(
            f"{kind}: {count}" for kind, count in frames.warnings.items())


def test_a_clean_dump_shows_no_warnings_notice(chromium: Any, tmp_path: Path) -> None:
    snap = _snapshot(load_frames(FIXTURES / "small.pt"), tmp_path / "small.html")
    with opened(chromium, snap.path) as page:
        assert page.locator(".stw-warnings").count() == 1
        assert not page.locator(".stw-warnings").is_visible()


def test_a_warning_kind_is_shown_as_text(chromium: Any, tmp_path: Path) -> None:
    frames = load_frames(FIXTURES / "small.pt")
    hostile = replace(frames, warnings=Counter({HOSTILE_KIND: 2}))
    snap = _snapshot(hostile, tmp_path / "hostile.html")
    with opened(chromium, snap.path) as page:
        notice = page.locator(".stw-warnings")
        notice.locator("summary").click()
        notice.locator("li").first.wait_for(state="visible", timeout=WAIT_MS)
        assert notice.locator("li").inner_text() == f"{HOSTILE_KIND}: 2"
        assert notice.locator("img").count() == 0
        assert page.evaluate("() => window.__pwned") is None


def test_a_dump_name_that_is_not_utf8_makes_a_page_that_opens(
        chromium: Any, tmp_path: Path) -> None:
    dump = stray_clock_dump(tmp_path / NOT_UTF8)
    snap = _snapshot(load_frames(dump), tmp_path / "page.html")
    with opened(chromium, snap.path) as page:
        assert page.title() == "rollout_\ufffd\ufffd.pt"
        assert page.locator(".stw-title").inner_text() == "rollout_\ufffd\ufffd.pt"
        assert page.locator(".stw-root").get_attribute("data-rows") == "5"
