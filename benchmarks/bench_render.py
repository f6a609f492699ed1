"""Benchmark: the timeline widget in real JupyterLab, driven by Playwright.

Prints, for a demo dump of about 250k spans and one of 11,000 samples (about
1M spans in the frames, of which ~550k reach the payload: the PD detail spans
travel as segments; ``--big-samples 20000`` gives ~1M payload spans), the
payload size per span, the time to first paint and frame times during a
scripted session (drag pans, wheel zooms, held W/S/A/D, expand
all, label clicks, row scrolling, a zoom down to a 1 s window and back out).
Debian's Chromium runs headless at a fixed 1600x900 viewport and device scale
factor 1, so runs compare. Figures only: nothing here asserts a time.

    python benchmarks/bench_render.py               # both sizes
    python benchmarks/bench_render.py 250k          # one size
    python benchmarks/bench_render.py 1m --big-samples 20000

Time to first paint is measured in the page (``performance.now()``), from the
display cell's ``execute_request`` leaving the websocket and from the widget's
output entering the cell's output area, to ``data-ready="1"`` on the root. The
payload is not part of it: the widget's comm opens, carrying every buffer,
while ``TraceTimeline.from_dump`` runs in the cell before; that transfer and the
kernel's own from_dump time are printed on their own lines. Their sum with the
first paint is the path from the dump to the drawn widget, printed against the
dump's unpickler floor taken in the same run (just before and after the case).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).parent))

from demo_dumps import OUT, SHAPES, demo_dump
from percentiles import pct, triple

from slime_trace_widget.demo import write_demo_dump
from tests.support.browser import VIEWPORT, JupyterLab, NotebookPage, launch_chromium

FIRST_PAINT_TARGET_MS = 1000.0
FRAME_P95_TARGET_MS = 16.0
#: From a dump's path to the drawn widget, at most this many times the unpickler's floor.
PATH_OF_FLOOR_TARGET = 2.0
BYTES_PER_SPAN_TARGET = 24.0
DISPLAY_CELL = 1

# Runs in every document before JupyterLab's scripts: timestamps each kernel
# websocket message (type read from its header, size in bytes) and every long task.
PROBES = """
(() => {
  const wsLog = [];
  const longTasks = [];
  window.__stwWs = wsLog;
  window.__stwLong = longTasks;
  const decoder = new TextDecoder("latin1");
  const typeOf = (data) => {
    let head = "";
    if (typeof data === "string") head = data.slice(0, 4096);
    else if (data instanceof ArrayBuffer)
      head = decoder.decode(new Uint8Array(data, 0, Math.min(4096, data.byteLength)));
    else if (ArrayBuffer.isView(data))
      head = decoder.decode(new Uint8Array(data.buffer, data.byteOffset,
                                           Math.min(4096, data.byteLength)));
    const m = /"msg_type"\\s*:\\s*"(\\w+)"/.exec(head);
    return m ? m[1] : "?";
  };
  const sizeOf = (data) =>
    typeof data === "string" ? data.length : (data.byteLength ?? data.size ?? 0);
  const Native = window.WebSocket;
  class ProbedWebSocket extends Native {
    constructor(...args) {
      super(...args);
      this.addEventListener("message", (e) => wsLog.push(
        {t: performance.now(), dir: "in", type: typeOf(e.data), bytes: sizeOf(e.data)}));
    }
    send(data) {
      wsLog.push({t: performance.now(), dir: "out", type: typeOf(data), bytes: sizeOf(data)});
      super.send(data);
    }
  }
  window.WebSocket = ProbedWebSocket;
  new PerformanceObserver((list) => {
    for (const e of list.getEntries()) longTasks.push({start: e.startTime, dur: e.duration});
  }).observe({type: "longtask"});
})();
"""

# Watches one cell: when its output area gets a child, when .stw-root appears and
# when data-ready turns "1" (the observer runs in the same task as the frame that set it).
WATCH_FIRST_PAINT = """
(cell) => {
  const rec = {out: null, root: null, ready: null};
  window.__stwFirstPaint = rec;
  const obs = new MutationObserver((mutations) => {
    const now = performance.now();
    for (const m of mutations) {
      if (m.type === "childList") {
        for (const n of m.addedNodes) {
          if (!(n instanceof Element)) continue;
          if (rec.out === null && (n.matches(".jp-OutputArea-child")
                                   || n.querySelector(".jp-OutputArea-child"))) rec.out = now;
          if (rec.root === null && (n.matches(".stw-root") || n.querySelector(".stw-root")))
            rec.root = now;
        }
      } else if (rec.ready === null && m.target.getAttribute("data-ready") === "1") {
        rec.ready = now;
        obs.disconnect();
      }
    }
  });
  obs.observe(cell, {subtree: true, childList: true, attributes: true,
                     attributeFilter: ["data-ready"]});
}
"""

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

FROM_DUMP_CELL = """\
import json, time
from slime_trace_widget import TraceTimeline
_start = time.perf_counter()
tl = TraceTimeline.from_dump({path!r})
_seconds = time.perf_counter() - _start
_end_epoch_ms = time.time() * 1000
_buffers = tl.view.payload["buffers"]
_core = tl.frames.span_core
print("STATS " + json.dumps({{
    "from_dump_s": _seconds,
    "end_epoch_ms": _end_epoch_ms,
    "group_bytes": {{g: sum(len(v) for k, v in _buffers.items() if k.startswith(g + "_"))
                    for g in ("smp", "span", "seg", "ev")}},
    "n_bytes": sum(len(b) for b in tl.view.payload["buffers"].values()),
    "meta_bytes": len(json.dumps(tl.view.payload["meta"])),
    "samples": len(tl.view.sample_rows),
    "spans": len(tl.view.span_index),
    "segments": len(_buffers["seg_start"]) // 4,
    "events": len(tl.view.event_index),
    "frame_spans": len(_core),
    "virtual": int(_core["virtual"].sum()),
    "pd_detail": int(_core["pd_detail"].sum()),
}}))
"""


@dataclass
class Case:
    """One benchmark size: a name, the dump and whether each target applies to it."""

    key: str
    path: Path
    first_paint_target: bool
    frame_target: bool


@dataclass
class Step:
    """What the page recorded during one scripted step."""

    name: str
    paint: list[float]
    raf: list[float]
    long_tasks: list[float]
    lost: int


def big_dump(n_samples: int, seed: int = 7) -> Path:
    """The largest demo dump, cached in benchmarks/out/ (about a minute to write once);
    of 20,000 samples it is demo_dumps' ``20k_samples`` shape, the very file
    bench_pipeline times, not a second copy of 387 MB."""
    if SHAPES["20k_samples"] == (n_samples, {}):
        return demo_dump("20k_samples", seed=seed)
    path = OUT / f"demo_{n_samples}_samples_seed{seed}.pt"
    if not path.exists():
        OUT.mkdir(parents=True, exist_ok=True)
        write_demo_dump(path, n_samples=n_samples, seed=seed)
    return path


def verdict(ok: bool) -> str:
    """A word a reader's eye finds next to the target (MISS in capitals)."""
    return "ok" if ok else "MISS"


def shutdown_kernels(lab: JupyterLab) -> None:
    """Delete every session of the private server, so a finished case frees its kernel."""
    base = f"{lab.url}/api/sessions"
    with urllib.request.urlopen(f"{base}?token={lab.token}", timeout=10) as response:
        sessions = json.load(response)
    for session in sessions:
        request = urllib.request.Request(f"{base}/{session['id']}?token={lab.token}",
                                         method="DELETE")
        urllib.request.urlopen(request, timeout=30).close()


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


def open_widget(lab: JupyterLab, browser: Any, case: Case) -> tuple[Any, dict[str, Any]]:
    """Run the from_dump cell, then the display cell; returns the page and the timings."""
    url = lab.write_notebook(f"bench_{case.key}.ipynb",
                             [FROM_DUMP_CELL.format(path=str(case.path)), "tl"])
    # A workspace per case: the default one would reopen the previous case's notebook,
    # and NotebookPage's selectors would then find its cells first.
    url = url.replace("/lab/tree/", f"/lab/workspaces/bench-{case.key}/tree/")
    page = browser.new_page(viewport=VIEWPORT, device_scale_factor=1)
    page.add_init_script(PROBES)
    errors: list[str] = []  # keeps filling during the interactions; printed at the end
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    notebook = NotebookPage(page, timeout_ms=240_000)
    notebook.open(url)

    mark = page.evaluate("() => window.__stwWs.length")
    notebook.run_cell(0)
    text = notebook.output_text(0)
    stats_line = next((line for line in text.splitlines() if line.startswith("STATS ")), None)
    if stats_line is None:
        raise RuntimeError(f"from_dump cell failed:\n{text[-3000:]}")
    stats = json.loads(stats_line[len("STATS "):])
    ws = page.evaluate("(k) => window.__stwWs.slice(k)", mark)
    sent = next(m for m in ws if m["dir"] == "out" and m["type"] == "execute_request")
    comm = max((m for m in ws if m["dir"] == "in" and m["type"] == "comm_open"),
               key=lambda m: m["bytes"], default=None)
    stats["comm_open_s"] = (comm["t"] - sent["t"]) / 1000 if comm else math.nan
    stats["comm_open_bytes"] = comm["bytes"] if comm else 0
    # Same machine, same clock: the kernel's epoch time against the page's time origin.
    origin = page.evaluate("() => performance.timeOrigin")
    stats["transfer_ms"] = origin + comm["t"] - stats["end_epoch_ms"] if comm else math.nan

    cell = notebook.cell(DISPLAY_CELL).element_handle()
    cell.evaluate(WATCH_FIRST_PAINT)
    mark = page.evaluate("() => window.__stwWs.length")
    notebook.run_cell(DISPLAY_CELL)
    ready = f".jp-Notebook .jp-Cell:nth-child({DISPLAY_CELL + 1}) .stw-root[data-ready='1']"
    try:
        page.wait_for_selector(ready, timeout=240_000)
    except Exception as exc:
        raise RuntimeError(f"widget never painted; page errors: {errors[:5]}; output: "
                           f"{notebook.output_text(DISPLAY_CELL)[-2000:]}") from exc
    page.wait_for_function("() => window.__stwFirstPaint.ready !== null")
    seen = page.evaluate("() => window.__stwFirstPaint")
    ws = page.evaluate("(k) => window.__stwWs.slice(k)", mark)
    sent = next(m for m in ws if m["dir"] == "out" and m["type"] == "execute_request")
    root = page.locator(ready)
    stats.update(
        fp_exec_ms=seen["ready"] - sent["t"],
        fp_output_ms=seen["ready"] - seen["out"] if seen["out"] is not None else math.nan,
        fp_renderer_ms=root.evaluate("el => el.stwDebug.firstPaintMs"),
        rows=int(root.get_attribute("data-rows")),
        drawn_rows=int(root.get_attribute("data-drawn-rows")),
        errors=errors,
    )
    return page, stats


def report(case: Case, stats: dict[str, Any], session: Session, cadence: float,
           notes: dict[str, Any]) -> None:
    """Print one case's figures with the targets beside them."""
    spans, gb = stats["spans"], stats["group_bytes"]
    real_spans = stats["frame_spans"] - stats["virtual"]
    print(f"\n== {case.key}: {case.path.name}: {stats['samples']:,} samples, "
          f"{spans:,} spans in the payload ({stats['frame_spans']:,} in the frames: "
          f"{stats['virtual']:,} virtual PD, {stats['pd_detail']:,} PD detail spans left out "
          f"and drawn as {stats['segments']:,} segments), {stats['events']:,} events")
    print("payload bytes (binary columns; attributes stay in the kernel)")
    span_b = gb["span"] / spans
    all_b = stats["n_bytes"] / spans
    print(f"  span columns / payload spans       {span_b:6.2f} B/span "
          f"({gb['span'] / 1e6:6.2f} MB)   target <= {BYTES_PER_SPAN_TARGET:.0f}: "
          f"{verdict(span_b <= BYTES_PER_SPAN_TARGET)}")
    print(f"  all columns / payload spans        {all_b:6.2f} B/span "
          f"({stats['n_bytes'] / 1e6:6.2f} MB)   target <= {BYTES_PER_SPAN_TARGET:.0f}: "
          f"{verdict(all_b <= BYTES_PER_SPAN_TARGET)}")
    print("    = spans {:.2f} + PD segments {:.2f} + events {:.2f} + samples {:.2f} B/span".format(
        *(gb[g] / spans for g in ("span", "seg", "ev", "smp"))))
    print(f"  all columns / non-virtual spans of the dump {stats['n_bytes'] / real_spans:6.2f} "
          f"B/span ({real_spans:,}: PD detail spans counted, sent as segments)")
    print(f"  JSON meta (name table, per-sample strings; not above) "
          f"{stats['meta_bytes'] / 1e6:.2f} MB; comm_open message "
          f"{stats['comm_open_bytes'] / 1e6:.2f} MB")

    first_paint = stats["fp_exec_ms"]
    target = (f"target < {FIRST_PAINT_TARGET_MS:.0f} ms: "
              f"{verdict(first_paint < FIRST_PAINT_TARGET_MS)}" if case.first_paint_target else
              f"(the < {FIRST_PAINT_TARGET_MS:.0f} ms target is set at 250k)")
    print("first paint")
    print(f"  browser, display cell execute_request -> data-ready=1    {first_paint:8.0f} ms"
          f"   {target}")
    print(f"  browser, widget enters output area -> data-ready=1       "
          f"{stats['fp_output_ms']:8.0f} ms")
    print(f"  renderer stwDebug.firstPaintMs (render() -> 1st frame)   "
          f"{stats['fp_renderer_ms']:8.0f} ms")
    print("  not part of first paint (the previous cell, before display):")
    print(f"    Python TraceTimeline.from_dump in the kernel           "
          f"{stats['from_dump_s'] * 1000:8.0f} ms   (load + flatten + encode + comm_open send)")
    print(f"    browser, from_dump execute_request -> comm_open in    "
          f"{stats['comm_open_s'] * 1000:8.0f} ms   (imports + from_dump + transfer)")
    print(f"    kernel from_dump returned -> comm_open in the browser "
          f"{stats['transfer_ms']:8.0f} ms   (the payload through jupyter-server's websocket)")
    print(f"  rows {stats['rows']:,}, drawn in the first frame {stats['drawn_rows']}")
    path_s = stats["from_dump_s"] + (stats["transfer_ms"] + first_paint) / 1000
    floor_s = min(stats["floors"])
    ratio = path_s / floor_s
    target = (f"target <= {PATH_OF_FLOOR_TARGET:.0f}x: {verdict(ratio <= PATH_OF_FLOOR_TARGET)}"
              if case.frame_target else f"(the <= {PATH_OF_FLOOR_TARGET:.0f}x target is set at "
                                        "the large size)")
    print(f"path to the drawn widget {path_s:.2f} s (from_dump + kernel to browser + first "
          f"paint); floor {floor_s:.2f} s (C unpickler, gc off: "
          f"{' / '.join(f'{f:.2f}' for f in stats['floors'])} s before / after the case); "
          f"{ratio:.2f}x the floor   {target}")

    print(f"interactions (canvas {session.width:.0f}x{session.height:.0f} CSS px, dpr 1; "
          f"idle rAF cadence {cadence:.1f} ms)")
    print("  paint = stwDebug.frameTimes (frame() work); rAF = wall-clock interval of rAF ticks "
          "in which the widget painted")
    print(f"  {'step':34s}{'frames':>7s}   paint p50 / p95 / max ms   "
          f"rAF p50 / p95 / max ms  >1.5x cadence  long tasks (max ms)")
    for step in session.steps:
        slow = sum(1 for r in step.raf if r > 1.5 * cadence)
        longest = f"{max(step.long_tasks):.0f}" if step.long_tasks else "-"
        lost = f" ({step.lost} not in the 600-frame log)" if step.lost else ""
        print(f"  {step.name:34s}{len(step.paint):7d}   {triple(step.paint)}    "
              f"{triple(step.raf)}  {slow:8d}      {len(step.long_tasks):3d} ({longest}){lost}")
    paint = [x for s in session.steps for x in s.paint]
    raf = [x for s in session.steps for x in s.raf]
    p95 = pct(paint, 0.95)
    target = (f"target p95 < {FRAME_P95_TARGET_MS:.0f} ms: {verdict(p95 < FRAME_P95_TARGET_MS)}"
              if case.frame_target else
              f"(the p95 < {FRAME_P95_TARGET_MS:.0f} ms target is set at the large size)")
    print(f"  {'all steps':34s}{len(paint):7d}   {triple(paint)}    {triple(raf)}   {target}")
    print("  checks: " + ", ".join(f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}"
                                   for k, v in notes.items()))
    print(f"  page errors and console errors: {stats['errors'] or 'none'}")
    print(f"  load average (1 min) before / after the case: {stats['load_before']:.2f} / "
          f"{stats['load_after']:.2f} on {os.cpu_count()} CPUs (other processes skew timings)")


def run_case(lab: JupyterLab, browser: Any, case: Case) -> None:
    """One size in a fresh page and kernel, freed before the next size starts; the
    dump's unpickler floor is taken just before and just after it (the best counts),
    so the path's ratio to it compares figures of one run."""
    load_before = os.getloadavg()[0]
    floors = [unpickler_floor(case.path)]
    page, stats = open_widget(lab, browser, case)
    try:
        session = Session(page, DISPLAY_CELL)
        cadence = session.idle_cadence()
        notes = session.run_script()
    finally:
        page.close()
        shutdown_kernels(lab)
    floors.append(unpickler_floor(case.path))
    stats.update(load_before=load_before, load_after=os.getloadavg()[0], floors=floors)
    report(case, stats, session, cadence, notes)


def unpickler_floor(dump: Path) -> float:
    """Seconds Python's C unpickler takes on the dump's data.pkl, garbage collector off,
    in a fresh process (``bench_pipeline.py``'s floor, the compare tool's)."""
    child = subprocess.run([sys.executable, str(Path(__file__).with_name("bench_pipeline.py")),
                            "--child", "floor", str(dump)],
                           capture_output=True, text=True, timeout=600, check=True)
    return float(json.loads(child.stdout.strip().splitlines()[-1])["seconds"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    # No argparse choices: Python 3.11 checks an empty nargs="*" list against them.
    parser.add_argument("sizes", nargs="*", help="250k and/or 1m (default: both)")
    parser.add_argument("--big-samples", type=int, default=11_000,
                        help="demo samples of the large dump (11,000 give ~550k payload spans)")
    args = parser.parse_args(argv)
    sizes = args.sizes or ["250k", "1m"]
    if unknown := set(sizes) - {"250k", "1m"}:
        parser.error(f"unknown sizes {sorted(unknown)}; choose 250k and/or 1m")
    cases = {
        "250k": Case("250k", demo_dump("250k_spans"), first_paint_target=True,
                     frame_target=False),
        "1m": Case("1m", big_dump(args.big_samples), first_paint_target=False,
                   frame_target=True),
    }
    from playwright.sync_api import sync_playwright

    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="stw-bench-render-") as temp:
        lab = JupyterLab(Path(temp))
        lab.start()
        try:
            with sync_playwright() as playwright:
                browser = launch_chromium(playwright)
                print(f"Chromium {browser.version} headless, viewport {VIEWPORT['width']}x"
                      f"{VIEWPORT['height']}, device scale factor 1")
                try:
                    for size in sizes:
                        run_case(lab, browser, cases[size])
                finally:
                    browser.close()
        finally:
            lab.stop()
    print(f"\ntotal {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
