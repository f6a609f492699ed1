"""The filter box's query in JupyterLab (attribute terms answered by the kernel) and in
a ``to_html`` snapshot opened from ``file://`` (answered from the page's tables).

What each query keeps is computed in Python with ``query.match`` over the same
frames and mapped to payload positions; the page must hide exactly the rest.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from slime_trace_widget import TraceTimeline
from slime_trace_widget.answers import query
from slime_trace_widget.frames import TraceFrames
from slime_trace_widget.sources.loading import load_frames
from slime_trace_widget.view.payload import encode
from tests.browser.notebooks import FIRST_WIDGET, run_first_widget
from tests.support.browser import (
    VIEWPORT,
    JupyterLab,
    PageGuard,
    file_only,
)

pytestmark = pytest.mark.browser

FIXTURES = Path(__file__).parents[1] / "fixtures"
ROOT = FIRST_WIDGET
PLAIN = "name:tool_call duration>1s"
ATTRS = "tool=python name:tool_call"
SNAPSHOT_ATTRS = "has:error_type"
BAD = "name:tool_call duration>2x"


def expected(frames: TraceFrames, text: str) -> dict[str, Any]:
    """Rows, and the payload spans and events, ``text`` keeps in the default view."""
    view = encode(frames)
    found = query.match(frames, text)
    spans = found.spans[frames.span_core.index.get_indexer(view.span_index)]
    events = found.events[frames.event_core.index.get_indexer(view.event_index)]
    return {"rows": int(found.samples.sum()), "spans": spans.astype(int).tolist(),
            "events": events.astype(int).tolist()}


def _state(root: Any) -> dict[str, Any]:
    """Rows, which payload items are drawn, the query's state, header and message."""
    return root.evaluate("""(el) => {
        const d = el.stwDebug;
        const drawn = (kind) => {
            const out = [];
            for (let i = 0; d.visibility(kind, i) >= 0; i++) out.push(d.visibility(kind, i) && 1);
            return out;
        };
        const spans = drawn('span'), events = drawn('event');
        const msg = el.querySelector('.stw-query-msg');
        return {rows: Number(el.dataset.rows), query: el.dataset.query, spans, events,
                header: el.querySelector('.stw-count').textContent,
                message: msg.hidden ? '' : msg.textContent};
    }""")


def _type(root: Any, text: str) -> None:
    box = root.locator(".stw-input")
    box.fill(text)
    box.press("Enter")


def _wait_settled(page: Any, selector: str, rows: int) -> None:
    page.wait_for_function(
        "([sel, n]) => { const el = document.querySelector(sel);"
        " return el && el.dataset.query === 'idle' && el.dataset.rows === String(n); }",
        arg=[selector, rows], timeout=60_000)


def _check(state: dict[str, Any], want: dict[str, Any]) -> None:
    assert state["rows"] == want["rows"]
    # events are drawn only where a row is; every kept item is drawn, every other hidden
    assert state["spans"] == want["spans"]
    assert state["events"] == want["events"]
    assert f"{sum(want['spans']):,} span" in state["header"]
    assert f"{want['rows']} of 8 samples match" in state["header"]


def test_query_in_jupyterlab(lab: JupyterLab, chromium: Any) -> None:
    dump = lab.notebooks / "query_small.pt"
    shutil.copy(FIXTURES / "small.pt", dump)
    frames = load_frames(dump)
    durations = frames.span_core["duration"].to_numpy()
    assert not np.any(np.abs(durations - 1.0) < 1e-3), "a span sits on the duration bound"
    plain, attrs = expected(frames, PLAIN), expected(frames, ATTRS)
    assert 0 < plain["rows"] < 8 and sum(plain["spans"]) > 0 and sum(attrs["spans"]) > 0
    url = lab.write_notebook("query.ipynb", [
        f"from slime_trace_widget import TraceTimeline\ntl = TraceTimeline.from_dump({str(dump)!r})"
        "\ntl",
        "print('FILTER=' + repr(tl.view_state.get('filter')))",
    ])
    page = chromium.new_page(viewport=VIEWPORT, device_scale_factor=1)
    notebook = run_first_widget(page, url)
    root = page.locator(ROOT)
    assert root.get_attribute("data-rows") == "8"
    assert "duration>2s" in root.locator(".stw-input").get_attribute("placeholder")

    # terms the payload answers: rows and spans disappear at once
    _type(root, PLAIN)
    _wait_settled(page, ROOT, plain["rows"])
    _check(_state(root), plain)

    # an attribute term: the kernel answers, then the picture changes
    _type(root, ATTRS)
    _wait_settled(page, ROOT, attrs["rows"])
    state = _state(root)
    _check(state, attrs)
    assert state["message"] == ""

    # a bad query says what and where, and the last good filter stays
    _type(root, BAD)
    page.wait_for_function("sel => document.querySelector(sel).dataset.query === 'error'",
                           arg=ROOT, timeout=30_000)
    state = _state(root)
    assert 'bad duration "2x"' in state["message"] and "at character 16" in state["message"]
    _check(state, attrs)
    assert root.locator(".stw-input.stw-input-bad").count() == 1

    # the box's text is the view_state filter
    _type(root, ATTRS)
    _wait_settled(page, ROOT, attrs["rows"])
    page.wait_for_timeout(600)  # the front end debounces view_state writes
    notebook.run_cell(1)
    assert f"FILTER={ATTRS!r}" in notebook.output_text(1)

    # clearing the box shows everything again
    _type(root, "")
    _wait_settled(page, ROOT, 8)
    assert "8 of 8 samples" in _state(root)["header"]
    page.close()


def test_query_in_a_snapshot(chromium: Any, tmp_path: Path) -> None:
    timeline = TraceTimeline.from_dump(FIXTURES / "small.pt")
    frames = timeline.frames
    timeline.view_state = {"filter": ATTRS}
    path = timeline.to_html(tmp_path / "query.html")
    page = chromium.new_page(viewport=VIEWPORT, device_scale_factor=1)
    guard = PageGuard(page, file_only)
    url = path.resolve().as_uri()
    try:
        page.goto(url)
        page.wait_for_selector('.stw-root[data-ready="1"]', timeout=20_000)
        root = page.locator(".stw-root")
        # the saved query is restored, its attribute terms read from the page's tables
        attrs = expected(frames, ATTRS)
        _wait_settled(page, ".stw-root", attrs["rows"])
        _check(_state(root), attrs)
        assert root.locator(".stw-input").input_value() == ATTRS
        errors = expected(frames, SNAPSHOT_ATTRS)
        _type(root, SNAPSHOT_ATTRS)
        _wait_settled(page, ".stw-root", errors["rows"])
        _check(_state(root), errors)
        _type(root, "-")
        page.wait_for_function("() => document.querySelector('.stw-root').dataset.query"
                               " === 'error'", timeout=30_000)
        state = _state(root)
        assert state["message"] == '"-" needs a term after it (at character 1)'
        _check(state, errors)
        guard.check()
        assert guard.files == [url], f"file requests besides the page: {guard.files}"
    finally:
        page.close()
