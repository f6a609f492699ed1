"""Benchmark: flattening dumps into TraceFrames.

Prints, for demo dumps of about 250k spans and about 1M trace records:
flattening throughput in trace records per second (excluding torch.load),
total time from path to frames, the lazily built attr.* columns, and peak
traced memory during flattening against the size of the raw event dicts.

    python benchmarks/bench_frames.py
"""

from __future__ import annotations

import gc
import sys
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from demo_dumps import demo_dump

from slime_trace_widget.frames import build_frames
from slime_trace_widget.sources.loading import load_dump, load_frames
from tests.support.demo_shapes import count_records


def deep_size(samples: list[dict]) -> int:
    """Bytes held by the raw trace records (dicts, their keys' values, attrs dicts)."""
    seen: set[int] = set()
    total = 0
    stack: list = [s["trace"]["events"] for s in samples if isinstance(s.get("trace"), dict)]
    while stack:
        obj = stack.pop()
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        total += sys.getsizeof(obj)
        if isinstance(obj, dict):
            stack.extend(obj.values())
        elif isinstance(obj, list):
            stack.extend(obj)
    return total


def best_of(n: int, fn) -> tuple[float, object]:
    best, result = float("inf"), None
    for _ in range(n):
        gc.collect()
        start = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - start)
    return best, result


def bench(size: str) -> None:
    path = demo_dump(size)
    loaded = load_dump(path)
    records = count_records(loaded.samples)
    flatten_s, frames = best_of(3, lambda: build_frames(loaded))
    attrs_s, _ = best_of(1, lambda: (frames.spans, frames.events))
    total_s, _ = best_of(1, lambda: load_frames(path))
    raw_bytes = deep_size(loaded.samples)
    gc.collect()
    tracemalloc.start()
    build_frames(loaded)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    n_spans = int((~frames.span_core["virtual"]).sum())
    print(f"== {path.name}: {len(loaded.samples):,} samples, {records:,} trace records, "
          f"{n_spans:,} spans (+{int(frames.span_core['virtual'].sum()):,} virtual PD)")
    print(f"flatten (no torch.load)      {flatten_s:8.3f} s   {records / flatten_s:>12,.0f} "
          f"records/s   (target >= 500,000)")
    print(f"attr.* columns on first use  {attrs_s:8.3f} s")
    print(f"path -> frames (incl. load)  {total_s:8.3f} s")
    print(f"raw event dicts              {raw_bytes / 1e6:8.1f} MB")
    print(f"peak traced memory, flatten  {peak / 1e6:8.1f} MB   "
          f"ratio {peak / raw_bytes:.2f}x   (target < 3x)")


if __name__ == "__main__":
    for size in sys.argv[1:] or ["250k_spans", "1m_events"]:
        bench(size)
