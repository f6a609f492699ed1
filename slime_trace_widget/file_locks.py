"""Exclusive locks on files: how the package keeps a second process out of what one
process must own (a run dataset's convert, its export ledger, an export to one
endpoint, an export journal, an engine span store). The lock is ``flock``'s, so it
goes with the process that holds it: a crash never leaves anything locked, and two
opens of one file in one process exclude each other as two processes do.

Where Python has no ``fcntl`` (Windows) nothing is locked, and keeping to one writer
is the user's to do. On network file systems ``flock`` is only as good as the file
system makes it (NFSv4 maps it to byte-range locks, which hold between machines).
Stdlib only.
"""

from __future__ import annotations

import os
from typing import BinaryIO

try:
    import fcntl
except ImportError:  # Windows: no lock (see the module's docstring)
    fcntl = None  # type: ignore[assignment]

__all__ = ["locked_file"]


def locked_file(path: str | os.PathLike[str], *, wait: bool = False) -> BinaryIO:
    """``path`` opened to read and append (made when missing) and locked exclusively for
    as long as the returned file stays open. Without ``wait``, BlockingIOError at once
    when another open file holds the lock; with it, the call waits for the lock."""
    file = open(path, "a+b")  # noqa: SIM115 (the caller holds it, and so the lock)
    if fcntl is None:
        return file
    try:
        fcntl.flock(file.fileno(), fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
    except BaseException:
        file.close()
        raise
    return file
