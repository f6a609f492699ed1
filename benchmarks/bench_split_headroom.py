"""Benchmark: what flattening one dump as two halves on two cores could save.

Issue 22 weighs splitting one big dump's flatten across cores (each process
flattens a share of the samples, the shares combined in order). Before that
combine is built, this measures its ceiling on the demo shapes: the dump is read
as the worker reads it, then flattened whole in one process (every attribute
table built here), whole as the worker flattens it today (the span ends' table
in a forked process), then as two halves of about equal trace records, the second
in a forked process that writes its frames as the worker's Arrow files and the
first here, until this process has read the second's frames back. The combine
itself (re-ordering virtual PD spans, re-coding categories, joining attribute
columns) is not in the figure: the saving it leaves is an upper bound.

    python benchmarks/bench_split_headroom.py [--shapes 146mb_1m 62mb_agentic] [--runs 2]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from demo_dumps import SHAPES, demo_dump

from slime_trace_widget.frames.flatten import build_frames
from slime_trace_widget.sources.dumps.forked_attrs import ForkedAttrTables
from slime_trace_widget.sources.dumps.wire import read_frames, write_frames
from slime_trace_widget.sources.dumps.worker import read_for_frames
from slime_trace_widget.tables.build import cyclic_gc_paused
from slime_trace_widget.tables.samples import sample_fields


def halfway(samples: list) -> int:
    """The sample index that splits the dump's trace records about in half."""
    sizes = [len(sample_fields(sample, None, 0).events or []) for sample in samples]
    target, running = sum(sizes) / 2, 0
    for position, size in enumerate(sizes):
        running += size
        if running >= target:
            return position + 1
    return len(samples)


def flatten_in_halves(samples: list, split: int) -> tuple[float, float]:
    """Seconds until the first half is flat here, and until the second is read back."""
    scratch = tempfile.mkdtemp(prefix="split-headroom-")
    try:
        began = time.perf_counter()
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                write_frames(build_frames({"samples": samples[split:]}), scratch)
                code = 0
            finally:
                os._exit(code)
        build_frames({"samples": samples[:split]})
        first_done = time.perf_counter() - began
        _, status = os.waitpid(pid, 0)
        if os.waitstatus_to_exitcode(status) != 0:
            raise RuntimeError("the forked half failed")
        read_frames(scratch)
        return first_done, time.perf_counter() - began
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def flatten_as_the_worker(samples: list) -> float:
    """Seconds to flatten the whole dump as a worker with a spare core does today."""
    scratch = tempfile.mkdtemp(prefix="split-headroom-")
    try:
        began = time.perf_counter()
        build_frames({"samples": samples}, ForkedAttrTables(scratch))
        return time.perf_counter() - began
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def measure(shape: str, runs: int) -> None:
    path = demo_dump(shape)
    with cyclic_gc_paused():
        samples = read_for_frames(str(path), pipelined=True).samples
        split = halfway(samples)
        whole, worker, halves, first = [], [], [], []
        for _ in range(runs):
            began = time.perf_counter()
            build_frames({"samples": samples})
            whole.append(time.perf_counter() - began)
            worker.append(flatten_as_the_worker(samples))
            first_done, both_done = flatten_in_halves(samples, split)
            first.append(first_done)
            halves.append(both_done)
    print(f"{shape}: {len(samples)} samples split at {split}; flatten whole {min(whole):.2f} s, "
          f"as the worker does today {min(worker):.2f} s, "
          f"two halves {min(halves):.2f} s (first half alone {min(first):.2f} s): "
          f"{min(worker) - min(halves):.2f} s saved on today's worker before the combine, "
          f"ratio {min(worker) / min(halves):.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", nargs="+", default=["62mb_agentic", "146mb_1m", "612mb_tokens"],
                        choices=sorted(SHAPES))
    parser.add_argument("--runs", type=int, default=2)
    args = parser.parse_args()
    if not hasattr(os, "fork"):
        sys.exit("this benchmark forks: run it on Linux or macOS")
    for shape in args.shapes:
        measure(shape, args.runs)


if __name__ == "__main__":
    main()
