"""bench_render's scripted user: the page scripts that record each step, and the Session
that pans, zooms, holds keys, expands rows, filters and opens the views on one widget.

Each step is recorded on its own: the renderer's frame times (``stwDebug.frameTimes``),
the wall-clock interval of each rAF tick in which the widget painted, and the long
tasks, so ``render_report.py`` can print per-step figures. ``bench_render.py`` sets up
``sys.path`` before importing this module.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from percentiles import pct

from tests.support.browser import VIEWPORT

# Per-step recorder: the renderer's own frame times (stwDebug.frameTimes, the
# paint work of frame()) and the wall-clock interval of each rAF tick, flagged
# when the widget painted during that tick. Event-handler work (relayout on a
# label click or "expand all") happens outside frame(); only the rAF intervals
# and long tasks see it.
STEP_RECORDER = """
(root) => {
  const dbg = root.stwDebug;
  const rec = {running: false};
  window.__stwStep = {
    begin() {
      Object.assign(rec, {running: true, frames0: dbg.frameCount,
                          long0: window.__stwLong.length, intervals: [], painted: []});
      let last = -1;
      let count = dbg.frameCount;
      const tick = (now) => {
        if (!rec.running) return;
        const c = dbg.frameCount;
        if (last >= 0) {
          rec.intervals.push(now - last);
          rec.painted.push(c > count);
        }
        last = now;
        count = c;
        requestAnimationFrame(tick);
      };
      requestAnimationFrame(tick);
    },
    end() {
      rec.running = false;
      const n = dbg.frameCount - rec.frames0;
      const log = dbg.frameTimes();
      return {
        paint: n > 0 ? log.slice(-n) : [],
        lost: Math.max(0, n - log.length),
        raf: rec.intervals.filter((_, i) => rec.painted[i]),
        rafAll: rec.intervals,
        long: window.__stwLong.slice(rec.long0).map((e) => e.dur),
      };
    },
  };
}
"""

# Row labels on screen, top to bottom: (row, client y of the label's top px).
LABEL_ROWS = """
(root, [x, y0, y1]) => {
  const out = [];
  let last = -1;
  for (let y = y0; y < y1; y += 2) {
    const h = root.stwDebug.hitAt(x, y);
    if (h && h.type === "label" && h.row !== last) {
      out.push([h.row, y]);
      last = h.row;
    }
  }
  return out;
}
"""

# The centre of the first payload span drawn at least 4 px wide and inside the
# window (client px), or null.
FIRST_SPAN = """
(root, bottom) => {
  const c = root.stwDebug.visCounts();
  const n = c.hidden + c.shown + c.dimmed;
  for (let i = 0; i < n; i++) {
    const r = root.stwDebug.spanRect(i);
    if (r && r.w >= 4 && r.h >= 3 && r.y + r.h < bottom) {
      const x = r.x + r.w / 2;
      const y = r.y + r.h / 2;
      const h = root.stwDebug.hitAt(x, y);
      if (h && h.type === "span" && h.span === i) return [x, y];
    }
  }
  return null;
}
"""


@dataclass
class Step:
    """What the page recorded during one scripted step."""

    name: str
    paint: list[float]
    raf: list[float]
    long_tasks: list[float]
    lost: int


class Session:
    """The scripted user: one widget on screen, each step recorded on its own."""

    def __init__(self, page: Any, cell: int) -> None:
        self.page = page
        selector = f".jp-Notebook .jp-Cell:nth-child({cell + 1}) .stw-root"
        self.root = page.locator(selector)
        self.handle = self.root.element_handle()
        self.handle.evaluate("el => el.scrollIntoView({block: 'start'})")
        self.handle.evaluate(STEP_RECORDER)
        box = self.root.locator("canvas.stw-canvas").bounding_box()
        # Rows start below the 26 px axis; only what is inside the window takes input.
        self.top = box["y"] + 30
        self.bottom = min(box["y"] + box["height"], VIEWPORT["height"]) - 6
        self.left, self.width, self.height = box["x"], box["width"], box["height"]
        # The label gutter is 120..300 px (and at most 26% of the width): both points are safe.
        self.label_x = self.left + 30
        self.plot_x = self.left + self.width * 0.62
        self.mid_y = (self.top + self.bottom) / 2
        self.steps: list[Step] = []

    # ------------------------------------------------------------ recording

    def record(self, name: str, action: Callable[[], object]) -> None:
        """Run ``action`` as one step, so each gesture gets its own frame statistics."""
        self.page.evaluate("() => window.__stwStep.begin()")
        action()
        time.sleep(0.25)  # let the last frames of the step land
        data = self.page.evaluate("() => window.__stwStep.end()")
        self.steps.append(Step(name, data["paint"], data["raf"], data["long"], data["lost"]))

    def idle_cadence(self) -> float:
        """Median rAF interval with nothing happening (the page's refresh period)."""
        self.page.evaluate("() => window.__stwStep.begin()")
        time.sleep(0.6)
        return pct(self.page.evaluate("() => window.__stwStep.end()")["rafAll"], 0.5)

    def state(self) -> dict[str, Any]:
        """The renderer's own view of itself: checks that a gesture really did something."""
        return self.handle.evaluate("el => el.stwDebug.state()")

    def window_s(self) -> float:
        s = self.state()
        return s["viewEnd"] - s["viewStart"]

    # ------------------------------------------------------------ gestures

    def fit_all(self) -> None:
        self.root.locator("button.stw-btn", has_text="fit all").click()
        time.sleep(0.1)

    def drag(self, dx_per_move: float = 8.0, moves: int = 40) -> None:
        """Pan left and back, one pointermove per Playwright call (each one a frame)."""
        mouse = self.page.mouse
        mouse.move(self.plot_x, self.mid_y)
        mouse.down()
        for i in range(1, moves + 1):
            mouse.move(self.plot_x - i * dx_per_move, self.mid_y)
        for i in range(1, moves + 1):
            mouse.move(self.plot_x - (moves - i) * dx_per_move, self.mid_y)
        mouse.up()

    def wheel(self, notches: int, delta: float = 120.0, x: float | None = None) -> None:
        """Wheel up ``notches`` times (down when negative) at ``x``; over the plot that
        zooms at the pointer, over the labels it scrolls. A 16 ms pause per notch keeps
        the browser from coalescing them, as a hand on a mouse wheel would."""
        mouse = self.page.mouse
        mouse.move(self.plot_x if x is None else x, self.mid_y)
        for _ in range(abs(notches)):
            mouse.wheel(0, -delta if notches > 0 else delta)
            time.sleep(0.016)

    def hold(self, key: str, seconds: float) -> None:
        self.page.keyboard.down(key)
        time.sleep(seconds)
        self.page.keyboard.up(key)

    def set_expand_all(self, on: bool) -> None:
        select = self.root.locator("select.stw-select").filter(
            has=self.page.locator("option[value=expanded]"))
        select.select_option("expanded" if on else "collapsed")

    def label_rows(self) -> list[tuple[int, float]]:
        return [(row, y) for row, y in self.handle.evaluate(
            LABEL_ROWS, [self.label_x, self.top, self.bottom])]

    def expand_labels(self, count: int) -> list[int]:
        """Click the top ``count`` row labels bottom-up (a toggle keeps rows above in place)."""
        rows = self.label_rows()[:count]
        for _, y in reversed(rows):
            self.page.mouse.click(self.label_x, y + 6)
            time.sleep(0.05)
        return [row for row, _ in rows]

    def collapse_labels(self, rows: list[int]) -> None:
        """Click these rows' labels top-down, finding each again after the one above shrank."""
        for row in sorted(rows):
            y = dict(self.label_rows()).get(row)
            if y is not None:
                self.page.mouse.click(self.label_x, y + 6)
                time.sleep(0.05)

    # ------------------------------------------------------------ the script

    def run_script(self) -> dict[str, Any]:
        """Every step of the session; returns counts that say the steps did something."""
        notes: dict[str, Any] = {}
        self.fit_all()
        notes["full_window_s"] = self.window_s()
        self.record("drag pans (fit all)", lambda: (self.drag(), self.drag(12.0, 30)))
        self.record("wheel zoom at pointer", lambda: (self.wheel(15), self.wheel(-15)))

        def keys() -> None:
            self.page.mouse.move(self.plot_x, self.mid_y)
            self.handle.evaluate("el => el.focus({preventScroll: true})")
            self.hold("w", 0.6)
            self.hold("d", 0.4)
            self.hold("a", 0.4)
            self.hold("s", 0.6)

        self.record("W/S/A/D held", keys)
        self.fit_all()

        def expand_all() -> None:
            self.set_expand_all(True)
            time.sleep(0.1)
            self.drag()
            self.wheel(8)
            self.wheel(-8)
            self.set_expand_all(False)

        self.record("expand all, pan, zoom, collapse", expand_all)

        def expand_rows() -> None:
            rows = self.expand_labels(8)
            notes["labels_clicked"] = len(rows)
            notes["rows_expanded"] = len(self.state()["expanded"])
            self.drag(6.0, 30)
            self.collapse_labels(rows)
            notes["rows_expanded_after"] = len(self.state()["expanded"])

        self.record("expand single rows (labels)", expand_rows)

        def scroll() -> None:
            self.wheel(-30, 300.0, x=self.label_x)
            notes["scrolled_px"] = self.state()["scrollTop"]
            self.wheel(15, 300.0, x=self.label_x)

        self.record("scroll rows (wheel on labels)", scroll)
        self.fit_all()

        def deep_zoom() -> None:
            notches = 0
            while self.window_s() > 1.0 and notches < 120:
                self.wheel(1)
                notches += 1
            notes["deep_window_s"] = self.window_s()
            notes["zoom_in_notches"] = notches
            self.drag(6.0, 30)
            while self.window_s() < notes["full_window_s"] and notches < 240:
                self.wheel(-1)
                notches += 1

        self.record("zoom to 1 s window and out", deep_zoom)
        notes["back_out_window_s"] = self.window_s()
        self.fit_all()
        self.under_views(notes)
        return notes

    def under_views(self, notes: dict[str, Any]) -> None:
        """Pan and zoom with each of the views' masks on: the legend highlight, a query
        that hides (answered in the page, then one the kernel answers), the critical
        path's focus and the flame view open. The masks are computed when they change,
        so frames should cost what they cost without them."""
        def pan_and_zoom() -> None:
            self.drag()
            self.wheel(8)
            self.wheel(-8)

        all_rows = int(self.root.get_attribute("data-rows"))
        legend = self.root.locator("button.stw-legend-item").first
        legend.click()
        self.realign()
        notes["highlight_dimmed"] = self.vis_counts()["dimmed"]
        self.record("legend highlight on: pan, zoom", pan_and_zoom)
        legend.click()

        for label, query in (("query (page)", "name:tool_execution duration>1s"),
                             ("query (kernel)", "tool=python name:tool_call")):
            notes[f"{label} apply_ms"] = self.set_filter(query, all_rows) * 1000
            notes[f"{label} rows"] = int(self.root.get_attribute("data-rows"))
            notes[f"{label} hidden"] = self.vis_counts()["hidden"]
            self.record(f"{label} on: pan, zoom", pan_and_zoom)
        self.set_filter("", None)

        self.select_a_span()
        self.toggle("critical path")
        self.page.wait_for_function("el => el.stwDebug.critical().path.length > 0",
                                    arg=self.handle, timeout=60_000)
        notes["critical_spans"] = len(self.handle.evaluate("el => el.stwDebug.critical().path"))
        notes["critical_dimmed"] = self.vis_counts()["dimmed"]
        self.record("critical path on: pan, zoom", pan_and_zoom)
        self.toggle("critical path")

        started = time.perf_counter()
        self.toggle("flame")
        self.page.wait_for_function("el => el.stwDebug.flame().frames.length > 0",
                                    arg=self.handle, timeout=120_000)
        notes["flame_open_ms"] = (time.perf_counter() - started) * 1000
        notes["flame_frames"] = len(self.handle.evaluate("el => el.stwDebug.flame().frames"))
        self.record("flame view open: pan, zoom", pan_and_zoom)
        self.toggle("flame")

    def vis_counts(self) -> dict[str, int]:
        return self.handle.evaluate("el => el.stwDebug.visCounts()")

    def set_filter(self, query: str, all_rows: int | None) -> float:
        """Type ``query`` in the filter box and press Enter; returns the seconds until the
        rows changed (from ``all_rows``; None: back to all) and the query settled."""
        box = self.root.locator("input.stw-input")
        box.fill(query)
        started = time.perf_counter()
        box.press("Enter")
        self.page.wait_for_function(
            """([el, all]) => el.dataset.query === "idle" &&
                 (all === null || Number(el.dataset.rows) !== all)""",
            arg=[self.handle, all_rows], timeout=120_000)
        seconds = time.perf_counter() - started
        self.handle.evaluate("el => el.focus({preventScroll: true})")
        self.realign()
        return seconds

    def realign(self) -> None:
        """Scroll the widget back to where the session measured it (focusing the filter
        box or a toolbar control can scroll the notebook)."""
        self.handle.evaluate("el => el.scrollIntoView({block: 'start'})")

    def toggle(self, label: str) -> None:
        self.root.locator("label.stw-check", has_text=label).locator("input").click()
        self.realign()

    def select_a_span(self) -> None:
        """Click the first span drawn wide enough to hit, inside the window."""
        self.realign()
        point = self.handle.evaluate(FIRST_SPAN, VIEWPORT["height"] - 6)
        if point is None:
            raise RuntimeError("no span drawn in the window to select")
        self.page.mouse.click(*point)
        self.page.wait_for_function("el => el.stwDebug.selectionRect() !== null",
                                    arg=self.handle, timeout=60_000)
