"""The processes that run on this machine, read from /proc: for tests that check a
load leaves no helper or child process behind."""

from __future__ import annotations

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
