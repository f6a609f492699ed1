"""The worker pool at its edges: limits with no bound, a second Ctrl-C while helpers
are stopped, a helper that died with a request line unsent."""

from __future__ import annotations

import contextlib
import math
import os
import queue
import subprocess
import time
import zipfile
from pathlib import Path
from typing import Any

import pytest

from slime_trace_widget.sources.dumps import pool
from slime_trace_widget.sources.dumps.errors import DumpError
from slime_trace_widget.sources.loading import load_frames

FIXTURES = Path(__file__).parents[1] / "fixtures"
#: Hang guard for a process to end after SIGKILL, generous for a busy machine.
END_SECONDS = 120


def _wait_ended(process: subprocess.Popen) -> bool:
    deadline = time.monotonic() + END_SECONDS
    while process.poll() is None:
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def test_unbounded_time_and_memory_limits_load_as_bounded_ones_do() -> None:
    expected = load_frames(FIXTURES / "small.pt")
    for limits in ({"time_limit": math.inf}, {"time_limit": 1e12},
                   {"memory_limit": 2**63}, {"memory_limit": 2**64}):
        frames = load_frames(FIXTURES / "small.pt", **limits)
        assert len(frames.spans) == len(expected.spans), limits


def test_a_second_interrupt_while_helpers_stop_leaves_none_running(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Ctrl-C during a load of two dumps, and again while the first helper is waited
    for: every helper has been sent SIGKILL before any wait, so none goes on."""
    pool._IDLE.stop_all()
    paths = []
    for index in range(2):
        path = tmp_path / f"rollout_{index}.pt"
        path.write_bytes((FIXTURES / "small.pt").read_bytes())
        paths.append(path)
    processes: list[subprocess.Popen] = []

    def first_interrupt(inbox: queue.Queue, busy: list, progress: Any) -> None:
        processes.extend(worker._process for worker in busy)
        raise KeyboardInterrupt

    own_stop = pool._Worker.stop

    def stop_interrupted(self: pool._Worker) -> None:
        if len(processes) == 2 and not interrupted:
            interrupted.append(True)
            raise KeyboardInterrupt  # the second Ctrl-C, landing in the first helper's wait
        own_stop(self)

    interrupted: list[bool] = []

    monkeypatch.setattr(pool, "_take_message", first_interrupt)
    monkeypatch.setattr(pool._Worker, "stop", stop_interrupted)
    try:
        with pytest.raises(KeyboardInterrupt):
            load_frames([str(path) for path in paths], workers=2)
        assert len(processes) == 2
        assert all(_wait_ended(process) for process in processes)
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
            process.wait()
            for stream in (process.stdin, process.stdout):
                with contextlib.suppress(OSError):
                    stream.close()


def test_stopping_a_helper_that_died_with_a_request_unsent_raises_nothing() -> None:
    worker = pool._Worker(queue.Queue())
    worker.start()
    process = worker._process
    assert process is not None and process.stdin is not None
    os.kill(process.pid, 9)
    process.wait()
    process.stdin.write(b"{}\n" * 100)  # buffered: flushed only when the pipe is closed
    worker.stop()  # the flush meets a broken pipe, which stop leaves unsaid
    assert worker._process is None


def test_a_skim_that_cannot_fork_leaves_no_pipe_open(monkeypatch: pytest.MonkeyPatch) -> None:
    """Out of processes, the forked skim gives up (the plain read follows) and closes
    both ends of its pipe."""
    from slime_trace_widget.sources.dumps import skim_stream

    path = str(FIXTURES / "small.pt")
    with zipfile.ZipFile(path) as archive:
        info = next(i for i in archive.infolist() if i.filename.endswith("data.pkl"))

    def no_fork() -> int:
        raise OSError(11, "Resource temporarily unavailable")

    monkeypatch.setattr(skim_stream.os, "fork", no_fork)
    before = sorted(os.listdir("/proc/self/fd"))
    assert skim_stream.unpickle_skimmed(path, info, lambda stream: stream.read()) is None
    assert sorted(os.listdir("/proc/self/fd")) == before


def test_frames_too_large_for_the_memory_left_are_refused_before_they_are_read(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A dump whose tables would take more than half the memory available is refused,
    named, and never read into the caller (a small dump can make huge tables)."""
    from slime_trace_widget.sources import loading

    monkeypatch.setattr(loading, "available_memory", lambda: 64 << 10)  # 64 KiB left
    with pytest.raises(DumpError, match=r"small\.pt: refused: its frames would take .* "
                                        r"more than 50% of the 64 KiB of memory available"):
        load_frames(FIXTURES / "small.pt")
    monkeypatch.setattr(loading, "available_memory", lambda: None)  # unknown: read
    assert len(load_frames(FIXTURES / "small.pt").spans) > 0
