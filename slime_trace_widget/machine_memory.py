"""The memory this machine has available, and amounts of it as people read them
(standard library only: every layer asks before it takes much)."""

from __future__ import annotations

__all__ = ["available_memory", "memory_amount"]


def available_memory() -> int | None:
    """``MemAvailable`` of this machine in bytes, on Linux; None where it is not known."""
    try:
        with open("/proc/meminfo", encoding="ascii") as info:
            for line in info:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def memory_amount(size: float) -> str:
    """``size`` bytes in GiB, MiB or KiB, one decimal where it matters."""
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20)):
        if size >= scale:
            return f"{size / scale:.1f} {unit}"
    return f"{size / 2**10:.0f} KiB"
