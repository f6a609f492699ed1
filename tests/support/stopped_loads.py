"""A load caught in the middle: the command (or a script) started on a dump, its
loader's helper found, the job the helper runs frozen (SIGSTOP) so that it cannot end
by itself, and then the caller stopped or killed; what the caller left behind, read
from /proc.

A frozen job never sends its verdict: a helper still running once its caller is
gone is one nothing ends, however long the test waits. Every wait here is for a
condition, under :data:`HANG_GUARD_S`."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from slime_trace_widget.demo import write_demo_dump
from slime_trace_widget.sources.dumps.exit_cleanup import SCRATCH_PREFIX
from tests.support.processes import running_processes

#: Generous: a busy 2-core machine may take long to start the command and its helper.
HANG_GUARD_S = 120
#: Samples of the dump whose load is caught: its job runs for about half a second on an
#: idle machine, long enough to be seen and frozen, and the dump is written in seconds.
SAMPLES = 512
#: What the loader's helper runs (``pool._WORKER_COMMAND``).
HELPER_COMMAND = b"sources.dumps.worker import serve"
#: Seconds between two looks at /proc.
LOOK_EVERY_S = 0.01


def write_slow_dump(path: Path) -> Path:
    """A demo dump at ``path``, dated an hour ago (complete for a watcher of its folder)."""
    write_demo_dump(path, n_samples=SAMPLES, seed=7)
    then = time.time() - 3600
    os.utime(path, (then, then))
    return path


def command(*args: str) -> list[str]:
    return [sys.executable, "-m", "slime_trace_widget", *args]


def started(argv: list[str], scratch_root: Path) -> subprocess.Popen:
    """``argv`` started with its temporary folder at ``scratch_root`` (its scratch folders
    are made there), its input and output through pipes."""
    scratch_root.mkdir(exist_ok=True)
    return subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "TMPDIR": str(scratch_root)})


def serving_line(process: subprocess.Popen) -> str:
    """The command's start-up line (``serving ...``)."""
    assert process.stdout is not None
    deadline = time.monotonic() + HANG_GUARD_S
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if line.startswith("serving"):
            return line
        if not line and process.poll() is not None:
            pytest.fail(f"the command ended: {process.communicate()[1][-2000:]}")
    pytest.fail("the command did not start serving")


def frozen_job(caller: subprocess.Popen) -> int:
    """Wait for ``caller``'s helper to run a job, freeze the job's processes (SIGSTOP)
    and return the helper's pid, which is also its process group's."""
    deadline = time.monotonic() + HANG_GUARD_S
    while time.monotonic() < deadline:
        if caller.poll() is not None:
            pytest.fail(f"the caller ended before its job was caught: "
                        f"{caller.communicate()[1][-2000:]}")
        for helper in _helpers_of(caller.pid):
            job = [pid for pid, _, group in running_processes()
                   if group == helper and pid != helper]
            if job:
                for pid in job:
                    os.kill(pid, signal.SIGSTOP)
                _wait_until_stopped(job[0])
                return helper
        time.sleep(LOOK_EVERY_S)
    pytest.fail("the caller's helper ran no job")


def _helpers_of(pid: int) -> list[int]:
    return [child for child, parent, _ in running_processes()
            if parent == pid and HELPER_COMMAND in _command_line(child)]


def _command_line(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""  # gone meanwhile


def _wait_until_stopped(pid: int) -> None:
    deadline = time.monotonic() + HANG_GUARD_S
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            state = "gone"
        if state in ("T", "t"):
            return
        if state in ("Z", "X", "gone"):
            pytest.fail("the job ended before it could be frozen: it needs a larger dump")
        time.sleep(LOOK_EVERY_S)
    pytest.fail("the job was not frozen")


def ended(process: subprocess.Popen) -> tuple[int, str]:
    """The exit code and stderr of ``process``, once it ends by itself."""
    _, err = process.communicate(timeout=HANG_GUARD_S)
    return process.returncode, err


def group_outlives(group: int) -> list[int]:
    """The processes of ``group`` still running after a generous wait for them to end
    (none once they did)."""
    deadline = time.monotonic() + HANG_GUARD_S
    while True:
        alive = [pid for pid, _, pgrp in running_processes() if pgrp == group]
        if not alive or time.monotonic() > deadline:
            return alive
        time.sleep(LOOK_EVERY_S)


def scratch_folders(root: Path) -> list[Path]:
    """The loader's scratch folders in ``root``."""
    return sorted(root.glob(f"{SCRATCH_PREFIX}*"))


def end_group(group: int) -> None:
    """SIGKILL what is left of a helper's process group (a failed test's cleanup)."""
    with contextlib.suppress(ProcessLookupError):  # none left
        os.killpg(group, signal.SIGKILL)
