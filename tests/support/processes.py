"""The processes that run on this machine, read from /proc: for tests that check a
load leaves no helper or child process behind; and a child's announcement read with a
hang guard."""

from __future__ import annotations

import subprocess
import threading
from pathlib import Path


def running_processes() -> list[tuple[int, int, int]]:
    """(pid, parent pid, process group) of every process that still runs (zombies
    awaiting a reaper left out), read from /proc."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue  # self, thread-self, and what is not a process
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue  # gone meanwhile
        state, parent, group = stat.rsplit(")", 1)[1].split()[:3]
        if state not in ("Z", "X"):
            found.append((int(entry.name), int(parent), int(group)))
    return found


def line_starting(process: subprocess.Popen, prefix: str, timeout: float) -> str | None:
    """The first line ``process`` prints (text stdout) that starts with ``prefix``,
    without its newline; None when its output ends first or ``timeout`` seconds pass.
    Read on a thread of its own, so a child that hangs without printing fails the test
    instead of hanging it; lines after that one are left for the caller."""
    found: list[str] = []

    def read() -> None:
        for line in process.stdout:
            if line.startswith(prefix):
                found.append(line.rstrip("\n"))
                return

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(timeout)
    return found[0] if found else None


def ended_with(process: subprocess.Popen) -> str:
    """What ``process`` wrote to its stderr, once it is killed (if it still ran)."""
    if process.poll() is None:
        process.kill()
    return process.communicate(timeout=60)[1] or ""
