"""Run dataset: converting a run's dumps, rerunning, opening rollouts, trends.

Usage::

    python benchmarks/bench_dataset.py            # 100 dumps of the 62mb_agentic shape
    python benchmarks/bench_dataset.py --dumps 20 --no-ray

The run is the 62mb_agentic demo dump (benchmarks/demo_dumps.py) saved again
under rollout ids 0..N-1 (``benchmarks/out/run/``, kept between runs). Prints:

* ``--engine local`` with the default pool and with one worker: seconds and
  dumps/s, and their ratio (target: at least 1.7x on 2 cores);
* ``--engine ray`` on a local Ray capped at the same CPUs (target: within 1.3x
  of local);
* a rerun with nothing new (target: under 2 s);
* opening 2 rollouts of N (target: under 1 s) and ``rollout_trends`` over all
  of them (target: under 3 s);
* the driver's peak RSS during the conversion (it should stay flat: a few
  rollouts' columns at most), sampled every 50 ms.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent
OUT = HERE / "out"
sys.path.insert(0, str(HERE))
MB = 1 << 20


def run_dumps(count: int) -> list[Path]:
    """The run's dumps: the demo dump written again under each rollout id."""
    from demo_dumps import demo_dump

    folder = OUT / "run"
    folder.mkdir(parents=True, exist_ok=True)
    paths = [folder / f"rollout_{k}.pt" for k in range(count)]
    missing = [p for p in paths if not p.exists()]
    if missing:
        from slime_trace_widget.sources.dumps import save_dump
        from slime_trace_widget.sources.dumps.files import load_trusted

        print(f"writing {len(missing)} run dumps into {folder} ...", flush=True)
        samples = load_trusted(str(demo_dump("62mb_agentic", seed=7))).samples
        for path in missing:
            save_dump(path, samples, rollout_id=int(path.stem.split("_")[1]))
    old = time.time() - 3600  # settled: not "still being written" (once: a new mtime
    for path in missing:      # would make every rerun hash every dump)
        os.utime(path, (old, old))
    return paths


def _rss() -> int:
    with open("/proc/self/statm", encoding="ascii") as stream:
        return int(stream.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def timed(action: Callable[[], Any]) -> tuple[float, int, Any]:
    """Seconds, driver RSS growth at peak, and the result of ``action()``."""
    base, peak, done = _rss(), [0], threading.Event()

    def sample() -> None:
        while not done.wait(0.05):
            peak[0] = max(peak[0], _rss())

    watcher = threading.Thread(target=sample, daemon=True)
    watcher.start()
    start = time.perf_counter()
    try:
        result = action()
    finally:
        seconds = time.perf_counter() - start
        done.set()
        watcher.join()
    return seconds, max(peak[0], _rss()) - base, result


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dumps", type=int, default=100)
    parser.add_argument("--no-ray", action="store_true", help="skip the Ray engine")
    parser.add_argument("--ray-only", action="store_true",
                        help="only the Ray engine, against the local figure given")
    parser.add_argument("--local-seconds", type=float, help="with --ray-only: local's time")
    args = parser.parse_args(argv)
    from slime_trace_widget.answers.trends import rollout_trends
    from slime_trace_widget.sources.dataset import convert, open_dataset
    from slime_trace_widget.sources.dumps import default_workers

    paths = run_dumps(args.dumps)
    total = sum(p.stat().st_size for p in paths)
    workers = default_workers([str(p) for p in paths])
    print(f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}; {len(paths)} dumps, "
          f"{total / MB:,.0f} MB; pool size {workers}")
    dumps = [str(p) for p in paths]
    results: dict[str, float] = {}
    runs = [("local", {"engine": "local"}), ("local, 1 worker", {"engine": "local", "workers": 1})]
    if args.ray_only:
        runs, results["local"] = [], args.local_seconds or float("nan")
    if not args.no_ray:
        runs.append(("ray (local, capped)", {"engine": "ray", "workers": workers}))
    print(f"\n  {'convert':28}{'wall s':>9}{'dumps/s':>9}{'MB/s':>8}{'driver +MB':>12}")
    for label, options in runs:
        target = OUT / f"dataset_{label.split()[0].strip(',')}_{options.get('workers', 0)}"
        shutil.rmtree(target, ignore_errors=True)
        seconds, growth, report = timed(lambda t=target, o=options: convert(
            dumps, t, progress=False, **o))
        results[label] = seconds
        note = "" if not report.failed else f"   ({len(report.failed)} failed)"
        print(f"  {label:28}{seconds:9.1f}{len(paths) / seconds:9.2f}{total / MB / seconds:8.1f}"
              f"{growth / MB:12.0f}{note}")
    dataset = OUT / "dataset_local_0"
    rerun, _, report = timed(lambda: convert(dumps, dataset, progress=False))
    opened, growth, frames = timed(lambda: open_dataset(dataset, rollouts=[3, 61]))
    trends_s, _, trends = timed(lambda: rollout_trends(dataset))
    print(f"\n  rerun, nothing new           {rerun:9.2f} s   ({report.summary()})")
    print(f"  open 2 rollouts of {len(paths):<9} {opened:9.2f} s   ({len(frames.span_core):,} "
          f"spans, driver +{growth / MB:.0f} MB)")
    print(f"  rollout_trends, all dumps    {trends_s:9.2f} s   ({len(trends)} rows, "
          f"{trends.shape[1]} columns)")
    if "local, 1 worker" in results:
        speedup = results["local, 1 worker"] / results["local"]
        print(f"\n  local pool vs 1 worker: {speedup:.2f}x (target >= 1.7x)")
    if "ray (local, capped)" in results:
        print(f"  ray / local: {results['ray (local, capped)'] / results['local']:.2f}x "
              "(target <= 1.3x)")
    print(f"  rerun {rerun:.2f} s (target < 2 s); open {opened:.2f} s (target < 1 s); "
          f"trends {trends_s:.2f} s (target < 3 s)")


if __name__ == "__main__":
    main()
