"""Benchmark: what the isolated rehearsal costs, and how fast it refuses files that hurt.

Prints, for this machine:

* the rehearsal helper's cold start (first safe load of a session) and the cost
  of one rehearsal on a small dump (a fork and a second load beside this one);
* 200 small dumps behind one glob, rehearsed and in-process;
* a fresh interpreter's import + ``TraceTimeline.from_dump`` of bench_load's 58 MB
  dump, safe against trusted;
* each denial-of-service file with the default limits: seconds until the
  DumpError, and its message. Without the rehearsal the first two would hold the
  process for hours (2**64 tuple leaves to hash; 200,000 int keys on one hash,
  about 4 minutes) and the memo bomb would ask the OS for 16 GiB.

Figures only, no assertions. About a minute on 2 CPUs.

    python benchmarks/bench_isolation.py
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from slime_trace_widget import DumpError  # noqa: E402
from slime_trace_widget.dump import load_dump, load_dumps  # noqa: E402
from tests.test_hostile_pickles import NONE, dump_stream, write_zip  # noqa: E402
from tests.test_isolation import (  # noqa: E402
    colliding_int_keys,
    tuple_key_bomb,
    write_bomb_after_samples,
)

SMALL = ROOT / "tests" / "fixtures" / "small.pt"
BENCH_DUMP = ROOT / "benchmarks" / "out" / "bench_dump.pt"
GLOB_FILES = 200


def best_of(repeats: int, action: Callable[[], object]) -> float:
    """Fastest of ``repeats`` runs, in seconds."""
    best = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        action()
        best = min(best, time.perf_counter() - started)
    return best


def report_overhead(folder: Path) -> None:
    started = time.perf_counter()
    load_dump(SMALL)
    cold = time.perf_counter() - started
    print(f"first safe load of a session ({SMALL.name}; helper started by the imports) "
          f"{cold * 1000:6.0f} ms")
    rehearsed = best_of(20, lambda: load_dump(SMALL))
    in_process = best_of(20, lambda: load_dump(SMALL, isolate=False))
    extra = (rehearsed - in_process) * 1000
    print(f"{SMALL.name} ({SMALL.stat().st_size / 1e3:.0f} kB), rehearsed     "
          f"{rehearsed * 1000:8.1f} ms   in-process {in_process * 1000:6.1f} ms  (+{extra:.1f} ms)")
    for index in range(GLOB_FILES):
        shutil.copy(SMALL, folder / f"rollout_{index}.pt")
    pattern = str(folder / "rollout_*.pt")
    rehearsed = best_of(3, lambda: load_dumps(pattern, progress=False))
    in_process = best_of(3, lambda: load_dumps(pattern, progress=False, isolate=False))
    print(f"{GLOB_FILES} dumps by glob, rehearsed            {rehearsed:8.2f} s    in-process "
          f"{in_process:6.2f} s   (+{(rehearsed - in_process) / GLOB_FILES * 1000:.1f} ms/file)")


FIRST_USE = """
import sys, time
started = time.perf_counter()
from slime_trace_widget import TraceTimeline
TraceTimeline.from_dump(sys.argv[1], trusted=sys.argv[2] == "trusted")
print(time.perf_counter() - started)
"""


def report_first_use(path: Path, repeats: int = 3) -> None:
    """A fresh interpreter: import, then ``TraceTimeline.from_dump``, safe and trusted.

    The package starts the helper when a loading name is first used, so its torch
    import runs beside this process's own imports.
    """
    best = {}
    for _ in range(repeats):
        for mode in ("safe", "trusted"):
            out = subprocess.run([sys.executable, "-c", FIRST_USE, str(path), mode], check=True,
                                 capture_output=True, text=True, cwd=ROOT).stdout
            best[mode] = min(best.get(mode, float("inf")), float(out.split()[-1]))
    print(f"fresh process, import + from_dump of {path.name} ({path.stat().st_size / 1e6:.0f} MB):"
          f" safe {best['safe']:.2f} s, trusted {best['trusted']:.2f} s, "
          f"ratio {best['safe'] / best['trusted']:.3f}")


def report_refusals(folder: Path) -> None:
    bombs = {
        "tuple key of 2**64 leaves": lambda path: write_bomb_after_samples(path, tuple_key_bomb()),
        "200,000 int keys on one hash": lambda path: write_bomb_after_samples(
            path, colliding_int_keys()),
        "memo index 2**30 (16 GiB)": lambda path: write_zip(
            path, dump_stream(b"N" + b"r" + (2**30).to_bytes(4, "little"), "metadata")),
        "benign control": lambda path: write_zip(path, dump_stream(NONE, "metadata")),
    }
    for name, build in bombs.items():
        path = folder / f"rollout_{len(name)}.pt"
        build(path)
        started = time.perf_counter()
        try:
            load_dump(path)
            outcome = "loaded"
        except DumpError as exc:
            outcome = str(exc).replace(str(path), path.name)
        seconds = time.perf_counter() - started
        print(f"{name:30s} {path.stat().st_size / 1e6:6.2f} MB  {seconds:6.1f} s  {outcome[:110]}")


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "glob").mkdir()
        report_overhead(folder / "glob")
        if BENCH_DUMP.exists():
            report_first_use(BENCH_DUMP)
        else:
            print(f"(no {BENCH_DUMP}: run benchmarks/bench_load.py first for the first-use figure)")
        print()
        report_refusals(folder)


if __name__ == "__main__":
    main()
