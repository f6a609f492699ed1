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
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).parent))

from demo_dumps import OUT, SHAPES, demo_dump
from render_report import Case, report
from render_session import Session
from render_widget_open import DISPLAY_CELL, PROBES, open_widget, shutdown_kernels

from slime_trace_widget.demo import write_demo_dump
from tests.support.browser import VIEWPORT, JupyterLab, launch_chromium

#: PROBES stays importable from here: bench_frontends.py takes it from this module.
__all__ = ["PROBES", "main"]

# The jobs live in helper modules: render_widget_open.py opens the widget in JupyterLab
# and times the first paint, render_session.py is the scripted user, render_report.py
# holds the targets and prints the figures.


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


def run_case(lab: JupyterLab, browser: Any, case: Case) -> None:
    """One size in a fresh page and kernel, freed before the next size starts; the
    dump's unpickler floor is taken just before and just after it (the best counts),
    so the path's ratio to it compares figures of one run."""
    load_before = os.getloadavg()[0]
    floors = [unpickler_floor(case.path)]
    page, stats = open_widget(lab, browser, case.key, case.path)
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
