"""bench_render's report: the targets, the Case saying which of them apply to a size,
and the printed figures of one case (payload bytes, first paint, the path to the drawn
widget against the unpickler floor, and per-step frame times of the session).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from percentiles import pct, triple
from render_session import Session

FIRST_PAINT_TARGET_MS = 1000.0
FRAME_P95_TARGET_MS = 16.0
#: From a dump's path to the drawn widget, at most this many times the unpickler's floor.
PATH_OF_FLOOR_TARGET = 2.0
BYTES_PER_SPAN_TARGET = 24.0


@dataclass
class Case:
    """One benchmark size: a name, the dump and whether each target applies to it."""

    key: str
    path: Path
    first_paint_target: bool
    frame_target: bool


def verdict(ok: bool) -> str:
    """A word a reader's eye finds next to the target (MISS in capitals)."""
    return "ok" if ok else "MISS"


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
