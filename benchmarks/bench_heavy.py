"""Benchmark: the heavy inputs, from dump to a page that still answers the mouse.

For each heavy input of ``tests/support/heavy_inputs.py`` (one sample of 100,000 trace
records; 5,000 samples, here with full demo traces; a 10 MB attribute string;
200 dumps behind one glob; and 10 MB span/event names, status and source, which
the payload does not cut yet, see ``test_heavy_input.py``) prints:

* time to frames (``load_frames``), to payload (``encode``) and to snapshot;
* peak memory of load + encode, each figure from a fresh subprocess so the cases
  do not pile up: tracemalloc's peak (Python and numpy allocations) and the
  process's VmHWM (everything, torch's own buffers included) above the
  high-water mark it had right after the imports;
* payload bytes: binary columns, JSON meta, and the HTML snapshot file;
* responsiveness: the snapshot (``TraceTimeline.from_frames(frames).to_html``)
  opened from file:// in headless Chromium at the tests' viewport, a scripted
  pan / zoom / expand-all / keyboard sequence, and the renderer's own frame
  times (``stwDebug.frameTimes()``, the paint work of each frame) p50/p95/max.

Figures only, no assertions. About 3 minutes on 2 CPUs;
``STW_HEAVY_LONG=1`` uses the long sizes and takes far longer.

    python benchmarks/bench_heavy.py                  # every case
    python benchmarks/bench_heavy.py huge_string      # some cases, by key
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).parent))

from percentiles import triple  # noqa: E402

from slime_trace_widget import TraceTimeline  # noqa: E402
from slime_trace_widget.sources.loading import load_frames  # noqa: E402
from slime_trace_widget.view.payload import encode  # noqa: E402
from tests.support import heavy_inputs  # noqa: E402
from tests.support.browser import VIEWPORT, launch_chromium  # noqa: E402

READY = '.stw-root[data-ready="1"]'
#: The renderer keeps its last 600 frame times.
FRAME_LOG = 600

MEMORY_PROBE = """
import json, sys, tracemalloc
from slime_trace_widget.sources.loading import load_frames  # noqa: E402

from slime_trace_widget.view.payload import encode

def hwm_kb():
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))

mode, source = sys.argv[1], sys.argv[2]
base = hwm_kb()
if mode == "tracemalloc":
    tracemalloc.start()
view = encode(load_frames(source))
peak = tracemalloc.get_traced_memory()[1] if mode == "tracemalloc" else None
print(json.dumps({"base_kb": base, "hwm_kb": hwm_kb(), "peak": peak}))
"""


def builders() -> dict[str, Callable[[Path], str]]:
    """The inputs by key; the 5,000 samples carry full demo traces here, not lean ones."""
    return {
        "long_sample": heavy_inputs.build_long_sample,
        "many_samples": lambda folder: heavy_inputs.build_many_samples(folder, full=True),
        "huge_string": heavy_inputs.build_huge_string,
        "many_dumps": heavy_inputs.build_many_dumps,
        "huge_names": heavy_inputs.build_huge_names,
    }


def timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    start = time.perf_counter()
    result = fn()
    return result, time.perf_counter() - start


def memory(source: str, mode: str) -> dict[str, Any]:
    """Load + encode ``source`` in a fresh interpreter; its memory figures."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", MEMORY_PROBE, mode, source], env=env,
                          capture_output=True, text=True, check=True, timeout=900)
    return json.loads(done.stdout.strip().splitlines()[-1])


# --------------------------------------------------------------------------- browser


class Session:
    """One snapshot page and the scripted user: every step's frame times kept apart."""

    def __init__(self, page: Any) -> None:
        self.page = page
        self.root = page.locator(".stw-root")
        box = self.root.locator("canvas.stw-canvas").bounding_box()
        self.plot_x = box["x"] + box["width"] * 0.62
        self.mid_y = box["y"] + min(box["height"], VIEWPORT["height"] - box["y"]) / 2
        self.steps: list[tuple[str, list[float]]] = []

    def frames(self) -> int:
        return self.root.evaluate("el => el.stwDebug.frameCount")

    def record(self, name: str, action: Callable[[], None]) -> None:
        before = self.frames()
        action()
        time.sleep(0.3)  # let the last frames of the step land
        painted = self.frames() - before
        times = self.root.evaluate("el => el.stwDebug.frameTimes()")
        self.steps.append((name, times[-painted:] if painted else []))

    def drag(self, moves: int = 40, dx: float = 10.0) -> None:
        mouse = self.page.mouse
        mouse.move(self.plot_x, self.mid_y)
        mouse.down()
        for i in range(1, moves + 1):
            mouse.move(self.plot_x - i * dx, self.mid_y)
        for i in range(moves, -1, -1):
            mouse.move(self.plot_x - i * dx, self.mid_y)
        mouse.up()

    def wheel(self, notches: int) -> None:
        self.page.mouse.move(self.plot_x, self.mid_y)
        for _ in range(abs(notches)):
            self.page.mouse.wheel(0, -120 if notches > 0 else 120)
            time.sleep(0.016)

    def expand_all(self, on: bool) -> None:
        select = self.root.locator("select.stw-select").filter(
            has=self.page.locator("option[value=expanded]"))
        select.select_option("expanded" if on else "collapsed")

    def hold(self, key: str, seconds: float) -> None:
        self.page.keyboard.down(key)
        time.sleep(seconds)
        self.page.keyboard.up(key)

    def run(self) -> None:
        self.record("drag pan", self.drag)
        self.record("wheel zoom in / out", lambda: (self.wheel(12), self.wheel(-12)))

        def expanded() -> None:
            self.expand_all(True)
            time.sleep(0.1)
            self.drag(30)
            self.wheel(8)
            self.wheel(-8)
            self.expand_all(False)

        self.record("expand all, pan, zoom, collapse", expanded)

        def keys() -> None:
            self.root.evaluate("el => el.focus({preventScroll: true})")
            self.hold("w", 0.5)
            self.hold("d", 0.3)
            self.hold("s", 0.5)

        self.record("W / D / S held", keys)


def browse(browser: Any, html: Path) -> dict[str, Any]:
    """Open the snapshot, run the script; open time, first paint and the frame times."""
    page = browser.new_page(viewport=VIEWPORT, device_scale_factor=1)
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    try:
        _, open_s = timed(lambda: (page.goto(html.resolve().as_uri()),
                                   page.wait_for_selector(READY, timeout=300_000)))
        session = Session(page)
        session.run()
        first_paint = session.root.evaluate("el => el.stwDebug.firstPaintMs")
    finally:
        page.close()
    return {"open_s": open_s, "first_paint_ms": first_paint, "steps": session.steps,
            "errors": errors}


# --------------------------------------------------------------------------- report


def run_case(key: str, build: Callable[[Path], str], browser: Any, folder: Path) -> None:
    source, build_s = timed(lambda: build(folder))
    frames, frames_s = timed(lambda: load_frames(source))
    view, encode_s = timed(lambda: encode(frames, align="rollout" if len(frames.paths) > 1
                                          else "global"))
    html, html_s = timed(lambda: TraceTimeline.from_frames(frames).to_html(folder / "view.html"))
    dump_bytes = sum(p.stat().st_size for p in folder.glob("*.pt"))
    meta_bytes = len(json.dumps(view.payload["meta"]).encode())
    rss = memory(source, "rss")
    traced = memory(source, "tracemalloc")
    page = browse(browser, html)

    spans, events = len(frames.span_core), len(frames.event_core)
    print(f"\n== {key}: {frames.samples.shape[0]:,} samples, {spans:,} spans "
          f"({len(view.span_index):,} in the payload), {events:,} events, "
          f"{len(frames.paths)} dump(s) of {dump_bytes / 1e6:.1f} MB (built in {build_s:.1f} s)")
    print(f"  time to frames (load_frames)        {frames_s:8.2f} s")
    print(f"  time to payload (encode)            {encode_s:8.2f} s")
    print(f"  time to HTML snapshot (to_html)     {html_s:8.2f} s")
    print(f"  peak memory, load + encode          tracemalloc {traced['peak'] / 1e6:8.1f} MB   "
          f"VmHWM {rss['hwm_kb'] / 1e3:8.1f} MB "
          f"(+{(rss['hwm_kb'] - rss['base_kb']) / 1e3:.1f} MB over the imports)")
    print(f"  payload bytes                       columns {view.n_bytes / 1e6:8.2f} MB   "
          f"JSON meta {meta_bytes / 1e6:6.2f} MB   snapshot {html.stat().st_size / 1e6:7.2f} MB")
    print(f"  browser: file:// open to data-ready {page['open_s'] * 1000:8.0f} ms "
          f"(renderer first paint {page['first_paint_ms']:.0f} ms)")
    print(f"  {'step':34s}{'frames':>7s}   frameTimes p50 / p95 / max ms")
    for name, times in page["steps"]:
        lost = " (some older than the 600-frame log)" if len(times) >= FRAME_LOG else ""
        print(f"  {name:34s}{len(times):7d}   {triple(times)}{lost}")
    every = [t for _, times in page["steps"] for t in times]
    print(f"  {'all steps':34s}{len(every):7d}   {triple(every)}")
    print(f"  page errors: {page['errors'] or 'none'}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("cases", nargs="*", help=f"some of: {', '.join(builders())}")
    args = parser.parse_args(argv)
    chosen = args.cases or list(builders())
    unknown = set(chosen) - set(builders())
    if unknown:
        parser.error(f"unknown cases: {', '.join(sorted(unknown))}")
    print(f"heavy inputs ({'long' if heavy_inputs.LONG else 'default'} sizes), "
          f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}, "
          f"viewport {VIEWPORT['width']}x{VIEWPORT['height']}")
    from playwright.sync_api import sync_playwright

    started = time.perf_counter()
    with sync_playwright() as playwright, tempfile.TemporaryDirectory() as tmp:
        browser = launch_chromium(playwright)
        try:
            for key in chosen:
                folder = Path(tmp) / key
                folder.mkdir()
                run_case(key, builders()[key], browser, folder)
        finally:
            browser.close()
    print(f"\ntotal {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
