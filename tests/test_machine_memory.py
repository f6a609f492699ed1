"""The memory this process may still take: the machine's, or less under a control
group's limit (v1 and v2, on the group or an ancestor), file pages counted as room."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from slime_trace_widget.machine_memory import available_memory, memory_amount

GIB = 1 << 30


def machine(root: Path, available: int, cgroup: str = "") -> Path:
    (root / "proc/self").mkdir(parents=True)
    (root / "proc/meminfo").write_text(f"MemTotal: {4 * available // 1024} kB\n"
                                       f"MemFree: 1000 kB\nMemAvailable: {available // 1024} kB\n")
    (root / "proc/self/cgroup").write_text(cgroup)
    return root


def group(folder: Path, files: dict[str, str | int]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name, value in files.items():
        (folder / name).write_text(f"{value}\n")


def test_the_machine_alone(tmp_path: Path) -> None:
    assert available_memory(machine(tmp_path, 16 * GIB)) == 16 * GIB


def test_a_v2_group_limit_counts_its_file_pages_as_room(tmp_path: Path) -> None:
    root = machine(tmp_path, 16 * GIB, "0::/kubepods/pod1/box\n")
    group(root / "sys/fs/cgroup/kubepods/pod1/box",
          {"memory.max": 4 * GIB, "memory.current": 3 * GIB,
           "memory.stat": f"anon {2 * GIB}\ninactive_file {GIB // 2}\nactive_file 0"})
    assert available_memory(root) == 4 * GIB - (3 * GIB - GIB // 2)


def test_the_tightest_ancestor_decides(tmp_path: Path) -> None:
    root = machine(tmp_path, 16 * GIB, "0::/kubepods/pod1/box\n")
    group(root / "sys/fs/cgroup/kubepods/pod1/box", {"memory.max": "max", "memory.current": GIB})
    group(root / "sys/fs/cgroup/kubepods/pod1", {"memory.max": 2 * GIB, "memory.current": GIB})
    group(root / "sys/fs/cgroup/kubepods", {"memory.max": 8 * GIB, "memory.current": 7 * GIB})
    assert available_memory(root) == GIB


def test_a_v1_group_without_a_limit_leaves_the_machine(tmp_path: Path) -> None:
    root = machine(tmp_path, 16 * GIB, "4:memory:/job/7\n0::/\n")
    group(root / "sys/fs/cgroup/memory/job/7",
          {"memory.limit_in_bytes": 9223372036854771712, "memory.usage_in_bytes": GIB})
    assert available_memory(root) == 16 * GIB
    group(root / "sys/fs/cgroup/memory/job/7",
          {"memory.limit_in_bytes": 3 * GIB, "memory.usage_in_bytes": 5 * GIB,
           "memory.stat": f"cache {GIB}\ntotal_inactive_file {GIB}"})
    assert available_memory(root) == 0  # over its limit after the file pages: no room


def test_unknown_anywhere_is_none(tmp_path: Path) -> None:
    assert available_memory(tmp_path) is None


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc is Linux's")
def test_this_machine_says() -> None:
    room = available_memory()
    assert room is not None and room > 0


def test_amounts_read_as_people_write_them() -> None:
    assert [memory_amount(n) for n in (4096, 3 << 20, int(1.5 * GIB))] == [
        "4 KiB", "3.0 MiB", "1.5 GiB"]
