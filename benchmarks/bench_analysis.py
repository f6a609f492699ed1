"""Benchmark: each analysis call on the ~1M-trace-record demo dump (target < 2 s each),
then what a rollout's time bought: the signal ledger and the tail's price over a
100-rollout run dataset in DuckDB (target < 2 s) and over a 20,000-sample dump in
memory (target < 0.5 s).

    python benchmarks/bench_analysis.py            # all of it
    python benchmarks/bench_analysis.py --ledger   # only the ledger and the tail

The run is the 256-sample demo dump saved again under rollout ids 0..99
(``benchmarks/out/ledger_run/``) and converted once (``benchmarks/out/ledger_ds/``);
both are kept between runs. The 20,000-sample dump is demo_dumps' ``20k_samples``.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from demo_dumps import OUT, demo_dump

from slime_trace_widget import analysis
from slime_trace_widget.sources.loading import load_frames

TARGET_S = 2.0
#: Targets of the ledger and the tail: over the run dataset, and over one big dump.
RUN_TARGET_S = 2.0
MEMORY_TARGET_S = 0.5
RUN_ROLLOUTS = 100


def timed(label: str, call: Callable[[], object], target: float | None = TARGET_S,
          repeat: int = 1) -> object:
    """Run ``call`` ``repeat`` times; print the best time against ``target`` (if any)."""
    best, result = float("inf"), None
    for _ in range(repeat):
        start = time.perf_counter()
        result = call()
        best = min(best, time.perf_counter() - start)
    verdict = "" if target is None else "ok" if best < target else "SLOWER THAN TARGET"
    print(f"{label:<44} {best:7.3f} s   {len(result):>9,} rows   {verdict}")
    return result


def ledger_run() -> Path:
    """The 100-rollout run dataset (written and converted on first use)."""
    from slime_trace_widget.demo import write_demo_dump
    from slime_trace_widget.sources.dataset import convert
    from slime_trace_widget.sources.dumps import save_dump
    from slime_trace_widget.sources.dumps.files import load_trusted

    folder, dataset = OUT / "ledger_run", OUT / "ledger_ds"
    folder.mkdir(parents=True, exist_ok=True)
    paths = [folder / f"rollout_{k}.pt" for k in range(RUN_ROLLOUTS)]
    missing = [p for p in paths if not p.exists()]
    if missing:
        print(f"writing {len(missing)} run dumps into {folder} ...", flush=True)
        step = OUT / "ledger_demo_256.pt"
        if not step.exists():
            write_demo_dump(step, n_samples=256, seed=7)
        samples = load_trusted(str(step)).samples
        old = time.time() - 3600  # settled, so that conversion takes them
        for path in missing:
            save_dump(path, samples, rollout_id=int(path.stem.split("_")[1]))
            os.utime(path, (old, old))
    report = convert(str(folder / "*.pt"), dataset, progress=False)
    if report.converted or report.failed:
        print(f"{dataset}: {report.summary()}")
    return dataset


def bench_ledger() -> None:
    dataset = ledger_run()
    print(f"== {dataset.name}: a run dataset of {RUN_ROLLOUTS} rollouts of 256 samples "
          f"({RUN_ROLLOUTS * 256:,} samples) "
          f"(target < {RUN_TARGET_S:.0f} s, best of 3)")
    timed("ledger_trends(dataset)  [ledger + tail]", lambda: analysis.ledger_trends(dataset),
          RUN_TARGET_S, repeat=3)
    path = demo_dump("20k_samples")
    frames = load_frames(path)
    print(f"== {path.name}: {len(frames.samples):,} samples, {len(frames.span_core):,} spans "
          f"(target < {MEMORY_TARGET_S} s, best of 3)")
    timed("signal_ledger(frames)", lambda: analysis.signal_ledger(frames), MEMORY_TARGET_S,
          repeat=3)
    timed("tail_price(frames)", lambda: analysis.tail_price(frames), MEMORY_TARGET_S, repeat=3)
    timed("signal_ledger + tail_price",
          lambda: (analysis.signal_ledger(frames), analysis.tail_price(frames))[1],
          MEMORY_TARGET_S, repeat=3)
    timed("signal_ledger(frames, by='group')",
          lambda: analysis.signal_ledger(frames, by="group"), MEMORY_TARGET_S, repeat=3)
    timed("ledger_trends(frames)  [through DuckDB]", lambda: analysis.ledger_trends(frames),
          MEMORY_TARGET_S, repeat=3)
    timed("ledger_kinds(frames)  [all spans; no target]", lambda: analysis.ledger_kinds(frames),
          None)


def main() -> None:
    if "--ledger" in sys.argv[1:]:
        bench_ledger()
        return
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
    bench_ledger()


if __name__ == "__main__":
    main()
