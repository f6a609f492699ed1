"""Benchmark: each analysis call on the ~1M-trace-record demo dump (target < 2 s each).

    python benchmarks/bench_analysis.py
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from demo_dumps import demo_dump

from slime_trace_widget import analysis
from slime_trace_widget.sources.loading import load_frames

TARGET_S = 2.0


def timed(label: str, call) -> object:
    start = time.perf_counter()
    result = call()
    elapsed = time.perf_counter() - start
    verdict = "ok" if elapsed < TARGET_S else "SLOWER THAN TARGET"
    print(f"{label:<44} {elapsed:7.3f} s   {len(result):>9,} rows   {verdict}")
    return result


def main() -> None:
    path = demo_dump("1m_events")
    frames = load_frames(path)
    print(f"== {path.name}: {len(frames.samples):,} samples, {len(frames.span_core):,} spans "
          f"(target < {TARGET_S:.0f} s per call)")
    timed("span_stats(frames)", lambda: analysis.span_stats(frames))
    timed("span_stats(frames, by='source')", lambda: analysis.span_stats(frames, by="source"))
    timed("span_stats(frames, by=['status', 'rollout_id'])",
          lambda: analysis.span_stats(frames, by=["status", "rollout_id"]))
    timed("sample_breakdown(frames)", lambda: analysis.sample_breakdown(frames))
    timed("self_times(frames)", lambda: analysis.self_times(frames))
    timed("long_tail(frames, k=20)", lambda: analysis.long_tail(frames, k=20))
    steps = timed("concurrency(frames)", lambda: analysis.concurrency(frames))
    timed("resample_concurrency(steps, 1.0)", lambda: analysis.resample_concurrency(steps, 1.0))
    timed("compare(frames, frames)", lambda: analysis.compare(frames, frames))
    timed("critical_path_share(frames)", lambda: analysis.critical_path_share(frames))
    timed("critical_path(frames, 0)", lambda: analysis.critical_path(frames, 0))
    timed("flame(frames)", lambda: analysis.flame(frames))
    mid = frames.t0 + (frames.t1 - frames.t0) / 2
    timed("flame(frames, window=10 s)", lambda: analysis.flame(frames, window=(mid, mid + 10)))


if __name__ == "__main__":
    main()
