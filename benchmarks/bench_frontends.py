"""Benchmark: from the display cell to first paint, in JupyterLab, Notebook 7 and marimo.

Each front end gets its own server, page and kernel, and the same demo dump of
about 250k spans (benchmarks/demo_dumps.py). A first cell loads it with
``TraceTimeline.from_dump`` (timed in the kernel); the clock starts when the
person presses the display cell's run key (Shift+Enter in Jupyter, the run
button in marimo) and stops when the widget's root says ``data-ready="1"``
(seen by a MutationObserver, inside marimo's shadow roots too). Payload bytes are
the binary columns and JSON meta the kernel encodes, and what arrived over the
page's websockets during each cell (marimo sends buffers as base64 text).
Debian's Chromium, headless, 1600x900 at device scale factor 1. Figures only.

    python benchmarks/bench_frontends.py                  # all three
    python benchmarks/bench_frontends.py marimo --size 62mb_agentic
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).parent))

from bench_render import PROBES
from demo_dumps import SHAPES, SIZES, demo_dump

from tests.support.browser import (
    VIEWPORT,
    JupyterLab,
    LocalServer,
    Marimo,
    MarimoPage,
    Notebook7,
    NotebookPage,
    launch_chromium,
)

TIMEOUT_MS = 300_000

#: Before any page script: the first time a widget root turns data-ready="1" after
#: ``__stwFp.arm(event)``, and the person's ``event`` (keydown of Enter, or a click)
#: that started it. Shadow roots are watched from the moment they are attached.
FIRST_PAINT = """
(() => {
  const fp = {start: null, ready: null, armed: null};
  window.__stwFp = fp;
  fp.arm = (event) => { Object.assign(fp, {start: null, ready: null, armed: event}); };
  for (const type of ["keydown", "click"]) {
    addEventListener(type, (e) => {
      if (fp.armed === type && fp.start === null && (type === "click" || e.key === "Enter"))
        fp.start = performance.now();
    }, true);
  }
  const seen = (mutations) => {
    for (const m of mutations) {
      if (fp.start !== null && fp.ready === null && m.target.getAttribute("data-ready") === "1")
        fp.ready = performance.now();
    }
  };
  const watch = (node) => new MutationObserver(seen).observe(
    node, {subtree: true, attributes: true, attributeFilter: ["data-ready"]});
  watch(document);
  const attach = Element.prototype.attachShadow;
  Element.prototype.attachShadow = function (init) {
    const root = attach.call(this, init);
    watch(root);
    return root;
  };
})();
"""

#: The load cell; ``{show}`` is how the front end shows a line of text as output.
LOAD_CELL = """\
import json, time
from slime_trace_widget import TraceTimeline
_start = time.perf_counter()
tl = TraceTimeline.from_dump({path!r})
_stats = {{"from_dump_s": time.perf_counter() - _start, "n_bytes": tl.view.n_bytes,
          "meta_bytes": len(json.dumps(tl.view.payload["meta"])),
          "samples": len(tl.view.sample_rows), "spans": len(tl.view.span_index)}}
{show}("STATS " + json.dumps(_stats))"""


class Front:
    """One front end: its server, and how its page runs the two cells."""

    def __init__(self, name: str, server: Callable[[Path], LocalServer], show: str,
                 imports: str = "") -> None:
        self.name, self.server, self.show, self.imports = name, server, show, imports

    def cells(self, dump: Path) -> list[str]:
        return [self.imports + LOAD_CELL.format(path=str(dump), show=self.show), "tl"]

    def run(self, page: Any, url: str) -> tuple[str, Any, int]:
        """Open the notebook, run the load cell, then the display cell with the clock
        armed; the load cell's output text, the widget's root, and where the websocket
        log stood when the load cell started."""
        mark = "() => window.__stwWs.length"
        if self.name == "marimo":
            notebook = MarimoPage(page, timeout_ms=TIMEOUT_MS)
            notebook.open(url)
            start = page.evaluate(mark)
            notebook.run_cell(0)
            text = notebook.output(0).inner_text()
            page.evaluate("() => window.__stwFp.arm('click')")
            notebook.run_cell(1)
            return text, notebook.output(1).locator(".stw-root"), start
        notebook = NotebookPage(page, timeout_ms=TIMEOUT_MS)
        notebook.open(url)
        start = page.evaluate(mark)
        notebook.run_cell(0)
        text = notebook.output_text(0)
        page.evaluate("() => window.__stwFp.arm('keydown')")
        notebook.run_cell(1)
        return text, notebook.cell(1).locator(".stw-root"), start


FRONTS = {
    "jupyterlab": Front("jupyterlab", JupyterLab, "print"),
    "notebook7": Front("notebook7", Notebook7, "print"),
    "marimo": Front("marimo", lambda root: Marimo(root, "edit"), "mo.plain_text",
                    "import marimo as mo\n"),
}


def wire(log: list[dict[str, Any]]) -> tuple[int, int]:
    """Bytes that came in over the websockets, in all and in the largest message."""
    sizes = [m["bytes"] for m in log if m["dir"] == "in"]
    return sum(sizes), max(sizes, default=0)


def measure(front: Front, browser: Any, dump: Path, root: Path) -> dict[str, Any]:
    """One front end, start to finish: its own server, page and kernel."""
    server = front.server(root)
    suffix = "py" if front.name == "marimo" else "ipynb"
    url = server.write_notebook(f"bench_frontends.{suffix}", front.cells(dump))
    server.start()
    page = browser.new_page(viewport=VIEWPORT, device_scale_factor=1)
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    try:
        page.add_init_script(PROBES + FIRST_PAINT)
        load_average = os.getloadavg()[0]
        text, widget, start = front.run(page, url)
        found = re.search(r"STATS (\{.*\})", text)
        if found is None:
            raise RuntimeError(f"{front.name}: the load cell failed:\n{text[-3000:]}")
        stats = json.loads(found[1])
        widget.and_(page.locator('[data-ready="1"]')).wait_for(timeout=TIMEOUT_MS)
        page.wait_for_function("() => window.__stwFp.ready !== null", timeout=TIMEOUT_MS)
        fp = page.evaluate("() => window.__stwFp")
        log = page.evaluate("(k) => window.__stwWs.slice(k)", start)
        stats.update(
            first_paint_s=(fp["ready"] - fp["start"]) / 1000,
            load_wire=wire([m for m in log if m["t"] < fp["start"]]),
            display_wire=wire([m for m in log if fp["start"] <= m["t"] <= fp["ready"]]),
            rows=int(widget.get_attribute("data-rows")),
            load_average=(load_average, os.getloadavg()[0]), errors=errors)
        return stats
    finally:
        page.close()
        server.stop()


def report(name: str, stats: dict[str, Any]) -> None:
    load_total, load_big = stats["load_wire"]
    shown_total, shown_big = stats["display_wire"]
    print(f"\n== {name}: {stats['samples']:,} samples, {stats['spans']:,} spans in the payload, "
          f"{stats['rows']:,} rows on screen")
    print(f"  display cell run -> first paint (data-ready=1)   {stats['first_paint_s']:7.2f} s")
    print(f"  load cell: TraceTimeline.from_dump in the kernel  {stats['from_dump_s']:7.2f} s")
    print(f"  payload encoded: binary columns {stats['n_bytes'] / 1e6:7.2f} MB, "
          f"JSON meta {stats['meta_bytes'] / 1e6:.2f} MB")
    print(f"  websocket in, load cell     {load_total:12,d} B (largest message {load_big:,d} B)")
    print(f"  websocket in, display cell  {shown_total:12,d} B (largest message {shown_big:,d} B)")
    before, after = stats["load_average"]
    print(f"  load average (1 min) before / after {before:.2f} / {after:.2f} on "
          f"{os.cpu_count()} CPUs; page errors: {stats['errors'] or 'none'}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("fronts", nargs="*", help=f"any of {', '.join(FRONTS)} (default: all)")
    parser.add_argument("--size", default="250k_spans", help="a demo dump of demo_dumps.py")
    args = parser.parse_args(argv)
    fronts = args.fronts or list(FRONTS)
    if unknown := set(fronts) - set(FRONTS):
        parser.error(f"unknown front ends {sorted(unknown)}")
    if args.size not in SIZES and args.size not in SHAPES:
        parser.error(f"unknown size {args.size}")
    dump = demo_dump(args.size)
    from playwright.sync_api import sync_playwright

    figures = {}
    with tempfile.TemporaryDirectory(prefix="stw-bench-frontends-") as temp, \
            sync_playwright() as playwright:
        browser = launch_chromium(playwright)
        print(f"Chromium {browser.version} headless, viewport {VIEWPORT['width']}x"
              f"{VIEWPORT['height']}; {dump.name} ({dump.stat().st_size / 1e6:.0f} MB)")
        try:
            for name in fronts:
                figures[name] = measure(FRONTS[name], browser, dump, Path(temp) / name)
                report(name, figures[name])
        finally:
            browser.close()
    print("\nfront end     first paint   payload (binary + meta)   websocket in (both cells)")
    for name, stats in figures.items():
        payload = stats["n_bytes"] + stats["meta_bytes"]
        arrived = stats["load_wire"][0] + stats["display_wire"][0]
        print(f"{name:12s}  {stats['first_paint_s']:9.2f} s   {payload:16,d} B   "
              f"{arrived:18,d} B")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
