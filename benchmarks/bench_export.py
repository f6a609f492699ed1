"""Benchmark: sharing a big rollout as a snapshot page, and the CLI's cache.

On the demo dump of about 250k spans, prints:

* the snapshot's size (bytes, and bytes per span) and the time to write it
  from frames already loaded (encode + attributes + gzip + page);
* how soon the page is interactive in headless Chromium from ``file://``
  (navigation start to ``data-ready="1"``, and the renderer's own
  ``stwDebug.firstPaintMs``), with every non-local request aborted;
* ``slime-trace-viewer --no-serve`` run twice on a fresh copy of the dump: the
  first run loads and flattens, the second reuses the cache.

Targets, printed beside the figures: the cached run at least 5x faster than the
first, the snapshot interactive in under 2 s.

    python benchmarks/bench_export.py
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from demo_dumps import demo_dump

from slime_trace_widget.frames import TraceFrames
from slime_trace_widget.sources.loading import load_frames
from slime_trace_widget.view.page.snapshot import write_snapshot
from slime_trace_widget.view.payload import encode
from tests.support.browser import VIEWPORT, launch_chromium

INTERACTIVE_TARGET_S = 2.0
CACHE_SPEEDUP_TARGET = 5.0
LOCAL_SCHEMES = ("file:", "blob:", "data:")

# Notes the moment the root says it is ready, in ms since navigation start
# (performance.now()'s origin), without polling from the test side.
_READY_WATCH = """
new MutationObserver((_, observer) => {
  const root = document.querySelector('.stw-root[data-ready="1"]');
  if (root && window.__stwReadyAt === undefined) {
    window.__stwReadyAt = performance.now();
    observer.disconnect();
  }
}).observe(document, {subtree: true, childList: true, attributes: true,
                      attributeFilter: ["data-ready"]});
"""


def _fmt_s(seconds: float) -> str:
    return f"{seconds * 1000:8.1f} ms" if seconds < 10 else f"{seconds:8.2f} s"


def _verdict(ok: bool) -> str:
    return "met" if ok else "MISSED"


def bench_write(frames: TraceFrames, folder: Path, repeats: int) -> Path:
    """Write the snapshot ``repeats`` times; print size and timings; return the page."""
    path = folder / "snapshot.html"
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        write_snapshot(path, frames)
        times.append(time.perf_counter() - start)
    size = path.stat().st_size
    spans = len(frames.span_core)
    drawn = len(encode(frames).span_index)
    print(f"snapshot size:        {size:,} bytes ({size / 1e6:.1f} MB)")
    print(f"  per span:           {size / spans:.1f} bytes ({spans:,} spans in the dump; "
          f"{size / drawn:.1f} bytes per drawn span, {drawn:,} drawn)")
    print(f"write_snapshot:       best {_fmt_s(min(times))}  median "
          f"{_fmt_s(statistics.median(times))}  (of {repeats}, frames already loaded)")
    return path


def _open_once(browser: Any, url: str) -> dict[str, float]:
    """One fresh page: ms from navigation start to ready, first paint, and blocked requests."""
    page = browser.new_page(viewport=VIEWPORT, device_scale_factor=1)
    blocked: list[str] = []

    def route(request_route: Any) -> None:
        if request_route.request.url.startswith(LOCAL_SCHEMES):
            request_route.continue_()
        else:
            blocked.append(request_route.request.url)
            request_route.abort()

    page.route("**/*", route)
    page.add_init_script(_READY_WATCH)
    try:
        start = time.perf_counter()
        page.goto(url)
        page.wait_for_selector('.stw-root[data-ready="1"]', timeout=60_000)
        wall = time.perf_counter() - start
        ready_ms = page.evaluate("() => window.__stwReadyAt")
        paint_ms = page.locator(".stw-root").evaluate("el => el.stwDebug.firstPaintMs")
        return {"ready": ready_ms / 1000, "paint": paint_ms / 1000, "wall": wall,
                "blocked": len(blocked)}
    finally:
        page.close()


def bench_open(path: Path, repeats: int) -> None:
    """Open the page ``repeats`` times in headless Chromium and print the timings."""
    from playwright.sync_api import sync_playwright

    url = path.resolve().as_uri()
    with sync_playwright() as playwright:
        browser = launch_chromium(playwright)
        try:
            runs = [_open_once(browser, url) for _ in range(repeats)]
        finally:
            browser.close()
    for i, run in enumerate(runs, 1):
        print(f"  open {i}: navigation start -> data-ready {_fmt_s(run['ready'])}   "
              f"renderer firstPaintMs {_fmt_s(run['paint'])}   goto -> ready (Python) "
              f"{_fmt_s(run['wall'])}   blocked requests {run['blocked']}")
    best = min(r["ready"] for r in runs)
    first = runs[0]["ready"]
    print(f"interactive:          first open {_fmt_s(first)}, best {_fmt_s(best)}  "
          f"(target < {INTERACTIVE_TARGET_S:.0f} s: {_verdict(first < INTERACTIVE_TARGET_S)})")


def _cli_run(dump: Path, out_dir: Path) -> tuple[float, str]:
    """Wall time of one ``slime-trace-viewer --no-serve`` run, and its first output line."""
    command = [sys.executable, "-m", "slime_trace_widget", str(dump), "--no-serve",
               "--out-dir", str(out_dir)]
    start = time.perf_counter()
    done = subprocess.run(command, check=True, capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    return elapsed, (done.stdout.strip().splitlines() or [""])[0]


def bench_cli(source: Path, folder: Path) -> None:
    """The CLI on a fresh copy (no cache yet), then again (cache reused)."""
    dump = folder / source.name
    shutil.copy(source, dump)
    out_dir = folder / "viewer"
    first, first_line = _cli_run(dump, out_dir)
    second, second_line = _cli_run(dump, out_dir)
    speedup = first / second
    print(f"CLI first run:        {_fmt_s(first)}   ({first_line})")
    print(f"CLI cached run:       {_fmt_s(second)}   ({second_line})")
    print(f"  speedup:            {speedup:.1f}x  (target >= {CACHE_SPEEDUP_TARGET:.0f}x: "
          f"{_verdict(speedup >= CACHE_SPEEDUP_TARGET)})")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3, help="snapshot writes and page opens")
    args = parser.parse_args(argv)
    source = demo_dump("250k_spans")
    start = time.perf_counter()
    frames = load_frames(source)
    loading = time.perf_counter() - start
    print(f"dump: {source} ({source.stat().st_size / 1e6:.1f} MB, {len(frames.samples):,} "
          f"samples, {len(frames.span_core):,} spans); load_frames {_fmt_s(loading)} "
          "(not counted below)")
    with tempfile.TemporaryDirectory(prefix="stw-bench-export-") as temp:
        folder = Path(temp)
        page = bench_write(frames, folder, args.repeats)
        bench_open(page, args.repeats)
        bench_cli(source, folder)


if __name__ == "__main__":
    main()
