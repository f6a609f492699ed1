"""Process helpers shared by the receiver benchmarks: a process's peak memory, and the
timed run of sender processes that wait on one start event."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any


def peak_rss(pid: int) -> int:
    """Bytes of the process's peak resident set (``VmHWM``), 0 when it is not known."""
    with open(f"/proc/{pid}/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return 0


def timed_run(workers: Sequence[Any], start: Any, what: str) -> float:
    """Seconds from setting ``start`` until every started worker has ended; exits naming
    ``what`` when one of them failed."""
    began = time.perf_counter()
    start.set()
    for worker in workers:
        worker.join()
    seconds = time.perf_counter() - began
    failed = [worker.exitcode for worker in workers if worker.exitcode]
    if failed:
        raise SystemExit(f"{what} failed: exit codes {failed}")
    return seconds
