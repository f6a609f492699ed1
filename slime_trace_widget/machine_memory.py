"""The memory this process may still take, and amounts of it as people read them
(standard library only: every layer asks before it takes much).

On Linux that is the machine's ``MemAvailable``, or less where a control group caps
this process (a container, a Jupyter pod, a Slurm job): the kernel ends a process
past its group's limit even while the machine has memory to spare. A group's room
is its limit less what it uses, not counting the file pages it could drop
(``inactive_file``), as the kernel would reclaim them before ending anything.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["available_memory", "memory_amount"]

#: cgroup v1 writes a limit near 2**63 for "no limit".
_NO_LIMIT = 1 << 62


def available_memory(root: Path = Path("/")) -> int | None:
    """Bytes this process may still take (see the module's note); None where neither
    the machine nor a control group says. ``root`` is where ``/proc`` and ``/sys`` are."""
    known = [room for room in (_machine_room(root), _group_room(root)) if room is not None]
    return min(known) if known else None


def memory_amount(size: float) -> str:
    """``size`` bytes in GiB, MiB or KiB, one decimal where it matters."""
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20)):
        if size >= scale:
            return f"{size / scale:.1f} {unit}"
    return f"{size / 2**10:.0f} KiB"


def _machine_room(root: Path) -> int | None:
    for line in _lines(root / "proc/meminfo"):
        if line.startswith("MemAvailable:"):
            return _number(line.split()[1:2], scale=1024)
    return None


def _group_room(root: Path) -> int | None:
    """The least room of this process's memory control group and its ancestors."""
    rooms = []
    for line in _lines(root / "proc/self/cgroup"):
        hierarchy, _, rest = line.partition(":")
        controllers, _, group = rest.partition(":")
        if hierarchy == "0" and controllers == "":  # cgroup v2
            base = root / "sys/fs/cgroup"
            files = ("memory.max", "memory.current", "inactive_file")
        elif "memory" in controllers.split(","):  # cgroup v1
            base = root / "sys/fs/cgroup/memory"
            files = ("memory.limit_in_bytes", "memory.usage_in_bytes", "total_inactive_file")
        else:
            continue
        folder = base / group.strip().lstrip("/")
        while True:
            room = _room_of(folder, *files)
            if room is not None:
                rooms.append(room)
            if folder == base or base not in folder.parents:
                break
            folder = folder.parent
    return min(rooms) if rooms else None


def _room_of(folder: Path, limit_file: str, usage_file: str, reclaimable_key: str
             ) -> int | None:
    limit = _number(_lines(folder / limit_file)[:1])
    usage = _number(_lines(folder / usage_file)[:1])
    if limit is None or usage is None or limit >= _NO_LIMIT:
        return None
    reclaimable = 0
    for line in _lines(folder / "memory.stat"):
        key, _, value = line.partition(" ")
        if key == reclaimable_key:
            reclaimable = _number([value]) or 0
    return max(0, limit - max(0, usage - reclaimable))


def _lines(path: Path) -> list[str]:
    try:
        return path.read_text(encoding="ascii", errors="replace").splitlines()
    except OSError:
        return []


def _number(words: list[str], scale: int = 1) -> int | None:
    """The first word as a whole number ("max" and anything else: None)."""
    word = words[0].strip() if words else ""
    return int(word) * scale if word.isascii() and word.isdigit() else None
