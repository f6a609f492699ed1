"""The standalone HTML snapshot, opened from ``file://`` in headless Chromium.

A snapshot is sent to people who open it on a laptop, maybe offline, maybe
from a dump someone else wrote. So every request the page makes is routed
here and only local schemes pass: a page that reaches for the network fails
the test instead of leaking (or hanging) in the field. Strings from a hostile
dump must come out as text wherever the UI shows them, and ``to_html`` must
reopen on the view the user was looking at, since that is what they shared.
"""

from __future__ import annotations

import base64
import gzip
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from slime_trace_widget import TraceTimeline
from slime_trace_widget.frames import TraceFrames
from slime_trace_widget.sources.dumps import save_dump
from slime_trace_widget.sources.loading import load_frames
from slime_trace_widget.view.page import gzip_parallel
from slime_trace_widget.view.page.snapshot import SNAPSHOT_MAX_CHARS, write_snapshot
from slime_trace_widget.view.payload import EncodedView, encode
from tests.support.browser import VIEWPORT, PageGuard, file_only

pytestmark = pytest.mark.browser

FIXTURES = Path(__file__).parents[1] / "fixtures"
READY = '.stw-root[data-ready="1"]'
#: How long a condition may take to hold in the page (a panel after a drag).
WAIT_MS = 30_000
#: Schemes a snapshot may touch: itself, and the blob it imports its bundle from.

# Hostile strings; each aims at a different way text could turn into markup or code.
IMG = "<img src=x onerror=window.__pwned=1>"
SCRIPT = "</script><script>window.__pwned=2</script>"
JS_URL = "javascript:alert(1)"
CSS = "</style><style>*{display:none}</style>"
BIDI = "\u202eexe.txt\u202c"
NUL = "nul\x00byte"
LONG = "L" * 1_000_000
TITLE = "</title><script>window.__pwned=3</script>"

SPAN_A = f"gen{IMG}"
SPAN_B = f"rm{CSS}"
SPAN_C = JS_URL
EVENT = f"evt{SCRIPT}"
SPAN_ID = f"id{SCRIPT}"
LABEL_0 = f"{IMG} label"
LABEL_1 = f"{BIDI}{NUL}{CSS}"
STATUS = "<b>completed</b>"

# ---------------------------------------------------------------------- data


def _hostile_dump(path: Path) -> Path:
    """Two samples whose every user-controlled string is hostile."""
    t = 1_767_225_600.0

    def record(kind: str, name: str, ts: float, span_id: str | None, attrs: dict,
               trace: str, sample: int) -> dict[str, Any]:
        out = {"type": kind, "name": name, "ts": t + ts, "trace_id": trace,
               "sample_id": sample, "group_id": 0, "attempt": 0, "attrs": attrs}
        if span_id is not None:
            out["span_id"] = span_id
        return out

    first = [
        record("span_start", SPAN_A, 0, SPAN_ID,
               {IMG: JS_URL, "url": JS_URL, "script": SCRIPT}, JS_URL, 0),
        record("span_end", SPAN_A, 5, SPAN_ID,
               {"css": CSS, "bidi": BIDI, "nul": NUL, "long": LONG,
                "nested": {SCRIPT: [IMG, CSS]}}, JS_URL, 0),
        record("event", EVENT, 5.5, None, {"nul": NUL, IMG: BIDI}, JS_URL, 0),
        record("span_start", SPAN_B, 6, "b1", {"bidi": BIDI}, JS_URL, 0),
        record("span_end", SPAN_B, 10, "b1", {}, JS_URL, 0),
    ]
    second = [
        record("span_start", SPAN_C, 1, "c1", {"href": JS_URL}, "t1", 1),
        record("span_end", SPAN_C, 8, "c1", {"style": CSS}, "t1", 1),
    ]
    samples = [
        {"index": 0, "group_index": 0, "status": STATUS, "label": LABEL_0,
         "metadata": {"source": SCRIPT},
         "trace": {"version": 1, "trace_id": JS_URL, "sample_id": 0, "group_id": 0,
                   "attempt": 0, "events": first}},
        {"index": 1, "group_index": 0, "status": "completed", "label": LABEL_1,
         "metadata": {"source": IMG},
         "trace": {"version": 1, "trace_id": "t1", "sample_id": 1, "group_id": 0,
                   "attempt": 0, "events": second}},
    ]
    save_dump(path, samples, rollout_id=1)
    return path


class Snapshot:
    """A snapshot file and the frames and view it was written from."""

    def __init__(self, path: Path, frames: TraceFrames, view: EncodedView) -> None:
        self.path = path
        self.frames = frames
        self.view = view

    def span(self, sample_row: int, name: str) -> int:
        """Payload index of the first span called ``name`` in ``sample_row``."""
        spans = self.frames.span_core.loc[self.view.span_index]
        hits = np.flatnonzero((spans["sample_row"] == sample_row).to_numpy()
                              & (spans["name"] == name).to_numpy())
        assert len(hits), f"no {name!r} in sample {sample_row}"
        return int(hits[0])

    def event(self, name: str) -> int:
        """Payload index of the first event called ``name``."""
        names = self.frames.event_core.loc[self.view.event_index, "name"].to_numpy()
        hits = np.flatnonzero(names == name)
        assert len(hits), f"no event {name!r}"
        return int(hits[0])

    def sample_of(self, column: str, index: int) -> int:
        """Payload sample index of span or event ``index`` (``column``: span_/ev_sample)."""
        return int(np.frombuffer(self.view.payload["buffers"][column], "<u4")[index])


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> Snapshot:
    frames = load_frames(FIXTURES / "small.pt")
    view = encode(frames)
    with pytest.MonkeyPatch.context() as patch:  # blocks deflated in several pieces
        patch.setattr(gzip_parallel, "MIN_PIECE", 4096)
        path = write_snapshot(tmp_path_factory.mktemp("snap") / "small.html", frames, view)
    return Snapshot(path, frames, view)


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Snapshot:
    folder = tmp_path_factory.mktemp("hostile")
    frames = load_frames(_hostile_dump(folder / "hostile.pt"))
    view = encode(frames, title=TITLE)
    return Snapshot(write_snapshot(folder / "hostile.html", frames, view), frames, view)


# ---------------------------------------------------------------------- page helpers


@contextmanager
def opened(browser: Any, path: Path) -> Iterator[Any]:
    """The snapshot open and drawn; the guard is checked when the block ends cleanly."""
    page = browser.new_page(viewport=VIEWPORT, device_scale_factor=1)
    guard = PageGuard(page, file_only)
    url = path.resolve().as_uri()
    try:
        page.goto(url)
        page.wait_for_selector(READY, timeout=20_000)
        yield page
        guard.check()
        assert guard.files == [url], f"file requests besides the page: {guard.files}"
        assert page.locator("#stw-error").inner_text() == ""
    finally:
        page.close()


def _debug(page: Any, script: str, arg: Any = None) -> Any:
    """Evaluate ``script`` as ``(debug, arg) => ...`` against ``root.stwDebug``."""
    return page.locator(".stw-root").evaluate(
        f"(el, arg) => ((debug, arg) => {script})(el.stwDebug, arg)", arg)


def _span_rect(page: Any, snap: Snapshot, index: int) -> dict[str, float]:
    """Scroll span ``index``'s row into view and return its client rectangle."""
    sample = snap.sample_of("span_sample", index)
    _debug(page, "debug.scrollToRow(debug.rowOfSample(arg))", sample)
    rect = _debug(page, "debug.spanRect(arg)", index)
    assert rect, f"span {index} is not on screen"
    return rect


def _click_span(page: Any, snap: Snapshot, index: int) -> None:
    rect = _span_rect(page, snap, index)
    page.mouse.click(rect["x"] + min(rect["w"] / 2, 20), rect["y"] + rect["h"] / 2)


def _click_event(page: Any, snap: Snapshot, index: int) -> None:
    sample = snap.sample_of("ev_sample", index)
    _debug(page, "debug.scrollToRow(debug.rowOfSample(arg))", sample)
    rect = _debug(page, "debug.eventRect(arg)", index)
    assert rect, f"event {index} is not on screen"
    page.mouse.click(rect["x"] + rect["w"] / 2, rect["y"] + rect["h"] / 2)


def _details_title(page: Any) -> Any:
    return page.locator(".stw-details .stw-panel-title")


def _inlined_block(html: str, block: str) -> str:
    match = re.search(rf'<script type="text/plain" id="stw-{block}">(.*?)</script>', html, re.S)
    assert match, f"no {block} block in the page"
    return match.group(1)


# ---------------------------------------------------------------------- tests


def test_small_snapshot_works_offline(chromium: Any, small: Snapshot) -> None:
    target = small.span(0, "sglang_generate")
    span = small.frames.span_core.loc[small.view.span_index[target]]
    with opened(chromium, small.path) as page:
        assert page.locator(".stw-root").get_attribute("data-rows") == "8"
        _click_span(page, small, target)
        details = page.locator(".stw-details")
        details.get_by_text("prompt_tokens").first.wait_for(timeout=10_000)
        text = details.inner_text()
        assert "sglang_generate" in _details_title(page).inner_text()
        assert span["span_id"] in text
        # Every attribute came from the data embedded in the page (there is no kernel).
        start_attrs, end_attrs = small.frames.span_attrs([span.name])
        for attrs in (*start_attrs, *end_attrs):
            for key, value in (attrs or {}).items():
                assert key in text
                if isinstance(value, (int, str)):
                    assert str(value) in text
        assert _debug(page, "debug.state().selected")["index"] == target


def test_hostile_snapshot_shows_text_not_markup(chromium: Any, hostile: Snapshot) -> None:
    span_a = hostile.span(0, SPAN_A)
    with opened(chromium, hostile.path) as page:
        root = page.locator(".stw-root")
        assert root.get_attribute("data-rows") == "2"
        assert page.title() == TITLE
        legend = page.locator(".stw-legend").inner_text()
        for name in (SPAN_A, SPAN_B, SPAN_C, EVENT):
            assert name in legend

        # Tooltip over the span, then over its row label (label and source).
        rect = _span_rect(page, hostile, span_a)
        page.mouse.move(rect["x"] + min(rect["w"] / 2, 20), rect["y"] + rect["h"] / 2)
        tooltip = page.locator(".stw-tooltip")
        tooltip.wait_for(state="visible", timeout=30_000)
        assert SPAN_A in tooltip.inner_text()
        canvas = page.locator(".stw-canvas").bounding_box()
        page.mouse.move(canvas["x"] + 8, rect["y"] + rect["h"] / 2)
        page.wait_for_function(
            "(label) => document.querySelector('.stw-tooltip')?.innerText.includes(label)",
            arg=LABEL_0, timeout=30_000)
        assert SCRIPT in tooltip.inner_text()

        # Details panel: every hostile field of the span and its sample, as text.
        _click_span(page, hostile, span_a)
        details = page.locator(".stw-details")
        details.get_by_text("show all").first.wait_for(timeout=10_000)
        assert _details_title(page).inner_text() == SPAN_A
        text = details.inner_text()
        for value in (IMG, JS_URL, SCRIPT, CSS, LABEL_0, STATUS, SPAN_ID, BIDI, NUL):
            assert value in text, repr(value)

        # The 1 MB value: cut to the snapshot limit, shown short with a control to expand.
        marker = f"[truncated {len(LONG) - SNAPSHOT_MAX_CHARS} chars]"
        long_value = details.locator(".stw-v-str", has=page.locator("button.stw-link"))
        assert long_value.count() == 1
        assert "L" * 300 + "…" in long_value.inner_text()
        assert "L" * 301 not in long_value.inner_text()
        long_value.locator("button").click()
        expanded = long_value.inner_text()
        assert "L" * SNAPSHOT_MAX_CHARS in expanded and marker in expanded
        assert "L" * (SNAPSHOT_MAX_CHARS + 1) not in expanded
        assert long_value.locator("button").inner_text() == "show less"

        # An instant event with hostile name and attributes.
        _click_event(page, hostile, hostile.event(EVENT))
        page.wait_for_function(
            "(name) => document.querySelector('.stw-details .stw-panel-title')"
            "?.innerText === name", arg=EVENT, timeout=10_000)
        details.get_by_text(IMG).first.wait_for(timeout=10_000)
        assert NUL in details.inner_text() and BIDI in details.inner_text()

        # Nothing ran, nothing became an element, nothing was hidden.
        assert page.evaluate("() => window.__pwned") is None
        assert root.locator("img, script, style, iframe, a[href], svg").count() == 0
        assert page.evaluate("() => document.scripts.length") == 4
        assert page.evaluate("() => document.images.length") == 0
        assert page.evaluate("() => document.querySelectorAll('style').length") == 2
        assert root.is_visible() and details.is_visible()

        # Still usable: another span in the other row opens its own details.
        _click_span(page, hostile, hostile.span(1, SPAN_C))
        page.wait_for_function(
            "(name) => document.querySelector('.stw-details .stw-panel-title')"
            "?.innerText === name", arg=SPAN_C, timeout=10_000)
        details.get_by_text(CSS).first.wait_for(timeout=10_000)
        assert IMG in details.inner_text()  # the sample's source
        assert page.evaluate("() => window.__pwned") is None


@pytest.mark.parametrize("name", ["small", "hostile"])
def test_snapshot_file_has_no_urls_and_a_sealed_data_block(
        name: str, request: pytest.FixtureRequest) -> None:
    snap: Snapshot = request.getfixturevalue(name)
    html = snap.path.read_text(encoding="utf-8")
    assert "http://" not in html and "https://" not in html
    blocks = [_inlined_block(html, block) for block in ("data", "details")]
    for data in blocks:
        assert "</script" not in data.lower()
        assert re.fullmatch(r"[A-Za-z0-9+/=\s]*", data), "a block is not plain base64"
    # bundle, data, details, boot script: no breakout
    assert html.lower().count("</script") == 4
    block = b"".join(gzip.decompress(base64.b64decode(data)) for data in blocks)
    if name == "hostile":
        # The strings are really in there, so the checks above are not vacuous.
        for value in (IMG, SCRIPT, CSS, JS_URL):
            assert value.encode() in block
        assert TITLE not in html and "&lt;/title&gt;" in html


def test_a_snapshot_restores_its_scroll_position(chromium: Any, tmp_path: Path) -> None:
    """``view_state.scroll_top`` comes back where it was: the browser's scroll anchoring
    moved it down by the height the rows grew after it was set (200 read as 610)."""
    from slime_trace_widget.demo import write_demo_dump

    tl = TraceTimeline.from_dump(write_demo_dump(tmp_path / "rollout_0.pt", n_samples=128))
    for scroll_top in (200, 1000):
        tl.view_state = {"scroll_top": scroll_top}
        with opened(chromium, tl.to_html(tmp_path / f"scrolled_{scroll_top}.html")) as page:
            # two frames after the first paint: the rows' height is final, and any
            # anchoring adjustment has been made
            page.evaluate("() => new Promise((done) => requestAnimationFrame("
                          "() => requestAnimationFrame(done)))")
            assert _debug(page, "debug.state()")["scrollTop"] == scroll_top


def test_the_range_summary_s_numbers_fit_their_cells(chromium: Any, tmp_path: Path) -> None:
    """Shift-drag across the timeline: the range summary's figures ("55m 59.8s") ran into
    each other when each number column had a fixed fifth of the panel."""
    from slime_trace_widget.demo import write_demo_dump

    tl = TraceTimeline.from_dump(write_demo_dump(tmp_path / "rollout_0.pt", n_samples=128))
    with opened(chromium, tl.to_html(tmp_path / "range.html")) as page:
        canvas = page.locator(".stw-canvas").bounding_box()
        y = canvas["y"] + canvas["height"] / 3
        page.keyboard.down("Shift")
        page.mouse.move(canvas["x"] + canvas["width"] * 0.3, y)
        page.mouse.down()
        page.mouse.move(canvas["x"] + canvas["width"] * 0.7, y, steps=5)
        page.mouse.up()
        page.keyboard.up("Shift")
        page.wait_for_selector(".stw-range-table tbody tr", timeout=WAIT_MS)
        overflowing = page.evaluate(
            "() => [...document.querySelectorAll('.stw-range-table td.stw-num')]"
            ".filter((cell) => cell.scrollWidth > cell.clientWidth + 0.5)"
            ".map((cell) => cell.textContent)")
        assert page.locator(".stw-range-table tbody tr").count() > 3
        assert overflowing == []


def test_to_html_keeps_the_current_view(chromium: Any, tmp_path: Path) -> None:
    tl = TraceTimeline.from_dump(FIXTURES / "small.pt")
    tl.show(samples=tl.samples.query("sample_index != 4"))
    tl.view_state = {"filter": "deepsearch", "sort": "reward", "desc": True,
                     "lane_height": 24, "show_events": False, "expanded": [5],
                     "attempt_mode": "highlight"}
    tl.view_range = [2.0, 9.5]
    path = tl.to_html(tmp_path / "view.html")

    shown = tl.samples.loc[tl.view.sample_rows]
    matching = shown[shown["source"].str.contains("deepsearch")]
    expected = matching.sort_values("reward", ascending=False).index.tolist()
    payload_rows = list(tl.view.sample_rows)
    with opened(chromium, path) as page:
        assert page.locator(".stw-root").get_attribute("data-rows") == str(len(expected))
        state = _debug(page, "debug.state()")
        assert state["viewStart"] == pytest.approx(2.0, abs=1e-6)
        assert state["viewEnd"] == pytest.approx(9.5, abs=1e-6)
        assert state["filter"] == "deepsearch"
        assert (state["sort"], state["desc"]) == ("reward", True)
        assert state["laneHeight"] == 24
        assert state["showEvents"] is False
        assert state["expanded"] == [5]
        assert state["attemptMode"] == "highlight"
        rows = [_debug(page, "debug.rowOfSample(arg)", payload_rows.index(r)) for r in expected]
        assert rows == list(range(len(expected)))
        header = page.locator(".stw-header")
        assert header.locator(".stw-input").input_value() == "deepsearch"
        assert f"{len(expected)} of 8 samples" in header.inner_text()
