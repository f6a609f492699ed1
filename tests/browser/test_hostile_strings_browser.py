"""Hostile strings from a dump, through all three surfaces, in headless Chromium.

A dump is written by whatever code ran the rollout, so every string in it
(span and event names, attribute keys and values, labels, sources, statuses,
ids) may be markup, a script breakout, a template, a bidi trick, control
characters, a lone surrogate or ten megabytes. One dump carries the table
below in every one of those places; the notebook widget in real JupyterLab,
the snapshot opened from ``file://`` and the page the CLI serves must each show
it as text: nothing runs, no element is made from it, no request leaves the
page's origin, long strings are cut visibly, and the page keeps working.

tests/browser/test_snapshot_browser.py covers a first set of strings on the snapshot
alone; this file runs a larger table through the same interactions on every
surface (clicks, tooltips, legend, filter box, pans).
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from slime_trace_widget.frames import TraceFrames
from slime_trace_widget.sources.dumps import save_dump
from slime_trace_widget.sources.loading import load_dump, load_frames
from slime_trace_widget.values import MAX_STRING_CHARS, truncate
from slime_trace_widget.view.page.snapshot import SNAPSHOT_MAX_CHARS, write_snapshot
from slime_trace_widget.view.payload import NAME_CHARS, EncodedView, encode
from tests.support.browser import (
    VIEWPORT,
    JupyterLab,
    NotebookPage,
    PageGuard,
    file_only,
    free_port,
    origin_of,
)
from tests.support.processes import line_starting

pytestmark = pytest.mark.browser

# ---------------------------------------------------------------------- the table

#: Ten megabytes: far past every limit (names 1,000 chars, details 100,000, snapshot 20,000).
HUGE = 10_000_000

#: Named hostile strings; each aims at a different way text could become code or markup.
#: Lone surrogates are written the way they arrive from JSON (``"\\ud800"`` escapes),
#: which pickle then keeps as they are.
HOSTILE: dict[str, str] = {
    "img_onerror": "<img src=http://evil.invalid/i.png onerror=window.__pwned='img'>",
    "svg_onload": "<svg onload=window.__pwned='svg'>",
    "iframe_srcdoc": "<iframe srcdoc=\"<script>parent.__pwned='iframe'</script>\">",
    "script_breakout": "</script><script>window.__pwned='script'</script>",
    "javascript_url": "javascript:window.__pwned='url'",
    "anchor_href": "<a href=\"javascript:window.__pwned='a'\">open</a>",
    "style_breakout": "</style><style>*{display:none!important}</style>",
    "title_breakout": "</title><script>window.__pwned='title'</script>",
    "css_import": "<style>@import 'http://evil.invalid/x.css';</style>",
    "template_literal": "${window.__pwned='template'}",
    "mustache": "{{7*7}}{{constructor.constructor('window.__pwned=1')()}}",
    "format_string": "%s%n%x{0}{__class__}",
    "bidi_override": "\u202etxt.exe\u202c",
    "bidi_isolate": "\u2066\u2067isolate\u2069\u2069",
    "nul": "nul\x00byte",
    "c0_controls": "c0" + "".join(map(chr, range(1, 32))) + "\x7f",
    "proto_key": "__proto__",
    "constructor_key": "constructor",
    "lone_high_surrogate": json.loads('"high\\ud800"'),
    "lone_low_surrogate": json.loads('"low\\udfff"'),
    "huge_attr_value": "V" * HUGE,
    "huge_span_name": "N" * HUGE,
}
HOSTILE_COUNT = len(HOSTILE)

LONE_SURROGATES = ("lone_high_surrogate", "lone_low_surrogate")
PROTOTYPE_NAMES = ("proto_key", "constructor_key")
HUGE_STRINGS = ("huge_attr_value", "huge_span_name")
#: The strings every surface is driven with, one sample each (see ``write_hostile_dump``).
#: Lone surrogates arrive as U+FFFD rather than as themselves, so they have their own
#: test (``test_lone_surrogates_reach_every_surface``); the huge strings get a sample
#: of their own.
SHOWN = {key: value for key, value in HOSTILE.items()
         if key not in LONE_SURROGATES + HUGE_STRINGS}
HUGE_NAME = HOSTILE["huge_span_name"]
HUGE_VALUE = HOSTILE["huge_attr_value"]
#: The widget's title (the CLI's title is the dump's file name, which has no "/").
TITLE = HOSTILE["title_breakout"]
#: What is typed into the filter box.
FILTER = HOSTILE["svg_onload"]
T0 = 1_767_225_600.0
#: Tall enough that the whole widget fits below JupyterLab's toolbars, so that every row
#: a test scrolls to is on screen for the mouse.
WINDOW = {**VIEWPORT, "height": 1400}


def _sample(row: int, text: str, *, index: Any, attrs: dict[str, Any],
            event: bool = True) -> dict[str, Any]:
    """A sample whose label, source, status, trace id, span and event all carry ``text``."""
    head = {"trace_id": text, "sample_id": index, "group_id": 0, "attempt": 0}
    records = [
        {"type": "span_start", "name": text, "ts": T0, "span_id": text, "attrs": attrs, **head},
        {"type": "span_end", "name": text, "ts": T0 + 4, "span_id": text,
         "attrs": {"value": text, "__proto__": {"polluted": text}}, **head},
    ]
    if event:
        records.append({"type": "event", "name": text, "ts": T0 + 6, "attrs": {text: row},
                        **head})
    return {"index": index, "group_index": 0, "status": text, "label": text,
            "metadata": {"source": text}, "reward": 0.5,
            "trace": {"version": 1, **head, "events": records}}


def write_hostile_dump(path: Path, table: dict[str, str]) -> Path:
    """One sample per string of ``table``, then one for the huge strings: its span name
    (and so its label, source, status and ids) is the 10 MB name, its attribute the 10 MB
    value, and its sample id is markup where slime has an int."""
    samples = [_sample(row, text, index=row, attrs={text: text})
               for row, text in enumerate(table.values())]
    samples.append(_sample(len(samples), HUGE_NAME, index=HOSTILE["img_onerror"],
                           attrs={"huge": HUGE_VALUE}, event=False))
    save_dump(path, samples, rollout_id=1)
    return path


# ---------------------------------------------------------------------- the page guard

#: More init script for the guard: records elements of these kinds added inside a
#: ``.stw-root`` (even ones removed again at once).
_WATCH = """
window.__stwMade = [];
const made = "img, svg, iframe, script, style, link, object, embed, a[href], [srcdoc]";
new MutationObserver((records) => {
  for (const record of records) {
    const parent = record.target instanceof Element ? record.target : null;
    if (!parent) continue;
    const inRoot = !!parent.closest(".stw-root");
    for (const node of record.addedNodes) {
      if (!(node instanceof Element)) continue;
      const found = node.matches(made) ? [node] : [];
      found.push(...node.querySelectorAll(made));
      for (const e of found) {
        if (inRoot || e.closest(".stw-root")) window.__stwMade.push(e.outerHTML.slice(0, 200));
      }
    }
  }
}).observe(document, { childList: true, subtree: true });
"""

#: Anything the page holds that could run or load the strings: handler attributes,
#: URLs and styles that mention the marker every payload sets.
_LIVE_ATTRIBUTES = """
() => [...document.querySelectorAll("*")].flatMap((e) => [...e.attributes]
  .filter((a) => /^on|^(src|srcdoc|href|action|formaction|data|style|xlink:href)$/i.test(a.name)
                 && a.value.includes("__pwned"))
  .map((a) => `${e.tagName} ${a.name}=${a.value.slice(0, 80)}`))
"""


def check_text_stayed_text(page: Any) -> None:
    """Fail on any sign that a string of the dump became live in ``page``."""
    assert page.evaluate("() => window.__pwned") is None, "a hostile string ran"
    assert page.evaluate("() => ({}).polluted") is None, "Object.prototype was polluted"
    assert page.evaluate("() => window.__stwMade") == [], "elements made from dump text"
    assert page.evaluate(_LIVE_ATTRIBUTES) == [], "live attributes from dump text"


# ---------------------------------------------------------------------- driving a timeline

#: The details panel as data: its title and every key and value cell, as text.
_DETAILS = """
(root) => {
  const panel = root.querySelector(".stw-details");
  const texts = (sel) => [...panel.querySelectorAll(sel)].map((e) => e.textContent);
  return { title: panel.querySelector(".stw-panel-title")?.textContent ?? null,
           keys: texts(".stw-k"), values: texts(".stw-v"), visible: panel.checkVisibility() };
}
"""

#: True once item ``[kind, index]`` is selected and its details panel (titled ``title``)
#: has its attributes: a span and its event share their name, so the title alone is not enough.
_DETAILS_READY = """
([root, [kind, index, title]]) => {
  const selected = root.stwDebug.state().selected;
  const panel = root.querySelector(".stw-details");
  return selected?.kind === kind && selected?.index === index && !!panel
    && panel.querySelector(".stw-panel-title")?.textContent === title
    && !panel.querySelector(".stw-loading") && panel.querySelectorAll(".stw-k").length > 0;
}
"""

#: True once the tooltip is shown and its text contains ``text``.
_TOOLTIP_SHOWS = """
([root, text]) => {
  const tip = root.querySelector(".stw-tooltip");
  return !!tip && !tip.hidden && tip.checkVisibility() && tip.textContent.includes(text);
}
"""


class Timeline:
    """One rendered timeline on a page, and where each hostile sample's items are."""

    def __init__(self, page: Any, selector: str, frames: TraceFrames, view: EncodedView) -> None:
        self.page = page
        self.root = page.locator(selector).first
        # A renderer that throws leaves an error box instead of a timeline: fail on it at once.
        page.wait_for_selector(f'{selector}[data-ready="1"], {selector}.stw-error',
                               timeout=60_000)
        error = page.locator(f"{selector}.stw-error")
        assert error.count() == 0, error.first.text_content()
        self.root.scroll_into_view_if_needed()
        self.handle = self.root.element_handle()
        self.span_rows = frames.span_core.loc[view.span_index, "sample_row"].to_numpy()
        self.event_rows = frames.event_core.loc[view.event_index, "sample_row"].to_numpy()
        self.span_sample = np.frombuffer(view.payload["buffers"]["span_sample"], "<u4")
        self.event_sample = np.frombuffer(view.payload["buffers"]["ev_sample"], "<u4")

    def debug(self, script: str, arg: Any = None) -> Any:
        """Evaluate ``script`` as ``(debug, arg) => ...`` against ``root.stwDebug``."""
        return self.root.evaluate(f"(el, arg) => ((debug, arg) => {script})(el.stwDebug, arg)",
                                  arg)

    def wait(self, script: str, arg: Any) -> None:
        """Wait for ``script`` (called with ``[root, arg]``) to hold; on a timeout, fail
        with what the timeline shows instead."""
        from playwright.sync_api import TimeoutError as PlaywrightTimeout

        try:
            self.page.wait_for_function(script, arg=[self.handle, arg], timeout=15_000)
        except PlaywrightTimeout:
            shown = self.root.evaluate(
                "(el) => ({selected: el.stwDebug.state().selected,"
                " details: el.querySelector('.stw-details')?.textContent.slice(0, 600),"
                " tooltip: el.querySelector('.stw-tooltip')?.textContent.slice(0, 300)})")
            raise AssertionError(f"waited for {arg!r:.200}; the timeline shows {shown}") from None

    def _item(self, kind: str, row: int) -> tuple[int, float, float]:
        """Payload index of the span or event of sample ``row``, scrolled into view, and
        the client point to hover or click it at."""
        rows, samples = ((self.span_rows, self.span_sample) if kind == "span"
                         else (self.event_rows, self.event_sample))
        index = int(np.flatnonzero(rows == row)[0])
        self.debug("debug.scrollToRow(debug.rowOfSample(arg))", int(samples[index]))
        rect = self.debug(f"debug.{kind}Rect(arg)", index)
        assert rect, f"{kind} of sample row {row} is not on screen"
        return index, rect["x"] + min(rect["w"] / 2, 20), rect["y"] + rect["h"] / 2

    def hover_span(self, row: int, text: str) -> None:
        """The span's tooltip shows ``text``; so does its row label's (source, status, label)."""
        _index, x, y = self._item("span", row)
        self.page.mouse.move(x, y)
        self.wait(_TOOLTIP_SHOWS, text)
        canvas = self.root.locator(".stw-scroll canvas").first.bounding_box()
        self.page.mouse.move(canvas["x"] + 8, y)
        self.wait(_TOOLTIP_SHOWS, text)

    def open(self, kind: str, row: int, title: str) -> dict[str, Any]:
        """Click the span or event of sample ``row``; its details panel once loaded."""
        index, x, y = self._item(kind, row)
        self.page.mouse.click(x, y)
        self.wait(_DETAILS_READY, [kind, index, title])
        return self.root.evaluate(_DETAILS)

    def legend(self) -> dict[str, str]:
        """Visible legend entries: full name (from the item's tooltip) -> the text shown."""
        items = self.root.locator(".stw-legend-item").evaluate_all(
            "(items) => items.filter((b) => b.checkVisibility()).map((b) => [b.title,"
            " b.querySelector('.stw-legend-text').textContent])")
        return {title.rsplit(": ", 1)[0]: shown for title, shown in items}

    def wait_rows(self, rows: int) -> None:
        """Wait until the filter leaves ``rows`` rows."""
        self.wait("([root, n]) => root.dataset.rows === String(n)", rows)

    def frame_times_while_panning(self) -> list[float]:
        """Paint times of the frames drawn during a few drags and wheel zooms (each undone
        by the next, so the view ends where it started)."""
        before = self.debug("debug.frameCount")
        box = self.root.locator(".stw-scroll canvas").first.bounding_box()
        x, y = box["x"] + box["width"] * 0.6, box["y"] + 60
        for direction in (1, -1, 1, -1):
            self.page.mouse.move(x, y)
            self.page.mouse.down()
            self.page.mouse.move(x - direction * 300, y, steps=10)
            self.page.mouse.up()
            self.page.mouse.wheel(0, direction * 240)
            self.page.wait_for_timeout(50)
        drawn = self.debug("debug.frameCount") - before
        assert drawn > 0, "panning drew nothing"
        return self.debug("debug.frameTimes()")[-drawn:]


def exercise(timeline: Timeline, table: dict[str, str], *, surface: str, title: str,
             detail_chars: int) -> None:
    """Every interaction on every sample of a dump from ``write_hostile_dump(table)``;
    the text always comes back as text.

    ``surface`` names the run in the printed frame times, ``title`` is the page's title,
    ``detail_chars`` the surface's cut for attribute values (the kernel's, or the
    snapshot's).
    """
    root = timeline.root
    assert root.get_attribute("data-rows") == str(len(table) + 1)
    assert root.locator(".stw-title").text_content() == title

    cut_name = truncate(HUGE_NAME, NAME_CHARS)
    legend = timeline.legend()
    for text in [*table.values(), cut_name]:
        assert text in legend, f"legend lacks {text[:60]!r}"
        assert legend[text] == (text if len(text) <= 48 else text[:47] + "…")

    for row, (name, text) in enumerate(table.items()):
        timeline.hover_span(row, text)
        span = timeline.open("span", row, text)
        assert span["visible"], name
        # the start attribute's key, and the key under which the end attributes nest
        assert {text, "__proto__", "polluted"} <= set(span["keys"]), name
        # source, status, label, trace id, span id, start value, end value, nested value
        assert span["values"].count(text) == 8, (name, span["values"])
        event = timeline.open("event", row, text)
        assert text in event["keys"] and str(row) in event["values"], name
        assert event["values"].count(text) == 4, (name, event["values"])  # the sample's fields

    # The huge strings: names cut with a marker, values shown short with a control to expand.
    assert cut_name.endswith(f"…[truncated {HUGE - NAME_CHARS} chars]")
    timeline.hover_span(len(table), cut_name)
    timeline.open("span", len(table), cut_name)
    value = root.locator(".stw-details .stw-v-str", has_text="V" * 50)
    assert value.locator("> span").first.text_content() == "V" * 300 + "…"  # TRUNCATE_AT
    value.locator("button").click()
    expanded = truncate(HUGE_VALUE, detail_chars)
    assert expanded.endswith(f"…[truncated {HUGE - detail_chars} chars]")
    assert value.locator("> span").first.text_content() == expanded

    search = root.locator(".stw-input")
    search.click()
    search.press_sequentially(f'"{FILTER}"')  # quoted: one bare word of the query grammar
    assert search.input_value() == f'"{FILTER}"'
    timeline.wait_rows(sum(FILTER.lower() in text.lower() for text in table.values()))
    search.fill("")
    search.press("Enter")
    timeline.wait_rows(len(table) + 1)

    times = timeline.frame_times_while_panning()
    p95 = float(np.percentile(times, 95))
    print(f"{surface}: {len(times)} frames while panning, paint p95 {p95:.1f} ms")
    assert p95 < 100, f"frames got slow: p95 {p95:.1f} ms"

    # Still usable after all that: the first span opens its details again.
    first = next(iter(table.values()))
    assert timeline.open("span", 0, first)["visible"]
    assert root.is_visible()
    assert root.locator("img, svg, iframe, script, style, link, a[href]").count() == 0


# ---------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def dump(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_hostile_dump(tmp_path_factory.mktemp("dump") / "hostile.pt", SHOWN)


@pytest.fixture(scope="module")
def frames(dump: Path) -> TraceFrames:
    return load_frames(dump)


@contextmanager
def guarded(browser: Any, allowed: Callable[[str], bool]) -> Iterator[Any]:
    """A fresh page under a :class:`PageGuard`, checked when the block ends cleanly."""
    page = browser.new_page(viewport=WINDOW, device_scale_factor=1)
    guard = PageGuard(page, allowed, _WATCH)
    try:
        yield page
        guard.check()
        check_text_stayed_text(page)
    finally:
        page.close()


@contextmanager
def cli_server(dump: Path, folder: Path) -> Iterator[str]:
    """``python -m slime_trace_widget`` serving ``dump`` on a free port; the page's URL.

    The page goes to ``folder/out`` (the folder served), the CLI's log beside it.
    """
    port = free_port()
    log = folder / "cli.stderr"
    command = [sys.executable, "-m", "slime_trace_widget", str(dump), "--port", str(port),
               "--out-dir", str(folder / "out")]
    with log.open("w") as stderr, subprocess.Popen(command, stdout=subprocess.PIPE,
                                                   stderr=stderr, text=True) as process:
        try:
            line = line_starting(process, "serving", 120)
            assert line, f"the CLI did not start serving: {log.read_text()[-2000:]}"
            yield line.split(" at ", 1)[1].split("  (Ctrl-C")[0]
        finally:
            process.send_signal(signal.SIGINT)
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()


@contextmanager
def snapshot_exercised(browser: Any, frames: TraceFrames, path: Path,
                       shown: dict[str, str]) -> Iterator[Any]:
    """``frames`` written as a snapshot at ``path``, opened from file:// under the guard,
    with every string of ``shown`` looked at through the timeline."""
    view = encode(frames, title=TITLE)
    write_snapshot(path, frames, view)
    with guarded(browser, file_only) as page:
        page.goto(path.as_uri())
        exercise(Timeline(page, ".stw-root", frames, view), shown, surface="snapshot",
                 title=TITLE, detail_chars=SNAPSHOT_MAX_CHARS)
        yield page


# ---------------------------------------------------------------------- tests


def test_every_hostile_string_is_in_the_dump(tmp_path: Path) -> None:
    """The table is big enough, and pickling keeps every string as it was (surrogates too)."""
    assert HOSTILE_COUNT >= 15
    table = {key: value for key, value in HOSTILE.items() if key not in HUGE_STRINGS}
    samples = load_dump(write_hostile_dump(tmp_path / "all.pt", table)).samples
    for sample, text in zip(samples[:-1], table.values(), strict=True):
        start, end, event = sample["trace"]["events"]
        assert (sample["label"], sample["status"], sample["metadata"]["source"]) == (text,) * 3
        assert (start["name"], start["span_id"], start["trace_id"], event["name"],
                start["attrs"][text], end["attrs"]["value"]) == (text,) * 6
    huge = samples[-1]["trace"]["events"][0]
    assert huge["name"] == HUGE_NAME and huge["attrs"]["huge"] == HUGE_VALUE


def test_snapshot_from_file(chromium: Any, frames: TraceFrames, tmp_path: Path) -> None:
    with snapshot_exercised(chromium, frames, tmp_path / "hostile.html", SHOWN) as page:
        assert page.title() == TITLE


def test_cli_served_page(chromium: Any, dump: Path, frames: TraceFrames, tmp_path: Path) -> None:
    """The CLI titles the page with the dump's file name, so the name is hostile too."""
    named = tmp_path / f"rollout_{HOSTILE['svg_onload']}.pt"
    named.symlink_to(dump)
    with cli_server(named, tmp_path) as url, guarded(chromium, origin_of(url)) as page:
        page.goto(url)
        exercise(Timeline(page, ".stw-root", frames, encode(frames)), SHOWN, surface="cli",
                 title=named.name, detail_chars=SNAPSHOT_MAX_CHARS)
        assert page.title() == named.name


def test_notebook_widget(chromium: Any, lab: JupyterLab, dump: Path, frames: TraceFrames) -> None:
    (lab.notebooks / "hostile.pt").symlink_to(dump)
    url = lab.write_notebook("hostile.ipynb", [
        "from slime_trace_widget import TraceTimeline\n"
        f"tl = TraceTimeline.from_dump('hostile.pt', title={TITLE!r})\ntl",
    ])
    with guarded(chromium, origin_of(lab.url)) as page:
        notebook = NotebookPage(page)
        notebook.open(url)
        cell = notebook.run_cell(0)
        exercise(Timeline(page, ".jp-Notebook .stw-root", frames, encode(frames, title=TITLE)),
                 SHOWN, surface="notebook", title=TITLE, detail_chars=MAX_STRING_CHARS)
        assert cell.locator("[data-mime-type='application/vnd.jupyter.stderr']").count() == 0


def test_prototype_names_render(chromium: Any, tmp_path: Path) -> None:
    """Span names such as ``__proto__`` and ``constructor`` are ordinary text.

    Shown on the snapshot; the widget and the CLI's page run the same bundle.
    """
    table = {key: HOSTILE[key] for key in PROTOTYPE_NAMES}
    frames = load_frames(write_hostile_dump(tmp_path / "prototype.pt", table))
    with snapshot_exercised(chromium, frames, tmp_path / "prototype.html", table):
        pass


def test_lone_surrogates_reach_every_surface(tmp_path: Path) -> None:
    """A lone surrogate has no UTF-8 form, so it must become text (U+FFFD) on the way in
    rather than stop the loader, the snapshot or the kernel's messages to the widget."""
    from ipywidgets.widgets.widget import _remove_buffers
    from jupyter_client.session import json_packer

    from slime_trace_widget import TraceTimeline
    from slime_trace_widget.view.details import span_detail
    from slime_trace_widget.view.page.snapshot import snapshot_html

    table = {key: HOSTILE[key] for key in LONE_SURROGATES}
    path = write_hostile_dump(tmp_path / "surrogates.pt", table)
    stage = "load_frames"
    try:
        frames = load_frames(path)
        view = encode(frames)
        stage = "snapshot_html"
        snapshot_html(frames, view)
        stage = "the widget's state message"
        json_packer(_remove_buffers(TraceTimeline(frames).get_state())[0])
        stage = "the widget's details reply"
        json_packer({"detail": span_detail(frames, int(view.span_index[0]))})
    except UnicodeError as exc:
        pytest.fail(f"lone surrogates stop {stage}: {exc}")
